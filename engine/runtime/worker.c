/*
 * worker.c - the poll / process / commit loop of one worker thread.
 *
 * A batch is the records processed between two commits. Its commit
 * sequence, exactly-once:
 *   1. flush the producer (delivery reports give changelog offsets)
 *   2. check the epoch of every task in the batch
 *   3. send_offsets_to_transaction (with the group metadata: KIP-447)
 *   4. commit_transaction
 *   5. per task: write checkpoints and commit the LMDB transaction
 * Any failure before 5 aborts the Kafka transaction and every LMDB
 * transaction and seeks the consumer back to the last committed offsets.
 * A crash between 4 and 5 leaves the store behind its changelog; restore
 * replays that tail from the checkpoint.
 *
 * At-least-once: flush, commit LMDB with checkpoints, commit offsets.
 *
 * Rebalances (eager `range` assignor: librdkafka 2.0.2's cooperative mode
 * can abort the process or re-deliver old offsets) run in the poll call on
 * this thread: a revoke commits the open batch first (aborts it when the
 * partitions were lost), so a batch never spans two assignments.
 */
#include "runtime/worker.h"

#include <errno.h>
#include <stdarg.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/fault.h"
#include "kafka/fair_poll.h"
#include "kafka/kafka.h"
#include "base/log.h"
#include "runtime/stall.h"
#include "http/metrics.h"
#include "runtime/reload.h"
#include "runtime/repartition_purge.h"
#include "runtime/serde.h"
#include "runtime/table.h"
#include "runtime/task.h"
#include "base/clock.h"

#define KS_MAX_HEADERS 64
#define KS_MAX_BAD_OUTPUTS 32 /* refused outputs set aside in one batch */
/* records taken from one partition before the next gets its turn: enough
 * to keep the per-record cost of switching queues out of the profile */
#define FAIR_BURST 64

struct ks_worker {
    ks_engine *eng;
    const ks_topology *topo;
    const ks_pipeline *p;
    int id;
    int eos;
    pthread_t thread;
    char where[48];
    char txn_id[512];
    rd_kafka_t *consumer;
    rd_kafka_t *producer;
    rd_kafka_t *restorer; /* read_committed, assign-only: restores */
    rd_kafka_t *probe;    /* read_uncommitted: high watermarks only */
    ks_fair_poll *fair;   /* the source partitions' own queues, in turn */
    ks_purge *purge;      /* NULL without repartition topics */
    const char **source_topics; /* by source index, borrowed from the pipeline */
    ks_stall *stalls;     /* by slot: committed progress watch */
    int64_t *group_pos;   /* by slot: the group's offset at assignment; -1 not
                             looked up yet, -2 the look-up failed */
    int64_t txn_timeout_ms;
    int32_t partitions;   /* tasks of the topology */
    ks_task **tasks;      /* by partition number; NULL when not assigned */
    uint64_t *epoch;      /* by partition number; bumped on revoke */
    /* by partition * source_count + source: next offset to process,
     * last committed offset (-1: unknown) */
    int64_t *pos;
    int64_t *committed;
    /* the open batch */
    int in_batch;
    int64_t batch_started_ms;
    size_t batch_records;
    size_t max_batch;
    uint64_t *batch_epoch;
    rd_kafka_resp_err_t delivery_err;
    char delivery_errstr[256];
    int retries;           /* aborts in a row for the same reason */
    char last_abort[640];  /* that reason */
    ks_header headers[KS_MAX_HEADERS];
    uint64_t commits;
    uint64_t aborts;
    char **changelog_topics; /* by store index; a table's store: its topic */
    uint64_t poisons;
    double commit_seconds;
    double process_seconds;
    uint64_t processed;
    int64_t last_publish_ms;
    /* by partition: task counters already added to the metrics (a task
     * object lives for one assignment; the metrics outlive it) */
    uint64_t *published_in;
    uint64_t *published_out;
    /* an output a sink refused (not its serde) while processing the
     * current record: set by on_emit, read after the record */
    char rejected[600];
    /* input records whose outputs were refused, known across the batch's
     * aborts until a commit covers them: on replay the poison policy
     * applies to each */
    struct bad_output {
        int32_t partition;
        int64_t offset;
        char topic[256];
        char why[600];
    } bad_outputs[KS_MAX_BAD_OUTPUTS];
    size_t bad_output_count;
};

static void publish_task_counts(ks_worker *w, int32_t p);

static size_t slot(const ks_worker *w, int32_t partition, size_t source)
{
    return (size_t)partition * w->p->source_count + source;
}

static void fail(ks_worker *w, const char *fmt, ...) KS_PRINTF(2, 3);

static void fail(ks_worker *w, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ks_error(w->where, "%s", msg);
    ks_engine_stop(w->eng, 1, msg);
}

/* ---- producing ----------------------------------------------------------- */

/* Delivery reports: remember changelog offsets (opaque = the task's
 * changelog_hi slot) and the first failure. */
static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    ks_worker *w = opaque;
    if (m->err) {
        if (!w->delivery_err) {
            w->delivery_err = m->err;
            snprintf(w->delivery_errstr, sizeof w->delivery_errstr, "%s [%d]: %s",
                     rd_kafka_topic_name(m->rkt), (int)m->partition,
                     rd_kafka_err2str(m->err));
        }
        return;
    }
    int64_t *hi = m->_private;
    if (hi && m->offset > *hi)
        *hi = m->offset;
}

static int produce(ks_worker *w, const char *topic, int32_t partition, const void *key,
                   size_t klen, const void *value, size_t vlen, int64_t ts, void *opaque,
                   rd_kafka_headers_t *hdrs)
{
    for (;;) {
        /* two calls: RD_KAFKA_V_HEADERS is two varargs, and inside a ?: only
         * the last of them was passed (every record with headers failed
         * with "Invalid argument") */
        rd_kafka_resp_err_t e =
            hdrs ? rd_kafka_producev(
                       w->producer, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(partition),
                       RD_KAFKA_V_KEY(key, klen), RD_KAFKA_V_VALUE((void *)value, vlen),
                       RD_KAFKA_V_TIMESTAMP(ts > 0 ? ts : 0),
                       RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE(opaque),
                       RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_END)
                 : rd_kafka_producev(
                       w->producer, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(partition),
                       RD_KAFKA_V_KEY(key, klen), RD_KAFKA_V_VALUE((void *)value, vlen),
                       RD_KAFKA_V_TIMESTAMP(ts > 0 ? ts : 0),
                       RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE(opaque),
                       RD_KAFKA_V_END);
        if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            rd_kafka_poll(w->producer, 10);
            continue;
        }
        if (e) {
            if (hdrs)
                rd_kafka_headers_destroy(hdrs);
            ks_error(w->where, "produce to %s [%d] failed: %s", topic, (int)partition,
                     rd_kafka_err2str(e));
            return KS_ERR_IO;
        }
        return 0;
    }
}

/* The record's headers for producev (which takes them over), or NULL. */
static rd_kafka_headers_t *record_headers(const ks_record *rec)
{
    if (!rec->header_count)
        return NULL;
    rd_kafka_headers_t *hdrs = rd_kafka_headers_new(rec->header_count);
    for (size_t i = 0; i < rec->header_count; i++)
        rd_kafka_header_add(hdrs, rec->headers[i].name, -1, rec->headers[i].value,
                            (ssize_t)rec->headers[i].value_len);
    return hdrs;
}

static int on_emit(void *arg, ks_task *task, const ks_topo_node *sink, const ks_record *rec)
{
    ks_worker *w = arg;
    const char *why = NULL;
    if (ks_serde_check(sink->sink->key_serde, rec->key, rec->key_len, &why) != 0 ||
        ks_serde_check(sink->sink->value_serde, rec->value, rec->value_len, &why) != 0) {
        ks_error(task->where, "record for sink '%s' (topic %s) does not match its serde: %s",
                 sink->name, sink->sink->topic, why);
        if (!w->rejected[0])
            snprintf(w->rejected, sizeof w->rejected,
                     "its output for sink '%s' (topic %s) does not match the sink's serde: %s",
                     sink->name, sink->sink->topic, why);
        return KS_ERR_INVALID;
    }
    return produce(w, sink->sink->topic, RD_KAFKA_PARTITION_UA, rec->key, rec->key_len,
                   rec->value, rec->value_len, rec->timestamp, NULL, record_headers(rec));
}

/* The outbox's requests: keyed by user id, so one user's events stay in
 * order in one partition. */
static int on_emit_topic(void *arg, ks_task *task, const char *topic, const ks_record *rec)
{
    (void)task;
    return produce(arg, topic, RD_KAFKA_PARTITION_UA, rec->key, rec->key_len, rec->value,
                   rec->value_len, rec->timestamp, NULL, record_headers(rec));
}

static int on_changelog(void *arg, ks_task *task, int store, ks_bytes key,
                        const ks_bytes *value)
{
    ks_worker *w = arg;
    /* names made once at start: an snprintf per write was ~5% of the
     * worker's instructions (bench/ callgrind) */
    const char *topic = w->changelog_topics[store];
    return produce(w, topic, task->partition, key.data, key.len, value ? value->data : NULL,
                   value ? value->len : 0, task->current ? task->current->timestamp : 0,
                   &task->changelog_hi[store], NULL);
}

/* ---- clients ------------------------------------------------------------- */

static rd_kafka_t *new_producer(ks_worker *w, char *err, size_t errlen)
{
    const char *defaults[] = {"linger.ms", "5", "batch.num.messages", "10000",
                              "queue.buffering.max.messages", "500000",
                              "transaction.timeout.ms", "30000", "retry.backoff.ms", "20",
                              NULL};
    const char *alo[] = {"enable.idempotence", "true", "acks", "all", "partitioner",
                         "murmur2_random", NULL};
    const char *eos[] = {"enable.idempotence", "true", "acks",    "all",
                         "partitioner",        "murmur2_random", "transactional.id",
                         w->txn_id,            NULL};
    rd_kafka_conf_t *conf = ks_kafka_conf(w->p, RD_KAFKA_PRODUCER, defaults, w->eos ? eos : alo, err,
                                          errlen);
    if (!conf)
        return NULL;
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_conf_set_opaque(conf, w);
    char timeout[32];
    size_t timeout_len = sizeof timeout;
    if (rd_kafka_conf_get(conf, "transaction.timeout.ms", timeout, &timeout_len) ==
        RD_KAFKA_CONF_OK)
        w->txn_timeout_ms = strtoll(timeout, NULL, 10);
    char why[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, why, sizeof why);
    if (!rk) {
        rd_kafka_conf_destroy(conf);
        snprintf(err, errlen, "cannot create producer: %s", why);
        return NULL;
    }
    if (w->eos) {
        rd_kafka_error_t *e = rd_kafka_init_transactions(rk, 60000);
        if (e) {
            snprintf(err, errlen, "init_transactions (transactional.id %s): %s", w->txn_id,
                     rd_kafka_error_string(e));
            rd_kafka_error_destroy(e);
            rd_kafka_destroy(rk);
            return NULL;
        }
    }
    return rk;
}

static void on_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque);

static rd_kafka_t *new_consumer(ks_worker *w, char *err, size_t errlen)
{
    const char *defaults[] = {"session.timeout.ms", "10000", "heartbeat.interval.ms", "1000",
                              "max.poll.interval.ms", "300000", "fetch.wait.max.ms", "100",
                              NULL};
    const char *forced[] = {"group.id",
                            w->p->application,
                            "enable.auto.commit",
                            "false",
                            "enable.auto.offset.store",
                            "false",
                            "auto.offset.reset",
                            "earliest",
                            "isolation.level",
                            "read_committed",
                            "partition.assignment.strategy",
                            "range",
                            NULL};
    rd_kafka_conf_t *conf = ks_kafka_conf(w->p, RD_KAFKA_CONSUMER, defaults, forced, err, errlen);
    if (!conf)
        return NULL;
    rd_kafka_conf_set_rebalance_cb(conf, on_rebalance);
    rd_kafka_conf_set_opaque(conf, w);
    char why[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, why, sizeof why);
    if (!rk) {
        rd_kafka_conf_destroy(conf);
        snprintf(err, errlen, "cannot create consumer: %s", why);
        return NULL;
    }
    rd_kafka_poll_set_consumer(rk);
    return rk;
}

/* An assign-only consumer (never joins the group; the group.id only keeps
 * librdkafka 2.0.2 from looping on _UNKNOWN_GROUP). */
static rd_kafka_t *new_restorer(ks_worker *w, const char *isolation, char *err,
                                size_t errlen)
{
    char group[600];
    snprintf(group, sizeof group, "%s-restore", w->p->application);
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
    rd_kafka_conf_t *conf = ks_kafka_conf(w->p, RD_KAFKA_CONSUMER, defaults, forced, err, errlen);
    if (!conf)
        return NULL;
    char why[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, why, sizeof why);
    if (!rk) {
        rd_kafka_conf_destroy(conf);
        snprintf(err, errlen, "cannot create restore consumer: %s", why);
    }
    return rk;
}

/* ---- restore ------------------------------------------------------------- */

/* Last stable offset and high watermark of a changelog partition. */
static int changelog_ends(ks_worker *w, const char *topic, int32_t partition, int64_t *lso,
                          int64_t *hw)
{
    int64_t lo;
    rd_kafka_resp_err_t e =
        rd_kafka_query_watermark_offsets(w->restorer, topic, partition, &lo, lso, 10000);
    if (!e) /* the probe is read_uncommitted: its "high" is the log end */
        e = rd_kafka_query_watermark_offsets(w->probe, topic, partition, &lo, hw, 10000);
    return e ? -1 : 0;
}

/* Replay store `store` from its checkpoint to the end of its changelog, or
 * to `limit` when that is >= 0 and before the end. */
static int restore_store(ks_worker *w, ks_task *task, int store, int64_t limit)
{
    const char *topic = w->changelog_topics[store];
    int table = w->p->stores[store].table;
    int32_t part = task->partition;
    int64_t ckpt = ks_task_checkpoint(task, store);
    int64_t lso = 0, hw = 0;
    /* a previous owner's open transaction must end first (LSO == HW) */
    int64_t deadline = ks_mono_ms() + 120000;
    for (;;) {
        if (changelog_ends(w, topic, part, &lso, &hw) != 0) {
            /* transient just after the topic's creation (no leader yet) or
             * while the broker restarts: retry until the deadline (found by
             * the crash suite, tests/integration/test_crash.c) */
            if (ks_mono_ms() > deadline) {
                fail(w, "restore of %s [%d]: cannot read its offsets", topic, (int)part);
                return -1;
            }
            if (ks_engine_stopping(w->eng))
                return -1;
            usleep(200 * 1000);
            continue;
        }
        if (lso >= hw || ks_mono_ms() > deadline)
            break;
        if (ks_engine_stopping(w->eng))
            return -1;
        usleep(100 * 1000);
    }
    if (limit >= 0 && limit < lso)
        lso = limit;
    int64_t from = ckpt < 0 ? 0 : ckpt;
    if (from >= lso) {
        ks_info(task->where, "store %s partition %d up to date at offset %lld (no replay)",
                w->p->stores[store].name, (int)part, (long long)from);
        return 0;
    }
    rd_kafka_topic_partition_list_t *tp = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(tp, topic, part)->offset =
        ckpt < 0 ? RD_KAFKA_OFFSET_BEGINNING : ckpt;
    rd_kafka_assign(w->restorer, tp);
    int64_t started = ks_mono_ms(), last_report = started, progress_ms = started;
    uint64_t done = 0;
    int64_t total = lso - from;
    int rc = 0;
    for (;;) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(w->restorer, 500);
        rd_kafka_position(w->restorer, tp);
        int64_t position = tp->elems[0].offset;
        if (m) {
            if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                rd_kafka_message_destroy(m);
                break;
            }
            if (m->err && ks_mono_ms() - progress_ms < 120000) {
                /* e.g. transport errors while the broker restarts: the
                 * client reconnects (found by the crash suite) */
                ks_warn(w->where, "restore of %s [%d]: %s (retrying)", topic, (int)part,
                        rd_kafka_message_errstr(m));
                rd_kafka_message_destroy(m);
                continue;
            }
            if (m->err) {
                fail(w, "restore of %s [%d]: %s", topic, (int)part, rd_kafka_message_errstr(m));
                rd_kafka_message_destroy(m);
                rc = -1;
                break;
            }
            ks_bytes key = {m->key, m->key_len};
            ks_bytes val = {m->payload, m->len};
            rc = table ? ks_table_restore_put(task, store, key, m->payload ? &val : NULL,
                                              rd_kafka_message_timestamp(m, NULL), m->offset)
                       : ks_task_restore_put(task, store, key, m->payload ? &val : NULL,
                                             m->offset);
            progress_ms = ks_mono_ms();
            rd_kafka_message_destroy(m);
            ks_fault_point(KS_FAULT_DURING_RESTORE);
            if (rc != 0) {
                fail(w, "restore of %s [%d]: store write failed (%d): %s", topic, (int)part,
                     rc, ks_store_last_error(task->env));
                break;
            }
            done++;
        }
        if (position >= lso && position >= 0)
            break;
        if (ks_mono_ms() - last_report >= 2000) {
            last_report = ks_mono_ms();
            double secs = (double)(last_report - started) / 1000.0;
            char l[512];
            snprintf(l, sizeof l, "store=\"%s\",partition=\"%d\"", w->p->stores[store].name,
                     (int)part);
            ks_metrics_set(w->eng->metrics, "kstreams_restore_remaining", l,
                           (double)(total > (int64_t)done ? total - (int64_t)done : 0));
            ks_info(task->where, "restoring store %s partition %d: %llu of ~%lld records (%.0f/s)",
                    w->p->stores[store].name, (int)part, (unsigned long long)done,
                    (long long)total, secs > 0 ? (double)done / secs : 0.0);
        }
        if (ks_engine_stopping(w->eng)) {
            rc = -1;
            break;
        }
    }
    rd_kafka_assign(w->restorer, NULL);
    rd_kafka_topic_partition_list_destroy(tp);
    if (rc == 0) {
        rc = ks_task_commit_stores(task);
        if (rc != 0) {
            fail(w, "restore of %s [%d]: committing the store failed (%d): %s", topic,
                 (int)part, rc, ks_store_last_error(task->env));
            return rc;
        }
        double secs = (double)(ks_mono_ms() - started) / 1000.0;
        char l[512];
        snprintf(l, sizeof l, "store=\"%s\",partition=\"%d\"", w->p->stores[store].name,
                 (int)part);
        ks_metrics_add(w->eng->metrics, "kstreams_restore_records_total", l, (double)done);
        ks_metrics_set(w->eng->metrics, "kstreams_restore_remaining", l, 0);
        ks_info(task->where,
                "restored store %s partition %d: %llu records replayed from offset %lld "
                "in %.2f s",
                w->p->stores[store].name, (int)part, (unsigned long long)done,
                (long long)from, secs);
    } else {
        ks_task_abort_stores(task);
    }
    return rc;
}

/* ---- tasks and assignment -------------------------------------------------- */

/* The source index of the table whose store is `store`, or -1. */
static int table_source(const ks_worker *w, int store)
{
    for (size_t s = 0; s < w->p->source_count; s++)
        if (w->p->sources[s].table && w->p->sources[s].table_store == store)
            return (int)s;
    return -1;
}

/* Where a table's restore stops. A table nothing reads in `from:` catches
 * up to the end of its partition before the task's first record (-1: no
 * limit; table_positions starts the consumer there). One whose changes
 * flow on (a table-table join, an update stream) stops at the group's
 * committed offset: the consumer processes the rest, so that every change
 * reaches its readers once. -2 when the offset cannot be read. */
static int64_t table_restore_limit(ks_worker *w, int src, int32_t partition)
{
    if (w->topo->nodes[src].child_count == 0)
        return -1;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, w->p->sources[src].topic, partition);
    int64_t at = -2;
    int64_t end = ks_mono_ms() + 60000;
    while (at == -2 && ks_mono_ms() < end && !ks_engine_stopping(w->eng)) {
        if (rd_kafka_committed(w->consumer, l, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR &&
            !l->elems[0].err)
            at = l->elems[0].offset >= 0 ? l->elems[0].offset : 0;
        else
            usleep(200 * 1000); /* e.g. a previous owner's offsets still pending */
    }
    rd_kafka_topic_partition_list_destroy(l);
    if (at == -2)
        fail(w, "table %s [%d]: cannot read the group's committed offset",
             w->p->sources[src].topic, (int)partition);
    return at;
}

/* Restore every store of a new task (tables: table_restore_limit). */
static int restore_task(ks_worker *w, ks_task *task)
{
    for (size_t s = 0; s < w->p->store_count; s++) {
        int src = w->p->stores[s].table ? table_source(w, (int)s) : -1;
        if (!w->p->stores[s].changelog && src < 0)
            continue;
        int64_t limit = src >= 0 ? table_restore_limit(w, src, task->partition) : -1;
        if (limit == -2 || restore_store(w, task, (int)s, limit) != 0)
            return -1;
    }
    return 0;
}

static int open_task(ks_worker *w, int32_t partition)
{
    if (partition < 0 || partition >= w->partitions) {
        fail(w, "assigned partition %d, but the sources have %d partitions: restart the "
                "engine after repartitioning",
             (int)partition, (int)w->partitions);
        return -1;
    }
    if (w->tasks[partition])
        return 0;
    ks_task_io io = {
        .arg = w,
        .emit = on_emit,
        .emit_topic = on_emit_topic,
        .changelog = on_changelog,
        .metrics = w->eng->metrics};
    char err[1024];
    ks_task *task;
    if (ks_task_create(w->topo, partition, &io, &task, err, sizeof err) != 0) {
        fail(w, "%s", err);
        return -1;
    }
    if (restore_task(w, task) != 0) {
        ks_task_destroy(task);
        return -1;
    }
    /* the restored stores say which state format they are in: a pending
     * migration runs in the task's first batch, a newer one is refused */
    if (ks_task_check_versions(task, err, sizeof err) != 0) {
        ks_task_destroy(task);
        fail(w, "%s", err);
        return -1;
    }
    w->tasks[partition] = task;
    w->published_in[partition] = w->published_out[partition] = 0;
    ks_reload_task_opened(w->eng->reload, w->id, task); /* hot deploy in progress */
    ks_reload_note_versions(w->eng->reload, task);
    for (size_t s = 0; s < w->p->source_count; s++) {
        const ks_cfg_source *src = &w->p->sources[s];
        w->pos[slot(w, partition, s)] = -1;
        /* a table nothing reads in from: goes on where its restored store
         * ends, whatever the group committed (table_positions) */
        w->committed[slot(w, partition, s)] =
            src->table && w->topo->nodes[s].child_count == 0
                ? ks_task_checkpoint(task, src->table_store)
                : -1;
        w->group_pos[slot(w, partition, s)] = -1;
    }
    ks_info(w->where, "task %d started", (int)partition);
    return 0;
}

static void close_task(ks_worker *w, int32_t partition)
{
    if (partition < 0 || partition >= w->partitions || !w->tasks[partition])
        return;
    publish_task_counts(w, partition);
    ks_reload_forget_task(w->eng->reload, w->tasks[partition]->where);
    ks_task_destroy(w->tasks[partition]);
    w->tasks[partition] = NULL;
    w->epoch[partition]++;
    ks_info(w->where, "task %d closed", (int)partition);
}

/* ---- batches --------------------------------------------------------------- */

static int source_index(const ks_worker *w, const char *topic)
{
    for (size_t s = 0; s < w->p->source_count; s++)
        if (strcmp(w->p->sources[s].topic, topic) == 0)
            return (int)s;
    return -1;
}

/* Offsets to commit: every assigned partition with a known position, so
 * that a batch written only by timers still carries offsets for the
 * broker's generation check (KIP-447). */
static rd_kafka_topic_partition_list_t *batch_offsets(ks_worker *w)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(8);
    for (int32_t p = 0; p < w->partitions; p++) {
        if (!w->tasks[p])
            continue;
        for (size_t s = 0; s < w->p->source_count; s++) {
            int64_t off = w->pos[slot(w, p, s)];
            if (off < 0)
                off = w->committed[slot(w, p, s)];
            if (off >= 0)
                rd_kafka_topic_partition_list_add(l, w->p->sources[s].topic, p)->offset = off;
        }
    }
    return l;
}

static int begin_batch(ks_worker *w)
{
    if (w->in_batch)
        return 0;
    if (w->eos) {
        rd_kafka_error_t *e = rd_kafka_begin_transaction(w->producer);
        if (e) {
            fail(w, "begin_transaction: %s", rd_kafka_error_string(e));
            rd_kafka_error_destroy(e);
            return -1;
        }
    }
    memcpy(w->batch_epoch, w->epoch, (size_t)w->partitions * sizeof *w->epoch);
    w->in_batch = 1;
    w->batch_started_ms = ks_mono_ms();
    w->batch_records = 0;
    w->delivery_err = 0;
    return 0;
}

/* Seek every assigned partition back to its last committed offset and
 * forget the batch's positions. */
static void rewind_to_committed(ks_worker *w)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(8);
    for (int32_t p = 0; p < w->partitions; p++) {
        if (!w->tasks[p])
            continue;
        for (size_t s = 0; s < w->p->source_count; s++) {
            int64_t c = w->committed[slot(w, p, s)];
            w->pos[slot(w, p, s)] = -1;
            if (c >= 0)
                rd_kafka_topic_partition_list_add(l, w->p->sources[s].topic, p)->offset = c;
        }
    }
    if (l->cnt) {
        rd_kafka_error_t *e = rd_kafka_seek_partitions(w->consumer, l, 10000);
        if (e) {
            ks_warn(w->where, "seek back to committed offsets: %s", rd_kafka_error_string(e));
            rd_kafka_error_destroy(e);
        }
    }
    rd_kafka_topic_partition_list_destroy(l);
}

static void abort_stores(ks_worker *w)
{
    for (int32_t p = 0; p < w->partitions; p++)
        if (w->tasks[p])
            ks_task_abort_stores(w->tasks[p]);
}

/* Replace a producer that hit a fatal error (fenced, or its epoch bumped
 * after a transaction timeout). */
static int rebuild_producer(ks_worker *w)
{
    ks_warn(w->where, "producer fatal error: rebuilding it (transactional.id %s)", w->txn_id);
    rd_kafka_destroy(w->producer);
    char err[1024];
    w->producer = new_producer(w, err, sizeof err);
    if (!w->producer) {
        fail(w, "%s", err);
        return -1;
    }
    return 0;
}

/* Abort the open batch: Kafka transaction, LMDB transactions, positions. */
static void abort_batch(ks_worker *w, const char *why)
{
    if (!w->in_batch)
        return;
    ks_warn(w->where, "aborting batch of %zu records: %s", w->batch_records, why);
    if (w->eos) {
        rd_kafka_error_t *e = rd_kafka_abort_transaction(w->producer, 60000);
        if (e) {
            int fatal = rd_kafka_error_is_fatal(e);
            ks_warn(w->where, "abort_transaction: %s", rd_kafka_error_string(e));
            rd_kafka_error_destroy(e);
            if (fatal || rd_kafka_fatal_error(w->producer, NULL, 0))
                rebuild_producer(w);
        }
    } else {
        rd_kafka_flush(w->producer, 30000);
    }
    abort_stores(w);
    rewind_to_committed(w);
    w->in_batch = 0;
    w->aborts++;
    /* the same failure again and again is not transient; a failure at a
     * later record means the replays make progress */
    if (strcmp(why, w->last_abort) != 0) {
        snprintf(w->last_abort, sizeof w->last_abort, "%s", why);
        w->retries = 0;
    }
    if (++w->retries > 10)
        fail(w, "10 batches in a row aborted for the same reason (%s); stopping", why);
}

static void batch_committed(ks_worker *w)
{
    for (int32_t p = 0; p < w->partitions; p++) {
        if (!w->tasks[p])
            continue;
        for (size_t s = 0; s < w->p->source_count; s++)
            if (w->pos[slot(w, p, s)] >= 0)
                w->committed[slot(w, p, s)] = w->pos[slot(w, p, s)];
    }
    w->in_batch = 0;
    w->retries = 0;
    w->commits++;
    w->bad_output_count = 0; /* each was dealt with in a committed batch */
}

/* Handle an error of a transactional call: 0 = retry the call, -1 = the
 * batch was aborted. */
static int txn_error(ks_worker *w, const char *call, rd_kafka_error_t *e)
{
    char msg[512];
    snprintf(msg, sizeof msg, "%s: %s", call, rd_kafka_error_string(e));
    int retriable = rd_kafka_error_is_retriable(e);
    int abortable = rd_kafka_error_txn_requires_abort(e);
    int fatal = rd_kafka_error_is_fatal(e) || (!retriable && !abortable);
    rd_kafka_error_destroy(e);
    if (retriable && !fatal && !abortable) {
        ks_warn(w->where, "%s (retrying)", msg);
        return 0;
    }
    if (fatal) {
        ks_warn(w->where, "%s: fatal, this producer is done", msg);
        abort_stores(w);
        w->in_batch = 0;
        w->aborts++;
        if (rebuild_producer(w) == 0)
            rewind_to_committed(w);
        return -1;
    }
    abort_batch(w, msg);
    return -1;
}

static int commit_stores(ks_worker *w)
{
    for (int32_t p = 0; p < w->partitions; p++) {
        if (!w->tasks[p])
            continue;
        int versions = ks_task_versions_in_batch(w->tasks[p]);
        int rc = ks_task_commit_stores(w->tasks[p]);
        if (rc == 0 && versions) /* kstreams status shows the committed ones */
            ks_reload_note_versions(w->eng->reload, w->tasks[p]);
        if (rc != 0) {
            fail(w, "task %d: committing its stores failed (%d): %s%s", (int)p, rc,
                 ks_store_last_error(w->tasks[p]->env),
                 w->eos ? " (the Kafka transaction committed: the restart restores the "
                          "batch from the changelog)"
                        : "");
            return -1;
        }
    }
    return 0;
}

/* Before the Kafka commit: checkpoints written, and room left for LMDB's
 * own commit (ks_store_prepare_commit), so that a full map stops the
 * engine while the batch can still be aborted. */
static int prepare_stores(ks_worker *w)
{
    for (int32_t p = 0; p < w->partitions; p++) {
        if (!w->tasks[p] || ks_task_prepare_stores(w->tasks[p]) == 0)
            continue;
        char msg[700];
        snprintf(msg, sizeof msg, "task %d: %s", (int)p, ks_store_last_error(w->tasks[p]->env));
        abort_batch(w, msg);
        fail(w, "%s", msg);
        return -1;
    }
    return 0;
}

/* The store of `task` is full (its batch txn died of it): the message,
 * copied into buf, or NULL. A replay cannot help; raising map_size can. */
static const char *store_full(ks_task *task, char *buf, size_t len)
{
    const char *msg = NULL;
    if (!task->env || ks_store_batch_error(task->env, &msg) != KS_ERR_STORE_FULL)
        return NULL;
    snprintf(buf, len, "%s", msg);
    return buf;
}

/* The crash point between the Kafka and the LMDB commit of a batch that
 * holds a migration (its changelog has the migrated data and the version
 * record; the stores do not yet). */
static void migration_committed_to_kafka(ks_worker *w)
{
    for (int32_t p = 0; p < w->partitions; p++)
        if (w->tasks[p] && ks_task_migrated_in_batch(w->tasks[p])) {
            ks_fault_point(KS_FAULT_MIGRATE_KAFKA_COMMITTED);
            return;
        }
}

static int commit_eos(ks_worker *w)
{
    ks_fault_point(KS_FAULT_BEFORE_FLUSH);
    rd_kafka_flush(w->producer, 60000);
    for (int32_t p = 0; p < w->partitions; p++)
        if (w->epoch[p] != w->batch_epoch[p]) {
            abort_batch(w, "a task changed owner during the batch");
            return -1;
        }
    if (prepare_stores(w) != 0)
        return -1;
    rd_kafka_topic_partition_list_t *offs = batch_offsets(w);
    rd_kafka_error_t *e = NULL;
    ks_fault_point(KS_FAULT_BEFORE_OFFSETS);
    if (offs->cnt) {
        rd_kafka_consumer_group_metadata_t *md = rd_kafka_consumer_group_metadata(w->consumer);
        do {
            e = rd_kafka_send_offsets_to_transaction(w->producer, offs, md, 30000);
        } while (e && txn_error(w, "send_offsets_to_transaction", e) == 0);
        rd_kafka_consumer_group_metadata_destroy(md);
    }
    rd_kafka_topic_partition_list_destroy(offs);
    if (e)
        return -1;
    /* a timed-out commit must be retried, never aborted: librdkafka 2.0.2
     * refuses the abort with _CONFLICT after commit's _TIMED_OUT */
    ks_fault_point(KS_FAULT_BEFORE_COMMIT);
    do {
        e = rd_kafka_commit_transaction(w->producer, 60000);
    } while (e && txn_error(w, "commit_transaction", e) == 0);
    if (e)
        return -1;
    ks_fault_point(KS_FAULT_AFTER_COMMIT);
    migration_committed_to_kafka(w);
    if (commit_stores(w) != 0)
        return -1;
    ks_fault_point(KS_FAULT_AFTER_STORES);
    batch_committed(w);
    return 0;
}

static int commit_alo(ks_worker *w)
{
    while (rd_kafka_outq_len(w->producer) > 0 && !ks_engine_stopping(w->eng))
        rd_kafka_flush(w->producer, 1000);
    rd_kafka_flush(w->producer, 30000);
    if (w->delivery_err) {
        char msg[400];
        snprintf(msg, sizeof msg, "delivery failed: %s", w->delivery_errstr);
        abort_batch(w, msg);
        return -1;
    }
    if (commit_stores(w) != 0)
        return -1;
    rd_kafka_topic_partition_list_t *offs = batch_offsets(w);
    rd_kafka_resp_err_t e = offs->cnt ? rd_kafka_commit(w->consumer, offs, 0) : 0;
    rd_kafka_topic_partition_list_destroy(offs);
    if (e && e != RD_KAFKA_RESP_ERR__NO_OFFSET) {
        ks_warn(w->where, "offset commit failed: %s (records will be processed again)",
                rd_kafka_err2str(e));
        w->in_batch = 0;
        rewind_to_committed(w);
        return -1;
    }
    batch_committed(w);
    return 0;
}

/* The batch limit follows the cost of processing, never the latency of
 * the commit: a slow or failing broker makes commits slow, and smaller
 * batches would only add commits (seen under broker kills: 11-16 records
 * per transaction, 20-30 records/s per worker, when commit time counted).
 * Only a batch whose processing outlasted four commit intervals (or a
 * third of transaction.timeout.ms, which bounds a transaction) halves it. */
static void adapt_batch_limit(ks_worker *w, int64_t processing_ms)
{
    int64_t slow = 4 * w->p->commit_interval_ms;
    if (w->txn_timeout_ms > 0 && slow > w->txn_timeout_ms / 3)
        slow = w->txn_timeout_ms / 3;
    if (processing_ms > slow && w->max_batch > 16)
        w->max_batch /= 2;
    else if (processing_ms < 2 * w->p->commit_interval_ms && w->max_batch < 100000)
        w->max_batch += w->max_batch / 4 + 1;
}

static int commit_batch(ks_worker *w)
{
    if (!w->in_batch)
        return 0;
    int64_t started = ks_mono_ms();
    int64_t processing = started - w->batch_started_ms;
    int rc = w->eos ? commit_eos(w) : commit_alo(w);
    w->commit_seconds += (double)(ks_mono_ms() - started) / 1000.0;
    adapt_batch_limit(w, processing);
    ks_debug(w->where, "commit of %zu records: %s in %lld ms", w->batch_records,
             rc == 0 ? "ok" : "failed", (long long)(ks_mono_ms() - started));
    return rc;
}

/* ---- rebalance ------------------------------------------------------------- */

/* The restore brought each table's store up to the end of its partition:
 * the consumer starts there, not at the group's offset (which may be
 * behind under at-least-once, or ahead of a wiped store), so the store
 * never goes back in time and no update is applied twice. */
static void table_positions(ks_worker *w, rd_kafka_topic_partition_list_t *parts)
{
    for (int i = 0; i < parts->cnt; i++) {
        int s = source_index(w, parts->elems[i].topic);
        int32_t p = parts->elems[i].partition;
        if (s < 0 || !w->p->sources[s].table || p < 0 || p >= w->partitions || !w->tasks[p])
            continue;
        int64_t at = w->committed[slot(w, p, (size_t)s)];
        if (at >= 0)
            parts->elems[i].offset = at;
    }
}

static void on_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque)
{
    ks_worker *w = opaque;
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        for (int i = 0; i < parts->cnt; i++)
            if (open_task(w, parts->elems[i].partition) != 0)
                break;
        table_positions(w, parts);
        if (ks_fair_poll_assign(w->fair, parts) != 0)
            ks_warn(w->where, "no queue of its own for a partition: its records share the "
                              "consumer's queue");
        rd_kafka_assign(rk, parts);
        ks_info(w->where, "assigned %d partitions", parts->cnt);
        return;
    }
    /* revoke: finish the batch first (abort it when the partitions are
     * already someone else's) */
    if (rd_kafka_assignment_lost(rk))
        abort_batch(w, "partitions lost");
    else if (w->in_batch)
        commit_batch(w);
    for (int i = 0; i < parts->cnt; i++)
        close_task(w, parts->elems[i].partition);
    rd_kafka_assign(rk, NULL);
    ks_fair_poll_revoke(w->fair, parts);
    ks_info(w->where, "revoked %d partitions", parts->cnt);
}

/* ---- records ----------------------------------------------------------------- */

/* Apply the poison policy to record m. Returns 0 when the record is dealt
 * with (skipped, or dead-lettered in the batch), -1 when the batch was
 * aborted or the engine is stopping (the record must not count as done). */
static int poison(ks_worker *w, const rd_kafka_message_t *m, const char *why)
{
    const char *topic = rd_kafka_topic_name(m->rkt);
    w->poisons++;
    switch (w->p->poison) {
    case KS_POISON_SKIP:
        ks_warn(w->where, "skipping poison record %s/%d/%lld: %s", topic, (int)m->partition,
                (long long)m->offset, why);
        return 0;
    case KS_POISON_DEAD_LETTER: {
        rd_kafka_headers_t *h = rd_kafka_headers_new(4);
        char off[32], part[16];
        snprintf(off, sizeof off, "%lld", (long long)m->offset);
        snprintf(part, sizeof part, "%d", (int)m->partition);
        rd_kafka_header_add(h, "ks.topic", -1, topic, -1);
        rd_kafka_header_add(h, "ks.partition", -1, part, -1);
        rd_kafka_header_add(h, "ks.offset", -1, off, -1);
        rd_kafka_header_add(h, "ks.error", -1, why, -1);
        const char *dlq = w->p->dead_letter_topic;
        ks_warn(w->where, "poison record %s/%d/%lld to dead-letter topic %s: %s", topic,
                (int)m->partition, (long long)m->offset, dlq, why);
        /* in the batch's transaction: the dead letter and the offset commit
         * go together */
        if (produce(w, dlq, RD_KAFKA_PARTITION_UA, m->key, m->key_len, m->payload, m->len,
                    rd_kafka_message_timestamp(m, NULL), NULL, h) != 0) {
            abort_batch(w, "cannot write to the dead-letter topic");
            return -1;
        }
        return 0;
    }
    case KS_POISON_FAIL:
        break;
    }
    fail(w, "poison record at %s/%d/%lld: %s (set `poison: skip` or `poison: dead-letter` "
            "to go on)",
         topic, (int)m->partition, (long long)m->offset, why);
    return -1;
}

/* Remember that processing `rec` produced an output a sink refused.
 * -1 when too many are set aside already. */
static int note_bad_output(ks_worker *w, const ks_record *rec)
{
    if (w->bad_output_count == KS_MAX_BAD_OUTPUTS)
        return -1;
    struct bad_output *b = &w->bad_outputs[w->bad_output_count++];
    b->partition = rec->partition;
    b->offset = rec->offset;
    snprintf(b->topic, sizeof b->topic, "%s", rec->topic);
    snprintf(b->why, sizeof b->why, "%s", w->rejected);
    return 0;
}

/* 1 (with *why) when m is a record whose outputs a sink refused. */
static int is_bad_output(ks_worker *w, const rd_kafka_message_t *m, const char **why)
{
    for (size_t i = 0; i < w->bad_output_count; i++) {
        const struct bad_output *b = &w->bad_outputs[i];
        if (m->partition == b->partition && m->offset == b->offset &&
            strcmp(rd_kafka_topic_name(m->rkt), b->topic) == 0) {
            *why = b->why;
            return 1;
        }
    }
    return 0;
}

static void process_message(ks_worker *w, rd_kafka_message_t *m)
{
    int32_t part = m->partition;
    int src = source_index(w, rd_kafka_topic_name(m->rkt));
    if (src < 0 || part < 0 || part >= w->partitions || !w->tasks[part])
        return;
    ks_task *task = w->tasks[part];
    int64_t *pos = &w->pos[slot(w, part, (size_t)src)];
    int64_t *committed = &w->committed[slot(w, part, (size_t)src)];
    /* guard against re-delivery (librdkafka 2.0.2 can re-deliver old
     * offsets after a resume): process each offset once per batch */
    if (*pos >= 0 && m->offset < *pos)
        return;
    if (*committed < 0)
        *committed = m->offset;
    if (begin_batch(w) != 0)
        return;
    const ks_cfg_source *s = &w->p->sources[src];
    const char *why = NULL;
    if (is_bad_output(w, m, &why) ||
        ks_serde_check(s->key_serde, m->key, m->key_len, &why) != 0 ||
        ks_serde_check(s->value_serde, m->payload, m->len, &why) != 0) {
        if (poison(w, m, why) != 0)
            return;
        *pos = m->offset + 1;
        w->batch_records++;
        return;
    }
    ks_record rec = {.key = m->key,
                     .key_len = m->key_len,
                     .value = m->payload,
                     .value_len = m->len,
                     .timestamp = rd_kafka_message_timestamp(m, NULL),
                     .topic = rd_kafka_topic_name(m->rkt),
                     .partition = part,
                     .offset = m->offset};
    rd_kafka_headers_t *hdrs = NULL;
    if (rd_kafka_message_headers(m, &hdrs) == 0 && hdrs) {
        size_t n = 0;
        const char *name;
        const void *val;
        size_t vlen;
        while (n < KS_MAX_HEADERS && rd_kafka_header_get_all(hdrs, n, &name, &val, &vlen) == 0) {
            w->headers[n] = (ks_header){name, val, vlen};
            n++;
        }
        rec.headers = w->headers;
        rec.header_count = n;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    w->rejected[0] = '\0';
    ks_verdict v = ks_task_process(task, &w->topo->nodes[src], &rec);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    w->process_seconds += (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    w->processed++;
    if (w->rejected[0]) {
        /* its other effects are in the batch: abort it, and apply the
         * poison policy to this record when it comes again */
        char why[700];
        snprintf(why, sizeof why, "%s/%d/%lld: %s", rec.topic, (int)part,
                 (long long)m->offset, w->rejected);
        if (note_bad_output(w, &rec) != 0) {
            abort_batch(w, why);
            fail(w, "more than %d records in one batch with refused outputs; last %s",
                 KS_MAX_BAD_OUTPUTS, why);
            return;
        }
        abort_batch(w, why);
        return;
    }
    char full[600];
    if (v != KS_OK && store_full(task, full, sizeof full)) {
        abort_batch(w, "store map full");
        fail(w, "processing failed at %s/%d/%lld: %s", rec.topic, (int)part,
             (long long)m->offset, full);
        return;
    }
    switch (v) {
    case KS_OK:
        break;
    case KS_SKIP:
        if (poison(w, m, "a processor returned skip") != 0)
            return;
        break;
    case KS_RETRY: {
        char why[600];
        snprintf(why, sizeof why, "a processor asked to retry at %s/%d/%lld", rec.topic,
                 (int)part, (long long)m->offset);
        abort_batch(w, why);
        return;
    }
    case KS_FATAL:
        abort_batch(w, "a processor failed");
        fail(w, "processing failed at %s/%d/%lld (see the processor's log above)", rec.topic,
             (int)part, (long long)m->offset);
        return;
    }
    *pos = m->offset + 1;
    w->batch_records++;
}

/* Non-zero when a wall-clock punctuation of `task` is due at `now` (or not
 * yet armed): only then is a transaction worth opening. */
static int wallclock_due(const ks_task *task, int64_t now)
{
    for (size_t i = 0; i < task->topo->node_count; i++) {
        const ks_schedule *s = &task->ctxs[i].schedules[KS_TIME_WALLCLOCK];
        if (task->ctxs[i].inited && s->interval && (s->next == 0 || now >= s->next))
            return 1;
    }
    return 0;
}

static void punctuate_all(ks_worker *w)
{
    int64_t now = ks_wall_ms();
    for (int32_t p = 0; p < w->partitions; p++) {
        ks_task *task = w->tasks[p];
        if (!task || !wallclock_due(task, now))
            continue;
        if (begin_batch(w) != 0)
            return;
        w->rejected[0] = '\0';
        ks_verdict v = ks_task_punctuate_wallclock(task, now);
        if (w->rejected[0]) {
            /* no input record to set aside: a processor bug to fix */
            abort_batch(w, "a punctuation's output was refused");
            fail(w, "punctuation of task %d: %s", (int)p, w->rejected);
            return;
        }
        if (v != KS_OK) {
            char full[600];
            if (store_full(task, full, sizeof full)) {
                abort_batch(w, "store map full");
                fail(w, "punctuation of task %d failed: %s", (int)p, full);
                return;
            }
            abort_batch(w, "a punctuation failed");
            return;
        }
    }
}

/* Tasks that owe a migration (opened on stores of an older state version,
 * or swapped to a build of a newer one) or a first version record run it
 * at once in a batch of its own, not at their first record: an idle
 * partition's stores are converted too. At a boundary only. */
static void run_pending_migrations(ks_worker *w)
{
    for (int32_t p = 0; p < w->partitions; p++) {
        ks_task *task = w->tasks[p];
        if (!task || !ks_task_migration_pending(task))
            continue;
        if (begin_batch(w) != 0)
            return;
        w->rejected[0] = '\0';
        task->verdict = KS_OK;
        ks_verdict v = ks_task_run_migrations(task);
        if (v == KS_OK)
            continue;
        char full[600], why[700];
        if (store_full(task, full, sizeof full)) {
            abort_batch(w, "store map full");
            fail(w, "migration of task %d failed: %s", (int)p, full);
            return;
        }
        snprintf(why, sizeof why, "the migration of task %d %s", (int)p,
                 v == KS_FATAL ? "failed" : "asked to retry");
        abort_batch(w, why);
        if (v == KS_FATAL)
            fail(w, "%s (see the processor's log above)", why);
        return;
    }
}

/* Add what task p counted since the last publish to the metrics. */
static void publish_task_counts(ks_worker *w, int32_t p)
{
    const ks_task *task = w->tasks[p];
    char l[64];
    snprintf(l, sizeof l, "task=\"%d\"", (int)p);
    ks_metrics_add(w->eng->metrics, "kstreams_records_in_total", l,
                   (double)(task->records_in - w->published_in[p]));
    ks_metrics_add(w->eng->metrics, "kstreams_records_out_total", l,
                   (double)(task->records_out - w->published_out[p]));
    w->published_in[p] = task->records_in;
    w->published_out[p] = task->records_out;
}

/* Where a partition that has delivered nothing since its assignment
 * stands: the group's committed offset, else `low` (auto.offset.reset is
 * earliest). A partition starved from its start has no position of its
 * own to measure lag by. Looked up once per assignment (group_pos: -1 not
 * yet, -2 the look-up failed): this runs on the worker's thread, and a
 * broker that does not answer must not cost it 0.5 s every second. */
static int64_t group_position(ks_worker *w, int32_t p, size_t s, int64_t low)
{
    int64_t *at = &w->group_pos[slot(w, p, s)];
    if (*at != -1)
        return *at;
    *at = -2;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, w->p->sources[s].topic, p);
    if (rd_kafka_committed(w->consumer, l, 500) == RD_KAFKA_RESP_ERR_NO_ERROR &&
        !l->elems[0].err)
        *at = l->elems[0].offset >= 0 ? l->elems[0].offset : low;
    rd_kafka_topic_partition_list_destroy(l);
    return *at;
}

/* A partition with a backlog and no committed progress for
 * stall_warning_ms is logged with its lag, again every stall_warning_ms
 * while it lasts; kstreams_partition_stall_seconds shows every stall. */
static void watch_stall(ks_worker *w, int32_t p, size_t s, int64_t lag, const char *labels)
{
    int warn;
    int64_t stalled = ks_stall_observe(&w->stalls[slot(w, p, s)], w->committed[slot(w, p, s)],
                                       lag, ks_mono_ms(), w->p->stall_warning_ms, &warn);
    ks_metrics_set(w->eng->metrics, "kstreams_partition_stall_seconds", labels,
                   (double)stalled / 1000.0);
    if (warn)
        ks_warn(w->where,
                "partition %s[%d] has made no committed progress for %lld s with %lld records "
                "to go (committed offset %lld)",
                w->p->sources[s].topic, (int)p, (long long)(stalled / 1000), (long long)lag,
                (long long)w->committed[slot(w, p, s)]);
}

/* Repartition records below the committed offsets are never read again:
 * have them deleted, every few seconds (repartition_purge.h). */
static void purge_repartitions(ks_worker *w, int64_t now)
{
    if (!w->purge || !ks_purge_due(w->purge, now))
        return;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(8);
    for (int32_t p = 0; p < w->partitions; p++)
        for (size_t s = 0; w->tasks[p] && s < w->p->source_count; s++)
            if (w->p->sources[s].internal && w->committed[slot(w, p, s)] > 0)
                rd_kafka_topic_partition_list_add(l, w->p->sources[s].topic, p)->offset =
                    w->committed[slot(w, p, s)];
    ks_purge_send(w->purge, l, now);
    rd_kafka_topic_partition_list_destroy(l);
}

/* Copy this worker's counters into the engine's metrics (about once a
 * second: the registry's lock stays off the per-record path). */
static void publish_metrics(ks_worker *w)
{
    ks_metrics *m = w->eng->metrics;
    char l[256];
    snprintf(l, sizeof l, "worker=\"%d\"", w->id);
    ks_metrics_set(m, "kstreams_commits_total", l, (double)w->commits);
    ks_metrics_set(m, "kstreams_aborts_total", l, (double)w->aborts);
    ks_metrics_set(m, "kstreams_commit_seconds_sum", l, w->commit_seconds);
    ks_metrics_set(m, "kstreams_commit_seconds_count", l, (double)w->commits);
    ks_metrics_set(m, "kstreams_process_seconds_sum", l, w->process_seconds);
    ks_metrics_set(m, "kstreams_process_seconds_count", l, (double)w->processed);
    ks_metrics_set(m, "kstreams_poison_records_total", l, (double)w->poisons);
    int tasks = 0;
    for (int32_t p = 0; p < w->partitions; p++) {
        ks_task *task = w->tasks[p];
        if (!task)
            continue;
        tasks++;
        publish_task_counts(w, p);
        for (size_t s = 0; s < w->p->source_count; s++) {
            int64_t lo, hi, at = w->pos[slot(w, p, s)];
            if (at < 0)
                at = w->committed[slot(w, p, s)];
            if (rd_kafka_get_watermark_offsets(w->consumer, w->p->sources[s].topic, p, &lo,
                                               &hi) != 0 || hi < 0)
                continue;
            if (at < 0)
                at = group_position(w, p, s, lo);
            if (at < 0)
                continue;
            snprintf(l, sizeof l, "topic=\"%s\",partition=\"%d\"", w->p->sources[s].topic,
                     (int)p);
            int64_t lag = hi > at ? hi - at : 0;
            ks_metrics_set(m, "kstreams_consumer_lag", l, (double)lag);
            watch_stall(w, p, s, lag, l);
        }
    }
    snprintf(l, sizeof l, "worker=\"%d\"", w->id);
    ks_metrics_set(m, "kstreams_tasks", l, tasks);
}

static void *worker_main(void *arg)
{
    ks_worker *w = arg;
    rd_kafka_topic_partition_list_t *subs = rd_kafka_topic_partition_list_new(4);
    for (size_t s = 0; s < w->p->source_count; s++)
        rd_kafka_topic_partition_list_add(subs, w->p->sources[s].topic, RD_KAFKA_PARTITION_UA);
    rd_kafka_resp_err_t e = rd_kafka_subscribe(w->consumer, subs);
    rd_kafka_topic_partition_list_destroy(subs);
    if (e) {
        fail(w, "subscribe: %s", rd_kafka_err2str(e));
        return NULL;
    }
    int64_t last_punctuate = 0;
    unsigned unpolled = 0, since_main_poll = 0;
    int idle = 0;
    while (!ks_engine_stopping(w->eng)) {
        /* the consumer's own queue: rebalances and errors, and records only
         * of a partition without a queue of its own. Served when the
         * partition queues were empty (then waiting briefly) and once per
         * FAIR_BURST records, not per record. */
        rd_kafka_message_t *m = NULL;
        if (idle || (++since_main_poll % FAIR_BURST) == 0)
            m = rd_kafka_consumer_poll(w->consumer, idle ? 10 : 0);
        if (!m)
            m = ks_fair_poll_next(w->fair);
        int got = m != NULL;
        idle = !got;
        if (m) {
            if (!m->err)
                process_message(w, m);
            else if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                ks_warn(w->where, "consumer: %s", rd_kafka_message_errstr(m));
            rd_kafka_message_destroy(m);
        }
        /* delivery reports: every 64 records or when idle (a poll per record
         * was ~5% of the worker's instructions, bench/ callgrind); the
         * commit's flush serves the rest */
        if (!got || (++unpolled & 63) == 0)
            rd_kafka_poll(w->producer, 0);
        int64_t now = ks_mono_ms();
        if (now - last_punctuate >= 50) {
            last_punctuate = now;
            punctuate_all(w);
        }
        if (w->in_batch && (now - w->batch_started_ms >= w->p->commit_interval_ms ||
                            w->batch_records >= w->max_batch))
            commit_batch(w);
        if (now - w->last_publish_ms >= 1000) {
            w->last_publish_ms = now;
            publish_metrics(w);
        }
        purge_repartitions(w, now);
        /* hot deploy: builds change only here, between batches */
        if (!w->in_batch) {
            ks_reload_at_boundary(w->eng->reload, w->id, w->tasks, w->partitions);
            run_pending_migrations(w);
        }
    }
    /* clean stop: commit what was processed (a failed engine aborts) */
    if (w->eng->exit_code == 0)
        commit_batch(w);
    else
        abort_batch(w, "engine stopping after a failure");
    rd_kafka_consumer_close(w->consumer);
    ks_fair_poll_free(w->fair); /* its queues before the consumer goes */
    w->fair = NULL;
    for (int32_t p = 0; p < w->partitions; p++)
        close_task(w, p);
    ks_info(w->where, "stopped after %llu commits, %llu aborts",
            (unsigned long long)w->commits, (unsigned long long)w->aborts);
    return NULL;
}

static void free_worker(ks_worker *w)
{
    if (!w)
        return;
    for (int32_t p = 0; w->tasks && p < w->partitions; p++)
        ks_task_destroy(w->tasks[p]);
    ks_fair_poll_free(w->fair);
    ks_purge_free(w->purge); /* its queue before the probe goes */
    if (w->consumer)
        rd_kafka_destroy(w->consumer);
    if (w->restorer)
        rd_kafka_destroy(w->restorer);
    if (w->probe)
        rd_kafka_destroy(w->probe);
    if (w->producer) {
        rd_kafka_flush(w->producer, 10000);
        rd_kafka_destroy(w->producer);
    }
    free(w->tasks);
    free(w->epoch);
    free(w->batch_epoch);
    free(w->pos);
    free(w->committed);
    free(w->published_in);
    free(w->published_out);
    free(w->stalls);
    free(w->group_pos);
    free(w->source_topics);
    for (size_t s = 0; w->changelog_topics && s < w->p->store_count; s++)
        free(w->changelog_topics[s]);
    free(w->changelog_topics);
    free(w);
}

int ks_worker_start(ks_engine *eng, int id, ks_worker **out, char *err, size_t errlen)
{
    ks_worker *w = calloc(1, sizeof *w);
    if (!w) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    w->eng = eng;
    w->topo = eng->topo;
    w->p = eng->topo->pipeline;
    w->id = id;
    w->eos = w->p->guarantee == KS_GUARANTEE_EXACTLY_ONCE;
    w->partitions = eng->topo->partitions;
    w->max_batch = 1000;
    snprintf(w->where, sizeof w->where, "worker-%d", id);
    snprintf(w->txn_id, sizeof w->txn_id, "%s-%s-%d", w->p->application, eng->instance, id);
    size_t slots = (size_t)w->partitions * (w->p->source_count ? w->p->source_count : 1);
    w->tasks = calloc((size_t)w->partitions, sizeof *w->tasks);
    w->epoch = calloc((size_t)w->partitions, sizeof *w->epoch);
    w->batch_epoch = calloc((size_t)w->partitions, sizeof *w->batch_epoch);
    w->pos = malloc(slots * sizeof *w->pos);
    w->committed = malloc(slots * sizeof *w->committed);
    w->published_in = calloc((size_t)w->partitions, sizeof *w->published_in);
    w->published_out = calloc((size_t)w->partitions, sizeof *w->published_out);
    if (!w->tasks || !w->epoch || !w->batch_epoch || !w->pos || !w->committed ||
        !w->published_in || !w->published_out) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < slots; i++)
        w->pos[i] = w->committed[i] = -1;
    w->changelog_topics = calloc(w->p->store_count + 1, sizeof *w->changelog_topics);
    for (size_t s = 0; w->changelog_topics && s < w->p->store_count; s++) {
        char topic[512];
        ks_changelog_topic(w->topo, w->p->stores[s].name, topic, sizeof topic);
        for (size_t t = 0; t < w->p->source_count; t++)
            if (w->p->sources[t].table && w->p->sources[t].table_store == (int)s)
                snprintf(topic, sizeof topic, "%s", w->p->sources[t].topic);
        if (!(w->changelog_topics[s] = strdup(topic)))
            break;
    }
    if (!w->changelog_topics ||
        (w->p->store_count && !w->changelog_topics[w->p->store_count - 1])) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if (!(w->producer = new_producer(w, err, errlen)) ||
        !(w->restorer = new_restorer(w, "read_committed", err, errlen)) ||
        !(w->probe = new_restorer(w, "read_uncommitted", err, errlen)) ||
        !(w->consumer = new_consumer(w, err, errlen)))
        goto fail;
    for (size_t s = 0; s < w->p->source_count; s++)
        if (w->p->sources[s].internal && !w->purge &&
            !(w->purge = ks_purge_new(w->probe, 3000, w->where))) {
            snprintf(err, errlen, "out of memory");
            goto fail;
        }
    w->source_topics = calloc(w->p->source_count + 1, sizeof *w->source_topics);
    w->stalls = calloc(slots, sizeof *w->stalls);
    w->group_pos = calloc(slots, sizeof *w->group_pos);
    for (size_t s = 0; w->source_topics && s < w->p->source_count; s++)
        w->source_topics[s] = w->p->sources[s].topic;
    if (!w->source_topics || !w->stalls || !w->group_pos ||
        !(w->fair = ks_fair_poll_new(w->consumer, w->source_topics, w->p->source_count,
                                     w->partitions, FAIR_BURST))) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
        snprintf(err, errlen, "cannot start worker thread: %s", strerror(errno));
        goto fail;
    }
    *out = w;
    return 0;
fail:
    free_worker(w);
    return -1;
}

void ks_worker_join(ks_worker *w)
{
    if (!w)
        return;
    pthread_join(w->thread, NULL);
    free_worker(w);
}
