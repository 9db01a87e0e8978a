/*
 * restorer.h - the changelog reader of one worker (Kafka Streams'
 * StoreChangelogReader): before a task runs, each of its changelogged
 * stores replays its changelog from the store's checkpoint to the last
 * stable offset, all partitions of an assignment at once. Two assign-only
 * consumers that never join the group: the
 * read_committed one replays, the read_uncommitted "probe" reads high
 * watermarks (the worker's repartition purge uses it too).
 *
 * Errors as worker.h says. One thread: the worker's.
 */
#ifndef KS_RESTORER_H
#define KS_RESTORER_H

#include <librdkafka/rdkafka.h>

#include "runtime/engine.h"
#include "runtime/task.h"

typedef struct ks_restorer {
    ks_engine *eng;        /* borrowed */
    const char *where;     /* borrowed: the worker's name for logs */
    rd_kafka_t *consumer;  /* read_committed: replays */
    rd_kafka_t *probe;     /* read_uncommitted: high watermarks only */
} ks_restorer;

/* Create the two consumers for `eng`'s pipeline; `where` is borrowed and
 * must outlive `r`. 0, or KS_ERR_IO with err set (ks_restorer_free frees
 * what was made). */
int ks_restorer_init(ks_restorer *r, ks_engine *eng, const char *where, char *err,
                     size_t errlen);

/* Destroy the consumers (after whatever borrowed the probe). A zeroed `r`
 * is fine. */
void ks_restorer_free(ks_restorer *r);

/*
 * Bring every changelogged store of the `n` tasks in `tasks` (just
 * created, borrowed) up to its changelog's last stable offset, in one
 * pass: one consumer over all their changelog partitions at once, after
 * waiting (up to 2 minutes in all) for a previous owner's open
 * transactions to end. Each task's stores commit, with their
 * checkpoints, every KS_RESTORE_BATCH records (or 16 MiB folded) and when
 * a partition reaches its end. A table's store is restored from the table's topic;
 * when the table's changes flow on to nodes, only up to the offset the
 * group committed for it, read with `group` (the worker's consumer,
 * borrowed). 0; KS_ERR_STATE when the engine began stopping meanwhile;
 * another negative ks_err after stopping the engine (the message names
 * the topic and partition). On error every task's open store batch is
 * aborted (what committed before stays, with its checkpoint).
 */
int ks_restorer_restore(ks_restorer *r, ks_task *const *tasks, size_t n, rd_kafka_t *group);

/* Records replayed into a task's stores between two commits of a
 * restore (a changelog's are folded by key first: restore_fold.h). */
#define KS_RESTORE_BATCH 500000

#endif /* KS_RESTORER_H */
