/*
 * test_joins.c - tables (`tables:`, engine/runtime/table.c) and the shipped
 * stream-table join (plugins/join.c), docs/tables-and-joins.md.
 *
 * The YAML: tables parsed into sources with a store of their own, and the
 * errors at FILE:LINE:COL. The join in the test driver against a reference
 * model: random interleavings of stream records, table updates and
 * tombstones over 3 tasks; every output of an inner, a left and a merge
 * join equals the model's, record for record (value and timestamp), and the
 * table stores equal the model's table at the end. A joiner from a plugin
 * (KS_FN_JOINER). A re-keyed stream reaches the join through a repartition
 * topic.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "kstreams/testdriver.h"
#include "runtime/task.h"
#include "runtime/topology.h"
#include "unit/test_util.h"

#define PLUGINS KS_TEST_BUILDDIR "/plugins/.libs:" KS_TEST_BUILDDIR "/tests/plugins/.libs"

#define HEAD                                                                           \
    "application: joins\n"                                                             \
    "kafka: { bootstrap: 127.0.0.1:9092 }\n"                                           \
    "plugin_path: [" KS_TEST_BUILDDIR "/plugins/.libs, " KS_TEST_BUILDDIR             \
    "/tests/plugins/.libs]\n"                                                          \
    "sources:\n"                                                                       \
    "  orders: { topic: orders, key: string, value: json }\n"                          \
    "tables:\n"                                                                        \
    "  customers: { topic: customers, key: string, value: json }\n"

static const char *JOIN_YAML =
    HEAD "nodes:\n"
         "  - { name: inner, type: join, from: orders, table: customers }\n"
         "  - { name: left, type: join, from: orders, table: customers, config: { kind: left } }\n"
         "  - { name: merged, type: join, from: orders, table: customers,\n"
         "      config: { kind: left, joiner: merge } }\n"
         "sinks:\n"
         "  - { name: inner_out, from: inner, topic: o1, key: string, value: json }\n"
         "  - { name: left_out, from: left, topic: o2, key: string, value: json }\n"
         "  - { name: merged_out, from: merged, topic: o3, key: string, value: json }\n";

/* ---- the YAML ------------------------------------------------------------- */

/* The pipeline `yaml` (read as "j.yaml") is refused with `want` in the error. */
static void parse_err(const char *yaml, const char *want)
{
    ks_test_parse_err("j.yaml", yaml, want);
}

static void test_yaml(void)
{
    ks_pipeline *p = NULL;
    char err[1024] = "";
    int rc = ks_pipeline_parse("j.yaml", JOIN_YAML, strlen(JOIN_YAML), &p, err, sizeof err);
    if (rc)
        fprintf(stderr, "\n%s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    const ks_cfg_source *t = ks_pipeline_source(p, "customers");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT(t->table);
    CU_ASSERT_STRING_EQUAL(t->topic, "customers");
    const ks_cfg_store *st = &p->stores[t->table_store];
    CU_ASSERT_STRING_EQUAL(st->name, "customers");
    CU_ASSERT(st->table);
    CU_ASSERT_EQUAL(st->changelog, 0); /* the topic is the changelog */
    const ks_cfg_node *n = ks_pipeline_node(p, "left");
    CU_ASSERT_EQUAL_FATAL(n->store_count, 1);
    CU_ASSERT_STRING_EQUAL(n->stores[0], "customers");
    CU_ASSERT_FALSE(ks_pipeline_source(p, "orders")->table);
    ks_pipeline_free(p);

    const char *tail = "sinks: [ { from: j, topic: out } ]\n";
    char yaml[2048];
    snprintf(yaml, sizeof yaml, HEAD "nodes:\n  - { name: j, type: join, from: orders }\n%s",
             tail);
    parse_err(yaml, "j.yaml:9:5: node 'j': type 'join' needs `table:`");
    snprintf(yaml, sizeof yaml,
             HEAD "nodes:\n  - { name: j, type: join, from: orders, table: orders }\n%s", tail);
    parse_err(yaml, "j.yaml:9:49: node 'j': unknown table 'orders' (not under 'tables' or "
                    "'global_tables', nor a node)");
    snprintf(yaml, sizeof yaml,
             HEAD "nodes:\n  - { name: j, type: count, from: orders, store: customers }\n%s",
             tail);
    parse_err(yaml, "j.yaml:9:50: node 'j': store 'customers' is the store of table "
                    "'customers'; read a table with `table: customers`");
    snprintf(yaml, sizeof yaml, HEAD "  orders: { topic: x }\n%s", tail);
    parse_err(yaml, "j.yaml:8:3: duplicate name 'orders'; already used by the source at line 5");
    snprintf(yaml, sizeof yaml, HEAD "  c2: { topic: orders }\n%s", tail);
    parse_err(yaml, "j.yaml:8:16: table 'c2': topic 'orders' is already read by source "
                    "'orders'; a topic is read either as a stream or as one table");
    snprintf(yaml, sizeof yaml, HEAD "  c2: { topic: x, store: y }\n%s", tail);
    parse_err(yaml, "j.yaml:8:19: unknown key 'store' in table 'c2'; expected one of: topic, "
                    "key, value, create, partitions");
}

/* ---- the reference model ---------------------------------------------------- */

#define KEYS 12
#define STEPS 3000

typedef struct model {
    int present[KEYS];
    int version[KEYS];
    int64_t ts[KEYS];
} model;

static void table_value(char *buf, size_t len, int k, int version)
{
    snprintf(buf, len, "{\"c\":%d,\"v\":%d}", k, version);
}

/* Read the next output of `sink` and compare it with (key, value, ts). */
static int expect(ks_driver *drv, const char *sink, const char *key, const char *value,
                  int64_t ts)
{
    ks_driver_record r;
    if (ks_driver_read_output(drv, sink, &r) != 0) {
        fprintf(stderr, "\n%s: no output, expected %s %s\n", sink, key, value);
        return 0;
    }
    int ok = r.key_len == strlen(key) && memcmp(r.key, key, r.key_len) == 0 && r.value &&
             r.value_len == strlen(value) && memcmp(r.value, value, r.value_len) == 0 &&
             r.timestamp == ts;
    if (!ok)
        fprintf(stderr, "\n%s: got %.*s %.*s @%lld, expected %s %s @%lld\n", sink,
                (int)r.key_len, (const char *)r.key, (int)r.value_len,
                r.value ? (const char *)r.value : "", (long long)r.timestamp, key, value,
                (long long)ts);
    return ok;
}

/* One stream record of order n for key k: what each join must emit. */
static int stream_step(ks_driver *drv, const model *m, int n, int k, int64_t ts)
{
    char key[16], order[64], right[64], want[256];
    snprintf(key, sizeof key, "c%d", k);
    snprintf(order, sizeof order, "{\"o\":%d,\"v\":\"s\"}", n);
    if (ks_driver_pipe(drv, "orders", key, strlen(key), order, strlen(order), ts) != 0)
        return 0;
    int ok = 1;
    int64_t out_ts = m->present[k] && m->ts[k] > ts ? m->ts[k] : ts;
    if (m->present[k]) {
        table_value(right, sizeof right, k, m->version[k]);
        snprintf(want, sizeof want, "{\"left\":%s,\"right\":%s}", order, right);
        ok &= expect(drv, "inner_out", key, want, out_ts);
        ok &= expect(drv, "left_out", key, want, out_ts);
        /* merge: the stream's members win ("v"), the table adds "c" */
        snprintf(want, sizeof want, "{\"o\":%d,\"v\":\"s\",\"c\":%d}", n, k);
        ok &= expect(drv, "merged_out", key, want, out_ts);
    } else {
        snprintf(want, sizeof want, "{\"left\":%s,\"right\":null}", order);
        ok &= expect(drv, "left_out", key, want, out_ts);
        ok &= expect(drv, "merged_out", key, order, out_ts);
    }
    return ok && ks_driver_output_count(drv, NULL) == 0;
}

static int table_step(ks_driver *drv, model *m, int k, int tombstone, int64_t ts)
{
    char key[16], value[64];
    snprintf(key, sizeof key, "c%d", k);
    int version = m->version[k] + 1;
    table_value(value, sizeof value, k, version);
    if (ks_driver_pipe(drv, "customers", key, strlen(key), tombstone ? NULL : value,
                       tombstone ? 0 : strlen(value), ts) != 0)
        return 0;
    m->present[k] = !tombstone;
    m->version[k] = version;
    m->ts[k] = ts;
    return ks_driver_output_count(drv, NULL) == 0; /* a table emits nothing here */
}

/* The stores hold exactly the model's table: timestamp, then the value. */
static int stores_match(ks_driver *drv, const model *m)
{
    for (int k = 0; k < KEYS; k++) {
        char key[16], value[64];
        snprintf(key, sizeof key, "c%d", k);
        int32_t part = ks_driver_partition_for(key, strlen(key), ks_driver_partitions(drv));
        ks_bytes v;
        int rc = ks_driver_store_get(drv, "customers", part, key, strlen(key), &v);
        if (!m->present[k]) {
            if (rc != KS_ERR_NOT_FOUND)
                return 0;
            continue;
        }
        table_value(value, sizeof value, k, m->version[k]);
        if (rc != 0 || v.len != 8 + strlen(value) || ks_int64_decode(v.data) != m->ts[k] ||
            memcmp((const char *)v.data + 8, value, strlen(value)) != 0)
            return 0;
    }
    return 1;
}

static void test_model(void)
{
    ks_driver_options opt = {.partitions = 3, .plugin_path = PLUGINS};
    ks_driver *drv = NULL;
    char err[1024] = "";
    int rc = ks_driver_open_text("j.yaml", JOIN_YAML, strlen(JOIN_YAML), &opt, &drv, err,
                                 sizeof err);
    if (rc)
        fprintf(stderr, "\n%s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    model m = {{0}, {0}, {0}};
    unsigned seed = 1234;
    int bad = 0, streams = 0, updates = 0, tombstones = 0;
    for (int i = 0; i < STEPS && !bad; i++) {
        int k = rand_r(&seed) % KEYS;
        int64_t ts = 1000 + rand_r(&seed) % 5000; /* out of order on purpose */
        int what = rand_r(&seed) % 10;
        if (what < 6) {
            bad = !stream_step(drv, &m, i, k, ts);
            streams++;
        } else {
            bad = !table_step(drv, &m, k, what == 9, ts);
            updates++;
            tombstones += what == 9;
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(streams > 1000 && updates > 800 && tombstones > 100);
    CU_ASSERT(stores_match(drv, &m));
    ks_driver_close(drv);
}

/* A joiner from a plugin (tests/plugins/joiner.c: "left|right", "-" for
 * none) in a left join, and an inner join dropping the unmatched. */
static void test_function_joiner(void)
{
    const char *yaml = HEAD "nodes:\n"
                            "  - { name: j, type: join, from: orders, table: customers,\n"
                            "      config: { kind: left }, functions: { joiner: joiner.concat } }\n"
                            "sinks:\n"
                            "  - { name: out, from: j, topic: out, key: string, value: string }\n";
    ks_driver_options opt = {.partitions = 2, .plugin_path = PLUGINS};
    ks_driver *drv = NULL;
    char err[1024] = "";
    int rc = ks_driver_open_text("j.yaml", yaml, strlen(yaml), &opt, &drv, err, sizeof err);
    if (rc)
        fprintf(stderr, "\n%s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "orders", "a", 1, "1", 1, 5), 0);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "customers", "a", 1, "\"x\"", 3, 9), 0);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "orders", "a", 1, "2", 1, 7), 0);
    ks_driver_record r;
    CU_ASSERT_EQUAL_FATAL(ks_driver_read_output(drv, "out", &r), 0);
    CU_ASSERT(r.value_len == 3 && memcmp(r.value, "1|-", 3) == 0 && r.timestamp == 5);
    CU_ASSERT_EQUAL_FATAL(ks_driver_read_output(drv, "out", &r), 0);
    CU_ASSERT(r.value_len == 5 && memcmp(r.value, "2|\"x\"", 5) == 0 && r.timestamp == 9);
    CU_ASSERT_EQUAL(ks_driver_output_count(drv, NULL), 0);
    ks_driver_close(drv);
}

/* The stream re-keyed by select_key reaches the join through a repartition
 * topic, and joins under its new key. */
static void test_rekeyed(void)
{
    const char *yaml =
        HEAD "nodes:\n"
             "  - { name: by_cust, type: ops.select_key, from: orders, config: { path: /cust } }\n"
             "  - { name: enrich, type: join, from: by_cust, table: customers }\n"
             "sinks:\n"
             "  - { name: out, from: enrich, topic: out, key: string, value: json }\n";
    ks_pipeline *p = NULL;
    char err[1024] = "";
    CU_ASSERT_EQUAL_FATAL(ks_pipeline_parse("j.yaml", yaml, strlen(yaml), &p, err, sizeof err), 0);
    char dir[] = "/tmp/ks-test-joins-XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    ks_topology *t = NULL;
    int rc = ks_topology_build(p, ks_host_api_table(), dir, &t, err, sizeof err);
    if (rc)
        fprintf(stderr, "\n%s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    const ks_topo_node *src = ks_topology_node(t, "enrich-repartition-source");
    CU_ASSERT_PTR_NOT_NULL(src);
    CU_ASSERT(src && src->source->internal);
    /* the table is in the join's sub-topology, not in one of its own */
    CU_ASSERT_EQUAL(ks_topology_node(t, "customers")->sub, ks_topology_node(t, "enrich")->sub);
    CU_ASSERT_EQUAL(t->sub_count, 2);
    ks_topology_free(t);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CU_ASSERT_EQUAL(system(cmd), 0);

    ks_driver_options opt = {.partitions = 4, .plugin_path = PLUGINS};
    ks_driver *drv = NULL;
    CU_ASSERT_EQUAL_FATAL(ks_driver_open_text("j.yaml", yaml, strlen(yaml), &opt, &drv, err,
                                              sizeof err), 0);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "customers", "c7", 2, "{\"n\":\"Ann\"}", 11, 1), 0);
    const char *order = "{\"id\":1,\"cust\":\"c7\"}";
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "orders", "order-1", 7, order, strlen(order), 2), 0);
    ks_driver_record r;
    CU_ASSERT_EQUAL_FATAL(ks_driver_read_output(drv, "out", &r), 0);
    const char *want = "{\"left\":{\"id\":1,\"cust\":\"c7\"},\"right\":{\"n\":\"Ann\"}}";
    CU_ASSERT(r.key_len == 2 && memcmp(r.key, "c7", 2) == 0);
    CU_ASSERT(r.value_len == strlen(want) && memcmp(r.value, want, r.value_len) == 0);
    ks_driver_close(drv);
}

/* ---- table-table joins ----------------------------------------------------- */

static const char *TT_YAML =
    HEAD "  accounts: { topic: accounts, key: string, value: json }\n"
         "nodes:\n"
         "  - { name: tt_inner, type: join.tables, from: [customers, accounts],\n"
         "      config: { left: customers, right: accounts } }\n"
         "  - { name: tt_left, type: join.tables, from: [customers, accounts],\n"
         "      config: { left: customers, right: accounts, kind: left } }\n"
         "  - { name: tt_outer, type: join.tables, from: [accounts, customers],\n"
         "      config: { left: customers, right: accounts, kind: outer } }\n"
         "sinks:\n"
         "  - { name: o_inner, from: tt_inner, topic: t1, key: string, value: json }\n"
         "  - { name: o_left, from: tt_left, topic: t2, key: string, value: json }\n"
         "  - { name: o_outer, from: tt_outer, topic: t3, key: string, value: json }\n";

typedef struct side {
    int present[KEYS], version[KEYS];
    int64_t ts[KEYS];
} side;

/* Next output of sink: (key, value or tombstone when NULL, ts)? */
static int expect_value(ks_driver *drv, const char *sink, const char *key, const char *value,
                        int64_t ts)
{
    if (value)
        return expect(drv, sink, key, value, ts);
    ks_driver_record r;
    if (ks_driver_read_output(drv, sink, &r) != 0 || r.value || r.timestamp != ts ||
        r.key_len != strlen(key) || memcmp(r.key, key, r.key_len) != 0) {
        fprintf(stderr, "\n%s: expected a tombstone for %s @%lld\n", sink, key, (long long)ts);
        return 0;
    }
    return 1;
}

/* After a change of key k: what each kind of join must emit. */
static int tt_expect(ks_driver *drv, const side *l, const side *r, int k, int64_t ts)
{
    char key[16], lv[64], rv[64], pair[200];
    snprintf(key, sizeof key, "c%d", k);
    snprintf(lv, sizeof lv, "{\"c\":%d,\"v\":%d}", k, l->version[k]);
    snprintf(rv, sizeof rv, "{\"a\":%d,\"v\":%d}", k, r->version[k]);
    snprintf(pair, sizeof pair, "{\"left\":%s,\"right\":%s}", l->present[k] ? lv : "null",
             r->present[k] ? rv : "null");
    int64_t out_ts = ts;
    if (l->present[k] && l->ts[k] > out_ts)
        out_ts = l->ts[k];
    if (r->present[k] && r->ts[k] > out_ts)
        out_ts = r->ts[k];
    int ok = expect_value(drv, "o_inner", key, l->present[k] && r->present[k] ? pair : NULL,
                          out_ts);
    ok &= expect_value(drv, "o_left", key, l->present[k] ? pair : NULL, out_ts);
    ok &= expect_value(drv, "o_outer", key, l->present[k] || r->present[k] ? pair : NULL,
                       out_ts);
    return ok && ks_driver_output_count(drv, NULL) == 0;
}

static void test_table_table(void)
{
    ks_driver_options opt = {.partitions = 3, .plugin_path = PLUGINS};
    ks_driver *drv = NULL;
    char err[1024] = "";
    int rc = ks_driver_open_text("j.yaml", TT_YAML, strlen(TT_YAML), &opt, &drv, err,
                                 sizeof err);
    if (rc)
        fprintf(stderr, "\n%s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    side sides[2];
    memset(sides, 0, sizeof sides);
    unsigned seed = 99;
    int bad = 0, tombstones = 0;
    for (int i = 0; i < STEPS && !bad; i++) {
        int which = rand_r(&seed) % 2, k = rand_r(&seed) % KEYS;
        int del = rand_r(&seed) % 4 == 0;
        int64_t ts = 1000 + rand_r(&seed) % 5000;
        side *sd = &sides[which];
        char key[16], value[64];
        snprintf(key, sizeof key, "c%d", k);
        snprintf(value, sizeof value, which ? "{\"a\":%d,\"v\":%d}" : "{\"c\":%d,\"v\":%d}", k,
                 sd->version[k] + 1);
        if (ks_driver_pipe(drv, which ? "accounts" : "customers", key, strlen(key),
                           del ? NULL : value, del ? 0 : strlen(value), ts) != 0) {
            bad = 1;
            break;
        }
        sd->version[k]++;
        sd->present[k] = !del;
        sd->ts[k] = ts;
        tombstones += del;
        bad = !tt_expect(drv, &sides[0], &sides[1], k, ts);
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(tombstones > 500);
    ks_driver_close(drv);
}

/* A plugin cannot write a table's store (KS_ERR_STATE); a sink reading the
 * table (`from: customers`) gets its updates and tombstones as applied. */
static void test_read_only_and_updates(void)
{
    const char *yaml = HEAD "nodes:\n"
                            "  - { name: w, type: joiner.writer, from: orders, table: customers }\n"
                            "sinks:\n"
                            "  - { name: out, from: w, topic: out, key: string, value: string }\n"
                            "  - { name: changes, from: customers, topic: ch, key: string,"
                            " value: json }\n";
    ks_driver_options opt = {.partitions = 2, .plugin_path = PLUGINS};
    ks_driver *drv = NULL;
    char err[1024] = "";
    int rc = ks_driver_open_text("j.yaml", yaml, strlen(yaml), &opt, &drv, err, sizeof err);
    if (rc)
        fprintf(stderr, "\n%s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "customers", "a", 1, "{\"n\":1}", 7, 4), 0);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "customers", "a", 1, NULL, 0, 5), 0);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "orders", "a", 1, "1", 1, 6), 0);
    ks_driver_record r;
    CU_ASSERT_EQUAL_FATAL(ks_driver_read_output(drv, "changes", &r), 0);
    CU_ASSERT(r.value_len == 7 && memcmp(r.value, "{\"n\":1}", 7) == 0 && r.timestamp == 4);
    CU_ASSERT_EQUAL_FATAL(ks_driver_read_output(drv, "changes", &r), 0);
    CU_ASSERT(r.value == NULL && r.timestamp == 5);
    CU_ASSERT_EQUAL_FATAL(ks_driver_read_output(drv, "out", &r), 0);
    char want[16];
    snprintf(want, sizeof want, "rc=%d", KS_ERR_STATE);
    CU_ASSERT(r.value_len == strlen(want) && memcmp(r.value, want, r.value_len) == 0);
    ks_bytes v;
    CU_ASSERT_EQUAL(ks_driver_store_get(drv, "customers", ks_driver_partition_for("a", 1, 2),
                                        "a", 1, &v),
                    KS_ERR_NOT_FOUND); /* the tombstone, not the writer's "x" */
    ks_driver_close(drv);
}

/* examples/enrichment/pipeline.yaml as its README runs it: orders keyed by
 * id, re-keyed by customer, merged with the customer's fields. */
static void test_example(void)
{
    ks_driver_options opt = {.partitions = 4, .plugin_path = PLUGINS};
    ks_driver *drv = NULL;
    char err[1024] = "";
    int rc = ks_driver_open(KS_TEST_SRCDIR "/../examples/enrichment/pipeline.yaml", &opt, &drv,
                            err, sizeof err);
    if (rc)
        fprintf(stderr, "\n%s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    const char *ann = "{\"name\":\"Ann\",\"city\":\"Oslo\"}";
    const char *o1 = "{\"id\":1,\"customer\":\"c7\",\"total\":12}";
    const char *o2 = "{\"id\":2,\"customer\":\"c9\",\"total\":5}";
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "customers", "c7", 2, ann, strlen(ann), 1), 0);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "orders", "o1", 2, o1, strlen(o1), 2), 0);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "orders", "o2", 2, o2, strlen(o2), 3), 0);
    const char *want[] = {"{\"id\":1,\"customer\":\"c7\",\"total\":12,\"name\":\"Ann\","
                          "\"city\":\"Oslo\"}",
                          o2};
    for (int i = 0; i < 2; i++) {
        ks_driver_record r;
        CU_ASSERT_EQUAL_FATAL(ks_driver_read_output(drv, NULL, &r), 0);
        CU_ASSERT(r.value_len == strlen(want[i]) && memcmp(r.value, want[i], r.value_len) == 0);
    }
    ks_driver_close(drv);
}

void ks_test_register_joins(void)
{
    CU_pSuite s = CU_add_suite("joins", NULL, NULL);
    CU_add_test(s, "tables: in YAML, and its errors", test_yaml);
    CU_add_test(s, "inner, left and merge joins equal the reference model", test_model);
    CU_add_test(s, "a joiner from a plugin (KS_FN_JOINER)", test_function_joiner);
    CU_add_test(s, "a re-keyed stream joins through a repartition topic", test_rekeyed);
    CU_add_test(s, "table-table inner, left and outer joins equal the model", test_table_table);
    CU_add_test(s, "a table's store is read-only; its updates flow to from:", test_read_only_and_updates);
    CU_add_test(s, "examples/enrichment/pipeline.yaml", test_example);
}
