/*
 * test_static.c - static membership (`static_membership: true`) on a real
 * broker: two processes of one application count a 4-partition topic; one
 * is killed with SIGKILL and started again at once with the same
 * --instance. As a static member it gets its partitions back without a
 * rebalance: the other process logs no revocation, neither when it comes
 * back nor when the dead member's session would have expired. The same run
 * with dynamic members (the default) is the control: there the other
 * process is revoked. Both runs keep exactly-once: per key the
 * read_committed counts are exactly 1..n (the count runs with
 * `cache_bytes: 0`, so every update is visible).
 */
#include <CUnit/CUnit.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "itest.h"

#define KEYS 40
#define BATCH 2000
#define SESSION_MS 6000 /* the broker's smallest allowed session timeout */

static void make_rec(int i, char *key, size_t klen, char *value, size_t vlen,
                     int32_t *partition, void *arg)
{
    (void)arg;
    *partition = i % 4;
    snprintf(key, klen, "k%d", i % KEYS);
    snprintf(value, vlen, "{\"i\":%d}", i);
}

/* Wait until `log` has at least `n` lines containing `needle`. */
static int wait_log(const char *log, const char *needle, int n, int timeout_ms)
{
    for (int64_t end = it_now_ms() + timeout_ms; it_now_ms() < end; it_sleep_ms(100))
        if (it_log_count(log, needle) >= n)
            return 0;
    return -1;
}

typedef struct run_result {
    int other_revoked; /* revocations the surviving process logged after the kill */
    int back_assigned; /* assignments the restarted process logged */
    int64_t back_ms;   /* from the kill to the restarted process's assignment */
    long gaps, repeats, foreign;
    int wrong_keys;
} run_result;

/* The pipeline of process `who`: each its own state directory, as on two
 * machines. */
static void write_yaml(char *yaml, size_t len, const char *dir, const char *who,
                       const char *app, const char *in, const char *out, int static_on)
{
    snprintf(yaml, len, "%s/%s.yaml", dir, who);
    it_write_file(yaml,
                  "application: %s\n"
                  "kafka: { bootstrap: [%s], properties: { session.timeout.ms: %d } }\n"
                  "static_membership: %s\n"
                  "state_dir: %s/state-%s\n"
                  "plugin_path: [%s/plugins/.libs]\n"
                  "sources:\n  in: { topic: %s, key: string, value: json }\n"
                  "nodes:\n  - { name: per_key, type: count, from: in, store: counts, cache_bytes: 0 }\n"
                  "sinks:\n  - { from: per_key, topic: %s, key: string, value: int64, "
                  "create: true, partitions: 4 }\n",
                  app, it_bootstrap(), SESSION_MS, static_on ? "true" : "false", dir, who,
                  KS_TEST_BUILDDIR, in, out);
}

/* B and A share the work; A is killed with SIGKILL and started again at
 * once; more records come; then B's log tells whether the group
 * rebalanced. */
static void run(int static_on, run_result *r)
{
    char dir[256], app[128], in[128], out[128], yaml_a[512], yaml_b[512];
    char log_a[512], log_a2[512], log_b[512];
    it_tempdir(dir, sizeof dir);
    it_unique(app, sizeof app, static_on ? "static" : "dynamic");
    it_unique(in, sizeof in, "static-in");
    it_unique(out, sizeof out, "static-out");
    CU_ASSERT_FATAL(it_create_topic(in, 4) == 0);
    CU_ASSERT_FATAL(it_produce(in, BATCH, make_rec, NULL) == 0);
    write_yaml(yaml_a, sizeof yaml_a, dir, "a", app, in, out, static_on);
    write_yaml(yaml_b, sizeof yaml_b, dir, "b", app, in, out, static_on);
    snprintf(log_a, sizeof log_a, "%s/a.log", dir);
    snprintf(log_a2, sizeof log_a2, "%s/a2.log", dir);
    snprintf(log_b, sizeof log_b, "%s/b.log", dir);

    pid_t b = it_engine_start(yaml_b, "b", log_b);
    CU_ASSERT_FATAL(wait_log(log_b, "assigned 4 partitions", 1, 60000) == 0);
    pid_t a = it_engine_start(yaml_a, "a", log_a);
    CU_ASSERT_FATAL(wait_log(log_a, "assigned 2 partitions", 1, 60000) == 0);
    CU_ASSERT_FATAL(wait_log(log_b, "assigned 2 partitions", 1, 60000) == 0);
    it_msgs outs = {0};
    it_consume(out, BATCH, 500, 60000, &outs);
    it_msgs_free(&outs);
    int revoked_before = it_log_count(log_b, "revoked");

    int64_t killed = it_now_ms();
    it_engine_kill(a);
    a = it_engine_start(yaml_a, "a", log_a2);
    CU_ASSERT(wait_log(log_a2, "assigned 2 partitions", 1, 60000) == 0);
    r->back_ms = it_now_ms() - killed;
    CU_ASSERT_FATAL(it_produce(in, BATCH, make_rec, NULL) == 0);
    it_consume(out, 2 * BATCH, 500, 90000, &outs);
    it_msgs_free(&outs);
    /* past the dead member's session: a dynamic group has rebalanced by now */
    it_sleep_ms(SESSION_MS + 3000);
    r->other_revoked = it_log_count(log_b, "revoked") - revoked_before;
    r->back_assigned = it_log_count(log_a2, "assigned 2 partitions");

    long want[KEYS];
    for (int k = 0; k < KEYS; k++)
        want[k] = 2 * BATCH / KEYS;
    it_consume(out, 2 * BATCH, 1000, 60000, &outs);
    it_check_count_sequences(&outs, want, KEYS, "k%d", &r->gaps, &r->repeats, &r->foreign,
                             &r->wrong_keys);
    printf("\n  %s: %zu outputs, other process revoked %d times after the kill, restarted "
           "process assigned %d times, %lld ms after the kill; gaps %ld, repeats %ld, "
           "foreign %ld, wrong keys %d\n",
           static_on ? "static members" : "dynamic members", outs.count, r->other_revoked,
           r->back_assigned, (long long)r->back_ms, r->gaps, r->repeats, r->foreign,
           r->wrong_keys);
    it_msgs_free(&outs);
    CU_ASSERT_EQUAL(it_engine_stop(a, 30000), 0);
    CU_ASSERT_EQUAL(it_engine_stop(b, 30000), 0);
}

static void assert_exactly_once(const run_result *r)
{
    CU_ASSERT_EQUAL(r->gaps, 0);
    CU_ASSERT_EQUAL(r->repeats, 0);
    CU_ASSERT_EQUAL(r->foreign, 0);
    CU_ASSERT_EQUAL(r->wrong_keys, 0);
}

static void test_static_restart_no_rebalance(void)
{
    run_result r = {0};
    run(1, &r);
    CU_ASSERT_EQUAL(r.other_revoked, 0);
    CU_ASSERT_EQUAL(r.back_assigned, 1);
    assert_exactly_once(&r);
}

/* The control: the same restart with dynamic members rebalances the group,
 * so the check above can fail. */
static void test_dynamic_restart_rebalances(void)
{
    run_result r = {0};
    run(0, &r);
    CU_ASSERT(r.other_revoked >= 1);
    CU_ASSERT(r.back_assigned >= 1);
    assert_exactly_once(&r);
}

int main(void)
{
    static const it_case cases[] = {
        {"static member restarted after kill -9: no rebalance, exactly-once",
         test_static_restart_no_rebalance},
        {"dynamic member restarted after kill -9: the group rebalances (control)",
         test_dynamic_restart_rebalances},
        {NULL, NULL}};
    return it_main("static", cases);
}
