/*
 * query_remote.h - `kstreams query --remote URL FILE STORE`: the same
 * query asked of a running application's query server (docs/scaling.md
 * "Remote queries") instead of the local state directory. One key: one
 * GET, following the 307 of a process that does not hold it; a range or
 * a whole store: every partition listed by GET /v1/tasks (or --partition),
 * each asked of its holder, the arrays joined in partition order. Prints
 * the JSON of `--format json`.
 */
#ifndef KS_CLI_QUERY_REMOTE_H
#define KS_CLI_QUERY_REMOTE_H

#include <stdio.h>

#include "cli/exit_codes.h"
#include "query/query_store.h"

/* The query q (filled by cmd_query.c: store, key or key range, window
 * bounds tfrom/tto when windowed, int64, hex), sent to `url` with
 * `token` (NULL: none); `partition` -1 for all; `standby` 1: a standby
 * or a restoring task may answer (`standby=1`; a stale answer is noted
 * on err with its changelog offset and lag). Exit codes as
 * `kstreams query`: 0, 1 (server unreachable, an error answer), 3 (key
 * not found, no such store), 64 (the server refused the request). */
ks_exit ks_query_remote(const char *url, const char *token, const ks_query *q, long partition,
                        int standby, FILE *out, FILE *err);

#endif /* KS_CLI_QUERY_REMOTE_H */
