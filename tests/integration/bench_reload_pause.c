/*
 * bench_reload_pause.c - what a hot deploy costs the records flowing
 * through it. Not a test: prints figures, asserts nothing.
 *
 * A pipeline (exactly-once, 2 workers, 4 partitions, commit every 100 ms)
 * runs build v1 of tests/plugins/reload.c; a producer writes a steady 2 000
 * records/s; a read_committed consumer measures each output's latency
 * (consume time - input CreateTime, which the processor passes on). After
 * 5 s, v2 is copied over the plugin file. Printed: p50/p99/max latency of
 * records produced in the 3 s before the swap (baseline) and within 1 s
 * around it, and the longest gap between consecutive outputs.
 *
 *   KS_BOOTSTRAP=127.0.0.1:9092 build/tests/integration/bench_reload_pause
 */
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "itest.h"

#define RATE 2000
#define MAXN 200000

static char in_topic[128], out_topic[128];
static volatile int running = 1;
static int64_t *lat;      /* per output: latency ms */
static int64_t *produced_at;
static size_t nlat;

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static rd_kafka_t *client(rd_kafka_type_t type, const char *group)
{
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    char err[256];
    rd_kafka_conf_set(c, "bootstrap.servers", it_bootstrap(), err, sizeof err);
    if (group) {
        rd_kafka_conf_set(c, "group.id", group, err, sizeof err);
        rd_kafka_conf_set(c, "isolation.level", "read_committed", err, sizeof err);
        rd_kafka_conf_set(c, "auto.offset.reset", "earliest", err, sizeof err);
        rd_kafka_conf_set(c, "fetch.wait.max.ms", "10", err, sizeof err);
    } else {
        rd_kafka_conf_set(c, "linger.ms", "1", err, sizeof err);
    }
    return rd_kafka_new(type, c, err, sizeof err);
}

static void *produce_loop(void *arg)
{
    (void)arg;
    rd_kafka_t *p = client(RD_KAFKA_PRODUCER, NULL);
    long n = 0;
    while (running && n < MAXN) {
        for (int i = 0; i < RATE / 100; i++, n++) {
            char key[16], val[32];
            snprintf(key, sizeof key, "k%03ld", n % 200);
            snprintf(val, sizeof val, "n=%ld", n);
            rd_kafka_producev(p, RD_KAFKA_V_TOPIC(in_topic), RD_KAFKA_V_KEY(key, strlen(key)),
                              RD_KAFKA_V_VALUE(val, strlen(val)),
                              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
        }
        rd_kafka_poll(p, 0);
        it_sleep_ms(10);
    }
    rd_kafka_flush(p, 10000);
    rd_kafka_destroy(p);
    return NULL;
}

static void *consume_loop(void *arg)
{
    (void)arg;
    char group[160];
    snprintf(group, sizeof group, "%s-bench", out_topic);
    rd_kafka_t *c = client(RD_KAFKA_CONSUMER, group);
    rd_kafka_poll_set_consumer(c);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, out_topic, RD_KAFKA_PARTITION_UA);
    rd_kafka_subscribe(c, l);
    rd_kafka_topic_partition_list_destroy(l);
    while (running || nlat == 0) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(c, 50);
        if (!m)
            continue;
        if (!m->err && nlat < MAXN) {
            int64_t ts = rd_kafka_message_timestamp(m, NULL);
            produced_at[nlat] = ts;
            lat[nlat++] = wall_ms() - ts;
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(c);
    rd_kafka_destroy(c);
    return NULL;
}

static int cmp(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *what, int64_t from, int64_t to)
{
    int64_t *v = malloc(sizeof *v * (nlat + 1));
    size_t k = 0;
    for (size_t i = 0; i < nlat; i++)
        if (produced_at[i] >= from && produced_at[i] < to)
            v[k++] = lat[i];
    qsort(v, k, sizeof *v, cmp);
    if (k)
        printf("%-28s %6zu records  p50 %4lld ms  p99 %4lld ms  max %4lld ms\n", what, k,
               (long long)v[k / 2], (long long)v[k * 99 / 100], (long long)v[k - 1]);
    free(v);
}

int main(void)
{
    char dir[256], app[128], yaml[512], log[512], watched[512], cmd[2048];
    it_tempdir(dir, sizeof dir);
    it_unique(app, sizeof app, "rbench");
    it_unique(in_topic, sizeof in_topic, "rbench-in");
    it_unique(out_topic, sizeof out_topic, "rbench-out");
    if (it_create_topic(in_topic, 4) != 0)
        return 1;
    snprintf(yaml, sizeof yaml, "%s/p.yaml", dir);
    snprintf(log, sizeof log, "%s/engine.log", dir);
    snprintf(watched, sizeof watched, "%s/reload.so", dir);
    snprintf(cmd, sizeof cmd, "cp %s/tests/plugins/.libs/reload_v1.so %s", KS_TEST_BUILDDIR,
             watched);
    if (system(cmd) != 0)
        return 1;
    it_write_file(yaml,
                  "application: %s\nkafka: { bootstrap: [%s] }\nguarantee: exactly-once\n"
                  "commit_interval_ms: 100\nworkers: 2\nstate_dir: %s/state\nplugins: [%s]\n"
                  "sources:\n  in: { topic: %s, key: string, value: string }\n"
                  "nodes:\n  - { name: tag, type: reload.tag, from: in, store: counts }\n"
                  "sinks:\n  - { from: tag, topic: %s, key: string, value: string, "
                  "create: true, partitions: 4 }\n",
                  app, it_bootstrap(), dir, watched, in_topic, out_topic);
    lat = calloc(MAXN, sizeof *lat);
    produced_at = calloc(MAXN, sizeof *produced_at);
    pid_t eng = it_engine_start(yaml, "bench", log);
    pthread_t prod, cons;
    pthread_create(&cons, NULL, consume_loop, NULL);
    pthread_create(&prod, NULL, produce_loop, NULL);
    it_sleep_ms(8000); /* group join, warm-up */
    int64_t swap_at = wall_ms();
    snprintf(cmd, sizeof cmd, "cp %s/tests/plugins/.libs/reload_v2.so %s", KS_TEST_BUILDDIR,
             watched);
    if (system(cmd) != 0)
        return 1;
    it_sleep_ms(5000);
    running = 0;
    pthread_join(prod, NULL);
    pthread_join(cons, NULL);
    it_engine_stop(eng, 30000);
    /* the watcher loads after KS_RELOAD_SETTLE_MS of quiet: the swap itself
     * happens ~300-700 ms after the copy */
    printf("hot deploy pause (exactly-once, 2 workers, commit 100 ms, %d rec/s)\n", RATE);
    report("baseline (3 s before copy)", swap_at - 3000, swap_at);
    report("around the swap (copy+2 s)", swap_at, swap_at + 2000);
    int64_t gap = 0;
    for (size_t i = 1; i < nlat; i++) {
        int64_t consumed_prev = produced_at[i - 1] + lat[i - 1];
        int64_t consumed = produced_at[i] + lat[i];
        if (produced_at[i] >= swap_at - 1000 && produced_at[i] < swap_at + 3000 &&
            consumed - consumed_prev > gap)
            gap = consumed - consumed_prev;
    }
    printf("longest gap between outputs around the swap: %lld ms\n", (long long)gap);
    snprintf(cmd, sizeof cmd, "grep -a 'prepared on every task\\|swapped to build\\|worker-.: ' %s | cut -c1-200",
             log);
    if (system(cmd) != 0)
        printf("(no swap in the log: %s)\n", log);
    return 0;
}
