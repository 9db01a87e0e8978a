/*
 * test_stream_joins.c - the windowed stream-stream join (join.streams,
 * docs/tables-and-joins.md) end to end, exactly-once, on the real broker.
 *
 * Orders and payments (4 partitions each, keyed alike) with explicit event
 * times go through an inner, a left and an outer join (window: before 1s,
 * after 500ms, grace 5m) while the engine is killed (kill -9 mid-stream,
 * twice; SIGKILL after a Kafka commit, before the LMDB one). The grace
 * spans every event time of the test, so no record is late whatever order
 * the consumer interleaves the two topics in, and the joined pairs are
 * exactly the pairs in the window. After all pairs are out, one order per
 * partition far ahead in event time expires every buffered record: the
 * left and outer joins then give their unmatched records. Read back with
 * read_committed, each join's output must equal the reference computed
 * from the inputs as a multiset of (key, value, timestamp): nothing
 * missing, nothing twice, nothing else. Last, payments with 3 partitions
 * against 4 for the orders are refused at the start.
 */
#include <CUnit/CUnit.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "itest.h"

#define KEYS 200
#define MAX_RECORDS 24000
#define STEP_MS 3 /* event time between two records */
#define BEFORE 1000
#define AFTER 500
#define GRACE 300000

enum { INNER, LEFT, OUTER, JOINS };

static char dir[256], app[128], orders[128], payments[128], outs[JOINS][128];
static char yaml[512], log_a[512];
static long produced;
static int64_t t0;

static int side_of(long n) { return (int)(((unsigned long)n * 2654435761u >> 7) & 1); }
static int key_of(long n) { return (int)(((unsigned long)n * 2654435761u >> 9) % KEYS); }
static int64_t ts_of(long n) { return t0 + n * STEP_MS; }

/* Produce one record; partition -1: murmur2 of the key, as the engine. */
static void produce_one(rd_kafka_t *p, const char *topic, const char *key, const char *value,
                        int64_t ts, int32_t partition)
{
    rd_kafka_resp_err_t err;
    do {
        err = rd_kafka_producev(
            p, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(key, strlen(key)),
            RD_KAFKA_V_VALUE((void *)value, strlen(value)), RD_KAFKA_V_TIMESTAMP(ts),
            RD_KAFKA_V_PARTITION(partition < 0 ? RD_KAFKA_PARTITION_UA : partition),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
        if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL)
            rd_kafka_poll(p, 50);
    } while (err == RD_KAFKA_RESP_ERR__QUEUE_FULL);
    CU_ASSERT_EQUAL(err, 0);
}

static rd_kafka_t *producer(void)
{
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", it_bootstrap(), err, sizeof err);
    rd_kafka_conf_set(conf, "partitioner", "murmur2_random", err, sizeof err);
    rd_kafka_conf_set(conf, "enable.idempotence", "true", err, sizeof err);
    rd_kafka_t *p = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    return p;
}

/* Records produced .. produced + n - 1: order or payment, key, time. */
static void produce_records(long n)
{
    CU_ASSERT_FATAL(produced + n <= MAX_RECORDS);
    rd_kafka_t *p = producer();
    for (long i = produced; i < produced + n; i++) {
        char key[16], value[32];
        snprintf(key, sizeof key, "k%d", key_of(i));
        snprintf(value, sizeof value, side_of(i) ? "{\"p\":%ld}" : "{\"o\":%ld}", i);
        produce_one(p, side_of(i) ? payments : orders, key, value, ts_of(i), -1);
    }
    CU_ASSERT_EQUAL(rd_kafka_flush(p, 30000), 0);
    rd_kafka_destroy(p);
    produced += n;
}

/* One order per partition past every window + grace: all records expire. */
static void produce_expiry(void)
{
    rd_kafka_t *p = producer();
    int64_t far = ts_of(produced) + BEFORE + AFTER + GRACE + 1000;
    for (int32_t part = 0; part < 4; part++)
        produce_one(p, orders, "flush", "{\"flush\":true}", far, part);
    CU_ASSERT_EQUAL(rd_kafka_flush(p, 30000), 0);
    rd_kafka_destroy(p);
}

/* ---- the reference ------------------------------------------------------ */

typedef struct refs {
    char **v;
    size_t n, cap;
} refs;

static void ref_add(refs *r, const char *key, const char *value, int64_t ts)
{
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 1024;
        r->v = realloc(r->v, r->cap * sizeof *r->v);
    }
    char buf[256];
    snprintf(buf, sizeof buf, "%s|%s|%lld", key, value, (long long)ts);
    r->v[r->n++] = strdup(buf);
}

static void refs_free(refs *r)
{
    for (size_t i = 0; i < r->n; i++)
        free(r->v[i]);
    free(r->v);
    memset(r, 0, sizeof *r);
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* What each join owes for records 0..produced-1: every left/right pair of
 * a key with t_left - BEFORE <= t_right <= t_left + AFTER, at the later
 * time; the left (left, outer) and right (outer) records of no pair. */
static void reference(refs want[JOINS], int with_unmatched)
{
    static int paired[MAX_RECORDS];
    memset(paired, 0, sizeof paired);
    for (long l = 0; l < produced; l++) {
        if (side_of(l) != 0)
            continue;
        long lo = l - BEFORE / STEP_MS - 1, hi = l + AFTER / STEP_MS + 1;
        for (long r = lo < 0 ? 0 : lo; r <= hi && r < produced; r++) {
            if (side_of(r) != 1 || key_of(r) != key_of(l) || ts_of(r) < ts_of(l) - BEFORE ||
                ts_of(r) > ts_of(l) + AFTER)
                continue;
            char key[16], value[96];
            snprintf(key, sizeof key, "k%d", key_of(l));
            snprintf(value, sizeof value, "{\"left\":{\"o\":%ld},\"right\":{\"p\":%ld}}", l, r);
            int64_t ts = ts_of(l) > ts_of(r) ? ts_of(l) : ts_of(r);
            for (int j = 0; j < JOINS; j++)
                ref_add(&want[j], key, value, ts);
            paired[l] = paired[r] = 1;
        }
    }
    for (long n = 0; with_unmatched && n < produced; n++) {
        if (paired[n])
            continue;
        char key[16], value[96];
        snprintf(key, sizeof key, "k%d", key_of(n));
        if (side_of(n) == 0) {
            snprintf(value, sizeof value, "{\"left\":{\"o\":%ld},\"right\":null}", n);
            ref_add(&want[LEFT], key, value, ts_of(n));
        } else {
            snprintf(value, sizeof value, "{\"left\":null,\"right\":{\"p\":%ld}}", n);
        }
        ref_add(&want[OUTER], key, value, ts_of(n));
    }
}

/* Compare the read_committed output of join j with want: 0 when equal. */
static long check_join(int j, refs *want, const char *phase)
{
    static const char *const names[JOINS] = {"inner", "left", "outer"};
    it_msgs out = {0};
    it_consume(outs[j], want->n, 1000, 60000, &out);
    refs got = {0};
    for (size_t i = 0; i < out.count; i++) {
        const it_msg *m = &out.items[i];
        ref_add(&got, m->key ? m->key : "", m->value ? m->value : "null", m->timestamp);
    }
    refs w = *want; /* sorted in place: the caller's list, reordered */
    qsort(got.v, got.n, sizeof *got.v, str_cmp);
    qsort(w.v, w.n, sizeof *w.v, str_cmp);
    long missing = 0, extra = 0, dup = 0;
    size_t a = 0, b = 0;
    while (a < w.n || b < got.n) {
        int c = a == w.n ? 1 : b == got.n ? -1 : strcmp(w.v[a], got.v[b]);
        if (c == 0) {
            a++, b++;
        } else if (c < 0) {
            missing++, a++;
        } else {
            if (b > 0 && strcmp(got.v[b], got.v[b - 1]) == 0)
                dup++;
            else
                extra++;
            b++;
        }
    }
    printf("\n  [%s] %s: %zu outputs, %zu owed: %ld missing, %ld duplicated, %ld unexpected",
           phase, names[j], got.n, w.n, missing, dup, extra);
    refs_free(&got);
    it_msgs_free(&out);
    CU_ASSERT_EQUAL(missing, 0);
    CU_ASSERT_EQUAL(dup, 0);
    CU_ASSERT_EQUAL(extra, 0);
    return missing + dup + extra;
}

static void write_pipeline(void)
{
    it_write_file(yaml,
                  "application: %s\n"
                  "kafka: { bootstrap: [%s] }\n"
                  "guarantee: exactly-once\n"
                  "commit_interval_ms: 100\n"
                  "workers: 2\n"
                  "state_dir: %s/state\n"
                  "plugin_path: [%s/plugins/.libs]\n"
                  "sources:\n"
                  "  orders: { topic: %s, key: string, value: json }\n"
                  "  payments: { topic: %s, key: string, value: json }\n"
                  "nodes:\n"
                  "  - name: inner\n"
                  "    type: join.streams\n"
                  "    from: [orders, payments]\n"
                  "    store: inner-buffer\n"
                  "    config: { left: orders, right: payments }\n"
                  "    window: { before: 1s, after: 500ms, grace: 5m }\n"
                  "  - name: left\n"
                  "    type: join.streams\n"
                  "    from: [orders, payments]\n"
                  "    store: left-buffer\n"
                  "    config: { left: orders, right: payments, kind: left }\n"
                  "    window: { before: 1s, after: 500ms, grace: 5m }\n"
                  "  - name: outer\n"
                  "    type: join.streams\n"
                  "    from: [payments, orders]\n"
                  "    store: outer-buffer\n"
                  "    config: { left: orders, right: payments, kind: outer }\n"
                  "    window: { before: 1s, after: 500ms, grace: 5m }\n"
                  "sinks:\n"
                  "  - { from: inner, topic: %s, key: string, value: json, create: true }\n"
                  "  - { from: left, topic: %s, key: string, value: json, create: true }\n"
                  "  - { from: outer, topic: %s, key: string, value: json, create: true }\n",
                  app, it_bootstrap(), dir, KS_TEST_BUILDDIR, orders, payments, outs[INNER],
                  outs[LEFT], outs[OUTER]);
}

static void setup(void)
{
    it_tempdir(dir, sizeof dir);
    it_unique(app, sizeof app, "sjoins");
    it_unique(orders, sizeof orders, "orders");
    it_unique(payments, sizeof payments, "payments");
    it_unique(outs[INNER], sizeof outs[INNER], "paid-inner");
    it_unique(outs[LEFT], sizeof outs[LEFT], "paid-left");
    it_unique(outs[OUTER], sizeof outs[OUTER], "paid-outer");
    CU_ASSERT_FATAL(it_create_topic(orders, 4) == 0);
    CU_ASSERT_FATAL(it_create_topic(payments, 4) == 0);
    snprintf(yaml, sizeof yaml, "%s/p.yaml", dir);
    snprintf(log_a, sizeof log_a, "%s/a.log", dir);
    write_pipeline();
    /* event times near the wall clock: the broker deletes records older
     * than retention.ms (7 days) at its next retention check */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    t0 = (int64_t)now.tv_sec * 1000 - 60000;
}

/* Wait until the inner join has output every pair owed so far. */
static void wait_pairs(void)
{
    refs want[JOINS] = {{0}};
    reference(want, 0);
    it_msgs out = {0};
    it_consume(outs[INNER], want[INNER].n, 1000, 60000, &out);
    it_msgs_free(&out);
    for (int j = 0; j < JOINS; j++)
        refs_free(&want[j]);
}

static void test_kill9(void)
{
    setup();
    produce_records(4000);
    pid_t a = it_engine_start(yaml, "a", log_a);
    produce_records(4000);
    it_sleep_ms(1500); /* mid-stream */
    it_engine_kill(a);
    produce_records(4000);
    a = it_engine_start(yaml, "a", log_a);
    it_sleep_ms(1200);
    it_engine_kill(a);
    produce_records(2000);
    a = it_engine_start(yaml, "a", log_a);
    wait_pairs();
    CU_ASSERT_EQUAL(it_engine_stop(a, 30000), 0);
    refs want[JOINS] = {{0}};
    reference(want, 0);
    /* before the expiry: the pairs only, no unmatched result yet */
    check_join(INNER, &want[INNER], "kill -9, pairs");
    check_join(LEFT, &want[LEFT], "kill -9, pairs");
    for (int j = 0; j < JOINS; j++)
        refs_free(&want[j]);
}

/* SIGKILL between the Kafka and the LMDB commit (engine/base/fault.h):
 * the buffers restored from the changelogs must not join twice. */
static void test_crash_point(void)
{
    pid_t a = it_engine_start_env(yaml, "a", log_a, "KS_CRASH_AT=after-kafka-commit:4");
    int st = -1;
    for (int64_t end = it_now_ms() + 30000; st < 0 && it_now_ms() < end;) {
        produce_records(400);
        st = it_engine_wait(a, 300);
    }
    if (st < 0)
        it_engine_kill(a);
    printf("\n  crash at after-kafka-commit: exit %d", st);
    CU_ASSERT_EQUAL(st, 137);
    produce_records(2000);
    a = it_engine_start(yaml, "a", log_a);
    wait_pairs();
    it_sleep_ms(500);
    /* expire everything: the unmatched results, killed once mid-way */
    produce_expiry();
    it_sleep_ms(300);
    it_engine_kill(a);
    a = it_engine_start(yaml, "a", log_a);
    refs want[JOINS] = {{0}};
    reference(want, 1);
    long bad = 0;
    for (int j = 0; j < JOINS; j++)
        bad += check_join(j, &want[j], "crash at the commit, kill -9, expiry");
    CU_ASSERT_EQUAL(it_engine_stop(a, 30000), 0);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(it_log_count(log_a, "dropped a late"), 0);
    for (int j = 0; j < JOINS; j++)
        refs_free(&want[j]);
}

/* Payments with 3 partitions against 4 for the orders: the start stops
 * with both counts (the sources' co-partitioning check). */
static void test_not_copartitioned(void)
{
    char good[128], path[512], log2[600];
    snprintf(good, sizeof good, "%s", payments);
    it_unique(payments, sizeof payments, "payments3");
    CU_ASSERT_FATAL(it_create_topic(payments, 3) == 0);
    snprintf(path, sizeof path, "%s", yaml);
    snprintf(yaml, sizeof yaml, "%s/bad.yaml", dir);
    snprintf(log2, sizeof log2, "%s/bad.log", dir);
    write_pipeline();
    pid_t a = it_engine_start(yaml, "bad", log2);
    int st = it_engine_wait(a, 60000);
    if (st < 0)
        it_engine_kill(a);
    CU_ASSERT_NOT_EQUAL(st, 0);
    CU_ASSERT(it_log_count(log2, "source topics are not co-partitioned: ") == 1);
    CU_ASSERT(it_log_count(log2, "has 3 partitions, others 4") == 1);
    snprintf(payments, sizeof payments, "%s", good);
    snprintf(yaml, sizeof yaml, "%s", path);
}

int main(void)
{
    static const it_case cases[] = {
        {"inner and left joins, kill -9 mid-stream twice: every pair once", test_kill9},
        {"SIGKILL after the Kafka commit, kill -9 at the expiry: all three equal the model",
         test_crash_point},
        {"payments with another partition count are refused", test_not_copartitioned},
        {NULL, NULL}};
    return it_main("stream_joins", cases);
}
