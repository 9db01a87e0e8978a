/*
 * test_repartition.c - repartition topics (engine/runtime/repartition.c,
 * docs/repartition.md): where the topology inserts them and how it splits
 * into sub-topologies (ks_topology_build on YAML text), and records going
 * through them in the test driver: counted per new key by the task of the
 * key's partition.
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "kstreams/testdriver.h"
#include "runtime/repartition.h"
#include "runtime/task.h"
#include "runtime/topology.h"
#include "unit/test_util.h"

#define PLUGINS KS_TEST_BUILDDIR "/plugins/.libs"

#define HEAD                                                                           \
    "application: rp\n"                                                                \
    "kafka: { bootstrap: 127.0.0.1:9092 }\n"                                           \
    "plugin_path: [" PLUGINS "]\n"                                                     \
    "sources:\n"                                                                       \
    "  views: { topic: views, key: string, value: json }\n"                            \
    "nodes:\n"

/* Build the topology of `yaml`; NULL with the error in err. */
static ks_topology *build(const char *yaml, char *err, size_t errlen)
{
    ks_pipeline *p = NULL;
    if (ks_pipeline_parse("rp.yaml", yaml, strlen(yaml), &p, err, errlen) != 0)
        return NULL;
    char dir[] = "/tmp/ks-test-rp-XXXXXX";
    if (!mkdtemp(dir)) {
        ks_pipeline_free(p);
        snprintf(err, errlen, "mkdtemp");
        return NULL;
    }
    ks_topology *t = NULL;
    int rc = ks_topology_build(p, ks_host_api_table(), dir, &t, err, errlen);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", dir);
    return rc == 0 ? t : NULL;
}

static ks_topology *build_ok(const char *yaml)
{
    char err[1024] = "";
    ks_topology *t = build(yaml, err, sizeof err);
    if (!t)
        fprintf(stderr, "\n%s\n", err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    return t;
}

/* Number of repartition topics (internal sources). */
static int topics(const ks_topology *t)
{
    int n = 0;
    for (size_t i = 0; i < t->pipeline->source_count; i++)
        n += t->pipeline->sources[i].internal;
    return n;
}

static const ks_topo_node *node(const ks_topology *t, const char *name)
{
    const ks_topo_node *n = ks_topology_node(t, name);
    CU_ASSERT_PTR_NOT_NULL_FATAL(n);
    return n;
}

/* The parent of processor `name` (its only input after the split). */
static const ks_topo_node *parent_of(const ks_topology *t, const char *name)
{
    const ks_topo_node *x = node(t, name);
    for (size_t i = 0; i < t->node_count; i++)
        for (size_t c = 0; c < t->nodes[i].child_count; c++)
            if (t->nodes[i].children[c] == x->index)
                return &t->nodes[i];
    return NULL;
}

#define SELECT "  - { name: by_url, type: ops.select_key, from: views, config: { path: /url } }\n"

static void test_split(void)
{
    ks_topology *t = build_ok(HEAD SELECT
                              "  - { name: per_url, type: count, from: by_url, store: n }\n"
                              "sinks:\n"
                              "  - { from: per_url, topic: out, key: string, value: int64 }\n");
    CU_ASSERT_EQUAL(topics(t), 1);
    CU_ASSERT_EQUAL(t->sub_count, 2);
    const ks_topo_node *src = parent_of(t, "per_url");
    CU_ASSERT_PTR_NOT_NULL_FATAL(src);
    CU_ASSERT_EQUAL(src->kind, KS_NODE_SOURCE);
    CU_ASSERT_STRING_EQUAL(src->name, "per_url-repartition-source");
    CU_ASSERT_STRING_EQUAL(src->source->topic, "rp-per_url-repartition");
    CU_ASSERT(src->source->internal);
    CU_ASSERT_EQUAL(src->source->key_serde, KS_SERDE_BYTES);
    CU_ASSERT_EQUAL(src->source->partitions, 0); /* the sources' count */
    const ks_topo_node *sink = node(t, "per_url-repartition-sink");
    CU_ASSERT_EQUAL(sink->kind, KS_NODE_SINK);
    CU_ASSERT_STRING_EQUAL(sink->sink->topic, "rp-per_url-repartition");
    CU_ASSERT_STRING_EQUAL(sink->sink->from, "by_url");
    CU_ASSERT_STRING_EQUAL(sink->sink->feeds, "per_url");
    /* sub-topology 0 reads the YAML's source and writes the topic; 1 reads it */
    CU_ASSERT_EQUAL(node(t, "views")->sub, 0);
    CU_ASSERT_EQUAL(node(t, "by_url")->sub, 0);
    CU_ASSERT_EQUAL(sink->sub, 0);
    CU_ASSERT_EQUAL(src->sub, 1);
    CU_ASSERT_EQUAL(node(t, "per_url")->sub, 1);
    CU_ASSERT_EQUAL(node(t, "sink-1")->sub, 1);
    /* check and describe say so */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ks_topology_print(t, f);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "sub-topology 1\n    sources: per_url-repartition-source\n"
                                        "    processors: per_url\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "  rp-per_url-repartition: written by by_url "
                                        "(sub-topology 0), read by per_url (sub-topology 1)"));
    free(text);
    f = open_memstream(&text, &len);
    ks_topology_print_dot(t, f);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "subgraph \"cluster_1\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"per_url-repartition-sink\" -> "
                                        "\"per_url-repartition-source\" [style=dotted"));
    free(text);
    ks_topology_free(t);
}

static void test_where(void)
{
    /* a re-key in front of stateless nodes and sinks: no topic */
    ks_topology *t = build_ok(HEAD SELECT
                              "  - { name: f, type: ops.filter, from: by_url,\n"
                              "      config: { where: { path: /url, exists: true } } }\n"
                              "sinks:\n  - { from: f, topic: out }\n");
    CU_ASSERT_EQUAL(topics(t), 0);
    CU_ASSERT_EQUAL(t->sub_count, 1);
    ks_topology_free(t);

    /* no re-key: no topic; `repartition: true` forces one, with its size */
    t = build_ok(HEAD "  - { name: c, type: count, from: views, store: n }\n"
                      "sinks:\n  - { from: c, topic: out, value: int64 }\n");
    CU_ASSERT_EQUAL(topics(t), 0);
    ks_topology_free(t);
    t = build_ok(HEAD "  - { name: c, type: count, from: views, store: n,\n"
                      "      repartition: { partitions: 6 } }\n"
                      "sinks:\n  - { from: c, topic: out, value: int64 }\n");
    CU_ASSERT_EQUAL(topics(t), 1);
    CU_ASSERT_EQUAL(node(t, "c-repartition-source")->source->partitions, 6);
    ks_topology_free(t);
    t = build_ok(HEAD SELECT "  - { name: c, type: count, from: by_url, store: n,\n"
                             "      repartition: false }\n"
                             "sinks:\n  - { from: c, topic: out, value: int64 }\n");
    CU_ASSERT_EQUAL(topics(t), 1); /* needed all the same */
    ks_topology_free(t);

    /* behind a repartitioned node, stateful nodes need none of their own
     * until the key changes again */
    t = build_ok(HEAD SELECT
                 "  - { name: c1, type: count, from: by_url, store: a }\n"
                 "  - { name: f, type: ops.filter, from: c1,\n"
                 "      config: { where: { path: \"\", exists: true } } }\n"
                 "  - { name: c2, type: count, from: f, store: b }\n"
                 "  - { name: k2, type: ops.select_key, from: by_url, config: { path: /user } }\n"
                 "  - { name: c3, type: count, from: k2, store: c }\n"
                 "sinks:\n  - { from: c2, topic: out, value: int64 }\n"
                 "  - { from: c3, topic: out3, value: int64 }\n");
    CU_ASSERT_EQUAL(topics(t), 2);
    CU_ASSERT_PTR_NOT_NULL(ks_topology_node(t, "c1-repartition-source"));
    CU_ASSERT_PTR_NOT_NULL(ks_topology_node(t, "c3-repartition-source"));
    CU_ASSERT_PTR_NULL(ks_topology_node(t, "c2-repartition-source"));
    CU_ASSERT_EQUAL(t->sub_count, 3);
    ks_topology_free(t);

    /* a node with two inputs: one sink per input, one topic */
    t = build_ok(HEAD SELECT
                 "  - { name: k2, type: ops.select_key, from: views, config: { path: /ref } }\n"
                 "  - { name: c, type: count, from: [by_url, k2], store: n }\n"
                 "sinks:\n  - { from: c, topic: out, value: int64 }\n");
    CU_ASSERT_EQUAL(topics(t), 1);
    CU_ASSERT_STRING_EQUAL(node(t, "c-repartition-sink-1")->sink->from, "by_url");
    CU_ASSERT_STRING_EQUAL(node(t, "c-repartition-sink-2")->sink->from, "k2");
    ks_topology_free(t);
}

static void test_errors(void)
{
    char err[1024] = "";
    /* a name the insertion needs is taken */
    ks_topology *t = build(HEAD SELECT
                           "  - { name: c, type: count, from: by_url, store: n }\n"
                           "  - { name: c-repartition-source, type: ops.filter, from: views,\n"
                           "      config: { where: { path: /url, exists: true } } }\n"
                           "sinks:\n  - { from: c, topic: out, value: int64 }\n"
                           "  - { from: c-repartition-source, topic: out2 }\n",
                           err, sizeof err);
    CU_ASSERT_PTR_NULL(t);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "rp.yaml:8:"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "a repartition source named 'c-repartition-source'"));
    /* the topic is one the pipeline writes already */
    t = build(HEAD SELECT "  - { name: c, type: count, from: by_url, store: n }\n"
                          "sinks:\n  - { from: c, topic: rp-c-repartition, value: int64 }\n",
              err, sizeof err);
    CU_ASSERT_PTR_NULL(t);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "needs the repartition topic rp-c-repartition, which "
                                       "the pipeline already reads or writes"));
    /* bad `repartition:` values */
    t = build(HEAD "  - { name: c, type: count, from: views, store: n, repartition: 3 }\n"
                   "sinks:\n  - { from: c, topic: out, value: int64 }\n",
              err, sizeof err);
    CU_ASSERT_PTR_NULL(t);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "expected true or false for 'repartition', found '3'"));
    t = build(HEAD "  - { name: c, type: count, from: views, store: n,\n"
                   "      repartition: { partitions: 0 } }\n"
                   "sinks:\n  - { from: c, topic: out, value: int64 }\n",
              err, sizeof err);
    CU_ASSERT_PTR_NULL(t);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "'partitions' must be between 1 and 100000"));
    t = build(HEAD "  - { name: c, type: count, from: views, store: n,\n"
                   "      repartition: { size: 2 } }\n"
                   "sinks:\n  - { from: c, topic: out, value: int64 }\n",
              err, sizeof err);
    CU_ASSERT_PTR_NULL(t);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "unknown key 'size' in repartition"));
}

/* ---- stream time per sub-topology ------------------------------------------- */

static int emit_none(void *arg, ks_task *task, const ks_topo_node *sink, const ks_record *rec)
{
    (void)task;
    (void)sink;
    (void)rec;
    ++*(int *)arg;
    return 0;
}

static int changelog_none(void *arg, ks_task *task, int store, ks_bytes key,
                          const ks_bytes *value)
{
    (void)arg;
    (void)task;
    (void)store;
    (void)key;
    (void)value;
    return 0;
}

/* Records read back from the repartition topic come later than their
 * originals: the count's stream time must follow them, not the source's. */
static void test_stream_time(void)
{
    char state[] = "/tmp/ks-test-rp-state-XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(state));
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             HEAD SELECT "  - { name: per_url, type: count, from: by_url, store: n }\n"
                         "sinks:\n  - { from: per_url, topic: out, key: string, value: int64 }\n"
                         "state_dir: %s\n",
             state);
    ks_topology *t = build_ok(yaml);
    int emitted = 0;
    ks_task_io io = {.arg = &emitted, .emit = emit_none, .changelog = changelog_none};
    ks_task *task = NULL;
    char err[512];
    CU_ASSERT_EQUAL_FATAL(ks_task_create(t, 0, &io, &task, err, sizeof err), 0);
    const char *v = "{\"url\":\"/a\"}";
    ks_record r = {.key = "u", .key_len = 1, .value = v, .value_len = strlen(v),
                   .timestamp = 5000, .topic = "views"};
    CU_ASSERT_EQUAL(ks_task_begin(task), 0);
    CU_ASSERT_EQUAL(ks_task_process(task, node(t, "views"), &r), KS_OK);
    CU_ASSERT_EQUAL(emitted, 1); /* to the repartition topic */
    CU_ASSERT_EQUAL(task->sub_time[0], 5000);
    CU_ASSERT_EQUAL(task->sub_time[1], -1);
    r.key = "/a";
    r.key_len = 2;
    r.timestamp = 1000;
    CU_ASSERT_EQUAL(ks_task_process(task, node(t, "per_url-repartition-source"), &r), KS_OK);
    CU_ASSERT_EQUAL(emitted, 2); /* the count */
    CU_ASSERT_EQUAL(task->sub_time[0], 5000);
    CU_ASSERT_EQUAL(task->sub_time[1], 1000);
    CU_ASSERT_EQUAL(task->stream_time, 5000);
    ks_task_abort_stores(task);
    ks_task_destroy(task);
    ks_topology_free(t);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", state);
    CU_ASSERT_EQUAL(system(cmd), 0);
}

/* ---- the test driver runs both sub-topologies ------------------------------ */

static ks_driver *open_driver(const char *yaml, int32_t partitions)
{
    ks_driver_options opt = {.plugin_path = PLUGINS, .partitions = partitions};
    ks_driver *drv = NULL;
    char err[1024] = "";
    int rc = ks_driver_open_text("rp.yaml", yaml, strlen(yaml), &opt, &drv, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "\n%s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    return drv;
}

static void test_driver_counts(void)
{
    ks_driver *drv = open_driver(HEAD SELECT
                                 "  - { name: per_url, type: count, from: by_url, store: n }\n"
                                 "sinks:\n"
                                 "  - { name: out, from: per_url, topic: out, key: string,\n"
                                 "      value: int64 }\n",
                                 4);
    /* 3 URLs viewed by 20 users: the users' keys spread the views over all
     * four tasks, the counts must not be split by them */
    enum { USERS = 20, URLS = 3 };
    long want[URLS] = {0};
    for (int i = 0; i < 300; i++) {
        char user[16], value[96];
        int url = (i * 7 + i / 5) % URLS;
        snprintf(user, sizeof user, "u%d", i % USERS);
        snprintf(value, sizeof value, "{\"url\":\"/p%d\",\"n\":%d}", url, i);
        want[url]++;
        CU_ASSERT_EQUAL_FATAL(ks_driver_pipe(drv, "views", user, strlen(user), value,
                                             strlen(value), 1000 + i),
                              0);
    }
    long seen[URLS] = {0};
    ks_driver_record r;
    int bad = 0;
    while (ks_driver_read_output(drv, "out", &r) == 0) {
        int url = -1;
        if (r.key_len < 8 && sscanf((const char *)r.key, "/p%d", &url) != 1)
            url = -1;
        if (url < 0 || url >= URLS || r.value_len != 8) {
            bad++;
            continue;
        }
        /* 1..n per URL, counted by the task of the URL's partition */
        seen[url]++;
        bad += ks_int64_decode(r.value) != seen[url];
        bad += r.task != ks_driver_partition_for(r.key, r.key_len, 4);
        bad += r.timestamp < 1000;
    }
    CU_ASSERT_EQUAL(bad, 0);
    for (int u = 0; u < URLS; u++)
        CU_ASSERT_EQUAL(seen[u], want[u]);
    /* the repartition topic is no output */
    CU_ASSERT_EQUAL(ks_driver_output_count(drv, NULL), 0);
    ks_driver_close(drv);
}

/* A branch routes by name to a node that now reads a repartition topic. */
static void test_driver_branch(void)
{
    ks_driver *drv = open_driver(
        HEAD SELECT
        "  - name: b\n    type: ops.branch\n    from: by_url\n    config:\n"
        "      routes: [ { to: per_url, where: { path: /n, lt: 2 } } ]\n"
        "      default: rest\n"
        "  - { name: per_url, type: count, from: b, store: n }\n"
        "sinks:\n"
        "  - { name: out, from: per_url, topic: out, key: string, value: int64 }\n"
        "  - { name: rest, from: b, topic: rest }\n",
        2);
    const char *v[] = {"{\"url\":\"/a\",\"n\":0}", "{\"url\":\"/a\",\"n\":1}",
                       "{\"url\":\"/a\",\"n\":5}"};
    for (int i = 0; i < 3; i++)
        CU_ASSERT_EQUAL(ks_driver_pipe(drv, "views", "u", 1, v[i], strlen(v[i]), 1), 0);
    CU_ASSERT_EQUAL(ks_driver_output_count(drv, "out"), 2);
    CU_ASSERT_EQUAL(ks_driver_output_count(drv, "rest"), 1);
    ks_driver_close(drv);
}

/* The example runs as shipped: bots and views without a URL dropped, the
 * rest counted per URL. */
static void test_example(void)
{
    ks_driver_options opt = {.plugin_path = PLUGINS, .partitions = 4};
    ks_driver *drv = NULL;
    char err[1024] = "";
    int rc = ks_driver_open(KS_TEST_SRCDIR "/../examples/page-views/pipeline-per-url.yaml", &opt,
                            &drv, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "\n%s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    const char *views[][2] = {
        {"alice", "{\"user_agent\":\"firefox\",\"url\":\"/\",\"bytes\":1}"},
        {"bob", "{\"user_agent\":\"curl\",\"url\":\"/\",\"bytes\":2}"},
        {"carol", "{\"user_agent\":\"googlebot\",\"url\":\"/\",\"bytes\":3}"},
        {"dave", "{\"user_agent\":\"firefox\",\"bytes\":4}"},
        {"erin", "{\"user_agent\":\"firefox\",\"url\":\"/about\",\"bytes\":5}"},
        {"alice", "{\"user_agent\":\"firefox\",\"url\":\"/\",\"bytes\":6}"}};
    for (size_t i = 0; i < sizeof views / sizeof views[0]; i++)
        CU_ASSERT_EQUAL(ks_driver_pipe(drv, "views", views[i][0], strlen(views[i][0]),
                                       views[i][1], strlen(views[i][1]), 1),
                        0);
    const char *want[][2] = {{"/", "1"}, {"/", "2"}, {"/about", "1"}, {"/", "3"}};
    ks_driver_record r;
    for (size_t i = 0; i < 4; i++) {
        CU_ASSERT_EQUAL_FATAL(ks_driver_read_output(drv, NULL, &r), 0);
        CU_ASSERT(r.key_len == strlen(want[i][0]) && memcmp(r.key, want[i][0], r.key_len) == 0);
        CU_ASSERT(r.value_len == 8 && ks_int64_decode(r.value) == atoi(want[i][1]));
    }
    CU_ASSERT_NOT_EQUAL(ks_driver_read_output(drv, NULL, &r), 0);
    ks_driver_close(drv);
}

void ks_test_register_repartition(void)
{
    CU_pSuite s = CU_add_suite("repartition", NULL, NULL);
    CU_add_test(s, "select_key -> count: split in two sub-topologies", test_split);
    CU_add_test(s, "where topics go, and where none is needed", test_where);
    CU_add_test(s, "names, topics and `repartition:` refused", test_errors);
    CU_add_test(s, "stream time per sub-topology", test_stream_time);
    CU_add_test(s, "driver: counts per new key by its task", test_driver_counts);
    CU_add_test(s, "driver: branch routes to a repartitioned node", test_driver_branch);
    CU_add_test(s, "examples/page-views/pipeline-per-url.yaml", test_example);
}
