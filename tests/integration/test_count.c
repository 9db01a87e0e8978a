/*
 * test_count.c - exactly-once stateful processing against the real broker,
 * with the shipped `count` plugin: 1 000 keys on 4 partitions, 2 workers.
 *
 * One scenario in phases, each checked against a reference computed here:
 *   1. 50 000 records; clean stop (SIGTERM)       -> restart replays nothing
 *   2. 25 000 more; kill -9 while processing      -> restart replays a tail
 *   3. state directory deleted                    -> full restore, counts go on
 *   4. a second process joins mid-stream, leaves  -> still exact
 *   5. the changelog's head deleted (log start > 0), state deleted
 *                                                 -> restore from the log start
 *   6. (own topics) a store whose checkpoint is below the changelog's log
 *      start                                      -> wiped, restored from there
 *   7. (own topics) the changelog deleted and created again, the state kept
 *                                                 -> wiped
 * After each phase the output topic (read_committed) must hold, per key,
 * rising counts ending at n, no repeat: the record cache (when a pipeline turns it on)
 * folds a key's updates within a commit, so values may be skipped; the
 * outputs are fewer than the inputs, never more.
 */
#include <CUnit/CUnit.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "itest.h"
#include "kstreams/kstreams.h"

#define KEYS 1000

static char dir[256], app[128], in_topic[128], out_topic[128];
static char yaml_a[512], yaml_b[512], log_a[512], log_b[512];
static long produced; /* records produced so far */
static long expected_count[KEYS];

static void make_view(int i, char *key, size_t klen, char *value, size_t vlen,
                      int32_t *partition, void *arg)
{
    (void)partition;
    long base = *(long *)arg;
    long n = base + i;
    /* a key sequence that is not round-robin: some keys hotter */
    int k = (int)((n * 7919 + (n % 13) * 31) % KEYS);
    snprintf(key, klen, "user-%04d", k);
    snprintf(value, vlen, "{\"n\":%ld,\"path\":\"/p/%d\"}", n, (int)(n % 50));
}

static void produce_more(int n)
{
    long base = produced;
    CU_ASSERT_FATAL(it_produce(in_topic, n, make_view, &base) == 0);
    for (int i = 0; i < n; i++) {
        long x = base + i;
        expected_count[(x * 7919 + (x % 13) * 31) % KEYS]++;
    }
    produced += n;
}

static void write_pipeline_of(const char *yaml, const char *application, const char *state,
                              const char *in, const char *out)
{
    it_write_file(yaml,
                  "application: %s\n"
                  "kafka: { bootstrap: [%s] }\n"
                  "guarantee: exactly-once\n"
                  "commit_interval_ms: 100\n"
                  "workers: 2\n"
                  "state_dir: %s\n"
                  "plugin_path: [%s/plugins/.libs]\n"
                  "sources:\n"
                  "  views: { topic: %s, key: string, value: json }\n"
                  "nodes:\n"
                  "  - { name: per_user, type: count, from: views, store: counts }\n"
                  "sinks:\n"
                  "  - { from: per_user, topic: %s, key: string, value: int64, create: true, "
                  "partitions: 4 }\n",
                  application, it_bootstrap(), state, KS_TEST_BUILDDIR, in, out);
}

static void write_pipeline(const char *yaml, const char *state)
{
    write_pipeline_of(yaml, app, state, in_topic, out_topic);
}

/* Read the whole output and check every key's sequence: rising, ending at
 * its expected count. Returns the number of keys whose sequence is wrong. */
static int check_sequences(const char *phase)
{
    it_msgs out = {0};
    it_consume_counts(out_topic, expected_count, KEYS, "user-%d", 2000, 180000, &out);
    long folded, repeats, foreign;
    int wrong_keys;
    it_check_count_folded(&out, expected_count, KEYS, "user-%d", &folded, &repeats,
                          &foreign, &wrong_keys);
    printf("\n  [%s] %zu outputs for %ld inputs: %ld updates folded, %ld repeats, "
           "%ld foreign, %d keys with a wrong final count\n",
           phase, out.count, produced, folded, repeats, foreign, wrong_keys);
    CU_ASSERT(out.count <= (size_t)produced);
    CU_ASSERT_EQUAL(out.count + (size_t)folded, (size_t)produced);
    CU_ASSERT_EQUAL(repeats, 0);
    CU_ASSERT_EQUAL(foreign, 0);
    CU_ASSERT_EQUAL(wrong_keys, 0);
    it_msgs_free(&out);
    return wrong_keys + (int)repeats;
}

/* Wait until every key's output reached its expected count (read_committed). */
static void wait_outputs(long n)
{
    (void)n;
    it_msgs out = {0};
    it_consume_counts(out_topic, expected_count, KEYS, "user-%d", 200, 180000, &out);
    it_msgs_free(&out);
}

/* Changelog records replayed by restores, from the engine's log lines
 * "restored store S partition P: N records replayed from offset O". */
static long replayed(const char *log)
{
    return it_log_sum_before(log, ": ", " records replayed");
}

static void clear_log(const char *path)
{
    FILE *f = fopen(path, "w");
    if (f)
        fclose(f);
}

static void setup(void)
{
    it_tempdir(dir, sizeof dir);
    it_unique(app, sizeof app, "count");
    it_unique(in_topic, sizeof in_topic, "views");
    it_unique(out_topic, sizeof out_topic, "counts-out");
    CU_ASSERT_FATAL(it_create_topic(in_topic, 4) == 0);
    char state[400];
    snprintf(state, sizeof state, "%s/state-a", dir);
    snprintf(yaml_a, sizeof yaml_a, "%s/a.yaml", dir);
    write_pipeline(yaml_a, state);
    snprintf(state, sizeof state, "%s/state-b", dir);
    snprintf(yaml_b, sizeof yaml_b, "%s/b.yaml", dir);
    write_pipeline(yaml_b, state);
    snprintf(log_a, sizeof log_a, "%s/a.log", dir);
    snprintf(log_b, sizeof log_b, "%s/b.log", dir);
}

static void test_counts_clean_restart(void)
{
    setup();
    produce_more(50000);
    pid_t a = it_engine_start(yaml_a, "a", log_a);
    wait_outputs(produced);
    CU_ASSERT_EQUAL(it_engine_stop(a, 30000), 0);
    check_sequences("first run");
    /* restart: the checkpoints match the changelog, nothing is replayed */
    clear_log(log_a);
    produce_more(5000);
    a = it_engine_start(yaml_a, "a", log_a);
    wait_outputs(produced);
    CU_ASSERT_EQUAL(it_engine_stop(a, 30000), 0);
    long r = replayed(log_a);
    printf("  clean restart replayed %ld changelog records\n", r);
    CU_ASSERT_EQUAL(r, 0);
    /* every task restored and found nothing to replay */
    CU_ASSERT(it_log_count(log_a, ": 0 records replayed") + it_log_count(log_a, "up to date") >= 4);
    check_sequences("clean restart");
}

/* Regular files in `path` (0 when it does not exist). */
static int count_files(const char *path)
{
    DIR *d = opendir(path);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.' || (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."));
    if (d)
        closedir(d);
    return n;
}

static void test_counts_after_kill9(void)
{
    clear_log(log_a);
    pid_t a = it_engine_start(yaml_a, "a", log_a);
    produce_more(25000);
    it_sleep_ms(700); /* mid-stream */
    it_engine_kill(a);
    a = it_engine_start(yaml_a, "a", log_a);
    wait_outputs(produced);
    CU_ASSERT_EQUAL(it_engine_stop(a, 30000), 0);
    /* the killed engine's private plugin copies went at the restart, the
     * restarted one's at its clean stop */
    char copies[600];
    snprintf(copies, sizeof copies, "%s/state-a/%s/plugins", dir, app);
    int left = count_files(copies);
    printf("  after kill -9 and a clean stop: %d private plugin copies left\n", left);
    CU_ASSERT_EQUAL(left, 0);
    long r = replayed(log_a);
    printf("  after kill -9: replayed %ld changelog records (of ~%ld)\n", r, produced);
    CU_ASSERT(r < produced / 10);
    check_sequences("kill -9");
}

static void rm_rf(const char *path)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    CU_ASSERT(system(cmd) == 0);
}

static void test_counts_after_state_loss(void)
{
    char state[400];
    snprintf(state, sizeof state, "%s/state-a", dir);
    rm_rf(state);
    clear_log(log_a);
    produce_more(5000);
    pid_t a = it_engine_start(yaml_a, "a", log_a);
    wait_outputs(produced);
    CU_ASSERT_EQUAL(it_engine_stop(a, 30000), 0);
    long r = replayed(log_a);
    printf("  after deleting the state: replayed %ld changelog records\n", r);
    CU_ASSERT(r >= KEYS); /* at least one record per key came back */
    check_sequences("state deleted");
}

static void test_counts_second_process(void)
{
    clear_log(log_a);
    pid_t a = it_engine_start(yaml_a, "a", log_a);
    produce_more(10000);
    pid_t b = it_engine_start(yaml_b, "b", log_b);
    produce_more(10000);
    /* until b holds tasks: a broker with Kafka's default settings delays
     * the rebalance by group.initial.rebalance.delay.ms (3 s) and more */
    for (int i = 0; i < 600 && it_log_count(log_b, "started") == 0; i++)
        it_sleep_ms(100);
    produce_more(5000);
    CU_ASSERT_EQUAL(it_engine_stop(b, 30000), 0);
    produce_more(5000);
    wait_outputs(produced);
    CU_ASSERT_EQUAL(it_engine_stop(a, 30000), 0);
    printf("  process b ran %d tasks\n", it_log_count(log_b, "] task ") / 2);
    CU_ASSERT(it_log_count(log_b, "started") > 0);
    check_sequences("second process");
}

/* Every key updated by the records [base, base + n). */
static int all_keys_in(long base, long n)
{
    static char seen[KEYS];
    memset(seen, 0, sizeof seen);
    int count = 0;
    for (long x = base; x < base + n; x++) {
        int k = (int)((x * 7919 + (x % 13) * 31) % KEYS);
        count += !seen[k];
        seen[k] = 1;
    }
    return count == KEYS;
}

/* A changelog whose head was deleted starts at an offset past 0: the
 * broker refuses DeleteRecords on a compact-only topic ("Policy
 * violation", Kafka 4.1.1), so the operator first sets
 * cleanup.policy=compact,delete (the policy Kafka Streams gives windowed
 * changelogs). A restore from an empty state directory must start at the
 * log start, and since every key was updated after the deleted head, the
 * counts must go on exactly. */
static void test_restore_from_a_log_start_past_zero(void)
{
    char changelog[200], state[400];
    snprintf(changelog, sizeof changelog, "%s-counts-changelog", app);
    int64_t head[4], lo[4];
    CU_ASSERT_FATAL(it_watermarks(changelog, 4, NULL, head) == 0);
    long base = produced;
    produce_more(8000);
    CU_ASSERT_FATAL(all_keys_in(base, 8000)); /* the premise: nothing lives only in the head */
    clear_log(log_a);
    pid_t a = it_engine_start(yaml_a, "a", log_a);
    wait_outputs(produced);
    CU_ASSERT_EQUAL(it_engine_stop(a, 30000), 0);
    static const char *const both[] = {"cleanup.policy", "compact,delete", NULL};
    CU_ASSERT_FATAL(it_alter_topic(changelog, both) == 0);
    CU_ASSERT_FATAL(it_delete_records(changelog, 4, head) == 0);
    CU_ASSERT_FATAL(it_watermarks(changelog, 4, lo, NULL) == 0);
    for (int p = 0; p < 4; p++) {
        CU_ASSERT(head[p] > 0);
        CU_ASSERT_EQUAL(lo[p], head[p]);
    }
    snprintf(state, sizeof state, "%s/state-a", dir);
    rm_rf(state);
    clear_log(log_a);
    produce_more(3000);
    a = it_engine_start(yaml_a, "a", log_a);
    wait_outputs(produced);
    CU_ASSERT_EQUAL(it_engine_stop(a, 30000), 0);
    int starts = 0;
    for (int p = 0; p < 4; p++) {
        char from[64];
        snprintf(from, sizeof from, "records replayed from offset %lld ", (long long)head[p]);
        int found = it_log_count(log_a, from) > 0;
        printf("  partition %d: log start %lld, restored from there: %s\n", p,
               (long long)head[p], found ? "yes" : "no");
        starts += found;
    }
    CU_ASSERT_EQUAL(starts, 4);
    check_sequences("changelog head deleted");
}

/* ---- a checkpoint below the log start ---------------------------------- */

#define WIPE_KEYS 20 /* "k-0".."k-9" counted by a, "k-10".."k-19" only by b */

typedef struct key_run {
    int first, keys; /* keys first..first+keys-1, each once per round */
} key_run;

static void make_key_run(int i, char *key, size_t klen, char *value, size_t vlen,
                         int32_t *partition, void *arg)
{
    (void)partition;
    const key_run *r = arg;
    snprintf(key, klen, "k-%d", r->first + i % r->keys);
    snprintf(value, vlen, "{\"n\":%d}", i);
}

/* The last value of each key "k-N" in `topic` (read_committed) into
 * last[] (0: none), reading until nothing more came for 1.5 s after the
 * first record. */
static void last_counts(const char *topic, long *last)
{
    it_msgs out = {0};
    it_consume(topic, 1, 1500, 20000, &out);
    memset(last, 0, WIPE_KEYS * sizeof *last);
    for (size_t i = 0; i < out.count; i++) {
        int k = -1;
        const it_msg *m = &out.items[i];
        if (m->key && sscanf(m->key, "k-%d", &k) == 1 && k >= 0 && k < WIPE_KEYS &&
            m->value_len == 8)
            last[k] = (long)ks_int64_decode(m->value);
    }
    it_msgs_free(&out);
}

/* Run the engine of `yaml` until every key's last count is `want` (or 90 s
 * passed), then stop it cleanly. */
static void run_until(const char *yaml, const char *log, const char *topic, const long *want)
{
    pid_t p = it_engine_start(yaml, "w", log);
    long last[WIPE_KEYS];
    for (int64_t end = it_now_ms() + 90000; it_now_ms() < end;) {
        last_counts(topic, last);
        if (memcmp(last, want, sizeof last) == 0)
            break;
    }
    CU_ASSERT_EQUAL(it_engine_stop(p, 30000), 0);
}

/* Process a keeps a store whose checkpoint the changelog no longer holds:
 * b went on from a's changelog while a was away, then the operator deleted
 * the changelog's records (DeleteRecords, as the retention of a
 * compact,delete changelog does). a must wipe its store and restore from
 * the log start, as Kafka Streams does: nothing is left there, so its keys
 * count again from 1 (replayed on top of its old store, they went on from
 * the counts a had: 4). */
/* A one-partition count application of its own for the wipe cases: two
 * processes' pipelines (state directories a and b), one log. */
typedef struct small_app {
    char app[128], in[128], out[128], changelog[200], yaml_a[512], yaml_b[512], log[512];
} small_app;

static void small_app_setup(small_app *x, const char *name)
{
    char state[400];
    if (!dir[0]) /* run alone (KS_IT_ONLY) */
        it_tempdir(dir, sizeof dir);
    it_unique(x->app, sizeof x->app, name);
    snprintf(state, sizeof state, "%s-in", name);
    it_unique(x->in, sizeof x->in, state);
    snprintf(state, sizeof state, "%s-out", name);
    it_unique(x->out, sizeof x->out, state);
    snprintf(x->changelog, sizeof x->changelog, "%s-counts-changelog", x->app);
    CU_ASSERT_FATAL(it_create_topic(x->in, 1) == 0);
    snprintf(x->yaml_a, sizeof x->yaml_a, "%s/%s-a.yaml", dir, name);
    snprintf(state, sizeof state, "%s/state-%s-a", dir, name);
    write_pipeline_of(x->yaml_a, x->app, state, x->in, x->out);
    snprintf(x->yaml_b, sizeof x->yaml_b, "%s/%s-b.yaml", dir, name);
    snprintf(state, sizeof state, "%s/state-%s-b", dir, name);
    write_pipeline_of(x->yaml_b, x->app, state, x->in, x->out);
    snprintf(x->log, sizeof x->log, "%s/%s.log", dir, name);
}

static void test_checkpoint_below_the_log_start(void)
{
    small_app x;
    small_app_setup(&x, "count-wipe");
    const char *in6 = x.in, *out6 = x.out, *changelog = x.changelog, *yaml6a = x.yaml_a;
    const char *yaml6b = x.yaml_b, *log6 = x.log;

    long want[WIPE_KEYS] = {0};
    key_run old_keys = {0, 10}, new_keys = {10, 10};
    CU_ASSERT_FATAL(it_produce(in6, 30, make_key_run, &old_keys) == 0);
    for (int k = 0; k < 10; k++)
        want[k] = 3;
    run_until(yaml6a, log6, out6, want); /* a: k-0..k-9 at 3, checkpointed */

    CU_ASSERT_FATAL(it_produce(in6, 20, make_key_run, &new_keys) == 0);
    for (int k = 10; k < WIPE_KEYS; k++)
        want[k] = 2;
    run_until(yaml6b, log6, out6, want); /* b: restores a's changelog, goes on */

    int64_t hi[1];
    CU_ASSERT_FATAL(it_empty_changelog(changelog, 1, hi) == 0);

    clear_log(log6);
    CU_ASSERT_FATAL(it_produce(in6, 10, make_key_run, &old_keys) == 0);
    for (int k = 0; k < 10; k++)
        want[k] = 1;
    run_until(yaml6a, log6, out6, want);
    long last[WIPE_KEYS];
    last_counts(out6, last);
    int restarted = 0;
    for (int k = 0; k < 10; k++)
        restarted += last[k] == 1;
    int wiped = it_log_count(log6, "store wiped, restoring from the log start");
    printf("\n  changelog emptied up to %lld: a's store wiped %d time(s); %d of 10 keys counted "
           "again from 1 (k-0: %ld)\n",
           (long long)hi[0], wiped, restarted, last[0]);
    CU_ASSERT_EQUAL(wiped, 1);
    CU_ASSERT_EQUAL(restarted, 10);
    for (int k = 10; k < WIPE_KEYS; k++)
        CU_ASSERT_EQUAL(last[k], 2);
}

/* The changelog deleted and created again, as an application reset does,
 * while the process keeps its state directory: the store's checkpoint is
 * past the new topic's end. The store is wiped, as Kafka Streams does (the
 * changelog is the truth: a restore anywhere else would not have what the
 * old store holds), and its keys count again from 1 (kept, they went on
 * from 3). */
static void test_changelog_created_again(void)
{
    small_app x;
    small_app_setup(&x, "count-reset");
    long want[WIPE_KEYS] = {0}, last[WIPE_KEYS];
    key_run keys = {0, 10};
    CU_ASSERT_FATAL(it_produce(x.in, 30, make_key_run, &keys) == 0);
    for (int k = 0; k < 10; k++)
        want[k] = 3;
    run_until(x.yaml_a, x.log, x.out, want);
    CU_ASSERT_FATAL(it_delete_topic(x.changelog) == 0);
    clear_log(x.log);
    CU_ASSERT_FATAL(it_produce(x.in, 10, make_key_run, &keys) == 0);
    for (int k = 0; k < 10; k++)
        want[k] = 1;
    run_until(x.yaml_a, x.log, x.out, want); /* the engine creates the changelog again */
    last_counts(x.out, last);
    int restarted = 0;
    for (int k = 0; k < 10; k++)
        restarted += last[k] == 1;
    int wiped = it_log_count(x.log, "(the topic created again, or records lost): store wiped");
    printf("\n  changelog deleted and created again: store wiped %d time(s); %d of 10 keys "
           "counted again from 1 (k-0: %ld)\n",
           wiped, restarted, last[0]);
    CU_ASSERT_EQUAL(wiped, 1);
    CU_ASSERT_EQUAL(restarted, 10);
}

int main(void)
{
    static const it_case cases[] = {
        {"count: exact sequences, clean restart replays nothing", test_counts_clean_restart},
        {"count: kill -9 mid-stream, restart replays only the tail", test_counts_after_kill9},
        {"count: state directory deleted, full restore", test_counts_after_state_loss},
        {"count: a second process joins and leaves", test_counts_second_process},
        {"count: restore from a changelog whose head was deleted (log start > 0)",
         test_restore_from_a_log_start_past_zero},
        {"count: a checkpoint below the changelog's log start wipes the store",
         test_checkpoint_below_the_log_start},
        {"count: a checkpoint past the end of a changelog created again wipes the store",
         test_changelog_created_again},
        {NULL, NULL}};
    return it_main("count", cases);
}
