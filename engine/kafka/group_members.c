/*
 * group_members.c - the consumer group's members, processes and owners
 * (group_members.h).
 */
#include "kafka/group_members.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kafka/member_id.h"
#include "kstreams/kstreams.h"

/* ---- describing ----------------------------------------------------------- */

void ks_group_describe_async(rd_kafka_t *admin, rd_kafka_queue_t *queue, const char *group,
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

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The distinct partition numbers of an assignment into m. */
static int member_partitions(ks_group_member *m, const rd_kafka_topic_partition_list_t *tp)
{
    if (!tp || tp->cnt == 0)
        return 0;
    m->partitions = malloc((size_t)tp->cnt * sizeof *m->partitions);
    if (!m->partitions)
        return KS_ERR_NOMEM;
    for (int i = 0; i < tp->cnt; i++)
        m->partitions[i] = tp->elems[i].partition;
    qsort(m->partitions, (size_t)tp->cnt, sizeof *m->partitions, cmp_i32);
    size_t n = 0;
    for (int i = 0; i < tp->cnt; i++)
        if (n == 0 || m->partitions[n - 1] != m->partitions[i])
            m->partitions[n++] = m->partitions[i];
    m->partition_count = n;
    return 0;
}

/* The members of group description g into *out. 0 or KS_ERR_NOMEM. */
static int read_members(const rd_kafka_ConsumerGroupDescription_t *g, ks_group_member **out,
                        size_t *count)
{
    size_t n = rd_kafka_ConsumerGroupDescription_member_count(g);
    ks_group_member *m = n ? calloc(n, sizeof *m) : NULL;
    if (n && !m)
        return KS_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        const rd_kafka_MemberDescription_t *md = rd_kafka_ConsumerGroupDescription_member(g, i);
        const char *cid = rd_kafka_MemberDescription_client_id(md);
        const rd_kafka_MemberAssignment_t *as = rd_kafka_MemberDescription_assignment(md);
        if (!(m[i].client_id = strdup(cid ? cid : "")) ||
            member_partitions(&m[i], as ? rd_kafka_MemberAssignment_partitions(as) : NULL)) {
            ks_group_members_free(m, n);
            return KS_ERR_NOMEM;
        }
    }
    *out = m;
    *count = n;
    return 0;
}

int ks_group_members_read(rd_kafka_event_t *ev, ks_group_member **members, size_t *count,
                          int *stable, char *err, size_t errlen)
{
    *members = NULL;
    *count = 0;
    *stable = 0;
    const rd_kafka_DescribeConsumerGroups_result_t *r =
        rd_kafka_event_DescribeConsumerGroups_result(ev);
    if (!r || rd_kafka_event_error(ev)) {
        snprintf(err, errlen, "describing the consumer group: %s",
                 r ? rd_kafka_event_error_string(ev) : "not a DescribeConsumerGroups result");
        return KS_ERR_IO;
    }
    size_t ngroups = 0;
    const rd_kafka_ConsumerGroupDescription_t **gs =
        rd_kafka_DescribeConsumerGroups_result_groups(r, &ngroups);
    if (ngroups != 1) {
        snprintf(err, errlen, "describing the consumer group: %zu groups in the answer",
                 ngroups);
        return KS_ERR_IO;
    }
    const rd_kafka_error_t *ge = rd_kafka_ConsumerGroupDescription_error(gs[0]);
    if (ge) {
        snprintf(err, errlen, "describing the consumer group: %s", rd_kafka_error_string(ge));
        return KS_ERR_IO;
    }
    *stable = rd_kafka_ConsumerGroupDescription_state(gs[0]) ==
              RD_KAFKA_CONSUMER_GROUP_STATE_STABLE;
    if (read_members(gs[0], members, count) != 0) {
        snprintf(err, errlen, "out of memory");
        return KS_ERR_NOMEM;
    }
    return 0;
}

int ks_group_describe(rd_kafka_t *admin, const char *group, int timeout_ms,
                      ks_group_member **members, size_t *count, char *err, size_t errlen)
{
    *members = NULL;
    *count = 0;
    rd_kafka_queue_t *q = rd_kafka_queue_new(admin);
    if (!q) {
        snprintf(err, errlen, "out of memory");
        return KS_ERR_NOMEM;
    }
    ks_group_describe_async(admin, q, group, timeout_ms);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, timeout_ms + 1000);
    int stable, rc;
    if (!ev) {
        snprintf(err, errlen, "describe group '%s': no answer in %d ms", group, timeout_ms);
        rc = KS_ERR_IO;
    } else {
        rc = ks_group_members_read(ev, members, count, &stable, err, errlen);
        rd_kafka_event_destroy(ev);
    }
    rd_kafka_queue_destroy(q);
    return rc;
}

void ks_group_members_free(ks_group_member *members, size_t count)
{
    for (size_t i = 0; members && i < count; i++) {
        free(members[i].client_id);
        free(members[i].partitions);
    }
    free(members);
}

/* ---- the view by process -------------------------------------------------- */

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

/* The distinct processes of the members, sorted. 0 or KS_ERR_NOMEM. */
static int collect_procs(const ks_group_member *m, size_t n, ks_group_view *v)
{
    v->procs = calloc(n + 1, sizeof *v->procs);
    if (!v->procs)
        return KS_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        char proc[300];
        ks_member_id_parse(m[i].client_id, proc, sizeof proc);
        if (ks_group_view_find(v, proc) >= 0)
            continue;
        if (!(v->procs[v->proc_count] = strdup(proc)))
            return KS_ERR_NOMEM;
        v->proc_count++;
    }
    qsort(v->procs, v->proc_count, sizeof *v->procs, cmp_str);
    return 0;
}

/* Each partition's owner: the process of the member assigned it in any
 * topic (the sources are co-partitioned: one member has all of a task). */
static void collect_owners(const ks_group_member *m, size_t n, ks_group_view *v)
{
    for (size_t i = 0; i < n; i++) {
        char proc[300];
        ks_member_id_parse(m[i].client_id, proc, sizeof proc);
        int at = ks_group_view_find(v, proc);
        for (size_t k = 0; at >= 0 && k < m[i].partition_count; k++) {
            int32_t p = m[i].partitions[k];
            if (p >= 0 && p < v->partitions)
                v->owner[p] = at;
        }
    }
}

int ks_group_view_build(const ks_group_member *m, size_t n, int32_t partitions,
                        ks_group_view *out)
{
    memset(out, 0, sizeof *out);
    if (n == 0)
        return 0;
    out->partitions = partitions;
    out->owner = malloc((size_t)(partitions > 0 ? partitions : 1) * sizeof *out->owner);
    if (!out->owner || collect_procs(m, n, out) != 0) {
        ks_group_view_free(out);
        return KS_ERR_NOMEM;
    }
    for (int32_t p = 0; p < partitions; p++)
        out->owner[p] = -1;
    collect_owners(m, n, out);
    return 1;
}

int ks_group_view_read(rd_kafka_event_t *ev, int32_t partitions, ks_group_view *out,
                       char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    ks_group_member *m;
    size_t n;
    int stable;
    int rc = ks_group_members_read(ev, &m, &n, &stable, err, errlen);
    if (rc != 0)
        return rc;
    if (stable) {
        rc = ks_group_view_build(m, n, partitions, out);
        if (rc < 0)
            snprintf(err, errlen, "out of memory");
    }
    ks_group_members_free(m, n);
    return rc;
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
