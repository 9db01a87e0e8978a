/*
 * crashy.c - test plugin of the crash suite (tests/integration/test_crash.c):
 * processor type "stall", a pass-through that, the first time in a process
 * it sees a record whose value contains the text "stall", sleeps
 * `stall_ms` milliseconds before forwarding it: a processor slower than
 * transaction.timeout.ms. Once per process, so that the replay of the
 * aborted batch goes through.
 * Includes only kstreams.h and libc; links nothing from the engine.
 */
#include <kstreams/kstreams.h>

#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

static const ks_host_api *host;
static atomic_int stalled; /* the one stall of this process happened */

static ks_verdict stall_init(ks_ctx *ctx, void **state)
{
    (void)ctx;
    *state = NULL;
    return KS_OK;
}

static int has_marker(const ks_record *rec)
{
    static const char marker[] = "stall";
    const char *v = rec->value;
    size_t n = sizeof marker - 1;
    for (size_t i = 0; v && i + n <= rec->value_len; i++)
        if (memcmp(v + i, marker, n) == 0)
            return 1;
    return 0;
}

static ks_verdict stall_process(ks_ctx *ctx, void *state, const ks_record *rec)
{
    (void)state;
    int64_t ms = 0;
    if (has_marker(rec) && host->config_duration_ms(ctx, "stall_ms", &ms) == 0 && ms > 0 &&
        atomic_exchange(&stalled, 1) == 0) {
        host->log(ctx, KS_LOG_WARN, "stall: sleeping %lld ms on the marker record",
                  (long long)ms);
        struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
        host->log(ctx, KS_LOG_WARN, "stall: done");
    }
    return host->forward(ctx, rec) == 0 ? KS_OK : KS_RETRY;
}

static const ks_config_field stall_config[] = {
    {"stall_ms", KS_CONFIG_DURATION, 0, "0",
     "how long to sleep on the first marker record of the process"},
};

static const ks_processor_type stall_type = {
    .struct_size = sizeof(ks_processor_type),
    .name = "stall",
    .description = "forwards every record; sleeps once on a record containing \"stall\"",
    .config = stall_config,
    .config_count = 1,
    .init = stall_init,
    .process = stall_process,
};

static const ks_processor_type *const processors[] = {&stall_type};

static const ks_plugin_descriptor descriptor = {
    KS_DESCRIPTOR_HEADER,
    .name = "crashy",
    .version = "1.0.0",
    .build_id = KS_BUILD_ID,
    .processors = processors,
    .processor_count = 1,
};

KS_EXPORT const ks_plugin_descriptor *ks_plugin_entry(const ks_host_api *api)
{
    host = api;
    return &descriptor;
}
