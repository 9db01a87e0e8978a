/*
 * fair_poll.h - a worker's source partitions served in turn.
 *
 * librdkafka gives a consumer one queue for all its partitions, filled in
 * the order fetch responses arrive: when one partition's backlog is
 * prefetched ahead of the others (a broker that was down comes back, a
 * leader moves), the others wait behind it for as long as it takes to work
 * through it (seen: two of four partitions with no committed progress for
 * 110-150 s while their siblings moved, under broker kills). Here each
 * assigned partition gets its own queue (not forwarded to the consumer's)
 * and the worker takes at most `burst` records from one before moving to
 * the next that has any. Rebalance events and errors stay on the
 * consumer's queue, served by rd_kafka_consumer_poll().
 */
#ifndef KS_FAIR_POLL_H
#define KS_FAIR_POLL_H

#include <stddef.h>
#include <stdint.h>

#include <librdkafka/rdkafka.h>

typedef struct ks_fair_poll ks_fair_poll;

/* For `consumer` (borrowed; it must outlive the result), whose sources are
 * `topics[0..topic_count)` (borrowed), each with `partitions` partitions.
 * NULL when out of memory. */
ks_fair_poll *ks_fair_poll_new(rd_kafka_t *consumer, const char *const *topics,
                               size_t topic_count, int32_t partitions, int burst);
void ks_fair_poll_free(ks_fair_poll *fp);

/* Give each partition of `parts` its own queue. Call it in the rebalance
 * callback BEFORE rd_kafka_assign(): a queue set up first never forwards a
 * record to the consumer's queue (librdkafka 2.0.2 keeps forwarding that
 * the application set when it starts fetching), so a partition's records
 * are never split between two queues. 0, or -1 when librdkafka gave no
 * queue for one (its records then arrive on the consumer's queue). */
int ks_fair_poll_assign(ks_fair_poll *fp, const rd_kafka_topic_partition_list_t *parts);

/* Drop the queues of `parts` (after they are revoked). */
void ks_fair_poll_revoke(ks_fair_poll *fp, const rd_kafka_topic_partition_list_t *parts);

/* The next record (or per-partition error event) in fair order, without
 * waiting; NULL when every partition queue is empty. When the queues run
 * dry after a long run of records it first wakes librdkafka's fetcher (one
 * watermark query, up to 200 ms; fair_poll.c says why; KS_FETCH_WAKE=0 in
 * the environment turns it off for measurements). The caller destroys
 * it with rd_kafka_message_destroy(). */
rd_kafka_message_t *ks_fair_poll_next(ks_fair_poll *fp);

#endif /* KS_FAIR_POLL_H */
