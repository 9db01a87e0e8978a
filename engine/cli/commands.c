/*
 * commands.c - the command table and what is generated from it: the
 * dispatch of `kstreams COMMAND`, `kstreams --help` and `kstreams COMMAND
 * --help`. The help texts live next to each command's options, in its
 * cmd_NAME.c.
 */
#include "cli/commands.h"

#include <string.h>

static const ks_cli_command COMMANDS[] = {
    {"run", "run the pipeline until SIGINT or SIGTERM", "run FILE [--instance NAME]",
     ks_cmd_run_help, ks_cmd_run},
    {"check", "validate the pipeline, load its plugins, print the topology", "check FILE",
     ks_cmd_check_help, ks_cmd_check},
    {"describe", "print the topology (as a Graphviz graph with --dot)",
     "describe FILE [--dot]", ks_cmd_describe_help, ks_cmd_describe},
    {"query", "read a store of a running or stopped instance (read-only)",
     "query FILE STORE [--partition P]\n"
     "                      [--key K | --key-hex HEX | KEY RANGE] [--from T] [--to T]\n"
     "                      [--format text|json] [--int64] [--hex]\n"
     "                      [--time-format iso|ms] [--raw] [--remote URL [--standby]]",
     ks_cmd_query_help, ks_cmd_query},
    {"grow-partitions", "give a stopped application's sources more partitions, keeping state",
     "grow-partitions FILE --partitions N [--partitioner P] [--dry-run]",
     ks_cmd_grow_partitions_help, ks_cmd_grow_partitions},
    {"reload", "hot deploy: make the running engine load its plugin files again",
     "reload FILE", ks_cmd_reload_help, ks_cmd_reload},
    {"status", "the build each processor runs, the last reload", "status FILE [--json]",
     ks_cmd_status_help, ks_cmd_status},
    {"outbox-status", "an outbox event's status (JSON), or the events per status",
     "outbox-status FILE [EVENT-ID]", ks_cmd_outbox_status_help, ks_cmd_outbox_status},
    {"outbox-schema", "print the PostgreSQL outbox schema (SQL)", "outbox-schema",
     ks_cmd_outbox_schema_help, ks_cmd_outbox_schema},
    {"version", "print the version and the plugin ABI", "version", ks_cmd_version_help,
     ks_cmd_version},
    {"help", "list the commands, or print the help of one", "help [COMMAND]",
     ks_cmd_help_help, ks_cmd_help},
};

#define COMMAND_COUNT (sizeof COMMANDS / sizeof COMMANDS[0])

const ks_cli_command *ks_cli_command_find(const char *name)
{
    for (size_t i = 0; name && i < COMMAND_COUNT; i++)
        if (strcmp(COMMANDS[i].name, name) == 0)
            return &COMMANDS[i];
    return NULL;
}

const ks_cli_command *ks_cli_command_list(size_t *count)
{
    *count = COMMAND_COUNT;
    return COMMANDS;
}

int ks_cli_command_help(const char *name, FILE *f)
{
    const ks_cli_command *cmd = ks_cli_command_find(name);
    if (!cmd)
        return -1;
    fprintf(f, "usage: kstreams %s\n\n%s", cmd->usage, cmd->help);
    return 0;
}

void ks_cli_overview(FILE *f)
{
    fputs("usage: kstreams COMMAND [OPTIONS]\n"
          "       kstreams COMMAND --help     the usage and options of one command\n"
          "\n"
          "commands:\n",
          f);
    for (size_t i = 0; i < COMMAND_COUNT; i++)
        fprintf(f, "  %-15s %s\n", COMMANDS[i].name, COMMANDS[i].summary);
    fputs("\n"
          "environment: KS_LOG_LEVEL=error|warn|info|debug, KS_LOG_JSON=1,\n"
          "  KSTREAMS_PLUGIN_PATH=dir:dir (extra plugin directories)\n"
          "exit codes: 0 ok, 1 runtime failure, 2 invalid pipeline or plugin,\n"
          "  3 not found (query: store, key; outbox-status: event), 64 usage (docs/cli.md)\n",
          f);
}

ks_exit ks_cli_main(int argc, char **argv, FILE *out, FILE *err)
{
    if (argc < 2) {
        ks_cli_overview(err);
        return KS_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
        ks_cli_overview(out);
        return KS_EXIT_OK;
    }
    if (strcmp(name, "--version") == 0)
        name = "version";
    const ks_cli_command *cmd = ks_cli_command_find(name);
    if (!cmd) {
        fprintf(err, "kstreams: unknown command '%s'\n", name);
        ks_cli_overview(err);
        return KS_EXIT_USAGE;
    }
    return cmd->run(argc - 1, argv + 1, out, err);
}
