/*
 * test_json_valid.c - ks_json_valid (lib/json/json_valid.h) gives jansson's
 * verdict, json_loadb(..., JSON_DECODE_ANY | JSON_ALLOW_NUL, ...) != NULL,
 * except where jansson refuses valid JSON it cannot hold (numbers beyond
 * int64 or double, "\u0000" in a member name): those the check accepts
 * (an integer beyond int64 is asked again as a real, so that only reals
 * beyond double and NULs in member names leave jansson without a say). A
 * table of edge cases, each also asserted against jansson 2.14 where it
 * has a say, the message and byte of each kind of refusal, then 200 000
 * seeded random mutations of valid documents compared with jansson one by
 * one.
 * KS_JSON_FUZZ_SEED and KS_JSON_FUZZ_N (environment) change the seed and
 * the count of the random test.
 */
#include <CUnit/CUnit.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json/json_valid.h"
#include "unit/test_util.h"

/* jansson's verdict: 1, 0, or -1 when it refuses for want of room (a
 * number beyond int64 or double, a NUL in a member name): no say. */
static int jansson_valid(const void *data, size_t len)
{
    json_error_t err;
    json_t *j = json_loadb(data, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
    json_decref(j);
    if (j)
        return 1;
    enum json_error_code code = json_error_code(&err);
    if (code == json_error_numeric_overflow) { /* an integer beyond int64? read it as a real */
        j = json_loadb(data, len, JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL,
                       &err);
        json_decref(j);
        if (j)
            return 1;
        code = json_error_code(&err);
    }
    return code == json_error_numeric_overflow || code == json_error_null_byte_in_key ? -1 : 0;
}

static long no_say; /* inputs jansson had no say on */

static void show(FILE *f, const unsigned char *b, size_t len)
{
    size_t n = len > 160 ? 160 : len;
    for (size_t i = 0; i < n; i++)
        fprintf(f, b[i] >= 0x20 && b[i] < 0x7f && b[i] != '\\' ? "%c" : "\\x%02x", b[i]);
    if (n < len)
        fprintf(f, "... (%zu bytes)", len);
}

/* Both verdicts on a private heap copy of exactly len bytes (so that ASan
 * sees any read past the end); 1 when they agree. */
static int agree(const void *data, size_t len, int *verdict)
{
    unsigned char *copy = malloc(len ? len : 1);
    if (!copy)
        abort();
    if (len)
        memcpy(copy, data, len);
    int mine = ks_json_valid(copy, len);
    int theirs = jansson_valid(copy, len);
    if (theirs < 0) {
        no_say++;
        theirs = mine;
    }
    if (mine != theirs) {
        fprintf(stderr, "\njson_valid %d, jansson %d: \"", mine, theirs);
        show(stderr, copy, len);
        fprintf(stderr, "\"\n");
    }
    free(copy);
    *verdict = theirs;
    return mine == theirs;
}

struct edge {
    const char *text;
    size_t len;
    int valid; /* the verdict (jansson 2.14's where it has one) */
};
#define E(s, v) {s, sizeof(s) - 1, v}

static const struct edge edges[] = {
    /* top level: any value, whitespace around it, nothing else */
    E("", 0), E(" ", 0), E(" \t\r\n", 0), E("1", 1), E(" 1 ", 1), E("\t\r\n1\n", 1),
    E("\"\"", 1), E("true", 1), E("false", 1), E("null", 1), E("{}", 1), E("[]", 1),
    E("1 2", 0), E("{} []", 0), E("\f1", 0), E("\v1", 0), E("\xef\xbb\xbf" "1", 0),
    E("True", 0), E("nul", 0), E("nulll", 0), E("truex", 0), E("true1", 0), E("[true,]", 0),
    E("NaN", 0), E("Infinity", 0), E("-Infinity", 0), E("'a'", 0), E("/**/1", 0),
    /* arrays and objects */
    E("[1,2]", 1), E("[1,]", 0), E("[,1]", 0), E("[1 2]", 0), E("[", 0), E("]", 0), E("[1", 0),
    E("{\"a\":1}", 1), E("{\"a\":1,}", 0), E("{\"a\"}", 0), E("{\"a\":}", 0), E("{a:1}", 0),
    E("{1:1}", 0), E("{\"a\" : 1 , \"b\" : [ ] }", 1), E("{\"a\":1,\"a\":2}", 1),
    E("{\"a\":1 \"b\":2}", 0), E("{\"a\"::1}", 0), E("[}", 0), E("{]", 0), E("{", 0),
    /* numbers */
    E("0", 1), E("-0", 1), E("-", 0), E("+1", 0), E("01", 0), E("-01", 0), E("00", 0),
    E("1.", 0), E(".1", 0), E("1.e1", 0), E("1e", 0), E("1e+", 0), E("1e-", 0), E("1E5", 1),
    E("1e+5", 1), E("1e-5", 1), E("0.0", 1), E("-0.0e-0", 1), E("1.5.3", 0), E("0x10", 0),
    E("1-2", 0), E("9223372036854775807", 1), E("9223372036854775808", 1),
    E("-9223372036854775808", 1), E("-9223372036854775809", 1), E("10000000000000000000", 1),
    E("922337203685477580", 1), E("99999999999999999999999", 1), E("1e308", 1), E("1e309", 1),
    E("-1e309", 1), E("1.7976931348623157e308", 1), E("1.7976931348623159e308", 1),
    E("1e-400", 1), E("-1e-400", 1), E("0e99999999999999999999", 1), E("0.000e400", 1),
    E("1e99999999999999999999", 1), E("1e-99999999999999999999", 1),
    E("0.0000000001e318", 1), E("0.0000000001e319", 1), E("1e00000000000000000000308", 1),
    E("9223372036854775808.0", 1), E("9223372036854775808e0", 1), E("1e400", 1),
    E("-1e400", 1), E("99999999999999999999", 1), E("[1e400,99999999999999999999]", 1),
    E("\"a\\u0000b\"", 1), E("[1e400,}", 0), E("1e400x", 0),
    /* strings: escapes */
    E("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", 1), E("\"\\a\"", 0), E("\"\\x41\"", 0), E("\"\\'\"", 0),
    E("\"\\", 0), E("\"\\\"", 0), E("\"abc", 0), E("\"\\u0041\"", 1), E("\"\\u00e9\\u00E9\"", 1),
    E("\"\\u004\"", 0), E("\"\\u00G1\"", 0), E("\"\\U0041\"", 0), E("\"\\u0000\"", 1),
    E("{\"\\u0000\":1}", 1), E("{\"a\\u0000\":1}", 1), E("\"\\u0001\"", 1),
    /* surrogate escapes: pairs only */
    E("\"\\ud83d\\ude00\"", 1), E("\"\\uD83D\\uDE00\"", 1), E("\"\\ud800\"", 0),
    E("\"\\udc00\"", 0), E("\"\\udfff\"", 0), E("\"\\ud800\\ud800\"", 0),
    E("\"\\ud800\\n\"", 0), E("\"\\ud800x\"", 0), E("\"\\ud800\\\\udc00\"", 0),
    E("\"\\ud800\\u0041\"", 0), E("\"\\udc00\\ud800\"", 0), E("\"\\ud800\\udc0\"", 0),
    E("\"\\ud800\\u\"", 0), E("\"\\ud800\\", 0), E("\"\\ue000\"", 1), E("\"\\uffff\"", 1),
    /* strings: raw bytes */
    E("\"\x01\"", 0), E("\"\x1f\"", 0), E("\"\t\"", 0), E("\"\n\"", 0), E("\"\x7f\"", 1),
    E("\" \"", 1), E("\"\xc3\xa9\"", 1), E("\"\xc3\"", 0), E("\"\xc3\xa9", 0), E("\"\xc3", 0),
    E("\"\xc0\x80\"", 0), E("\"\xc1\xbf\"", 0), E("\"\xc2\x80\"", 1), E("\"\xdf\xbf\"", 1),
    E("\"\xe0\x80\x80\"", 0), E("\"\xe0\x9f\xbf\"", 0), E("\"\xe0\xa0\x80\"", 1),
    E("\"\xed\x9f\xbf\"", 1), E("\"\xed\xa0\x80\"", 0), E("\"\xed\xbf\xbf\"", 0),
    E("\"\xee\x80\x80\"", 1), E("\"\xef\xbf\xbf\"", 1), E("\"\xf0\x8f\xbf\xbf\"", 0),
    E("\"\xf0\x90\x80\x80\"", 1), E("\"\xf4\x8f\xbf\xbf\"", 1), E("\"\xf4\x90\x80\x80\"", 0),
    E("\"\xf5\x80\x80\x80\"", 0), E("\"\xff\"", 0), E("\"\x80\"", 0), E("\"\xbf\"", 0),
    E("\"\xe2\x82\"", 0), E("\"\xf0\x9f\x98\"", 0), E("\"\xe2\x28\xa1\"", 0), E("\xc3\xa9", 0),
    /* NUL bytes: rejected, except one right after a number or a literal */
    E("\0", 0), E(" \0", 0), E("\"a\0b\"", 0), E("\"a\"\0", 0), E("[]\0", 0), E("{}\0", 0),
    E("1 \0", 0), E("1\0", 1), E("1\0\0", 0), E("1\0 ", 1), E("-0\0", 1), E("1.5\0", 1),
    E("1e5\0", 1), E("true\0", 1), E("false\0", 1), E("null\0", 1), E("[1\0]", 1),
    E("[1\0,2]", 1), E("[1\0\0]", 0), E("{\"a\":1\0}", 1), E("{\"a\":true\0,\"b\":null\0}", 1),
    E("[true\0 ,1]", 1), E("tru\0e", 0), E("\0" "1", 0), E("[\0" "1]", 0), E("[1,\0" "2]", 0),
    E("{\"a\"\0:1}", 0), E("-\0" "1", 0), E("1.\0" "5", 0), E("9223372036854775808\0", 1),
};

static void test_edges(void)
{
    int verdict;
    size_t n = sizeof edges / sizeof edges[0];
    for (size_t i = 0; i < n; i++) {
        CU_ASSERT(agree(edges[i].text, edges[i].len, &verdict));
        if (verdict != edges[i].valid) {
            fprintf(stderr, "\nedge %zu: the verdict is %d, the table %d: \"", i, verdict,
                    edges[i].valid);
            show(stderr, (const unsigned char *)edges[i].text, edges[i].len);
            fprintf(stderr, "\"\n");
        }
        CU_ASSERT_EQUAL(verdict, edges[i].valid);
    }
}

/* Each kind of refusal: its message and the byte where it was found. */
static void test_messages(void)
{
    static const struct {
        const char *text;
        const char *why;
        size_t pos;
    } cases[] = {
        {"{\"user\":\"u-1\" \"n\":2}", "expected ',' or '}'", 14},
        {"[1 2]", "expected ',' or ']'", 3},
        {"{\"a\" 1}", "expected ':' after a member name", 5},
        {"{a:1}", "expected '\"' starting a member name", 1},
        {"{\"a\":1,}", "expected '\"' starting a member name", 7},
        {"[1,]", "expected a value", 3},
        {"", "empty text", 0},
        {" \n", "only whitespace", 2},
        {"{\"a\":[1,2", "unexpected end of text", 9},
        {"1 2", "text after the JSON value", 2},
        {"tru", "invalid literal (true, false or null?)", 0},
        {"[01]", "invalid number (leading zero)", 1},
        {"1.", "invalid number (a digit must follow '.')", 0},
        {"[1e+]", "invalid number (a digit must follow the exponent)", 1},
        {"-x", "invalid number", 0},
        {"\"abc", "unterminated string", 4},
        {"\"a\tb\"", "control character in a string (escape it)", 2},
        {"\"a\\qb\"", "invalid escape in a string", 2},
        {"\"\\u12\"", "\\u needs 4 hex digits", 1},
        {"\"x\\udc00\"", "lone low surrogate in a \\u escape", 2},
        {"\"\\ud800x\"", "high surrogate not followed by a \\u low surrogate", 1},
        {"\"\xc3\x28\"", "invalid UTF-8 in a string", 1},
        {"@", "expected a value", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ks_json_error e;
        size_t len = strlen(cases[i].text);
        CU_ASSERT_EQUAL(ks_json_check(cases[i].text, len, &e), -1);
        CU_ASSERT_STRING_EQUAL(e.why, cases[i].why);
        CU_ASSERT_EQUAL(e.pos, cases[i].pos);
        char want[160];
        snprintf(want, sizeof want, "%s at byte %zu", cases[i].why, cases[i].pos);
        CU_ASSERT_STRING_EQUAL(e.text, want);
        if (strcmp(e.why, cases[i].why) != 0 || e.pos != cases[i].pos)
            fprintf(stderr, "\nmessage case %zu: got '%s'\n", i, e.text);
    }
    /* too deep */
    static char deep[2100];
    memset(deep, '[', sizeof deep);
    ks_json_error e;
    CU_ASSERT_EQUAL(ks_json_check(deep, sizeof deep, &e), -1);
    CU_ASSERT_STRING_EQUAL(e.text, "nested deeper than 2048 levels at byte 2048");
    /* valid: 0, err untouched */
    CU_ASSERT_EQUAL(ks_json_check("{\"a\":1e400}", 11, &e), 0);
    CU_ASSERT_EQUAL(ks_json_check("[1", 2, NULL), -1);
}

/* Nesting around jansson's limit of 2048 values deep. */
static void test_depth(void)
{
    static const struct {
        int levels;
        const char *open, *inner, *close;
        int valid;
    } cases[] = {
        {2048, "[", "", "]", 1},          {2049, "[", "", "]", 0},
        {2047, "[", "1", "]", 1},         {2048, "[", "1", "]", 0},
        {2047, "{\"k\":", "1", "}", 1},   {2048, "{\"k\":", "1", "}", 0},
        {2047, "{\"k\":", "{}", "}", 1},  {2048, "{\"k\":", "{}", "}", 0},
        {2047, "[1,", "[]", "]", 1},      {2048, "[1,", "[]", "]", 0},
        {2049, "[1,", "[]", "]", 0},      {2047, "[{\"a\":", "\"x\"", "}]", 0},
        {1023, "[{\"a\":", "\"x\"", "}]", 1}, {1023, "[{\"a\":", "{}", "}]", 1},
        {1024, "[{\"a\":", "[]", "}]", 0}, {1024, "{\"a\":[", "", "]}", 1},
        {100000, "[", "", "]", 0},
        {2047, "[", "", "", 0},           {2048, "[", "1", "", 0},
    };
    int verdict;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t lo = strlen(cases[i].open), li = strlen(cases[i].inner),
               lc = strlen(cases[i].close), n = (size_t)cases[i].levels;
        char *b = malloc(n * (lo + lc) + li), *p = b;
        CU_ASSERT_PTR_NOT_NULL_FATAL(b);
        for (size_t k = 0; k < n; k++, p += lo)
            memcpy(p, cases[i].open, lo);
        memcpy(p, cases[i].inner, li);
        p += li;
        for (size_t k = 0; k < n; k++, p += lc)
            memcpy(p, cases[i].close, lc);
        CU_ASSERT(agree(b, (size_t)(p - b), &verdict));
        if (verdict != cases[i].valid)
            fprintf(stderr, "\ndepth case %zu: jansson says %d\n", i, verdict);
        CU_ASSERT_EQUAL(verdict, cases[i].valid);
        free(b);
    }
}

/* ---- random differential test ---------------------------------------- */

static uint64_t rng_state;

static uint64_t rnd(void)
{
    uint64_t x = rng_state; /* xorshift64* */
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static size_t below(size_t n)
{
    return n ? (size_t)(rnd() % n) : 0;
}

static const char *const seeds[] = {
    "{\"user\":\"u-1042\",\"page\":\"/products/42\",\"ts\":1718000000123,\"ref\":null,"
    "\"dwell_ms\":5230,\"mobile\":true}",
    "{\"user\":\"\\u00e9l\\u00e8ve\",\"page\":\"/caf\xc3\xa9\",\"score\":-12.5e-3,"
    "\"tags\":[\"a\",\"b\\n\",\"\\ud83d\\ude00\",\"\xf0\x9f\x98\x80\"],\"ok\":false}",
    "[1,-0,0.5,1e308,1.7976931348623157e308,9223372036854775807,-9223372036854775808,"
    "123456789012345678,2.2250738585072014e-308,4.9e-324,1E+2,0e0]",
    "{\"order\":{\"id\":\"o-77\",\"lines\":[{\"sku\":\"A-1\",\"qty\":2,\"price\":9.99},"
    "{\"sku\":\"B-2\",\"qty\":1,\"price\":120.0}],\"customer\":{\"name\":\"Zo\\u00eb \\\"Z\\\"\","
    "\"address\":{\"street\":\"1 Main St\\/2\",\"city\":\"\xe6\x9d\xb1\xe4\xba\xac\",\"zip\":null}},"
    "\"notes\":\"\\b\\f\\r\\t\\\\\"},\"v\":[[],{},[[{}]],\"\"]}",
    "  \"just a string \\u0041\\u00DF\\u6771\\uD834\\uDD1E\"\r\n",
    "-123.456e+78",
    "true",
    "null",
    "[false, {\"a\" : [ 1 , 2 ] } ]",
    "\"\xed\x9f\xbf\xee\x80\x80\xef\xbf\xbf\xf4\x8f\xbf\xbf\xc2\x80\"",
};

/* bytes and sequences that matter to the grammar (some hold a NUL) */
#define S(x) {x, sizeof(x) - 1}
static const struct special {
    const char *s;
    size_t len;
} specials[] = {
    S("\0"), S("\""), S("\\"), S("{"), S("}"), S("["), S("]"), S(","), S(":"), S(" "), S("\t"),
    S("\n"), S("\r"), S("\f"), S("0"), S("1"), S("9"), S("-"), S("+"), S("."), S("e"), S("E"),
    S("t"), S("n"), S("u"), S("x"), S("\x01"), S("\x1f"), S("\x7f"), S("\x80"), S("\xbf"),
    S("\xc0"), S("\xc1"), S("\xc2"), S("\xc3\xa9"), S("\xdf"), S("\xe0"), S("\xe0\x9f\xbf"),
    S("\xed"), S("\xed\xa0\x80"), S("\xef\xbb\xbf"), S("\xf0"), S("\xf0\x8f"),
    S("\xf4\x90\x80\x80"), S("\xf4"), S("\xf5"), S("\xff"), S("\\u"), S("\\u0000"),
    S("\\ud800"), S("\\udc00"), S("\\ud800\\udc00"), S("\\uDBFF\\uDFFF"), S("\\u12"),
    S("\\ug000"), S("1e400"), S("1e-400"), S("9223372036854775808"), S("-9223372036854775809"),
    S("00"), S("true"), S("null"), S("false"), S("[[[["), S("]]]]"), S("{\"k\":"), S("\"\":"),
    S("1\0"), S("e+"), S(".5"),
};

#define MAX_DOC 8192

static long deep_wraps; /* mutations that nested a document ~2048 deep */

/* One random change to doc (length *len, capacity MAX_DOC). */
static void mutate(unsigned char *doc, size_t *len)
{
    size_t n = *len;
    switch (below(9)) {
    case 0: /* flip a bit */
        if (n)
            doc[below(n)] ^= (unsigned char)(1u << below(8));
        break;
    case 1: /* a random byte */
        if (n)
            doc[below(n)] = (unsigned char)rnd();
        break;
    case 2: { /* overwrite with a special */
        const struct special *sp = &specials[below(sizeof specials / sizeof specials[0])];
        size_t at = below(n + 1);
        for (size_t i = 0; i < sp->len && at + i < n; i++)
            doc[at + i] = (unsigned char)sp->s[i];
        break;
    }
    case 3:
    case 4: { /* insert a special */
        const struct special *sp = &specials[below(sizeof specials / sizeof specials[0])];
        size_t at = below(n + 1);
        if (n + sp->len > MAX_DOC)
            break;
        memmove(doc + at + sp->len, doc + at, n - at);
        memcpy(doc + at, sp->s, sp->len);
        *len = n + sp->len;
        break;
    }
    case 5: /* truncate */
        *len = below(n + 1);
        break;
    case 6: { /* delete a run */
        if (!n)
            break;
        size_t at = below(n), k = 1 + below(n - at < 8 ? n - at : 8);
        memmove(doc + at, doc + at + k, n - at - k);
        *len = n - k;
        break;
    }
    case 7: { /* duplicate a run */
        if (!n)
            break;
        size_t at = below(n), k = 1 + below(n - at < 16 ? n - at : 16);
        if (n + k > MAX_DOC)
            break;
        memmove(doc + at + k, doc + at, n - at);
        *len = n + k;
        break;
    }
    case 8: { /* wrap in containers, up to the depth limit and past it */
        int deep = below(32) == 0; /* rare: jansson's allocations make these slow */
        size_t levels = deep ? 2040 + below(16) : 1 + below(4);
        int obj = (int)below(2);
        size_t lo = obj ? 5 : 1, lc = 1; /* {"k": ... } or [ ... ] */
        if (n + levels * (lo + lc) > MAX_DOC)
            break;
        memmove(doc + levels * lo, doc, n);
        for (size_t i = 0; i < levels; i++)
            memcpy(doc + i * lo, obj ? "{\"k\":" : "[", lo);
        for (size_t i = 0; i < levels; i++)
            doc[levels * lo + n + i] = obj ? '}' : ']';
        *len = n + levels * (lo + lc);
        deep_wraps += deep;
        break;
    }
    }
}

static void test_random_differential(void)
{
    const char *env_seed = getenv("KS_JSON_FUZZ_SEED"), *env_n = getenv("KS_JSON_FUZZ_N");
    uint64_t seed = env_seed ? strtoull(env_seed, NULL, 0) : 0x6b73747265616d73ULL;
    long count = env_n ? atol(env_n) : 200000;
    rng_state = seed ? seed : 1;
    deep_wraps = 0;
    no_say = 0;
    static unsigned char doc[MAX_DOC];
    size_t nseeds = sizeof seeds / sizeof seeds[0];
    long compared = 0, valid = 0, mismatches = 0;

    /* the seeds themselves, and their deep wrappings, are valid */
    int verdict;
    for (size_t i = 0; i < nseeds; i++) {
        CU_ASSERT(agree(seeds[i], strlen(seeds[i]), &verdict));
        CU_ASSERT_EQUAL(verdict, 1);
    }
    for (long it = 0; it < count; it++) {
        const char *s = seeds[below(nseeds)];
        size_t len = strlen(s);
        memcpy(doc, s, len);
        if (below(16) == 0) { /* splice a second document in */
            const char *t = seeds[below(nseeds)];
            size_t tl = strlen(t), at = below(len + 1), from = below(tl), k = below(tl - from + 1);
            memmove(doc + at + k, doc + at, len - at);
            memcpy(doc + at, t + from, k);
            len += k;
        }
        for (size_t m = 1 + below(3); m > 0; m--)
            mutate(doc, &len);
        if (!agree(doc, len, &verdict)) {
            if (++mismatches <= 10)
                fprintf(stderr, "  (seed 0x%llx, iteration %ld)\n", (unsigned long long)seed, it);
        }
        valid += verdict;
        compared++;
    }
    printf("\n    json_valid vs jansson: %ld mutated inputs compared (%ld valid, %ld invalid, "
           "%ld nested ~2048 deep, %ld beyond jansson's numbers), %ld mismatches, seed 0x%llx\n",
           compared, valid, compared - valid, deep_wraps, no_say, mismatches,
           (unsigned long long)seed);
    CU_ASSERT_EQUAL(mismatches, 0);
}

void ks_test_register_json_valid(void)
{
    CU_pSuite s = CU_add_suite("json-valid", NULL, NULL);
    CU_add_test(s, "edge cases: the verdicts of jansson 2.14 where it has one", test_edges);
    CU_add_test(s, "the message and byte of each refusal", test_messages);
    CU_add_test(s, "nesting around the depth limit of 2048", test_depth);
    CU_add_test(s, "200 000 random mutations: the verdict of jansson", test_random_differential);
}
