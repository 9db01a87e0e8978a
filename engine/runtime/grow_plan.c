/*
 * grow_plan.c - see grow_plan.h.
 */
#include "runtime/grow_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How the records of sub-topology `sub` are partitioned: by the engine's
 * producer (murmur2) when it reads a repartition topic, by the sources'
 * producers otherwise. 0, or -1 with err when it reads both and they
 * differ (such a pipeline's keys are not co-partitioned to begin with). */
static int sub_partitioner(const ks_topology *t, int sub, const char *user, const char *store,
                           const char **name, char *err, size_t errlen)
{
    int internal = 0, external = 0;
    for (size_t i = 0; i < t->node_count; i++) {
        const ks_topo_node *n = &t->nodes[i];
        if (n->kind != KS_NODE_SOURCE || n->sub != sub)
            continue;
        if (n->source->internal)
            internal = 1;
        else
            external = 1;
    }
    if (internal && external && ks_kafka_partitioner_find(user) != ks_kafka_partition_for) {
        snprintf(err, errlen,
                 "store '%s' holds keys of a repartition topic (placed with murmur2 by the "
                 "engine) and of sources placed with %s: they cannot both be right",
                 store, user);
        return -1;
    }
    *name = internal ? "murmur2" : user;
    return 0;
}

/* Why store `i` cannot move (err), or 0 with *writer its writing node
 * (NULL when no node writes it). */
static int movable(const ks_topology *t, int i, const ks_topo_node **writer, char *err,
                   size_t errlen)
{
    const ks_pipeline *p = t->pipeline;
    const ks_cfg_store *st = &p->stores[i];
    if (st->table) {
        snprintf(err, errlen,
                 "store '%s' is the store of table '%s', restored from the table's own "
                 "topic: its records stay in the partitions their producers chose, so after "
                 "the growth a key's table entry would sit in another task than the stream "
                 "records that look it up; grow-partitions does not move tables (re-create "
                 "the table's topic with the new count and publish the table again, with "
                 "the application's state wiped)",
                 st->name, st->name);
        return -1;
    }
    if (!st->changelog) {
        snprintf(err, errlen,
                 "store '%s' has no changelog (`changelog: false`): its state is only in "
                 "the state directories, so grow-partitions cannot move its keys",
                 st->name);
        return -1;
    }
    *writer = NULL;
    for (size_t j = 0; j < t->node_count; j++) {
        const ks_topo_node *n = &t->nodes[j];
        for (size_t s = 0; n->kind == KS_NODE_PROCESSOR && s < n->store_count; s++) {
            if (n->stores[s] != i || !ks_cfg_store_writable(p, n->cfg, i))
                continue;
            if (n->cfg->window.count > 0) {
                snprintf(err, errlen,
                         "store '%s' of node '%s' is windowed: its keys hold the window "
                         "too; grow-partitions moves only key-value stores keyed by the "
                         "record key",
                         st->name, n->name);
                return -1;
            }
            if (!(n->ptype->flags & KS_PROC_CACHEABLE) || s != 0) {
                snprintf(err, errlen,
                         "store '%s' is written by node '%s' (type %s), which does not "
                         "declare that it keys %s by the record key (KS_PROC_CACHEABLE: "
                         "the shipped count, aggregate and reduce do): grow-partitions "
                         "cannot tell which partition its keys belong to",
                         st->name, n->name, n->cfg->type,
                         s == 0 ? "its store" : "this store (not its first)");
                return -1;
            }
            if (*writer && (*writer)->sub != n->sub) {
                snprintf(err, errlen,
                         "store '%s' is written by nodes '%s' and '%s' of different "
                         "sub-topologies: grow-partitions cannot tell how its keys are "
                         "partitioned",
                         st->name, (*writer)->name, n->name);
                return -1;
            }
            *writer = n;
        }
    }
    return 0;
}

static int add_stores(const ks_topology *t, const char *user, ks_grow_plan *g, char *err,
                      size_t errlen)
{
    const ks_pipeline *p = t->pipeline;
    g->stores = calloc(p->store_count + 1, sizeof *g->stores);
    if (!g->stores) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < p->store_count; i++) {
        if (p->stores[i].global)
            continue; /* one per process, read whole: not partitioned */
        const ks_topo_node *writer;
        if (movable(t, (int)i, &writer, err, errlen) != 0)
            return -1;
        ks_grow_store *gs = &g->stores[g->store_count++];
        gs->store = (int)i;
        ks_changelog_topic(t, p->stores[i].name, gs->changelog, sizeof gs->changelog);
        gs->partitioner_name = user;
        if (writer && sub_partitioner(t, writer->sub, user, p->stores[i].name,
                                      &gs->partitioner_name, err, errlen) != 0)
            return -1;
        gs->partitioner = ks_kafka_partitioner_find(gs->partitioner_name);
    }
    return 0;
}

int ks_grow_plan_make(const ks_topology *t, const char *partitioner, ks_grow_plan *out,
                      char *err, size_t errlen)
{
    const ks_pipeline *p = t->pipeline;
    memset(out, 0, sizeof *out);
    if (!ks_kafka_partitioner_find(partitioner)) {
        snprintf(err, errlen,
                 "unknown partitioner '%s': murmur2 (Java's default, the engine's), "
                 "consistent or crc32 (librdkafka's default), fnv1a",
                 partitioner);
        return -1;
    }
    if (p->outbox) {
        snprintf(err, errlen,
                 "the pipeline has an `outbox:`, whose requests topic and held events are "
                 "per task: grow-partitions does not move them");
        return -1;
    }
    out->sources = calloc(p->source_count + 1, sizeof *out->sources);
    out->repartitions = calloc(p->source_count + 1, sizeof *out->repartitions);
    if (!out->sources || !out->repartitions) {
        snprintf(err, errlen, "out of memory");
        ks_grow_plan_free(out);
        return -1;
    }
    for (size_t i = 0; i < p->source_count; i++) {
        const ks_cfg_source *s = &p->sources[i];
        if (s->internal)
            out->repartitions[out->repartition_count++] = s->topic;
        else if (!s->table) /* a table's topic: refused with its store */
            out->sources[out->source_count++] = s->topic;
    }
    if (add_stores(t, partitioner, out, err, errlen) != 0) {
        ks_grow_plan_free(out);
        return -1;
    }
    return 0;
}

void ks_grow_plan_free(ks_grow_plan *plan)
{
    if (!plan)
        return;
    free(plan->sources);
    free(plan->repartitions);
    free(plan->stores);
    memset(plan, 0, sizeof *plan);
}
