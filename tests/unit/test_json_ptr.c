/*
 * test_json_ptr.c - the in-place JSON reader of the ops plugin
 * (lib/json/json_ptr.h): RFC 6901's own examples and edge cases in a table,
 * string and number decoding, then a differential test against jansson on
 * seeded random documents (every value reached by a random pointer must
 * equal what jansson finds by walking its tree) and on truncated, mutated
 * and deeply nested text (never a read outside the buffer, which ASan
 * checks; on text ks_json_valid accepts, still jansson's answer).
 * KS_JSON_PTR_SEED and KS_JSON_PTR_N (environment) change the seed and the
 * count of random documents.
 */
#include <CUnit/CUnit.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json/json_ptr.h"
#include "json/json_valid.h"
#include "unit/test_util.h"

/* The answer on a private heap copy of exactly len bytes, so that ASan
 * sees any read past the end. The span is made relative to the copy. */
static int find_copy(const char *doc, size_t len, const char *ptr, ks_json_span *out,
                     size_t *offset)
{
    char *copy = malloc(len ? len : 1);
    if (!copy)
        abort();
    memcpy(copy, doc, len);
    int rc = ks_json_find(copy, len, ptr, strlen(ptr), out);
    if (rc == KS_JSON_FOUND)
        *offset = (size_t)(out->data - copy);
    free(copy);
    return rc;
}

struct ptr_case {
    const char *doc, *ptr;
    int rc;
    const char *span; /* the value's text when found */
    ks_json_type type;
};

#define RFC "{\"foo\":[\"bar\",\"baz\"],\"\":0,\"a/b\":1,\"c%d\":2,\"e^f\":3,\"g|h\":4," \
            "\"i\\\\j\":5,\"k\\\"l\":6,\" \":7,\"m~n\":8}"

static const struct ptr_case ptr_cases[] = {
    /* RFC 6901 section 5 */
    {RFC, "", KS_JSON_FOUND, RFC, KS_JSON_OBJECT},
    {RFC, "/foo", KS_JSON_FOUND, "[\"bar\",\"baz\"]", KS_JSON_ARRAY},
    {RFC, "/foo/0", KS_JSON_FOUND, "\"bar\"", KS_JSON_STRING},
    {RFC, "/", KS_JSON_FOUND, "0", KS_JSON_NUMBER},
    {RFC, "/a~1b", KS_JSON_FOUND, "1", KS_JSON_NUMBER},
    {RFC, "/c%d", KS_JSON_FOUND, "2", KS_JSON_NUMBER},
    {RFC, "/e^f", KS_JSON_FOUND, "3", KS_JSON_NUMBER},
    {RFC, "/g|h", KS_JSON_FOUND, "4", KS_JSON_NUMBER},
    {RFC, "/i\\j", KS_JSON_FOUND, "5", KS_JSON_NUMBER},
    {RFC, "/k\"l", KS_JSON_FOUND, "6", KS_JSON_NUMBER},
    {RFC, "/ ", KS_JSON_FOUND, "7", KS_JSON_NUMBER},
    {RFC, "/m~0n", KS_JSON_FOUND, "8", KS_JSON_NUMBER},
    /* missing */
    {RFC, "/foo/2", KS_JSON_MISSING, NULL, 0},
    {RFC, "/foo/-", KS_JSON_MISSING, NULL, 0},
    {RFC, "/foo/01", KS_JSON_MISSING, NULL, 0},
    {RFC, "/foo/+1", KS_JSON_MISSING, NULL, 0},
    {RFC, "/foo/x", KS_JSON_MISSING, NULL, 0},
    {RFC, "/foo/0/x", KS_JSON_MISSING, NULL, 0},
    {RFC, "/a/b", KS_JSON_MISSING, NULL, 0},
    {RFC, "/m~1n", KS_JSON_MISSING, NULL, 0},
    {RFC, "/nope", KS_JSON_MISSING, NULL, 0},
    {"5", "/a", KS_JSON_MISSING, NULL, 0},
    {"\"s\"", "/0", KS_JSON_MISSING, NULL, 0},
    {"[]", "/0", KS_JSON_MISSING, NULL, 0},
    {"{}", "/", KS_JSON_MISSING, NULL, 0},
    {"[1]", "/99999999999999999999999", KS_JSON_MISSING, NULL, 0},
    /* bad pointers */
    {RFC, "foo", KS_JSON_BAD_POINTER, NULL, 0},
    {RFC, "/a~2b", KS_JSON_BAD_POINTER, NULL, 0},
    {RFC, "/a~", KS_JSON_BAD_POINTER, NULL, 0},
    {RFC, "#/foo", KS_JSON_BAD_POINTER, NULL, 0},
    /* names with escapes match their decoded form; the first of a
     * repeated name wins */
    {"{\"a\\u0062\":1}", "/ab", KS_JSON_FOUND, "1", KS_JSON_NUMBER},
    {"{\"\\ud83d\\ude00\":2}", "/\xf0\x9f\x98\x80", KS_JSON_FOUND, "2", KS_JSON_NUMBER},
    {"{\"\\/\":3}", "/~1", KS_JSON_FOUND, "3", KS_JSON_NUMBER},
    {"{\"a\":1,\"a\":2}", "/a", KS_JSON_FOUND, "1", KS_JSON_NUMBER},
    {"{\"ab\":1}", "/a", KS_JSON_MISSING, NULL, 0},
    {"{\"a\":1}", "/ab", KS_JSON_MISSING, NULL, 0},
    /* whitespace, scalars, nesting */
    {" \t\r\n{ \"a\" : [ 1 , { \"b\" : null } ] } \n", "/a/1/b", KS_JSON_FOUND, "null",
     KS_JSON_NULL},
    {"{\"a\":[true,false]}", "/a/1", KS_JSON_FOUND, "false", KS_JSON_BOOL},
    {"{\"a\":\"x]}\\\"{[\",\"b\":-1.5e+3}", "/b", KS_JSON_FOUND, "-1.5e+3", KS_JSON_NUMBER},
    {"[[[[[[[[[[\"deep\"]]]]]]]]]]", "/0/0/0/0/0/0/0/0/0/0", KS_JSON_FOUND, "\"deep\"",
     KS_JSON_STRING},
    {"[0,1,2,3,4,5,6,7,8,9,10,11]", "/11", KS_JSON_FOUND, "11", KS_JSON_NUMBER},
    /* not JSON where it is read */
    {"", "", KS_JSON_BAD_TEXT, NULL, 0},
    {"   ", "", KS_JSON_BAD_TEXT, NULL, 0},
    {"{\"a\":[1,2", "/a/0", KS_JSON_BAD_TEXT, NULL, 0},
    {"{\"a\" 1}", "/a", KS_JSON_BAD_TEXT, NULL, 0},
    {"{\"a\":\"unterminated}", "/a", KS_JSON_BAD_TEXT, NULL, 0},
};

static void test_pointer_table(void)
{
    for (size_t i = 0; i < sizeof ptr_cases / sizeof ptr_cases[0]; i++) {
        const struct ptr_case *c = &ptr_cases[i];
        ks_json_span v = {0};
        size_t off = 0;
        int rc = find_copy(c->doc, strlen(c->doc), c->ptr, &v, &off);
        int ok = rc == c->rc;
        if (ok && rc == KS_JSON_FOUND)
            ok = v.type == c->type && v.len == strlen(c->span) &&
                 memcmp(c->doc + off, c->span, v.len) == 0;
        if (!ok)
            fprintf(stderr, "\ncase %zu: '%s' in '%s': rc %d (want %d), '%.*s'\n", i, c->ptr,
                    c->doc, rc, c->rc, rc == 0 ? (int)v.len : 0, rc == 0 ? c->doc + off : "");
        CU_ASSERT(ok);
    }
}

static void test_strings(void)
{
    static const struct {
        const char *json, *want;
        size_t want_len;
        int rc;
    } cases[] = {
        {"\"\"", "", 0, 0},
        {"\"plain\"", "plain", 5, 0},
        {"\"a\\nb\\t\\\"\\\\\\/\\b\\f\\r\"", "a\nb\t\"\\/\b\f\r", 10, 0},
        {"\"\\u00e9\\u20AC\"", "\xc3\xa9\xe2\x82\xac", 5, 0},
        {"\"\\ud83d\\ude00\"", "\xf0\x9f\x98\x80", 4, 0},
        {"\"a\\u0000b\"", "a\0b", 3, 0}, /* decodes; ks_json_valid refuses it */
        {"\"\\ud83d\"", NULL, 0, KS_JSON_BAD_TEXT},
        {"\"\\ude00\"", NULL, 0, KS_JSON_BAD_TEXT},
        {"\"\\u12\"", NULL, 0, KS_JSON_BAD_TEXT},
        {"\"\\x\"", NULL, 0, KS_JSON_BAD_TEXT},
        {"\"\\\"", NULL, 0, KS_JSON_BAD_TEXT},
        {"5", NULL, 0, KS_JSON_BAD_TEXT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ks_json_span s = {cases[i].json, strlen(cases[i].json), KS_JSON_STRING};
        char out[32];
        size_t n = 0;
        int rc = ks_json_string(&s, out, sizeof out, &n);
        CU_ASSERT_EQUAL(rc, cases[i].rc);
        if (rc == 0) {
            CU_ASSERT(n == cases[i].want_len && memcmp(out, cases[i].want, n) == 0);
            CU_ASSERT(ks_json_string_eq(&s, cases[i].want, cases[i].want_len));
            CU_ASSERT(!ks_json_string_eq(&s, "zz", 2));
        }
    }
    /* a small buffer gets the first bytes and the full length */
    ks_json_span s = {"\"\\u00e9abc\"", 11, KS_JSON_STRING};
    char out[3];
    size_t n;
    CU_ASSERT_EQUAL(ks_json_string(&s, out, sizeof out, &n), 0);
    CU_ASSERT_EQUAL(n, 5);
    CU_ASSERT(memcmp(out, "\xc3\xa9" "a", 3) == 0);
    CU_ASSERT(!ks_json_string_eq(&s, "\xc3\xa9" "ab", 4));
}

static void test_numbers(void)
{
    static const struct {
        const char *text;
        double d;
        int int_ok;
        int64_t i;
    } cases[] = {
        {"0", 0, 1, 0}, {"-0", 0, 1, 0}, {"42", 42, 1, 42}, {"-17", -17, 1, -17},
        {"1.5", 1.5, 0, 0}, {"1e2", 100, 0, 0}, {"-2.5E-1", -0.25, 0, 0},
        {"9223372036854775807", 9223372036854775807.0, 1, INT64_MAX},
        {"-9223372036854775808", -9223372036854775808.0, 1, INT64_MIN},
        {"9223372036854775808", 9223372036854775808.0, 0, 0},
        {"99999999999999999999", 1e20, 0, 0},
        {"1e400", HUGE_VAL, 0, 0}, {"-1e400", -HUGE_VAL, 0, 0}, {"1e-400", 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ks_json_span s = {cases[i].text, strlen(cases[i].text), KS_JSON_NUMBER};
        double d;
        int64_t v;
        CU_ASSERT_EQUAL(ks_json_double(&s, &d), 0);
        CU_ASSERT(d == cases[i].d);
        CU_ASSERT_EQUAL(ks_json_int64(&s, &v) == 0, cases[i].int_ok);
        if (cases[i].int_ok)
            CU_ASSERT(v == cases[i].i);
    }
    static const char *const bad[] = {"", "-", "01", "1.", ".5", "1e", "1e+", "+1", "0x1",
                                      "1 ", "nan", "1.5.5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ks_json_span s = {bad[i], strlen(bad[i]), KS_JSON_NUMBER};
        double d;
        int64_t v;
        CU_ASSERT_EQUAL(ks_json_double(&s, &d), KS_JSON_BAD_TEXT);
        CU_ASSERT_EQUAL(ks_json_int64(&s, &v), KS_JSON_BAD_TEXT);
    }
    /* numbers longer than the copy buffer: the leading digits and the
     * exponent count */
    static char big[2000];
    memset(big, '0', sizeof big - 1);
    big[0] = '3';
    ks_json_span s = {big, 1000, KS_JSON_NUMBER}; /* 3 x 10^999: beyond double */
    double d;
    CU_ASSERT_EQUAL(ks_json_double(&s, &d), 0);
    CU_ASSERT(d == HUGE_VAL);
    s.len = 301; /* 3 x 10^300 */
    CU_ASSERT_EQUAL(ks_json_double(&s, &d), 0);
    CU_ASSERT(fabs(d / 3e300 - 1) < 1e-12);
    memcpy(big, "0.", 2); /* 0.000...0 with 1000 zeros then 7, times 10^1005 */
    memset(big + 2, '0', 1000);
    memcpy(big + 1002, "7e1005", 6);
    s.len = 1008;
    CU_ASSERT_EQUAL(ks_json_double(&s, &d), 0);
    CU_ASSERT(fabs(d / 7e4 - 1) < 1e-9);
}

/* ---- differential: random documents, jansson walks its tree --------------- */

static uint64_t rng = 1;

static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static size_t below(size_t n)
{
    return n ? (size_t)(rnd() % n) : 0;
}

typedef struct tbuf {
    char data[16384];
    size_t len;
} tbuf;

static void put(tbuf *b, const char *s, size_t n)
{
    if (b->len + n < sizeof b->data) {
        memcpy(b->data + b->len, s, n);
        b->len += n;
    }
}

static void ws(tbuf *b)
{
    static const char *const w[] = {"", "", "", " ", "\n", "\t ", "\r\n  "};
    const char *s = w[below(7)];
    put(b, s, strlen(s));
}

/* Characters for names and strings, including pointer and JSON escapes. */
static const char *const atoms[] = {
    "a", "b", "k", "/", "~", "~0", "~1", "0", "1", "-", " ", "\\\"", "\\\\", "\\/", "\\n",
    "\\u00e9", "\\u20ac", "\\ud83d\\ude00", "\xc3\xa9", "\xe2\x82\xac", "\\u0041", "%", "."};

static void gen_string(tbuf *b, int index)
{
    put(b, "\"", 1);
    if (index >= 0) { /* distinct per object: jansson keeps the last of a repeat */
        char n[16];
        put(b, n, (size_t)snprintf(n, sizeof n, "%d", index));
    }
    for (size_t i = below(4); i > 0; i--) {
        const char *a = atoms[below(sizeof atoms / sizeof atoms[0])];
        put(b, a, strlen(a));
    }
    put(b, "\"", 1);
}

static void gen_value(tbuf *b, int depth)
{
    static const char *const scalars[] = {
        "null", "true", "false", "0", "-0", "12", "-7", "3.25", "1e3", "-2.5E-2",
        "9223372036854775807", "-9223372036854775808", "0.1"};
    size_t pick = depth > 5 ? below(2) : below(5);
    ws(b);
    if (pick == 0) {
        const char *s = scalars[below(sizeof scalars / sizeof scalars[0])];
        put(b, s, strlen(s));
    } else if (pick == 1) {
        gen_string(b, -1);
    } else {
        int obj = pick == 2 || (pick == 4 && below(2));
        size_t n = below(5);
        put(b, obj ? "{" : "[", 1);
        for (size_t i = 0; i < n; i++) {
            if (i)
                put(b, ",", 1);
            if (obj) {
                ws(b);
                gen_string(b, (int)i);
                ws(b);
                put(b, ":", 1);
            }
            gen_value(b, depth + 1);
        }
        ws(b);
        put(b, obj ? "}" : "]", 1);
    }
    ws(b);
}

/* Append a pointer token for name (n bytes), escaping '~' and '/'. */
static void token(char *ptr, size_t cap, const char *name, size_t n)
{
    size_t at = strlen(ptr);
    if (at + 1 < cap)
        ptr[at++] = '/';
    for (size_t i = 0; i < n && at + 2 < cap; i++) {
        if (name[i] == '~' || name[i] == '/') {
            ptr[at++] = '~';
            ptr[at++] = name[i] == '~' ? '0' : '1';
        } else {
            ptr[at++] = name[i];
        }
    }
    ptr[at] = '\0';
}

/* A random walk down jansson's tree; *expect is where it ends, or NULL
 * when the last step went to a name or index that is not there. */
static void random_pointer(json_t *root, char *ptr, size_t cap, json_t **expect)
{
    json_t *cur = root;
    ptr[0] = '\0';
    while (cur && (json_is_object(cur) || json_is_array(cur)) && below(4) != 0) {
        char idx[24];
        if (json_is_object(cur)) {
            size_t n = json_object_size(cur), want = below(n + 1);
            const char *key;
            json_t *v;
            size_t i = 0;
            json_object_foreach(cur, key, v) {
                if (i++ == want) {
                    /* strlen stops at a \u0000, which the generator never writes */
                    token(ptr, cap, key, strlen(key));
                    cur = v;
                    break;
                }
            }
            if (want == n) { /* a name that is not there */
                token(ptr, cap, "zz~/", 4);
                cur = NULL;
            }
        } else {
            size_t n = json_array_size(cur), want = below(n + 2);
            snprintf(idx, sizeof idx, "%zu", want);
            token(ptr, cap, idx, strlen(idx));
            cur = json_array_get(cur, want);
        }
    }
    *expect = cur;
}

/* 1 when the span agrees with jansson's value. */
static int same_value(const ks_json_span *v, json_t *want)
{
    json_error_t e;
    json_t *got = json_loadb(v->data, v->len, JSON_DECODE_ANY, &e);
    int ok = got && json_equal(got, want);
    json_decref(got);
    static const json_type types[] = {0, JSON_NULL, JSON_TRUE, JSON_INTEGER, JSON_STRING,
                                      JSON_ARRAY, JSON_OBJECT};
    json_type t = json_typeof(want);
    if (t == JSON_FALSE)
        t = JSON_TRUE;
    if (t == JSON_REAL)
        t = JSON_INTEGER;
    ok = ok && types[v->type] == t;
    if (ok && v->type == KS_JSON_STRING) {
        char buf[512];
        size_t n;
        ok = ks_json_string(v, buf, sizeof buf, &n) == 0 && n == json_string_length(want) &&
             n <= sizeof buf && memcmp(buf, json_string_value(want), n) == 0 &&
             ks_json_string_eq(v, json_string_value(want), n);
    } else if (ok && json_is_integer(want)) {
        int64_t i;
        ok = ks_json_int64(v, &i) == 0 && i == json_integer_value(want);
    } else if (ok && json_is_real(want)) {
        double d;
        ok = ks_json_double(v, &d) == 0 && d == json_real_value(want);
    }
    return ok;
}

/* Check several random pointers of a document jansson parsed; returns the
 * number of disagreements. */
static long compare_doc(const char *doc, size_t len, json_t *root)
{
    long bad = 0;
    for (int k = 0; k < 6; k++) {
        char ptr[512];
        json_t *want;
        random_pointer(root, ptr, sizeof ptr, &want);
        ks_json_span v;
        size_t off = 0;
        int rc = find_copy(doc, len, ptr, &v, &off);
        int ok = want ? rc == KS_JSON_FOUND : rc == KS_JSON_MISSING;
        if (ok && want) {
            v.data = doc + off;
            ok = same_value(&v, want);
        }
        if (!ok && bad++ < 5)
            fprintf(stderr, "\npointer '%s' in '%.*s': rc %d\n", ptr, (int)len, doc, rc);
    }
    return bad;
}

static void test_random_differential(void)
{
    const char *env_seed = getenv("KS_JSON_PTR_SEED"), *env_n = getenv("KS_JSON_PTR_N");
    uint64_t seed = env_seed ? strtoull(env_seed, NULL, 0) : 0x6f70732d6a736f6eULL;
    long count = env_n ? atol(env_n) : 20000;
    rng = seed ? seed : 1;
    static tbuf b;
    long docs = 0, bad = 0, mutated_valid = 0, mutated_invalid = 0;
    for (long it = 0; it < count; it++) {
        b.len = 0;
        gen_value(&b, 0);
        json_error_t e;
        json_t *root = json_loadb(b.data, b.len, JSON_DECODE_ANY, &e);
        if (!root) {
            fprintf(stderr, "\ngenerator wrote bad JSON: %s: %.*s\n", e.text, (int)b.len, b.data);
            bad++;
            continue;
        }
        docs++;
        bad += compare_doc(b.data, b.len, root);
        json_decref(root);

        /* the same text cut or changed: still jansson's answer when it is
         * JSON, and no read outside the text either way */
        size_t len = below(b.len + 1);
        if (below(2) && len)
            b.data[below(len)] = "{}[]\",:\\ 0"[below(10)];
        root = ks_json_valid(b.data, len) ? json_loadb(b.data, len, JSON_DECODE_ANY, &e) : NULL;
        if (root) {
            mutated_valid++;
            bad += compare_doc(b.data, len, root);
            json_decref(root);
        } else {
            mutated_invalid++;
            ks_json_span v;
            size_t off;
            for (int k = 0; k < 4; k++)
                find_copy(b.data, len, k == 0 ? "" : k == 1 ? "/0" : k == 2 ? "/0/1" : "/a", &v,
                          &off);
        }
    }
    printf("\n    json_ptr vs jansson: %ld documents, %ld cut/changed still JSON, %ld not, "
           "%ld disagreements, seed 0x%llx\n",
           docs, mutated_valid, mutated_invalid, bad, (unsigned long long)seed);
    CU_ASSERT_EQUAL(bad, 0);
}

/* Nesting far past any parser's limit: no recursion, no stack growth. */
static void test_adversarial(void)
{
    size_t depth = 200000;
    char *doc = malloc(2 * depth + 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    memset(doc, '[', depth);
    doc[depth] = '1';
    memset(doc + depth + 1, ']', depth);
    ks_json_span v;
    size_t off;
    CU_ASSERT_EQUAL(find_copy(doc, 2 * depth + 1, "/0/0/0", &v, &off), KS_JSON_FOUND);
    CU_ASSERT_EQUAL(v.len, 2 * depth + 1 - 6);
    CU_ASSERT_EQUAL(find_copy(doc, 2 * depth + 1, "/1", &v, &off), KS_JSON_MISSING);
    CU_ASSERT_EQUAL(find_copy(doc, depth, "/0", &v, &off), KS_JSON_BAD_TEXT); /* unclosed */
    CU_ASSERT_EQUAL(find_copy(doc, 2 * depth, "", &v, &off), KS_JSON_BAD_TEXT);
    memset(doc, '{', depth); /* braces with no names */
    CU_ASSERT_EQUAL(find_copy(doc, depth, "/a", &v, &off), KS_JSON_BAD_TEXT);
    memset(doc, '"', depth); /* quotes */
    find_copy(doc, depth, "/a", &v, &off);
    memset(doc, '\\', depth); /* backslashes */
    find_copy(doc, depth, "", &v, &off);
    free(doc);

    /* every prefix of a document with every kind of value */
    const char *full = "{\"a\":[1,-2.5e3,\"x\\\"\\u00e9\",true,false,null,{\"b\":{}}],"
                       "\"c\\/\":\"\\ud83d\\ude00\"}";
    for (size_t n = 0; n <= strlen(full); n++) {
        find_copy(full, n, "/a/6/b", &v, &off);
        find_copy(full, n, "/c~1", &v, &off);
    }
    CU_ASSERT_EQUAL(find_copy(full, strlen(full), "/c~1", &v, &off), KS_JSON_FOUND);

    /* iteration over a non-container, and past the end */
    ks_json_iter it;
    ks_json_span num = {"5", 1, KS_JSON_NUMBER};
    CU_ASSERT_EQUAL(ks_json_iter_init(&it, &num), KS_JSON_BAD_TEXT);
    ks_json_span arr = {"[1,2]", 5, KS_JSON_ARRAY};
    CU_ASSERT_EQUAL(ks_json_iter_init(&it, &arr), 0);
    CU_ASSERT_EQUAL(ks_json_iter_next(&it, NULL, &v), 1);
    CU_ASSERT_EQUAL(ks_json_iter_next(&it, NULL, &v), 1);
    CU_ASSERT_EQUAL(ks_json_iter_next(&it, NULL, &v), 0);
    CU_ASSERT_EQUAL(ks_json_iter_next(&it, NULL, &v), 0);
    ks_json_span bad = {"[1 2]", 5, KS_JSON_ARRAY};
    ks_json_iter_init(&it, &bad);
    CU_ASSERT_EQUAL(ks_json_iter_next(&it, NULL, &v), 1);
    CU_ASSERT_EQUAL(ks_json_iter_next(&it, NULL, &v), KS_JSON_BAD_TEXT);
}

void ks_test_register_json_ptr(void)
{
    CU_pSuite s = CU_add_suite("json-ptr", NULL, NULL);
    CU_add_test(s, "RFC 6901 pointers: found, missing, bad", test_pointer_table);
    CU_add_test(s, "strings decoded", test_strings);
    CU_add_test(s, "numbers as double and int64", test_numbers);
    CU_add_test(s, "20 000 random documents: jansson's values", test_random_differential);
    CU_add_test(s, "deep nesting, truncation, garbage", test_adversarial);
}
