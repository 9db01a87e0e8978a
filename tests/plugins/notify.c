/*
 * notify.c - test plugin for events from a processor (api->outbox_enqueue,
 * ABI 1.2). Processor type "notify": per record (key = user id) it bumps
 * the user's count in its store and hands the outbox `outbox` (config,
 * default "commands") the event {"u":"<user>","n":<count - 1>}, then
 * forwards the record. The count and the event commit together, so a
 * replay after a crash must neither skip nor repeat an n.
 * Includes only kstreams.h and libc.
 */
#include <kstreams/kstreams.h>

#include <stdio.h>
#include <string.h>

static const ks_host_api *host;

typedef struct notify_state {
    ks_store *counts;
    const char *outbox;
} notify_state;

static notify_state states[1024]; /* one per task: no allocation to leak */

static ks_verdict notify_init(ks_ctx *ctx, void **state)
{
    if (!KS_API_HAS(host, outbox_enqueue)) {
        host->log(ctx, KS_LOG_ERROR, "this engine has no outbox_enqueue (ABI < 1.2)");
        return KS_FATAL;
    }
    int32_t task = host->task_id(ctx);
    if (task < 0 || task >= 1024)
        return KS_FATAL;
    notify_state *st = &states[task];
    if (host->store(ctx, NULL, &st->counts) != 0 ||
        host->config_string(ctx, "outbox", &st->outbox) != 0)
        return KS_FATAL;
    *state = st;
    return KS_OK;
}

static ks_verdict notify_process(ks_ctx *ctx, void *state, const ks_record *rec)
{
    notify_state *st = state;
    if (!rec->key || rec->key_len == 0 || rec->key_len > 200)
        return KS_SKIP;
    ks_bytes key = {rec->key, rec->key_len}, old;
    int64_t n = 0;
    if (host->store_get(st->counts, key, &old) == 0 && old.len == 8)
        n = ks_int64_decode(old.data);
    unsigned char enc[8];
    ks_int64_encode(n + 1, enc);
    if (host->store_put(st->counts, key, (ks_bytes){enc, 8}) != 0)
        return KS_RETRY;
    char payload[300], id[KS_OUTBOX_EVENT_ID_SIZE];
    int len = snprintf(payload, sizeof payload, "{\"u\":\"%.*s\",\"n\":%lld}",
                       (int)rec->key_len, (const char *)rec->key, (long long)n);
    int rc = host->outbox_enqueue(ctx, st->outbox, key, (ks_bytes){payload, (size_t)len}, id,
                                  sizeof id);
    if (rc != 0) {
        host->log(ctx, KS_LOG_WARN, "outbox_enqueue: %d", rc);
        return KS_RETRY;
    }
    return host->forward(ctx, rec) == 0 ? KS_OK : KS_RETRY;
}

static const ks_config_field notify_config[] = {
    {"outbox", KS_CONFIG_STRING, 0, "commands", "the pipeline's outbox name"}};

static const ks_processor_type notify_type = {
    .struct_size = sizeof(ks_processor_type),
    .name = "notify",
    .description = "count per user and hand the outbox one event per record",
    .flags = KS_PROC_NEEDS_STORE | KS_PROC_KEYED,
    .config = notify_config,
    .config_count = 1,
    .init = notify_init,
    .process = notify_process,
};

static const ks_processor_type *const processors[] = {&notify_type};

static const ks_plugin_descriptor descriptor = {
    KS_DESCRIPTOR_HEADER,
    .name = "notify",
    .version = "1.0.0",
    .build_id = KS_BUILD_ID,
    .processors = processors,
    .processor_count = 1,
};

KS_EXPORT const ks_plugin_descriptor *ks_plugin_entry(const ks_host_api *api)
{
    host = api;
    return &descriptor;
}
