/*
 * test_poison.c - poison records (a value that is not the source's serde)
 * under each policy, exactly-once, real broker:
 *  - fail (default): the engine stops with exit 1 and a message naming
 *    topic/partition/offset; a restart stops at the same record again;
 *  - skip: logged, counted, the rest processed exactly once;
 *  - dead-letter: each poison record lands once in the dead-letter topic,
 *    with headers naming where it came from and why;
 *  - an output a sink refuses (not the sink's serde) makes its input
 *    record poison, under the same policy;
 *  - a value a JSON operator (ops.filter on a string source) finds not
 *    to be JSON: its dead letter and the engine's log line carry the
 *    operator's reason with the byte.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "itest.h"
#include "kstreams/kstreams.h"

#define N 3000
#define KEYS 50

static int is_poison(int i) { return i % 100 == 42; }

static void make_rec(int i, char *key, size_t klen, char *value, size_t vlen,
                     int32_t *partition, void *arg)
{
    (void)arg;
    *partition = i % 2; /* two partitions, known offsets: offset = i / 2 */
    snprintf(key, klen, "k%02d", i % KEYS);
    if (is_poison(i))
        snprintf(value, vlen, "{not json %d", i);
    else
        snprintf(value, vlen, "{\"n\":%d}", i);
}

typedef struct run {
    char dir[256], app[128], in[128], out[128], yaml[512], log[512], dlq[160];
} run;

static void setup(run *r, const char *policy)
{
    it_tempdir(r->dir, sizeof r->dir);
    it_unique(r->app, sizeof r->app, "poison");
    it_unique(r->in, sizeof r->in, "poison-in");
    it_unique(r->out, sizeof r->out, "poison-out");
    snprintf(r->dlq, sizeof r->dlq, "%s-dlq", r->app);
    CU_ASSERT_FATAL(it_create_topic(r->in, 2) == 0);
    CU_ASSERT_FATAL(it_produce(r->in, N, make_rec, NULL) == 0);
    snprintf(r->yaml, sizeof r->yaml, "%s/p.yaml", r->dir);
    snprintf(r->log, sizeof r->log, "%s/engine.log", r->dir);
    /* cache_bytes: 0: the checks below see every update of the count */
    it_write_file(r->yaml,
                  "application: %s\nkafka: { bootstrap: [%s] }\nguarantee: exactly-once\n"
                  "poison: %s\nstate_dir: %s/state\nplugin_path: [%s/plugins/.libs]\n"
                  "sources:\n  in: { topic: %s, key: string, value: json }\n"
                  "nodes:\n"
                  "  - { name: per_key, type: count, from: in, store: counts, cache_bytes: 0 }\n"
                  "sinks:\n  - { from: per_key, topic: %s, key: string, value: int64, "
                  "create: true, partitions: 2 }\n",
                  r->app, it_bootstrap(), policy, r->dir, KS_TEST_BUILDDIR, r->in, r->out);
}

/* Counts per key must be 1..n over the good records only. */
static void check_good_counts(const run *r)
{
    long want[KEYS] = {0};
    size_t good = 0;
    for (int i = 0; i < N; i++)
        if (!is_poison(i)) {
            want[i % KEYS]++;
            good++;
        }
    it_msgs out = {0};
    it_consume(r->out, good, 2000, 120000, &out);
    long gaps, repeats, foreign;
    int wrong;
    it_check_count_sequences(&out, want, KEYS, "k%d", &gaps, &repeats, &foreign, &wrong);
    long bad = gaps + repeats + foreign;
    printf("\n  %zu outputs for %zu good records: %ld out of sequence, %d keys wrong\n",
           out.count, good, bad, wrong);
    CU_ASSERT_EQUAL(out.count, good);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(wrong, 0);
    it_msgs_free(&out);
}

static void test_fail_policy(void)
{
    run r;
    setup(&r, "fail");
    pid_t pid = it_engine_start(r.yaml, "p", r.log);
    int st = it_engine_wait(pid, 60000);
    if (st < 0)
        it_engine_kill(pid);
    CU_ASSERT_EQUAL(st, 1);
    /* record 42 is the first poison: partition 0, offset 21 */
    char want[256];
    snprintf(want, sizeof want,
             "poison record at %s/0/21: not valid JSON: expected '\"' starting a member "
             "name at byte 1",
             r.in);
    int named = it_log_count(r.log, want);
    printf("\n  exit %d; log names %s/0/21: %s\n", st, r.in, named ? "yes" : "no");
    CU_ASSERT(named >= 1);
    /* nothing was skipped: a restart stops at the same record */
    pid = it_engine_start(r.yaml, "p", r.log);
    st = it_engine_wait(pid, 60000);
    if (st < 0)
        it_engine_kill(pid);
    CU_ASSERT_EQUAL(st, 1);
    CU_ASSERT(it_log_count(r.log, want) >= 2);
}

static void test_skip_policy(void)
{
    run r;
    setup(&r, "skip");
    pid_t pid = it_engine_start(r.yaml, "p", r.log);
    check_good_counts(&r);
    CU_ASSERT_EQUAL(it_engine_stop(pid, 30000), 0);
    int skipped = it_log_count(r.log, "skipping poison record");
    /* topic/partition/offset, the serde's sentence and the reason */
    char want[256];
    snprintf(want, sizeof want,
             "skipping poison record %s/0/21: not valid JSON: expected '\"' starting a "
             "member name at byte 1",
             r.in);
    CU_ASSERT_EQUAL(it_log_count(r.log, want), 1);
    printf("  skipped with a log line: %d of %d\n", skipped, N / 100);
    CU_ASSERT_EQUAL(skipped, N / 100);
}

static void test_dead_letter_policy(void)
{
    run r;
    setup(&r, "dead-letter");
    pid_t pid = it_engine_start(r.yaml, "p", r.log);
    check_good_counts(&r);
    it_msgs dlq = {0};
    it_consume(r.dlq, N / 100, 1000, 60000, &dlq);
    CU_ASSERT_EQUAL(it_engine_stop(pid, 30000), 0);
    int with_origin = 0;
    char *seen = calloc(N, 1);
    for (size_t i = 0; i < dlq.count; i++) {
        int n = -1;
        const it_msg *m = &dlq.items[i];
        if (m->value && sscanf(m->value, "{not json %d", &n) == 1 && n >= 0 && n < N)
            seen[n]++;
        char want[256];
        snprintf(want, sizeof want, "ks.topic=%s\nks.partition=%d\nks.offset=%d\n", r.in,
                 n % 2, n / 2);
        /* the serde's sentence, and the validator's reason with its byte */
        with_origin += m->headers && strstr(m->headers, want) &&
                       strstr(m->headers, "ks.error=not valid JSON\n") &&
                       strstr(m->headers, "ks.error.reason=expected '\"' starting a member "
                                          "name at byte 1");
    }
    int once = 0;
    for (int i = 0; i < N; i++)
        once += is_poison(i) && seen[i] == 1;
    printf("  dead-letter topic: %zu records, %d poison records exactly once, %d with "
           "origin headers\n",
           dlq.count, once, with_origin);
    CU_ASSERT_EQUAL(dlq.count, (size_t)(N / 100));
    CU_ASSERT_EQUAL(once, N / 100);
    CU_ASSERT_EQUAL(with_origin, N / 100);
    free(seen);
    it_msgs_free(&dlq);
}

/* A processor's output the sink refuses (here: a string source piped to a
 * json sink) makes its input record poison: the batch is aborted, and on
 * the replay the policy (dead-letter) takes that record; the good ones
 * reach the sink once. */
static void test_refused_output(void)
{
    run r;
    it_tempdir(r.dir, sizeof r.dir);
    it_unique(r.app, sizeof r.app, "poisonout");
    it_unique(r.in, sizeof r.in, "poisonout-in");
    it_unique(r.out, sizeof r.out, "poisonout-out");
    snprintf(r.dlq, sizeof r.dlq, "%s-dlq", r.app);
    CU_ASSERT_FATAL(it_create_topic(r.in, 2) == 0);
    CU_ASSERT_FATAL(it_produce(r.in, N, make_rec, NULL) == 0);
    snprintf(r.yaml, sizeof r.yaml, "%s/p.yaml", r.dir);
    snprintf(r.log, sizeof r.log, "%s/engine.log", r.dir);
    it_write_file(r.yaml,
                  "application: %s\nkafka: { bootstrap: [%s] }\nguarantee: exactly-once\n"
                  "poison: dead-letter\nstate_dir: %s/state\n"
                  "sources:\n  in: { topic: %s, key: string, value: string }\n"
                  "sinks:\n  - { from: in, topic: %s, key: string, value: json, "
                  "create: true, partitions: 2 }\n",
                  r.app, it_bootstrap(), r.dir, r.in, r.out);
    pid_t pid = it_engine_start(r.yaml, "p", r.log);
    const size_t good = N - N / 100;
    it_msgs out = {0}, dlq = {0};
    it_consume(r.out, good, 2000, 120000, &out);
    it_consume(r.dlq, N / 100, 1000, 60000, &dlq);
    CU_ASSERT_EQUAL(it_engine_stop(pid, 30000), 0);
    char *seen = calloc(N, 1);
    size_t foreign = 0;
    for (size_t i = 0; i < out.count; i++) {
        int n = -1;
        if (out.items[i].value && sscanf(out.items[i].value, "{\"n\":%d}", &n) == 1 && n >= 0 &&
            n < N && !is_poison(n))
            seen[n]++;
        else
            foreign++;
    }
    size_t once = 0, dead = 0;
    for (int i = 0; i < N; i++)
        once += !is_poison(i) && seen[i] == 1;
    for (size_t i = 0; i < dlq.count; i++) {
        const it_msg *m = &dlq.items[i];
        int n = -1;
        dead += m->value && sscanf(m->value, "{not json %d", &n) == 1 && is_poison(n) &&
                m->headers && strstr(m->headers, "does not match the sink's serde");
    }
    printf("\n  sink: %zu records, %zu good exactly once, %zu foreign; dead-letter: %zu of "
           "%d with the reason\n",
           out.count, once, foreign, dead, N / 100);
    CU_ASSERT_EQUAL(out.count, good);
    CU_ASSERT_EQUAL(once, good);
    CU_ASSERT_EQUAL(foreign, 0);
    CU_ASSERT_EQUAL(dlq.count, (size_t)(N / 100));
    CU_ASSERT_EQUAL(dead, (size_t)(N / 100));
    free(seen);
    it_msgs_free(&out);
    it_msgs_free(&dlq);
}

/* ops.filter reads a `value: string` source: the operator, not the
 * serde, finds the poison and says why (host skip_reason). */
static void test_operator_reason(void)
{
    run r;
    it_tempdir(r.dir, sizeof r.dir);
    it_unique(r.app, sizeof r.app, "poisonop");
    it_unique(r.in, sizeof r.in, "poisonop-in");
    it_unique(r.out, sizeof r.out, "poisonop-out");
    snprintf(r.dlq, sizeof r.dlq, "%s-dlq", r.app);
    CU_ASSERT_FATAL(it_create_topic(r.in, 2) == 0);
    CU_ASSERT_FATAL(it_produce(r.in, N / 10, make_rec, NULL) == 0);
    snprintf(r.yaml, sizeof r.yaml, "%s/p.yaml", r.dir);
    snprintf(r.log, sizeof r.log, "%s/engine.log", r.dir);
    it_write_file(r.yaml,
                  "application: %s\nkafka: { bootstrap: [%s] }\nguarantee: exactly-once\n"
                  "poison: dead-letter\nstate_dir: %s/state\nplugin_path: [%s/plugins/.libs]\n"
                  "sources:\n  in: { topic: %s, key: string, value: string }\n"
                  "nodes:\n  - { name: f, type: ops.filter, from: in,"
                  " config: { where: { path: /n, ge: 0 } } }\n"
                  "sinks:\n  - { from: f, topic: %s, key: string, value: string, "
                  "create: true, partitions: 2 }\n",
                  r.app, it_bootstrap(), r.dir, KS_TEST_BUILDDIR, r.in, r.out);
    pid_t pid = it_engine_start(r.yaml, "p", r.log);
    const size_t good = N / 10 - N / 1000;
    it_msgs out = {0}, dlq = {0};
    it_consume(r.out, good, 2000, 60000, &out);
    it_consume(r.dlq, N / 1000, 1000, 60000, &dlq);
    CU_ASSERT_EQUAL(it_engine_stop(pid, 30000), 0);
    size_t with_reason = 0;
    for (size_t i = 0; i < dlq.count; i++) {
        const it_msg *m = &dlq.items[i];
        with_reason += m->headers && strstr(m->headers, "ks.error=a processor returned skip\n") &&
                       strstr(m->headers, "ks.error.reason=ops.filter: value is not JSON: "
                                          "expected '\"' starting a member name at byte 1");
    }
    /* record 42: partition 0, offset 21 */
    char want[600];
    snprintf(want, sizeof want,
             "poison record %s/0/21 to dead-letter topic %s: a processor returned skip: "
             "ops.filter: value is not JSON: expected '\"' starting a member name at byte 1",
             r.in, r.dlq);
    int logged = it_log_count(r.log, want);
    printf("\n  sink: %zu of %zu; dead-letter: %zu of %d with the operator's reason; "
           "engine log: %d\n", out.count, good, with_reason, N / 1000, logged);
    CU_ASSERT_EQUAL(out.count, good);
    CU_ASSERT_EQUAL(dlq.count, (size_t)(N / 1000));
    CU_ASSERT_EQUAL(with_reason, (size_t)(N / 1000));
    CU_ASSERT_EQUAL(logged, 1);
    it_msgs_free(&out);
    it_msgs_free(&dlq);
}

int main(void)
{
    static const it_case cases[] = {
        {"poison: fail stops and names topic/partition/offset", test_fail_policy},
        {"poison: skip logs and goes on", test_skip_policy},
        {"poison: dead-letter, exactly once, with origin headers", test_dead_letter_policy},
        {"an output its sink refuses makes the input record poison", test_refused_output},
        {"a JSON operator's poison: its reason in the dead letter and the log",
         test_operator_reason},
        {NULL, NULL}};
    return it_main("poison", cases);
}
