/*
 * restorer.c - replay changelogs into a task's stores (restorer.h).
 */
#include "runtime/restorer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/fault.h"
#include "base/log.h"
#include "http/metrics.h"
#include "kafka/kafka.h"
#include "runtime/query_tasks.h"
#include "runtime/restore_ends.h"
#include "runtime/table.h"

/* Messages taken from the consumer's queue in one call. */
#define POLL_BATCH 1024
/* How often the positions of the partitions still replaying are read
 * (a partition whose last records are transaction markers ends there
 * without a message), and progress is logged. */
#define POSITION_MS 100
#define PROGRESS_MS 2000
/* A store's folded batch commits past this size. */
#define FOLD_BYTES (16u << 20)

/* One restore pass over the new tasks of an assignment. */
typedef struct pass {
    ks_restorer *r;
    ks_task *const *tasks; /* borrowed */
    size_t ntasks;
    uint64_t *pending;     /* by task: records written since its last commit */
    ks_replay *rp;         /* the replays */
    size_t n;
    size_t active;         /* replays assigned and not at their end */
    size_t last;           /* the replay of the last message (dispatch cache) */
    int64_t started_ms, progress_ms, positions_ms, report_ms;
} pass;

/* The restorer's readers: read_committed for the replay, read_uncommitted
 * for the probe of the end offsets. */
static rd_kafka_t *new_client(const ks_pipeline *p, const char *isolation, char *err,
                              size_t errlen)
{
    /* Restore reads to the end of a partition: with the default 500 ms
     * fetch.wait.max.ms the broker holds the last (empty) fetch 500 ms, and
     * the offset queries behind it on the same connection wait too: ~1 s per
     * restored partition whatever its size. And librdkafka 2.0.2 stops
     * fetching once queued.min.messages are queued and looks again only
     * about once a second, while the replay drains 100 000 records in less:
     * a bigger prefetch (still capped by queued.max.messages.kbytes) keeps
     * the replay fed (bench/, docs/performance.md). */
    static const char *const defaults[] = {"fetch.wait.max.ms", "10", "queued.min.messages",
                                           "1000000", NULL};
    return ks_kafka_assign_consumer(p, "restore", isolation, defaults, "restore", err, errlen);
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

/* ---- the replays -------------------------------------------------------- */

/* What a query of rp's task answers meanwhile (query_tasks.h): the
 * replay's records so far of about how many. */
static void query_progress(const pass *ps, const ks_replay *rp)
{
    ks_query_tasks_progress(ps->r->eng->qtasks, rp->partition, rp->name, rp->done,
                            rp->lso - rp->from);
}

static void labels(const ks_replay *rp, char *l, size_t len)
{
    snprintf(l, len, "store=\"%s\",partition=\"%d\"", rp->name, (int)rp->partition);
}

static void free_replays(ks_replay *rp, size_t n)
{
    for (size_t i = 0; rp && i < n; i++)
        ks_fold_free(rp[i].fold);
    free(rp);
}

/* One replay per changelogged store (and table) of each task, in *out
 * (malloc'ed, NULL when there is none). 0 or KS_ERR_NOMEM. */
static int collect(ks_task *const *tasks, size_t ntasks, ks_replay **out, size_t *n)
{
    size_t cap = 0;
    for (size_t t = 0; t < ntasks; t++)
        cap += tasks[t]->topo->pipeline->store_count;
    *out = NULL;
    *n = 0;
    if (cap == 0)
        return 0;
    ks_replay *rp = calloc(cap, sizeof *rp);
    if (!rp)
        return KS_ERR_NOMEM;
    for (size_t t = 0; t < ntasks; t++) {
        ks_task *task = tasks[t];
        const ks_pipeline *p = task->topo->pipeline;
        for (size_t s = 0; s < p->store_count; s++) {
            const ks_cfg_source *table = ks_table_of_store(p, (int)s);
            if (!p->stores[s].changelog && !table)
                continue;
            ks_replay *e = &rp[(*n)++];
            *e = (ks_replay){.task = task, .task_index = t, .store = (int)s,
                             .name = p->stores[s].name, .table = table != NULL,
                             .partition = task->partition, .hw = -1};
            /* a table nothing reads in `from:` catches up to the end of its
             * partition before the task's first record (the worker starts
             * its consumer there); one whose changes flow on stops at the
             * group's committed offset (restore_ends.c) */
            e->flows_on = table && task->topo->nodes[table - p->sources].child_count > 0;
            ks_store_changelog(task->topo, (int)s, e->topic, sizeof e->topic);
            e->checkpoint = ks_task_checkpoint(task, (int)s);
            e->from = e->checkpoint < 0 ? 0 : e->checkpoint;
            if (!table && !(e->fold = ks_fold_new())) {
                free_replays(rp, *n);
                *n = 0;
                return KS_ERR_NOMEM;
            }
        }
    }
    *out = rp;
    return 0;
}

/* The replay of message m's partition, or NULL. Messages come in runs of
 * one partition: the last replay is tried first, then the topic handle,
 * then the name (once per replay). */
static ks_replay *replay_of(pass *ps, const rd_kafka_message_t *m)
{
    ks_replay *last = &ps->rp[ps->last];
    if (last->rkt == m->rkt && last->partition == m->partition && m->rkt)
        return last;
    for (size_t i = 0; i < ps->n; i++)
        if (ps->rp[i].rkt == m->rkt && ps->rp[i].partition == m->partition && m->rkt) {
            ps->last = i;
            return &ps->rp[i];
        }
    const char *topic = m->rkt ? rd_kafka_topic_name(m->rkt) : NULL;
    for (size_t i = 0; topic && i < ps->n; i++)
        if (ps->rp[i].partition == m->partition && strcmp(ps->rp[i].topic, topic) == 0) {
            ps->rp[i].rkt = m->rkt;
            ps->last = i;
            return &ps->rp[i];
        }
    return NULL;
}

static int put_folded(void *arg, ks_bytes key, const ks_bytes *value, int64_t offset)
{
    const ks_replay *rp = arg;
    return ks_task_restore_put(rp->task, rp->store, key, value, offset);
}

/* Write the folded batches of task t's stores. 0, or the first error
 * (engine stopped; every fold is emptied anyway). */
static int write_folds(pass *ps, size_t t)
{
    int rc = 0;
    for (size_t i = 0; i < ps->n; i++) {
        ks_replay *rp = &ps->rp[i];
        if (rp->task_index != t || !rp->fold)
            continue;
        int frc = ks_fold_drain(rp->fold, put_folded, rp);
        if (frc != 0 && rc == 0) {
            rc = frc;
            ks_engine_fail(ps->r->eng, ps->r->where,
                           "restore of %s [%d]: store write failed (%d): %s", rp->topic,
                           (int)rp->partition, rc, ks_task_store_message(rp->task));
        }
    }
    return rc;
}

/* Commit task t's replayed records with their checkpoints, its stores'
 * folded batches written first. 0, or the store's ks_err (engine
 * stopped). */
static int commit_task(pass *ps, size_t t, const ks_replay *rp)
{
    ps->pending[t] = 0;
    int rc = write_folds(ps, t);
    if (rc != 0)
        return rc;
    rc = ks_task_commit_stores(ps->tasks[t]);
    if (rc != 0)
        ks_engine_fail(ps->r->eng, ps->r->where,
                       "restore of %s [%d]: committing the store failed (%d): %s", rp->topic,
                       (int)rp->partition, rc, ks_task_store_message(ps->tasks[t]));
    return rc;
}

/* Replay rp reached its end: take its partition off the consumer, commit
 * its task and report it. 0, or a negative ks_err (engine stopped). */
static int finish(pass *ps, ks_replay *rp)
{
    rp->active = 0;
    ps->active--;
    rp->ended_ms = ks_mono_ms();
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, rp->topic, rp->partition);
    rd_kafka_error_t *e = rd_kafka_incremental_unassign(ps->r->consumer, l);
    if (e) { /* its records are skipped as they arrive: only slower */
        ks_warn(ps->r->where, "restore of %s [%d]: %s", rp->topic, (int)rp->partition,
                rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
    }
    rd_kafka_topic_partition_list_destroy(l);
    int rc = commit_task(ps, rp->task_index, rp);
    if (rc != 0)
        return rc;
    query_progress(ps, rp);
    double secs = (double)(rp->ended_ms - ps->started_ms) / 1000.0;
    char l2[512];
    labels(rp, l2, sizeof l2);
    ks_metrics_add(ps->r->eng->metrics, "kstreams_restore_records_total", l2, (double)rp->done);
    ks_metrics_set(ps->r->eng->metrics, "kstreams_restore_remaining", l2, 0);
    ks_info(rp->task->where,
            "restored store %s partition %d: %llu records replayed from offset %lld "
            "in %.2f s",
            rp->name, (int)rp->partition, (unsigned long long)rp->done, (long long)rp->from,
            secs);
    return 0;
}

static void report_progress(pass *ps, int64_t now)
{
    double secs = (double)(now - ps->started_ms) / 1000.0;
    for (size_t i = 0; i < ps->n; i++) {
        const ks_replay *rp = &ps->rp[i];
        if (!rp->active)
            continue;
        int64_t total = rp->lso - rp->from;
        char l[512];
        labels(rp, l, sizeof l);
        ks_metrics_set(ps->r->eng->metrics, "kstreams_restore_remaining", l,
                       (double)(total > (int64_t)rp->done ? total - (int64_t)rp->done : 0));
        query_progress(ps, rp);
        ks_info(rp->task->where,
                "restoring store %s partition %d: %llu of ~%lld records (%.0f/s)", rp->name,
                (int)rp->partition, (unsigned long long)rp->done, (long long)total,
                secs > 0 ? (double)rp->done / secs : 0.0);
    }
}

/* ---- applying records ----------------------------------------------------- */

/* A message that carries an error: the end of a partition, or a transport
 * error (the broker restarting: found by the crash suite), retried for up
 * to two minutes without progress. 0, or a negative ks_err. */
static int on_error(pass *ps, ks_replay *rp, rd_kafka_message_t *m)
{
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF)
        return rp && rp->active ? finish(ps, rp) : 0;
    const char *topic = rp ? rp->topic : m->rkt ? rd_kafka_topic_name(m->rkt) : "?";
    if (ks_mono_ms() - ps->progress_ms < 120000) {
        ks_warn(ps->r->where, "restore of %s [%d]: %s (retrying)", topic, (int)m->partition,
                rd_kafka_message_errstr(m));
        return 0;
    }
    ks_engine_fail(ps->r->eng, ps->r->where, "restore of %s [%d]: %s", topic,
                   (int)m->partition, rd_kafka_message_errstr(m));
    return KS_ERR_IO;
}

/* Apply one message to its store. 0, or a negative ks_err (engine
 * stopped). */
static int apply(pass *ps, rd_kafka_message_t *m)
{
    ks_replay *rp = replay_of(ps, m);
    if (m->err)
        return on_error(ps, rp, m);
    if (!rp || !rp->active)
        return 0; /* a partition already done (queued before its unassign) */
    if (m->offset >= rp->lso) /* past a table's limit: the group's consumer applies the rest */
        return finish(ps, rp);
    ks_bytes key = {m->key, m->key_len};
    ks_bytes val = {m->payload, m->len};
    int rc = rp->table ? ks_table_restore_put(rp->task, rp->store, key, m->payload ? &val : NULL,
                                              rd_kafka_message_timestamp(m, NULL), m->offset)
                       : ks_fold_put(rp->fold, key, m->payload ? &val : NULL, m->offset);
    ks_fault_point(KS_FAULT_DURING_RESTORE);
    if (rc != 0) {
        ks_engine_fail(ps->r->eng, ps->r->where, "restore of %s [%d]: store write failed (%d): %s",
                       rp->topic, (int)rp->partition, rc, ks_task_store_message(rp->task));
        return rc;
    }
    rp->done++;
    if (rp->done % 1024 == 0)
        query_progress(ps, rp);
    if (m->offset + 1 >= rp->lso)
        return finish(ps, rp);
    if (++ps->pending[rp->task_index] >= KS_RESTORE_BATCH ||
        (rp->fold && ks_fold_bytes(rp->fold) >= FOLD_BYTES))
        return commit_task(ps, rp->task_index, rp);
    return 0;
}

/* Finish the replays whose consumer position reached their end (their
 * last offsets are transaction markers, which no message shows). 0, or a
 * negative ks_err. */
static int check_positions(pass *ps)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)ps->active);
    for (size_t i = 0; i < ps->n; i++)
        if (ps->rp[i].active)
            rd_kafka_topic_partition_list_add(l, ps->rp[i].topic, ps->rp[i].partition)->opaque =
                &ps->rp[i];
    int rc = 0;
    if (rd_kafka_position(ps->r->consumer, l) == RD_KAFKA_RESP_ERR_NO_ERROR)
        for (int i = 0; rc == 0 && i < l->cnt; i++) {
            ks_replay *rp = l->elems[i].opaque;
            if (!l->elems[i].err && l->elems[i].offset >= 0 && l->elems[i].offset >= rp->lso)
                rc = finish(ps, rp);
        }
    rd_kafka_topic_partition_list_destroy(l);
    return rc;
}

/* ---- the pass ------------------------------------------------------------- */

/* Assign every replay that has records to read; log the others. 0, or
 * KS_ERR_IO (engine stopped). */
static int assign_all(pass *ps)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new((int)ps->n);
    for (size_t i = 0; i < ps->n; i++) {
        ks_replay *rp = &ps->rp[i];
        if (rp->from >= rp->lso) {
            ks_info(rp->task->where, "store %s partition %d up to date at offset %lld (no replay)",
                    rp->name, (int)rp->partition, (long long)rp->from);
            continue;
        }
        rd_kafka_topic_partition_list_add(l, rp->topic, rp->partition)->offset =
            rp->checkpoint >= 0 || rp->start_known ? rp->from : RD_KAFKA_OFFSET_BEGINNING;
        rp->active = 1;
        ps->active++;
        query_progress(ps, rp);
    }
    ps->started_ms = ps->progress_ms = ps->positions_ms = ps->report_ms = ks_mono_ms();
    rd_kafka_resp_err_t e = ps->active ? rd_kafka_assign(ps->r->consumer, l) : 0;
    rd_kafka_topic_partition_list_destroy(l);
    if (e)
        ks_engine_fail(ps->r->eng, ps->r->where, "restore: cannot assign the changelogs: %s",
                       rd_kafka_err2str(e));
    return e ? KS_ERR_IO : 0;
}

/* Empty the store of every stale replay (restore_ends.h) and commit it
 * with the log start as its checkpoint, before anything is replayed: a
 * crash after it restarts from the log start, one before it finds the
 * same stale checkpoint. 0, or the store's ks_err (engine stopped). */
static int wipe_stale(pass *ps)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < ps->n; i++) {
        ks_replay *rp = &ps->rp[i];
        if (!rp->stale)
            continue;
        ks_offset_gone gone;
        ks_kafka_offset_gone(rp->checkpoint, rp->from, rp->hw, &gone);
        ks_warn(rp->task->where,
                "store %s partition %d: checkpoint %lld is %s %lld of %s (%s): store wiped, "
                "restoring from the log start",
                rp->name, (int)rp->partition, (long long)rp->checkpoint, gone.side,
                (long long)gone.bound, rp->topic, gone.why);
        rc = ks_task_restore_wipe(rp->task, rp->store, rp->from);
        if (rc != 0)
            ks_engine_fail(ps->r->eng, ps->r->where, "restore of %s [%d]: wiping the store failed "
                           "(%d): %s", rp->topic, (int)rp->partition, rc,
                           ks_task_store_message(rp->task));
        else
            rc = commit_task(ps, rp->task_index, rp);
    }
    return rc;
}

/* Apply the messages of one batch; the rest are destroyed after an
 * error. 0, or a negative ks_err. */
static int apply_batch(pass *ps, rd_kafka_message_t **msgs, ssize_t got)
{
    int rc = 0;
    for (ssize_t i = 0; i < got; i++) {
        if (rc == 0)
            rc = apply(ps, msgs[i]);
        rd_kafka_message_destroy(msgs[i]);
    }
    if (got > 0)
        ps->progress_ms = ks_mono_ms();
    return rc;
}

/* Replay until every assigned partition reached its end. 0, or a negative
 * ks_err (KS_ERR_STATE: the engine is stopping). */
static int replay_all(pass *ps)
{
    rd_kafka_queue_t *q = rd_kafka_queue_get_consumer(ps->r->consumer);
    rd_kafka_message_t **msgs = malloc(POLL_BATCH * sizeof *msgs);
    int rc = q && msgs ? 0 : KS_ERR_NOMEM;
    while (rc == 0 && ps->active > 0) {
        ssize_t got = rd_kafka_consume_batch_queue(q, 100, msgs, POLL_BATCH);
        rc = apply_batch(ps, msgs, got);
        int64_t now = ks_mono_ms();
        if (rc == 0 && ps->active > 0 && (got <= 0 || now - ps->positions_ms >= POSITION_MS)) {
            ps->positions_ms = now;
            rc = check_positions(ps);
        }
        if (now - ps->report_ms >= PROGRESS_MS) {
            ps->report_ms = now;
            report_progress(ps, now);
        }
        if (rc == 0 && ks_engine_stopping(ps->r->eng))
            rc = KS_ERR_STATE;
    }
    free(msgs);
    if (q)
        rd_kafka_queue_destroy(q);
    rd_kafka_assign(ps->r->consumer, NULL);
    return rc;
}

int ks_restorer_restore(ks_restorer *r, ks_task *const *tasks, size_t n, rd_kafka_t *group)
{
    pass ps = {.r = r, .tasks = tasks, .ntasks = n};
    int rc = collect(tasks, n, &ps.rp, &ps.n);
    if (rc == 0 && ps.n > 0 && !(ps.pending = calloc(n, sizeof *ps.pending)))
        rc = KS_ERR_NOMEM;
    if (rc == 0 && ps.n > 0)
        rc = ks_restore_ends(r, group, ps.rp, ps.n);
    if (rc == 0 && ps.n > 0)
        rc = wipe_stale(&ps);
    if (rc == 0 && ps.n > 0) {
        rc = assign_all(&ps);
        if (rc == 0)
            rc = replay_all(&ps);
    }
    if (rc == KS_ERR_NOMEM)
        ks_engine_fail(r->eng, r->where, "restore: out of memory");
    for (size_t t = 0; rc != 0 && t < n; t++)
        ks_task_abort_stores(tasks[t]);
    free_replays(ps.rp, ps.n);
    free(ps.pending);
    return rc;
}
