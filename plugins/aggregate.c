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
 *
 * With `window:` the aggregate is per key and window (window.c,
 * docs/windows.md); a new window starts from init(key). Session windows
 * also need `merge:` (KS_FN_MERGER): merge(key, earlier, later).
 */
#include <kstreams/kstreams.h>

#include <stdlib.h>

#include "keyed.h"
#include "window.h"

/* Saved by the entry point; valid while the plugin is loaded. */
static const ks_host_api *host;

typedef struct agg_state {
    ks_store *store;
    ks_initializer_fn init;
    ks_aggregator_fn add;
    ks_buf *initial; /* init's output; reused for every record */
    ks_buf *result;  /* add's output; reused for every record  */
    ks_keyed keyed; /* record checks, store failures (keyed.h) */
    ks_merger_fn merge; /* `merge:` role; NULL when not named */
    ks_win *win;        /* NULL: not windowed                  */
} agg_state;

/* Windowed aggregate: a new window starts from init(key). */
static ks_verdict win_add(void *arg, ks_bytes key, const ks_bytes *agg, ks_bytes value,
                          ks_buf *out)
{
    agg_state *st = arg;
    ks_bytes from;
    if (agg) {
        from = *agg;
    } else {
        ks_verdict v = st->init(host, key, st->initial);
        if (v != KS_OK)
            return v;
        from = host->buf_get(st->initial);
    }
    return st->add(host, key, value, from, out);
}

static ks_verdict win_merge(void *arg, ks_bytes key, ks_bytes a, ks_bytes b, ks_buf *out)
{
    agg_state *st = arg;
    return st->merge(host, key, a, b, out);
}

static void agg_close(ks_ctx *ctx, void *state)
{
    (void)ctx;
    agg_state *st = state;
    if (!st)
        return;
    ks_win_free(st->win);
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
    ks_keyed_init(&st->keyed, host, "aggregate");
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
    /* optional: only session windows need a merger (ks_win_open says so) */
    void (*merge)(void) = NULL;
    rc = host->function(ctx, "merge", KS_FN_MERGER, &merge);
    if (rc == 0)
        st->merge = (ks_merger_fn)merge;
    else if (rc != KS_ERR_NOT_FOUND)
        goto fail; /* named but not a merger: logged by the host */
    const ks_win_ops ops = {st, win_add, st->merge ? win_merge : NULL};
    if (ks_win_open(host, ctx, "aggregate", st->store, &ops, &st->win) != 0)
        goto fail;
    *state = st;
    return KS_OK;
fail:
    agg_close(ctx, st);
    return KS_FATAL;
}

static ks_verdict agg_process(ks_ctx *ctx, void *state, const ks_record *rec)
{
    agg_state *st = state;

    ks_verdict verdict;
    if (ks_keyed_check(&st->keyed, ctx, rec, &verdict))
        return verdict; /* no key, a tombstone or a key over the limit */

    if (st->win)
        return ks_win_process(st->win, rec);

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
        return ks_keyed_store_failed(&st->keyed, ctx, "get", rc);
    }

    ks_verdict v = st->add(host, key, value, agg, st->result);
    if (v != KS_OK)
        return v;
    ks_bytes result = host->buf_get(st->result);
    if (!result.data)
        result.data = ""; /* empty aggregate, not a tombstone */

    rc = host->store_put(st->store, key, result);
    if (rc != 0)
        return ks_keyed_store_failed(&st->keyed, ctx, "put", rc);

    ks_record out = *rec; /* same key, timestamp and headers */
    out.value = result.data;
    out.value_len = result.len;
    return host->forward(ctx, &out) == 0 ? KS_OK : KS_RETRY;
}

static const ks_config_field agg_config[] = {KS_WIN_CONFIG_FIELDS};

static const ks_processor_type agg_type = {
    .struct_size = sizeof(ks_processor_type),
    .name = "aggregate",
    .description = "folds values per key with named init/add functions; "
                   "forwards (key, aggregate)",
    .flags = KS_PROC_NEEDS_STORE | KS_PROC_KEYED | KS_PROC_NEEDS_FUNCTIONS |
             KS_PROC_CACHEABLE,
    .config = agg_config,
    .config_count = sizeof agg_config / sizeof agg_config[0],
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
