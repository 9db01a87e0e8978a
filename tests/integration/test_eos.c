/*
 * test_eos.c - exactly-once details against the real broker:
 *  - a processor that fails records mid-batch, the count with
 *    `cache_bytes: 0`: the batch aborts and is replayed, downstream counts
 *    are exactly 1..n per key (every update, no duplicate, no gap);
 *  - aggregate and reduce with functions from the example page_views plugin:
 *    at most one update per input (the record cache folds), final values
 *    equal a reference;
 *  - at-least-once mode with the record cache (cache_bytes: 1MiB): same stores
 *    and changelogs, per key rising counts ending at the reference after a
 *    clean run.
 */
#include <CUnit/CUnit.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "itest.h"
#include "kstreams/kstreams.h"

#define KEYS 200
#define N 20000

static void make_view(int i, char *key, size_t klen, char *value, size_t vlen,
                      int32_t *partition, void *arg)
{
    (void)partition;
    (void)arg;
    snprintf(key, klen, "k%03d", (i * 37) % KEYS);
    snprintf(value, vlen, "{\"user_agent\":\"%s\",\"bytes\":%d}",
             i % 1000 == 500 ? "FAIL-once" : "browser", (i * 7919) % 5000);
}

static int key_index(const it_msg *m)
{
    int k = -1;
    if (!m->key || sscanf(m->key, "k%d", &k) != 1 || k < 0 || k >= KEYS)
        return -1;
    return k;
}

/* Start a pipeline whose nodes/sinks are given, over a fresh input topic
 * holding N records; wait until every key k's int64 output on `out` showed
 * want[k]; stop it. */
static void run_pipeline(const char *name, const char *guarantee, const char *nodes,
                         const char *sinks, const char *out, const long *want, it_msgs *got,
                         char *log, size_t loglen)
{
    char dir[256], app[128], in[128], yaml[512];
    it_tempdir(dir, sizeof dir);
    it_unique(app, sizeof app, name);
    it_unique(in, sizeof in, "eos-in");
    CU_ASSERT_FATAL(it_create_topic(in, 4) == 0);
    CU_ASSERT_FATAL(it_produce(in, N, make_view, NULL) == 0);
    snprintf(yaml, sizeof yaml, "%s/p.yaml", dir);
    snprintf(log, loglen, "%s/engine.log", dir);
    it_write_file(yaml,
                  "application: %s\nkafka: { bootstrap: [%s] }\nguarantee: %s\n"
                  "workers: 2\nstate_dir: %s/state\n"
                  "plugin_path: [%s/plugins/.libs, %s/tests/plugins/.libs, "
                  "%s/examples/page-views/.libs]\n"
                  "sources:\n  views: { topic: %s, key: string, value: json }\n"
                  "nodes:\n%s\nsinks:\n%s\n",
                  app, it_bootstrap(), guarantee, dir, KS_TEST_BUILDDIR, KS_TEST_BUILDDIR,
                  KS_TEST_BUILDDIR, in, nodes, sinks);
    pid_t pid = it_engine_start(yaml, "eos", log);
    it_consume_counts(out, want, KEYS, "k%d", 2000, 120000, got);
    CU_ASSERT_EQUAL(it_engine_stop(pid, 30000), 0);
}

static long want_count[KEYS];

static void count_reference(void)
{
    memset(want_count, 0, sizeof want_count);
    for (int i = 0; i < N; i++)
        want_count[(i * 37) % KEYS]++;
}

/* Per key, the int64 outputs rise and end at the reference count (the
 * record cache folds updates within a commit). */
static void check_counts_folded(const it_msgs *m)
{
    long folded, repeats, foreign;
    int wrong;
    it_check_count_folded(m, want_count, KEYS, "k%d", &folded, &repeats, &foreign, &wrong);
    printf("\n  %zu count outputs for %d inputs (%ld updates folded): %ld repeats, "
           "%ld foreign, %d keys wrong\n",
           m->count, N, folded, repeats, foreign, wrong);
    CU_ASSERT_EQUAL(m->count + (size_t)folded, (size_t)N);
    CU_ASSERT_EQUAL(repeats + foreign, 0);
    CU_ASSERT_EQUAL(wrong, 0);
}

/* Per key, int64 outputs must be exactly 1..n (counts without a cache). */
static void check_counts(const it_msgs *m)
{
    const long *want = want_count;
    long gaps, repeats, foreign;
    int wrong;
    it_check_count_sequences(m, want, KEYS, "k%d", &gaps, &repeats, &foreign, &wrong);
    long bad = gaps + repeats + foreign;
    printf("\n  %zu count outputs for %d inputs: %ld out of sequence, %d keys wrong\n",
           m->count, N, bad, wrong);
    CU_ASSERT_EQUAL(m->count, (size_t)N);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(wrong, 0);
}

static void out_topic(char *buf, size_t len, const char *base) { it_unique(buf, len, base); }

static void test_failing_processor_replays_batch(void)
{
    char out[128], sinks[512], log[512];
    out_topic(out, sizeof out, "eos-counts");
    snprintf(sinks, sizeof sinks,
             "  - { from: per_key, topic: %s, key: string, value: int64, create: true, "
             "partitions: 4 }",
             out);
    it_msgs got = {0};
    count_reference();
    run_pipeline("eos-flaky", "exactly-once",
                 "  - { name: flaky, type: flaky.once, from: views, config: { marker: FAIL } }\n"
                 "  - { name: per_key, type: count, from: flaky, store: counts, cache_bytes: 0 }",
                 sinks, out, want_count, &got, log, sizeof log);
    check_counts(&got);
    int aborts = it_log_count(log, "aborting batch");
    printf("  batches aborted and replayed: %d (marked records: %d)\n", aborts, N / 1000);
    CU_ASSERT(aborts >= N / 1000);
    it_msgs_free(&got);
}

static void test_aggregate_and_reduce(void)
{
    char sum_t[128], max_t[128], sinks[1024], log[512];
    out_topic(sum_t, sizeof sum_t, "eos-bytes");
    out_topic(max_t, sizeof max_t, "eos-max");
    snprintf(sinks, sizeof sinks,
             "  - { from: bytes, topic: %s, key: string, value: int64, create: true, "
             "partitions: 4 }\n"
             "  - { from: biggest, topic: %s, key: string, value: json, create: true, "
             "partitions: 4 }",
             sum_t, max_t);
    it_msgs sums = {0}, maxes = {0};
    long want_sum[KEYS] = {0}, want_max[KEYS], got_sum[KEYS], got_max[KEYS];
    for (int k = 0; k < KEYS; k++)
        want_max[k] = got_sum[k] = got_max[k] = -1;
    for (int i = 0; i < N; i++) {
        int k = (i * 37) % KEYS, b = (i * 7919) % 5000;
        want_sum[k] += b;
        if (b > want_max[k])
            want_max[k] = b;
    }
    run_pipeline("eos-agg", "exactly-once",
                 "  - { name: bytes, type: aggregate, from: views, store: bytes, functions: "
                 "{ init: page_views.zero, add: page_views.add_bytes } }\n"
                 "  - { name: biggest, type: reduce, from: views, store: biggest, functions: "
                 "{ reduce: page_views.max_bytes } }",
                 sinks, sum_t, want_sum, &sums, log, sizeof log);
    /* the engine has stopped: everything it committed is there */
    it_consume(max_t, 1, 1000, 60000, &maxes);
    for (size_t i = 0; i < sums.count; i++) {
        int k = key_index(&sums.items[i]);
        if (k >= 0 && sums.items[i].value_len == 8)
            got_sum[k] = (long)ks_int64_decode(sums.items[i].value);
    }
    for (size_t i = 0; i < maxes.count; i++) {
        int k = key_index(&maxes.items[i]);
        json_t *j = json_loads(maxes.items[i].value ? maxes.items[i].value : "", 0, NULL);
        if (k >= 0 && j)
            got_max[k] = (long)json_integer_value(json_object_get(j, "bytes"));
        json_decref(j);
    }
    int wrong_sum = 0, wrong_max = 0;
    for (int k = 0; k < KEYS; k++) {
        wrong_sum += got_sum[k] != want_sum[k];
        wrong_max += got_max[k] != want_max[k];
    }
    printf("\n  aggregate: %zu updates, %d keys wrong; reduce: %zu updates, %d keys wrong\n",
           sums.count, wrong_sum, maxes.count, wrong_max);
    CU_ASSERT(sums.count >= KEYS && sums.count <= (size_t)N);
    CU_ASSERT(maxes.count >= KEYS && maxes.count <= (size_t)N);
    CU_ASSERT_EQUAL(wrong_sum, 0);
    CU_ASSERT_EQUAL(wrong_max, 0);
    it_msgs_free(&sums);
    it_msgs_free(&maxes);
}

static void test_at_least_once(void)
{
    char out[128], sinks[512], log[512];
    out_topic(out, sizeof out, "alo-counts");
    snprintf(sinks, sizeof sinks,
             "  - { from: per_key, topic: %s, key: string, value: int64, create: true, "
             "partitions: 4 }",
             out);
    it_msgs got = {0};
    count_reference();
    run_pipeline("alo", "at-least-once",
                 "  - { name: per_key, type: count, from: views, store: counts, cache_bytes: 1MiB }", sinks, out,
                 want_count, &got, log, sizeof log);
    check_counts_folded(&got);
    CU_ASSERT(it_log_count(log, "at-least-once") >= 1);
    it_msgs_free(&got);
}

int main(void)
{
    static const it_case cases[] = {
        {"a processor failing mid-batch: abort, replay, no duplicate",
         test_failing_processor_replays_batch},
        {"aggregate and reduce with functions from a user plugin", test_aggregate_and_reduce},
        {"at-least-once: same stores and changelogs, exact after a clean run",
         test_at_least_once},
        {NULL, NULL}};
    return it_main("eos", cases);
}
