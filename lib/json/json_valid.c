/*
 * json_valid.c - a non-allocating JSON validator (json_valid.h). One pass,
 * iterative: the open containers are a bit stack (object or array) of
 * KS_JSON_MAX_DEPTH bits. A refusal names what was wrong and the byte
 * where it was found.
 */
#include "json/json_valid.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define MAX_DEPTH KS_JSON_MAX_DEPTH

typedef const unsigned char *cptr;

/* Where a refusal was found: set once, by fail(). */
typedef struct jfail {
    const char *why;
    cptr at;
} jfail;

static cptr fail(jfail *f, const char *why, cptr at)
{
    f->why = why;
    f->at = at;
    return NULL;
}

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
 * (past the closing quote), or NULL (f says why). */
static cptr scan_string(cptr p, cptr end, jfail *f)
{
    for (;;) {
        while (p < end && !string_stop(*p))
            p++;
        if (p == end)
            return fail(f, "unterminated string", p);
        unsigned c = *p;
        if (c == '"')
            return p + 1;
        if (c < 0x20)
            return fail(f, "control character in a string (escape it)", p);
        if (c == '\\') {
            cptr esc = p;
            if (++p == end)
                return fail(f, "unterminated string", p);
            switch (*p++) {
            case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
                continue;
            case 'u': {
                long u = hex4(p, end);
                if (u < 0)
                    return fail(f, "\\u needs 4 hex digits", esc);
                p += 4;
                if (u >= 0xDC00 && u <= 0xDFFF)
                    return fail(f, "lone low surrogate in a \\u escape", esc);
                if (u >= 0xD800 && u <= 0xDBFF) { /* needs \u + low surrogate */
                    if (end - p < 2 || p[0] != '\\' || p[1] != 'u')
                        return fail(f, "high surrogate not followed by a \\u low surrogate",
                                    esc);
                    long lo = hex4(p + 2, end);
                    if (lo < 0xDC00 || lo > 0xDFFF)
                        return fail(f, "high surrogate not followed by a \\u low surrogate",
                                    esc);
                    p += 6;
                }
                continue;
            }
            default:
                return fail(f, "invalid escape in a string", esc);
            }
        }
        /* UTF-8: no overlongs, no surrogates, nothing above U+10FFFF */
        size_t n = (size_t)(end - p);
        int ok;
        size_t w;
        if (c >= 0xC2 && c <= 0xDF) {
            w = 2;
            ok = n >= 2 && (p[1] & 0xC0) == 0x80;
        } else if (c >= 0xE0 && c <= 0xEF) {
            w = 3;
            ok = n >= 3 && (p[1] & 0xC0) == 0x80 && (p[2] & 0xC0) == 0x80 &&
                 !(c == 0xE0 && p[1] < 0xA0) && /* overlong */
                 !(c == 0xED && p[1] > 0x9F);   /* surrogate */
        } else if (c >= 0xF0 && c <= 0xF4) {
            w = 4;
            ok = n >= 4 && (p[1] & 0xC0) == 0x80 && (p[2] & 0xC0) == 0x80 &&
                 (p[3] & 0xC0) == 0x80 && !(c == 0xF0 && p[1] < 0x90) && /* overlong */
                 !(c == 0xF4 && p[1] > 0x8F);                           /* > U+10FFFF */
        } else { /* continuation byte, C0, C1, F5..FF */
            w = 1;
            ok = 0;
        }
        if (!ok)
            return fail(f, "invalid UTF-8 in a string", p);
        p += w;
    }
}

/* A number at p (a '-' or a digit): its end, or NULL (f says why). Any
 * size of integer, fraction and exponent is accepted (RFC 8259's grammar
 * has no range); what a reader makes of it is the reader's business. */
static cptr scan_number(cptr p, cptr end, jfail *f)
{
    cptr start = p;
    if (*p == '-')
        p++;
    if (p == end || !is_digit(*p))
        return fail(f, *start == '-' ? "invalid number" : "expected a value", start);
    if (*p == '0') {
        p++;
        if (p < end && is_digit(*p))
            return fail(f, "invalid number (leading zero)", start);
    } else {
        while (p < end && is_digit(*p))
            p++;
    }
    if (p < end && *p == '.') {
        p++;
        if (p == end || !is_digit(*p))
            return fail(f, "invalid number (a digit must follow '.')", start);
        while (p < end && is_digit(*p))
            p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        if (p == end || !is_digit(*p))
            return fail(f, "invalid number (a digit must follow the exponent)", start);
        while (p < end && is_digit(*p))
            p++;
    }
    return p;
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

/* The check itself: 1 valid, 0 not (f says why and where). */
static int check(const void *data, size_t len, jfail *f)
{
    if (!data)
        return fail(f, "no text", NULL), 0;
    cptr p = data;
    cptr end = p + len;
    unsigned char is_object[MAX_DEPTH / 8]; /* bit per open container */
    size_t depth = 0;                       /* open containers */

value: /* a value is expected; whitespace may come first */
    p = skip_ws(p, end);
    if (p == end)
        return fail(f, depth ? "unexpected end of text" : len ? "only whitespace" : "empty text",
                    p), 0;
    if (depth >= MAX_DEPTH) /* the value would be nested too deep */
        return fail(f, "nested deeper than " KS_JSON_MAX_DEPTH_TEXT " levels", p), 0;
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
        if (!(p = scan_string(p + 1, end, f)))
            return 0;
        goto after_value;
    case 't':
        if (end - p < 4 || memcmp(p, "true", 4) != 0)
            return fail(f, "invalid literal (true, false or null?)", p), 0;
        p += 4;
        goto after_literal;
    case 'f':
        if (end - p < 5 || memcmp(p, "false", 5) != 0)
            return fail(f, "invalid literal (true, false or null?)", p), 0;
        p += 5;
        goto after_literal;
    case 'n':
        if (end - p < 4 || memcmp(p, "null", 4) != 0)
            return fail(f, "invalid literal (true, false or null?)", p), 0;
        p += 4;
        goto after_literal;
    default:
        if (*p != '-' && !is_digit(*p))
            return fail(f, "expected a value", p), 0;
        if (!(p = scan_number(p, end, f)))
            return 0;
        goto after_literal;
    }

key: /* inside an object, after '{' or ',' and whitespace: "key" : */
    if (p == end)
        return fail(f, "unexpected end of text", p), 0;
    if (*p != '"')
        return fail(f, "expected '\"' starting a member name", p), 0;
    if (!(p = scan_string(p + 1, end, f)))
        return 0;
    p = skip_ws(p, end);
    if (p == end)
        return fail(f, "unexpected end of text", p), 0;
    if (*p != ':')
        return fail(f, "expected ':' after a member name", p), 0;
    p++;
    goto value;

after_literal:
    /* a single NUL byte right after a number or literal is skipped, as
     * jansson 2.14 does (its lexer loses a pushed-back NUL) */
    if (p < end && *p == '\0')
        p++;

after_value:
    p = skip_ws(p, end);
    if (depth == 0)
        return p == end ? 1 : (fail(f, "text after the JSON value", p), 0);
    if (p == end)
        return fail(f, "unexpected end of text", p), 0;
    if (is_object[(depth - 1) / 8] & (1u << ((depth - 1) % 8))) {
        if (*p == ',') {
            p = skip_ws(p + 1, end);
            goto key;
        }
        if (*p != '}')
            return fail(f, "expected ',' or '}'", p), 0;
    } else {
        if (*p == ',') {
            p++;
            goto value;
        }
        if (*p != ']')
            return fail(f, "expected ',' or ']'", p), 0;
    }
    p++;
    depth--;
    goto after_value;
}

int ks_json_valid(const void *data, size_t len)
{
    jfail f;
    return check(data, len, &f);
}

int ks_json_check(const void *data, size_t len, ks_json_error *err)
{
    jfail f = {NULL, NULL};
    if (check(data, len, &f))
        return 0;
    if (err) {
        err->why = f.why;
        err->pos = f.at ? (size_t)(f.at - (cptr)data) : 0;
        snprintf(err->text, sizeof err->text, "%s at byte %zu", f.why, err->pos);
    }
    return -1;
}
