/*
 * committer.h - the batches of one worker: open, commit (either
 * guarantee), abort. A batch is the records processed between two
 * commits. Its commit sequence, exactly-once:
 *   1. flush the producer (delivery reports give changelog offsets)
 *   2. check the epoch of every task in the batch
 *   3. send_offsets_to_transaction (with the group metadata: KIP-447)
 *   4. commit_transaction
 *   5. per task: commit the LMDB transaction
 * Between 2 and 3 each task writes its checkpoints into its LMDB
 * transaction and makes sure LMDB has room to commit it, so a full map
 * is found while the batch can still be aborted (docs/delivery-guarantees.md
 * has the same numbering).
 * Any failure before 5 aborts the Kafka transaction and every LMDB
 * transaction and seeks the consumer back to the last committed offsets.
 * A crash between 4 and 5 leaves the store behind its changelog; restore
 * replays that tail from the checkpoint.
 *
 * At-least-once: flush, commit LMDB with checkpoints, commit offsets.
 *
 * Errors as worker.h says: every call returns 0 or a negative ks_err,
 * after it aborted the batch (a replay may succeed) or stopped the engine
 * (it cannot). One thread: the worker's.
 */
#ifndef KS_COMMITTER_H
#define KS_COMMITTER_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/assignment.h"
#include "runtime/collector.h"
#include "runtime/engine.h"

typedef struct ks_committer {
    ks_engine *eng;         /* borrowed */
    const char *where;      /* borrowed: the worker's name for logs */
    int eos;
    ks_assignment *a;       /* borrowed: the worker's */
    ks_collector *out;      /* borrowed: the worker's producer */
    rd_kafka_t *consumer;   /* borrowed: the group member */
    /* the open batch */
    int in_batch;
    int64_t batch_started_ms;
    size_t batch_records;   /* counted by the loop */
    size_t max_batch;       /* records, adapted after each commit */
    uint64_t *batch_epoch;  /* by partition: a->epoch when the batch began */
    int retries;            /* aborts in a row for the same reason */
    char last_abort[640];   /* that reason */
    /* counters for the metrics */
    uint64_t commits;
    uint64_t aborts;
    double commit_seconds;
} ks_committer;

/* Set up `c` for the worker whose parts are given (all borrowed, and must
 * outlive `c`). 0, or KS_ERR_NOMEM. */
int ks_committer_init(ks_committer *c, ks_engine *eng, const char *where, ks_assignment *a,
                      ks_collector *out, rd_kafka_t *consumer);

/* Free what `c` owns (nothing borrowed). A zeroed `c` is fine. */
void ks_committer_free(ks_committer *c);

/* Open a batch unless one is open (under exactly-once: begin the Kafka
 * transaction). 0, or KS_ERR_IO after stopping the engine. */
int ks_committer_begin(ks_committer *c);

/* Commit the open batch (nothing to do without one) and adapt the batch
 * limit. 0, or a negative ks_err: the batch was aborted and the consumer
 * seeks back to the committed offsets, or the engine is stopping. */
int ks_committer_commit(ks_committer *c);

/* Abort the open batch (no-op without one): Kafka transaction, LMDB
 * transactions, positions; `why` is logged. Stops the engine after ten
 * aborts in a row for the same `why`. */
void ks_committer_abort(ks_committer *c, const char *why);

#endif /* KS_COMMITTER_H */
