/*
 * collector.h - the record collector of one worker (Kafka Streams'
 * RecordCollector): its producer, and everything a batch writes to Kafka
 * through it: sink records, changelog writes, the outbox's requests and
 * dead letters. It keeps the changelog offsets the delivery reports give
 * (the task's changelog_hi) and the first delivery failure of the batch.
 *
 * The collector does not decide what a failure means for the batch: it
 * returns the error (worker.h says how errors travel) and the committer
 * or the loop acts on it. Used on the worker's thread only.
 */
#ifndef KS_COLLECTOR_H
#define KS_COLLECTOR_H

#include <librdkafka/rdkafka.h>
#include <stdint.h>

#include "runtime/task.h"

/* The first output a sink refused since ks_collector_clear_refusal: which
 * sink, and why (ks_serde_check's static sentence). sink NULL: none. */
typedef struct ks_refusal {
    const ks_topo_node *sink;
    const char *why;
} ks_refusal;

typedef struct ks_collector {
    const ks_topology *topo; /* borrowed */
    const char *where;       /* borrowed: the worker's name for logs */
    int eos;                 /* transactional producer */
    char txn_id[512];
    rd_kafka_t *producer;
    int64_t txn_timeout_ms; /* the producer's transaction.timeout.ms */
    char **changelog_topics; /* by store index */
    /* the producer's topic handles: the changelogs' and sinks' made with
     * it, others on first use (collector.c: a produce by name waits up to
     * a second for a new topic's metadata, and looks the topic up under a
     * lock per record) */
    struct ks_topic_handle *handles;
    size_t handle_count, handle_cap;
    /* the first delivery failure since ks_collector_clear_delivery_error */
    rd_kafka_resp_err_t delivery_err;
    char delivery_errstr[256];
    ks_refusal refusal;
} ks_collector;

/*
 * Set up `c` for the topology's pipeline: changelog topic names and the
 * producer (transactional with `txn_id` under exactly-once; its
 * transactions initialised). `where` is borrowed for logs and must outlive
 * `c`; `c` must not move (the producer's delivery reports point at it).
 * 0, or KS_ERR_NOMEM / KS_ERR_IO with err set; ks_collector_free frees
 * what was made either way.
 */
int ks_collector_init(ks_collector *c, const ks_topology *topo, const char *where,
                      const char *txn_id, char *err, size_t errlen);

/* Flush (up to 10 s) and destroy the producer, free the topic names. */
void ks_collector_free(ks_collector *c);

/* Replace a producer that hit a fatal error (fenced, or its epoch bumped
 * after a transaction timeout). 0, or KS_ERR_IO with err set (then no
 * producer is left: the engine must stop). */
int ks_collector_rebuild(ks_collector *c, char *err, size_t errlen);

/* The ks_task_io that sends a task's outputs through `c`; plugin
 * counters go to `metrics` (borrowed). */
ks_task_io ks_collector_task_io(ks_collector *c, struct ks_metrics *metrics);

/*
 * Write record m of `topic` to dead-letter topic `dlq` with headers
 * ks.topic, ks.partition, ks.offset, ks.error (`why`) and, when `reason`
 * is not NULL, ks.error.reason, in the open batch. 0, or KS_ERR_IO
 * (logged).
 */
int ks_collector_dead_letter(ks_collector *c, const char *dlq, const rd_kafka_message_t *m,
                             const char *why, const char *reason);

/* The first delivery failure since the last clear ("topic [partition]:
 * error"), or NULL. The string lives in `c`. */
const char *ks_collector_delivery_error(const ks_collector *c);
void ks_collector_clear_delivery_error(ks_collector *c);

/* Forget the last refusal (before a record or punctuation runs). */
void ks_collector_clear_refusal(ks_collector *c);

#endif /* KS_COLLECTOR_H */
