/*
 * topology_print.c - a resolved topology as text for `kstreams check` and
 * `kstreams describe` (ks_topology_print: the pipeline's settings, plugins,
 * nodes with their children, stores and changelogs, repartition topics)
 * and as a Graphviz digraph (ks_topology_print_dot: one cluster per
 * sub-topology).
 */
#include "runtime/topology.h"

#include <stdio.h>
#include <string.h>

#include "runtime/repartition.h"
#include "runtime/table.h"

/* ---- printing --------------------------------------------------------- */

static void print_children(const ks_topology *t, const ks_topo_node *n, FILE *f)
{
    if (!n->child_count)
        return;
    fprintf(f, "      --> ");
    for (size_t c = 0; c < n->child_count; c++)
        fprintf(f, "%s%s", c ? ", " : "", t->nodes[n->children[c]].name);
    fprintf(f, "\n");
}

/* ", the table of node X, read by A, B": store s read as X's table. */
static void print_node_table(const ks_topology *t, int s, FILE *f)
{
    const ks_pipeline *p = t->pipeline;
    fprintf(f, "; the table of node %s, read by", p->stores[s].node_table);
    int first = 1;
    for (size_t i = 0; i < t->node_count; i++) {
        const ks_topo_node *n = &t->nodes[i];
        for (size_t k = 0; n->kind == KS_NODE_PROCESSOR && k < n->store_count; k++)
            if (n->stores[k] == s && !ks_cfg_store_writable(p, n->cfg, s)) {
                fprintf(f, "%s %s", first ? "" : ",", n->name);
                first = 0;
            }
    }
}

void ks_topology_print(const ks_topology *t, FILE *f)
{
    const ks_pipeline *p = t->pipeline;
    fprintf(f, "pipeline %s (%s)\n", p->application, p->file);
    fprintf(f, "  guarantee: %s, commit every %lld ms, %d worker%s, state in %s\n",
            p->guarantee == KS_GUARANTEE_EXACTLY_ONCE ? "exactly-once" : "at-least-once",
            (long long)p->commit_interval_ms, p->workers, p->workers == 1 ? "" : "s",
            p->state_dir);
    fprintf(f, "plugins:\n");
    for (size_t i = 0; i < t->plugin_count; i++) {
        const ks_plugin_descriptor *d = t->plugins[i]->desc;
        fprintf(f, "  %s %s (build %s, ABI %u.%u) from %s\n", d->name, d->version,
                d->build_id, d->abi_major, d->abi_minor, t->plugins[i]->path);
    }
    fprintf(f, "topology:\n");
    for (size_t i = 0; i < t->node_count; i++) {
        const ks_topo_node *n = &t->nodes[i];
        switch (n->kind) {
        case KS_NODE_SOURCE:
            if (n->source->internal)
                fprintf(f, "  source %s: repartition topic %s\n", n->name, n->source->topic);
            else if (n->source->table)
                fprintf(f, "  table %s: topic %s (key %s, value %s) into store %s\n", n->name,
                        n->source->topic, ks_serde_name(n->source->key_serde),
                        ks_serde_name(n->source->value_serde),
                        p->stores[n->source->table_store].name);
            else
                fprintf(f, "  source %s: topic %s (key %s, value %s)\n", n->name,
                        n->source->topic, ks_serde_name(n->source->key_serde),
                        ks_serde_name(n->source->value_serde));
            break;
        case KS_NODE_PROCESSOR:
            fprintf(f, "  processor %s: %s.%s (plugin build %s)", n->name,
                    n->plugin->desc->name, n->ptype->name, n->plugin->desc->build_id);
            for (size_t s = 0; s < n->store_count; s++)
                fprintf(f, "%s%s", s ? ", " : " stores: ", p->stores[n->stores[s]].name);
            for (size_t k = 0; k < n->fn_count; k++)
                fprintf(f, "%s%s=%s.%s", k ? ", " : " functions: ", n->fns[k].cfg->role,
                        n->fns[k].cfg->plugin, n->fns[k].cfg->name);
            fprintf(f, "\n");
            break;
        case KS_NODE_SINK:
            if (n->sink->feeds)
                fprintf(f, "  sink %s: repartition topic %s (key and value as they are)\n",
                        n->name, n->sink->topic);
            else
                fprintf(f, "  sink %s: topic %s (key %s, value %s)\n", n->name,
                        n->sink->topic, ks_serde_name(n->sink->key_serde),
                        ks_serde_name(n->sink->value_serde));
            break;
        }
        print_children(t, n, f);
    }
    for (size_t g = 0; g < p->global_count; g++)
        fprintf(f, "  global table %s: topic %s (key %s, value %s; all partitions, every "
                   "process) into store %s\n",
                p->globals[g].name, p->globals[g].topic, ks_serde_name(p->globals[g].key_serde),
                ks_serde_name(p->globals[g].value_serde),
                p->stores[p->globals[g].table_store].name);
    if (p->store_count) {
        fprintf(f, "stores:\n");
        for (size_t s = 0; s < p->store_count; s++) {
            char topic[512];
            if (p->stores[s].global) {
                fprintf(f, "  %s: global, no changelog (read from its topic by every "
                           "process)\n",
                        p->stores[s].name);
                continue;
            }
            const ks_cfg_source *table = ks_table_of_store(p, (int)s);
            if (table)
                snprintf(topic, sizeof topic, "%s (the table's own topic)", table->topic);
            else
                ks_changelog_topic(t, p->stores[s].name, topic, sizeof topic);
            fprintf(f, "  %s: changelog %s", p->stores[s].name,
                    p->stores[s].changelog || p->stores[s].table ? topic : "(none)");
            if (p->stores[s].node_table) /* who reads it as the node's table */
                print_node_table(t, (int)s, f);
            fprintf(f, "\n");
        }
    }
    ks_repartition_print(t, f);
}

static void print_dot_node(const ks_topo_node *n, FILE *f)
{
    if (n->kind == KS_NODE_SOURCE)
        fprintf(f, "    \"%s\" [shape=cds,label=\"%s\\ntopic %s\"];\n", n->name, n->name,
                n->source->topic);
    else if (n->kind == KS_NODE_SINK)
        fprintf(f, "    \"%s\" [shape=cds,label=\"%s\\ntopic %s\"];\n", n->name, n->name,
                n->sink->topic);
    else
        fprintf(f, "    \"%s\" [shape=box,label=\"%s\\n%s\"];\n", n->name, n->name,
                n->cfg->type);
}

void ks_topology_print_dot(const ks_topology *t, FILE *f)
{
    fprintf(f, "digraph \"%s\" {\n  rankdir=LR;\n", t->pipeline->application);
    /* one cluster per sub-topology when a repartition topic splits the graph */
    for (int sub = 0; sub < t->sub_count; sub++) {
        if (t->sub_count > 1)
            fprintf(f, "  subgraph \"cluster_%d\" {\n    label=\"sub-topology %d\";\n", sub,
                    sub);
        for (size_t i = 0; i < t->node_count; i++)
            if (t->nodes[i].sub == sub)
                print_dot_node(&t->nodes[i], f);
        if (t->sub_count > 1)
            fprintf(f, "  }\n");
    }
    /* global tables: no sub-topology, every process fills its store */
    const ks_pipeline *p = t->pipeline;
    for (size_t g = 0; g < p->global_count; g++)
        fprintf(f,
                "  \"%s\" [shape=cds,label=\"%s\\nglobal table, topic %s\"];\n"
                "  \"%s\" -> \"store:%s\" [style=bold];\n",
                p->globals[g].name, p->globals[g].name, p->globals[g].topic, p->globals[g].name,
                p->stores[p->globals[g].table_store].name);
    for (size_t i = 0; i < t->node_count; i++) {
        const ks_topo_node *n = &t->nodes[i];
        for (size_t s = 0; s < n->store_count; s++) /* a table's store: only read */
            fprintf(f, "  \"%s\" -> \"store:%s\" [style=dashed%s];\n", n->name,
                    p->stores[n->stores[s]].name,
                    n->kind == KS_NODE_PROCESSOR && !ks_cfg_store_writable(p, n->cfg, n->stores[s])
                        ? ",label=\"reads\""
                        : "");
        if (n->kind == KS_NODE_SOURCE && n->source->table) /* the table fills its store */
            fprintf(f, "  \"%s\" -> \"store:%s\" [style=bold];\n", n->name,
                    t->pipeline->stores[n->source->table_store].name);
        for (size_t c = 0; c < n->child_count; c++)
            fprintf(f, "  \"%s\" -> \"%s\";\n", n->name, t->nodes[n->children[c]].name);
        /* a repartition sink feeds its topic's source through Kafka */
        for (size_t k = 0; n->kind == KS_NODE_SINK && n->sink->feeds && k < t->node_count; k++)
            if (t->nodes[k].kind == KS_NODE_SOURCE &&
                strcmp(t->nodes[k].source->topic, n->sink->topic) == 0)
                fprintf(f, "  \"%s\" -> \"%s\" [style=dotted,label=\"repartition\"];\n",
                        n->name, t->nodes[k].name);
    }
    for (size_t s = 0; s < t->pipeline->store_count; s++)
        fprintf(f, "  \"store:%s\" [shape=cylinder,label=\"%s\"];\n",
                t->pipeline->stores[s].name, t->pipeline->stores[s].name);
    fprintf(f, "}\n");
}
