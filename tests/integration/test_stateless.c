/*
 * test_stateless.c - the example orders plugin, end to end against the real
 * broker: 20 000 JSON records on a 4-partition topic, 2 worker threads,
 * exactly-once; every expected output checked, none missing, none extra.
 */
#include <CUnit/CUnit.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "itest.h"

#define N_RECORDS 20000

static const char *kind_of(int i)
{
    if (i % 10 == 0)
        return "test";
    return i % 3 == 0 ? "refund" : "purchase";
}

static void make_order(int i, char *key, size_t klen, char *value, size_t vlen,
                       int32_t *partition, void *arg)
{
    (void)partition;
    (void)arg;
    snprintf(key, klen, "u%d", i % 97);
    snprintf(value, vlen, "{\"id\":%d,\"kind\":\"%s\",\"user\":\"u%d\",\"amount\":%d}", i,
             kind_of(i), i % 97, i % 1000);
}

/* Check one output topic: each id of `kind` exactly once, exact values. */
static void check_outputs(const it_msgs *m, const char *kind)
{
    char *seen = calloc(N_RECORDS, 1);
    int expected = 0, bad = 0, dup = 0, unexpected = 0;
    for (int i = 0; i < N_RECORDS; i++)
        expected += strcmp(kind_of(i), kind) == 0;
    for (size_t k = 0; k < m->count; k++) {
        json_error_t jerr;
        json_t *v = json_loads(m->items[k].value ? m->items[k].value : "", 0, &jerr);
        json_int_t id = v ? json_integer_value(json_object_get(v, "id")) : -1;
        if (!v || id < 0 || id >= N_RECORDS || strcmp(kind_of((int)id), kind) != 0) {
            unexpected++;
        } else {
            char user[32];
            snprintf(user, sizeof user, "u%d", (int)(id % 97));
            const char *u = json_string_value(json_object_get(v, "user"));
            json_int_t cents = json_integer_value(json_object_get(v, "cents"));
            if (!u || strcmp(u, user) || cents != (id % 1000) * 100 || !m->items[k].key ||
                strcmp(m->items[k].key, user))
                bad++;
            if (seen[id]++)
                dup++;
        }
        json_decref(v);
    }
    int missing = 0;
    for (int i = 0; i < N_RECORDS; i++)
        missing += strcmp(kind_of(i), kind) == 0 && !seen[i];
    printf("\n  %s: %zu outputs, expected %d: missing %d, duplicate %d, unexpected %d, "
           "wrong %d\n",
           kind, m->count, expected, missing, dup, unexpected, bad);
    CU_ASSERT_EQUAL(missing, 0);
    CU_ASSERT_EQUAL(dup, 0);
    CU_ASSERT_EQUAL(unexpected, 0);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL((int)m->count, expected);
    free(seen);
}

/* The routing pipeline of the orders example plugin. */
static void write_pipeline(const char *yaml, const char *dir, const char *app, const char *in,
                           const char *buy, const char *ref)
{
    it_write_file(yaml,
                  "application: %s\n"
                  "kafka: { bootstrap: [%s] }\n"
                  "guarantee: exactly-once\n"
                  "workers: 2\n"
                  "state_dir: %s/state\n"
                  "plugins: [%s/examples/orders/.libs/orders.so]\n"
                  "sources:\n"
                  "  orders: { topic: %s, key: string, value: json }\n"
                  "nodes:\n"
                  "  - { name: route, type: orders.route, from: orders }\n"
                  "sinks:\n"
                  "  - { name: purchases, from: route, topic: %s, key: string, value: json, "
                  "create: true, partitions: 4 }\n"
                  "  - { name: refunds, from: route, topic: %s, key: string, value: json, "
                  "create: true, partitions: 4 }\n",
                  app, it_bootstrap(), dir, KS_TEST_BUILDDIR, in, buy, ref);
}

static void test_orders_routed_exactly_once(void)
{
    char dir[256], app[128], in[128], buy[128], ref[128], yaml[512], log[512];
    it_tempdir(dir, sizeof dir);
    it_unique(app, sizeof app, "orders");
    it_unique(in, sizeof in, "orders-in");
    it_unique(buy, sizeof buy, "purchases");
    it_unique(ref, sizeof ref, "refunds");
    CU_ASSERT_FATAL(it_create_topic(in, 4) == 0);
    CU_ASSERT_FATAL(it_produce(in, N_RECORDS, make_order, NULL) == 0);
    snprintf(yaml, sizeof yaml, "%s/pipeline.yaml", dir);
    snprintf(log, sizeof log, "%s/engine.log", dir);
    write_pipeline(yaml, dir, app, in, buy, ref);
    pid_t pid = it_engine_start(yaml, "itest", log);
    it_msgs purchases = {0}, refunds = {0};
    int want_buy = 0, want_ref = 0;
    for (int i = 0; i < N_RECORDS; i++) {
        want_buy += strcmp(kind_of(i), "purchase") == 0;
        want_ref += strcmp(kind_of(i), "refund") == 0;
    }
    it_consume(buy, (size_t)want_buy, 3000, 120000, &purchases);
    it_consume(ref, (size_t)want_ref, 1000, 60000, &refunds);
    int rc = it_engine_stop(pid, 30000);
    CU_ASSERT_EQUAL(rc, 0);
    check_outputs(&purchases, "purchase");
    check_outputs(&refunds, "refund");
    if (rc != 0 || purchases.count != (size_t)want_buy)
        printf("  engine log: %s\n", log);
    it_msgs_free(&purchases);
    it_msgs_free(&refunds);
}

/* SIGTERM as soon as the process catches it (it_engine_stop waits for
 * that): mostly while the pipeline and its plugin still load. Every stop
 * is a clean one, exit 0; none kills the process (exit 143). */
static void test_stop_during_start(void)
{
    char dir[256], app[128], in[128], yaml[512], log[512];
    it_tempdir(dir, sizeof dir);
    it_unique(app, sizeof app, "early-stop");
    it_unique(in, sizeof in, "early-stop-in");
    CU_ASSERT_FATAL(it_create_topic(in, 1) == 0);
    snprintf(yaml, sizeof yaml, "%s/pipeline.yaml", dir);
    snprintf(log, sizeof log, "%s/engine.log", dir);
    write_pipeline(yaml, dir, app, in, "early-stop-buy", "early-stop-ref");
    int clean = 0;
    for (int i = 0; i < 10; i++)
        clean += it_engine_stop(it_engine_start(yaml, "early", log), 30000) == 0;
    int before_start = it_log_count(log, "stop requested before the start");
    printf("\n  10 stops right after the start: %d exit 0, %d before the engine started\n",
           clean, before_start);
    CU_ASSERT_EQUAL(clean, 10);
    CU_ASSERT_EQUAL(it_log_count(log, "stopped cleanly") + before_start, 10);
}

/* With an outbox, the engine waits for Kafka at start (the outbox accepts
 * events meanwhile). A SIGTERM then is a clean stop, exit 0 (it used to
 * exit 1 with an ERROR). No broker: the bootstrap is a closed port. */
static void test_stop_while_waiting_for_kafka(void)
{
    char dir[256], yaml[512], log[512];
    it_tempdir(dir, sizeof dir);
    snprintf(yaml, sizeof yaml, "%s/pipeline.yaml", dir);
    snprintf(log, sizeof log, "%s/engine.log", dir);
    int port = it_port_base(2);
    CU_ASSERT_FATAL(port > 0);
    it_write_file(yaml,
                  "application: waits-for-kafka\n"
                  "kafka: { bootstrap: [127.0.0.1:%d], properties: { socket.timeout.ms: 2000 } }\n"
                  "state_dir: %s/state\n"
                  "sources: { in: { topic: in } }\n"
                  "sinks: [ { from: in, topic: out } ]\n"
                  "outbox: { name: commands, topic: commands, listen: 127.0.0.1:%d }\n",
                  port + 1, dir, port);
    pid_t pid = it_engine_start(yaml, "w", log);
    for (int i = 0; i < 600 && it_log_count(log, "the outbox keeps accepting events") == 0; i++)
        it_sleep_ms(100);
    CU_ASSERT(it_log_count(log, "the outbox keeps accepting events") >= 1);
    int st = it_engine_stop(pid, 60000);
    printf("\n  exit %d; '%s' logged %d time(s)\n", st, "stopped while waiting for Kafka",
           it_log_count(log, "stopped while waiting for Kafka"));
    CU_ASSERT_EQUAL(st, 0);
    CU_ASSERT_EQUAL(it_log_count(log, "stopped while waiting for Kafka"), 1);
    CU_ASSERT_EQUAL(it_log_count(log, "ERROR [engine]"), 0);
}

int main(void)
{
    static const it_case cases[] = {
        {"orders routed exactly once, 2 workers, 4 partitions",
         test_orders_routed_exactly_once},
        {"a stop during the start is a clean stop", test_stop_during_start},
        {"a stop while the outbox waits for Kafka is a clean stop",
         test_stop_while_waiting_for_kafka},
        {NULL, NULL}};
    return it_main("stateless", cases);
}
