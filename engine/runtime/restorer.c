/*
 * restorer.c - replay changelogs into a task's stores (restorer.h).
 */
#include "runtime/restorer.h"

#include <stdio.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/fault.h"
#include "base/log.h"
#include "http/metrics.h"
#include "kafka/kafka.h"
#include "runtime/query_tasks.h"
#include "runtime/table.h"

/* One store's replay: what it reads and how far it got. */
typedef struct replay {
    ks_task *task;
    int store;
    int table;         /* the store of a table: restored from the table's topic */
    const char *name;  /* the store's */
    char topic[512];   /* its changelog, or the table's topic */
    int32_t partition;
    int64_t from;      /* first offset replayed */
    int64_t lso;       /* replayed up to here (at most a table's limit) */
    int64_t started_ms;
    uint64_t done;     /* records applied */
} replay;

/* An assign-only consumer (never joins the group; the group.id only keeps
 * librdkafka 2.0.2 from looping on _UNKNOWN_GROUP). */
static rd_kafka_t *new_client(const ks_pipeline *p, const char *isolation, char *err,
                              size_t errlen)
{
    char group[600];
    snprintf(group, sizeof group, "%s-restore", p->application);
    const char *forced[] = {"group.id", group, "enable.auto.commit", "false",
                            "isolation.level", isolation, "enable.partition.eof",
                            "true", "auto.offset.reset", "earliest", NULL};
    /* Restore reads to the end of a partition: with the default 500 ms
     * fetch.wait.max.ms the broker holds the last (empty) fetch 500 ms, and
     * the offset queries behind it on the same connection wait too: ~1 s per
     * restored partition whatever its size. And librdkafka 2.0.2 stops
     * fetching once queued.min.messages are queued and looks again only
     * about once a second, while the replay drains 100 000 records in less:
     * a bigger prefetch (still capped by queued.max.messages.kbytes) keeps
     * the replay fed (bench/, docs/performance.md). */
    const char *defaults[] = {"fetch.wait.max.ms", "10", "queued.min.messages", "1000000",
                              NULL};
    rd_kafka_conf_t *conf = ks_kafka_conf(p, RD_KAFKA_CONSUMER, defaults, forced, err, errlen);
    if (!conf)
        return NULL;
    return ks_kafka_new(RD_KAFKA_CONSUMER, conf, "cannot create restore consumer", err,
                        errlen);
}

int ks_restorer_init(ks_restorer *r, ks_engine *eng, const char *where, char *err,
                     size_t errlen)
{
    const ks_pipeline *p = eng->topo->pipeline;
    r->eng = eng;
    r->where = where;
    if (!(r->consumer = new_client(p, "read_committed", err, errlen)) ||
        !(r->probe = new_client(p, "read_uncommitted", err, errlen)))
        return KS_ERR_IO;
    return 0;
}

void ks_restorer_free(ks_restorer *r)
{
    if (r->consumer)
        rd_kafka_destroy(r->consumer);
    if (r->probe)
        rd_kafka_destroy(r->probe);
    r->consumer = r->probe = NULL;
}

/* Last stable offset and high watermark of a changelog partition. 0, or
 * KS_ERR_IO. */
static int changelog_ends(ks_restorer *r, const char *topic, int32_t partition, int64_t *lso,
                          int64_t *hw)
{
    int64_t lo;
    rd_kafka_resp_err_t e =
        rd_kafka_query_watermark_offsets(r->consumer, topic, partition, &lo, lso, 10000);
    if (!e) /* the probe is read_uncommitted: its "high" is the log end */
        e = rd_kafka_query_watermark_offsets(r->probe, topic, partition, &lo, hw, 10000);
    return e ? KS_ERR_IO : 0;
}

/* Wait until a previous owner's open transaction on the changelog ends
 * (LSO == HW), two minutes at most, and set rp->lso. 0, KS_ERR_STATE when
 * the engine is stopping, KS_ERR_IO (engine stopped) when the offsets
 * cannot be read. */
static int wait_stable_end(ks_restorer *r, replay *rp)
{
    int64_t lso = 0, hw = 0;
    int64_t deadline = ks_mono_ms() + 120000;
    for (;;) {
        if (changelog_ends(r, rp->topic, rp->partition, &lso, &hw) != 0) {
            /* transient just after the topic's creation (no leader yet) or
             * while the broker restarts: retry until the deadline (found by
             * the crash suite, tests/integration/test_crash.c) */
            if (ks_mono_ms() > deadline) {
                ks_engine_fail(r->eng, r->where, "restore of %s [%d]: cannot read its offsets",
                               rp->topic, (int)rp->partition);
                return KS_ERR_IO;
            }
            if (ks_engine_stopping(r->eng))
                return KS_ERR_STATE;
            usleep(200 * 1000);
            continue;
        }
        if (lso >= hw || ks_mono_ms() > deadline)
            break;
        if (ks_engine_stopping(r->eng))
            return KS_ERR_STATE;
        usleep(100 * 1000);
    }
    rp->lso = lso;
    return 0;
}

static void report_progress(ks_restorer *r, const replay *rp, int64_t now)
{
    double secs = (double)(now - rp->started_ms) / 1000.0;
    int64_t total = rp->lso - rp->from;
    char l[512];
    snprintf(l, sizeof l, "store=\"%s\",partition=\"%d\"", rp->name, (int)rp->partition);
    ks_metrics_set(r->eng->metrics, "kstreams_restore_remaining", l,
                   (double)(total > (int64_t)rp->done ? total - (int64_t)rp->done : 0));
    ks_query_tasks_progress(r->eng->qtasks, rp->partition, rp->name, rp->done, total);
    ks_info(rp->task->where, "restoring store %s partition %d: %llu of ~%lld records (%.0f/s)",
            rp->name, (int)rp->partition, (unsigned long long)rp->done, (long long)total,
            secs > 0 ? (double)rp->done / secs : 0.0);
}

/* Apply one changelog message. 1 when the end of the partition was
 * reached, 0 to go on, or a negative ks_err (engine stopped). Transport
 * errors (the broker restarting: found by the crash suite) are retried
 * for up to two minutes without progress. */
static int apply(ks_restorer *r, replay *rp, rd_kafka_message_t *m, int64_t *progress_ms)
{
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF || (rp->table && !m->err && m->offset >= rp->lso))
        return 1; /* past a table's limit: the group's consumer applies the rest */
    if (m->err && ks_mono_ms() - *progress_ms < 120000) {
        ks_warn(r->where, "restore of %s [%d]: %s (retrying)", rp->topic, (int)rp->partition,
                rd_kafka_message_errstr(m));
        return 0;
    }
    if (m->err) {
        ks_engine_fail(r->eng, r->where, "restore of %s [%d]: %s", rp->topic,
                       (int)rp->partition, rd_kafka_message_errstr(m));
        return KS_ERR_IO;
    }
    ks_bytes key = {m->key, m->key_len};
    ks_bytes val = {m->payload, m->len};
    int rc = rp->table ? ks_table_restore_put(rp->task, rp->store, key, m->payload ? &val : NULL,
                                              rd_kafka_message_timestamp(m, NULL), m->offset)
                       : ks_task_restore_put(rp->task, rp->store, key, m->payload ? &val : NULL,
                                             m->offset);
    *progress_ms = ks_mono_ms();
    ks_fault_point(KS_FAULT_DURING_RESTORE);
    if (rc != 0) {
        ks_engine_fail(r->eng, r->where, "restore of %s [%d]: store write failed (%d): %s",
                       rp->topic, (int)rp->partition, rc, ks_task_store_message(rp->task));
        return rc;
    }
    rp->done++;
    return 0;
}

/* Read the changelog from rp->from to rp->lso into the store. 0, or a
 * negative ks_err (KS_ERR_STATE: the engine is stopping). */
static int replay_changelog(ks_restorer *r, replay *rp, int64_t checkpoint)
{
    rd_kafka_topic_partition_list_t *tp = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(tp, rp->topic, rp->partition)->offset =
        checkpoint < 0 ? RD_KAFKA_OFFSET_BEGINNING : checkpoint;
    rd_kafka_assign(r->consumer, tp);
    int64_t last_report = rp->started_ms, progress_ms = rp->started_ms;
    int rc = 0;
    ks_query_tasks_progress(r->eng->qtasks, rp->partition, rp->name, 0, rp->lso - rp->from);
    for (;;) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(r->consumer, 500);
        rd_kafka_position(r->consumer, tp);
        int64_t position = tp->elems[0].offset;
        if (m) {
            int retried = m->err != 0;
            int step = apply(r, rp, m, &progress_ms);
            rd_kafka_message_destroy(m);
            if (rp->done % 1024 == 0) /* what a query of the task answers meanwhile */
                ks_query_tasks_progress(r->eng->qtasks, rp->partition, rp->name, rp->done,
                                        rp->lso - rp->from);
            if (step != 0) {
                rc = step > 0 ? 0 : step;
                break;
            }
            if (retried) /* poll again at once */
                continue;
        }
        if (position >= rp->lso && position >= 0)
            break;
        if (ks_mono_ms() - last_report >= 2000) {
            last_report = ks_mono_ms();
            report_progress(r, rp, last_report);
        }
        if (ks_engine_stopping(r->eng)) {
            rc = KS_ERR_STATE;
            break;
        }
    }
    rd_kafka_assign(r->consumer, NULL);
    rd_kafka_topic_partition_list_destroy(tp);
    return rc;
}

/* Commit the replayed store and report it. 0, or the store's ks_err
 * (engine stopped). */
static int finish(ks_restorer *r, replay *rp)
{
    int rc = ks_task_commit_stores(rp->task);
    if (rc != 0) {
        ks_engine_fail(r->eng, r->where,
                       "restore of %s [%d]: committing the store failed (%d): %s", rp->topic,
                       (int)rp->partition, rc, ks_task_store_message(rp->task));
        return rc;
    }
    double secs = (double)(ks_mono_ms() - rp->started_ms) / 1000.0;
    char l[512];
    snprintf(l, sizeof l, "store=\"%s\",partition=\"%d\"", rp->name, (int)rp->partition);
    ks_metrics_add(r->eng->metrics, "kstreams_restore_records_total", l, (double)rp->done);
    ks_metrics_set(r->eng->metrics, "kstreams_restore_remaining", l, 0);
    ks_info(rp->task->where,
            "restored store %s partition %d: %llu records replayed from offset %lld "
            "in %.2f s",
            rp->name, (int)rp->partition, (unsigned long long)rp->done, (long long)rp->from,
            secs);
    return 0;
}

/* Replay store `store` from its checkpoint to the end of its changelog,
 * or to `limit` when that is >= 0 and before the end. */
static int restore_store(ks_restorer *r, ks_task *task, int store, int64_t limit)
{
    const ks_pipeline *p = task->topo->pipeline;
    replay rp = {.task = task, .store = store, .name = p->stores[store].name,
                 .table = p->stores[store].table, .partition = task->partition};
    ks_store_changelog(task->topo, store, rp.topic, sizeof rp.topic);
    int64_t checkpoint = ks_task_checkpoint(task, store);
    int rc = wait_stable_end(r, &rp);
    if (rc != 0)
        return rc;
    if (limit >= 0 && limit < rp.lso)
        rp.lso = limit;
    rp.from = checkpoint < 0 ? 0 : checkpoint;
    if (rp.from >= rp.lso) {
        ks_info(task->where, "store %s partition %d up to date at offset %lld (no replay)",
                rp.name, (int)rp.partition, (long long)rp.from);
        return 0;
    }
    rp.started_ms = ks_mono_ms();
    rc = replay_changelog(r, &rp, checkpoint);
    if (rc != 0) {
        ks_task_abort_stores(task);
        return rc;
    }
    return finish(r, &rp);
}

/* Where a table's restore stops. A table nothing reads in `from:` catches
 * up to the end of its partition before the task's first record (-1: no
 * limit; the worker starts its consumer there). One whose changes flow on
 * (a table-table join, an update stream) stops at the group's committed
 * offset: the group's consumer processes the rest, so that every change
 * reaches its readers once. 0 with *limit set, KS_ERR_STATE when the
 * engine is stopping, KS_ERR_IO (engine stopped) when the offset cannot
 * be read within a minute. */
static int table_restore_limit(ks_restorer *r, rd_kafka_t *group, const ks_task *task,
                               const ks_cfg_source *table, int64_t *limit)
{
    const ks_topology *t = task->topo;
    *limit = -1;
    if (t->nodes[table - t->pipeline->sources].child_count == 0)
        return 0;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, table->topic, task->partition);
    int64_t end = ks_mono_ms() + 60000;
    int rc = KS_ERR_IO;
    while (ks_mono_ms() < end) {
        if (ks_engine_stopping(r->eng)) {
            rc = KS_ERR_STATE;
            break;
        }
        if (rd_kafka_committed(group, l, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR &&
            !l->elems[0].err) {
            *limit = l->elems[0].offset >= 0 ? l->elems[0].offset : 0;
            rc = 0;
            break;
        }
        usleep(200 * 1000); /* e.g. a previous owner's offsets still pending */
    }
    rd_kafka_topic_partition_list_destroy(l);
    if (rc == KS_ERR_IO)
        ks_engine_fail(r->eng, r->where, "table %s [%d]: cannot read the group's committed offset",
                       table->topic, (int)task->partition);
    return rc;
}

int ks_restorer_restore(ks_restorer *r, ks_task *task, rd_kafka_t *group)
{
    const ks_pipeline *p = task->topo->pipeline;
    for (size_t s = 0; s < p->store_count; s++) {
        const ks_cfg_source *table = ks_table_of_store(p, (int)s);
        if (!p->stores[s].changelog && !table)
            continue;
        int64_t limit = -1;
        int rc = table ? table_restore_limit(r, group, task, table, &limit) : 0;
        if (rc == 0)
            rc = restore_store(r, task, (int)s, limit);
        if (rc != 0)
            return rc;
    }
    return 0;
}
