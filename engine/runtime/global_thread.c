/*
 * global_thread.c - restore and follow the global tables (global_thread.h).
 */
#include "runtime/global_thread.h"

#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "http/metrics.h"
#include "kafka/kafka.h"

#define BATCH 1000 /* records per LMDB commit: readers see them after it */
#define LAG_EVERY_MS 500 /* kstreams_global_lag is computed at most this often */

struct ks_global_thread {
    ks_engine *eng;
    ks_global *store;
    rd_kafka_t *consumer;
    size_t *base;    /* per global table: index of its partition 0 in ended */
    unsigned char *ended; /* per assigned partition: its end was reached */
    uint64_t *applied;    /* per global table: records since the last flush */
    rd_kafka_topic_partition_list_t *parts; /* every assigned partition */
    int64_t lag_at;       /* ks_mono_ms() of the last kstreams_global_lag */
    pthread_t thread;
    int running;
    volatile int stop;
};

static rd_kafka_t *new_consumer(const ks_pipeline *p, char *err, size_t errlen)
{
    return ks_kafka_assign_consumer(p, "global", "read_committed", NULL, "global", err,
                                    errlen);
}

/* The index of `topic` among p->globals, or -1. */
static int table_of_topic(const ks_pipeline *p, const char *topic)
{
    for (size_t i = 0; i < p->global_count; i++)
        if (strcmp(p->globals[i].topic, topic) == 0)
            return (int)i;
    return -1;
}

/* Wipe global table i when the position of one of its n partitions
 * (added to l from `base` on) is below that partition's log start (its
 * records were deleted while the process was away: retention,
 * DeleteRecords) or past its end (the topic created again:
 * ks_kafka_offset_gone): read from
 * the log start on top of the old store, a key whose tombstone went with
 * the deleted records would stay. As Kafka Streams does, the whole
 * table is rebuilt from the beginning of every partition. A log start
 * that cannot be read leaves the store as it is. 0 or -1 with err. */
static int wipe_if_stale(ks_global_thread *t, size_t i, rd_kafka_topic_partition_list_t *l,
                         int base, int32_t n, char *err, size_t errlen)
{
    const ks_cfg_source *g = &t->eng->topo->pipeline->globals[i];
    int32_t stale = -1;
    int64_t pos = -1;
    ks_offset_gone gone;
    for (int32_t part = 0; stale < 0 && part < n; part++) {
        int64_t lo = -1, hi = -1;
        pos = l->elems[base + part].offset;
        if (pos >= 0 &&
            rd_kafka_query_watermark_offsets(t->consumer, g->topic, part, &lo, &hi, 10000) ==
                RD_KAFKA_RESP_ERR_NO_ERROR &&
            ks_kafka_offset_gone(pos, lo, hi, &gone))
            stale = part;
    }
    if (stale < 0)
        return 0;
    ks_warn("global",
            "global table %s: position %lld of %s [%d] is %s %lld (%s): table wiped, restoring "
            "it from the beginning",
            g->name, (long long)pos, g->topic, (int)stale, gone.side, (long long)gone.bound,
            gone.why);
    if (ks_global_wipe(t->store, (int)i, n) != 0) {
        snprintf(err, errlen, "global table %s: wiping its store failed", g->name);
        return -1;
    }
    for (int32_t part = 0; part < n; part++)
        l->elems[base + part].offset = RD_KAFKA_OFFSET_BEGINNING;
    return 0;
}

/* Assign every partition of every global topic, each from the position
 * the store holds (the beginning when none, or when the table was wiped:
 * wipe_if_stale). *count gets the number of partitions. 0 or -1 with
 * err. */
static int assign_all(ks_global_thread *t, size_t *count, char *err, size_t errlen)
{
    const ks_pipeline *p = t->eng->topo->pipeline;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(16);
    t->base = calloc(p->global_count, sizeof *t->base);
    t->applied = calloc(p->global_count, sizeof *t->applied);
    for (size_t i = 0; t->base && i < p->global_count; i++) {
        const ks_cfg_source *g = &p->globals[i];
        t->base[i] = (size_t)l->cnt;
        int n = ks_kafka_partition_count(t->consumer, g->topic, 10000, err, errlen);
        if (n <= 0) {
            if (n == 0)
                snprintf(err, errlen, "%s:%d:%d: global table '%s': topic %s does not exist",
                         g->mark.file, g->mark.line, g->mark.col, g->name, g->topic);
            rd_kafka_topic_partition_list_destroy(l);
            return -1;
        }
        for (int32_t part = 0; part < n; part++) {
            int64_t next;
            rd_kafka_topic_partition_t *tp = rd_kafka_topic_partition_list_add(l, g->topic, part);
            tp->offset = ks_global_position(t->store, (int)i, part, &next) == 0
                             ? next
                             : RD_KAFKA_OFFSET_BEGINNING;
        }
        if (wipe_if_stale(t, i, l, (int)t->base[i], n, err, errlen) != 0) {
            rd_kafka_topic_partition_list_destroy(l);
            return -1;
        }
    }
    *count = (size_t)l->cnt;
    t->ended = calloc(*count + 1, 1);
    if (!t->base || !t->ended || !t->applied) {
        snprintf(err, errlen, "out of memory");
        rd_kafka_topic_partition_list_destroy(l);
        return -1;
    }
    rd_kafka_resp_err_t e = rd_kafka_assign(t->consumer, l);
    t->parts = l; /* kept for publish_lag */
    if (e) {
        snprintf(err, errlen, "global tables: assign: %s", rd_kafka_err2str(e));
        return -1;
    }
    return 0;
}

/* Apply one fetched message. 1 when a partition reached its end for the
 * first time (EOF), 0 for a record, a later end or a transient error, -1
 * when the store failed. */
static int apply(ks_global_thread *t, rd_kafka_message_t *m)
{
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
        int table = table_of_topic(t->eng->topo->pipeline, rd_kafka_topic_name(m->rkt));
        if (table < 0 || m->partition < 0)
            return 0;
        unsigned char *e = &t->ended[t->base[table] + (size_t)m->partition];
        int first = !*e;
        *e = 1;
        return first;
    }
    if (m->err) {
        ks_warn("global", "global tables: %s", rd_kafka_message_errstr(m));
        return 0;
    }
    const ks_pipeline *p = t->eng->topo->pipeline;
    int table = table_of_topic(p, rd_kafka_topic_name(m->rkt));
    if (table < 0)
        return 0;
    rd_kafka_timestamp_type_t tt;
    int64_t ts = rd_kafka_message_timestamp(m, &tt);
    t->applied[table]++;
    ks_bytes key = {m->key, m->key ? m->key_len : 0}, val = {m->payload, m->len};
    return ks_global_apply(t->store, table, m->partition, m->offset, key,
                           m->payload ? &val : NULL, ts < 0 ? 0 : ts) == 0
               ? 0
               : -1;
}

/* Records applied per table, counted once per batch (one lock, not one
 * per record): kstreams_global_records_total{table}. */
static void flush_metrics(ks_global_thread *t)
{
    const ks_pipeline *p = t->eng->topo->pipeline;
    for (size_t i = 0; i < p->global_count; i++) {
        if (!t->applied[i])
            continue;
        char labels[300];
        snprintf(labels, sizeof labels, "table=\"%s\"", p->globals[i].name);
        ks_metrics_add(t->eng->metrics, "kstreams_global_records_total", labels,
                       (double)t->applied[i]);
        t->applied[i] = 0;
    }
}

/* kstreams_global_lag{table}: per global table, the records between the
 * thread's position and the end of each partition (read_committed: the
 * last stable offset), summed over its partitions. From the consumer's
 * cached watermarks (no broker call); at most every LAG_EVERY_MS. */
static void publish_lag(ks_global_thread *t, int force)
{
    int64_t now = ks_mono_ms();
    if (!t->parts || (!force && now - t->lag_at < LAG_EVERY_MS))
        return;
    t->lag_at = now;
    const ks_pipeline *p = t->eng->topo->pipeline;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_copy(t->parts);
    if (!l || rd_kafka_position(t->consumer, l) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        if (l)
            rd_kafka_topic_partition_list_destroy(l);
        return;
    }
    for (size_t i = 0; i < p->global_count; i++) {
        int64_t lag = 0;
        int known = 0;
        for (int k = 0; k < l->cnt; k++) {
            const rd_kafka_topic_partition_t *tp = &l->elems[k];
            int64_t lo, hi, at = tp->offset;
            if (strcmp(tp->topic, p->globals[i].topic) != 0 ||
                rd_kafka_get_watermark_offsets(t->consumer, tp->topic, tp->partition, &lo,
                                               &hi) != 0 ||
                hi < 0)
                continue;
            if (at < 0) /* nothing read yet: from the partition's start */
                at = lo >= 0 ? lo : 0;
            lag += hi > at ? hi - at : 0;
            known = 1;
        }
        if (!known)
            continue;
        char labels[300];
        snprintf(labels, sizeof labels, "table=\"%s\"", p->globals[i].name);
        ks_metrics_set(t->eng->metrics, "kstreams_global_lag", labels, (double)lag);
    }
    rd_kafka_topic_partition_list_destroy(l);
}

/* Poll up to BATCH records into one LMDB commit. Returns the number of
 * partitions that reached their end, or -1 when the store failed. */
static int poll_batch(ks_global_thread *t, int timeout_ms, size_t *applied)
{
    int eofs = 0;
    for (int n = 0; n < BATCH; n++) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(t->consumer, n ? 0 : timeout_ms);
        if (!m)
            break;
        int rc = apply(t, m);
        *applied += rc == 0 && !m->err;
        rd_kafka_message_destroy(m);
        if (rc < 0) {
            ks_global_abort(t->store);
            return -1;
        }
        eofs += rc;
    }
    if (ks_global_commit(t->store) != 0)
        return -1;
    flush_metrics(t);
    publish_lag(t, 0);
    return eofs;
}

/* Read every partition to its end (read_committed: its last stable offset)
 * before any task processes: each partition reports its end once. */
static int restore(ks_global_thread *t, size_t partitions, char *err, size_t errlen)
{
    size_t ended = 0, applied = 0;
    while (ended < partitions) {
        if (ks_engine_stopping(t->eng)) {
            snprintf(err, errlen, "stopped");
            return -1;
        }
        int rc = poll_batch(t, 200, &applied);
        if (rc < 0) {
            snprintf(err, errlen, "global tables: the store write failed (see the log)");
            return -1;
        }
        ended += (size_t)rc;
    }
    publish_lag(t, 1);
    ks_info("global", "global tables restored: %zu partitions, %zu records applied",
            partitions, applied);
    return 0;
}

static void *run(void *arg)
{
    ks_global_thread *t = arg;
    size_t applied = 0;
    while (!t->stop) {
        if (poll_batch(t, 100, &applied) < 0) {
            ks_engine_fail(t->eng, "global", "global tables: the store write failed; "
                                             "stopping");
            break;
        }
    }
    return NULL;
}

static void free_thread(ks_global_thread *t)
{
    if (t->consumer) {
        rd_kafka_assign(t->consumer, NULL);
        rd_kafka_consumer_close(t->consumer);
        rd_kafka_destroy(t->consumer);
    }
    ks_global_close(t->store);
    free(t->base);
    free(t->ended);
    free(t->applied);
    if (t->parts)
        rd_kafka_topic_partition_list_destroy(t->parts);
    free(t);
}

int ks_global_thread_start(ks_engine *eng, ks_global_thread **out, ks_global **store,
                           char *err, size_t errlen)
{
    const ks_pipeline *p = eng->topo->pipeline;
    *out = NULL;
    *store = NULL;
    if (p->global_count == 0)
        return 0;
    ks_global_thread *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    t->eng = eng;
    char dir[4200];
    ks_global_dir(p, dir, sizeof dir);
    size_t partitions = 0;
    if (ks_global_open(p, dir, &t->store, err, errlen) != 0 ||
        !(t->consumer = new_consumer(p, err, errlen)) ||
        assign_all(t, &partitions, err, errlen) != 0 || restore(t, partitions, err, errlen) != 0 ||
        pthread_create(&t->thread, NULL, run, t) != 0) {
        if (!err[0])
            snprintf(err, errlen, "global tables: cannot start the thread");
        free_thread(t);
        return -1;
    }
    t->running = 1;
    *out = t;
    *store = t->store;
    return 0;
}

void ks_global_thread_stop(ks_global_thread *t)
{
    if (!t)
        return;
    t->stop = 1;
    if (t->running)
        pthread_join(t->thread, NULL);
    free_thread(t);
}
