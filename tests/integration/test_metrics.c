/*
 * test_metrics.c - the Prometheus endpoint of a running engine (real broker):
 * scraped over HTTP on 127.0.0.1, parsed line by line, and checked against
 * what was fed: records in per task add up to the input, commits happened,
 * the lag drains to 0, plugin builds are listed, and a plugin counter
 * (count's null_keys) shows the records with no key.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "itest.h"

#define N 4000

static void make_rec(int i, char *key, size_t klen, char *value, size_t vlen,
                     int32_t *partition, void *arg)
{
    (void)arg;
    *partition = i % 4;
    if (i % 100 == 7)
        key[0] = '\0'; /* a null key: count drops it and counts it */
    else
        snprintf(key, klen, "k%d", i % 40);
    snprintf(value, vlen, "{\"i\":%d}", i);
    (void)klen;
}

static void test_metrics_endpoint(void)
{
    char dir[256], app[128], in[128], out[128], yaml[512], log[512];
    it_tempdir(dir, sizeof dir);
    it_unique(app, sizeof app, "metrics");
    it_unique(in, sizeof in, "metrics-in");
    it_unique(out, sizeof out, "metrics-out");
    CU_ASSERT_FATAL(it_create_topic(in, 4) == 0);
    CU_ASSERT_FATAL(it_produce(in, N, make_rec, NULL) == 0);
    int port = it_port_base(1);
    snprintf(yaml, sizeof yaml, "%s/p.yaml", dir);
    snprintf(log, sizeof log, "%s/engine.log", dir);
    /* cache_bytes: 0: the checks below see every update of the count */
    it_write_file(yaml,
                  "application: %s\nkafka: { bootstrap: [%s] }\nworkers: 2\n"
                  "metrics: 127.0.0.1:%d\nstate_dir: %s/state\nplugin_path: [%s/plugins/.libs]\n"
                  "sources:\n  in: { topic: %s, key: string, value: json }\n"
                  "nodes:\n"
                  "  - { name: per_key, type: count, from: in, store: counts, cache_bytes: 0 }\n"
                  "sinks:\n  - { from: per_key, topic: %s, key: string, value: int64, "
                  "create: true, partitions: 4 }\n",
                  app, it_bootstrap(), port, dir, KS_TEST_BUILDDIR, in, out);
    pid_t pid = it_engine_start(yaml, "m", log);
    it_msgs outs = {0};
    it_consume(out, N - N / 100, 500, 90000, &outs);
    it_msgs_free(&outs);
    char *text = NULL;
    double in_total = 0, tasks = 0;
    /* the workers publish about once a second, each its own tasks: the
     * first worker to join can take all four partitions and work through
     * the input before the group gives two of them to the other, whose
     * figures come a second later (seen: records in 4000, tasks 2) */
    for (int i = 0; i < 40 && (in_total < N || tasks != 4); i++) {
        it_sleep_ms(500);
        free(text);
        text = it_metrics_scrape(port);
        in_total = text ? it_metrics_sum(text, "kstreams_records_in_total", NULL, NULL) : 0;
        tasks = text ? it_metrics_sum(text, "kstreams_tasks", NULL, NULL) : 0;
    }
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    double commits = it_metrics_sum(text, "kstreams_commits_total", NULL, NULL);
    double lag = it_metrics_sum(text, "kstreams_consumer_lag", NULL, NULL);
    double nulls = it_metrics_sum(text, "kstreams_plugin_null_keys_total", NULL, NULL);
    double info = it_metrics_sum(text, "kstreams_plugin_info", "plugin=\"count\"", NULL);
    printf("\n  scraped: records in %.0f, commits %.0f, lag %.0f, null keys %.0f, "
           "count plugin info %.0f, tasks %.0f\n",
           in_total, commits, lag, nulls, info, tasks);
    CU_ASSERT_EQUAL(in_total, N);
    CU_ASSERT(commits > 0);
    CU_ASSERT_EQUAL(lag, 0);
    CU_ASSERT_EQUAL(nulls, N / 100);
    CU_ASSERT_EQUAL(info, 1);
    CU_ASSERT_EQUAL(tasks, 4);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "# TYPE kstreams_records_in_total counter"));
    free(text);
    CU_ASSERT_EQUAL(it_engine_stop(pid, 30000), 0);
}

int main(void)
{
    static const it_case cases[] = {
        {"metrics: Prometheus endpoint scraped and checked", test_metrics_endpoint},
        {NULL, NULL}};
    return it_main("metrics", cases);
}
