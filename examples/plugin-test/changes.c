/*
 * changes.c - a tiny plugin, the subject of the example test next to it
 * (test_changes.c) and of docs/testing-plugins.md.
 *
 * Processor "only_changes" (keyed, one store): forwards a record only when
 * its value differs from the last value seen for its key, which it keeps
 * in its store. Every `report_every` of wall-clock time it forwards one
 * record (key "suppressed", value the decimal number of records it dropped
 * since the last report) when it dropped any.
 *
 * YAML:  type: changes.only_changes
 *        store: last-values
 *        config: { report_every: 10s }
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kstreams/kstreams.h>

static const ks_host_api *host;

typedef struct only_changes {
    ks_store *last;       /* last value per key */
    int64_t suppressed;   /* since the last report */
} only_changes;

static ks_verdict oc_init(ks_ctx *ctx, void **state)
{
    only_changes *st = calloc(1, sizeof *st);
    int64_t every = 0;
    if (!st)
        return KS_FATAL;
    if (host->store(ctx, NULL, &st->last) != 0 ||
        host->config_duration_ms(ctx, "report_every", &every) != 0 || every <= 0 ||
        host->schedule(ctx, KS_TIME_WALLCLOCK, every) != 0) {
        host->log(ctx, KS_LOG_ERROR, "only_changes: needs a store and report_every > 0");
        free(st);
        return KS_FATAL;
    }
    *state = st;
    return KS_OK;
}

static ks_verdict oc_process(ks_ctx *ctx, void *state, const ks_record *rec)
{
    only_changes *st = state;
    if (!rec->key || rec->key_len == 0 || !rec->value)
        return KS_OK; /* no key or a tombstone: nothing to compare */
    ks_bytes key = {rec->key, rec->key_len}, old;
    int rc = host->store_get(st->last, key, &old);
    if (rc == 0 && old.len == rec->value_len &&
        memcmp(old.data, rec->value, old.len) == 0) {
        st->suppressed++;
        return KS_OK;
    }
    if (rc != 0 && rc != KS_ERR_NOT_FOUND)
        return KS_RETRY;
    rc = host->store_put(st->last, key, (ks_bytes){rec->value, rec->value_len});
    if (rc == KS_ERR_TOO_LARGE)
        return KS_SKIP; /* a key the store cannot hold: poison */
    if (rc != 0)
        return KS_RETRY;
    return host->forward(ctx, rec) == 0 ? KS_OK : KS_RETRY;
}

static ks_verdict oc_punctuate(ks_ctx *ctx, void *state, ks_time_kind kind, int64_t now)
{
    only_changes *st = state;
    if (kind != KS_TIME_WALLCLOCK || st->suppressed == 0)
        return KS_OK;
    char text[32];
    int n = snprintf(text, sizeof text, "%lld", (long long)st->suppressed);
    ks_record r = {.key = "suppressed", .key_len = 10, .value = text,
                   .value_len = (size_t)n, .timestamp = now};
    if (host->forward(ctx, &r) != 0)
        return KS_RETRY;
    st->suppressed = 0;
    return KS_OK;
}

static void oc_close(ks_ctx *ctx, void *state)
{
    (void)ctx;
    free(state);
}

static const ks_config_field oc_config[] = {
    {"report_every", KS_CONFIG_DURATION, 0, "1m",
     "wall-clock interval of the 'suppressed' report"},
};

static const ks_processor_type only_changes_type = {
    .struct_size = sizeof(ks_processor_type),
    .name = "only_changes",
    .description = "forward a record only when its key's value changed",
    .flags = KS_PROC_NEEDS_STORE | KS_PROC_KEYED,
    .config = oc_config,
    .config_count = 1,
    .state_version = 1,
    .init = oc_init,
    .process = oc_process,
    .punctuate = oc_punctuate,
    .close = oc_close,
};

static const ks_processor_type *const processors[] = {&only_changes_type};

static const ks_plugin_descriptor descriptor = {
    KS_DESCRIPTOR_HEADER,
    .name = "changes",
    .version = "0.1.0",
    .build_id = KS_BUILD_ID,
    .processors = processors,
    .processor_count = 1,
};

KS_EXPORT const ks_plugin_descriptor *ks_plugin_entry(const ks_host_api *api)
{
    host = api;
    return &descriptor;
}
