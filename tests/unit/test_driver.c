/*
 * test_driver.c - the test driver (include/kstreams/testdriver.h) with the
 * shipped plugins (count, aggregate), the page_views example functions,
 * the plugin-test example plugin (wall-clock punctuations) and the test
 * plugin notify (outbox events, tests/plugins/notify.c).
 *
 * Only the public driver API is used, as a plugin author would, plus
 * librdkafka's own murmur2 partitioner to cross-check ours, the engine's
 * ks_outbox_derive_id to cross-check event ids, and the engine's log
 * level to see what notify logs.
 */
#include <ctype.h>
#include <ftw.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kstreams/testdriver.h"
#include "base/log.h"
#include "outbox/outbox.h"
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

/* A kept state_dir tests a migration: the state version is kept there as
 * in the engine; a new build migrates it once, an older one is refused. */
static void test_state_dir_migrates(void)
{
    char tmp[] = "/tmp/ks-driver-test-XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(tmp));
    static const char *const builds[] = {"reload_v1", "reload_fmt2", "reload_fmt2",
                                         "reload_v1"};
    static const char *const want[] = {"v1 1 x", "v2 2 x", "v2 3 x", NULL};
    for (int i = 0; i < 4; i++) {
        char yaml[1024], err[1024] = "";
        snprintf(yaml, sizeof yaml,
                 "application: driver-migrate\n"
                 "kafka: { bootstrap: [127.0.0.1:9092] }\n"
                 "plugins: [\"%s/tests/plugins/.libs/%s.so\"]\n"
                 "sources:\n  in: { topic: in, key: string, value: string }\n"
                 "nodes:\n  - { name: tag, type: reload.tag, from: in, store: counts }\n"
                 "sinks:\n  - { name: out, from: tag, topic: out, key: string, value: string }\n",
                 KS_TEST_BUILDDIR, builds[i]);
        ks_driver_options opt = {.state_dir = tmp};
        ks_driver *drv = NULL;
        int rc = ks_driver_open_text("m.yaml", yaml, strlen(yaml), &opt, &drv, err, sizeof err);
        if (!want[i]) { /* v1 over version 2 */
            CU_ASSERT_EQUAL(rc, KS_ERR_STATE);
            CU_ASSERT_PTR_NOT_NULL(strstr(err, "does not downgrade"));
            CU_ASSERT_PTR_NULL(drv);
            break;
        }
        CU_ASSERT_EQUAL_FATAL(rc, 0);
        CU_ASSERT_EQUAL(pipe_s(drv, "in", "a", "x", 1), 0);
        ks_driver_record r;
        CU_ASSERT_EQUAL_FATAL(ks_driver_read_output(drv, "out", &r), 0);
        CU_ASSERT_EQUAL(r.value_len, strlen(want[i]));
        CU_ASSERT_EQUAL(memcmp(r.value, want[i], strlen(want[i])), 0);
        ks_driver_close(drv);
    }
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

/* ---- outbox events (notify: one event per record) ---------------------------- */

#define NOTIFY_PLUGIN_PATH KS_TEST_BUILDDIR "/tests/plugins/.libs"

/* notify keeps a count per user in `counts` and hands the outbox `outbox`
 * (config; default "commands") {"u":"<key>","n":<count before>}. */
#define NOTIFY_YAML(sink_value, notify_config, outbox)                                 \
    HEADER "sources:\n"                                                                \
           "  in: { topic: in, key: string, value: string }\n"                         \
           "nodes:\n"                                                                  \
           "  - { name: notify, type: notify.notify, from: in, stores: [counts]"       \
           notify_config " }\n"                                                        \
           "sinks:\n"                                                                  \
           "  - { name: out, from: notify, topic: out, key: string, value: " sink_value \
           " }\n" outbox

#define OUTBOX_COMMANDS                                                                \
    "outbox:\n"                                                                        \
    "  name: commands\n"                                                               \
    "  topic: mailbox\n"

static ks_driver *open_notify(const char *yaml, ks_driver_options *opt)
{
    ks_driver_options defaults = {0};
    if (!opt)
        opt = &defaults;
    opt->plugin_path = NOTIFY_PLUGIN_PATH;
    return open_yaml(yaml, opt);
}

static int is_event_id(const char *id)
{
    if (!id || strlen(id) != KS_OUTBOX_ID_LEN)
        return 0;
    for (const char *c = id; *c; c++)
        if (!isxdigit((unsigned char)*c) || isupper((unsigned char)*c))
            return 0;
    return 1;
}

/* 1 when the next event is notify's n-th for `user`, made by the record at
 * `offset` of partition 0 of topic "in"; its id goes into id (may be NULL). */
static int next_event(ks_driver *drv, const char *user, int n, int64_t offset, char *id)
{
    ks_driver_event ev;
    if (ks_driver_read_event(drv, "commands", &ev) != 0)
        return 0;
    char payload[128], want[KS_OUTBOX_ID_LEN + 1];
    snprintf(payload, sizeof payload, "{\"u\":\"%s\",\"n\":%d}", user, n);
    if (ks_outbox_derive_id("driver-test", "in", 0, offset, 0, want) != 0)
        return 0;
    if (id)
        memcpy(id, ev.id, KS_OUTBOX_ID_LEN + 1);
    return ev.outbox && strcmp(ev.outbox, "commands") == 0 && is_event_id(ev.id) &&
           strcmp(ev.id, want) == 0 && ev.user && strcmp(ev.user, user) == 0 &&
           ev.user_len == strlen(user) && ev.payload && ev.payload_len == strlen(payload) &&
           memcmp(ev.payload, payload, ev.payload_len) == 0 && ev.input_topic &&
           strcmp(ev.input_topic, "in") == 0 && ev.input_partition == 0 &&
           ev.input_offset == offset && ev.rank == 0 && ev.task == 0;
}

static void test_outbox_events(void)
{
    ks_driver *drv = open_notify(NOTIFY_YAML("string", "", OUTBOX_COMMANDS), NULL);
    CU_ASSERT_EQUAL(ks_driver_event_count(drv, NULL), 0);
    CU_ASSERT_EQUAL(pipe_s(drv, "in", "alice", "a", 100), 0);
    CU_ASSERT_EQUAL(pipe_s(drv, "in", "bob", "b", 200), 0);
    CU_ASSERT_EQUAL(pipe_s(drv, "in", "alice", "c", 300), 0);
    CU_ASSERT_EQUAL(ks_driver_event_count(drv, NULL), 3);
    CU_ASSERT_EQUAL(ks_driver_event_count(drv, "commands"), 3);
    CU_ASSERT_EQUAL(ks_driver_event_count(drv, "nope"), 0);
    ks_driver_event ev;
    CU_ASSERT_EQUAL(ks_driver_read_event(drv, "nope", &ev), KS_ERR_NOT_FOUND);
    CU_ASSERT_PTR_NULL(ev.id);
    /* the sink records are there too, unaffected */
    CU_ASSERT_EQUAL(ks_driver_output_count(drv, "out"), 3);

    char ids[3][KS_OUTBOX_ID_LEN + 1];
    CU_ASSERT_EQUAL_FATAL(ks_driver_read_event(drv, NULL, &ev), 0);
    CU_ASSERT_STRING_EQUAL(ev.outbox, "commands");
    CU_ASSERT(is_event_id(ev.id));
    CU_ASSERT_STRING_EQUAL(ev.user, "alice");
    CU_ASSERT(ev.payload_len == 19 && memcmp(ev.payload, "{\"u\":\"alice\",\"n\":0}", 19) == 0);
    CU_ASSERT_EQUAL(ev.input_offset, 0);
    CU_ASSERT_EQUAL(ev.timestamp, 100);
    memcpy(ids[0], ev.id, sizeof ids[0]);
    CU_ASSERT(next_event(drv, "bob", 0, 1, ids[1]));
    CU_ASSERT_EQUAL(ks_driver_event_count(drv, "commands"), 1);
    CU_ASSERT(next_event(drv, "alice", 1, 2, ids[2]));
    CU_ASSERT_EQUAL(ks_driver_read_event(drv, "commands", &ev), KS_ERR_NOT_FOUND);
    CU_ASSERT_EQUAL(ks_driver_event_count(drv, NULL), 0);
    CU_ASSERT(strcmp(ids[0], ids[1]) != 0 && strcmp(ids[1], ids[2]) != 0 &&
              strcmp(ids[0], ids[2]) != 0);
    /* the events' counts were committed with them */
    CU_ASSERT_EQUAL(stored(drv, "counts", "alice"), 2);
    ks_driver_close(drv);

    /* the same input offsets in another driver: the same ids */
    drv = open_notify(NOTIFY_YAML("string", "", OUTBOX_COMMANDS), NULL);
    CU_ASSERT_EQUAL(pipe_s(drv, "in", "alice", "a", 100), 0);
    CU_ASSERT_EQUAL(pipe_s(drv, "in", "bob", "b", 200), 0);
    char again[KS_OUTBOX_ID_LEN + 1];
    CU_ASSERT(next_event(drv, "alice", 0, 0, again));
    CU_ASSERT_STRING_EQUAL(again, ids[0]);
    CU_ASSERT(next_event(drv, "bob", 0, 1, again));
    CU_ASSERT_STRING_EQUAL(again, ids[1]);
    ks_driver_close(drv);
}

/* Several partitions: each event names its input record's partition. */
static void test_outbox_partitions(void)
{
    ks_driver_options opt = {.partitions = 3};
    ks_driver *drv = open_notify(NOTIFY_YAML("string", "", OUTBOX_COMMANDS), &opt);
    char key[16];
    for (int i = 0; i < 12; i++) {
        snprintf(key, sizeof key, "u%d", i % 6);
        CU_ASSERT_EQUAL(pipe_s(drv, "in", key, "x", i), 0);
    }
    CU_ASSERT_EQUAL(ks_driver_event_count(drv, "commands"), 12);
    ks_driver_event ev;
    int n = 0, wrong = 0;
    while (ks_driver_read_event(drv, "commands", &ev) == 0) {
        int32_t p = ks_driver_partition_for(ev.user, ev.user_len, 3);
        char want[KS_OUTBOX_ID_LEN + 1] = "";
        ks_outbox_derive_id("driver-test", "in", p, ev.input_offset, 0, want);
        char payload[64];
        snprintf(payload, sizeof payload, "{\"u\":\"%s\",\"n\":%d}", ev.user, n / 6);
        wrong += ev.input_partition != p || ev.task != p || strcmp(ev.id, want) != 0 ||
                 strcmp(ev.payload, payload) != 0 || ev.timestamp != n;
        n++;
    }
    CU_ASSERT_EQUAL(n, 12);
    CU_ASSERT_EQUAL(wrong, 0);
    ks_driver_close(drv);
}

/* An aborted batch drops its unread events, as its sink records; events
 * are readable before a manual commit. */
static void test_outbox_abort(void)
{
    /* the sink wants JSON: notify's forward of a non-JSON value fails, it
     * returns KS_RETRY after its outbox_enqueue */
    ks_driver *drv = open_notify(NOTIFY_YAML("json", "", OUTBOX_COMMANDS), NULL);
    CU_ASSERT_EQUAL(pipe_s(drv, "in", "alice", "1", 1), 0);
    CU_ASSERT_EQUAL(pipe_s(drv, "in", "alice", "x", 2), KS_RETRY);
    CU_ASSERT_EQUAL(ks_driver_event_count(drv, NULL), 1);
    CU_ASSERT_EQUAL(stored(drv, "counts", "alice"), 1);
    CU_ASSERT_EQUAL(pipe_s(drv, "in", "alice", "2", 3), 0);
    CU_ASSERT(next_event(drv, "alice", 0, 0, NULL));
    CU_ASSERT(next_event(drv, "alice", 1, 2, NULL)); /* n not skipped */
    ks_driver_close(drv);

    ks_driver_options opt = {.manual_commit = 1};
    drv = open_notify(NOTIFY_YAML("json", "", OUTBOX_COMMANDS), &opt);
    CU_ASSERT_EQUAL(pipe_s(drv, "in", "a", "1", 1), 0);
    CU_ASSERT_EQUAL(ks_driver_commit(drv), 0);
    CU_ASSERT_EQUAL(pipe_s(drv, "in", "b", "1", 2), 0);
    CU_ASSERT_EQUAL(pipe_s(drv, "in", "c", "1", 3), 0);
    CU_ASSERT_EQUAL(ks_driver_event_count(drv, NULL), 3); /* before the commit */
    ks_driver_event ev;
    CU_ASSERT_EQUAL_FATAL(ks_driver_read_event(drv, NULL, &ev), 0);
    CU_ASSERT_STRING_EQUAL(ev.user, "a");
    CU_ASSERT_EQUAL_FATAL(ks_driver_read_event(drv, NULL, &ev), 0);
    CU_ASSERT_STRING_EQUAL(ev.user, "b");
    CU_ASSERT_EQUAL(pipe_s(drv, "in", "d", "x", 4), KS_RETRY);
    /* the handed-out event stays valid; c's and d's are gone */
    CU_ASSERT_STRING_EQUAL(ev.user, "b");
    CU_ASSERT(is_event_id(ev.id));
    CU_ASSERT_EQUAL(ks_driver_event_count(drv, NULL), 0);
    CU_ASSERT_EQUAL(ks_driver_read_event(drv, NULL, &ev), KS_ERR_NOT_FOUND);
    CU_ASSERT_EQUAL(stored(drv, "counts", "b"), -1);
    ks_driver_close(drv);
}

/* Pipe one record with the engine's log (stderr) going to `log`. */
static int pipe_logged(ks_driver *drv, const char *key, char *log, size_t cap)
{
    FILE *f = tmpfile();
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    dup2(fileno(f), STDERR_FILENO);
    ks_log_level level = ks_log_get_level();
    ks_log_set_level(KS_LOG_WARN);
    int rc = pipe_s(drv, "in", key, "1", 1);
    ks_log_set_level(level);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    rewind(f);
    size_t n = fread(log, 1, cap - 1, f);
    log[n] = '\0';
    fclose(f);
    return rc;
}

/* Without an outbox (or another name) outbox_enqueue fails as before:
 * KS_ERR_NOT_FOUND to the processor (notify logs it and retries). */
static void test_outbox_not_found(void)
{
    char log[4096], want[64];
    snprintf(want, sizeof want, "outbox_enqueue: %d", KS_ERR_NOT_FOUND);
    ks_driver *drv = open_notify(NOTIFY_YAML("string", "", ""), NULL);
    CU_ASSERT_EQUAL(pipe_logged(drv, "alice", log, sizeof log), KS_RETRY);
    CU_ASSERT_PTR_NOT_NULL(strstr(log, want));
    CU_ASSERT_EQUAL(ks_driver_event_count(drv, NULL), 0);
    ks_driver_event ev;
    CU_ASSERT_EQUAL(ks_driver_read_event(drv, NULL, &ev), KS_ERR_NOT_FOUND);
    CU_ASSERT_EQUAL(ks_driver_output_count(drv, NULL), 0);
    CU_ASSERT_EQUAL(stored(drv, "counts", "alice"), -1);
    ks_driver_close(drv);

    drv = open_notify(NOTIFY_YAML("string", ", config: { outbox: other }", OUTBOX_COMMANDS),
                      NULL);
    CU_ASSERT_EQUAL(pipe_logged(drv, "alice", log, sizeof log), KS_RETRY);
    CU_ASSERT_PTR_NOT_NULL(strstr(log, want));
    CU_ASSERT_EQUAL(ks_driver_event_count(drv, "commands"), 0);
    ks_driver_close(drv);

    CU_ASSERT_EQUAL(ks_driver_read_event(NULL, NULL, &ev), KS_ERR_INVALID);
    CU_ASSERT_EQUAL(ks_driver_event_count(NULL, NULL), 0);
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
    CU_add_test(s, "a kept state_dir migrates once, no downgrade", test_state_dir_migrates);
    CU_add_test(s, "open errors name file and plugin", test_open_errors);
    CU_add_test(s, "wall-clock punctuations fire when due", test_wallclock);
    CU_add_test(s, "outbox events: ids as the engine's, in order", test_outbox_events);
    CU_add_test(s, "outbox events name their input partition", test_outbox_partitions);
    CU_add_test(s, "outbox events of an aborted batch are dropped", test_outbox_abort);
    CU_add_test(s, "no outbox of that name: KS_ERR_NOT_FOUND", test_outbox_not_found);
}
