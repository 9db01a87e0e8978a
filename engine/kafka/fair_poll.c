/*
 * fair_poll.c - source partitions served in turn (fair_poll.h).
 */
#include "kafka/fair_poll.h"

#include <stdlib.h>
#include <string.h>

#include "base/clock.h"

/* A dry spell after at least this many records wakes the fetcher, at most
 * once per WAKE_GAP_MS (see wake_fetcher). */
enum { WAKE_AFTER_RECORDS = 10000, WAKE_GAP_MS = 50, WAKE_TIMEOUT_MS = 200 };

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
    int wake;                  /* wake the fetcher on a dry spell (KS_FETCH_WAKE) */
    size_t run;                /* records returned since the queues were last empty */
    size_t wake_next;          /* the slot whose leader the next wake asks */
    int64_t last_wake_ms;
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
    const char *wake = getenv("KS_FETCH_WAKE"); /* "0": off, for measurements */
    fp->wake = !(wake && strcmp(wake, "0") == 0);
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

/* librdkafka 2.0.2 stops fetching a partition once its queue holds
 * queued.min.messages (100 000 by default) and decides again only when its
 * broker thread wakes up: on a response, on an operation queued to it, or
 * after a second. When every partition's queue is full at once nothing is
 * in flight, so the worker works through the queues and then finds them
 * empty for the rest of that second (measured: 55-87 empty 20 ms polls over
 * 1 000 000 records at 5 us a record; newer librdkafka has
 * fetch.queue.backoff.ms for it). A request to a partition's leader wakes
 * that broker's thread, which then fetches for all its partitions: one
 * watermark query (a ListOffsets round trip) when a long run of records
 * ends in empty queues; successive wakes ask the leaders of successive
 * partitions, so every broker of a cluster gets its turn. */
static void wake_fetcher(ks_fair_poll *fp)
{
    for (size_t tried = 0; tried < fp->slots; tried++) {
        size_t s = (fp->wake_next + tried) % fp->slots;
        if (!fp->queues[s])
            continue;
        fp->wake_next = s + 1;
        int64_t low, high;
        rd_kafka_query_watermark_offsets(fp->consumer, fp->topics[s % fp->topic_count],
                                         (int32_t)(s / fp->topic_count), &low, &high,
                                         WAKE_TIMEOUT_MS);
        return;
    }
}

static void dry_spell(ks_fair_poll *fp)
{
    if (fp->wake && fp->run >= WAKE_AFTER_RECORDS) {
        int64_t now = ks_mono_ms();
        if (now - fp->last_wake_ms >= WAKE_GAP_MS) {
            fp->last_wake_ms = now;
            wake_fetcher(fp);
        }
    }
    fp->run = 0;
}

rd_kafka_message_t *ks_fair_poll_next(ks_fair_poll *fp)
{
    for (size_t tried = 0; tried <= fp->slots && fp->slots; tried++) {
        rd_kafka_queue_t *q = fp->queues[fp->current];
        rd_kafka_message_t *m = q ? rd_kafka_consume_queue(q, 0) : NULL;
        if (m) {
            if (++fp->taken >= fp->burst)
                advance(fp);
            fp->run++;
            return m;
        }
        advance(fp);
    }
    dry_spell(fp);
    return NULL;
}
