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
 */
#include <kstreams/kstreams.h>

#include <stdlib.h>

/* Saved by the entry point; valid while the plugin is loaded. The only
 * mutable static: everything else lives in the instance. */
static const ks_host_api *host;

/* The host's limit on store keys (see store_put in kstreams.h). */
#define STORE_KEY_MAX 500

/* Log the 1st dropped record, then every LOG_EVERY-th. */
#define LOG_EVERY 1000

typedef struct count_state {
    ks_store *store;
    uint64_t null_keys;   /* dropped: no key          */
    uint64_t null_values; /* ignored: tombstones      */
    uint64_t big_keys;    /* skipped: key over 500 B  */
} count_state;

static ks_verdict count_init(ks_ctx *ctx, void **state)
{
    count_state *st = calloc(1, sizeof *st);
    if (!st) {
        host->log(ctx, KS_LOG_ERROR, "count: out of memory");
        return KS_FATAL;
    }
    int rc = host->store(ctx, NULL, &st->store);
    if (rc != 0) {
        host->log(ctx, KS_LOG_ERROR,
                  "count: node '%s' has no usable store (error %d); name one "
                  "with `store:`",
                  host->node_name(ctx), rc);
        free(st);
        return KS_FATAL;
    }
    *state = st;
    return KS_OK;
}

/* Map a failed store call to a verdict. */
static ks_verdict store_failed(ks_ctx *ctx, const char *what, int rc)
{
    if (rc == KS_ERR_STORE_FULL) {
        host->log(ctx, KS_LOG_ERROR,
                  "count: the store of node '%s' is full; raise `map_size` of "
                  "that store under `stores:` in the pipeline YAML",
                  host->node_name(ctx));
        return KS_FATAL;
    }
    host->log(ctx, KS_LOG_WARN, "count: store %s failed (error %d); retrying",
              what, rc);
    return KS_RETRY;
}

static ks_verdict count_process(ks_ctx *ctx, void *state, const ks_record *rec)
{
    count_state *st = state;

    if (!rec->key || rec->key_len == 0) {
        if (st->null_keys++ % LOG_EVERY == 0)
            host->log(ctx, KS_LOG_WARN,
                      "count: dropped a record without a key (%s[%d]@%lld); "
                      "%llu so far",
                      rec->topic ? rec->topic : "-", (int)rec->partition,
                      (long long)rec->offset,
                      (unsigned long long)st->null_keys);
        host->metric_add(ctx, "null_keys", 1);
        return KS_OK;
    }
    if (!rec->value) {
        st->null_values++;
        host->metric_add(ctx, "null_values", 1);
        return KS_OK;
    }
    if (rec->key_len > STORE_KEY_MAX) {
        if (st->big_keys++ % LOG_EVERY == 0)
            host->log(ctx, KS_LOG_WARN,
                      "count: key of %zu bytes is over the store's %d-byte "
                      "limit (%s[%d]@%lld); %llu so far",
                      rec->key_len, STORE_KEY_MAX,
                      rec->topic ? rec->topic : "-", (int)rec->partition,
                      (long long)rec->offset, (unsigned long long)st->big_keys);
        return KS_SKIP;
    }

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
        return store_failed(ctx, "get", rc);
    }

    unsigned char value[8];
    ks_int64_encode(count + 1, value);
    rc = host->store_put(st->store, key, (ks_bytes){value, sizeof value});
    if (rc != 0)
        return store_failed(ctx, "put", rc);

    ks_record out = *rec; /* same key, timestamp and headers */
    out.value = value;
    out.value_len = sizeof value;
    return host->forward(ctx, &out) == 0 ? KS_OK : KS_RETRY;
}

static void count_close(ks_ctx *ctx, void *state)
{
    (void)ctx;
    free(state);
}

static const ks_processor_type count_type = {
    .struct_size = sizeof(ks_processor_type),
    .name = "count",
    .description = "counts records per key in a store; forwards (key, int64 count)",
    .flags = KS_PROC_NEEDS_STORE | KS_PROC_KEYED,
    .config = NULL,
    .config_count = 0,
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
