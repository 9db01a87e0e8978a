/*
 * partition_assign.h - sequential partition assignment of users (mailbox
 * owners) to the partitions of one topic, the same in every engine
 * instance of an application.
 *
 * The authority is a Kafka topic, <application>-user-partitions: one
 * partition, delete policy with infinite retention (NOT compacted: the
 * order of the log is the assignment, see below). To assign a user an
 * instance appends a claim record (key = user id) and reads the log to its
 * end. Every instance reads the same log in the same order and applies
 * one rule: the n-th distinct user in the log (n = 0, 1, ...) gets
 * partition n / max_users_per_partition. A user claimed twice (two
 * instances at once) keeps the slot of its first claim; later claims are
 * ignored. So no user ever has two partitions, partition p fills up to
 * max_users_per_partition before p+1 opens, and no lock is needed.
 *
 * The mapping read so far is cached durably in the outbox environment
 * ("assign": user -> partition; "assign_meta": next log offset and users
 * seen), so a restart reads only the tail of the log.
 *
 * When a user's partition does not exist yet, the topic is grown with
 * CreatePartitions (another instance growing it first is fine).
 *
 * Threads: one assigner is used by one thread (the dispatcher).
 */
#ifndef KS_PARTITION_ASSIGN_H
#define KS_PARTITION_ASSIGN_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "outbox/outbox.h"

typedef struct ks_assigner ks_assigner;

/* A new assigner for `topic` (borrowed strings are copied). Creates no
 * Kafka connection yet. 0, or a negative ks_err with err. The outbox is
 * borrowed and must outlive the assigner. */
int ks_assigner_new(ks_outbox *ob, const ks_pipeline *p, const char *topic,
                    int max_users_per_partition, ks_assigner **out, char *err,
                    size_t errlen);
void ks_assigner_free(ks_assigner *a);

/* Partition of `user` from the local cache: 0 or KS_ERR_NOT_FOUND. No
 * Kafka call. */
int ks_assigner_lookup(ks_assigner *a, const char *user, int32_t *partition);

/*
 * Make sure the claims topic and `topic` exist (creating them), then read
 * the claims log to its end. 0, or KS_ERR_IO with err when Kafka cannot be
 * reached (nothing is claimed then).
 */
int ks_assigner_sync(ks_assigner *a, char *err, size_t errlen);

/*
 * Partitions of `n` users into partitions[i]: known users from the cache;
 * the others are claimed, the log read to its end, and the topic grown so
 * that every returned partition exists. 0, or KS_ERR_IO with err.
 */
int ks_assigner_assign(ks_assigner *a, const char *const *users, size_t n,
                       int32_t *partitions, char *err, size_t errlen);

/* Partition count of `topic` as last seen (0: unknown). */
int32_t ks_assigner_partition_count(const ks_assigner *a);

/* Grow `topic` to at least `count` partitions. 0 or KS_ERR_IO with err. */
int ks_assigner_grow(ks_assigner *a, int32_t count, char *err, size_t errlen);

#endif /* KS_PARTITION_ASSIGN_H */
