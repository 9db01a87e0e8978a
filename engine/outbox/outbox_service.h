/*
 * outbox_service.h - the outbox of a pipeline as one unit the engine
 * starts and stops: the LMDB outbox (<state_dir>/<application>/outbox),
 * its HTTP endpoint, its dispatcher thread and the consumers of its
 * requests (events from processors) and results (from the mailbox).
 */
#ifndef KS_OUTBOX_SERVICE_H
#define KS_OUTBOX_SERVICE_H

#include <stddef.h>

#include "config/config.h"
#include "http/metrics.h"

typedef struct ks_outbox_service ks_outbox_service;

/* Open the outbox and start serving and dispatching for p->outbox (which
 * must be set). Needs no Kafka. `p` and `metrics` (NULL: none) are
 * borrowed until stop. 0, or a negative ks_err with err. */
int ks_outbox_service_start(const ks_pipeline *p, ks_metrics *metrics, ks_outbox_service **out,
                            char *err, size_t errlen);

/* Stop the endpoint, then the dispatcher (its batch finishes), then close
 * the outbox. NULL is fine. */
void ks_outbox_service_stop(ks_outbox_service *s);

/* Directory of the outbox environment of p: <state_dir>/<application>/outbox. */
void ks_outbox_dir(const ks_pipeline *p, char *buf, size_t len);

#endif /* KS_OUTBOX_SERVICE_H */
