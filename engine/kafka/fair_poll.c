/*
 * fair_poll.c - source partitions served in turn (fair_poll.h).
 */
#include "kafka/fair_poll.h"

#include <stdlib.h>
#include <string.h>

struct ks_fair_poll {
    rd_kafka_t *consumer;
    const char *const *topics;
    size_t topic_count;
    int32_t partitions;
    int burst;
    rd_kafka_queue_t **queues; /* by partition * topic_count + topic */
    size_t slots;
    size_t current;            /* the slot being served */
    int taken;                 /* records taken from it in a row */
};

ks_fair_poll *ks_fair_poll_new(rd_kafka_t *consumer, const char *const *topics,
                               size_t topic_count, int32_t partitions, int burst)
{
    ks_fair_poll *fp = calloc(1, sizeof *fp);
    if (!fp)
        return NULL;
    fp->consumer = consumer;
    fp->topics = topics;
    fp->topic_count = topic_count;
    fp->partitions = partitions;
    fp->burst = burst > 0 ? burst : 1;
    fp->slots = (size_t)partitions * topic_count;
    fp->queues = calloc(fp->slots ? fp->slots : 1, sizeof *fp->queues);
    if (!fp->queues) {
        free(fp);
        return NULL;
    }
    return fp;
}

void ks_fair_poll_free(ks_fair_poll *fp)
{
    if (!fp)
        return;
    for (size_t i = 0; i < fp->slots; i++)
        if (fp->queues[i])
            rd_kafka_queue_destroy(fp->queues[i]);
    free(fp->queues);
    free(fp);
}

/* The slot of (topic, partition), or -1 when it is not one of ours. */
static long slot_of(const ks_fair_poll *fp, const char *topic, int32_t partition)
{
    if (partition < 0 || partition >= fp->partitions)
        return -1;
    for (size_t t = 0; t < fp->topic_count; t++)
        if (strcmp(fp->topics[t], topic) == 0)
            return (long)((size_t)partition * fp->topic_count + t);
    return -1;
}

int ks_fair_poll_assign(ks_fair_poll *fp, const rd_kafka_topic_partition_list_t *parts)
{
    int rc = 0;
    for (int i = 0; i < parts->cnt; i++) {
        long s = slot_of(fp, parts->elems[i].topic, parts->elems[i].partition);
        if (s < 0 || fp->queues[s])
            continue;
        rd_kafka_queue_t *q = rd_kafka_queue_get_partition(fp->consumer, parts->elems[i].topic,
                                                           parts->elems[i].partition);
        if (!q) {
            rc = -1;
            continue;
        }
        rd_kafka_queue_forward(q, NULL);
        fp->queues[s] = q;
    }
    return rc;
}

void ks_fair_poll_revoke(ks_fair_poll *fp, const rd_kafka_topic_partition_list_t *parts)
{
    for (int i = 0; i < parts->cnt; i++) {
        long s = slot_of(fp, parts->elems[i].topic, parts->elems[i].partition);
        if (s >= 0 && fp->queues[s]) {
            rd_kafka_queue_destroy(fp->queues[s]);
            fp->queues[s] = NULL;
        }
    }
}

static void advance(ks_fair_poll *fp)
{
    fp->current = (fp->current + 1) % fp->slots;
    fp->taken = 0;
}

rd_kafka_message_t *ks_fair_poll_next(ks_fair_poll *fp)
{
    for (size_t tried = 0; tried <= fp->slots && fp->slots; tried++) {
        rd_kafka_queue_t *q = fp->queues[fp->current];
        rd_kafka_message_t *m = q ? rd_kafka_consume_queue(q, 0) : NULL;
        if (m) {
            if (++fp->taken >= fp->burst)
                advance(fp);
            return m;
        }
        advance(fp);
    }
    return NULL;
}
