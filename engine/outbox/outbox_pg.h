/*
 * outbox_pg.h - the PostgreSQL outbox backend (`outbox: { backend:
 * postgres }`): the application inserts rows into its own database in its
 * own transaction; one dispatcher thread per kstreams process claims them
 * (PENDING -> DISPATCHING, compare-and-set with FOR UPDATE SKIP LOCKED, so
 * several processes share one table), publishes them to Kafka and
 * completes them (PUBLISHED; PENDING to retry; FAILURE after
 * retry.max_attempts). Stale DISPATCHING rows are decided by probing their
 * partition for the ks.event_id header (kafka_probe.h). A row's partition
 * is the murmur2 of its key, or, with max_users_per_partition, its
 * aggregate's sequential slot kept in PostgreSQL (outbox_pg_assign.h).
 *
 * The schema (sql/outbox_pg_00*.sql) is compiled in whatever the build;
 * the dispatcher exists only when configure found libpq's headers
 * (KS_HAVE_POSTGRES); libpq itself is loaded when the dispatcher starts.
 */
#ifndef KS_OUTBOX_PG_H
#define KS_OUTBOX_PG_H

#include <stddef.h>

#include "config/config.h"
#include "http/metrics.h"

/* The text of sql/outbox_pg_001.sql, 002 and 003, a blank line between. */
extern const char ks_outbox_pg_schema[];

typedef struct ks_pg_dispatcher ks_pg_dispatcher;

/* Start the dispatcher thread of `cfg` (backend postgres). The connection
 * string comes from cfg->dsn or the environment variable cfg->dsn_env
 * (read here; its absence is an error); it is never logged. PostgreSQL
 * and Kafka being down are not errors: the thread waits and retries.
 * `p`, `cfg` and `metrics` (NULL: none) are borrowed until stop.
 * 0, or a negative ks_err with err (KS_ERR_UNSUPPORTED when built without
 * libpq or when libpq.so.5 cannot be loaded: pg/pq_dl.h). */
int ks_pg_dispatcher_start(const ks_pipeline *p, const ks_cfg_outbox *cfg, ks_metrics *metrics,
                           ks_pg_dispatcher **out, char *err, size_t errlen);

/* Finish the batch in flight, stop and join the thread, free. NULL is
 * fine. */
void ks_pg_dispatcher_stop(ks_pg_dispatcher *d);

#endif /* KS_OUTBOX_PG_H */
