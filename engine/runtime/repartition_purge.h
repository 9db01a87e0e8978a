/*
 * repartition_purge.h - delete what was consumed from repartition topics.
 *
 * Repartition topics keep records forever by retention (retention.ms=-1):
 * a record must stay until its consumer has committed past it, however
 * long the engine was down. After a commit the records below the
 * committed offset are never read again, so a worker asks the broker to
 * delete them (DeleteRecords, as Kafka Streams purges its repartition
 * topics). The request is asynchronous and at most one is in flight:
 * nothing on the per-record path waits for it.
 */
#ifndef KS_REPARTITION_PURGE_H
#define KS_REPARTITION_PURGE_H

#include <stdint.h>

#include <librdkafka/rdkafka.h>

typedef struct ks_purge ks_purge;

/* A purger that sends its requests through `rk` (borrowed: it must outlive
 * the purger; any client type will do) at most every `interval_ms`.
 * `where` names the owner in log lines (copied). NULL when out of memory. */
ks_purge *ks_purge_new(rd_kafka_t *rk, int64_t interval_ms, const char *where);

/* Free it; a request still in flight is forgotten. NULL is fine. */
void ks_purge_free(ks_purge *pg);

/* 1 when a new request may be sent at `now_ms` (monotonic): the interval
 * has passed and no request is in flight. Also collects the answer of the
 * last request (failures are logged, never fatal: the next request covers
 * the same records). */
int ks_purge_due(ks_purge *pg, int64_t now_ms);

/* Delete the records below each element's offset (topic, partition,
 * offset = the committed offset). Takes nothing over from `offsets`.
 * Skips partitions whose offset has not moved since the last request
 * that succeeded; sends nothing when none has. */
void ks_purge_send(ks_purge *pg, const rd_kafka_topic_partition_list_t *offsets,
                   int64_t now_ms);

/* Requests sent so far (0 for NULL). */
uint64_t ks_purge_requests(const ks_purge *pg);

#endif /* KS_REPARTITION_PURGE_H */
