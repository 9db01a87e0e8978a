/*
 * ops_pred.c - compile and evaluate the ops plugin's predicates
 * (ops_pred.h, docs/operators.md).
 */
#include "ops/ops_pred.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json/json_valid.h"

/* ---- scratch buffers ------------------------------------------------------ */

int ks_scratch_reserve(ks_scratch *s, size_t need)
{
    if (need <= s->cap)
        return 0;
    size_t cap = s->cap ? s->cap : 256;
    while (cap < need)
        cap *= 2;
    char *d = realloc(s->data, cap);
    if (!d)
        return -1;
    s->data = d;
    s->cap = cap;
    return 0;
}

int ks_scratch_add(ks_scratch *s, const void *data, size_t n)
{
    if (ks_scratch_reserve(s, s->len + n) != 0)
        return -1;
    if (n)
        memcpy(s->data + s->len, data, n);
    s->len += n;
    return 0;
}

void ks_scratch_free(ks_scratch *s)
{
    free(s->data);
    *s = (ks_scratch){0};
}

int ks_cfg_fail(ks_cfg_err *err, const char *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->what, sizeof err->what, fmt, ap);
    va_end(ap);
    snprintf(err->at, sizeof err->at, "%s", at);
    if (*at)
        snprintf(err->msg, sizeof err->msg, "at %s: %s", err->at, err->what);
    else
        snprintf(err->msg, sizeof err->msg, "%s", err->what);
    return -1;
}

/* `at` + "/" + seg into out (256 bytes): the place of a part of the config
 * for messages; a long place is cut, which only shortens a message. */
static void join(char *out, const char *at, const char *seg)
{
    if (snprintf(out, 256, "%s/%s", at, seg) >= 256)
        out[255] = '\0';
}

static void join_i(char *out, const char *at, size_t i)
{
    char n[24];
    snprintf(n, sizeof n, "%zu", i);
    join(out, at, n);
}

/* ---- the compiled form ------------------------------------------------------ */

typedef enum pkind { P_ALL, P_ANY, P_NOT, P_LEAF } pkind;

typedef enum pop {
    OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE,
    OP_EXISTS, OP_CONTAINS, OP_PREFIX, OP_IN, OP_IS
} pop;

static const struct {
    const char *name, *alias;
    pop op;
} ops[] = {
    {"eq", "==", OP_EQ}, {"ne", "!=", OP_NE}, {"lt", "<", OP_LT},
    {"le", "<=", OP_LE}, {"gt", ">", OP_GT}, {"ge", ">=", OP_GE},
    {"exists", NULL, OP_EXISTS}, {"contains", NULL, OP_CONTAINS},
    {"prefix", NULL, OP_PREFIX}, {"in", NULL, OP_IN}, {"is", NULL, OP_IS},
};
#define OP_NAMES "eq (==), ne (!=), lt (<), le (<=), gt (>), ge (>=), exists, " \
                 "contains, prefix, in, is"

static const char *const type_names[] = {
    NULL, "null", "boolean", "number", "string", "array", "object"};

/* A constant of a leaf: a JSON scalar. */
typedef struct operand {
    ks_json_type type;
    double num;
    char *str; /* decoded, NUL-terminated for messages */
    size_t len;
    int b;
} operand;

struct ks_pred {
    pkind kind;
    pop op;
    char *ptr; /* decoded pointer text */
    size_t ptr_len;
    operand *vals; /* one, or the list of `in` */
    size_t nvals;
    ks_pred **kids; /* all / any / not */
    size_t nkids;
};

void ks_pred_free(ks_pred *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->nkids; i++)
        ks_pred_free(p->kids[i]);
    for (size_t i = 0; i < p->nvals; i++)
        free(p->vals[i].str);
    free(p->kids);
    free(p->vals);
    free(p->ptr);
    free(p);
}

/* ---- compiling ------------------------------------------------------------- */

/* A config string decoded into a new NUL-terminated copy. */
static char *dup_string(const ks_json_span *s, size_t *len)
{
    size_t n;
    if (ks_json_string(s, NULL, 0, &n) != 0)
        return NULL;
    char *out = malloc(n + 1);
    if (!out)
        return NULL;
    ks_json_string(s, out, n, &n);
    out[n] = '\0';
    *len = n;
    return out;
}

static int compile_operand(const ks_json_span *v, const char *at, operand *o, ks_cfg_err *err)
{
    o->type = v->type;
    switch (v->type) {
    case KS_JSON_NUMBER:
        return ks_json_double(v, &o->num) == 0 ? 0 : ks_cfg_fail(err, at, "bad number");
    case KS_JSON_STRING:
        o->str = dup_string(v, &o->len);
        return o->str ? 0 : ks_cfg_fail(err, at, "bad string or out of memory");
    case KS_JSON_BOOL:
        o->b = v->data[0] == 't';
        return 0;
    case KS_JSON_NULL:
        return 0;
    default:
        return ks_cfg_fail(err, at, "expected a number, string, true, false or null, found %s",
                           type_names[v->type]);
    }
}

/* Check the operand of `op` and store it. */
static int leaf_operand(ks_pred *p, const ks_json_span *v, const char *at, ks_cfg_err *err)
{
    if (p->op == OP_IN) {
        ks_json_iter it;
        ks_json_span e;
        if (v->type != KS_JSON_ARRAY || ks_json_iter_init(&it, v) != 0)
            return ks_cfg_fail(err, at, "'in' needs a list of values, e.g. in: [a, b]");
        size_t n = 0;
        while (ks_json_iter_next(&it, NULL, &e) == 1)
            n++;
        p->vals = calloc(n ? n : 1, sizeof *p->vals);
        if (!p->vals)
            return ks_cfg_fail(err, at, "out of memory");
        ks_json_iter_init(&it, v);
        for (; p->nvals < n && ks_json_iter_next(&it, NULL, &e) == 1; p->nvals++) {
            char sub[256];
            join_i(sub, at, p->nvals);
            if (compile_operand(&e, sub, &p->vals[p->nvals], err) != 0)
                return -1;
        }
        return 0;
    }
    p->vals = calloc(1, sizeof *p->vals);
    if (!p->vals)
        return ks_cfg_fail(err, at, "out of memory");
    p->nvals = 1;
    if (compile_operand(v, at, p->vals, err) != 0)
        return -1;
    ks_json_type t = p->vals->type;
    switch (p->op) {
    case OP_LT: case OP_LE: case OP_GT: case OP_GE:
        if (t != KS_JSON_NUMBER && t != KS_JSON_STRING)
            return ks_cfg_fail(err, at, "an order comparison needs a number or a string");
        return 0;
    case OP_PREFIX:
        if (t != KS_JSON_STRING)
            return ks_cfg_fail(err, at, "'prefix' needs a string");
        return 0;
    case OP_EXISTS:
        if (t != KS_JSON_BOOL)
            return ks_cfg_fail(err, at, "'exists' needs true or false");
        return 0;
    case OP_IS:
        if (t == KS_JSON_NULL) { /* `is: null` unquoted is YAML's null */
            p->vals->num = KS_JSON_NULL;
            return 0;
        }
        for (int i = KS_JSON_NULL; i <= KS_JSON_OBJECT; i++)
            if (t == KS_JSON_STRING && strcmp(p->vals->str, type_names[i]) == 0) {
                p->vals->num = i;
                return 0;
            }
        return ks_cfg_fail(err, at, "'is' needs one of null, boolean, number, string, "
                                    "array, object");
    default:
        return 0;
    }
}

static int check_pointer_text(const char *s, size_t n)
{
    if (n && s[0] != '/')
        return -1;
    for (size_t i = 0; i < n; i++)
        if (s[i] == '~' && (i + 1 == n || (s[i + 1] != '0' && s[i + 1] != '1')))
            return -1;
    return 0;
}

/* { path: P, OP: V } */
static int compile_leaf(ks_pred *p, const ks_json_span *in, const char *at, ks_cfg_err *err)
{
    ks_json_iter it;
    ks_json_span k, v, opv = {0};
    char sub[256];
    int have_op = 0;
    p->kind = P_LEAF;
    ks_json_iter_init(&it, in);
    while (ks_json_iter_next(&it, &k, &v) == 1) {
        char name[32];
        size_t n;
        if (ks_json_string(&k, name, sizeof name - 1, &n) != 0 || n >= sizeof name)
            n = sizeof name - 1;
        name[n] = '\0';
        join(sub, at, name);
        if (strcmp(name, "path") == 0) {
            if (p->ptr)
                return ks_cfg_fail(err, sub, "'path' twice");
            if (v.type != KS_JSON_STRING)
                return ks_cfg_fail(err, sub, "'path' must be a JSON pointer string "
                                             "(\"\" for the whole value, /a/b for a field)");
            p->ptr = dup_string(&v, &p->ptr_len);
            if (!p->ptr)
                return ks_cfg_fail(err, sub, "out of memory");
            if (check_pointer_text(p->ptr, p->ptr_len) != 0)
                return ks_cfg_fail(err, sub, "'%s' is not a JSON pointer: it must be empty or "
                                   "start with '/', and '~' must be followed by 0 or 1", p->ptr);
            continue;
        }
        size_t i = 0;
        while (i < sizeof ops / sizeof ops[0] && strcmp(ops[i].name, name) != 0 &&
               !(ops[i].alias && strcmp(ops[i].alias, name) == 0))
            i++;
        if (i == sizeof ops / sizeof ops[0])
            return ks_cfg_fail(err, sub, "unknown key '%s'; a predicate is all, any, not, or "
                               "path with one of: " OP_NAMES, name);
        if (have_op)
            return ks_cfg_fail(err, sub, "one operator per predicate; combine several "
                                         "with all: [...]");
        have_op = 1;
        p->op = ops[i].op;
        opv = v;
        if (leaf_operand(p, &opv, sub, err) != 0)
            return -1;
    }
    if (!p->ptr)
        return ks_cfg_fail(err, at, "a comparison needs 'path' (a JSON pointer)");
    if (!have_op)
        return ks_cfg_fail(err, at, "'path' needs an operator: " OP_NAMES);
    return 0;
}

static int compile_at(const ks_json_span *in, const char *at, int depth, ks_pred **out,
                      ks_cfg_err *err);

/* { all: [..] } { any: [..] } { not: P } */
static int compile_combinator(ks_pred *p, const ks_json_span *k, const ks_json_span *v,
                              const char *at, int depth, ks_cfg_err *err)
{
    char sub[256];
    p->kind = ks_json_string_eq(k, "all", 3) ? P_ALL
              : ks_json_string_eq(k, "any", 3) ? P_ANY : P_NOT;
    const char *name = p->kind == P_ALL ? "all" : p->kind == P_ANY ? "any" : "not";
    join(sub, at, name);
    if (p->kind == P_NOT) {
        p->kids = calloc(1, sizeof *p->kids);
        if (!p->kids)
            return ks_cfg_fail(err, sub, "out of memory");
        p->nkids = 1;
        return compile_at(v, sub, depth + 1, &p->kids[0], err);
    }
    ks_json_iter it;
    ks_json_span e;
    if (v->type != KS_JSON_ARRAY || ks_json_iter_init(&it, v) != 0)
        return ks_cfg_fail(err, sub, "'%s' needs a list of predicates", name);
    size_t n = 0;
    while (ks_json_iter_next(&it, NULL, &e) == 1)
        n++;
    if (n == 0)
        return ks_cfg_fail(err, sub, "'%s' needs at least one predicate", name);
    p->kids = calloc(n, sizeof *p->kids);
    if (!p->kids)
        return ks_cfg_fail(err, sub, "out of memory");
    ks_json_iter_init(&it, v);
    for (size_t i = 0; i < n && ks_json_iter_next(&it, NULL, &e) == 1; i++) {
        char item[256];
        join_i(item, sub, i);
        p->nkids++;
        if (compile_at(&e, item, depth + 1, &p->kids[i], err) != 0)
            return -1;
    }
    return 0;
}

static int compile_at(const ks_json_span *in, const char *at, int depth, ks_pred **out,
                      ks_cfg_err *err)
{
    *out = NULL;
    if (depth > KS_PRED_MAX_DEPTH)
        return ks_cfg_fail(err, at, "predicates nest deeper than %d", KS_PRED_MAX_DEPTH);
    if (in->type != KS_JSON_OBJECT)
        return ks_cfg_fail(err, at, "a predicate is a mapping: { path: /a, eq: 1 }, "
                                    "{ all: [...] }, { any: [...] } or { not: {...} }");
    ks_pred *p = calloc(1, sizeof *p);
    if (!p)
        return ks_cfg_fail(err, at, "out of memory");
    *out = p;
    ks_json_iter it;
    ks_json_span k, v;
    size_t members = 0, comb = 0;
    ks_json_span ck = {0}, cv = {0};
    ks_json_iter_init(&it, in);
    while (ks_json_iter_next(&it, &k, &v) == 1) {
        members++;
        if (ks_json_string_eq(&k, "all", 3) || ks_json_string_eq(&k, "any", 3) ||
            ks_json_string_eq(&k, "not", 3)) {
            comb++;
            ck = k;
            cv = v;
        }
    }
    if (comb && members > 1)
        return ks_cfg_fail(err, at, "all, any and not stand alone in their mapping; "
                                    "nest them: { all: [ {...}, { not: {...} } ] }");
    if (members == 0)
        return ks_cfg_fail(err, at, "an empty predicate");
    if (comb)
        return compile_combinator(p, &ck, &cv, at, depth, err);
    return compile_leaf(p, in, at, err);
}

int ks_pred_compile(const ks_json_span *in, const char *at, ks_pred **out, ks_cfg_err *err)
{
    if (compile_at(in, at, 0, out, err) != 0) {
        ks_pred_free(*out);
        *out = NULL;
        return -1;
    }
    return 0;
}

int ks_pred_compile_text(const char *text, ks_pred **out, ks_cfg_err *err)
{
    ks_json_span root;
    *out = NULL;
    if (!ks_json_valid(text, strlen(text)) || ks_json_root(text, strlen(text), &root) != 0)
        return ks_cfg_fail(err, "", "expected a predicate mapping, found '%s'", text);
    return ks_pred_compile(&root, "", out, err);
}

/* ---- evaluating ------------------------------------------------------------ */

static int op_eq(const ks_json_span *v, const operand *o)
{
    if (v->type != o->type)
        return 0;
    switch (o->type) {
    case KS_JSON_NUMBER: {
        double d;
        return ks_json_double(v, &d) == 0 && d == o->num;
    }
    case KS_JSON_STRING:
        return ks_json_string_eq(v, o->str, o->len);
    case KS_JSON_BOOL:
        return (v->data[0] == 't') == o->b;
    default:
        return 1; /* null */
    }
}

/* The string span v decoded into the scratch buffer; NULL: out of memory
 * or a bad string. */
static const char *decoded(const ks_json_span *v, ks_scratch *s, size_t *len)
{
    size_t n;
    if (ks_json_string(v, NULL, 0, &n) != 0 || ks_scratch_reserve(s, n + 1) != 0)
        return NULL;
    ks_json_string(v, s->data, n, len);
    return s->data;
}

/* -1/0/1 ordering v against o, 2 when not comparable, -2 out of memory. */
static int op_order(const ks_json_span *v, const operand *o, ks_scratch *s)
{
    if (v->type != o->type)
        return 2;
    if (o->type == KS_JSON_NUMBER) {
        double d;
        if (ks_json_double(v, &d) != 0)
            return 2;
        return d < o->num ? -1 : d > o->num;
    }
    size_t n;
    const char *d = decoded(v, s, &n);
    if (!d)
        return -2;
    int c = memcmp(d, o->str, n < o->len ? n : o->len);
    if (c == 0)
        c = n < o->len ? -1 : n > o->len;
    return c < 0 ? -1 : c > 0;
}

static int has_substring(const char *h, size_t hn, const char *n, size_t nn)
{
    if (nn == 0)
        return 1;
    for (size_t i = 0; i + nn <= hn; i++)
        if (h[i] == n[0] && memcmp(h + i, n, nn) == 0)
            return 1;
    return 0;
}

static int op_contains(const ks_json_span *v, const operand *o, ks_scratch *s)
{
    if (v->type == KS_JSON_ARRAY) {
        ks_json_iter it;
        ks_json_span e;
        ks_json_iter_init(&it, v);
        while (ks_json_iter_next(&it, NULL, &e) == 1)
            if (op_eq(&e, o))
                return 1;
        return 0;
    }
    if (v->type != KS_JSON_STRING || o->type != KS_JSON_STRING)
        return 0;
    size_t n;
    const char *d = decoded(v, s, &n);
    if (!d)
        return -1;
    return has_substring(d, n, o->str, o->len);
}

static int eval_leaf(const ks_pred *p, const ks_json_span *doc, ks_scratch *s)
{
    ks_json_span v;
    int found = doc && ks_json_at(doc, p->ptr, p->ptr_len, &v) == KS_JSON_FOUND;
    if (p->op == OP_EXISTS)
        return found == p->vals[0].b;
    if (!found)
        return 0; /* every other operator is false on a missing field */
    const operand *o = p->vals;
    int c;
    switch (p->op) {
    case OP_EQ: return op_eq(&v, o);
    case OP_NE: return !op_eq(&v, o);
    case OP_LT: case OP_LE: case OP_GT: case OP_GE:
        c = op_order(&v, o, s);
        if (c == -2)
            return -1;
        if (c == 2)
            return 0;
        return p->op == OP_LT ? c < 0 : p->op == OP_LE ? c <= 0 : p->op == OP_GT ? c > 0 : c >= 0;
    case OP_CONTAINS: return op_contains(&v, o, s);
    case OP_PREFIX: {
        size_t n;
        if (v.type != KS_JSON_STRING || ks_json_string(&v, NULL, 0, &n) != 0)
            return 0;
        if (n < o->len)
            return 0;
        if (ks_scratch_reserve(s, o->len + 1) != 0)
            return -1;
        ks_json_string(&v, s->data, o->len, &n);
        return memcmp(s->data, o->str, o->len) == 0;
    }
    case OP_IN:
        for (size_t i = 0; i < p->nvals; i++)
            if (op_eq(&v, &p->vals[i]))
                return 1;
        return 0;
    case OP_IS: return (int)v.type == (int)o->num;
    default: return 0;
    }
}

int ks_pred_eval(const ks_pred *p, const ks_json_span *doc, ks_scratch *scratch)
{
    switch (p->kind) {
    case P_LEAF:
        return eval_leaf(p, doc, scratch);
    case P_NOT: {
        int r = ks_pred_eval(p->kids[0], doc, scratch);
        return r < 0 ? r : !r;
    }
    default:
        for (size_t i = 0; i < p->nkids; i++) {
            int r = ks_pred_eval(p->kids[i], doc, scratch);
            if (r < 0)
                return r;
            if (p->kind == P_ALL ? !r : r)
                return r;
        }
        return p->kind == P_ALL;
    }
}
