/*
 * flaky.c - test plugin: processor "once" passes records through, but the
 * FIRST time an instance sees a record whose value contains the configured
 * marker it returns KS_RETRY after forwarding it. The engine must abort the
 * whole batch (outputs, changelog, store writes of every record before it)
 * and replay it, so downstream sees each record exactly once.
 */
#define _GNU_SOURCE /* memmem */
#include <stdlib.h>
#include <string.h>

#include <kstreams/kstreams.h>

static const ks_host_api *api;

typedef struct seen {
    int64_t *offsets; /* offsets of marked records already failed once */
    size_t count, cap;
    const char *marker;
} seen;

static ks_verdict once_init(ks_ctx *ctx, void **state)
{
    seen *s = calloc(1, sizeof *s);
    if (!s || api->config_string(ctx, "marker", &s->marker) != 0) {
        free(s);
        return KS_FATAL;
    }
    *state = s;
    return KS_OK;
}

static int failed_before(seen *s, int64_t offset)
{
    for (size_t i = 0; i < s->count; i++)
        if (s->offsets[i] == offset)
            return 1;
    if (s->count == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 64;
        s->offsets = realloc(s->offsets, s->cap * sizeof *s->offsets);
    }
    s->offsets[s->count++] = offset;
    return 0;
}

static ks_verdict once_process(ks_ctx *ctx, void *state, const ks_record *rec)
{
    seen *s = state;
    if (api->forward(ctx, rec) != 0)
        return KS_RETRY;
    size_t ml = strlen(s->marker);
    int marked = rec->value && rec->value_len >= ml &&
                 memmem(rec->value, rec->value_len, s->marker, ml) != NULL;
    if (marked && !failed_before(s, rec->offset)) {
        api->log(ctx, KS_LOG_INFO, "failing offset %lld once", (long long)rec->offset);
        return KS_RETRY;
    }
    return KS_OK;
}

static void once_close(ks_ctx *ctx, void *state)
{
    (void)ctx;
    seen *s = state;
    free(s->offsets);
    free(s);
}

static const ks_config_field once_config[] = {
    {"marker", KS_CONFIG_STRING, 0, "FAIL", "values containing this fail once"},
};

static const ks_processor_type once_type = {
    .struct_size = sizeof(ks_processor_type),
    .name = "once",
    .config = once_config,
    .config_count = 1,
    .state_version = 1,
    .init = once_init,
    .process = once_process,
    .close = once_close,
};

static const ks_processor_type *const processors[] = {&once_type};

static const ks_plugin_descriptor descriptor = {
    KS_DESCRIPTOR_HEADER,
    .name = "flaky",
    .version = "1.0",
    .build_id = KS_BUILD_ID,
    .processors = processors,
    .processor_count = 1,
};

KS_EXPORT const ks_plugin_descriptor *ks_plugin_entry(const ks_host_api *host)
{
    api = host;
    return &descriptor;
}
