/*
 * serdes.c - test plugin "serdes": processor types "probe" and
 * "rekey_probe" (the same, flagged KS_PROC_CHANGES_KEY) log at init what
 * the host says of the serdes (ABI 1.6):
 *   "probe NODE input KEY/VALUE"
 *   "probe NODE children KEY/VALUE"           (child_serde with NULL)
 *   "probe NODE child NAME KEY/VALUE"         for each name in `children`
 *   "probe NODE child NAME not found"
 *   "probe NODE checked N"                    (input_checked)
 * and forward every record unchanged.
 */
#include <kstreams/kstreams.h>

#include <string.h>

static const ks_host_api *host;

static const char *name_of(ks_serde_kind k)
{
    switch (k) {
    case KS_SERDE_KIND_BYTES:
        return "bytes";
    case KS_SERDE_KIND_STRING:
        return "string";
    case KS_SERDE_KIND_JSON:
        return "json";
    case KS_SERDE_KIND_INT64:
        return "int64";
    default:
        return "unknown";
    }
}

static ks_verdict probe_init(ks_ctx *ctx, void **state)
{
    const char *node = host->node_name(ctx);
    ks_serde_kind k, v;
    if (host->input_serde(ctx, &k, &v) == 0)
        host->log(ctx, KS_LOG_INFO, "probe %s input %s/%s", node, name_of(k), name_of(v));
    host->log(ctx, KS_LOG_INFO, "probe %s checked %d", node, host->input_checked(ctx));
    if (host->child_serde(ctx, NULL, &k, &v) == 0)
        host->log(ctx, KS_LOG_INFO, "probe %s children %s/%s", node, name_of(k), name_of(v));
    const char *list = "";
    host->config_string(ctx, "children", &list);
    while (*list) {
        char name[128];
        size_t n = strcspn(list, ",");
        if (n >= sizeof name)
            n = sizeof name - 1;
        memcpy(name, list, n);
        name[n] = '\0';
        list += n + (list[n] == ',');
        if (host->child_serde(ctx, name, &k, &v) == 0)
            host->log(ctx, KS_LOG_INFO, "probe %s child %s %s/%s", node, name, name_of(k),
                      name_of(v));
        else
            host->log(ctx, KS_LOG_INFO, "probe %s child %s not found", node, name);
    }
    *state = NULL;
    return KS_OK;
}

static ks_verdict probe_process(ks_ctx *ctx, void *state, const ks_record *rec)
{
    (void)state;
    return host->forward(ctx, rec) == 0 ? KS_OK : KS_RETRY;
}

static const ks_config_field probe_config[] = {
    {"children", KS_CONFIG_STRING, 0, "", "child names to ask about, comma-separated"},
};

static const ks_processor_type probe = {
    .struct_size = sizeof(ks_processor_type),
    .name = "probe",
    .description = "logs the serdes the host reports",
    .config = probe_config,
    .config_count = 1,
    .state_version = 1,
    .init = probe_init,
    .process = probe_process,
};

static const ks_processor_type rekey_probe = {
    .struct_size = sizeof(ks_processor_type),
    .name = "rekey_probe",
    .description = "probe, flagged as changing keys",
    .flags = KS_PROC_CHANGES_KEY,
    .config = probe_config,
    .config_count = 1,
    .state_version = 1,
    .init = probe_init,
    .process = probe_process,
};

static const ks_processor_type *const processors[] = {&probe, &rekey_probe};

static const ks_plugin_descriptor descriptor = {
    KS_DESCRIPTOR_HEADER,
    .name = "serdes",
    .version = "1",
    .build_id = KS_BUILD_ID,
    .processors = processors,
    .processor_count = 2,
};

KS_EXPORT const ks_plugin_descriptor *ks_plugin_entry(const ks_host_api *api)
{
    if (!KS_API_HAS(api, input_checked))
        return NULL;
    host = api;
    return &descriptor;
}
