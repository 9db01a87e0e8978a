/*
 * test_query.c - `kstreams query` against a RUNNING engine (and the same
 * instance once stopped), with the real broker: a count pipeline on 2
 * partitions, records fed while the engine runs, stores read by a separate
 * `kstreams query` process read-only. The engine must not notice: it stops
 * cleanly (exit 0) and its outputs stay exact. Then windowed stores
 * (tumbling windows and sessions, event time from a JSON field): the
 * windows of one key, of a time range over every key, of binary keys, with
 * exact values, while the engine runs and after it stopped.
 */
#include <CUnit/CUnit.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "itest.h"

#define KEYS 10

static char dir[256], app[128], in_topic[128], out_topic[128], yaml[512], log_a[512];

static void make_rec(int i, char *key, size_t klen, char *value, size_t vlen,
                     int32_t *partition, void *arg)
{
    (void)partition;
    (void)arg;
    snprintf(key, klen, "key-%d", i % KEYS);
    snprintf(value, vlen, "v%d", i);
}

/* Run `kstreams ARGS` (a shell-safe string); stdout into out. Returns the
 * exit status, -1 when it did not exit. */
static int kstreams(const char *args, char *out, size_t outlen)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s 2>/dev/null", it_kstreams(), args);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t n = fread(out, 1, outlen - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Sum and number of the counts in `kstreams query --format json --int64`;
 * -1 when the query failed. */
static long query_sum(size_t *entries)
{
    static char out[1 << 16];
    char args[1024];
    snprintf(args, sizeof args, "query %s counts --format json --int64", yaml);
    if (kstreams(args, out, sizeof out) != 0)
        return -1;
    json_t *doc = json_loads(out, 0, NULL);
    if (!json_is_array(doc)) {
        json_decref(doc);
        return -1;
    }
    long sum = 0;
    size_t i;
    json_t *o;
    json_array_foreach(doc, i, o) sum += (long)json_integer_value(json_object_get(o, "value"));
    *entries = json_array_size(doc);
    json_decref(doc);
    return sum;
}

/* Query until the stores hold `want` in total (the store commit follows the
 * Kafka commit), at most max_ms. */
static long wait_sum(long want, int max_ms, size_t *entries)
{
    int64_t until = it_now_ms() + max_ms;
    long sum;
    do {
        sum = query_sum(entries);
        if (sum == want)
            break;
        it_sleep_ms(200);
    } while (it_now_ms() < until);
    return sum;
}

static void test_query_running_and_stopped(void)
{
    it_tempdir(dir, sizeof dir);
    it_unique(app, sizeof app, "query");
    it_unique(in_topic, sizeof in_topic, "query-in");
    it_unique(out_topic, sizeof out_topic, "query-out");
    CU_ASSERT_FATAL(it_create_topic(in_topic, 2) == 0);
    snprintf(yaml, sizeof yaml, "%s/pipeline.yaml", dir);
    snprintf(log_a, sizeof log_a, "%s/engine.log", dir);
    /* cache_bytes: 0: the checks below see every update of the count */
    it_write_file(yaml,
                  "application: %s\n"
                  "kafka: { bootstrap: [%s] }\n"
                  "guarantee: exactly-once\n"
                  "commit_interval_ms: 100\n"
                  "state_dir: %s/state\n"
                  "plugin_path: [%s/plugins/.libs]\n"
                  "sources:\n"
                  "  in: { topic: %s, key: string, value: string }\n"
                  "nodes:\n"
                  "  - { name: per_key, type: count, from: in, store: counts, cache_bytes: 0 }\n"
                  "sinks:\n"
                  "  - { from: per_key, topic: %s, key: string, value: int64, create: true }\n",
                  app, it_bootstrap(), dir, KS_TEST_BUILDDIR, in_topic, out_topic);

    pid_t eng = it_engine_start(yaml, "a", log_a);
    CU_ASSERT_FATAL(eng > 0);
    /* feed in rounds, querying while the engine writes */
    int queries_ok = 0, rounds = 5;
    for (int r = 0; r < rounds; r++) {
        CU_ASSERT_FATAL(it_produce(in_topic, 100, make_rec, NULL) == 0);
        size_t entries = 0;
        long sum = query_sum(&entries);
        /* before the first commit the state directory may not exist yet */
        if (sum >= 0) {
            queries_ok++;
            CU_ASSERT(sum <= 100L * (r + 1));
        }
    }
    size_t entries = 0;
    long sum = wait_sum(100L * rounds, 60000, &entries);
    printf("\n  running: %d of %d queries during feeding ok; final sum %ld over %zu keys\n",
           queries_ok, rounds, sum, entries);
    CU_ASSERT_EQUAL(sum, 100L * rounds);
    CU_ASSERT_EQUAL(entries, KEYS);

    char out[4096], args[1024];
    snprintf(args, sizeof args, "query %s counts --key key-3 --int64", yaml);
    CU_ASSERT_EQUAL(kstreams(args, out, sizeof out), 0);
    CU_ASSERT_STRING_EQUAL(out, "50\n");
    snprintf(args, sizeof args, "query %s counts --key key-3 --int64 --partition 0", yaml);
    int rc0 = kstreams(args, out, sizeof out);
    snprintf(args, sizeof args, "query %s counts --key key-3 --int64 --partition 1", yaml);
    int rc1 = kstreams(args, out, sizeof out);
    CU_ASSERT((rc0 == 0 && rc1 == 3) || (rc0 == 3 && rc1 == 0)); /* in one partition */
    snprintf(args, sizeof args, "query %s counts --key nokey", yaml);
    CU_ASSERT_EQUAL(kstreams(args, out, sizeof out), 3);
    snprintf(args, sizeof args, "query %s counts --int64 --from key-2 --to key-4", yaml);
    CU_ASSERT_EQUAL(kstreams(args, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "key-2\t50\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "key-3\t50\n"));
    CU_ASSERT_PTR_NULL(strstr(out, "key-4"));

    /* the engine did not notice: clean stop, exact outputs */
    CU_ASSERT_EQUAL(it_engine_stop(eng, 30000), 0);
    it_msgs msgs = {0};
    it_consume(out_topic, 100 * (size_t)rounds, 1000, 60000, &msgs);
    CU_ASSERT_EQUAL(msgs.count, 100 * (size_t)rounds);
    it_msgs_free(&msgs);

    /* stopped: the same figures */
    CU_ASSERT_EQUAL(query_sum(&entries), 100L * rounds);
    snprintf(args, sizeof args, "query %s counts --key key-7 --int64", yaml);
    CU_ASSERT_EQUAL(kstreams(args, out, sizeof out), 0);
    CU_ASSERT_STRING_EQUAL(out, "50\n");
}

/* ---- windowed stores ---------------------------------------------------- */

#define WBASE 1700000000000LL /* 2023-11-14T22:13:20Z, a multiple of 10 s */
#define WRECS 40
#define WKEYS 4

/* Record i: key k(i % 4), event time WBASE + i s (i < 20), WBASE + (i + 30) s
 * (i >= 20): per key two sessions of 5 records 4 s apart, 34 s between. */
static int64_t wts(int i)
{
    return WBASE + (int64_t)(i < 20 ? i : i + 30) * 1000;
}

static void make_wrec(int i, char *key, size_t klen, char *value, size_t vlen,
                      int32_t *partition, void *arg)
{
    (void)partition;
    (void)arg;
    snprintf(key, klen, "k%d", i % WKEYS);
    snprintf(value, vlen, "{\"ts\":%lld,\"n\":%d}", (long long)wts(i), i);
}

/* binary keys (no 0x00: the producer helper takes C strings) */
static const char *const BKEYS[] = {"\x01\xff", "\x01\xff", "\xfe"};

static void make_brec(int i, char *key, size_t klen, char *value, size_t vlen,
                      int32_t *partition, void *arg)
{
    (void)partition;
    (void)arg;
    snprintf(key, klen, "%s", BKEYS[i]);
    snprintf(value, vlen, "{\"ts\":%lld}", (long long)(WBASE + (i + 1) * 1000));
}

/* Sum of the window values of `store` (json, int64); -1 on failure. */
static long window_sum(const char *wyaml, const char *store)
{
    static char out[1 << 16];
    char args[1024];
    snprintf(args, sizeof args, "query %s %s --format json --int64", wyaml, store);
    if (kstreams(args, out, sizeof out) != 0)
        return -1;
    json_t *doc = json_loads(out, 0, NULL);
    long sum = json_is_array(doc) ? 0 : -1;
    size_t i;
    json_t *o;
    json_array_foreach(doc, i, o) sum += (long)json_integer_value(json_object_get(o, "value"));
    json_decref(doc);
    return sum;
}

/* Run `kstreams ARGS` with stderr into out too. */
static int kstreams_all(const char *args, char *out, size_t outlen)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", it_kstreams(), args);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t n = fread(out, 1, outlen - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The tumbling 10 s windows of key k (ms format), from the input. */
static void expected_tumbling(int k, int64_t from, int64_t to, char *buf, size_t len)
{
    long counts[120] = {0};
    for (int i = 0; i < WRECS; i++)
        if (i % WKEYS == k)
            counts[(wts(i) - WBASE) / 10000]++;
    size_t n = 0;
    buf[0] = '\0';
    for (int w = 0; w < 120; w++) {
        int64_t start = WBASE + (int64_t)w * 10000;
        if (counts[w] && start >= from && start <= to)
            n += (size_t)snprintf(buf + n, len - n, "%lld\t%lld\t%ld\n", (long long)start,
                                  (long long)(start + 10000), counts[w]);
    }
}

static void test_query_windows(void)
{
    char wdir[256], wapp[128], win[128], bin[128], wyaml[512], wlog[512];
    it_tempdir(wdir, sizeof wdir);
    it_unique(wapp, sizeof wapp, "qwin");
    it_unique(win, sizeof win, "qwin-in");
    it_unique(bin, sizeof bin, "qwin-bin");
    CU_ASSERT_FATAL(it_create_topic(win, 2) == 0);
    CU_ASSERT_FATAL(it_create_topic(bin, 2) == 0);
    snprintf(wyaml, sizeof wyaml, "%s/windows.yaml", wdir);
    snprintf(wlog, sizeof wlog, "%s/engine.log", wdir);
    it_write_file(wyaml,
                  "application: %s\n"
                  "kafka: { bootstrap: [%s] }\n"
                  "guarantee: exactly-once\n"
                  "commit_interval_ms: 100\n"
                  "state_dir: %s/state\n"
                  "plugin_path: [%s/plugins/.libs]\n"
                  "sources:\n"
                  "  views: { topic: %s, key: string, value: json }\n"
                  "  raw: { topic: %s, key: bytes, value: json }\n"
                  "nodes:\n"
                  "  - { name: tumb, type: count, from: views, store: per-10s,\n"
                  "      window: { kind: tumbling, size: 10s, retention: 1h, time_field: ts } }\n"
                  "  - { name: sess, type: count, from: views, store: sessions,\n"
                  "      window: { kind: session, gap: 5s, retention: 1h, time_field: ts } }\n"
                  "  - { name: btumb, type: count, from: raw, store: bin-10s,\n"
                  "      window: { kind: tumbling, size: 10s, retention: 1h, time_field: ts } }\n"
                  "sinks:\n"
                  "  - { from: tumb, topic: %s-tumb, key: json, value: int64, create: true }\n"
                  "  - { from: sess, topic: %s-sess, key: json, value: int64, create: true }\n"
                  "  - { from: btumb, topic: %s-bin, key: bytes, value: int64, create: true }\n",
                  wapp, it_bootstrap(), wdir, KS_TEST_BUILDDIR, win, bin, wapp, wapp, wapp);
    pid_t eng = it_engine_start(wyaml, "w", wlog);
    CU_ASSERT_FATAL(eng > 0);
    CU_ASSERT_FATAL(it_produce(win, WRECS, make_wrec, NULL) == 0);
    CU_ASSERT_FATAL(it_produce(bin, 3, make_brec, NULL) == 0);
    /* every record is in one tumbling window and in one session */
    int64_t until = it_now_ms() + 60000;
    long t = -1, se = -1, b = -1;
    while (it_now_ms() < until) {
        t = window_sum(wyaml, "per-10s");
        se = window_sum(wyaml, "sessions");
        b = window_sum(wyaml, "bin-10s");
        if (t == WRECS && se == WRECS && b == 3)
            break;
        it_sleep_ms(200);
    }
    printf("\n  windows (running): %ld records in tumbling windows, %ld in sessions, %ld "
           "binary\n",
           t, se, b);
    CU_ASSERT_EQUAL_FATAL(t, WRECS);
    CU_ASSERT_EQUAL(se, WRECS);
    CU_ASSERT_EQUAL(b, 3);

    static char out[1 << 16], want[4096], all_running[1 << 16];
    char args[1024];
    for (int pass = 0; pass < 2; pass++) { /* 0: engine running, 1: stopped */
        /* every window of one key */
        for (int k = 0; k < WKEYS; k++) {
            snprintf(args, sizeof args, "query %s per-10s --key k%d --int64 --time-format ms",
                     wyaml, k);
            CU_ASSERT_EQUAL(kstreams(args, out, sizeof out), 0);
            expected_tumbling(k, INT64_MIN, INT64_MAX, want, sizeof want);
            CU_ASSERT_STRING_EQUAL(out, want);
        }
        /* k1: 1 5 9 | 13 17 | 51 55 59 | 63 67 s; windows starting in the first 20 s */
        snprintf(args, sizeof args,
                 "query %s per-10s --key k1 --int64 --from 2023-11-14T22:13:20Z "
                 "--to 2023-11-14T22:13:39.999Z",
                 wyaml);
        CU_ASSERT_EQUAL(kstreams(args, out, sizeof out), 0);
        CU_ASSERT_STRING_EQUAL(out, "2023-11-14T22:13:20.000Z\t2023-11-14T22:13:30.000Z\t3\n"
                                    "2023-11-14T22:13:30.000Z\t2023-11-14T22:13:40.000Z\t2\n");
        /* the same range in epoch ms */
        snprintf(args, sizeof args,
                 "query %s per-10s --key k1 --int64 --from %lld --to %lld --time-format ms",
                 wyaml, WBASE + 10000, WBASE + 60000);
        CU_ASSERT_EQUAL(kstreams(args, out, sizeof out), 0);
        expected_tumbling(1, WBASE + 10000, WBASE + 60000, want, sizeof want);
        CU_ASSERT_STRING_EQUAL(out, want);
        CU_ASSERT_STRING_EQUAL(want, "1700000010000\t1700000020000\t2\n"
                                     "1700000050000\t1700000060000\t3\n"
                                     "1700000060000\t1700000070000\t2\n");
        /* every key, windows starting at WBASE + 50 s: k0 50 54 58, k1 51 55 59,
         * k2 52 56, k3 53 57 */
        snprintf(args, sizeof args,
                 "query %s per-10s --int64 --format json --from %lld --to %lld", wyaml,
                 WBASE + 50000, WBASE + 50000);
        CU_ASSERT_EQUAL(kstreams(args, out, sizeof out), 0);
        json_t *doc = json_loads(out, 0, NULL);
        CU_ASSERT_FATAL(json_is_array(doc));
        CU_ASSERT_EQUAL(json_array_size(doc), WKEYS);
        int seen = 0;
        size_t i;
        json_t *o;
        json_array_foreach(doc, i, o)
        {
            const char *key = json_string_value(json_object_get(o, "key"));
            int k = key ? key[1] - '0' : -1;
            CU_ASSERT_FATAL(k >= 0 && k < WKEYS);
            seen |= 1 << k;
            CU_ASSERT_EQUAL(json_integer_value(json_object_get(o, "start")), WBASE + 50000);
            CU_ASSERT_EQUAL(json_integer_value(json_object_get(o, "end")), WBASE + 60000);
            CU_ASSERT_EQUAL(json_integer_value(json_object_get(o, "value")), k < 2 ? 3 : 2);
        }
        CU_ASSERT_EQUAL(seen, 15);
        json_decref(doc);
        /* sessions of k2: [2 s, 18 s] and [52 s, 68 s], 5 records each */
        snprintf(args, sizeof args, "query %s sessions --key k2 --int64 --time-format ms",
                 wyaml);
        CU_ASSERT_EQUAL(kstreams(args, out, sizeof out), 0);
        CU_ASSERT_STRING_EQUAL(out, "1700000002000\t1700000018000\t5\n"
                                    "1700000052000\t1700000068000\t5\n");
        snprintf(args, sizeof args,
                 "query %s sessions --key k2 --int64 --time-format ms --from %lld", wyaml,
                 WBASE + 2001);
        CU_ASSERT_EQUAL(kstreams(args, out, sizeof out), 0);
        CU_ASSERT_STRING_EQUAL(out, "1700000052000\t1700000068000\t5\n");
        /* binary keys: 01ff at 1 s and 2 s, fe at 3 s */
        snprintf(args, sizeof args, "query %s bin-10s --key-hex 01ff --int64 --time-format ms",
                 wyaml);
        CU_ASSERT_EQUAL(kstreams(args, out, sizeof out), 0);
        CU_ASSERT_STRING_EQUAL(out, "1700000000000\t1700000010000\t2\n");
        snprintf(args, sizeof args,
                 "query %s bin-10s --from-key-hex 01 --to-key-hex ff --int64 --format json",
                 wyaml);
        CU_ASSERT_EQUAL(kstreams(args, out, sizeof out), 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"key_hex\":\"01ff\",\"start\":1700000000000,"
                                           "\"end\":1700000010000,\"value\":2}"));
        CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"key_hex\":\"fe\",\"start\":1700000000000,"
                                           "\"end\":1700000010000,\"value\":1}"));
        snprintf(args, sizeof args, "query %s bin-10s --from-key-hex fe --int64 --time-format ms",
                 wyaml);
        CU_ASSERT_EQUAL(kstreams(args, out, sizeof out), 0);
        CU_ASSERT_STRING_EQUAL(out, "0xfe\t1700000000000\t1700000010000\t1\n");
        /* --hex: printable keys too, values as bytes */
        snprintf(args, sizeof args,
                 "query %s per-10s --key k3 --hex --time-format ms --to %lld", wyaml, WBASE);
        CU_ASSERT_EQUAL(kstreams(args, out, sizeof out), 0);
        CU_ASSERT_STRING_EQUAL(out, "1700000000000\t1700000010000\t0x0000000000000002\n");
        /* the whole store, running and stopped: the same */
        snprintf(args, sizeof args, "query %s per-10s --int64 --format json", wyaml);
        CU_ASSERT_EQUAL(kstreams(args, out, sizeof out), 0);
        if (pass == 0)
            snprintf(all_running, sizeof all_running, "%s", out);
        else
            CU_ASSERT_STRING_EQUAL(out, all_running);

        if (pass == 0) /* stop the engine: it did not notice the readers */
            CU_ASSERT_EQUAL(it_engine_stop(eng, 30000), 0);
    }

    /* bad arguments: the reason and exit 64; nothing there: exit 3 */
    snprintf(args, sizeof args, "query %s per-10s --key k1 --from yesterday", wyaml);
    CU_ASSERT_EQUAL(kstreams_all(args, out, sizeof out), 64);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "--from 'yesterday' is not a time"));
    snprintf(args, sizeof args, "query %s per-10s --key-hex 0g", wyaml);
    CU_ASSERT_EQUAL(kstreams_all(args, out, sizeof out), 64);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "--key-hex needs an even number of hex digits"));
    snprintf(args, sizeof args, "query %s per-10s --from %lld --to %lld", wyaml, WBASE + 1,
             WBASE);
    CU_ASSERT_EQUAL(kstreams_all(args, out, sizeof out), 64);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "is after --to"));
    snprintf(args, sizeof args, "query %s per-10s --key k1 --from %lld", wyaml,
             WBASE + 3600000);
    CU_ASSERT_EQUAL(kstreams_all(args, out, sizeof out), 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "no window of key 'k1' in store 'per-10s'"));
    snprintf(args, sizeof args, "query %s bin-10s --key-hex 01fe", wyaml);
    CU_ASSERT_EQUAL(kstreams_all(args, out, sizeof out), 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "no window of key '0x01fe'"));
}

static void test_help(void)
{
    char out[8192];
    const char *cmds[] = {"run", "check", "describe", "query", "version"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char args[64];
        snprintf(args, sizeof args, "%s --help", cmds[i]);
        CU_ASSERT_EQUAL(kstreams(args, out, sizeof out), 0);
        CU_ASSERT_PTR_NOT_NULL(strstr(out, "usage: kstreams"));
    }
    CU_ASSERT_EQUAL(kstreams("query", out, sizeof out), 64);
}

int main(void)
{
    static const it_case cases[] = {
        {"query a running engine's stores, then the stopped one's",
         test_query_running_and_stopped},
        {"window ranges and binary keys of windowed stores, running and stopped",
         test_query_windows},
        {"--help of every command; usage exit code", test_help},
        {NULL, NULL}};
    return it_main("query", cases);
}
