/*
 * undefsym.c - test plugin: calls a function it does not define and
 * links nothing that defines it (the mistake of calling into the engine
 * instead of through ks_host_api). dlopen with RTLD_NOW must fail and
 * the loader must report it.
 */
#include <kstreams/kstreams.h>

/* Defined nowhere: resolving it at dlopen time fails. */
extern int ks_not_in_any_library(void);

static ks_verdict call_missing(ks_ctx *ctx, void *state, const ks_record *rec)
{
    (void)ctx, (void)state, (void)rec;
    return ks_not_in_any_library() == 0 ? KS_OK : KS_FATAL;
}

static const ks_processor_type proc = {
    .struct_size = sizeof(ks_processor_type),
    .name = "missing",
    .process = call_missing,
};
static const ks_processor_type *const processors[] = {&proc};

static const ks_plugin_descriptor descriptor = {
    KS_DESCRIPTOR_HEADER,
    .name = "undefsym",
    .version = "1.0.0",
    .build_id = KS_BUILD_ID,
    .processors = processors,
    .processor_count = sizeof processors / sizeof processors[0],
};

KS_EXPORT const ks_plugin_descriptor *ks_plugin_entry(const ks_host_api *api)
{
    (void)api;
    return &descriptor;
}
