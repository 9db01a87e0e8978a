/*
 * assignment.h - the partitions a worker owns now: their tasks, and where
 * each source partition stands. Written by the worker's loop (worker.c:
 * rebalances, records), read by its committer (committer.c: the offsets a
 * batch commits, the seek back after an abort). One thread.
 */
#ifndef KS_ASSIGNMENT_H
#define KS_ASSIGNMENT_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/task.h"

typedef struct ks_assignment {
    const ks_pipeline *p; /* borrowed */
    int32_t partitions;   /* tasks of the topology */
    ks_task **tasks;      /* by partition number; NULL when not assigned */
    uint64_t *epoch;      /* by partition number; bumped on revoke */
    /* by slot (ks_slot): next offset to process (-1: none in this batch),
     * last committed offset (-1: unknown) */
    int64_t *pos;
    int64_t *committed;
} ks_assignment;

/* The index of source `source` of partition `partition` in pos/committed
 * (and in any other array kept per source partition). */
static inline size_t ks_slot(const ks_assignment *a, int32_t partition, size_t source)
{
    return (size_t)partition * a->p->source_count + source;
}

#endif /* KS_ASSIGNMENT_H */
