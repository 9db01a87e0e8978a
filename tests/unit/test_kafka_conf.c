/*
 * test_kafka_conf.c - ks_kafka_conf: the pipeline's kafka.properties reach
 * the kind of client they are for (librdkafka's C/P scope), the engine's
 * forced settings win, and a bad property names its YAML position.
 * No broker: a conf is only built and read back.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "kafka/group_members.h"
#include "kafka/kafka.h"
#include "kafka/member_id.h"
#include "kafka/partitioner.h"
#include "runtime/stall.h"
#include "base/log.h"
#include "unit/test_util.h"

#define PIPELINE                                                                         \
    "application: conf-test\n"                                                           \
    "kafka:\n"                                                                           \
    "  bootstrap: [127.0.0.1:9]\n"                                                       \
    "  properties:\n"                                                                    \
    "    session.timeout.ms: 6000\n"  /* consumer only */                                \
    "    linger.ms: 7\n"              /* producer only */                                \
    "    client.rack: rack-a\n"       /* both */                                         \
    "    isolation.level: read_uncommitted\n"                                            \
    "sources: { in: { topic: in } }\n"                                                   \
    "sinks: [ { from: in, topic: out } ]\n"

static ks_pipeline *pipeline(const char *text)
{
    char err[1024] = "";
    ks_pipeline *p = NULL;
    if (ks_pipeline_parse("conf.yaml", text, strlen(text), &p, err, sizeof err) != 0)
        fprintf(stderr, "\n%s\n", err);
    return p;
}

/* The value `name` has in conf ("" when unset). */
static const char *get(rd_kafka_conf_t *conf, const char *name)
{
    static char buf[256];
    size_t len = sizeof buf;
    if (rd_kafka_conf_get(conf, name, buf, &len) != RD_KAFKA_CONF_OK)
        buf[0] = '\0';
    return buf;
}

static void test_properties_follow_the_client_kind(void)
{
    ks_pipeline *p = pipeline(PIPELINE);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    char err[512] = "";
    rd_kafka_conf_t *prod = ks_kafka_conf(p, RD_KAFKA_PRODUCER, NULL, NULL, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(prod);
    CU_ASSERT_STRING_EQUAL(get(prod, "linger.ms"), "7");
    CU_ASSERT_STRING_EQUAL(get(prod, "client.rack"), "rack-a");
    /* not given to the producer: librdkafka's default stays */
    CU_ASSERT_STRING_EQUAL(get(prod, "session.timeout.ms"), "45000");
    rd_kafka_conf_destroy(prod);

    /* forced settings come last: read_committed wins over the YAML */
    const char *const forced[] = {"group.id", "g", "isolation.level", "read_committed", NULL};
    rd_kafka_conf_t *cons = ks_kafka_conf(p, RD_KAFKA_CONSUMER, NULL, forced, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cons);
    CU_ASSERT_STRING_EQUAL(get(cons, "session.timeout.ms"), "6000");
    CU_ASSERT_STRING_EQUAL(get(cons, "client.rack"), "rack-a");
    CU_ASSERT_STRING_EQUAL(get(cons, "isolation.level"), "read_committed");
    CU_ASSERT_STRING_EQUAL(get(cons, "linger.ms"), "5"); /* librdkafka's default */
    rd_kafka_conf_destroy(cons);
    ks_pipeline_free(p);
}

static void test_bad_property_names_its_position(void)
{
    ks_pipeline *p = pipeline("application: conf-test\n"
                              "kafka:\n"
                              "  bootstrap: [127.0.0.1:9]\n"
                              "  properties: { no.such.property: 1 }\n"
                              "sources: { in: { topic: in } }\n"
                              "sinks: [ { from: in, topic: out } ]\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    char err[512] = "";
    /* an unknown name is no one's: both kinds refuse it */
    rd_kafka_type_t types[] = {RD_KAFKA_PRODUCER, RD_KAFKA_CONSUMER};
    for (int i = 0; i < 2; i++) {
        err[0] = '\0';
        CU_ASSERT_PTR_NULL(ks_kafka_conf(p, types[i], NULL, NULL, err, sizeof err));
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "conf.yaml:4:"));
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "no.such.property"));
    }
    ks_pipeline_free(p);
}

/* A client that asks for a missing topic must not make the broker create
 * it (auto.create.topics.enable=true is Kafka's default): every kind of
 * client gets allow.auto.create.topics=false, whatever the YAML says. */
static void test_no_client_auto_creates_topics(void)
{
    ks_pipeline *p = pipeline("application: conf-test\n"
                              "kafka:\n"
                              "  bootstrap: [127.0.0.1:9]\n"
                              "  properties: { allow.auto.create.topics: true }\n"
                              "sources: { in: { topic: in } }\n"
                              "sinks: [ { from: in, topic: out } ]\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    char err[512] = "";
    rd_kafka_type_t types[] = {RD_KAFKA_PRODUCER, RD_KAFKA_CONSUMER};
    for (int i = 0; i < 2; i++) {
        rd_kafka_conf_t *c = ks_kafka_conf(p, types[i], NULL, NULL, err, sizeof err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(c);
        CU_ASSERT_STRING_EQUAL(get(c, "allow.auto.create.topics"), "false");
        rd_kafka_conf_destroy(c);
    }
    ks_pipeline_free(p);
}

/* The stalled-partition watch (stall.h): time counts only while there is
 * a backlog and the committed offset stands still; one warning per limit. */
static void test_stall_watch(void)
{
    ks_stall s = {0};
    int warn;
    CU_ASSERT_EQUAL(ks_stall_observe(&s, 10, 5, 1000, 3000, &warn), 0);
    CU_ASSERT_EQUAL(ks_stall_observe(&s, 10, 5, 3000, 3000, &warn), 2000);
    CU_ASSERT_EQUAL(warn, 0);
    CU_ASSERT_EQUAL(ks_stall_observe(&s, 10, 5, 4000, 3000, &warn), 3000);
    CU_ASSERT_EQUAL(warn, 1);
    CU_ASSERT_EQUAL(ks_stall_observe(&s, 10, 5, 5000, 3000, &warn), 4000);
    CU_ASSERT_EQUAL(warn, 0); /* warned a second ago */
    CU_ASSERT_EQUAL(ks_stall_observe(&s, 10, 5, 7000, 3000, &warn), 6000);
    CU_ASSERT_EQUAL(warn, 1); /* again after another limit */
    /* progress restarts the watch */
    CU_ASSERT_EQUAL(ks_stall_observe(&s, 11, 5, 8000, 3000, &warn), 0);
    CU_ASSERT_EQUAL(ks_stall_observe(&s, 11, 5, 10000, 3000, &warn), 2000);
    /* caught up: not a stall, however long nothing moves */
    CU_ASSERT_EQUAL(ks_stall_observe(&s, 11, 0, 20000, 3000, &warn), 0);
    CU_ASSERT_EQUAL(ks_stall_observe(&s, 11, 0, 90000, 3000, &warn), 0);
    CU_ASSERT_EQUAL(warn, 0);
    /* a backlog appears: counted from then */
    CU_ASSERT_EQUAL(ks_stall_observe(&s, 11, 3, 91000, 3000, &warn), 1000);
}

/* What a producer built from ks_kafka_conf writes to stderr while it is
 * created with a consumer-only property (librdkafka warns "CONFWARN" from
 * rd_kafka_new, in this thread), in text or JSON mode. Malloc'd. */
static char *producer_log(int json)
{
    ks_pipeline *p = pipeline(PIPELINE);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    char err[512] = "";
    rd_kafka_conf_t *conf = ks_kafka_conf(p, RD_KAFKA_PRODUCER, NULL, NULL, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(conf);
    /* bypasses ks_kafka_conf's scope filter on purpose */
    CU_ASSERT_EQUAL(rd_kafka_conf_set(conf, "session.timeout.ms", "6000", err, sizeof err),
                    RD_KAFKA_CONF_OK);
    char path[] = "/tmp/ks-rdkafka-log-XXXXXX";
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    ks_log_set_json(json);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (rk)
        rd_kafka_destroy(rk);
    else
        rd_kafka_conf_destroy(conf);
    ks_log_set_json(0);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    CU_ASSERT_PTR_NOT_NULL(rk);
    off_t len = lseek(fd, 0, SEEK_END);
    char *text = calloc(1, (size_t)len + 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_EQUAL(pread(fd, text, (size_t)len, 0), len);
    close(fd);
    unlink(path);
    ks_pipeline_free(p);
    return text;
}

/* Before: librdkafka printed "%4|1733...|CONFWARN|rdkafka#producer-1| ..."
 * itself, in JSON mode too. */
static void test_librdkafka_lines_through_the_log(void)
{
    char *text = producer_log(0);
    CU_ASSERT_PTR_NULL(strstr(text, "%4|"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "WARN  [librdkafka] rdkafka#producer-"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "CONFWARN: "));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "session.timeout.ms"));
    free(text);

    text = producer_log(1);
    CU_ASSERT_PTR_NULL(strstr(text, "%4|"));
    CU_ASSERT_EQUAL(text[0], '{');
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"librdkafka\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "CONFWARN"));
    free(text);
}

/* Standby placement: the `replicas` processes after a task's owner in the
 * sorted order, wrapping round; never the owner; fewer when the group is
 * smaller; none for a task nobody owns. */
static void test_standby_placement(void)
{
    char a[] = "app-a", b[] = "app-b", c[] = "app-c";
    char *procs[] = {a, b, c};
    int owner[] = {0, 1, 2, -1};
    ks_group_view v = {.procs = procs, .proc_count = 3, .owner = owner, .partitions = 4};
    CU_ASSERT_EQUAL(ks_group_view_find(&v, "app-b"), 1);
    CU_ASSERT_EQUAL(ks_group_view_find(&v, "app-x"), -1);
    /* one replica: the next process */
    CU_ASSERT_EQUAL(ks_group_view_is_standby(&v, 0, 1, 1), 1);
    CU_ASSERT_EQUAL(ks_group_view_is_standby(&v, 0, 2, 1), 0);
    CU_ASSERT_EQUAL(ks_group_view_is_standby(&v, 2, 0, 1), 1); /* wraps round */
    CU_ASSERT_EQUAL(ks_group_view_is_standby(&v, 1, 1, 1), 0); /* never the owner */
    /* more replicas than other processes: every other process, once */
    for (int p = 0; p < 3; p++) {
        int holders = 0;
        for (int proc = 0; proc < 3; proc++)
            holders += ks_group_view_is_standby(&v, p, proc, 5);
        CU_ASSERT_EQUAL(holders, 2);
        CU_ASSERT_EQUAL(ks_group_view_is_standby(&v, p, owner[p], 5), 0);
    }
    CU_ASSERT_EQUAL(ks_group_view_is_standby(&v, 3, 0, 1), 0); /* unowned */
    CU_ASSERT_EQUAL(ks_group_view_is_standby(&v, 9, 0, 1), 0); /* no such task */
    CU_ASSERT_EQUAL(ks_group_view_is_standby(&v, 0, -1, 1), 0); /* not a member */
}

/* One client.id carries the process (standby placement) and the query
 * address (the query server's routing); each reader gets its part, with
 * or without the other feature on. */
static void test_member_client_id(void)
{
    char id[300], proc[300];
    ks_member_id_format("shop", "host1-9f", "10.0.0.7:8471", id, sizeof id);
    CU_ASSERT_STRING_EQUAL(id, "shop-host1-9f query=10.0.0.7:8471");
    const char *addr = ks_member_id_parse(id, proc, sizeof proc);
    CU_ASSERT_STRING_EQUAL(proc, "shop-host1-9f");
    CU_ASSERT_PTR_NOT_NULL_FATAL(addr);
    CU_ASSERT_STRING_EQUAL(addr, "10.0.0.7:8471");
    /* query off: the process alone, no address */
    ks_member_id_format("shop", "host1-9f", NULL, id, sizeof id);
    CU_ASSERT_STRING_EQUAL(id, "shop-host1-9f");
    CU_ASSERT_PTR_NULL(ks_member_id_parse(id, proc, sizeof proc));
    CU_ASSERT_STRING_EQUAL(proc, "shop-host1-9f");
    /* another client (librdkafka's default id), an empty address */
    CU_ASSERT_PTR_NULL(ks_member_id_parse("rdkafka", proc, sizeof proc));
    CU_ASSERT_STRING_EQUAL(proc, "rdkafka");
    CU_ASSERT_PTR_NULL(ks_member_id_parse("shop-a query=", proc, sizeof proc));
    CU_ASSERT_STRING_EQUAL(proc, "shop-a");
    CU_ASSERT_PTR_NOT_NULL(ks_member_id_parse("shop-a query=h:1", NULL, 0)); /* address only */
}

/* The view by process: the workers of one process (same client.id, with
 * or without a query address) are one process, sorted by their process
 * part, and own the partitions of all their workers. */
static void test_group_view_by_process(void)
{
    int32_t p0[] = {0}, p1[] = {1, 3}, p2[] = {2};
    char b1[] = "shop-b query=h2:2", a1[] = "shop-a query=h1:1", b2[] = "shop-b query=h2:2";
    char c1[] = "shop-c";
    ks_group_member m[] = {{b1, p0, 1}, {a1, p1, 2}, {b2, p2, 1}, {c1, NULL, 0}};
    ks_group_view v;
    CU_ASSERT_EQUAL_FATAL(ks_group_view_build(m, 4, 5, &v), 1);
    CU_ASSERT_EQUAL_FATAL(v.proc_count, 3);
    CU_ASSERT_STRING_EQUAL(v.procs[0], "shop-a");
    CU_ASSERT_STRING_EQUAL(v.procs[1], "shop-b");
    CU_ASSERT_STRING_EQUAL(v.procs[2], "shop-c");
    CU_ASSERT_EQUAL(v.owner[0], 1);
    CU_ASSERT_EQUAL(v.owner[1], 0);
    CU_ASSERT_EQUAL(v.owner[2], 1);
    CU_ASSERT_EQUAL(v.owner[3], 0);
    CU_ASSERT_EQUAL(v.owner[4], -1);
    char self[300]; /* what standby.c looks itself up by */
    ks_member_id_format("shop", "b", NULL, self, sizeof self);
    CU_ASSERT_EQUAL(ks_group_view_find(&v, self), 1);
    ks_group_view_free(&v);
    CU_ASSERT_EQUAL(ks_group_view_build(m, 0, 5, &v), 0); /* no member */
}

/* `standby_replicas`: 0 by default, 0..16. */
static void test_standby_replicas_setting(void)
{
    const char *base = "application: sb\nkafka: { bootstrap: [127.0.0.1:9] }\n"
                       "sources: { in: { topic: in } }\nsinks: [ { from: in, topic: out } ]\n";
    char text[512], err[512];
    ks_pipeline *p = NULL;
    CU_ASSERT_EQUAL_FATAL(ks_pipeline_parse("sb.yaml", base, strlen(base), &p, err, sizeof err), 0);
    CU_ASSERT_EQUAL(p->standby_replicas, 0);
    ks_pipeline_free(p);
    snprintf(text, sizeof text, "%sstandby_replicas: 2\n", base);
    CU_ASSERT_EQUAL_FATAL(ks_pipeline_parse("sb.yaml", text, strlen(text), &p, err, sizeof err), 0);
    CU_ASSERT_EQUAL(p->standby_replicas, 2);
    ks_pipeline_free(p);
    snprintf(text, sizeof text, "%sstandby_replicas: 17\n", base);
    ks_test_parse_err("sb.yaml", text, "standby_replicas");
}

/* grow-partitions places keys as the sources' producers do: each name is
 * librdkafka's partitioner of that name, for keyed records. */
static void test_partitioner_names(void)
{
    static const struct {
        const char *name;
        int32_t (*rd)(const rd_kafka_topic_t *, const void *, size_t, int32_t, void *, void *);
    } v[] = {
        {"murmur2", rd_kafka_msg_partitioner_murmur2},
        {"murmur2_random", rd_kafka_msg_partitioner_murmur2_random},
        {"consistent", rd_kafka_msg_partitioner_consistent},
        {"consistent_random", rd_kafka_msg_partitioner_consistent_random},
        {"crc32", rd_kafka_msg_partitioner_consistent},
        {"fnv1a", rd_kafka_msg_partitioner_fnv1a},
        {"fnv1a_random", rd_kafka_msg_partitioner_fnv1a_random},
    };
    int mismatches = 0;
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        ks_kafka_partitioner fn = ks_kafka_partitioner_find(v[i].name);
        CU_ASSERT_PTR_NOT_NULL_FATAL(fn);
        for (int k = 0; k < 500; k++) {
            char key[32];
            int n = snprintf(key, sizeof key, "key-%d", k * 7919);
            int32_t parts = 1 + k % 13;
            mismatches += fn(key, (size_t)n, parts) !=
                          v[i].rd(NULL, key, (size_t)n, parts, NULL, NULL);
        }
    }
    CU_ASSERT_EQUAL(mismatches, 0);
    CU_ASSERT_PTR_NULL(ks_kafka_partitioner_find("random"));
    CU_ASSERT_PTR_NULL(ks_kafka_partitioner_find(NULL));
}


/* A copy's next offset against a partition's [log start, high watermark]:
 * inside (ends included) nothing is gone; below, the deleted records;
 * past, a topic created again; no position, nothing to judge. */
static void test_offset_gone(void)
{
    ks_offset_gone g = {0};
    CU_ASSERT_EQUAL(ks_kafka_offset_gone(10, 10, 20, &g), 0);
    CU_ASSERT_EQUAL(ks_kafka_offset_gone(20, 10, 20, &g), 0);
    CU_ASSERT_EQUAL(ks_kafka_offset_gone(-1, 10, 20, &g), 0);
    CU_ASSERT_EQUAL(ks_kafka_offset_gone(30, 10, -1, &g), 0); /* end unknown */
    CU_ASSERT_EQUAL(ks_kafka_offset_gone(9, 10, 20, &g), 1);
    CU_ASSERT_STRING_EQUAL(g.side, "below the log start");
    CU_ASSERT_EQUAL(g.bound, 10);
    CU_ASSERT_STRING_EQUAL(g.why, "records deleted");
    CU_ASSERT_EQUAL(ks_kafka_offset_gone(21, 10, 20, &g), 1);
    CU_ASSERT_STRING_EQUAL(g.side, "past the end");
    CU_ASSERT_EQUAL(g.bound, 20);
    CU_ASSERT_STRING_EQUAL(g.why, "the topic created again, or records lost");
}

void ks_test_register_kafka_conf(void)
{
    CU_pSuite s = CU_add_suite("kafka-conf", NULL, NULL);
    CU_add_test(s, "an offset outside a partition's log is gone", test_offset_gone);
    CU_add_test(s, "kafka.properties reach the client kind they are for",
                test_properties_follow_the_client_kind);
    CU_add_test(s, "an unknown property names its YAML position",
                test_bad_property_names_its_position);
    CU_add_test(s, "no client of the engine auto-creates a topic",
                test_no_client_auto_creates_topics);
    CU_add_test(s, "a stalled partition is noticed once per limit", test_stall_watch);
    CU_add_test(s, "librdkafka's lines go through the engine's log",
                test_librdkafka_lines_through_the_log);
    CU_add_test(s, "standby placement: the next processes after the owner, never it",
                test_standby_placement);
    CU_add_test(s, "standby_replicas: default 0, range 0..16", test_standby_replicas_setting);
    CU_add_test(s, "one client.id carries the process and the query address",
                test_member_client_id);
    CU_add_test(s, "the group's view groups members by process", test_group_view_by_process);
    CU_add_test(s, "partitioner names place keys as librdkafka's do", test_partitioner_names);
}
