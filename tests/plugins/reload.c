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
 *   reload_segv            like v1, but process() dereferences NULL on a
 *                          value starting with "boom" (crash reports)
 *   reload_segv_first      process() dereferences NULL on every record, so
 *                          on its first (automatic rollback); mark "v9"
 *   reload_fmt2            state_version 2 in ANOTHER value format: counts
 *                          are text "c=N", not 8 bytes; its migrate()
 *                          converts every 8-byte count and counts its runs
 *                          under "__migrations" ("m=N"); process() logs
 *                          "OLD FORMAT" and forwards "old-format ..." when
 *                          it meets a value it cannot read
 * All are plugin "reload", with their own KS_BUILD_ID.
 */
#include <kstreams/kstreams.h>

#include <stdio.h>
#include <stdlib.h>
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
#ifdef RELOAD_SEGV_FIRST
    {
        int *volatile nowhere = NULL;
        *nowhere = 1;
    }
#endif
#ifdef RELOAD_SEGV
    if (rec->value && rec->value_len >= 4 && memcmp(rec->value, "boom", 4) == 0) {
        int *volatile nowhere = NULL;
        *nowhere = 1;
    }
#endif
#ifdef RELOAD_FORMAT2
    if (host->store_get(st, key, &old) == 0) {
        char txt[32];
        long long c;
        if (old.len >= sizeof txt || old.len < 3 ||
            (memcpy(txt, old.data, old.len), txt[old.len] = '\0', sscanf(txt, "c=%lld", &c)) != 1) {
            host->log(ctx, KS_LOG_ERROR, "OLD FORMAT: key %.*s has a %zu-byte value",
                      (int)rec->key_len, (const char *)rec->key, old.len);
            ks_record o = *rec;
            o.value = "old-format";
            o.value_len = 10;
            return host->forward(ctx, &o) == 0 ? KS_OK : KS_RETRY;
        }
        n = c;
    }
    n++;
    char enc[32];
    int elen = snprintf(enc, sizeof enc, "c=%lld", (long long)n);
    if (host->store_put(st, key, (ks_bytes){enc, (size_t)elen}) != 0)
        return KS_RETRY;
#else
    if (host->store_get(st, key, &old) == 0 && old.len == 8)
        n = ks_int64_decode(old.data);
    n++;
    unsigned char enc[8];
    ks_int64_encode(n, enc);
    if (host->store_put(st, key, (ks_bytes){enc, 8}) != 0)
        return KS_RETRY;
#endif
    char out[512];
    int len = snprintf(out, sizeof out, "%s %lld %.*s", RELOAD_MARK, (long long)n,
                       (int)(rec->value_len > 400 ? 400 : rec->value_len),
                       rec->value ? (const char *)rec->value : "");
    ks_record o = *rec;
    o.value = out;
    o.value_len = (size_t)len;
    return host->forward(ctx, &o) == 0 ? KS_OK : KS_RETRY;
}

#ifdef RELOAD_FORMAT2
/* The 8-byte keys of a store, collected before they are rewritten (a
 * range callback must not write to the store it scans). */
typedef struct keys {
    char (*k)[512];
    size_t *len;
    size_t n, cap;
} keys;

static int collect(void *arg, ks_bytes key, ks_bytes value)
{
    keys *ks = arg;
    if (value.len != 8 || key.len >= 512)
        return 0;
    if (ks->n == ks->cap) {
        size_t cap = ks->cap ? ks->cap * 2 : 64;
        char(*k)[512] = realloc(ks->k, cap * sizeof *k);
        size_t *len = k ? realloc(ks->len, cap * sizeof *len) : NULL;
        if (k)
            ks->k = k;
        if (!len)
            return 1;
        ks->len = len;
        ks->cap = cap;
    }
    memcpy(ks->k[ks->n], key.data, key.len);
    ks->len[ks->n++] = key.len;
    return 0;
}

/* Version 1 -> 2: every 8-byte count becomes "c=N"; "__migrations" counts
 * the runs that committed (a run rolled back leaves no trace). */
static ks_verdict tag_migrate(ks_ctx *ctx, uint32_t from_version)
{
    ks_store *st = NULL;
    if (from_version != 1 || host->store(ctx, NULL, &st) != 0)
        return KS_FATAL;
    keys ks = {0};
    if (host->store_range(st, (ks_bytes){NULL, 0}, (ks_bytes){NULL, 0}, collect, &ks) != 0) {
        free(ks.k);
        free(ks.len);
        return KS_RETRY;
    }
    ks_verdict v = KS_OK;
    for (size_t i = 0; i < ks.n && v == KS_OK; i++) {
        ks_bytes key = {ks.k[i], ks.len[i]}, old;
        if (host->store_get(st, key, &old) != 0 || old.len != 8) {
            v = KS_RETRY;
            break;
        }
        char enc[32];
        int elen = snprintf(enc, sizeof enc, "c=%lld", (long long)ks_int64_decode(old.data));
        if (host->store_put(st, key, (ks_bytes){enc, (size_t)elen}) != 0)
            v = KS_RETRY;
    }
    size_t converted = ks.n;
    free(ks.k);
    free(ks.len);
    if (v != KS_OK)
        return v;
    ks_bytes mkey = {"__migrations", 12}, old;
    long long runs = 0;
    char txt[32];
    if (host->store_get(st, mkey, &old) == 0 && old.len < sizeof txt) {
        memcpy(txt, old.data, old.len);
        txt[old.len] = '\0';
        if (sscanf(txt, "m=%lld", &runs) != 1)
            runs = 0;
    }
    int mlen = snprintf(txt, sizeof txt, "m=%lld", runs + 1);
    host->log(ctx, KS_LOG_INFO, "format 2: converted %zu counts from state version %u", converted,
              (unsigned)from_version);
    return host->store_put(st, mkey, (ks_bytes){txt, (size_t)mlen}) == 0 ? KS_OK : KS_RETRY;
}
#elif defined(RELOAD_MIGRATE)
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
#if defined(RELOAD_MIGRATE) || defined(RELOAD_FORMAT2)
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
