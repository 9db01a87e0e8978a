/*
 * outbox_requests.h - the outbox side of api->outbox_enqueue: a thread
 * that consumes the requests topic `<application>-outbox-requests`
 * (key = user id, value = payload, header ks-event-id = the derived id),
 * read_committed, in the consumer group `<application>-outbox-requests`,
 * and turns each request into an outbox row exactly once:
 *
 *   1. hold: the rows of a poll burst are written PREQUEUED in one LMDB
 *      txn, each remembering its request's partition/offset; an id the
 *      outbox already has is a replay and is left alone;
 *   2. commit the consumer offsets (synchronously, generation-checked);
 *   3. release: rows whose request lies below the committed offset go
 *      PREQUEUED -> PENDING, and the dispatcher publishes them.
 *
 * A crash or a lost partition between 1 and 3 leaves held rows; they are
 * settled against the group's committed offsets before the first
 * subscription and on every revocation: below the committed offset ->
 * released, else forgotten (deleted), because whoever consumes the
 * partition next reads that request again. So a request becomes a
 * PENDING row in exactly one outbox, even with several engine instances.
 */
#ifndef KS_OUTBOX_REQUESTS_H
#define KS_OUTBOX_REQUESTS_H

#include <stddef.h>

#include "config/config.h"
#include "outbox/outbox.h"

typedef struct ks_outbox_requests ks_outbox_requests;

/* "<application>-outbox-requests". */
void ks_outbox_requests_topic(const ks_pipeline *p, char *buf, size_t len);

/* The header that carries the event id on a request record. */
#define KS_OUTBOX_ID_HEADER "ks-event-id"

/* Start the thread. `ob` and `p` are borrowed until stop. Kafka may be
 * down: the thread waits. 0 or a negative ks_err with err. */
int ks_outbox_requests_start(ks_outbox *ob, const ks_pipeline *p, ks_outbox_requests **out,
                             char *err, size_t errlen);

/* Stop and join the thread (held rows are settled by the revocation of
 * the consumer's close), free. NULL is fine. */
void ks_outbox_requests_stop(ks_outbox_requests *r);

#endif /* KS_OUTBOX_REQUESTS_H */
