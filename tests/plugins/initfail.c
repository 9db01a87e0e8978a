/*
 * initfail.c - test plugin: loads fine; its processor type "boom" fails
 * in init with KS_FATAL, so the runtime must refuse to start a task with it.
 */
#include <kstreams/kstreams.h>

static ks_verdict process(ks_ctx *ctx, void *state, const ks_record *rec)
{
    (void)ctx, (void)state, (void)rec;
    return KS_OK;
}

static ks_verdict boom_init(ks_ctx *ctx, void **state)
{
    (void)ctx;
    *state = NULL;
    return KS_FATAL;
}

static const ks_processor_type boom = {
    .struct_size = sizeof(ks_processor_type),
    .name = "boom",
    .description = "init always fails",
    .init = boom_init,
    .process = process,
};
static const ks_processor_type *const processors[] = {&boom};

static const ks_plugin_descriptor descriptor = {
    KS_DESCRIPTOR_HEADER,
    .name = "initfail",
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
