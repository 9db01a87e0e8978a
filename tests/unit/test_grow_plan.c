/*
 * test_grow_plan.c - what `kstreams grow-partitions` decides from the
 * topology alone (engine/runtime/grow_plan.c): which topics grow, which
 * partitioner places each store's keys, and the stores it refuses to move,
 * named with the reason, before anything is changed.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "runtime/grow_plan.h"
#include "runtime/task.h"
#include "runtime/topology.h"
#include "unit/test_util.h"

#define HEAD                                                                           \
    "application: gp\n"                                                                \
    "kafka: { bootstrap: 127.0.0.1:9092 }\n"                                           \
    "plugin_path: [" KS_TEST_BUILDDIR "/plugins/.libs]\n"                              \
    "sources:\n"                                                                       \
    "  views: { topic: views, key: string, value: json }\n"

/* Build `yaml` and make its plan with `partitioner`: 0 with *plan, or -1
 * with err (the topology's or the plan's error). */
static int plan_of(const char *yaml, const char *partitioner, ks_topology **t,
                   ks_grow_plan *plan, char *err, size_t errlen)
{
    ks_pipeline *p = NULL;
    *t = NULL;
    if (ks_pipeline_parse("gp.yaml", yaml, strlen(yaml), &p, err, errlen) != 0)
        return -1;
    char dir[] = "/tmp/ks-test-gp-XXXXXX";
    if (!mkdtemp(dir)) {
        ks_pipeline_free(p);
        return -1;
    }
    int rc = ks_topology_build(p, ks_host_api_table(), dir, t, err, errlen);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", dir);
    if (rc != 0)
        return -1;
    return ks_grow_plan_make(*t, partitioner, plan, err, errlen);
}

static void test_count_moves_by_the_sources_partitioner(void)
{
    ks_topology *t;
    ks_grow_plan g;
    char err[2048] = "";
    int rc = plan_of(HEAD "nodes:\n  - { name: c, type: count, from: views, store: counts }\n"
                          "sinks:\n  - { from: c, topic: out, key: string, value: int64 }\n",
                     "crc32", &t, &g, err, sizeof err);
    if (rc)
        fprintf(stderr, "\n%s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_EQUAL(g.source_count, 1);
    CU_ASSERT_STRING_EQUAL(g.sources[0], "views");
    CU_ASSERT_EQUAL(g.repartition_count, 0);
    CU_ASSERT_EQUAL_FATAL(g.store_count, 1);
    CU_ASSERT_STRING_EQUAL(g.stores[0].changelog, "gp-counts-changelog");
    CU_ASSERT_STRING_EQUAL(g.stores[0].partitioner_name, "crc32");
    CU_ASSERT(g.stores[0].partitioner == ks_kafka_partitioner_find("crc32"));
    ks_grow_plan_free(&g);
    ks_topology_free(t);
}

/* Behind a repartition topic the engine placed the keys: murmur2. */
static void test_repartition_moves_by_murmur2(void)
{
    ks_topology *t;
    ks_grow_plan g;
    char err[2048] = "";
    int rc = plan_of(HEAD "nodes:\n"
                          "  - { name: by_url, type: ops.select_key, from: views, "
                          "config: { path: /url } }\n"
                          "  - { name: c, type: count, from: by_url, store: counts }\n"
                          "sinks:\n  - { from: c, topic: out, key: string, value: int64 }\n",
                     "crc32", &t, &g, err, sizeof err);
    if (rc)
        fprintf(stderr, "\n%s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_EQUAL(g.source_count, 1);
    CU_ASSERT_EQUAL_FATAL(g.repartition_count, 1);
    CU_ASSERT_STRING_EQUAL(g.repartitions[0], "gp-c-repartition");
    CU_ASSERT_EQUAL_FATAL(g.store_count, 1);
    CU_ASSERT_STRING_EQUAL(g.stores[0].partitioner_name, "murmur2");
    ks_grow_plan_free(&g);
    ks_topology_free(t);
}

/* Refused: the error names the store (or the outbox) and says why. */
static void refused(const char *yaml, const char *partitioner, const char *want)
{
    ks_topology *t;
    ks_grow_plan g;
    char err[2048] = "";
    int rc = plan_of(yaml, partitioner, &t, &g, err, sizeof err);
    if (rc == 0 || !strstr(err, want))
        fprintf(stderr, "\nwanted '%s', got %d '%s'\n", want, rc, err);
    CU_ASSERT_EQUAL(rc, -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, want));
    CU_ASSERT_PTR_NOT_NULL(t); /* the topology was fine: the plan refused */
    ks_topology_free(t);
}

static void test_refusals(void)
{
    refused(HEAD "nodes:\n  - { name: w, type: count, from: views, store: per_minute,\n"
                 "      window: { kind: tumbling, size: 1m } }\n"
                 "sinks:\n  - { from: w, topic: out, key: string, value: int64 }\n",
            "murmur2", "store 'per_minute' of node 'w' is windowed");
    refused(HEAD "tables:\n  customers: { topic: customers, key: string, value: json }\n"
                 "nodes:\n  - { name: j, type: join, from: views, table: customers }\n"
                 "sinks:\n  - { from: j, topic: out, key: string, value: json }\n",
            "murmur2", "store 'customers' is the store of table 'customers'");
    refused(HEAD "  pays: { topic: pays, key: string, value: json }\n"
                 "nodes:\n  - { name: j, type: join.streams, from: [views, pays], store: b,\n"
                 "      config: { left: views, right: pays, kind: left },\n"
                 "      window: { before: 10s, after: 0s, grace: 1s } }\n"
                 "sinks:\n  - { from: j, topic: out, key: string, value: json }\n",
            "murmur2", "store 'b' ");
    refused(HEAD "stores:\n  counts: { changelog: false }\n"
                 "nodes:\n  - { name: c, type: count, from: views, store: counts }\n"
                 "sinks:\n  - { from: c, topic: out, key: string, value: int64 }\n",
            "murmur2", "store 'counts' has no changelog");
    refused(HEAD "outbox: { backend: postgres, dsn_env: E, topic: ev }\n"
                 "nodes:\n  - { name: c, type: count, from: views, store: counts }\n"
                 "sinks:\n  - { from: c, topic: out, key: string, value: int64 }\n",
            "murmur2", "the pipeline has an `outbox:`");
    refused(HEAD "nodes:\n  - { name: c, type: count, from: views, store: counts }\n"
                 "sinks:\n  - { from: c, topic: out, key: string, value: int64 }\n",
            "round_robin", "unknown partitioner 'round_robin'");
}

void ks_test_register_grow_plan(void)
{
    CU_pSuite s = CU_add_suite("grow_plan", NULL, NULL);
    CU_add_test(s, "a count's keys move by the sources' partitioner",
                test_count_moves_by_the_sources_partitioner);
    CU_add_test(s, "behind a repartition topic the keys move by murmur2",
                test_repartition_moves_by_murmur2);
    CU_add_test(s, "stores that cannot move are refused, named, with the reason",
                test_refusals);
}
