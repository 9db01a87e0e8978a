/*
 * page_views.c - an example user plugin for the page-views pipeline
 * (pipeline.yaml next to this file). Copy it to start your own.
 *
 * Input: topic page-views, key = user id (string), value = a JSON object
 *   {"user_agent": "Mozilla/5.0 ...", "url": "/home", "bytes": 5120}
 *
 * Offers
 *   processor "drop_bots"   forwards views unchanged, drops bots and junk
 *   function  "zero"        initializer: the int64 0
 *   function  "add_bytes"   aggregator:  int64 aggregate + the view's "bytes"
 *   function  "max_bytes"   reducer:     keeps the view with the most "bytes"
 *
 * Used from YAML as
 *   type: page_views.drop_bots
 *   functions: { init: page_views.zero, add: page_views.add_bytes }
 *   functions: { reduce: page_views.max_bytes }
 *
 * Rules a plugin follows (see kstreams.h):
 *  - include only <kstreams/kstreams.h> (plus the libraries you link; JSON
 *    needs none: the host reads and writes it, ABI 1.3);
 *  - export only ks_plugin_entry (build with -fvisibility=hidden);
 *  - keep no state in statics: per-task state goes into the instance that
 *    init() returns, durable state into stores; named functions must be
 *    reentrant (they run on several tasks at once);
 *  - what the host hands you is borrowed; what you hand it is copied.
 */
#include <stdlib.h>
#include <string.h>

#include <kstreams/kstreams.h>

/* The host API, saved by the entry point. The one static a plugin needs. */
static const ks_host_api *host;

/* The "bytes" field of a JSON view: 0 when missing or not an integer.
 * Returns -1 when `value` is not a JSON object. */
static int view_bytes(const ks_host_api *api, const void *data, size_t len, int64_t *bytes)
{
    ks_json_span view, b;
    if (!data || api->json_find(data, len, "", &view) != KS_JSON_FOUND ||
        view.type != KS_JSON_OBJECT)
        return -1;
    if (api->json_find(data, len, "/bytes", &b) != KS_JSON_FOUND ||
        api->json_int64(&b, bytes) != 0)
        *bytes = 0;
    return 0;
}

/* The view's "user_agent", decoded into a malloc'd NUL-terminated string
 * (the caller frees it); NULL when it is missing or not a string. */
static char *user_agent(const ks_record *rec)
{
    ks_json_span s;
    size_t n;
    if (host->json_find(rec->value, rec->value_len, "/user_agent", &s) != KS_JSON_FOUND ||
        s.type != KS_JSON_STRING || host->json_string(&s, NULL, 0, &n) != 0)
        return NULL;
    char *agent = malloc(n + 1);
    if (agent && host->json_string(&s, agent, n, &n) == 0)
        agent[n] = '\0';
    return agent;
}

/* ---- processor drop_bots -------------------------------------------------- */

typedef struct drop_bots {
    const char *marker; /* config, borrowed for the ctx's lifetime */
} drop_bots;

static ks_verdict drop_bots_init(ks_ctx *ctx, void **state)
{
    drop_bots *st = calloc(1, sizeof *st); /* one instance per task */
    if (!st)
        return KS_FATAL;
    /* has a default in the schema, so this only fails on a host bug */
    if (host->config_string(ctx, "bot_marker", &st->marker) != 0 ||
        st->marker[0] == '\0') {
        host->log(ctx, KS_LOG_ERROR, "drop_bots: `bot_marker` must not be empty");
        free(st);
        return KS_FATAL; /* the engine refuses to start the task */
    }
    *state = st;
    return KS_OK;
}

static ks_verdict drop_bots_process(ks_ctx *ctx, void *state, const ks_record *rec)
{
    const drop_bots *st = state;
    ks_json_span view;
    if (!rec->value ||
        host->json_find(rec->value, rec->value_len, "", &view) != KS_JSON_FOUND ||
        view.type != KS_JSON_OBJECT) {
        /* a tombstone, not JSON, or not an object: not a page view. Count
         * it (nothing is dropped silently) and go on. */
        host->metric_add(ctx, "invalid_dropped", 1);
        return KS_OK;
    }
    char *agent = user_agent(rec);
    int bot = agent && strstr(agent, st->marker);
    free(agent);
    if (bot) {
        host->metric_add(ctx, "bots_dropped", 1);
        return KS_OK;
    }
    /* forward the record unchanged; the host copies what it needs */
    return host->forward(ctx, rec) == 0 ? KS_OK : KS_RETRY;
}

static void drop_bots_close(ks_ctx *ctx, void *state)
{
    (void)ctx;
    free(state);
}

static const ks_config_field drop_bots_config[] = {
    {"bot_marker", KS_CONFIG_STRING, 0, "bot",
     "views whose user_agent contains this text are dropped (case-sensitive)"},
};

static const ks_processor_type drop_bots_type = {
    .struct_size = sizeof(ks_processor_type),
    .name = "drop_bots",
    .description = "drops views by bots and values that are not JSON objects",
    .flags = 0, /* stateless: no store, any partitioning */
    .config = drop_bots_config,
    .config_count = sizeof drop_bots_config / sizeof drop_bots_config[0],
    .state_version = 1,
    .init = drop_bots_init,
    .process = drop_bots_process,
    .close = drop_bots_close,
};

/* ---- named functions -------------------------------------------------------
 * They get no ctx: they compute, the calling processor (aggregate, reduce)
 * keeps the state. Write the result with api->buf_set (it copies). Return
 * KS_SKIP for a value you cannot use (the pipeline's poison policy applies),
 * KS_FATAL for a state you do not understand. */

/* initializer: every user starts at 0 bytes (int64, 8 bytes big-endian) */
static ks_verdict zero(const ks_host_api *api, ks_bytes key, ks_buf *out)
{
    (void)key;
    unsigned char v[8];
    ks_int64_encode(0, v);
    return api->buf_set(out, v, sizeof v) == 0 ? KS_OK : KS_RETRY;
}

/* aggregator: agg (int64) + the view's "bytes" */
static ks_verdict add_bytes(const ks_host_api *api, ks_bytes key, ks_bytes value,
                            ks_bytes agg, ks_buf *out)
{
    (void)key;
    int64_t bytes, sum;
    if (agg.len != 8)
        return KS_FATAL; /* the store holds something else than our int64 */
    if (view_bytes(api, value.data, value.len, &bytes) != 0)
        return KS_SKIP; /* not a JSON object: poison */
    if (__builtin_add_overflow(ks_int64_decode(agg.data), bytes, &sum))
        return KS_SKIP;
    unsigned char v[8];
    ks_int64_encode(sum, v);
    return api->buf_set(out, v, sizeof v) == 0 ? KS_OK : KS_RETRY;
}

/* reducer: of two JSON views, keep the one with more "bytes" (the earlier
 * one on a tie). The result is the kept view's JSON text, unchanged. */
static ks_verdict max_bytes(const ks_host_api *api, ks_bytes key, ks_bytes acc,
                            ks_bytes value, ks_buf *out)
{
    (void)key;
    int64_t acc_bytes, value_bytes;
    if (view_bytes(api, value.data, value.len, &value_bytes) != 0)
        return KS_SKIP; /* not a JSON object: poison */
    /* the first value of a key is stored without calling us: if that one
     * was not a view, any valid view replaces it */
    ks_bytes keep = acc;
    if (view_bytes(api, acc.data, acc.len, &acc_bytes) != 0 || value_bytes > acc_bytes)
        keep = value;
    return api->buf_set(out, keep.data, keep.len) == 0 ? KS_OK : KS_RETRY;
}

/* ---- descriptor ------------------------------------------------------------ */

static const ks_processor_type *const processors[] = {&drop_bots_type};

/* The host checks `kind` and casts `fn` back to the kind's type. */
static const ks_function functions[] = {
    {"zero", KS_FN_INITIALIZER, (void (*)(void))zero},
    {"add_bytes", KS_FN_AGGREGATOR, (void (*)(void))add_bytes},
    {"max_bytes", KS_FN_REDUCER, (void (*)(void))max_bytes},
};

static const ks_plugin_descriptor descriptor = {
    KS_DESCRIPTOR_HEADER,
    .name = "page_views", /* the name used in YAML: page_views.drop_bots */
    .version = "0.1.0",
    .build_id = KS_BUILD_ID,
    .processors = processors,
    .processor_count = sizeof processors / sizeof processors[0],
    .functions = functions,
    .function_count = sizeof functions / sizeof functions[0],
};

/* The one exported symbol: no side effects beyond saving the API. An
 * engine older than ABI 1.3 has no JSON calls: NULL refuses the load. */
KS_EXPORT const ks_plugin_descriptor *ks_plugin_entry(const ks_host_api *api)
{
    if (!KS_API_HAS(api, json_finish))
        return NULL;
    host = api;
    return &descriptor;
}
