/*
 * reload.c - test plugin for hot deploy, compiled in several builds from
 * this one source (tests/Makefile.am):
 *   reload_v1, reload_v2   processor "tag": counts records per key in its
 *                          store and forwards "MARK COUNT VALUE"
 *                          (MARK = RELOAD_MARK, "v1" or "v2")
 *   reload_state2          like v2, state_version 2 and no migrate
 *   reload_initfail        like v2, init fails
 *   reload_noproc          offers "other" instead of "tag"
 *   reload_migrate         like v2, state_version 2 with a migrate() that
 *                          counts its runs under the key "__migrations"
 * All are plugin "reload", with their own KS_BUILD_ID.
 */
#include <kstreams/kstreams.h>

#include <stdio.h>
#include <string.h>

#ifndef RELOAD_MARK
#define RELOAD_MARK "v1"
#endif
#ifndef RELOAD_STATE_VERSION
#define RELOAD_STATE_VERSION 1
#endif
#ifndef RELOAD_TYPE
#define RELOAD_TYPE "tag"
#endif

static const ks_host_api *host;

static ks_verdict tag_init(ks_ctx *ctx, void **state)
{
#ifdef RELOAD_INIT_FAIL
    host->log(ctx, KS_LOG_ERROR, "reload_initfail: init refuses on purpose");
    (void)state;
    return KS_FATAL;
#else
    ks_store *st = NULL;
    if (host->store(ctx, NULL, &st) != 0)
        return KS_FATAL;
    *state = st;
    return KS_OK;
#endif
}

static ks_verdict tag_process(ks_ctx *ctx, void *state, const ks_record *rec)
{
    ks_store *st = state;
    ks_bytes key = {rec->key, rec->key_len}, old;
    int64_t n = 0;
    if (!rec->key || rec->key_len == 0)
        return KS_SKIP;
    if (host->store_get(st, key, &old) == 0 && old.len == 8)
        n = ks_int64_decode(old.data);
    n++;
    unsigned char enc[8];
    ks_int64_encode(n, enc);
    if (host->store_put(st, key, (ks_bytes){enc, 8}) != 0)
        return KS_RETRY;
    char out[512];
    int len = snprintf(out, sizeof out, "%s %lld %.*s", RELOAD_MARK, (long long)n,
                       (int)(rec->value_len > 400 ? 400 : rec->value_len),
                       rec->value ? (const char *)rec->value : "");
    ks_record o = *rec;
    o.value = out;
    o.value_len = (size_t)len;
    return host->forward(ctx, &o) == 0 ? KS_OK : KS_RETRY;
}

#ifdef RELOAD_MIGRATE
/* Counts its own runs in the store, so a test can see that a migration
 * rolled back with an aborted batch and ran once in the committed one. */
static ks_verdict tag_migrate(ks_ctx *ctx, uint32_t from_version)
{
    ks_store *st = NULL;
    ks_bytes key = {"__migrations", 12}, old;
    int64_t n = 0;
    if (host->store(ctx, NULL, &st) != 0)
        return KS_FATAL;
    if (host->store_get(st, key, &old) == 0 && old.len == 8)
        n = ks_int64_decode(old.data);
    unsigned char enc[8];
    ks_int64_encode(n + 1, enc);
    host->log(ctx, KS_LOG_INFO, "migrating from state version %u", (unsigned)from_version);
    return host->store_put(st, key, (ks_bytes){enc, 8}) == 0 ? KS_OK : KS_RETRY;
}
#endif

static const ks_processor_type tag_type = {
    .struct_size = sizeof(ks_processor_type),
    .name = RELOAD_TYPE,
    .description = "counts per key, forwards MARK COUNT VALUE",
    .flags = KS_PROC_NEEDS_STORE | KS_PROC_KEYED,
    .state_version = RELOAD_STATE_VERSION,
    .init = tag_init,
    .process = tag_process,
#ifdef RELOAD_MIGRATE
    .migrate = tag_migrate,
#endif
};

static const ks_processor_type *const processors[] = {&tag_type};

static const ks_plugin_descriptor descriptor = {
    KS_DESCRIPTOR_HEADER,
    .name = "reload",
    .version = RELOAD_MARK,
    .build_id = KS_BUILD_ID,
    .processors = processors,
    .processor_count = 1,
};

KS_EXPORT const ks_plugin_descriptor *ks_plugin_entry(const ks_host_api *api)
{
    host = api;
    return &descriptor;
}
