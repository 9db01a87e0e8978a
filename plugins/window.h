/*
 * window.h - the windows runtime of the shipped count, aggregate and reduce
 * plugins (window.c, ks_win_*), compiled into each of the three modules (a
 * plugin never links the engine), so nothing here is exported from a
 * module. A plugin drives it from process(): it keeps the windows of a node
 * in the node's store, folds values with the plugin's ks_win_ops, drops
 * late records, emits updates or final results and deletes windows past
 * retention. The rules it applies are lib/window/window_core.h. See
 * docs/windows.md for the user's view and window.c for the store layout.
 */
#ifndef KS_PLUGINS_WINDOW_H
#define KS_PLUGINS_WINDOW_H

#include "window/window_core.h"

/* ---- runtime ------------------------------------------------------------ */

/* How a plugin folds values; called by the runtime, never concurrently.
 * Outputs go to `out` (a host buffer); inputs are borrowed for the call. */
typedef struct ks_win_ops {
    void *arg;
    /* New aggregate from `agg` (NULL: the window's first value) and the
     * record value. */
    ks_verdict (*add)(void *arg, ks_bytes key, const ks_bytes *agg, ks_bytes value,
                      ks_buf *out);
    /* Merge two session aggregates, `a` the earlier session. NULL when the
     * plugin cannot merge: session windows are then refused at init. */
    ks_verdict (*merge)(void *arg, ks_bytes key, ks_bytes a, ks_bytes b, ks_buf *out);
} ks_win_ops;

typedef struct ks_win ks_win;

/*
 * Read the node's `window:` (config keys "window.*"). When the node has
 * none, returns 0 with *out NULL: the plugin runs unwindowed. Otherwise
 * returns 0 with a new runtime in *out (free with ks_win_free) that keeps
 * its windows in `store`. Returns -1 after logging why (bad window spec,
 * out of memory). `who` names the plugin in logs; api, ctx, store and ops
 * are borrowed for the runtime's life. Call from init().
 */
int ks_win_open(const ks_host_api *api, ks_ctx *ctx, const char *who, ks_store *store,
                const ks_win_ops *ops, ks_win **out);

/* Process one record with a key and a value (the plugin drops the others):
 * assign it to its windows, fold it in, emit, close and expire windows.
 * Returns the verdict for the record: KS_SKIP for a record without a
 * usable event time or with a key too long for window keys, KS_RETRY or
 * KS_FATAL for store failures, an ops verdict as is. */
ks_verdict ks_win_process(ks_win *w, const ks_record *rec);

/* Free a runtime. NULL is fine. */
void ks_win_free(ks_win *w);

#endif /* KS_PLUGINS_WINDOW_H */
