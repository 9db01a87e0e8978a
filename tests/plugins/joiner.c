/*
 * joiner.c - test plugin: the joiner function "concat" (KS_FN_JOINER, ABI
 * 1.4) for the shipped join: "<left>|<right>", "-" for no table value.
 */
#include <stdlib.h>
#include <string.h>

#include <kstreams/kstreams.h>

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

static const ks_function functions[] = {
    {"concat", KS_FN_JOINER, (void (*)(void))concat},
};

static const ks_plugin_descriptor descriptor = {
    KS_DESCRIPTOR_HEADER,
    .name = "joiner",
    .version = "1.0",
    .build_id = KS_BUILD_ID,
    .functions = functions,
    .function_count = 1,
};

KS_EXPORT const ks_plugin_descriptor *ks_plugin_entry(const ks_host_api *api)
{
    (void)api;
    return &descriptor;
}
