/*
 * cmd_run.c - `kstreams run FILE [--instance NAME]`: run the pipeline until
 * SIGINT or SIGTERM (runtime/engine.h does the running).
 */
#include <errno.h>
#include <string.h>

#include "base/fs.h"
#include "cli/cli_args.h"
#include "cli/commands.h"
#include "runtime/engine.h"
#include "runtime/task.h"
#include "runtime/topology.h"
#include "state/layout.h"

const char ks_cmd_run_help[] =
    "Run the pipeline FILE until SIGINT or SIGTERM, then commit (or abort) the\n"
    "open batch and exit. NAME tells processes of one application apart\n"
    "(default: derived from the host name and the state directory).\n"
    "exit codes: 0 clean stop, 1 runtime failure, 2 invalid pipeline or plugin,\n"
    "64 usage\n";

enum { OPT_INSTANCE = 256 };

static const struct option OPTIONS[] = {
    {"instance", required_argument, NULL, OPT_INSTANCE},
    {0},
};

static int on_option(void *ctx, int opt, const char *value, FILE *err)
{
    (void)err;
    if (opt == OPT_INSTANCE)
        *(const char **)ctx = value;
    return KS_CLI_GO;
}

ks_exit ks_cmd_run(int argc, char **argv, FILE *out, FILE *err)
{
    static const ks_cli_spec spec = {"run", OPTIONS, on_option, {"pipeline FILE"}, 0};
    const char *instance = NULL, *operands[KS_CLI_MAX_OPERANDS];
    int rc = ks_cli_parse(&spec, argc, argv, &instance, operands, out, err);
    if (rc != KS_CLI_GO)
        return (ks_exit)rc;
    /* first: a SIGTERM while plugins load is a stop request, not a kill */
    ks_engine_install_signals();
    ks_pipeline *p = NULL;
    if (ks_cli_load_pipeline(operands[0], &p, err) != KS_EXIT_OK)
        return KS_EXIT_INVALID;
    char copy_dir[4096], msg[2048];
    ks_layout_plugins_dir(p->state_dir, p->application, copy_dir, sizeof copy_dir);
    if (ks_mkdir_p(copy_dir, 0755) != 0) {
        fprintf(err, "%s: cannot create: %s\n", copy_dir, strerror(errno));
        ks_pipeline_free(p);
        return KS_EXIT_FAILURE;
    }
    ks_topology *t = NULL;
    if (ks_topology_build(p, ks_host_api_table(), copy_dir, &t, msg, sizeof msg) != 0) {
        fprintf(err, "%s\n", msg);
        return KS_EXIT_INVALID;
    }
    int failed = ks_engine_run(t, instance) != 0;
    ks_topology_free(t);
    return failed ? KS_EXIT_FAILURE : KS_EXIT_OK;
}
