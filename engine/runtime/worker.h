/*
 * worker.h - a worker: one thread, one consumer-group member, one producer
 * (transactional under exactly-once), and the tasks of the partitions the
 * group assigned to it. Its parts, as Kafka Streams splits StreamThread:
 *   worker.c          the thread and its poll / process loop, rebalances
 *   collector.h       the producer: sink records, changelogs, delivery errors
 *   restorer.h        restore the new tasks' stores from their changelogs, all at once
 *   committer.h       open, commit and abort batches (both guarantees)
 *   assignment.h      the tasks and offsets the loop and the committer share
 *   poison.h          the poison policy and the records set aside for it
 *   worker_metrics.h  counters, lag and stall warnings
 *
 * Errors, in the worker and all of its parts: a function returns 0, or a
 * negative ks_err (include/kstreams/kstreams.h) that says what failed
 * (KS_ERR_IO: Kafka or LMDB; KS_ERR_STORE_FULL; KS_ERR_INVALID: a record
 * or an output that a replay cannot mend; KS_ERR_STATE: the engine is
 * stopping or the batch cannot go on). The function that finds the error
 * logs it, once, and deals with it before returning: an error a replay
 * may mend aborts the batch (ks_committer_abort), one it cannot stops the
 * engine (ks_engine_fail); callers only pass the code up. What a task's
 * run produced beyond its verdict comes back in explicit fields and
 * calls (task->sink_err, ks_task_batch_error), never in a buffer an
 * I/O callback fills in on the side.
 */
#ifndef KS_WORKER_H
#define KS_WORKER_H

#include "runtime/engine.h"

/* Create worker `id` of `eng` (borrowed: it must outlive the worker) and
 * start its thread. 0, or a negative ks_err with err set (nothing is left
 * running). */
int ks_worker_start(ks_engine *eng, int id, ks_worker **out, char *err,
                    size_t errlen);

/* Wait for the worker's thread to end (after ks_engine_stop) and free it. */
void ks_worker_join(ks_worker *w);

#endif /* KS_WORKER_H */
