/*
 * orders.c - an example stateless plugin: parse JSON orders, drop test
 * orders, reshape the rest and route purchases and refunds to two sinks.
 *
 * Input value:  {"id": 7, "kind": "purchase", "user": "u7", "amount": 12}
 * Output value: {"id":7,"user":"u7","cents":1200}   key: the user
 * The node's children must include sinks named by the config keys
 * `purchases` and `refunds` (defaults "purchases" and "refunds").
 */
#include <jansson.h>
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

static ks_verdict route_process(ks_ctx *ctx, void *state, const ks_record *rec)
{
    const route *r = state;
    json_error_t jerr;
    json_t *order = json_loadb(rec->value, rec->value_len, 0, &jerr);
    if (!order)
        return KS_SKIP; /* not JSON: a poison record */
    const char *kind = json_string_value(json_object_get(order, "kind"));
    const char *user = json_string_value(json_object_get(order, "user"));
    json_t *id = json_object_get(order, "id");
    if (!kind || !user || !json_is_integer(id)) {
        json_decref(order);
        return KS_SKIP;
    }
    ks_verdict v = KS_OK;
    if (strcmp(kind, r->drop_kind) != 0) {
        const char *sink = strcmp(kind, "refund") == 0 ? r->refunds : r->purchases;
        json_int_t amount = json_integer_value(json_object_get(order, "amount"));
        json_t *out = json_pack("{s:O,s:s,s:I}", "id", id, "user", user, "cents",
                                amount * 100);
        char *text = out ? json_dumps(out, JSON_COMPACT) : NULL;
        if (text) {
            ks_record o = {.key = user, .key_len = strlen(user), .value = text,
                           .value_len = strlen(text), .timestamp = rec->timestamp};
            if (api->forward_to(ctx, sink, &o) != 0)
                v = KS_RETRY;
        } else {
            v = KS_RETRY;
        }
        free(text);
        json_decref(out);
    }
    json_decref(order);
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

KS_EXPORT const ks_plugin_descriptor *ks_plugin_entry(const ks_host_api *host)
{
    api = host;
    return &descriptor;
}
