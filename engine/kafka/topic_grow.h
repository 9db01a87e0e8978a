/*
 * topic_grow.h - grow a topic's partition count through the admin API
 * (CreatePartitions), as sequential partition assignment does when a
 * user's partition does not exist yet (both outbox backends), and as
 * `kstreams grow-partitions` does to sources, repartitions and changelogs.
 */
#ifndef KS_TOPIC_GROW_H
#define KS_TOPIC_GROW_H

#include <stddef.h>
#include <stdint.h>

#include <librdkafka/rdkafka.h>

/*
 * Grow `topic` to at least `count` partitions through `rk` (borrowed; a
 * producer), then wait until rk's metadata shows them, since producing to
 * a partition the client does not know yet fails at once. A topic that
 * already has them, or that another client grows first, is fine. *seen
 * (may be NULL) receives the count now. Logs "topic T grown from A to B
 * partitions" when this call asked for the growth. Returns 0, or -1 with
 * err.
 */
int ks_topic_grow(rd_kafka_t *rk, const char *topic, int32_t count, int32_t *seen, char *err,
                  size_t errlen);

#endif /* KS_TOPIC_GROW_H */
