/*
 * test_defaults.c - the engine on a broker with Kafka's default settings
 * (scripts/kafka.sh with KAFKA_PROFILE=defaults: auto.create.topics.enable
 * on, num.partitions 1, cleanup.policy delete, default.replication.factor
 * 1), where a client that asks for a missing topic creates it with the
 * broker's settings.
 *
 *   1. an existing 4-partition source, count with a store, a created sink
 *      and dead-letter topic: starts every time, counts exactly, and every
 *      topic it made has 4 partitions (the changelog compacted);
 *   2. a source with `create: true, partitions: 3`: made with 3;
 *   3. a changelog that a client auto-created (1 partition): refused at
 *      start with the topic, expected and found counts;
 *   4. a changelog with cleanup.policy=delete: refused at start.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "itest.h"
#include "kafka/topics.h"

#define KEYS 200
#define RECORDS 3000

static char dir[256];

static void make_view(int i, char *key, size_t klen, char *value, size_t vlen,
                      int32_t *partition, void *arg)
{
    (void)partition;
    (void)arg;
    snprintf(key, klen, "user-%d", (i * 7) % KEYS);
    snprintf(value, vlen, "{\"n\":%d}", i);
}

static void write_pipeline(const char *yaml, const char *app, const char *source,
                           const char *source_extra, const char *sink, const char *state)
{
    /* cache_bytes: 0: the checks below see every update of the count */
    it_write_file(yaml,
                  "application: %s\n"
                  "kafka: { bootstrap: [%s] }\n"
                  "guarantee: exactly-once\n"
                  "commit_interval_ms: 100\n"
                  "state_dir: %s\n"
                  "poison: dead-letter\n"
                  "plugin_path: [%s/plugins/.libs]\n"
                  "sources:\n"
                  "  views: { topic: %s, key: string, value: json%s }\n"
                  "nodes:\n"
                  "  - { name: per_user, type: count, from: views, store: counts, cache_bytes: 0 }\n"
                  "sinks:\n"
                  "  - { from: per_user, topic: %s, key: string, value: int64, create: true }\n",
                  app, it_bootstrap(), state, KS_TEST_BUILDDIR, source, source_extra, sink);
}

/* What the broker says of `topic`; asserts that it exists. */
static ks_topic_found describe(const char *topic)
{
    ks_topic_found f = {0};
    char err[1024];
    rd_kafka_t *rk = it_admin_client();
    CU_ASSERT_PTR_NOT_NULL_FATAL(rk);
    int rc = ks_topic_describe(rk, topic, 10000, &f, err, sizeof err);
    if (rc != 1)
        printf("\n  topic %s: %s\n", topic, rc < 0 ? err : "missing");
    CU_ASSERT_EQUAL(rc, 1);
    rd_kafka_destroy(rk);
    return f;
}

static void one_start(int attempt)
{
    char app[128], source[128], sink[128], yaml[512], log[512], state[512];
    it_unique(app, sizeof app, "defaults");
    it_unique(source, sizeof source, "views");
    it_unique(sink, sizeof sink, "counts");
    snprintf(yaml, sizeof yaml, "%s/a%d.yaml", dir, attempt);
    snprintf(log, sizeof log, "%s/a%d.log", dir, attempt);
    snprintf(state, sizeof state, "%s/state%d", dir, attempt);
    CU_ASSERT_FATAL(it_create_topic(source, 4) == 0);
    CU_ASSERT_FATAL(it_produce(source, RECORDS, make_view, NULL) == 0);
    write_pipeline(yaml, app, source, "", sink, state);

    pid_t e = it_engine_start(yaml, "a", log);
    it_msgs out = {0};
    it_consume(sink, RECORDS, 2000, 120000, &out);
    CU_ASSERT_EQUAL(it_engine_stop(e, 30000), 0);

    long want[KEYS] = {0}, gaps, repeats, foreign;
    int wrong_keys;
    for (int i = 0; i < RECORDS; i++)
        want[(i * 7) % KEYS]++;
    it_check_count_sequences(&out, want, KEYS, "user-%d", &gaps, &repeats, &foreign,
                             &wrong_keys);
    printf("\n  start %d: %zu outputs for %d inputs, %ld gaps, %ld repeats, %d wrong keys\n",
           attempt, out.count, RECORDS, gaps, repeats, wrong_keys);
    CU_ASSERT_EQUAL(out.count, RECORDS);
    CU_ASSERT_EQUAL(gaps + repeats + foreign + wrong_keys, 0);
    it_msgs_free(&out);

    char changelog[256], dlq[256];
    snprintf(changelog, sizeof changelog, "%s-counts-changelog", app);
    snprintf(dlq, sizeof dlq, "%s-dlq", app);
    ks_topic_found f = describe(changelog);
    CU_ASSERT_EQUAL(f.partitions, 4);
    CU_ASSERT_STRING_EQUAL(f.cleanup_policy, "compact");
    CU_ASSERT_EQUAL(describe(sink).partitions, 4);
    CU_ASSERT_EQUAL(describe(dlq).partitions, 4);
    CU_ASSERT_EQUAL(it_log_count(log, "has 1 partitions"), 0);
}

static void test_existing_source_starts_every_time(void)
{
    it_tempdir(dir, sizeof dir);
    for (int attempt = 1; attempt <= 2; attempt++)
        one_start(attempt);
}

static void test_created_source_has_the_partitions_asked(void)
{
    char app[128], source[128], sink[128], yaml[512], log[512], state[512];
    it_tempdir(dir, sizeof dir);
    it_unique(app, sizeof app, "defaults-create");
    it_unique(source, sizeof source, "made");
    it_unique(sink, sizeof sink, "made-out");
    snprintf(yaml, sizeof yaml, "%s/c.yaml", dir);
    snprintf(log, sizeof log, "%s/c.log", dir);
    snprintf(state, sizeof state, "%s/state", dir);
    write_pipeline(yaml, app, source, ", create: true, partitions: 3", sink, state);
    pid_t e = it_engine_start(yaml, "a", log);
    /* producing first would let the broker auto-create the source */
    char line[300];
    snprintf(line, sizeof line, "created source topic %s: 3 partitions", source);
    for (int i = 0; i < 600 && it_log_count(log, line) == 0; i++)
        it_sleep_ms(100);
    CU_ASSERT_EQUAL(it_log_count(log, line), 1);
    CU_ASSERT_FATAL(it_produce(source, 300, make_view, NULL) == 0);
    it_msgs out = {0};
    it_consume(sink, 300, 2000, 120000, &out);
    CU_ASSERT_EQUAL(out.count, 300);
    it_msgs_free(&out);
    CU_ASSERT_EQUAL(it_engine_stop(e, 30000), 0);
    CU_ASSERT_EQUAL(describe(source).partitions, 3);
}

/* Start a pipeline whose changelog was prepared by `prepare`; the engine
 * must refuse to start with `expect` in its log. */
static void refused_changelog(const char *name, void (*prepare)(const char *changelog),
                              const char *expect_fmt)
{
    char app[128], source[128], sink[128], yaml[512], log[512], state[512], changelog[256];
    it_tempdir(dir, sizeof dir);
    it_unique(app, sizeof app, name);
    it_unique(source, sizeof source, "views");
    it_unique(sink, sizeof sink, "out");
    snprintf(yaml, sizeof yaml, "%s/r.yaml", dir);
    snprintf(log, sizeof log, "%s/r.log", dir);
    snprintf(state, sizeof state, "%s/state", dir);
    snprintf(changelog, sizeof changelog, "%s-counts-changelog", app);
    CU_ASSERT_FATAL(it_create_topic(source, 4) == 0);
    prepare(changelog);
    write_pipeline(yaml, app, source, "", sink, state);
    pid_t e = it_engine_start(yaml, "a", log);
    int st = it_engine_wait(e, 60000);
    if (st == -1)
        it_engine_kill(e);
    char expect[512];
    snprintf(expect, sizeof expect, expect_fmt, changelog);
    printf("\n  exit %d; log has '%s': %d\n", st, expect, it_log_count(log, expect));
    CU_ASSERT_EQUAL(st, 1);
    CU_ASSERT_EQUAL(it_log_count(log, expect), 1);
}

/* A producer that asks for a missing topic makes the broker create it with
 * num.partitions (1): what used to beat the engine's own create request. */
static void auto_created(const char *changelog)
{
    CU_ASSERT_FATAL(it_produce(changelog, 1, make_view, NULL) == 0);
    CU_ASSERT_EQUAL(describe(changelog).partitions, 1);
}

static void delete_policy(const char *changelog)
{
    static const char *const cfg[] = {"cleanup.policy", "delete", NULL};
    CU_ASSERT_FATAL(it_create_topic_with(changelog, 4, 1, cfg) == 0);
}

static void test_auto_created_changelog_is_refused(void)
{
    refused_changelog("defaults-auto", auto_created,
                      "changelog topic %s has 1 partitions, expected 4");
}

static void test_delete_policy_changelog_is_refused(void)
{
    refused_changelog("defaults-delete", delete_policy,
                      "changelog topic %s has cleanup.policy=delete, expected compact");
}

int main(void)
{
    static const it_case cases[] = {
        {"an existing source on a default broker starts, counts exactly",
         test_existing_source_starts_every_time},
        {"a created source has the partitions asked for", test_created_source_has_the_partitions_asked},
        {"an auto-created changelog is refused with the fix", test_auto_created_changelog_is_refused},
        {"a changelog with cleanup.policy=delete is refused", test_delete_policy_changelog_is_refused},
        {NULL, NULL},
    };
    return it_main("defaults", cases);
}
