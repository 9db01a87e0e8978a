/*
 * outbox_results.h - the outbox side of the mailbox: a thread that reads
 * the results the mailbox plugin produced (topic
 * `results_topic`, by default `<application>-outbox-results`; key = event id, value
 * {"status":"SUCCESS"|"PUSHED_FAILURE","result":...}) and applies them to
 * the outbox rows: start_processing (from PUBLISHED or DISPATCHING) then
 * finish, each a compare-and-set. A row already terminal is left alone,
 * so a replayed result is harmless.
 *
 * The consumer is assign-only and read_committed (a result of an aborted
 * mailbox transaction is never applied); its position per partition is
 * kept in the outbox environment (db "results_meta") after the rows it
 * covers were applied. Kafka down: waits and retries.
 */
#ifndef KS_OUTBOX_RESULTS_H
#define KS_OUTBOX_RESULTS_H

#include <stddef.h>

#include "config/config.h"
#include "outbox/outbox.h"

typedef struct ks_outbox_results ks_outbox_results;

/* The outbox's `results_topic`, by default "<application>-outbox-results". */
void ks_outbox_results_topic(const ks_pipeline *p, char *buf, size_t len);

/* Start the thread (creates the topic, 1 partition, when missing). `ob`
 * and `p` are borrowed until stop. 0 or a negative ks_err with err. */
int ks_outbox_results_start(ks_outbox *ob, const ks_pipeline *p, ks_outbox_results **out,
                            char *err, size_t errlen);

/* Stop and join the thread, keep the position, free. NULL is fine. */
void ks_outbox_results_stop(ks_outbox_results *r);

#endif /* KS_OUTBOX_RESULTS_H */
