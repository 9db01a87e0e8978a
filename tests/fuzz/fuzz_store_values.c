/*
 * fuzz_store_values.c - what the shipped stateful plugins read back from
 * their stores (count's int64, windowed counts and session ranges of
 * lib/window and plugins/window.c, join's timestamped table values,
 * join.streams' buffered entries and index keys, the mailbox's ledger and
 * horizon rows), on any bytes, as a damaged state directory or a changelog
 * written by another build would hand them over. The plugins
 * (build-fuzz/plugins, and examples/mailbox for the mailbox's handler;
 * instrumented) run in
 * the test driver (engine/testdriver), opened once; per input, raw
 * entries go into the stores through the changelog restore path
 * (ks_task_restore_put), then one record is piped and the batch aborted,
 * so every input starts from the same stores.
 *
 * Input: a count of entries, each STORE KLEN KEY VLEN VALUE (VLEN 255: a
 * delete), then SOURCE, TIMESTAMP (8 bytes), KLEN KEY and the record's
 * value (the rest); every record has offset 7 and a ks.event_id header,
 * as an outbox command would. A plugin may refuse what it reads (KS_FATAL, a
 * logged error); it never crashes, leaks or reads past a value.
 * fuzz_store_values.options runs it with -close_fd_mask=2: those logged
 * errors would fill megabytes a minute (libFuzzer's own output and the
 * sanitizers' reports still get through).
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kstreams/testdriver.h"
#include "base/log.h"
#include "testdriver/testdriver_internal.h"

static const char YAML_FMT[] =
    "application: fuzzvalues\n"
    "kafka: { bootstrap: 127.0.0.1:9092 }\n"
    "plugin_path: [%s/plugins/.libs, %s/examples/mailbox/.libs]\n"
    "sources:\n"
    "  orders: { topic: orders, key: string, value: json }\n"
    "  payments: { topic: payments, key: string, value: json }\n"
    "  commands: { topic: mailbox, key: string, value: json }\n"
    "tables:\n"
    "  customers: { topic: customers, key: string, value: json }\n"
    "nodes:\n"
    "  - { name: plain, type: count, from: orders, store: c_plain }\n"
    "  - { name: tumbling, type: count, from: orders, store: c_tumbling,\n"
    "      window: { kind: tumbling, size: 10ms, grace: 5ms, emit: final } }\n"
    "  - { name: hopping, type: count, from: payments, store: c_hopping,\n"
    "      window: { kind: hopping, size: 20ms, advance: 5ms } }\n"
    "  - { name: sessions, type: count, from: orders, store: c_sessions,\n"
    "      window: { kind: session, gap: 10ms, grace: 5ms } }\n"
    "  - { name: sliding, type: count, from: payments, store: c_sliding,\n"
    "      window: { kind: sliding, size: 10ms, grace: 5ms } }\n"
    "  - { name: enrich, type: join, from: orders, table: customers,\n"
    "      config: { kind: left, joiner: merge } }\n"
    "  - { name: matched, type: join.streams, from: [orders, payments], store: j_outer,\n"
    "      config: { left: orders, right: payments, kind: outer },\n"
    "      window: { before: 10ms, after: 5ms, grace: 5ms } }\n"
    "  - { name: mailbox, type: mailbox, from: commands, stores: [ledger, balances],\n"
    "      functions: { handler: balances.apply }, config: { ledger_retention: 3 } }\n"
    "sinks:\n"
    "  - { from: plain, topic: o1, key: string, value: int64 }\n"
    "  - { from: tumbling, topic: o2, key: json, value: int64 }\n"
    "  - { from: hopping, topic: o3, key: json, value: int64 }\n"
    "  - { from: sessions, topic: o4, key: json, value: int64 }\n"
    "  - { from: sliding, topic: o5, key: json, value: int64 }\n"
    "  - { from: enrich, topic: o6, key: string, value: json }\n"
    "  - { from: matched, topic: o7, key: string, value: json }\n"
    "  - { from: mailbox, topic: o8, key: string, value: json }\n";

static const char *const sources[] = {"orders", "payments", "customers", "commands"};
static ks_driver *drv;
static size_t nstores;

/* The driver's temporary state directory goes with it. */
static void close_driver(void)
{
    ks_driver_close(drv);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    char exe[PATH_MAX], yaml[sizeof YAML_FMT + 2 * PATH_MAX], err[2048];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        abort();
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    *slash = '\0';
    snprintf(yaml, sizeof yaml, YAML_FMT, exe, exe);
    ks_driver_options opt = {.partitions = 1, .manual_commit = 1, .wallclock_start_ms = 1};
    if (ks_driver_open_text("fuzz.yaml", yaml, strlen(yaml), &opt, &drv, err, sizeof err) !=
        0) {
        fprintf(stderr, "fuzz_store_values: %s\n", err);
        abort();
    }
    atexit(close_driver);
    nstores = drv->topo->pipeline->store_count;
    ks_log_set_level(KS_LOG_ERROR);
    return 0;
}

typedef struct reader {
    const uint8_t *p;
    size_t n;
} reader;

static uint8_t u8(reader *r)
{
    if (r->n == 0)
        return 0;
    r->n--;
    return *r->p++;
}

static ks_bytes bytes(reader *r, size_t len)
{
    if (len > r->n)
        len = r->n;
    ks_bytes b = {r->p, len};
    r->p += len, r->n -= len;
    return b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    reader r = {data, len};
    ks_task *task = drv->tasks[0];
    if (ks_task_begin(task) != 0)
        abort();
    unsigned entries = u8(&r) % 5;
    for (unsigned i = 0; i < entries; i++) {
        int store = (int)(u8(&r) % nstores);
        ks_bytes key = bytes(&r, u8(&r));
        uint8_t vlen = u8(&r);
        /* copies of their exact size: a read past one is ASan's */
        unsigned char *k = malloc(key.len + 1), *v = malloc(vlen + 1u);
        if (!k || !v)
            abort();
        if (key.len)
            memcpy(k, key.data, key.len);
        ks_bytes value = vlen == 255 ? (ks_bytes){NULL, 0} : bytes(&r, vlen);
        if (value.len)
            memcpy(v, value.data, value.len);
        value.data = v;
        ks_task_restore_put(task, store, (ks_bytes){k, key.len}, vlen == 255 ? NULL : &value,
                            0);
        free(k);
        free(v);
    }
    const char *source = sources[u8(&r) % 4];
    int64_t ts = 0;
    for (int i = 0; i < 8; i++)
        ts = (int64_t)((uint64_t)ts << 8 | u8(&r));
    ks_bytes key = bytes(&r, u8(&r) % 32);
    ks_bytes value = bytes(&r, r.n);
    unsigned char *k = malloc(key.len + 1), *v = malloc(value.len + 1);
    if (!k || !v)
        abort();
    if (key.len)
        memcpy(k, key.data, key.len);
    if (value.len)
        memcpy(v, value.data, value.len);
    drv->next_input[0] = 7; /* one offset: the mailbox's ledger rows are keyed by it */
    static const ks_header event_id = {"ks.event_id", "0123456789abcdef0123456789abcdef", 32};
    ks_record rec = {.key = key.len ? k : NULL, .key_len = key.len, .value = v,
                     .value_len = value.len, .timestamp = ts, .partition = -1,
                     .headers = &event_id, .header_count = 1};
    ks_driver_pipe_record(drv, source, &rec);
    free(k);
    free(v);
    /* undo the batch: stores, outputs and events of this input */
    ks_drv_finish(drv, KS_FATAL);
    return 0;
}
