/*
 * config.c - the pipeline YAML (parsed by yaml_tree.c) mapped onto
 * ks_pipeline, with every check that needs no plugin.
 *
 * Errors are one line "FILE:LINE:COL: message". The messages are part of
 * the interface (tests and docs/yaml-reference.md quote them): change them
 * only together.
 *
 * Order of checks: the top-level mapping, then each top-level key in the
 * order of TOP_KEYS below (inside a mapping: unknown keys first, then the
 * values in schema order, then missing required keys), then names unique,
 * then references (node inputs, sink inputs), then cycles, then stores
 * named by nodes but not declared (created with defaults), then stores
 * declared but named by no node (an error).
 */
#include "config/config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config/yaml_tree.h"

#ifdef KS_HAVE_POSTGRES
#include <libpq-fe.h>
#endif

#define KS_PRINTF_LIKE(f, a) __attribute__((format(printf, f, a)))

/* ------------------------------------------------------------------ */
/* Small parsers (public)                                              */
/* ------------------------------------------------------------------ */

/* Leading decimal digits of s into *v; returns the count of digits, or -1
 * on overflow. */
static int parse_digits(const char *s, uint64_t *v)
{
    uint64_t x = 0;
    int n = 0;
    while (s[n] >= '0' && s[n] <= '9') {
        unsigned d = (unsigned)(s[n] - '0');
        if (x > (UINT64_MAX - d) / 10)
            return -1;
        x = x * 10 + d;
        n++;
    }
    *v = x;
    return n;
}

int ks_parse_duration_ms(const char *text, int64_t *ms)
{
    static const struct {
        const char *unit;
        uint64_t mult;
    } units[] = {{"", 1},          {"ms", 1},          {"s", 1000},
                 {"m", 60 * 1000}, {"h", 3600 * 1000}, {"d", 86400 * 1000}};
    uint64_t v;
    int n;

    if (!text || !ms)
        return -1;
    n = parse_digits(text, &v);
    if (n <= 0)
        return -1;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(text + n, units[i].unit) != 0)
            continue;
        if (v > (uint64_t)INT64_MAX / units[i].mult)
            return -1;
        *ms = (int64_t)(v * units[i].mult);
        return 0;
    }
    return -1;
}

int ks_parse_size(const char *text, uint64_t *bytes)
{
    static const struct {
        const char *unit;
        uint64_t mult;
    } units[] = {{"", 1},
                 {"B", 1},
                 {"KiB", UINT64_C(1) << 10},
                 {"MiB", UINT64_C(1) << 20},
                 {"GiB", UINT64_C(1) << 30},
                 {"TiB", UINT64_C(1) << 40}};
    uint64_t v;
    int n;

    if (!text || !bytes)
        return -1;
    n = parse_digits(text, &v);
    if (n <= 0)
        return -1;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(text + n, units[i].unit) != 0)
            continue;
        if (v > UINT64_MAX / units[i].mult)
            return -1;
        *bytes = v * units[i].mult;
        return 0;
    }
    return -1;
}

const char *ks_serde_name(ks_serde s)
{
    switch (s) {
    case KS_SERDE_BYTES:
        return "bytes";
    case KS_SERDE_STRING:
        return "string";
    case KS_SERDE_JSON:
        return "json";
    case KS_SERDE_INT64:
        return "int64";
    }
    return "unknown";
}

int ks_parse_listen(const char *text, unsigned char addr[4], uint16_t *port)
{
    if (!text)
        return -1;
    const char *colon = strrchr(text, ':');
    uint64_t p;
    int n;
    if (!colon || colon == text || (size_t)(colon - text) > 63)
        return -1;
    n = parse_digits(colon + 1, &p);
    if (n <= 0 || n > 5 || colon[1 + n] != '\0' || p < 1 || p > 65535)
        return -1;
    char host[64];
    memcpy(host, text, (size_t)(colon - text));
    host[colon - text] = '\0';
    struct in_addr in;
    if (strcmp(host, "localhost") == 0)
        in.s_addr = htonl(INADDR_LOOPBACK);
    else if (inet_pton(AF_INET, host, &in) != 1)
        return -1;
    memcpy(addr, &in.s_addr, 4);
    *port = (uint16_t)p;
    return 0;
}

int ks_listen_is_loopback(const char *text)
{
    unsigned char a[4];
    uint16_t port;
    return ks_parse_listen(text, a, &port) == 0 && a[0] == 127;
}

/* ------------------------------------------------------------------ */
/* Lookups                                                             */
/* ------------------------------------------------------------------ */

const ks_cfg_source *ks_pipeline_source(const ks_pipeline *p, const char *name)
{
    if (!p || !name)
        return NULL;
    for (size_t i = 0; i < p->source_count; i++)
        if (p->sources[i].name && strcmp(p->sources[i].name, name) == 0)
            return &p->sources[i];
    return NULL;
}

const ks_cfg_node *ks_pipeline_node(const ks_pipeline *p, const char *name)
{
    if (!p || !name)
        return NULL;
    for (size_t i = 0; i < p->node_count; i++)
        if (p->nodes[i].name && strcmp(p->nodes[i].name, name) == 0)
            return &p->nodes[i];
    return NULL;
}

const ks_cfg_store *ks_pipeline_store(const ks_pipeline *p, const char *name)
{
    if (!p || !name)
        return NULL;
    for (size_t i = 0; i < p->store_count; i++)
        if (p->stores[i].name && strcmp(p->stores[i].name, name) == 0)
            return &p->stores[i];
    return NULL;
}

/* ------------------------------------------------------------------ */
/* Freeing                                                             */
/* ------------------------------------------------------------------ */

static void free_strv(char **v, size_t n)
{
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static void free_scalars(ks_cfg_scalars *s)
{
    for (size_t i = 0; i < s->count; i++) {
        free(s->items[i].key);
        free(s->items[i].value);
        for (size_t j = 0; j < s->items[i].inner_count; j++)
            free(s->items[i].inner[j].path);
        free(s->items[i].inner);
    }
    free(s->items);
    s->items = NULL;
    s->count = 0;
}

void ks_pipeline_free(ks_pipeline *p)
{
    if (!p)
        return;
    free(p->application);
    free_strv(p->bootstrap, p->bootstrap_count);
    free_scalars(&p->kafka_properties);
    free(p->state_dir);
    free_strv(p->plugins, p->plugin_count);
    free(p->plugin_marks);
    free_strv(p->plugin_path, p->plugin_path_count);
    free(p->dead_letter_topic);
    free(p->metrics_listen);
    free(p->metrics_token);
    for (size_t i = 0; i < p->source_count; i++) {
        free(p->sources[i].name);
        free(p->sources[i].topic);
    }
    free(p->sources);
    for (size_t i = 0; i < p->node_count; i++) {
        ks_cfg_node *n = &p->nodes[i];
        free(n->name);
        free(n->type);
        free(n->plugin);
        free(n->processor);
        free_strv(n->from, n->from_count);
        free(n->from_marks);
        free_strv(n->stores, n->store_count);
        free(n->store_marks);
        free_scalars(&n->config);
        for (size_t f = 0; f < n->function_count; f++) {
            free(n->functions[f].role);
            free(n->functions[f].plugin);
            free(n->functions[f].name);
        }
        free(n->functions);
        free_scalars(&n->window);
        free(n->table);
    }
    free(p->nodes);
    for (size_t i = 0; i < p->sink_count; i++) {
        free(p->sinks[i].name);
        free(p->sinks[i].from);
        free(p->sinks[i].topic);
        free(p->sinks[i].feeds);
    }
    free(p->sinks);
    for (size_t i = 0; i < p->store_count; i++)
        free(p->stores[i].name);
    free(p->stores);
    if (p->outbox) {
        free(p->outbox->name);
        free(p->outbox->topic);
        free(p->outbox->listen);
        free(p->outbox->token);
        free(p->outbox->results_topic);
        free(p->outbox->dsn);
        free(p->outbox->dsn_env);
        free(p->outbox->table);
        free(p->outbox);
    }
    free(p->file);
    free(p);
}

/* ------------------------------------------------------------------ */
/* Errors                                                              */
/* ------------------------------------------------------------------ */

typedef struct pctx {
    ks_pipeline *p;
    char *err;
    size_t errlen;
    size_t store_cap;
} pctx;

static int failf(pctx *c, int line, int col, const char *fmt, ...)
    KS_PRINTF_LIKE(4, 5);

static int failf(pctx *c, int line, int col, const char *fmt, ...)
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

#define FAIL_AT(c, node, ...) failf((c), (node)->line, (node)->col, __VA_ARGS__)
#define FAIL_MARK(c, m, ...) failf((c), (m).line, (m).col, __VA_ARGS__)

static ks_mark mark_of(const pctx *c, const ks_ynode *n)
{
    ks_mark m = {c->p->file, n->line, n->col};
    return m;
}

static int oom(pctx *c, const ks_ynode *at)
{
    if (at)
        return FAIL_AT(c, at, "out of memory");
    return failf(c, 1, 1, "out of memory");
}

/* What a node is, for "found ..." in messages. */
static const char *found(const ks_ynode *v, char *buf, size_t len)
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

static char *dup_at(pctx *c, const ks_ynode *at, const char *s)
{
    char *d = strdup(s);
    if (!d)
        oom(c, at);
    return d;
}

/* ------------------------------------------------------------------ */
/* Names                                                               */
/* ------------------------------------------------------------------ */

static int all_of(const char *s, size_t len, const char *extra, int lower_only)
{
    if (len == 0)
        return 0;
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
                 (!lower_only && ch >= 'A' && ch <= 'Z') ||
                 (ch && strchr(extra, ch));
        if (!ok)
            return 0;
    }
    return 1;
}

/* Names of sources, nodes, sinks, stores: [A-Za-z0-9_-]+ */
static int is_name(const char *s) { return all_of(s, strlen(s), "_-", 0); }

/* application: [A-Za-z0-9._-]+ */
static int is_app(const char *s) { return all_of(s, strlen(s), "._-", 0); }

/* Kafka topic: [A-Za-z0-9._-]{1,249}, not "." or ".." */
static int is_topic(const char *s)
{
    size_t n = strlen(s);
    return n <= 249 && all_of(s, n, "._-", 0) && strcmp(s, ".") != 0 &&
           strcmp(s, "..") != 0;
}

/* host:port, host non-empty ("[v6]" allowed), port 1..65535 */
static int is_host_port(const char *s)
{
    const char *colon = strrchr(s, ':');
    uint64_t port;
    int n;

    if (!colon || colon == s)
        return 0;
    n = parse_digits(colon + 1, &port);
    if (n <= 0 || colon[1 + n] != '\0' || port < 1 || port > 65535)
        return 0;
    for (const char *h = s; h < colon; h++)
        if (*h == ' ' || *h == '\t' || *h == ',' || *h == '/')
            return 0;
    if (s[0] == '[' && colon[-1] != ']')
        return 0;
    if (s[0] != '[' && memchr(s, ':', (size_t)(colon - s)))
        return 0; /* a bare IPv6 address needs brackets */
    return 1;
}

/* Split "plugin<sep>rest" at the first '.' (or ':' when colon_ok) into
 * freshly allocated parts; a text without separator gives plugin = rest =
 * text when single_ok. Returns 0, -1 malformed, -2 out of memory. */
static int split_ref(const char *text, int colon_ok, int single_ok,
                     char **plugin, char **rest)
{
    size_t len = strlen(text);
    size_t sep = strcspn(text, colon_ok ? ".:" : ".");
    size_t rlen;

    *plugin = *rest = NULL;
    if (sep == len) {
        if (!single_ok || !all_of(text, len, "_", 1))
            return -1;
        *plugin = strdup(text);
        *rest = strdup(text);
    } else {
        rlen = len - sep - 1;
        if (!all_of(text, sep, "_", 1) ||
            !all_of(text + sep + 1, rlen, "_-", 0))
            return -1;
        *plugin = strndup(text, sep);
        *rest = strndup(text + sep + 1, rlen);
    }
    if (!*plugin || !*rest) {
        free(*plugin);
        free(*rest);
        *plugin = *rest = NULL;
        return -2;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* Mappings with a fixed set of keys                                   */
/* ------------------------------------------------------------------ */

#define MAX_FIELDS 20

typedef struct fields {
    const ks_ynode *key[MAX_FIELDS];
    const ks_ynode *val[MAX_FIELDS];
} fields;

/* Check that every key of `map` is one of `names` and collect the pairs.
 * `what` names the mapping in messages ("node", "source 'views'"). */
static int take_fields(pctx *c, const ks_ynode *map, const char *what,
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

static int missing(pctx *c, const ks_ynode *map, const char *what,
                   const char *key)
{
    return FAIL_AT(c, map, "%s is missing required key '%s'", what, key);
}

/* ------------------------------------------------------------------ */
/* Values                                                              */
/* ------------------------------------------------------------------ */

/* A non-null scalar or an error naming `kn` (the key). */
static int want_scalar(pctx *c, const ks_ynode *kn, const ks_ynode *v,
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

static int want_string(pctx *c, const ks_ynode *kn, const ks_ynode *v,
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

static int want_int(pctx *c, const ks_ynode *kn, const ks_ynode *v,
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

static int want_bool(pctx *c, const ks_ynode *kn, const ks_ynode *v, int *out)
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

static int want_serde(pctx *c, const ks_ynode *kn, const ks_ynode *v,
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

static int want_topic(pctx *c, const ks_ynode *kn, const ks_ynode *v,
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

/* A mapping, or (null_ok) nothing. Returns 1 for a null value. */
static int want_map(pctx *c, const ks_ynode *kn, const ks_ynode *v,
                    int null_ok)
{
    char buf[80];
    if (ks_ynode_is_null(v)) {
        if (null_ok)
            return 1;
        return FAIL_AT(c, kn, "missing value for '%s'", kn->text);
    }
    if (v->kind != KS_Y_MAP)
        return FAIL_AT(c, v, "expected a mapping for '%s', found %s", kn->text,
                       found(v, buf, sizeof buf));
    return 0;
}

/* A list, or (null_ok) nothing. Returns 1 for a null value. */
static int want_seq(pctx *c, const ks_ynode *kn, const ks_ynode *v,
                    int null_ok)
{
    char buf[80];
    if (ks_ynode_is_null(v)) {
        if (null_ok)
            return 1;
        return FAIL_AT(c, kn, "missing value for '%s'", kn->text);
    }
    if (v->kind != KS_Y_SEQ)
        return FAIL_AT(c, v, "expected a list for '%s', found %s", kn->text,
                       found(v, buf, sizeof buf));
    return 0;
}

/*
 * A list of non-empty strings, or one string (taken as a one-item list).
 * Null gives an empty list. `expected` words the message: "a list of
 * strings", "a name or a list of names".
 */
static int want_strings(pctx *c, const ks_ynode *kn, const ks_ynode *v,
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
static int want_scalars(pctx *c, const ks_ynode *kn, const ks_ynode *v,
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
/* Stores                                                              */
/* ------------------------------------------------------------------ */

static ks_cfg_store *store_add(pctx *c, const ks_ynode *at, const char *name,
                               ks_mark mark, int declared)
{
    ks_pipeline *p = c->p;
    ks_cfg_store *st;
    if (p->store_count == c->store_cap) {
        size_t cap = c->store_cap ? c->store_cap * 2 : 8;
        ks_cfg_store *n = realloc(p->stores, cap * sizeof *n);
        if (!n) {
            oom(c, at);
            return NULL;
        }
        p->stores = n;
        c->store_cap = cap;
    }
    st = &p->stores[p->store_count];
    memset(st, 0, sizeof *st);
    st->name = dup_at(c, at, name);
    if (!st->name)
        return NULL;
    p->store_count++;
    st->map_size = UINT64_C(1) << 30;
    st->changelog = 1;
    st->declared = declared;
    st->mark = mark;
    return st;
}

static int parse_stores(pctx *c, const ks_ynode *kn, const ks_ynode *v)
{
    static const char *const keys[] = {"map_size", "changelog"};
    int r = want_map(c, kn, v, 1);
    if (r != 0)
        return r < 0 ? -1 : 0;
    for (size_t i = 0; i < v->count; i++) {
        const ks_ynode *k = v->pairs[i].key, *sv = v->pairs[i].value;
        char what[300];
        fields f;
        ks_cfg_store *st;

        if (k->kind != KS_Y_SCALAR || ks_ynode_is_null(k))
            return FAIL_AT(c, k, "expected a string key in 'stores'");
        if (!is_name(k->text))
            return FAIL_AT(c, k,
                           "invalid store name '%s'; expected [A-Za-z0-9_-]+",
                           k->text);
        st = store_add(c, k, k->text, mark_of(c, k), 1);
        if (!st)
            return -1;
        r = want_map(c, k, sv, 1);
        if (r < 0)
            return -1;
        if (r == 1)
            continue;
        snprintf(what, sizeof what, "store '%s'", k->text);
        if (take_fields(c, sv, what, keys, 2, &f) != 0)
            return -1;
        if (f.val[0]) {
            char buf[80];
            if (want_scalar(c, f.key[0], f.val[0],
                            "a size (e.g. 512MiB, 4GiB)") != 0)
                return -1;
            if (ks_parse_size(f.val[0]->text, &st->map_size) != 0)
                return FAIL_AT(c, f.val[0],
                               "expected a size (e.g. 512MiB, 4GiB) for "
                               "'map_size', found %s",
                               found(f.val[0], buf, sizeof buf));
            if (st->map_size == 0)
                return FAIL_AT(c, f.val[0],
                               "'map_size' must be greater than 0, found '%s'",
                               f.val[0]->text);
        }
        if (f.val[1] && want_bool(c, f.key[1], f.val[1], &st->changelog) != 0)
            return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* Sources                                                             */
/* ------------------------------------------------------------------ */

enum { SRC_TOPIC, SRC_KEY, SRC_VALUE, SRC_CREATE, SRC_PARTITIONS, SRC_N };
static const char *const SRC_KEYS[SRC_N] = {"topic", "key", "value", "create",
                                            "partitions"};

/* One entry of `sources:` or `tables:` (`kind`: "source" or "table"). */
static int parse_source(pctx *c, const ks_ynode *k, const ks_ynode *sv, ks_cfg_source *s,
                        const char *kind)
{
    char what[300];
    fields f;
    int64_t x;

    if (k->kind != KS_Y_SCALAR || ks_ynode_is_null(k))
        return FAIL_AT(c, k, "expected a string key in '%ss'", kind);
    if (!is_name(k->text))
        return FAIL_AT(c, k, "invalid %s name '%s'; expected [A-Za-z0-9_-]+", kind,
                       k->text);
    s->name = dup_at(c, k, k->text);
    if (!s->name)
        return -1;
    s->mark = mark_of(c, k);
    s->partitions = 1;
    if (want_map(c, k, sv, 0) != 0)
        return -1;
    snprintf(what, sizeof what, "%s '%s'", kind, k->text);
    if (take_fields(c, sv, what, SRC_KEYS, SRC_N, &f) != 0)
        return -1;
    if (f.val[SRC_TOPIC]) {
        if (want_topic(c, f.key[SRC_TOPIC], f.val[SRC_TOPIC], &s->topic))
            return -1;
        s->topic_mark = mark_of(c, f.val[SRC_TOPIC]);
    }
    if (f.val[SRC_KEY] &&
        want_serde(c, f.key[SRC_KEY], f.val[SRC_KEY], &s->key_serde))
        return -1;
    if (f.val[SRC_VALUE] &&
        want_serde(c, f.key[SRC_VALUE], f.val[SRC_VALUE], &s->value_serde))
        return -1;
    if (f.val[SRC_CREATE] &&
        want_bool(c, f.key[SRC_CREATE], f.val[SRC_CREATE], &s->create))
        return -1;
    if (f.val[SRC_PARTITIONS]) {
        if (want_int(c, f.key[SRC_PARTITIONS], f.val[SRC_PARTITIONS], 1,
                     INT32_MAX, &x))
            return -1;
        s->partitions = (int32_t)x;
    }
    if (!s->topic)
        return missing(c, sv, what, "topic");
    return 0;
}

static int parse_sources(pctx *c, const ks_ynode *kn, const ks_ynode *v)
{
    ks_pipeline *p = c->p;
    if (want_map(c, kn, v, 0) != 0)
        return -1;
    if (v->count == 0)
        return FAIL_AT(c, v, "'sources' must name at least one source");
    p->sources = calloc(v->count, sizeof *p->sources);
    if (!p->sources)
        return oom(c, v);
    p->source_count = v->count;
    for (size_t i = 0; i < v->count; i++)
        if (parse_source(c, v->pairs[i].key, v->pairs[i].value, &p->sources[i], "source") != 0)
            return -1;
    return 0;
}

/* `tables:` - appended to the sources with `table` set, each with a store
 * of its name (declared under `stores:` for its map_size, or made here)
 * whose changelog is the table's own topic. */
static int parse_tables(pctx *c, const ks_ynode *kn, const ks_ynode *v)
{
    ks_pipeline *p = c->p;
    int r = want_map(c, kn, v, 1);
    if (r != 0)
        return r < 0 ? -1 : 0;
    ks_cfg_source *all = realloc(p->sources, (p->source_count + v->count + 1) * sizeof *all);
    if (!all)
        return oom(c, v);
    p->sources = all;
    for (size_t i = 0; i < v->count; i++) {
        ks_cfg_source *s = &p->sources[p->source_count];
        memset(s, 0, sizeof *s);
        p->source_count++;
        if (parse_source(c, v->pairs[i].key, v->pairs[i].value, s, "table") != 0)
            return -1;
        /* the worker tells a table's records from a stream's by topic */
        for (size_t j = 0; j + 1 < p->source_count; j++)
            if (strcmp(p->sources[j].topic, s->topic) == 0)
                return FAIL_MARK(c, s->topic_mark,
                                 "table '%s': topic '%s' is already read by %s '%s'; a "
                                 "topic is read either as a stream or as one table",
                                 s->name, s->topic, p->sources[j].table ? "table" : "source",
                                 p->sources[j].name);
        const ks_cfg_store *known = ks_pipeline_store(p, s->name);
        ks_cfg_store *st = known ? &p->stores[known - p->stores]
                                 : store_add(c, v->pairs[i].key, s->name, s->mark, 1);
        if (!st)
            return -1;
        st->table = 1;
        st->changelog = 0; /* the table's topic is its changelog */
        s->table = 1;
        s->table_store = (int)(st - p->stores);
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* Nodes                                                               */
/* ------------------------------------------------------------------ */

enum {
    N_NAME, N_TYPE, N_FROM, N_CONFIG, N_STORE, N_STORES, N_FUNCTIONS,
    N_WINDOW, N_REPARTITION, N_TABLE, N_N
};
static const char *const NODE_KEYS[N_N] = {
    "name", "type", "from", "config", "store", "stores", "functions", "window",
    "repartition", "table"};

static int before(const ks_ynode *a, const ks_ynode *b)
{
    return a->line < b->line || (a->line == b->line && a->col < b->col);
}

static int parse_functions(pctx *c, ks_cfg_node *n, const ks_ynode *kn,
                           const ks_ynode *v)
{
    int r = want_map(c, kn, v, 1);
    if (r != 0)
        return r < 0 ? -1 : 0;
    n->functions = calloc(v->count ? v->count : 1, sizeof *n->functions);
    if (!n->functions)
        return oom(c, v);
    n->function_count = v->count;
    for (size_t i = 0; i < v->count; i++) {
        const ks_ynode *k = v->pairs[i].key, *fv = v->pairs[i].value;
        ks_cfg_function *fn = &n->functions[i];
        int s;
        if (k->kind != KS_Y_SCALAR || ks_ynode_is_null(k))
            return FAIL_AT(c, k, "expected a string key in 'functions'");
        fn->role = dup_at(c, k, k->text);
        if (!fn->role)
            return -1;
        if (want_scalar(c, k, fv, "plugin.function") != 0)
            return -1;
        fn->mark = mark_of(c, fv);
        s = split_ref(fv->text, 1, 0, &fn->plugin, &fn->name);
        if (s == -2)
            return oom(c, fv);
        if (s != 0)
            return FAIL_AT(c, fv,
                           "invalid function '%s' for '%s'; expected "
                           "plugin.function (plugin in [a-z0-9_]+)",
                           fv->text, k->text);
    }
    return 0;
}

/* `repartition: true|false` or `repartition: { partitions: N }` (the map
 * forces one too). */
static int parse_repartition(pctx *c, ks_cfg_node *n, const ks_ynode *kn,
                             const ks_ynode *v)
{
    static const char *const keys[] = {"partitions"};
    n->repartition_mark = mark_of(c, kn);
    if (v->kind == KS_Y_SCALAR && !ks_ynode_is_null(v))
        return want_bool(c, kn, v, &n->repartition);
    if (want_map(c, kn, v, 0) != 0)
        return -1;
    fields f;
    if (take_fields(c, v, "repartition", keys, 1, &f) != 0)
        return -1;
    n->repartition = 1;
    if (f.val[0]) {
        int64_t x;
        if (want_int(c, f.key[0], f.val[0], 1, 100000, &x) != 0)
            return -1;
        n->repartition_partitions = (int32_t)x;
    }
    return 0;
}

static int parse_node(pctx *c, ks_cfg_node *n, const ks_ynode *map)
{
    fields f;
    int s;

    n->mark = mark_of(c, map);
    if (take_fields(c, map, "node", NODE_KEYS, N_N, &f) != 0)
        return -1;
    if (f.val[N_NAME]) {
        if (want_string(c, f.key[N_NAME], f.val[N_NAME], &n->name) != 0)
            return -1;
        if (!is_name(n->name))
            return FAIL_AT(c, f.val[N_NAME],
                           "invalid node name '%s'; expected [A-Za-z0-9_-]+",
                           n->name);
        n->name_mark = mark_of(c, f.val[N_NAME]);
    }
    if (f.val[N_TYPE]) {
        if (want_string(c, f.key[N_TYPE], f.val[N_TYPE], &n->type) != 0)
            return -1;
        n->type_mark = mark_of(c, f.val[N_TYPE]);
        s = split_ref(n->type, 0, 1, &n->plugin, &n->processor);
        if (s == -2)
            return oom(c, f.val[N_TYPE]);
        if (s != 0)
            return FAIL_AT(c, f.val[N_TYPE],
                           "invalid type '%s'; expected plugin.processor or "
                           "plugin (plugin in [a-z0-9_]+)",
                           n->type);
    }
    if (f.val[N_FROM]) {
        if (ks_ynode_is_null(f.val[N_FROM]))
            return FAIL_AT(c, f.key[N_FROM], "missing value for 'from'");
        if (want_strings(c, f.key[N_FROM], f.val[N_FROM],
                         "a name or a list of names", &n->from, &n->from_marks,
                         &n->from_count) != 0)
            return -1;
        if (n->from_count == 0)
            return FAIL_AT(c, f.val[N_FROM],
                           "'from' must name at least one input");
    }
    if (f.val[N_CONFIG] &&
        want_scalars(c, f.key[N_CONFIG], f.val[N_CONFIG], &n->config, 1) != 0)
        return -1;
    if (f.val[N_STORE] && f.val[N_STORES]) {
        const ks_ynode *later = before(f.key[N_STORE], f.key[N_STORES])
                                    ? f.key[N_STORES]
                                    : f.key[N_STORE];
        return FAIL_AT(c, later,
                       "node sets both 'store' and 'stores'; use one of them");
    }
    if (f.val[N_STORE]) {
        if (ks_ynode_is_null(f.val[N_STORE]))
            return FAIL_AT(c, f.key[N_STORE], "missing value for 'store'");
        if (f.val[N_STORE]->kind != KS_Y_SCALAR) {
            char buf[80];
            return FAIL_AT(c, f.val[N_STORE],
                           "expected a store name for 'store', found %s",
                           found(f.val[N_STORE], buf, sizeof buf));
        }
    }
    if (f.val[N_STORE] || f.val[N_STORES]) {
        int k = f.val[N_STORE] ? N_STORE : N_STORES;
        if (want_strings(c, f.key[k], f.val[k], "a list of store names",
                         &n->stores, &n->store_marks, &n->store_count) != 0)
            return -1;
        for (size_t i = 0; i < n->store_count; i++)
            if (!is_name(n->stores[i]))
                return FAIL_MARK(c, n->store_marks[i],
                                 "invalid store name '%s'; expected "
                                 "[A-Za-z0-9_-]+",
                                 n->stores[i]);
    }
    if (f.val[N_FUNCTIONS] &&
        parse_functions(c, n, f.key[N_FUNCTIONS], f.val[N_FUNCTIONS]) != 0)
        return -1;
    if (f.val[N_WINDOW] &&
        want_scalars(c, f.key[N_WINDOW], f.val[N_WINDOW], &n->window, 0) != 0)
        return -1;
    if (f.val[N_REPARTITION] &&
        parse_repartition(c, n, f.key[N_REPARTITION], f.val[N_REPARTITION]) != 0)
        return -1;
    if (f.val[N_TABLE]) {
        if (want_string(c, f.key[N_TABLE], f.val[N_TABLE], &n->table) != 0)
            return -1;
        n->table_mark = mark_of(c, f.val[N_TABLE]);
    }
    for (int k = N_NAME; k <= N_FROM; k++)
        if (!f.val[k])
            return missing(c, map, "node", NODE_KEYS[k]);
    return 0;
}

static int parse_nodes(pctx *c, const ks_ynode *kn, const ks_ynode *v)
{
    ks_pipeline *p = c->p;
    char buf[80];
    int r = want_seq(c, kn, v, 1);
    if (r != 0)
        return r < 0 ? -1 : 0;
    p->nodes = calloc(v->count ? v->count : 1, sizeof *p->nodes);
    if (!p->nodes)
        return oom(c, v);
    p->node_count = v->count;
    for (size_t i = 0; i < v->count; i++) {
        const ks_ynode *it = v->items[i];
        if (it->kind != KS_Y_MAP)
            return FAIL_AT(c, it,
                           "expected a mapping for each entry of 'nodes', "
                           "found %s",
                           found(it, buf, sizeof buf));
        if (parse_node(c, &p->nodes[i], it) != 0)
            return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* Sinks                                                               */
/* ------------------------------------------------------------------ */

enum {
    K_FROM, K_TOPIC, K_KEY, K_VALUE, K_NAME, K_CREATE, K_PARTITIONS, K_N
};
static const char *const SINK_KEYS[K_N] = {
    "from", "topic", "key", "value", "name", "create", "partitions"};

static int parse_sink(pctx *c, ks_cfg_sink *s, size_t index,
                      const ks_ynode *map)
{
    fields f;
    int64_t x;

    s->mark = mark_of(c, map);
    s->partitions = 0; /* created with the sources' partition count */
    if (take_fields(c, map, "sink", SINK_KEYS, K_N, &f) != 0)
        return -1;
    if (f.val[K_FROM]) {
        if (want_string(c, f.key[K_FROM], f.val[K_FROM], &s->from) != 0)
            return -1;
        s->from_mark = mark_of(c, f.val[K_FROM]);
    }
    if (f.val[K_TOPIC]) {
        if (want_topic(c, f.key[K_TOPIC], f.val[K_TOPIC], &s->topic) != 0)
            return -1;
        s->topic_mark = mark_of(c, f.val[K_TOPIC]);
    }
    if (f.val[K_KEY] &&
        want_serde(c, f.key[K_KEY], f.val[K_KEY], &s->key_serde) != 0)
        return -1;
    if (f.val[K_VALUE] &&
        want_serde(c, f.key[K_VALUE], f.val[K_VALUE], &s->value_serde) != 0)
        return -1;
    if (f.val[K_NAME]) {
        if (want_string(c, f.key[K_NAME], f.val[K_NAME], &s->name) != 0)
            return -1;
        if (!is_name(s->name))
            return FAIL_AT(c, f.val[K_NAME],
                           "invalid sink name '%s'; expected [A-Za-z0-9_-]+",
                           s->name);
        s->name_mark = mark_of(c, f.val[K_NAME]);
    } else {
        char def[32];
        snprintf(def, sizeof def, "sink-%zu", index + 1);
        s->name = dup_at(c, map, def);
        if (!s->name)
            return -1;
        s->name_mark = s->mark;
    }
    if (f.val[K_CREATE] &&
        want_bool(c, f.key[K_CREATE], f.val[K_CREATE], &s->create) != 0)
        return -1;
    if (f.val[K_PARTITIONS]) {
        if (want_int(c, f.key[K_PARTITIONS], f.val[K_PARTITIONS], 1,
                     INT32_MAX, &x) != 0)
            return -1;
        s->partitions = (int32_t)x;
    }
    if (!s->from)
        return missing(c, map, "sink", "from");
    if (!s->topic)
        return missing(c, map, "sink", "topic");
    return 0;
}

static int parse_sinks(pctx *c, const ks_ynode *kn, const ks_ynode *v)
{
    ks_pipeline *p = c->p;
    char buf[80];
    if (want_seq(c, kn, v, 0) != 0)
        return -1;
    if (v->count == 0)
        return FAIL_AT(c, v, "'sinks' must list at least one sink");
    p->sinks = calloc(v->count, sizeof *p->sinks);
    if (!p->sinks)
        return oom(c, v);
    p->sink_count = v->count;
    for (size_t i = 0; i < v->count; i++) {
        const ks_ynode *it = v->items[i];
        if (it->kind != KS_Y_MAP)
            return FAIL_AT(c, it,
                           "expected a mapping for each entry of 'sinks', "
                           "found %s",
                           found(it, buf, sizeof buf));
        if (parse_sink(c, &p->sinks[i], i, it) != 0)
            return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* kafka:                                                              */
/* ------------------------------------------------------------------ */

/* `bootstrap:` as a list, or one string "a:1,b:2". */
static int parse_bootstrap(pctx *c, const ks_ynode *kn, const ks_ynode *v)
{
    ks_pipeline *p = c->p;
    ks_mark *marks = NULL;
    char buf[80];

    if (ks_ynode_is_null(v))
        return FAIL_AT(c, kn, "missing value for 'bootstrap'");
    if (v->kind == KS_Y_SCALAR) {
        /* split at commas; marks are the scalar's plus the offset */
        size_t n = 1, i = 0;
        const char *s = v->text;
        for (const char *q = s; *q; q++)
            n += *q == ',';
        p->bootstrap = calloc(n, sizeof *p->bootstrap);
        if (!p->bootstrap)
            return oom(c, v);
        while (1) {
            size_t start = strspn(s, " \t");
            size_t len = strcspn(s + start, ",");
            size_t end = len;
            int col = v->col + (int)(s + start - v->text) + (v->plain ? 0 : 1);
            while (end > 0 && (s[start + end - 1] == ' ' ||
                               s[start + end - 1] == '\t'))
                end--;
            p->bootstrap[i] = strndup(s + start, end);
            if (!p->bootstrap[i])
                return oom(c, v);
            p->bootstrap_count = ++i;
            if (!is_host_port(p->bootstrap[i - 1]))
                return failf(c, v->line, col,
                             "invalid address '%s' in 'bootstrap'; expected "
                             "host:port",
                             p->bootstrap[i - 1]);
            if (s[start + len] != ',')
                break;
            s += start + len + 1;
        }
        return 0;
    }
    if (v->kind != KS_Y_SEQ)
        return FAIL_AT(c, v, "expected a list of strings for 'bootstrap', "
                             "found %s",
                       found(v, buf, sizeof buf));
    if (want_strings(c, kn, v, "a list of strings", &p->bootstrap, &marks,
                     &p->bootstrap_count) != 0) {
        free(marks);
        return -1;
    }
    for (size_t i = 0; i < p->bootstrap_count; i++) {
        if (!is_host_port(p->bootstrap[i])) {
            int r = FAIL_MARK(c, marks[i],
                              "invalid address '%s' in 'bootstrap'; expected "
                              "host:port",
                              p->bootstrap[i]);
            free(marks);
            return r;
        }
    }
    free(marks);
    if (p->bootstrap_count == 0)
        return FAIL_AT(c, v, "'bootstrap' must list at least one host:port");
    return 0;
}

static int parse_kafka(pctx *c, const ks_ynode *kn, const ks_ynode *v)
{
    static const char *const keys[] = {"bootstrap", "properties"};
    fields f;
    if (want_map(c, kn, v, 0) != 0)
        return -1;
    if (take_fields(c, v, "kafka", keys, 2, &f) != 0)
        return -1;
    if (f.val[0] && parse_bootstrap(c, f.key[0], f.val[0]) != 0)
        return -1;
    if (f.val[1] &&
        want_scalars(c, f.key[1], f.val[1], &c->p->kafka_properties, 0) != 0)
        return -1;
    if (!f.val[0])
        return missing(c, v, "kafka", "bootstrap");
    return 0;
}

/* `outbox: { name, topic, listen, token, max_users_per_partition,
 * stale_after, retry: { max_attempts }, max_event_bytes,
 * recover_unknown_partition, results_topic, max_connections, idle_timeout,
 * connection_deadline, backend, dsn, dsn_env, table, poll_interval }` */
enum { O_NAME, O_TOPIC, O_LISTEN, O_TOKEN, O_MAX_USERS, O_STALE, O_RETRY, O_MAX_BYTES,
       O_RECOVER, O_RESULTS, O_MAX_CONN, O_IDLE, O_DEADLINE, O_BACKEND, O_DSN, O_DSN_ENV,
       O_TABLE, O_POLL, O_N };
static const char *const OUTBOX_KEYS[O_N] = {
    "name",        "topic", "listen",          "token", "max_users_per_partition",
    "stale_after", "retry", "max_event_bytes", "recover_unknown_partition",
    "results_topic", "max_connections", "idle_timeout", "connection_deadline",
    "backend", "dsn", "dsn_env", "table", "poll_interval"};
static int want_duration(pctx *c, const ks_ynode *kn, const ks_ynode *v, int64_t *ms);

/* The keys that only the embedded (LMDB/HTTP) backend reads, and the ones
 * only postgres reads: a key of the other backend is a mistake to report. */
static const int OUTBOX_LMDB_ONLY[] = {O_LISTEN, O_TOKEN, O_MAX_BYTES, O_RESULTS,
                                       O_MAX_CONN, O_IDLE, O_DEADLINE, O_MAX_USERS,
                                       O_RECOVER};
static const int OUTBOX_PG_ONLY[] = {O_DSN, O_DSN_ENV, O_TABLE, O_POLL};

/* [A-Za-z_][A-Za-z0-9_]*, at most 63 bytes: a PostgreSQL identifier that
 * needs no quoting, and a NOTIFY channel of the same name. */
static int is_sql_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63 || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
            return 0;
    return 1;
}

/* backend, dsn, dsn_env, table and poll_interval; the keys of the other
 * backend refused at their position. */
static int parse_outbox_backend(pctx *c, const fields *f, const ks_ynode *v, ks_cfg_outbox *o)
{
    if (f->val[O_BACKEND]) {
        const ks_ynode *b = f->val[O_BACKEND];
        if (want_scalar(c, f->key[O_BACKEND], b, "lmdb or postgres") != 0)
            return -1;
        if (!strcmp(b->text, "postgres"))
            o->backend = KS_OUTBOX_BACKEND_POSTGRES;
        else if (strcmp(b->text, "lmdb") != 0)
            return FAIL_AT(c, b, "invalid outbox backend '%s'; expected lmdb or postgres",
                           b->text);
#ifndef KS_HAVE_POSTGRES
        if (o->backend == KS_OUTBOX_BACKEND_POSTGRES)
            return FAIL_AT(c, b, "this kstreams was built without PostgreSQL (configure "
                                 "did not find libpq: install libpq-dev and rebuild)");
#endif
    }
    int pg = o->backend == KS_OUTBOX_BACKEND_POSTGRES;
    const int *other = pg ? OUTBOX_LMDB_ONLY : OUTBOX_PG_ONLY;
    size_t n_other = pg ? sizeof OUTBOX_LMDB_ONLY / sizeof *OUTBOX_LMDB_ONLY
                        : sizeof OUTBOX_PG_ONLY / sizeof *OUTBOX_PG_ONLY;
    for (size_t i = 0; i < n_other; i++)
        if (f->key[other[i]])
            return FAIL_AT(c, f->key[other[i]], "'%s' is not a key of the %s outbox backend",
                           f->key[other[i]]->text, pg ? "postgres" : "lmdb");
    if (!pg)
        return 0;
    o->poll_interval_ms = 1000;
    if (f->val[O_DSN] && want_string(c, f->key[O_DSN], f->val[O_DSN], &o->dsn) != 0)
        return -1;
#ifdef KS_HAVE_POSTGRES
    if (o->dsn) { /* libpq's own parser; its message never repeats a password */
        char *why = NULL;
        PQconninfoOption *opts = PQconninfoParse(o->dsn, &why);
        if (!opts) {
            size_t l = why ? strlen(why) : 0;
            while (l && why[l - 1] == '\n')
                why[--l] = '\0';
            FAIL_AT(c, f->val[O_DSN], "invalid PostgreSQL connection string for 'dsn': %s",
                    why ? why : "out of memory");
            PQfreemem(why);
            return -1;
        }
        PQconninfoFree(opts);
    }
#endif
    if (f->val[O_DSN_ENV]) {
        if (want_string(c, f->key[O_DSN_ENV], f->val[O_DSN_ENV], &o->dsn_env) != 0)
            return -1;
        if (!is_sql_name(o->dsn_env))
            return FAIL_AT(c, f->val[O_DSN_ENV], "invalid environment variable name '%s' "
                                                 "for 'dsn_env'", o->dsn_env);
    }
    if (!o->dsn == !o->dsn_env)
        return FAIL_AT(c, f->val[O_DSN] ? f->key[O_DSN_ENV] : v,
                       "a postgres outbox needs exactly one of 'dsn' (a libpq connection "
                       "string) and 'dsn_env' (the environment variable holding it)");
    if (f->val[O_TABLE]) {
        if (want_string(c, f->key[O_TABLE], f->val[O_TABLE], &o->table) != 0)
            return -1;
        if (!is_sql_name(o->table))
            return FAIL_AT(c, f->val[O_TABLE], "invalid table name '%s'; expected "
                                               "[A-Za-z_][A-Za-z0-9_]* (at most 63)",
                           o->table);
    } else if (!(o->table = strdup("ks_outbox")))
        return oom(c, v);
    if (f->val[O_POLL] &&
        want_duration(c, f->key[O_POLL], f->val[O_POLL], &o->poll_interval_ms) != 0)
        return -1;
    return 0;
}

static int want_duration(pctx *c, const ks_ynode *kn, const ks_ynode *v, int64_t *ms)
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
static int want_listen(pctx *c, const ks_ynode *kn, const ks_ynode *v, char **out)
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
static int want_limits(pctx *c, const ks_ynode *const kn[3], const ks_ynode *const v[3],
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

static int parse_outbox(pctx *c, const ks_ynode *kn, const ks_ynode *v)
{
    fields f;
    if (want_map(c, kn, v, 0) != 0 || take_fields(c, v, "outbox", OUTBOX_KEYS, O_N, &f) != 0)
        return -1;
    ks_cfg_outbox *o = calloc(1, sizeof *o);
    if (!o)
        return oom(c, v);
    c->p->outbox = o;
    o->mark = mark_of(c, v);
    o->max_users_per_partition = 100;
    o->stale_after_ms = 30000;
    o->max_attempts = 5;
    o->max_event_bytes = 65536;
    o->recover_unknown_partition = 1;
    o->limits = (ks_cfg_http_limits){64, 10000, 30000};
    if (parse_outbox_backend(c, &f, v, o) != 0)
        return -1;
    if (f.val[O_NAME]) {
        if (want_string(c, f.key[O_NAME], f.val[O_NAME], &o->name) != 0)
            return -1;
        if (!is_name(o->name))
            return FAIL_AT(c, f.val[O_NAME], "invalid outbox name '%s'; expected "
                                             "[A-Za-z0-9_-]+",
                           o->name);
    }
    if (f.val[O_TOPIC] && want_topic(c, f.key[O_TOPIC], f.val[O_TOPIC], &o->topic) != 0)
        return -1;
    if (f.val[O_RESULTS] &&
        want_topic(c, f.key[O_RESULTS], f.val[O_RESULTS], &o->results_topic) != 0)
        return -1;
    if (f.val[O_LISTEN] && want_listen(c, f.key[O_LISTEN], f.val[O_LISTEN], &o->listen) != 0)
        return -1;
    if (f.val[O_TOKEN] && want_string(c, f.key[O_TOKEN], f.val[O_TOKEN], &o->token) != 0)
        return -1;
    if (f.val[O_MAX_USERS] && want_int(c, f.key[O_MAX_USERS], f.val[O_MAX_USERS], 1,
                                       INT32_MAX, &o->max_users_per_partition) != 0)
        return -1;
    if (f.val[O_STALE] && want_duration(c, f.key[O_STALE], f.val[O_STALE],
                                        &o->stale_after_ms) != 0)
        return -1;
    if (f.val[O_RETRY]) {
        static const char *const rkeys[] = {"max_attempts"};
        fields r;
        if (want_map(c, f.key[O_RETRY], f.val[O_RETRY], 0) != 0 ||
            take_fields(c, f.val[O_RETRY], "retry", rkeys, 1, &r) != 0)
            return -1;
        if (r.val[0] && want_int(c, r.key[0], r.val[0], 1, 1000000, &o->max_attempts) != 0)
            return -1;
    }
    if (f.val[O_MAX_BYTES]) {
        uint64_t b;
        if (want_scalar(c, f.key[O_MAX_BYTES], f.val[O_MAX_BYTES], "a size") != 0)
            return -1;
        if (ks_parse_size(f.val[O_MAX_BYTES]->text, &b) != 0 || b == 0 || b > (64u << 20))
            return FAIL_AT(c, f.val[O_MAX_BYTES],
                           "expected a size between 1 and 64MiB for 'max_event_bytes', "
                           "found '%s'",
                           f.val[O_MAX_BYTES]->text);
        o->max_event_bytes = (int64_t)b;
    }
    if (f.val[O_RECOVER] && want_bool(c, f.key[O_RECOVER], f.val[O_RECOVER],
                                      &o->recover_unknown_partition) != 0)
        return -1;
    if (want_limits(c, &f.key[O_MAX_CONN], &f.val[O_MAX_CONN], &o->limits) != 0)
        return -1;
    if (!f.val[O_TOPIC])
        return missing(c, v, "outbox", "topic");
    if (o->backend == KS_OUTBOX_BACKEND_POSTGRES) /* no HTTP: the name labels metrics */
        return o->name || (o->name = strdup(o->table)) ? 0 : oom(c, v);
    if (!f.val[O_NAME])
        return missing(c, v, "outbox", "name");
    if (!o->listen && !(o->listen = strdup("127.0.0.1:8470")))
        return oom(c, v);
    if (!ks_listen_is_loopback(o->listen) && !o->token)
        return FAIL_AT(c, f.val[O_LISTEN] ? f.val[O_LISTEN] : v,
                       "outbox listens on '%s', which is not a loopback address: set "
                       "'token' (clients then send Authorization: Bearer <token>)",
                       o->listen);
    return 0;
}

/* `metrics: HOST:PORT`, or `metrics: { listen, token, max_connections,
 * idle_timeout, connection_deadline }`. */
enum { M_LISTEN, M_TOKEN, M_MAX_CONN, M_IDLE, M_DEADLINE, M_N };
static const char *const METRICS_KEYS[M_N] = {"listen", "token", "max_connections",
                                              "idle_timeout", "connection_deadline"};

static int parse_metrics(pctx *c, const ks_ynode *kn, const ks_ynode *v)
{
    ks_pipeline *p = c->p;
    const ks_ynode *at = v;
    p->metrics_limits = (ks_cfg_http_limits){16, 10000, 10000};
    if (v->kind == KS_Y_MAP) {
        fields f;
        if (take_fields(c, v, "metrics", METRICS_KEYS, M_N, &f) != 0)
            return -1;
        if (!f.val[M_LISTEN])
            return missing(c, v, "metrics", "listen");
        if (want_listen(c, f.key[M_LISTEN], f.val[M_LISTEN], &p->metrics_listen) != 0)
            return -1;
        if (f.val[M_TOKEN] &&
            want_string(c, f.key[M_TOKEN], f.val[M_TOKEN], &p->metrics_token) != 0)
            return -1;
        if (want_limits(c, &f.key[M_MAX_CONN], &f.val[M_MAX_CONN], &p->metrics_limits) != 0)
            return -1;
        at = f.val[M_LISTEN];
    } else if (want_listen(c, kn, v, &p->metrics_listen) != 0) {
        return -1;
    }
    /* topic names, build ids and backlogs are not for the network at large */
    if (!ks_listen_is_loopback(p->metrics_listen) && !p->metrics_token)
        return FAIL_AT(c, at,
                       "metrics listen on '%s', which is not a loopback address: write "
                       "metrics: { listen: %s, token: ... } (scrapers then send "
                       "Authorization: Bearer <token>)",
                       p->metrics_listen, p->metrics_listen);
    return 0;
}

/* ------------------------------------------------------------------ */
/* Cross checks                                                        */
/* ------------------------------------------------------------------ */

typedef struct named {
    const char *name;
    const char *kind; /* "source", "node", "sink" */
    ks_mark mark;
} named;

static int named_cmp(const void *a, const void *b)
{
    const named *x = a, *y = b;
    if (x->mark.line != y->mark.line)
        return x->mark.line < y->mark.line ? -1 : 1;
    if (x->mark.col != y->mark.col)
        return x->mark.col < y->mark.col ? -1 : 1;
    return 0;
}

/* Names are unique among sources, nodes and sinks; the later one (in the
 * file) is reported. */
static int check_names(pctx *c)
{
    ks_pipeline *p = c->p;
    size_t n = p->source_count + p->node_count + p->sink_count, k = 0;
    named *all = calloc(n ? n : 1, sizeof *all);
    int rc = 0;

    if (!all)
        return oom(c, NULL);
    for (size_t i = 0; i < p->source_count; i++)
        all[k++] = (named){p->sources[i].name, p->sources[i].table ? "table" : "source",
                           p->sources[i].mark};
    for (size_t i = 0; i < p->node_count; i++)
        all[k++] = (named){p->nodes[i].name, "node", p->nodes[i].name_mark};
    for (size_t i = 0; i < p->sink_count; i++)
        all[k++] = (named){p->sinks[i].name, "sink", p->sinks[i].name_mark};
    qsort(all, n, sizeof *all, named_cmp);
    for (size_t j = 1; j < n && rc == 0; j++)
        for (size_t i = 0; i < j; i++)
            if (strcmp(all[i].name, all[j].name) == 0) {
                rc = FAIL_MARK(c, all[j].mark,
                               "duplicate name '%s'; already used by the %s "
                               "at line %d",
                               all[j].name, all[i].kind, all[i].mark.line);
                break;
            }
    free(all);
    return rc;
}

/* A node reads a table through `table:` (its store is then the node's
 * first), never as one of its own `store:`s; the shipped `join` needs one. */
static int check_table_refs(pctx *c, const ks_cfg_node *n)
{
    const ks_pipeline *p = c->p;
    for (size_t k = 0; k < n->store_count; k++) {
        const ks_cfg_store *st = ks_pipeline_store(p, n->stores[k]);
        if (st && st->table)
            return FAIL_MARK(c, n->store_marks[k],
                             "node '%s': store '%s' is the store of table '%s'; read a "
                             "table with `table: %s`",
                             n->name, n->stores[k], n->stores[k], n->stores[k]);
    }
    if (n->table) {
        const ks_cfg_source *t = ks_pipeline_source(p, n->table);
        if (!t || !t->table)
            return FAIL_MARK(c, n->table_mark,
                             "node '%s': unknown table '%s' (not under 'tables')", n->name,
                             n->table);
    } else if (n->plugin && strcmp(n->plugin, "join") == 0 && n->processor &&
               strcmp(n->processor, "join") == 0) {
        return FAIL_MARK(c, n->mark, "node '%s': type '%s' needs `table:` (the table it "
                                     "looks records up in)",
                         n->name, n->type);
    }
    return 0;
}

/* Insert store `name` at `at` in n's stores: 1, or 0 when it is there
 * already, -1 when out of memory. */
static int add_store_at(pctx *c, ks_cfg_node *n, size_t at, const char *name, ks_mark mark)
{
    for (size_t k = 0; k < n->store_count; k++)
        if (strcmp(n->stores[k], name) == 0)
            return 0;
    char **stores = realloc(n->stores, (n->store_count + 1) * sizeof *stores);
    if (stores)
        n->stores = stores;
    ks_mark *marks = realloc(n->store_marks, (n->store_count + 1) * sizeof *marks);
    if (marks)
        n->store_marks = marks;
    char *copy = strdup(name);
    if (!stores || !marks || !copy) {
        free(copy);
        return oom(c, NULL);
    }
    memmove(stores + at + 1, stores + at, (n->store_count - at) * sizeof *stores);
    memmove(marks + at + 1, marks + at, (n->store_count - at) * sizeof *marks);
    stores[at] = copy;
    marks[at] = mark;
    n->store_count++;
    return 1;
}

/* The stores a node may read: its `table:`'s first (plugins find it as
 * their first store), then those of the tables it reads in `from:`, in
 * that order (a table-table join looks both up). A node with one is keyed
 * (repartition.h). */
static int link_tables(pctx *c)
{
    ks_pipeline *p = c->p;
    for (size_t i = 0; i < p->node_count; i++) {
        ks_cfg_node *n = &p->nodes[i];
        size_t at = 0;
        int rc = n->table ? add_store_at(c, n, at, n->table, n->table_mark) : 0;
        for (size_t k = 0; rc >= 0 && k < n->from_count; k++) {
            at += (size_t)rc;
            const ks_cfg_source *t = ks_pipeline_source(p, n->from[k]);
            rc = t && t->table ? add_store_at(c, n, at, t->name, n->from_marks[k]) : 0;
        }
        if (rc < 0)
            return -1;
    }
    return 0;
}

static int is_input(const ks_pipeline *p, const char *name)
{
    return ks_pipeline_source(p, name) || ks_pipeline_node(p, name);
}

static int check_refs(pctx *c)
{
    ks_pipeline *p = c->p;
    for (size_t i = 0; i < p->node_count; i++) {
        const ks_cfg_node *n = &p->nodes[i];
        for (size_t k = 0; k < n->from_count; k++) {
            if (!is_input(p, n->from[k]))
                return FAIL_MARK(c, n->from_marks[k],
                                 "node '%s': unknown input '%s' (not a source "
                                 "or node)",
                                 n->name, n->from[k]);
            for (size_t j = 0; j < k; j++)
                if (strcmp(n->from[j], n->from[k]) == 0)
                    return FAIL_MARK(c, n->from_marks[k],
                                     "node '%s': input '%s' is listed twice",
                                     n->name, n->from[k]);
        }
        for (size_t k = 0; k < n->store_count; k++)
            for (size_t j = 0; j < k; j++)
                if (strcmp(n->stores[j], n->stores[k]) == 0)
                    return FAIL_MARK(c, n->store_marks[k],
                                     "node '%s': store '%s' is listed twice",
                                     n->name, n->stores[k]);
        if (check_table_refs(c, n) != 0)
            return -1;
    }
    for (size_t i = 0; i < p->sink_count; i++) {
        const ks_cfg_sink *s = &p->sinks[i];
        if (!is_input(p, s->from))
            return FAIL_MARK(c, s->from_mark,
                             "sink '%s': unknown input '%s' (not a source or "
                             "node)",
                             s->name, s->from);
    }
    return 0;
}

/*
 * Cycles among nodes: depth-first along the data flow (input -> consumer),
 * nodes in file order. The edge that reaches a node on the stack closes the
 * cycle; it is reported at that `from` entry, as "cycle: a -> b -> a"
 * starting and ending with the node whose `from` closes it.
 */
typedef struct edge {
    size_t to;    /* consumer node index */
    ks_mark mark; /* the consumer's from entry */
} edge;

typedef struct frame {
    size_t node;
    size_t next; /* next outgoing edge to try */
} frame;

static int cycle_report(pctx *c, const frame *stack, size_t depth,
                        size_t back_to, ks_mark at)
{
    ks_pipeline *p = c->p;
    char path[768];
    size_t off = 0, start = 0;

    for (size_t i = 0; i < depth; i++)
        if (stack[i].node == back_to) {
            start = i;
            break;
        }
    path[0] = '\0';
    for (size_t i = start; i <= depth; i++) {
        const char *nm = p->nodes[i < depth ? stack[i].node : back_to].name;
        if (off < sizeof path)
            off += (size_t)snprintf(path + off, sizeof path - off, "%s%s",
                                    i > start ? " -> " : "", nm);
    }
    return FAIL_MARK(c, at, "cycle: %s", path);
}

static int check_cycles(pctx *c)
{
    ks_pipeline *p = c->p;
    size_t nn = p->node_count, ne = 0;
    size_t *first = NULL;
    edge *edges = NULL;
    frame *stack = NULL;
    unsigned char *color = NULL;
    int rc = 0;

    if (nn == 0)
        return 0;
    for (size_t j = 0; j < nn; j++)
        ne += p->nodes[j].from_count;
    first = calloc(nn + 1, sizeof *first);
    edges = calloc(ne ? ne : 1, sizeof *edges);
    stack = calloc(nn, sizeof *stack);
    color = calloc(nn, 1);
    if (!first || !edges || !stack || !color) {
        rc = oom(c, NULL);
        goto out;
    }
    /* CSR adjacency: edges of node i are edges[first[i] .. first[i+1]) */
    for (size_t j = 0; j < nn; j++)
        for (size_t k = 0; k < p->nodes[j].from_count; k++) {
            const ks_cfg_node *in = ks_pipeline_node(p, p->nodes[j].from[k]);
            if (in)
                first[in - p->nodes + 1]++;
        }
    for (size_t i = 0; i < nn; i++)
        first[i + 1] += first[i];
    {
        size_t *fill = calloc(nn, sizeof *fill);
        if (!fill) {
            rc = oom(c, NULL);
            goto out;
        }
        for (size_t j = 0; j < nn; j++)
            for (size_t k = 0; k < p->nodes[j].from_count; k++) {
                const ks_cfg_node *in =
                    ks_pipeline_node(p, p->nodes[j].from[k]);
                if (in) {
                    size_t i = (size_t)(in - p->nodes);
                    edges[first[i] + fill[i]++] =
                        (edge){j, p->nodes[j].from_marks[k]};
                }
            }
        free(fill);
    }
    for (size_t root = 0; root < nn && rc == 0; root++) {
        size_t depth = 0;
        if (color[root])
            continue;
        stack[depth++] = (frame){root, first[root]};
        color[root] = 1;
        while (depth > 0 && rc == 0) {
            frame *fr = &stack[depth - 1];
            if (fr->next == first[fr->node + 1]) {
                color[fr->node] = 2;
                depth--;
                continue;
            }
            const edge *e = &edges[fr->next++];
            if (color[e->to] == 1) {
                rc = cycle_report(c, stack, depth, e->to, e->mark);
            } else if (color[e->to] == 0) {
                color[e->to] = 1;
                stack[depth++] = (frame){e->to, first[e->to]};
            }
        }
    }
out:
    free(first);
    free(edges);
    free(stack);
    free(color);
    return rc;
}

/* Stores named by nodes but not declared: add them with defaults. */
static int add_used_stores(pctx *c)
{
    ks_pipeline *p = c->p;
    for (size_t i = 0; i < p->node_count; i++) {
        const ks_cfg_node *n = &p->nodes[i];
        for (size_t k = 0; k < n->store_count; k++)
            if (!ks_pipeline_store(p, n->stores[k]) &&
                !store_add(c, NULL, n->stores[k], n->store_marks[k], 0))
                return -1;
    }
    return 0;
}

/* Edit distance of a and b (insertions, deletions, substitutions), for
 * pairing a declared store with a misspelt use; names longer than 64 count
 * as far apart. */
static size_t distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), row[65];
    if (la > 64 || lb > 64)
        return SIZE_MAX;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* A store declared under `stores:` that no node names is an error: its
 * settings would apply to nothing, while the node that meant it (`store:
 * sen` for `seen`) silently gets a new store with defaults. The message
 * names both, the undeclared use closest in spelling. Runs after
 * add_used_stores, so undeclared uses are the stores with declared 0. */
static int check_unused_stores(pctx *c)
{
    ks_pipeline *p = c->p;
    for (size_t i = 0; i < p->store_count; i++) {
        const ks_cfg_store *st = &p->stores[i];
        int used = 0;
        for (size_t n = 0; n < p->node_count && !used; n++)
            for (size_t k = 0; k < p->nodes[n].store_count && !used; k++)
                used = strcmp(p->nodes[n].stores[k], st->name) == 0;
        if (!st->declared || used || st->table)
            continue;
        const ks_cfg_node *by = NULL;
        size_t at = 0, best = SIZE_MAX;
        for (size_t n = 0; n < p->node_count; n++)
            for (size_t k = 0; k < p->nodes[n].store_count; k++) {
                const ks_cfg_store *u = ks_pipeline_store(p, p->nodes[n].stores[k]);
                size_t d = u && !u->declared ? distance(u->name, st->name) : SIZE_MAX;
                if (d < best) {
                    best = d;
                    by = &p->nodes[n];
                    at = k;
                }
            }
        if (by)
            return failf(c, st->mark.line, st->mark.col,
                         "store '%s' is declared but no node uses it; node '%s' names store "
                         "'%s' at %s:%d:%d, which is not declared (a typo?)",
                         st->name, by->name, by->stores[at], p->file, by->store_marks[at].line,
                         by->store_marks[at].col);
        return failf(c, st->mark.line, st->mark.col,
                     "store '%s' is declared but no node uses it; name it in a node's "
                     "'store' or 'stores', or remove it",
                     st->name);
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* The top level                                                       */
/* ------------------------------------------------------------------ */

enum {
    T_APPLICATION, T_KAFKA, T_GUARANTEE, T_COMMIT_INTERVAL, T_STATE_DIR,
    T_WORKERS, T_REPLICATION, T_PLUGINS, T_PLUGIN_PATH, T_POISON,
    T_DEAD_LETTER, T_METRICS, T_STORES, T_SOURCES, T_NODES, T_SINKS, T_OUTBOX,
    T_STALL_WARNING, T_TABLES, T_N
};
static const char *const TOP_KEYS[T_N] = {
    "application", "kafka",          "guarantee",        "commit_interval_ms",
    "state_dir",   "workers",        "replication_factor", "plugins",
    "plugin_path", "poison",         "dead_letter_topic", "metrics",
    "stores",      "sources",        "nodes",            "sinks",
    "outbox",      "stall_warning_ms", "tables"};

/* A duration > 0: an integer of milliseconds or "100ms", "30s", ... */
static int want_positive_duration(pctx *c, const ks_ynode *k, const ks_ynode *v, int64_t *out)
{
    char buf[80];
    if (want_scalar(c, k, v, "an integer or a duration (e.g. 100ms)"))
        return -1;
    if (ks_parse_duration_ms(v->text, out) != 0)
        return FAIL_AT(c, v, "expected an integer or a duration (e.g. 100ms) for '%s', found %s",
                       k->text, found(v, buf, sizeof buf));
    if (*out <= 0)
        return FAIL_AT(c, v, "'%s' must be greater than 0, found '%s'", k->text, v->text);
    return 0;
}

static int parse_top(pctx *c, const ks_ynode *root)
{
    ks_pipeline *p = c->p;
    fields f;
    const ks_ynode *v;
    int64_t x;

    if (take_fields(c, root, "pipeline", TOP_KEYS, T_N, &f) != 0)
        return -1;

    if ((v = f.val[T_APPLICATION])) {
        if (want_string(c, f.key[T_APPLICATION], v, &p->application) != 0)
            return -1;
        if (!is_app(p->application))
            return FAIL_AT(c, v,
                           "invalid application id '%s'; expected "
                           "[A-Za-z0-9._-]+",
                           p->application);
    }
    if ((v = f.val[T_KAFKA]) && parse_kafka(c, f.key[T_KAFKA], v) != 0)
        return -1;
    if ((v = f.val[T_GUARANTEE])) {
        if (want_scalar(c, f.key[T_GUARANTEE], v, "a guarantee") != 0)
            return -1;
        if (strcmp(v->text, "exactly-once") == 0)
            p->guarantee = KS_GUARANTEE_EXACTLY_ONCE;
        else if (strcmp(v->text, "at-least-once") == 0)
            p->guarantee = KS_GUARANTEE_AT_LEAST_ONCE;
        else
            return FAIL_AT(c, v,
                           "unknown guarantee '%s'; expected exactly-once or "
                           "at-least-once",
                           v->text);
    }
    if ((v = f.val[T_COMMIT_INTERVAL]) &&
        want_positive_duration(c, f.key[T_COMMIT_INTERVAL], v, &p->commit_interval_ms) != 0)
        return -1;
    if ((v = f.val[T_STALL_WARNING]) &&
        want_positive_duration(c, f.key[T_STALL_WARNING], v, &p->stall_warning_ms) != 0)
        return -1;
    if ((v = f.val[T_STATE_DIR]) &&
        want_string(c, f.key[T_STATE_DIR], v, &p->state_dir) != 0)
        return -1;
    if ((v = f.val[T_WORKERS])) {
        if (want_int(c, f.key[T_WORKERS], v, 1, 64, &x) != 0)
            return -1;
        p->workers = (int)x;
    }
    if ((v = f.val[T_REPLICATION])) {
        if (want_int(c, f.key[T_REPLICATION], v, -1, INT16_MAX, &x) != 0)
            return -1;
        if (x == 0)
            return FAIL_AT(c, v, "'replication_factor' must be -1 (the broker's "
                                 "default.replication.factor) or at least 1, found '0'");
        p->replication_factor = (int32_t)x;
    }
    if ((v = f.val[T_PLUGINS]) &&
        want_strings(c, f.key[T_PLUGINS], v, "a list of strings", &p->plugins,
                     &p->plugin_marks, &p->plugin_count) != 0)
        return -1;
    if ((v = f.val[T_PLUGIN_PATH]) &&
        want_strings(c, f.key[T_PLUGIN_PATH], v, "a list of strings",
                     &p->plugin_path, NULL, &p->plugin_path_count) != 0)
        return -1;
    if ((v = f.val[T_POISON])) {
        if (want_scalar(c, f.key[T_POISON], v, "a poison policy") != 0)
            return -1;
        if (strcmp(v->text, "fail") == 0)
            p->poison = KS_POISON_FAIL;
        else if (strcmp(v->text, "skip") == 0)
            p->poison = KS_POISON_SKIP;
        else if (strcmp(v->text, "dead-letter") == 0)
            p->poison = KS_POISON_DEAD_LETTER;
        else
            return FAIL_AT(c, v,
                           "unknown poison policy '%s'; expected fail, skip or "
                           "dead-letter",
                           v->text);
    }
    if ((v = f.val[T_DEAD_LETTER]) &&
        want_topic(c, f.key[T_DEAD_LETTER], v, &p->dead_letter_topic) != 0)
        return -1;
    if ((v = f.val[T_METRICS]) && parse_metrics(c, f.key[T_METRICS], v) != 0)
        return -1;
    if ((v = f.val[T_STORES]) && parse_stores(c, f.key[T_STORES], v) != 0)
        return -1;
    if ((v = f.val[T_SOURCES]) && parse_sources(c, f.key[T_SOURCES], v) != 0)
        return -1;
    if ((v = f.val[T_TABLES]) && f.val[T_SOURCES] && parse_tables(c, f.key[T_TABLES], v) != 0)
        return -1;
    if ((v = f.val[T_NODES]) && parse_nodes(c, f.key[T_NODES], v) != 0)
        return -1;
    if ((v = f.val[T_SINKS]) && parse_sinks(c, f.key[T_SINKS], v) != 0)
        return -1;
    if ((v = f.val[T_OUTBOX]) && parse_outbox(c, f.key[T_OUTBOX], v) != 0)
        return -1;

    static const int required[] = {T_APPLICATION, T_KAFKA, T_SOURCES,
                                   T_SINKS};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        if (!f.val[required[i]])
            return missing(c, root, "pipeline", TOP_KEYS[required[i]]);

    if (!p->dead_letter_topic) {
        size_t len = strlen(p->application) + sizeof "-dlq";
        p->dead_letter_topic = malloc(len);
        if (!p->dead_letter_topic)
            return oom(c, root);
        snprintf(p->dead_letter_topic, len, "%s-dlq", p->application);
        if (!is_topic(p->dead_letter_topic))
            return FAIL_AT(c, f.val[T_APPLICATION],
                           "dead letter topic '%s' (from 'application') is "
                           "not a valid topic name; set 'dead_letter_topic'",
                           p->dead_letter_topic);
    }

    if (check_names(c) != 0 || check_refs(c) != 0 || check_cycles(c) != 0 ||
        link_tables(c) != 0 || add_used_stores(c) != 0 || check_unused_stores(c) != 0)
        return -1;
    return 0;
}

/* ------------------------------------------------------------------ */
/* Entry points                                                        */
/* ------------------------------------------------------------------ */

int ks_pipeline_parse(const char *name, const char *text, size_t len,
                      ks_pipeline **out, char *err, size_t errlen)
{
    pctx c = {NULL, err, errlen, 0};
    ks_ydoc doc;
    ks_yerr yerr;
    int rc;

    if (err && errlen)
        err[0] = '\0';
    if (out)
        *out = NULL;
    if (!name)
        name = "<string>";
    c.p = calloc(1, sizeof *c.p);
    if (!c.p) {
        if (err && errlen)
            snprintf(err, errlen, "%s:1:1: out of memory", name);
        return -1;
    }
    c.p->file = strdup(name);
    if (!c.p->file) {
        if (err && errlen)
            snprintf(err, errlen, "%s:1:1: out of memory", name);
        free(c.p);
        return -1;
    }
    if (!out || (!text && len)) {
        failf(&c, 1, 1, "no text or no result given");
        ks_pipeline_free(c.p);
        return -1;
    }
    c.p->guarantee = KS_GUARANTEE_EXACTLY_ONCE;
    c.p->commit_interval_ms = 100;
    c.p->stall_warning_ms = 60000;
    c.p->workers = 1;
    c.p->replication_factor = -1; /* the broker's default, as Kafka Streams 3.0+ */
    c.p->poison = KS_POISON_FAIL;
    c.p->state_dir = strdup("./state");
    if (!c.p->state_dir) {
        failf(&c, 1, 1, "out of memory");
        ks_pipeline_free(c.p);
        return -1;
    }

    if (ks_ydoc_parse(text ? text : "", len, &doc, &yerr) != 0) {
        failf(&c, yerr.line, yerr.col, "%s", yerr.msg);
        ks_pipeline_free(c.p);
        return -1;
    }
    if (!doc.root || ks_ynode_is_null(doc.root)) {
        failf(&c, 1, 1,
              "empty pipeline; expected a mapping with application, kafka, "
              "sources and sinks");
        rc = -1;
    } else if (doc.root->kind != KS_Y_MAP) {
        char buf[80];
        rc = FAIL_AT(&c, doc.root, "expected a mapping at the top level, "
                                   "found %s",
                     found(doc.root, buf, sizeof buf));
    } else {
        rc = parse_top(&c, doc.root);
    }
    ks_ydoc_free(&doc);
    if (rc != 0) {
        ks_pipeline_free(c.p);
        return -1;
    }
    *out = c.p;
    return 0;
}

int ks_pipeline_load(const char *path, ks_pipeline **out, char *err,
                     size_t errlen)
{
    FILE *fp;
    char *text = NULL;
    size_t len = 0, cap = 0;
    int rc;

    if (out)
        *out = NULL;
    if (!path) {
        if (err && errlen)
            snprintf(err, errlen, "(null): no file given");
        return -1;
    }
    fp = fopen(path, "rb");
    if (!fp) {
        if (err && errlen)
            snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    for (;;) {
        size_t got;
        if (len == cap) {
            size_t ncap = cap ? cap * 2 : 8192;
            char *n = realloc(text, ncap);
            if (!n) {
                free(text);
                fclose(fp);
                if (err && errlen)
                    snprintf(err, errlen, "%s: out of memory", path);
                return -1;
            }
            text = n;
            cap = ncap;
        }
        got = fread(text + len, 1, cap - len, fp);
        len += got;
        if (got == 0)
            break;
    }
    if (ferror(fp)) {
        int e = errno;
        free(text);
        fclose(fp);
        if (err && errlen)
            snprintf(err, errlen, "%s: cannot read: %s", path, strerror(e));
        return -1;
    }
    fclose(fp);
    rc = ks_pipeline_parse(path, text, len, out, err, errlen);
    free(text);
    return rc;
}
