/*
 * test_joins.c - a stream-table join end to end (docs/tables-and-joins.md),
 * exactly-once, against the real broker.
 *
 * Orders keyed by customer (4 partitions) join the table `customers` (its
 * topic, 4 partitions, is the table store's changelog) in a left and an
 * inner join with the built-in pair joiner, while the table changes and
 * processes die. The reference: per customer the history of its versions
 * (each update a new version number, a tombstone 0), and per order the
 * version the table had settled at when the order was produced (all table
 * writes done before an engine started: its tasks catch up with the table
 * before any order). Read back with read_committed, each join's output
 * must hold every order once (the inner join: once when every version it
 * may see exists, never when none does), its right side a version of the
 * order's customer at or after the settled one, and per customer the
 * versions seen never going back. Phases, checked after each:
 *   1. the table written first (200 customers, 50 deleted again), orders,
 *      kill -9 mid-stream, restart;
 *   2. the table changing while orders flow, kill -9, restart;
 *   3. SIGKILL after the Kafka commit, before the LMDB one, with table
 *      updates in the batches, restart;
 *   4. a second process joins while orders and updates flow, and leaves;
 *   5. the state directory deleted, SIGKILL during the restore of the
 *      table, restart: the store rebuilt from the table's topic alone
 *      (new orders see exactly the last versions).
 * Then another application joins customers with an empty table `accounts`
 * (join.tables, outer) from the start of the table's history, SIGKILLed
 * after a Kafka commit and with kill -9 while customers change: every
 * change gives exactly one output, in the order written. Then a third
 * application joins every order with the count of its customer's orders
 * (a count node read as a table, `table: order_counts`), and customers
 * with that count (join.tables, outer), SIGKILLed after a Kafka commit and
 * with kill -9: every order once, with the count up to and including it;
 * one table-table output per change, the last per customer the join of
 * its last version and whole count. A last case: a table
 * whose topic has 3 partitions against 4 for the orders stops the start
 * with both counts.
 */
#include <CUnit/CUnit.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "itest.h"

#define CUSTOMERS 250 /* keys c0..c249; c200.. never exist */
#define MAX_ORDERS 60000
#define MAX_VERSIONS 64

static char dir[256], app[128], orders[128], customers[128], accounts[128], out_left[128],
    out_inner[128], out_profile[128];
static char yaml_a[512], yaml_b[512], log_a[512], log_b[512], state_a[400];
static long produced;
/* per customer: its versions in the order written (index 0: absent at
 * the start; a tombstone is 0, an update its own index) */
static int hist[CUSTOMERS][MAX_VERSIONS], hcount[CUSTOMERS];
static int settled[CUSTOMERS];        /* index every new order sees at least */
static unsigned char order_lo[MAX_ORDERS]; /* settled[] when it was produced */

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
    CU_ASSERT_FATAL(produced + n <= MAX_ORDERS);
    for (long i = base; i < base + n; i++)
        order_lo[i] = (unsigned char)settled[customer_of(i)];
    CU_ASSERT_FATAL(it_produce(orders, n, make_order, &base) == 0);
    produced += n;
}

/* All table writes so far are done: an engine started from now on
 * catches up with them before it joins any order. */
static void settle(void)
{
    for (int k = 0; k < CUSTOMERS; k++)
        settled[k] = hcount[k] - 1;
}

static void make_customer(int i, char *key, size_t klen, char *value, size_t vlen,
                          int32_t *partition, void *arg)
{
    (void)partition;
    int k = *(int *)arg + i;
    snprintf(key, klen, "c%d", k);
    snprintf(value, vlen, "{\"c\":%d,\"v\":%d}", k, hist[k][hcount[k] - 1]);
}

/* Tombstones for customers from..to-1, with the default partitioner. */
static void produce_tombstones(int from, int to)
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

/* A new version of customers from..to-1 (delete: a tombstone). */
static void set_customers(int from, int to, int delete)
{
    for (int k = from; k < to; k++) {
        CU_ASSERT_FATAL(hcount[k] < MAX_VERSIONS);
        hist[k][hcount[k]] = delete ? 0 : hcount[k];
        hcount[k]++;
    }
    if (delete) {
        produce_tombstones(from, to);
    } else {
        CU_ASSERT_FATAL(it_produce(customers, to - from, make_customer, &from) == 0);
    }
}

/* One output: order number, the key's customer and the version on the
 * right (0 for null); -1 when the value is not what the pair joiner
 * writes, or the right side is another customer's. */
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
        n = -1;
    json_decref(v);
    return n;
}

/* What the inner join owes order n: 1 it must be there (every version it
 * may see exists), 0 it must not (none does), -1 either. */
static int inner_owed(long n)
{
    int k = customer_of(n), some = 0, all = 1;
    for (int i = order_lo[n]; i < hcount[k]; i++) {
        some |= hist[k][i] != 0;
        all &= hist[k][i] != 0;
    }
    return all ? 1 : some ? -1 : 0;
}

typedef struct tally {
    long missing, dup, bad, back, extra;
} tally;

/* Account for one output of order n with `version` of customer k; at[]
 * is the history index each customer's outputs reached so far. */
static void check_one(long n, int k, int version, int inner, int *at, unsigned char *seen,
                      tally *t)
{
    if (n < 0 || n >= produced || k != customer_of(n) || (inner && version == 0)) {
        t->bad++;
        return;
    }
    if (seen[n]++)
        t->dup++;
    if (inner && inner_owed(n) == 0)
        t->extra++;
    int from = at[k] > order_lo[n] ? at[k] : order_lo[n];
    for (int i = from; i < hcount[k]; i++)
        if (hist[k][i] == version) {
            at[k] = i;
            return;
        }
    for (int i = 0; i < from; i++)
        if (hist[k][i] == version) {
            t->back++; /* older than settled, or than what came before */
            return;
        }
    t->bad++;
}

static int check_join(const char *topic, int inner, const char *phase)
{
    static unsigned char seen[MAX_ORDERS];
    int at[CUSTOMERS] = {0};
    memset(seen, 0, sizeof seen);
    long want = 0; /* what must be there; the rest came in the same transactions */
    for (long n = 0; n < produced; n++)
        want += !inner || inner_owed(n) == 1;
    it_msgs out = {0};
    it_consume(topic, (size_t)want, 500, 120000, &out);
    tally t = {0};
    for (size_t i = 0; i < out.count; i++) {
        int version, customer;
        long n = parse_output(&out.items[i], &version, &customer);
        check_one(n, customer, version, inner, at, seen, &t);
    }
    for (long n = 0; n < produced; n++)
        t.missing += !seen[n] && (!inner || inner_owed(n) == 1);
    printf("\n  [%s] %s: %zu outputs for %ld orders: %ld missing, %ld duplicated, %ld wrong, "
           "%ld unexpected, %ld back in time",
           phase, inner ? "inner" : "left", out.count, produced, t.missing, t.dup, t.bad,
           t.extra, t.back);
    CU_ASSERT_EQUAL(t.missing, 0);
    CU_ASSERT_EQUAL(t.dup, 0);
    CU_ASSERT_EQUAL(t.bad, 0);
    CU_ASSERT_EQUAL(t.extra, 0);
    CU_ASSERT_EQUAL(t.back, 0);
    it_msgs_free(&out);
    return (int)(t.missing + t.dup + t.bad + t.extra + t.back);
}

static void check_both(const char *phase)
{
    CU_ASSERT(check_join(out_left, 0, phase) == 0);
    CU_ASSERT(check_join(out_inner, 1, phase) == 0);
}

static void wait_left(long n)
{
    it_msgs out = {0};
    it_consume(out_left, (size_t)n, 300, 120000, &out);
    it_msgs_free(&out);
}

static void write_pipeline(const char *path, const char *state, const char *table_topic)
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

static void clear_log(const char *path)
{
    FILE *f = fopen(path, "w");
    if (f)
        fclose(f);
}

static void setup(void)
{
    it_tempdir(dir, sizeof dir);
    it_unique(app, sizeof app, "joins");
    it_unique(orders, sizeof orders, "orders");
    it_unique(customers, sizeof customers, "customers");
    it_unique(out_left, sizeof out_left, "enriched-left");
    it_unique(out_inner, sizeof out_inner, "enriched-inner");
    it_unique(accounts, sizeof accounts, "accounts");
    it_unique(out_profile, sizeof out_profile, "profiles");
    static const char *const compact[] = {"cleanup.policy", "compact", NULL};
    CU_ASSERT_FATAL(it_create_topic(orders, 4) == 0);
    CU_ASSERT_FATAL(it_create_topic_with(customers, 4, 1, compact) == 0);
    char state[400];
    snprintf(state_a, sizeof state_a, "%s/state-a", dir);
    snprintf(state, sizeof state, "%s/state-b", dir);
    snprintf(yaml_a, sizeof yaml_a, "%s/a.yaml", dir);
    snprintf(yaml_b, sizeof yaml_b, "%s/b.yaml", dir);
    snprintf(log_a, sizeof log_a, "%s/a.log", dir);
    snprintf(log_b, sizeof log_b, "%s/b.log", dir);
    write_pipeline(yaml_a, state_a, customers);
    write_pipeline(yaml_b, state, customers);
    for (int k = 0; k < CUSTOMERS; k++)
        hcount[k] = 1; /* hist[k][0] = 0: absent */
}

static pid_t engine_a;

static void test_table_first_kill9(void)
{
    setup();
    set_customers(0, 200, 0);
    set_customers(150, 200, 1);
    settle();
    produce_orders(4000);
    engine_a = it_engine_start(yaml_a, "a", log_a);
    produce_orders(4000);
    it_sleep_ms(1500); /* mid-stream: some orders joined, some not */
    it_engine_kill(engine_a);
    produce_orders(2000);
    engine_a = it_engine_start(yaml_a, "a", log_a);
    wait_left(produced);
    check_both("table first, kill -9");
}

static void test_table_changing_kill9(void)
{
    produce_orders(2000);
    set_customers(0, 50, 0);
    produce_orders(2000);
    set_customers(100, 150, 1);
    produce_orders(2000);
    it_sleep_ms(800);
    it_engine_kill(engine_a);
    produce_orders(2000);
    settle();
    engine_a = it_engine_start(yaml_a, "a", log_a);
    wait_left(produced);
    CU_ASSERT_EQUAL(it_engine_stop(engine_a, 30000), 0);
    check_both("table changing, kill -9");
}

/* SIGKILL between the Kafka and the LMDB commit (engine/base/fault.h)
 * while table updates are in the batches: the table's committed offsets
 * are then ahead of its store until the restore (a kill before the Kafka
 * commit is what the kill -9 phases do). */
static void test_crash_points(void)
{
    static const char *const points[] = {"after-kafka-commit"};
    for (size_t i = 0; i < sizeof points / sizeof points[0]; i++) {
        char env[128];
        snprintf(env, sizeof env, "KS_CRASH_AT=%s:4", points[i]);
        pid_t a = it_engine_start_env(yaml_a, "a", log_a, env);
        int st = -1, round = 0;
        for (int64_t end = it_now_ms() + 60000; st < 0 && it_now_ms() < end; round++) {
            produce_orders(300);
            set_customers(50 + round % 50, 51 + round % 50, round % 7 == 6);
            st = it_engine_wait(a, 200);
        }
        if (st < 0)
            it_engine_kill(a);
        printf("\n  crash at %s: exit %d", points[i], st);
        CU_ASSERT_EQUAL(st, 137); /* 128 + SIGKILL: the point was reached */
        settle();
        a = it_engine_start(yaml_a, "a", log_a);
        produce_orders(500);
        wait_left(produced);
        CU_ASSERT_EQUAL(it_engine_stop(a, 30000), 0);
    }
    check_both("crash at the commit");
}

/* A second process takes half of the tasks (their tables restored from
 * the topic into its own state directory) and gives them back. */
static void test_two_processes(void)
{
    clear_log(log_b);
    pid_t a = it_engine_start(yaml_a, "a", log_a);
    produce_orders(2000);
    pid_t b = it_engine_start(yaml_b, "b", log_b);
    for (int round = 0; round < 20; round++) {
        produce_orders(200);
        set_customers(round * 5, round * 5 + 5, round % 4 == 3);
        it_sleep_ms(150);
    }
    /* until b holds tasks: its join and the rebalance may take longer than
     * the rounds on a loaded machine */
    for (int i = 0; i < 600 && it_log_count(log_b, "restored store customers") == 0; i++)
        it_sleep_ms(100);
    CU_ASSERT_EQUAL(it_engine_stop(b, 30000), 0);
    CU_ASSERT(it_log_count(log_b, "task ") > 0 && it_log_count(log_b, "restored store customers") > 0);
    produce_orders(2000);
    settle();
    wait_left(produced);
    CU_ASSERT_EQUAL(it_engine_stop(a, 30000), 0);
    check_both("two processes");
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

/* The value of one hex digit pair. */
static int hexbyte(const char *h)
{
    char b[3] = {h[0], h[1], 0};
    return (int)strtol(b, NULL, 16);
}

/* The table's stores of application a (`kstreams query --hex`, the
 * stopped instance's state directory) hold exactly the last version of
 * every customer: the record's timestamp, then its value. Returns the
 * number of keys that differ. */
static int stores_equal_reference(void)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "'%s' query '%s' customers --format json --hex 2>/dev/null",
             it_kstreams(), yaml_a);
    FILE *f = popen(cmd, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    json_t *all = json_loadf(f, 0, NULL);
    pclose(f);
    CU_ASSERT_FATAL(json_is_array(all));
    int got[CUSTOMERS] = {0}, differ = 0;
    for (size_t i = 0; i < json_array_size(all); i++) {
        json_t *e = json_array_get(all, i);
        const char *kh = json_string_value(json_object_get(e, "key_hex"));
        const char *vh = json_string_value(json_object_get(e, "value_hex"));
        if (kh && strncmp(kh, "0x", 2) == 0)
            kh += 2;
        if (vh && strncmp(vh, "0x", 2) == 0)
            vh += 2;
        char key[32] = "", value[128] = "";
        for (size_t j = 0; kh && kh[2 * j] && j + 1 < sizeof key; j++)
            key[j] = (char)hexbyte(kh + 2 * j);
        for (size_t j = 8; vh && strlen(vh) >= 16 && vh[2 * j] && j - 8 + 1 < sizeof value; j++)
            value[j - 8] = (char)hexbyte(vh + 2 * j); /* past the 8-byte timestamp */
        int k = key[0] == 'c' ? atoi(key + 1) : -1, c = -1, v = -1;
        if (k < 0 || k >= CUSTOMERS || sscanf(value, "{\"c\":%d,\"v\":%d}", &c, &v) != 2 ||
            c != k || v != hist[k][hcount[k] - 1] || got[k]++)
            differ++;
    }
    for (int k = 0; k < CUSTOMERS; k++)
        differ += (hist[k][hcount[k] - 1] != 0) != (got[k] == 1);
    printf("\n  [stores] %zu keys in the customers stores, %d differ from the table's last "
           "versions",
           json_array_size(all), differ);
    json_decref(all);
    return differ;
}

static void test_restore_from_table_topic(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", state_a);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    clear_log(log_a);
    /* the table's writes are done: every order from here on sees the last
     * version of its customer, whatever the restore went through */
    settle();
    pid_t a = it_engine_start_env(yaml_a, "a", log_a, "KS_CRASH_AT=during-restore:60");
    int st = it_engine_wait(a, 60000);
    if (st < 0)
        it_engine_kill(a);
    CU_ASSERT_EQUAL(st, 137);
    CU_ASSERT_EQUAL(table_replayed(log_a), 0); /* killed before any restore ended */
    a = it_engine_start(yaml_a, "a", log_a);
    long from = produced;
    produce_orders(3000);
    wait_left(produced);
    CU_ASSERT_EQUAL(it_engine_stop(a, 30000), 0);
    long replayed = table_replayed(log_a);
    long written = 0;
    for (int k = 0; k < CUSTOMERS; k++)
        written += hcount[k] - 1;
    printf("\n  [restore] %ld table records replayed from the table's topic (%ld written)",
           replayed, written);
    CU_ASSERT(replayed > 0 && replayed <= written); /* compaction may drop some */
    for (long n = from; n < produced; n++)
        CU_ASSERT_EQUAL_FATAL(order_lo[n], hcount[customer_of(n)] - 1);
    check_both("state wiped, killed in the restore");
    CU_ASSERT_EQUAL(stores_equal_reference(), 0);
}

/* Another application: the table-table outer join of customers with an
 * empty table accounts, SIGKILLed after a Kafka commit and with kill -9
 * while customers change. The table's changes flow on, so its restore
 * stops at the group's committed offset and the consumer processes the
 * rest: every change of the whole history gives exactly one output, in
 * the order written: {"left": <the version>, "right": null}, a tombstone
 * for a deletion. */
static void table_table_pipeline(const char *path, const char *application)
{
    it_write_file(path,
                  "application: %s\n"
                  "kafka: { bootstrap: [%s] }\n"
                  "commit_interval_ms: 100\n"
                  "state_dir: %s/state-tt\n"
                  "plugin_path: [%s/plugins/.libs]\n"
                  "sources:\n"
                  "  orders: { topic: %s, key: string, value: json }\n"
                  "tables:\n"
                  "  customers: { topic: %s, key: string, value: json }\n"
                  "  accounts: { topic: %s, key: string, value: json, create: true,"
                  " partitions: 4 }\n"
                  "nodes:\n"
                  "  - { name: profile, type: join.tables, from: [customers, accounts],"
                  " config: { left: customers, right: accounts, kind: outer } }\n"
                  "sinks:\n"
                  "  - { from: profile, topic: %s, key: string, value: json, create: true,"
                  " partitions: 4 }\n",
                  application, it_bootstrap(), dir, KS_TEST_BUILDDIR, orders, customers,
                  accounts, out_profile);
}

static void change_customers(int rounds)
{
    for (int r = 0; r < rounds; r++) {
        int from = (r * 13) % 190;
        set_customers(from, from + 10, r % 5 == 4);
        it_sleep_ms(50);
    }
}

static void test_table_table_kill9(void)
{
    char path[600], application[160], log_tt[600];
    snprintf(application, sizeof application, "%s-tt", app);
    snprintf(path, sizeof path, "%s/tt.yaml", dir);
    snprintf(log_tt, sizeof log_tt, "%s/tt.log", dir);
    table_table_pipeline(path, application);
    pid_t e = it_engine_start_env(path, "tt", log_tt, "KS_CRASH_AT=after-kafka-commit:3");
    int st = -1;
    for (int64_t end = it_now_ms() + 60000; st < 0 && it_now_ms() < end;) {
        change_customers(2);
        st = it_engine_wait(e, 100);
    }
    if (st < 0)
        it_engine_kill(e);
    CU_ASSERT_EQUAL(st, 137);
    e = it_engine_start(path, "tt", log_tt);
    change_customers(10);
    it_sleep_ms(700);
    it_engine_kill(e);
    change_customers(10);
    e = it_engine_start(path, "tt", log_tt);
    long want = 0;
    for (int k = 0; k < CUSTOMERS; k++)
        want += hcount[k] - 1;
    it_msgs out = {0};
    it_consume(out_profile, (size_t)want, 500, 60000, &out);
    CU_ASSERT_EQUAL(it_engine_stop(e, 30000), 0);
    int next[CUSTOMERS];
    for (int k = 0; k < CUSTOMERS; k++)
        next[k] = 1; /* hist[k][0] is the empty start */
    long wrong = 0, extra = 0, missing = 0;
    for (size_t i = 0; i < out.count; i++) {
        const it_msg *m = &out.items[i];
        int k = m->key && m->key[0] == 'c' ? atoi(m->key + 1) : -1;
        if (k < 0 || k >= CUSTOMERS || next[k] >= hcount[k]) {
            extra++;
            continue;
        }
        int version = 0;
        if (m->value) {
            json_t *v = json_loadb(m->value, m->value_len, 0, NULL);
            json_t *l = json_object_get(v, "left");
            version = json_is_null(json_object_get(v, "right"))
                          ? (int)json_integer_value(json_object_get(l, "v"))
                          : -1;
            json_decref(v);
        }
        wrong += version != hist[k][next[k]++];
    }
    for (int k = 0; k < CUSTOMERS; k++)
        missing += hcount[k] - next[k];
    printf("\n  [table-table] %zu outputs for %ld table changes: %ld wrong or out of order, "
           "%ld extra, %ld missing",
           out.count, want, wrong, extra, missing);
    CU_ASSERT_EQUAL(out.count, (size_t)want);
    CU_ASSERT_EQUAL(wrong, 0);
    CU_ASSERT_EQUAL(extra, 0);
    CU_ASSERT_EQUAL(missing, 0);
    it_msgs_free(&out);
}

/* The table-table outer join of customers with the count of their
 * orders (`join.tables`, the count a side, with `cache_bytes: 0` so that
 * every count change reaches the join): one output per change of
 * either (every order, every customer change of the whole history: none
 * lost or twice under the crashes), and per customer the last one the
 * join of the last version with the whole count. */
static void check_profiles(const char *topic, const long *count)
{
    long want = 0;
    for (int k = 0; k < CUSTOMERS; k++)
        want += count[k] + hcount[k] - 1;
    it_msgs out = {0};
    it_consume(topic, (size_t)want, 500, 60000, &out);
    const it_msg *last[CUSTOMERS] = {0};
    long stray = 0, wrong = 0;
    for (size_t i = 0; i < out.count; i++) {
        const it_msg *m = &out.items[i];
        int k = m->key && m->key[0] == 'c' ? atoi(m->key + 1) : -1;
        if (k < 0 || k >= CUSTOMERS)
            stray++;
        else if (!last[k] || m->offset > last[k]->offset)
            last[k] = m;
    }
    for (int k = 0; k < CUSTOMERS; k++) {
        int version = hist[k][hcount[k] - 1];
        if (!last[k]) {
            wrong += count[k] > 0 || version > 0;
            continue;
        }
        json_t *v = last[k]->value ? json_loadb(last[k]->value, last[k]->value_len, 0, NULL)
                                   : NULL;
        json_t *l = json_object_get(v, "left"), *r = json_object_get(v, "right");
        int got_v = json_is_null(l) ? 0 : (int)json_integer_value(json_object_get(l, "v"));
        long got_n = json_is_null(r) ? 0 : (long)json_integer_value(r);
        if (!v ? count[k] > 0 || version > 0 : got_v != version || got_n != count[k])
            wrong++;
        json_decref(v);
    }
    printf("\n  [count table, join.tables] %zu outputs for %ld changes, %ld stray; %ld "
           "customers' last result wrong",
           out.count, want, stray, wrong);
    CU_ASSERT_EQUAL(out.count, (size_t)want);
    CU_ASSERT_EQUAL(stray, 0);
    CU_ASSERT_EQUAL(wrong, 0);
    it_msgs_free(&out);
}

/* Another application counts the orders per customer and joins every
 * order with that count (`table: order_counts`), from the start of the
 * orders' history, SIGKILLed after a Kafka commit (before the LMDB one)
 * and with kill -9 while orders flow: in read_committed, every order once,
 * with the number of its customer's orders up to and including it. */
static void test_count_table_kill9(void)
{
    char path[600], application[160], log_nt[600], out_counted[128], out_profiles[128];
    snprintf(application, sizeof application, "%s-nt", app);
    snprintf(path, sizeof path, "%s/nt.yaml", dir);
    snprintf(log_nt, sizeof log_nt, "%s/nt.log", dir);
    it_unique(out_counted, sizeof out_counted, "counted");
    it_unique(out_profiles, sizeof out_profiles, "counted-profiles");
    int64_t started = it_now_ms();
    it_write_file(path,
                  "application: %s\n"
                  "kafka: { bootstrap: [%s] }\n"
                  "guarantee: exactly-once\n"
                  "commit_interval_ms: 100\n"
                  "workers: 2\n"
                  "state_dir: %s/state-nt\n"
                  "plugin_path: [%s/plugins/.libs]\n"
                  "sources:\n"
                  "  orders: { topic: %s, key: string, value: json }\n"
                  "tables:\n"
                  "  customers: { topic: %s, key: string, value: json }\n"
                  "nodes:\n"
                  "  - { name: counted, type: join, from: orders, table: order_counts,"
                  " config: { kind: left } }\n"
                  "  - { name: order_counts, type: count, from: orders, store: oc, cache_bytes: 0 }\n"
                  "  - { name: profile, type: join.tables, from: [customers, order_counts],"
                  " config: { left: customers, right: order_counts, kind: outer } }\n"
                  "sinks:\n"
                  "  - { from: counted, topic: %s, key: string, value: json, create: true,"
                  " partitions: 4 }\n"
                  "  - { from: profile, topic: %s, key: string, value: json, create: true,"
                  " partitions: 4 }\n",
                  application, it_bootstrap(), dir, KS_TEST_BUILDDIR, orders, customers,
                  out_counted, out_profiles);
    pid_t e = it_engine_start_env(path, "nt", log_nt, "KS_CRASH_AT=after-kafka-commit:3");
    int st = it_engine_wait(e, 60000);
    if (st < 0)
        it_engine_kill(e);
    CU_ASSERT_EQUAL(st, 137);
    e = it_engine_start(path, "nt", log_nt);
    produce_orders(1000);
    it_sleep_ms(300);
    it_engine_kill(e);
    produce_orders(1000);
    e = it_engine_start(path, "nt", log_nt);
    it_msgs out = {0};
    it_consume(out_counted, (size_t)produced, 500, 60000, &out);
    CU_ASSERT_EQUAL(it_engine_stop(e, 30000), 0);
    long *want = calloc((size_t)produced, sizeof *want), before[CUSTOMERS] = {0};
    unsigned char *seen = calloc((size_t)produced, 1);
    CU_ASSERT_FATAL(want && seen);
    for (long n = 0; n < produced; n++)
        want[n] = ++before[customer_of(n)];
    long wrong = 0, twice = 0, missing = 0;
    for (size_t i = 0; i < out.count; i++) {
        const it_msg *m = &out.items[i];
        json_t *v = m->value ? json_loadb(m->value, m->value_len, 0, NULL) : NULL;
        json_t *o = json_object_get(json_object_get(v, "left"), "o");
        json_t *r = json_object_get(v, "right");
        long n = json_is_integer(o) ? (long)json_integer_value(o) : -1;
        if (n < 0 || n >= produced || !json_is_integer(r) ||
            json_integer_value(r) != want[n])
            wrong++;
        else if (seen[n]++)
            twice++;
        json_decref(v);
    }
    for (long n = 0; n < produced; n++)
        missing += !seen[n];
    printf("\n  [count table] %zu outputs for %ld orders: %ld wrong, %ld twice, %ld missing "
           "(%.0f s)",
           out.count, produced, wrong, twice, missing, (double)(it_now_ms() - started) / 1000);
    CU_ASSERT_EQUAL(wrong, 0);
    CU_ASSERT_EQUAL(twice, 0);
    CU_ASSERT_EQUAL(missing, 0);
    free(want);
    free(seen);
    it_msgs_free(&out);
    check_profiles(out_profiles, before);
}

static void test_not_copartitioned(void)
{
    char topic[128], path[600], log2[600];
    it_unique(topic, sizeof topic, "customers3");
    CU_ASSERT_FATAL(it_create_topic(topic, 3) == 0);
    snprintf(path, sizeof path, "%s/bad.yaml", dir);
    snprintf(log2, sizeof log2, "%s/bad.log", dir);
    write_pipeline(path, state_a, topic);
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
        {"the table first, kill -9: exact joins", test_table_first_kill9},
        {"the table changing while orders flow, kill -9", test_table_changing_kill9},
        {"SIGKILL after the Kafka commit, before the LMDB commit", test_crash_points},
        {"a second process joins and leaves", test_two_processes},
        {"state wiped, SIGKILL in the restore: rebuilt from the table's topic",
         test_restore_from_table_topic},
        {"table-table outer join, SIGKILL at the commit and kill -9: every change once",
         test_table_table_kill9},
        {"a stream joined with a count of it (table: NODE), SIGKILL and kill -9",
         test_count_table_kill9},
        {"a table with another partition count is refused", test_not_copartitioned},
        {NULL, NULL}};
    return it_main("joins", cases);
}
