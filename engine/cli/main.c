/*
 * main.c - the kstreams command: the table in commands.c says which
 * commands exist and dispatches; exit codes are in exit_codes.h
 * (docs/cli.md).
 */
#include <stdio.h>

#include "cli/commands.h"

int main(int argc, char **argv)
{
    return ks_cli_main(argc, argv, stdout, stderr);
}
