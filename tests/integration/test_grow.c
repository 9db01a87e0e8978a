/*
 * test_grow.c - `kstreams grow-partitions` on a real broker: a count over a
 * 2-partition source is stopped, its source grown to 4 partitions with
 * the tool, restarted, and fed more records for the same keys (placed by
 * murmur2 among 4 partitions, as a restarted producer does). Every key's
 * outputs must then be exactly 1..total (the count runs with
 * `cache_bytes: 0`): no state lost, nothing counted twice. Also the
 * refusals: records not processed yet ("drain first"), the application
 * running, a windowed store. The same with producers that place keys by
 * CRC-32 (`--partitioner crc32`), and with the count behind a repartition
 * topic (keyed by a field of the value), which grows too; there the tool
 * is killed with the moves in an open transaction, and again after their
 * commit, before the sources grew: the engine refuses to start in between
 * and a third run finishes the work.
 *
 * KS_GROW_MODE=manual grows the topics by hand instead (source and
 * changelog, as the engine's start-up error suggested before the tool),
 * and KS_GROW_MODE=wipe follows the procedure docs/operations.md gave
 * before (delete the changelog and the state directory): both must fail
 * the count check, which shows that the check can fail.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "itest.h"

#define KEYS 24
#define FIRST 10  /* records per key before the growth */
#define SECOND 5  /* after */

static char dir[256], app[128], in[128], out[128], yaml[512];

/* How the records of a scenario are made. */
typedef struct feed {
    int partitions;   /* of the source now */
    int crc32;        /* placed as librdkafka's default partitioner does */
    int repartition;  /* keyed by user; the count is per value field /k */
} feed;

static void make_rec(int i, char *key, size_t klen, char *value, size_t vlen,
                     int32_t *partition, void *arg)
{
    const feed *f = arg;
    *partition = -1; /* the producer's murmur2 */
    if (f->repartition) {
        snprintf(key, klen, "u%d", i % 7);
        snprintf(value, vlen, "{\"i\":%d,\"k\":\"k%d\"}", i, i % KEYS);
        return;
    }
    snprintf(key, klen, "k%d", i % KEYS);
    snprintf(value, vlen, "{\"i\":%d}", i);
    if (f->crc32)
        *partition = rd_kafka_msg_partitioner_consistent(NULL, key, strlen(key),
                                                         f->partitions, NULL, NULL);
}

/* Run `kstreams ARGS` with the environment variable ENV ("NAME=VALUE",
 * or ""), its stdout and stderr in buf; its exit status, 128 + the signal
 * when killed. */
static int kstreams_once(const char *env, const char *args, char *buf, size_t len)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s '%s' %s 2>&1; exit $?", env, it_kstreams(), args);
    FILE *p = popen(cmd, "r");
    size_t n = p ? fread(buf, 1, len - 1, p) : 0;
    buf[n] = '\0';
    int st = p ? pclose(p) : -1;
    printf("\n$ %s kstreams %s\n%s", env, args, buf);
    return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The tool, run again when it stopped because the broker went away (the
 * test command runs two suites at a time, and the crash and faults suites
 * restart the broker): grow-partitions is made to be re-run after any
 * interruption, which is what an operator does too. */
static int kstreams_env(const char *env, const char *args, char *buf, size_t len)
{
    int st = -1;
    for (int attempt = 0; attempt < 3; attempt++) {
        st = kstreams_once(env, args, buf, len);
        if (st != 1 || (!strstr(buf, "no answer") && !strstr(buf, "brokers are down")))
            return st;
        for (int waited = 0; waited < 120 && it_broker_ctl("status") != 0; waited += 2)
            it_sleep_ms(2000);
        printf("\n  (the broker went away during the run: run again)");
    }
    return st;
}

static int kstreams(const char *args, char *buf, size_t len)
{
    return kstreams_env("", args, buf, len);
}

static int partitions_of(const char *topic)
{
    rd_kafka_t *rk = it_admin_client();
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    int n = -1;
    if (rd_kafka_metadata(rk, 0, rkt, &md, 10000) == 0) {
        n = md->topic_cnt == 1 && !md->topics[0].err ? md->topics[0].partition_cnt : 0;
        rd_kafka_metadata_destroy(md);
    }
    rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(rk);
    return n;
}

/* CreatePartitions or DeleteTopics by hand (the modes without the tool). */
static int admin_op(const char *topic, int grow_to)
{
    rd_kafka_t *rk = it_admin_client();
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    char why[256];
    if (grow_to > 0) {
        rd_kafka_NewPartitions_t *np = rd_kafka_NewPartitions_new(topic, (size_t)grow_to, why,
                                                                  sizeof why);
        rd_kafka_CreatePartitions(rk, &np, 1, NULL, q);
        rd_kafka_NewPartitions_destroy(np);
    } else {
        rd_kafka_DeleteTopic_t *dt = rd_kafka_DeleteTopic_new(topic);
        rd_kafka_DeleteTopics(rk, &dt, 1, NULL, q);
        rd_kafka_DeleteTopic_destroy(dt);
    }
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
    int rc = ev && !rd_kafka_event_error(ev) ? 0 : -1;
    if (ev)
        rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
    rd_kafka_destroy(rk);
    it_sleep_ms(1000); /* the metadata of every client catches up */
    return rc;
}

/* Start the engine, wait until every key shows want[k], stop it with
 * SIGTERM. The outputs read so far go to *outs (freed first). */
static int run_until(const char *log, const long *want, it_msgs *outs)
{
    pid_t pid = it_engine_start(yaml, "a", log);
    it_msgs_free(outs);
    int rc = it_consume_counts(out, want, KEYS, "k%d", 3000, 30000, outs);
    CU_ASSERT(it_engine_stop(pid, 20000) == 0);
    return rc;
}

/* grow-partitions killed (SIGKILL) with the moved keys in an open
 * transaction, then after the commit but before the sources grew: the
 * engine refuses to start in between, and a last run finishes. */
static void interrupted_runs(const char *args, char *buf, size_t len)
{
    CU_ASSERT(kstreams_env("KS_CRASH_AT=grow-before-commit", args, buf, len) == 128 + 9);
    CU_ASSERT(kstreams_env("KS_CRASH_AT=grow-before-sources", args, buf, len) == 128 + 9);
    CU_ASSERT(strstr(buf, "moved ") != NULL && strstr(buf, "moved 0 keys") == NULL);
    CU_ASSERT(partitions_of(in) == 2);
    char log[600];
    snprintf(log, sizeof log, "%s/refused.log", dir);
    pid_t pid = it_engine_start(yaml, "a", log);
    CU_ASSERT(it_engine_wait(pid, 30000) == 1);
    CU_ASSERT(it_log_count(log, "has 4 partitions, expected 2") >= 1);
}

/* The scenario of the file's comment; `mode` as KS_GROW_MODE says. */
static void scenario(const char *mode, int crc32, int repartition, int interrupted)
{
    char buf[32768], args[1024], log[600];
    feed f = {2, crc32, repartition};
    const char *tool_opts = crc32 ? " --partitioner crc32" : "";
    it_tempdir(dir, sizeof dir);
    it_unique(app, sizeof app, "grow");
    it_unique(in, sizeof in, "grow-in");
    it_unique(out, sizeof out, "grow-out");
    CU_ASSERT_FATAL(it_create_topic(in, 2) == 0);
    snprintf(yaml, sizeof yaml, "%s/pipeline.yaml", dir);
    it_write_file(yaml,
                  "application: %s\n"
                  "kafka: { bootstrap: [%s] }\n"
                  "state_dir: %s/state\n"
                  "plugin_path: [%s/plugins/.libs]\n"
                  "sources:\n  in: { topic: %s, key: string, value: json }\n"
                  "nodes:\n%s  - { name: per_key, type: count, from: %s, store: counts, "
                  "cache_bytes: 0 }\n"
                  "sinks:\n  - { from: per_key, topic: %s, key: string, value: int64, "
                  "create: true }\n",
                  app, it_bootstrap(), dir, KS_TEST_BUILDDIR, in,
                  repartition ? "  - { name: by_k, type: ops.select_key, from: in, "
                                "config: { path: /k } }\n"
                              : "",
                  repartition ? "by_k" : "in", out);
    CU_ASSERT_FATAL(it_produce(in, KEYS * FIRST, make_rec, &f) == 0);

    /* refused: the records are not processed yet */
    snprintf(args, sizeof args, "grow-partitions '%s' --partitions 4%s", yaml, tool_opts);
    CU_ASSERT(kstreams(args, buf, sizeof buf) == 1);
    CU_ASSERT(strstr(buf, "drain first: ") != NULL);
    CU_ASSERT(partitions_of(in) == 2);

    long want[KEYS];
    for (int k = 0; k < KEYS; k++)
        want[k] = FIRST;
    it_msgs outs = {0};
    snprintf(log, sizeof log, "%s/run1.log", dir);
    pid_t pid = it_engine_start(yaml, "a", log);
    CU_ASSERT_FATAL(it_consume_counts(out, want, KEYS, "k%d", 3000, 30000, &outs) == 0);
    /* refused: the application runs */
    CU_ASSERT(kstreams(args, buf, sizeof buf) == 1);
    CU_ASSERT(strstr(buf, "refused: consumer group") != NULL);
    CU_ASSERT(it_engine_stop(pid, 20000) == 0);

    char changelog[300];
    snprintf(changelog, sizeof changelog, "%s-counts-changelog", app);
    if (strcmp(mode, "tool") == 0) {
        snprintf(args, sizeof args, "grow-partitions '%s' --partitions 4 --dry-run%s", yaml,
                 tool_opts);
        CU_ASSERT(kstreams(args, buf, sizeof buf) == 0);
        CU_ASSERT(strstr(buf, "store counts: 24 keys, ") != NULL);
        CU_ASSERT(strstr(buf, "dry run: nothing changed") != NULL);
        /* behind a repartition topic the keys are the engine's: murmur2 */
        CU_ASSERT(strstr(buf, repartition || !crc32 ? "(partitioner murmur2)"
                                                    : "(partitioner crc32)") != NULL);
        CU_ASSERT(partitions_of(in) == 2 && partitions_of(changelog) == 2);
        snprintf(args, sizeof args, "grow-partitions '%s' --partitions 4%s", yaml, tool_opts);
        if (interrupted)
            interrupted_runs(args, buf, sizeof buf);
        CU_ASSERT(kstreams(args, buf, sizeof buf) == 0);
        CU_ASSERT(strstr(buf, "moved ") != NULL);
        CU_ASSERT((strstr(buf, "moved 0 keys") == NULL) == !interrupted);
        /* a second run finds nothing left to do */
        CU_ASSERT(kstreams(args, buf, sizeof buf) == 0);
        CU_ASSERT(strstr(buf, "moved 0 keys") != NULL);
    } else if (strcmp(mode, "manual") == 0) {
        CU_ASSERT(admin_op(in, 4) == 0 && admin_op(changelog, 4) == 0);
    } else { /* wipe */
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s/state'", dir);
        CU_ASSERT(system(cmd) == 0);
        CU_ASSERT(admin_op(changelog, 0) == 0 && admin_op(in, 4) == 0);
    }
    CU_ASSERT(partitions_of(in) == 4);
    CU_ASSERT(partitions_of(changelog) == 4 || strcmp(mode, "wipe") == 0);
    if (repartition) {
        char rp[300];
        snprintf(rp, sizeof rp, "%s-per_key-repartition", app);
        CU_ASSERT(partitions_of(rp) == 4);
    }

    /* the same keys again, placed among 4 partitions */
    f.partitions = 4;
    CU_ASSERT_FATAL(it_produce(in, KEYS * SECOND, make_rec, &f) == 0);
    for (int k = 0; k < KEYS; k++)
        want[k] = FIRST + SECOND;
    snprintf(log, sizeof log, "%s/run2.log", dir);
    run_until(log, want, &outs);
    long gaps = 0, repeats = 0, foreign = 0;
    int wrong = 0;
    it_check_count_sequences(&outs, want, KEYS, "k%d", &gaps, &repeats, &foreign, &wrong);
    printf("\n%s: %zu outputs, gaps %ld, repeats %ld, foreign %ld, keys with a wrong count "
           "%d\n",
           mode, outs.count, gaps, repeats, foreign, wrong);
    CU_ASSERT(outs.count == (size_t)KEYS * (FIRST + SECOND));
    CU_ASSERT(gaps == 0 && repeats == 0 && foreign == 0 && wrong == 0);
    /* each key once in the stores, at its total: the old tasks replayed
     * the tombstones of the keys that left them */
    snprintf(args, sizeof args, "query '%s' counts --int64", yaml);
    CU_ASSERT(kstreams(args, buf, sizeof buf) == 0);
    int entries = 0, at_total = 0;
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        char key[64];
        long v;
        if (sscanf(line, "%63s %ld", key, &v) == 2) {
            entries++;
            at_total += v == FIRST + SECOND;
        }
    }
    printf("%s: the stores hold %d entries, %d at %d\n", mode, entries, at_total,
           FIRST + SECOND);
    CU_ASSERT(entries == KEYS && at_total == KEYS);
    /* the new tasks restored the keys moved to them */
    CU_ASSERT(it_log_count(log, "restored store counts partition 2") +
                  it_log_count(log, "restored store counts partition 3") >= 1);
    it_msgs_free(&outs);
}

static void test_grow(void)
{
    scenario(getenv("KS_GROW_MODE") ? getenv("KS_GROW_MODE") : "tool", 0, 0, 0);
}

/* The sources' producers use librdkafka's default partitioner (CRC-32). */
static void test_grow_crc32(void)
{
    scenario("tool", 1, 0, 0);
}

/* The count reads a repartition topic: it grows too, and the store's keys
 * move by the engine's murmur2. The tool is killed twice on the way. */
static void test_grow_repartition(void)
{
    scenario("tool", 0, 1, 1);
}

/* A windowed store cannot be moved: refused before anything changes. */
static void test_refuse_windowed(void)
{
    char buf[8192], args[1024], wyaml[600], wdir[256], wapp[128], win[128];
    it_tempdir(wdir, sizeof wdir);
    it_unique(wapp, sizeof wapp, "grow-win");
    it_unique(win, sizeof win, "grow-win-in");
    snprintf(wyaml, sizeof wyaml, "%s/windowed.yaml", wdir);
    it_write_file(wyaml,
                  "application: %s\n"
                  "kafka: { bootstrap: [%s] }\n"
                  "state_dir: %s/state\n"
                  "plugin_path: [%s/plugins/.libs]\n"
                  "sources:\n  in: { topic: %s, key: string, value: json, create: true, "
                  "partitions: 2 }\n"
                  "nodes:\n  - { name: per_minute, type: count, from: in, store: minutes, "
                  "window: { kind: tumbling, size: 1m } }\n"
                  "sinks:\n  - { from: per_minute, topic: %s-out, key: string, value: int64, "
                  "create: true }\n",
                  wapp, it_bootstrap(), wdir, KS_TEST_BUILDDIR, win, win);
    snprintf(args, sizeof args, "grow-partitions '%s' --partitions 4", wyaml);
    CU_ASSERT(kstreams(args, buf, sizeof buf) == 2);
    CU_ASSERT(strstr(buf, "store 'minutes' of node 'per_minute' is windowed") != NULL);
    snprintf(args, sizeof args, "grow-partitions '%s' --partitions 4 --partitioner foo", wyaml);
    CU_ASSERT(kstreams(args, buf, sizeof buf) == 2);
    CU_ASSERT(strstr(buf, "unknown partitioner 'foo'") != NULL);
}

int main(void)
{
    static const it_case cases[] = {
        {"grow", test_grow},
        {"grow_crc32", test_grow_crc32},
        {"grow_repartition", test_grow_repartition},
        {"refuse_windowed", test_refuse_windowed},
        {NULL, NULL},
    };
    return it_main("grow", cases);
}
