/*
 * ops_map.c - compile and apply ops.map's field list (ops_map.h).
 */
#include "ops/ops_map.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json/json_valid.h"

typedef enum fkind { F_PATH, F_CONST, F_KEY_STRING, F_KEY_JSON, F_KEY_INT64 } fkind;

typedef struct field {
    fkind kind;
    int automatic; /* key: auto; kind set by ks_map_key_serde */
    char *name; /* the output name as JSON text, quotes included */
    size_t name_len;
    char *ptr; /* F_PATH: decoded pointer */
    size_t ptr_len;
    char *json; /* F_CONST: the constant; F_PATH: the default or NULL */
    size_t json_len;
} field;

struct ks_map {
    field *f;
    size_t n;
};

void ks_map_free(ks_map *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n; i++) {
        free(m->f[i].name);
        free(m->f[i].ptr);
        free(m->f[i].json);
    }
    free(m->f);
    free(m);
}

static char *dup_bytes(const char *p, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, p, n);
        d[n] = '\0';
    }
    return d;
}

/* A pointer given as a config string into f->ptr. */
static int set_pointer(field *f, const ks_json_span *v, const char *at, ks_cfg_err *err)
{
    size_t n;
    if (v->type != KS_JSON_STRING || ks_json_string(v, NULL, 0, &n) != 0)
        return ks_cfg_fail(err, at, "expected a JSON pointer string");
    if (!(f->ptr = malloc(n + 1)))
        return ks_cfg_fail(err, at, "out of memory");
    ks_json_string(v, f->ptr, n, &n);
    f->ptr[n] = '\0';
    f->ptr_len = n;
    ks_json_span probe;
    if (ks_json_find("null", 4, f->ptr, n, &probe) == KS_JSON_BAD_POINTER)
        return ks_cfg_fail(err, at, "'%s' is not a JSON pointer: it must be empty (the whole "
                           "value) or start with '/'; for a constant text write "
                           "{ const: \"%s\" }", f->ptr, f->ptr);
    f->kind = F_PATH;
    return 0;
}

/* { path: P, default: V } | { const: V } | { key: string|json } */
static int set_spec(field *f, const ks_json_span *spec, const char *at, ks_cfg_err *err)
{
    ks_json_iter it;
    ks_json_span k, v, path = {0}, dflt = {0}, cnst = {0}, key = {0};
    ks_json_iter_init(&it, spec);
    while (ks_json_iter_next(&it, &k, &v) == 1) {
        ks_json_span *slot = ks_json_string_eq(&k, "path", 4)      ? &path
                             : ks_json_string_eq(&k, "default", 7) ? &dflt
                             : ks_json_string_eq(&k, "const", 5)   ? &cnst
                             : ks_json_string_eq(&k, "key", 3)     ? &key : NULL;
        if (!slot)
            return ks_cfg_fail(err, at, "unknown key %.*s; a field is /pointer, { path, "
                               "default }, { const } or { key: string|json }", (int)k.len, k.data);
        *slot = v;
    }
    int kinds = !!path.data + !!cnst.data + !!key.data;
    if (kinds != 1 || (dflt.data && !path.data))
        return ks_cfg_fail(err, at, "a field has exactly one of path (with an optional "
                                    "default), const or key");
    if (path.data) {
        if (set_pointer(f, &path, at, err) != 0)
            return -1;
        if (dflt.data && !(f->json = dup_bytes(dflt.data, f->json_len = dflt.len)))
            return ks_cfg_fail(err, at, "out of memory");
        return 0;
    }
    if (cnst.data) {
        f->kind = F_CONST;
        if (!(f->json = dup_bytes(cnst.data, f->json_len = cnst.len)))
            return ks_cfg_fail(err, at, "out of memory");
        return 0;
    }
    if (ks_json_string_eq(&key, "string", 6))
        f->kind = F_KEY_STRING;
    else if (ks_json_string_eq(&key, "json", 4))
        f->kind = F_KEY_JSON;
    else if (ks_json_string_eq(&key, "int64", 5))
        f->kind = F_KEY_INT64;
    else if (ks_json_string_eq(&key, "auto", 4)) {
        f->kind = F_KEY_STRING;
        f->automatic = 1;
    } else
        return ks_cfg_fail(err, at, "key: is string (the key as a JSON string), json "
                                    "(the key is JSON text), int64 (8 bytes big-endian, "
                                    "as a number) or auto (by the key's serde)");
    return 0;
}

int ks_map_compile(const char *text, ks_map **out, ks_cfg_err *err)
{
    ks_json_span root, k, v;
    ks_json_iter it;
    *out = NULL;
    if (!ks_json_valid(text, strlen(text)) || ks_json_root(text, strlen(text), &root) != 0 ||
        root.type != KS_JSON_OBJECT)
        return ks_cfg_fail(err, "", "expected a mapping of output field names, found '%s'",
                           text);
    ks_map *m = calloc(1, sizeof *m);
    if (!m)
        return ks_cfg_fail(err, "", "out of memory");
    ks_json_iter_init(&it, &root);
    while (ks_json_iter_next(&it, &k, &v) == 1)
        m->n++;
    m->f = calloc(m->n ? m->n : 1, sizeof *m->f);
    if (!m->f || m->n == 0) {
        const char *why = m->f ? "no fields" : "out of memory";
        ks_map_free(m);
        return ks_cfg_fail(err, "", "%s", why);
    }
    ks_json_iter_init(&it, &root);
    for (size_t i = 0; ks_json_iter_next(&it, &k, &v) == 1; i++) {
        field *f = &m->f[i];
        char at[160];
        if (snprintf(at, sizeof at, "/%.*s", (int)(k.len - 2), k.data + 1) >= (int)sizeof at)
            at[sizeof at - 1] = '\0';
        f->name = dup_bytes(k.data, f->name_len = k.len);
        int rc = !f->name ? ks_cfg_fail(err, at, "out of memory")
                 : v.type == KS_JSON_OBJECT ? set_spec(f, &v, at, err)
                 : set_pointer(f, &v, at, err);
        if (rc != 0) {
            ks_map_free(m);
            return -1;
        }
    }
    *out = m;
    return 0;
}

/* The key as a JSON string into out; 1 when it is not UTF-8 (poison). */
static int add_key_string(ks_scratch *out, const unsigned char *k, size_t n)
{
    size_t start = out->len;
    if (ks_scratch_add(out, "\"", 1) != 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        char esc[8];
        const char *p = esc;
        size_t len = 2;
        if (k[i] == '"' || k[i] == '\\') {
            esc[0] = '\\';
            esc[1] = (char)k[i];
        } else if (k[i] < 0x20) {
            len = (size_t)snprintf(esc, sizeof esc, "\\u%04x", k[i]);
        } else {
            p = (const char *)&k[i];
            len = 1;
        }
        if (ks_scratch_add(out, p, len) != 0)
            return -1;
    }
    if (ks_scratch_add(out, "\"", 1) != 0)
        return -1;
    /* a control character or invalid UTF-8 (or \u0000) is not a JSON string */
    return ks_json_valid(out->data + start, out->len - start) ? 0 : 1;
}

/* The value of field f for doc and key; 0 = added, 2 = omitted, 1 = poison
 * (*why set), -1 = out of memory. */
static int add_field_value(const field *f, const ks_json_span *doc, const void *key,
                           size_t key_len, ks_scratch *out, const char **why)
{
    ks_json_span v;
    switch (f->kind) {
    case F_PATH:
        if (ks_json_at(doc, f->ptr, f->ptr_len, &v) == KS_JSON_FOUND)
            return ks_scratch_add(out, v.data, v.len);
        if (!f->json)
            return 2;
        return ks_scratch_add(out, f->json, f->json_len);
    case F_CONST:
        return ks_scratch_add(out, f->json, f->json_len);
    case F_KEY_STRING: {
        if (!key)
            return ks_scratch_add(out, "null", 4);
        int rc = add_key_string(out, key, key_len);
        if (rc == 1)
            *why = "the key is not UTF-8 text (or holds a NUL), so it is no JSON string";
        return rc;
    }
    case F_KEY_INT64: {
        if (!key)
            return ks_scratch_add(out, "null", 4);
        if (key_len != 8) {
            *why = "the key is not 8 bytes (a map field has key: int64)";
            return 1;
        }
        char num[24];
        int n = snprintf(num, sizeof num, "%lld", (long long)ks_int64_decode(key));
        return ks_scratch_add(out, num, (size_t)n);
    }
    default:
        if (!key)
            return ks_scratch_add(out, "null", 4);
        if (!ks_json_valid(key, key_len)) {
            *why = "the key is not JSON (a map field has key: json)";
            return 1;
        }
        return ks_scratch_add(out, key, key_len);
    }
}

void ks_map_key_serde(ks_map *m, ks_map_key how)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->f[i].automatic)
            m->f[i].kind = how == KS_MAP_KEY_JSON    ? F_KEY_JSON
                           : how == KS_MAP_KEY_INT64 ? F_KEY_INT64
                                                     : F_KEY_STRING;
}

int ks_map_build(const ks_map *m, const ks_json_span *doc, const void *key, size_t key_len,
                 ks_scratch *out, const char **why)
{
    int any = 0;
    *why = NULL;
    out->len = 0;
    if (ks_scratch_add(out, "{", 1) != 0)
        return -1;
    for (size_t i = 0; i < m->n; i++) {
        const field *f = &m->f[i];
        size_t mark = out->len;
        if ((any && ks_scratch_add(out, ",", 1) != 0) ||
            ks_scratch_add(out, f->name, f->name_len) != 0 || ks_scratch_add(out, ":", 1) != 0)
            return -1;
        int rc = add_field_value(f, doc, key, key_len, out, why);
        if (rc < 0)
            return -1;
        if (rc == 1)
            return 0;
        if (rc == 2) {
            out->len = mark; /* omitted: take its name back */
            continue;
        }
        any = 1;
    }
    return ks_scratch_add(out, "}", 1);
}
