/*
 * group_members.h - who is in the application's consumer group and which
 * partitions each holds, from the admin API's DescribeConsumerGroups
 * (librdkafka 2.0.2), grouped by process: the members of one process (its
 * workers) share a client.id, `<application>-<instance>` (worker.c sets it
 * when standby replicas are on). Standby placement (standby.c) is computed
 * from this view, so every process derives the same placement.
 */
#ifndef KS_GROUP_MEMBERS_H
#define KS_GROUP_MEMBERS_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ks_group_view {
    char **procs;       /* the processes' client ids, sorted, distinct */
    size_t proc_count;
    int *owner;         /* by partition number: index into procs, -1: nobody */
    int32_t partitions;
} ks_group_view;

/* Ask (asynchronously) for the description of `group` on admin client
 * `admin` (borrowed); the result event arrives on `queue` (borrowed). */
void ks_group_describe(rd_kafka_t *admin, rd_kafka_queue_t *queue, const char *group,
                       int timeout_ms);

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
