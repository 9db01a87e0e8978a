/*
 * test_repartition.c - count by a field of the value through a repartition
 * topic (docs/repartition.md), exactly-once, against the real broker.
 *
 * Page views keyed by user (4 partitions) are counted per URL: ops.select_key
 * takes /url as the new key, the engine inserts <app>-per_url-repartition,
 * and count runs behind it. One scenario in phases, each checked against a
 * reference computed here:
 *   1. 30 000 views, clean stop; the repartition topic exists with 4
 *      partitions and cleanup.policy=delete
 *   2. kill -9 mid-stream, restart; then SIGKILL at each step of the
 *      commit sequence (KS_CRASH_AT), restart
 *   3. a second process joins mid-stream and leaves
 *   4. the repartition topic was purged: its low watermarks moved up
 * After each phase the output (read_committed) must hold, per URL, exactly
 * the counts 1, 2, ... n: no gap, no repeat (the counts run with
 * `cache_bytes: 0`, so every update is visible); and the stores of the process
 * that ran last (read from its LMDB files) the reference count per URL,
 * nothing else. A last case starts an
 * application whose repartition topic exists with another partition count:
 * the engine must refuse to start and name both counts, as for a
 * `repartition: { partitions: N }` other than the sources' count. And a
 * YAML-only pipeline filter -> select_key -> count (no C at all) gives
 * exact counts of the views it keeps, read with read_committed.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "itest.h"
#include "kstreams/kstreams.h"
#include "kafka/topics.h"
#include "state/store.h"

#define URLS 500

static char dir[256], app[128], in_topic[128], out_topic[128], rp_topic[300];
static char yaml_a[512], yaml_b[512], log_a[512], log_b[512];
static long produced;
static long expected_count[URLS];

static int url_of(long n)
{
    return (int)((n * 7919 + (n % 13) * 31) % URLS);
}

static void make_view(int i, char *key, size_t klen, char *value, size_t vlen,
                      int32_t *partition, void *arg)
{
    (void)partition;
    long n = *(long *)arg + i;
    /* the user key spreads one URL's views over every partition */
    snprintf(key, klen, "user-%04d", (int)(n % 997));
    snprintf(value, vlen, "{\"n\":%ld,\"url\":\"/u/%d\",\"bytes\":%d}", n, url_of(n),
             (int)(n % 5000));
}

static void produce_more(int n)
{
    long base = produced;
    CU_ASSERT_FATAL(it_produce(in_topic, n, make_view, &base) == 0);
    for (int i = 0; i < n; i++)
        expected_count[url_of(base + i)]++;
    produced += n;
}

/* `extra`: more keys of the count node ("" for none). */
static void write_pipeline(const char *yaml, const char *application, const char *state,
                           const char *extra)
{
    it_write_file(yaml,
                  "application: %s\n"
                  "kafka: { bootstrap: [%s] }\n"
                  "guarantee: exactly-once\n"
                  "commit_interval_ms: 100\n"
                  "workers: 2\n"
                  "state_dir: %s\n"
                  "plugin_path: [%s/plugins/.libs]\n"
                  "sources:\n"
                  "  views: { topic: %s, key: string, value: json }\n"
                  "nodes:\n"
                  "  - { name: by_url, type: ops.select_key, from: views,"
                  " config: { path: /url } }\n"
                  "  - { name: per_url, type: count, from: by_url, store: views-per-url,"
                  " cache_bytes: 0%s }\n"
                  "sinks:\n"
                  "  - { from: per_url, topic: %s, key: string, value: int64, create: true, "
                  "partitions: 4 }\n",
                  application, it_bootstrap(), state, KS_TEST_BUILDDIR, in_topic, extra, out_topic);
}

typedef struct url_scan {
    long count[URLS];
    long entries, foreign;
} url_scan;

static int url_scan_cb(void *arg, ks_bytes key, ks_bytes value)
{
    url_scan *sc = arg;
    char k[64];
    int u = -1;
    snprintf(k, sizeof k, "%.*s", (int)(key.len < 60 ? key.len : 60), (const char *)key.data);
    sc->entries++;
    if (sscanf(k, "/u/%d", &u) != 1 || u < 0 || u >= URLS || value.len != 8 || sc->count[u])
        sc->foreign++;
    else
        sc->count[u] = (long)ks_int64_decode(value.data);
    return 0;
}

/* The stores of process a, which ran last and alone (read-only, from the
 * LMDB files): per URL the reference count, nothing else. */
static void check_stores(const char *phase)
{
    static url_scan sc;
    memset(&sc, 0, sizeof sc);
    int opened = 0;
    for (int p = 0; p < 4; p++) {
        char tdir[900], err[512];
        snprintf(tdir, sizeof tdir, "%s/state-a/%s/task-%d", dir, app, p);
        ks_store_env *env;
        if (ks_store_env_open_readonly(tdir, &env, err, sizeof err) != 0) {
            printf("\n  [%s] store of task %d: %s\n", phase, p, err);
            continue;
        }
        ks_store_db *db;
        ks_bytes none = {NULL, 0};
        if (ks_store_db_open(env, "views-per-url", &db) == 0) {
            CU_ASSERT_EQUAL(ks_store_range(db, none, none, url_scan_cb, &sc), 0);
            opened++;
        }
        ks_store_read_end(env);
        ks_store_env_close(env);
    }
    int wrong = 0;
    for (int u = 0; u < URLS; u++)
        if (sc.count[u] != expected_count[u] && !wrong++)
            printf("\n  [%s] store: /u/%d holds %ld, the reference says %ld", phase, u,
                   sc.count[u], expected_count[u]);
    printf("  [%s] stores: %d of 4 tasks, %ld entries, %ld foreign, %d URLs differ from the "
           "reference\n",
           phase, opened, sc.entries, sc.foreign, wrong);
    CU_ASSERT_EQUAL(opened, 4);
    CU_ASSERT_EQUAL(sc.foreign, 0);
    CU_ASSERT_EQUAL(wrong, 0);
}

static int check_sequences(const char *phase)
{
    it_msgs out = {0};
    it_consume_counts(out_topic, expected_count, URLS, "/u/%d", 2000, 240000, &out);
    long folded, repeats, foreign;
    int wrong_keys;
    it_check_count_folded(&out, expected_count, URLS, "/u/%d", &folded, &repeats, &foreign,
                          &wrong_keys);
    printf("\n  [%s] %zu outputs for %ld inputs: %ld updates folded, %ld repeats, "
           "%ld foreign, %d URLs with a wrong final count\n",
           phase, out.count, produced, folded, repeats, foreign, wrong_keys);
    CU_ASSERT_EQUAL(out.count + (size_t)folded, (size_t)produced);
    CU_ASSERT_EQUAL(folded, 0); /* no record cache by default: exactly 1..n */
    CU_ASSERT_EQUAL(repeats, 0);
    CU_ASSERT_EQUAL(foreign, 0);
    CU_ASSERT_EQUAL(wrong_keys, 0);
    it_msgs_free(&out);
    check_stores(phase);
    return wrong_keys + (int)folded + (int)repeats;
}

static void wait_outputs(long n)
{
    (void)n;
    it_msgs out = {0};
    it_consume_counts(out_topic, expected_count, URLS, "/u/%d", 200, 240000, &out);
    it_msgs_free(&out);
}

static void clear_log(const char *path)
{
    FILE *f = fopen(path, "w");
    if (f)
        fclose(f);
}

/* Sum of the low watermarks of the repartition topic's partitions. */
static long low_watermarks(void)
{
    int64_t lo[4];
    if (it_watermarks(rp_topic, 4, lo, NULL) != 0)
        return -1;
    return (long)(lo[0] + lo[1] + lo[2] + lo[3]);
}

static void setup(void)
{
    it_tempdir(dir, sizeof dir);
    it_unique(app, sizeof app, "repart");
    it_unique(in_topic, sizeof in_topic, "views");
    it_unique(out_topic, sizeof out_topic, "per-url");
    snprintf(rp_topic, sizeof rp_topic, "%s-per_url-repartition", app);
    CU_ASSERT_FATAL(it_create_topic(in_topic, 4) == 0);
    char state[400];
    snprintf(state, sizeof state, "%s/state-a", dir);
    snprintf(yaml_a, sizeof yaml_a, "%s/a.yaml", dir);
    write_pipeline(yaml_a, app, state, "");
    snprintf(state, sizeof state, "%s/state-b", dir);
    snprintf(yaml_b, sizeof yaml_b, "%s/b.yaml", dir);
    write_pipeline(yaml_b, app, state, "");
    snprintf(log_a, sizeof log_a, "%s/a.log", dir);
    snprintf(log_b, sizeof log_b, "%s/b.log", dir);
}

static void test_first_run(void)
{
    setup();
    produce_more(30000);
    pid_t a = it_engine_start(yaml_a, "a", log_a);
    wait_outputs(produced);
    CU_ASSERT_EQUAL(it_engine_stop(a, 30000), 0);
    check_sequences("first run");
    /* created by the engine as docs/repartition.md says */
    rd_kafka_t *rk = it_admin_client();
    CU_ASSERT_PTR_NOT_NULL_FATAL(rk);
    ks_topic_found f;
    char err[512];
    CU_ASSERT_EQUAL(ks_topic_describe(rk, rp_topic, 10000, &f, err, sizeof err), 1);
    CU_ASSERT_EQUAL(f.partitions, 4);
    CU_ASSERT_STRING_EQUAL(f.cleanup_policy, "delete");
    rd_kafka_destroy(rk);
    CU_ASSERT(it_log_count(log_a, "repartition topic") > 0);
}

static void test_kill9(void)
{
    clear_log(log_a);
    pid_t a = it_engine_start(yaml_a, "a", log_a);
    produce_more(20000);
    it_sleep_ms(1500); /* mid-stream: some views counted, some in the topic */
    it_engine_kill(a);
    produce_more(5000);
    a = it_engine_start(yaml_a, "a", log_a);
    wait_outputs(produced);
    CU_ASSERT_EQUAL(it_engine_stop(a, 30000), 0);
    check_sequences("kill -9");
}

/* SIGKILL at each step of the commit sequence (engine/base/fault.h), then a
 * restart: the produce to the repartition topic, the changelog and the
 * offsets of both sub-topologies commit together or not at all. */
static void test_crash_points(void)
{
    static const char *const points[] = {"before-flush", "before-send-offsets",
                                         "before-kafka-commit", "after-kafka-commit",
                                         "after-store-commit"};
    for (size_t i = 0; i < sizeof points / sizeof points[0]; i++) {
        clear_log(log_a);
        produce_more(4000);
        char env[128];
        snprintf(env, sizeof env, "KS_CRASH_AT=%s:3", points[i]);
        pid_t a = it_engine_start_env(yaml_a, "a", log_a, env);
        /* more input while it runs: batches to commit until the point */
        int st = -1;
        for (int64_t end = it_now_ms() + 90000; st < 0 && it_now_ms() < end;) {
            st = it_engine_wait(a, 300);
            if (st < 0)
                produce_more(200);
        }
        if (st < 0)
            it_engine_kill(a);
        printf("\n  crash at %s: exit %d", points[i], st);
        CU_ASSERT_EQUAL(st, 128 + 9);
        a = it_engine_start(yaml_a, "a", log_a);
        wait_outputs(produced);
        CU_ASSERT_EQUAL(it_engine_stop(a, 30000), 0);
        char phase[64];
        snprintf(phase, sizeof phase, "crash at %s", points[i]);
        check_sequences(phase);
    }
}

static void test_second_process(void)
{
    clear_log(log_a);
    clear_log(log_b);
    pid_t a = it_engine_start(yaml_a, "a", log_a);
    produce_more(10000);
    pid_t b = it_engine_start(yaml_b, "b", log_b);
    produce_more(10000);
    it_sleep_ms(4000);
    produce_more(5000);
    it_sleep_ms(2000);
    /* until b holds tasks: its join and the rebalance may take longer on a
     * loaded machine */
    for (int i = 0; i < 600 && it_log_count(log_b, "started") == 0; i++)
        it_sleep_ms(100);
    CU_ASSERT_EQUAL(it_engine_stop(b, 30000), 0);
    produce_more(5000);
    wait_outputs(produced);
    /* keep running a few seconds: the purge follows the commits */
    it_sleep_ms(7000);
    CU_ASSERT_EQUAL(it_engine_stop(a, 30000), 0);
    printf("  process b: %d task starts\n", it_log_count(log_b, "] task "));
    CU_ASSERT(it_log_count(log_b, "started") > 0);
    check_sequences("second process");
}

static void test_purged(void)
{
    long lo = low_watermarks();
    printf("\n  repartition topic %s: low watermarks sum to %ld of %ld records written\n",
           rp_topic, lo, produced);
    /* most of it is gone: what the last purge left is at most a few
     * seconds of input */
    CU_ASSERT(lo > produced / 2);
}

/* A repartition topic with another partition count than the sources: the
 * engine refuses to start and names both counts. */
static void test_wrong_partitions(void)
{
    char app2[128], topic[300], yaml[512], log[512], state[400];
    it_unique(app2, sizeof app2, "repart-bad");
    snprintf(topic, sizeof topic, "%s-per_url-repartition", app2);
    CU_ASSERT_FATAL(it_create_topic(topic, 2) == 0);
    snprintf(yaml, sizeof yaml, "%s/bad.yaml", dir);
    snprintf(log, sizeof log, "%s/bad.log", dir);
    snprintf(state, sizeof state, "%s/state-bad", dir);
    write_pipeline(yaml, app2, state, "");
    pid_t p = it_engine_start(yaml, "bad", log);
    int st = it_engine_wait(p, 60000);
    if (st < 0)
        it_engine_kill(p);
    CU_ASSERT_EQUAL(st, 1);
    char want[512];
    snprintf(want, sizeof want, "repartition topic %s has 2 partitions, expected 4", topic);
    CU_ASSERT_EQUAL(it_log_count(log, want), 1);

    /* `repartition: { partitions: 2 }` with 4 source partitions: refused
     * before anything is created (a task per partition number) */
    it_unique(app2, sizeof app2, "repart-n");
    snprintf(topic, sizeof topic, "%s-per_url-repartition", app2);
    write_pipeline(yaml, app2, state, ", repartition: { partitions: 2 }");
    p = it_engine_start(yaml, "bad", log);
    st = it_engine_wait(p, 60000);
    if (st < 0)
        it_engine_kill(p);
    CU_ASSERT_EQUAL(st, 1);
    snprintf(want, sizeof want,
             "repartition topic %s: `repartition: { partitions: 2 }` differs from the 4 "
             "partitions of the sources",
             topic);
    CU_ASSERT_EQUAL(it_log_count(log, want), 1);
}

/* ops.filter -> ops.select_key -> count, YAML only, exactly-once: the
 * 1 300 views of 2 000 with bytes >= 700 counted per URL, each URL's
 * outputs exactly 1..n. */
static void test_filter_select_key_count(void)
{
    char app2[128], in2[128], out2[128], yaml[512], log[512], state[400];
    if (!dir[0])
        it_tempdir(dir, sizeof dir);
    it_unique(app2, sizeof app2, "repart-f");
    it_unique(in2, sizeof in2, "views-f");
    it_unique(out2, sizeof out2, "big-per-url");
    snprintf(yaml, sizeof yaml, "%s/f.yaml", dir);
    snprintf(log, sizeof log, "%s/f.log", dir);
    snprintf(state, sizeof state, "%s/state-f", dir);
    CU_ASSERT_FATAL(it_create_topic(in2, 4) == 0);
    it_write_file(yaml,
                  "application: %s\n"
                  "kafka: { bootstrap: [%s] }\n"
                  "guarantee: exactly-once\n"
                  "commit_interval_ms: 100\n"
                  "state_dir: %s\n"
                  "plugin_path: [%s/plugins/.libs]\n"
                  "sources:\n"
                  "  views: { topic: %s, key: string, value: json }\n"
                  "nodes:\n"
                  "  - { name: big, type: ops.filter, from: views,"
                  " config: { where: { path: /bytes, ge: 700 } } }\n"
                  "  - { name: by_url, type: ops.select_key, from: big,"
                  " config: { path: /url } }\n"
                  "  - { name: per_url, type: count, from: by_url, store: big-per-url,"
                  " cache_bytes: 0 }\n"
                  "sinks:\n"
                  "  - { from: per_url, topic: %s, key: string, value: int64, create: true, "
                  "partitions: 4 }\n",
                  app2, it_bootstrap(), state, KS_TEST_BUILDDIR, in2, out2);
    enum { VIEWS = 2000 };
    long base = 0, want[URLS] = {0}, kept = 0;
    CU_ASSERT_FATAL(it_produce(in2, VIEWS, make_view, &base) == 0);
    for (long n = 0; n < VIEWS; n++)
        if (n % 5000 >= 700) {
            want[url_of(n)]++;
            kept++;
        }
    pid_t p = it_engine_start(yaml, "f", log);
    it_msgs out = {0};
    it_consume(out2, (size_t)kept, 2000, 60000, &out);
    CU_ASSERT_EQUAL(it_engine_stop(p, 30000), 0);
    long gaps, repeats, foreign;
    int wrong_keys;
    it_check_count_sequences(&out, want, URLS, "/u/%d", &gaps, &repeats, &foreign,
                             &wrong_keys);
    printf("\n  %zu outputs for %ld kept of %d views: %ld gaps, %ld repeats, %ld foreign, "
           "%d URLs with a wrong final count\n",
           out.count, kept, VIEWS, gaps, repeats, foreign, wrong_keys);
    CU_ASSERT_EQUAL(kept, 1300);
    CU_ASSERT_EQUAL(out.count, (size_t)kept);
    CU_ASSERT_EQUAL(gaps + repeats + foreign + wrong_keys, 0);
    it_msgs_free(&out);
}

int main(void)
{
    static const it_case cases[] = {
        {"per URL: exact sequences through the repartition topic", test_first_run},
        {"per URL: kill -9 mid-stream, restart", test_kill9},
        {"per URL: SIGKILL at each step of the commit sequence", test_crash_points},
        {"per URL: a second process joins and leaves", test_second_process},
        {"repartition topic purged below the committed offsets", test_purged},
        {"repartition topic with another partition count: refused", test_wrong_partitions},
        {"YAML only: filter -> select_key -> count, exact counts", test_filter_select_key_count},
        {NULL, NULL}};
    return it_main("repartition", cases);
}
