/*
 * dispatcher.h - the outbox dispatcher thread: claims PENDING rows,
 * publishes them with key = user id AND the user's assigned partition
 * (idempotent producer, header ks.event_id = the event id), completes
 * them by compare-and-set, and resolves stale DISPATCHING rows by probing
 * the partition for their event id (never by timeout alone).
 *
 * Kafka being down is normal: the thread waits and retries; rows stay
 * PENDING and do not use up attempts while nothing can be tried.
 */
#ifndef KS_DISPATCHER_H
#define KS_DISPATCHER_H

#include <stddef.h>

#include "config/config.h"
#include "http/metrics.h"
#include "outbox/outbox.h"

typedef struct ks_dispatcher ks_dispatcher;

/* Start the thread. `ob`, `p`, `cfg` and `metrics` (NULL: none; the
 * outbox's gauges and counters go there about once a second) are borrowed
 * and must outlive ks_dispatcher_stop. 0, or a negative ks_err with err. */
int ks_dispatcher_start(ks_outbox *ob, const ks_pipeline *p, const ks_cfg_outbox *cfg,
                        ks_metrics *metrics, ks_dispatcher **out, char *err, size_t errlen);

/* Finish the batch in flight, stop and join the thread, free. NULL is
 * fine. */
void ks_dispatcher_stop(ks_dispatcher *d);

#endif /* KS_DISPATCHER_H */
