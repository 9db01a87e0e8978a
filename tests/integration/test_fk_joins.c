/*
 * test_fk_joins.c - the foreign-key table-table join end to end
 * (docs/tables-and-joins.md "Foreign-key joins"), exactly-once, against the
 * real broker.
 *
 * Orders (keys o0..o199, a `customer` member naming c0..c39, absent, or
 * null) join customers (c0..c39) in a left and an inner join (`type:
 * join.fk`), each through its topics <app>-<node>-subscription-registration
 * and -subscription-response. Both tables change at random
 * (values, foreign keys moved, tombstones on both sides) while the engine
 * is SIGKILLed just after a Kafka commit (before the LMDB one), restarted,
 * killed -9 mid-stream and restarted again. Read back with read_committed,
 * the last output per order of each join must equal the reference model's
 * join of the two tables as last written (no result or a tombstone where
 * the model has none), and no output, final or not, may pair an order with
 * a customer other than the one its value names.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "itest.h"

#define ORDERS 200
#define CUSTOMERS 40
#define NO_FK -1
#define NULL_FK -2

static char dir[256], app[128], orders[128], customers[128], out_left[128],
    out_inner[128], yaml[512], log_path[512];

/* The model: the last value written per key (version 0: absent). */
static int o_version[ORDERS], o_fk[ORDERS], c_version[CUSTOMERS];
static int version_seq;
static unsigned seed = 2131;

static rd_kafka_t *producer(void)
{
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", it_bootstrap(), err, sizeof err);
    rd_kafka_conf_set(conf, "partitioner", "murmur2_random", err, sizeof err);
    return rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
}

static void order_value(int k, char *buf, size_t len)
{
    if (o_fk[k] >= 0)
        snprintf(buf, len, "{\"o\":%d,\"v\":%d,\"customer\":\"c%d\"}", k, o_version[k],
                 o_fk[k]);
    else if (o_fk[k] == NULL_FK)
        snprintf(buf, len, "{\"o\":%d,\"v\":%d,\"customer\":null}", k, o_version[k]);
    else
        snprintf(buf, len, "{\"o\":%d,\"v\":%d}", k, o_version[k]);
}

/* n random changes of both tables, produced and flushed. */
static void change(int n)
{
    rd_kafka_t *p = producer();
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    for (int i = 0; i < n; i++) {
        int del = rand_r(&seed) % 7 == 0;
        char key[16], value[128];
        const char *topic;
        if (rand_r(&seed) % 3 == 0) {
            int c = rand_r(&seed) % CUSTOMERS;
            c_version[c] = del ? 0 : ++version_seq;
            snprintf(key, sizeof key, "c%d", c);
            snprintf(value, sizeof value, "{\"c\":%d,\"v\":%d}", c, c_version[c]);
            topic = customers;
        } else {
            int k = rand_r(&seed) % ORDERS, r = rand_r(&seed) % 10;
            o_version[k] = del ? 0 : ++version_seq;
            if (!(r < 4 && o_fk[k] >= 0))
                o_fk[k] = r == 4 ? NO_FK : r == 5 ? NULL_FK : rand_r(&seed) % CUSTOMERS;
            snprintf(key, sizeof key, "o%d", k);
            order_value(k, value, sizeof value);
            topic = orders;
        }
        int rc = rd_kafka_producev(p, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(key, strlen(key)),
                                   RD_KAFKA_V_VALUE(del ? NULL : value, del ? 0 : strlen(value)),
                                   RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
        CU_ASSERT_EQUAL(rc, 0);
        rd_kafka_poll(p, 0);
    }
    CU_ASSERT_EQUAL(rd_kafka_flush(p, 30000), 0);
    rd_kafka_destroy(p);
}

/* The model's join of order k into buf; NULL when it has none. */
static const char *model_join(int k, int left_join, char *buf, size_t len)
{
    if (!o_version[k])
        return NULL;
    int f = o_fk[k], has_r = f >= 0 && c_version[f];
    if (!has_r && !left_join)
        return NULL;
    char lv[128], rv[64] = "null";
    order_value(k, lv, sizeof lv);
    if (has_r)
        snprintf(rv, sizeof rv, "{\"c\":%d,\"v\":%d}", f, c_version[f]);
    snprintf(buf, len, "{\"left\":%s,\"right\":%s}", lv, rv);
    return buf;
}

/* 1 when output value v pairs an order with the customer its `customer`
 * member names (or with none: "right":null), as every result must, final
 * or not. */
static int consistent(const char *v, int left_join)
{
    int fk = -1, c = -1;
    const char *p = strstr(v, "\"customer\":\"c");
    if (p)
        fk = atoi(p + strlen("\"customer\":\"c"));
    const char *r = strstr(v, "\"right\":");
    if (!r)
        return 0;
    if (strncmp(r + 8, "null", 4) == 0)
        return left_join;
    if (sscanf(r + 8, "{\"c\":%d,", &c) != 1)
        return 0;
    return fk == c;
}

/* Orders whose last read_committed output in topic differs from the model
 * (printing the first few); *bad gets the outputs, final or not, that pair
 * an order with a customer it does not name. */
static int wrong_keys(const char *topic, int left_join, int verbose, long *bad)
{
    it_msgs out = {0};
    it_consume(topic, 1000000, 300, 3000, &out);
    const it_msg *last[ORDERS] = {0};
    *bad = 0;
    for (size_t i = 0; i < out.count; i++) {
        const it_msg *m = &out.items[i];
        if (m->value && !consistent(m->value, left_join))
            (*bad)++;
        int k = m->key && m->key[0] == 'o' ? atoi(m->key + 1) : -1;
        if (k >= 0 && k < ORDERS)
            last[k] = m;
    }
    int wrong = 0;
    for (int k = 0; k < ORDERS; k++) {
        char buf[256];
        const char *want = model_join(k, left_join, buf, sizeof buf);
        const char *got = last[k] ? last[k]->value : NULL;
        if ((want == NULL) != (got == NULL) || (want && strcmp(want, got) != 0)) {
            if (verbose && wrong < 5)
                printf("\n  %s o%d: want %s, got %s", left_join ? "left" : "inner", k,
                       want ? want : "none", got ? got : "none");
            wrong++;
        }
    }
    it_msgs_free(&out);
    return wrong;
}

/* Wait until both joins' outputs equal the model (up to max_ms); *bad:
 * inconsistent outputs of both. */
static int converged(int max_ms, long *bad)
{
    int64_t end = it_now_ms() + max_ms;
    long b1 = 0, b2 = 0;
    int ok = 0;
    while (!ok && it_now_ms() < end) {
        ok = wrong_keys(out_left, 1, 0, &b1) == 0 && wrong_keys(out_inner, 0, 0, &b2) == 0;
        if (!ok)
            it_sleep_ms(500);
    }
    if (!ok)
        ok = wrong_keys(out_left, 1, 1, &b1) == 0 && wrong_keys(out_inner, 0, 1, &b2) == 0;
    *bad = b1 + b2;
    return ok;
}

static void setup(void)
{
    it_tempdir(dir, sizeof dir);
    it_unique(app, sizeof app, "fkj");
    it_unique(orders, sizeof orders, "orders");
    it_unique(customers, sizeof customers, "customers");
    it_unique(out_left, sizeof out_left, "fk-left");
    it_unique(out_inner, sizeof out_inner, "fk-inner");
    static const char *const compact[] = {"cleanup.policy", "compact", NULL};
    CU_ASSERT_FATAL(it_create_topic_with(orders, 4, 1, compact) == 0);
    CU_ASSERT_FATAL(it_create_topic_with(customers, 4, 1, compact) == 0);
    for (int k = 0; k < ORDERS; k++)
        o_fk[k] = NO_FK;
    snprintf(yaml, sizeof yaml, "%s/fk.yaml", dir);
    snprintf(log_path, sizeof log_path, "%s/fk.log", dir);
    it_write_file(yaml,
                  "application: %s\n"
                  "kafka: { bootstrap: [%s] }\n"
                  "commit_interval_ms: 100\n"
                  "state_dir: %s/state\n"
                  "plugin_path: [%s/plugins/.libs]\n"
                  "tables:\n" /* two tables, no stream: a pipeline of tables alone */
                  "  orders: { topic: %s, key: string, value: json }\n"
                  "  customers: { topic: %s, key: string, value: json }\n"
                  "nodes:\n"
                  "  - { name: fk_left, type: join.fk, from: orders,\n"
                  "      config: { right: customers, foreign_key: /customer, kind: left } }\n"
                  "  - { name: fk_inner, type: join.fk, from: orders,\n"
                  "      config: { right: customers, foreign_key: /customer } }\n"
                  "sinks:\n"
                  "  - { from: fk_left, topic: %s, key: string, value: json, create: true,"
                  " partitions: 4 }\n"
                  "  - { from: fk_inner, topic: %s, key: string, value: json, create: true,"
                  " partitions: 4 }\n",
                  app, it_bootstrap(), dir, KS_TEST_BUILDDIR, orders, customers,
                  out_left, out_inner);
}

static void test_kill9(void)
{
    setup();
    change(400);
    pid_t e = it_engine_start_env(yaml, "fk", log_path, "KS_CRASH_AT=after-kafka-commit:3");
    int st = -1;
    for (int64_t end = it_now_ms() + 60000; st < 0 && it_now_ms() < end;) {
        change(20);
        st = it_engine_wait(e, 200);
    }
    if (st < 0)
        it_engine_kill(e);
    CU_ASSERT_EQUAL(st, 137);
    e = it_engine_start(yaml, "fk", log_path);
    for (int i = 0; i < 10; i++) {
        change(40);
        it_sleep_ms(100);
    }
    it_engine_kill(e); /* kill -9 mid-stream */
    change(300);
    e = it_engine_start(yaml, "fk", log_path);
    for (int i = 0; i < 5; i++) {
        change(40);
        it_sleep_ms(100);
    }
    long bad = 0;
    int ok = converged(90000, &bad);
    CU_ASSERT_EQUAL(bad, 0);
    char topic[300];
    snprintf(topic, sizeof topic, "%s-fk_left-subscription-registration", app);
    it_msgs reg = {0};
    it_consume(topic, 1, 200, 3000, &reg); /* purged after commits: may be empty */
    it_msgs_free(&reg);
    CU_ASSERT(it_log_count(log_path, "subscription-response") >= 1);
    CU_ASSERT(ok);
    CU_ASSERT_EQUAL(it_engine_stop(e, 30000), 0);
    printf("\n  [fk] %d changes, final joins %s the model, %ld outputs pairing an order "
           "with a customer it does not name",
           version_seq, ok ? "equal" : "DIFFER FROM", bad);
}

int main(void)
{
    static const it_case cases[] = {
        {"foreign-key left and inner joins, SIGKILL at the commit and kill -9: final "
         "results equal the model",
         test_kill9},
        {NULL, NULL}};
    return it_main("fk_joins", cases);
}
