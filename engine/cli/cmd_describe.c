/*
 * cmd_describe.c - `kstreams describe FILE [--dot]`: print the topology,
 * as text or as a Graphviz graph.
 */
#include "cli/cli_args.h"
#include "cli/commands.h"
#include "cli/show_topology.h"

const char ks_cmd_describe_help[] =
    "Print the topology of FILE: sources, processors (plugin, build id),\n"
    "stores and sinks; with --dot as a Graphviz graph:\n"
    "  kstreams describe pipeline.yaml --dot | dot -Tsvg > topology.svg\n"
    "exit codes: 0 ok, 2 invalid pipeline or plugin, 64 usage\n";

enum { OPT_DOT = 256 };

static const struct option OPTIONS[] = {
    {"dot", no_argument, NULL, OPT_DOT},
    {0},
};

static int on_option(void *ctx, int opt, const char *value, FILE *err)
{
    (void)value, (void)err;
    if (opt == OPT_DOT)
        *(ks_topology_view *)ctx = KS_VIEW_DOT;
    return KS_CLI_GO;
}

ks_exit ks_cmd_describe(int argc, char **argv, FILE *out, FILE *err)
{
    static const ks_cli_spec spec = {"describe", OPTIONS, on_option, {"pipeline FILE"}, 0};
    ks_topology_view view = KS_VIEW_TEXT;
    const char *operands[KS_CLI_MAX_OPERANDS];
    int rc = ks_cli_parse(&spec, argc, argv, &view, operands, out, err);
    if (rc != KS_CLI_GO)
        return (ks_exit)rc;
    return ks_cli_show_topology(operands[0], view, 0, out, err);
}
