/*
 * cmd_status.c - `kstreams status FILE [--json]`: the status document of
 * the engine that runs pipeline FILE, for people or as JSON.
 */
#include <stdlib.h>

#include "cli/cli_args.h"
#include "cli/commands.h"
#include "cli/engine_status.h"
#include "runtime/reload_client.h"
#include "runtime/status.h"

const char ks_cmd_status_help[] =
    "Print the status of the engine running pipeline FILE: per processor the\n"
    "plugin, build id, file, loaded at and last reload error; reload counters.\n"
    "--json prints STATE_DIR/APPLICATION/status.json itself.\n"
    "exit codes: 0 ok, 2 invalid pipeline or no status file (engine not running),\n"
    "64 usage\n";

enum { OPT_JSON = 256 };

static const struct option OPTIONS[] = {
    {"json", no_argument, NULL, OPT_JSON},
    {0},
};

static int on_option(void *ctx, int opt, const char *value, FILE *err)
{
    (void)value, (void)err;
    if (opt == OPT_JSON)
        *(int *)ctx = 1;
    return KS_CLI_GO;
}

/* status.json outlives an engine killed with -9: it is shown only while
 * the pid that wrote it runs. KS_EXIT_OK when it runs. */
static ks_exit engine_runs(const char *file, const char *pid_path, const char *status_path,
                           FILE *err)
{
    long pid = 0;
    switch (ks_reload_engine_liveness(pid_path, &pid)) {
    case KS_ENGINE_ALIVE:
        return KS_EXIT_OK;
    case KS_ENGINE_GONE:
        fprintf(err, "%s: not running: pid %ld of %s is gone (killed?); %s is left from it\n",
                file, pid, pid_path, status_path);
        return KS_EXIT_INVALID;
    case KS_ENGINE_NO_PID_FILE:
        break;
    }
    fprintf(err, "%s: not running: no pid file %s\n", file, pid_path);
    return KS_EXIT_INVALID;
}

ks_exit ks_cmd_status(int argc, char **argv, FILE *out, FILE *err)
{
    static const ks_cli_spec spec = {"status", OPTIONS, on_option, {"pipeline FILE"}, 0};
    int json = 0;
    const char *operands[KS_CLI_MAX_OPERANDS];
    int rc = ks_cli_parse(&spec, argc, argv, &json, operands, out, err);
    if (rc != KS_CLI_GO)
        return (ks_exit)rc;
    char pid_path[4096], status_path[4096], msg[4200];
    if (ks_cli_engine_files(operands[0], pid_path, status_path, sizeof pid_path, err) !=
            KS_EXIT_OK ||
        engine_runs(operands[0], pid_path, status_path, err) != KS_EXIT_OK)
        return KS_EXIT_INVALID;
    json_t *doc = NULL;
    if (ks_status_read(status_path, &doc, msg, sizeof msg) != 0) {
        fprintf(err, "%s\n", msg);
        return KS_EXIT_INVALID;
    }
    if (json) {
        char *text = json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS);
        fprintf(out, "%s\n", text ? text : "{}");
        free(text);
    } else {
        ks_cli_print_status(doc, out);
    }
    json_decref(doc);
    return KS_EXIT_OK;
}
