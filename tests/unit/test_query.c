/*
 * test_query.c - `kstreams query` (engine/cli_query.c) on the state
 * directory of a stopped instance. The state is made without a broker by
 * the test driver running the same pipeline with the same state_dir, as
 * the engine would leave it (STATE_DIR/<application>/task-<P>/).
 */
#include <ftw.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli_help.h"
#include "cli_query.h"
#include "kstreams/testdriver.h"
#include "unit/test_util.h"

static char tmp[64], yaml_path[128], state_dir[128];
static char *out_text, *err_text;

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Run `kstreams query ARGS...` (NULL-terminated); output in out_text and
 * err_text. Returns the exit code. */
static int query(const char *first, ...)
{
    char *argv[32];
    int argc = 0;
    argv[argc++] = "query";
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && argc < 31; a = va_arg(ap, const char *))
        argv[argc++] = (char *)a;
    va_end(ap);
    argv[argc] = NULL;
    free(out_text);
    free(err_text);
    size_t olen, elen;
    FILE *out = open_memstream(&out_text, &olen);
    FILE *err = open_memstream(&err_text, &elen);
    int rc = ks_cli_query(argc, argv, out, err);
    fclose(out);
    fclose(err);
    return rc;
}

/* A count pipeline on 2 partitions, run by the driver: a=3, b=1, c=2, and
 * a binary value under "bin" in the second store. */
static int suite_init(void)
{
    snprintf(tmp, sizeof tmp, "/tmp/ks-query-test-XXXXXX");
    if (!mkdtemp(tmp))
        return -1;
    snprintf(yaml_path, sizeof yaml_path, "%s/pipeline.yaml", tmp);
    snprintf(state_dir, sizeof state_dir, "%s/state", tmp);
    FILE *f = fopen(yaml_path, "w");
    if (!f)
        return -1;
    fprintf(f,
            "application: query-test\n"
            "kafka: { bootstrap: 127.0.0.1:9092 }\n"
            "state_dir: %s\n"
            "plugin_path: [%s/plugins/.libs]\n"
            "stores: { other: {} }\n"
            "sources:\n"
            "  in: { topic: in, key: string, value: string }\n"
            "  raw: { topic: raw, key: bytes, value: bytes }\n"
            "nodes:\n"
            "  - { name: per_key, type: count, from: in, store: counts }\n"
            "  - { name: per_raw, type: count, from: raw, store: other }\n"
            "sinks:\n"
            "  - { from: per_key, topic: out, key: string, value: int64 }\n"
            "  - { from: per_raw, topic: out2, key: bytes, value: int64 }\n",
            state_dir, KS_TEST_BUILDDIR);
    fclose(f);
    ks_driver_options opt = {.state_dir = state_dir, .partitions = 2};
    ks_driver *drv = NULL;
    char err[1024];
    if (ks_driver_open(yaml_path, &opt, &drv, err, sizeof err) != 0) {
        fprintf(stderr, "\n%s\n", err);
        return -1;
    }
    const char *keys[] = {"a", "b", "a", "c", "a", "c"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (ks_driver_pipe(drv, "in", keys[i], 1, "x", 1, (int64_t)i) != 0)
            return -1;
    if (ks_driver_pipe(drv, "raw", "\x01\x02", 2, "x", 1, 9) != 0)
        return -1;
    ks_driver_close(drv);
    return 0;
}

static int suite_clean(void)
{
    free(out_text);
    free(err_text);
    out_text = err_text = NULL;
    nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

static void test_key(void)
{
    CU_ASSERT_EQUAL(query(yaml_path, "counts", "--key", "a", "--int64", NULL), 0);
    CU_ASSERT_STRING_EQUAL(out_text, "3\n");
    CU_ASSERT_EQUAL(query(yaml_path, "counts", "--key", "c", NULL), 0);
    CU_ASSERT_STRING_EQUAL(out_text, "0x0000000000000002\n"); /* not printable */
    char part[16];
    snprintf(part, sizeof part, "%d", ks_driver_partition_for("b", 1, 2));
    CU_ASSERT_EQUAL(query(yaml_path, "counts", "--key", "b", "--int64", "--partition", part,
                          NULL),
                    0);
    CU_ASSERT_STRING_EQUAL(out_text, "1\n");
    snprintf(part, sizeof part, "%d", 1 - ks_driver_partition_for("b", 1, 2));
    CU_ASSERT_EQUAL(query(yaml_path, "counts", "--key", "b", "--partition", part, NULL), 3);
    CU_ASSERT_EQUAL(query(yaml_path, "counts", "--key", "zz", NULL), 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "not found"));
}

static void test_all_and_range(void)
{
    CU_ASSERT_EQUAL(query(yaml_path, "counts", "--int64", NULL), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out_text, "a\t3\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out_text, "b\t1\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out_text, "c\t2\n"));
    int lines = 0;
    for (const char *c = out_text; *c; c++)
        lines += *c == '\n';
    CU_ASSERT_EQUAL(lines, 3);
    CU_ASSERT_EQUAL(query(yaml_path, "counts", "--int64", "--from", "b", "--to", "c", NULL),
                    0);
    CU_ASSERT_STRING_EQUAL(out_text, "b\t1\n");
    CU_ASSERT_EQUAL(query(yaml_path, "counts", "--int64", "--from", "b", NULL), 0);
    CU_ASSERT_PTR_NULL(strstr(out_text, "a\t"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out_text, "c\t2\n"));
    /* a binary key */
    CU_ASSERT_EQUAL(query(yaml_path, "other", "--int64", NULL), 0);
    CU_ASSERT_STRING_EQUAL(out_text, "0x0102\t1\n");
}

static void test_json(void)
{
    CU_ASSERT_EQUAL(query(yaml_path, "counts", "--format", "json", "--int64", NULL), 0);
    json_error_t jerr;
    json_t *doc = json_loads(out_text, 0, &jerr);
    CU_ASSERT_FATAL(json_is_array(doc));
    CU_ASSERT_EQUAL(json_array_size(doc), 3);
    int64_t total = 0;
    size_t i;
    json_t *o;
    json_array_foreach(doc, i, o)
    {
        const char *key = json_string_value(json_object_get(o, "key"));
        int64_t v = json_integer_value(json_object_get(o, "value"));
        int64_t p = json_integer_value(json_object_get(o, "partition"));
        CU_ASSERT_PTR_NOT_NULL_FATAL(key);
        CU_ASSERT_EQUAL(p, ks_driver_partition_for(key, strlen(key), 2));
        total += v;
    }
    CU_ASSERT_EQUAL(total, 6);
    json_decref(doc);
    CU_ASSERT_EQUAL(query(yaml_path, "counts", "--format", "json", "--key", "a", NULL), 0);
    doc = json_loads(out_text, 0, &jerr);
    CU_ASSERT_FATAL(json_is_object(doc));
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(doc, "value_hex")),
                           "0000000000000003");
    json_decref(doc);
}

static void test_errors(void)
{
    CU_ASSERT_EQUAL(query(yaml_path, "nosuch", NULL), 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "counts"));
    CU_ASSERT_EQUAL(query(yaml_path, "counts", "--partition", "7", NULL), 3);
    CU_ASSERT_EQUAL(query(yaml_path, NULL), 64);
    CU_ASSERT_EQUAL(query(yaml_path, "counts", "--key", "a", "--from", "b", NULL), 64);
    CU_ASSERT_EQUAL(query(yaml_path, "counts", "--format", "xml", NULL), 64);
    CU_ASSERT_EQUAL(query(yaml_path, "counts", "--partition", "x", NULL), 64);
    CU_ASSERT_EQUAL(query(yaml_path, "counts", "--bogus", NULL), 64);
    CU_ASSERT_EQUAL(query("/nonexistent.yaml", "counts", NULL), 2);
    CU_ASSERT_EQUAL(query("--help", NULL), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out_text, "usage: kstreams query"));
    /* a pipeline that never ran here */
    char other[192];
    snprintf(other, sizeof other, "%s/never.yaml", tmp);
    FILE *f = fopen(other, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "application: never\nkafka: { bootstrap: 127.0.0.1:9092 }\n"
               "state_dir: %s\nsources: { in: { topic: in } }\n"
               "nodes: [ { name: n, type: count, from: in, store: s } ]\n"
               "sinks: [ { from: n, topic: out } ]\n",
            state_dir);
    fclose(f);
    CU_ASSERT_EQUAL(query(other, "s", NULL), 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "no state directory"));
    CU_ASSERT_EQUAL(ks_cli_command_help("nosuch", stdout), -1);
}

void ks_test_register_query(void)
{
    CU_pSuite s = CU_add_suite("query", suite_init, suite_clean);
    CU_add_test(s, "one key, by partition or searched", test_key);
    CU_add_test(s, "whole store and ranges", test_all_and_range);
    CU_add_test(s, "json output", test_json);
    CU_add_test(s, "exit codes 2, 3, 64", test_errors);
}
