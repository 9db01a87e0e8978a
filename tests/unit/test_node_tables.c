/*
 * test_node_tables.c - a node's store read as a table (`table: NODE`, a side
 * of join.tables), docs/tables-and-joins.md "A node's store as a table".
 *
 * The YAML: the reader gets the node's store, marked as that node's table;
 * a node without a store, a windowed one and a cycle refused at
 * FILE:LINE:COL. In the test driver: a stream joined against a count of the
 * same stream (the count written after the join in the YAML, so that the
 * order of the children is what is tested), over 2 000 random orders of 3
 * tasks against a model, each order seeing the count with itself; a
 * reduce's values as they are; the reader cannot write the store; a
 * re-keyed stream joining a count through a repartition topic; a
 * table-table outer join of a table and a count. `kstreams describe`'s text
 * and dot name the node's table and the global tables.
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
    "application: nt\n"                                                                \
    "kafka: { bootstrap: 127.0.0.1:9092 }\n"                                           \
    "plugin_path: [" KS_TEST_BUILDDIR "/plugins/.libs, " KS_TEST_BUILDDIR             \
    "/tests/plugins/.libs]\n"                                                          \
    "sources:\n"                                                                       \
    "  orders: { topic: orders, key: string, value: json }\n"                          \
    "tables:\n"                                                                        \
    "  customers: { topic: customers, key: string, value: json }\n"

/* the join first, the count it reads after it */
static const char *COUNT_YAML =
    HEAD "nodes:\n"
         "  - { name: enriched, type: join, from: orders, table: counts,\n"
         "      config: { kind: left } }\n"
         "  - { name: counts, type: count, from: orders, store: order-counts }\n"
         "sinks:\n"
         "  - { name: out, from: enriched, topic: out, key: string, value: json }\n";

/* The pipeline `yaml` (read as "n.yaml") is refused with `want` in the error. */
static void parse_err(const char *yaml, const char *want)
{
    ks_test_parse_err("n.yaml", yaml, want);
}

static void test_yaml(void)
{
    ks_pipeline *p = NULL;
    char err[1024] = "";
    int rc = ks_pipeline_parse("n.yaml", COUNT_YAML, strlen(COUNT_YAML), &p, err, sizeof err);
    if (rc)
        fprintf(stderr, "\n%s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    const ks_cfg_node *j = ks_pipeline_node(p, "enriched"), *c = ks_pipeline_node(p, "counts");
    CU_ASSERT_EQUAL_FATAL(j->store_count, 1);
    CU_ASSERT_STRING_EQUAL(j->stores[0], "order-counts");
    CU_ASSERT(j->table_node);
    const ks_cfg_store *st = ks_pipeline_store(p, "order-counts");
    CU_ASSERT_PTR_NOT_NULL_FATAL(st);
    CU_ASSERT_STRING_EQUAL(st->node_table, "counts");
    CU_ASSERT(st->changelog); /* the count's changelog, as before */
    int idx = (int)(st - p->stores);
    CU_ASSERT_FALSE(ks_cfg_store_writable(p, j, idx));
    CU_ASSERT(ks_cfg_store_writable(p, c, idx));
    CU_ASSERT(ks_cfg_node_is_table(p, "counts"));
    CU_ASSERT_FALSE(ks_cfg_node_is_table(p, "enriched"));
    ks_pipeline_free(p);

    const char *tail = "sinks: [ { from: j, topic: out } ]\n";
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             HEAD "nodes:\n"
                  "  - { name: f, type: ops.filter, from: orders, config: { where: { path: /a, "
                  "exists: true } } }\n"
                  "  - { name: j, type: join, from: orders, table: f }\n%s",
             tail);
    parse_err(yaml, "n.yaml:10:49: node 'j': table 'f' is a node without a store; a node is "
                    "a table through its store");
    snprintf(yaml, sizeof yaml,
             HEAD "nodes:\n"
                  "  - { name: w, type: count, from: orders, store: ws,\n"
                  "      window: { type: tumbling, size: 1m } }\n"
                  "  - { name: j, type: join, from: orders, table: w }\n%s",
             tail);
    parse_err(yaml, "n.yaml:11:49: node 'j': table 'w' is windowed (`window:`): its store "
                    "holds a value per key and window");
    snprintf(yaml, sizeof yaml,
             HEAD "nodes:\n"
                  "  - { name: j, type: join, from: orders, table: c }\n"
                  "  - { name: c, type: count, from: j, store: cs }\n%s",
             tail);
    parse_err(yaml, "n.yaml:9:49: cycle: j -> c -> j");
    snprintf(yaml, sizeof yaml,
             HEAD "nodes:\n"
                  "  - { name: w, type: count, from: orders, store: ws,\n"
                  "      window: { type: tumbling, size: 1m } }\n"
                  "  - { name: j, type: join.tables, from: [customers, w],\n"
                  "      config: { left: customers, right: w } }\n%s",
             tail);
    parse_err(yaml, "n.yaml:11:53: node 'j': table 'w' is windowed");
}

static ks_driver *open_at(const char *yaml, int partitions, const char *state_dir)
{
    ks_driver_options opt = {.partitions = partitions, .plugin_path = PLUGINS,
                             .state_dir = state_dir};
    ks_driver *drv = NULL;
    char err[1024] = "";
    int rc = ks_driver_open_text("n.yaml", yaml, strlen(yaml), &opt, &drv, err, sizeof err);
    if (rc)
        fprintf(stderr, "\n%s\n", err);
    CU_ASSERT_EQUAL(rc, 0);
    return drv;
}

static ks_driver *open_ok(const char *yaml, int partitions)
{
    return open_at(yaml, partitions, NULL);
}

static int expect(ks_driver *drv, const char *sink, const char *key, const char *value,
                  int64_t ts)
{
    ks_driver_record r;
    if (ks_driver_read_output(drv, sink, &r) != 0) {
        fprintf(stderr, "\nno output, want %s %s\n", key, value);
        return -1;
    }
    int ok = r.key_len == strlen(key) && memcmp(r.key, key, r.key_len) == 0 &&
             (value ? r.value && r.value_len == strlen(value) &&
                          memcmp(r.value, value, r.value_len) == 0
                    : r.value == NULL) &&
             r.timestamp == ts;
    if (!ok)
        fprintf(stderr, "\nwant %s %s @%lld, got %.*s %.*s @%lld\n", key, value ? value : "null",
                (long long)ts, (int)r.key_len, (const char *)r.key, (int)r.value_len,
                r.value ? (const char *)r.value : "", (long long)r.timestamp);
    return ok ? 0 : -1;
}

#define KEYS 9
#define ORDERS 2000

/* Every order sees the count of its customer's orders so far, itself
 * included (the count runs first), the driver closed and reopened on its
 * state half-way. */
static void test_count_model(void)
{
    char dir[] = "/tmp/ks-test-nt-XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    ks_driver *drv = open_at(COUNT_YAML, 3, dir);
    CU_ASSERT_PTR_NOT_NULL_FATAL(drv);
    long count[KEYS] = {0};
    unsigned seed = 18;
    int bad = 0;
    for (int i = 0; i < ORDERS && !bad; i++) {
        if (i == ORDERS / 2) {
            ks_driver_close(drv);
            drv = open_at(COUNT_YAML, 3, dir);
            CU_ASSERT_PTR_NOT_NULL_FATAL(drv);
        }
        int k = (int)(rand_r(&seed) % KEYS);
        char key[16], value[32], want[96];
        snprintf(key, sizeof key, "c%d", k);
        snprintf(value, sizeof value, "{\"id\":%d}", i);
        int64_t ts = 1000 + (int64_t)(rand_r(&seed) % 5000);
        bad |= ks_driver_pipe(drv, "orders", key, strlen(key), value, strlen(value), ts) != 0;
        count[k]++;
        snprintf(want, sizeof want, "{\"left\":%s,\"right\":%ld}", value, count[k]);
        bad |= expect(drv, "out", key, want, ts) != 0;
    }
    CU_ASSERT_FALSE(bad);
    CU_ASSERT_EQUAL(ks_driver_output_count(drv, NULL), 0);
    for (int k = 0; k < KEYS; k++) { /* the store is the count's, as before */
        char key[16];
        snprintf(key, sizeof key, "c%d", k);
        ks_bytes v;
        int rc = ks_driver_store_get(drv, "order-counts",
                                     ks_driver_partition_for(key, strlen(key), 3), key,
                                     strlen(key), &v);
        CU_ASSERT(count[k] ? rc == 0 && v.len == 8 && ks_int64_decode(v.data) == count[k]
                           : rc == KS_ERR_NOT_FOUND);
    }
    ks_driver_close(drv);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", dir);
}

/* A reduce's values as they are (no timestamp to strip) to a joiner
 * function, as a count's 8 bytes are; the reader cannot write the node's
 * store. */
/* A plugin built before ABI 1.6 cannot ask what a store's values hold, so
 * it is refused as the reader of a node's store, naming its ABI; as the
 * reader of a table of `tables:` it still loads. */
static void test_old_abi_refused(void)
{
    const char *head = "application: nt\n"
                       "kafka: { bootstrap: 127.0.0.1:9092 }\n"
                       "plugins: [" KS_TEST_BUILDDIR "/tests/plugins/.libs/joiner_v5.so]\n"
                       "sources: { orders: { topic: orders, key: string, value: string } }\n"
                       "tables: { customers: { topic: customers, key: string, value: string } }\n"
                       "nodes:\n"
                       "  - { name: counts, type: count, from: orders, store: counts }\n";
    char yaml[1024];
    ks_driver_options opt = {.partitions = 1, .plugin_path = PLUGINS};
    ks_driver *drv = NULL;
    char err[1024] = "";
    snprintf(yaml, sizeof yaml, "%s  - { name: w, type: joiner.writer, from: orders, "
             "table: counts }\nsinks: [ { from: w, topic: o, key: string, value: string } ]\n",
             head);
    CU_ASSERT_NOT_EQUAL(ks_driver_open_text("v.yaml", yaml, strlen(yaml), &opt, &drv, err,
                                            sizeof err),
                        0);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "node 'w': `table: counts` reads a "
                                       "node's store, which needs a plugin built against ABI "
                                       "1.6 or later; plugin 'joiner' ("));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, ") is ABI 1.5"));
    if (!strstr(err, "ABI 1.5"))
        fprintf(stderr, "\n%s\n", err);
    ks_driver_close(drv);
    drv = NULL;
    snprintf(yaml, sizeof yaml, "%s  - { name: w, type: joiner.writer, from: orders, "
             "table: customers }\nsinks: [ { from: w, topic: o, key: string, value: string } ]\n",
             head);
    int rc = ks_driver_open_text("v.yaml", yaml, strlen(yaml), &opt, &drv, err, sizeof err);
    if (rc)
        fprintf(stderr, "\n%s\n", err);
    CU_ASSERT_EQUAL(rc, 0);
    ks_driver_close(drv);
}

static void test_plain_and_read_only(void)
{
    const char *yaml =
        "application: nt\n"
        "kafka: { bootstrap: 127.0.0.1:9092 }\n"
        "plugin_path: [" KS_TEST_BUILDDIR "/plugins/.libs, " KS_TEST_BUILDDIR
        "/tests/plugins/.libs]\n"
        "plugins: [good]\n"
        "sources:\n"
        "  orders: { topic: orders, key: string, value: string }\n"
        "  amounts: { topic: amounts, key: string, value: int64 }\n"
        "nodes:\n"
        "  - { name: totals, type: reduce, from: amounts, store: totals,\n"
        "      functions: { reduce: good.sum } }\n"
        "  - { name: j, type: join, from: orders, table: totals,\n"
        "      functions: { joiner: joiner.concat } }\n"
        "  - { name: c, type: count, from: orders, store: cs }\n"
        "  - { name: jc, type: join, from: orders, table: c,\n"
        "      functions: { joiner: joiner.concat } }\n"
        "  - { name: w, type: joiner.writer, from: orders, table: totals }\n"
        "sinks:\n"
        "  - { name: out, from: j, topic: out, key: string, value: bytes }\n"
        "  - { name: cout, from: jc, topic: cout, key: string, value: bytes }\n"
        "  - { name: wout, from: w, topic: wout, key: string, value: string }\n";
    ks_driver *drv = open_ok(yaml, 2);
    if (!drv)
        return;
    unsigned char two[8], three[8], five[8];
    ks_int64_encode(2, two);
    ks_int64_encode(3, three);
    ks_int64_encode(5, five);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "amounts", "a", 1, two, 8, 5), 0);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "amounts", "a", 1, three, 8, 6), 0);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "orders", "a", 1, "x", 1, 7), 0);
    ks_driver_record r;
    CU_ASSERT_EQUAL_FATAL(ks_driver_read_output(drv, "out", &r), 0);
    CU_ASSERT(r.value_len == 10 && memcmp(r.value, "x|", 2) == 0 &&
              memcmp((const char *)r.value + 2, five, 8) == 0 && r.timestamp == 7);
    CU_ASSERT_EQUAL_FATAL(ks_driver_read_output(drv, "cout", &r), 0); /* a count: its int64 */
    CU_ASSERT(r.value_len == 10 && memcmp(r.value, "x|\0\0\0\0\0\0\0\1", 10) == 0);
    char want[16];
    snprintf(want, sizeof want, "rc=%d", KS_ERR_STATE);
    CU_ASSERT_EQUAL(expect(drv, "wout", "a", want, 7), 0);
    ks_bytes v;
    CU_ASSERT_EQUAL(ks_driver_store_get(drv, "totals", ks_driver_partition_for("a", 1, 2), "a",
                                        1, &v),
                    0);
    CU_ASSERT(v.len == 8 && memcmp(v.data, five, 8) == 0); /* not the writer's "x" */
    ks_driver_close(drv);
}

/* join.tables: customers (a table) outer-joined with a count of orders:
 * each change of either side gives the join as it is now. */
static void test_table_table(void)
{
    const char *yaml =
        HEAD "nodes:\n"
             "  - { name: profile, type: join.tables, from: [customers, counts],\n"
             "      config: { left: customers, right: counts, kind: outer } }\n"
             "  - { name: counts, type: count, from: orders, store: order-counts }\n"
             "sinks:\n"
             "  - { name: out, from: profile, topic: out, key: string, value: json }\n";
    ks_driver *drv = open_ok(yaml, 3);
    if (!drv)
        return;
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "customers", "c1", 2, "{\"n\":\"Ann\"}", 11, 10), 0);
    CU_ASSERT_EQUAL(expect(drv, "out", "c1", "{\"left\":{\"n\":\"Ann\"},\"right\":null}", 10), 0);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "orders", "c1", 2, "{}", 2, 20), 0);
    CU_ASSERT_EQUAL(expect(drv, "out", "c1", "{\"left\":{\"n\":\"Ann\"},\"right\":1}", 20), 0);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "orders", "c2", 2, "{}", 2, 15), 0);
    CU_ASSERT_EQUAL(expect(drv, "out", "c2", "{\"left\":null,\"right\":1}", 15), 0);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "orders", "c1", 2, "{}", 2, 30), 0);
    CU_ASSERT_EQUAL(expect(drv, "out", "c1", "{\"left\":{\"n\":\"Ann\"},\"right\":2}", 30), 0);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "customers", "c1", 2, NULL, 0, 40), 0);
    CU_ASSERT_EQUAL(expect(drv, "out", "c1", "{\"left\":null,\"right\":2}", 40), 0);
    CU_ASSERT_EQUAL(ks_driver_output_count(drv, NULL), 0);
    ks_driver_close(drv);
}

static char *printed(const char *yaml, int dot)
{
    ks_pipeline *p = NULL;
    char err[1024] = "";
    if (ks_pipeline_parse("n.yaml", yaml, strlen(yaml), &p, err, sizeof err) != 0) {
        fprintf(stderr, "\n%s\n", err);
        return NULL;
    }
    char dir[] = "/tmp/ks-test-nt-XXXXXX";
    ks_topology *t = NULL;
    if (!mkdtemp(dir) || ks_topology_build(p, ks_host_api_table(), dir, &t, err, sizeof err)) {
        fprintf(stderr, "\n%s\n", err);
        return NULL;
    }
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", dir);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (dot)
        ks_topology_print_dot(t, f);
    else
        ks_topology_print(t, f);
    fclose(f);
    ks_topology_free(t);
    return text;
}

static void has(const char *text, const char *want)
{
    if (!text || !strstr(text, want))
        fprintf(stderr, "\nwant '%s' in\n%s\n", want, text ? text : "(null)");
    CU_ASSERT_PTR_NOT_NULL(text ? strstr(text, want) : NULL);
}

/* describe's text and dot agree: the node's table, the global tables */
static void test_describe(void)
{
    char *text = printed(COUNT_YAML, 0), *dot = printed(COUNT_YAML, 1);
    has(text, "  processor enriched: join.join");
    has(text, "  order-counts: changelog nt-order-counts-changelog; the table of node counts, "
              "read by enriched\n");
    has(dot, "\"enriched\" -> \"store:order-counts\" [style=dashed,label=\"reads\"];");
    has(dot, "\"counts\" -> \"store:order-counts\" [style=dashed];");
    /* the count runs before the join that reads it */
    has(text, "  source orders: topic orders (key string, value json)\n      --> counts, "
              "enriched\n");
    free(text);
    free(dot);
    const char *global = "application: g\n"
                         "kafka: { bootstrap: 127.0.0.1:9092 }\n"
                         "plugin_path: [" KS_TEST_BUILDDIR "/plugins/.libs]\n"
                         "sources: { orders: { topic: orders, value: json } }\n"
                         "global_tables: { customers: { topic: cust, value: json } }\n"
                         "nodes:\n"
                         "  - { name: j, type: join, from: orders, table: customers,\n"
                         "      config: { key: /c } }\n"
                         "sinks: [ { from: j, topic: out } ]\n";
    text = printed(global, 0);
    dot = printed(global, 1);
    has(text, "  global table customers: topic cust (");
    has(text, "into store customers\n");
    has(dot, "\"customers\" [shape=cds,label=\"customers\\nglobal table, topic cust\"];");
    has(dot, "\"customers\" -> \"store:customers\" [style=bold];");
    has(dot, "\"j\" -> \"store:customers\" [style=dashed,label=\"reads\"];");
    free(text);
    free(dot);
}

/* Payments keyed by payment id, re-keyed by customer in front of the
 * join: the join reads them through a repartition topic the engine
 * inserts, and looks them up in the count of orders keyed by customer. */
static void test_rekeyed(void)
{
    const char *yaml =
        "application: nt\n"
        "kafka: { bootstrap: 127.0.0.1:9092 }\n"
        "plugin_path: [" KS_TEST_BUILDDIR "/plugins/.libs]\n"
        "sources:\n"
        "  orders: { topic: orders, key: string, value: json }\n"
        "  payments: { topic: payments, key: string, value: json }\n"
        "nodes:\n"
        "  - { name: order_counts, type: count, from: orders, store: oc }\n"
        "  - { name: by_customer, type: ops.select_key, from: payments,\n"
        "      config: { path: /customer } }\n"
        "  - { name: j, type: join, from: by_customer, table: order_counts,\n"
        "      config: { kind: left } }\n"
        "sinks:\n"
        "  - { name: out, from: j, topic: out, key: string, value: json }\n";
    ks_driver *drv = open_ok(yaml, 4);
    if (!drv)
        return;
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "orders", "c1", 2, "{}", 2, 10), 0);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "orders", "c1", 2, "{}", 2, 11), 0);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "orders", "c2", 2, "{}", 2, 12), 0);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "payments", "p1", 2, "{\"customer\":\"c1\"}", 17, 20),
                    0);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "payments", "p2", 2, "{\"customer\":\"c3\"}", 17, 21),
                    0);
    CU_ASSERT_EQUAL(
        expect(drv, "out", "c1", "{\"left\":{\"customer\":\"c1\"},\"right\":2}", 20), 0);
    CU_ASSERT_EQUAL(
        expect(drv, "out", "c3", "{\"left\":{\"customer\":\"c3\"},\"right\":null}", 21), 0);
    CU_ASSERT_EQUAL(ks_driver_output_count(drv, NULL), 0);
    ks_driver_close(drv);
    char *text = printed(yaml, 0);
    has(text, "nt-j-repartition: written by by_customer");
    free(text);
}

void ks_test_register_node_tables(void)
{
    CU_pSuite s = CU_add_suite("node_tables", NULL, NULL);
    CU_add_test(s, "table: NODE in YAML, and its errors", test_yaml);
    CU_add_test(s, "a plugin older than ABI 1.6 is refused as a node table's reader",
                test_old_abi_refused);
    CU_add_test(s, "a stream joined with a count of it equals the model", test_count_model);
    CU_add_test(s, "a reduce's and a count's values to a joiner function; read-only",
                test_plain_and_read_only);
    CU_add_test(s, "a re-keyed stream joins a count through a repartition topic",
                test_rekeyed);
    CU_add_test(s, "join.tables: a table outer-joined with a count", test_table_table);
    CU_add_test(s, "describe: the node's table and global tables, text and dot",
                test_describe);
}
