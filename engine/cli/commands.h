/*
 * commands.h - the kstreams commands as one table (commands.c): name,
 * one-line summary, usage, help text and handler per command. `kstreams
 * --help` lists the table; `kstreams COMMAND --help` prints an entry.
 *
 * Adding a command: write cli/cmd_NAME.c with its handler and help text
 * (parse its options with ks_cli_parse, cli_args.h), declare both below,
 * add one row to the table in commands.c and the file to engine/Makefile.am,
 * document it in docs/cli.md.
 */
#ifndef KS_CLI_COMMANDS_H
#define KS_CLI_COMMANDS_H

#include <stddef.h>
#include <stdio.h>

#include "cli/exit_codes.h"

/* A command's handler: argv[0] is the command's name, argv[1..] its
 * arguments (argv is not modified). Results go to `out`, messages to
 * `err`. Returns a ks_exit code. */
typedef ks_exit (*ks_cli_handler)(int argc, char **argv, FILE *out, FILE *err);

typedef struct ks_cli_command {
    const char *name;    /* as typed: "outbox-status" */
    const char *summary; /* one line for `kstreams --help` */
    const char *usage;   /* the rest of "usage: kstreams ...", may span lines */
    const char *help;    /* what `COMMAND --help` prints after the usage */
    ks_cli_handler run;
} ks_cli_command;

/* The entry of `name`, or NULL when there is no such command. The entry
 * is static: never freed. */
const ks_cli_command *ks_cli_command_find(const char *name);

/* Every command, in the order `kstreams --help` lists them: *count
 * entries (static: never freed). */
const ks_cli_command *ks_cli_command_list(size_t *count);

/* Print the help of command `name` (its usage, a blank line, its help
 * text) to f. 0, or -1 when there is no such command. */
int ks_cli_command_help(const char *name, FILE *f);

/* Print `kstreams --help`: every command of the table with its summary,
 * the environment and the exit codes. */
void ks_cli_overview(FILE *f);

/* The kstreams command line: argv[1] names the command. Returns the
 * process's exit code (a ks_exit). */
ks_exit ks_cli_main(int argc, char **argv, FILE *out, FILE *err);

/* ---- the commands (one cmd_NAME.c each): handler and help text ---------- */

ks_exit ks_cmd_run(int argc, char **argv, FILE *out, FILE *err);
ks_exit ks_cmd_check(int argc, char **argv, FILE *out, FILE *err);
ks_exit ks_cmd_describe(int argc, char **argv, FILE *out, FILE *err);
ks_exit ks_cmd_query(int argc, char **argv, FILE *out, FILE *err);
ks_exit ks_cmd_grow_partitions(int argc, char **argv, FILE *out, FILE *err);
ks_exit ks_cmd_reload(int argc, char **argv, FILE *out, FILE *err);
ks_exit ks_cmd_status(int argc, char **argv, FILE *out, FILE *err);
ks_exit ks_cmd_outbox_status(int argc, char **argv, FILE *out, FILE *err);
ks_exit ks_cmd_outbox_schema(int argc, char **argv, FILE *out, FILE *err);
ks_exit ks_cmd_version(int argc, char **argv, FILE *out, FILE *err);
ks_exit ks_cmd_help(int argc, char **argv, FILE *out, FILE *err);

extern const char ks_cmd_run_help[];
extern const char ks_cmd_check_help[];
extern const char ks_cmd_describe_help[];
extern const char ks_cmd_query_help[];
extern const char ks_cmd_grow_partitions_help[];
extern const char ks_cmd_reload_help[];
extern const char ks_cmd_status_help[];
extern const char ks_cmd_outbox_status_help[];
extern const char ks_cmd_outbox_schema_help[];
extern const char ks_cmd_version_help[];
extern const char ks_cmd_help_help[];

#endif /* KS_CLI_COMMANDS_H */
