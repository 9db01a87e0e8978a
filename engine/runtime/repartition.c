/*
 * repartition.c - where repartition topics go, the pipeline rewritten to
 * use them, and sub-topologies (repartition.h).
 */
#include "runtime/repartition.h"

#include <stdlib.h>
#include <string.h>

void ks_repartition_topic(const ks_pipeline *p, const char *node, char *buf, size_t len)
{
    snprintf(buf, len, "%s-%s-repartition", p->application, node);
}

/* ---- where ------------------------------------------------------------- */

static int is_changer(const ks_topo_node *n)
{
    return n->kind == KS_NODE_PROCESSOR && (n->ptype->flags & KS_PROC_CHANGES_KEY);
}

/* Keyed, or with a store of the task: a global table's store holds every
 * key in every task, so a node that reads only such stores (a
 * stream-global-table join) needs no repartition after a key change. */
static int is_stateful(const ks_pipeline *p, const ks_topo_node *n)
{
    if (n->kind != KS_NODE_PROCESSOR)
        return 0;
    int local = 0;
    for (size_t s = 0; s < n->store_count; s++)
        local |= !p->stores[n->stores[s]].global;
    return (n->ptype->flags & KS_PROC_KEYED) || local;
}

/* Nodes in an order where every parent comes before its children (Kahn;
 * config_checks.c refused cycles). order[] gets node_count entries. */
static void topo_order(const ks_topology *t, int *order, int *indeg)
{
    size_t n = t->node_count, head = 0, tail = 0;
    memset(indeg, 0, n * sizeof *indeg);
    for (size_t i = 0; i < n; i++)
        for (size_t c = 0; c < t->nodes[i].child_count; c++)
            indeg[t->nodes[i].children[c]]++;
    for (size_t i = 0; i < n; i++)
        if (indeg[i] == 0)
            order[tail++] = (int)i;
    while (head < tail) {
        const ks_topo_node *x = &t->nodes[order[head++]];
        for (size_t c = 0; c < x->child_count; c++)
            if (--indeg[x->children[c]] == 0)
                order[tail++] = x->children[c];
    }
}

/* 1 when a key-changing node feeds node i on a path that no node marked in
 * cut[] (it reads a repartition topic) interrupts. seen[] marks the nodes
 * already walked in this call. */
static int changed_upstream(const ks_topology *t, int i, const char *cut, char *seen)
{
    for (size_t p = 0; p < t->node_count; p++) {
        const ks_topo_node *pn = &t->nodes[p];
        for (size_t c = 0; c < pn->child_count; c++) {
            if (pn->children[c] != i || seen[p])
                continue;
            seen[p] = 1;
            if (is_changer(pn))
                return 1;
            if (!cut[p] && changed_upstream(t, (int)p, cut, seen))
                return 1;
        }
    }
    return 0;
}

/* ---- the rewrite -------------------------------------------------------- */

static int name_taken(const ks_pipeline *p, const char *name)
{
    for (size_t i = 0; i < p->source_count; i++)
        if (strcmp(p->sources[i].name, name) == 0)
            return 1;
    for (size_t i = 0; i < p->node_count; i++)
        if (strcmp(p->nodes[i].name, name) == 0)
            return 1;
    for (size_t i = 0; i < p->sink_count; i++)
        if (strcmp(p->sinks[i].name, name) == 0)
            return 1;
    return 0;
}

static int topic_taken(const ks_pipeline *p, const char *topic)
{
    for (size_t i = 0; i < p->source_count; i++)
        if (strcmp(p->sources[i].topic, topic) == 0)
            return 1;
    for (size_t i = 0; i < p->sink_count; i++)
        if (strcmp(p->sinks[i].topic, topic) == 0)
            return 1;
    return 0;
}

/* Put a repartition topic in front of node n: one internal source, one
 * internal sink per input, n reads the source. */
static int insert_topic(ks_pipeline *p, ks_cfg_node *n, char *err, size_t errlen)
{
    char topic[600], src[300];
    if (n->repartition_topic)
        snprintf(topic, sizeof topic, "%s", n->repartition_topic);
    else
        ks_repartition_topic(p, n->name, topic, sizeof topic);
    snprintf(src, sizeof src, "%s-repartition-source", n->name);
    const ks_mark *at = n->repartition ? &n->repartition_mark : &n->type_mark;
    if (strlen(topic) > 249)
        return ks_mark_fail(err, errlen, at,
                            "node '%s' needs the repartition topic %s, longer than Kafka's 249 "
                            "characters: shorten the node's or the application's name",
                            n->name, topic);
    if (topic_taken(p, topic))
        return ks_mark_fail(err, errlen, at,
                            "node '%s' needs the repartition topic %s, which the pipeline "
                            "already reads or writes",
                            n->name, topic);
    if (name_taken(p, src))
        return ks_mark_fail(err, errlen, at,
                            "node '%s' needs a repartition source named '%s', a name the "
                            "pipeline already uses",
                            n->name, src);
    ks_cfg_source *sources = realloc(p->sources, (p->source_count + 1) * sizeof *sources);
    if (!sources)
        return ks_mark_fail(err, errlen, at, "out of memory");
    p->sources = sources;
    ks_cfg_source *s = &p->sources[p->source_count];
    *s = (ks_cfg_source){.name = strdup(src), .topic = strdup(topic),
                         .key_serde = KS_SERDE_BYTES, .value_serde = KS_SERDE_BYTES,
                         .create = 1, .partitions = n->repartition_partitions,
                         .mark = *at, .topic_mark = *at, .internal = 1};
    if (!s->name || !s->topic) {
        free(s->name);
        free(s->topic);
        return ks_mark_fail(err, errlen, at, "out of memory");
    }
    p->source_count++;
    ks_cfg_sink *sinks = realloc(p->sinks, (p->sink_count + n->from_count) * sizeof *sinks);
    if (!sinks)
        return ks_mark_fail(err, errlen, at, "out of memory");
    p->sinks = sinks;
    for (size_t f = 0; f < n->from_count; f++) {
        char name[300];
        if (n->from_count == 1)
            snprintf(name, sizeof name, "%s-repartition-sink", n->name);
        else
            snprintf(name, sizeof name, "%s-repartition-sink-%zu", n->name, f + 1);
        if (name_taken(p, name))
            return ks_mark_fail(err, errlen, at,
                                "node '%s' needs a repartition sink named '%s', a name the "
                                "pipeline already uses",
                                n->name, name);
        ks_cfg_sink *k = &p->sinks[p->sink_count];
        /* the input keeps its `from` text; the node reads the source */
        *k = (ks_cfg_sink){.name = strdup(name), .from = n->from[f], .topic = strdup(topic),
                           .key_serde = KS_SERDE_BYTES, .value_serde = KS_SERDE_BYTES,
                           .create = 1, .mark = *at, .from_mark = n->from_marks[f],
                           .name_mark = *at, .topic_mark = *at, .feeds = strdup(n->name)};
        n->from[f] = NULL;
        if (!k->name || !k->topic || !k->feeds) {
            free(k->name);
            free(k->from);
            free(k->topic);
            free(k->feeds);
            return ks_mark_fail(err, errlen, at, "out of memory");
        }
        p->sink_count++;
    }
    n->from[0] = strdup(src);
    for (size_t f = 1; f < n->from_count; f++)
        free(n->from[f]);
    n->from_count = 1;
    n->from_marks[0] = *at;
    if (!n->from[0])
        return ks_mark_fail(err, errlen, at, "out of memory");
    return 0;
}

int ks_repartition_plan(ks_topology *t, char *err, size_t errlen)
{
    size_t n = t->node_count;
    int *order = calloc(n + 1, sizeof *order);
    int *indeg = calloc(n + 1, sizeof *indeg);
    char *cut = calloc(n + 1, 1), *seen = calloc(n + 1, 1);
    ks_cfg_node **marked = calloc(n + 1, sizeof *marked);
    int rc = 0;
    if (!order || !indeg || !cut || !seen || !marked) {
        snprintf(err, errlen, "%s: out of memory", t->pipeline->file);
        rc = -1;
        goto out;
    }
    topo_order(t, order, indeg);
    /* parents first: a node behind a repartitioned one needs no topic of
     * its own unless another key change follows */
    for (size_t k = 0; k < n; k++) {
        const ks_topo_node *x = &t->nodes[order[k]];
        if (x->kind != KS_NODE_PROCESSOR)
            continue;
        int need = x->cfg->repartition;
        if (!need && is_stateful(t->pipeline, x)) {
            memset(seen, 0, n);
            need = changed_upstream(t, x->index, cut, seen);
        }
        /* join.streams tells its inputs apart by name (input_name), which
         * one shared repartition topic would erase */
        if (need && ks_cfg_node_is(x->cfg, "join", "streams")) {
            rc = ks_mark_fail(err, errlen, &x->cfg->mark,
                              "node '%s': a stream-stream join cannot read through a "
                              "repartition topic yet (a node upstream changes keys, or "
                              "`repartition:` is set): its two streams would share one topic "
                              "and could no longer be told apart; re-key each stream into a "
                              "topic of its own first",
                              x->cfg->name);
            goto out;
        }
        if (need) {
            cut[x->index] = 1;
            marked[rc++] = (ks_cfg_node *)x->cfg;
        }
    }
    /* t->nodes point into the arrays insert_topic grows: read no more */
    for (int k = 0; k < rc; k++)
        if (insert_topic(t->pipeline, marked[k], err, errlen) != 0) {
            rc = -1;
            break;
        }
out:
    free(order);
    free(indeg);
    free(cut);
    free(seen);
    free(marked);
    return rc;
}

/* ---- sub-topologies ------------------------------------------------------ */

static int find(int *up, int i)
{
    while (up[i] != i) {
        up[i] = up[up[i]];
        i = up[i];
    }
    return i;
}

void ks_repartition_number(ks_topology *t)
{
    size_t n = t->node_count;
    int *up = calloc(n + 1, sizeof *up);
    int *id = calloc(n + 1, sizeof *id);
    t->sub_count = 1;
    if (!up || !id) { /* everything stays sub-topology 0 */
        free(up);
        free(id);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        up[i] = (int)i;
        id[i] = -1;
    }
    for (size_t i = 0; i < n; i++) {
        const ks_topo_node *x = &t->nodes[i];
        /* a table goes with the nodes that look it up (`table:`), as a
         * KTable source does with its join in Kafka Streams */
        const ks_topo_node *table = x->kind == KS_NODE_PROCESSOR && x->cfg->table
                                        ? ks_topology_node(t, x->cfg->table)
                                        : NULL;
        for (size_t c = 0; c <= x->child_count; c++) {
            int other = c < x->child_count ? x->children[c] : table ? table->index : -1;
            if (other < 0)
                continue;
            int a = find(up, (int)i), b = find(up, other);
            if (a != b)
                up[a > b ? a : b] = a < b ? a : b;
        }
    }
    int next = 0;
    for (size_t i = 0; i < n; i++) { /* sources come first in t->nodes */
        int r = find(up, (int)i);
        if (id[r] < 0)
            id[r] = next++;
        t->nodes[i].sub = id[r];
    }
    t->sub_count = next ? next : 1;
    free(up);
    free(id);
}

/* ---- printing -------------------------------------------------------------- */

static void print_names(const ks_topology *t, int sub, ks_node_kind kind, const char *label,
                        FILE *f)
{
    int first = 1;
    for (size_t i = 0; i < t->node_count; i++) {
        const ks_topo_node *n = &t->nodes[i];
        if (n->sub != sub || n->kind != kind)
            continue;
        fprintf(f, "%s%s", first ? label : ", ", n->name);
        first = 0;
    }
    if (!first)
        fprintf(f, "\n");
}

void ks_repartition_print(const ks_topology *t, FILE *f)
{
    const ks_pipeline *p = t->pipeline;
    int topics = 0;
    for (size_t i = 0; i < p->source_count; i++)
        topics += p->sources[i].internal;
    if (t->sub_count <= 1 && !topics)
        return;
    fprintf(f, "sub-topologies (a task per partition number runs all of them):\n");
    for (int s = 0; s < t->sub_count; s++) {
        fprintf(f, "  sub-topology %d\n", s);
        print_names(t, s, KS_NODE_SOURCE, "    sources: ", f);
        print_names(t, s, KS_NODE_PROCESSOR, "    processors: ", f);
        print_names(t, s, KS_NODE_SINK, "    sinks: ", f);
    }
    if (!topics)
        return;
    fprintf(f, "repartition topics (cleanup.policy=delete, purged after each commit):\n");
    for (size_t i = 0; i < t->node_count; i++) {
        const ks_topo_node *n = &t->nodes[i];
        if (n->kind != KS_NODE_SOURCE || !n->source->internal)
            continue;
        fprintf(f, "  %s: written by", n->source->topic);
        int first = 1;
        for (size_t k = 0; k < t->node_count; k++) {
            const ks_topo_node *s = &t->nodes[k];
            if (s->kind == KS_NODE_SINK && s->sink->feeds &&
                strcmp(s->sink->topic, n->source->topic) == 0) {
                fprintf(f, "%s %s (sub-topology %d)", first ? "" : ",", s->sink->from, s->sub);
                first = 0;
            }
        }
        fprintf(f, ", read by");
        for (size_t c = 0; c < n->child_count; c++)
            fprintf(f, "%s %s (sub-topology %d)", c ? "," : "", t->nodes[n->children[c]].name,
                    n->sub);
        if (n->source->partitions > 0)
            fprintf(f, ", %d partitions\n", (int)n->source->partitions);
        else
            fprintf(f, ", partitions as the sources\n");
    }
}
