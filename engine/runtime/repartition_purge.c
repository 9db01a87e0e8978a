/*
 * repartition_purge.c - DeleteRecords on repartition topics after commits
 * (repartition_purge.h).
 */
#include "runtime/repartition_purge.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

#define PURGE_TIMEOUT_MS 30000

struct ks_purge {
    rd_kafka_t *rk;
    rd_kafka_queue_t *q;
    int64_t interval_ms;
    int64_t last_ms;
    int in_flight;
    uint64_t requests;
    char where[64];
    /* offsets asked for by the last request that succeeded, to skip the
     * partitions that have not moved */
    rd_kafka_topic_partition_list_t *done;
    rd_kafka_topic_partition_list_t *asked;
};

ks_purge *ks_purge_new(rd_kafka_t *rk, int64_t interval_ms, const char *where)
{
    ks_purge *pg = calloc(1, sizeof *pg);
    if (!pg)
        return NULL;
    pg->rk = rk;
    pg->interval_ms = interval_ms;
    snprintf(pg->where, sizeof pg->where, "%s", where);
    pg->q = rd_kafka_queue_new(rk);
    pg->done = rd_kafka_topic_partition_list_new(8);
    if (!pg->q || !pg->done) {
        ks_purge_free(pg);
        return NULL;
    }
    return pg;
}

void ks_purge_free(ks_purge *pg)
{
    if (!pg)
        return;
    if (pg->q)
        rd_kafka_queue_destroy(pg->q);
    if (pg->done)
        rd_kafka_topic_partition_list_destroy(pg->done);
    if (pg->asked)
        rd_kafka_topic_partition_list_destroy(pg->asked);
    free(pg);
}

/* Remember the offsets of a request that succeeded per partition. */
static void note_done(ks_purge *pg, const rd_kafka_topic_partition_list_t *res)
{
    for (int i = 0; pg->asked && i < pg->asked->cnt; i++) {
        const rd_kafka_topic_partition_t *a = &pg->asked->elems[i];
        const rd_kafka_topic_partition_t *r =
            res ? rd_kafka_topic_partition_list_find(res, a->topic, a->partition) : NULL;
        if (!r || r->err) {
            ks_warn(pg->where, "purging repartition topic %s [%d] up to offset %lld: %s "
                               "(tried again after the next commit)",
                    a->topic, (int)a->partition, (long long)a->offset,
                    r ? rd_kafka_err2str(r->err) : "no answer for it");
            continue;
        }
        rd_kafka_topic_partition_t *d =
            rd_kafka_topic_partition_list_find(pg->done, a->topic, a->partition);
        if (!d)
            d = rd_kafka_topic_partition_list_add(pg->done, a->topic, a->partition);
        d->offset = a->offset;
        ks_debug(pg->where, "purged repartition topic %s [%d] below offset %lld", a->topic,
                 (int)a->partition, (long long)r->offset);
    }
}

int ks_purge_due(ks_purge *pg, int64_t now_ms)
{
    if (pg->in_flight) {
        rd_kafka_event_t *ev = rd_kafka_queue_poll(pg->q, 0);
        if (ev) {
            if (rd_kafka_event_error(ev)) {
                ks_warn(pg->where, "purging repartition topics: %s (tried again after the "
                                   "next commit)",
                        rd_kafka_event_error_string(ev));
            } else {
                const rd_kafka_DeleteRecords_result_t *res =
                    rd_kafka_event_DeleteRecords_result(ev);
                note_done(pg, res ? rd_kafka_DeleteRecords_result_offsets(res) : NULL);
            }
            rd_kafka_event_destroy(ev);
            pg->in_flight = 0;
        } else if (now_ms - pg->last_ms > 2 * PURGE_TIMEOUT_MS) {
            pg->in_flight = 0; /* lost: the queue gets a late answer at most */
        }
    }
    return !pg->in_flight && now_ms - pg->last_ms >= pg->interval_ms;
}

void ks_purge_send(ks_purge *pg, const rd_kafka_topic_partition_list_t *offsets,
                   int64_t now_ms)
{
    pg->last_ms = now_ms;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(offsets->cnt + 1);
    for (int i = 0; i < offsets->cnt; i++) {
        const rd_kafka_topic_partition_t *o = &offsets->elems[i];
        const rd_kafka_topic_partition_t *d =
            rd_kafka_topic_partition_list_find(pg->done, o->topic, o->partition);
        if (o->offset > 0 && (!d || o->offset > d->offset))
            rd_kafka_topic_partition_list_add(l, o->topic, o->partition)->offset = o->offset;
    }
    if (!l->cnt) {
        rd_kafka_topic_partition_list_destroy(l);
        return;
    }
    if (pg->asked)
        rd_kafka_topic_partition_list_destroy(pg->asked);
    pg->asked = rd_kafka_topic_partition_list_copy(l);
    rd_kafka_DeleteRecords_t *del = rd_kafka_DeleteRecords_new(l);
    rd_kafka_topic_partition_list_destroy(l);
    char why[256];
    rd_kafka_AdminOptions_t *opt = rd_kafka_AdminOptions_new(pg->rk, RD_KAFKA_ADMIN_OP_DELETERECORDS);
    rd_kafka_AdminOptions_set_request_timeout(opt, PURGE_TIMEOUT_MS, why, sizeof why);
    rd_kafka_AdminOptions_set_operation_timeout(opt, PURGE_TIMEOUT_MS, why, sizeof why);
    rd_kafka_DeleteRecords(pg->rk, &del, 1, opt, pg->q);
    rd_kafka_AdminOptions_destroy(opt);
    rd_kafka_DeleteRecords_destroy(del);
    pg->in_flight = 1;
    pg->requests++;
}

uint64_t ks_purge_requests(const ks_purge *pg)
{
    return pg ? pg->requests : 0;
}
