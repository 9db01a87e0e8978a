/*
 * test_global_joins.c - global tables (`global_tables:`,
 * engine/runtime/global_table.c) and the shipped join looking stream
 * records up in one (plugins/join.c, config `key:`).
 *
 * The YAML and its errors at FILE:LINE:COL. In the test driver, against a
 * reference model: random stream records (keyed by order id, the customer
 * id in the value, so nothing is co-partitioned) and global table updates
 * and tombstones over 3 tasks and a table of 5 partitions; every output of
 * an inner, a left and a merge join by `key: /customer`, and of an inner
 * join by the record key, equals the model's (value and timestamp: the
 * later of both sides), the lookup seeing the table as of processing. The
 * driver is closed and reopened on its state half-way: the global store
 * persists, and `kstreams query` reads it. A plugin cannot write the
 * global store (KS_ERR_STATE); the driver reads it as one store.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "config/config.h"
#include "kstreams/testdriver.h"
#include "runtime/task.h"
#include "runtime/topology.h"
#include "unit/test_util.h"

#define PLUGINS KS_TEST_BUILDDIR "/plugins/.libs:" KS_TEST_BUILDDIR "/tests/plugins/.libs"

#define HEAD                                                                           \
    "application: gjoins\n"                                                            \
    "kafka: { bootstrap: 127.0.0.1:9092 }\n"                                           \
    "sources:\n"                                                                       \
    "  orders: { topic: orders, key: string, value: json }\n"                          \
    "global_tables:\n"                                                                 \
    "  customers: { topic: customers, key: string, value: json, partitions: 5 }\n"

static const char *YAML =
    HEAD "nodes:\n"
         "  - { name: inner, type: join, from: orders, table: customers,\n"
         "      config: { key: /customer } }\n"
         "  - { name: left, type: join, from: orders, table: customers,\n"
         "      config: { kind: left, key: /customer } }\n"
         "  - { name: merged, type: join, from: orders, table: customers,\n"
         "      config: { kind: left, joiner: merge, key: /customer } }\n"
         "  - { name: by_key, type: join, from: orders, table: customers }\n"
         "sinks:\n"
         "  - { name: inner_out, from: inner, topic: o1, key: string, value: json }\n"
         "  - { name: left_out, from: left, topic: o2, key: string, value: json }\n"
         "  - { name: merged_out, from: merged, topic: o3, key: string, value: json }\n"
         "  - { name: by_key_out, from: by_key, topic: o4, key: string, value: json }\n";

/* The pipeline `yaml` (read as "g.yaml") is refused with `want` in the error. */
static void parse_err(const char *yaml, const char *want)
{
    ks_test_parse_err("g.yaml", yaml, want);
}

static void test_yaml(void)
{
    ks_pipeline *p = NULL;
    char err[1024] = "";
    int rc = ks_pipeline_parse("g.yaml", YAML, strlen(YAML), &p, err, sizeof err);
    if (rc)
        fprintf(stderr, "\n%s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_EQUAL_FATAL(p->global_count, 1);
    CU_ASSERT_PTR_NULL(ks_pipeline_source(p, "customers")); /* no stream, no task table */
    const ks_cfg_source *g = ks_pipeline_global(p, "customers");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT(g->global && g->table && g->partitions == 5);
    const ks_cfg_store *st = &p->stores[g->table_store];
    CU_ASSERT(st->global && st->table && !st->changelog);
    const ks_cfg_node *n = ks_pipeline_node(p, "left");
    CU_ASSERT_EQUAL_FATAL(n->store_count, 1);
    CU_ASSERT_STRING_EQUAL(n->stores[0], "customers");
    ks_pipeline_free(p);

    char yaml[2048];
    const char *sinks = "sinks: [ { from: j, topic: o, key: string, value: json } ]\n";
    snprintf(yaml, sizeof yaml,
             HEAD "tables: { accounts: { topic: accounts } }\n"
                  "nodes:\n"
                  "  - { name: j, type: join, from: orders, table: accounts,"
                  " config: { key: /customer } }\n%s",
             sinks);
    parse_err(yaml, "g.yaml:9:74: node 'j': `key:` looks records up in a global table only");
    snprintf(yaml, sizeof yaml,
             HEAD "nodes:\n"
                  "  - { name: j, type: join, from: orders, table: customers,"
                  " config: { key: customer } }\n%s",
             sinks);
    parse_err(yaml, "g.yaml:8:75: node 'j': key 'customer' is not a JSON pointer");
    snprintf(yaml, sizeof yaml,
             HEAD "  more: { topic: orders }\nnodes:\n"
                  "  - { name: j, type: join, from: orders, table: customers }\n%s",
             sinks);
    parse_err(yaml, "g.yaml:7:18: global table 'more': topic 'orders' is already read by "
                    "source 'orders'");
    snprintf(yaml, sizeof yaml,
             HEAD "nodes:\n"
                  "  - { name: customers, type: join, from: orders, table: customers }\n%s",
             sinks);
    parse_err(yaml, "duplicate name 'customers'; already used by the global table at line 6");
    snprintf(yaml, sizeof yaml,
             HEAD "nodes:\n"
                  "  - { name: j, type: join, from: orders, table: customer }\n%s",
             sinks);
    parse_err(yaml, "g.yaml:8:49: node 'j': unknown table 'customer' (not under 'tables' or "
                    "'global_tables', nor a node)");
    snprintf(yaml, sizeof yaml,
             HEAD "nodes:\n"
                  "  - { name: j, type: join, from: [orders, customers], table: customers }\n%s",
             sinks);
    parse_err(yaml, "g.yaml:8:43: node 'j': 'customers' is a global table, which is no input; "
                    "look records up in it with `table: customers`");
}

/* functions: { key: ... } (KS_FN_KEY_MAPPER): the lookup key a plugin
 * computes; none is no match, KS_SKIP poison; with `key:` too it is
 * refused, and on a table of `tables:` as `key:` is. */
static void test_key_function(void)
{
    static const char *yaml =
        "application: gkey\n"
        "kafka: { bootstrap: 127.0.0.1:9092 }\n"
        "poison: skip\n"
        "sources: { orders: { topic: orders, key: string, value: string } }\n"
        "global_tables: { customers: { topic: customers, key: string, value: string } }\n"
        "nodes:\n"
        "  - { name: j, type: join, from: orders, table: customers, config: { kind: left },\n"
        "      functions: { key: joiner.before_colon, joiner: joiner.concat } }\n"
        "sinks: [ { name: out, from: j, topic: t1, key: string, value: string } ]\n";
    ks_driver_options opt = {.partitions = 2, .plugin_path = PLUGINS};
    ks_driver *drv = NULL;
    char err[1024] = "";
    int rc = ks_driver_open_text("k.yaml", yaml, strlen(yaml), &opt, &drv, err, sizeof err);
    if (rc)
        fprintf(stderr, "\n%s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "customers", "c7", 2, "ann", 3, 5), 0);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "orders", "o1", 2, "c7:x", 4, 7), 0);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "orders", "o2", 2, "zz", 2, 8), 0);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "orders", "o3", 2, "!p", 2, 9), KS_SKIP);
    ks_driver_record r;
    CU_ASSERT_EQUAL_FATAL(ks_driver_read_output(drv, "out", &r), 0);
    CU_ASSERT(r.value_len == 8 && memcmp(r.value, "c7:x|ann", 8) == 0);
    CU_ASSERT(r.key_len == 2 && memcmp(r.key, "o1", 2) == 0);
    CU_ASSERT_EQUAL_FATAL(ks_driver_read_output(drv, "out", &r), 0);
    CU_ASSERT(r.value_len == 4 && memcmp(r.value, "zz|-", 4) == 0);
    CU_ASSERT_EQUAL(ks_driver_output_count(drv, NULL), 0); /* o3: poison, skipped */
    ks_driver_close(drv);

    char bad[2048];
    snprintf(bad, sizeof bad,
             HEAD "nodes:\n"
                  "  - { name: j, type: join, from: orders, table: customers,"
                  " config: { key: /c }, functions: { key: joiner.before_colon } }\n"
                  "sinks: [ { from: j, topic: o, key: string, value: json } ]\n");
    parse_err(bad, "node 'j': the lookup key comes from `key:` or from `functions: { key: }`, "
                   "not both");
    snprintf(bad, sizeof bad,
             HEAD "tables: { accounts: { topic: accounts } }\n"
                  "nodes:\n"
                  "  - { name: j, type: join, from: orders, table: accounts,"
                  " functions: { key: joiner.before_colon } }\n"
                  "sinks: [ { from: j, topic: o, key: string, value: json } ]\n");
    parse_err(bad, "node 'j': a key function looks records up in a global table only");
}

/* ---- the reference model ---------------------------------------------------- */

#define KEYS 15
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

/* Order n (key "o<n>") of customer k, or of none (k < 0: no member). The
 * record key is "c<k>" every 7th order, so that by_key finds it too. */
static int stream_step(ks_driver *drv, const model *m, int n, int k, int64_t ts)
{
    char key[16], order[96], right[64], want[256];
    int by_key = k >= 0 && n % 7 == 0;
    if (by_key)
        snprintf(key, sizeof key, "c%d", k);
    else
        snprintf(key, sizeof key, "o%d", n);
    if (k >= 0)
        snprintf(order, sizeof order, "{\"o\":%d,\"customer\":\"c%d\",\"v\":\"s\"}", n, k);
    else
        snprintf(order, sizeof order, "{\"o\":%d,\"v\":\"s\"}", n);
    if (ks_driver_pipe(drv, "orders", key, strlen(key), order, strlen(order), ts) != 0)
        return 0;
    int ok = 1, hit = k >= 0 && m->present[k];
    int64_t out_ts = hit && m->ts[k] > ts ? m->ts[k] : ts;
    if (hit) {
        table_value(right, sizeof right, k, m->version[k]);
        snprintf(want, sizeof want, "{\"left\":%s,\"right\":%s}", order, right);
        ok &= expect(drv, "inner_out", key, want, out_ts);
        ok &= expect(drv, "left_out", key, want, out_ts);
        if (by_key)
            ok &= expect(drv, "by_key_out", key, want, out_ts);
        /* merge: the stream's members win ("v"), the table adds "c" */
        snprintf(want, sizeof want, "{\"o\":%d,\"customer\":\"c%d\",\"v\":\"s\",\"c\":%d}", n,
                 k, k);
        ok &= expect(drv, "merged_out", key, want, out_ts);
    } else {
        snprintf(want, sizeof want, "{\"left\":%s,\"right\":null}", order);
        ok &= expect(drv, "left_out", key, want, out_ts);
        ok &= expect(drv, "merged_out", key, order, out_ts);
    }
    if (!ok || ks_driver_output_count(drv, NULL) != 0)
        fprintf(stderr, "\nstep %d (customer %d): outputs left over\n", n, k);
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
    return ks_driver_output_count(drv, NULL) == 0; /* a global table emits nothing */
}

/* The global store holds the model's table, seen from every partition. */
static int store_matches(ks_driver *drv, const model *m)
{
    for (int k = 0; k < KEYS; k++) {
        char key[16], value[64];
        snprintf(key, sizeof key, "c%d", k);
        ks_bytes v;
        int rc = ks_driver_store_get(drv, "customers", k % 3, key, strlen(key), &v);
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

static ks_driver *open_at(const char *state_dir)
{
    ks_driver_options opt = {.partitions = 3, .plugin_path = PLUGINS, .state_dir = state_dir};
    ks_driver *drv = NULL;
    char err[1024] = "";
    if (ks_driver_open_text("g.yaml", YAML, strlen(YAML), &opt, &drv, err, sizeof err) != 0)
        fprintf(stderr, "\n%s\n", err);
    return drv;
}

/* `kstreams query` reads the one global store: every key of the model,
 * as a table's value (the timestamp, then the value; printed in hex). */
static int query_matches(const char *dir, const model *m)
{
    char path[128];
    snprintf(path, sizeof path, "%s/g.yaml", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return 0;
    fprintf(f, "state_dir: %s\n%s", dir, YAML);
    fclose(f);
    char *text = NULL, *etext = NULL;
    size_t len, elen;
    FILE *out = open_memstream(&text, &len), *err = open_memstream(&etext, &elen);
    char *argv[] = {"query", path, "customers", NULL};
    int rc = ks_cmd_query(3, argv, out, err);
    fclose(out);
    fclose(err);
    int lines = 0, ok = rc == 0;
    for (const char *p = text; ok && p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : "")
        lines++;
    for (int k = 0; k < KEYS; k++)
        lines -= m->present[k];
    if (!ok || lines != 0)
        fprintf(stderr, "\nquery: exit %d, %d lines off: %s%s\n", rc, lines, text, etext);
    free(text);
    free(etext);
    return ok && lines == 0;
}

static void test_model(void)
{
    char dir[] = "/tmp/ks-global-XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    ks_driver *drv = open_at(dir);
    CU_ASSERT_PTR_NOT_NULL_FATAL(drv);
    model m = {{0}, {0}, {0}};
    unsigned seed = 4321;
    int bad = 0, streams = 0, updates = 0, tombstones = 0, misses = 0;
    for (int i = 0; i < STEPS && !bad; i++) {
        if (i == STEPS / 2) { /* the global store outlives the process */
            ks_driver_close(drv);
            drv = open_at(dir);
            CU_ASSERT_PTR_NOT_NULL_FATAL(drv);
            bad = !store_matches(drv, &m);
        }
        int k = rand_r(&seed) % KEYS;
        int64_t ts = 1000 + rand_r(&seed) % 5000; /* out of order on purpose */
        int what = rand_r(&seed) % 20;
        if (what < 12) {
            int none = what == 0;
            bad = bad || !stream_step(drv, &m, i, none ? -1 : k, ts);
            streams++;
            misses += !none && !m.present[k];
        } else {
            bad = bad || !table_step(drv, &m, k, what >= 18, ts);
            updates++;
            tombstones += what >= 18;
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(streams > 1500 && updates > 1000 && tombstones > 150 && misses > 50);
    CU_ASSERT(store_matches(drv, &m));
    ks_driver_close(drv);
    CU_ASSERT(query_matches(dir, &m));
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CU_ASSERT_EQUAL(system(cmd), 0);
}

static int count_one(void *arg, ks_bytes key, ks_bytes value)
{
    (void)key;
    (void)value;
    ++*(int *)arg;
    return 0;
}

/* A plugin cannot write the global store (tests/plugins/joiner.c's writer
 * forwards what store_put returned). */
static void test_read_only(void)
{
    const char *yaml = HEAD "nodes:\n"
                            "  - { name: w, type: joiner.writer, from: orders, table: customers }\n"
                            "sinks:\n"
                            "  - { name: out, from: w, topic: out, key: string, value: string }\n";
    ks_driver_options opt = {.partitions = 2, .plugin_path = PLUGINS};
    ks_driver *drv = NULL;
    char err[1024] = "";
    int rc = ks_driver_open_text("g.yaml", yaml, strlen(yaml), &opt, &drv, err, sizeof err);
    if (rc)
        fprintf(stderr, "\n%s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "customers", "a", 1, "{\"n\":1}", 7, 4), 0);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "orders", "a", 1, "1", 1, 6), 0);
    ks_driver_record r;
    CU_ASSERT_EQUAL_FATAL(ks_driver_read_output(drv, "out", &r), 0);
    char want[16];
    snprintf(want, sizeof want, "rc=%d", KS_ERR_STATE);
    CU_ASSERT(r.value_len == strlen(want) && memcmp(r.value, want, r.value_len) == 0);
    ks_bytes v;
    CU_ASSERT_EQUAL(ks_driver_store_get(drv, "customers", 1, "a", 1, &v), 0);
    CU_ASSERT(v.len == 15 && memcmp((const char *)v.data + 8, "{\"n\":1}", 7) == 0);
    int n = 0; /* one store, not one per task */
    CU_ASSERT_EQUAL(ks_driver_store_range(drv, "customers", -1, NULL, 0, NULL, 0, count_one, &n),
                    0);
    CU_ASSERT_EQUAL(n, 1);
    ks_driver_close(drv);
}

/* A re-keyed stream reaches a global-table join without a repartition
 * topic (every task holds the whole table); the record key is the
 * lookup key by default; a number found by `key:` is looked up by its
 * JSON text; inner drops a value without the member, left joins it with
 * null; a value that is not JSON is poison. */
static void test_keys(void)
{
    const char *yaml =
        "application: gkeys\n"
        "kafka: { bootstrap: 127.0.0.1:9092 }\n"
        "plugin_path: [" KS_TEST_BUILDDIR "/plugins/.libs]\n"
        "sources:\n"
        "  orders: { topic: orders, key: string, value: string }\n"
        "global_tables:\n"
        "  ids: { topic: ids, key: string, value: json }\n"
        "nodes:\n"
        "  - { name: by_cust, type: ops.select_key, from: orders, config: { path: /c } }\n"
        "  - { name: rekeyed, type: join, from: by_cust, table: ids }\n"
        "  - { name: by_num, type: join, from: orders, table: ids, config: { key: /n } }\n"
        "  - { name: left_num, type: join, from: orders, table: ids,\n"
        "      config: { key: /n, kind: left } }\n"
        "sinks:\n"
        "  - { name: o1, from: rekeyed, topic: o1, key: string, value: json }\n"
        "  - { name: o2, from: by_num, topic: o2, key: string, value: json }\n"
        "  - { name: o3, from: left_num, topic: o3, key: string, value: json }\n";
    ks_pipeline *p = NULL;
    char err[1024] = "";
    CU_ASSERT_EQUAL_FATAL(ks_pipeline_parse("k.yaml", yaml, strlen(yaml), &p, err, sizeof err), 0);
    char dir[] = "/tmp/ks-test-gkeys-XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    ks_topology *t = NULL;
    int rc = ks_topology_build(p, ks_host_api_table(), dir, &t, err, sizeof err);
    if (rc)
        fprintf(stderr, "\n%s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_PTR_NULL(ks_topology_node(t, "rekeyed-repartition-source"));
    CU_ASSERT_EQUAL(t->sub_count, 1);
    ks_topology_free(t);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CU_ASSERT_EQUAL(system(cmd), 0);

    ks_driver_options opt = {.partitions = 3, .plugin_path = PLUGINS};
    ks_driver *drv = NULL;
    CU_ASSERT_EQUAL_FATAL(ks_driver_open_text("k.yaml", yaml, strlen(yaml), &opt, &drv, err,
                                              sizeof err), 0);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "ids", "c7", 2, "1", 1, 1), 0);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "ids", "42", 2, "2", 1, 1), 0);
    const char *a = "{\"c\":\"c7\",\"n\":42}", *b = "{\"c\":\"c8\"}";
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "orders", "x", 1, a, strlen(a), 5), 0);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "orders", "y", 1, b, strlen(b), 6), 0);
    ks_driver_record r;
    char want[128];
    snprintf(want, sizeof want, "{\"left\":%s,\"right\":1}", a);
    CU_ASSERT_EQUAL_FATAL(ks_driver_read_output(drv, "o1", &r), 0);
    CU_ASSERT(r.key_len == 2 && memcmp(r.key, "c7", 2) == 0 && r.value_len == strlen(want) &&
              memcmp(r.value, want, r.value_len) == 0);
    snprintf(want, sizeof want, "{\"left\":%s,\"right\":2}", a);
    CU_ASSERT_EQUAL_FATAL(ks_driver_read_output(drv, "o2", &r), 0);
    CU_ASSERT(r.key_len == 1 && memcmp(r.key, "x", 1) == 0 && r.value_len == strlen(want) &&
              memcmp(r.value, want, r.value_len) == 0);
    CU_ASSERT_EQUAL_FATAL(ks_driver_read_output(drv, "o3", &r), 0);
    CU_ASSERT(r.value_len == strlen(want) && memcmp(r.value, want, r.value_len) == 0);
    snprintf(want, sizeof want, "{\"left\":%s,\"right\":null}", b);
    CU_ASSERT_EQUAL_FATAL(ks_driver_read_output(drv, "o3", &r), 0);
    CU_ASSERT(r.key_len == 1 && memcmp(r.key, "y", 1) == 0 && r.value_len == strlen(want) &&
              memcmp(r.value, want, r.value_len) == 0);
    CU_ASSERT_EQUAL(ks_driver_output_count(drv, NULL), 0); /* c8: rekeyed, by_num: none */
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "orders", "z", 1, "not json", 8, 7), KS_SKIP);
    ks_driver_close(drv);
}

void ks_test_register_global_joins(void)
{
    CU_pSuite s = CU_add_suite("global_joins", NULL, NULL);
    CU_add_test(s, "global_tables: in YAML, and its errors", test_yaml);
    CU_add_test(s, "a lookup key function of a plugin (KS_FN_KEY_MAPPER)", test_key_function);
    CU_add_test(s, "stream-global-table joins equal the reference model", test_model);
    CU_add_test(s, "a global table's store is read-only to plugins", test_read_only);
    CU_add_test(s, "lookup keys: record key after a key change (no repartition), JSON pointer",
                test_keys);
}
