/*
 * yaml_tree.c - libyaml's document loader, copied into plain structs.
 */
#include "config/yaml_tree.h"

#include <ctype.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "json/json_valid.h"

static int set_err(ks_yerr *err, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int set_err(ks_yerr *err, int line, int col, const char *fmt, ...)
{
    va_list ap;
    err->line = line;
    err->col = col;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return -1;
}

/* Line and column (1-based) of byte `offset` in text: for reader errors,
 * which libyaml reports by offset only. */
static void offset_mark(const char *text, size_t len, size_t offset,
                        int *line, int *col)
{
    int l = 1, c = 1;
    if (offset > len)
        offset = len;
    for (size_t i = 0; i < offset; i++) {
        unsigned char ch = (unsigned char)text[i];
        if (ch == '\n') {
            l++;
            c = 1;
        } else if ((ch & 0xc0) != 0x80) { /* count characters, not bytes */
            c++;
        }
    }
    *line = l;
    *col = c;
}

static int parser_err(const yaml_parser_t *parser, const char *text,
                      size_t len, ks_yerr *err)
{
    int line, col;
    if (parser->error == YAML_MEMORY_ERROR)
        return set_err(err, 1, 1, "out of memory");
    if (parser->error == YAML_READER_ERROR) {
        offset_mark(text, len, parser->problem_offset, &line, &col);
    } else {
        line = (int)parser->problem_mark.line + 1;
        col = (int)parser->problem_mark.column + 1;
    }
    return set_err(err, line, col, "YAML syntax error: %s",
                   parser->problem ? parser->problem : "unknown error");
}

void ks_ydoc_free(ks_ydoc *doc)
{
    if (!doc)
        return;
    for (size_t i = 0; i < doc->node_count; i++) {
        free(doc->nodes[i].text);
        free(doc->nodes[i].items);
        free(doc->nodes[i].pairs);
    }
    free(doc->nodes);
    doc->nodes = NULL;
    doc->root = NULL;
    doc->node_count = 0;
}

/* Node `index` (1-based, as libyaml numbers them) of our copy. */
static ks_ynode *at(ks_ydoc *doc, int index)
{
    if (index < 1 || (size_t)index > doc->node_count)
        return NULL;
    return &doc->nodes[index - 1];
}

/* One scalar key of a mapping and its position in it, for sorting. */
typedef struct keyref {
    const ks_ynode *key;
    size_t pos;
} keyref;

static int text_cmp(const ks_ynode *x, const ks_ynode *y)
{
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return memcmp(x->text, y->text, x->len);
}

/* By text, then by position: equal keys end up together, first one first. */
static int keyref_cmp(const void *a, const void *b)
{
    const keyref *x = a, *y = b;
    int c = text_cmp(x->key, y->key);
    if (c)
        return c;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* No two scalar keys of mapping m alike. Reports the repeat that comes
 * first in the mapping (as a pairwise scan would) and where its first
 * occurrence is. 0, or -1 with err set. */
static int check_duplicates(const ks_ynode *m, ks_yerr *err)
{
    if (m->count < 2)
        return 0;
    keyref *refs = malloc(m->count * sizeof *refs);
    if (!refs)
        return set_err(err, m->line, m->col, "out of memory");
    size_t k = 0;
    for (size_t j = 0; j < m->count; j++)
        if (m->pairs[j].key->kind == KS_Y_SCALAR)
            refs[k++] = (keyref){m->pairs[j].key, j};
    qsort(refs, k, sizeof *refs, keyref_cmp);
    const keyref *repeat = NULL, *first = NULL;
    for (size_t a = 0; a < k;) {
        size_t b = a + 1;
        while (b < k && text_cmp(refs[a].key, refs[b].key) == 0)
            b++;
        /* refs[a] is the group's first occurrence, refs[a + 1] its first repeat */
        if (b > a + 1 && (!repeat || refs[a + 1].pos < repeat->pos)) {
            repeat = &refs[a + 1];
            first = &refs[a];
        }
        a = b;
    }
    int rc = 0;
    if (repeat)
        rc = set_err(err, repeat->key->line, repeat->key->col,
                     "duplicate key '%s'; first defined at line %d", repeat->key->text,
                     first->key->line);
    free(refs);
    return rc;
}

static int copy_document(yaml_document_t *ydoc, ks_ydoc *doc, ks_yerr *err)
{
    size_t n = (size_t)(ydoc->nodes.top - ydoc->nodes.start);
    doc->nodes = calloc(n ? n : 1, sizeof *doc->nodes);
    if (!doc->nodes)
        return set_err(err, 1, 1, "out of memory");
    doc->node_count = n;

    for (size_t i = 0; i < n; i++) {
        const yaml_node_t *y = &ydoc->nodes.start[i];
        ks_ynode *k = &doc->nodes[i];
        k->line = (int)y->start_mark.line + 1;
        k->col = (int)y->start_mark.column + 1;
        switch (y->type) {
        case YAML_SCALAR_NODE: {
            size_t len = y->data.scalar.length;
            k->kind = KS_Y_SCALAR;
            k->text = malloc(len + 1);
            if (!k->text)
                return set_err(err, k->line, k->col, "out of memory");
            memcpy(k->text, y->data.scalar.value, len);
            k->text[len] = '\0';
            k->len = len;
            k->plain = y->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
            if (memchr(k->text, '\0', len))
                return set_err(err, k->line, k->col,
                               "a scalar contains a NUL character");
            break;
        }
        case YAML_SEQUENCE_NODE: {
            size_t cnt = (size_t)(y->data.sequence.items.top -
                                  y->data.sequence.items.start);
            k->kind = KS_Y_SEQ;
            k->items = calloc(cnt ? cnt : 1, sizeof *k->items);
            if (!k->items)
                return set_err(err, k->line, k->col, "out of memory");
            k->count = cnt;
            for (size_t j = 0; j < cnt; j++) {
                k->items[j] = at(doc, y->data.sequence.items.start[j]);
                if (!k->items[j])
                    return set_err(err, k->line, k->col,
                                   "YAML syntax error: bad node reference");
            }
            break;
        }
        case YAML_MAPPING_NODE: {
            size_t cnt = (size_t)(y->data.mapping.pairs.top -
                                  y->data.mapping.pairs.start);
            k->kind = KS_Y_MAP;
            k->pairs = calloc(cnt ? cnt : 1, sizeof *k->pairs);
            if (!k->pairs)
                return set_err(err, k->line, k->col, "out of memory");
            k->count = cnt;
            for (size_t j = 0; j < cnt; j++) {
                k->pairs[j].key = at(doc, y->data.mapping.pairs.start[j].key);
                k->pairs[j].value =
                    at(doc, y->data.mapping.pairs.start[j].value);
                if (!k->pairs[j].key || !k->pairs[j].value)
                    return set_err(err, k->line, k->col,
                                   "YAML syntax error: bad node reference");
            }
            break;
        }
        default:
            return set_err(err, k->line, k->col,
                           "YAML syntax error: empty node");
        }
    }

    /* Duplicate keys, once every scalar has its text: sorted per mapping,
     * O(k log k), since a hostile file may hold a mapping of 10^5 keys. */
    for (size_t i = 0; i < n; i++) {
        if (doc->nodes[i].kind == KS_Y_MAP && check_duplicates(&doc->nodes[i], err) != 0)
            return -1;
    }
    doc->root = n ? &doc->nodes[0] : NULL;
    return 0;
}

int ks_ydoc_parse(const char *text, size_t len, ks_ydoc *doc, ks_yerr *err)
{
    yaml_parser_t parser;
    yaml_document_t ydoc;
    int rc = -1;

    memset(doc, 0, sizeof *doc);
    memset(err, 0, sizeof *err);
    if (!yaml_parser_initialize(&parser))
        return set_err(err, 1, 1, "out of memory");
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);

    if (!yaml_parser_load(&parser, &ydoc)) {
        parser_err(&parser, text, len, err);
        goto out;
    }
    if (!yaml_document_get_root_node(&ydoc)) { /* no document at all */
        yaml_document_delete(&ydoc);
        rc = 0;
        goto out;
    }
    rc = copy_document(&ydoc, doc, err);
    yaml_document_delete(&ydoc);
    if (rc != 0)
        goto out;

    /* Exactly one document: the next load must find the stream's end. */
    rc = -1;
    if (!yaml_parser_load(&parser, &ydoc)) {
        parser_err(&parser, text, len, err);
        goto out;
    }
    if (yaml_document_get_root_node(&ydoc)) {
        set_err(err, (int)ydoc.start_mark.line + 1,
                (int)ydoc.start_mark.column + 1,
                "expected one YAML document, found a second one");
        yaml_document_delete(&ydoc);
        goto out;
    }
    yaml_document_delete(&ydoc);
    rc = 0;

out:
    yaml_parser_delete(&parser);
    if (rc != 0)
        ks_ydoc_free(doc);
    return rc;
}

int ks_ynode_is_null(const ks_ynode *n)
{
    if (!n || n->kind != KS_Y_SCALAR || !n->plain)
        return 0;
    return n->len == 0 || strcmp(n->text, "~") == 0 ||
           strcmp(n->text, "null") == 0 || strcmp(n->text, "Null") == 0 ||
           strcmp(n->text, "NULL") == 0;
}

const ks_ynode *ks_ynode_get(const ks_ynode *map, const char *key)
{
    if (!map || map->kind != KS_Y_MAP)
        return NULL;
    for (size_t i = 0; i < map->count; i++) {
        const ks_ynode *k = map->pairs[i].key;
        if (k->kind == KS_Y_SCALAR && strcmp(k->text, key) == 0)
            return map->pairs[i].value;
    }
    return NULL;
}

/* ---- YAML to JSON -------------------------------------------------------- */

typedef struct jbuf {
    char *data;
    size_t len, cap;
    int oom;
} jbuf;

static void jput(jbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 128;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d) {
            b->oom = 1;
            return;
        }
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static void jstring(jbuf *b, const char *s, size_t n)
{
    jput(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            jput(b, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            jput(b, esc, 6);
        } else {
            jput(b, (const char *)&c, 1);
        }
    }
    jput(b, "\"", 1);
}

/* A plain scalar that is a JSON number kstreams' JSON check accepts. */
static int json_number(const char *s, size_t n)
{
    size_t i = s[0] == '-';
    if (i == n || !isdigit((unsigned char)s[i]) || (s[i] == '0' && i + 1 < n &&
                                                     isdigit((unsigned char)s[i + 1])))
        return 0;
    for (; i < n; i++)
        if (!strchr("0123456789.eE+-", s[i]))
            return 0;
    return ks_json_valid(s, n);
}

/* Where yjson is: the path of the node being rendered, and who to tell. */
typedef struct ypath {
    char path[1024];
    size_t len;
    ks_yjson_at_fn at;
    void *arg;
} ypath;

/* Append "/seg" to the path; the old length, to restore. */
static size_t ypath_push(ypath *y, const char *seg)
{
    size_t old = y->len;
    int n = snprintf(y->path + y->len, sizeof y->path - y->len, "/%s", seg);
    y->len = n < 0 || (size_t)n >= sizeof y->path - y->len ? sizeof y->path - 1 : y->len + (size_t)n;
    return old;
}

static int yjson(const ks_ynode *n, jbuf *b, int depth, const ks_ynode **bad, char *why,
                 size_t whylen, ypath *y);

/* Member or item i of the container n: its path, its mark, its JSON. */
static int yjson_child(const ks_ynode *n, size_t i, jbuf *b, int depth, const ks_ynode **bad,
                       char *why, size_t whylen, ypath *y)
{
    int map = n->kind == KS_Y_MAP;
    const ks_ynode *k = map ? n->pairs[i].key : n->items[i];
    char idx[24];
    snprintf(idx, sizeof idx, "%zu", i);
    size_t old = ypath_push(y, map ? k->text : idx);
    if (y->at && y->at(y->arg, y->path, k->line, k->col) != 0)
        b->oom = 1;
    int rc = yjson(map ? n->pairs[i].value : n->items[i], b, depth + 1, bad, why, whylen, y);
    y->len = old;
    y->path[old] = '\0';
    return rc;
}

static int yjson(const ks_ynode *n, jbuf *b, int depth, const ks_ynode **bad, char *why,
                 size_t whylen, ypath *y)
{
    if (depth > KS_YJSON_MAX_DEPTH) {
        *bad = n;
        snprintf(why, whylen, "nested deeper than %d levels", KS_YJSON_MAX_DEPTH);
        return -1;
    }
    if (n->kind == KS_Y_SCALAR) {
        if (ks_ynode_is_null(n))
            jput(b, "null", 4);
        else if (n->plain && (!strcmp(n->text, "true") || !strcmp(n->text, "True") ||
                              !strcmp(n->text, "TRUE")))
            jput(b, "true", 4);
        else if (n->plain && (!strcmp(n->text, "false") || !strcmp(n->text, "False") ||
                              !strcmp(n->text, "FALSE")))
            jput(b, "false", 5);
        else if (n->plain && json_number(n->text, n->len))
            jput(b, n->text, n->len);
        else
            jstring(b, n->text, n->len);
        return 0;
    }
    int map = n->kind == KS_Y_MAP;
    jput(b, map ? "{" : "[", 1);
    for (size_t i = 0; i < n->count; i++) {
        if (i)
            jput(b, ",", 1);
        if (map) {
            const ks_ynode *k = n->pairs[i].key;
            if (k->kind != KS_Y_SCALAR) {
                *bad = k;
                snprintf(why, whylen, "expected a scalar as a mapping key, found a %s",
                         k->kind == KS_Y_MAP ? "mapping" : "list");
                return -1;
            }
            jstring(b, k->text, k->len);
            jput(b, ":", 1);
        }
        if (yjson_child(n, i, b, depth, bad, why, whylen, y) != 0)
            return -1;
    }
    jput(b, map ? "}" : "]", 1);
    return 0;
}

int ks_ynode_json(const ks_ynode *n, char **out, const ks_ynode **bad, char *why,
                  size_t whylen, ks_yjson_at_fn at, void *arg)
{
    jbuf b = {0};
    ypath y = {.at = at, .arg = arg};
    *out = NULL;
    if (at && at(arg, "", n->line, n->col) != 0)
        b.oom = 1;
    if (yjson(n, &b, 0, bad, why, whylen, &y) != 0) {
        free(b.data);
        return -1;
    }
    if (b.oom) {
        free(b.data);
        *bad = n;
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    *out = b.data;
    return 0;
}
