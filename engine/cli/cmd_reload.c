/*
 * cmd_reload.c - `kstreams reload FILE`: hot deploy. Ask the engine that
 * runs pipeline FILE to load its plugin files again and print the outcome
 * as `kstreams status` does (runtime/reload_client.h does the asking).
 */
#include <string.h>

#include "cli/cli_args.h"
#include "cli/commands.h"
#include "cli/engine_status.h"
#include "kstreams/kstreams.h"
#include "runtime/reload_client.h"

#define RELOAD_TIMEOUT_MS 60000

const char ks_cmd_reload_help[] =
    "Make the engine running pipeline FILE load its plugin files again (hot\n"
    "deploy): signal the pid in STATE_DIR/APPLICATION/kstreams.pid with SIGHUP,\n"
    "wait up to 60 s for the result, print it as `kstreams status` does, then\n"
    "what this reload did to each plugin file.\n"
    "exit codes: 0 swapped or unchanged, 1 refused or no result in 60 s,\n"
    "2 invalid pipeline, no engine running it, or cannot signal it, 64 usage\n";

/* Print the status and what this reload did to each plugin file;
 * KS_EXIT_FAILURE when a file's new build was refused. */
static ks_exit report(const json_t *doc, FILE *out)
{
    ks_cli_print_status(doc, out);
    const json_t *results =
        json_object_get(json_object_get(json_object_get(doc, "reload"), "hup"), "results");
    ks_exit rc = KS_EXIT_OK;
    const char *file;
    const json_t *r;
    fprintf(out, "this reload:\n");
    json_object_foreach((json_t *)results, file, r) {
        const char *result = json_string_value(json_object_get(r, "result"));
        const char *build = json_string_value(json_object_get(r, "build_id"));
        const char *error = json_string_value(json_object_get(r, "error"));
        fprintf(out, "  %s: %s%s%s%s%s\n", file, result ? result : "?", build ? ", build " : "",
                build ? build : "", error ? ": " : "", error ? error : "");
        if (result && strcmp(result, "refused") == 0)
            rc = KS_EXIT_FAILURE;
    }
    return rc;
}

static ks_exit reload(const char *file, int timeout_ms, FILE *out, FILE *err)
{
    char pid_path[4096], status_path[4096], msg[512];
    if (ks_cli_engine_files(file, pid_path, status_path, sizeof pid_path, err) != KS_EXIT_OK)
        return KS_EXIT_INVALID;
    long pid = 0;
    ks_engine_liveness live = ks_reload_engine_liveness(pid_path, &pid);
    if (live != KS_ENGINE_ALIVE) {
        fprintf(err, "%s: no engine runs %s (%s)\n", pid_path, file,
                live == KS_ENGINE_GONE ? "its pid is gone: killed?" : "no pid file");
        return KS_EXIT_INVALID;
    }
    json_t *doc = NULL;
    int rc = ks_reload_request(pid, status_path, timeout_ms, &doc, msg, sizeof msg);
    if (rc == KS_ERR_IO) {
        fprintf(err, "%s: %s\n", pid_path, msg);
        return KS_EXIT_INVALID;
    }
    if (rc != 0) {
        fprintf(err, "%s: no reload result after %d ms (see the engine's log)\n", status_path,
                timeout_ms);
        return KS_EXIT_FAILURE;
    }
    ks_exit got = report(doc, out);
    json_decref(doc);
    return got;
}

ks_exit ks_cmd_reload(int argc, char **argv, FILE *out, FILE *err)
{
    static const ks_cli_spec spec = {"reload", NULL, NULL, {"pipeline FILE"}, 0};
    const char *operands[KS_CLI_MAX_OPERANDS];
    int rc = ks_cli_parse(&spec, argc, argv, NULL, operands, out, err);
    if (rc != KS_CLI_GO)
        return (ks_exit)rc;
    return reload(operands[0], RELOAD_TIMEOUT_MS, out, err);
}
