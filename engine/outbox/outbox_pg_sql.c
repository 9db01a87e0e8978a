/*
 * outbox_pg_sql.c - see outbox_pg_sql.h.
 */
#include "outbox/outbox_pg_sql.h"

#include <stdio.h>

void ks_pg_sql_build(ks_pg_sql *q, const char *t)
{
    /* the pick is a CTE: evaluated once, so the LIMIT holds (an IN
     * subquery may be rescanned, and each SKIP LOCKED rescan finds more) */
    snprintf(q->claim, sizeof q->claim,
             "WITH pick AS MATERIALIZED (SELECT id FROM %s WHERE status = 'PENDING' "
             "ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED), "
             "c AS (UPDATE %s AS o SET status = 'DISPATCHING', attempts = o.attempts + 1, "
             "claimed_at = now(), kafka_partition = NULL, probe_from = NULL FROM pick "
             "WHERE o.id = pick.id AND o.status = 'PENDING' "
             "RETURNING o.id, o.event_id, o.aggregate, coalesce(o.topic, $2) AS topic, o.key, "
             "o.payload, o.headers::text AS headers, o.attempts) "
             "SELECT event_id, aggregate, topic, key, payload, headers, attempts FROM c "
             "ORDER BY id", /* the order of the inserts, per aggregate too */
             t, t);
    snprintf(q->plan, sizeof q->plan,
             "UPDATE %s AS o SET kafka_partition = v.p, probe_from = v.f FROM "
             "unnest($1::text[], $2::int[], $3::bigint[], $4::int[]) AS v(e, p, f, a) "
             "WHERE o.event_id = v.e AND o.status = 'DISPATCHING' AND o.attempts = v.a",
             t);
    snprintf(q->done, sizeof q->done,
             "UPDATE %s SET status = 'PUBLISHED', kafka_partition = $3, kafka_offset = $4, "
             "last_error = NULL WHERE event_id = $1 AND status = 'DISPATCHING' AND "
             "attempts = $2",
             t);
    /* $4: 1 gives the attempt back (Kafka was never tried) */
    snprintf(q->requeue, sizeof q->requeue,
             "UPDATE %s SET status = 'PENDING', last_error = $3, attempts = attempts - $4 "
             "WHERE event_id = $1 AND status = 'DISPATCHING' AND attempts = $2",
             t);
    snprintf(q->fail, sizeof q->fail,
             "UPDATE %s SET status = 'FAILURE', last_error = $3 WHERE event_id = $1 AND "
             "status = 'DISPATCHING' AND attempts = $2",
             t);
    snprintf(q->stale, sizeof q->stale,
             "SELECT event_id, coalesce(topic, $2), kafka_partition, probe_from, attempts "
             "FROM %s WHERE status = 'DISPATCHING' AND claimed_at < now() - $1::interval "
             "ORDER BY claimed_at LIMIT 10000",
             t);
    snprintf(q->pending, sizeof q->pending,
             "SELECT 1 FROM %s WHERE status = 'PENDING' LIMIT 1", t);
    snprintf(q->counts, sizeof q->counts,
             "SELECT status, count(*) FROM %s GROUP BY status", t);
}
