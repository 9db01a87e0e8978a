/*
 * test_standby.c - standby replicas (`standby_replicas: 1`) on a real
 * broker: two processes of one application count a 4-partition topic, so
 * each task is active on one and a standby on the other. After catch-up
 * every task's standby store equals its active store (read with `kstreams
 * query --partition` from each process's state directory). Then the owner
 * of two tasks is killed with SIGKILL and more records come: the other
 * process takes the tasks over from its standbys and restores only the
 * tail past their checkpoints (fewer records than the changelogs held),
 * and exactly-once holds: per key the read_committed counts are exactly
 * 1..n. Both processes also run a query server (`query:`), so the
 * workers' client.id carries the process and the query address at once:
 * placement must still group the members by process, and each query
 * server must name the other process as the holder of the tasks it does
 * not run; a query with `standby=1` (`--standby`) of a task the other
 * process runs is answered from the standby here, marked stale, with the
 * same entries as the owner's answer (without the flag: a redirect).
 */
#include <CUnit/CUnit.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "itest.h"

#define KEYS 200
#define BATCH 8000
#define SESSION_MS 6000 /* the broker's smallest allowed session timeout */

static void make_rec(int i, char *key, size_t klen, char *value, size_t vlen,
                     int32_t *partition, void *arg)
{
    (void)arg;
    *partition = (i % KEYS) % 4;
    snprintf(key, klen, "k%d", i % KEYS);
    snprintf(value, vlen, "{\"i\":%d}", i);
}

static int wait_log(const char *log, const char *needle, int n, int timeout_ms)
{
    for (int64_t end = it_now_ms() + timeout_ms; it_now_ms() < end; it_sleep_ms(100))
        if (it_log_count(log, needle) >= n)
            return 0;
    return -1;
}

static void write_yaml(char *yaml, size_t len, const char *dir, const char *who,
                       const char *app, const char *in, const char *out, int port, int qport)
{
    snprintf(yaml, len, "%s/%s.yaml", dir, who);
    it_write_file(yaml,
                  "application: %s\n"
                  "kafka: { bootstrap: [%s], properties: { session.timeout.ms: %d } }\n"
                  "standby_replicas: 1\n"
                  "metrics: 127.0.0.1:%d\n"
                  "query: { listen: 127.0.0.1:%d }\n"
                  "state_dir: %s/state-%s\n"
                  "plugin_path: [%s/plugins/.libs]\n"
                  "sources:\n  in: { topic: %s, key: string, value: json }\n"
                  "nodes:\n  - { name: per_key, type: count, from: in, store: counts, cache_bytes: 0 }\n"
                  "sinks:\n  - { from: per_key, topic: %s, key: string, value: int64, "
                  "create: true, partitions: 4 }\n",
                  app, it_bootstrap(), SESSION_MS, port, qport, dir, who, KS_TEST_BUILDDIR, in, out);
}

/* `kstreams query YAML counts --partition P` as JSON into out (malloc'd);
 * NULL when the query failed (no such store in that state directory yet). */
static char *query_task(const char *yaml, int partition)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s query %s counts --partition %d --format json --int64 "
                              "2>/dev/null",
             it_kstreams(), yaml, partition);
    FILE *p = popen(cmd, "r");
    if (!p)
        return NULL;
    size_t cap = 1 << 20, n = 0;
    char *out = malloc(cap);
    n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || n == 0) {
        free(out);
        return NULL;
    }
    return out;
}

/* Wait until task p's stores in both state directories read the same
 * (one is the active copy, the other the standby). 1 when they did. */
static int wait_equal(const char *yaml_a, const char *yaml_b, int p, int timeout_ms)
{
    for (int64_t end = it_now_ms() + timeout_ms; it_now_ms() < end; it_sleep_ms(300)) {
        char *a = query_task(yaml_a, p), *b = query_task(yaml_b, p);
        int same = a && b && strcmp(a, b) == 0 && strlen(a) > 2;
        free(a);
        free(b);
        if (same)
            return 1;
    }
    return 0;
}

/* Over the lines of `log` after byte `from`: the records replayed by the
 * restores ("N records replayed from offset X" adds N, and X to *from_sum;
 * "up to date at offset X" adds X to *from_sum), the restores that began
 * at offset 0 (*from_zero: a task taken over without a standby), and how
 * many restores. */
static int restores_after(const char *log, long from, long *replayed, long *from_sum,
                          int *from_zero)
{
    FILE *f = fopen(log, "r");
    int n = 0;
    *replayed = *from_sum = 0;
    *from_zero = 0;
    if (!f)
        return 0;
    fseek(f, from, SEEK_SET);
    char line[8192];
    while (fgets(line, sizeof line, f)) {
        char *r = strstr(line, "records replayed from offset ");
        char *u = strstr(line, "up to date at offset ");
        char *part = strstr(line, "restored store");
        if (r && part && (part = strchr(part, ':'))) {
            /* "restored store counts partition P: N records replayed from offset X" */
            *replayed += strtol(part + 1, NULL, 10);
            long at = strtol(r + strlen("records replayed from offset "), NULL, 10);
            *from_sum += at;
            *from_zero += at == 0;
            n++;
        } else if (u) {
            *from_sum += strtol(u + strlen("up to date at offset "), NULL, 10);
            n++;
        }
    }
    fclose(f);
    return n;
}

static long file_size(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

/* From /v1/tasks of the query server on qport: how many tasks run there,
 * and how many it says run at `other` (HOST:PORT). -1 when it does not
 * answer. */
static int query_tasks(int qport, const char *other, int *remote)
{
    char resp[8192];
    *remote = 0;
    if (it_http(qport, "GET", "/v1/tasks", NULL, resp, sizeof resp) != 200)
        return -1;
    json_t *doc = json_loads(resp, 0, NULL);
    int active = 0;
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(doc, "tasks"), i, t) {
        const char *state = json_string_value(json_object_get(t, "state"));
        const char *holder = json_string_value(json_object_get(t, "holder"));
        active += state && strcmp(state, "active") == 0;
        *remote += state && holder && strcmp(state, "remote") == 0 && strcmp(holder, other) == 0;
    }
    json_decref(doc);
    return active;
}

/* Wait until each query server runs 2 tasks and names the other process
 * for the other 2 (its picture of the group is refreshed on requests). */
static int wait_query_routing(int qa, int qb, int timeout_ms)
{
    char addr_a[64], addr_b[64];
    snprintf(addr_a, sizeof addr_a, "127.0.0.1:%d", qa);
    snprintf(addr_b, sizeof addr_b, "127.0.0.1:%d", qb);
    int ra = 0, rb = 0, aa = -1, ab = -1;
    for (int64_t end = it_now_ms() + timeout_ms; it_now_ms() < end; it_sleep_ms(300)) {
        aa = query_tasks(qa, addr_b, &ra);
        ab = query_tasks(qb, addr_a, &rb);
        if (aa == 2 && ra == 2 && ab == 2 && rb == 2)
            break;
    }
    printf("\n  query servers: A runs %d, names B for %d; B runs %d, names A for %d", aa, ra,
           ab, rb);
    return aa == 2 && ra == 2 && ab == 2 && rb == 2 ? 0 : -1;
}

/* Standby reads (`--standby`, `standby=1`): of each task A runs, B holds
 * the standby and answers itself, marked stale (caught up: 0 behind),
 * with exactly what A answers; without the flag B redirects to A. B's
 * own tasks answer fresh, flag or not; B's /v1/tasks says which it holds
 * standbys of. How many tasks of A B answered (*fresh: of its own); -1 on
 * a failed query or a wrong /v1/tasks. */
static int standby_reads(const char *dir, const char *yaml, int qa, int qb, int *fresh)
{
    char err[512], args[1024], path[256];
    static char from_a[1 << 16], from_b[1 << 16];
    snprintf(err, sizeof err, "%s/query.err", dir);
    int answered = 0;
    *fresh = 0;
    for (int p = 0; p < 4; p++) {
        snprintf(path, sizeof path, "/v1/query?store=counts&partition=%d&int64=1", p);
        int plain = it_http(qb, "GET", path, NULL, NULL, 0);
        snprintf(path, sizeof path, "/v1/query?store=counts&partition=%d&int64=1&standby=1", p);
        int flagged = it_http(qb, "GET", path, NULL, NULL, 0);
        snprintf(args, sizeof args, "query %s counts --remote http://127.0.0.1:%d --partition %d "
                                    "--int64 --standby", yaml, qb, p);
        if (it_kstreams_run(args, from_b, sizeof from_b, err) != 0)
            return -1;
        int stale = it_log_count(err, "partition ") == 1 &&
                    it_log_count(err, ": stale, from a standby copy at changelog offset ") == 1 &&
                    it_log_count(err, ", about 0 records behind") == 1;
        int unmarked = it_log_count(err, "stale") == 0;
        snprintf(args, sizeof args, "query %s counts --remote http://127.0.0.1:%d --partition %d "
                                    "--int64", yaml, qa, p);
        if (it_kstreams_run(args, from_a, sizeof from_a, err) != 0)
            return -1;
        int same = strcmp(from_a, from_b) == 0 && strlen(from_a) > 2;
        printf("\n  task %d: B answers %d, with standby=1 %d; --standby from B: %s, %s A's",
               p, plain, flagged, stale ? "stale" : unmarked ? "fresh" : "?",
               same ? "the same as" : "NOT the same as");
        answered += plain == 307 && flagged == 200 && stale && same;
        *fresh += plain == 200 && flagged == 200 && unmarked && same;
    }
    /* /v1/tasks names them: standby true for A's tasks, false for B's */
    char tasks[8192];
    json_t *doc = it_http(qb, "GET", "/v1/tasks", NULL, tasks, sizeof tasks) == 200
                      ? json_loads(tasks, 0, NULL)
                      : NULL;
    int marked = 0;
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(doc, "tasks"), i, t) {
        const char *state = json_string_value(json_object_get(t, "state"));
        int standby = json_is_true(json_object_get(t, "standby"));
        marked += state && standby == (strcmp(state, "remote") == 0);
    }
    json_decref(doc);
    printf("\n  B's /v1/tasks: %d of 4 tasks say standby true exactly when A runs them", marked);
    return marked == 4 ? answered : -1;
}

/* Two processes A and B of one application (`name`) over a new
 * 4-partition topic: their files, ports and topics. */
typedef struct pair {
    char dir[256], app[128], in[128], out[128], yaml_a[512], yaml_b[512];
    char log_a[512], log_b[512];
    int port; /* metrics A, B; queries A, B */
} pair;

/* Set up `x`, start A, then B once A holds all 4 tasks, and produce BATCH
 * records once B holds its 2 (fatal on failure). */
static void start_pair(pair *x, const char *name, pid_t *a, pid_t *b)
{
    char topic[128];
    it_tempdir(x->dir, sizeof x->dir);
    it_unique(x->app, sizeof x->app, name);
    snprintf(topic, sizeof topic, "%s-in", name);
    it_unique(x->in, sizeof x->in, topic);
    snprintf(topic, sizeof topic, "%s-out", name);
    it_unique(x->out, sizeof x->out, topic);
    CU_ASSERT_FATAL(it_create_topic(x->in, 4) == 0);
    x->port = it_port_base(4);
    CU_ASSERT_FATAL(x->port > 0);
    write_yaml(x->yaml_a, sizeof x->yaml_a, x->dir, "a", x->app, x->in, x->out, x->port,
               x->port + 2);
    write_yaml(x->yaml_b, sizeof x->yaml_b, x->dir, "b", x->app, x->in, x->out, x->port + 1,
               x->port + 3);
    snprintf(x->log_a, sizeof x->log_a, "%s/a.log", x->dir);
    snprintf(x->log_b, sizeof x->log_b, "%s/b.log", x->dir);
    *a = it_engine_start(x->yaml_a, "a", x->log_a);
    CU_ASSERT_FATAL(wait_log(x->log_a, "assigned 4 partitions", 1, 60000) == 0);
    *b = it_engine_start(x->yaml_b, "b", x->log_b);
    CU_ASSERT_FATAL(wait_log(x->log_b, "assigned 2 partitions", 1, 60000) == 0);
    CU_ASSERT_FATAL(it_produce(x->in, BATCH, make_rec, NULL) == 0);
}

static void test_standby_failover(void)
{
    pair x;
    pid_t a, b;
    start_pair(&x, "standby", &a, &b);
    const char *dir = x.dir, *in = x.in, *out = x.out, *yaml_a = x.yaml_a, *yaml_b = x.yaml_b;
    const char *log_a = x.log_a, *log_b = x.log_b;
    int port = x.port;
    it_msgs outs = {0};
    it_consume(out, BATCH, 500, 60000, &outs);
    it_msgs_free(&outs);

    /* each process holds the 2 tasks it does not own as standbys */
    CU_ASSERT(wait_log(log_a, "standby task", 2, 30000) == 0);
    CU_ASSERT(wait_log(log_b, "standby task", 2, 30000) == 0);
    int equal = 0;
    for (int p = 0; p < 4; p++)
        equal += wait_equal(yaml_a, yaml_b, p, 30000);
    CU_ASSERT_EQUAL(equal, 4);
    /* the same client.id routes queries: each names the other's address */
    CU_ASSERT(wait_query_routing(port + 2, port + 3, 15000) == 0);
    /* B's metrics: two standby tasks, caught up */
    double tasks = -1, lag = -1;
    int lag_samples = 0;
    for (int64_t end = it_now_ms() + 15000; it_now_ms() < end; it_sleep_ms(300)) {
        char *text = it_metrics_scrape(port + 1);
        if (text) {
            tasks = it_metrics_sum(text, "kstreams_standby_tasks", NULL, NULL);
            lag = it_metrics_sum(text, "kstreams_standby_lag", NULL, &lag_samples);
        }
        free(text);
        if (tasks == 2 && lag_samples == 2 && lag == 0)
            break;
    }
    printf("\n  B: kstreams_standby_tasks %.0f, kstreams_standby_lag %.0f over %d samples",
           tasks, lag, lag_samples);
    CU_ASSERT_EQUAL(tasks, 2);
    CU_ASSERT_EQUAL(lag_samples, 2);
    CU_ASSERT_EQUAL(lag, 0);
    int fresh = 0;
    CU_ASSERT_EQUAL(standby_reads(dir, yaml_b, port + 2, port + 3, &fresh), 2);
    CU_ASSERT_EQUAL(fresh, 2);

    /* more records while both run, then A dies */
    CU_ASSERT_FATAL(it_produce(in, BATCH / 2, make_rec, NULL) == 0);
    it_sleep_ms(1500);
    long b_before = file_size(log_b);
    int64_t killed = it_now_ms();
    it_engine_kill(a);
    CU_ASSERT_FATAL(it_produce(in, BATCH / 2, make_rec, NULL) == 0);
    CU_ASSERT(wait_log(log_b, "assigned 4 partitions", 1, 60000) == 0);
    int64_t moved_ms = it_now_ms() - killed;

    long want[KEYS];
    for (int k = 0; k < KEYS; k++)
        want[k] = 2 * BATCH / KEYS;
    CU_ASSERT(it_consume_counts(out, want, KEYS, "k%d", 3000, 90000, &outs) == 0);
    long gaps, repeats, foreign;
    int wrong;
    it_check_count_sequences(&outs, want, KEYS, "k%d", &gaps, &repeats, &foreign, &wrong);
    long replayed, from_sum;
    int from_zero;
    int restores = restores_after(log_b, b_before, &replayed, &from_sum, &from_zero);
    int taken = it_log_count(log_b, "stopped: assigned to this process");
    printf("\n  standby_replicas 1: tasks equal to their standbys %d/4; after kill -9 B had "
           "all 4 tasks %lld ms later (session timeout %d ms), %d taken over from standbys, "
           "%d store restores (%d from offset 0) replayed %ld records past checkpoints "
           "summing %ld; "
           "%zu outputs, gaps %ld, repeats %ld, foreign %ld, wrong keys %d\n",
           equal, (long long)moved_ms, SESSION_MS, taken, restores, from_zero, replayed, from_sum,
           outs.count, gaps, repeats, foreign, wrong);
    it_msgs_free(&outs);
    CU_ASSERT_EQUAL(taken, 2);
    CU_ASSERT_EQUAL(restores, 4);
    CU_ASSERT_EQUAL(from_zero, 0); /* without a standby: from 0, all of it */
    /* the standby's checkpoint is where the restore began: what the
     * changelog held before it was not replayed */
    CU_ASSERT(from_sum > 0);
    CU_ASSERT(replayed < from_sum);
    CU_ASSERT_EQUAL(gaps, 0);
    CU_ASSERT_EQUAL(repeats, 0);
    CU_ASSERT_EQUAL(foreign, 0);
    CU_ASSERT_EQUAL(wrong, 0);
    CU_ASSERT_EQUAL(it_engine_stop(b, 30000), 0);
}

/* Whether task p's store in the state directory of `yaml` holds exactly
 * the keys k0..k(n-1) of partition p (make_rec's placement), each at
 * `count`. */
static int holds_exactly(const char *yaml, int p, int n, long count)
{
    char *text = query_task(yaml, p);
    json_t *doc = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    int want = 0, good = 0;
    for (int k = 0; k < n; k++)
        want += k % 4 == p;
    size_t i;
    json_t *e;
    json_array_foreach(doc, i, e) {
        int k = -1;
        const char *key = json_string_value(json_object_get(e, "key"));
        good += key && sscanf(key, "k%d", &k) == 1 && k < n && k % 4 == p &&
                json_integer_value(json_object_get(e, "value")) == count;
    }
    int exact = doc && json_array_size(doc) == (size_t)want && good == want;
    json_decref(doc);
    return exact;
}

/* B is away while A counts on and the operator deletes every changelog
 * record (DeleteRecords): the checkpoints of B's stores, standby copies
 * and its own tasks alike, are below the log start when B comes back.
 * Each store is wiped and restored from the log start, as Kafka Streams
 * does: B's copies then hold exactly the keys written since (restored on
 * top of the old copies, all 200 keys would be back). */
static void test_stale_checkpoints_wiped(void)
{
    pair x;
    pid_t a, b;
    start_pair(&x, "standby-wipe", &a, &b);
    const char *in = x.in, *out = x.out, *yaml_a = x.yaml_a, *yaml_b = x.yaml_b;
    const char *log_a = x.log_a, *log_b = x.log_b;
    char changelog[200];
    snprintf(changelog, sizeof changelog, "%s-counts-changelog", x.app);
    int equal = 0;
    for (int p = 0; p < 4; p++)
        equal += wait_equal(yaml_a, yaml_b, p, 60000);
    CU_ASSERT_EQUAL(equal, 4);
    CU_ASSERT_EQUAL(it_engine_stop(b, 30000), 0);

    /* A alone counts on: the changelogs move past B's checkpoints */
    CU_ASSERT(wait_log(log_a, "assigned 4 partitions", 2, 60000) == 0);
    CU_ASSERT_FATAL(it_produce(in, BATCH, make_rec, NULL) == 0);
    long want[KEYS];
    for (int k = 0; k < KEYS; k++)
        want[k] = 2 * BATCH / KEYS;
    it_msgs outs = {0};
    CU_ASSERT(it_consume_counts(out, want, KEYS, "k%d", 500, 90000, &outs) == 0);
    it_msgs_free(&outs);
    int64_t hi[4];
    CU_ASSERT_FATAL(it_empty_changelog(changelog, 4, hi) == 0);

    /* 20 keys once more: the changelogs now hold those only */
    enum { FEW = 20 };
    CU_ASSERT_FATAL(it_produce(in, FEW, make_rec, NULL) == 0);
    long now = 2 * BATCH / KEYS + 1;
    for (int k = 0; k < KEYS; k++)
        want[k] = k < FEW ? now : 0;
    CU_ASSERT(it_consume_counts(out, want, KEYS, "k%d", 500, 90000, &outs) == 0);
    it_msgs_free(&outs);

    b = it_engine_start(yaml_b, "b", log_b);
    /* 2 standbys started before, 2 now */
    CU_ASSERT(wait_log(log_b, "started (checkpoints:", 4, 60000) == 0);
    int exact = 0;
    for (int p = 0; p < 4; p++) {
        int ok = 0;
        for (int64_t end = it_now_ms() + 30000; !ok && it_now_ms() < end; it_sleep_ms(300))
            ok = holds_exactly(yaml_b, p, FEW, now);
        exact += ok;
    }
    int standby_wipes = it_log_count(log_b, ": store counts: checkpoint ");
    int restore_wipes = it_log_count(log_b, "(records deleted): store wiped") - standby_wipes;
    printf("\n  changelogs emptied while B was away: B wiped %d standby and %d restored "
           "stores; %d of 4 of B's copies hold exactly the %d keys written since\n",
           standby_wipes, restore_wipes, exact, FEW);
    CU_ASSERT_EQUAL(exact, 4);
    /* each of B's 4 task directories once, whether it opened first as a
     * standby (2 of them, unless the group moved a task since) or as an
     * active task */
    CU_ASSERT(standby_wipes >= 1);
    CU_ASSERT_EQUAL(standby_wipes + restore_wipes, 4);
    CU_ASSERT_EQUAL(it_engine_stop(b, 30000), 0);
    CU_ASSERT_EQUAL(it_engine_stop(a, 30000), 0);
}

int main(void)
{
    static const it_case cases[] = {
        {"standby stores equal the active ones; kill -9 the owner: tail-only restore, "
         "exactly-once",
         test_standby_failover},
        {"checkpoints below the changelogs' log start: standby and restored stores wiped",
         test_stale_checkpoints_wiped},
        {NULL, NULL}};
    return it_main("standby", cases);
}
