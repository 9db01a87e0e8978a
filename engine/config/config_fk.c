/*
 * config_fk.c - the foreign-key join node `type: join.fk` unfolded into the
 * three nodes that run its subscription/response protocol
 * (docs/tables-and-joins.md "Foreign-key joins"):
 *
 *   NAME-subscribe  join.fk_subscribe  from: LEFT, store NAME-foreign-keys
 *   NAME-register   join.fk_register   from: [NAME-subscribe, RIGHT],
 *                                      store NAME-subscriptions; reads the
 *                                      topic APP-NAME-subscription-registration
 *   NAME            join.fk_resolve    from: NAME-register, table: LEFT;
 *                                      reads APP-NAME-subscription-response
 *
 * The two topics are the repartition topics the topology inserts in front
 * of the last two (the first two change keys), named so (repartition_topic).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_internal.h"

/* Remove config key `key` from s into *out (the caller owns it): 1, or 0
 * when s has no such key. */
static int take(ks_cfg_scalars *s, const char *key, ks_cfg_scalar *out)
{
    for (size_t i = 0; i < s->count; i++)
        if (s->items[i].key && strcmp(s->items[i].key, key) == 0) {
            *out = s->items[i];
            memmove(&s->items[i], &s->items[i + 1], (s->count - i - 1) * sizeof *s->items);
            s->count--;
            return 1;
        }
    return 0;
}

static char *join3(const char *a, const char *b, const char *c)
{
    size_t n = strlen(a) + strlen(b) + strlen(c) + 1;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s%s%s", a, b, c);
    return s;
}

/* A config of two scalars (ownership of `first` moves in; `key2` = `val2`
 * copied). 0 or -1 (out of memory). */
static int config2(ks_cfg_scalars *s, ks_cfg_scalar *first, const char *key2, const char *val2)
{
    s->items = calloc(2, sizeof *s->items);
    if (!s->items)
        return -1;
    s->items[0] = *first;
    memset(first, 0, sizeof *first);
    s->items[1] = (ks_cfg_scalar){.key = strdup(key2), .value = strdup(val2),
                                  .mark = s->items[0].mark, .key_mark = s->items[0].key_mark};
    s->count = 2;
    return s->items[1].key && s->items[1].value ? 0 : -1;
}

/* s (empty) := { key: val }, marked at m. 0, or -1 when out of memory. */
static int config1(ks_cfg_scalars *s, const char *key, const char *val, ks_mark m)
{
    if (!(s->items = calloc(1, sizeof *s->items)))
        return -1;
    s->items[0] = (ks_cfg_scalar){.key = strdup(key), .value = strdup(val), .mark = m,
                                  .key_mark = m};
    s->count = 1;
    return s->items[0].key && s->items[0].value ? 0 : -1;
}

/* A node with one or two inputs and one store, marks from `at`. */
static int make_node(ks_cfg_node *out, const ks_cfg_node *at, const char *name,
                     const char *processor, const char *in1, ks_mark m1, const char *in2,
                     ks_mark m2, const char *store)
{
    size_t nin = in2 ? 2 : 1;
    *out = (ks_cfg_node){.name = strdup(name), .type = join3("join.", processor, ""),
                         .plugin = strdup("join"), .processor = strdup(processor),
                         .from = calloc(2, sizeof(char *)),
                         .from_marks = calloc(2, sizeof(ks_mark)), .from_count = nin,
                         .stores = calloc(1, sizeof(char *)),
                         .store_marks = calloc(1, sizeof(ks_mark)), .store_count = 1,
                         .mark = at->mark, .type_mark = at->type_mark,
                         .name_mark = at->name_mark};
    if (!out->name || !out->type || !out->plugin || !out->processor || !out->from ||
        !out->from_marks || !out->stores || !out->store_marks)
        return -1;
    out->from[0] = strdup(in1);
    out->from_marks[0] = m1;
    if (in2) {
        out->from[1] = strdup(in2);
        out->from_marks[1] = m2;
    }
    out->stores[0] = strdup(store);
    out->store_marks[0] = at->mark;
    return out->from[0] && (!in2 || out->from[1]) && out->stores[0] ? 0 : -1;
}

static const ks_cfg_source *table_named(const ks_pipeline *p, const char *name)
{
    const ks_cfg_source *s = name ? ks_pipeline_source(p, name) : NULL;
    return s && s->table ? s : NULL;
}

/* The checks of fk node i before it is unfolded; 0 or -1 (reported). */
static int check_fk(pctx *c, const ks_cfg_node *n, const ks_cfg_scalar *right,
                    const ks_cfg_scalar *fk, int has_right, int has_fk)
{
    ks_pipeline *p = c->p;
    if (n->table || n->store_count)
        return FAIL_MARK(c, n->mark,
                         "node '%s': a foreign-key join keeps stores of its own and names "
                         "its tables in `from:` (left) and `config: { right: }`; remove "
                         "`%s:`",
                         n->name, n->table ? "table" : "store");
    if (n->from_count != 1 || !table_named(p, n->from[0]))
        return FAIL_MARK(c, n->from_marks[0],
                         "node '%s': a foreign-key join reads one left table, `from: "
                         "TABLE` (a table under 'tables')",
                         n->name);
    const ks_cfg_function *fn = ks_cfg_node_function(n, "foreign_key");
    if (has_fk && fn)
        return FAIL_MARK(c, fn->mark,
                         "node '%s': the foreign key comes from `foreign_key:` or from "
                         "`functions: { foreign_key: }`, not both",
                         n->name);
    if (!has_right || (!has_fk && !fn))
        return FAIL_MARK(c, n->mark, "node '%s': a foreign-key join needs config key %s",
                         n->name, has_right ? "'foreign_key' (or functions: { foreign_key: })"
                                            : "'right'");
    if (!table_named(p, right->value))
        return FAIL_MARK(c, right->mark, "node '%s': right '%s' is not a table (under "
                                         "'tables')",
                         n->name, right->value ? right->value : "");
    if (has_fk && (!fk->value || fk->value[0] != '/'))
        return FAIL_MARK(c, fk->mark,
                         "node '%s': foreign_key '%s' is not a JSON pointer (e.g. "
                         "/customer_id)",
                         n->name, fk->value ? fk->value : "");
    return 0;
}

/* Move the function of `role` (if any) from node `from` to node `to`,
 * which names none yet. 0, or -1 when out of memory. */
static int move_function(ks_cfg_node *from, ks_cfg_node *to, const char *role)
{
    const ks_cfg_function *f = ks_cfg_node_function(from, role);
    if (!f)
        return 0;
    size_t i = (size_t)(f - from->functions);
    if (!(to->functions = malloc(sizeof *to->functions)))
        return -1;
    to->functions[0] = from->functions[i];
    to->function_count = 1;
    memmove(&from->functions[i], &from->functions[i + 1],
            (from->function_count - i - 1) * sizeof *from->functions);
    from->function_count--;
    return 0;
}

static void free_scalar(ks_cfg_scalar *s)
{
    free(s->key);
    free(s->value);
    for (size_t j = 0; j < s->inner_count; j++)
        free(s->inner[j].path);
    free(s->inner);
}

/* Unfold node i (p->nodes may move). 0 or -1 (reported). */
static int unfold(pctx *c, size_t i)
{
    ks_pipeline *p = c->p;
    ks_cfg_scalar right = {0}, fk = {0};
    ks_cfg_node *n = &p->nodes[i];
    int has_right = take(&n->config, "right", &right);
    int has_fk = take(&n->config, "foreign_key", &fk);
    int rc = check_fk(c, n, &right, &fk, has_right, has_fk);
    ks_cfg_node *nodes = rc ? NULL : realloc(p->nodes, (p->node_count + 2) * sizeof *nodes);
    if (!rc && !nodes)
        rc = FAIL_MARK(c, n->mark, "out of memory");
    if (rc) {
        free_scalar(&right);
        free_scalar(&fk);
        return -1;
    }
    p->nodes = nodes;
    n = &p->nodes[i];
    ks_cfg_node *sub = &p->nodes[p->node_count], *reg = &p->nodes[p->node_count + 1];
    memset(sub, 0, 2 * sizeof *sub);
    p->node_count += 2; /* freed with the pipeline from here on */
    char *sub_name = join3(n->name, "-subscribe", ""), *reg_name = join3(n->name, "-register", "");
    char *keys = join3(n->name, "-foreign-keys", ""), *subs = join3(n->name, "-subscriptions", "");
    char *left = n->from[0];
    ks_mark left_mark = n->from_marks[0];
    rc = !sub_name || !reg_name || !keys || !subs ||
         make_node(sub, n, sub_name, "fk_subscribe", left, left_mark, NULL, left_mark, keys) ||
         make_node(reg, n, reg_name, "fk_register", sub_name, n->mark, right.value, right.mark,
                   subs) ||
         (has_fk ? config2(&sub->config, &fk, "foreign_keys", keys)
                 : config1(&sub->config, "foreign_keys", keys, n->mark)) ||
         move_function(n, sub, "foreign_key") ||
         config2(&reg->config, &right, "subscriptions", subs);
    if (!rc) {
        reg->repartition_topic = join3(p->application, "-", n->name);
        n->repartition_topic = join3(p->application, "-", n->name);
        n->table = left; /* the resolver looks the left value up */
        n->table_mark = left_mark;
        n->from[0] = strdup(reg_name);
        free(n->type);
        free(n->processor);
        n->type = strdup("join.fk_resolve");
        n->processor = strdup("fk_resolve");
        char *a = reg->repartition_topic ? join3(reg->repartition_topic,
                                                 "-subscription-registration", "")
                                         : NULL;
        char *b = n->repartition_topic ? join3(n->repartition_topic,
                                               "-subscription-response", "")
                                       : NULL;
        free(reg->repartition_topic);
        free(n->repartition_topic);
        reg->repartition_topic = a;
        n->repartition_topic = b;
        rc = !a || !b || !n->from[0] || !n->type || !n->processor;
    }
    free(sub_name);
    free(reg_name);
    free(keys);
    free(subs);
    free_scalar(&right);
    free_scalar(&fk);
    return rc ? FAIL_MARK(c, p->nodes[i].mark, "out of memory") : 0;
}

int ks_cfg_expand_fk_joins(pctx *c)
{
    size_t count = c->p->node_count; /* the nodes written in the YAML */
    for (size_t i = 0; i < count; i++)
        if (ks_cfg_node_is(&c->p->nodes[i], "join", "fk") && unfold(c, i) != 0)
            return -1;
    return 0;
}
