/*
 * sessions.c - functions for the windowed example (examples/windows):
 * bytes per user session with the shipped `aggregate` and session windows.
 *
 *   zero       (initializer)  an int64 0, 8 bytes big-endian
 *   add_bytes  (aggregator)   agg + the integer "bytes" field of a JSON view
 *   merge_sum  (merger)       a + b: two sessions joined by a record that
 *                             bridges them hold the bytes of both
 *
 * A view whose "bytes" is missing or not an integer is a poison record
 * (KS_SKIP): the pipeline's poison policy decides.
 */
#include <kstreams/kstreams.h>

#include <stdlib.h>
#include <string.h>

/* The integer after "bytes": in a flat JSON object; -1 when absent. */
static int view_bytes(ks_bytes value, int64_t *bytes)
{
    static const char field[] = "\"bytes\"";
    const char *p = value.data, *end = p + value.len;
    for (; p + sizeof field - 1 <= end; p++) {
        if (memcmp(p, field, sizeof field - 1) != 0)
            continue;
        p += sizeof field - 1;
        while (p < end && (*p == ' ' || *p == ':'))
            p++;
        if (p >= end || *p < '0' || *p > '9')
            return -1;
        int64_t v = 0;
        while (p < end && *p >= '0' && *p <= '9')
            v = v * 10 + (*p++ - '0');
        *bytes = v;
        return 0;
    }
    return -1;
}

static ks_verdict put_int64(const ks_host_api *api, ks_buf *out, int64_t v)
{
    unsigned char b[8];
    ks_int64_encode(v, b);
    return api->buf_set(out, b, sizeof b) == 0 ? KS_OK : KS_RETRY;
}

static ks_verdict zero(const ks_host_api *api, ks_bytes key, ks_buf *out)
{
    (void)key;
    return put_int64(api, out, 0);
}

static ks_verdict add_bytes(const ks_host_api *api, ks_bytes key, ks_bytes value,
                            ks_bytes agg, ks_buf *out)
{
    (void)key;
    int64_t bytes;
    if (agg.len != 8 || view_bytes(value, &bytes) != 0)
        return KS_SKIP;
    return put_int64(api, out, ks_int64_decode(agg.data) + bytes);
}

static ks_verdict merge_sum(const ks_host_api *api, ks_bytes key, ks_bytes a, ks_bytes b,
                            ks_buf *out)
{
    (void)key;
    if (a.len != 8 || b.len != 8)
        return KS_FATAL;
    return put_int64(api, out, ks_int64_decode(a.data) + ks_int64_decode(b.data));
}

static const ks_function functions[] = {
    {"zero", KS_FN_INITIALIZER, (void (*)(void))zero},
    {"add_bytes", KS_FN_AGGREGATOR, (void (*)(void))add_bytes},
    {"merge_sum", KS_FN_MERGER, (void (*)(void))merge_sum},
};

static const ks_plugin_descriptor descriptor = {
    KS_DESCRIPTOR_HEADER,
    .name = "sessions",
    .version = "0.1.0",
    .build_id = KS_BUILD_ID,
    .processors = NULL,
    .processor_count = 0,
    .functions = functions,
    .function_count = sizeof functions / sizeof functions[0],
};

KS_EXPORT const ks_plugin_descriptor *ks_plugin_entry(const ks_host_api *api)
{
    (void)api; /* the functions get the API with every call */
    return &descriptor;
}
