/*
 * node_serde.c - serdes along the topology's edges (node_serde.h).
 *
 * Upstream (what a node reads) and downstream (what a child takes) walk
 * the graph by the same rules: a source or a sink of the YAML says its
 * serdes; a node passes them through, except that a node with a store
 * makes values of its own (value unknown) and a node that changes keys
 * makes keys of its own (key unknown). A repartition topic is seen
 * through: its source reads what its sinks' writers read, and its sink
 * takes what the node it feeds takes. Where several paths disagree, that
 * part is unknown.
 */
#include "runtime/node_serde.h"

#include <string.h>

#define NONE (-1) /* no path seen yet: the identity of merge() */

static int merge(int a, int b)
{
    if (a == NONE)
        return b;
    if (b == NONE)
        return a;
    return a == b ? a : KS_SERDE_KIND_UNKNOWN;
}

static int kind_of(ks_serde s)
{
    switch (s) {
    case KS_SERDE_BYTES:
        return KS_SERDE_KIND_BYTES;
    case KS_SERDE_STRING:
        return KS_SERDE_KIND_STRING;
    case KS_SERDE_JSON:
        return KS_SERDE_KIND_JSON;
    case KS_SERDE_INT64:
        return KS_SERDE_KIND_INT64;
    }
    return KS_SERDE_KIND_UNKNOWN;
}

static int is_child(const ks_topo_node *n, int i)
{
    for (size_t c = 0; c < n->child_count; c++)
        if (n->children[c] == i)
            return 1;
    return 0;
}

/* A node with a store makes values; one that changes keys makes keys. */
static void through(const ks_topo_node *n, int *k, int *v)
{
    if (n->kind != KS_NODE_PROCESSOR)
        return;
    if (n->store_count > 0 || (n->ptype && (n->ptype->flags & KS_PROC_NEEDS_STORE)))
        *v = KS_SERDE_KIND_UNKNOWN;
    if (n->ptype && (n->ptype->flags & KS_PROC_CHANGES_KEY))
        *k = KS_SERDE_KIND_UNKNOWN;
}

static void reads(const ks_topology *t, int i, size_t depth, int *k, int *v);

/* What node i emits. */
static void emits(const ks_topology *t, int i, size_t depth, int *k, int *v)
{
    const ks_topo_node *n = &t->nodes[i];
    *k = *v = KS_SERDE_KIND_UNKNOWN;
    if (depth > t->node_count)
        return;
    if (n->kind == KS_NODE_SOURCE && !n->source->internal) {
        *k = kind_of(n->source->key_serde);
        *v = kind_of(n->source->value_serde);
        return;
    }
    if (n->kind == KS_NODE_SOURCE) { /* a repartition topic: what its writers read */
        int mk = NONE, mv = NONE;
        for (size_t c = 0; c < n->child_count; c++) {
            const char *fed = t->nodes[n->children[c]].name;
            for (size_t j = 0; j < t->node_count; j++) {
                const ks_topo_node *s = &t->nodes[j];
                if (s->kind != KS_NODE_SINK || !s->sink->feeds || strcmp(s->sink->feeds, fed))
                    continue;
                int sk, sv;
                reads(t, (int)j, depth + 1, &sk, &sv);
                mk = merge(mk, sk);
                mv = merge(mv, sv);
            }
        }
        *k = mk == NONE ? KS_SERDE_KIND_UNKNOWN : mk;
        *v = mv == NONE ? KS_SERDE_KIND_UNKNOWN : mv;
        return;
    }
    if (n->kind == KS_NODE_PROCESSOR) {
        reads(t, i, depth + 1, k, v);
        through(n, k, v);
    }
}

/* What node i reads: merged over the nodes that have it as a child. */
static void reads(const ks_topology *t, int i, size_t depth, int *k, int *v)
{
    int mk = NONE, mv = NONE;
    for (size_t j = 0; j < t->node_count && depth <= t->node_count; j++) {
        if (!is_child(&t->nodes[j], i))
            continue;
        int ek, ev;
        emits(t, (int)j, depth + 1, &ek, &ev);
        mk = merge(mk, ek);
        mv = merge(mv, ev);
    }
    *k = mk == NONE ? KS_SERDE_KIND_UNKNOWN : mk;
    *v = mv == NONE ? KS_SERDE_KIND_UNKNOWN : mv;
}

/* What node i takes. */
static void takes(const ks_topology *t, int i, size_t depth, int *k, int *v)
{
    const ks_topo_node *n = &t->nodes[i];
    *k = *v = KS_SERDE_KIND_UNKNOWN;
    if (depth > t->node_count)
        return;
    if (n->kind == KS_NODE_SINK && !n->sink->feeds) {
        *k = kind_of(n->sink->key_serde);
        *v = kind_of(n->sink->value_serde);
        return;
    }
    if (n->kind == KS_NODE_SINK) { /* a repartition topic: what the fed node takes */
        for (size_t j = 0; j < t->node_count; j++)
            if (t->nodes[j].kind == KS_NODE_PROCESSOR &&
                strcmp(t->nodes[j].name, n->sink->feeds) == 0) {
                takes(t, (int)j, depth + 1, k, v);
                return;
            }
        return;
    }
    if (n->kind != KS_NODE_PROCESSOR)
        return;
    int mk = NONE, mv = NONE;
    for (size_t c = 0; c < n->child_count; c++) {
        int ck, cv;
        takes(t, n->children[c], depth + 1, &ck, &cv);
        mk = merge(mk, ck);
        mv = merge(mv, cv);
    }
    *k = mk == NONE ? KS_SERDE_KIND_UNKNOWN : mk;
    *v = mv == NONE ? KS_SERDE_KIND_UNKNOWN : mv;
    through(n, k, v);
}

void ks_node_input_serde(const ks_topology *t, int node, ks_serde_kind *key,
                         ks_serde_kind *value)
{
    int k, v;
    reads(t, node, 0, &k, &v);
    if (key)
        *key = (ks_serde_kind)k;
    if (value)
        *value = (ks_serde_kind)v;
}

int ks_node_input_checked(const ks_topology *t, int node)
{
    int any = 0;
    for (size_t j = 0; j < t->node_count; j++) {
        const ks_topo_node *n = &t->nodes[j];
        if (!is_child(n, node))
            continue;
        if (n->kind != KS_NODE_SOURCE || n->source->internal ||
            n->source->value_serde != KS_SERDE_JSON)
            return 0;
        any = 1;
    }
    return any;
}

void ks_node_child_serde(const ks_topology *t, int child, ks_serde_kind *key,
                         ks_serde_kind *value)
{
    int k, v;
    takes(t, child, 0, &k, &v);
    if (key)
        *key = (ks_serde_kind)k;
    if (value)
        *value = (ks_serde_kind)v;
}
