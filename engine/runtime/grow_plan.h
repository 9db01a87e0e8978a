/*
 * grow_plan.h - what `kstreams grow-partitions` must do to a pipeline's
 * topics, decided from the topology alone (no broker): the source and
 * repartition topics to grow, and per key-value store the changelog whose
 * keys move and the partitioner that places them. Stores whose keys cannot
 * be placed by partition make the plan fail, naming the store and why.
 */
#ifndef KS_GROW_PLAN_H
#define KS_GROW_PLAN_H

#include <stddef.h>

#include "kafka/partitioner.h"
#include "runtime/topology.h"

/* One store whose changelog grows and whose keys move. */
typedef struct ks_grow_store {
    int store;                        /* index into pipeline->stores       */
    char changelog[512];              /* its changelog topic               */
    ks_kafka_partitioner partitioner; /* where a key belongs               */
    const char *partitioner_name;     /* borrowed: for messages            */
} ks_grow_store;

typedef struct ks_grow_plan {
    const char **sources;      /* the sources' topics (borrowed from the pipeline) */
    size_t source_count;
    const char **repartitions; /* the repartition topics (borrowed)            */
    size_t repartition_count;
    ks_grow_store *stores;
    size_t store_count;
} ks_grow_plan;

/*
 * The plan for topology `t` (borrowed; it must outlive the plan), whose
 * source topics are written by producers with the partitioner named
 * `partitioner` (ks_kafka_partitioner_find); the records of a repartition
 * topic are the engine's, placed with murmur2. 0 with *out filled (free
 * with ks_grow_plan_free); -1 with err when the partitioner is unknown or
 * the pipeline holds state grow-partitions cannot move (an outbox, a
 * table's store, a store without changelog, a windowed store, a store
 * written by a processor that does not key it by the record key), the
 * message naming the store and why; nothing to free then.
 */
int ks_grow_plan_make(const ks_topology *t, const char *partitioner, ks_grow_plan *out,
                      char *err, size_t errlen);

/* Free what ks_grow_plan_make filled. NULL or a zeroed plan is fine. */
void ks_grow_plan_free(ks_grow_plan *plan);

#endif /* KS_GROW_PLAN_H */
