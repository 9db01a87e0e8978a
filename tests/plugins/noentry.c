/*
 * noentry.c - test plugin that defines ks_plugin_entry but does not export
 * it (no KS_EXPORT, built with -fvisibility=hidden): the loader must refuse
 * it with "no entry symbol".
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
    KS_DESCRIPTOR_HEADER,
    .name = "noentry",
    .version = "1.0.0",
    .build_id = KS_BUILD_ID,
    .processors = processors,
    .processor_count = 1,
};

/* Hidden: the mistake this plugin stands for. */
const ks_plugin_descriptor *ks_plugin_entry(const ks_host_api *api);
const ks_plugin_descriptor *ks_plugin_entry(const ks_host_api *api)
{
    (void)api;
    return &descriptor;
}
