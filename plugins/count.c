/*
 * count.c - the shipped plugin "count", processor type "count".
 *
 * Per record key, count += 1 in the node's (first) store and forward
 * (key, count). The count is an int64, 8 bytes big-endian both in the store
 * and in the forwarded value (Kafka's LongSerializer), so a sink with
 * `value: int64` writes it as is.
 *
 * Like Kafka Streams' KGroupedStream.count():
 *  - a record without a key (NULL or empty) is dropped: it has no group.
 *    Counted in the metric null_keys and logged at a sampled rate.
 *  - a tombstone (NULL value) is ignored. Counted in null_values.
 *
 * Verdicts: a store that is full is fatal (only raising the store's
 * map_size helps, replaying would fail again); other store failures are
 * transient (KS_RETRY: the engine aborts and replays the batch); a stored
 * value that is not 8 bytes means the store holds something else than
 * counts: fatal. A key over the store's 500-byte limit is a poison record
 * (KS_SKIP): no replay can store it.
 *
 * State format (state_version 1): store key = record key bytes, store
 * value = int64 count, 8 bytes big-endian.
 *
 * With `window:` the count is per key and window (window.c, docs/windows.md):
 * a window's count is an int64 too, sessions merge by adding their counts.
 */
#include <kstreams/kstreams.h>

#include <stdlib.h>

#include "keyed.h"
#include "window.h"

/* Saved by the entry point; valid while the plugin is loaded. The only
 * mutable static: everything else lives in the instance. */
static const ks_host_api *host;

typedef struct count_state {
    ks_store *store;
    ks_keyed keyed; /* record checks, store failures (keyed.h) */
    ks_win *win;    /* NULL: not windowed                      */
} count_state;

/* A stored window count that is not an int64: the store holds something
 * else. arg is the ctx. */
static ks_verdict not_a_count(void *arg, size_t len)
{
    host->log(arg, KS_LOG_ERROR,
              "count: stored window value of %zu bytes is not an int64 count; is the "
              "store of node '%s' shared with another processor?",
              len, host->node_name(arg));
    return KS_FATAL;
}

/* Windowed count: a new window starts at 1. */
static ks_verdict win_add(void *arg, ks_bytes key, const ks_bytes *agg, ks_bytes value,
                          ks_buf *out)
{
    (void)key;
    (void)value;
    if (agg && agg->len != 8)
        return not_a_count(arg, agg->len);
    unsigned char v[8];
    ks_int64_encode(agg ? ks_int64_decode(agg->data) + 1 : 1, v);
    return host->buf_set(out, v, sizeof v) == 0 ? KS_OK : KS_RETRY;
}

/* Merged sessions count the records of both. */
static ks_verdict win_merge(void *arg, ks_bytes key, ks_bytes a, ks_bytes b, ks_buf *out)
{
    (void)key;
    if (a.len != 8 || b.len != 8)
        return not_a_count(arg, a.len != 8 ? a.len : b.len);
    unsigned char v[8];
    ks_int64_encode(ks_int64_decode(a.data) + ks_int64_decode(b.data), v);
    return host->buf_set(out, v, sizeof v) == 0 ? KS_OK : KS_RETRY;
}

static ks_verdict count_init(ks_ctx *ctx, void **state)
{
    count_state *st = calloc(1, sizeof *st);
    if (!st) {
        host->log(ctx, KS_LOG_ERROR, "count: out of memory");
        return KS_FATAL;
    }
    ks_keyed_init(&st->keyed, host, "count");
    int rc = host->store(ctx, NULL, &st->store);
    if (rc != 0) {
        host->log(ctx, KS_LOG_ERROR,
                  "count: node '%s' has no usable store (error %d); name one "
                  "with `store:`",
                  host->node_name(ctx), rc);
        free(st);
        return KS_FATAL;
    }
    const ks_win_ops ops = {ctx, win_add, win_merge};
    if (ks_win_open(host, ctx, "count", st->store, &ops, &st->win) != 0) {
        free(st);
        return KS_FATAL;
    }
    *state = st;
    return KS_OK;
}

static ks_verdict count_process(ks_ctx *ctx, void *state, const ks_record *rec)
{
    count_state *st = state;
    ks_verdict verdict;
    if (ks_keyed_check(&st->keyed, ctx, rec, &verdict))
        return verdict; /* no key, a tombstone or a key over the limit */

    if (st->win)
        return ks_win_process(st->win, rec);

    ks_bytes key = {rec->key, rec->key_len};
    ks_bytes old;
    int64_t count = 0;
    int rc = host->store_get(st->store, key, &old);
    if (rc == 0) {
        if (old.len != 8) {
            host->log(ctx, KS_LOG_ERROR,
                      "count: stored value of %zu bytes is not an int64 count; "
                      "is the store of node '%s' shared with another processor?",
                      old.len, host->node_name(ctx));
            return KS_FATAL;
        }
        count = ks_int64_decode(old.data);
    } else if (rc != KS_ERR_NOT_FOUND) {
        return ks_keyed_store_failed(&st->keyed, ctx, "get", rc);
    }

    unsigned char value[8];
    ks_int64_encode(count + 1, value);
    rc = host->store_put(st->store, key, (ks_bytes){value, sizeof value});
    if (rc != 0)
        return ks_keyed_store_failed(&st->keyed, ctx, "put", rc);

    ks_record out = *rec; /* same key, timestamp and headers */
    out.value = value;
    out.value_len = sizeof value;
    return host->forward(ctx, &out) == 0 ? KS_OK : KS_RETRY;
}

static void count_close(ks_ctx *ctx, void *state)
{
    (void)ctx;
    count_state *st = state;
    if (st)
        ks_win_free(st->win);
    free(st);
}

static const ks_config_field count_config[] = {KS_WIN_CONFIG_FIELDS};

static const ks_processor_type count_type = {
    .struct_size = sizeof(ks_processor_type),
    .name = "count",
    .description = "counts records per key in a store; forwards (key, int64 count)",
    .flags = KS_PROC_NEEDS_STORE | KS_PROC_KEYED | KS_PROC_CACHEABLE,
    .config = count_config,
    .config_count = sizeof count_config / sizeof count_config[0],
    .state_version = 1,
    .init = count_init,
    .process = count_process,
    .close = count_close,
};

static const ks_processor_type *const processors[] = {&count_type};

static const ks_plugin_descriptor descriptor = {
    KS_DESCRIPTOR_HEADER,
    .name = "count",
    .version = "0.1.0",
    .build_id = KS_BUILD_ID,
    .processors = processors,
    .processor_count = 1,
    .functions = NULL,
    .function_count = 0,
};

KS_EXPORT const ks_plugin_descriptor *ks_plugin_entry(const ks_host_api *api)
{
    host = api;
    return &descriptor;
}
