/*
 * test_global_joins.c - a stream-global-table join end to end
 * (docs/tables-and-joins.md, global tables), exactly-once, against the
 * real broker.
 *
 * Orders keyed by order id (2 partitions) carry their customer id in the
 * value; a left join with `key: /customer` looks each up in the global
 * table `customers`, whose topic has 3 partitions (no co-partitioning).
 * Customers c0..c99 exist, c100..c119 never do. The reference: the
 * version every customer has when an order is produced, all table writes
 * being done (and, while the engine runs, applied) before the orders
 * that must see them. Read back with read_committed, every order must be
 * there exactly once, with exactly the customer version of the model.
 *   1. the table written first; orders, kill -9 once they are joined,
 *      more orders, restart (the restart finds the global store
 *      complete: 0 records replayed);
 *   2. while the engine runs, c0..c49 updated and c50..c59 deleted (the
 *      metric kstreams_global_records_total says the thread read the 60,
 *      kstreams_global_lag that it has none left);
 *      the orders after that see the new versions; kill -9 200 ms after
 *      they are produced (how many were committed is printed), restart;
 *   3. SIGKILL in the processing, after a Kafka commit and before its LMDB
 *      commit (KS_CRASH_AT=after-kafka-commit:4), restart;
 *   4. the table topic's records deleted while the engine is away, c0..c49
 *      written again: the store is wiped and rebuilt;
 *   5. the table topic deleted and created again while the engine is away,
 *      c0..c9 written: the store is wiped and rebuilt.
 * Last, a global table whose topic does not exist stops the start.
 */
#include <CUnit/CUnit.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "itest.h"

#define CUSTOMERS 120 /* c100.. never exist */
#define MAX_ORDERS 40000 /* about 20 000 used */

static char dir[256], app[128], orders[128], customers[128], out[128], yaml[512], log_a[512];
static long produced;
static int metrics_port;
static int version[CUSTOMERS];          /* 0: absent */
static unsigned char want[MAX_ORDERS];  /* the version order n must see */

static int customer_of(long n) { return (int)((n * 7 + n / 120) % CUSTOMERS); }

static void make_order(int i, char *key, size_t klen, char *value, size_t vlen,
                       int32_t *partition, void *arg)
{
    (void)partition;
    long n = *(long *)arg + i;
    snprintf(key, klen, "o%ld", n);
    snprintf(value, vlen, "{\"o\":%ld,\"customer\":\"c%d\"}", n, customer_of(n));
}

static void produce_orders(int n)
{
    long base = produced;
    CU_ASSERT_FATAL(produced + n <= MAX_ORDERS);
    for (long i = base; i < base + n; i++)
        want[i] = (unsigned char)version[customer_of(i)];
    CU_ASSERT_FATAL(it_produce(orders, n, make_order, &base) == 0);
    produced += n;
}

static void make_customer(int i, char *key, size_t klen, char *value, size_t vlen,
                          int32_t *partition, void *arg)
{
    (void)partition;
    int k = *(int *)arg + i;
    snprintf(key, klen, "c%d", k);
    snprintf(value, vlen, "{\"c\":%d,\"v\":%d}", k, version[k]);
}

static void produce_tombstones(int from, int to)
{
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", it_bootstrap(), err, sizeof err);
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

/* A new version of customers from..to-1 (v: the version; 0 deletes). */
static void set_customers(int from, int to, int v)
{
    for (int k = from; k < to; k++)
        version[k] = v;
    if (v == 0)
        produce_tombstones(from, to);
    else
        CU_ASSERT_FATAL(it_produce(customers, to - from, make_customer, &from) == 0);
}

/* Every order once, with the customer version of the model. */
static void check(const char *phase)
{
    static unsigned char seen[MAX_ORDERS];
    memset(seen, 0, sizeof seen);
    it_msgs got = {0};
    it_consume(out, (size_t)produced, 1500, 60000, &got);
    long dup = 0, wrong = 0, missing = 0;
    for (size_t i = 0; i < got.count; i++) {
        const it_msg *m = &got.items[i];
        json_t *v = m->value ? json_loadb(m->value, m->value_len, 0, NULL) : NULL;
        json_t *o = json_object_get(json_object_get(v, "left"), "o");
        json_t *r = json_object_get(v, "right");
        long n = json_is_integer(o) ? (long)json_integer_value(o) : -1;
        int seen_v = json_is_null(r) ? 0 : (int)json_integer_value(json_object_get(r, "v"));
        int c = json_is_null(r) ? customer_of(n) : (int)json_integer_value(json_object_get(r, "c"));
        if (n < 0 || n >= produced || !r || c != customer_of(n) || seen_v != want[n])
            wrong++;
        else if (seen[n]++)
            dup++;
        json_decref(v);
    }
    for (long n = 0; n < produced; n++)
        missing += !seen[n];
    printf("[%s: %zu outputs for %ld orders; %ld missing, %ld twice, %ld wrong] ", phase,
           got.count, produced, missing, dup, wrong);
    CU_ASSERT_EQUAL(missing, 0);
    CU_ASSERT_EQUAL(dup, 0);
    CU_ASSERT_EQUAL(wrong, 0);
    it_msgs_free(&got);
}

static void setup(void)
{
    it_tempdir(dir, sizeof dir);
    it_unique(app, sizeof app, "gjoins");
    it_unique(orders, sizeof orders, "orders");
    it_unique(customers, sizeof customers, "customers");
    it_unique(out, sizeof out, "enriched");
    static const char *const compact[] = {"cleanup.policy", "compact", NULL};
    CU_ASSERT_FATAL(it_create_topic(orders, 2) == 0);
    CU_ASSERT_FATAL(it_create_topic_with(customers, 3, 1, compact) == 0);
    metrics_port = it_free_port();
    snprintf(yaml, sizeof yaml, "%s/g.yaml", dir);
    snprintf(log_a, sizeof log_a, "%s/g.log", dir);
    it_write_file(yaml,
                  "application: %s\n"
                  "kafka: { bootstrap: [%s] }\n"
                  "guarantee: exactly-once\n"
                  "commit_interval_ms: 100\n"
                  "workers: 2\n"
                  "metrics: 127.0.0.1:%d\n"
                  "state_dir: %s/state\n"
                  "plugin_path: [%s/plugins/.libs]\n"
                  "sources:\n"
                  "  orders: { topic: %s, key: string, value: json }\n"
                  "global_tables:\n"
                  "  customers: { topic: %s, key: string, value: json }\n"
                  "nodes:\n"
                  "  - { name: enriched, type: join, from: orders, table: customers,\n"
                  "      config: { kind: left, key: /customer } }\n"
                  "sinks:\n"
                  "  - { from: enriched, topic: %s, key: string, value: json, create: true,"
                  " partitions: 2 }\n",
                  app, it_bootstrap(), metrics_port, dir, KS_TEST_BUILDDIR, orders, customers,
                  out);
}

static pid_t engine;

/* Some, not all, orders were joined and committed before the kill. */
static void check_mid_stream(void)
{
    it_msgs got = {0};
    it_consume(out, (size_t)produced, 500, 5000, &got);
    printf("[%zu of %ld committed at the kill] ", got.count, produced);
    CU_ASSERT(got.count > 0 && (long)got.count < produced);
    it_msgs_free(&got);
}

static void test_table_first_kill9(void)
{
    setup();
    set_customers(0, 100, 1);
    produce_orders(3000);
    engine = it_engine_start(yaml, "g", log_a);
    produce_orders(3000);
    it_msgs first = {0}; /* wait for the first committed outputs, then kill */
    it_consume(out, 1, 100, 60000, &first);
    it_msgs_free(&first);
    it_engine_kill(engine);
    produce_orders(1000);
    check_mid_stream();
    CU_ASSERT(it_log_count(log_a, "global tables restored: 3 partitions, 100 records") == 1);
    engine = it_engine_start(yaml, "g", log_a);
    check("table first, kill -9");
    /* the store outlived the process: nothing to replay */
    CU_ASSERT(it_log_count(log_a, "global tables restored: 3 partitions, 0 records") == 1);
}

static void test_updated_while_running(void)
{
    set_customers(0, 50, 2);
    set_customers(50, 60, 0);
    it_sleep_ms(2000); /* the global thread follows within ~100 ms */
    char *text = it_metrics_scrape(metrics_port); /* this process read the 60 changes */
    double n = it_metrics_sum(text ? text : "", "kstreams_global_records_total",
                              "table=\"customers\"", NULL);
    printf("[global records read since the restart: %.0f] ", n);
    CU_ASSERT_EQUAL(n, 60);
    int samples = 0; /* caught up: nothing left to apply, one gauge per table */
    double lag = it_metrics_sum(text ? text : "", "kstreams_global_lag", "table=\"customers\"",
                                &samples);
    printf("[global lag: %.0f] ", lag);
    CU_ASSERT_EQUAL(samples, 1);
    CU_ASSERT_EQUAL(lag, 0);
    free(text);
    produce_orders(5000);
    it_sleep_ms(200);
    it_engine_kill(engine);
    it_msgs got = {0}; /* how far it was: said, not asserted (a race) */
    it_consume(out, (size_t)produced, 500, 5000, &got);
    printf("[%zu of %ld committed at the kill] ", got.count, produced);
    it_msgs_free(&got);
    produce_orders(1000);
    engine = it_engine_start(yaml, "g", log_a);
    check("updated while running, kill -9");
    /* the running thread had applied the 60 changes: the restart found
     * its store complete */
    CU_ASSERT(it_log_count(log_a, "global tables restored: 3 partitions, 0 records") == 2);
    CU_ASSERT_EQUAL(it_engine_stop(engine, 30000), 0);
}

/* SIGKILL inside the processing: after the 4th Kafka commit, before its
 * LMDB commit (the engine's crash point), while orders flow. */
static void test_crash_in_processing(void)
{
    pid_t e = it_engine_start_env(yaml, "g", log_a, "KS_CRASH_AT=after-kafka-commit:4");
    int st = -1;
    for (int64_t end = it_now_ms() + 60000; st < 0 && it_now_ms() < end;) {
        produce_orders(300);
        st = it_engine_wait(e, 200);
    }
    if (st < 0)
        it_engine_kill(e);
    CU_ASSERT_EQUAL(st, 137); /* 128 + SIGKILL: the point was reached */
    e = it_engine_start(yaml, "g", log_a);
    produce_orders(500);
    check("SIGKILL after a Kafka commit");
    CU_ASSERT_EQUAL(it_engine_stop(e, 30000), 0);
}

/* The global topic now holds c0..c(n-1) only, at version v: run the
 * engine over `orders` more orders, which must see just those (check), and
 * find the log line `wiped` (the table wiped) once in this start's log. */
static void rebuilt_from(int n, int v, int orders, const char *phase, const char *wiped_line)
{
    for (int k = 0; k < CUSTOMERS; k++)
        version[k] = 0; /* gone with the deleted records */
    set_customers(0, n, v);
    produce_orders(orders);
    FILE *f = fopen(log_a, "w"); /* this start's lines only */
    if (f)
        fclose(f);
    pid_t e = it_engine_start(yaml, "g", log_a);
    check(phase);
    CU_ASSERT_EQUAL(it_engine_stop(e, 30000), 0);
    int wiped = it_log_count(log_a, wiped_line);
    printf("[table wiped %d time(s)] ", wiped);
    CU_ASSERT_EQUAL(wiped, 1);
}

/* While the engine is away c60..c69 are deleted (tombstones), then every
 * record of the global topic is deleted (DeleteRecords; retention does
 * the same), tombstones included, and c0..c49 are written again: the
 * store's positions are below the new log starts, so the table is wiped
 * and read again from the beginning, as Kafka Streams does. It then holds
 * c0..c49 only, as a new process's would; read on top of the old store,
 * c60..c99 would still be there (version 1, the deleted ones too) and
 * their orders would join them. */
static void test_topic_records_deleted(void)
{
    int64_t hi[3];
    set_customers(60, 70, 0);
    CU_ASSERT_FATAL(it_empty_changelog(customers, 3, hi) == 0);
    rebuilt_from(50, 3, 2000, "the topic's records deleted while away",
                 "(records deleted): table wiped");
}

/* The global topic deleted and created again while the engine is away,
 * with c0..c9 in it: the store's positions are past the new topic's ends,
 * so the table is wiped and read from the beginning; it then holds c0..c9
 * only (kept, c10..c49 would still join their orders). */
static void test_topic_created_again(void)
{
    static const char *const compact[] = {"cleanup.policy", "compact", NULL};
    CU_ASSERT_FATAL(it_delete_topic(customers) == 0);
    CU_ASSERT_FATAL(it_create_topic_with(customers, 3, 1, compact) == 0);
    rebuilt_from(10, 4, 1000, "the topic created again while away",
                 "(the topic created again, or records lost): table wiped");
}

/* A global table whose topic does not exist (and no create: true) stops
 * the start with a message naming it, before any task runs. */
static void test_missing_topic(void)
{
    char path[300], log2[300], nosuch[128];
    it_unique(nosuch, sizeof nosuch, "nosuch");
    snprintf(path, sizeof path, "%s/missing.yaml", dir);
    snprintf(log2, sizeof log2, "%s/missing.log", dir);
    it_write_file(path,
                  "application: %s-missing\n"
                  "kafka: { bootstrap: [%s] }\n"
                  "state_dir: %s/state-missing\n"
                  "plugin_path: [%s/plugins/.libs]\n"
                  "sources: { orders: { topic: %s, key: string, value: json } }\n"
                  "global_tables: { customers: { topic: %s } }\n"
                  "nodes: [ { name: j, type: join, from: orders, table: customers,"
                  " config: { key: /customer } } ]\n"
                  "sinks: [ { from: j, topic: %s, key: string, value: json } ]\n",
                  app, it_bootstrap(), dir, KS_TEST_BUILDDIR, orders, nosuch, out);
    pid_t e = it_engine_start(path, "m", log2);
    int st = it_engine_wait(e, 30000);
    if (st < 0)
        it_engine_kill(e);
    CU_ASSERT(st > 0 && st < 128);
    char want[300];
    snprintf(want, sizeof want, "global table topic '%s' does not exist", nosuch);
    CU_ASSERT(it_log_count(log2, want) >= 1);
    CU_ASSERT_EQUAL(it_log_count(log2, "task 0 started"), 0);
}

int main(void)
{
    static const it_case cases[] = {
        {"the global table first, kill -9: exact joins", test_table_first_kill9},
        {"the global table updated while running is seen, kill -9",
         test_updated_while_running},
        {"SIGKILL in the processing, after a Kafka commit", test_crash_in_processing},
        {"the global topic's records deleted while away: the table is rebuilt",
         test_topic_records_deleted},
        {"the global topic created again while away: the table is rebuilt",
         test_topic_created_again},
        {"a global table without its topic stops the start", test_missing_topic},
        {NULL, NULL}};
    return it_main("global_joins", cases);
}
