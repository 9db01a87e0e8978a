/*
 * worker_metrics.h - what one worker reports about itself, about once a
 * second (the registry's lock stays off the per-record path): its
 * commits, aborts, timings and poison records, each task's records in and
 * out, and each source partition's lag, with the stall watch that warns
 * when a partition with a backlog makes no committed progress.
 *
 * One thread: the worker's.
 */
#ifndef KS_WORKER_METRICS_H
#define KS_WORKER_METRICS_H

#include <librdkafka/rdkafka.h>
#include <stdint.h>

#include "runtime/assignment.h"
#include "runtime/committer.h"
#include "runtime/stall.h"

typedef struct ks_worker_metrics {
    struct ks_metrics *registry; /* borrowed: the engine's */
    const char *where;           /* borrowed: the worker's name for logs */
    int id;                      /* the worker's */
    const ks_assignment *a;      /* borrowed: the worker's */
    rd_kafka_t *consumer;        /* borrowed: watermarks, group offsets */
    ks_stall *stalls;            /* by slot: committed progress watch */
    int64_t *group_pos;          /* by slot: the group's offset at assignment;
                                    -1 not looked up yet, -2 the look-up failed */
    /* by partition: task counters already added to the registry (a task
     * object lives for one assignment; the metrics outlive it) */
    uint64_t *published_in;
    uint64_t *published_out;
    int64_t last_publish_ms;
    /* counted by the loop */
    uint64_t processed;
    double process_seconds;
} ks_worker_metrics;

/* Set up `m` (every pointer borrowed, and must outlive it). 0, or
 * KS_ERR_NOMEM (ks_worker_metrics_free frees what was made). */
int ks_worker_metrics_init(ks_worker_metrics *m, struct ks_metrics *registry, const char *where,
                           int id, const ks_assignment *a, rd_kafka_t *consumer);

/* Free what `m` owns. A zeroed `m` is fine. */
void ks_worker_metrics_free(ks_worker_metrics *m);

/* Task `partition` was just opened: its counts and positions start anew. */
void ks_worker_metrics_task_opened(ks_worker_metrics *m, int32_t partition);

/* Add what task `partition` counted since the last time to the registry
 * (each publish does; the loop before it closes the task). */
void ks_worker_metrics_task_counts(ks_worker_metrics *m, int32_t partition);

/* At `now_ms` (ks_mono_ms), publish when a second went by since the last
 * time: the committer's counters, `poisons`, every task's counts, lag and
 * stalls. */
void ks_worker_metrics_publish(ks_worker_metrics *m, const ks_committer *c, uint64_t poisons,
                               int64_t now_ms);

#endif /* KS_WORKER_METRICS_H */
