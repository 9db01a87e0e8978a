/*
 * cmd_check.c - `kstreams check FILE`: validate the pipeline, load its
 * plugins, print the topology and "FILE: ok".
 */
#include "cli/cli_args.h"
#include "cli/commands.h"
#include "cli/show_topology.h"

const char ks_cmd_check_help[] =
    "Validate FILE, load its plugins, check every node's config against its\n"
    "processor's schema, print the topology and \"FILE: ok\".\n"
    "exit codes: 0 valid, 2 invalid (the error names file:line:column or the\n"
    "plugin path), 64 usage\n";

ks_exit ks_cmd_check(int argc, char **argv, FILE *out, FILE *err)
{
    static const ks_cli_spec spec = {"check", NULL, NULL, {"pipeline FILE"}, 0};
    const char *operands[KS_CLI_MAX_OPERANDS];
    int rc = ks_cli_parse(&spec, argc, argv, NULL, operands, out, err);
    if (rc != KS_CLI_GO)
        return (ks_exit)rc;
    return ks_cli_show_topology(operands[0], KS_VIEW_TEXT, 1, out, err);
}
