/*
 * cli_query.h - `kstreams query` (read a store of a running or stopped
 * instance, read-only) and the per-command `--help` texts of main.c.
 */
#ifndef KS_CLI_QUERY_H
#define KS_CLI_QUERY_H

#include <stdio.h>

/* Exit codes of the kstreams command (docs/cli.md). */
#define KS_EXIT_OK 0
#define KS_EXIT_FAILURE 1
#define KS_EXIT_INVALID 2
#define KS_EXIT_NOT_FOUND 3
#define KS_EXIT_USAGE 64

/*
 * Run `kstreams query` with argv[0] = "query": results to `out`, errors to
 * `errf`. Opens each task's LMDB environment read-only (MDB_RDONLY): never
 * writes, never blocks the engine's writer, ends each read snapshot at
 * once. Returns a KS_EXIT_* code.
 */
int ks_cli_query(int argc, char **argv, FILE *out, FILE *errf);


#endif /* KS_CLI_QUERY_H */
