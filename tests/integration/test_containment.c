/*
 * test_containment.c - a build that segfaults in process() against the
 * real broker (exactly-once, 2 workers, 4 partitions): reload_segv
 * dereferences NULL on a value "boom".
 *   - the engine dies of SIGSEGV (exit 139) after one line naming the
 *     node, plugin, build, file, task and the record's topic/partition/
 *     offset, with a backtrace; the same is in <state>/<app>/crash.txt;
 *   - the next start (reload_v1 in place) says the previous run died with
 *     that line, and `kstreams status` shows it;
 *   - every input is in the read_committed output exactly once, counts per
 *     key 1..n: nothing of the crashing batch was committed.
 * Automatic rollback: reload_v1 commits batches (kept as the good build),
 * then reload_segv_first (segfaults on its first record) is put in place
 * and the test restarts the engine whenever it exits, as systemd's
 * Restart=always would: 3 runs die of SIGSEGV, the 4th rolls back to
 * reload-v1 (one log line, `kstreams status` shows it) and processes
 * everything, exactly once; after kill -9, `kstreams status` says "not
 * running", exit 2.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "itest.h"

#define KEYS 50
#define PARTS 4
#define MAX_RECORDS 4000

static char dir[256], app[128], in_topic[128], out_topic[128];
static char yaml[512], watched[512], state[512];
static long produced;

static void make_rec(int i, char *key, size_t klen, char *value, size_t vlen,
                     int32_t *partition, void *arg)
{
    (void)partition;
    long n = *(long *)arg + i;
    snprintf(key, klen, "k%03ld", (n * 7919) % KEYS);
    if (n == 1500)
        snprintf(value, vlen, "boom n=%ld", n);
    else
        snprintf(value, vlen, "n=%ld", n);
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

static int first_line(const char *path, char *buf, size_t len, int *lines)
{
    FILE *f = fopen(path, "r");
    *lines = 0;
    buf[0] = '\0';
    if (!f)
        return -1;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        if ((*lines)++ == 0)
            snprintf(buf, len, "%.1900s", line);
    }
    fclose(f);
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}

/* Run `kstreams ARGS` (shell words), its output in out; its exit status. */
static int kstreams_out(const char *args, char *out, size_t len)
{
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", it_kstreams(), args);
    FILE *p = popen(cmd, "r");
    size_t n = p ? fread(out, 1, len - 1, p) : 0;
    out[n] = '\0';
    int st = p ? pclose(p) : -1;
    return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_segfault_reported(void)
{
    it_tempdir(dir, sizeof dir);
    it_unique(app, sizeof app, "contain");
    it_unique(in_topic, sizeof in_topic, "contain-in");
    it_unique(out_topic, sizeof out_topic, "contain-out");
    CU_ASSERT_FATAL(it_create_topic(in_topic, PARTS) == 0);
    snprintf(yaml, sizeof yaml, "%s/pipeline.yaml", dir);
    snprintf(watched, sizeof watched, "%s/deploy/reload.so", dir);
    snprintf(state, sizeof state, "%s/state", dir);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/deploy'", dir);
    CU_ASSERT_FATAL(system(cmd) == 0);
    ship(build("reload_segv"));
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
    long base = 0;
    CU_ASSERT_FATAL(it_produce(in_topic, 3000, make_rec, &base) == 0);
    produced = 3000;

    char log1[600], log2[600];
    snprintf(log1, sizeof log1, "%s/engine-segv.log", dir);
    snprintf(log2, sizeof log2, "%s/engine-v1.log", dir);
    pid_t pid = it_engine_start(yaml, "c", log1);
    int rc = it_engine_wait(pid, 180000);
    if (rc < 0)
        it_engine_kill(pid);
    printf("\n  reload_segv: exit %d", rc);
    CU_ASSERT_EQUAL(rc, 128 + 11);
    CU_ASSERT_EQUAL(it_log_count(log1, "FATAL [crash] SIGSEGV in process() of node 'tag', "
                                       "plugin reload build reload-segv ("),
                    1);
    char needle[300];
    snprintf(needle, sizeof needle, ", record %s/", in_topic);
    CU_ASSERT_EQUAL(it_log_count(log1, needle), 1);
    CU_ASSERT(it_log_count(log1, "reload.so") >= 1);
    char crash[700], line[2048];
    int lines = 0;
    snprintf(crash, sizeof crash, "%s/%s/crash.txt", state, app);
    CU_ASSERT_EQUAL(first_line(crash, line, sizeof line, &lines), 0);
    printf("\n  %s: %s (+%d backtrace lines)", crash, line, lines - 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(line, "SIGSEGV in process() of node 'tag'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(line, "build reload-segv"));
    CU_ASSERT(lines > 2);

    /* the next start reports it; v1 processes the rest */
    ship(build("reload_v1"));
    pid = it_engine_start(yaml, "c", log2);
    it_msgs out = {0};
    it_consume(out_topic, (size_t)produced, 2000, 180000, &out);
    it_msgs_free(&out);
    CU_ASSERT_EQUAL(it_log_count(log2, "the previous run died: "), 1);
    CU_ASSERT_EQUAL(it_log_count(log2, "SIGSEGV in process() of node 'tag'"), 1);
    char status[8192];
    snprintf(cmd, sizeof cmd, "'%s' status '%s' 2>&1", it_kstreams(), yaml);
    FILE *p = popen(cmd, "r");
    size_t n = p ? fread(status, 1, sizeof status - 1, p) : 0;
    status[n] = '\0';
    if (p)
        pclose(p);
    CU_ASSERT_PTR_NOT_NULL(strstr(status, "previous_run"));
    CU_ASSERT_PTR_NOT_NULL(strstr(status, "SIGSEGV"));
    CU_ASSERT_EQUAL(it_engine_stop(pid, 60000), 0);

    it_consume(out_topic, (size_t)produced, 3000, 180000, &out);
    char *seen = calloc(MAX_RECORDS, 1);
    long last_count[KEYS] = {0};
    long dup = 0, bad = 0, gaps = 0, booms = 0;
    for (size_t i = 0; i < out.count; i++) {
        const it_msg *m = &out.items[i];
        int k;
        long count, nn;
        char mark[8];
        if (!m->key || !m->value || sscanf(m->key, "k%d", &k) != 1 || k < 0 || k >= KEYS ||
            (sscanf(m->value, "%7s %ld n=%ld", mark, &count, &nn) != 3 &&
             (sscanf(m->value, "%7s %ld boom n=%ld", mark, &count, &nn) != 3 || !++booms)) ||
            nn < 0 || nn >= MAX_RECORDS) {
            bad++;
            continue;
        }
        if (seen[nn]++)
            dup++;
        if (count != last_count[k] + 1)
            gaps++;
        last_count[k] = count;
    }
    long missing = 0;
    for (long i = 0; i < produced; i++)
        missing += !seen[i];
    printf("\n  %zu outputs for %ld inputs: missing %ld, duplicate %ld, bad %ld, gaps %ld, "
           "boom %ld\n",
           out.count, produced, missing, dup, bad, gaps, booms);
    CU_ASSERT_EQUAL(out.count, (size_t)produced);
    CU_ASSERT_EQUAL(missing, 0);
    CU_ASSERT_EQUAL(dup, 0);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(gaps, 0);
    CU_ASSERT_EQUAL(booms, 1);
    free(seen);
    it_msgs_free(&out);
}

static void make_plain(int i, char *key, size_t klen, char *value, size_t vlen,
                       int32_t *partition, void *arg)
{
    (void)partition;
    long n = *(long *)arg + i;
    snprintf(key, klen, "k%03ld", (n * 7919) % KEYS);
    snprintf(value, vlen, "n=%ld", n);
}

/* Wait until `log` has a line with `needle` (the engine's own progress, no
 * outcome asserted on time): 1, or 0 after max_ms. */
static int wait_for_log(const char *log, const char *needle, int max_ms)
{
    for (int waited = 0; waited < max_ms; waited += 100) {
        if (it_log_count(log, needle) > 0)
            return 1;
        it_sleep_ms(100);
    }
    return 0;
}

/* The read_committed output: each input once, counts per key 1..n, every
 * record marked v1 (the crashing build's mark is v9). */
static void check_rollback_outputs(long total)
{
    it_msgs out = {0};
    it_consume(out_topic, (size_t)total, 3000, 180000, &out);
    char *seen = calloc(MAX_RECORDS, 1);
    long last_count[KEYS] = {0};
    long dup = 0, bad = 0, gaps = 0, not_v1 = 0;
    for (size_t i = 0; i < out.count; i++) {
        const it_msg *m = &out.items[i];
        int k;
        long count, nn;
        char mark[8];
        if (!m->key || !m->value || sscanf(m->key, "k%d", &k) != 1 || k < 0 || k >= KEYS ||
            sscanf(m->value, "%7s %ld n=%ld", mark, &count, &nn) != 3 || nn < 0 ||
            nn >= MAX_RECORDS) {
            bad++;
            continue;
        }
        not_v1 += strcmp(mark, "v1") != 0;
        if (seen[nn]++)
            dup++;
        if (count != last_count[k] + 1)
            gaps++;
        last_count[k] = count;
    }
    long missing = 0;
    for (long i = 0; i < total; i++)
        missing += !seen[i];
    printf("\n  %zu outputs for %ld inputs: missing %ld, duplicate %ld, bad %ld, gaps %ld, "
           "not from v1 %ld\n",
           out.count, total, missing, dup, bad, gaps, not_v1);
    CU_ASSERT_EQUAL(out.count, (size_t)total);
    CU_ASSERT_EQUAL(missing, 0);
    CU_ASSERT_EQUAL(dup, 0);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(gaps, 0);
    CU_ASSERT_EQUAL(not_v1, 0);
    free(seen);
    it_msgs_free(&out);
}

/* One supervised run: the engine until it exits (its status) or logs the
 * rollback (-1, still running: *pid). */
static int supervised_run(const char *log, pid_t *pid)
{
    *pid = it_engine_start(yaml, "s", log);
    for (int waited = 0; waited < 180000; waited += 200) {
        int rc = it_engine_wait(*pid, 200);
        if (rc >= 0)
            return rc;
        if (it_log_count(log, "rolled back to build") > 0)
            return -1;
    }
    it_engine_kill(*pid);
    return -2;
}

static void test_rollback_after_crashes(void)
{
    it_tempdir(dir, sizeof dir);
    it_unique(app, sizeof app, "rollback");
    it_unique(in_topic, sizeof in_topic, "rollback-in");
    it_unique(out_topic, sizeof out_topic, "rollback-out");
    CU_ASSERT_FATAL(it_create_topic(in_topic, PARTS) == 0);
    snprintf(yaml, sizeof yaml, "%s/pipeline.yaml", dir);
    snprintf(watched, sizeof watched, "%s/deploy/reload.so", dir);
    snprintf(state, sizeof state, "%s/state", dir);
    char cmd[1200], log[600], out[8192];
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
                  "rollback: { crashes: 3, within: 10m }\n"
                  "sources:\n"
                  "  in: { topic: %s, key: string, value: string }\n"
                  "nodes:\n"
                  "  - { name: tag, type: reload.tag, from: in, store: counts }\n"
                  "sinks:\n"
                  "  - { from: tag, topic: %s, key: string, value: string, create: true, "
                  "partitions: %d }\n",
                  app, it_bootstrap(), state, watched, in_topic, out_topic, PARTS);

    /* v1 commits batches: it becomes the kept good build */
    long base = 0;
    CU_ASSERT_FATAL(it_produce(in_topic, 1000, make_plain, &base) == 0);
    snprintf(log, sizeof log, "%s/engine-v1.log", dir);
    pid_t pid = it_engine_start(yaml, "s", log);
    it_msgs first = {0};
    it_consume(out_topic, 1000, 2000, 180000, &first);
    CU_ASSERT_EQUAL(first.count, 1000);
    it_msgs_free(&first);
    CU_ASSERT(wait_for_log(log, "build reload-v1 committed a batch: kept", 30000));
    CU_ASSERT_EQUAL(it_engine_stop(pid, 60000), 0);

    /* a cold upgrade to a build that dies on its first record, under a
     * supervisor that restarts the engine whenever it exits */
    ship(build("reload_segv_first"));
    base = 1000;
    CU_ASSERT_FATAL(it_produce(in_topic, 1000, make_plain, &base) == 0);
    int crashes = 0, run = 0, rc = 0;
    while (run < 6) {
        snprintf(log, sizeof log, "%s/engine-run%d.log", dir, ++run);
        rc = supervised_run(log, &pid);
        printf("\n  run %d: %s", run, rc == -1 ? "rolled back, running" : "exited");
        if (rc >= 0)
            printf(" with status %d", rc);
        if (rc != 128 + 11)
            break;
        crashes++;
        /* its own report, besides the previous run's quoted at start */
        CU_ASSERT_EQUAL(it_log_count(log, "FATAL [crash] SIGSEGV in process() of node 'tag', "
                                          "plugin reload build reload-segv-first") -
                            it_log_count(log, "the previous run died: "),
                        1);
    }
    CU_ASSERT_EQUAL(crashes, 3);
    CU_ASSERT_EQUAL_FATAL(rc, -1);
    CU_ASSERT_EQUAL(run, 4);
    CU_ASSERT_EQUAL(it_log_count(log, "rolled back to build"), 1);
    CU_ASSERT_EQUAL(it_log_count(log, "plugin reload: build reload-segv-first crashed 3 times "
                                      "within 600 s (rollback.crashes: 3): rolled back to "
                                      "build reload-v1"),
                    1);
    check_rollback_outputs(2000);

    snprintf(cmd, sizeof cmd, "status '%s'", yaml);
    CU_ASSERT_EQUAL(kstreams_out(cmd, out, sizeof out), 0);
    printf("  kstreams status:\n%s", out);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "build reload-v1,"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "rollback:"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"crashing_build\": \"reload-segv-first\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"rolled_back_to\": \"reload-v1\""));

    /* killed: the status file stays, the engine is gone */
    it_engine_kill(pid);
    int st = kstreams_out(cmd, out, sizeof out);
    printf("  after kill -9: exit %d: %s", st, out);
    CU_ASSERT_EQUAL(st, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "not running"));
}

int main(void)
{
    static const it_case cases[] = {
        {"containment: a segfaulting build is reported, nothing of its batch committed",
         test_segfault_reported},
        {"containment: 3 crashes of a build roll it back to the last good one, exactly once",
         test_rollback_after_crashes},
        {NULL, NULL}};
    return it_main("containment", cases);
}
