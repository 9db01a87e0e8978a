/*
 * test_fk_joins.c - the foreign-key table-table join (plugins/join_fk.c,
 * docs/tables-and-joins.md "Foreign-key joins") in the test driver, against
 * a reference model of both tables.
 *
 * The pipeline chains join.fk_subscribe -> registration topic ->
 * join.fk_register -> response topic -> join.fk_resolve; the test carries
 * the two topics' records from their sinks to their sources itself (the
 * driver loops back only repartition topics), keeping each topic's order:
 *  - eagerly (all of both topics after every change): each change gives
 *    exactly the outputs the model says, record for record (value,
 *    tombstone, timestamp), for an inner and a left join;
 *  - lazily (a few records of each topic per change, so responses go stale
 *    and foreign keys change under them): after the last change and a full
 *    drain, the last output per key equals the model's join.
 * Random changes of both tables, foreign keys changed, absent and null,
 * tombstones on both sides, 3 tasks, the driver closed and reopened on its
 * state half-way. Also the one-node form `type: join.fk` (config_fk.c):
 * the same model, its topic names, its YAML errors.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "kstreams/testdriver.h"
#include "unit/test_util.h"

#define PLUGINS KS_TEST_BUILDDIR "/plugins/.libs:" KS_TEST_BUILDDIR "/tests/plugins/.libs"
#define REG "fkj-fk-subscription-registration"
#define RESP "fkj-fk-subscription-response"

static const char *FK_YAML =
    "application: fkj\n"
    "kafka: { bootstrap: 127.0.0.1:9092 }\n"
    "sources:\n"
    "  reg_in: { topic: " REG ", key: bytes, value: bytes }\n"
    "  resp_in: { topic: " RESP ", key: bytes, value: bytes }\n"
    "tables:\n"
    "  orders: { topic: orders, key: string, value: json }\n"
    "  customers: { topic: customers, key: string, value: json }\n"
    "nodes:\n"
    "  - { name: fk_sub, type: join.fk_subscribe, from: orders, store: fk_last,\n"
    "      config: { foreign_key: /customer, foreign_keys: fk_last } }\n"
    "  - { name: fk_reg, type: join.fk_register, from: [reg_in, customers], store: fk_subs,\n"
    "      config: { right: customers, subscriptions: fk_subs } }\n"
    "  - { name: fk_inner, type: join.fk_resolve, from: resp_in, table: orders }\n"
    "  - { name: fk_left, type: join.fk_resolve, from: resp_in, table: orders,\n"
    "      config: { kind: left } }\n"
    "sinks:\n"
    "  - { name: reg_out, from: fk_sub, topic: " REG ", key: bytes, value: bytes }\n"
    "  - { name: resp_out, from: fk_reg, topic: " RESP ", key: bytes, value: bytes }\n"
    "  - { name: o_inner, from: fk_inner, topic: t1, key: string, value: json }\n"
    "  - { name: o_left, from: fk_left, topic: t2, key: string, value: json }\n";

/* The same join with no topics of its own: fk_subscribe changes keys, so the
 * engine reads fk_register's inputs (subscriptions and the right table's
 * changes) through a repartition topic, and each fk_resolve's too; the
 * driver carries those itself. */
static const char *FK_AUTO_YAML =
    "application: fkj\n"
    "kafka: { bootstrap: 127.0.0.1:9092 }\n"
    "sources: { events: { topic: events, key: string, value: json } }\n"
    "tables:\n"
    "  orders: { topic: orders, key: string, value: json }\n"
    "  customers: { topic: customers, key: string, value: json }\n"
    "nodes:\n"
    "  - { name: fk_sub, type: join.fk_subscribe, from: orders, store: fk_last,\n"
    "      config: { foreign_key: /customer, foreign_keys: fk_last } }\n"
    "  - { name: fk_reg, type: join.fk_register, from: [fk_sub, customers], store: fk_subs,\n"
    "      config: { right: customers, subscriptions: fk_subs } }\n"
    "  - { name: fk_inner, type: join.fk_resolve, from: fk_reg, table: orders }\n"
    "  - { name: fk_left, type: join.fk_resolve, from: fk_reg, table: orders,\n"
    "      config: { kind: left } }\n"
    "sinks:\n"
    "  - { name: o_inner, from: fk_inner, topic: t1, key: string, value: json }\n"
    "  - { name: o_left, from: fk_left, topic: t2, key: string, value: json }\n";

/* The one-node form, `type: join.fk`: unfolded into the same three nodes
 * (config_fk.c), its topics fkj-NODE-subscription-registration and
 * -subscription-response. */
static const char *FK_NODE_YAML =
    "application: fkj\n"
    "kafka: { bootstrap: 127.0.0.1:9092 }\n"
    "sources: { events: { topic: events, key: string, value: json } }\n"
    "tables:\n"
    "  orders: { topic: orders, key: string, value: json }\n"
    "  customers: { topic: customers, key: string, value: json }\n"
    "nodes:\n"
    "  - { name: fk_inner, type: join.fk, from: orders,\n"
    "      config: { right: customers, foreign_key: /customer } }\n"
    "  - { name: fk_left, type: join.fk, from: orders,\n"
    "      config: { right: customers, foreign_key: /customer, kind: left } }\n"
    "sinks:\n"
    "  - { name: o_inner, from: fk_inner, topic: t1, key: string, value: json }\n"
    "  - { name: o_left, from: fk_left, topic: t2, key: string, value: json }\n";

#define LKEYS 30
#define RKEYS 8
#define STEPS 3000
#define NO_FK -1   /* the member is absent */
#define NULL_FK -2 /* "customer": null */

typedef struct model {
    int l_present[LKEYS], l_version[LKEYS], l_fk[LKEYS];
    int64_t l_ts[LKEYS];
    int r_present[RKEYS], r_version[RKEYS];
    int64_t r_ts[RKEYS];
} model;

static void left_value(const model *m, int k, char *buf, size_t len)
{
    if (m->l_fk[k] >= 0)
        snprintf(buf, len, "{\"o\":%d,\"v\":%d,\"customer\":\"c%d\"}", k, m->l_version[k],
                 m->l_fk[k]);
    else if (m->l_fk[k] == NULL_FK)
        snprintf(buf, len, "{\"o\":%d,\"v\":%d,\"customer\":null}", k, m->l_version[k]);
    else
        snprintf(buf, len, "{\"o\":%d,\"v\":%d}", k, m->l_version[k]);
}

/* The model's join for left key k: *value (NULL: a tombstone) and *ts
 * given the change's timestamp. */
static void model_join(const model *m, int k, int left_join, int64_t change_ts, char *buf,
                       size_t len, const char **value, int64_t *ts)
{
    *ts = change_ts;
    *value = NULL;
    if (!m->l_present[k])
        return;
    if (m->l_ts[k] > *ts)
        *ts = m->l_ts[k];
    int f = m->l_fk[k];
    int has_r = f >= 0 && m->r_present[f];
    if (has_r && m->r_ts[f] > *ts)
        *ts = m->r_ts[f];
    if (!has_r && !left_join)
        return;
    char lv[128], rv[64] = "null";
    left_value(m, k, lv, sizeof lv);
    if (has_r)
        snprintf(rv, sizeof rv, "{\"c\":%d,\"v\":%d}", f, m->r_version[f]);
    snprintf(buf, len, "{\"left\":%s,\"right\":%s}", lv, rv);
    *value = buf;
}

/* ---- carrying the internal topics ---------------------------------------- */

typedef struct carried {
    int32_t partition;
    char *key, *value;
    size_t key_len, value_len;
    int64_t ts;
} carried;

typedef struct fifo {
    carried *q;
    size_t head, n, cap;
} fifo;

static char *dup_mem(const void *p, size_t n)
{
    char *d = malloc(n ? n : 1);
    if (n)
        memcpy(d, p, n);
    return d;
}

#define PARTS 3

/* Move the unread records of sink into f[their partition]: as on a broker,
 * each partition of a topic is read in order, independently of the others. */
static void collect(ks_driver *drv, const char *sink, fifo *fs)
{
    ks_driver_record r;
    while (ks_driver_read_output(drv, sink, &r) == 0) {
        fifo *f = &fs[r.partition >= 0 && r.partition < PARTS ? r.partition : 0];
        if (f->n == f->cap) {
            f->cap = f->cap ? 2 * f->cap : 64;
            f->q = realloc(f->q, f->cap * sizeof *f->q);
        }
        f->q[f->n++] = (carried){r.partition, dup_mem(r.key, r.key_len),
                                 r.value ? dup_mem(r.value, r.value_len) : NULL, r.key_len,
                                 r.value_len, r.timestamp};
    }
}

/* Pipe up to `count` records of f (in order) into source src. */
static int carry(ks_driver *drv, fifo *f, const char *src, size_t count)
{
    int rc = 0;
    for (; count > 0 && f->head < f->n && rc == 0; count--, f->head++) {
        carried *c = &f->q[f->head];
        ks_record rec = {.key = c->key, .key_len = c->key_len, .value = c->value,
                         .value_len = c->value_len, .timestamp = c->ts,
                         .partition = c->partition};
        rc = ks_driver_pipe_record(drv, src, &rec);
        free(c->key);
        free(c->value);
    }
    return rc;
}

static void fifo_free(fifo *fs)
{
    for (int p = 0; p < PARTS; p++) {
        fifo *f = &fs[p];
        for (size_t i = f->head; i < f->n; i++) {
            free(f->q[i].key);
            free(f->q[i].value);
        }
        free(f->q);
    }
}

static size_t pending(const fifo *fs)
{
    size_t n = 0;
    for (int p = 0; p < PARTS; p++)
        n += fs[p].n - fs[p].head;
    return n;
}

/* Pipe everything pending in fs into src, partition by partition. */
static int carry_all(ks_driver *drv, fifo *fs, const char *src)
{
    int rc = 0;
    for (int p = 0; p < PARTS && rc == 0; p++)
        rc = carry(drv, &fs[p], src, (size_t)-1);
    return rc;
}

/* Carry both topics until both are empty. */
static int drain(ks_driver *drv, fifo *reg, fifo *resp)
{
    int rc = 0;
    for (;;) {
        collect(drv, "reg_out", reg);
        collect(drv, "resp_out", resp);
        if (rc || (pending(reg) == 0 && pending(resp) == 0))
            return rc;
        rc = carry_all(drv, reg, "reg_in");
        collect(drv, "resp_out", resp);
        if (rc == 0)
            rc = carry_all(drv, resp, "resp_in");
    }
}

/* ---- the random changes ------------------------------------------------- */

static int pipe_change(ks_driver *drv, model *m, unsigned *seed, int64_t ts, int *which_out,
                       int *key_out)
{
    int which = rand_r(seed) % 3 == 0, del = rand_r(seed) % 6 == 0;
    char key[16], value[128];
    if (which) {
        int c = rand_r(seed) % RKEYS;
        m->r_version[c]++;
        m->r_present[c] = !del;
        m->r_ts[c] = ts;
        snprintf(key, sizeof key, "c%d", c);
        snprintf(value, sizeof value, "{\"c\":%d,\"v\":%d}", c, m->r_version[c]);
        *key_out = c;
    } else {
        int k = rand_r(seed) % LKEYS, r = rand_r(seed) % 10;
        m->l_version[k]++;
        m->l_present[k] = !del;
        m->l_ts[k] = ts;
        /* mostly a key; now and then none or null; often the same as before */
        if (r < 4 && m->l_fk[k] >= 0)
            ; /* keep the foreign key, change the rest */
        else
            m->l_fk[k] = r == 4 ? NO_FK : r == 5 ? NULL_FK : rand_r(seed) % RKEYS;
        snprintf(key, sizeof key, "o%d", k);
        left_value(m, k, value, sizeof value);
        *key_out = k;
    }
    *which_out = which;
    return ks_driver_pipe(drv, which ? "customers" : "orders", key, strlen(key),
                          del ? NULL : value, del ? 0 : strlen(value), ts);
}

/* The unread outputs of sink equal the model's join for exactly the left
 * keys in want[] (1 = expected), in any order. */
static int outputs_match(ks_driver *drv, const model *m, const char *sink, int left_join,
                         const int *want, int64_t ts)
{
    int seen[LKEYS] = {0}, ok = 1;
    ks_driver_record r;
    while (ks_driver_read_output(drv, sink, &r) == 0) {
        int k = -1;
        if (r.key_len < 2 || sscanf((const char *)r.key + 1, "%d", &k) != 1 || k < 0 ||
            k >= LKEYS || !want[k] || seen[k]++) {
            fprintf(stderr, "\n%s: unexpected output for %.*s\n", sink, (int)r.key_len,
                    (const char *)r.key);
            ok = 0;
            continue;
        }
        char buf[256];
        const char *v;
        int64_t wts;
        model_join(m, k, left_join, ts, buf, sizeof buf, &v, &wts);
        int same = (v == NULL) == (r.value == NULL) && r.timestamp == wts &&
                   (!v || (r.value_len == strlen(v) && memcmp(r.value, v, r.value_len) == 0));
        if (!same) {
            fprintf(stderr, "\n%s o%d: want %s @%lld, got %.*s @%lld\n", sink, k,
                    v ? v : "tombstone", (long long)wts, (int)r.value_len,
                    r.value ? (const char *)r.value : "tombstone", (long long)r.timestamp);
            ok = 0;
        }
    }
    for (int k = 0; k < LKEYS; k++)
        if (want[k] && !seen[k]) {
            fprintf(stderr, "\n%s: no output for o%d\n", sink, k);
            ok = 0;
        }
    return ok;
}

/* The right side holds exactly the model's subscriptions (one per left
 * value with a foreign key: none left behind by a changed key or a
 * tombstone), the left side the foreign key of each. */
static int subscriptions_match(ks_driver *drv, const model *m, const char *subs_store,
                               const char *last_store)
{
    uint64_t want = 0, subs = 0, last = 0;
    for (int k = 0; k < LKEYS; k++)
        want += m->l_present[k] && m->l_fk[k] >= 0;
    if (ks_driver_store_count(drv, subs_store, &subs) != 0 ||
        ks_driver_store_count(drv, last_store, &last) != 0 || subs != want || last != want) {
        fprintf(stderr, "\nsubscriptions: want %llu, fk_subs %llu, fk_last %llu\n",
                (unsigned long long)want, (unsigned long long)subs, (unsigned long long)last);
        return 0;
    }
    return 1;
}

static ks_driver *open_fk(const char *yaml, const char *dir)
{
    ks_driver_options opt = {.partitions = 3, .plugin_path = PLUGINS, .state_dir = dir};
    ks_driver *drv = NULL;
    char err[1024] = "";
    int rc = ks_driver_open_text("fk.yaml", yaml, strlen(yaml), &opt, &drv, err, sizeof err);
    if (rc)
        fprintf(stderr, "\n%s\n", err);
    return drv;
}

/* Close the driver and open it again on its state directory: the
 * subscriptions and foreign keys live in the stores. */
static void remove_dir(const char *dir)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "\ncould not remove %s\n", dir);
}

static ks_driver *reopen(ks_driver *drv, const char *yaml, const char *dir)
{
    ks_driver_close(drv);
    return open_fk(yaml, dir);
}

static void run_eager(const char *yaml, const char *subs_store, const char *last_store)
{
    char dir[] = "/tmp/ks-test-fkjoins-XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    ks_driver *drv = open_fk(yaml, dir);
    CU_ASSERT_PTR_NOT_NULL_FATAL(drv);
    model m;
    memset(&m, 0, sizeof m);
    for (int k = 0; k < LKEYS; k++)
        m.l_fk[k] = NO_FK;
    fifo reg[PARTS] = {{0}}, resp[PARTS] = {{0}};
    unsigned seed = 19;
    int bad = 0, fk_changes = 0, right_fanout = 0;
    for (int i = 0; i < STEPS && !bad; i++) {
        int64_t ts = 1000 + rand_r(&seed) % 5000;
        int which, key, old_fk[LKEYS];
        memcpy(old_fk, m.l_fk, sizeof old_fk);
        if (pipe_change(drv, &m, &seed, ts, &which, &key) != 0 || drain(drv, reg, resp)) {
            fprintf(stderr, "\n%s\n", ks_driver_last_error(drv));
            bad = 1;
            break;
        }
        int want[LKEYS] = {0};
        if (!which) {
            want[key] = 1;
            fk_changes += old_fk[key] != m.l_fk[key];
        } else {
            for (int k = 0; k < LKEYS; k++)
                want[k] = m.l_present[k] && m.l_fk[k] == key;
            for (int k = 0; k < LKEYS; k++)
                right_fanout += want[k];
        }
        bad = !outputs_match(drv, &m, "o_inner", 0, want, ts) |
              !outputs_match(drv, &m, "o_left", 1, want, ts);
        if (i == STEPS / 2 && !(drv = reopen(drv, yaml, dir)))
            bad = 1;
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(drv);
    CU_ASSERT(fk_changes > 500);
    CU_ASSERT(right_fanout > 1000);
    CU_ASSERT(subscriptions_match(drv, &m, subs_store, last_store));
    fifo_free(reg);
    fifo_free(resp);
    ks_driver_close(drv);
    remove_dir(dir);
}

/* Last output per left key of sink into last[] (value copies, "" for a
 * tombstone, NULL none yet). */
static void track(ks_driver *drv, const char *sink, char **last)
{
    ks_driver_record r;
    int k;
    while (ks_driver_read_output(drv, sink, &r) == 0)
        if (r.key_len >= 2 && sscanf((const char *)r.key + 1, "%d", &k) == 1 && k >= 0 &&
            k < LKEYS) {
            free(last[k]);
            last[k] = r.value ? dup_mem(r.value, r.value_len + 1) : dup_mem("", 1);
            if (r.value)
                last[k][r.value_len] = '\0';
        }
}

static void test_eager(void)
{
    run_eager(FK_YAML, "fk_subs", "fk_last");
}

static void test_auto_topics(void)
{
    run_eager(FK_AUTO_YAML, "fk_subs", "fk_last");
}

static void test_one_node(void)
{
    run_eager(FK_NODE_YAML, "fk_left-subscriptions", "fk_left-foreign-keys");
}

/* The one-node form's topics and the errors of its YAML. */
static void test_one_node_yaml(void)
{
    ks_pipeline *p = NULL;
    char err[1024] = "";
    CU_ASSERT_EQUAL_FATAL(ks_pipeline_parse("fk.yaml", FK_NODE_YAML, strlen(FK_NODE_YAML), &p,
                                            err, sizeof err),
                          0);
    const ks_cfg_node *sub = ks_pipeline_node(p, "fk_left-subscribe");
    const ks_cfg_node *reg = ks_pipeline_node(p, "fk_left-register");
    const ks_cfg_node *res = ks_pipeline_node(p, "fk_left");
    CU_ASSERT_PTR_NOT_NULL_FATAL(sub);
    CU_ASSERT_PTR_NOT_NULL_FATAL(reg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(res);
    CU_ASSERT_STRING_EQUAL(reg->repartition_topic, "fkj-fk_left-subscription-registration");
    CU_ASSERT_STRING_EQUAL(res->repartition_topic, "fkj-fk_left-subscription-response");
    CU_ASSERT_STRING_EQUAL(res->processor, "fk_resolve");
    CU_ASSERT_STRING_EQUAL(res->table, "orders");
    CU_ASSERT_STRING_EQUAL(sub->stores[sub->store_count - 1], "fk_left-foreign-keys");
    ks_pipeline_free(p);
    static const struct {
        const char *node, *want;
    } bad[] = {
        {"  - { name: j, type: join.fk, from: customers,\n"
         "      config: { right: orders } }\n",
         "fk.yaml:9:5: node 'j': a foreign-key join needs config key 'foreign_key'"},
        {"  - { name: j, type: join.fk, from: customers,\n"
         "      config: { foreign_key: /c } }\n",
         "fk.yaml:9:5: node 'j': a foreign-key join needs config key 'right'"},
        {"  - { name: j, type: join.fk, from: events,\n"
         "      config: { right: customers, foreign_key: /c } }\n",
         "fk.yaml:9:37: node 'j': a foreign-key join reads one left table"},
        {"  - { name: j, type: join.fk, from: orders,\n"
         "      config: { right: events, foreign_key: /c } }\n",
         "fk.yaml:10:24: node 'j': right 'events' is not a table"},
        {"  - { name: j, type: join.fk, from: orders,\n"
         "      config: { right: customers, foreign_key: c } }\n",
         "fk.yaml:10:48: node 'j': foreign_key 'c' is not a JSON pointer"},
        {"  - { name: j, type: join.fk, from: orders, table: orders,\n"
         "      config: { right: customers, foreign_key: /c } }\n",
         "fk.yaml:9:5: node 'j': a foreign-key join keeps stores of its own"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char yaml[1024];
        snprintf(yaml, sizeof yaml,
                 "application: fkj\n"
                 "kafka: { bootstrap: 127.0.0.1:9092 }\n"
                 "sources: { events: { topic: events, key: string, value: json } }\n"
                 "tables:\n"
                 "  orders: { topic: orders, key: string, value: json }\n"
                 "  customers: { topic: customers, key: string, value: json }\n"
                 "sinks: [ { from: j, topic: t1, key: string, value: json } ]\n"
                 "nodes:\n%s",
                 bad[i].node);
        p = NULL;
        err[0] = '\0';
        CU_ASSERT_EQUAL(ks_pipeline_parse("fk.yaml", yaml, strlen(yaml), &p, err, sizeof err),
                        -1);
        if (!strstr(err, bad[i].want))
            fprintf(stderr, "\nwant '%s'\ngot  '%s'\n", bad[i].want, err);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, bad[i].want));
        ks_pipeline_free(p);
    }
}

/* Foreign keys that are numbers (their text), strings, or nothing usable
 * (an object, a boolean, a pointer into an array or a scalar): never an
 * error, a left result with no right side. */
static void test_key_values(void)
{
    static const char *yaml =
        "application: fkv\n"
        "kafka: { bootstrap: 127.0.0.1:9092 }\n"
        "sources: { events: { topic: events, key: string, value: json } }\n"
        "tables:\n"
        "  orders: { topic: orders, key: string, value: json }\n"
        "  customers: { topic: customers, key: string, value: json }\n"
        "nodes:\n"
        "  - { name: j, type: join.fk, from: orders,\n"
        "      config: { right: customers, foreign_key: /cust/id, kind: left } }\n"
        "sinks: [ { name: out, from: j, topic: t1, key: string, value: json } ]\n";
    static const struct {
        const char *value;
        int joined;
    } cases[] = {
        {"{\"cust\":{\"id\":7}}", 1},       {"{\"cust\":{\"id\":\"7\"}}", 1},
        {"{\"cust\":{\"id\":{\"x\":7}}}", 0}, {"{\"cust\":{\"id\":true}}", 0},
        {"{\"cust\":[7]}", 0},               {"\"7\"", 0},
        {"{\"cust\":{\"id\":null}}", 0},     {"{\"cust\":{\"id\":\"8\"}}", 0},
    };
    ks_driver *drv = open_fk(yaml, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(drv);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "customers", "7", 1, "{\"n\":1}", 7, 5), 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char key[16], want[128];
        snprintf(key, sizeof key, "o%zu", i);
        CU_ASSERT_EQUAL(ks_driver_pipe(drv, "orders", key, strlen(key), cases[i].value,
                                       strlen(cases[i].value), 10),
                        0);
        snprintf(want, sizeof want, "{\"left\":%s,\"right\":%s}", cases[i].value,
                 cases[i].joined ? "{\"n\":1}" : "null");
        ks_driver_record r;
        int got = ks_driver_read_output(drv, "out", &r) == 0;
        CU_ASSERT(got && r.value_len == strlen(want) && memcmp(r.value, want, r.value_len) == 0);
        if (got && (r.value_len != strlen(want) || memcmp(r.value, want, r.value_len) != 0))
            fprintf(stderr, "\nwant %s\ngot  %.*s\n", want, (int)r.value_len,
                    (const char *)r.value);
        CU_ASSERT_EQUAL(ks_driver_output_count(drv, NULL), 0);
    }
    ks_driver_close(drv);
}

/* functions: { joiner: ... } stays with the join.fk node (its resolver). */
static void test_function_joiner(void)
{
    static const char *yaml =
        "application: fkf\n"
        "kafka: { bootstrap: 127.0.0.1:9092 }\n"
        "sources: { events: { topic: events, key: string, value: json } }\n"
        "tables:\n"
        "  orders: { topic: orders, key: string, value: json }\n"
        "  customers: { topic: customers, key: string, value: json }\n"
        "nodes:\n"
        "  - { name: j, type: join.fk, from: orders, functions: { joiner: joiner.concat },\n"
        "      config: { right: customers, foreign_key: /c, kind: left } }\n"
        "sinks: [ { name: out, from: j, topic: t1, key: string, value: string } ]\n";
    ks_driver *drv = open_fk(yaml, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(drv);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "customers", "x", 1, "1", 1, 5), 0);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "orders", "o", 1, "{\"c\":\"x\"}", 9, 7), 0);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "orders", "p", 1, "{\"c\":\"y\"}", 9, 8), 0);
    ks_driver_record r;
    CU_ASSERT_EQUAL_FATAL(ks_driver_read_output(drv, "out", &r), 0);
    CU_ASSERT(r.value_len == 11 && memcmp(r.value, "{\"c\":\"x\"}|1", 11) == 0);
    CU_ASSERT_EQUAL_FATAL(ks_driver_read_output(drv, "out", &r), 0);
    CU_ASSERT(r.value_len == 11 && memcmp(r.value, "{\"c\":\"y\"}|-", 11) == 0);
    CU_ASSERT_EQUAL(ks_driver_output_count(drv, NULL), 0);
    ks_driver_close(drv);
}

/* functions: { foreign_key: ... } (KS_FN_KEY_MAPPER) goes to the
 * subscribe node: the key it writes is the foreign key, none is no match
 * (a left result), KS_SKIP poison; `foreign_key:` and a function both are
 * refused. */
static void test_function_foreign_key(void)
{
    static const char *yaml =
        "application: fkk\n"
        "kafka: { bootstrap: 127.0.0.1:9092 }\n"
        "poison: skip\n"
        "tables:\n"
        "  orders: { topic: orders, key: string, value: string }\n"
        "  customers: { topic: customers, key: string, value: string }\n"
        "nodes:\n"
        "  - { name: j, type: join.fk, from: orders, config: { right: customers, kind: left },\n"
        "      functions: { foreign_key: joiner.before_colon, joiner: joiner.concat } }\n"
        "sinks: [ { name: out, from: j, topic: t1, key: string, value: string } ]\n";
    ks_driver *drv = open_fk(yaml, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(drv);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "customers", "x", 1, "1", 1, 5), 0);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "orders", "o", 1, "x:a", 3, 7), 0);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "orders", "p", 1, "nokey", 5, 8), 0);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "orders", "q", 1, "!bad", 4, 9), KS_SKIP);
    ks_driver_record r;
    CU_ASSERT_EQUAL_FATAL(ks_driver_read_output(drv, "out", &r), 0);
    CU_ASSERT(r.value_len == 5 && memcmp(r.value, "x:a|1", 5) == 0);
    CU_ASSERT_EQUAL_FATAL(ks_driver_read_output(drv, "out", &r), 0);
    CU_ASSERT(r.value_len == 7 && memcmp(r.value, "nokey|-", 7) == 0);
    CU_ASSERT_EQUAL(ks_driver_output_count(drv, NULL), 0); /* q: poison, skipped */
    ks_driver_close(drv);

    static const char *both =
        "application: fkk\n"
        "kafka: { bootstrap: 127.0.0.1:9092 }\n"
        "tables:\n"
        "  orders: { topic: orders, key: string, value: string }\n"
        "  customers: { topic: customers, key: string, value: string }\n"
        "nodes:\n"
        "  - { name: j, type: join.fk, from: orders, config: { right: customers,"
        " foreign_key: /c },\n"
        "      functions: { foreign_key: joiner.before_colon } }\n"
        "sinks: [ { name: out, from: j, topic: t1, key: string, value: string } ]\n";
    ks_pipeline *p = NULL;
    char err[1024] = "";
    CU_ASSERT_EQUAL(ks_pipeline_parse("k.yaml", both, strlen(both), &p, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "k.yaml:8:33: node 'j': the foreign key comes from "
                                       "`foreign_key:` or from `functions: { foreign_key: }`, "
                                       "not both"));
    if (!strstr(err, "k.yaml:8:33"))
        fprintf(stderr, "\n%s\n", err);
    ks_pipeline_free(p);
}

static void test_lazy(void)
{
    char dir[] = "/tmp/ks-test-fkjoins-XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    ks_driver *drv = open_fk(FK_YAML, dir);
    CU_ASSERT_PTR_NOT_NULL_FATAL(drv);
    model m;
    memset(&m, 0, sizeof m);
    for (int k = 0; k < LKEYS; k++)
        m.l_fk[k] = NO_FK;
    fifo reg[PARTS] = {{0}}, resp[PARTS] = {{0}};
    char *last[2][LKEYS] = {{0}};
    unsigned seed = 213;
    int bad = 0;
    for (int i = 0; i < STEPS && !bad; i++) {
        int which, key;
        bad = pipe_change(drv, &m, &seed, 1000 + i, &which, &key) != 0;
        /* one partition of each topic moves on, a few records: the others lag */
        collect(drv, "reg_out", reg);
        collect(drv, "resp_out", resp);
        if (!bad)
            bad = carry(drv, &reg[rand_r(&seed) % PARTS], "reg_in",
                        (size_t)(rand_r(&seed) % 4)) != 0;
        collect(drv, "resp_out", resp);
        if (!bad)
            bad = carry(drv, &resp[rand_r(&seed) % PARTS], "resp_in",
                        (size_t)(rand_r(&seed) % 4)) != 0;
        track(drv, "o_inner", last[0]);
        track(drv, "o_left", last[1]);
        if (i == STEPS / 2 && !(drv = reopen(drv, FK_YAML, dir)))
            bad = 1; /* the topics' pending records stay in the fifos */
    }
    CU_ASSERT_PTR_NOT_NULL_FATAL(drv);
    CU_ASSERT(pending(reg) > 10 || pending(resp) > 10); /* it did lag */
    bad |= drain(drv, reg, resp) != 0;
    track(drv, "o_inner", last[0]);
    track(drv, "o_left", last[1]);
    CU_ASSERT_EQUAL_FATAL(bad, 0);
    int wrong = 0;
    for (int j = 0; j < 2; j++)
        for (int k = 0; k < LKEYS; k++) {
            char buf[256];
            const char *v;
            int64_t ts;
            model_join(&m, k, j, 0, buf, sizeof buf, &v, &ts);
            const char *got = last[j][k] && last[j][k][0] ? last[j][k] : NULL;
            if ((v == NULL) != (got == NULL) || (v && strcmp(v, got) != 0)) {
                fprintf(stderr, "\n%s o%d: want %s, got %s\n", j ? "left" : "inner", k,
                        v ? v : "none", got ? got : "none");
                wrong++;
            }
            free(last[j][k]);
        }
    CU_ASSERT_EQUAL(wrong, 0);
    CU_ASSERT(subscriptions_match(drv, &m, "fk_subs", "fk_last"));
    fifo_free(reg);
    fifo_free(resp);
    ks_driver_close(drv);
    remove_dir(dir);
}

void ks_test_register_fk_joins(void)
{
    CU_pSuite s = CU_add_suite("fk_joins", NULL, NULL);
    CU_add_test(s, "eager: every change's outputs equal the model's", test_eager);
    CU_add_test(s, "through the repartition topics the engine inserts", test_auto_topics);
    CU_add_test(s, "one node, type: join.fk, its two topics", test_one_node);
    CU_add_test(s, "join.fk: topic names and YAML errors at FILE:LINE:COL", test_one_node_yaml);
    CU_add_test(s, "foreign keys: numbers, strings, nothing usable is no error", test_key_values);
    CU_add_test(s, "a joiner function of a plugin", test_function_joiner);
    CU_add_test(s, "a foreign key function of a plugin (KS_FN_KEY_MAPPER)",
                test_function_foreign_key);
    CU_add_test(s, "lagging topics: stale responses dropped, final join equals the model",
                test_lazy);
}
