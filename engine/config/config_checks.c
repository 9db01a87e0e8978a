/*
 * config_checks.c - the checks that need the whole pipeline read: names
 * unique among sources, nodes and sinks; inputs that exist; no cycles;
 * stores named by nodes but not declared (added with defaults); stores
 * declared but named by no node (an error). parse_top (config.c) runs them
 * in that order.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_internal.h"

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
int ks_cfg_check_names(pctx *c)
{
    ks_pipeline *p = c->p;
    size_t n = p->source_count + p->global_count + p->node_count + p->sink_count, k = 0;
    named *all = calloc(n ? n : 1, sizeof *all);
    int rc = 0;

    if (!all)
        return oom(c, NULL);
    for (size_t i = 0; i < p->source_count; i++)
        all[k++] = (named){p->sources[i].name, p->sources[i].table ? "table" : "source",
                           p->sources[i].mark};
    for (size_t i = 0; i < p->global_count; i++)
        all[k++] = (named){p->globals[i].name, "global table", p->globals[i].mark};
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

/* The shipped join's `key:` (a lookup key from the value) or key function
 * (`functions: { key: }`) needs a global table: a table of the task is
 * looked up by the record key it is co-partitioned by. `key:` must be a
 * JSON pointer; one of the two at most. */
static int check_join_key(pctx *c, const ks_cfg_node *n)
{
    if (!ks_cfg_node_is(n, "join", "join"))
        return 0;
    const ks_cfg_scalar *k = ks_cfg_scalars_find(&n->config, "key");
    const ks_cfg_function *fn = ks_cfg_node_function(n, "key");
    if (!k && !fn)
        return 0;
    ks_mark at = k ? k->mark : fn->mark;
    if (k && fn)
        return FAIL_MARK(c, fn->mark,
                         "node '%s': the lookup key comes from `key:` or from "
                         "`functions: { key: }`, not both",
                         n->name);
    if (!n->table || !ks_pipeline_global(c->p, n->table))
        return FAIL_MARK(c, at,
                         "node '%s': %s looks records up in a global table only (under "
                         "'global_tables'); a table of `tables:` is looked up by the record "
                         "key, which it is partitioned by",
                         n->name, k ? "`key:`" : "a key function");
    if (k && (!k->value || (k->value[0] && k->value[0] != '/')))
        return FAIL_MARK(c, k->mark,
                         "node '%s': key '%s' is not a JSON pointer; expected \"/field\" "
                         "(or \"\" for the whole value)",
                         n->name, k->value ? k->value : "");
    return 0;
}

/* A node's store read as its table (`table: NODE`, a side of join.tables)
 * is the node's keyed state: it needs a store, and one keyed by the record
 * key alone (a windowed store is keyed by key and window; a lookup by the
 * record key names no window). A cycle is check_cycles'. */
static int check_node_table(pctx *c, const ks_cfg_node *n, const ks_cfg_node *tn, ks_mark at)
{
    if (tn == n)
        return 0; /* reported as a cycle */
    if (tn->store_count == 0)
        return FAIL_MARK(c, at,
                         "node '%s': table '%s' is a node without a store; a node is a table "
                         "through its store (a count, aggregate or reduce, or a node with "
                         "`store:`)",
                         n->name, tn->name);
    if (tn->window.count > 0)
        return FAIL_MARK(c, at,
                         "node '%s': table '%s' is windowed (`window:`): its store holds a "
                         "value per key and window, and a lookup by the record key names no "
                         "window; join a node without `window:`",
                         n->name, tn->name);
    return 0;
}

/* A node reads a table through `table:` (its store is then the node's
 * first), never as one of its own `store:`s; the shipped `join` needs one. */
static int check_table_refs(pctx *c, const ks_cfg_node *n)
{
    if (check_join_key(c, n) != 0)
        return -1;
    const ks_pipeline *p = c->p;
    for (size_t k = 0; k < n->store_count; k++) {
        const ks_cfg_store *st = ks_pipeline_store(p, n->stores[k]);
        if (st && st->table)
            return FAIL_MARK(c, n->store_marks[k],
                             "node '%s': store '%s' is the store of table '%s'; read a "
                             "table with `table: %s`",
                             n->name, n->stores[k], n->stores[k], n->stores[k]);
    }
    const ks_cfg_node *tn = n->table ? ks_pipeline_node(p, n->table) : NULL;
    if (tn)
        return check_node_table(c, n, tn, n->table_mark);
    if (ks_cfg_node_is(n, "join", "tables"))
        for (size_t k = 0; k < n->from_count; k++)
            if ((tn = ks_pipeline_node(p, n->from[k])) &&
                check_node_table(c, n, tn, n->from_marks[k]) != 0)
                return -1;
    if (n->table) {
        const ks_cfg_source *t = ks_pipeline_source(p, n->table);
        if (!ks_pipeline_global(p, n->table) && (!t || !t->table))
            return FAIL_MARK(c, n->table_mark,
                             "node '%s': unknown table '%s' (not under 'tables' or "
                             "'global_tables', nor a node)",
                             n->name, n->table);
    } else if (ks_cfg_node_is(n, "join", "join")) {
        return FAIL_MARK(c, n->mark, "node '%s': type '%s' needs `table:` (the table it "
                                     "looks records up in)",
                         n->name, n->type);
    }
    return 0;
}

/* The shipped stream-stream join reads exactly two inputs and tells them
 * apart by name: `left:` and `right:` must be those two, one each (the
 * plugin would only find out at the first record). */
static int check_stream_join(pctx *c, const ks_cfg_node *n)
{
    if (!ks_cfg_node_is(n, "join", "streams"))
        return 0;
    if (n->from_count != 2)
        return FAIL_MARK(c, n->from_marks[0],
                         "node '%s': a stream-stream join reads two streams; `from:` lists "
                         "%zu",
                         n->name, n->from_count);
    const ks_cfg_scalar *side[2] = {ks_cfg_scalars_find(&n->config, "left"),
                                    ks_cfg_scalars_find(&n->config, "right")};
    for (int s = 0; s < 2; s++) {
        if (!side[s] || side[s]->nested)
            continue; /* missing or not text: the type's schema says so */
        if (strcmp(side[s]->value, n->from[0]) != 0 && strcmp(side[s]->value, n->from[1]) != 0)
            return FAIL_MARK(c, side[s]->mark,
                             "node '%s': %s '%s' is not one of its inputs (from: %s, %s)",
                             n->name, s ? "right" : "left", side[s]->value, n->from[0],
                             n->from[1]);
    }
    if (side[0] && side[1] && strcmp(side[0]->value, side[1]->value) == 0)
        return FAIL_MARK(c, side[1]->mark,
                         "node '%s': left and right are both '%s'; name each input once",
                         n->name, side[1]->value);
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

/* Give reader n, at `at`, the store `store` of node `owner` (its first
 * store of the YAML), marked as that node's table: 1, 0 or -1 as
 * add_store_at. The store is added with defaults when undeclared. */
static int add_node_table(pctx *c, ks_cfg_node *n, size_t at, const ks_cfg_node *owner,
                          const char *store, ks_mark mark)
{
    ks_cfg_store *st = (ks_cfg_store *)ks_pipeline_store(c->p, store);
    if (!st && !(st = store_add(c, NULL, store, owner->store_marks[0], 0)))
        return -1;
    if (!st->node_table && !(st->node_table = strdup(owner->name)))
        return oom(c, NULL);
    return add_store_at(c, n, at, store, mark);
}

int ks_cfg_link_tables(pctx *c)
{
    ks_pipeline *p = c->p;
    /* each node's own store (its first of the YAML), before readers get it */
    const char **own = calloc(p->node_count ? p->node_count : 1, sizeof *own);
    if (!own)
        return oom(c, NULL);
    for (size_t i = 0; i < p->node_count; i++)
        own[i] = p->nodes[i].store_count ? p->nodes[i].stores[0] : NULL;
    int rc = 0;
    for (size_t i = 0; rc >= 0 && i < p->node_count; i++) {
        ks_cfg_node *n = &p->nodes[i];
        const ks_cfg_node *tn = n->table ? ks_pipeline_node(p, n->table) : NULL;
        size_t at = 0;
        n->table_node = tn != NULL;
        rc = tn   ? add_node_table(c, n, at, tn, own[tn - p->nodes], n->table_mark)
             : n->table ? add_store_at(c, n, at, n->table, n->table_mark)
                        : 0;
        int sides = ks_cfg_node_is(n, "join", "tables");
        for (size_t k = 0; rc >= 0 && k < n->from_count; k++) {
            at += (size_t)rc;
            const ks_cfg_source *t = ks_pipeline_source(p, n->from[k]);
            const ks_cfg_node *side = sides ? ks_pipeline_node(p, n->from[k]) : NULL;
            rc = t && t->table ? add_store_at(c, n, at, t->name, n->from_marks[k])
                 : side        ? add_node_table(c, n, at, side, own[side - p->nodes],
                                                n->from_marks[k])
                               : 0;
        }
    }
    free(own);
    return rc < 0 ? -1 : 0;
}

static int is_input(const ks_pipeline *p, const char *name)
{
    return ks_pipeline_source(p, name) || ks_pipeline_node(p, name);
}

int ks_cfg_check_refs(pctx *c)
{
    ks_pipeline *p = c->p;
    for (size_t i = 0; i < p->node_count; i++) {
        const ks_cfg_node *n = &p->nodes[i];
        for (size_t k = 0; k < n->from_count; k++) {
            if (ks_pipeline_global(p, n->from[k])) /* its updates reach no task */
                return FAIL_MARK(c, n->from_marks[k],
                                 "node '%s': '%s' is a global table, which is no input; "
                                 "look records up in it with `table: %s`",
                                 n->name, n->from[k], n->from[k]);
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
        if (check_table_refs(c, n) != 0 || check_stream_join(c, n) != 0)
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

/* Input k of node n that is a node: its from[k], or for k == from_count
 * the node it reads as a table (`table: NODE`: that node's records must
 * not depend on the reader's). NULL when not a node; *mark: where. */
static const ks_cfg_node *input_node(const ks_pipeline *p, const ks_cfg_node *n, size_t k,
                                     ks_mark *mark)
{
    const char *name = k < n->from_count ? n->from[k] : n->table;
    if (mark)
        *mark = k < n->from_count ? n->from_marks[k] : n->table_mark;
    return name ? ks_pipeline_node(p, name) : NULL;
}

int ks_cfg_check_cycles(pctx *c)
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
        ne += p->nodes[j].from_count + 1; /* + a node read as table */
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
        for (size_t k = 0; k <= p->nodes[j].from_count; k++) {
            const ks_cfg_node *in = input_node(p, &p->nodes[j], k, NULL);
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
            for (size_t k = 0; k <= p->nodes[j].from_count; k++) {
                ks_mark at;
                const ks_cfg_node *in = input_node(p, &p->nodes[j], k, &at);
                if (in) {
                    size_t i = (size_t)(in - p->nodes);
                    edges[first[i] + fill[i]++] = (edge){j, at};
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
int ks_cfg_add_used_stores(pctx *c)
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
int ks_cfg_check_unused_stores(pctx *c)
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
