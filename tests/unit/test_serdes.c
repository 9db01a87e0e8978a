/*
 * test_serdes.c - the host's input_serde and child_serde (kstreams.h ABI
 * 1.6), and input_checked, through the test driver: the test plugin serdes.probe logs what it
 * is told, across sinks, nodes, a node with a store and a repartition
 * topic; and the ops plugin uses it (select_key's `format: auto`, map's
 * `{ key: auto }`).
 */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kstreams/kstreams.h"
#include "unit/test_ops.h"

#define SERDES_SO KS_TEST_BUILDDIR "/tests/plugins/.libs/serdes.so"

/* Open `yaml`, pipe one record (key, value) into source `src`, close;
 * the log (static). */
static const char *run_logged(const char *yaml, const char *src, const void *key,
                              size_t key_len, const char *value)
{
    static char text[16384];
    char path[] = "/tmp/ks-test-serdes-XXXXXX";
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    unlink(path);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    ks_driver_options opt = {.plugin_path = OPS_PLUGIN_PATH};
    ks_driver *drv = NULL;
    char err[1024] = "";
    int rc = ks_driver_open_text("serdes.yaml", yaml, strlen(yaml), &opt, &drv, err, sizeof err);
    if (rc == 0)
        ks_driver_pipe(drv, src, key, key_len, value, strlen(value), 1000);
    ks_driver_close(drv);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    close(fd);
    text[n > 0 ? n : 0] = '\0';
    size_t len = strlen(text);
    snprintf(text + len, sizeof text - len, "%s", err);
    CU_ASSERT_EQUAL(rc, 0);
    return text;
}

static void expect(const char *log, const char *line)
{
    int ok = strstr(log, line) != NULL;
    CU_ASSERT(ok);
    if (!ok)
        fprintf(stderr, "\nmissing '%s' in:\n%s\n", line, log);
}

#define HEAD                                                                              \
    "application: serdes\n"                                                               \
    "kafka: { bootstrap: [127.0.0.1:9] }\n"                                               \
    "plugins: [" SERDES_SO "]\n"

/* sources, sinks, a node between: what each side declares */
static void test_declared(void)
{
    unsigned char k8[8];
    ks_int64_encode(42, k8);
    const char *log = run_logged(
        HEAD "sources:\n  in: { topic: t, key: int64, value: json }\n"
             "nodes:\n"
             "  - { name: a, type: serdes.probe, from: in, config: { children: 'x,y,b,nope' } }\n"
             "  - { name: b, type: serdes.probe, from: a, config: { children: z } }\n"
             "sinks:\n"
             "  - { name: x, from: a, topic: x, key: int64, value: json }\n"
             "  - { name: y, from: a, topic: y, key: string, value: json }\n"
             "  - { name: z, from: b, topic: z, key: int64, value: bytes }\n",
        "in", k8, 8, "{}");
    expect(log, "probe a input int64/json");
    expect(log, "probe a child x int64/json");
    expect(log, "probe a child y string/json");
    expect(log, "probe a child b int64/bytes"); /* what b's sink takes */
    expect(log, "probe a child nope not found");
    expect(log, "probe a children unknown/unknown"); /* they disagree */
    expect(log, "probe b input int64/json");
    /* the engine checked the JSON of a's input (a source), not of b's */
    expect(log, "probe a checked 1");
    expect(log, "probe b checked 0");
    expect(log, "probe b children int64/bytes");
}

/* a node that changes keys, a repartition topic, a node with a store */
static void test_through_nodes(void)
{
    const char *log = run_logged(
        HEAD "sources:\n  in: { topic: t, key: string, value: json }\n"
             "nodes:\n"
             "  - { name: rk, type: serdes.rekey_probe, from: in, config: { children: c } }\n"
             "  - { name: c, type: count, from: rk, store: counts }\n"
             "  - { name: after, type: serdes.probe, from: c }\n"
             "  - { name: pass, type: serdes.probe, from: in }\n"
             "  - { name: behind, type: serdes.probe, from: pass, repartition: {} }\n"
             "sinks:\n"
             "  - { name: out, from: c, topic: o, key: string, value: int64 }\n"
             "  - { name: out2, from: after, topic: o2, key: string, value: int64 }\n"
             "  - { name: out3, from: behind, topic: o3, key: string, value: json }\n",
        "in", "k", 1, "{}");
    /* rk's child c sits behind a repartition topic; it takes what its
     * sinks take, its value being its own (a store) */
    expect(log, "probe rk input string/json");
    expect(log, "probe rk child c string/unknown");
    expect(log, "probe rk children string/unknown");
    /* after count: the key was changed upstream, the value is count's */
    expect(log, "probe after input unknown/unknown");
    expect(log, "probe after children string/int64");
    /* through a repartition topic of a node that keeps keys */
    expect(log, "probe behind input string/json");
    expect(log, "probe rk checked 1");
    expect(log, "probe behind checked 0"); /* a repartition topic: bytes */
    expect(log, "probe pass children string/json");
}

static int next_key(ks_driver *drv, const char *sink, const void *key, size_t key_len)
{
    ks_driver_record r;
    if (ks_driver_read_output(drv, sink, &r) != 0)
        return 0;
    return r.key && r.key_len == key_len && memcmp(r.key, key, key_len) == 0;
}

/* ops.select_key writes the key its children take; `format:` overrides */
static void test_select_key_format(void)
{
    ks_driver *drv = ks_test_ops_open(
        "application: sk\nkafka: { bootstrap: [127.0.0.1:9] }\n"
        "sources:\n  in: { topic: t, key: string, value: json }\n"
        "nodes:\n"
        "  - { name: i, type: ops.select_key, from: in, config: { path: /id } }\n"
        "  - { name: j, type: ops.select_key, from: in, config: { path: /id } }\n"
        "  - { name: t, type: ops.select_key, from: in, config: { path: /id, format: text } }\n"
        "  - { name: n, type: ops.select_key, from: in, config: { path: /id, format: int64 } }\n"
        "sinks:\n"
        "  - { name: oi, from: i, topic: oi, key: int64, value: json }\n"
        "  - { name: oj, from: j, topic: oj, key: json, value: json }\n"
        "  - { name: ot, from: t, topic: ot, key: string, value: json }\n"
        "  - { name: on, from: n, topic: on, key: bytes, value: json }\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(drv);
    unsigned char k8[8];
    ks_int64_encode(-42, k8);
    const char *v = "{\"id\":-42}";
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "in", "k", 1, v, strlen(v), 1), 0);
    CU_ASSERT(next_key(drv, "oi", k8, 8));
    CU_ASSERT(next_key(drv, "oj", "-42", 3));
    CU_ASSERT(next_key(drv, "ot", "-42", 3));
    CU_ASSERT(next_key(drv, "on", k8, 8));
    v = "{\"id\":\"x\"}";
    /* a string is no int64: the record is poison (none of its outputs stay) */
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "in", "k", 1, v, strlen(v), 2), KS_SKIP);
    CU_ASSERT(!next_key(drv, "oj", "\"x\"", 3));
    ks_driver_close(drv);
    drv = ks_test_ops_open(
        "application: sk\nkafka: { bootstrap: [127.0.0.1:9] }\n"
        "sources:\n  in: { topic: t, key: string, value: json }\n"
        "nodes:\n"
        "  - { name: j, type: ops.select_key, from: in, config: { path: /id } }\n"
        "  - { name: t, type: ops.select_key, from: in, config: { path: /id, format: text } }\n"
        "sinks:\n"
        "  - { name: oj, from: j, topic: oj, key: json, value: json }\n"
        "  - { name: ot, from: t, topic: ot, key: string, value: json }\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(drv);
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "in", "k", 1, v, strlen(v), 1), 0);
    CU_ASSERT(next_key(drv, "oj", "\"x\"", 3)); /* json: as written */
    CU_ASSERT(next_key(drv, "ot", "x", 1));
    ks_driver_close(drv);
    /* a format that is none of them is refused where it is written */
    const char *log;
    drv = ks_test_ops_open_logged(
        "application: sk\nkafka: { bootstrap: [127.0.0.1:9] }\n"
        "sources:\n  in: { topic: t, key: string, value: json }\n"
        "nodes:\n"
        "  - { name: j, type: ops.select_key, from: in, config: { path: /id, format: num } }\n"
        "sinks:\n  - { from: j, topic: oj }\n",
        &log);
    CU_ASSERT_PTR_NULL(drv);
    CU_ASSERT_STRING_EQUAL(log, "ops.yaml:6:77: node 'j' (ops.select_key) config 'format': "
                                "expected auto, text, json or int64, found 'num'");
    ks_driver_close(drv);
}

/* ops.map's { key: auto } renders the key by the source's key serde */
static void test_map_key_auto(void)
{
    static const struct {
        const char *serde;
        const void *key;
        size_t len;
        const char *want;
    } cases[] = {
        {"int64", "\0\0\0\0\0\0\0\x2a", 8, "{\"k\":42,\"k2\":\"c\"}"},
        {"json", "[1,\"a\"]", 7, "{\"k\":[1,\"a\"],\"k2\":\"c\"}"},
        {"string", "abc", 3, "{\"k\":\"abc\",\"k2\":\"c\"}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char yaml[1024];
        snprintf(yaml, sizeof yaml,
                 "application: mk\nkafka: { bootstrap: [127.0.0.1:9] }\n"
                 "sources:\n  in: { topic: t, key: %s, value: json }\n"
                 "nodes:\n"
                 "  - { name: m, type: ops.map, from: in,"
                 " config: { fields: { k: { key: auto }, k2: /c } } }\n"
                 "sinks:\n  - { name: out, from: m, topic: o, key: %s, value: json }\n",
                 cases[i].serde, cases[i].serde);
        ks_driver *drv = ks_test_ops_open(yaml);
        CU_ASSERT_PTR_NOT_NULL_FATAL(drv);
        const char *v = "{\"c\":\"c\"}";
        CU_ASSERT_EQUAL(ks_driver_pipe(drv, "in", cases[i].key, cases[i].len, v, strlen(v), 1),
                        0);
        ks_driver_record r;
        CU_ASSERT_EQUAL_FATAL(ks_driver_read_output(drv, "out", &r), 0);
        int ok = r.value_len == strlen(cases[i].want) &&
                 memcmp(r.value, cases[i].want, r.value_len) == 0;
        CU_ASSERT(ok);
        if (!ok)
            fprintf(stderr, "\nkey %s: got '%.*s'\n", cases[i].serde, (int)r.value_len,
                    (const char *)r.value);
        ks_driver_close(drv);
    }
}

/* ops warns when its input's values are int64 */
static void test_ops_warns_int64_values(void)
{
    const char *log = run_logged(
        "application: w\nkafka: { bootstrap: [127.0.0.1:9] }\n"
        "sources:\n  in: { topic: t, key: string, value: int64 }\n"
        "nodes:\n  - { name: f, type: ops.filter, from: in,"
        " config: { where: { path: /n, gt: 1 } } }\n"
        "sinks:\n  - { from: f, topic: o, key: string, value: int64 }\n",
        "in", "k", 1, "12345678");
    expect(log, "ops.filter: node 'f' reads JSON values, but its input's values are int64");
}

void ks_test_register_serdes(void)
{
    CU_pSuite s = CU_add_suite("serdes", NULL, NULL);
    CU_add_test(s, "input_serde/child_serde: what sources and sinks declare", test_declared);
    CU_add_test(s, "through a key change, a repartition topic, a store", test_through_nodes);
    CU_add_test(s, "ops.select_key: format auto, text, int64", test_select_key_format);
    CU_add_test(s, "ops.map: { key: auto } by the key serde", test_map_key_auto);
    CU_add_test(s, "ops warns about int64 values", test_ops_warns_int64_values);
}
