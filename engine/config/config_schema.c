/*
 * config_schema.c - the vocabulary of the schema checks: one-line errors
 * with FILE:LINE:COL, mappings with a fixed set of keys, and the typed
 * readers of values (want_*: strings, integers, booleans, serdes, topics,
 * lists, mappings of scalars, durations, listen addresses, HTTP limits).
 * The messages are part of the interface (config.c says so).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config/config_internal.h"

/* ------------------------------------------------------------------ */
/* Errors                                                              */
/* ------------------------------------------------------------------ */

int ks_cfg_failf(pctx *c, int line, int col, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    if (!c->err || c->errlen == 0)
        return -1;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(c->err, c->errlen, "%s:%d:%d: %s", c->p->file, line, col, msg);
    /* one line, whatever the YAML held */
    for (char *s = c->err; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = '?';
    return -1;
}

ks_mark ks_cfg_mark_of(const pctx *c, const ks_ynode *n)
{
    ks_mark m = {c->p->file, n->line, n->col};
    return m;
}

int ks_cfg_oom(pctx *c, const ks_ynode *at)
{
    if (at)
        return FAIL_AT(c, at, "out of memory");
    return failf(c, 1, 1, "out of memory");
}

/* What a node is, for "found ..." in messages. */
const char *ks_cfg_found(const ks_ynode *v, char *buf, size_t len)
{
    if (v->kind == KS_Y_SEQ)
        return "a list";
    if (v->kind == KS_Y_MAP)
        return "a mapping";
    if (ks_ynode_is_null(v))
        return "nothing";
    if (v->len > 60) {
        int cut = 57; /* not inside a UTF-8 sequence */
        while (cut > 0 && ((unsigned char)v->text[cut] & 0xc0) == 0x80)
            cut--;
        snprintf(buf, len, "'%.*s...'", cut, v->text);
    }
    else
        snprintf(buf, len, "'%s'", v->text);
    return buf;
}

char *ks_cfg_dup_at(pctx *c, const ks_ynode *at, const char *s)
{
    char *d = strdup(s);
    if (!d)
        oom(c, at);
    return d;
}

/* ------------------------------------------------------------------ */
/* Mappings with a fixed set of keys                                   */
/* ------------------------------------------------------------------ */

/* Check that every key of `map` is one of `names` and collect the pairs.
 * `what` names the mapping in messages ("node", "source 'views'"). */
int ks_cfg_take_fields(pctx *c, const ks_ynode *map, const char *what,
                       const char *const *names, size_t n, fields *f)
{
    memset(f, 0, sizeof *f);
    for (size_t i = 0; i < map->count; i++) {
        const ks_ynode *k = map->pairs[i].key;
        size_t j;
        if (k->kind != KS_Y_SCALAR || ks_ynode_is_null(k))
            return FAIL_AT(c, k, "expected a string key in %s", what);
        for (j = 0; j < n; j++)
            if (strcmp(k->text, names[j]) == 0)
                break;
        if (j == n) {
            char list[512];
            size_t off = 0;
            list[0] = '\0';
            for (size_t m = 0; m < n && off < sizeof list; m++)
                off += (size_t)snprintf(list + off, sizeof list - off, "%s%s",
                                        m ? ", " : "", names[m]);
            return FAIL_AT(c, k, "unknown key '%s' in %s; expected one of: %s",
                           k->text, what, list);
        }
        f->key[j] = k;
        f->val[j] = map->pairs[i].value;
    }
    return 0;
}

int ks_cfg_missing(pctx *c, const ks_ynode *map, const char *what,
                   const char *key)
{
    return FAIL_AT(c, map, "%s is missing required key '%s'", what, key);
}

/* ------------------------------------------------------------------ */
/* Values                                                              */
/* ------------------------------------------------------------------ */

/* A non-null scalar or an error naming `kn` (the key). */
int ks_cfg_want_scalar(pctx *c, const ks_ynode *kn, const ks_ynode *v,
                       const char *expected)
{
    char buf[80];
    if (ks_ynode_is_null(v))
        return FAIL_AT(c, kn, "missing value for '%s'", kn->text);
    if (v->kind != KS_Y_SCALAR)
        return FAIL_AT(c, v, "expected %s for '%s', found %s", expected,
                       kn->text, found(v, buf, sizeof buf));
    return 0;
}

int ks_cfg_want_string(pctx *c, const ks_ynode *kn, const ks_ynode *v,
                       char **out)
{
    if (want_scalar(c, kn, v, "a string") != 0)
        return -1;
    if (v->len == 0)
        return FAIL_AT(c, v, "expected a non-empty string for '%s'", kn->text);
    free(*out);
    *out = dup_at(c, v, v->text);
    return *out ? 0 : -1;
}

int ks_cfg_want_int(pctx *c, const ks_ynode *kn, const ks_ynode *v,
                    int64_t lo, int64_t hi, int64_t *out)
{
    const char *s;
    char *end;
    long long x;

    if (want_scalar(c, kn, v, "an integer") != 0)
        return -1;
    s = v->text;
    errno = 0;
    x = strtoll(s, &end, 10);
    if (!((s[0] >= '0' && s[0] <= '9') ||
          ((s[0] == '-' || s[0] == '+') && s[1] >= '0' && s[1] <= '9')) ||
        *end != '\0')
        return FAIL_AT(c, v, "expected an integer for '%s', found '%s'",
                       kn->text, s);
    if (errno == ERANGE || x < lo || x > hi)
        return FAIL_AT(c, v, "'%s' must be between %lld and %lld, found '%s'",
                       kn->text, (long long)lo, (long long)hi, s);
    *out = (int64_t)x;
    return 0;
}

int ks_cfg_want_bool(pctx *c, const ks_ynode *kn, const ks_ynode *v, int *out)
{
    static const char *const yes[] = {"true", "yes", "on"};
    static const char *const no[] = {"false", "no", "off"};
    if (want_scalar(c, kn, v, "true or false") != 0)
        return -1;
    for (size_t i = 0; i < 3; i++) {
        if (strcasecmp(v->text, yes[i]) == 0) {
            *out = 1;
            return 0;
        }
        if (strcasecmp(v->text, no[i]) == 0) {
            *out = 0;
            return 0;
        }
    }
    return FAIL_AT(c, v, "expected true or false for '%s', found '%s'",
                   kn->text, v->text);
}

int ks_cfg_want_serde(pctx *c, const ks_ynode *kn, const ks_ynode *v,
                      ks_serde *out)
{
    static const ks_serde all[] = {KS_SERDE_BYTES, KS_SERDE_STRING,
                                   KS_SERDE_JSON, KS_SERDE_INT64};
    if (want_scalar(c, kn, v, "a serde") != 0)
        return -1;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (strcmp(v->text, ks_serde_name(all[i])) == 0) {
            *out = all[i];
            return 0;
        }
    }
    return FAIL_AT(c, v,
                   "unknown serde '%s' for '%s'; expected bytes, string, json "
                   "or int64",
                   v->text, kn->text);
}

int ks_cfg_want_topic(pctx *c, const ks_ynode *kn, const ks_ynode *v,
                      char **out)
{
    if (want_string(c, kn, v, out) != 0)
        return -1;
    if (!is_topic(*out))
        return FAIL_AT(c, v,
                       "invalid topic name '%s'; expected [A-Za-z0-9._-]+, at "
                       "most 249 characters",
                       *out);
    return 0;
}

/* A node of `kind` (`what` words it: "a mapping", "a list"), or (null_ok)
 * nothing. Returns 1 for a null value, 0, or -1 with the error. */
static int want_kind(pctx *c, const ks_ynode *kn, const ks_ynode *v, int null_ok,
                     ks_ykind kind, const char *what)
{
    char buf[80];
    if (ks_ynode_is_null(v)) {
        if (null_ok)
            return 1;
        return FAIL_AT(c, kn, "missing value for '%s'", kn->text);
    }
    if (v->kind != kind)
        return FAIL_AT(c, v, "expected %s for '%s', found %s", what, kn->text,
                       found(v, buf, sizeof buf));
    return 0;
}

/* A mapping, or (null_ok) nothing. Returns 1 for a null value. */
int ks_cfg_want_map(pctx *c, const ks_ynode *kn, const ks_ynode *v,
                    int null_ok)
{
    return want_kind(c, kn, v, null_ok, KS_Y_MAP, "a mapping");
}

/* A list, or (null_ok) nothing. Returns 1 for a null value. */
int ks_cfg_want_seq(pctx *c, const ks_ynode *kn, const ks_ynode *v,
                    int null_ok)
{
    return want_kind(c, kn, v, null_ok, KS_Y_SEQ, "a list");
}

/*
 * A list of non-empty strings, or one string (taken as a one-item list).
 * Null gives an empty list. `expected` words the message: "a list of
 * strings", "a name or a list of names".
 */
int ks_cfg_want_strings(pctx *c, const ks_ynode *kn, const ks_ynode *v,
                        const char *expected, char ***out, ks_mark **marks,
                        size_t *count)
{
    const ks_ynode *one[1];
    const ks_ynode *const *items;
    size_t n;
    char buf[80];

    if (ks_ynode_is_null(v)) {
        n = 0;
        items = NULL;
    } else if (v->kind == KS_Y_SCALAR) {
        one[0] = v;
        items = one;
        n = 1;
    } else if (v->kind == KS_Y_SEQ) {
        items = (const ks_ynode *const *)v->items;
        n = v->count;
    } else {
        return FAIL_AT(c, v, "expected %s for '%s', found %s", expected,
                       kn->text, found(v, buf, sizeof buf));
    }
    for (size_t i = 0; i < n; i++) {
        const ks_ynode *it = items[i];
        if (it->kind != KS_Y_SCALAR || ks_ynode_is_null(it) || it->len == 0)
            return FAIL_AT(c, it, "expected %s for '%s', found %s", expected,
                           kn->text,
                           it->len == 0 && it->kind == KS_Y_SCALAR
                               ? "an empty string"
                               : found(it, buf, sizeof buf));
    }
    *out = calloc(n ? n : 1, sizeof **out);
    if (marks)
        *marks = calloc(n ? n : 1, sizeof **marks);
    if (!*out || (marks && !*marks))
        return oom(c, v);
    *count = n;
    for (size_t i = 0; i < n; i++) {
        (*out)[i] = dup_at(c, items[i], items[i]->text);
        if (!(*out)[i])
            return -1;
        if (marks)
            (*marks)[i] = mark_of(c, items[i]);
    }
    return 0;
}

/* ks_yjson_at_fn: keep where a part of a nested config value was written. */
typedef struct inner_arg {
    ks_cfg_scalar *s;
    const char *file;
} inner_arg;

static int add_inner(void *arg, const char *path, int line, int col)
{
    inner_arg *a = arg;
    ks_cfg_scalar *s = a->s;
    ks_cfg_inner *grown = realloc(s->inner, (s->inner_count + 1) * sizeof *grown);
    if (!grown)
        return -1;
    s->inner = grown;
    char *p = strdup(path);
    if (!p)
        return -1;
    s->inner[s->inner_count++] = (ks_cfg_inner){p, {a->file, line, col}};
    return 0;
}

/* A mapping of scalars (config:, window:, properties:). Null = empty.
 * With `nested`, a value may be a mapping or list: kept as its JSON text
 * (yaml_tree.h) for processors that read structured config. */
int ks_cfg_want_scalars(pctx *c, const ks_ynode *kn, const ks_ynode *v,
                        ks_cfg_scalars *out, int nested)
{
    char buf[80];
    int r = want_map(c, kn, v, 1);
    if (r < 0)
        return -1;
    if (r == 1)
        return 0;
    for (size_t i = 0; i < v->count; i++) {
        const ks_ynode *k = v->pairs[i].key, *x = v->pairs[i].value;
        if (k->kind != KS_Y_SCALAR || ks_ynode_is_null(k))
            return FAIL_AT(c, k, "expected a string key in '%s'", kn->text);
        if (x->kind != KS_Y_SCALAR && !nested)
            return FAIL_AT(c, x,
                           "expected a scalar for '%s' in '%s', found %s "
                           "(nested values are not allowed)",
                           k->text, kn->text, found(x, buf, sizeof buf));
    }
    out->items = calloc(v->count ? v->count : 1, sizeof *out->items);
    if (!out->items)
        return oom(c, v);
    out->count = v->count;
    for (size_t i = 0; i < v->count; i++) {
        const ks_ynode *k = v->pairs[i].key, *x = v->pairs[i].value;
        ks_cfg_scalar *s = &out->items[i];
        s->key = dup_at(c, k, k->text);
        if (!s->key)
            return -1;
        if (x->kind != KS_Y_SCALAR) {
            const ks_ynode *bad = x;
            char why[200];
            inner_arg ia = {s, c->p->file};
            if (ks_ynode_json(x, &s->value, &bad, why, sizeof why, add_inner, &ia) != 0)
                return FAIL_AT(c, bad, "in '%s' of '%s': %s", k->text, kn->text, why);
            s->nested = x->kind == KS_Y_MAP ? "a mapping" : "a list";
        } else {
            s->value = dup_at(c, x, x->text);
        }
        if (!s->value)
            return -1;
        s->key_mark = mark_of(c, k);
        s->mark = mark_of(c, x);
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* Durations, listen addresses, HTTP limits                            */
/* ------------------------------------------------------------------ */

int ks_cfg_want_duration(pctx *c, const ks_ynode *kn, const ks_ynode *v, int64_t *ms)
{
    char buf[80];
    if (want_scalar(c, kn, v, "a duration (e.g. 30s)") != 0)
        return -1;
    if (ks_parse_duration_ms(v->text, ms) != 0 || *ms <= 0)
        return FAIL_AT(c, v, "expected a duration greater than 0 (e.g. 30s) for '%s', "
                             "found %s",
                       kn->text, found(v, buf, sizeof buf));
    return 0;
}

/* A listen address as the server will bind it (ks_parse_listen): one that
 * `check` accepts and `run` cannot bind would defeat `check`. */
int ks_cfg_want_listen(pctx *c, const ks_ynode *kn, const ks_ynode *v, char **out)
{
    unsigned char a[4];
    uint16_t port;
    if (want_string(c, kn, v, out) != 0)
        return -1;
    if (!is_host_port(*out))
        return FAIL_AT(c, v, "invalid address '%s' for '%s'; expected host:port", *out,
                       kn->text);
    if (ks_parse_listen(*out, a, &port) != 0)
        return FAIL_AT(c, v,
                       "invalid address '%s' for '%s'; expected an IPv4 address or "
                       "localhost, and a port (e.g. 127.0.0.1:9400)",
                       *out, kn->text);
    return 0;
}

/* The limits keys shared by `outbox:` and `metrics:`, any of them NULL. */
int ks_cfg_want_limits(pctx *c, const ks_ynode *const kn[3], const ks_ynode *const v[3],
                       ks_cfg_http_limits *l)
{
    if (v[0] && want_int(c, kn[0], v[0], 1, KS_HTTP_MAX_CONNECTIONS_LIMIT,
                         &l->max_connections) != 0)
        return -1;
    if (v[1]) {
        if (want_duration(c, kn[1], v[1], &l->idle_timeout_ms) != 0)
            return -1;
        if (l->idle_timeout_ms < 1000 || l->idle_timeout_ms > 3600 * 1000)
            return FAIL_AT(c, v[1], "'%s' must be between 1s and 1h, found '%s'",
                           kn[1]->text, v[1]->text);
    }
    if (v[2]) {
        if (want_duration(c, kn[2], v[2], &l->connection_deadline_ms) != 0)
            return -1;
        if (l->connection_deadline_ms < 100 || l->connection_deadline_ms > 86400 * 1000)
            return FAIL_AT(c, v[2], "'%s' must be between 100ms and 1d, found '%s'",
                           kn[2]->text, v[2]->text);
    }
    return 0;
}
