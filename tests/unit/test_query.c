/*
 * test_query.c - `kstreams query` (engine/cli/cmd_query.c) on the state
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

#include "cli/commands.h"
#include "http/http_get.h"
#include "query/query_request.h"
#include "runtime/query_tasks.h"
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
    int rc = ks_cmd_query(argc, argv, out, err);
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

/* ---- windowed stores ---------------------------------------------------- */

static char wtmp[64], wyaml[128], wstate[128], wslide_agg[160];

/* Record timestamps (no time_field), every window kept 1 h (retention), in
 * update mode: the store holds every window the outputs announced. */
static int wsuite_init(void)
{
    snprintf(wtmp, sizeof wtmp, "/tmp/ks-query-win-XXXXXX");
    if (!mkdtemp(wtmp))
        return -1;
    snprintf(wyaml, sizeof wyaml, "%s/pipeline.yaml", wtmp);
    snprintf(wstate, sizeof wstate, "%s/state", wtmp);
    FILE *f = fopen(wyaml, "w");
    if (!f)
        return -1;
    fprintf(f,
            "application: query-win-test\n"
            "kafka: { bootstrap: 127.0.0.1:9092 }\n"
            "state_dir: %s\n"
            "plugin_path: [%s/plugins/.libs]\n"
            "sources:\n"
            "  in: { topic: in, key: string, value: string }\n"
            "  bin: { topic: bin, key: bytes, value: bytes }\n"
            "nodes:\n"
            "  - { name: tumb, type: count, from: in, store: tumb,\n"
            "      window: { kind: tumbling, size: 10s, retention: 1h } }\n"
            "  - { name: hop, type: count, from: in, store: hop,\n"
            "      window: { kind: hopping, size: 10s, advance: 5s, retention: 1h } }\n"
            "  - { name: sess, type: count, from: in, store: sess,\n"
            "      window: { kind: session, gap: 5s, retention: 1h } }\n"
            "  - { name: slide, type: count, from: in, store: slide,\n"
            "      window: { kind: sliding, size: 5s, retention: 1h } }\n"
            "  - { name: bwin, type: count, from: bin, store: bwin,\n"
            "      window: { kind: tumbling, size: 10s, retention: 1h } }\n"
            "sinks:\n"
            "  - { from: tumb, topic: tumb-out, key: json, value: int64 }\n"
            "  - { from: hop, topic: hop-out, key: json, value: int64 }\n"
            "  - { from: sess, topic: sess-out, key: json, value: int64 }\n"
            "  - { from: slide, topic: slide-out, key: json, value: int64 }\n"
            "  - { from: bwin, topic: bwin-out, key: bytes, value: int64 }\n",
            wstate, KS_TEST_BUILDDIR);
    fclose(f);
    /* a pipeline with sliding windows of `aggregate`: never run */
    snprintf(wslide_agg, sizeof wslide_agg, "%s/slide-agg.yaml", wtmp);
    f = fopen(wslide_agg, "w");
    if (!f)
        return -1;
    fprintf(f,
            "application: query-win-agg\n"
            "kafka: { bootstrap: 127.0.0.1:9092 }\n"
            "state_dir: %s\n"
            "sources: { in: { topic: in, key: string, value: json } }\n"
            "nodes:\n"
            "  - { name: sum, type: aggregate, from: in, store: sums,\n"
            "      window: { kind: sliding, size: 5s },\n"
            "      functions: { init: page_views.zero, add: page_views.add_bytes } }\n"
            "sinks: [ { from: sum, topic: out, key: json, value: int64 } ]\n",
            wstate);
    fclose(f);

    ks_driver_options opt = {.state_dir = wstate, .partitions = 2};
    ks_driver *drv = NULL;
    char err[1024];
    if (ks_driver_open(wyaml, &opt, &drv, err, sizeof err) != 0) {
        fprintf(stderr, "\n%s\n", err);
        return -1;
    }
    static const struct {
        const char *key;
        int64_t ts;
    } in[] = {{"a", 1000}, {"a", 4000}, {"b", 5000}, {"a", 12000}, {"c", 14000}, {"a", 21000}};
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++)
        if (ks_driver_pipe(drv, "in", in[i].key, strlen(in[i].key), "x", 1, in[i].ts) != 0)
            return -1;
    /* binary keys: "a", "a\0b" (sorts between "a" and "b"), "\0\1" */
    static const struct {
        const char *key;
        size_t len;
        int64_t ts;
    } bin[] = {{"a", 1, 1000}, {"a\0b", 3, 2000}, {"\0\1", 2, 3000}, {"b", 1, 4000},
               {"a\0b", 3, 15000}};
    for (size_t i = 0; i < sizeof bin / sizeof bin[0]; i++)
        if (ks_driver_pipe(drv, "bin", bin[i].key, bin[i].len, "x", 1, bin[i].ts) != 0)
            return -1;
    ks_driver_close(drv);
    return 0;
}

static int wsuite_clean(void)
{
    free(out_text);
    free(err_text);
    out_text = err_text = NULL;
    nftw(wtmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

#define T(s) "1970-01-01T00:00:" s "Z"

static void test_win_tumbling(void)
{
    CU_ASSERT_EQUAL(query(wyaml, "tumb", "--key", "a", "--int64", NULL), 0);
    CU_ASSERT_STRING_EQUAL(out_text, T("00.000") "\t" T("10.000") "\t2\n"
                                     T("10.000") "\t" T("20.000") "\t1\n"
                                     T("20.000") "\t" T("30.000") "\t1\n");
    /* window starts in [5000, 20000], bounds as ms and ISO-8601 */
    CU_ASSERT_EQUAL(query(wyaml, "tumb", "--key", "a", "--int64", "--from", "5000", "--to",
                          "1970-01-01T00:00:20Z", "--time-format", "ms", NULL),
                    0);
    CU_ASSERT_STRING_EQUAL(out_text, "10000\t20000\t1\n20000\t30000\t1\n");
    CU_ASSERT_EQUAL(query(wyaml, "tumb", "--key", "a", "--int64", "--from",
                          "1970-01-01T01:00:10+01:00", "--to", "1970-01-01T00:00:19.999Z",
                          "--time-format", "ms", NULL),
                    0);
    CU_ASSERT_STRING_EQUAL(out_text, "10000\t20000\t1\n");
    /* every key, one time range: partition by partition, keys in order */
    CU_ASSERT_EQUAL(query(wyaml, "tumb", "--int64", "--from", "0", "--to", "9999",
                          "--time-format", "ms", "--format", "json", NULL),
                    0);
    json_t *doc = json_loads(out_text, 0, NULL);
    CU_ASSERT_FATAL(json_is_array(doc));
    CU_ASSERT_EQUAL(json_array_size(doc), 2); /* a and b in [0, 10000) */
    size_t i;
    json_t *o;
    json_array_foreach(doc, i, o)
    {
        const char *k = json_string_value(json_object_get(o, "key"));
        CU_ASSERT_PTR_NOT_NULL_FATAL(k);
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(o, "start")), 0);
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(o, "end")), 10000);
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(o, "value")), !strcmp(k, "a") ? 2 : 1);
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(o, "partition")),
                        ks_driver_partition_for(k, 1, 2));
    }
    json_decref(doc);
    /* no window of a key in the range: not found */
    CU_ASSERT_EQUAL(query(wyaml, "tumb", "--key", "b", "--from", "10000", NULL), 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "no window of key 'b'"));
    CU_ASSERT_EQUAL(query(wyaml, "tumb", "--key", "zz", NULL), 3);
    /* a key range [b, c) over every time */
    CU_ASSERT_EQUAL(query(wyaml, "tumb", "--int64", "--from-key", "b", "--to-key", "c",
                          "--time-format", "ms", "--partition",
                          ks_driver_partition_for("b", 1, 2) ? "1" : "0", NULL),
                    0);
    CU_ASSERT_STRING_EQUAL(out_text, "b\t0\t10000\t1\n");
}

static void test_win_hopping_session(void)
{
    CU_ASSERT_EQUAL(query(wyaml, "hop", "--key", "a", "--int64", "--time-format", "ms", NULL),
                    0);
    CU_ASSERT_STRING_EQUAL(out_text, "0\t10000\t2\n5000\t15000\t1\n10000\t20000\t1\n"
                                     "15000\t25000\t1\n20000\t30000\t1\n");
    CU_ASSERT_EQUAL(query(wyaml, "hop", "--key", "c", "--int64", "--time-format", "ms", NULL),
                    0);
    CU_ASSERT_STRING_EQUAL(out_text, "5000\t15000\t1\n10000\t20000\t1\n");
    /* sessions: start and end are the first and last record's times */
    CU_ASSERT_EQUAL(query(wyaml, "sess", "--key", "a", "--int64", "--time-format", "ms", NULL),
                    0);
    CU_ASSERT_STRING_EQUAL(out_text, "1000\t4000\t2\n12000\t12000\t1\n21000\t21000\t1\n");
    CU_ASSERT_EQUAL(query(wyaml, "sess", "--key", "a", "--int64", "--time-format", "ms",
                          "--from", "1001", "--to", "21000", NULL),
                    0);
    CU_ASSERT_STRING_EQUAL(out_text, "12000\t12000\t1\n21000\t21000\t1\n");
}

static void test_win_sliding(void)
{
    /* a at 1000, 4000, 12000, 21000, size 5 s: the left window of each
     * record, and the right window of 1000 (holds 4000) */
    CU_ASSERT_EQUAL(query(wyaml, "slide", "--key", "a", "--int64", "--time-format", "ms",
                          NULL),
                    0);
    CU_ASSERT_STRING_EQUAL(out_text, "-4000\t1001\t1\n-1000\t4001\t2\n1001\t6002\t1\n"
                                     "7000\t12001\t1\n16000\t21001\t1\n");
    CU_ASSERT_EQUAL(query(wyaml, "slide", "--key", "a", "--int64", "--from", "0", "--to",
                          "7000", "--time-format", "ms", NULL),
                    0);
    CU_ASSERT_STRING_EQUAL(out_text, "1001\t6002\t1\n7000\t12001\t1\n");
    CU_ASSERT_EQUAL(query(wyaml, "slide", "--key", "b", "--int64", NULL), 0);
    CU_ASSERT_STRING_EQUAL(out_text, "1970-01-01T00:00:00.000Z\t1970-01-01T00:00:05.001Z\t1\n");
    /* aggregate/reduce over sliding windows: the values are not stored */
    CU_ASSERT_EQUAL(query(wslide_agg, "sums", NULL), 64);
    CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "sliding windows of node 'sum'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "--raw"));
}

/* The last output of every window (update mode) is what the query shows. */
static void test_win_matches_outputs(void)
{
    static const char *stores[] = {"tumb", "hop", "sess", "slide"};
    for (size_t s = 0; s < 4; s++) {
        CU_ASSERT_EQUAL_FATAL(query(wyaml, stores[s], "--int64", "--format", "json", NULL), 0);
        json_t *got = json_loads(out_text, 0, NULL);
        CU_ASSERT_FATAL(json_is_array(got));
        /* replay the outputs with the driver's state: rerun into a fresh dir */
        size_t i;
        json_t *o;
        json_t *want = json_object(); /* "key start end" -> count */
        char tmpstate[160];
        snprintf(tmpstate, sizeof tmpstate, "%s/replay-%zu", wtmp, s);
        ks_driver_options opt = {.state_dir = tmpstate, .partitions = 2};
        ks_driver *drv = NULL;
        char err[1024];
        CU_ASSERT_EQUAL_FATAL(ks_driver_open(wyaml, &opt, &drv, err, sizeof err), 0);
        static const struct {
            const char *key;
            int64_t ts;
        } in[] = {{"a", 1000}, {"a", 4000}, {"b", 5000}, {"a", 12000}, {"c", 14000}, {"a", 21000}};
        for (size_t r = 0; r < sizeof in / sizeof in[0]; r++)
            ks_driver_pipe(drv, "in", in[r].key, 1, "x", 1, in[r].ts);
        char topic[32];
        snprintf(topic, sizeof topic, "%s-out", stores[s]);
        ks_driver_record rec;
        while (ks_driver_read_output(drv, topic, &rec) == 0) {
            json_t *k = json_loadb(rec.key, rec.key_len, 0, NULL);
            char id[128];
            snprintf(id, sizeof id, "%s %lld %lld",
                     json_string_value(json_object_get(k, "key")),
                     (long long)json_integer_value(json_object_get(k, "start")),
                     (long long)json_integer_value(json_object_get(k, "end")));
            json_decref(k);
            if (rec.value && rec.value_len == 8)
                json_object_set_new(want, id, json_integer(ks_int64_decode(rec.value)));
            else
                json_object_del(want, id);
        }
        ks_driver_close(drv);
        CU_ASSERT_EQUAL(json_array_size(got), json_object_size(want));
        json_array_foreach(got, i, o)
        {
            char id[128];
            snprintf(id, sizeof id, "%s %lld %lld",
                     json_string_value(json_object_get(o, "key")),
                     (long long)json_integer_value(json_object_get(o, "start")),
                     (long long)json_integer_value(json_object_get(o, "end")));
            json_t *w = json_object_get(want, id);
            if (!w || json_integer_value(w) != json_integer_value(json_object_get(o, "value")))
                fprintf(stderr, "\n%s: window %s: query %lld, outputs %lld\n", stores[s], id,
                        (long long)json_integer_value(json_object_get(o, "value")),
                        w ? (long long)json_integer_value(w) : -1LL);
            CU_ASSERT_PTR_NOT_NULL(w);
            CU_ASSERT_EQUAL(json_integer_value(w),
                            json_integer_value(json_object_get(o, "value")));
        }
        json_decref(want);
        json_decref(got);
    }
}

static void test_win_binary_keys(void)
{
    /* "a\0b" is neither "a" nor "b" */
    CU_ASSERT_EQUAL(query(wyaml, "bwin", "--key-hex", "61", "--int64", "--time-format", "ms",
                          NULL),
                    0);
    CU_ASSERT_STRING_EQUAL(out_text, "0\t10000\t1\n");
    CU_ASSERT_EQUAL(query(wyaml, "bwin", "--key-hex", "0x610062", "--int64", "--time-format",
                          "ms", NULL),
                    0);
    CU_ASSERT_STRING_EQUAL(out_text, "0\t10000\t1\n10000\t20000\t1\n");
    CU_ASSERT_EQUAL(query(wyaml, "bwin", "--key-hex", "0001", "--int64", "--format", "json",
                          NULL),
                    0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out_text, "\"key_hex\":\"0001\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(out_text, "\"start\":0,\"end\":10000,\"value\":1"));
    /* keys in ["a", "b"): "a" and "a\0b", printed as text and as hex */
    char out_all[1024] = "";
    for (int part = 0; part < 2; part++) {
        char ps[16];
        snprintf(ps, sizeof ps, "%d", part);
        CU_ASSERT_EQUAL(query(wyaml, "bwin", "--from-key-hex", "61", "--to-key-hex", "62",
                              "--int64", "--time-format", "ms", "--partition", ps, NULL),
                        0);
        strncat(out_all, out_text, sizeof out_all - strlen(out_all) - 1);
    }
    CU_ASSERT_PTR_NOT_NULL(strstr(out_all, "a\t0\t10000\t1\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out_all, "0x610062\t0\t10000\t1\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out_all, "0x610062\t10000\t20000\t1\n"));
    CU_ASSERT_PTR_NULL(strstr(out_all, "0x0001"));
    CU_ASSERT_PTR_NULL(strstr(out_all, "b\t"));
    CU_ASSERT_EQUAL(query(wyaml, "bwin", "--key", "a", "--hex", "--int64", "--time-format",
                          "ms", NULL),
                    0);
    CU_ASSERT_STRING_EQUAL(out_text, "0\t10000\t1\n");
    CU_ASSERT_EQUAL(query(wyaml, "bwin", "--key", "b", "--format", "json", "--hex", NULL), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out_text, "\"key_hex\":\"62\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(out_text, "\"value_hex\":\"0000000000000001\""));
    /* --raw: the entries as stored (encoded keys, flags byte) */
    CU_ASSERT_EQUAL(query(wyaml, "bwin", "--raw", "--key-hex", "10", NULL), 0);
    CU_ASSERT_EQUAL(strlen(out_text), 2 + 32 + 1); /* meta: 16 bytes as hex */
}

static void test_win_errors(void)
{
    CU_ASSERT_EQUAL(query(wyaml, "tumb", "--from", "yesterday", NULL), 64);
    CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "--from 'yesterday' is not a time"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "usage: kstreams query"));
    CU_ASSERT_EQUAL(query(wyaml, "tumb", "--to", "1970-01-01T00:00:10", NULL), 64); /* no Z */
    CU_ASSERT_EQUAL(query(wyaml, "tumb", "--to", "1970-02-30", NULL), 64);
    CU_ASSERT_EQUAL(query(wyaml, "tumb", "--from", "2000", "--to", "1000", NULL), 64);
    CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "is after --to"));
    CU_ASSERT_EQUAL(query(wyaml, "tumb", "--key-hex", "6", NULL), 64);
    CU_ASSERT_EQUAL(query(wyaml, "tumb", "--key-hex", "zz", NULL), 64);
    CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "--key-hex needs an even number of hex digits"));
    CU_ASSERT_EQUAL(query(wyaml, "tumb", "--key-hex", "", NULL), 64);
    CU_ASSERT_EQUAL(query(wyaml, "tumb", "--key", "a", "--key-hex", "61", NULL), 64);
    CU_ASSERT_EQUAL(query(wyaml, "tumb", "--key", "a", "--from-key", "a", NULL), 64);
    CU_ASSERT_EQUAL(query(wyaml, "tumb", "--from-key", "a", "--from-key-hex", "61", NULL), 64);
    CU_ASSERT_EQUAL(query(wyaml, "tumb", "--time-format", "unix", NULL), 64);
    CU_ASSERT_EQUAL(query(wyaml, "tumb", "--key", NULL), 64);
    CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "--key needs a value"));
}

/* Keys that are not text (invalid UTF-8, 0x00) and text with control
 * characters: every windowed-json output key is JSON the sink's `json`
 * serde takes; "key_hex" is the hex --key-hex takes back, and query shows
 * the same key, start and end. */
static void test_win_output_keys_read_back(void)
{
    char yaml[160], state[160];
    snprintf(yaml, sizeof yaml, "%s/utf.yaml", wtmp);
    snprintf(state, sizeof state, "%s/utf-state", wtmp);
    FILE *f = fopen(yaml, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f,
            "application: query-win-utf\n"
            "kafka: { bootstrap: 127.0.0.1:9092 }\n"
            "state_dir: %s\n"
            "plugin_path: [%s/plugins/.libs]\n"
            "sources: { in: { topic: in, key: bytes, value: bytes } }\n"
            "nodes:\n"
            "  - { name: w, type: count, from: in, store: w,\n"
            "      window: { kind: tumbling, size: 10s, retention: 1h } }\n"
            "sinks: [ { from: w, topic: out, key: json, value: int64 } ]\n",
            state, KS_TEST_BUILDDIR);
    fclose(f);
    static const struct {
        const char *key;
        size_t len;
        const char *field, *text; /* the output key's field and its value */
    } keys[] = {
        {"\xff\xfe", 2, "key_hex", "fffe"},
        {"caf\xc3", 4, "key_hex", "636166c3"},
        {"a\0b", 3, "key_hex", "610062"},
        {"q\"\\\n", 4, "key", "q\"\\\n"},
        {"caf\xc3\xa9", 5, "key", "caf\xc3\xa9"},
    };
    ks_driver_options opt = {.state_dir = state, .partitions = 1};
    ks_driver *drv = NULL;
    char err[1024];
    CU_ASSERT_EQUAL_FATAL(ks_driver_open(yaml, &opt, &drv, err, sizeof err), 0);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        int rc = ks_driver_pipe(drv, "in", keys[i].key, keys[i].len, "x", 1, 3000);
        if (rc != 0)
            fprintf(stderr, "\n%s\n", ks_driver_last_error(drv));
        CU_ASSERT_EQUAL_FATAL(rc, 0);
        ks_driver_record rec;
        CU_ASSERT_EQUAL_FATAL(ks_driver_read_output(drv, "out", &rec), 0);
        json_t *k = json_loadb(rec.key, rec.key_len, 0, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(k);
        json_t *v = json_object_get(k, keys[i].field);
        CU_ASSERT_PTR_NOT_NULL_FATAL(v);
        CU_ASSERT_EQUAL(json_string_length(v), strlen(keys[i].text));
        CU_ASSERT(memcmp(json_string_value(v), keys[i].text, strlen(keys[i].text)) == 0);
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(k, "start")), 0);
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(k, "end")), 10000);
        json_decref(k);
    }
    ks_driver_close(drv);
    /* read back: the hex of an output key is the --key-hex of its window */
    for (size_t i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL(query(yaml, "w", "--key-hex", keys[i].text, "--format", "json",
                              "--int64", NULL),
                        0);
        json_t *got = json_loads(out_text, 0, NULL);
        CU_ASSERT_FATAL(json_is_array(got) && json_array_size(got) == 1);
        json_t *o = json_array_get(got, 0);
        CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(o, "key_hex")), keys[i].text);
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(o, "start")), 0);
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(o, "end")), 10000);
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(o, "value")), 1);
        json_decref(got);
    }
    CU_ASSERT_EQUAL(query(yaml, "w", "--key", "caf\xc3\xa9", "--format", "json", NULL), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out_text, "\"key\":\"caf\xc3\xa9\""));
}

/* A `window:` the plugins would refuse: query refuses the pipeline as
 * `check` does (exit 2, at the key), instead of decoding with a bad spec. */
static void test_win_invalid_spec(void)
{
    char yaml[160];
    snprintf(yaml, sizeof yaml, "%s/bad-window.yaml", wtmp);
    FILE *f = fopen(yaml, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f,
            "application: query-win-test\n"
            "kafka: { bootstrap: 127.0.0.1:9092 }\n"
            "state_dir: %s\n"
            "sources: { in: { topic: in, key: string, value: string } }\n"
            "nodes:\n"
            "  - { name: hop, type: count, from: in, store: hop,\n"
            "      window: { kind: hopping, size: 5s, advance: 10s } }\n"
            "sinks: [ { from: hop, topic: out } ]\n",
            wstate);
    fclose(f);
    CU_ASSERT_EQUAL(query(yaml, "hop", NULL), 2);
    char want[256];
    snprintf(want, sizeof want,
             "%s:7:42: node 'hop': hopping window needs `advance` between 1ms and `size`",
             yaml);
    if (!strstr(err_text, want))
        fprintf(stderr, "\n'%s' lacks '%s'\n", err_text, want);
    CU_ASSERT_PTR_NOT_NULL(strstr(err_text, want));
    /* --raw reads the entries as stored: no window decoding, no spec */
    CU_ASSERT_EQUAL(query(yaml, "hop", "--raw", "--key-hex", "10", NULL), 0);
}

static void test_hex_key_value_store(void)
{
    CU_ASSERT_EQUAL(query(yaml_path, "other", "--key-hex", "0102", "--int64", NULL), 0);
    CU_ASSERT_STRING_EQUAL(out_text, "1\n");
    CU_ASSERT_EQUAL(query(yaml_path, "other", "--key-hex", "0103", NULL), 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "key '0x0103' not found"));
    CU_ASSERT_EQUAL(query(yaml_path, "other", "--from-key-hex", "01", "--to-key-hex", "0103",
                          "--int64", NULL),
                    0);
    CU_ASSERT_STRING_EQUAL(out_text, "0x0102\t1\n");
    CU_ASSERT_EQUAL(query(yaml_path, "counts", "--from-key", "b", "--to-key", "c", "--int64",
                          "--hex", NULL),
                    0);
    CU_ASSERT_STRING_EQUAL(out_text, "0x62\t1\n");
    /* --from/--to are keys here: not together with --from-key */
    CU_ASSERT_EQUAL(query(yaml_path, "counts", "--from", "a", "--from-key", "b", NULL), 64);
}

/* ---- the query server's request parser and the client's answer parser ---- */

/* Parse "a=1&b=2" (a copy split in place); 0 or -1, the reason in err. */
static int parse_params(const char *text, ks_query_request *r, char *err, size_t errlen)
{
    static char buf[1024];
    const char *names[KS_QUERY_REQUEST_MAX_PARAMS], *values[KS_QUERY_REQUEST_MAX_PARAMS];
    size_t n = 0;
    snprintf(buf, sizeof buf, "%s", text);
    for (char *p = buf, *next; p && *p && n < KS_QUERY_REQUEST_MAX_PARAMS; p = next) {
        next = strchr(p, '&');
        if (next)
            *next++ = '\0';
        char *eq = strchr(p, '=');
        if (eq)
            *eq++ = '\0';
        names[n] = p;
        values[n++] = eq;
    }
    return ks_query_request_parse(r, names, values, n, err, errlen);
}

static void test_request_parse(void)
{
    ks_query_request r;
    char err[1024];
    CU_ASSERT_EQUAL(parse_params("store=counts&key=alice&int64=1", &r, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(r.store, "counts");
    CU_ASSERT(r.key.set && r.key.len == 5 && memcmp(r.key.data, "alice", 5) == 0);
    CU_ASSERT(r.int64 && !r.hex && r.partition == -1 && !r.standby);
    ks_query_request_free(&r);
    CU_ASSERT_EQUAL(parse_params("store=counts&key=alice&standby=1", &r, err, sizeof err), 0);
    CU_ASSERT(r.standby);
    ks_query_request_free(&r);
    CU_ASSERT_EQUAL(parse_params("store=s&partition=3&from_key_hex=01ff&to_key=b&from=1000&to="
                                 "2023-11-14T22:13:20Z", &r, err, sizeof err), 0);
    CU_ASSERT(r.partition == 3 && r.kfrom.len == 2 && r.kfrom.data[1] == 0xff);
    CU_ASSERT(r.tfrom == 1000 && r.tto == 1700000000000LL);
    ks_query_request_free(&r);
    static const struct {
        const char *params, *reason;
    } bad[] = {
        {"store=s&key=a&bogus=1", "unknown parameter 'bogus'"},
        {"store=s&key=a&key=b", "'key' given twice"},
        {"store=s&key=a&key_hex=62", "give each key once"},
        {"store=s&key_hex=0g", "bad value for 'key_hex'"},
        {"store=s&key=", "bad value for 'key'"},
        {"store=s", "add partition=P"},
        {"key=a", "give the store"},
        {"store=s&key=a&int64=2", "bad value for 'int64'"},
        {"store=s&key=a&standby=true", "bad value for 'standby': 0 or 1"},
        {"store=s&key=a&from=yesterday", "bad value for 'from'"},
        {"store=s&partition=-1", "bad value for 'partition'"},
        {"store=s&key=a&from_key=b", "exclude each other"},
        {"store=s&key", "'key' needs a value"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        CU_ASSERT_EQUAL(parse_params(bad[i].params, &r, err, sizeof err), -1);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, bad[i].reason));
        if (!strstr(err, bad[i].reason))
            printf("\n  %s: %s\n", bad[i].params, err);
        ks_query_request_free(&r);
    }
}

static void test_reply_parse(void)
{
    static const char ok[] = "HTTP/1.1 307 Temporary Redirect\r\nContent-Type: x\r\n"
                             "location:  http://127.0.0.1:1/v1/query?a=b\r\n\r\n{}";
    ks_http_reply r;
    CU_ASSERT_EQUAL(ks_http_parse_reply(ok, sizeof ok - 1, &r), 0);
    CU_ASSERT_EQUAL(r.status, 307);
    CU_ASSERT_STRING_EQUAL(r.location ? r.location : "", "http://127.0.0.1:1/v1/query?a=b");
    CU_ASSERT(r.len == 2 && strcmp(r.body, "{}") == 0);
    ks_http_reply_free(&r);
    /* a stale answer's marks (standby reads) */
    static const char stale[] = "HTTP/1.1 200 OK\r\nx-kstreams-stale: standby\r\n"
                                "X-Kstreams-Changelog-Offset: 3004\r\nX-Kstreams-Lag:\t0\r\n"
                                "\r\n{}";
    CU_ASSERT_EQUAL(ks_http_parse_reply(stale, sizeof stale - 1, &r), 0);
    CU_ASSERT_STRING_EQUAL(r.stale ? r.stale : "", "standby");
    CU_ASSERT_STRING_EQUAL(r.changelog_offset ? r.changelog_offset : "", "3004");
    CU_ASSERT_STRING_EQUAL(r.lag ? r.lag : "", "0");
    CU_ASSERT_PTR_NULL(r.location);
    ks_http_reply_free(&r);
    CU_ASSERT_EQUAL(ks_http_parse_reply(ok, sizeof ok - 1, &r), 0);
    CU_ASSERT_PTR_NULL(r.stale); /* a fresh answer has none */
    ks_http_reply_free(&r);
    static const char *const bad[] = {"", "HTTP/1.1 200 OK\r\n", "HTTP/1.1 2x0 OK\r\n\r\n",
                                      "SMTP 220\r\n\r\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CU_ASSERT_EQUAL(ks_http_parse_reply(bad[i], strlen(bad[i]), &r), -1);
}

/* What a query of a restoring task answers: the progress of the store it
 * asks about (a task's stores replay together), else the one reported
 * last; nothing once the task is active or gone. */
static void test_restore_progress_per_store(void)
{
    ks_query_tasks *qt = ks_query_tasks_new(4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(qt);
    ks_task task;
    memset(&task, 0, sizeof task);
    task.partition = 2;
    ks_qt_status st;
    ks_query_tasks_restoring(qt, &task);
    CU_ASSERT_PTR_NULL(ks_query_tasks_lock(qt, 2, "counts", &st));
    ks_query_tasks_unlock(qt);
    CU_ASSERT_EQUAL(st.state, KS_QT_RESTORING);
    /* a standby read (stale allowed) gets the restoring task */
    CU_ASSERT_PTR_EQUAL(ks_query_tasks_lock_stale(qt, 2, "counts", &st), &task);
    ks_query_tasks_unlock(qt);
    CU_ASSERT_EQUAL(st.state, KS_QT_RESTORING);
    CU_ASSERT_PTR_NULL(ks_query_tasks_lock_stale(qt, 1, "counts", &st)); /* not here */
    ks_query_tasks_unlock(qt);
    CU_ASSERT_STRING_EQUAL(st.store, "");
    ks_query_tasks_progress(qt, 2, "counts", 0, 500);
    ks_query_tasks_progress(qt, 2, "hourly", 0, 700);
    ks_query_tasks_progress(qt, 2, "counts", 1024, 5000);
    ks_query_tasks_progress(qt, 2, "hourly", 2048, 7000);
    ks_query_tasks_lock(qt, 2, "counts", &st);
    ks_query_tasks_unlock(qt);
    CU_ASSERT_STRING_EQUAL(st.store, "counts");
    CU_ASSERT_EQUAL(st.done, 1024);
    CU_ASSERT_EQUAL(st.total, 5000);
    ks_query_tasks_lock(qt, 2, NULL, &st); /* no store named: the last report */
    ks_query_tasks_unlock(qt);
    CU_ASSERT_STRING_EQUAL(st.store, "hourly");
    CU_ASSERT_EQUAL(st.done, 2048);
    ks_query_tasks_lock(qt, 2, "plain", &st); /* a store with no changelog */
    ks_query_tasks_unlock(qt);
    CU_ASSERT_STRING_EQUAL(st.store, "hourly");
    ks_query_tasks_active(qt, 2);
    CU_ASSERT_PTR_EQUAL(ks_query_tasks_lock(qt, 2, "counts", &st), &task);
    ks_query_tasks_unlock(qt);
    CU_ASSERT_EQUAL(st.state, KS_QT_ACTIVE);
    ks_query_tasks_remove(qt, 2);
    ks_query_tasks_restoring(qt, &task); /* a new restore starts empty */
    ks_query_tasks_lock(qt, 2, "counts", &st);
    ks_query_tasks_unlock(qt);
    CU_ASSERT_STRING_EQUAL(st.store, "");
    ks_query_tasks_remove(qt, 2);
    ks_query_tasks_lock(qt, 2, NULL, &st);
    ks_query_tasks_unlock(qt);
    CU_ASSERT_EQUAL(st.state, KS_QT_ABSENT);
    ks_query_tasks_free(qt);
}

void ks_test_register_query(void)
{
    CU_pSuite s = CU_add_suite("query", suite_init, suite_clean);
    CU_add_test(s, "one key, by partition or searched", test_key);
    CU_add_test(s, "whole store and ranges", test_all_and_range);
    CU_add_test(s, "json output", test_json);
    CU_add_test(s, "exit codes 2, 3, 64", test_errors);
    CU_add_test(s, "--key-hex, hex key ranges, --hex", test_hex_key_value_store);
    CU_add_test(s, "query server requests: parameters, 400 reasons", test_request_parse);
    CU_add_test(s, "--remote: HTTP answers parsed", test_reply_parse);
    CU_add_test(s, "a restoring task answers its stores' progress",
                test_restore_progress_per_store);
    CU_pSuite w = CU_add_suite("query-windows", wsuite_init, wsuite_clean);
    CU_add_test(w, "tumbling: one key, time ranges, all keys, key ranges", test_win_tumbling);
    CU_add_test(w, "hopping and session windows", test_win_hopping_session);
    CU_add_test(w, "sliding windows from the raw records", test_win_sliding);
    CU_add_test(w, "every window = the last output of that window", test_win_matches_outputs);
    CU_add_test(w, "binary keys: --key-hex, key ranges, --hex, --raw", test_win_binary_keys);
    CU_add_test(w, "bad arguments: exit 64 with the reason", test_win_errors);
    CU_add_test(w, "non-text keys: JSON output keys, read back with --key-hex",
                test_win_output_keys_read_back);
    CU_add_test(w, "an invalid window: exit 2 at the key", test_win_invalid_spec);
}
