/*
 * cli_help.h - per-command help of the kstreams command line.
 */
#ifndef KS_CLI_HELP_H
#define KS_CLI_HELP_H

#include <stdio.h>

/* Print the --help text of `cmd` to f. 0, or -1 when cmd is unknown. */
int ks_cli_command_help(const char *cmd, FILE *f);

#endif /* KS_CLI_HELP_H */
