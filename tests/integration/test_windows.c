/*
 * test_windows.c - event-time windows against the real broker, exactly-once,
 * with the shipped `count` plugin: one pipeline, one input partition, five
 * windowed nodes (tumbling, hopping, sliding, session with final results,
 * and session with every update), event time from a JSON field.
 *
 * The input has records out of order within grace and records far beyond
 * grace (late). The engine is killed with SIGKILL half-way and restarted.
 * Every output topic, read with read_committed, must equal the reference
 * of tests/window_ref.h computed from the same input: final results exactly
 * once per closed window, updates ending at the reference values. Then the
 * stopped engine's LMDB store and its changelog show that retention
 * deleted the closed windows.
 */
#include <CUnit/CUnit.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "itest.h"
#include "kstreams/kstreams.h"
#include "state/store.h"
#include "window_ref.h"

#define N 1200 /* input records */

typedef struct input {
    char key[8];
    int64_t ts;
} input;

static input in[N];
static char dir[256], app[128], in_topic[128], yaml[512], log_path[512], state[400];

/* node name, YAML window, reference */
typedef struct node {
    const char *name;
    const char *window;
    wref_kind kind;
    int64_t size, advance, gap, grace;
    int final;
    char topic[128];
    wref ref;
} node;

static node nodes[] = {
    {"tumb", "{ kind: tumbling, size: 10s, grace: 2s, emit: final, time_field: ts }",
     WREF_TUMBLING, 10000, 10000, 0, 2000, 1, "", {0}},
    {"hop", "{ kind: hopping, size: 10s, advance: 5s, grace: 2s, emit: final, "
            "time_field: ts }",
     WREF_HOPPING, 10000, 5000, 0, 2000, 1, "", {0}},
    {"slide", "{ kind: sliding, size: 5s, grace: 2s, emit: final, time_field: ts }",
     WREF_SLIDING, 5000, 0, 0, 2000, 1, "", {0}},
    {"sess", "{ kind: session, gap: 3s, grace: 1s, emit: final, time_field: ts }",
     WREF_SESSION, 0, 0, 3000, 1000, 1, "", {0}},
    {"sessu", "{ kind: session, gap: 3s, grace: 1s, time_field: ts }", WREF_SESSION, 0,
     0, 3000, 1000, 0, "", {0}},
};
#define NODES (sizeof nodes / sizeof nodes[0])

/* Mostly increasing event times; every 7th record up to 1.5 s back (within
 * grace), every 29th 40 s back (late for every window holding it). They
 * start two hours ago: outputs carry event time, and the broker deletes
 * records older than its retention (7 days) from the sink topics, on a
 * fresh broker as soon as 30 s after it starts. */
static void make_input(void)
{
    uint32_t x = 4242;
    int64_t t = ((int64_t)time(NULL) - 2 * 3600) / 60 * 60000;
    for (size_t i = 0; i < N; i++) {
        x = x * 1103515245u + 12345u;
        t += (int64_t)(x >> 16) % 900;
        snprintf(in[i].key, sizeof in[i].key, "u%u", (x >> 8) % 4);
        in[i].ts = t;
        if (i % 7 == 3)
            in[i].ts = t - (int64_t)(x >> 12) % 1500;
        if (i % 29 == 11)
            in[i].ts = t - 40000;
    }
}

static void make_record(int i, char *key, size_t klen, char *value, size_t vlen,
                        int32_t *partition, void *arg)
{
    int base = *(int *)arg;
    *partition = 0;
    snprintf(key, klen, "%s", in[base + i].key);
    snprintf(value, vlen, "{\"page\":\"/p/%d\",\"ts\":%" PRId64 "}", i % 9,
             in[base + i].ts);
}

static void write_pipeline(void)
{
    char body[4096] = "";
    size_t at = 0;
    for (size_t i = 0; i < NODES; i++)
        at += (size_t)snprintf(body + at, sizeof body - at,
                               "  - { name: %s, type: count, from: in, store: %s,\n"
                               "      window: %s }\n",
                               nodes[i].name, nodes[i].name, nodes[i].window);
    at += (size_t)snprintf(body + at, sizeof body - at, "sinks:\n");
    for (size_t i = 0; i < NODES; i++)
        at += (size_t)snprintf(body + at, sizeof body - at,
                               "  - { from: %s, topic: %s, key: string, value: int64, "
                               "create: true, partitions: 1 }\n",
                               nodes[i].name, nodes[i].topic);
    it_write_file(yaml,
                  "application: %s\n"
                  "kafka: { bootstrap: [%s] }\n"
                  "guarantee: exactly-once\n"
                  "commit_interval_ms: 100\n"
                  "state_dir: %s\n"
                  "plugin_path: [%s/plugins/.libs]\n"
                  "sources:\n"
                  "  in: { topic: %s, key: string, value: json }\n"
                  "nodes:\n%s",
                  app, it_bootstrap(), state, KS_TEST_BUILDDIR, in_topic, body);
}

/* Closed reference windows of node n at its final stream time. */
static size_t closed_windows(const node *n)
{
    size_t c = 0;
    for (size_t i = 0; i < n->ref.n; i++)
        c += n->ref.w[i].live && wref_closed(&n->ref, &n->ref.w[i], n->ref.st);
    return c;
}

static size_t live_windows(const node *n)
{
    size_t c = 0;
    for (size_t i = 0; i < n->ref.n; i++)
        c += n->ref.w[i].live;
    return c;
}

/* Parse a windowed-json key; 0 or -1. */
static int parse_key(const it_msg *m, char *key, int64_t *start, int64_t *end)
{
    long long s, e;
    if (!m->key || sscanf(m->key, "{\"key\":\"%7[^\"]\",\"start\":%lld,\"end\":%lld}", key,
                          &s, &e) != 3)
        return -1;
    *start = s;
    *end = e;
    return 0;
}

/* Final results: exactly one output per closed reference window, with its
 * count, and nothing else. */
static void check_final(node *n)
{
    size_t want = closed_windows(n);
    it_msgs out = {0};
    it_consume(n->topic, want, 3000, 60000, &out);
    size_t wrong = 0, dup = 0, foreign = 0;
    unsigned char *seen = calloc(n->ref.n + 1, 1);
    for (size_t i = 0; i < out.count; i++) {
        char key[8];
        int64_t s, e;
        wref_win *w = NULL;
        if (parse_key(&out.items[i], key, &s, &e) == 0)
            w = wref_find(&n->ref, key, s, e);
        if (!w || !wref_closed(&n->ref, w, n->ref.st) || out.items[i].value_len != 8) {
            foreign++;
            continue;
        }
        dup += seen[w - n->ref.w]++ > 0;
        wrong += ks_int64_decode(out.items[i].value) != w->count;
    }
    printf("\n  [%s] %zu final results for %zu closed windows (%zu late inputs): %zu "
           "wrong, %zu repeated, %zu unexpected",
           n->name, out.count, want, n->ref.late, wrong, dup, foreign);
    CU_ASSERT(want > 10);
    CU_ASSERT(n->ref.late > 0);
    CU_ASSERT_EQUAL(out.count, want);
    CU_ASSERT_EQUAL(wrong, 0);
    CU_ASSERT_EQUAL(dup, 0);
    CU_ASSERT_EQUAL(foreign, 0);
    free(seen);
    it_msgs_free(&out);
}

/* Every update: the last output per windowed key is the reference value;
 * merged-away sessions end with a tombstone. */
static void check_updates(node *n)
{
    it_msgs out = {0};
    it_consume(n->topic, (size_t)-1, 3000, 60000, &out);
    size_t alive = 0, wrong = 0, tombstones = 0;
    for (size_t i = 0; i < out.count; i++) {
        char key[8];
        int64_t s, e;
        if (parse_key(&out.items[i], key, &s, &e) != 0) {
            wrong++;
            continue;
        }
        tombstones += out.items[i].value == NULL;
        int last = 1;
        for (size_t j = i + 1; j < out.count && last; j++)
            last = !(out.items[j].key && strcmp(out.items[j].key, out.items[i].key) == 0);
        if (!last || out.items[i].value == NULL)
            continue;
        alive++;
        wref_win *w = wref_find(&n->ref, key, s, e);
        wrong += !w || out.items[i].value_len != 8 ||
                 ks_int64_decode(out.items[i].value) != w->count;
    }
    size_t want = live_windows(n);
    printf("\n  [%s] %zu updates (%zu tombstones), %zu live windows for %zu in the "
           "reference, %zu wrong",
           n->name, out.count, tombstones, alive, want, wrong);
    CU_ASSERT_EQUAL(alive, want);
    CU_ASSERT_EQUAL(wrong, 0);
    CU_ASSERT(tombstones > 0);
    it_msgs_free(&out);
}

static int count_entry(void *arg, ks_bytes key, ks_bytes value)
{
    (void)key;
    (void)value;
    (*(size_t *)arg)++;
    return 0;
}

/* Entries of store `name` in the stopped engine's task-0 environment. */
static size_t store_entries(const char *name)
{
    char path[700], err[512] = "";
    snprintf(path, sizeof path, "%s/%s/task-0", state, app);
    ks_store_env *env = NULL;
    ks_store_db *db = NULL;
    size_t n = 0;
    int rc = ks_store_env_open_readonly(path, &env, err, sizeof err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_EQUAL(ks_store_db_open(env, name, &db), 0);
    if (db)
        ks_store_range(db, (ks_bytes){NULL, 0}, (ks_bytes){NULL, 0}, count_entry, &n);
    ks_store_read_end(env);
    ks_store_env_close(env);
    return n;
}

static size_t changelog_tombstones(const char *store)
{
    char topic[300];
    snprintf(topic, sizeof topic, "%s-%s-changelog", app, store);
    it_msgs out = {0};
    it_consume(topic, (size_t)-1, 2000, 30000, &out);
    size_t t = 0;
    for (size_t i = 0; i < out.count; i++)
        t += out.items[i].value == NULL;
    it_msgs_free(&out);
    return t;
}

static void test_windows_kill9(void)
{
    it_tempdir(dir, sizeof dir);
    it_unique(app, sizeof app, "windows");
    it_unique(in_topic, sizeof in_topic, "win-in");
    for (size_t i = 0; i < NODES; i++) {
        char base[64];
        snprintf(base, sizeof base, "win-%s", nodes[i].name);
        it_unique(nodes[i].topic, sizeof nodes[i].topic, base);
        node *n = &nodes[i];
        memset(&n->ref, 0, sizeof n->ref);
        n->ref.kind = n->kind;
        n->ref.size = n->size;
        n->ref.advance = n->advance;
        n->ref.gap = n->gap;
        n->ref.grace = n->grace;
        n->ref.st = INT64_MIN;
    }
    CU_ASSERT_FATAL(it_create_topic(in_topic, 1) == 0);
    snprintf(state, sizeof state, "%s/state", dir);
    snprintf(yaml, sizeof yaml, "%s/windows.yaml", dir);
    snprintf(log_path, sizeof log_path, "%s/engine.log", dir);
    make_input();
    for (size_t i = 0; i < N; i++)
        for (size_t k = 0; k < NODES; k++)
            wref_feed(&nodes[k].ref, in[i].key, in[i].ts);
    for (size_t k = 0; k < NODES; k++)
        if (nodes[k].kind == WREF_SLIDING)
            wref_sliding_finish(&nodes[k].ref);
    write_pipeline();

    /* first half, then SIGKILL while the engine works */
    int base = 0;
    CU_ASSERT_FATAL(it_produce(in_topic, N / 2, make_record, &base) == 0);
    pid_t pid = it_engine_start(yaml, "a", log_path);
    it_msgs some = {0};
    it_consume(nodes[0].topic, 5, 200, 60000, &some);
    CU_ASSERT(some.count >= 5);
    it_msgs_free(&some);
    it_engine_kill(pid);

    /* second half; the restarted engine restores and goes on */
    base = N / 2;
    CU_ASSERT_FATAL(it_produce(in_topic, N - N / 2, make_record, &base) == 0);
    pid = it_engine_start(yaml, "a", log_path);
    it_msgs all = {0};
    it_consume(nodes[0].topic, closed_windows(&nodes[0]), 500, 90000, &all);
    it_msgs_free(&all);
    it_sleep_ms(1500); /* let the last batch commit */
    CU_ASSERT_EQUAL(it_engine_stop(pid, 30000), 0);

    for (size_t k = 0; k < NODES; k++) {
        if (nodes[k].final)
            check_final(&nodes[k]);
        else
            check_updates(&nodes[k]);
    }

    /* retention: with the default retention a closed window leaves the
     * store when it is emitted; left are the meta entry and, per open
     * window, the window and its index entry */
    for (size_t k = 0; k < NODES; k++) {
        node *n = &nodes[k];
        if (!(n->kind == WREF_TUMBLING || n->kind == WREF_SESSION) || !n->final)
            continue;
        size_t open = live_windows(n) - closed_windows(n);
        size_t entries = store_entries(n->name);
        size_t tomb = changelog_tombstones(n->name);
        printf("\n  [%s] store holds %zu entries for %zu open windows; changelog has "
               "%zu tombstones",
               n->name, entries, open, tomb);
        CU_ASSERT_EQUAL(entries, 1 + 2 * open);
        CU_ASSERT(tomb >= 2 * closed_windows(n)); /* window + its index entry */
    }
    printf("\n");
    CU_ASSERT(it_log_count(log_path, "dropped a late record") > 0);
}

int main(void)
{
    static const it_case cases[] = {
        {"windows: four kinds == reference across kill -9, retention deletes",
         test_windows_kill9},
        {NULL, NULL}};
    return it_main("windows", cases);
}
