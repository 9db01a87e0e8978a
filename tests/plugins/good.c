/*
 * good.c - a well-formed test plugin: processor types "upper" (uppercases
 * the value and forwards it) and "pass" (forwards the record unchanged),
 * and the reducer "sum" (adds two int64 values).
 * Includes only kstreams.h and libc; links nothing from the engine.
 */
#include <kstreams/kstreams.h>

#include <stdlib.h>
#include <string.h>

/* Saved by the entry point; valid while the plugin is loaded. */
static const ks_host_api *host;

/* ---- upper -------------------------------------------------------- */

typedef struct upper_state {
    char *buf; /* reused for every record: forward() copies what it needs */
    size_t cap;
} upper_state;

static ks_verdict upper_init(ks_ctx *ctx, void **state)
{
    (void)ctx;
    upper_state *st = calloc(1, sizeof *st);
    if (!st)
        return KS_FATAL;
    *state = st;
    return KS_OK;
}

static ks_verdict upper_process(ks_ctx *ctx, void *state, const ks_record *rec)
{
    upper_state *st = state;
    ks_record out = *rec;
    if (rec->value && rec->value_len > 0) {
        if (rec->value_len > st->cap) {
            char *grown = realloc(st->buf, rec->value_len);
            if (!grown)
                return KS_RETRY;
            st->buf = grown;
            st->cap = rec->value_len;
        }
        const unsigned char *in = rec->value;
        for (size_t i = 0; i < rec->value_len; i++)
            st->buf[i] =
                (char)(in[i] >= 'a' && in[i] <= 'z' ? in[i] - 32 : in[i]);
        out.value = st->buf;
    }
    return host->forward(ctx, &out) == 0 ? KS_OK : KS_RETRY;
}

static void upper_close(ks_ctx *ctx, void *state)
{
    (void)ctx;
    upper_state *st = state;
    if (st)
        free(st->buf);
    free(st);
}

static const ks_processor_type upper_type = {
    .struct_size = sizeof(ks_processor_type),
    .name = "upper",
    .description = "uppercases ASCII letters of the value",
    .init = upper_init,
    .process = upper_process,
    .close = upper_close,
};

/* ---- pass --------------------------------------------------------- */

static ks_verdict pass_init(ks_ctx *ctx, void **state)
{
    (void)ctx;
    *state = NULL;
    return KS_OK;
}

static ks_verdict pass_process(ks_ctx *ctx, void *state, const ks_record *rec)
{
    (void)state;
    return host->forward(ctx, rec) == 0 ? KS_OK : KS_RETRY;
}

static const ks_processor_type pass_type = {
    .struct_size = sizeof(ks_processor_type),
    .name = "pass",
    .description = "forwards every record unchanged",
    .init = pass_init,
    .process = pass_process,
};

/* ---- sum ---------------------------------------------------------- */

static ks_verdict sum_reduce(const ks_host_api *api, ks_bytes key,
                             ks_bytes acc, ks_bytes value, ks_buf *out)
{
    (void)key;
    if (acc.len != 8 || value.len != 8)
        return KS_SKIP; /* not int64: poison */
    unsigned char sum[8];
    ks_int64_encode(ks_int64_decode(acc.data) + ks_int64_decode(value.data),
                    sum);
    return api->buf_set(out, sum, sizeof sum) == 0 ? KS_OK : KS_RETRY;
}

/* ---- descriptor --------------------------------------------------- */

static const ks_processor_type *const processors[] = {&upper_type,
                                                      &pass_type};

static const ks_function functions[] = {
    {"sum", KS_FN_REDUCER, (void (*)(void))sum_reduce},
};

static const ks_plugin_descriptor descriptor = {
    KS_DESCRIPTOR_HEADER,
    .name = "good",
    .version = "1.0.0",
    .build_id = KS_BUILD_ID,
    .processors = processors,
    .processor_count = 2,
    .functions = functions,
    .function_count = 1,
};

KS_EXPORT const ks_plugin_descriptor *ks_plugin_entry(const ks_host_api *api)
{
    host = api;
    return &descriptor;
}
