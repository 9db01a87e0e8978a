/*
 * test_migrate.c - state versions kept with the stores, against the real
 * broker: exactly-once, 2 workers, 4 partitions, the builds of
 * tests/plugins/reload.c. reload_v1 keeps 8-byte counts (state version 1);
 * reload_fmt2 keeps text counts "c=N" (version 2), converts them in
 * migrate() and counts its committed runs under "__migrations", and says
 * "OLD FORMAT" when process() meets a value it cannot read.
 *
 * Every case runs v1 on a first batch of input and stops it (SIGTERM),
 * puts fmt2 in place of the plugin file, produces a second batch, then:
 *   - cold upgrade: starts fmt2 (and then refuses v1 shipped over it);
 *   - kill -9 (KS_CRASH_AT) at before-migrate, mid-migrate (5th write of
 *     migrate()), after-migrate, after-migrate-kafka-commit and
 *     after-migrate-commit, then starts fmt2 again;
 *   - restore: wipes the state directory and starts fmt2, which restores
 *     v1's changelog (its version record says 1) and migrates;
 *   - after a migration, a wiped state directory restores version 2 from
 *     the changelog and does not migrate again;
 *   - hot deploy (fmt2 copied over v1 while it runs), killed after the
 *     first migrate() and after two of the four tasks committed theirs,
 *     then started again.
 * Checked each time: every input exactly once in the read_committed output,
 * per key the counts go 1..n with no gap (the state carried over), no
 * "old-format" output and no OLD FORMAT line (fmt2 never saw an 8-byte
 * value), and in every task's stopped store: state version 2 and
 * "__migrations" = m=1 (migrated exactly once).
 * Last, v1 put back over a version-2 store is refused (exit 1, "does not
 * downgrade").
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "itest.h"
#include "state/store.h"

#define KEYS 200
#define PARTS 4
#define FIRST 2000
#define SECOND 2000
#define MAX_RECORDS 10000

static char dir[256], app[128], in_topic[128], out_topic[128];
static char yaml[512], watched[512], state[512];
static long produced;

static void make_rec(int i, char *key, size_t klen, char *value, size_t vlen,
                     int32_t *partition, void *arg)
{
    (void)partition;
    long n = *(long *)arg + i;
    snprintf(key, klen, "k%03ld", (n * 7919) % KEYS);
    snprintf(value, vlen, "n=%ld", n);
}

static void produce(int n)
{
    long base = produced;
    CU_ASSERT_FATAL(it_produce(in_topic, n, make_rec, &base) == 0);
    produced += n;
}

static const char *build(const char *name)
{
    static char path[4][512];
    static int at;
    char *p = path[at++ % 4];
    snprintf(p, 512, "%s/tests/plugins/.libs/%s.so", KS_TEST_BUILDDIR, name);
    return p;
}

static void ship(const char *src)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", src, watched);
    CU_ASSERT(system(cmd) == 0);
}

static void setup(const char *name)
{
    it_tempdir(dir, sizeof dir);
    it_unique(app, sizeof app, name);
    it_unique(in_topic, sizeof in_topic, "migrate-in");
    it_unique(out_topic, sizeof out_topic, "migrate-out");
    produced = 0;
    CU_ASSERT_FATAL(it_create_topic(in_topic, PARTS) == 0);
    snprintf(yaml, sizeof yaml, "%s/pipeline.yaml", dir);
    snprintf(watched, sizeof watched, "%s/deploy/reload.so", dir);
    snprintf(state, sizeof state, "%s/state", dir);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/deploy'", dir);
    CU_ASSERT_FATAL(system(cmd) == 0);
    ship(build("reload_v1"));
    it_write_file(yaml,
                  "application: %s\n"
                  "kafka: { bootstrap: [%s] }\n"
                  "guarantee: exactly-once\n"
                  "commit_interval_ms: 100\n"
                  "workers: 2\n"
                  "state_dir: %s\n"
                  "plugins: [%s]\n"
                  "sources:\n"
                  "  in: { topic: %s, key: string, value: string }\n"
                  "nodes:\n"
                  "  - { name: tag, type: reload.tag, from: in, store: counts }\n"
                  "sinks:\n"
                  "  - { from: tag, topic: %s, key: string, value: string, create: true, "
                  "partitions: %d }\n",
                  app, it_bootstrap(), state, watched, in_topic, out_topic, PARTS);
}

static void log_path(char *buf, size_t len, const char *run)
{
    snprintf(buf, len, "%s/engine-%s.log", dir, run);
}

/* Run the engine until every input so far has its output, then SIGTERM;
 * `env` as for it_engine_start_env. Returns the exit status. */
static int run_to_end(const char *run, const char *env)
{
    char log[600];
    log_path(log, sizeof log, run);
    pid_t pid = it_engine_start_env(yaml, "m", log, env);
    it_msgs out = {0};
    it_consume(out_topic, (size_t)produced, 2000, 180000, &out);
    it_msgs_free(&out);
    /* every task opened (restored, migrated if it had to) even when all
     * its input was committed before: the stores are checked after */
    int64_t end = it_now_ms() + 120000;
    for (int p = 0; p < PARTS && it_now_ms() < end; p++) {
        char needle[64];
        snprintf(needle, sizeof needle, "task %d started", p);
        while (it_log_count(log, needle) == 0 && it_now_ms() < end)
            it_sleep_ms(100);
    }
    it_sleep_ms(1000); /* a few commit intervals */
    int rc = it_engine_stop(pid, 60000);
    printf("\n  [%s] stopped: exit %d (log %s)", run, rc, log);
    return rc;
}

/* v1 over the first inputs, stopped cleanly; fmt2 in place; more input. */
static void v1_then_fmt2(const char *name)
{
    setup(name);
    produce(FIRST);
    CU_ASSERT_EQUAL(run_to_end("v1", NULL), 0);
    ship(build("reload_fmt2"));
    produce(SECOND);
}

static void wipe_state(void)
{
    char cmd[800];
    snprintf(cmd, sizeof cmd, "rm -rf '%s/%s'/task-*", state, app);
    CU_ASSERT(system(cmd) == 0);
}

/* Every input once, counts 1..n per key, v1 then v2 marks, no old format
 * seen by fmt2. */
static void check_outputs(const char *phase)
{
    it_msgs out = {0};
    it_consume(out_topic, (size_t)produced, 3000, 180000, &out);
    char *seen = calloc(MAX_RECORDS, 1);
    long last_count[KEYS] = {0};
    int last_mark[KEYS] = {0};
    long dup = 0, bad = 0, gaps = 0, back = 0, old = 0, v1 = 0, v2 = 0;
    for (size_t i = 0; i < out.count; i++) {
        const it_msg *m = &out.items[i];
        int mark, k;
        long count, n;
        if (m->value && strncmp(m->value, "old-format", 10) == 0) {
            old++;
            continue;
        }
        if (!m->key || !m->value || sscanf(m->key, "k%d", &k) != 1 || k < 0 || k >= KEYS ||
            sscanf(m->value, "v%d %ld n=%ld", &mark, &count, &n) != 3 || n < 0 ||
            n >= MAX_RECORDS) {
            bad++;
            continue;
        }
        if (seen[n]++)
            dup++;
        if (count != last_count[k] + 1)
            gaps++;
        last_count[k] = count;
        if (mark < last_mark[k])
            back++;
        last_mark[k] = mark;
        v1 += mark == 1;
        v2 += mark == 2;
    }
    long missing = 0;
    for (long n = 0; n < produced; n++)
        missing += !seen[n];
    printf("\n  [%s] %zu outputs for %ld inputs: missing %ld, duplicate %ld, bad %ld, "
           "old-format %ld, count gaps %ld, v2->v1 %ld; v1 %ld, v2 %ld",
           phase, out.count, produced, missing, dup, bad, old, gaps, back, v1, v2);
    CU_ASSERT_EQUAL(out.count, (size_t)produced);
    CU_ASSERT_EQUAL(missing, 0);
    CU_ASSERT_EQUAL(dup, 0);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(old, 0);
    CU_ASSERT_EQUAL(gaps, 0);
    CU_ASSERT_EQUAL(back, 0);
    CU_ASSERT_EQUAL(v1, FIRST);
    CU_ASSERT_EQUAL(v2, produced - FIRST);
    free(seen);
    it_msgs_free(&out);
}

/* Lines with `needle` in every log of this case. */
static int logs_count(const char *needle)
{
    char cmd[800];
    snprintf(cmd, sizeof cmd, "cat '%s'/engine-*.log 2>/dev/null | grep -c -- '%s'", dir,
             needle);
    FILE *p = popen(cmd, "r");
    int n = 0;
    if (p && fscanf(p, "%d", &n) != 1)
        n = 0;
    if (p)
        pclose(p);
    return n;
}

/* Every task's stopped store: version 2, migrated exactly once. */
static void check_stores(const char *phase)
{
    int ok = 0;
    for (int p = 0; p < PARTS; p++) {
        char path[700], err[512] = "", runs[32] = "";
        snprintf(path, sizeof path, "%s/%s/task-%d", state, app, p);
        ks_store_env *env = NULL;
        ks_store_db *db = NULL;
        uint32_t version = 0;
        int rc = ks_store_env_open_readonly(path, &env, err, sizeof err);
        CU_ASSERT_EQUAL(rc, 0);
        if (rc != 0) {
            printf("\n  [%s] %s", phase, err);
            continue;
        }
        ks_bytes v;
        int vr = -1;
        if (ks_store_db_open(env, "counts", &db) == 0) {
            vr = ks_store_version_get(db, &version);
            if (ks_store_get(db, (ks_bytes){"__migrations", 12}, &v) == 0 && v.len < sizeof runs)
                memcpy(runs, v.data, v.len);
        }
        ks_store_read_end(env);
        ks_store_env_close(env);
        printf("\n  [%s] task-%d: state version %s%u, __migrations %s", phase, p,
               vr == 0 ? "" : "(none) ", (unsigned)version, runs[0] ? runs : "(none)");
        CU_ASSERT_EQUAL(vr, 0);
        CU_ASSERT_EQUAL(version, 2);
        CU_ASSERT_STRING_EQUAL(runs, "m=1");
        ok += vr == 0 && version == 2 && strcmp(runs, "m=1") == 0;
    }
    CU_ASSERT_EQUAL(ok, PARTS);
    CU_ASSERT_EQUAL(logs_count("OLD FORMAT"), 0);
}

static void test_cold_upgrade(void)
{
    v1_then_fmt2("mig-cold");
    char log[600];
    log_path(log, sizeof log, "fmt2");
    pid_t pid = it_engine_start(yaml, "m", log);
    it_msgs out = {0};
    it_consume(out_topic, (size_t)produced, 2000, 180000, &out);
    it_msgs_free(&out);
    /* kstreams status shows every task's committed state version */
    char cmd[1200], status[16384] = "";
    int twos = 0;
    for (int i = 0; i < 100 && twos < PARTS; i++) {
        snprintf(cmd, sizeof cmd, "'%s' status --json '%s' 2>&1", it_kstreams(), yaml);
        FILE *p = popen(cmd, "r");
        size_t n = p ? fread(status, 1, sizeof status - 1, p) : 0;
        status[n] = '\0';
        if (p)
            pclose(p);
        twos = 0;
        for (const char *at = status; (at = strstr(at, "\"tag\": 2")) != NULL; at++)
            twos++;
        if (twos < PARTS)
            it_sleep_ms(100);
    }
    printf("\n  [cold upgrade] kstreams status: %d tasks at state version 2", twos);
    CU_ASSERT(strstr(status, "\"state_versions\"") != NULL);
    CU_ASSERT_EQUAL(twos, PARTS);
    /* v1 shipped over the running fmt2: refused, no downgrade */
    ship(build("reload_v1"));
    int64_t end = it_now_ms() + 30000;
    while (it_log_count(log, "new build refused") == 0 && it_now_ms() < end)
        it_sleep_ms(100);
    CU_ASSERT(it_log_count(log, "does not downgrade state") == 1);
    CU_ASSERT_EQUAL(it_engine_stop(pid, 60000), 0);
    CU_ASSERT(logs_count("migrated its stores from state version 1 to 2") == PARTS);
    check_outputs("cold upgrade");
    check_stores("cold upgrade");
}

static void crash_at(const char *point, const char *spec)
{
    char name[64];
    snprintf(name, sizeof name, "mig-%s", point);
    v1_then_fmt2(name);
    char env[128], log[600];
    snprintf(env, sizeof env, "KS_CRASH_AT=%s", spec);
    log_path(log, sizeof log, "crash");
    /* one instance name for every run: the restart's transactional ids
     * fence the killed run's open transactions at once */
    pid_t pid = it_engine_start_env(yaml, "m", log, env);
    int rc = it_engine_wait(pid, 180000);
    if (rc < 0)
        it_engine_kill(pid);
    printf("\n  [%s] first fmt2 run: exit %d", spec, rc);
    CU_ASSERT_EQUAL(rc, 128 + 9);
    CU_ASSERT_EQUAL(it_log_count(log, "KS_CRASH_AT: killing the process at"), 1);
    CU_ASSERT_EQUAL(run_to_end("fmt2", NULL), 0);
    check_outputs(spec);
    check_stores(spec);
}

static void test_before_migrate(void) { crash_at("before", "before-migrate"); }
static void test_mid_migrate(void) { crash_at("mid", "mid-migrate:5"); }
static void test_after_migrate(void) { crash_at("after", "after-migrate"); }
static void test_after_kafka_commit(void)
{
    crash_at("kafka", "after-migrate-kafka-commit");
}
static void test_after_commit(void) { crash_at("committed", "after-migrate-commit"); }

/* Hot deploy v1 -> fmt2 in a running engine, killed at `spec` during the
 * migrations the swap caused; the restart (fmt2 on disk) migrates what
 * was not migrated, and nothing twice. */
static void swap_then_crash(const char *name, const char *spec)
{
    setup(name);
    produce(FIRST);
    char env[128], log[600];
    snprintf(env, sizeof env, "KS_CRASH_AT=%s", spec);
    log_path(log, sizeof log, "swap");
    pid_t pid = it_engine_start_env(yaml, "m", log, env);
    it_msgs out = {0};
    it_consume(out_topic, FIRST, 2000, 180000, &out);
    it_msgs_free(&out);
    ship(build("reload_fmt2"));
    int64_t end = it_now_ms() + 60000;
    /* a worker's "swapped in" line; the migrations run at once after it,
     * so the kill may come before the reload's own "swapped to" line */
    while (it_log_count(log, ": swapped in") == 0 && it_now_ms() < end)
        it_sleep_ms(100);
    CU_ASSERT(it_log_count(log, ": swapped in") >= 1);
    produce(SECOND); /* the migrations run in each task's first batch */
    int rc = it_engine_wait(pid, 180000);
    if (rc < 0)
        it_engine_kill(pid);
    printf("\n  [swap, %s] engine: exit %d", spec, rc);
    CU_ASSERT_EQUAL(rc, 128 + 9);
    CU_ASSERT_EQUAL(it_log_count(log, "KS_CRASH_AT: killing the process at"), 1);
    CU_ASSERT_EQUAL(run_to_end("fmt2", NULL), 0);
    check_outputs(spec);
    check_stores(spec);
}

static void test_swap_killed_after_migrate(void)
{
    swap_then_crash("mig-swap-after", "after-migrate");
}

static void test_swap_killed_between_tasks(void)
{
    swap_then_crash("mig-swap-between", "after-migrate-commit:2");
}

static void test_restore_migrates(void)
{
    v1_then_fmt2("mig-restore");
    wipe_state(); /* a fresh machine: only v1's changelog */
    CU_ASSERT_EQUAL(run_to_end("fmt2", NULL), 0);
    CU_ASSERT(logs_count("migrated its stores from state version 1 to 2") == PARTS);
    check_outputs("restore v1 changelog");
    check_stores("restore v1 changelog");
    /* once migrated, the changelog carries version 2: no second migration */
    wipe_state();
    produce(200);
    CU_ASSERT_EQUAL(run_to_end("fmt2-again", NULL), 0);
    CU_ASSERT(logs_count("migrated its stores from state version 1 to 2") == PARTS);
    check_outputs("restore v2 changelog");
    check_stores("restore v2 changelog");

    /* and v1 cannot come back over version-2 stores */
    ship(build("reload_v1"));
    char log[600];
    log_path(log, sizeof log, "downgrade");
    pid_t pid = it_engine_start(yaml, "m", log);
    int rc = it_engine_wait(pid, 120000);
    if (rc < 0)
        it_engine_kill(pid);
    printf("\n  [downgrade] v1 over version 2: exit %d\n", rc);
    CU_ASSERT_EQUAL(rc, 1);
    CU_ASSERT(it_log_count(log, "kstreams does not downgrade state") >= 1);
}

int main(void)
{
    static const it_case cases[] = {
        {"migrate: cold upgrade v1 -> fmt2 migrates every task once", test_cold_upgrade},
        {"migrate: kill -9 before migrate()", test_before_migrate},
        {"migrate: kill -9 in the middle of migrate()", test_mid_migrate},
        {"migrate: kill -9 after migrate(), before the commit", test_after_migrate},
        {"migrate: kill -9 after the Kafka commit, before LMDB's", test_after_kafka_commit},
        {"migrate: kill -9 after the commit", test_after_commit},
        {"migrate: hot swap, kill -9 after the first migrate()", test_swap_killed_after_migrate},
        {"migrate: hot swap, kill -9 when two of four tasks migrated",
         test_swap_killed_between_tasks},
        {"migrate: restore on an empty state dir migrates; no downgrade",
         test_restore_migrates},
        {NULL, NULL}};
    return it_main("migrate", cases);
}
