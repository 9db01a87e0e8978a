/*
 * test_reload.c - hot deploy against the real broker, exactly-once, 2
 * workers, 4 partitions, input produced continuously by a thread while
 * builds of tests/plugins/reload.c are copied over the watched plugin file.
 *
 *   1. v1 -> v2 mid-stream (cp over the file): every input exactly once in
 *      the output; per key the counts go 1..n (the store carried over) and
 *      the marks go v1...v1 v2...v2, never back; the old copy is unmapped.
 *   2. refusals: truncated file, ABI major 2, init failure, missing
 *      processor type, state version changed without migrate, a dynamic
 *      section of garbage (valid ELF headers: dlopen of it SIGSEGVs the
 *      process, glibc 2.36) and a constructor that calls abort(): each is
 *      refused (log + status), v2 keeps processing, nothing lost, the
 *      engine lives; `kstreams check` of the garbage build exits 2.
 *   3. twenty reloads in a row under load, shipped by cp, install and
 *      rename: no growth in mapped plugin copies, file descriptors or
 *      resident memory.
 */
#include <CUnit/CUnit.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "elf_corrupt.h"
#include "itest.h"

#define KEYS 200
#define MAX_RECORDS 400000

static char dir[256], app[128], in_topic[128], out_topic[128];
static char yaml[512], log_path[512], watched[512], state[512];
static volatile long produced;
static volatile int producing;
static pthread_t producer;

static void make_rec(int i, char *key, size_t klen, char *value, size_t vlen,
                     int32_t *partition, void *arg)
{
    (void)partition;
    long n = *(long *)arg + i;
    snprintf(key, klen, "k%03ld", (n * 7919) % KEYS);
    snprintf(value, vlen, "n=%ld", n);
}

static void *produce_loop(void *arg)
{
    (void)arg;
    while (producing && produced < MAX_RECORDS - 500) {
        long base = produced;
        if (it_produce(in_topic, 100, make_rec, &base) != 0)
            break;
        produced = base + 100;
        it_sleep_ms(100);
    }
    return NULL;
}

static void producer_start(void)
{
    producing = 1;
    pthread_create(&producer, NULL, produce_loop, NULL);
}

static void producer_stop(void)
{
    producing = 0;
    pthread_join(producer, NULL);
}

static const char *build(const char *name)
{
    static char path[8][512];
    static int at;
    char *p = path[at++ % 8];
    snprintf(p, 512, "%s/tests/plugins/.libs/%s.so", KS_TEST_BUILDDIR, name);
    return p;
}

/* Replace the watched file the way `cp` does: in place. */
static void cp_over(const char *src)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", src, watched);
    CU_ASSERT(system(cmd) == 0);
}

/* Replace the watched file by `install` (i % 3 == 1), by a rename into
 * place (i % 3 == 2) or by `cp` in place: all three must be picked up. */
static void ship(const char *src, int i)
{
    char cmd[1600];
    if (i % 3 == 1)
        snprintf(cmd, sizeof cmd, "install -m 755 '%s' '%s'", src, watched);
    else if (i % 3 == 2)
        snprintf(cmd, sizeof cmd, "cp '%s' '%s.tmp' && mv '%s.tmp' '%s'", src, watched,
                 watched, watched);
    else
        snprintf(cmd, sizeof cmd, "cp '%s' '%s'", src, watched);
    CU_ASSERT(system(cmd) == 0);
}

/* Wait until the log holds more than `before` lines with `needle`. */
static int wait_log(const char *needle, int before, int max_ms)
{
    int64_t end = it_now_ms() + max_ms;
    while (it_now_ms() < end) {
        if (it_log_count(log_path, needle) > before)
            return 1;
        it_sleep_ms(100);
    }
    return 0;
}

/* Check every output: each input once, per key counts 1..n in order, and
 * (when `monotonic`) marks never go back from v2 to v1. */
static void check_outputs(const char *phase, int monotonic, long *v1_out, long *v2_out)
{
    it_msgs out = {0};
    it_consume(out_topic, (size_t)produced, 3000, 180000, &out);
    char *seen = calloc(MAX_RECORDS, 1);
    static long last_count[KEYS];
    static int last_mark[KEYS];
    memset(last_count, 0, sizeof last_count);
    memset(last_mark, 0, sizeof last_mark);
    long dup = 0, bad = 0, gaps = 0, back = 0, v1 = 0, v2 = 0;
    for (size_t i = 0; i < out.count; i++) {
        const it_msg *m = &out.items[i];
        int mark, k;
        long count, n;
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
           "count gaps %ld, v2->v1 %ld; v1 %ld, v2 %ld\n",
           phase, out.count, (long)produced, missing, dup, bad, gaps, back, v1, v2);
    CU_ASSERT_EQUAL(out.count, (size_t)produced);
    CU_ASSERT_EQUAL(missing, 0);
    CU_ASSERT_EQUAL(dup, 0);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(gaps, 0);
    if (monotonic)
        CU_ASSERT_EQUAL(back, 0);
    if (v1_out)
        *v1_out = v1;
    if (v2_out)
        *v2_out = v2;
    free(seen);
    it_msgs_free(&out);
}

static void setup(void)
{
    it_tempdir(dir, sizeof dir);
    it_unique(app, sizeof app, "reload");
    it_unique(in_topic, sizeof in_topic, "reload-in");
    it_unique(out_topic, sizeof out_topic, "reload-out");
    CU_ASSERT_FATAL(it_create_topic(in_topic, 4) == 0);
    snprintf(yaml, sizeof yaml, "%s/pipeline.yaml", dir);
    snprintf(log_path, sizeof log_path, "%s/engine.log", dir);
    snprintf(watched, sizeof watched, "%s/deploy/reload.so", dir);
    snprintf(state, sizeof state, "%s/state", dir);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/deploy' && cp '%s' '%s'", dir, build("reload_v1"),
             watched);
    CU_ASSERT_FATAL(system(cmd) == 0);
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
                  "partitions: 4 }\n",
                  app, it_bootstrap(), state, watched, in_topic, out_topic);
}

/* Output of `kstreams CMD yaml` into buf; returns the exit status. */
static int kstreams_cmd(const char *cmd, char *buf, size_t len)
{
    char line[1200];
    snprintf(line, sizeof line, "'%s' %s '%s' 2>&1", it_kstreams(), cmd, yaml);
    FILE *p = popen(line, "r");
    if (!p)
        return -1;
    size_t n = fread(buf, 1, len - 1, p);
    buf[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static pid_t engine;

static void test_swap_v1_to_v2(void)
{
    setup();
    engine = it_engine_start(yaml, "r", log_path);
    producer_start();
    it_msgs first = {0};
    it_consume(out_topic, 2000, 500, 60000, &first); /* v1 is running */
    it_msgs_free(&first);
    int before = it_log_count(log_path, "swapped to build");
    cp_over(build("reload_v2"));
    CU_ASSERT(wait_log("swapped to build reload-v2", before, 30000));
    it_sleep_ms(1500);
    producer_stop();
    char out[8192];
    CU_ASSERT_EQUAL(kstreams_cmd("status", out, sizeof out), 0);
    printf("\n%s", out);
    CU_ASSERT(strstr(out, "build reload-v2") != NULL);
    CU_ASSERT(it_log_count(log_path, "unloaded build reload-v1") == 1);
    CU_ASSERT(it_log_count(log_path, "no longer mapped") >= 1);
    long v1 = 0, v2 = 0;
    check_outputs("v1 -> v2", 1, &v1, &v2);
    CU_ASSERT(v1 > 0);
    CU_ASSERT(v2 > 0);
}

/* Write the first half of `src` over the watched file. */
static void write_truncated(const char *src)
{
    FILE *in = fopen(src, "rb");
    FILE *outf = fopen(watched, "wb");
    CU_ASSERT_FATAL(in && outf);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, in);
    fwrite(buf, 1, n / 2, outf);
    fclose(in);
    fclose(outf);
}

static void refused(const char *what, const char *reason)
{
    int before = it_log_count(log_path, "new build refused");
    if (strcmp(what, "truncated") == 0)
        write_truncated(build("reload_v1"));
    else if (strcmp(what, "corrupt") == 0) {
        CU_ASSERT(ks_test_write_corrupt(build("reload_v1"), watched) == 0);
    }
    else if (strcmp(what, "major2") == 0)
        cp_over(build("major2"));
    else
        cp_over(build(what));
    int ok = wait_log("new build refused", before, 20000);
    printf("\n  %s: %s", what, ok ? "refused" : "NOT refused");
    CU_ASSERT(ok);
    CU_ASSERT(it_log_count(log_path, reason) >= 1);
    it_sleep_ms(500); /* v2 keeps processing meanwhile */
}

/* `kstreams check` of a pipeline naming a garbage build: refused, exit 2,
 * no crash (before the pre-flight: exit 139, SIGSEGV). */
static void check_refuses_corrupt(void)
{
    char bad[600], bad_yaml[600], out[8192], want[1200];
    snprintf(bad, sizeof bad, "%s/corrupt.so", dir);
    snprintf(bad_yaml, sizeof bad_yaml, "%s/corrupt.yaml", dir);
    CU_ASSERT_FATAL(ks_test_write_corrupt(build("reload_v1"), bad) == 0);
    it_write_file(bad_yaml,
                  "application: %s-check\n"
                  "kafka: { bootstrap: [%s] }\n"
                  "state_dir: %s\n"
                  "plugins: [%s]\n"
                  "sources:\n"
                  "  in: { topic: %s, key: string, value: string }\n"
                  "nodes:\n"
                  "  - { name: tag, type: reload.tag, from: in }\n"
                  "sinks:\n"
                  "  - { from: tag, topic: %s, key: string, value: string }\n",
                  app, it_bootstrap(), state, bad, in_topic, out_topic);
    char line[2000];
    snprintf(line, sizeof line, "'%s' check '%s' 2>&1", it_kstreams(), bad_yaml);
    FILE *p = popen(line, "r");
    CU_ASSERT_FATAL(p != NULL);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    snprintf(want, sizeof want, "%s: trial load crashed (SIGSEGV in dlopen); refused", bad);
    printf("\n  kstreams check of a garbage build: %s", out);
    CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 2);
    CU_ASSERT(strstr(out, want) != NULL);
}

static void test_refusals(void)
{
    producer_start();
    int swaps = it_log_count(log_path, "swapped to build");
    refused("truncated", "truncated");
    refused("major2", "major");
    refused("reload_initfail", "init refuses on purpose");
    refused("reload_noproc", "has no processor type 'tag'");
    refused("reload_state2", "no migrate()");
    /* before the pre-flight, each of these two killed the engine */
    refused("corrupt", "trial load crashed (SIGSEGV in dlopen); refused");
    refused("ctor_abort", "trial load crashed (SIGABRT in dlopen); refused");
    CU_ASSERT(kill(engine, 0) == 0);
    char out[8192];
    CU_ASSERT_EQUAL(kstreams_cmd("status", out, sizeof out), 0);
    CU_ASSERT(strstr(out, "build reload-v2") != NULL);
    CU_ASSERT(strstr(out, "last reload error: -") == NULL);
    check_refuses_corrupt();
    /* the right build again: the file holds the running build */
    cp_over(build("reload_v2"));
    it_sleep_ms(1000);
    int rc = kstreams_cmd("reload", out, sizeof out);
    printf("\n  kstreams reload: exit %d\n%s", rc, out);
    CU_ASSERT_EQUAL(rc, 0);
    producer_stop();
    CU_ASSERT_EQUAL(it_log_count(log_path, "swapped to build"), swaps);
    check_outputs("after refusals", 1, NULL, NULL);
}

/* The number of the last engine log line holding `needle`; 0 if none. */
static int last_log_line(const char *needle)
{
    FILE *f = fopen(log_path, "r");
    if (!f)
        return 0;
    char line[4096];
    int n = 0, last = 0;
    while (fgets(line, sizeof line, f)) {
        n++;
        if (strstr(line, needle))
            last = n;
    }
    fclose(f);
    return last;
}

/* 1 when the engine log shows the swap to `build_id` before the last
 * SIGHUP it handled: the watcher's reload finished before the signal. */
static int watcher_swapped_before_signal(const char *build_id)
{
    char swap[128];
    snprintf(swap, sizeof swap, "swapped to build %s ", build_id);
    int swapped = last_log_line(swap), signalled = last_log_line("SIGHUP: reloading");
    return swapped > 0 && swapped < signalled;
}

/* `kstreams reload` right after the file changed: its SIGHUP and the file
 * watcher's reload coalesce; it reports the swap its signal made, not the
 * watcher's "unchanged" that follows (before: "last: unchanged", exit 0). */
static void test_reload_reports_its_swap(void)
{
    producer_start();
    int swaps = it_log_count(log_path, "swapped to build");
    char out[8192], want[4300];
    /* v2 runs: to v1 and back (the next case starts on v2) */
    static const char *const to[] = {"reload_v1", "reload_v2"};
    static const char *const id[] = {"reload-v1", "reload-v2"};
    for (int i = 0; i < 2; i++) {
        cp_over(build(to[i]));
        int rc = kstreams_cmd("reload", out, sizeof out);
        snprintf(want, sizeof want, "this reload:\n  %s: swapped, build %s\n", watched, id[i]);
        int ok = strstr(out, want) != NULL;
        if (!ok && watcher_swapped_before_signal(id[i])) {
            /* the command started slower than the watcher's settle time
             * (a loaded machine, a sanitizer build): the swap was done
             * before its SIGHUP came, so "unchanged" is the right answer */
            snprintf(want, sizeof want, "this reload:\n  %s: unchanged, build %s\n", watched,
                     id[i]);
            ok = strstr(out, want) != NULL;
            printf("\n  (the file watcher swapped before the SIGHUP arrived)");
        }
        printf("\n  kstreams reload right after cp of %s: exit %d, %s", to[i], rc,
               ok ? "swapped" : "NOT swapped");
        if (!ok)
            printf("\n%s", out);
        CU_ASSERT_EQUAL(rc, 0);
        CU_ASSERT(ok);
    }
    /* again, nothing changed: whether or not the watcher's queued reload
     * has run yet, this one finds the running build */
    int rc = kstreams_cmd("reload", out, sizeof out);
    snprintf(want, sizeof want, "this reload:\n  %s: unchanged, build reload-v2\n", watched);
    printf("\n  again: exit %d, %s\n", rc, strstr(out, want) ? "unchanged" : "NOT unchanged");
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT(strstr(out, want) != NULL);
    producer_stop();
    CU_ASSERT_EQUAL(it_log_count(log_path, "swapped to build"), swaps + 2);
    check_outputs("reload reports its swap", 0, NULL, NULL);
}

static int count_lines(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += !needle || strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

static long vm_rss_kb(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb;
}

static int fd_count(pid_t pid)
{
    char cmd[128], buf[32];
    snprintf(cmd, sizeof cmd, "ls /proc/%d/fd | wc -l", (int)pid);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p && fgets(buf, sizeof buf, p))
        n = atoi(buf);
    if (p)
        pclose(p);
    return n;
}

static void test_twenty_reloads(void)
{
    producer_start();
    char maps[64], copies[1024];
    snprintf(maps, sizeof maps, "/proc/%d/maps", (int)engine);
    snprintf(copies, sizeof copies, "%s/%s/plugins/", state, app);
    int maps0 = 0, fds0 = 0, ok = 1;
    long rss0 = 0;
    for (int i = 0; i < 20 && ok; i++) {
        int before = it_log_count(log_path, "swapped to build");
        ship(build(i % 2 ? "reload_v2" : "reload_v1"), i);
        ok = wait_log("swapped to build", before, 30000);
        it_sleep_ms(300);
        if (i == 1) {
            maps0 = count_lines(maps, copies);
            fds0 = fd_count(engine);
            rss0 = vm_rss_kb(engine);
        }
    }
    CU_ASSERT(ok);
    int maps1 = count_lines(maps, copies), fds1 = fd_count(engine);
    long rss1 = vm_rss_kb(engine);
    printf("\n  after 2 reloads: %d mapped lines of plugin copies, %d fds, VmRSS %ld kB\n"
           "  after 20 reloads: %d mapped lines, %d fds, VmRSS %ld kB\n",
           maps0, fds0, rss0, maps1, fds1, rss1);
    CU_ASSERT(maps1 <= maps0);
    CU_ASSERT(fds1 <= fds0 + 2);
#ifndef __SANITIZE_ADDRESS__ /* ASan's quarantine keeps freed memory resident */
    CU_ASSERT(rss1 - rss0 < 16 * 1024);
#endif
    producer_stop();
    CU_ASSERT_EQUAL(it_engine_stop(engine, 30000), 0);
    check_outputs("twenty reloads", 0, NULL, NULL);
    printf("  engine log: %s\n", log_path);
}

int main(void)
{
    static const it_case cases[] = {
        {"reload: v1 -> v2 mid-stream, exactly once, never back", test_swap_v1_to_v2},
        {"reload: refused builds leave v2 running, nothing lost", test_refusals},
        {"reload: kstreams reload reports the swap its SIGHUP made", test_reload_reports_its_swap},
        {"reload: twenty reloads under load, no leak", test_twenty_reloads},
        {NULL, NULL}};
    return it_main("reload", cases);
}
