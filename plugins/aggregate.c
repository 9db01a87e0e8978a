/*
 * aggregate.c - the shipped plugin "aggregate", processor type "aggregate".
 *
 * Per record key, folds the record's value into an aggregate kept in the
 * node's (first) store and forwards (key, new aggregate). The functions
 * come by name from a user plugin:
 *
 *   functions: { init: my_plugin.zero, add: my_plugin.add_bytes }
 *
 *   init (KS_FN_INITIALIZER)  the aggregate of a key seen for the first time
 *   add  (KS_FN_AGGREGATOR)   add(key, value, agg) -> new aggregate
 *
 * The aggregate is opaque bytes: whatever the functions write is stored and
 * forwarded as is, so the sink's serde must match what they produce.
 *
 * Like Kafka Streams' KGroupedStream.aggregate(), records without a key
 * (metric null_keys, sampled log) and tombstones (metric null_values) are
 * dropped. A key over the store's 500-byte limit is a poison record. A
 * function's verdict other than KS_OK is returned as is (KS_SKIP from a
 * function that cannot parse a value applies the poison policy). Store
 * full: fatal; other store failures: KS_RETRY.
 *
 * State format (state_version 1): store key = record key, store value =
 * the aggregate bytes as the functions wrote them.
 */
#include <kstreams/kstreams.h>

#include <stdlib.h>

/* Saved by the entry point; valid while the plugin is loaded. */
static const ks_host_api *host;

#define STORE_KEY_MAX 500
#define LOG_EVERY 1000

typedef struct agg_state {
    ks_store *store;
    ks_initializer_fn init;
    ks_aggregator_fn add;
    ks_buf *initial; /* init's output; reused for every record */
    ks_buf *result;  /* add's output; reused for every record  */
    uint64_t null_keys;
    uint64_t big_keys;
} agg_state;

static void agg_close(ks_ctx *ctx, void *state)
{
    (void)ctx;
    agg_state *st = state;
    if (!st)
        return;
    host->buf_free(st->initial);
    host->buf_free(st->result);
    free(st);
}

/* Look up the function the node names for `role`; log why not. */
static int need_function(ks_ctx *ctx, const char *role, ks_function_kind kind,
                         const char *kind_name, void (**fn)(void))
{
    int rc = host->function(ctx, role, kind, fn);
    if (rc == KS_ERR_NOT_FOUND)
        host->log(ctx, KS_LOG_ERROR,
                  "aggregate: node '%s' needs an %s function under `functions: "
                  "{ %s: plugin.function }`",
                  host->node_name(ctx), kind_name, role);
    else if (rc != 0)
        host->log(ctx, KS_LOG_ERROR,
                  "aggregate: function '%s' of node '%s' is not an %s (error %d)",
                  role, host->node_name(ctx), kind_name, rc);
    return rc;
}

static ks_verdict agg_init(ks_ctx *ctx, void **state)
{
    agg_state *st = calloc(1, sizeof *st);
    if (!st) {
        host->log(ctx, KS_LOG_ERROR, "aggregate: out of memory");
        return KS_FATAL;
    }
    void (*init)(void) = NULL, (*add)(void) = NULL;
    int rc = host->store(ctx, NULL, &st->store);
    if (rc != 0) {
        host->log(ctx, KS_LOG_ERROR,
                  "aggregate: node '%s' has no usable store (error %d); name "
                  "one with `store:`",
                  host->node_name(ctx), rc);
        goto fail;
    }
    if (need_function(ctx, "init", KS_FN_INITIALIZER, "initializer", &init) != 0 ||
        need_function(ctx, "add", KS_FN_AGGREGATOR, "aggregator", &add) != 0)
        goto fail;
    /* the host casts back: these are the kinds it checked */
    st->init = (ks_initializer_fn)init;
    st->add = (ks_aggregator_fn)add;
    st->initial = host->buf_new();
    st->result = host->buf_new();
    if (!st->initial || !st->result) {
        host->log(ctx, KS_LOG_ERROR, "aggregate: out of memory");
        goto fail;
    }
    *state = st;
    return KS_OK;
fail:
    agg_close(ctx, st);
    return KS_FATAL;
}

static ks_verdict store_failed(ks_ctx *ctx, const char *what, int rc)
{
    if (rc == KS_ERR_STORE_FULL) {
        host->log(ctx, KS_LOG_ERROR,
                  "aggregate: the store of node '%s' is full; raise `map_size` "
                  "of that store under `stores:` in the pipeline YAML",
                  host->node_name(ctx));
        return KS_FATAL;
    }
    host->log(ctx, KS_LOG_WARN, "aggregate: store %s failed (error %d); retrying",
              what, rc);
    return KS_RETRY;
}

static ks_verdict agg_process(ks_ctx *ctx, void *state, const ks_record *rec)
{
    agg_state *st = state;

    if (!rec->key || rec->key_len == 0) {
        if (st->null_keys++ % LOG_EVERY == 0)
            host->log(ctx, KS_LOG_WARN,
                      "aggregate: dropped a record without a key "
                      "(%s[%d]@%lld); %llu so far",
                      rec->topic ? rec->topic : "-", (int)rec->partition,
                      (long long)rec->offset, (unsigned long long)st->null_keys);
        host->metric_add(ctx, "null_keys", 1);
        return KS_OK;
    }
    if (!rec->value) {
        host->metric_add(ctx, "null_values", 1);
        return KS_OK;
    }
    if (rec->key_len > STORE_KEY_MAX) {
        if (st->big_keys++ % LOG_EVERY == 0)
            host->log(ctx, KS_LOG_WARN,
                      "aggregate: key of %zu bytes is over the store's %d-byte "
                      "limit (%s[%d]@%lld)",
                      rec->key_len, STORE_KEY_MAX, rec->topic ? rec->topic : "-",
                      (int)rec->partition, (long long)rec->offset);
        return KS_SKIP;
    }

    ks_bytes key = {rec->key, rec->key_len};
    ks_bytes value = {rec->value, rec->value_len};
    ks_bytes agg;
    /* agg stays valid until our store_put below: add() cannot write */
    int rc = host->store_get(st->store, key, &agg);
    if (rc == KS_ERR_NOT_FOUND) {
        ks_verdict v = st->init(host, key, st->initial);
        if (v != KS_OK)
            return v;
        agg = host->buf_get(st->initial);
    } else if (rc != 0) {
        return store_failed(ctx, "get", rc);
    }

    ks_verdict v = st->add(host, key, value, agg, st->result);
    if (v != KS_OK)
        return v;
    ks_bytes result = host->buf_get(st->result);
    if (!result.data)
        result.data = ""; /* empty aggregate, not a tombstone */

    rc = host->store_put(st->store, key, result);
    if (rc != 0)
        return store_failed(ctx, "put", rc);

    ks_record out = *rec; /* same key, timestamp and headers */
    out.value = result.data;
    out.value_len = result.len;
    return host->forward(ctx, &out) == 0 ? KS_OK : KS_RETRY;
}

static const ks_processor_type agg_type = {
    .struct_size = sizeof(ks_processor_type),
    .name = "aggregate",
    .description = "folds values per key with named init/add functions; "
                   "forwards (key, aggregate)",
    .flags = KS_PROC_NEEDS_STORE | KS_PROC_KEYED | KS_PROC_NEEDS_FUNCTIONS,
    .config = NULL,
    .config_count = 0,
    .state_version = 1,
    .init = agg_init,
    .process = agg_process,
    .close = agg_close,
};

static const ks_processor_type *const processors[] = {&agg_type};

static const ks_plugin_descriptor descriptor = {
    KS_DESCRIPTOR_HEADER,
    .name = "aggregate",
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
