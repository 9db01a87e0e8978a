/*
 * group_members.c - the consumer group's processes and owners
 * (group_members.h).
 */
#include "kafka/group_members.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kstreams/kstreams.h"

void ks_group_describe(rd_kafka_t *admin, rd_kafka_queue_t *queue, const char *group,
                       int timeout_ms)
{
    rd_kafka_AdminOptions_t *o =
        rd_kafka_AdminOptions_new(admin, RD_KAFKA_ADMIN_OP_DESCRIBECONSUMERGROUPS);
    char e[256];
    if (o)
        rd_kafka_AdminOptions_set_request_timeout(o, timeout_ms, e, sizeof e);
    const char *groups[] = {group};
    rd_kafka_DescribeConsumerGroups(admin, groups, 1, o, queue);
    if (o)
        rd_kafka_AdminOptions_destroy(o);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void ks_group_view_free(ks_group_view *v)
{
    for (size_t i = 0; v->procs && i < v->proc_count; i++)
        free(v->procs[i]);
    free(v->procs);
    free(v->owner);
    memset(v, 0, sizeof *v);
}

int ks_group_view_find(const ks_group_view *v, const char *id)
{
    for (size_t i = 0; i < v->proc_count; i++)
        if (strcmp(v->procs[i], id) == 0)
            return (int)i;
    return -1;
}

/* The distinct client ids of the members, sorted. 0 or KS_ERR_NOMEM. */
static int collect_procs(const rd_kafka_ConsumerGroupDescription_t *g, ks_group_view *v)
{
    size_t n = rd_kafka_ConsumerGroupDescription_member_count(g);
    v->procs = calloc(n + 1, sizeof *v->procs);
    if (!v->procs)
        return KS_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        const char *id = rd_kafka_MemberDescription_client_id(
            rd_kafka_ConsumerGroupDescription_member(g, (int)i));
        if (!id || ks_group_view_find(v, id) >= 0)
            continue;
        if (!(v->procs[v->proc_count] = strdup(id)))
            return KS_ERR_NOMEM;
        v->proc_count++;
    }
    qsort(v->procs, v->proc_count, sizeof *v->procs, cmp_str);
    return 0;
}

/* Each partition's owner: the process of the member assigned it in any
 * topic (the sources are co-partitioned: one member has all of a task). */
static void collect_owners(const rd_kafka_ConsumerGroupDescription_t *g, ks_group_view *v)
{
    size_t n = rd_kafka_ConsumerGroupDescription_member_count(g);
    for (size_t i = 0; i < n; i++) {
        const rd_kafka_MemberDescription_t *m = rd_kafka_ConsumerGroupDescription_member(g, (int)i);
        const char *id = rd_kafka_MemberDescription_client_id(m);
        const rd_kafka_MemberAssignment_t *a = rd_kafka_MemberDescription_assignment(m);
        const rd_kafka_topic_partition_list_t *l = a ? rd_kafka_MemberAssignment_partitions(a)
                                                     : NULL;
        int proc = id ? ks_group_view_find(v, id) : -1;
        for (int k = 0; l && proc >= 0 && k < l->cnt; k++) {
            int32_t p = l->elems[k].partition;
            if (p >= 0 && p < v->partitions)
                v->owner[p] = proc;
        }
    }
}

int ks_group_view_read(rd_kafka_event_t *ev, int32_t partitions, ks_group_view *out,
                       char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    const rd_kafka_DescribeConsumerGroups_result_t *r =
        rd_kafka_event_DescribeConsumerGroups_result(ev);
    if (!r || rd_kafka_event_error(ev)) {
        snprintf(err, errlen, "describing the consumer group: %s",
                 r ? rd_kafka_event_error_string(ev) : "not a DescribeConsumerGroups result");
        return KS_ERR_IO;
    }
    size_t n = 0;
    const rd_kafka_ConsumerGroupDescription_t **gs =
        rd_kafka_DescribeConsumerGroups_result_groups(r, &n);
    if (n != 1)
        return 0;
    const rd_kafka_error_t *ge = rd_kafka_ConsumerGroupDescription_error(gs[0]);
    if (ge) {
        snprintf(err, errlen, "describing the consumer group: %s", rd_kafka_error_string(ge));
        return KS_ERR_IO;
    }
    if (rd_kafka_ConsumerGroupDescription_state(gs[0]) != RD_KAFKA_CONSUMER_GROUP_STATE_STABLE)
        return 0;
    out->partitions = partitions;
    out->owner = malloc((size_t)(partitions > 0 ? partitions : 1) * sizeof *out->owner);
    if (!out->owner || collect_procs(gs[0], out) != 0) {
        ks_group_view_free(out);
        snprintf(err, errlen, "out of memory");
        return KS_ERR_NOMEM;
    }
    for (int32_t p = 0; p < partitions; p++)
        out->owner[p] = -1;
    collect_owners(gs[0], out);
    if (out->proc_count == 0) {
        ks_group_view_free(out);
        return 0;
    }
    return 1;
}

int ks_group_view_is_standby(const ks_group_view *v, int32_t partition, int proc,
                             int replicas)
{
    if (partition < 0 || partition >= v->partitions || proc < 0)
        return 0;
    int owner = v->owner[partition];
    int m = (int)v->proc_count;
    if (owner < 0 || proc == owner)
        return 0;
    int after = (proc - owner + m) % m; /* 1..m-1: how far after the owner */
    return after >= 1 && after <= replicas;
}
