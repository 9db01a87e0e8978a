/*
 * crashy.c - test plugin of the crash suite (tests/integration/test_crash.c):
 * processor type "stall", a pass-through that, the first time in a process
 * it sees a record whose value contains the text "stall", sleeps
 * `stall_ms` milliseconds before forwarding it: a processor slower than
 * transaction.timeout.ms. Once per process, so that the replay of the
 * aborted batch goes through.
 * Also two named functions for the suite's windowed aggregates: "seq_zero"
 * (initializer) and "seq_add" (aggregator), folding the "n" fields of the
 * records into {"c":count,"last":last n,"sum":sum of n}, so that every
 * update of a window says exactly which records it holds.
 * Includes only kstreams.h and libc; links nothing from the engine.
 */
#include <kstreams/kstreams.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
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
    /* forward first: its produce opens the batch's transaction at the
     * broker (a record cache above may have produced nothing yet), so the
     * stall outlives an open transaction */
    int forwarded = host->forward(ctx, rec);
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
    return forwarded == 0 ? KS_OK : KS_RETRY;
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

/* ---- the windowed aggregates' functions ------------------------------ */

#define SEQ_AGG "{\"c\":%lld,\"last\":%lld,\"sum\":%lld}"

static ks_verdict put_agg(const ks_host_api *api, ks_buf *out, long long c, long long last,
                          long long sum)
{
    char buf[96];
    int n = snprintf(buf, sizeof buf, SEQ_AGG, c, last, sum);
    return api->buf_set(out, buf, (size_t)n) == 0 ? KS_OK : KS_RETRY;
}

static ks_verdict seq_zero(const ks_host_api *api, ks_bytes key, ks_buf *out)
{
    (void)key;
    return put_agg(api, out, 0, -1, 0);
}

/* Copy at most len-1 bytes of b into a NUL-terminated buffer. */
static void text_of(ks_bytes b, char *buf, size_t len)
{
    size_t n = b.data && b.len < len ? b.len : (b.data ? len - 1 : 0);
    if (n)
        memcpy(buf, b.data, n);
    buf[n] = '\0';
}

static ks_verdict seq_add(const ks_host_api *api, ks_bytes key, ks_bytes value, ks_bytes agg,
                          ks_buf *out)
{
    (void)key;
    char v[128], a[128];
    text_of(value, v, sizeof v);
    text_of(agg, a, sizeof a);
    long long n, c, last, sum;
    const char *at = strstr(v, "\"n\":");
    if (!at || sscanf(at + 4, "%lld", &n) != 1 || sscanf(a, SEQ_AGG, &c, &last, &sum) != 3)
        return KS_SKIP; /* not ours: the poison policy applies */
    return put_agg(api, out, c + 1, n, sum + n);
}

static const ks_function functions[] = {
    {"seq_zero", KS_FN_INITIALIZER, (void (*)(void))seq_zero},
    {"seq_add", KS_FN_AGGREGATOR, (void (*)(void))seq_add},
};

static const ks_plugin_descriptor descriptor = {
    KS_DESCRIPTOR_HEADER,
    .name = "crashy",
    .version = "1.0.0",
    .build_id = KS_BUILD_ID,
    .processors = processors,
    .processor_count = 1,
    .functions = functions,
    .function_count = sizeof functions / sizeof functions[0],
};

KS_EXPORT const ks_plugin_descriptor *ks_plugin_entry(const ks_host_api *api)
{
    host = api;
    return &descriptor;
}
