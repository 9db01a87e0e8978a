/*
 * group_members.h - who is in the application's consumer group and which
 * partitions each holds, from the admin API's DescribeConsumerGroups
 * (librdkafka >= 2.0.0; 2.0.2 returns each member's client.id, host and
 * assignment). Two readers: the query server's routing
 * (runtime/query_server.c) takes the members as they are; standby
 * placement (runtime/standby.c) takes them grouped by process (the
 * process part of each client.id, member_id.h), so every process derives
 * the same placement.
 */
#ifndef KS_GROUP_MEMBERS_H
#define KS_GROUP_MEMBERS_H

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

typedef struct ks_group_view {
    char **procs;       /* the processes' client ids, sorted, distinct */
    size_t proc_count;
    int *owner;         /* by partition number: index into procs, -1: nobody */
    int32_t partitions;
} ks_group_view;

/* Ask (asynchronously) for the description of `group` on admin client
 * `admin` (borrowed); the result event arrives on `queue` (borrowed). */
void ks_group_describe_async(rd_kafka_t *admin, rd_kafka_queue_t *queue, const char *group,
                             int timeout_ms);

/*
 * Read a DescribeConsumerGroups result event (borrowed; the caller
 * destroys it): 0 with *members (free with ks_group_members_free), *count
 * (0 for a group with no members, or one that does not exist) and *stable
 * (1 when the group is not rebalancing); a negative ks_err with err set
 * on an error result or out of memory (nothing to free).
 */
int ks_group_members_read(rd_kafka_event_t *ev, ks_group_member **members, size_t *count,
                          int *stable, char *err, size_t errlen);

/*
 * Describe `group` with `admin` (borrowed; any client type), waiting up to
 * timeout_ms. 0 with *members (free with ks_group_members_free) and
 * *count, whatever the group's state; a negative ks_err with err set when
 * the broker could not answer.
 */
int ks_group_describe(rd_kafka_t *admin, const char *group, int timeout_ms,
                      ks_group_member **members, size_t *count, char *err, size_t errlen);

/* Free what ks_group_describe or ks_group_members_read returned. NULL is
 * fine. */
void ks_group_members_free(ks_group_member *members, size_t count);

/*
 * The view of `n` members (borrowed) for tasks 0..partitions-1 into *out:
 * the processes are the distinct process parts of the client ids, sorted.
 * 1 when filled (free with ks_group_view_free), 0 when there is no member,
 * KS_ERR_NOMEM.
 */
int ks_group_view_build(const ks_group_member *m, size_t n, int32_t partitions,
                        ks_group_view *out);

/*
 * Read a DescribeConsumerGroups result event (borrowed; the caller
 * destroys it) into *out for tasks 0..partitions-1. 1 when the group is
 * Stable and *out was filled (free it with ks_group_view_free); 0 when
 * the group is rebalancing or empty (nothing to free); a negative ks_err
 * with err set on an error result or out of memory.
 */
int ks_group_view_read(rd_kafka_event_t *ev, int32_t partitions, ks_group_view *out,
                       char *err, size_t errlen);

void ks_group_view_free(ks_group_view *v);

/* Index of process `id` in v->procs, or -1. */
int ks_group_view_find(const ks_group_view *v, const char *id);

/* 1 when process `proc` (an index into v->procs) should hold a standby of
 * task `partition` with `replicas` standbys per task: it is one of the
 * `replicas` processes after the owner in the sorted order (wrapping
 * round), never the owner; fewer when the group has fewer processes. 0
 * otherwise, also for a task nobody owns. */
int ks_group_view_is_standby(const ks_group_view *v, int32_t partition, int proc,
                             int replicas);

#endif /* KS_GROUP_MEMBERS_H */
