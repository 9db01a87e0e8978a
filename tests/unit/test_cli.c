/*
 * test_cli.c - the command table (engine/cli/commands.c): every command has
 * `--help` generated from its entry and listed by `kstreams --help`;
 * options are per command (one a command does not take is exit 64); the
 * dispatch of unknown commands and of no command.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "unit/test_util.h"

static char *out_text, *err_text;

/* Run `kstreams ARGS...` (NULL-terminated) through the table; output in
 * out_text and err_text. Returns the exit code. */
static int kstreams(const char *first, ...)
{
    char *argv[16] = {"kstreams"};
    int argc = 1;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && argc < 15; a = va_arg(ap, const char *))
        argv[argc++] = (char *)a;
    va_end(ap);
    free(out_text);
    free(err_text);
    size_t olen, elen;
    FILE *out = open_memstream(&out_text, &olen);
    FILE *err = open_memstream(&err_text, &elen);
    int rc = ks_cli_main(argc, argv, out, err);
    fclose(out);
    fclose(err);
    return rc;
}

static void test_help_of_every_command(void)
{
    size_t n;
    const ks_cli_command *cmds = ks_cli_command_list(&n);
    CU_ASSERT_FATAL(n >= 10);
    CU_ASSERT_EQUAL(kstreams("--help", NULL), KS_EXIT_OK);
    char *overview = strdup(out_text);
    for (size_t i = 0; i < n; i++) {
        char want[128];
        snprintf(want, sizeof want, "usage: kstreams %s", cmds[i].usage);
        CU_ASSERT_EQUAL(kstreams(cmds[i].name, "--help", NULL), KS_EXIT_OK);
        CU_ASSERT_EQUAL(strncmp(out_text, want, strlen(want) < 40 ? strlen(want) : 40), 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(out_text, "exit codes:"));
        CU_ASSERT_EQUAL(kstreams(cmds[i].name, "-h", NULL), KS_EXIT_OK);
        CU_ASSERT_EQUAL(strncmp(out_text, "usage: kstreams ", 16), 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(overview, cmds[i].summary));
        CU_ASSERT_PTR_EQUAL(ks_cli_command_find(cmds[i].name), &cmds[i]);
    }
    free(overview);
    CU_ASSERT_EQUAL(kstreams("help", "query", NULL), KS_EXIT_OK);
    char *help = strdup(out_text);
    CU_ASSERT_EQUAL(kstreams("query", "--help", NULL), KS_EXIT_OK);
    CU_ASSERT_STRING_EQUAL(help, out_text);
    free(help);
    CU_ASSERT_EQUAL(kstreams("help", "nosuch", NULL), KS_EXIT_USAGE);
    CU_ASSERT_EQUAL(ks_cli_command_help("nosuch", stdout), -1);
}

static void test_options_per_command(void)
{
    size_t n;
    const ks_cli_command *cmds = ks_cli_command_list(&n);
    for (size_t i = 0; i < n; i++) {
        CU_ASSERT_EQUAL(kstreams(cmds[i].name, "--no-such-option", NULL), KS_EXIT_USAGE);
        char want[128];
        snprintf(want, sizeof want, "kstreams %s: unexpected argument '--no-such-option'",
                 cmds[i].name);
        CU_ASSERT_PTR_NOT_NULL(strstr(err_text, want));
    }
    /* options of another command */
    CU_ASSERT_EQUAL(kstreams("check", "p.yaml", "--dot", NULL), KS_EXIT_USAGE);
    CU_ASSERT_EQUAL(kstreams("status", "p.yaml", "--instance", "a", NULL), KS_EXIT_USAGE);
    CU_ASSERT_EQUAL(kstreams("run", "p.yaml", "--json", NULL), KS_EXIT_USAGE);
    CU_ASSERT_EQUAL(kstreams("reload", "p.yaml", "--json", NULL), KS_EXIT_USAGE);
    CU_ASSERT_EQUAL(kstreams("outbox-schema", "extra", NULL), KS_EXIT_USAGE);
    CU_ASSERT_EQUAL(kstreams("version", "--json", NULL), KS_EXIT_USAGE);
    CU_ASSERT_EQUAL(kstreams("int64", NULL), KS_EXIT_USAGE);
    /* a value given to an option that takes none, a missing value, operands */
    CU_ASSERT_EQUAL(kstreams("status", "p.yaml", "--json=yes", NULL), KS_EXIT_USAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "unexpected argument '--json=yes'"));
    CU_ASSERT_EQUAL(kstreams("run", "p.yaml", "--instance", NULL), KS_EXIT_USAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "kstreams run: --instance needs a value"));
    CU_ASSERT_EQUAL(kstreams("run", NULL), KS_EXIT_USAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "kstreams run: missing pipeline FILE"));
    CU_ASSERT_EQUAL(kstreams("check", "a.yaml", "b.yaml", NULL), KS_EXIT_USAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "unexpected argument 'b.yaml'"));
    CU_ASSERT_EQUAL(kstreams("outbox-status", "a.yaml", "id", "id2", NULL), KS_EXIT_USAGE);
    /* options after operands, "--" */
    CU_ASSERT_EQUAL(kstreams("status", "--json", "/nonexistent.yaml", NULL), KS_EXIT_INVALID);
    CU_ASSERT_EQUAL(kstreams("check", "--", "/nonexistent.yaml", NULL), KS_EXIT_INVALID);
}

static void test_dispatch(void)
{
    CU_ASSERT_EQUAL(kstreams(NULL), KS_EXIT_USAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "usage: kstreams COMMAND"));
    CU_ASSERT_EQUAL(kstreams("nosuch", NULL), KS_EXIT_USAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "kstreams: unknown command 'nosuch'"));
    CU_ASSERT_EQUAL(kstreams("-h", NULL), KS_EXIT_OK);
    CU_ASSERT_EQUAL(kstreams("help", NULL), KS_EXIT_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(out_text, "commands:"));
    CU_ASSERT_EQUAL(kstreams("--version", NULL), KS_EXIT_OK);
    CU_ASSERT_EQUAL(strncmp(out_text, "kstreams ", 9), 0);
    CU_ASSERT_EQUAL(kstreams("version", NULL), KS_EXIT_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(out_text, "plugin ABI"));
    free(out_text);
    free(err_text);
    out_text = err_text = NULL;
}

void ks_test_register_cli(void)
{
    CU_pSuite s = CU_add_suite("cli", NULL, NULL);
    CU_add_test(s, "every command: --help from the table, listed by --help",
                test_help_of_every_command);
    CU_add_test(s, "options per command: another command's option is exit 64",
                test_options_per_command);
    CU_add_test(s, "dispatch: no command, unknown command, --version", test_dispatch);
}
