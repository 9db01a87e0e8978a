/*
 * test_cluster.c - exactly-once on a three-broker KRaft cluster while the
 * brokers that matter die (scripts/kafka.sh cluster: replication factor 3,
 * min.insync.replicas 2, otherwise Kafka's defaults; $KS_BOOTSTRAP names
 * all three).
 *
 * One engine with two workers counts 1 000 keys from a 4-partition topic.
 * While it works, the test SIGKILLs, one after the other, the leader of an
 * input partition, the leader of a changelog partition, the leader of an
 * output partition, the transaction coordinator of worker 0 and the group
 * coordinator, and brings each back. Then more input, with every broker up.
 * The output (read_committed) must hold, per key, exactly 1..n; no source
 * partition may go without committed progress for longer than the stall
 * limit (kstreams_partition_stall_seconds, scraped every second). The
 * records/s before, during and after the kills are printed (figures, not
 * assertions: docs/reliability.md records them).
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "itest.h"

#define KEYS 1000
#define STALL_LIMIT_S 30

static char dir[256], app[128], in_topic[128], out_topic[128], yaml[512], log_path[512];
static int metrics_port;
static long produced;
static long expected_count[KEYS];
static double longest_stall_s;

static void make_view(int i, char *key, size_t klen, char *value, size_t vlen,
                      int32_t *partition, void *arg)
{
    (void)partition;
    long n = *(long *)arg + i;
    snprintf(key, klen, "user-%04d", (int)((n * 7919) % KEYS));
    snprintf(value, vlen, "{\"n\":%ld}", n);
}

static void produce_more(int n)
{
    long base = produced;
    CU_ASSERT_FATAL(it_produce(in_topic, n, make_view, &base) == 0);
    for (int i = 0; i < n; i++)
        expected_count[((base + i) * 7919) % KEYS]++;
    produced += n;
}

/* Run `scripts/kafka.sh cluster ARGS`; its first output line into out. */
static int cluster(const char *args, char *out, size_t outlen)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/../scripts/kafka.sh cluster %s 2>>%s/cluster.log",
             KS_TEST_SRCDIR, args, dir);
    FILE *f = popen(cmd, "r");
    if (!f)
        return -1;
    char line[256] = "";
    if (!fgets(line, sizeof line, f))
        line[0] = '\0';
    char rest[256];
    while (fgets(rest, sizeof rest, f))
        ;
    int st = pclose(f);
    line[strcspn(line, "\r\n")] = '\0';
    if (out)
        snprintf(out, outlen, "%s", line);
    return st;
}

/* The node id a role look-up prints, or -1. */
static int node_for(const char *lookup)
{
    char out[256];
    if (cluster(lookup, out, sizeof out) != 0)
        return -1;
    return atoi(out) > 0 ? atoi(out) : -1;
}

/* Outputs so far (read_committed): one consumer for the whole test that
 * counts what arrives, so a look costs only the new records. */
static rd_kafka_t *counter;
static size_t counted;

static size_t outputs_now(void)
{
    if (!counter) {
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        char err[512];
        const char *props[][2] = {{"bootstrap.servers", it_bootstrap()},
                                  {"group.id", app},
                                  {"isolation.level", "read_committed"},
                                  {"enable.auto.commit", "false"},
                                  {"auto.offset.reset", "earliest"}};
        for (size_t i = 0; i < sizeof props / sizeof props[0]; i++)
            rd_kafka_conf_set(conf, props[i][0], props[i][1], err, sizeof err);
        counter = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(counter);
        rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(4);
        for (int p = 0; p < 4; p++)
            rd_kafka_topic_partition_list_add(l, out_topic, p)->offset =
                RD_KAFKA_OFFSET_BEGINNING;
        rd_kafka_assign(counter, l);
        rd_kafka_topic_partition_list_destroy(l);
    }
    rd_kafka_message_t *m;
    while ((m = rd_kafka_consumer_poll(counter, 200))) {
        if (!m->err)
            counted++;
        rd_kafka_message_destroy(m);
    }
    return counted;
}

/* Throughput while work waits: over each sampling interval that began
 * with a backlog (input produced but not yet output), the outputs made and
 * the time it took. Input-bound idle seconds do not dilute it. */
static int busy_sampling;
static double busy_records, busy_seconds;
static size_t last_outputs;
static int64_t last_sample_ms;

static void sample_busy(void)
{
    size_t now_out = outputs_now();
    int64_t now = it_now_ms();
    if (busy_sampling && last_sample_ms && (long)last_outputs < produced) {
        busy_records += (double)(now_out - last_outputs);
        busy_seconds += (double)(now - last_sample_ms) / 1000.0;
    }
    last_outputs = now_out;
    last_sample_ms = now;
}

/* Scrape the stall gauge: remember the longest stall seen. */
static void sample_stall(void)
{
    sample_busy();
    char *text = it_metrics_scrape(metrics_port);
    if (!text)
        return;
    for (const char *at = text; (at = strstr(at, "\nkstreams_partition_stall_seconds{"));) {
        at = strchr(at, '}');
        if (!at)
            break;
        double v = atof(at + 1);
        if (v > longest_stall_s)
            longest_stall_s = v;
    }
    free(text);
}

/* Wait until `want` outputs exist, sampling the stall gauge; the seconds
 * it took, or -1 after max_s. */
static double wait_outputs(size_t want, int max_s)
{
    int64_t start = it_now_ms();
    while (it_now_ms() - start < (int64_t)max_s * 1000) {
        sample_stall();
        if (outputs_now() >= want)
            return (double)(it_now_ms() - start) / 1000.0;
        it_sleep_ms(1000);
    }
    return -1;
}

static void kill_and_restart(const char *role, const char *lookup, int *kills)
{
    int node = node_for(lookup);
    printf("\n  %s: node %d", role, node);
    CU_ASSERT(node > 0);
    if (node <= 0)
        return;
    char args[64];
    /* --wait: until the controller has fenced it and moved its roles, so
     * the engine runs on the failover, not just on a slow node */
    snprintf(args, sizeof args, "kill %d --wait", node);
    CU_ASSERT_EQUAL(cluster(args, NULL, 0), 0);
    (*kills)++;
    for (int i = 0; i < 5; i++) { /* the engine works on without it */
        sample_stall();
        it_sleep_ms(1000);
    }
    snprintf(args, sizeof args, "start-node %d", node);
    CU_ASSERT_EQUAL(cluster(args, NULL, 0), 0);
    sample_stall();
}

static void write_pipeline(void)
{
    /* cache_bytes: 0: the checks below see every update of the count */
    it_write_file(yaml,
                  "application: %s\n"
                  /* a coordinator moves in 7-14 s here (the broker's 9 s session
                   * plus the fencing); the engine's 10 s default session would
                   * expire meanwhile and rebalance (docs/operations.md) */
                  "kafka: { bootstrap: [%s], properties: { session.timeout.ms: 30000 } }\n"
                  "guarantee: exactly-once\n"
                  "commit_interval_ms: 100\n"
                  "workers: 2\n"
                  "replication_factor: 3\n"
                  "stall_warning_ms: %ds\n"
                  "metrics: 127.0.0.1:%d\n"
                  "state_dir: %s/state\n"
                  "plugin_path: [%s/plugins/.libs]\n"
                  "sources:\n"
                  "  views: { topic: %s, key: string, value: json }\n"
                  "nodes:\n"
                  "  - { name: per_user, type: count, from: views, store: counts, cache_bytes: 0 }\n"
                  "sinks:\n"
                  "  - { from: per_user, topic: %s, key: string, value: int64, create: true }\n",
                  app, it_bootstrap(), STALL_LIMIT_S, metrics_port, dir, KS_TEST_BUILDDIR,
                  in_topic, out_topic);
}

static void test_broker_kills(void)
{
    it_tempdir(dir, sizeof dir);
    it_unique(app, sizeof app, "cluster");
    it_unique(in_topic, sizeof in_topic, "views");
    it_unique(out_topic, sizeof out_topic, "counts");
    snprintf(yaml, sizeof yaml, "%s/p.yaml", dir);
    snprintf(log_path, sizeof log_path, "%s/engine.log", dir);
    metrics_port = it_port_base(1);
    CU_ASSERT_FATAL(metrics_port > 0);
    CU_ASSERT_FATAL(it_create_topic_with(in_topic, 4, 3, NULL) == 0);
    write_pipeline();

    /* before: the rate with every broker up */
    produce_more(20000);
    /* from the engine's start: the first outputs may already hold all of
     * them, so the rate counts the group join and first transactions */
    int64_t t0 = it_now_ms();
    pid_t e = it_engine_start(yaml, "a", log_path);
    CU_ASSERT_FATAL(wait_outputs(1, 120) >= 0);
    double before_s = wait_outputs((size_t)produced, 300);
    double before_rate = (double)produced / ((double)(it_now_ms() - t0) / 1000);
    CU_ASSERT(before_s >= 0);

    /* during: input keeps coming while the brokers that matter die */
    /* whom to kill: a look-up of kafka.sh cluster, with the app's names */
    char changelog[256], txn_id[256];
    snprintf(changelog, sizeof changelog, "%s-counts-changelog", app);
    snprintf(txn_id, sizeof txn_id, "%s-a-0", app);
    const struct {
        const char *role, *lookup, *name, *partition;
    } roles[] = {
        {"input partition leader", "leader", in_topic, " 0"},
        {"changelog partition leader", "leader", changelog, " 1"},
        {"output partition leader", "leader", out_topic, " 2"},
        {"transaction coordinator", "txn-coordinator", txn_id, ""},
        {"group coordinator", "group-coordinator", app, ""},
    };
    int kills = 0;
    busy_sampling = 1;
    for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++) {
        char lookup[512];
        produce_more(10000);
        snprintf(lookup, sizeof lookup, "%s %s%s", roles[i].lookup, roles[i].name,
                 roles[i].partition);
        kill_and_restart(roles[i].role, lookup, &kills);
    }
    busy_sampling = 0;
    double during_rate = busy_seconds > 0 ? busy_records / busy_seconds : 0;
    CU_ASSERT(wait_outputs((size_t)produced, 600) >= 0);

    /* after: every broker back */
    int64_t t2 = it_now_ms();
    size_t n2 = outputs_now();
    produce_more(20000);
    double after_s = wait_outputs((size_t)produced, 300);
    CU_ASSERT(after_s >= 0);
    double after_rate = (double)((size_t)produced - n2) / ((double)(it_now_ms() - t2) / 1000);
    CU_ASSERT_EQUAL(it_engine_stop(e, 60000), 0);

    it_msgs out = {0};
    it_consume(out_topic, (size_t)produced, 3000, 180000, &out);
    long gaps, repeats, foreign;
    int wrong_keys;
    it_check_count_sequences(&out, expected_count, KEYS, "user-%d", &gaps, &repeats, &foreign,
                             &wrong_keys);
    printf("\n  %d kills; %ld records, %zu outputs: %ld lost (gaps), %ld duplicated, "
           "%d keys wrong\n"
           "  records/s before %.0f, during the kills %.0f (over %.0f s with a backlog), after %.0f "
           "(%.2f of before)\n"
           "  longest partition stall %.1f s (limit %d s); stall warnings in the log: %d\n",
           kills, produced, out.count, gaps, repeats, wrong_keys, before_rate, during_rate,
           busy_seconds, after_rate, after_rate / before_rate, longest_stall_s, STALL_LIMIT_S,
           it_log_count(log_path, "no committed progress"));
    CU_ASSERT_EQUAL(kills, 5);
    CU_ASSERT_EQUAL(out.count, (size_t)produced);
    CU_ASSERT_EQUAL(gaps + repeats + foreign + wrong_keys, 0);
    CU_ASSERT(longest_stall_s < STALL_LIMIT_S);
    CU_ASSERT_EQUAL(it_log_count(log_path, "no committed progress"), 0);
    it_msgs_free(&out);
    rd_kafka_destroy(counter);
}

int main(void)
{
    static const it_case cases[] = {
        {"exactly-once while leaders and coordinators are killed", test_broker_kills},
        {NULL, NULL},
    };
    return it_main("cluster", cases);
}
