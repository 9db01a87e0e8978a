/*
 * json_ptr.c - in-place JSON reading by RFC 6901 pointer (json_ptr.h).
 * Values are skipped with a bracket counter rather than parsed: valid text
 * (ks_json_valid) needs no more, and on other text every loop is bounded
 * by the end of the buffer.
 */
#include "json/json_ptr.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef const unsigned char *cptr;

static cptr skip_ws(cptr p, cptr end)
{
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    return p;
}

/* Past the closing quote of the string whose opening quote is at p, or
 * NULL when it does not close. */
static cptr skip_string(cptr p, cptr end)
{
    for (p++; p < end; p++) {
        if (*p == '\\') {
            if (++p == end)
                return NULL;
        } else if (*p == '"') {
            return p + 1;
        }
    }
    return NULL;
}

/* The end of the value starting at p, its type in *type; NULL when the
 * text ends first or p starts no value. */
static cptr skip_value(cptr p, cptr end, ks_json_type *type)
{
    if (p >= end)
        return NULL;
    switch (*p) {
    case '"':
        *type = KS_JSON_STRING;
        return skip_string(p, end);
    case '{':
    case '[': {
        *type = *p == '{' ? KS_JSON_OBJECT : KS_JSON_ARRAY;
        size_t depth = 0;
        while (p < end) {
            unsigned c = *p;
            if (c == '"') {
                p = skip_string(p, end);
                if (!p)
                    return NULL;
                continue;
            }
            if (c == '{' || c == '[')
                depth++;
            else if ((c == '}' || c == ']') && --depth == 0)
                return p + 1;
            p++;
        }
        return NULL;
    }
    case 't':
    case 'f':
    case 'n':
        *type = *p == 'n' ? KS_JSON_NULL : KS_JSON_BOOL;
        break;
    default:
        if (*p != '-' && (unsigned)(*p - '0') >= 10)
            return NULL;
        *type = KS_JSON_NUMBER;
    }
    /* a scalar: up to a delimiter (a NUL after it is jansson's slack) */
    while (p < end && *p != ',' && *p != ']' && *p != '}' && *p != ' ' && *p != '\n' &&
           *p != '\r' && *p != '\t' && *p != '\0')
        p++;
    return p;
}

int ks_json_root(const char *doc, size_t len, ks_json_span *out)
{
    if (!doc)
        return KS_JSON_BAD_TEXT;
    cptr end = (cptr)doc + len;
    cptr p = skip_ws((cptr)doc, end);
    ks_json_type t;
    cptr e = skip_value(p, end, &t);
    if (!e)
        return KS_JSON_BAD_TEXT;
    *out = (ks_json_span){(const char *)p, (size_t)(e - p), t};
    return KS_JSON_FOUND;
}

int ks_json_iter_init(ks_json_iter *it, const ks_json_span *in)
{
    if (!in || in->len < 2 || (in->type != KS_JSON_OBJECT && in->type != KS_JSON_ARRAY))
        return KS_JSON_BAD_TEXT;
    it->p = in->data + 1;
    it->end = in->data + in->len - 1; /* the closing bracket */
    it->object = in->type == KS_JSON_OBJECT;
    it->first = 1;
    return KS_JSON_FOUND;
}

int ks_json_iter_next(ks_json_iter *it, ks_json_span *key, ks_json_span *val)
{
    cptr end = (cptr)it->end;
    cptr p = skip_ws((cptr)it->p, end);
    if (p == end)
        return 0;
    if (!it->first) {
        if (*p != ',')
            return KS_JSON_BAD_TEXT;
        p = skip_ws(p + 1, end);
    }
    it->first = 0;
    ks_json_type t;
    if (it->object) {
        if (p == end || *p != '"')
            return KS_JSON_BAD_TEXT;
        cptr ke = skip_string(p, end);
        if (!ke)
            return KS_JSON_BAD_TEXT;
        if (key)
            *key = (ks_json_span){(const char *)p, (size_t)(ke - p), KS_JSON_STRING};
        p = skip_ws(ke, end);
        if (p == end || *p != ':')
            return KS_JSON_BAD_TEXT;
        p = skip_ws(p + 1, end);
    }
    cptr e = skip_value(p, end, &t);
    if (!e)
        return KS_JSON_BAD_TEXT;
    *val = (ks_json_span){(const char *)p, (size_t)(e - p), t};
    it->p = (const char *)e;
    return 1;
}

/* ---- strings ------------------------------------------------------------ */

static int hexval(unsigned c)
{
    if (c - '0' < 10)
        return (int)(c - '0');
    if ((c | 0x20) - 'a' < 6)
        return (int)((c | 0x20) - 'a' + 10);
    return -1;
}

static long hex4(cptr p, cptr end)
{
    if (end - p < 4)
        return -1;
    long v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(p[i]);
        if (h < 0)
            return -1;
        v = v * 16 + h;
    }
    return v;
}

/* A decoder over a string's body: yields its UTF-8 bytes one by one. */
typedef struct sdec {
    cptr p, end;           /* end: the closing quote */
    unsigned char pend[4]; /* bytes of a decoded \u escape not yet yielded */
    int npend, ipend;
} sdec;

static int sdec_init(sdec *d, const ks_json_span *s)
{
    if (!s || s->len < 2 || s->data[0] != '"' || s->data[s->len - 1] != '"')
        return -1;
    d->p = (cptr)s->data + 1;
    d->end = (cptr)s->data + s->len - 1;
    d->npend = d->ipend = 0;
    return 0;
}

static int utf8_put(unsigned char *o, unsigned long cp)
{
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* The \u escape at d->p (just past the 'u') into d->pend; -1 when bad. */
static int sdec_unicode(sdec *d)
{
    long u = hex4(d->p, d->end);
    if (u < 0)
        return -1;
    d->p += 4;
    unsigned long cp = (unsigned long)u;
    if (u >= 0xD800 && u <= 0xDBFF) {
        long lo = d->end - d->p >= 6 && d->p[0] == '\\' && d->p[1] == 'u'
                      ? hex4(d->p + 2, d->end) : -1;
        if (lo < 0xDC00 || lo > 0xDFFF)
            return -1;
        d->p += 6;
        cp = 0x10000 + (((unsigned long)u - 0xD800) << 10) + ((unsigned long)lo - 0xDC00);
    } else if (u >= 0xDC00 && u <= 0xDFFF) {
        return -1;
    }
    d->npend = utf8_put(d->pend, cp);
    d->ipend = 0;
    return 0;
}

/* The next decoded byte, or -1 at the end, or -2 for a bad escape. */
static int sdec_next(sdec *d)
{
    if (d->ipend < d->npend)
        return d->pend[d->ipend++];
    if (d->p >= d->end)
        return -1;
    unsigned c = *d->p++;
    if (c != '\\')
        return (int)c;
    if (d->p >= d->end)
        return -2;
    switch (*d->p++) {
    case '"': return '"';
    case '\\': return '\\';
    case '/': return '/';
    case 'b': return '\b';
    case 'f': return '\f';
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case 'u':
        if (sdec_unicode(d) != 0)
            return -2;
        return d->pend[d->ipend++];
    default:
        return -2;
    }
}

int ks_json_string(const ks_json_span *s, char *out, size_t cap, size_t *len)
{
    sdec d;
    if (sdec_init(&d, s) != 0)
        return KS_JSON_BAD_TEXT;
    size_t n = 0;
    /* fast path: no escapes, the body is the string */
    if (!memchr(d.p, '\\', (size_t)(d.end - d.p))) {
        n = (size_t)(d.end - d.p);
        if (out)
            memcpy(out, d.p, n < cap ? n : cap);
        *len = n;
        return 0;
    }
    int c;
    while ((c = sdec_next(&d)) >= 0) {
        if (n < cap)
            out[n] = (char)c;
        n++;
    }
    *len = n;
    return c == -1 ? 0 : KS_JSON_BAD_TEXT;
}

int ks_json_string_eq(const ks_json_span *s, const char *lit, size_t n)
{
    sdec d;
    if (sdec_init(&d, s) != 0)
        return 0;
    const unsigned char *l = (const unsigned char *)lit;
    for (size_t i = 0; i < n; i++)
        if (sdec_next(&d) != l[i])
            return 0;
    return sdec_next(&d) == -1;
}

/* ---- pointers ------------------------------------------------------------ */

/* A pointer token [p, end) decoded (~0 ~1) against a member name: 1 when
 * equal. The token was checked for bad '~' already. */
static int token_eq_key(cptr p, cptr end, const ks_json_span *key)
{
    sdec d;
    if (sdec_init(&d, key) != 0)
        return 0;
    while (p < end) {
        int want = *p++;
        if (want == '~')
            want = *p++ == '0' ? '~' : '/';
        if (sdec_next(&d) != want)
            return 0;
    }
    return sdec_next(&d) == -1;
}

/* The array index of token [p, end), or -1 when it is not one. */
static long long token_index(cptr p, cptr end)
{
    if (p == end || (*p == '0' && end - p > 1) || end - p > 18)
        return -1;
    long long v = 0;
    for (; p < end; p++) {
        if ((unsigned)(*p - '0') >= 10)
            return -1;
        v = v * 10 + (*p - '0');
    }
    return v;
}

static int check_pointer(cptr p, cptr end)
{
    if (p < end && *p != '/')
        return -1;
    for (; p < end; p++)
        if (*p == '~' && (p + 1 == end || (p[1] != '0' && p[1] != '1')))
            return -1;
    return 0;
}

/* Step from the container `cur` into the member or element named by the
 * token [t, te). */
static int step(ks_json_span *cur, cptr t, cptr te)
{
    ks_json_iter it;
    ks_json_span k, v;
    int rc;
    if (cur->type != KS_JSON_OBJECT && cur->type != KS_JSON_ARRAY)
        return KS_JSON_MISSING;
    if (ks_json_iter_init(&it, cur) != 0)
        return KS_JSON_BAD_TEXT;
    if (cur->type == KS_JSON_OBJECT) {
        while ((rc = ks_json_iter_next(&it, &k, &v)) == 1)
            if (token_eq_key(t, te, &k)) {
                *cur = v;
                return KS_JSON_FOUND;
            }
        return rc == 0 ? KS_JSON_MISSING : rc;
    }
    long long want = token_index(t, te);
    if (want < 0)
        return KS_JSON_MISSING;
    for (long long i = 0; (rc = ks_json_iter_next(&it, NULL, &v)) == 1; i++)
        if (i == want) {
            *cur = v;
            return KS_JSON_FOUND;
        }
    return rc == 0 ? KS_JSON_MISSING : rc;
}

int ks_json_at(const ks_json_span *in, const char *ptr, size_t ptr_len, ks_json_span *out)
{
    if (!in || (!ptr && ptr_len))
        return KS_JSON_BAD_POINTER;
    cptr p = (cptr)(ptr ? ptr : ""), end = p + ptr_len;
    if (check_pointer(p, end) != 0)
        return KS_JSON_BAD_POINTER;
    ks_json_span cur = *in;
    while (p < end) {
        cptr t = p + 1, te = t;
        while (te < end && *te != '/')
            te++;
        int rc = step(&cur, t, te);
        if (rc != KS_JSON_FOUND)
            return rc;
        p = te;
    }
    *out = cur;
    return KS_JSON_FOUND;
}

int ks_json_find(const char *doc, size_t len, const char *ptr, size_t ptr_len,
                 ks_json_span *out)
{
    ks_json_span root;
    if (!ptr && ptr_len)
        return KS_JSON_BAD_POINTER;
    if (!ptr)
        ptr = "";
    if (check_pointer((cptr)ptr, (cptr)ptr + ptr_len) != 0)
        return KS_JSON_BAD_POINTER;
    int rc = ks_json_root(doc, len, &root);
    return rc != KS_JSON_FOUND ? rc : ks_json_at(&root, ptr, ptr_len, out);
}

/* ---- numbers ------------------------------------------------------------- */

/* 1 when [p, end) is a JSON number; *integer: no fraction or exponent. */
static int number_syntax(cptr p, cptr end, int *integer)
{
    *integer = 1;
    if (p < end && *p == '-')
        p++;
    if (p == end || (unsigned)(*p - '0') >= 10)
        return 0;
    if (*p == '0')
        p++;
    else
        while (p < end && (unsigned)(*p - '0') < 10)
            p++;
    if (p < end && *p == '.') {
        *integer = 0;
        if (++p == end || (unsigned)(*p - '0') >= 10)
            return 0;
        while (p < end && (unsigned)(*p - '0') < 10)
            p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        *integer = 0;
        if (++p < end && (*p == '+' || *p == '-'))
            p++;
        if (p == end || (unsigned)(*p - '0') >= 10)
            return 0;
        while (p < end && (unsigned)(*p - '0') < 10)
            p++;
    }
    return p == end;
}

/* Numbers up to this long are copied whole for strtod. Longer ones are
 * read from their first 40 significant digits (a double holds 17; the
 * rest can only matter for a tie) and their exponent. */
#define NUM_BUF 512
#define LONG_DIGITS 40

static double long_number(const char *d, size_t n)
{
    const char *p = d, *end = d + n;
    int neg = *p == '-';
    p += neg;
    char digits[LONG_DIGITS];
    size_t nd = 0;
    long long exp10 = 0; /* the value is 0.DIGITS x 10^exp10 */
    int dot = 0, started = 0;
    for (; p < end && *p != 'e' && *p != 'E'; p++) {
        if (*p == '.') {
            dot = 1;
        } else if (!started && *p == '0') {
            exp10 -= dot; /* a leading zero after the point shifts */
        } else {
            started = 1;
            if (nd < LONG_DIGITS)
                digits[nd++] = *p;
            exp10 += !dot;
        }
    }
    if (p < end) { /* the exponent, clamped far beyond any double */
        int eneg = p + 1 < end && p[1] == '-';
        long long e = 0;
        for (p++; p < end; p++)
            if (*p >= '0' && *p <= '9' && e < 1000000000)
                e = e * 10 + (*p - '0');
        exp10 += eneg ? -e : e;
    }
    if (nd == 0)
        return neg ? -0.0 : 0.0;
    if (exp10 > 100000 || exp10 < -100000)
        return exp10 < 0 ? (neg ? -0.0 : 0.0) : (neg ? -HUGE_VAL : HUGE_VAL);
    char buf[LONG_DIGITS + 32];
    snprintf(buf, sizeof buf, "%s0.%.*se%lld", neg ? "-" : "", (int)nd, digits, exp10);
    return strtod(buf, NULL);
}

int ks_json_double(const ks_json_span *s, double *out)
{
    int integer;
    if (!s || !number_syntax((cptr)s->data, (cptr)s->data + s->len, &integer))
        return KS_JSON_BAD_TEXT;
    if (s->len >= NUM_BUF) {
        *out = long_number(s->data, s->len);
        return 0;
    }
    char buf[NUM_BUF];
    memcpy(buf, s->data, s->len);
    buf[s->len] = '\0';
    *out = strtod(buf, NULL);
    return 0;
}

int ks_json_int64(const ks_json_span *s, int64_t *out)
{
    int integer;
    if (!s || !number_syntax((cptr)s->data, (cptr)s->data + s->len, &integer) || !integer ||
        s->len > 20)
        return KS_JSON_BAD_TEXT;
    char buf[24];
    memcpy(buf, s->data, s->len);
    buf[s->len] = '\0';
    errno = 0;
    long long v = strtoll(buf, NULL, 10);
    if (errno == ERANGE)
        return KS_JSON_BAD_TEXT;
    *out = (int64_t)v;
    return 0;
}
