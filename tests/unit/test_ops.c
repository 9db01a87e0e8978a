/*
 * test_ops.c - the shipped ops plugin (plugins/ops.c, docs/operators.md)
 * through the test driver: every predicate operator in a table of values
 * kept or dropped by ops.filter, then map, select_key, flat_map and branch,
 * bad values (poison, with the reason in the log) and config errors
 * (refused when the pipeline is loaded, at the FILE:LINE:COL of the part
 * that is wrong). test_ops_examples.c runs the examples.
 */
#include <CUnit/CUnit.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kstreams/testdriver.h"
#include "unit/test_ops.h"
#include "unit/test_util.h"

#define HEAD                                                                           \
    "application: ops-test\n"                                                          \
    "kafka: { bootstrap: 127.0.0.1:9092 }\n"                                           \
    "sources:\n"                                                                       \
    "  in: { topic: in, key: string, value: string }\n"                                \
    "nodes:\n"

#define open_logged ks_test_ops_open_logged
#define open_ok ks_test_ops_open
#define next_is ks_test_ops_next_is

/* Open `yaml` with fd 2 going to a file; *log gets what was logged
 * (static). Returns the driver, or NULL when it did not open. */
ks_driver *ks_test_ops_open_logged(const char *yaml, const char **log)
{
    static char text[16384];
    char path[] = "/tmp/ks-test-ops-XXXXXX";
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    unlink(path);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    ks_driver_options opt = {.plugin_path = OPS_PLUGIN_PATH};
    ks_driver *drv = NULL;
    char err[1024] = "";
    int rc = ks_driver_open_text("ops.yaml", yaml, strlen(yaml), &opt, &drv, err, sizeof err);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    close(fd);
    text[n > 0 ? n : 0] = '\0';
    size_t len = strlen(text);
    snprintf(text + len, sizeof text - len, "%s", err);
    *log = text;
    return rc == 0 ? drv : NULL;
}

ks_driver *ks_test_ops_open(const char *yaml)
{
    const char *log;
    ks_driver *drv = open_logged(yaml, &log);
    if (!drv)
        fprintf(stderr, "\nopen failed:\n%s\n%s\n", yaml, log);
    CU_ASSERT_PTR_NOT_NULL_FATAL(drv);
    return drv;
}

static int pipe_kv(ks_driver *drv, const char *key, const char *value)
{
    return ks_driver_pipe(drv, "in", key, key ? strlen(key) : 0, value,
                          value ? strlen(value) : 0, 1000);
}

/* 1 when the next record of `sink` has this key and value (NULL: null). */
int ks_test_ops_next_is(ks_driver *drv, const char *sink, const char *key, const char *value)
{
    ks_driver_record r;
    if (ks_driver_read_output(drv, sink, &r) != 0) {
        fprintf(stderr, "\n%s: no record, want '%s' '%s'\n", sink, key, value);
        return 0;
    }
    int ok = (key ? r.key && r.key_len == strlen(key) && !memcmp(r.key, key, r.key_len)
                  : !r.key) &&
             (value ? r.value && r.value_len == strlen(value) &&
                          !memcmp(r.value, value, r.value_len)
                    : !r.value);
    if (!ok)
        fprintf(stderr, "\n%s: got '%.*s' '%.*s', want '%s' '%s'\n", sink, (int)r.key_len,
                r.key ? (const char *)r.key : "", (int)r.value_len,
                r.value ? (const char *)r.value : "", key ? key : "(null)",
                value ? value : "(null)");
    return ok;
}

/* ---- filter: every operator ------------------------------------------------ */

struct pred_case {
    const char *where; /* a predicate in YAML flow style */
    const char *value;
    int keep;
};

static const struct pred_case pred_cases[] = {
    /* eq: numbers by value, strings decoded, no type coercion */
    {"{ path: /n, eq: 5 }", "{\"n\":5}", 1},
    {"{ path: /n, eq: 5 }", "{\"n\":5.0}", 1},
    {"{ path: /n, eq: 5 }", "{\"n\":5e0}", 1},
    {"{ path: /n, eq: 5 }", "{\"n\":\"5\"}", 0},
    {"{ path: /n, eq: 5 }", "{\"n\":6}", 0},
    {"{ path: /n, eq: 5 }", "{}", 0},
    {"{ path: /n, eq: 5 }", "[5]", 0},
    {"{ path: /s, eq: abc }", "{\"s\":\"abc\"}", 1},
    {"{ path: /s, eq: abc }", "{\"s\":\"a\\u0062c\"}", 1},
    {"{ path: /s, eq: abc }", "{\"s\":\"abcd\"}", 0},
    {"{ path: /s, eq: \"5\" }", "{\"s\":\"5\"}", 1},
    {"{ path: /s, eq: \"5\" }", "{\"s\":5}", 0},
    {"{ path: /b, eq: true }", "{\"b\":true}", 1},
    {"{ path: /b, eq: true }", "{\"b\":\"true\"}", 0},
    {"{ path: /b, eq: false }", "{\"b\":false}", 1},
    {"{ path: /b, eq: null }", "{\"b\":null}", 1},
    {"{ path: /b, eq: null }", "{}", 0},
    {"{ path: /n, \"==\": 5 }", "{\"n\":5}", 1},
    /* ne: false on a missing field, true on another type */
    {"{ path: /n, ne: 5 }", "{\"n\":5}", 0},
    {"{ path: /n, ne: 5 }", "{\"n\":6}", 1},
    {"{ path: /n, ne: 5 }", "{\"n\":\"5\"}", 1},
    {"{ path: /n, ne: 5 }", "{}", 0},
    {"{ path: /n, \"!=\": 5 }", "{\"n\":4}", 1},
    /* order: numbers with numbers, strings with strings (bytewise) */
    {"{ path: /n, lt: 10 }", "{\"n\":9.5}", 1},
    {"{ path: /n, lt: 10 }", "{\"n\":10}", 0},
    {"{ path: /n, lt: 10 }", "{\"n\":-1e3}", 1},
    {"{ path: /n, lt: 10 }", "{\"n\":\"9\"}", 0},
    {"{ path: /n, le: 10 }", "{\"n\":10}", 1},
    {"{ path: /n, le: 10 }", "{\"n\":10.01}", 0},
    {"{ path: /n, gt: 10 }", "{\"n\":10}", 0},
    {"{ path: /n, gt: 10 }", "{\"n\":11}", 1},
    {"{ path: /n, ge: 10 }", "{\"n\":10}", 1},
    {"{ path: /n, ge: 10 }", "{\"n\":9}", 0},
    {"{ path: /n, \">=\": 10 }", "{\"n\":10}", 1},
    {"{ path: /n, \"<\": 0 }", "{\"n\":-0.5}", 1},
    {"{ path: /n, \"<=\": 0 }", "{\"n\":0}", 1},
    {"{ path: /n, \">\": 0 }", "{\"n\":0}", 0},
    {"{ path: /n, gt: 9007199254740992 }", "{\"n\":9223372036854775807}", 1},
    {"{ path: /s, lt: m }", "{\"s\":\"apple\"}", 1},
    {"{ path: /s, lt: m }", "{\"s\":\"m\"}", 0},
    {"{ path: /s, lt: m }", "{\"s\":\"zebra\"}", 0},
    {"{ path: /s, ge: m }", "{\"s\":\"m\"}", 1},
    {"{ path: /s, ge: m }", "{\"s\":\"ma\"}", 1},
    {"{ path: /s, gt: \"\\u00e9\" }", "{\"s\":\"\\u00e9t\\u00e9\"}", 1},
    /* exists */
    {"{ path: /a/b, exists: true }", "{\"a\":{\"b\":null}}", 1},
    {"{ path: /a/b, exists: true }", "{\"a\":{}}", 0},
    {"{ path: /a/b, exists: true }", "{\"a\":5}", 0},
    {"{ path: /a/b, exists: false }", "{\"a\":{}}", 1},
    {"{ path: /a/b, exists: false }", "{\"a\":{\"b\":0}}", 0},
    /* contains: a substring, or an element of an array */
    {"{ path: /ua, contains: bot }", "{\"ua\":\"Googlebot/2.1\"}", 1},
    {"{ path: /ua, contains: bot }", "{\"ua\":\"Mozilla/5.0\"}", 0},
    {"{ path: /ua, contains: bot }", "{\"ua\":\"b\\u006ft\"}", 1},
    {"{ path: /ua, contains: bot }", "{\"ua\":5}", 0},
    {"{ path: /ua, contains: \"\" }", "{\"ua\":\"\"}", 1},
    {"{ path: /tags, contains: red }", "{\"tags\":[\"blue\",\"red\"]}", 1},
    {"{ path: /tags, contains: red }", "{\"tags\":[\"reddish\"]}", 0},
    {"{ path: /tags, contains: 3 }", "{\"tags\":[1,2,3.0]}", 1},
    /* prefix */
    {"{ path: /url, prefix: /api/ }", "{\"url\":\"/api/v1\"}", 1},
    {"{ path: /url, prefix: /api/ }", "{\"url\":\"\\/api\\/v1\"}", 1},
    {"{ path: /url, prefix: /api/ }", "{\"url\":\"/ap\"}", 0},
    {"{ path: /url, prefix: /api/ }", "{\"url\":\"/home\"}", 0},
    {"{ path: /url, prefix: /api/ }", "{\"url\":[\"/api/\"]}", 0},
    /* in */
    {"{ path: /c, in: [DE, FR, 3] }", "{\"c\":\"FR\"}", 1},
    {"{ path: /c, in: [DE, FR, 3] }", "{\"c\":3}", 1},
    {"{ path: /c, in: [DE, FR, 3] }", "{\"c\":\"IT\"}", 0},
    {"{ path: /c, in: [DE, FR, 3] }", "{}", 0},
    {"{ path: /c, in: [] }", "{\"c\":1}", 0},
    /* is */
    {"{ path: /x, is: array }", "{\"x\":[]}", 1},
    {"{ path: /x, is: array }", "{\"x\":{}}", 0},
    {"{ path: /x, is: object }", "{\"x\":{}}", 1},
    {"{ path: /x, is: string }", "{\"x\":\"\"}", 1},
    {"{ path: /x, is: number }", "{\"x\":-1.5}", 1},
    {"{ path: /x, is: boolean }", "{\"x\":false}", 1},
    {"{ path: /x, is: null }", "{\"x\":null}", 1},
    {"{ path: /x, is: null }", "{}", 0},
    {"{ path: /x, is: \"null\" }", "{\"x\":null}", 1},
    {"{ path: \"\", is: object }", "[]", 0},
    /* all, any, not */
    {"{ all: [ { path: /n, gt: 1 }, { path: /n, lt: 5 } ] }", "{\"n\":3}", 1},
    {"{ all: [ { path: /n, gt: 1 }, { path: /n, lt: 5 } ] }", "{\"n\":6}", 0},
    {"{ any: [ { path: /a, exists: true }, { path: /b, eq: 1 } ] }", "{\"a\":0}", 1},
    {"{ any: [ { path: /a, exists: true }, { path: /b, eq: 1 } ] }", "{\"b\":1}", 1},
    {"{ any: [ { path: /a, exists: true }, { path: /b, eq: 1 } ] }", "{\"b\":2}", 0},
    {"{ not: { path: /ua, contains: bot } }", "{\"ua\":\"a bot\"}", 0},
    {"{ not: { path: /ua, contains: bot } }", "{\"ua\":\"x\"}", 1},
    {"{ not: { path: /ua, contains: bot } }", "{}", 1},
    {"{ all: [ { any: [ { path: /a, eq: 1 }, { path: /b, eq: 1 } ] }, "
     "{ not: { path: /c, exists: true } } ] }", "{\"b\":1}", 1},
    {"{ all: [ { any: [ { path: /a, eq: 1 }, { path: /b, eq: 1 } ] }, "
     "{ not: { path: /c, exists: true } } ] }", "{\"b\":1,\"c\":0}", 0},
    {"{ not: { not: { not: { path: /a, eq: 1 } } } }", "{\"a\":1}", 0},
    /* pointers: escapes, array indexes, the whole value */
    {"{ path: \"/a~1b/m~0n\", eq: 1 }", "{\"a/b\":{\"m~n\":1}}", 1},
    {"{ path: /items/1/id, eq: x }", "{\"items\":[{\"id\":\"y\"},{\"id\":\"x\"}]}", 1},
    {"{ path: /items/-, exists: true }", "{\"items\":[1]}", 0},
    {"{ path: \"\", eq: 5 }", "5", 1},
    {"{ path: \"\", eq: 5 }", "\"5\"", 0},
    {"{ path: \"/\", eq: 1 }", "{\"\":1}", 1},
};

static void test_predicates(void)
{
    ks_driver *drv = NULL;
    const char *open_for = NULL;
    size_t n = sizeof pred_cases / sizeof pred_cases[0], failed = 0;
    for (size_t i = 0; i < n; i++) {
        const struct pred_case *c = &pred_cases[i];
        if (!open_for || strcmp(open_for, c->where) != 0) {
            ks_driver_close(drv);
            char yaml[2048];
            snprintf(yaml, sizeof yaml,
                     HEAD "  - { name: f, type: ops.filter, from: in, config: { where: %s } }\n"
                          "sinks:\n  - { name: out, from: f, topic: out }\n",
                     c->where);
            drv = open_ok(yaml);
            open_for = c->where;
        }
        int rc = pipe_kv(drv, "k", c->value);
        size_t got = ks_driver_output_count(drv, "out");
        ks_driver_record r;
        while (ks_driver_read_output(drv, "out", &r) == 0)
            ;
        if (rc != 0 || got != (size_t)c->keep) {
            fprintf(stderr, "\nwhere %s on %s: rc %d, %zu out, want %d\n", c->where, c->value,
                    rc, got, c->keep);
            failed++;
        }
    }
    ks_driver_close(drv);
    printf("\n    %zu predicate cases, %zu failed\n", n, failed);
    CU_ASSERT_EQUAL(failed, 0);
}

/* ---- bad values: poison with the reason; tombstones pass ------------------- */

static void test_poison_and_tombstones(void)
{
    const char *yaml = HEAD "  - name: f\n    type: ops.filter\n    from: in\n"
                            "    config: { where: { path: /n, gt: 1 } }\n"
                            "sinks:\n  - { name: out, from: f, topic: out }\n";
    ks_driver *drv = open_ok(yaml);
    static const char *const bad[] = {"not json", "", "{\"n\":2", "{\"n\":2}}",
                                      "[[[[[[[[[[", "{\"s\":\"\xff\"}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CU_ASSERT_EQUAL(ks_driver_pipe(drv, "in", "k", 1, bad[i], strlen(bad[i]), 1), KS_SKIP);
    /* valid JSON that jansson refuses is not poison: numbers compare as
     * doubles (1e400 is +infinity, 99999999999999999999 is 1e20), "\u0000"
     * decodes to a NUL byte */
    CU_ASSERT_EQUAL(pipe_kv(drv, "k", "{\"n\":1e400}"), 0);
    CU_ASSERT(next_is(drv, "out", "k", "{\"n\":1e400}"));
    CU_ASSERT_EQUAL(pipe_kv(drv, "k", "{\"n\":-1e400}"), 0);
    CU_ASSERT_EQUAL(pipe_kv(drv, "k", "{\"n\":99999999999999999999}"), 0);
    CU_ASSERT(next_is(drv, "out", "k", "{\"n\":99999999999999999999}"));
    CU_ASSERT_EQUAL(pipe_kv(drv, "k", "{\"s\":\"a\\u0000b\",\"n\":0}"), 0);
    CU_ASSERT_EQUAL(pipe_kv(drv, "k", NULL), 0); /* a tombstone passes */
    CU_ASSERT(next_is(drv, "out", "k", NULL));
    CU_ASSERT_EQUAL(pipe_kv(drv, "k", "{\"n\":2}"), 0);
    CU_ASSERT(next_is(drv, "out", "k", "{\"n\":2}"));
    ks_driver_close(drv);

    /* the reason and byte position reach the log */
    char path[] = "/tmp/ks-test-ops-log-XXXXXX";
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    unlink(path);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    ks_driver_options opt = {.plugin_path = OPS_PLUGIN_PATH};
    char err[512];
    drv = NULL;
    ks_driver_open_text("ops.yaml", yaml, strlen(yaml), &opt, &drv, err, sizeof err);
    int rc = drv ? pipe_kv(drv, "k", "{\"n\":2 \"m\":3}") : -99;
    ks_driver_close(drv);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char text[4096];
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    close(fd);
    text[n > 0 ? n : 0] = '\0';
    CU_ASSERT_EQUAL(rc, KS_SKIP);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "ops.filter: poison record in[0]@"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "value is not JSON: expected ',' or '}' at byte 7"));
    if (!strstr(text, "at byte 7"))
        fprintf(stderr, "\nlog: %s\n", text);
}

/* ---- map ---------------------------------------------------------------------- */

static void test_map(void)
{
    ks_driver *drv = open_ok(
        HEAD "  - name: m\n    type: ops.map\n    from: in\n    config:\n      fields:\n"
             "        user: /user/id\n"
             "        page: /url\n"
             "        gone: /nope\n"
             "        n: { path: /nope, default: 0 }\n"
             "        src: { const: web }\n"
             "        obj: { const: { a: [1, \"x\"], b: ~ } }\n"
             "        key: { key: string }\n"
             "        \"we/ird\": { path: \"/a~1b\" }\n"
             "sinks:\n  - { name: out, from: m, topic: out, value: json }\n");
    CU_ASSERT_EQUAL(pipe_kv(drv, "u\"1\n", "{\"user\":{\"id\":\"u1\"},\"url\":\"/h\",\"a/b\":[1,2]}"),
                    0);
    CU_ASSERT(next_is(drv, "out", "u\"1\n",
                      "{\"user\":\"u1\",\"page\":\"/h\",\"n\":0,\"src\":\"web\","
                      "\"obj\":{\"a\":[1,\"x\"],\"b\":null},\"key\":\"u\\\"1\\u000a\","
                      "\"we/ird\":[1,2]}"));
    /* a non-object value: every path is missing */
    CU_ASSERT_EQUAL(pipe_kv(drv, NULL, "42"), 0);
    CU_ASSERT(next_is(drv, "out", NULL,
                      "{\"n\":0,\"src\":\"web\",\"obj\":{\"a\":[1,\"x\"],\"b\":null},"
                      "\"key\":null}"));
    /* a key that is not UTF-8 cannot be a JSON string: poison */
    CU_ASSERT_EQUAL(ks_driver_pipe(drv, "in", "\xff", 1, "{}", 2, 1), KS_SKIP);
    CU_ASSERT_EQUAL(pipe_kv(drv, "k", NULL), 0); /* tombstone */
    CU_ASSERT(next_is(drv, "out", "k", NULL));
    CU_ASSERT_EQUAL(pipe_kv(drv, "k", "{\"url\":"), KS_SKIP);
    ks_driver_close(drv);

    /* the whole value, and the key as JSON */
    drv = open_ok(HEAD "  - name: m\n    type: ops.map\n    from: in\n"
                       "    config: { fields: { id: { key: json }, v: \"\" } }\n"
                       "sinks:\n  - { name: out, from: m, topic: out, value: json }\n");
    CU_ASSERT_EQUAL(pipe_kv(drv, "42", "[true]"), 0);
    CU_ASSERT(next_is(drv, "out", "42", "{\"id\":42,\"v\":[true]}"));
    CU_ASSERT_EQUAL(pipe_kv(drv, "abc", "[true]"), KS_SKIP);
    ks_driver_close(drv);
}

/* ---- select_key ------------------------------------------------------------- */

static ks_driver *select_key(const char *config)
{
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             HEAD "  - { name: s, type: ops.select_key, from: in, config: %s }\n"
                  "sinks:\n  - { name: out, from: s, topic: out }\n",
             config);
    return open_ok(yaml);
}

static void test_select_key(void)
{
    ks_driver *drv = select_key("{ path: /user/id }");
    CU_ASSERT_EQUAL(pipe_kv(drv, "old", "{\"user\":{\"id\":\"u\\u00e9\"}}"), 0);
    CU_ASSERT(next_is(drv, "out", "u\xc3\xa9", "{\"user\":{\"id\":\"u\\u00e9\"}}"));
    CU_ASSERT_EQUAL(pipe_kv(drv, "old", "{\"user\":{\"id\":42}}"), 0);
    CU_ASSERT(next_is(drv, "out", "42", "{\"user\":{\"id\":42}}"));
    CU_ASSERT_EQUAL(pipe_kv(drv, "old", "{\"user\":{\"id\":{\"a\": 1}}}"), 0);
    CU_ASSERT(next_is(drv, "out", "{\"a\": 1}", "{\"user\":{\"id\":{\"a\": 1}}}"));
    CU_ASSERT_EQUAL(pipe_kv(drv, "old", "{\"user\":{\"id\":\"\"}}"), 0);
    CU_ASSERT(next_is(drv, "out", "", "{\"user\":{\"id\":\"\"}}"));
    /* missing, a tombstone: dropped (on_missing: drop, the default) */
    CU_ASSERT_EQUAL(pipe_kv(drv, "old", "{\"user\":{}}"), 0);
    CU_ASSERT_EQUAL(pipe_kv(drv, "old", NULL), 0);
    CU_ASSERT_EQUAL(ks_driver_output_count(drv, NULL), 0);
    CU_ASSERT_EQUAL(pipe_kv(drv, "old", "{\"user\":"), KS_SKIP);
    ks_driver_close(drv);

    drv = select_key("{ path: /id, on_missing: poison }");
    CU_ASSERT_EQUAL(pipe_kv(drv, "old", "{}"), KS_SKIP);
    CU_ASSERT_EQUAL(pipe_kv(drv, "old", "{\"id\":1}"), 0);
    CU_ASSERT(next_is(drv, "out", "1", "{\"id\":1}"));
    ks_driver_close(drv);

    drv = select_key("{ path: /id, on_missing: fail }");
    CU_ASSERT_EQUAL(pipe_kv(drv, "old", "{}"), KS_FATAL);
    ks_driver_close(drv);

    drv = select_key("{ path: \"\" }"); /* value_to_key */
    CU_ASSERT_EQUAL(pipe_kv(drv, "old", "\"text\""), 0);
    CU_ASSERT(next_is(drv, "out", "text", "\"text\""));
    ks_driver_close(drv);

    /* it changes keys: a keyed node downstream counts by the new key,
     * through a repartition topic (test_repartition.c) */
    drv = open_ok(HEAD "  - { name: s, type: ops.select_key, from: in, config: { path: /id } }\n"
                       "  - { name: c, type: count, from: s, store: n }\n"
                       "sinks:\n  - { name: out, from: c, topic: out, value: int64 }\n");
    CU_ASSERT_EQUAL(pipe_kv(drv, "a", "{\"id\":\"x\"}"), 0);
    CU_ASSERT_EQUAL(pipe_kv(drv, "b", "{\"id\":\"x\"}"), 0);
    CU_ASSERT_EQUAL(ks_driver_output_count(drv, "out"), 2);
    ks_driver_close(drv);
}

/* ---- flat_map ----------------------------------------------------------------- */

static void test_flat_map(void)
{
    ks_driver *drv = open_ok(
        HEAD "  - { name: f, type: ops.flat_map, from: in, config: { path: /items } }\n"
             "sinks:\n  - { name: out, from: f, topic: out }\n");
    CU_ASSERT_EQUAL(pipe_kv(drv, "k", "{\"items\":[1, \"a\" ,{\"b\":[2]},null]}"), 0);
    CU_ASSERT(next_is(drv, "out", "k", "1"));
    CU_ASSERT(next_is(drv, "out", "k", "\"a\""));
    CU_ASSERT(next_is(drv, "out", "k", "{\"b\":[2]}"));
    CU_ASSERT(next_is(drv, "out", "k", "null"));
    CU_ASSERT_EQUAL(pipe_kv(drv, "k", "{\"items\":[]}"), 0);
    CU_ASSERT_EQUAL(pipe_kv(drv, "k", "{\"items\":{\"a\":1}}"), 0); /* not an array */
    CU_ASSERT_EQUAL(pipe_kv(drv, "k", "{}"), 0);
    CU_ASSERT_EQUAL(ks_driver_output_count(drv, NULL), 0);
    CU_ASSERT_EQUAL(pipe_kv(drv, "k", NULL), 0);
    CU_ASSERT(next_is(drv, "out", "k", NULL));
    ks_driver_close(drv);

    drv = open_ok(HEAD "  - name: f\n    type: ops.flat_map\n    from: in\n"
                       "    config: { path: /items, on_missing: poison }\n"
                       "sinks:\n  - { name: out, from: f, topic: out }\n");
    CU_ASSERT_EQUAL(pipe_kv(drv, "k", "{\"items\":5}"), KS_SKIP);
    CU_ASSERT_EQUAL(pipe_kv(drv, "k", "[]"), KS_SKIP);
    CU_ASSERT_EQUAL(pipe_kv(drv, "k", "{\"items\":[[]]}"), 0);
    CU_ASSERT(next_is(drv, "out", "k", "[]"));
    ks_driver_close(drv);
}

/* ---- branch --------------------------------------------------------------------- */

#define BRANCH_SINKS                                                                   \
    "sinks:\n"                                                                         \
    "  - { name: errors, from: b, topic: errors }\n"                                   \
    "  - { name: redirects, from: b, topic: redirects }\n"                             \
    "  - { name: ok, from: b, topic: ok }\n"

static void test_branch(void)
{
    ks_driver *drv = open_ok(
        HEAD "  - name: b\n    type: ops.branch\n    from: in\n    config:\n"
             "      routes:\n"
             "        - { to: errors, where: { path: /status, ge: 500 } }\n"
             "        - { to: redirects, where: { path: /status, ge: 300 } }\n"
             "      default: ok\n" BRANCH_SINKS);
    CU_ASSERT_EQUAL(pipe_kv(drv, "a", "{\"status\":503}"), 0);
    CU_ASSERT_EQUAL(pipe_kv(drv, "b", "{\"status\":302}"), 0);
    CU_ASSERT_EQUAL(pipe_kv(drv, "c", "{\"status\":200}"), 0);
    CU_ASSERT_EQUAL(pipe_kv(drv, "d", "{}"), 0);
    CU_ASSERT_EQUAL(pipe_kv(drv, "e", NULL), 0);
    CU_ASSERT_EQUAL(ks_driver_output_count(drv, "errors"), 1);
    CU_ASSERT_EQUAL(ks_driver_output_count(drv, "redirects"), 1);
    CU_ASSERT(next_is(drv, "errors", "a", "{\"status\":503}"));
    CU_ASSERT(next_is(drv, "redirects", "b", "{\"status\":302}"));
    CU_ASSERT(next_is(drv, "ok", "c", "{\"status\":200}"));
    CU_ASSERT(next_is(drv, "ok", "d", "{}"));
    CU_ASSERT(next_is(drv, "ok", "e", NULL));
    CU_ASSERT_EQUAL(pipe_kv(drv, "f", "{"), KS_SKIP);
    ks_driver_close(drv);

    /* no default: unrouted records are dropped */
    drv = open_ok(HEAD "  - name: b\n    type: ops.branch\n    from: in\n    config:\n"
                       "      routes:\n"
                       "        - { to: errors, where: { path: /status, ge: 500 } }\n"
                       BRANCH_SINKS);
    CU_ASSERT_EQUAL(pipe_kv(drv, "a", "{\"status\":200}"), 0);
    CU_ASSERT_EQUAL(pipe_kv(drv, "a", "{\"status\":500}"), 0);
    CU_ASSERT_EQUAL(ks_driver_output_count(drv, NULL), 1);
    CU_ASSERT(next_is(drv, "errors", "a", "{\"status\":500}"));
    ks_driver_close(drv);

    /* a route or default naming no child is refused where it is written */
    const char *log;
    drv = open_logged(HEAD "  - name: b\n    type: ops.branch\n    from: in\n    config:\n"
                           "      routes:\n"
                           "        - { to: errors, where: { path: /status, ge: 500 } }\n"
                           "        - { to: typo, where: { path: /status, eq: 404 } }\n"
                           BRANCH_SINKS,
                      &log);
    CU_ASSERT_PTR_NULL(drv);
    CU_ASSERT_STRING_EQUAL(log, "ops.yaml:12:13: node 'b' (ops.branch) routes to 'typo', which "
                                "is not one of its children: give a node or sink `from: b` and "
                                "`name: typo`");
    ks_driver_close(drv);
    drv = open_logged(HEAD "  - name: b\n    type: ops.branch\n    from: in\n    config:\n"
                           "      routes: [ { to: ok, where: { path: /s, eq: 1 } } ]\n"
                           "      default: in\n" BRANCH_SINKS,
                      &log);
    CU_ASSERT_PTR_NULL(drv);
    CU_ASSERT_PTR_NOT_NULL(strstr(log, "ops.yaml:11:16: node 'b' (ops.branch) routes to 'in'"));
    ks_driver_close(drv);
}

/* ---- config errors ---------------------------------------------------------------- */

struct cfg_case {
    const char *type, *config, *want;
};

static const struct cfg_case cfg_cases[] = {
    {"filter", "{ where: { path: /a, eqq: 1 } }",
     "ops.yaml:6:73: node 'x' (ops.filter) config 'where' at /eqq: unknown key 'eqq'; a "
     "predicate is all, any, not, or path with one of: eq (==)"},
    {"filter", "{ where: { path: a, eq: 1 } }", "at /path: 'a' is not a JSON pointer"},
    {"filter", "{ where: { path: \"/a~2\", eq: 1 } }", "at /path: '/a~2' is not a JSON pointer"},
    {"filter", "{ where: { path: 5, eq: 1 } }", "at /path: 'path' must be a JSON pointer string"},
    {"filter", "{ where: { all: [] } }", "at /all: 'all' needs at least one predicate"},
    {"filter", "{ where: { any: { path: /a, eq: 1 } } }", "at /any: 'any' needs a list"},
    {"filter", "{ where: { path: /a, eq: 1, ne: 2 } }", "at /ne: one operator per predicate"},
    {"filter", "{ where: { path: /a, lt: true } }",
     "at /lt: an order comparison needs a number or a string"},
    {"filter", "{ where: { path: /a, prefix: 1 } }", "at /prefix: 'prefix' needs a string"},
    {"filter", "{ where: { path: /a, exists: yes } }", "at /exists: 'exists' needs true or false"},
    {"filter", "{ where: { path: /a, is: integer } }", "at /is: 'is' needs one of null"},
    {"filter", "{ where: { path: /a, in: 5 } }", "at /in: 'in' needs a list of values"},
    {"filter", "{ where: { path: /a, in: [1, [2]] } }", "at /in/1: expected a number, string"},
    {"filter", "{ where: { path: /a, eq: { b: 1 } } }", "at /eq: expected a number, string"},
    {"filter", "{ where: { all: [ { path: /a } ] } }", "at /all/0: 'path' needs an operator"},
    {"filter", "{ where: { any: [ { eq: 1 } ] } }", "at /any/0: a comparison needs 'path'"},
    {"filter", "{ where: { not: { path: /b, eq: 1 }, path: /a } }",
     "all, any and not stand alone in their mapping"},
    {"filter", "{ where: { not: [ { path: /b, eq: 1 } ] } }", "at /not: a predicate is a mapping"},
    {"filter", "{ where: {} }", "an empty predicate"},
    {"filter", "{ where: plain }", "config 'where': expected a predicate mapping, found 'plain'"},
    {"filter", "{ where: 5 }", "config 'where': a predicate is a mapping"},
    {"filter", "{ wher: { path: /a, eq: 1 } }", "unknown config key 'wher' for type 'ops.filter'"},
    {"filter", "{ }", "node 'x' (type 'ops.filter') needs config key 'where'"},
    {"map", "{ fields: { a: x } }",
     "ops.yaml:6:61: node 'x' (ops.map) config 'fields' at /a: 'x' is not a JSON pointer: it "
     "must be empty (the whole value) or start with '/'; for a constant text write "
     "{ const: \"x\" }"},
    {"map", "{ fields: { a: { path: /x, const: 1 } } }",
     "at /a: a field has exactly one of path (with an optional default), const or key"},
    {"map", "{ fields: { a: { default: 1 } } }", "at /a: a field has exactly one of"},
    {"map", "{ fields: { a: { key: yaml } } }", "at /a: key: is string"},
    {"map", "{ fields: { a: { pth: /x } } }", "at /a: unknown key \"pth\""},
    {"map", "{ fields: [a] }", "config 'fields': expected a mapping of output field names"},
    {"map", "{ fields: {} }", "config 'fields': no fields"},
    {"select_key", "{ path: /a, on_missing: maybe }",
     "config 'on_missing': expected drop, poison or fail, found 'maybe'"},
    {"select_key", "{ path: a }", "config 'path': 'a' is not a JSON pointer"},
    {"flat_map", "{ path: \"/~\" }", "config 'path': '/~' is not a JSON pointer"},
    {"branch", "{ routes: [ { to: a } ] }", "config 'routes' at /0: a route needs both"},
    {"branch", "{ routes: [] }", "config 'routes': expected at least one route"},
    {"branch", "{ routes: [ { to: a, where: { path: /x, eq: 1 }, else: b } ] }",
     "at /0: a route has two keys"},
    {"branch", "{ routes: [ { to: a, where: { path: /x, equals: 1 } } ] }",
     "config 'routes' at /0/where/equals: unknown key 'equals'"},
    {"branch", "{ routes: { to: a } }", "config 'routes': expected a list of { to: CHILD"},
};

static void test_config_errors(void)
{
    size_t failed = 0;
    for (size_t i = 0; i < sizeof cfg_cases / sizeof cfg_cases[0]; i++) {
        const struct cfg_case *c = &cfg_cases[i];
        char yaml[2048];
        snprintf(yaml, sizeof yaml,
                 HEAD "  - { name: x, type: ops.%s, from: in, config: %s }\n"
                      "sinks:\n  - { name: out, from: x, topic: out }\n",
                 c->type, c->config);
        const char *log;
        ks_driver *drv = open_logged(yaml, &log);
        if (drv || !strstr(log, c->want)) {
            fprintf(stderr, "\nops.%s %s: %s; want '%s' in:\n%s\n", c->type, c->config,
                    drv ? "opened" : "refused", c->want, log);
            failed++;
        }
        ks_driver_close(drv);
    }
    CU_ASSERT_EQUAL(failed, 0);

    /* block style: the line and column of the part that is wrong */
    const char *log;
    ks_driver *drv = open_logged(
        HEAD "  - name: f\n"
             "    type: ops.filter\n"
             "    from: in\n"
             "    config:\n"
             "      where:\n"
             "        all:\n"
             "          - { path: /url, prefix: /api/ }\n"
             "          - any:\n"
             "              - { path: /ms, gte: 500 }\n"
             "sinks:\n  - { name: out, from: f, topic: out }\n",
        &log);
    CU_ASSERT_PTR_NULL(drv);
    CU_ASSERT_STRING_EQUAL(log, "ops.yaml:14:30: node 'f' (ops.filter) config 'where' at "
                                "/all/1/any/0/gte: unknown key 'gte'; a predicate is all, any, "
                                "not, or path with one of: eq (==), ne (!=), lt (<), le (<=), "
                                "gt (>), ge (>=), exists, contains, prefix, in, is");
    ks_driver_close(drv);
    drv = open_logged(HEAD "  - name: m\n    type: ops.map\n    from: in\n    config:\n"
                           "      fields:\n        a: /x\n        b: { key: yaml }\n"
                           "sinks:\n  - { name: out, from: m, topic: out }\n",
                      &log);
    CU_ASSERT_PTR_NULL(drv);
    CU_ASSERT_STRING_EQUAL(log, "ops.yaml:12:9: node 'm' (ops.map) config 'fields' at /b: key: "
                                "is string (the key as a JSON string), json (the key is JSON "
                                "text), int64 (8 bytes big-endian, as a number) or auto (by "
                                "the key's serde)");
    ks_driver_close(drv);

    /* a list or mapping only goes to a string key of any plugin's schema */
    const char *yaml = HEAD "  - { name: x, type: changes.only_changes, from: in, store: s,\n"
                            "      config: { report_every: [1s] } }\n"
                            "sinks:\n  - { name: out, from: x, topic: out }\n";
    ks_driver_options opt = {.plugin_path = KS_TEST_BUILDDIR "/examples/plugin-test/.libs"};
    char err[512] = "";
    drv = NULL;
    CU_ASSERT_NOT_EQUAL(ks_driver_open_text("ops.yaml", yaml, strlen(yaml), &opt, &drv, err,
                                            sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(err, "ops.yaml:7:31: config key 'report_every' of node 'x' must be a "
                                "duration (e.g. 250ms, 10s, 5m), found a list");
    ks_driver_close(drv);
}

/* ---- random values through every operator -------------------------------- */

static void test_random_values(void)
{
    ks_driver *drv = open_ok(
        HEAD "  - { name: f, type: ops.filter, from: in, config: { where: { any: [\n"
             "      { path: /a/0/b, contains: x }, { path: /s, prefix: ab }, { path: /n, ge: 1 },\n"
             "      { path: /a, contains: 1 }, { path: /s, in: [ab, 1, null] } ] } } }\n"
             "  - { name: m, type: ops.map, from: in, config: { fields: {\n"
             "      x: /a/0, y: { path: /s, default: [1] }, k: { key: string } } } }\n"
             "  - { name: s, type: ops.select_key, from: in, config: { path: /s } }\n"
             "  - { name: l, type: ops.flat_map, from: in, config: { path: /a } }\n"
             "  - name: b\n    type: ops.branch\n    from: in\n    config:\n"
             "      routes: [ { to: b1, where: { path: /n, lt: 0 } } ]\n      default: b2\n"
             "sinks:\n  - { from: f, topic: o1 }\n  - { from: m, topic: o2 }\n"
             "  - { from: s, topic: o3 }\n  - { from: l, topic: o4 }\n"
             "  - { name: b1, from: b, topic: o5 }\n  - { name: b2, from: b, topic: o6 }\n");
    static const char seed[] = "{\"a\":[{\"b\":\"x\\u0078y\"},1,[2,{}]],\"s\":\"ab\\\"c\","
                               "\"n\":-1.5e2,\"t\":true,\"z\":null}";
    static const char junk[] = "{}[]\",:\\ -0123456789eEtfnu.\x80\xc3\xff\t";
    uint64_t r = 0x9e3779b97f4a7c15ULL;
    long ok = 0, poison = 0, other = 0;
    char v[256];
    /* each poison record is logged by every operator: not into the test log */
    fflush(stderr);
    int saved = dup(2), devnull = open("/dev/null", O_WRONLY);
    CU_ASSERT_FATAL(saved >= 0 && devnull >= 0);
    dup2(devnull, 2);
    close(devnull);
    for (int i = 0; i < 20000; i++) {
        size_t n = sizeof seed - 1;
        memcpy(v, seed, n);
        for (int m = 0; m < 1 + i % 3; m++) {
            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
            if (r % 5 == 0)
                n = (size_t)(r >> 8) % (n + 1); /* truncate */
            else if (n)
                v[(r >> 8) % n] = junk[(r >> 24) % (sizeof junk - 1)];
        }
        int rc = ks_driver_pipe(drv, "in", "k", 1, v, n, i);
        ok += rc == 0;
        poison += rc == KS_SKIP;
        other += rc != 0 && rc != KS_SKIP;
        ks_driver_record rec;
        while (ks_driver_read_output(drv, NULL, &rec) == 0)
            ;
    }
    ks_driver_close(drv);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    printf("\n    20000 mutated values: %ld processed, %ld poison, %ld other\n", ok, poison, other);
    CU_ASSERT_EQUAL(other, 0);
    CU_ASSERT(ok > 1000 && poison > 1000);
}

void ks_test_register_ops(void)
{
    CU_pSuite s = CU_add_suite("ops", NULL, NULL);
    CU_add_test(s, "filter: every predicate operator", test_predicates);
    CU_add_test(s, "poison values with the reason; tombstones", test_poison_and_tombstones);
    CU_add_test(s, "map: pointers, defaults, constants, the key", test_map);
    CU_add_test(s, "select_key: string, raw, on_missing", test_select_key);
    CU_add_test(s, "flat_map: one record per element", test_flat_map);
    CU_add_test(s, "branch: first route that holds, default", test_branch);
    CU_add_test(s, "config errors name the key and the place", test_config_errors);
    CU_add_test(s, "20 000 mutated values through every operator", test_random_values);
}
