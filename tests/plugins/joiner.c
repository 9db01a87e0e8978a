/*
 * joiner.c - test plugin: the joiner function "concat" (KS_FN_JOINER, ABI
 * 1.4) for the shipped join: "<left>|<right>", "-" for no table value; and
 * the processor "writer", which tries to write its first store (a table's,
 * through `table:`) and forwards "rc=<what store_put returned>".
 *
 * The key mapper "before_colon" (KS_FN_KEY_MAPPER, ABI 1.6): the key is
 * the value's text before its first ':' ("c7:rest" -> "c7"); a value
 * without ':' (or a tombstone) has none; a value starting with '!' is
 * poison (KS_SKIP).
 *
 * Built a second time with -DJOINER_ABI_MINOR=3 (joiner_old): a plugin of
 * ABI 1.3 cannot have a function of kind 6, and the loader says so.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kstreams/kstreams.h>

#ifndef JOINER_ABI_MINOR
#define JOINER_ABI_MINOR KS_ABI_MINOR
#endif

static const ks_host_api *host;

static ks_verdict concat(const ks_host_api *api, ks_bytes key, ks_bytes left,
                         const ks_bytes *right, ks_buf *out)
{
    (void)key;
    size_t rlen = right ? right->len : 1;
    char *buf = malloc(left.len + 1 + rlen);
    if (!buf)
        return KS_RETRY;
    memcpy(buf, left.data, left.len);
    buf[left.len] = '|';
    memcpy(buf + left.len + 1, right ? right->data : "-", rlen);
    int rc = api->buf_set(out, buf, left.len + 1 + rlen);
    free(buf);
    return rc == 0 ? KS_OK : KS_RETRY;
}

#if JOINER_ABI_MINOR >= 6
static ks_verdict before_colon(const ks_host_api *api, ks_bytes key, ks_bytes value,
                               ks_buf *out)
{
    (void)key;
    const char *v = value.data;
    if (value.len && v[0] == '!')
        return KS_SKIP;
    const char *colon = value.len ? memchr(v, ':', value.len) : NULL;
    if (colon && api->buf_set(out, v, (size_t)(colon - v)) != 0)
        return KS_RETRY;
    return KS_OK;
}
#endif

static ks_verdict writer_init(ks_ctx *ctx, void **state)
{
    ks_store *st = NULL;
    if (host->store(ctx, NULL, &st) != 0)
        return KS_FATAL;
    *state = st;
    return KS_OK;
}

static ks_verdict writer_process(ks_ctx *ctx, void *state, const ks_record *rec)
{
    ks_bytes key = {rec->key, rec->key_len}, value = {"x", 1};
    char out[32];
    int n = snprintf(out, sizeof out, "rc=%d", host->store_put(state, key, value));
    ks_record r = *rec;
    r.value = out;
    r.value_len = (size_t)n;
    return host->forward(ctx, &r) == 0 ? KS_OK : KS_RETRY;
}

static const ks_processor_type writer_type = {
    .struct_size = sizeof(ks_processor_type),
    .name = "writer",
    .init = writer_init,
    .process = writer_process,
};
static const ks_processor_type *const types[] = {&writer_type};

static const ks_function functions[] = {
    {"concat", KS_FN_JOINER, (void (*)(void))concat},
#if JOINER_ABI_MINOR >= 6
    {"before_colon", KS_FN_KEY_MAPPER, (void (*)(void))before_colon},
#endif
};

static const ks_plugin_descriptor descriptor = {
    KS_PLUGIN_MAGIC,
    (uint32_t)sizeof(ks_plugin_descriptor),
    KS_ABI_MAJOR,
    JOINER_ABI_MINOR,
    .name = "joiner",
    .version = "1.0",
    .build_id = KS_BUILD_ID,
    .processors = types,
    .processor_count = 1,
    .functions = functions,
    .function_count = sizeof functions / sizeof functions[0],
};

KS_EXPORT const ks_plugin_descriptor *ks_plugin_entry(const ks_host_api *api)
{
    host = api;
    return &descriptor;
}
