/*
 * cli_args.c - getopt_long for every command (see cli_args.h).
 *
 * getopt_long runs with optstring "-:h": "-" hands operands over in place
 * (as option 1) instead of permuting argv, so options may follow operands
 * whatever POSIXLY_CORRECT says; ":" reports a missing value apart from an
 * unknown option; opterr 0 keeps getopt's own messages out (ours name the
 * command).
 */
#include "cli/cli_args.h"

#include <string.h>

#include "cli/commands.h"

#define MAX_OPTIONS 32
#define OPT_OPERAND 1

ks_exit ks_cli_usage_error(const char *command, FILE *err, const char *fmt, const char *arg)
{
    fprintf(err, "kstreams %s: ", command);
    fprintf(err, fmt, arg);
    fputc('\n', err);
    ks_cli_command_help(command, err);
    return KS_EXIT_USAGE;
}

/* The command's options and --help in one getopt_long table. -1 when the
 * command lists too many. */
static int option_table(const ks_cli_spec *spec, struct option *table)
{
    int n = 0;
    for (const struct option *o = spec->options; o && o->name; o++) {
        if (n == MAX_OPTIONS - 2)
            return -1;
        table[n++] = *o;
    }
    table[n++] = (struct option){"help", no_argument, NULL, 'h'};
    table[n] = (struct option){0};
    return 0;
}

static const char *option_name(const struct option *table, int val)
{
    for (const struct option *o = table; o->name; o++)
        if (o->val == val)
            return o->name;
    return "?";
}

/* An argument getopt_long does not accept: an unknown option, an
 * abbreviation of two, a value given to an option that takes none. */
static ks_exit bad_option(const ks_cli_spec *spec, char **argv, FILE *err)
{
    const char *arg = argv[optind - 1];
    if (strncmp(arg, "--", 2) == 0)
        return ks_cli_usage_error(spec->command, err, "unexpected argument '%s'", arg);
    char shortopt[3] = {'-', (char)optopt, '\0'};
    return ks_cli_usage_error(spec->command, err, "unexpected argument '%s'", shortopt);
}

static int take_operand(const ks_cli_spec *spec, const char **operands, int *count,
                        const char *arg, FILE *err)
{
    int required = 0;
    while (required < KS_CLI_MAX_OPERANDS && spec->required[required])
        required++;
    if (*count >= required + spec->optional || *count >= KS_CLI_MAX_OPERANDS)
        return ks_cli_usage_error(spec->command, err, "unexpected argument '%s'", arg);
    operands[(*count)++] = arg;
    return KS_CLI_GO;
}

int ks_cli_parse(const ks_cli_spec *spec, int argc, char **argv, void *ctx,
                 const char **operands, FILE *out, FILE *err)
{
    struct option table[MAX_OPTIONS];
    if (option_table(spec, table) != 0)
        return ks_cli_usage_error(spec->command, err, "%s", "too many options (a bug)");
    int count = 0, rc = KS_CLI_GO;
    for (int i = 0; i < KS_CLI_MAX_OPERANDS; i++)
        operands[i] = NULL;
    optind = 0; /* glibc: start over (every command parses afresh) */
    opterr = 0;
    int opt;
    while (rc == KS_CLI_GO && (opt = getopt_long(argc, argv, "-:h", table, NULL)) != -1) {
        if (opt == OPT_OPERAND)
            rc = take_operand(spec, operands, &count, optarg, err);
        else if (opt == 'h')
            rc = ks_cli_command_help(spec->command, out) == 0 ? KS_EXIT_OK : KS_EXIT_USAGE;
        else if (opt == ':')
            rc = ks_cli_usage_error(spec->command, err, "--%s needs a value",
                                    option_name(table, optopt));
        else if (opt == '?')
            rc = bad_option(spec, argv, err);
        else
            rc = spec->on_option(ctx, opt, optarg, err);
    }
    for (int i = optind; rc == KS_CLI_GO && i < argc; i++) /* after "--" */
        rc = take_operand(spec, operands, &count, argv[i], err);
    for (int i = count; rc == KS_CLI_GO && i < KS_CLI_MAX_OPERANDS && spec->required[i]; i++)
        rc = ks_cli_usage_error(spec->command, err, "missing %s", spec->required[i]);
    return rc;
}

ks_exit ks_cli_load_pipeline(const char *file, ks_pipeline **p, FILE *err)
{
    char msg[2048];
    *p = NULL;
    if (ks_pipeline_load(file, p, msg, sizeof msg) != 0) {
        fprintf(err, "%s\n", msg);
        return KS_EXIT_INVALID;
    }
    return KS_EXIT_OK;
}
