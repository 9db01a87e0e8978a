/*
 * test_driver.c - the test driver (include/kstreams/testdriver.h) with the
 * shipped plugins (count, aggregate), the page_views example functions and
 * the plugin-test example plugin (wall-clock punctuations).
 *
 * Only the public driver API is used, as a plugin author would, plus
 * librdkafka's own murmur2 partitioner to cross-check ours.
 */
#include <ftw.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kstreams/testdriver.h"
#include "unit/test_util.h"

#define DRIVER_PLUGIN_PATH                                                             \
    KS_TEST_BUILDDIR "/plugins/.libs:" KS_TEST_BUILDDIR                                \
                     "/examples/page-views/.libs:" KS_TEST_BUILDDIR                     \
                     "/examples/plugin-test/.libs"

#define HEADER                                                                         \
    "application: driver-test\n"                                                       \
    "kafka: { bootstrap: 127.0.0.1:9092 }\n"

static const char *COUNT_YAML =
    HEADER "sources:\n"
           "  views: { topic: views, key: string, value: string }\n"
           "nodes:\n"
           "  - { name: per_user, type: count, from: views, store: counts }\n"
           "sinks:\n"
           "  - { name: out, from: per_user, topic: counts-out, key: string, value: int64,\n"
           "      create: true, partitions: 3 }\n";

static ks_driver *open_yaml(const char *yaml, ks_driver_options *opt)
{
    ks_driver_options defaults = {0};
    if (!opt)
        opt = &defaults;
    if (!opt->plugin_path)
        opt->plugin_path = DRIVER_PLUGIN_PATH;
    ks_driver *drv = NULL;
    char err[1024] = "";
    int rc = ks_driver_open_text("driver.yaml", yaml, strlen(yaml), opt, &drv, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "\nopen: %s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(drv);
    return drv;
}

static int pipe_s(ks_driver *drv, const char *src, const char *key, const char *value,
                  int64_t ts)
{
    return ks_driver_pipe(drv, src, key, key ? strlen(key) : 0, value,
                          value ? strlen(value) : 0, ts);
}

/* 1 when the next record of `sink` is (key, int64 n). */
static int next_count(ks_driver *drv, const char *sink, const char *key, int64_t n)
{
    ks_driver_record r;
    if (ks_driver_read_output(drv, sink, &r) != 0)
        return 0;
    return r.key && r.key_len == strlen(key) && memcmp(r.key, key, r.key_len) == 0 &&
           r.value && r.value_len == 8 && ks_int64_decode(r.value) == n;
}

static int64_t stored(ks_driver *drv, const char *store, const char *key)
{
    ks_bytes v;
    if (ks_driver_store_get(drv, store, -1, key, strlen(key), &v) != 0)
        return -1;
    return v.len == 8 ? ks_int64_decode(v.data) : -2;
}

/* ---- murmur2 --------------------------------------------------------------- */

static void test_murmur2(void)
{
    /* org.apache.kafka.common.utils.UtilsTest#testMurmur2 */
    static const struct {
        const char *in;
        int32_t out;
    } v[] = {
        {"21", -973932308},
        {"foobar", -790332482},
        {"a-little-bit-long-string", -985981536},
        {"a-little-bit-longer-string", -1486304829},
        {"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
        {"abc", 479470107},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        CU_ASSERT_EQUAL(ks_driver_murmur2(v[i].in, strlen(v[i].in)), v[i].out);
    /* the partition librdkafka's murmur2 partitioner (Java compatible) picks */
    int mismatches = 0;
    for (int k = 0; k < 2000; k++) {
        char key[32];
        int n = snprintf(key, sizeof key, "user-%d%s", k, k % 3 ? "x" : "");
        int32_t parts = 1 + k % 17;
        if (ks_driver_partition_for(key, (size_t)n, parts) !=
            rd_kafka_msg_partitioner_murmur2(NULL, key, (size_t)n, parts, NULL, NULL))
            mismatches++;
    }
    CU_ASSERT_EQUAL(mismatches, 0);
    CU_ASSERT_EQUAL(ks_driver_partition_for("k", 1, 0), -1);
}

/* ---- count ----------------------------------------------------------------- */

static void test_count(void)
{
    ks_driver *drv = open_yaml(COUNT_YAML, NULL);
    CU_ASSERT_EQUAL(ks_driver_partitions(drv), 1);
    CU_ASSERT_EQUAL(ks_driver_stream_time(drv, 0), -1);
    CU_ASSERT_EQUAL(pipe_s(drv, "views", "alice", "/a", 100), 0);
    CU_ASSERT_EQUAL(pipe_s(drv, "views", "bob", "/b", 300), 0);
    CU_ASSERT_EQUAL(pipe_s(drv, "views", "alice", "/c", 200), 0);
    CU_ASSERT_EQUAL(pipe_s(drv, "views", NULL, "/d", 400), 0); /* dropped by count */
    CU_ASSERT_EQUAL(ks_driver_stream_time(drv, 0), 400);
    CU_ASSERT_EQUAL(ks_driver_output_count(drv, NULL), 3);
    CU_ASSERT_EQUAL(ks_driver_output_count(drv, "counts-out"), 3); /* by topic */
    CU_ASSERT_EQUAL(ks_driver_output_count(drv, "nope"), 0);

    ks_driver_record r;
    CU_ASSERT_EQUAL_FATAL(ks_driver_read_output(drv, "out", &r), 0);
    CU_ASSERT_STRING_EQUAL(r.sink, "out");
    CU_ASSERT_STRING_EQUAL(r.topic, "counts-out");
    CU_ASSERT_EQUAL(r.timestamp, 100);
    CU_ASSERT_EQUAL(r.task, 0);
    /* create: true, partitions: 3 -> the producer's partition of the key */
    CU_ASSERT_EQUAL(r.partition, ks_driver_partition_for("alice", 5, 3));
    CU_ASSERT(r.value_len == 8 && ks_int64_decode(r.value) == 1);
    CU_ASSERT(next_count(drv, "out", "bob", 1));
    CU_ASSERT(next_count(drv, NULL, "alice", 2));
    CU_ASSERT_EQUAL(ks_driver_read_output(drv, NULL, &r), KS_ERR_NOT_FOUND);

    CU_ASSERT_EQUAL(stored(drv, "counts", "alice"), 2);
    CU_ASSERT_EQUAL(stored(drv, "counts", "bob"), 1);
    CU_ASSERT_EQUAL(stored(drv, "counts", "carol"), -1);
    uint64_t n = 0;
    CU_ASSERT_EQUAL(ks_driver_store_count(drv, "counts", &n), 0);
    CU_ASSERT_EQUAL(n, 2);
    ks_bytes v;
    CU_ASSERT_EQUAL(ks_driver_store_get(drv, "nostore", -1, "a", 1, &v), KS_ERR_NOT_FOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(ks_driver_last_error(drv), "nostore"));
    CU_ASSERT_EQUAL(pipe_s(drv, "nosource", "a", "b", 1), KS_ERR_NOT_FOUND);
    ks_driver_close(drv);
}

/* Keys go to tasks by murmur2; each task has its own store. */
typedef struct seen {
    char keys[64][16];
    int n;
} seen;

static int collect(void *arg, ks_bytes key, ks_bytes value)
{
    (void)value;
    seen *s = arg;
    if (s->n < 64 && key.len < 16) {
        memcpy(s->keys[s->n], key.data, key.len);
        s->keys[s->n][key.len] = '\0';
        s->n++;
    }
    return 0;
}

static void test_partitions(void)
{
    ks_driver_options opt = {.partitions = 4};
    ks_driver *drv = open_yaml(COUNT_YAML, &opt);
    CU_ASSERT_EQUAL(ks_driver_partitions(drv), 4);
    char key[16];
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof key, "k%02d", i % 20);
        CU_ASSERT_EQUAL(pipe_s(drv, "views", key, "x", i), 0);
    }
    ks_driver_record r;
    int wrong_task = 0, outputs = 0;
    while (ks_driver_read_output(drv, NULL, &r) == 0) {
        outputs++;
        wrong_task += r.task != ks_driver_partition_for(r.key, r.key_len, 4);
    }
    CU_ASSERT_EQUAL(outputs, 40);
    CU_ASSERT_EQUAL(wrong_task, 0);
    /* each key is in its own partition's store only */
    int32_t p = ks_driver_partition_for("k07", 3, 4);
    ks_bytes v;
    CU_ASSERT_EQUAL(ks_driver_store_get(drv, "counts", p, "k07", 3, &v), 0);
    CU_ASSERT_EQUAL(ks_driver_store_get(drv, "counts", (p + 1) % 4, "k07", 3, &v),
                    KS_ERR_NOT_FOUND);
    CU_ASSERT_EQUAL(stored(drv, "counts", "k07"), 2);
    /* a range over every task, then over one */
    seen all = {0}, one = {0};
    CU_ASSERT_EQUAL(ks_driver_store_range(drv, "counts", -1, "k05", 3, "k10", 3, collect,
                                          &all),
                    0);
    CU_ASSERT_EQUAL(all.n, 5);
    CU_ASSERT_EQUAL(ks_driver_store_range(drv, "counts", p, NULL, 0, NULL, 0, collect, &one),
                    0);
    int in_p = 0;
    for (int i = 0; i < 20; i++) {
        snprintf(key, sizeof key, "k%02d", i);
        in_p += ks_driver_partition_for(key, 3, 4) == p;
    }
    CU_ASSERT_EQUAL(one.n, in_p);
    /* an explicit partition */
    ks_record rec = {.key = "k07", .key_len = 3, .value = "x", .value_len = 1,
                     .timestamp = 99, .partition = (p + 1) % 4};
    CU_ASSERT_EQUAL(ks_driver_pipe_record(drv, "views", &rec), 0);
    CU_ASSERT_EQUAL(ks_driver_store_get(drv, "counts", (p + 1) % 4, "k07", 3, &v), 0);
    rec.partition = 4;
    CU_ASSERT_EQUAL(ks_driver_pipe_record(drv, "views", &rec), KS_ERR_INVALID);
    ks_driver_close(drv);
}

/* ---- aggregate, serdes, poison ------------------------------------------- */

static void test_aggregate_and_poison(void)
{
    ks_driver *drv = open_yaml(
        HEADER "sources:\n"
               "  views: { topic: page-views, key: string, value: json }\n"
               "nodes:\n"
               "  - name: bytes_per_user\n"
               "    type: aggregate\n"
               "    from: views\n"
               "    store: bytes\n"
               "    functions: { init: page_views.zero, add: page_views.add_bytes }\n"
               "sinks:\n"
               "  - { from: bytes_per_user, topic: bytes, key: string, value: int64 }\n",
        NULL);
    CU_ASSERT_EQUAL(pipe_s(drv, "views", "u1", "{\"bytes\": 100}", 1), 0);
    CU_ASSERT_EQUAL(pipe_s(drv, "views", "u1", "{\"bytes\": 50}", 2), 0);
    /* not JSON: the source's serde refuses it before any processor */
    CU_ASSERT_EQUAL(pipe_s(drv, "views", "u1", "garbage", 3), KS_SKIP);
    CU_ASSERT_PTR_NOT_NULL(strstr(ks_driver_last_error(drv), "not valid JSON"));
    /* JSON but not an object: add_bytes says skip */
    CU_ASSERT_EQUAL(pipe_s(drv, "views", "u1", "[1, 2]", 4), KS_SKIP);
    CU_ASSERT_PTR_NOT_NULL(strstr(ks_driver_last_error(drv), "skip"));
    CU_ASSERT_EQUAL(pipe_s(drv, "views", "u2", "{\"bytes\": 7}", 5), 0);
    CU_ASSERT(next_count(drv, "sink-1", "u1", 100));
    CU_ASSERT(next_count(drv, "sink-1", "u1", 150));
    CU_ASSERT(next_count(drv, "bytes", "u2", 7));
    CU_ASSERT_EQUAL(ks_driver_output_count(drv, NULL), 0);
    CU_ASSERT_EQUAL(stored(drv, "bytes", "u1"), 150);
    ks_driver_close(drv);
}

/* A sink whose serde the processor's output does not match: the record
 * fails as in the worker (retry), and the batch is aborted. */
static void test_sink_serde(void)
{
    ks_driver *drv = open_yaml(
        HEADER "sources:\n"
               "  views: { topic: views, key: string, value: string }\n"
               "nodes:\n"
               "  - { name: per_user, type: count, from: views, store: counts }\n"
               "sinks:\n"
               "  - { name: out, from: per_user, topic: out, key: string, value: json }\n",
        NULL);
    CU_ASSERT_EQUAL(pipe_s(drv, "views", "a", "x", 1), KS_RETRY);
    CU_ASSERT_PTR_NOT_NULL(strstr(ks_driver_last_error(drv), "does not match its serde"));
    CU_ASSERT_EQUAL(ks_driver_output_count(drv, NULL), 0);
    CU_ASSERT_EQUAL(stored(drv, "counts", "a"), -1); /* aborted */
    ks_driver_close(drv);
}

/* manual_commit: a fatal record aborts everything since the last commit. */
static void test_manual_commit_abort(void)
{
    ks_driver_options opt = {.manual_commit = 1};
    ks_driver *drv = open_yaml(
        HEADER "stores:\n"
               "  tiny: { map_size: 64KiB }\n"
               "sources:\n"
               "  in: { topic: in, key: string, value: string }\n"
               "nodes:\n"
               "  - { name: per_key, type: count, from: in, store: tiny }\n"
               "sinks:\n"
               "  - { name: out, from: per_key, topic: out, key: string, value: int64 }\n",
        &opt);
    CU_ASSERT_EQUAL(pipe_s(drv, "in", "a", "x", 1), 0);
    CU_ASSERT_EQUAL(pipe_s(drv, "in", "a", "x", 2), 0);
    CU_ASSERT_EQUAL(ks_driver_commit(drv), 0);
    CU_ASSERT_EQUAL(pipe_s(drv, "in", "b", "x", 3), 0);
    CU_ASSERT_EQUAL(stored(drv, "tiny", "b"), 1); /* the batch sees its own writes */
    CU_ASSERT(next_count(drv, NULL, "a", 1));     /* read before the abort: kept */
    int rc = 0;
    char key[480];
    for (int i = 0; i < 10000 && rc == 0; i++) {
        snprintf(key, sizeof key, "%0400d", i); /* 400-byte keys fill it fast */
        rc = pipe_s(drv, "in", key, "x", 4);
    }
    CU_ASSERT_EQUAL(rc, KS_FATAL);
    /* committed: a = 2; the rest is gone, as are its unread outputs */
    CU_ASSERT_EQUAL(stored(drv, "tiny", "a"), 2);
    CU_ASSERT_EQUAL(stored(drv, "tiny", "b"), -1);
    CU_ASSERT_EQUAL(ks_driver_output_count(drv, NULL), 1);
    CU_ASSERT(next_count(drv, NULL, "a", 2));
    uint64_t n = 0;
    CU_ASSERT_EQUAL(ks_driver_store_count(drv, "tiny", &n), 0);
    CU_ASSERT_EQUAL(n, 1);
    /* and it goes on */
    CU_ASSERT_EQUAL(pipe_s(drv, "in", "a", "x", 5), 0);
    CU_ASSERT(next_count(drv, NULL, "a", 3));
    ks_driver_close(drv);
}

/* ---- state directory --------------------------------------------------------- */

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void test_state_dir_persists(void)
{
    char tmp[] = "/tmp/ks-driver-test-XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(tmp));
    ks_driver_options opt = {.state_dir = tmp, .partitions = 2};
    ks_driver *drv = open_yaml(COUNT_YAML, &opt);
    CU_ASSERT_EQUAL(pipe_s(drv, "views", "a", "x", 1), 0);
    CU_ASSERT_EQUAL(pipe_s(drv, "views", "a", "x", 2), 0);
    ks_driver_close(drv);
    /* the engine's layout: STATE_DIR/<application>/task-<P>/data.mdb */
    char path[256];
    snprintf(path, sizeof path, "%s/driver-test/task-%d/data.mdb", tmp,
             ks_driver_partition_for("a", 1, 2));
    struct stat st;
    CU_ASSERT_EQUAL(stat(path, &st), 0);

    drv = open_yaml(COUNT_YAML, &opt);
    CU_ASSERT_EQUAL(stored(drv, "counts", "a"), 2);
    CU_ASSERT_EQUAL(pipe_s(drv, "views", "a", "x", 3), 0);
    CU_ASSERT(next_count(drv, NULL, "a", 3));
    ks_driver_close(drv);
    nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void test_open_errors(void)
{
    ks_driver *drv = NULL;
    char err[1024] = "";
    const char *bad = "application: x\nkafka: { bootstrap: 127.0.0.1:9092 }\nsources: 5\n";
    CU_ASSERT_EQUAL(ks_driver_open_text("bad.yaml", bad, strlen(bad), NULL, &drv, err,
                                        sizeof err),
                    KS_ERR_INVALID);
    CU_ASSERT_PTR_NULL(drv);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "bad.yaml:3:"));
    const char *noplugin = HEADER "sources: { in: { topic: in } }\n"
                                  "nodes: [ { name: n, type: nosuch.proc, from: in } ]\n"
                                  "sinks: [ { from: n, topic: out } ]\n";
    ks_driver_options opt = {.plugin_path = DRIVER_PLUGIN_PATH};
    err[0] = '\0';
    CU_ASSERT_EQUAL(ks_driver_open_text("np.yaml", noplugin, strlen(noplugin), &opt, &drv,
                                        err, sizeof err),
                    KS_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "nosuch"));
    CU_ASSERT_EQUAL(ks_driver_open("/nonexistent/p.yaml", NULL, &drv, err, sizeof err),
                    KS_ERR_INVALID);
    ks_driver_close(NULL);
}

/* ---- wall-clock time ---------------------------------------------------------- */

static void test_wallclock(void)
{
    const int64_t t0 = 5000000;
    ks_driver_options opt = {.wallclock_start_ms = t0};
    ks_driver *drv = open_yaml(
        HEADER "sources: { prices: { topic: prices, key: string, value: string } }\n"
               "nodes:\n"
               "  - { name: changed, type: changes.only_changes, from: prices,\n"
               "      store: last, config: { report_every: 10s } }\n"
               "sinks: [ { name: out, from: changed, topic: out } ]\n",
        &opt);
    CU_ASSERT_EQUAL(ks_driver_wallclock(drv), t0);
    pipe_s(drv, "prices", "a", "1", 1);
    pipe_s(drv, "prices", "a", "1", 2); /* suppressed */
    ks_driver_record r;
    CU_ASSERT_EQUAL(ks_driver_read_output(drv, NULL, &r), 0);
    /* due at t0+10s, +20s, +30s: only the first has something to say */
    CU_ASSERT_EQUAL(ks_driver_advance_wallclock(drv, 35000), 0);
    CU_ASSERT_EQUAL(ks_driver_wallclock(drv), t0 + 35000);
    CU_ASSERT_EQUAL_FATAL(ks_driver_read_output(drv, NULL, &r), 0);
    CU_ASSERT_EQUAL(r.timestamp, t0 + 10000);
    CU_ASSERT(r.value_len == 1 && memcmp(r.value, "1", 1) == 0);
    CU_ASSERT_EQUAL(ks_driver_output_count(drv, NULL), 0);
    pipe_s(drv, "prices", "a", "1", 3);
    pipe_s(drv, "prices", "a", "1", 4);
    CU_ASSERT_EQUAL(ks_driver_advance_wallclock(drv, 4999), 0); /* next due t0+40s */
    CU_ASSERT_EQUAL(ks_driver_output_count(drv, NULL), 0);
    CU_ASSERT_EQUAL(ks_driver_advance_wallclock(drv, 1), 0);
    CU_ASSERT_EQUAL_FATAL(ks_driver_read_output(drv, NULL, &r), 0);
    CU_ASSERT_EQUAL(r.timestamp, t0 + 40000);
    CU_ASSERT(r.value_len == 1 && memcmp(r.value, "2", 1) == 0);
    CU_ASSERT_EQUAL(ks_driver_advance_wallclock(drv, -1), KS_ERR_INVALID);
    ks_driver_close(drv);
}

void ks_test_register_driver(void)
{
    CU_pSuite s = CU_add_suite("driver", NULL, NULL);
    CU_add_test(s, "murmur2 and partitions as Kafka's", test_murmur2);
    CU_add_test(s, "count: outputs in order, stores", test_count);
    CU_add_test(s, "4 partitions: keyed tasks, ranges", test_partitions);
    CU_add_test(s, "aggregate; poison records are KS_SKIP", test_aggregate_and_poison);
    CU_add_test(s, "sink serde mismatch aborts the batch", test_sink_serde);
    CU_add_test(s, "manual commit; fatal aborts the batch", test_manual_commit_abort);
    CU_add_test(s, "a given state_dir persists", test_state_dir_persists);
    CU_add_test(s, "open errors name file and plugin", test_open_errors);
    CU_add_test(s, "wall-clock punctuations fire when due", test_wallclock);
}
