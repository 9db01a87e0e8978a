/*
 * test_query.c - `kstreams query` against a RUNNING engine (and the same
 * instance once stopped), with the real broker: a count pipeline on 2
 * partitions, records fed while the engine runs, stores read by a separate
 * `kstreams query` process read-only. The engine must not notice: it stops
 * cleanly (exit 0) and its outputs stay exact.
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
                  "  - { name: per_key, type: count, from: in, store: counts }\n"
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
        {"--help of every command; usage exit code", test_help},
        {NULL, NULL}};
    return it_main("query", cases);
}
