/*
 * group_describe.h - who holds which partitions in a consumer group: the
 * admin API's DescribeConsumerGroups (librdkafka >= 2.0.0; 2.0.2 returns
 * each member's client.id, host and assignment). Self-contained, for the
 * query server's routing (runtime/query_server.c).
 */
#ifndef KS_KAFKA_GROUP_DESCRIBE_H
#define KS_KAFKA_GROUP_DESCRIBE_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>
#include <stdint.h>

/* One member: its client.id and the partition numbers it is assigned, of
 * any topic, each once, ascending. All owned by the array. */
typedef struct ks_group_member {
    char *client_id;
    int32_t *partitions;
    size_t partition_count;
} ks_group_member;

/*
 * Describe `group` with `admin` (borrowed; any client type), waiting up to
 * timeout_ms. 0 with *members (free with ks_group_members_free) and
 * *count (0 for a group with no members, or one that does not exist);
 * a negative ks_err with err set when the broker could not answer.
 */
int ks_group_describe(rd_kafka_t *admin, const char *group, int timeout_ms,
                      ks_group_member **members, size_t *count, char *err, size_t errlen);

/* Free what ks_group_describe returned. NULL is fine. */
void ks_group_members_free(ks_group_member *members, size_t count);

#endif /* KS_KAFKA_GROUP_DESCRIBE_H */
