/*
 * minor_newer.c - test plugin: claims ABI minor KS_ABI_MINOR + 1, newer
 * than the engine. The loader must refuse it at the minor check.
 */
#include <kstreams/kstreams.h>

static ks_verdict process(ks_ctx *ctx, void *state, const ks_record *rec)
{
    (void)ctx, (void)state, (void)rec;
    return KS_OK;
}

static const ks_processor_type proc = {
    .struct_size = sizeof(ks_processor_type),
    .name = "noop",
    .process = process,
};
static const ks_processor_type *const processors[] = {&proc};

static const ks_plugin_descriptor descriptor = {
    KS_PLUGIN_MAGIC, (uint32_t)sizeof(ks_plugin_descriptor), KS_ABI_MAJOR,
    KS_ABI_MINOR + 1,
    .name = "minor_newer",
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
