/*
 * orders.c - an example stateless plugin: parse JSON orders, drop test
 * orders, reshape the rest and route purchases and refunds to two sinks.
 *
 * Input value:  {"id": 7, "kind": "purchase", "user": "u7", "amount": 12}
 * Output value: {"id":7,"user":"u7","cents":1200}   key: the user
 * The node's children must include sinks named by the config keys
 * `purchases` and `refunds` (defaults "purchases" and "refunds").
 */
#include <stdlib.h>
#include <string.h>

#include <kstreams/kstreams.h>

static const ks_host_api *api;

typedef struct route {
    const char *drop_kind;
    const char *purchases;
    const char *refunds;
} route;

static ks_verdict route_init(ks_ctx *ctx, void **state)
{
    route *r = calloc(1, sizeof *r); /* one instance per task */
    if (!r || api->config_string(ctx, "drop_kind", &r->drop_kind) != 0 ||
        api->config_string(ctx, "purchases", &r->purchases) != 0 ||
        api->config_string(ctx, "refunds", &r->refunds) != 0) {
        api->log(ctx, KS_LOG_ERROR, "route: cannot read its configuration");
        free(r);
        return KS_FATAL;
    }
    *state = r; /* config strings are borrowed for the ctx's lifetime */
    return KS_OK;
}

static void route_close(ks_ctx *ctx, void *state)
{
    (void)ctx;
    free(state);
}

/* The string member `pointer` of the JSON text, decoded into a malloc'd
 * NUL-terminated string (the caller frees it); NULL when it is missing or
 * not a string. */
static char *string_at(const ks_record *rec, const char *pointer)
{
    ks_json_span s;
    size_t n;
    if (api->json_find(rec->value, rec->value_len, pointer, &s) != KS_JSON_FOUND ||
        s.type != KS_JSON_STRING || api->json_string(&s, NULL, 0, &n) != 0)
        return NULL;
    char *out = malloc(n + 1);
    if (out && api->json_string(&s, out, n, &n) == 0)
        out[n] = '\0';
    return out;
}

/* {"id":<id as written>,"user":"<user>","cents":<amount * 100>} to `sink`,
 * keyed by the user. */
static ks_verdict send_order(ks_ctx *ctx, const ks_record *rec, const char *sink,
                             const ks_json_span *id, const char *user)
{
    ks_json_span a;
    int64_t amount = 0;
    if (api->json_find(rec->value, rec->value_len, "/amount", &a) == KS_JSON_FOUND)
        api->json_int64(&a, &amount); /* not an integer: 0 */
    ks_json_writer *w = api->json_writer(ctx);
    const void *text;
    size_t len;
    if (!w || api->json_put_raw(w, "id", id) != 0 ||
        api->json_put_string(w, "user", user, strlen(user)) != 0 ||
        api->json_put_int64(w, "cents", amount * 100) != 0 ||
        api->json_finish(w, &text, &len) != 0)
        return KS_RETRY;
    ks_record o = {.key = user, .key_len = strlen(user), .value = text, .value_len = len,
                   .timestamp = rec->timestamp};
    return api->forward_to(ctx, sink, &o) == 0 ? KS_OK : KS_RETRY;
}

static ks_verdict route_process(ks_ctx *ctx, void *state, const ks_record *rec)
{
    const route *r = state;
    ks_json_span order, id;
    if (!rec->value ||
        api->json_find(rec->value, rec->value_len, "", &order) != KS_JSON_FOUND ||
        order.type != KS_JSON_OBJECT)
        return KS_SKIP; /* not a JSON object: a poison record */
    char *kind = string_at(rec, "/kind");
    char *user = string_at(rec, "/user");
    int64_t unused;
    ks_verdict v = KS_SKIP; /* an order without kind, user or integer id */
    if (kind && user && api->json_find(rec->value, rec->value_len, "/id", &id) == KS_JSON_FOUND &&
        api->json_int64(&id, &unused) == 0) {
        v = KS_OK;
        if (strcmp(kind, r->drop_kind) != 0)
            v = send_order(ctx, rec, strcmp(kind, "refund") == 0 ? r->refunds : r->purchases,
                           &id, user);
    }
    free(kind);
    free(user);
    return v;
}

static const ks_config_field route_config[] = {
    {"drop_kind", KS_CONFIG_STRING, 0, "test", "orders of this kind are dropped"},
    {"purchases", KS_CONFIG_STRING, 0, "purchases", "child that receives purchases"},
    {"refunds", KS_CONFIG_STRING, 0, "refunds", "child that receives refunds"},
};

static const ks_processor_type route_type = {
    .struct_size = sizeof(ks_processor_type),
    .name = "route",
    .description = "drop test orders, reshape, route purchases and refunds",
    .flags = KS_PROC_CHANGES_KEY, /* outputs are keyed by user */
    .config = route_config,
    .config_count = sizeof route_config / sizeof route_config[0],
    .state_version = 1,
    .init = route_init,
    .process = route_process,
    .close = route_close,
};

static const ks_processor_type *const processors[] = {&route_type};

static const ks_plugin_descriptor descriptor = {
    KS_DESCRIPTOR_HEADER,
    .name = "orders",
    .version = "1.0.0",
    .build_id = KS_BUILD_ID,
    .processors = processors,
    .processor_count = 1,
};

/* An engine older than ABI 1.3 has no JSON calls: NULL refuses the load. */
KS_EXPORT const ks_plugin_descriptor *ks_plugin_entry(const ks_host_api *host)
{
    if (!KS_API_HAS(host, json_finish))
        return NULL;
    api = host;
    return &descriptor;
}
