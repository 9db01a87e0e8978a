/*
 * outbox_pg_assign.h - sequential partition assignment for the PostgreSQL
 * outbox (`max_users_per_partition` with `backend: postgres`). The
 * authority is the table ks_user_partitions (sql/outbox_pg_003.sql):
 * ks_assign_partitions() gives the n-th distinct user of a topic partition
 * n / max_users_per_partition, under a per-topic row lock, so every
 * process dispatching from the database agrees without a Kafka log. This
 * file keeps what it has read in a process-local cache (a user never
 * moves, so the cache never goes stale) and grows the topic when a user's
 * partition does not exist yet (kafka/topic_grow.h).
 *
 * Threads: one map is used by one thread (the PostgreSQL dispatcher).
 */
#ifndef KS_OUTBOX_PG_ASSIGN_H
#define KS_OUTBOX_PG_ASSIGN_H

#include <stddef.h>
#include <stdint.h>

#include <libpq-fe.h>
#include <librdkafka/rdkafka.h>

typedef struct ks_pg_assign ks_pg_assign;

/* A new, empty map for `max_users_per_partition` (>= 1). NULL when out of
 * memory. The caller owns it (ks_pg_assign_free). */
ks_pg_assign *ks_pg_assign_new(int max_users_per_partition);
void ks_pg_assign_free(ks_pg_assign *a);

/*
 * Partitions of n rows: users[i] of topics[i] into parts[i] (all strings
 * borrowed). Users not cached are assigned (or read back) by one
 * ks_assign_partitions() call per topic on `conn`; then each topic is
 * grown through `rk` (a producer) until the highest partition exists.
 * Returns 0; -1 Kafka failed (growth), -2 PostgreSQL failed; err says
 * why. Nothing is produced here.
 */
int ks_pg_assign_partitions(ks_pg_assign *a, PGconn *conn, rd_kafka_t *rk,
                            const char *const *topics, const char *const *users, int n,
                            int32_t *parts, char *err, size_t errlen);

#endif /* KS_OUTBOX_PG_ASSIGN_H */
