/*
 * test_joins.c - a stream-table join end to end (docs/tables-and-joins.md),
 * exactly-once, against the real broker.
 *
 * Orders keyed by customer (4 partitions) join the table `customers` (its
 * topic, 4 partitions, is the table store's changelog) in a left and an
 * inner join with the built-in pair joiner. One scenario in phases, each
 * checked exactly in read_committed output (every order once in the left
 * join; once in the inner join when its customer exists; the right side as
 * the reference says):
 *   1. the table is written first (200 customers, 50 of them deleted again
 *      with tombstones), then orders; kill -9 mid-stream, restart: every
 *      order joined with version 1 or null;
 *   2. the table changes while orders flow (customers 0-49 to version 2,
 *      100-149 deleted), kill -9 mid-stream, restart: the right side is
 *      version 1 or the change, per customer never back to version 1 once
 *      the change was seen (updates in offset order, as of processing);
 *   3. clean stop, state directory deleted, restart: the store is restored
 *      from the table's topic alone and new orders see the final table.
 * A last case: a table whose topic has 3 partitions against 4 for the
 * orders stops the start with both counts.
 */
#include <CUnit/CUnit.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "itest.h"

#define CUSTOMERS 250 /* keys c0..c249; c200.. never exist */
#define MAX_ORDERS 40000

static char dir[256], app[128], orders[128], customers[128], out_left[128], out_inner[128];
static char yaml[512], logpath[512], state[400];
static long produced;
/* the reference: per customer, its version (0: absent) before phase 2
 * and after it (the table's final state) */
static int before[CUSTOMERS], after[CUSTOMERS];
static int phase2_from = -1; /* first order of phase 2 */

static int customer_of(long n) { return (int)((n * 7 + n / 250) % CUSTOMERS); }

static void make_order(int i, char *key, size_t klen, char *value, size_t vlen,
                       int32_t *partition, void *arg)
{
    (void)partition;
    long n = *(long *)arg + i;
    snprintf(key, klen, "c%d", customer_of(n));
    snprintf(value, vlen, "{\"o\":%ld}", n);
}

static void produce_orders(int n)
{
    long base = produced;
    CU_ASSERT_FATAL(it_produce(orders, n, make_order, &base) == 0);
    produced += n;
}

/* Customers from..to-1 at one version (it_produce writes no null values:
 * tombstones go through delete_customers). */
typedef struct change {
    int from, to, version;
} change;

static void make_customer(int i, char *key, size_t klen, char *value, size_t vlen,
                          int32_t *partition, void *arg)
{
    (void)partition;
    const change *c = arg;
    snprintf(key, klen, "c%d", c->from + i);
    snprintf(value, vlen, "{\"c\":%d,\"v\":%d}", c->from + i, c->version);
}

/* Tombstones for customers from..to-1, with the default partitioner. */
static void delete_customers(int from, int to)
{
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", it_bootstrap(), err, sizeof err);
    rd_kafka_conf_set(conf, "partitioner", "murmur2_random", err, sizeof err);
    rd_kafka_t *p = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    for (int k = from; k < to; k++) {
        char key[16];
        snprintf(key, sizeof key, "c%d", k);
        CU_ASSERT_EQUAL(rd_kafka_producev(p, RD_KAFKA_V_TOPIC(customers),
                                          RD_KAFKA_V_KEY(key, strlen(key)),
                                          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                          RD_KAFKA_V_END),
                        0);
    }
    CU_ASSERT_EQUAL(rd_kafka_flush(p, 30000), 0);
    rd_kafka_destroy(p);
}

static void set_customers(int from, int to, int version)
{
    change c = {from, to, version};
    if (version) {
        CU_ASSERT_FATAL(it_produce(customers, to - from, make_customer, &c) == 0);
    } else {
        delete_customers(from, to);
    }
}

/* One output: order number and the customer version on the right (0 for
 * null); -1 when the value is not what the pair joiner writes. */
static long parse_output(const it_msg *m, int *version, int *customer)
{
    json_t *v = m->value ? json_loadb(m->value, m->value_len, 0, NULL) : NULL;
    json_t *o = json_object_get(json_object_get(v, "left"), "o");
    json_t *r = json_object_get(v, "right");
    long n = json_is_integer(o) ? (long)json_integer_value(o) : -1;
    *version = json_is_null(r) ? 0 : (int)json_integer_value(json_object_get(r, "v"));
    int c = json_is_null(r) ? -1 : (int)json_integer_value(json_object_get(r, "c"));
    *customer = m->key && m->key[0] == 'c' ? atoi(m->key + 1) : -1;
    if (!r || (c >= 0 && c != *customer))
        n = -1; /* no right side, or another customer's */
    json_decref(v);
    return n;
}

/* Versions an order may see: before phase 2 the first table; during it
 * either side of the change. */
static int allowed(long n, int customer, int version)
{
    if (phase2_from < 0 || n < phase2_from)
        return version == before[customer];
    return version == before[customer] || version == after[customer];
}

/* Check one join's output: every expected order exactly once with an
 * allowed right side, per customer never back to the old version after
 * the new one. `inner`: orders without a customer are not expected (and
 * those whose customer was deleted in phase 2 may be either way). */
static int check_join(const char *topic, int inner, const char *phase)
{
    static unsigned char seen[MAX_ORDERS];
    static int changed[CUSTOMERS];
    memset(seen, 0, sizeof seen);
    memset(changed, 0, sizeof changed);
    long want = 0;
    for (long n = 0; n < produced; n++) {
        int c = customer_of(n);
        int sure = phase2_from < 0 || n < phase2_from ? before[c] : before[c] && after[c];
        want += !inner || sure;
    }
    it_msgs out = {0};
    it_consume(topic, (size_t)want, 2000, 120000, &out);
    long dup = 0, bad = 0, back = 0, missing = 0, extra = 0;
    for (size_t i = 0; i < out.count; i++) {
        int version, customer;
        long n = parse_output(&out.items[i], &version, &customer);
        if (n < 0 || n >= produced || customer != customer_of(n) ||
            !allowed(n, customer, version) || (inner && version == 0)) {
            bad++;
            continue;
        }
        if (seen[n]++)
            dup++;
        if (phase2_from >= 0 && before[customer] != after[customer]) {
            if (version == after[customer])
                changed[customer] = 1;
            else if (changed[customer])
                back++; /* the old value after the new one: time travel */
        }
    }
    for (long n = 0; n < produced; n++) {
        int c = customer_of(n);
        int sure = phase2_from < 0 || n < phase2_from ? before[c] != 0 : before[c] && after[c];
        if (!seen[n] && (!inner || sure))
            missing++;
        if (seen[n] && inner && !sure && (phase2_from < 0 || n < phase2_from))
            extra++;
    }
    printf("\n  [%s] %s: %zu outputs for %ld orders: %ld missing, %ld duplicated, %ld wrong, "
           "%ld unexpected, %ld back in time\n",
           phase, inner ? "inner" : "left", out.count, produced, missing, dup, bad, extra, back);
    CU_ASSERT_EQUAL(missing, 0);
    CU_ASSERT_EQUAL(dup, 0);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(extra, 0);
    CU_ASSERT_EQUAL(back, 0);
    it_msgs_free(&out);
    return (int)(missing + dup + bad + extra + back);
}

static void wait_left(long n)
{
    it_msgs out = {0};
    it_consume(out_left, (size_t)n, 300, 120000, &out);
    it_msgs_free(&out);
}

static void write_pipeline(const char *path, const char *table_topic)
{
    it_write_file(path,
                  "application: %s\n"
                  "kafka: { bootstrap: [%s] }\n"
                  "guarantee: exactly-once\n"
                  "commit_interval_ms: 100\n"
                  "workers: 2\n"
                  "state_dir: %s\n"
                  "plugin_path: [%s/plugins/.libs]\n"
                  "sources:\n"
                  "  orders: { topic: %s, key: string, value: json }\n"
                  "tables:\n"
                  "  customers: { topic: %s, key: string, value: json }\n"
                  "nodes:\n"
                  "  - { name: left, type: join, from: orders, table: customers,"
                  " config: { kind: left } }\n"
                  "  - { name: inner, type: join, from: orders, table: customers }\n"
                  "sinks:\n"
                  "  - { from: left, topic: %s, key: string, value: json, create: true, "
                  "partitions: 4 }\n"
                  "  - { from: inner, topic: %s, key: string, value: json, create: true, "
                  "partitions: 4 }\n",
                  app, it_bootstrap(), state, KS_TEST_BUILDDIR, orders, table_topic, out_left,
                  out_inner);
}

static void setup(void)
{
    it_tempdir(dir, sizeof dir);
    it_unique(app, sizeof app, "joins");
    it_unique(orders, sizeof orders, "orders");
    it_unique(customers, sizeof customers, "customers");
    it_unique(out_left, sizeof out_left, "enriched-left");
    it_unique(out_inner, sizeof out_inner, "enriched-inner");
    static const char *const compact[] = {"cleanup.policy", "compact", NULL};
    CU_ASSERT_FATAL(it_create_topic(orders, 4) == 0);
    CU_ASSERT_FATAL(it_create_topic_with(customers, 4, 1, compact) == 0);
    snprintf(state, sizeof state, "%s/state", dir);
    snprintf(yaml, sizeof yaml, "%s/joins.yaml", dir);
    snprintf(logpath, sizeof logpath, "%s/engine.log", dir);
    write_pipeline(yaml, customers);
}

static void test_table_first_kill9(void)
{
    setup();
    set_customers(0, 200, 1);
    set_customers(150, 200, 0);
    for (int k = 0; k < CUSTOMERS; k++)
        before[k] = after[k] = k < 150;
    produce_orders(6000);
    pid_t a = it_engine_start(yaml, "a", logpath);
    produce_orders(6000);
    it_sleep_ms(1500); /* mid-stream: some orders joined, some not */
    it_engine_kill(a);
    produce_orders(3000);
    a = it_engine_start(yaml, "a", logpath);
    wait_left(produced);
    CU_ASSERT(check_join(out_left, 0, "table first, kill -9") == 0);
    CU_ASSERT(check_join(out_inner, 1, "table first, kill -9") == 0);
    /* the process keeps running into the next phase */
    it_sleep_ms(200);
    phase2_from = (int)produced;
    for (int k = 0; k < 50; k++)
        after[k] = 2;
    for (int k = 100; k < 150; k++)
        after[k] = 0;
    produce_orders(3000);
    set_customers(0, 50, 2);
    produce_orders(3000);
    set_customers(100, 150, 0);
    produce_orders(3000);
    it_sleep_ms(800);
    it_engine_kill(a);
    produce_orders(2000);
    a = it_engine_start(yaml, "a", logpath);
    wait_left(produced);
    CU_ASSERT_EQUAL(it_engine_stop(a, 30000), 0);
    CU_ASSERT(check_join(out_left, 0, "table changing, kill -9") == 0);
    CU_ASSERT(check_join(out_inner, 1, "table changing, kill -9") == 0);
}

/* Table records the restores replayed: "restored store customers partition
 * P: N records replayed ..." lines. */
static long table_replayed(const char *path)
{
    FILE *f = fopen(path, "r");
    char line[4096];
    long sum = 0;
    while (f && fgets(line, sizeof line, f)) {
        const char *p = strstr(line, "restored store customers partition ");
        if (p && (p = strstr(p, ": ")) && strstr(p, " records replayed"))
            sum += strtol(p + 2, NULL, 10);
    }
    if (f)
        fclose(f);
    return sum;
}

static void test_restore_from_table_topic(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", state);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    FILE *f = fopen(logpath, "w");
    if (f)
        fclose(f);
    /* from here on every order sees the final table */
    for (int k = 0; k < CUSTOMERS; k++)
        before[k] = after[k];
    long from = produced;
    phase2_from = -1;
    pid_t a = it_engine_start(yaml, "a", logpath);
    produce_orders(3000);
    wait_left(produced);
    CU_ASSERT_EQUAL(it_engine_stop(a, 30000), 0);
    long replayed = table_replayed(logpath);
    printf("\n  [restore] %ld table records replayed from the table's topic\n", replayed);
    /* 350 table records written; compaction may have dropped some */
    CU_ASSERT(replayed >= 200);
    /* only the new orders are checked against the final table */
    it_msgs out = {0};
    it_consume(out_left, (size_t)produced, 2000, 60000, &out);
    long checked = 0, wrong = 0;
    for (size_t i = 0; i < out.count; i++) {
        int version, customer;
        long n = parse_output(&out.items[i], &version, &customer);
        if (n < from)
            continue;
        checked++;
        wrong += customer != customer_of(n) || version != after[customer];
    }
    printf("  [restore] %ld new orders, %ld joined with another value than the table's last\n",
           checked, wrong);
    CU_ASSERT_EQUAL(checked, produced - from);
    CU_ASSERT_EQUAL(wrong, 0);
    it_msgs_free(&out);
}

static void test_not_copartitioned(void)
{
    char topic[128], path[600], log2[600];
    it_unique(topic, sizeof topic, "customers3");
    CU_ASSERT_FATAL(it_create_topic(topic, 3) == 0);
    snprintf(path, sizeof path, "%s/bad.yaml", dir);
    snprintf(log2, sizeof log2, "%s/bad.log", dir);
    write_pipeline(path, topic);
    pid_t a = it_engine_start(path, "bad", log2);
    int st = it_engine_wait(a, 60000);
    if (st < 0)
        it_engine_kill(a);
    CU_ASSERT_NOT_EQUAL(st, 0);
    CU_ASSERT(it_log_count(log2, "table 'customers' is not co-partitioned with the sources: "
                                 "its topic") == 1);
    CU_ASSERT(it_log_count(log2, "has 3 partitions, the sources 4") == 1);
}

int main(void)
{
    static const it_case cases[] = {
        {"table first, then a changing table, kill -9 twice: exact joins", test_table_first_kill9},
        {"state wiped: the store restored from the table's topic", test_restore_from_table_topic},
        {"a table with another partition count is refused", test_not_copartitioned},
        {NULL, NULL}};
    return it_main("joins", cases);
}
