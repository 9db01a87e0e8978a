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

int main(void)
{
    static const it_case cases[] = {
        {"containment: a segfaulting build is reported, nothing of its batch committed",
         test_segfault_reported},
        {NULL, NULL}};
    return it_main("containment", cases);
}
