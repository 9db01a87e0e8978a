/*
 * worker.c - the poll / process loop of one worker thread (Kafka Streams'
 * StreamThread): poll, run each record through its task, punctuate,
 * commit when the batch is due, and open and close tasks on rebalances.
 * The parts it drives are listed in worker.h.
 *
 * Rebalances (eager `range` assignor: librdkafka 2.0.2's cooperative mode
 * can abort the process or re-deliver old offsets) run in the poll call on
 * this thread: a revoke commits the open batch first (aborts it when the
 * partitions were lost), so a batch never spans two assignments.
 */
#include "runtime/worker.h"

#include <errno.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/log.h"
#include "kafka/fair_poll.h"
#include "kafka/kafka.h"
#include "kafka/member_id.h"
#include "runtime/assignment.h"
#include "runtime/collector.h"
#include "runtime/committer.h"
#include "runtime/poison.h"
#include "runtime/query_server.h"
#include "runtime/query_tasks.h"
#include "runtime/reload.h"
#include "runtime/repartition_purge.h"
#include "runtime/restorer.h"
#include "runtime/serde.h"
#include "runtime/standby.h"
#include "runtime/task.h"
#include "runtime/worker_metrics.h"

#define KS_MAX_HEADERS 64
/* records taken from one partition before the next gets its turn: enough
 * to keep the per-record cost of switching queues out of the profile */
#define FAIR_BURST 64

struct ks_worker {
    ks_engine *eng;
    const ks_topology *topo;
    const ks_pipeline *p;
    int id;
    pthread_t thread;
    char where[48];
    rd_kafka_t *consumer;
    ks_fair_poll *fair;   /* the source partitions' own queues, in turn */
    ks_purge *purge;      /* NULL without repartition topics */
    const char **source_topics; /* by source index, borrowed from the pipeline */
    ks_assignment a;      /* tasks and positions */
    ks_collector out;     /* the producer */
    ks_restorer restore;  /* the changelog readers */
    ks_committer commit;  /* the open batch */
    ks_poison poison;     /* the poison policy, records set aside */
    ks_worker_metrics stats;
    ks_header headers[KS_MAX_HEADERS]; /* the current record's */
};

static size_t slot(const ks_worker *w, int32_t partition, size_t source)
{
    return ks_slot(&w->a, partition, source);
}

#define fail(w, ...) ks_engine_fail((w)->eng, (w)->where, __VA_ARGS__)

/* ---- clients ------------------------------------------------------------- */

static void on_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque);

/* `member_id`: the worker's group.instance.id (a static member: one that
 * restarts within session.timeout.ms gets its partitions back without a
 * rebalance of the group), or NULL for a dynamic member. */
static rd_kafka_t *new_consumer(ks_worker *w, const char *member_id, char *err, size_t errlen)
{
    const char *defaults[] = {"session.timeout.ms", "10000", "heartbeat.interval.ms", "1000",
                              "max.poll.interval.ms", "300000", "fetch.wait.max.ms", "100",
                              NULL, NULL, NULL};
    /* Run with librdkafka 2.4.0 or later (the build's headers may be
     * older): a full partition queue waits fetch.queue.backoff.ms (1 s by
     * default) before its next fetch, and waking the fetcher
     * (fair_poll.c) no longer shortens that; 10 ms took one partition
     * from about 101 000 to 146 000 counted records/s with 2.16
     * (docs/performance.md). 2.0.2 does not know the property. */
    if (rd_kafka_version() >= 0x02040000) {
        defaults[8] = "fetch.queue.backoff.ms";
        defaults[9] = "10";
    }
    const char *forced[] = {"group.instance.id",
                            member_id,
                            "group.id",
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
    /* a dynamic member starts the list past group.instance.id */
    rd_kafka_conf_t *conf = ks_kafka_conf(w->p, RD_KAFKA_CONSUMER, defaults,
                                          member_id ? forced : forced + 2, err, errlen);
    if (!conf)
        return NULL;
    /* standby placement groups the members by process, the query server
     * learns where each answers (kafka/member_id.h) */
    char client_id[600];
    ks_member_id_format(w->p->application, w->eng->instance, ks_query_address(w->p), client_id,
                        sizeof client_id);
    if ((w->p->standby_replicas > 0 || w->p->query_listen) &&
        ks_kafka_set(conf, "client.id", client_id, err, errlen) != 0) {
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    rd_kafka_conf_set_rebalance_cb(conf, on_rebalance);
    rd_kafka_conf_set_opaque(conf, w);
    rd_kafka_t *rk = ks_kafka_new(RD_KAFKA_CONSUMER, conf, "cannot create consumer", err, errlen);
    if (!rk)
        return NULL;
    rd_kafka_poll_set_consumer(rk);
    return rk;
}

/* ---- tasks and assignment -------------------------------------------------- */

/* Create task `partition` into *out (NULL when the worker has it
 * already). 0, or a negative ks_err after stopping the engine. */
static int create_task(ks_worker *w, int32_t partition, ks_task **out)
{
    *out = NULL;
    if (partition < 0 || partition >= w->a.partitions) {
        fail(w, "assigned partition %d, but the sources have %d partitions: a source "
                "topic gained partitions while the engine ran; restart the engine after "
                "repartitioning (with state: stop every process and run kstreams "
                "grow-partitions first, docs/operations.md)",
             (int)partition, (int)w->a.partitions);
        return KS_ERR_INVALID;
    }
    if (w->a.tasks[partition])
        return 0;
    ks_task_io io = ks_collector_task_io(&w->out, w->eng->metrics);
    io.global = w->eng->global;
    char err[1024];
    /* a standby of this task here closes its environment first */
    ks_standby_claim(w->eng->standby, partition);
    if (ks_task_create(w->topo, partition, &io, out, err, sizeof err) != 0) {
        ks_standby_release(w->eng->standby, partition);
        fail(w, "%s", err);
        return KS_ERR_IO;
    }
    ks_query_tasks_restoring(w->eng->qtasks, *out); /* queries: 503 until restored */
    return 0;
}

/* Check restored `task` and make it the worker's (it takes the task; on
 * error it destroys it). 0, or a negative ks_err after stopping the
 * engine. */
static int start_task(ks_worker *w, ks_task *task)
{
    int32_t partition = task->partition;
    char err[1024];
    /* the restored stores say which state format they are in: a pending
     * migration runs in the task's first batch, a newer one is refused */
    if (ks_task_check_versions(task, err, sizeof err) != 0) {
        ks_query_tasks_remove(w->eng->qtasks, partition);
        ks_task_destroy(task);
        ks_standby_release(w->eng->standby, partition);
        fail(w, "%s", err);
        return KS_ERR_INVALID; /* a state format this build cannot read */
    }
    w->a.tasks[partition] = task;
    ks_query_tasks_active(w->eng->qtasks, partition);
    ks_worker_metrics_task_opened(&w->stats, partition);
    ks_reload_task_opened(w->eng->reload, w->id, task); /* hot deploy in progress */
    ks_reload_note_versions(w->eng->reload, task);
    for (size_t s = 0; s < w->p->source_count; s++) {
        const ks_cfg_source *src = &w->p->sources[s];
        w->a.pos[slot(w, partition, s)] = -1;
        /* a table nothing reads in from: goes on where its restored store
         * ends, whatever the group committed (table_positions) */
        w->a.committed[slot(w, partition, s)] =
            src->table && w->topo->nodes[s].child_count == 0
                ? ks_task_checkpoint(task, src->table_store)
                : -1;
    }
    ks_info(w->where, "task %d started", (int)partition);
    return 0;
}

/* Create the tasks of the assigned partitions the worker does not have
 * yet, restore all their stores in one pass (restorer.h) and start them.
 * It runs in the rebalance callback, inside the consumer's poll, as each
 * task's restore did before. 0, or a negative ks_err after stopping the
 * engine (the tasks not started are destroyed). */
static int open_tasks(ks_worker *w, const rd_kafka_topic_partition_list_t *parts)
{
    ks_task **fresh = calloc((size_t)parts->cnt + 1, sizeof *fresh);
    if (!fresh) {
        fail(w, "out of memory opening tasks");
        return KS_ERR_NOMEM;
    }
    size_t n = 0;
    int rc = 0;
    for (int i = 0; rc == 0 && i < parts->cnt; i++) {
        int32_t partition = parts->elems[i].partition;
        int dup = 0; /* a partition of several sources: one task */
        for (size_t k = 0; k < n; k++)
            dup |= fresh[k]->partition == partition;
        ks_task *task = NULL;
        if (!dup)
            rc = create_task(w, partition, &task);
        if (task)
            fresh[n++] = task;
    }
    if (rc == 0 && n > 0)
        rc = ks_restorer_restore(&w->restore, fresh, n, w->consumer);
    size_t k = 0;
    for (; rc == 0 && k < n; k++)
        rc = start_task(w, fresh[k]);
    for (; k < n; k++) { /* after a failure; a failed start_task destroyed its own */
        ks_query_tasks_remove(w->eng->qtasks, fresh[k]->partition);
        ks_standby_release(w->eng->standby, fresh[k]->partition);
        ks_task_destroy(fresh[k]);
    }
    free(fresh);
    return rc;
}

static void close_task(ks_worker *w, int32_t partition)
{
    if (partition < 0 || partition >= w->a.partitions || !w->a.tasks[partition])
        return;
    ks_worker_metrics_task_counts(&w->stats, partition);
    ks_reload_forget_task(w->eng->reload, w->a.tasks[partition]->where);
    ks_query_tasks_remove(w->eng->qtasks, partition); /* waits for a query reading it */
    ks_task_destroy(w->a.tasks[partition]);
    w->a.tasks[partition] = NULL;
    ks_standby_release(w->eng->standby, partition); /* it may become a standby here */
    w->a.epoch[partition]++;
    ks_info(w->where, "task %d closed", (int)partition);
}

/* Commit the open batch. A committed batch dealt with every record set
 * aside for its refused outputs. */
static int commit_batch(ks_worker *w)
{
    uint64_t commits = w->commit.commits;
    int rc = ks_committer_commit(&w->commit);
    if (w->commit.commits != commits)
        ks_poison_forget(&w->poison);
    return rc;
}

/* ---- rebalance ------------------------------------------------------------- */

static int source_index(const ks_worker *w, const char *topic);

/* The restore brought each table's store up to the end of its partition:
 * the consumer starts there, not at the group's offset (which may be
 * behind under at-least-once, or ahead of a wiped store), so the store
 * never goes back in time and no update is applied twice. */
static void table_positions(ks_worker *w, rd_kafka_topic_partition_list_t *parts)
{
    for (int i = 0; i < parts->cnt; i++) {
        int s = source_index(w, parts->elems[i].topic);
        int32_t p = parts->elems[i].partition;
        if (s < 0 || !w->p->sources[s].table || p < 0 || p >= w->a.partitions ||
            !w->a.tasks[p])
            continue;
        int64_t at = w->a.committed[slot(w, p, (size_t)s)];
        if (at >= 0)
            parts->elems[i].offset = at;
    }
}

static void on_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque)
{
    ks_worker *w = opaque;
    ks_standby_rebalanced(w->eng->standby);
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        for (int i = 0; i < parts->cnt; i++) { /* standbys of these close together */
            int32_t q = parts->elems[i].partition;
            if (q >= 0 && q < w->a.partitions && !w->a.tasks[q])
                ks_standby_reserve(w->eng->standby, q);
        }
        open_tasks(w, parts);
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
        ks_committer_abort(&w->commit, "partitions lost");
    else if (w->commit.in_batch)
        commit_batch(w);
    for (int i = 0; i < parts->cnt; i++)
        close_task(w, parts->elems[i].partition);
    rd_kafka_assign(rk, NULL);
    ks_fair_poll_revoke(w->fair, parts);
    ks_info(w->where, "revoked %d partitions", parts->cnt);
}

/* ---- records ----------------------------------------------------------------- */

/* The sentence that says which output a sink refused (the collector's
 * refusal), into buf. */
static void describe_refusal(const ks_worker *w, char *buf, size_t len)
{
    const ks_refusal *r = &w->out.refusal;
    snprintf(buf, len, "its output for sink '%s' (topic %s) does not match the sink's serde: %s",
             r->sink ? r->sink->name : "?", r->sink ? r->sink->sink->topic : "?",
             r->why ? r->why : "?");
}

static int source_index(const ks_worker *w, const char *topic)
{
    for (size_t s = 0; s < w->p->source_count; s++)
        if (strcmp(w->p->sources[s].topic, topic) == 0)
            return (int)s;
    return -1;
}

/* The ks_record of message m (its headers in w->headers, valid until the
 * next message). */
static ks_record to_record(ks_worker *w, rd_kafka_message_t *m)
{
    ks_record rec = {.key = m->key,
                     .key_len = m->key_len,
                     .value = m->payload,
                     .value_len = m->len,
                     .timestamp = rd_kafka_message_timestamp(m, NULL),
                     .topic = rd_kafka_topic_name(m->rkt),
                     .partition = m->partition,
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
    return rec;
}

/* A sink refused an output of `rec`: its other effects are in the batch,
 * so abort it, and apply the poison policy to this record when it comes
 * again. */
static void refused_output(ks_worker *w, const ks_record *rec)
{
    char refusal[600], why[700];
    describe_refusal(w, refusal, sizeof refusal);
    snprintf(why, sizeof why, "%s/%d/%lld: %s", rec->topic, (int)rec->partition,
             (long long)rec->offset, refusal);
    int rc = ks_poison_set_aside(&w->poison, rec, refusal);
    ks_committer_abort(&w->commit, why);
    if (rc != 0)
        fail(w, "more than %d records in one batch with refused outputs; last %s",
             KS_MAX_BAD_OUTPUTS, why);
}

/* The store of `task` is full (its batch died of it): the message, copied
 * into buf (the abort ends the batch and its message), else NULL. A
 * replay cannot help; raising map_size can. */
static const char *store_full(const ks_task *task, char *buf, size_t len)
{
    const char *msg = NULL;
    if (ks_task_batch_error(task, &msg) != KS_ERR_STORE_FULL)
        return NULL;
    snprintf(buf, len, "%s", msg);
    return buf;
}

/* What the task's verdict `v` on record m means for the batch. 0 when the
 * record is done, else a negative ks_err (the batch was aborted). */
static int record_outcome(ks_worker *w, ks_task *task, const rd_kafka_message_t *m,
                          ks_verdict v)
{
    const char *topic = rd_kafka_topic_name(m->rkt);
    int part = (int)m->partition;
    char full[600];
    if (v != KS_OK && store_full(task, full, sizeof full)) {
        ks_committer_abort(&w->commit, "store map full");
        fail(w, "processing failed at %s/%d/%lld: %s", topic, part, (long long)m->offset, full);
        return KS_ERR_STORE_FULL;
    }
    switch (v) {
    case KS_OK:
        return 0;
    case KS_SKIP:
        return ks_poison_apply_reason(&w->poison, m, "a processor returned skip",
                                      task->skip_reason[0] ? task->skip_reason : NULL);
    case KS_RETRY: {
        char why[600];
        snprintf(why, sizeof why, "a processor asked to retry at %s/%d/%lld", topic, part,
                 (long long)m->offset);
        ks_committer_abort(&w->commit, why);
        return KS_ERR_IO;
    }
    case KS_FATAL:
        break;
    }
    ks_committer_abort(&w->commit, "a processor failed");
    fail(w, "processing failed at %s/%d/%lld (see the processor's log above)", topic, part,
         (long long)m->offset);
    return KS_ERR_STATE;
}

/* Run message m of source `src` through its task, in the open batch. 0
 * when the record is done, else a negative ks_err (the batch was
 * aborted, or the engine is stopping). */
static int run_record(ks_worker *w, ks_task *task, int src, rd_kafka_message_t *m)
{
    ks_record rec = to_record(w, m);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ks_collector_clear_refusal(&w->out);
    ks_verdict v = ks_task_process(task, &w->topo->nodes[src], &rec);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    w->stats.process_seconds +=
        (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    w->stats.processed++;
    if (task->sink_err == KS_ERR_INVALID) {
        refused_output(w, &rec);
        return KS_ERR_INVALID;
    }
    return record_outcome(w, task, m, v);
}

static void process_message(ks_worker *w, rd_kafka_message_t *m)
{
    int32_t part = m->partition;
    int src = source_index(w, rd_kafka_topic_name(m->rkt));
    if (src < 0 || part < 0 || part >= w->a.partitions || !w->a.tasks[part])
        return;
    int64_t *pos = &w->a.pos[slot(w, part, (size_t)src)];
    int64_t *committed = &w->a.committed[slot(w, part, (size_t)src)];
    /* guard against re-delivery (librdkafka 2.0.2 can re-deliver old
     * offsets after a resume): process each offset once per batch */
    if (*pos >= 0 && m->offset < *pos)
        return;
    if (*committed < 0)
        *committed = m->offset;
    if (ks_committer_begin(&w->commit) != 0)
        return;
    const ks_cfg_source *s = &w->p->sources[src];
    const char *why = NULL;
    char reason[160], detail[128];
    int rc;
    if (ks_poison_is_set_aside(&w->poison, m, &why))
        rc = ks_poison_apply(&w->poison, m, why);
    else if (ks_serde_check_why(s->key_serde, m->key, m->key_len, &why, detail,
                                sizeof detail) != 0) {
        /* ks.error keeps the serde's sentence; the part and the place go
         * into the reason */
        snprintf(reason, sizeof reason, "key: %s", detail);
        rc = ks_poison_apply_reason(&w->poison, m, why, reason);
    } else if (ks_serde_check_why(s->value_serde, m->payload, m->len, &why, detail,
                                  sizeof detail) != 0)
        rc = ks_poison_apply_reason(&w->poison, m, why, detail);
    else
        rc = run_record(w, w->a.tasks[part], src, m);
    if (rc != 0)
        return;
    *pos = m->offset + 1;
    w->commit.batch_records++;
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

/* Fire the due wall-clock punctuations of task p in the open batch. 0, or
 * a negative ks_err: the batch was aborted. */
static int punctuate_task(ks_worker *w, int32_t p, int64_t now)
{
    ks_task *task = w->a.tasks[p];
    ks_collector_clear_refusal(&w->out);
    ks_verdict v = ks_task_punctuate_wallclock(task, now);
    if (task->sink_err == KS_ERR_INVALID) {
        /* no input record to set aside: a processor bug to fix */
        char refusal[600];
        describe_refusal(w, refusal, sizeof refusal);
        ks_committer_abort(&w->commit, "a punctuation's output was refused");
        fail(w, "punctuation of task %d: %s", (int)p, refusal);
        return KS_ERR_INVALID;
    }
    if (v == KS_OK)
        return 0;
    char full[600];
    if (store_full(task, full, sizeof full)) {
        ks_committer_abort(&w->commit, "store map full");
        fail(w, "punctuation of task %d failed: %s", (int)p, full);
        return KS_ERR_STORE_FULL;
    }
    ks_committer_abort(&w->commit, "a punctuation failed");
    return KS_ERR_IO;
}

static void punctuate_all(ks_worker *w)
{
    int64_t now = ks_wall_ms();
    for (int32_t p = 0; p < w->a.partitions; p++) {
        ks_task *task = w->a.tasks[p];
        if (!task || !wallclock_due(task, now))
            continue;
        if (ks_committer_begin(&w->commit) != 0 || punctuate_task(w, p, now) != 0)
            return;
    }
}

/* Tasks that owe a migration (opened on stores of an older state version,
 * or swapped to a build of a newer one) or a first version record run it
 * at once in a batch of its own, not at their first record: an idle
 * partition's stores are converted too. At a boundary only. */
static void run_pending_migrations(ks_worker *w)
{
    for (int32_t p = 0; p < w->a.partitions; p++) {
        ks_task *task = w->a.tasks[p];
        if (!task || !ks_task_migration_pending(task))
            continue;
        if (ks_committer_begin(&w->commit) != 0)
            return;
        task->verdict = KS_OK;
        ks_verdict v = ks_task_run_migrations(task);
        if (v == KS_OK)
            continue;
        char full[600], why[700];
        if (store_full(task, full, sizeof full)) {
            ks_committer_abort(&w->commit, "store map full");
            fail(w, "migration of task %d failed: %s", (int)p, full);
            return;
        }
        snprintf(why, sizeof why, "the migration of task %d %s", (int)p,
                 v == KS_FATAL ? "failed" : "asked to retry");
        ks_committer_abort(&w->commit, why);
        if (v == KS_FATAL)
            fail(w, "%s (see the processor's log above)", why);
        return;
    }
}

/* Repartition records below the committed offsets are never read again:
 * have them deleted, every few seconds (repartition_purge.h). */
static void purge_repartitions(ks_worker *w, int64_t now)
{
    if (!w->purge || !ks_purge_due(w->purge, now))
        return;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(8);
    for (int32_t p = 0; p < w->a.partitions; p++)
        for (size_t s = 0; w->a.tasks[p] && s < w->p->source_count; s++)
            if (w->p->sources[s].internal && w->a.committed[slot(w, p, s)] > 0)
                rd_kafka_topic_partition_list_add(l, w->p->sources[s].topic, p)->offset =
                    w->a.committed[slot(w, p, s)];
    ks_purge_send(w->purge, l, now);
    rd_kafka_topic_partition_list_destroy(l);
}

/* One turn of the loop after a record (or none: idle): punctuations, the
 * commit when the batch is due, metrics, purges, and, between batches,
 * hot deploys and migrations. */
static void between_records(ks_worker *w, int64_t *last_punctuate)
{
    int64_t now = ks_mono_ms();
    if (now - *last_punctuate >= 50) {
        *last_punctuate = now;
        punctuate_all(w);
    }
    if (w->commit.in_batch && (now - w->commit.batch_started_ms >= w->p->commit_interval_ms ||
                               w->commit.batch_records >= w->commit.max_batch))
        commit_batch(w);
    ks_worker_metrics_publish(&w->stats, &w->commit, w->poison.records, now);
    purge_repartitions(w, now);
    /* hot deploy: builds change only here, between batches */
    if (!w->commit.in_batch) {
        ks_reload_at_boundary(w->eng->reload, w->id, w->a.tasks, w->a.partitions);
        run_pending_migrations(w);
    }
}

static int subscribe(ks_worker *w)
{
    rd_kafka_topic_partition_list_t *subs = rd_kafka_topic_partition_list_new(4);
    for (size_t s = 0; s < w->p->source_count; s++)
        rd_kafka_topic_partition_list_add(subs, w->p->sources[s].topic, RD_KAFKA_PARTITION_UA);
    rd_kafka_resp_err_t e = rd_kafka_subscribe(w->consumer, subs);
    rd_kafka_topic_partition_list_destroy(subs);
    if (e) {
        fail(w, "subscribe: %s", rd_kafka_err2str(e));
        return KS_ERR_IO;
    }
    return 0;
}

static void *worker_main(void *arg)
{
    ks_worker *w = arg;
    if (subscribe(w) != 0)
        return NULL;
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
            rd_kafka_poll(w->out.producer, 0);
        between_records(w, &last_punctuate);
    }
    /* clean stop: commit what was processed (a failed engine aborts) */
    if (w->eng->exit_code == 0)
        commit_batch(w);
    else
        ks_committer_abort(&w->commit, "engine stopping after a failure");
    rd_kafka_consumer_close(w->consumer);
    ks_fair_poll_free(w->fair); /* its queues before the consumer goes */
    w->fair = NULL;
    for (int32_t p = 0; p < w->a.partitions; p++)
        close_task(w, p);
    ks_info(w->where, "stopped after %llu commits, %llu aborts",
            (unsigned long long)w->commit.commits, (unsigned long long)w->commit.aborts);
    return NULL;
}

static void free_worker(ks_worker *w)
{
    if (!w)
        return;
    for (int32_t p = 0; w->a.tasks && p < w->a.partitions; p++) {
        if (w->a.tasks[p])
            ks_query_tasks_remove(w->eng->qtasks, p);
        ks_task_destroy(w->a.tasks[p]);
    }
    ks_fair_poll_free(w->fair);
    ks_purge_free(w->purge); /* its queue before the probe goes */
    if (w->consumer)
        rd_kafka_destroy(w->consumer);
    ks_restorer_free(&w->restore);
    ks_collector_free(&w->out);
    ks_committer_free(&w->commit);
    ks_worker_metrics_free(&w->stats);
    free(w->a.tasks);
    free(w->a.epoch);
    free(w->a.pos);
    free(w->a.committed);
    free(w->source_topics);
    free(w);
}

/* The arrays by partition and by slot. 0 or KS_ERR_NOMEM. */
static int alloc_tables(ks_worker *w)
{
    size_t parts = (size_t)w->a.partitions;
    size_t slots = parts * (w->p->source_count ? w->p->source_count : 1);
    w->a.tasks = calloc(parts, sizeof *w->a.tasks);
    w->a.epoch = calloc(parts, sizeof *w->a.epoch);
    w->a.pos = malloc(slots * sizeof *w->a.pos);
    w->a.committed = malloc(slots * sizeof *w->a.committed);
    w->source_topics = calloc(w->p->source_count + 1, sizeof *w->source_topics);
    if (!w->a.tasks || !w->a.epoch || !w->a.pos || !w->a.committed || !w->source_topics)
        return KS_ERR_NOMEM;
    for (size_t i = 0; i < slots; i++)
        w->a.pos[i] = w->a.committed[i] = -1;
    for (size_t s = 0; s < w->p->source_count; s++)
        w->source_topics[s] = w->p->sources[s].topic;
    return 0;
}

/* The clients and the parts that hold them. 0, or a negative ks_err with
 * err set. */
static int open_parts(ks_worker *w, char *err, size_t errlen)
{
    char txn_id[512];
    snprintf(txn_id, sizeof txn_id, "%s-%s-%d", w->p->application, w->eng->instance, w->id);
    int rc = ks_collector_init(&w->out, w->topo, w->where, txn_id, err, errlen);
    if (rc == 0)
        rc = ks_restorer_init(&w->restore, w->eng, w->where, err, errlen);
    if (rc != 0)
        return rc;
    /* the transactional id names this worker of this process; a static
     * member is named the same, stable across restarts */
    if (!(w->consumer = new_consumer(w, w->p->static_membership ? txn_id : NULL, err, errlen)))
        return KS_ERR_IO;
    for (size_t s = 0; s < w->p->source_count; s++)
        if (w->p->sources[s].internal && !w->purge &&
            !(w->purge = ks_purge_new(w->restore.probe, 3000, w->where)))
            rc = KS_ERR_NOMEM;
    if (rc == 0)
        rc = ks_committer_init(&w->commit, w->eng, w->where, &w->a, &w->out, w->consumer);
    if (rc == 0)
        rc = ks_worker_metrics_init(&w->stats, w->eng->metrics, w->where, w->id, &w->a,
                                    w->consumer);
    ks_poison_init(&w->poison, w->eng, w->where, &w->out, &w->commit);
    if (rc == 0 && !(w->fair = ks_fair_poll_new(w->consumer, w->source_topics,
                                                w->p->source_count, w->a.partitions,
                                                FAIR_BURST)))
        rc = KS_ERR_NOMEM;
    if (rc != 0)
        snprintf(err, errlen, "out of memory");
    return rc;
}

int ks_worker_start(ks_engine *eng, int id, ks_worker **out, char *err, size_t errlen)
{
    ks_worker *w = calloc(1, sizeof *w);
    if (!w) {
        snprintf(err, errlen, "out of memory");
        return KS_ERR_NOMEM;
    }
    w->eng = eng;
    w->topo = eng->topo;
    w->p = eng->topo->pipeline;
    w->id = id;
    w->a.p = w->p;
    w->a.partitions = eng->topo->partitions;
    snprintf(w->where, sizeof w->where, "worker-%d", id);
    int rc = alloc_tables(w);
    if (rc != 0)
        snprintf(err, errlen, "out of memory");
    else
        rc = open_parts(w, err, errlen);
    if (rc == 0 && pthread_create(&w->thread, NULL, worker_main, w) != 0) {
        snprintf(err, errlen, "cannot start worker thread: %s", strerror(errno));
        rc = KS_ERR_STATE;
    }
    if (rc != 0) {
        free_worker(w);
        return rc;
    }
    *out = w;
    return 0;
}

void ks_worker_join(ks_worker *w)
{
    if (!w)
        return;
    pthread_join(w->thread, NULL);
    free_worker(w);
}
