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
 *
 * With `window:` the result is per key and window (window.c,
 * docs/windows.md); sessions merge with the reducer itself:
 * merged = reduce(key, earlier, later).
 */
#include <kstreams/kstreams.h>

#include <stdlib.h>

#include "keyed.h"
#include "window.h"

/* Saved by the entry point; valid while the plugin is loaded. */
static const ks_host_api *host;

typedef struct reduce_state {
    ks_store *store;
    ks_reducer_fn reduce;
    ks_buf *result; /* the reducer's output; reused for every record */
    ks_keyed keyed; /* record checks, store failures (keyed.h) */
    ks_win *win; /* NULL: not windowed */
} reduce_state;

/* Windowed reduce: a window's first value is its accumulator as is. */
static ks_verdict win_add(void *arg, ks_bytes key, const ks_bytes *agg, ks_bytes value,
                          ks_buf *out)
{
    reduce_state *st = arg;
    if (!agg)
        return host->buf_set(out, value.data, value.len) == 0 ? KS_OK : KS_RETRY;
    return st->reduce(host, key, *agg, value, out);
}

/* Merged sessions: the reducer combines the earlier and the later result. */
static ks_verdict win_merge(void *arg, ks_bytes key, ks_bytes a, ks_bytes b, ks_buf *out)
{
    reduce_state *st = arg;
    return st->reduce(host, key, a, b, out);
}

static void reduce_close(ks_ctx *ctx, void *state)
{
    (void)ctx;
    reduce_state *st = state;
    if (!st)
        return;
    ks_win_free(st->win);
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
    ks_keyed_init(&st->keyed, host, "reduce");
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
    const ks_win_ops ops = {st, win_add, win_merge};
    if (ks_win_open(host, ctx, "reduce", st->store, &ops, &st->win) != 0)
        goto fail;
    *state = st;
    return KS_OK;
fail:
    reduce_close(ctx, st);
    return KS_FATAL;
}

static ks_verdict reduce_process(ks_ctx *ctx, void *state, const ks_record *rec)
{
    reduce_state *st = state;

    ks_verdict verdict;
    if (ks_keyed_check(&st->keyed, ctx, rec, &verdict))
        return verdict; /* no key, a tombstone or a key over the limit */

    if (st->win)
        return ks_win_process(st->win, rec);

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
        return ks_keyed_store_failed(&st->keyed, ctx, "get", rc);
    }
    /* else: the first value of the key is the accumulator as is */

    rc = host->store_put(st->store, key, value);
    if (rc != 0)
        return ks_keyed_store_failed(&st->keyed, ctx, "put", rc);

    ks_record out = *rec; /* same key, timestamp and headers */
    out.value = value.data;
    out.value_len = value.len;
    return host->forward(ctx, &out) == 0 ? KS_OK : KS_RETRY;
}

static const ks_config_field reduce_config[] = {KS_WIN_CONFIG_FIELDS};

static const ks_processor_type reduce_type = {
    .struct_size = sizeof(ks_processor_type),
    .name = "reduce",
    .description = "combines values per key with a named reducer; forwards "
                   "(key, result)",
    .flags = KS_PROC_NEEDS_STORE | KS_PROC_KEYED | KS_PROC_NEEDS_FUNCTIONS |
             KS_PROC_CACHEABLE,
    .config = reduce_config,
    .config_count = sizeof reduce_config / sizeof reduce_config[0],
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
