/*
 * topic_grow.c - see topic_grow.h.
 */
#include "kafka/topic_grow.h"

#include <stdio.h>

#include "base/log.h"
#include "kafka/kafka.h"

/* CreatePartitions to `count`; INVALID_PARTITIONS (the topic already has
 * that many: another client grew it first) counts as done. 0 or -1. */
static int create_partitions(rd_kafka_t *rk, const char *topic, int32_t count, char *err,
                             size_t errlen)
{
    char why[512];
    rd_kafka_NewPartitions_t *np = rd_kafka_NewPartitions_new(topic, (size_t)count, why,
                                                              sizeof why);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *opt = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATEPARTITIONS);
    rd_kafka_AdminOptions_set_operation_timeout(opt, 30000, why, sizeof why);
    rd_kafka_CreatePartitions(rk, &np, 1, opt, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 60000);
    int rc = -1;
    if (!ev) {
        snprintf(err, errlen, "growing %s to %d partitions: no answer", topic, count);
    } else if (rd_kafka_event_error(ev)) {
        snprintf(err, errlen, "growing %s to %d partitions: %s", topic, count,
                 rd_kafka_event_error_string(ev));
    } else {
        size_t cnt;
        const rd_kafka_topic_result_t **tr = rd_kafka_CreatePartitions_result_topics(
            rd_kafka_event_CreatePartitions_result(ev), &cnt);
        rd_kafka_resp_err_t te = cnt ? rd_kafka_topic_result_error(tr[0]) : 0;
        if (!te || te == RD_KAFKA_RESP_ERR_INVALID_PARTITIONS)
            rc = 0;
        else
            snprintf(err, errlen, "growing %s to %d partitions: %s", topic, count,
                     rd_kafka_topic_result_error_string(tr[0]));
    }
    if (ev)
        rd_kafka_event_destroy(ev);
    rd_kafka_AdminOptions_destroy(opt);
    rd_kafka_queue_destroy(q);
    rd_kafka_NewPartitions_destroy(np);
    return rc;
}

int ks_topic_grow(rd_kafka_t *rk, const char *topic, int32_t count, int32_t *seen, char *err,
                  size_t errlen)
{
    int n = ks_kafka_partition_count(rk, topic, 5000, err, errlen);
    if (n < 0)
        return -1;
    int n0 = n;
    int asked = n < count;
    if (asked && create_partitions(rk, topic, count, err, errlen) != 0)
        return -1;
    for (int i = 0; n < count && i < 100; i++) {
        rd_kafka_poll(rk, 100);
        n = ks_kafka_partition_count(rk, topic, 5000, err, errlen);
    }
    if (n < count) {
        snprintf(err, errlen, "%s: %d partitions requested, metadata still shows %d", topic,
                 count, n);
        return -1;
    }
    if (asked)
        ks_info("kafka", "topic %s grown from %d to %d partitions", topic, n0, n);
    if (seen)
        *seen = n;
    return 0;
}
