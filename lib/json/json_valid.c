/*
 * json_valid.c - a non-allocating JSON validator with jansson 2.14's
 * verdicts (json_valid.h). One pass, iterative: the open containers are a
 * bit stack (object or array) of JSON_PARSER_MAX_DEPTH bits.
 */
#include "json/json_valid.h"

#include <stdint.h>
#include <string.h>

/* jansson_config.h's JSON_PARSER_MAX_DEPTH: nested values, scalars counted */
#define MAX_DEPTH 2048

typedef const unsigned char *cptr;

/* Inside a string, a byte that needs a look: a quote, a backslash, a
 * control character or the first byte of a UTF-8 sequence. */
static int string_stop(unsigned c)
{
    return c - 0x20 >= 0x60 || c == '"' || c == '\\';
}

static int is_digit(unsigned c)
{
    return c - '0' < 10;
}

static cptr skip_ws(cptr p, cptr end)
{
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    return p;
}

/* The value of 4 hex digits at p, or -1. */
static long hex4(cptr p, cptr end)
{
    long v = 0;
    if (end - p < 4)
        return -1;
    for (int i = 0; i < 4; i++) {
        unsigned c = p[i];
        if (c - '0' < 10)
            v = v * 16 + (c - '0');
        else if ((c | 0x20) - 'a' < 6)
            v = v * 16 + ((c | 0x20) - 'a' + 10);
        else
            return -1;
    }
    return v;
}

/* A string's body, p just after the opening quote: the end of the string
 * (past the closing quote), or NULL. */
static cptr scan_string(cptr p, cptr end)
{
    for (;;) {
        while (p < end && !string_stop(*p))
            p++;
        if (p == end)
            return NULL;
        unsigned c = *p;
        if (c == '"')
            return p + 1;
        if (c < 0x20)
            return NULL;
        if (c == '\\') {
            if (++p == end)
                return NULL;
            switch (*p++) {
            case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
                continue;
            case 'u': {
                long u = hex4(p, end);
                if (u <= 0) /* bad hex, or \u0000 (no JSON_ALLOW_NUL) */
                    return NULL;
                p += 4;
                if (u >= 0xDC00 && u <= 0xDFFF) /* lone low surrogate */
                    return NULL;
                if (u >= 0xD800 && u <= 0xDBFF) { /* needs \u + low surrogate */
                    if (end - p < 2 || p[0] != '\\' || p[1] != 'u')
                        return NULL;
                    long lo = hex4(p + 2, end);
                    if (lo < 0xDC00 || lo > 0xDFFF)
                        return NULL;
                    p += 6;
                }
                continue;
            }
            default:
                return NULL;
            }
        }
        /* UTF-8: jansson's utf8_check_first + utf8_check_full */
        size_t n = (size_t)(end - p);
        if (c >= 0xC2 && c <= 0xDF) {
            if (n < 2 || (p[1] & 0xC0) != 0x80)
                return NULL;
            p += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (n < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80)
                return NULL;
            if ((c == 0xE0 && p[1] < 0xA0) || /* overlong */
                (c == 0xED && p[1] > 0x9F))   /* surrogate */
                return NULL;
            p += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (n < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 ||
                (p[3] & 0xC0) != 0x80)
                return NULL;
            if ((c == 0xF0 && p[1] < 0x90) || /* overlong */
                (c == 0xF4 && p[1] > 0x8F))   /* > U+10FFFF */
                return NULL;
            p += 4;
        } else { /* continuation byte, C0, C1, F5..FF */
            return NULL;
        }
    }
}

/* 2^1024 - 2^970: the halfway point between DBL_MAX and 2^1024; a decimal
 * at or above it rounds to infinity (ties go to the even 2^1024). */
static const char overflow_at[] =
    "1797693134862315807937289714053034150799341327100378269361737789804449682927647509466490179775"
    "8720709633028641669288791094655554785194040263065748867150582068190890200070838367627385484581"
    "7711531764475730270069855571366959622842914819860834936475292719074168444365510704342711559699"
    "508093042880177904174497792";

#define EXP_CAP 100000000LL /* beyond any double either way */

/* Whether the real [int digits ip..ipe).[frac digits fp..fpe) x 10^exp
 * rounds to +-infinity (strtod's ERANGE with HUGE_VAL: jansson rejects
 * it; underflow to 0 it accepts). Exact: no strtod, no copy. */
static int real_overflows(cptr ip, cptr ipe, cptr fp, cptr fpe, long long exp)
{
    cptr d = ip;
    long long e10; /* value = 0.DIGITS x 10^e10, first digit nonzero */
    while (d < ipe && *d == '0')
        d++;
    if (d < ipe) {
        size_t n = (size_t)(ipe - d);
        e10 = n > EXP_CAP ? EXP_CAP : (long long)n;
    } else {
        if (!fp)
            return 0; /* zero */
        for (d = fp; d < fpe && *d == '0'; d++)
            ;
        if (d == fpe)
            return 0; /* zero */
        size_t z = (size_t)(d - fp);
        e10 = z > EXP_CAP ? -EXP_CAP : -(long long)z;
    }
    e10 += exp;
    if (e10 < 309)
        return 0; /* < 10^308 */
    if (e10 > 309)
        return 1; /* >= 10^309 */
    /* 309 integer digits: compare the digits with overflow_at's */
    size_t i = 0;
    const size_t nt = sizeof overflow_at - 1;
    for (; d < (fp ? fpe : ipe); d++) { /* digits, then '.', then digits */
        if (*d == '.')
            continue;
        if (i == nt)
            return 1; /* equal so far: >= the halfway point */
        if (*d != (unsigned char)overflow_at[i])
            return *d > (unsigned char)overflow_at[i];
        i++;
    }
    for (; i < nt; i++) /* the digits ran out: the rest are zeros */
        if (overflow_at[i] != '0')
            return 0;
    return 1;
}

/* A number at p (a '-' or a digit): its end, or NULL when it is not one
 * that jansson accepts. */
static cptr scan_number(cptr p, cptr end)
{
    int neg = 0, real = 0;
    cptr ip, ipe, fp = NULL, fpe = NULL;
    long long exp = 0;

    if (*p == '-') {
        neg = 1;
        p++;
    }
    if (p == end || !is_digit(*p))
        return NULL;
    ip = p;
    if (*p == '0') {
        p++;
        if (p < end && is_digit(*p)) /* leading zero */
            return NULL;
    } else {
        while (p < end && is_digit(*p))
            p++;
    }
    ipe = p;
    if (p < end && *p == '.') {
        p++;
        if (p == end || !is_digit(*p))
            return NULL;
        fp = p;
        while (p < end && is_digit(*p))
            p++;
        fpe = p;
        real = 1;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        int eneg = 0;
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            eneg = *p++ == '-';
        if (p == end || !is_digit(*p))
            return NULL;
        while (p < end && is_digit(*p)) {
            if (exp < EXP_CAP)
                exp = exp * 10 + (*p - '0');
            p++;
        }
        if (eneg)
            exp = -exp;
        real = 1;
    }
    if (!real) { /* json_int_t is long long: strtoll's range */
        size_t n = (size_t)(ipe - ip);
        if (n < 19)
            return p;
        if (n > 19)
            return NULL;
        return memcmp(ip, neg ? "9223372036854775808" : "9223372036854775807", 19) <= 0
                   ? p
                   : NULL;
    }
    return real_overflows(ip, ipe, fp, fpe, exp) ? NULL : p;
}

/* Record that the container opened at nesting `depth` is an object (1) or
 * an array (0). A byte's first bit assigns it, so no bit is read before it
 * is written and the stack needs no clearing. */
static void push(unsigned char *is_object, size_t depth, int object)
{
    unsigned char bit = (unsigned char)(1u << (depth % 8));
    unsigned char *b = &is_object[depth / 8];
    if (depth % 8 == 0)
        *b = object ? bit : 0;
    else if (object)
        *b |= bit;
    else
        *b &= (unsigned char)~bit;
}

int ks_json_valid(const void *data, size_t len)
{
    if (!data)
        return 0;
    cptr p = data;
    cptr end = p + len;
    unsigned char is_object[MAX_DEPTH / 8]; /* bit per open container */
    size_t depth = 0;                       /* open containers */

value: /* a value is expected; whitespace may come first */
    p = skip_ws(p, end);
    if (p == end || depth >= MAX_DEPTH) /* the value would be nested too deep */
        return 0;
    switch (*p) {
    case '{':
        p = skip_ws(p + 1, end);
        if (p < end && *p == '}') {
            p++;
            goto after_value;
        }
        push(is_object, depth++, 1);
        goto key;
    case '[':
        p = skip_ws(p + 1, end);
        if (p < end && *p == ']') {
            p++;
            goto after_value;
        }
        push(is_object, depth++, 0);
        goto value;
    case '"':
        p = scan_string(p + 1, end);
        if (!p)
            return 0;
        goto after_value;
    case 't':
        if (end - p < 4 || memcmp(p, "true", 4) != 0)
            return 0;
        p += 4;
        goto after_lookahead;
    case 'f':
        if (end - p < 5 || memcmp(p, "false", 5) != 0)
            return 0;
        p += 5;
        goto after_lookahead;
    case 'n':
        if (end - p < 4 || memcmp(p, "null", 4) != 0)
            return 0;
        p += 4;
        goto after_lookahead;
    default:
        p = scan_number(p, end); /* also rejects any other byte */
        if (!p)
            return 0;
        goto after_lookahead;
    }

key: /* inside an object, after '{' or ',' and whitespace: "key" : */
    if (p == end || *p != '"')
        return 0;
    p = scan_string(p + 1, end);
    if (!p)
        return 0;
    p = skip_ws(p, end);
    if (p == end || *p != ':')
        return 0;
    p++;
    goto value;

after_lookahead:
    /* jansson read one byte past a number or literal and pushed it back;
     * a NUL byte pushed back is lost (stream_get takes buffer[pos] == 0 as
     * "empty" and reads on), so one NUL here is skipped */
    if (p < end && *p == '\0')
        p++;

after_value:
    p = skip_ws(p, end);
    if (depth == 0)
        return p == end;
    if (p == end)
        return 0;
    if (is_object[(depth - 1) / 8] & (1u << ((depth - 1) % 8))) {
        if (*p == ',') {
            p = skip_ws(p + 1, end);
            goto key;
        }
        if (*p != '}')
            return 0;
    } else {
        if (*p == ',') {
            p++;
            goto value;
        }
        if (*p != ']')
            return 0;
    }
    p++;
    depth--;
    goto after_value;
}
