/*
 * kafka_probe.h - read one partition range and collect the event ids its
 * records carry in a header: how both outbox dispatchers (LMDB and
 * PostgreSQL) decide a stale DISPATCHING row (found -> PUBLISHED at that
 * offset, absent -> PENDING) instead of guessing from a timeout.
 */
#ifndef KS_KAFKA_PROBE_H
#define KS_KAFKA_PROBE_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "http/metrics.h"

#define KS_PROBE_ID_MAX 64 /* longer header values are not event ids */

typedef struct ks_probe_hit {
    char id[KS_PROBE_ID_MAX + 1];
    int64_t offset;
} ks_probe_hit;

/* Assign `consumer` (borrowed; a consumer with a group id and no commits)
 * to topic/part at `from`, read every record up to `hi` (exclusive) and
 * return in *out (caller frees) the value of header `header` of each
 * record that has one, with its offset. Unassigns before returning.
 * 0; KS_ERR_IO with err when the range could not be read within 30 s;
 * KS_ERR_NOMEM. */
int ks_probe_read(rd_kafka_t *consumer, const char *topic, int32_t part, int64_t from,
                  int64_t hi, const char *header, ks_probe_hit **out, size_t *nout, char *err,
                  size_t errlen);

/* The two clients of an outbox dispatcher: an idempotent producer
 * (acks=all, 15 s message timeout) whose delivery reports go to `on_dr`,
 * and a probe consumer in group `<application>-outbox-probe` that commits
 * nothing (the group id only because librdkafka loops without one). Both
 * are the caller's; on failure the one made (if any) is in *prod.
 * 0; KS_ERR_INVALID (a bad kafka property, err names it) or KS_ERR_IO. */
int ks_outbox_kafka_clients(const ks_pipeline *p,
                            void (*on_dr)(rd_kafka_t *, const rd_kafka_message_t *, void *),
                            rd_kafka_t **prod, rd_kafka_t **probe, char *err, size_t errlen);

/* Frees the clients ks_outbox_kafka_clients made (either may be NULL).
 * `drain` (a dispatcher stopping): first waits up to 5 s for the producer's
 * deliveries in flight and has the probe leave its group; without (a start
 * that failed, nothing was sent): just destroys them. */
void ks_outbox_kafka_clients_free(rd_kafka_t *prod, rd_kafka_t *probe, int drain);

/* Sets kstreams_outbox_probe_total{outbox, decision="found"|"absent"} of
 * outbox `name` to the dispatcher's counts (docs/operations.md). */
void ks_outbox_probe_metrics(ks_metrics *m, const char *name, long found, long absent);

#endif /* KS_KAFKA_PROBE_H */
