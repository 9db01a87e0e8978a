/*
 * test_stream_joins.c - the windowed stream-stream join (join.streams,
 * plugins/join_streams.c), docs/tables-and-joins.md.
 *
 * An inner, a left and an outer join of the same two streams in the test
 * driver against a reference model over random interleavings of both
 * sides: records out of order within grace, late records past it, 3
 * tasks, the driver closed and reopened on its state directory half-way;
 * every output of each join equals the model's, record for record (key,
 * value, timestamp). Then the rules one by one: no unmatched result before
 * window + grace has passed, none after a late join, a late record counted
 * and dropped; the YAML and its errors.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "kstreams/testdriver.h"
#include "unit/test_util.h"

#define PLUGINS KS_TEST_BUILDDIR "/plugins/.libs:" KS_TEST_BUILDDIR "/tests/plugins/.libs"

#define HEAD                                                                           \
    "application: sjoins\n"                                                            \
    "kafka: { bootstrap: 127.0.0.1:9092 }\n"                                           \
    "plugin_path: [" KS_TEST_BUILDDIR "/plugins/.libs]\n"                              \
    "sources:\n"                                                                       \
    "  orders: { topic: orders, key: string, value: json }\n"                          \
    "  payments: { topic: payments, key: string, value: json }\n"

#define BEFORE 50
#define AFTER 20
#define GRACE 30
#define WINDOW "window: { before: 50ms, after: 20ms, grace: 30ms }"

static const char *YAML =
    HEAD "nodes:\n"
         "  - { name: inner, type: join.streams, from: [orders, payments], store: b1,\n"
         "      config: { left: orders, right: payments }, " WINDOW " }\n"
         "  - { name: left, type: join.streams, from: [orders, payments], store: b2,\n"
         "      config: { left: orders, right: payments, kind: left }, " WINDOW " }\n"
         "  - { name: outer, type: join.streams, from: [payments, orders], store: b3,\n"
         "      config: { left: orders, right: payments, kind: outer }, " WINDOW " }\n"
         "sinks:\n"
         "  - { name: o_inner, from: inner, topic: t1, key: string, value: json }\n"
         "  - { name: o_left, from: left, topic: t2, key: string, value: json }\n"
         "  - { name: o_outer, from: outer, topic: t3, key: string, value: json }\n";

enum { INNER, LEFT_JOIN, OUTER, JOINS };
static const char *const SINKS[JOINS] = {"o_inner", "o_left", "o_outer"};

/* ---- the reference model ------------------------------------------------ */

#define KEYS 8
#define PARTS 3
#define STEPS 4000

typedef struct rec {
    int side; /* 0 left (orders), 1 right (payments) */
    int key, n;
    int64_t ts;
    int matched[JOINS];
    int live;
} rec;

typedef struct out {
    char key[16];
    char value[128];
    int64_t ts;
} out;

typedef struct model {
    rec *recs; /* every buffered record, in arrival order */
    size_t n;
    int64_t st[PARTS]; /* stream time per task */
    int part[KEYS];
    out *want[JOINS];
    size_t want_n[JOINS], want_cap[JOINS];
    int late;
} model;

static void value_of(const rec *r, char *buf, size_t len)
{
    snprintf(buf, len, r->side ? "{\"p\":%d}" : "{\"o\":%d}", r->n);
}

static void want(model *m, int j, int key, const rec *l, const rec *r, int64_t ts)
{
    if (m->want_n[j] == m->want_cap[j]) {
        m->want_cap[j] = m->want_cap[j] ? 2 * m->want_cap[j] : 256;
        m->want[j] = realloc(m->want[j], m->want_cap[j] * sizeof *m->want[j]);
    }
    out *o = &m->want[j][m->want_n[j]++];
    char lv[48] = "null", rv[48] = "null";
    if (l)
        value_of(l, lv, sizeof lv);
    if (r)
        value_of(r, rv, sizeof rv);
    snprintf(o->key, sizeof o->key, "k%d", key);
    snprintf(o->value, sizeof o->value, "{\"left\":%s,\"right\":%s}", lv, rv);
    o->ts = ts;
}

static int keeps_unmatched(int j, int side)
{
    return j == OUTER || (j == LEFT_JOIN && side == 0);
}

/* What the three joins output for record x, as join_streams.c's header
 * says: late -> nothing; else its joins, then the expired records of its
 * task that never joined. */
static void model_step(model *m, rec x)
{
    int p = m->part[x.key];
    int64_t old = m->st[p];
    if (x.ts > m->st[p])
        m->st[p] = x.ts;
    int64_t st = m->st[p];
    if (x.ts + (x.side ? BEFORE : AFTER) + GRACE < st) {
        m->late++;
        return;
    }
    /* partners in (time, arrival) order, as the store scans them */
    size_t *idx = malloc((m->n + 1) * sizeof *idx), np = 0;
    for (size_t i = 0; i < m->n; i++) {
        rec *b = &m->recs[i];
        if (!b->live || b->key != x.key || b->side == x.side)
            continue;
        const rec *l = x.side ? b : &x, *r = x.side ? &x : b;
        if (r->ts < l->ts - BEFORE || r->ts > l->ts + AFTER)
            continue;
        size_t at = np++;
        while (at > 0 && m->recs[idx[at - 1]].ts > b->ts) {
            idx[at] = idx[at - 1];
            at--;
        }
        idx[at] = i;
    }
    for (size_t k = 0; k < np; k++) {
        rec *b = &m->recs[idx[k]];
        const rec *l = x.side ? b : &x, *r = x.side ? &x : b;
        for (int j = 0; j < JOINS; j++) {
            want(m, j, x.key, l, r, l->ts > r->ts ? l->ts : r->ts);
            b->matched[j] = x.matched[j] = 1;
        }
    }
    free(idx);
    x.live = 1;
    m->recs = realloc(m->recs, (m->n + 1) * sizeof *m->recs);
    m->recs[m->n++] = x;
    if (st <= old)
        return;
    /* expire in (time, arrival) order */
    for (;;) {
        rec *first = NULL;
        for (size_t i = 0; i < m->n; i++) {
            rec *b = &m->recs[i];
            if (b->live && m->part[b->key] == p && b->ts + BEFORE + AFTER + GRACE < st &&
                (!first || b->ts < first->ts))
                first = b;
        }
        if (!first)
            break;
        first->live = 0;
        for (int j = 0; j < JOINS; j++)
            if (keeps_unmatched(j, first->side) && !first->matched[j])
                want(m, j, first->key, first->side ? NULL : first,
                     first->side ? first : NULL, first->ts);
    }
}

static int check_outputs(ks_driver *drv, model *m, size_t from[JOINS])
{
    int ok = 1;
    for (int j = 0; j < JOINS; j++) {
        for (size_t i = from[j]; i < m->want_n[j]; i++) {
            const out *o = &m->want[j][i];
            ks_driver_record r;
            if (ks_driver_read_output(drv, SINKS[j], &r) != 0) {
                fprintf(stderr, "\n%s: no output, expected %s %s @%lld\n", SINKS[j], o->key,
                        o->value, (long long)o->ts);
                return 0;
            }
            int same = r.key_len == strlen(o->key) && memcmp(r.key, o->key, r.key_len) == 0 &&
                       r.value_len == strlen(o->value) &&
                       memcmp(r.value, o->value, r.value_len) == 0 && r.timestamp == o->ts;
            if (!same) {
                fprintf(stderr, "\n%s: got %.*s %.*s @%lld, expected %s %s @%lld\n", SINKS[j],
                        (int)r.key_len, (const char *)r.key, (int)r.value_len,
                        r.value ? (const char *)r.value : "", (long long)r.timestamp, o->key,
                        o->value, (long long)o->ts);
                ok = 0;
            }
        }
        from[j] = m->want_n[j];
        if (ks_driver_output_count(drv, SINKS[j]) != 0) {
            fprintf(stderr, "\n%s: more outputs than the model's\n", SINKS[j]);
            ok = 0;
        }
    }
    return ok;
}

static ks_driver *open_at(const char *dir)
{
    ks_driver_options opt = {.partitions = PARTS, .plugin_path = PLUGINS, .state_dir = dir};
    ks_driver *drv = NULL;
    char err[1024] = "";
    if (ks_driver_open_text("s.yaml", YAML, strlen(YAML), &opt, &drv, err, sizeof err) != 0)
        fprintf(stderr, "\n%s\n", err);
    return drv;
}

/* One record through the model and the driver; the outputs must agree. */
static int step(ks_driver *drv, model *m, rec x, size_t seen[JOINS])
{
    char key[16], value[48];
    snprintf(key, sizeof key, "k%d", x.key);
    value_of(&x, value, sizeof value);
    model_step(m, x);
    if (ks_driver_pipe(drv, x.side ? "payments" : "orders", key, strlen(key), value,
                       strlen(value), x.ts) != 0)
        return 0;
    return check_outputs(drv, m, seen);
}

static void test_model(void)
{
    char dir[] = "/tmp/ks-test-sjoins-XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    ks_driver *drv = open_at(dir);
    CU_ASSERT_PTR_NOT_NULL_FATAL(drv);
    model m = {0};
    for (int p = 0; p < PARTS; p++)
        m.st[p] = INT64_MIN;
    for (int k = 0; k < KEYS; k++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", k);
        m.part[k] = ks_driver_partition_for(key, strlen(key), PARTS);
    }
    size_t seen[JOINS] = {0};
    unsigned seed = 19;
    int bad = 0, reopened = 0;
    for (int i = 0; i < STEPS && !bad; i++) {
        rec x = {.side = rand_r(&seed) % 2, .key = rand_r(&seed) % KEYS, .n = i};
        int64_t base = 1000 + 4 * i;
        int r = rand_r(&seed) % 20;
        /* mostly a little out of order, sometimes far back (late) */
        x.ts = r < 17 ? base - rand_r(&seed) % 60 : base - 60 - rand_r(&seed) % 200;
        bad = !step(drv, &m, x, seen);
        if (i == STEPS / 2) { /* the buffers and stream time live in the store */
            ks_driver_close(drv);
            drv = open_at(dir);
            CU_ASSERT_PTR_NOT_NULL_FATAL(drv);
            reopened = 1;
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(reopened);
    CU_ASSERT(m.late > 100);
    CU_ASSERT(m.want_n[INNER] > 500);
    CU_ASSERT(m.want_n[LEFT_JOIN] > m.want_n[INNER] + 300);
    CU_ASSERT(m.want_n[OUTER] > m.want_n[LEFT_JOIN] + 300);
    fprintf(stderr, " [inner %zu, left %zu, outer %zu outputs; %d late] ", m.want_n[INNER],
            m.want_n[LEFT_JOIN], m.want_n[OUTER], m.late);
    ks_driver_close(drv);
    for (int j = 0; j < JOINS; j++)
        free(m.want[j]);
    free(m.recs);
    char cmd[100];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CU_ASSERT_EQUAL(system(cmd), 0);
}

/* ---- the rules, one by one -------------------------------------------- */

static const char *ONE =
    HEAD "nodes:\n"
         "  - { name: j, type: join.streams, from: [orders, payments], store: b,\n"
         "      config: { left: orders, right: payments, kind: left },\n"
         "      window: { before: 10s, after: 0s, grace: 1s } }\n"
         "sinks:\n"
         "  - { name: out, from: j, topic: out, key: string, value: json }\n";

static int pipe_s(ks_driver *drv, const char *src, const char *v, int64_t ts)
{
    return ks_driver_pipe(drv, src, "a", 1, v, strlen(v), ts);
}

static int next_is(ks_driver *drv, const char *value, int64_t ts)
{
    ks_driver_record r;
    if (ks_driver_read_output(drv, "out", &r) != 0)
        return 0;
    int ok = r.value_len == strlen(value) && memcmp(r.value, value, r.value_len) == 0 &&
             r.timestamp == ts;
    if (!ok)
        fprintf(stderr, "\ngot %.*s @%lld, want %s @%lld\n", (int)r.value_len,
                (const char *)r.value, (long long)r.timestamp, value, (long long)ts);
    return ok;
}

static void test_rules(void)
{
    ks_driver_options opt = {.partitions = 1, .plugin_path = PLUGINS};
    ks_driver *drv = NULL;
    char err[1024] = "";
    int rc = ks_driver_open_text("s.yaml", ONE, strlen(ONE), &opt, &drv, err, sizeof err);
    if (rc)
        fprintf(stderr, "\n%s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    /* an order at 100 s; a payment 9 s earlier joins (before: 10s) */
    CU_ASSERT_EQUAL(pipe_s(drv, "orders", "{\"o\":1}", 100000), 0);
    CU_ASSERT_EQUAL(pipe_s(drv, "payments", "{\"p\":1}", 91000), 0);
    CU_ASSERT(next_is(drv, "{\"left\":{\"o\":1},\"right\":{\"p\":1}}", 100000));
    /* one 1 ms after the order does not (after: 0s) */
    CU_ASSERT_EQUAL(pipe_s(drv, "payments", "{\"p\":2}", 100001), 0);
    CU_ASSERT_EQUAL(ks_driver_output_count(drv, NULL), 0);
    /* an order at 112 s with no payment in [102 s, 112 s] yet: no result
     * until its window plus `before` plus grace has passed (a payment up
     * to 10 s + grace behind stream time is not late and may still join) */
    CU_ASSERT_EQUAL(pipe_s(drv, "orders", "{\"o\":2}", 112000), 0);
    CU_ASSERT_EQUAL(pipe_s(drv, "orders", "{\"o\":3}", 116000), 0);
    CU_ASSERT_EQUAL(ks_driver_output_count(drv, NULL), 0);
    /* stream time 116 s; a payment at 105 s is not late (105 + 10 + 1 >= 116)
     * and joins order 2: no left result for order 2 came before it */
    CU_ASSERT_EQUAL(pipe_s(drv, "payments", "{\"p\":3}", 105000), 0);
    CU_ASSERT(next_is(drv, "{\"left\":{\"o\":2},\"right\":{\"p\":3}}", 112000));
    CU_ASSERT_EQUAL(ks_driver_output_count(drv, NULL), 0);
    /* a payment at 104 s is late (104 + 10 + 1 < 116): dropped */
    CU_ASSERT_EQUAL(pipe_s(drv, "payments", "{\"p\":4}", 104000), 0);
    CU_ASSERT_EQUAL(ks_driver_output_count(drv, NULL), 0);
    /* so is an order more than grace behind (after: 0s) */
    CU_ASSERT_EQUAL(pipe_s(drv, "orders", "{\"o\":4}", 114000), 0);
    /* stream time 127.001 s: order 3 (116 s) has expired unjoined */
    CU_ASSERT_EQUAL(pipe_s(drv, "payments", "{\"p\":5}", 127001), 0);
    CU_ASSERT(next_is(drv, "{\"left\":{\"o\":3},\"right\":null}", 116000));
    CU_ASSERT_EQUAL(ks_driver_output_count(drv, NULL), 0);
    ks_driver_close(drv);
}

/* merge needs JSON objects: an array that never joined cannot be output
 * when it expires, and that does not fail the record moving stream time */
static void test_unjoinable(void)
{
    const char *yaml =
        HEAD "nodes:\n"
             "  - { name: j, type: join.streams, from: [orders, payments], store: b,\n"
             "      config: { left: orders, right: payments, kind: left, joiner: merge },\n"
             "      window: { before: 1s, after: 0s } }\n"
             "sinks:\n"
             "  - { name: out, from: j, topic: out, key: string, value: json }\n";
    ks_driver_options opt = {.partitions = 1, .plugin_path = PLUGINS};
    ks_driver *drv = NULL;
    char err[1024] = "";
    CU_ASSERT_EQUAL_FATAL(ks_driver_open_text("s.yaml", yaml, strlen(yaml), &opt, &drv, err,
                                              sizeof err), 0);
    CU_ASSERT_EQUAL(pipe_s(drv, "orders", "[1]", 1000), 0);
    CU_ASSERT_EQUAL(pipe_s(drv, "orders", "{\"o\":2}", 5000), 0);
    CU_ASSERT_EQUAL(pipe_s(drv, "orders", "{\"o\":3}", 9000), 0);
    /* [1] dropped at 5 s; {"o":2} (5 s) expired at 9 s: merged alone */
    CU_ASSERT(next_is(drv, "{\"o\":2}", 5000));
    CU_ASSERT_EQUAL(ks_driver_output_count(drv, NULL), 0);
    ks_driver_close(drv);
}

/* The pipeline `yaml` (read as "s.yaml") is refused with `want` in the error. */
static void parse_err(const char *yaml, const char *want)
{
    ks_test_parse_err("s.yaml", yaml, want);
}

static void parse_ok_build_err(const char *yaml, const char *want)
{
    ks_driver_options opt = {.partitions = 1, .plugin_path = PLUGINS};
    ks_driver *drv = NULL;
    char err[1024] = "";
    CU_ASSERT_NOT_EQUAL(ks_driver_open_text("s.yaml", yaml, strlen(yaml), &opt, &drv, err,
                                            sizeof err),
                        0);
    if (!strstr(err, want))
        fprintf(stderr, "\nwant '%s'\ngot  '%s'\n", want, err);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, want));
    ks_driver_close(drv);
}

static void test_yaml(void)
{
    char yaml[2048];
    const char *tail = "sinks: [ { from: j, topic: out } ]\n";
    snprintf(yaml, sizeof yaml,
             HEAD "nodes:\n  - { name: j, type: join.streams, from: [orders, payments], "
                  "store: b,\n      config: { left: orders, right: payments } }\n%s",
             tail);
    parse_ok_build_err(yaml, "s.yaml:8:5: node 'j' (type 'join.streams') needs config key "
                             "'window.before'");
    snprintf(yaml, sizeof yaml,
             HEAD "nodes:\n  - { name: j, type: join.streams, from: [orders, payments], "
                  "store: b,\n      config: { left: orders, right: payments },\n"
                  "      window: { before: 10s, size: 5s } }\n%s",
             tail);
    parse_ok_build_err(yaml, "s.yaml:10:30: unknown window key 'size' for type "
                             "'join.streams'; expected one of: before, after, grace");
    snprintf(yaml, sizeof yaml,
             HEAD "nodes:\n  - { name: j, type: join.streams, from: [orders, payments], "
                  "store: b,\n      config: { left: orders, right: payments },\n"
                  "      window: { before: soon } }\n%s",
             tail);
    parse_ok_build_err(yaml, "s.yaml:10:25: window key 'before' of node 'j' must be");
    snprintf(yaml, sizeof yaml,
             HEAD "nodes:\n  - { name: j, type: join.streams, from: [orders, payments], "
                  "store: b,\n      config: { left: orders, right: payment },\n"
                  "      window: { before: 1s } }\n%s",
             tail);
    parse_err(yaml, "s.yaml:9:38: node 'j': right 'payment' is not one of its inputs (from: "
                    "orders, payments)");
    snprintf(yaml, sizeof yaml,
             HEAD "nodes:\n  - { name: j, type: join.streams, from: [orders, payments], "
                  "store: b,\n      config: { left: orders, right: orders },\n"
                  "      window: { before: 1s } }\n%s",
             tail);
    parse_err(yaml, "s.yaml:9:38: node 'j': left and right are both 'orders'");
    snprintf(yaml, sizeof yaml,
             HEAD "nodes:\n  - { name: j, type: join.streams, from: orders, store: b,\n"
                  "      config: { left: orders, right: orders }, window: { before: 1s } }\n%s",
             tail);
    parse_err(yaml, "s.yaml:8:42: node 'j': a stream-stream join reads two streams; `from:` "
                    "lists 1");
    /* a re-keyed side would share one repartition topic with the other */
    snprintf(yaml, sizeof yaml,
             HEAD "nodes:\n  - { name: rk, type: ops.select_key, from: orders, config: { path: /c } }\n"
                  "  - { name: j, type: join.streams, from: [rk, payments], store: b,\n"
                  "      config: { left: rk, right: payments }, window: { before: 1s } }\n%s",
             tail);
    parse_ok_build_err(yaml, "s.yaml:9:5: node 'j': a stream-stream join cannot read through "
                             "a repartition topic yet");
}

void ks_test_register_stream_joins(void)
{
    CU_pSuite s = CU_add_suite("stream_joins", NULL, NULL);
    CU_add_test(s, "inner, left and outer stream-stream joins equal the model", test_model);
    CU_add_test(s, "windows, grace, late records, no early unmatched result", test_rules);
    CU_add_test(s, "an unjoinable expired record is dropped, not poison", test_unjoinable);
    CU_add_test(s, "join.streams in YAML, and its errors", test_yaml);
}
