/*
 * main.c - the kstreams command: the table in commands.c says which
 * commands exist and dispatches; exit codes are in exit_codes.h
 * (docs/cli.md). `kstreams __plugin-trial PATH COPY` is the hidden helper
 * of the plugin pre-flight.
 */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "loader/plugin.h"
#include "runtime/task.h"

int main(int argc, char **argv)
{
    /* The plugin pre-flight's helper is this binary (loader/plugin_trial.c);
     * its hidden command comes before anything else runs. */
    if (argc > 1 && strcmp(argv[1], KS_PLUGIN_TRIAL_COMMAND) == 0)
        ks_plugin_trial_main(argc, argv, ks_host_api_table());
    ks_plugin_set_trial("/proc/self/exe", KS_PLUGIN_TRIAL_TIMEOUT_MS);
    return ks_cli_main(argc, argv, stdout, stderr);
}
