/*
 * joiner.h - the joiners of the shipped `join` plugin, shared by its
 * stream-table (join.c) and stream-stream (join_streams.c) joins: the
 * built-in JSON joiners `pair` and `merge`, or a KS_FN_JOINER function the
 * node names under `functions: { joiner: ... }` (docs/tables-and-joins.md).
 * Compiled into the join module only; nothing here is exported.
 */
#ifndef KS_PLUGINS_JOINER_H
#define KS_PLUGINS_JOINER_H

#include <kstreams/kstreams.h>

typedef enum ks_joiner_kind { KS_JOIN_PAIR, KS_JOIN_MERGE, KS_JOIN_FUNCTION } ks_joiner_kind;

/* Per node instance; lives in the plugin's state. */
typedef struct ks_joiner {
    const ks_host_api *host; /* borrowed: valid while the plugin is loaded */
    ks_joiner_kind kind;
    ks_joiner_fn fn; /* KS_JOIN_FUNCTION */
    ks_buf *out;     /* KS_JOIN_FUNCTION's output; owned, ks_joiner_free */
} ks_joiner;

/* The index of config `key`'s value among `choices` (NULL-terminated, at
 * least two; 0 when unset), or -1 (logged, naming the node) when it is
 * none of them. */
int ks_join_config_choice(const ks_host_api *host, ks_ctx *ctx, const char *key,
                          const char *const *choices);

/* Set up j from the node's `functions: { joiner: ... }`, else its config
 * `joiner:` (pair or merge). Call from init(). KS_OK, or KS_FATAL (logged)
 * for a bad `joiner:`, a function of another kind, or no memory; j is then
 * still safe to pass to ks_joiner_free. */
ks_verdict ks_joiner_init(ks_joiner *j, const ks_host_api *host, ks_ctx *ctx);

/* Forward `tmpl` (borrowed; its key and headers are kept) at `ts` with the
 * joined value of `left` and `right` (either NULL: that side has none; the
 * function joiner gets an empty left then). KS_OK, KS_SKIP when the
 * built-in joiner cannot join the values (logged: the input record is
 * poison, or, for a tmpl with offset -1, a buffered record's result is
 * dropped) or the function said so, KS_RETRY when forward() failed. */
ks_verdict ks_joiner_emit(ks_joiner *j, ks_ctx *ctx, const ks_record *tmpl,
                          const ks_bytes *left, const ks_bytes *right, int64_t ts);

/* Free what ks_joiner_init allocated (not j itself). */
void ks_joiner_free(ks_joiner *j);

#endif /* KS_PLUGINS_JOINER_H */
