/*
 * cmd_help.c - `kstreams help [COMMAND]`: the list of commands (as
 * `kstreams --help`), or one command's help (as `kstreams COMMAND --help`).
 */
#include "cli/cli_args.h"
#include "cli/commands.h"

const char ks_cmd_help_help[] =
    "Without COMMAND list the commands (as `kstreams --help`); with it print\n"
    "that command's usage and options (as `kstreams COMMAND --help`).\n"
    "exit codes: 0 ok, 64 usage (no such command)\n";

ks_exit ks_cmd_help(int argc, char **argv, FILE *out, FILE *err)
{
    static const ks_cli_spec spec = {"help", NULL, NULL, {NULL}, 1};
    const char *operands[KS_CLI_MAX_OPERANDS];
    int rc = ks_cli_parse(&spec, argc, argv, NULL, operands, out, err);
    if (rc != KS_CLI_GO)
        return (ks_exit)rc;
    if (!operands[0]) {
        ks_cli_overview(out);
        return KS_EXIT_OK;
    }
    if (ks_cli_command_help(operands[0], out) != 0)
        return ks_cli_usage_error("help", err, "unknown command '%s'", operands[0]);
    return KS_EXIT_OK;
}
