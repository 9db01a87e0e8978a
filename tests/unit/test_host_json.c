/*
 * test_host_json.c - the host API's JSON calls (kstreams.h ABI 1.3) as a
 * plugin sees them: through ks_host_api_table(), with a processor ctx.
 */
#include <CUnit/CUnit.h>
#include <math.h>
#include <string.h>

#include "runtime/host_json.h"
#include "kstreams/kstreams.h"
#include "runtime/task.h"
#include "unit/suites.h"

static const ks_host_api *api;

static void test_read_in_place(void)
{
    api = ks_host_api_table();
    CU_ASSERT_FATAL(KS_API_HAS(api, json_finish));
    const char *doc = "{\"user\":{\"name\":\"A\\u00e9\\\"b\",\"id\":42},\"tags\":[\"x\",2,null],"
                      "\"a/b\":1.5,\"big\":99999999999999999999}";
    size_t len = strlen(doc);
    ks_json_span v;
    CU_ASSERT_EQUAL(api->json_find(doc, len, "/user/name", &v), KS_JSON_FOUND);
    CU_ASSERT_EQUAL(v.type, KS_JSON_STRING);
    char buf[16];
    size_t n;
    CU_ASSERT_EQUAL(api->json_string(&v, buf, sizeof buf, &n), 0);
    CU_ASSERT_EQUAL(n, 5); /* A, é (2 bytes), ", b */
    CU_ASSERT(memcmp(buf, "A\xc3\xa9\"b", 5) == 0);
    CU_ASSERT_EQUAL(api->json_string(&v, NULL, 0, &n), 0); /* length only */
    CU_ASSERT_EQUAL(n, 5);
    int64_t i;
    CU_ASSERT_EQUAL(api->json_find(doc, len, "/user/id", &v), KS_JSON_FOUND);
    CU_ASSERT_EQUAL(api->json_int64(&v, &i), 0);
    CU_ASSERT_EQUAL(i, 42);
    double d;
    CU_ASSERT_EQUAL(api->json_find(doc, len, "/a~1b", &v), KS_JSON_FOUND);
    CU_ASSERT_EQUAL(api->json_double(&v, &d), 0);
    CU_ASSERT_DOUBLE_EQUAL(d, 1.5, 1e-12);
    /* valid JSON beyond int64: found, not an int64, a double */
    CU_ASSERT_EQUAL(api->json_find(doc, len, "/big", &v), KS_JSON_FOUND);
    CU_ASSERT_EQUAL(api->json_int64(&v, &i), KS_JSON_BAD_TEXT);
    CU_ASSERT_EQUAL(api->json_double(&v, &d), 0);
    CU_ASSERT_EQUAL(api->json_find(doc, len, "/user/missing", &v), KS_JSON_MISSING);
    CU_ASSERT_EQUAL(api->json_find(doc, len, "/tags/3", &v), KS_JSON_MISSING);
    CU_ASSERT_EQUAL(api->json_find(doc, len, "user", &v), KS_JSON_BAD_POINTER);
    CU_ASSERT_EQUAL(api->json_find(doc, len, NULL, &v), KS_JSON_BAD_POINTER);
    /* walk an array */
    CU_ASSERT_EQUAL(api->json_find(doc, len, "/tags", &v), KS_JSON_FOUND);
    ks_json_iter it;
    ks_json_span e;
    CU_ASSERT_EQUAL(api->json_iter_init(&it, &v), KS_JSON_FOUND);
    ks_json_type types[4];
    int count = 0;
    while (count < 4 && api->json_iter_next(&it, NULL, &e) == 1)
        types[count++] = e.type;
    CU_ASSERT_EQUAL(count, 3);
    CU_ASSERT(types[0] == KS_JSON_STRING && types[1] == KS_JSON_NUMBER &&
              types[2] == KS_JSON_NULL);
    /* text that is not JSON: an answer, never a read outside it */
    CU_ASSERT_EQUAL(api->json_find("{\"a\":", 5, "/a", &v), KS_JSON_BAD_TEXT);
}

static void test_writer(void)
{
    api = ks_host_api_table();
    struct ks_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.magic = KS_CTX_MAGIC;
    ks_json_writer *w = api->json_writer(&ctx);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    ks_json_span raw = {"[1,2]", 5, KS_JSON_ARRAY};
    CU_ASSERT_EQUAL(api->json_put_string(w, "s", "a\"b\\c\n\x01", 7), 0);
    CU_ASSERT_EQUAL(api->json_put_int64(w, "i", INT64_MIN), 0);
    CU_ASSERT_EQUAL(api->json_put_double(w, "d", 0.1), 0);
    CU_ASSERT_EQUAL(api->json_put_double(w, "nan", NAN), KS_ERR_INVALID);
    CU_ASSERT_EQUAL(api->json_put_bool(w, "b", 1), 0);
    CU_ASSERT_EQUAL(api->json_put_null(w, "n\"q"), 0);
    CU_ASSERT_EQUAL(api->json_put_raw(w, "r", &raw), 0);
    const void *text;
    size_t len;
    CU_ASSERT_EQUAL(api->json_finish(w, &text, &len), 0);
    const char *want = "{\"s\":\"a\\\"b\\\\c\\u000a\\u0001\",\"i\":-9223372036854775808,"
                       "\"d\":0.10000000000000001,\"b\":true,\"n\\\"q\":null,\"r\":[1,2]}";
    CU_ASSERT_EQUAL(len, strlen(want));
    CU_ASSERT(len == strlen(want) && memcmp(text, want, len) == 0);
    /* what it wrote reads back */
    ks_json_span v;
    char buf[16];
    size_t n;
    CU_ASSERT_EQUAL(api->json_find(text, len, "/s", &v), KS_JSON_FOUND);
    CU_ASSERT_EQUAL(api->json_string(&v, buf, sizeof buf, &n), 0);
    CU_ASSERT(n == 7 && memcmp(buf, "a\"b\\c\n\x01", 7) == 0);
    /* finished: no more members; a new writer starts over */
    CU_ASSERT_EQUAL(api->json_put_bool(w, "late", 0), KS_ERR_INVALID);
    CU_ASSERT_EQUAL(api->json_finish(w, &text, &len), KS_ERR_INVALID);
    w = api->json_writer(&ctx);
    CU_ASSERT_EQUAL(api->json_finish(w, &text, &len), 0);
    CU_ASSERT(len == 2 && memcmp(text, "{}", 2) == 0);
    /* a handle that is not a ctx */
    struct ks_ctx bad;
    memset(&bad, 0, sizeof bad);
    CU_ASSERT_PTR_NULL(api->json_writer(&bad));
    CU_ASSERT_PTR_NULL(api->json_writer(NULL));
    ks_json_writer_free(ctx.json);
}

void ks_test_register_host_json(void)
{
    CU_pSuite s = CU_add_suite("host-json", NULL, NULL);
    CU_add_test(s, "JSON read in place: pointers, strings, numbers, arrays, bad text",
                test_read_in_place);
    CU_add_test(s, "JSON writer: escaping, numbers, raw values, finish, bad handles",
                test_writer);
}
