/*
 * committer.c - open, commit and abort the batches of one worker, under
 * either guarantee (committer.h has the sequence).
 */
#include "runtime/committer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/fault.h"
#include "base/log.h"
#include "runtime/reload.h"
#include "runtime/task_cache.h"

int ks_committer_init(ks_committer *c, ks_engine *eng, const char *where, ks_assignment *a,
                      ks_collector *out, rd_kafka_t *consumer)
{
    c->eng = eng;
    c->where = where;
    c->eos = a->p->guarantee == KS_GUARANTEE_EXACTLY_ONCE;
    c->a = a;
    c->out = out;
    c->consumer = consumer;
    c->max_batch = 1000;
    c->batch_epoch = calloc((size_t)a->partitions + 1, sizeof *c->batch_epoch);
    return c->batch_epoch ? 0 : KS_ERR_NOMEM;
}

void ks_committer_free(ks_committer *c)
{
    free(c->batch_epoch);
    c->batch_epoch = NULL;
}

/* Offsets to commit: every assigned partition with a known position, so
 * that a batch written only by timers still carries offsets for the
 * broker's generation check (KIP-447). */
static rd_kafka_topic_partition_list_t *batch_offsets(const ks_assignment *a)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(8);
    for (int32_t p = 0; p < a->partitions; p++) {
        if (!a->tasks[p])
            continue;
        for (size_t s = 0; s < a->p->source_count; s++) {
            int64_t off = a->pos[ks_slot(a, p, s)];
            if (off < 0)
                off = a->committed[ks_slot(a, p, s)];
            if (off >= 0)
                rd_kafka_topic_partition_list_add(l, a->p->sources[s].topic, p)->offset = off;
        }
    }
    return l;
}

int ks_committer_begin(ks_committer *c)
{
    if (c->in_batch)
        return 0;
    if (c->eos) {
        rd_kafka_error_t *e = rd_kafka_begin_transaction(c->out->producer);
        if (e) {
            ks_engine_fail(c->eng, c->where, "begin_transaction: %s", rd_kafka_error_string(e));
            rd_kafka_error_destroy(e);
            return KS_ERR_IO;
        }
    }
    memcpy(c->batch_epoch, c->a->epoch, (size_t)c->a->partitions * sizeof *c->a->epoch);
    c->in_batch = 1;
    c->batch_started_ms = ks_mono_ms();
    c->batch_records = 0;
    ks_collector_clear_delivery_error(c->out);
    return 0;
}

/* Seek every assigned partition back to its last committed offset and
 * forget the batch's positions. */
static void rewind_to_committed(ks_committer *c)
{
    ks_assignment *a = c->a;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(8);
    for (int32_t p = 0; p < a->partitions; p++) {
        if (!a->tasks[p])
            continue;
        for (size_t s = 0; s < a->p->source_count; s++) {
            int64_t off = a->committed[ks_slot(a, p, s)];
            a->pos[ks_slot(a, p, s)] = -1;
            if (off >= 0)
                rd_kafka_topic_partition_list_add(l, a->p->sources[s].topic, p)->offset = off;
        }
    }
    if (l->cnt) {
        rd_kafka_error_t *e = rd_kafka_seek_partitions(c->consumer, l, 10000);
        if (e) {
            ks_warn(c->where, "seek back to committed offsets: %s", rd_kafka_error_string(e));
            rd_kafka_error_destroy(e);
        }
    }
    rd_kafka_topic_partition_list_destroy(l);
}

static void abort_stores(ks_committer *c)
{
    for (int32_t p = 0; p < c->a->partitions; p++)
        if (c->a->tasks[p])
            ks_task_abort_stores(c->a->tasks[p]);
}

/* A new producer for one that hit a fatal error. 0, or KS_ERR_IO after
 * stopping the engine. */
static int rebuild_producer(ks_committer *c)
{
    char err[1024];
    int rc = ks_collector_rebuild(c->out, err, sizeof err);
    if (rc != 0)
        ks_engine_fail(c->eng, c->where, "%s", err);
    return rc;
}

void ks_committer_abort(ks_committer *c, const char *why)
{
    if (!c->in_batch)
        return;
    ks_warn(c->where, "aborting batch of %zu records: %s", c->batch_records, why);
    if (c->eos) {
        rd_kafka_error_t *e = rd_kafka_abort_transaction(c->out->producer, 60000);
        if (e) {
            int fatal = rd_kafka_error_is_fatal(e);
            ks_warn(c->where, "abort_transaction: %s", rd_kafka_error_string(e));
            rd_kafka_error_destroy(e);
            if (fatal || rd_kafka_fatal_error(c->out->producer, NULL, 0))
                rebuild_producer(c);
        }
    } else {
        rd_kafka_flush(c->out->producer, 30000);
    }
    abort_stores(c);
    rewind_to_committed(c);
    c->in_batch = 0;
    c->aborts++;
    /* the same failure again and again is not transient; a failure at a
     * later record means the replays make progress */
    if (strcmp(why, c->last_abort) != 0) {
        snprintf(c->last_abort, sizeof c->last_abort, "%s", why);
        c->retries = 0;
    }
    if (++c->retries > 10)
        ks_engine_fail(c->eng, c->where,
                       "10 batches in a row aborted for the same reason (%s); stopping", why);
}

static void batch_committed(ks_committer *c)
{
    ks_assignment *a = c->a;
    for (int32_t p = 0; p < a->partitions; p++) {
        if (!a->tasks[p])
            continue;
        for (size_t s = 0; s < a->p->source_count; s++)
            if (a->pos[ks_slot(a, p, s)] >= 0)
                a->committed[ks_slot(a, p, s)] = a->pos[ks_slot(a, p, s)];
    }
    c->in_batch = 0;
    c->retries = 0;
    c->commits++;
}

/* Handle an error of a transactional call: 0 = retry the call, else
 * KS_ERR_IO: the batch was aborted. */
static int txn_error(ks_committer *c, const char *call, rd_kafka_error_t *e)
{
    char msg[512];
    snprintf(msg, sizeof msg, "%s: %s", call, rd_kafka_error_string(e));
    int retriable = rd_kafka_error_is_retriable(e);
    int abortable = rd_kafka_error_txn_requires_abort(e);
    int fatal = rd_kafka_error_is_fatal(e) || (!retriable && !abortable);
    rd_kafka_error_destroy(e);
    if (retriable && !fatal && !abortable) {
        ks_warn(c->where, "%s (retrying)", msg);
        return 0;
    }
    if (fatal) {
        ks_warn(c->where, "%s: fatal, this producer is done", msg);
        abort_stores(c);
        c->in_batch = 0;
        c->aborts++;
        if (rebuild_producer(c) == 0)
            rewind_to_committed(c);
        return KS_ERR_IO;
    }
    ks_committer_abort(c, msg);
    return KS_ERR_IO;
}

/* Commit every task's LMDB batch. 0, or the store's ks_err after stopping
 * the engine. */
static int commit_stores(ks_committer *c)
{
    for (int32_t p = 0; p < c->a->partitions; p++) {
        ks_task *task = c->a->tasks[p];
        if (!task)
            continue;
        int versions = ks_task_versions_in_batch(task);
        int rc = ks_task_commit_stores(task);
        if (rc == 0 && versions) /* kstreams status shows the committed ones */
            ks_reload_note_versions(c->eng->reload, task);
        if (rc != 0) {
            ks_engine_fail(c->eng, c->where, "task %d: committing its stores failed (%d): %s%s",
                           (int)p, rc, ks_task_store_message(task),
                           c->eos ? " (the Kafka transaction committed: the restart restores "
                                    "the batch from the changelog)"
                                  : "");
            return rc;
        }
    }
    return 0;
}

/* Before anything of the commit: the record caches pass on what they owe
 * (changelog records, outputs), into the batch's transactions. 0, or a
 * negative ks_err after aborting the batch (a processor asked to retry)
 * or also stopping the engine (a full map, a processor's KS_FATAL, a sink
 * that refused a record: replaying cannot mend those). */
static int flush_caches(ks_committer *c)
{
    for (int32_t p = 0; p < c->a->partitions; p++) {
        ks_task *task = c->a->tasks[p];
        if (!task)
            continue;
        ks_verdict v = ks_task_cache_count(task) ? ks_task_flush_caches(task) : KS_OK;
        if (v == KS_OK) {
            ks_task_cache_end_batch(task);
            continue;
        }
        char msg[700];
        const char *why = NULL;
        int rc = ks_task_batch_error(task, &why);
        if (rc == KS_ERR_STORE_FULL) {
            snprintf(msg, sizeof msg, "task %d: %s", (int)p, why ? why : "store map full");
        } else if (task->sink_err == KS_ERR_INVALID) {
            rc = KS_ERR_INVALID;
            snprintf(msg, sizeof msg,
                     "task %d: a sink refused a record of a record cache (see the log above)",
                     (int)p);
        } else if (v == KS_RETRY) {
            snprintf(msg, sizeof msg,
                     "task %d: a processor asked to retry while the record caches were "
                     "flushed", (int)p);
            ks_committer_abort(c, msg);
            return KS_ERR_IO;
        } else {
            rc = KS_ERR_STATE;
            snprintf(msg, sizeof msg,
                     "task %d: a processor failed while the record caches were flushed (see "
                     "its log above)", (int)p);
        }
        ks_committer_abort(c, msg);
        ks_engine_fail(c->eng, c->where, "%s", msg);
        return rc;
    }
    return 0;
}

/* Before the Kafka commit: checkpoints written, and room left for LMDB's
 * own commit (ks_store_prepare_commit), so that a full map stops the
 * engine while the batch can still be aborted. 0, or the store's ks_err
 * after aborting the batch and stopping the engine. */
static int prepare_stores(ks_committer *c)
{
    for (int32_t p = 0; p < c->a->partitions; p++) {
        ks_task *task = c->a->tasks[p];
        int rc = task ? ks_task_prepare_stores(task) : 0;
        if (rc == 0)
            continue;
        char msg[700];
        snprintf(msg, sizeof msg, "task %d: %s", (int)p, ks_task_store_message(task));
        ks_committer_abort(c, msg);
        ks_engine_fail(c->eng, c->where, "%s", msg);
        return rc;
    }
    return 0;
}

/* The crash point between the Kafka and the LMDB commit of a batch that
 * holds a migration (its changelog has the migrated data and the version
 * record; the stores do not yet). */
static void migration_committed_to_kafka(ks_committer *c)
{
    for (int32_t p = 0; p < c->a->partitions; p++)
        if (c->a->tasks[p] && ks_task_migrated_in_batch(c->a->tasks[p])) {
            ks_fault_point(KS_FAULT_MIGRATE_KAFKA_COMMITTED);
            return;
        }
}

/* Steps 3 and 4 of the sequence: the offsets into the transaction, then
 * its commit. 0, or KS_ERR_IO: the batch was aborted. */
static int commit_transaction(ks_committer *c)
{
    rd_kafka_topic_partition_list_t *offs = batch_offsets(c->a);
    rd_kafka_error_t *e = NULL;
    ks_fault_point(KS_FAULT_BEFORE_OFFSETS);
    if (offs->cnt) {
        rd_kafka_consumer_group_metadata_t *md = rd_kafka_consumer_group_metadata(c->consumer);
        do {
            e = rd_kafka_send_offsets_to_transaction(c->out->producer, offs, md, 30000);
        } while (e && txn_error(c, "send_offsets_to_transaction", e) == 0);
        rd_kafka_consumer_group_metadata_destroy(md);
    }
    rd_kafka_topic_partition_list_destroy(offs);
    if (e)
        return KS_ERR_IO;
    /* a timed-out commit must be retried, never aborted: librdkafka 2.0.2
     * refuses the abort with _CONFLICT after commit's _TIMED_OUT */
    ks_fault_point(KS_FAULT_BEFORE_COMMIT);
    do {
        e = rd_kafka_commit_transaction(c->out->producer, 60000);
    } while (e && txn_error(c, "commit_transaction", e) == 0);
    return e ? KS_ERR_IO : 0;
}

static int commit_eos(ks_committer *c)
{
    ks_fault_point(KS_FAULT_BEFORE_FLUSH);
    rd_kafka_flush(c->out->producer, 60000);
    for (int32_t p = 0; p < c->a->partitions; p++)
        if (c->a->epoch[p] != c->batch_epoch[p]) {
            ks_committer_abort(c, "a task changed owner during the batch");
            return KS_ERR_STATE;
        }
    int rc = prepare_stores(c);
    if (rc == 0)
        rc = commit_transaction(c);
    if (rc != 0)
        return rc;
    ks_fault_point(KS_FAULT_AFTER_COMMIT);
    migration_committed_to_kafka(c);
    if ((rc = commit_stores(c)) != 0)
        return rc;
    ks_fault_point(KS_FAULT_AFTER_STORES);
    batch_committed(c);
    return 0;
}

static int commit_alo(ks_committer *c)
{
    rd_kafka_t *producer = c->out->producer;
    while (rd_kafka_outq_len(producer) > 0 && !ks_engine_stopping(c->eng))
        rd_kafka_flush(producer, 1000);
    rd_kafka_flush(producer, 30000);
    const char *failed = ks_collector_delivery_error(c->out);
    if (failed) {
        char msg[400];
        snprintf(msg, sizeof msg, "delivery failed: %s", failed);
        ks_committer_abort(c, msg);
        return KS_ERR_IO;
    }
    int rc = commit_stores(c);
    if (rc != 0)
        return rc;
    rd_kafka_topic_partition_list_t *offs = batch_offsets(c->a);
    rd_kafka_resp_err_t e = offs->cnt ? rd_kafka_commit(c->consumer, offs, 0) : 0;
    rd_kafka_topic_partition_list_destroy(offs);
    if (e && e != RD_KAFKA_RESP_ERR__NO_OFFSET) {
        ks_warn(c->where, "offset commit failed: %s (records will be processed again)",
                rd_kafka_err2str(e));
        c->in_batch = 0;
        rewind_to_committed(c);
        return KS_ERR_IO;
    }
    batch_committed(c);
    return 0;
}

/* The batch limit follows the cost of processing, never the latency of
 * the commit: a slow or failing broker makes commits slow, and smaller
 * batches would only add commits (seen under broker kills: 11-16 records
 * per transaction, 20-30 records/s per worker, when commit time counted).
 * Only a batch whose processing outlasted four commit intervals (or a
 * third of transaction.timeout.ms, which bounds a transaction) halves it. */
static void adapt_batch_limit(ks_committer *c, int64_t processing_ms)
{
    int64_t interval = c->a->p->commit_interval_ms;
    int64_t slow = 4 * interval;
    int64_t txn_timeout = c->out->txn_timeout_ms;
    if (txn_timeout > 0 && slow > txn_timeout / 3)
        slow = txn_timeout / 3;
    if (processing_ms > slow && c->max_batch > 16)
        c->max_batch /= 2;
    else if (processing_ms < 2 * interval && c->max_batch < 100000)
        c->max_batch += c->max_batch / 4 + 1;
}

int ks_committer_commit(ks_committer *c)
{
    if (!c->in_batch)
        return 0;
    int64_t started = ks_mono_ms();
    int64_t processing = started - c->batch_started_ms;
    size_t records = c->batch_records;
    int rc = flush_caches(c);
    if (rc == 0)
        rc = c->eos ? commit_eos(c) : commit_alo(c);
    if (rc == 0 && records > 0)
        ks_reload_note_commit(c->eng->reload); /* the running builds are good ones */
    c->commit_seconds += (double)(ks_mono_ms() - started) / 1000.0;
    adapt_batch_limit(c, processing);
    ks_debug(c->where, "commit of %zu records after %lld ms of processing: %s in %lld ms",
             records, (long long)processing, rc == 0 ? "ok" : "failed",
             (long long)(ks_mono_ms() - started));
    return rc;
}
