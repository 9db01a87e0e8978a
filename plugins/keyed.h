/*
 * keyed.h - the record checks and store-failure verdicts shared by the
 * shipped keyed, stateful plugins count, aggregate and reduce. keyed.c is
 * compiled into each of the three modules (a plugin never links the
 * engine), so nothing here is exported from a module.
 *
 * As Kafka Streams' KGroupedStream operations, a keyed plugin:
 *  - drops a record without a key (NULL or empty): it has no group.
 *    Counted in the metric null_keys, logged at a sampled rate; KS_OK.
 *  - ignores a tombstone (NULL value). Counted in null_values; KS_OK.
 *  - skips a key over the store's 500-byte limit: a poison record, no
 *    replay can store it. Logged at a sampled rate; KS_SKIP.
 * and maps a failed store call to a verdict: a full store is fatal (only
 * raising the store's map_size helps, replaying would fail again), other
 * failures are transient (KS_RETRY: the engine aborts and replays the
 * batch).
 */
#ifndef KS_PLUGINS_KEYED_H
#define KS_PLUGINS_KEYED_H

#include <kstreams/kstreams.h>

/* The host's limit on store keys (see store_put in kstreams.h). */
#define KS_KEYED_KEY_MAX KS_KEY_MAX

/* Per node instance; lives in the plugin's state. */
typedef struct ks_keyed {
    const ks_host_api *host; /* borrowed: valid while the plugin is loaded */
    const char *who;         /* the plugin's name, prefix of its logs      */
    uint64_t null_keys;      /* dropped: no key                            */
    uint64_t null_values;    /* ignored: tombstones                        */
    uint64_t big_keys;       /* skipped: key over KS_KEYED_KEY_MAX bytes   */
} ks_keyed;

/* Set up k for a node: counters at 0. Call from init(). */
void ks_keyed_init(ks_keyed *k, const ks_host_api *host, const char *who);

/* Check a record before process() stores anything for it. Returns 0 when
 * the record has a key, a value and a key the store takes: go on. Returns
 * 1 when it is not to be processed, with its verdict in *verdict (KS_OK
 * for a missing key or a tombstone, KS_SKIP for a key over the limit),
 * logged and counted as above. */
int ks_keyed_check(ks_keyed *k, ks_ctx *ctx, const ks_record *rec, ks_verdict *verdict);

/* The verdict for a store call `what` ("get", "put") that failed with rc:
 * KS_FATAL for KS_ERR_STORE_FULL (logged, naming the node and map_size),
 * else KS_RETRY (logged as a warning). */
ks_verdict ks_keyed_store_failed(const ks_keyed *k, ks_ctx *ctx, const char *what, int rc);

#endif /* KS_PLUGINS_KEYED_H */
