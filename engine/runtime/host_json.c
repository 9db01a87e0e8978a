/*
 * host_json.c - the host API's JSON calls (host_json.h, kstreams.h 1.3).
 */
#include "runtime/host_json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json/json_ptr.h"
#include "runtime/task.h"

struct ks_json_writer {
    char *buf;
    size_t len, cap;
    int members; /* written so far: a comma before the next */
    int finished;
};

static int api_json_find(const void *json, size_t len, const char *pointer, ks_json_span *out)
{
    if (!json || !pointer || !out)
        return KS_JSON_BAD_POINTER;
    return ks_json_find(json, len, pointer, strlen(pointer), out);
}

static int api_json_string(const ks_json_span *s, char *out, size_t cap, size_t *len)
{
    if (!s || !len || (!out && cap))
        return KS_JSON_BAD_TEXT;
    return ks_json_string(s, out, cap, len);
}

static int api_json_int64(const ks_json_span *s, int64_t *out)
{
    return s && out ? ks_json_int64(s, out) : KS_JSON_BAD_TEXT;
}

static int api_json_double(const ks_json_span *s, double *out)
{
    return s && out ? ks_json_double(s, out) : KS_JSON_BAD_TEXT;
}

static int api_json_iter_init(ks_json_iter *it, const ks_json_span *in)
{
    return it && in ? ks_json_iter_init(it, in) : KS_JSON_BAD_TEXT;
}

static int api_json_iter_next(ks_json_iter *it, ks_json_span *key, ks_json_span *val)
{
    return it && val ? ks_json_iter_next(it, key, val) : KS_JSON_BAD_TEXT;
}

/* ---- the writer ---------------------------------------------------------- */

static int grow(ks_json_writer *w, size_t more)
{
    if (w->len + more <= w->cap)
        return 0;
    size_t cap = w->cap ? w->cap : 256;
    while (cap < w->len + more)
        cap *= 2;
    char *b = realloc(w->buf, cap);
    if (!b)
        return KS_ERR_NOMEM;
    w->buf = b;
    w->cap = cap;
    return 0;
}

static int append(ks_json_writer *w, const char *s, size_t n)
{
    if (grow(w, n) != 0)
        return KS_ERR_NOMEM;
    memcpy(w->buf + w->len, s, n);
    w->len += n;
    return 0;
}

/* A JSON string of `n` bytes: '"' and '\' escaped, control bytes as
 * \u00XX; other bytes (UTF-8) as they are. */
static int append_string(ks_json_writer *w, const char *s, size_t n)
{
    if (grow(w, n * 6 + 2) != 0)
        return KS_ERR_NOMEM;
    char *o = w->buf + w->len;
    *o++ = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            *o++ = '\\';
            *o++ = (char)c;
        } else if (c < 0x20) {
            o += sprintf(o, "\\u%04x", c);
        } else {
            *o++ = (char)c;
        }
    }
    *o++ = '"';
    w->len = (size_t)(o - w->buf);
    return 0;
}

/* ,"name": */
static int member(ks_json_writer *w, const char *name)
{
    if (!w || w->finished || !name)
        return KS_ERR_INVALID;
    int rc = (w->members++ ? append(w, ",", 1) : 0);
    if (!rc)
        rc = append_string(w, name, strlen(name));
    return rc ? rc : append(w, ":", 1);
}

static ks_json_writer *api_json_writer(ks_ctx *ctx)
{
    if (!ctx || ctx->magic != KS_CTX_MAGIC)
        return NULL;
    if (!ctx->json && !(ctx->json = calloc(1, sizeof *ctx->json)))
        return NULL;
    ks_json_writer *w = ctx->json;
    w->len = 0;
    w->members = 0;
    w->finished = 0;
    return append(w, "{", 1) == 0 ? w : NULL;
}

static int api_json_put_string(ks_json_writer *w, const char *name, const char *s, size_t len)
{
    if (!s && len)
        return KS_ERR_INVALID;
    int rc = member(w, name);
    return rc ? rc : append_string(w, s ? s : "", len);
}

static int api_json_put_int64(ks_json_writer *w, const char *name, int64_t v)
{
    char num[32];
    int n = snprintf(num, sizeof num, "%lld", (long long)v);
    int rc = member(w, name);
    return rc ? rc : append(w, num, (size_t)n);
}

static int api_json_put_double(ks_json_writer *w, const char *name, double v)
{
    if (!isfinite(v))
        return KS_ERR_INVALID; /* JSON has no NaN or infinity */
    char num[40];
    int n = snprintf(num, sizeof num, "%.17g", v);
    int rc = member(w, name);
    return rc ? rc : append(w, num, (size_t)n);
}

static int api_json_put_bool(ks_json_writer *w, const char *name, int v)
{
    int rc = member(w, name);
    return rc ? rc : (v ? append(w, "true", 4) : append(w, "false", 5));
}

static int api_json_put_null(ks_json_writer *w, const char *name)
{
    int rc = member(w, name);
    return rc ? rc : append(w, "null", 4);
}

static int api_json_put_raw(ks_json_writer *w, const char *name, const ks_json_span *v)
{
    if (!v || !v->data || !v->len)
        return KS_ERR_INVALID;
    int rc = member(w, name);
    return rc ? rc : append(w, v->data, v->len);
}

static int api_json_finish(ks_json_writer *w, const void **json, size_t *len)
{
    if (!w || w->finished || !json || !len)
        return KS_ERR_INVALID;
    int rc = append(w, "}", 1);
    if (rc)
        return rc;
    w->finished = 1;
    *json = w->buf;
    *len = w->len;
    return 0;
}

void ks_json_writer_free(struct ks_json_writer *w)
{
    if (w)
        free(w->buf);
    free(w);
}

void ks_host_json_fill(ks_host_api *api)
{
    api->json_find = api_json_find;
    api->json_string = api_json_string;
    api->json_int64 = api_json_int64;
    api->json_double = api_json_double;
    api->json_iter_init = api_json_iter_init;
    api->json_iter_next = api_json_iter_next;
    api->json_writer = api_json_writer;
    api->json_put_string = api_json_put_string;
    api->json_put_int64 = api_json_put_int64;
    api->json_put_double = api_json_put_double;
    api->json_put_bool = api_json_put_bool;
    api->json_put_null = api_json_put_null;
    api->json_put_raw = api_json_put_raw;
    api->json_finish = api_json_finish;
}
