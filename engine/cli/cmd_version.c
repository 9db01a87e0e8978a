/*
 * cmd_version.c - `kstreams version` (also `kstreams --version`).
 */
#include "cli/cli_args.h"
#include "cli/commands.h"
#include "kstreams/kstreams.h"

const char ks_cmd_version_help[] =
    "Print the kstreams version and the plugin ABI (major.minor) it loads.\n"
    "exit codes: 0 ok, 64 usage\n";

ks_exit ks_cmd_version(int argc, char **argv, FILE *out, FILE *err)
{
    static const ks_cli_spec spec = {"version", NULL, NULL, {NULL}, 0};
    const char *operands[KS_CLI_MAX_OPERANDS];
    int rc = ks_cli_parse(&spec, argc, argv, NULL, operands, out, err);
    if (rc != KS_CLI_GO)
        return (ks_exit)rc;
    fprintf(out, "kstreams %s (plugin ABI %d.%d)\n", PACKAGE_VERSION, KS_ABI_MAJOR,
            KS_ABI_MINOR);
    return KS_EXIT_OK;
}
