/*
 * reduce.c - the shipped plugin "reduce", processor type "reduce".
 *
 * Per record key, combines the values seen so far with a named reducer from
 * a user plugin and forwards (key, result):
 *
 *   functions: { reduce: my_plugin.max_bytes }
 *
 * The first value of a key is stored as is; each later one becomes
 * acc = reduce(key, acc, value). Values and results are opaque bytes of
 * the same format (the source's value serde), as in Kafka Streams'
 * KGroupedStream.reduce().
 *
 * Records without a key (metric null_keys, sampled log) and tombstones
 * (metric null_values) are dropped. A key over the store's 500-byte limit is
 * a poison record. A reducer verdict other than KS_OK is returned as is.
 * Store full: fatal; other store failures: KS_RETRY.
 *
 * State format (state_version 1): store key = record key, store value = the
 * accumulated value.
 */
#include <kstreams/kstreams.h>

#include <stdlib.h>

/* Saved by the entry point; valid while the plugin is loaded. */
static const ks_host_api *host;

#define STORE_KEY_MAX 500
#define LOG_EVERY 1000

typedef struct reduce_state {
    ks_store *store;
    ks_reducer_fn reduce;
    ks_buf *result; /* the reducer's output; reused for every record */
    uint64_t null_keys;
    uint64_t big_keys;
} reduce_state;

static void reduce_close(ks_ctx *ctx, void *state)
{
    (void)ctx;
    reduce_state *st = state;
    if (!st)
        return;
    host->buf_free(st->result);
    free(st);
}

static ks_verdict reduce_init(ks_ctx *ctx, void **state)
{
    reduce_state *st = calloc(1, sizeof *st);
    if (!st) {
        host->log(ctx, KS_LOG_ERROR, "reduce: out of memory");
        return KS_FATAL;
    }
    void (*fn)(void) = NULL;
    int rc = host->store(ctx, NULL, &st->store);
    if (rc != 0) {
        host->log(ctx, KS_LOG_ERROR,
                  "reduce: node '%s' has no usable store (error %d); name one "
                  "with `store:`",
                  host->node_name(ctx), rc);
        goto fail;
    }
    rc = host->function(ctx, "reduce", KS_FN_REDUCER, &fn);
    if (rc != 0) {
        if (rc == KS_ERR_NOT_FOUND)
            host->log(ctx, KS_LOG_ERROR,
                      "reduce: node '%s' needs a reducer function under "
                      "`functions: { reduce: plugin.function }`",
                      host->node_name(ctx));
        else
            host->log(ctx, KS_LOG_ERROR,
                      "reduce: function 'reduce' of node '%s' is not a reducer "
                      "(error %d)",
                      host->node_name(ctx), rc);
        goto fail;
    }
    st->reduce = (ks_reducer_fn)fn; /* the host checked the kind */
    st->result = host->buf_new();
    if (!st->result) {
        host->log(ctx, KS_LOG_ERROR, "reduce: out of memory");
        goto fail;
    }
    *state = st;
    return KS_OK;
fail:
    reduce_close(ctx, st);
    return KS_FATAL;
}

static ks_verdict store_failed(ks_ctx *ctx, const char *what, int rc)
{
    if (rc == KS_ERR_STORE_FULL) {
        host->log(ctx, KS_LOG_ERROR,
                  "reduce: the store of node '%s' is full; raise `map_size` of "
                  "that store under `stores:` in the pipeline YAML",
                  host->node_name(ctx));
        return KS_FATAL;
    }
    host->log(ctx, KS_LOG_WARN, "reduce: store %s failed (error %d); retrying",
              what, rc);
    return KS_RETRY;
}

static ks_verdict reduce_process(ks_ctx *ctx, void *state, const ks_record *rec)
{
    reduce_state *st = state;

    if (!rec->key || rec->key_len == 0) {
        if (st->null_keys++ % LOG_EVERY == 0)
            host->log(ctx, KS_LOG_WARN,
                      "reduce: dropped a record without a key (%s[%d]@%lld); "
                      "%llu so far",
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
                      "reduce: key of %zu bytes is over the store's %d-byte "
                      "limit (%s[%d]@%lld)",
                      rec->key_len, STORE_KEY_MAX, rec->topic ? rec->topic : "-",
                      (int)rec->partition, (long long)rec->offset);
        return KS_SKIP;
    }

    ks_bytes key = {rec->key, rec->key_len};
    ks_bytes value = {rec->value, rec->value_len};
    ks_bytes acc;
    /* acc stays valid until our store_put below: reduce() cannot write */
    int rc = host->store_get(st->store, key, &acc);
    if (rc == 0) {
        ks_verdict v = st->reduce(host, key, acc, value, st->result);
        if (v != KS_OK)
            return v;
        value = host->buf_get(st->result);
        if (!value.data)
            value.data = ""; /* empty result, not a tombstone */
    } else if (rc != KS_ERR_NOT_FOUND) {
        return store_failed(ctx, "get", rc);
    }
    /* else: the first value of the key is the accumulator as is */

    rc = host->store_put(st->store, key, value);
    if (rc != 0)
        return store_failed(ctx, "put", rc);

    ks_record out = *rec; /* same key, timestamp and headers */
    out.value = value.data;
    out.value_len = value.len;
    return host->forward(ctx, &out) == 0 ? KS_OK : KS_RETRY;
}

static const ks_processor_type reduce_type = {
    .struct_size = sizeof(ks_processor_type),
    .name = "reduce",
    .description = "combines values per key with a named reducer; forwards "
                   "(key, result)",
    .flags = KS_PROC_NEEDS_STORE | KS_PROC_KEYED | KS_PROC_NEEDS_FUNCTIONS,
    .config = NULL,
    .config_count = 0,
    .state_version = 1,
    .init = reduce_init,
    .process = reduce_process,
    .close = reduce_close,
};

static const ks_processor_type *const processors[] = {&reduce_type};

static const ks_plugin_descriptor descriptor = {
    KS_DESCRIPTOR_HEADER,
    .name = "reduce",
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
