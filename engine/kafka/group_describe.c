/*
 * group_describe.c - see group_describe.h.
 */
#include "kafka/group_describe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kstreams/kstreams.h"

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

/* The members of the one group described in `res`. */
static int read_group(const rd_kafka_DescribeConsumerGroups_result_t *res, ks_group_member **out,
                      size_t *count, char *err, size_t errlen)
{
    size_t ngroups = 0;
    const rd_kafka_ConsumerGroupDescription_t **groups =
        rd_kafka_DescribeConsumerGroups_result_groups(res, &ngroups);
    if (ngroups != 1) {
        snprintf(err, errlen, "describe group: %zu groups in the answer", ngroups);
        return KS_ERR_IO;
    }
    const rd_kafka_error_t *gerr = rd_kafka_ConsumerGroupDescription_error(groups[0]);
    if (gerr) {
        snprintf(err, errlen, "describe group: %s", rd_kafka_error_string(gerr));
        return KS_ERR_IO;
    }
    size_t n = rd_kafka_ConsumerGroupDescription_member_count(groups[0]);
    ks_group_member *m = n ? calloc(n, sizeof *m) : NULL;
    if (n && !m)
        return KS_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        const rd_kafka_MemberDescription_t *md =
            rd_kafka_ConsumerGroupDescription_member(groups[0], i);
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

int ks_group_describe(rd_kafka_t *admin, const char *group, int timeout_ms,
                      ks_group_member **members, size_t *count, char *err, size_t errlen)
{
    *members = NULL;
    *count = 0;
    rd_kafka_queue_t *q = rd_kafka_queue_new(admin);
    rd_kafka_AdminOptions_t *opt =
        rd_kafka_AdminOptions_new(admin, RD_KAFKA_ADMIN_OP_DESCRIBECONSUMERGROUPS);
    if (!q || !opt) {
        if (q)
            rd_kafka_queue_destroy(q);
        rd_kafka_AdminOptions_destroy(opt);
        return KS_ERR_NOMEM;
    }
    rd_kafka_AdminOptions_set_request_timeout(opt, timeout_ms, NULL, 0);
    rd_kafka_DescribeConsumerGroups(admin, &group, 1, opt, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, timeout_ms + 1000);
    int rc;
    if (!ev) {
        snprintf(err, errlen, "describe group '%s': no answer in %d ms", group, timeout_ms);
        rc = KS_ERR_IO;
    } else if (rd_kafka_event_error(ev)) {
        snprintf(err, errlen, "describe group '%s': %s", group, rd_kafka_event_error_string(ev));
        rc = KS_ERR_IO;
    } else {
        rc = read_group(rd_kafka_event_DescribeConsumerGroups_result(ev), members, count, err,
                        errlen);
    }
    if (ev)
        rd_kafka_event_destroy(ev);
    rd_kafka_AdminOptions_destroy(opt);
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
