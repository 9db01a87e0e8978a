/*
 * standby.c - the standby thread (standby.h): describe the group, keep the
 * standby stores this process should hold open, tail their changelogs.
 */
#include "runtime/standby.h"

#include <errno.h>
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "http/metrics.h"
#include "kafka/group_members.h"
#include "kafka/member_id.h"
#include "kafka/kafka.h"
#include "runtime/table.h"
#include "runtime/task.h"

#define WHERE "standby"
#define DESCRIBE_EVERY_MS 2000
#define DESCRIBE_AFTER_REBALANCE_MS 300
#define POLL_MS 100
#define MAX_PER_POLL 5000 /* records applied in one LMDB transaction at most */
#define RETRY_MS 30000    /* a standby that failed waits this long to start again */

struct ks_standby {
    ks_engine *eng;
    const ks_topology *topo;
    const ks_pipeline *p;
    int32_t partitions;
    char self[300]; /* this process's client.id */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    /* under lock */
    unsigned char *active; /* by partition: a worker here owns (or opens) it */
    ks_task **held;        /* by partition: the open standby stores (or NULL) */
    int64_t *lag;          /* by partition x store: at the last report, -1 unknown */
    uint64_t rebalances;   /* ks_standby_rebalanced calls */
    int quit;
    /* the thread's own */
    rd_kafka_t *consumer;  /* assign-only, read_committed */
    rd_kafka_t *admin;
    rd_kafka_queue_t *adminq;
    int describing;
    uint64_t describe_rebalances; /* `rebalances` when the pending describe began */
    int64_t next_describe;
    unsigned char *desired; /* by partition: the last view places a standby here */
    int have_view;          /* desired is from a view taken after the last rebalance */
    char (*topics)[512];    /* by store: what its standby tails */
    unsigned char *kept;    /* by store: 1 when a standby keeps it warm */
    unsigned char *dirty;   /* by partition: records applied, not committed */
    int64_t *retry_at;      /* by partition: no new start before (after a failure) */
    unsigned char *unchecked; /* by partition: opened, checkpoints not yet compared
                               * with the changelogs' log starts */
    int assignment_stale;   /* the consumer's assignment no longer matches held */
    int64_t next_metrics;
    int64_t last_warn;
};

/* ---- set-up ------------------------------------------------------------- */

/* Which stores a standby keeps: changelogged stores, and tables whose
 * changes flow on to no node (restored to their end like a changelog). A
 * table read by nodes is restored only up to the group's committed offset
 * (its later records must reach the nodes through the task), so a copy
 * further ahead would be wrong: it is left to the restore. */
static void plan_stores(ks_standby *s)
{
    for (size_t i = 0; i < s->p->store_count; i++) {
        const ks_cfg_source *table = ks_table_of_store(s->p, (int)i);
        ks_store_changelog(s->topo, (int)i, s->topics[i], sizeof s->topics[i]);
        s->kept[i] = table ? s->topo->nodes[table - s->p->sources].child_count == 0
                           : s->p->stores[i].changelog != 0;
    }
}

static void free_standby(ks_standby *s)
{
    for (int32_t p = 0; s->held && p < s->partitions; p++)
        ks_task_destroy(s->held[p]);
    if (s->consumer)
        rd_kafka_destroy(s->consumer);
    if (s->adminq)
        rd_kafka_queue_destroy(s->adminq);
    if (s->admin)
        rd_kafka_destroy(s->admin);
    free(s->active);
    free(s->held);
    free(s->lag);
    free(s->desired);
    free(s->dirty);
    free(s->retry_at);
    free(s->unchecked);
    free(s->topics);
    free(s->kept);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
    free(s);
}

/* ---- open and close ------------------------------------------------------- */

static void publish_lag(ks_standby *s, int32_t p, size_t store, double lag)
{
    char l[512];
    snprintf(l, sizeof l, "task=\"%d\",store=\"%s\"", (int)p, s->p->stores[store].name);
    ks_metrics_set(s->eng->metrics, "kstreams_standby_lag", l, lag);
}

/* Forget the lag of task p's stores (lock held): opened or closed. */
static void forget_lag(ks_standby *s, int32_t p)
{
    for (size_t i = 0; i < s->p->store_count; i++)
        s->lag[(size_t)p * s->p->store_count + i] = -1;
}

/* Commit what the standby of task p applied (its checkpoints with it). A
 * failed commit closes the standby: it opens again from its last commit. */
static void commit_one(ks_standby *s, int32_t p);

/* Close the standby of task p (lock held). */
static void close_one(ks_standby *s, int32_t p, const char *why)
{
    commit_one(s, p);
    if (!s->held[p])
        return;
    ks_task_destroy(s->held[p]);
    s->held[p] = NULL;
    forget_lag(s, p);
    s->assignment_stale = 1;
    for (size_t i = 0; i < s->p->store_count; i++)
        if (s->kept[i])
            publish_lag(s, p, i, 0);
    ks_metrics_add(s->eng->metrics, "kstreams_standby_tasks", "", -1);
    ks_info(WHERE, "standby task %d stopped: %s", (int)p, why);
}

static void commit_one(ks_standby *s, int32_t p)
{
    if (!s->held[p] || !s->dirty[p])
        return;
    s->dirty[p] = 0;
    if (ks_task_commit_stores(s->held[p]) != 0) {
        ks_warn(WHERE, "standby task %d: commit failed: %s", (int)p,
                ks_task_store_message(s->held[p]));
        ks_task_abort_stores(s->held[p]);
        s->retry_at[p] = ks_mono_ms() + RETRY_MS;
        close_one(s, p, "its store commit failed (it starts again from its checkpoint)");
    }
}

/* Open the standby of task p (lock held). */
static void open_one(ks_standby *s, int32_t p)
{
    char err[1024];
    ks_task *t;
    if (ks_task_open_stores(s->topo, p, &t, err, sizeof err) != 0) {
        ks_warn(WHERE, "standby task %d not started (next try in %d s): %s", (int)p,
                RETRY_MS / 1000, err);
        s->retry_at[p] = ks_mono_ms() + RETRY_MS;
        return;
    }
    s->held[p] = t;
    s->unchecked[p] = 1;
    forget_lag(s, p);
    s->assignment_stale = 1;
    ks_metrics_add(s->eng->metrics, "kstreams_standby_tasks", "", 1);
    char at[256] = "";
    size_t n = 0;
    for (size_t i = 0; i < s->p->store_count && n < sizeof at; i++)
        if (s->kept[i])
            n += (size_t)snprintf(at + n, sizeof at - n, " %s@%lld", s->p->stores[i].name,
                                  (long long)ks_task_checkpoint(t, (int)i));
    ks_info(WHERE, "standby task %d started (checkpoints:%s)", (int)p, at);
}

/* Close what a worker claims or the view no longer places here; open what
 * it places here and no worker holds. Wakes claimers. */
static void reconcile(ks_standby *s)
{
    pthread_mutex_lock(&s->lock);
    int fresh = s->have_view && s->describe_rebalances == s->rebalances;
    for (int32_t p = 0; p < s->partitions; p++) {
        if (s->held[p] && s->active[p])
            close_one(s, p, "assigned to this process");
        else if (s->held[p] && fresh && !s->desired[p])
            close_one(s, p, "placed on another process");
        else if (!s->held[p] && !s->active[p] && fresh && s->desired[p] && !s->quit &&
                 ks_mono_ms() >= s->retry_at[p])
            open_one(s, p);
    }
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

/* Wipe each kept store of the standby of task p whose checkpoint is below
 * its changelog's log start (records deleted while this process was away:
 * DeleteRecords, a compact,delete retention) or past its end (the topic
 * created again: ks_kafka_offset_gone) and commit it with the log start
 * as its checkpoint, as the restore does (restore_ends.c): tailed from the checkpoint, the
 * consumer would be reset to the log start on top of what the deleted
 * records had changed. One ListOffsets per store, outside
 * the lock (only this thread changes held[]); a start that cannot be read
 * leaves the store as it is. */
static void wipe_stale(ks_standby *s, int32_t p)
{
    ks_task *t = s->held[p];
    s->unchecked[p] = 0;
    for (size_t i = 0; i < s->p->store_count; i++) {
        int64_t cp = s->kept[i] ? ks_task_checkpoint(t, (int)i) : -1;
        ks_store_read_end(t->env);
        int64_t lo = -1, hi = -1;
        ks_offset_gone gone;
        if (cp < 0 || rd_kafka_query_watermark_offsets(s->consumer, s->topics[i], p, &lo, &hi,
                                                       5000) != RD_KAFKA_RESP_ERR_NO_ERROR ||
            !ks_kafka_offset_gone(cp, lo, hi, &gone))
            continue;
        ks_warn(WHERE,
                "standby task %d: store %s: checkpoint %lld is %s %lld of %s (%s): store wiped, "
                "restoring from the log start",
                (int)p, s->p->stores[i].name, (long long)cp, gone.side, (long long)gone.bound,
                s->topics[i], gone.why);
        int rc = ks_task_restore_wipe(t, (int)i, lo);
        pthread_mutex_lock(&s->lock); /* commits as commit_one does */
        if (rc == 0)
            rc = ks_task_commit_stores(t);
        if (rc != 0) {
            ks_warn(WHERE, "standby task %d: wiping store %s failed: %s", (int)p,
                    s->p->stores[i].name, ks_task_store_message(t));
            ks_task_abort_stores(t);
            s->retry_at[p] = ks_mono_ms() + RETRY_MS;
            close_one(s, p, "wiping a stale store failed");
        }
        pthread_mutex_unlock(&s->lock);
        if (rc != 0)
            return;
    }
}

/* Assign the consumer every kept store's changelog partition of every
 * held task, from its checkpoint (everything applied is committed), after
 * wiping the stale stores of the tasks opened since the last time. */
static void reassign(ks_standby *s)
{
    for (int32_t p = 0; p < s->partitions; p++)
        if (s->held[p] && s->unchecked[p])
            wipe_stale(s, p);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(8);
    for (int32_t p = 0; p < s->partitions; p++)
        for (size_t i = 0; s->held[p] && i < s->p->store_count; i++) {
            if (!s->kept[i])
                continue;
            int64_t cp = ks_task_checkpoint(s->held[p], (int)i);
            rd_kafka_topic_partition_list_add(l, s->topics[i], p)->offset =
                cp >= 0 ? cp : RD_KAFKA_OFFSET_BEGINNING;
        }
    for (int32_t p = 0; p < s->partitions; p++)
        if (s->held[p])
            ks_store_read_end(s->held[p]->env); /* the checkpoint reads' snapshot */
    rd_kafka_resp_err_t e = rd_kafka_assign(s->consumer, l->cnt ? l : NULL);
    if (e)
        ks_warn(WHERE, "assigning the changelogs: %s", rd_kafka_err2str(e));
    rd_kafka_topic_partition_list_destroy(l);
    s->assignment_stale = 0;
}

/* ---- the group's view ----------------------------------------------------- */

static void take_view(ks_standby *s, rd_kafka_event_t *ev)
{
    ks_group_view v;
    char err[512];
    int rc = ks_group_view_read(ev, s->partitions, &v, err, sizeof err);
    if (rc < 0 && ks_mono_ms() - s->last_warn > 30000) {
        s->last_warn = ks_mono_ms();
        ks_warn(WHERE, "%s", err);
    }
    if (rc != 1)
        return; /* rebalancing: keep the standbys as they are */
    int me = ks_group_view_find(&v, s->self);
    for (int32_t p = 0; p < s->partitions; p++)
        s->desired[p] = (unsigned char)ks_group_view_is_standby(&v, p, me,
                                                                s->p->standby_replicas);
    ks_group_view_free(&v);
    pthread_mutex_lock(&s->lock);
    s->have_view = me >= 0;
    pthread_mutex_unlock(&s->lock);
}

/* Start a description when one is due; take a finished one. */
static void follow_group(ks_standby *s, int64_t now)
{
    rd_kafka_event_t *ev;
    while ((ev = rd_kafka_queue_poll(s->adminq, 0))) {
        s->describing = 0;
        take_view(s, ev);
        rd_kafka_event_destroy(ev);
    }
    pthread_mutex_lock(&s->lock);
    uint64_t reb = s->rebalances;
    if (reb != s->describe_rebalances && !s->describing) {
        s->have_view = 0;
        if (s->next_describe > now + DESCRIBE_AFTER_REBALANCE_MS)
            s->next_describe = now + DESCRIBE_AFTER_REBALANCE_MS;
    }
    pthread_mutex_unlock(&s->lock);
    if (s->describing || now < s->next_describe)
        return;
    s->describing = 1;
    s->describe_rebalances = reb;
    s->next_describe = now + DESCRIBE_EVERY_MS;
    ks_group_describe_async(s->admin, s->adminq, s->p->application, 5000);
}

/* ---- tailing -------------------------------------------------------------- */

static int store_of_topic(const ks_standby *s, const char *topic)
{
    for (size_t i = 0; i < s->p->store_count; i++)
        if (s->kept[i] && strcmp(s->topics[i], topic) == 0)
            return (int)i;
    return -1;
}

/* Apply one changelog record to its standby, as the restorer does. */
static void apply(ks_standby *s, rd_kafka_message_t *m)
{
    if (m->err) {
        if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF && ks_mono_ms() - s->last_warn > 10000) {
            s->last_warn = ks_mono_ms();
            ks_warn(WHERE, "changelog: %s", rd_kafka_message_errstr(m));
        }
        return;
    }
    int32_t p = m->partition;
    int store = store_of_topic(s, rd_kafka_topic_name(m->rkt));
    if (store < 0 || p < 0 || p >= s->partitions || !s->held[p])
        return; /* a standby closed since the fetch */
    ks_bytes key = {m->key, m->key_len};
    ks_bytes val = {m->payload, m->len};
    ks_task *t = s->held[p];
    int rc = ks_table_of_store(s->p, store)
                 ? ks_table_restore_put(t, store, key, m->payload ? &val : NULL,
                                        rd_kafka_message_timestamp(m, NULL), m->offset)
                 : ks_task_restore_put(t, store, key, m->payload ? &val : NULL, m->offset);
    if (rc != 0) {
        ks_warn(WHERE, "standby task %d: store write failed (%d): %s", (int)p, rc,
                ks_task_store_message(t));
        ks_task_abort_stores(t);
        s->dirty[p] = 0;
        s->retry_at[p] = ks_mono_ms() + RETRY_MS;
        pthread_mutex_lock(&s->lock);
        close_one(s, p, "a store write failed (it starts again from its checkpoint)");
        pthread_mutex_unlock(&s->lock);
        return;
    }
    s->dirty[p] = 1;
}

/* Poll up to MAX_PER_POLL records, then commit each standby's batch. */
static void tail(ks_standby *s)
{
    int any = 0;
    for (int32_t p = 0; p < s->partitions && !any; p++)
        any = s->held[p] != NULL;
    if (!any) {
        usleep(POLL_MS * 1000);
        return;
    }
    for (int n = 0; n < MAX_PER_POLL; n++) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(s->consumer, n ? 0 : POLL_MS);
        if (!m)
            break;
        apply(s, m);
        rd_kafka_message_destroy(m);
    }
    pthread_mutex_lock(&s->lock);
    for (int32_t p = 0; p < s->partitions; p++)
        commit_one(s, p);
    pthread_mutex_unlock(&s->lock);
}

/* kstreams_standby_lag: changelog records not yet applied, from the
 * consumer's cached end offsets (read_committed: the last stable offset)
 * and its position. */
static void report_lag(ks_standby *s)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(8);
    for (int32_t p = 0; p < s->partitions; p++)
        for (size_t i = 0; s->held[p] && i < s->p->store_count; i++)
            if (s->kept[i])
                rd_kafka_topic_partition_list_add(l, s->topics[i], p);
    rd_kafka_position(s->consumer, l);
    for (int k = 0; k < l->cnt; k++) {
        rd_kafka_topic_partition_t *e = &l->elems[k];
        int64_t lo = -1, hi = -1;
        int store = store_of_topic(s, e->topic);
        if (store < 0 || rd_kafka_get_watermark_offsets(s->consumer, e->topic, e->partition,
                                                        &lo, &hi) != 0 || hi < 0)
            continue;
        int64_t at = e->offset >= 0 ? e->offset
                                    : ks_task_checkpoint(s->held[e->partition], store);
        ks_store_read_end(s->held[e->partition]->env);
        int64_t lag = hi > at && at >= 0 ? hi - at : at < 0 ? hi : 0;
        publish_lag(s, e->partition, (size_t)store, (double)lag);
        pthread_mutex_lock(&s->lock); /* standby reads see it */
        s->lag[(size_t)e->partition * s->p->store_count + (size_t)store] = lag;
        pthread_mutex_unlock(&s->lock);
    }
    rd_kafka_topic_partition_list_destroy(l);
}

static void *standby_main(void *arg)
{
    ks_standby *s = arg;
    ks_info(WHERE, "standby replicas: %d per task; this process is %s",
            s->p->standby_replicas, s->self);
    for (;;) {
        pthread_mutex_lock(&s->lock);
        int quit = s->quit;
        pthread_mutex_unlock(&s->lock);
        if (quit)
            break;
        int64_t now = ks_mono_ms();
        follow_group(s, now);
        reconcile(s);
        if (s->assignment_stale)
            reassign(s);
        tail(s);
        if (now >= s->next_metrics) {
            s->next_metrics = now + 1000;
            report_lag(s);
        }
    }
    pthread_mutex_lock(&s->lock);
    for (int32_t p = 0; p < s->partitions; p++)
        if (s->held[p])
            close_one(s, p, "the engine stops");
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    rd_kafka_assign(s->consumer, NULL);
    return NULL;
}

/* ---- the public calls ------------------------------------------------------ */

static int alloc_parts(ks_standby *s)
{
    size_t parts = (size_t)(s->partitions > 0 ? s->partitions : 1);
    size_t stores = s->p->store_count ? s->p->store_count : 1;
    s->active = calloc(parts, 1);
    s->held = calloc(parts, sizeof *s->held);
    s->lag = malloc(parts * stores * sizeof *s->lag);
    for (size_t i = 0; s->lag && i < parts * stores; i++)
        s->lag[i] = -1;
    s->desired = calloc(parts, 1);
    s->dirty = calloc(parts, 1);
    s->retry_at = calloc(parts, sizeof *s->retry_at);
    s->unchecked = calloc(parts, 1);
    s->topics = calloc(stores, sizeof *s->topics);
    s->kept = calloc(stores, 1);
    return s->active && s->held && s->lag && s->desired && s->dirty && s->retry_at &&
                   s->unchecked && s->topics && s->kept
               ? 0
               : KS_ERR_NOMEM;
}

int ks_standby_start(ks_engine *eng, ks_standby **out, char *err, size_t errlen)
{
    *out = NULL;
    const ks_pipeline *p = eng->topo->pipeline;
    if (p->standby_replicas <= 0 || p->store_count == 0)
        return 0;
    ks_standby *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return KS_ERR_NOMEM;
    }
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    s->eng = eng;
    s->topo = eng->topo;
    s->p = p;
    s->partitions = eng->topo->partitions;
    /* the process part of the workers' client.id (member_id.h) */
    ks_member_id_format(p->application, eng->instance, NULL, s->self, sizeof s->self);
    int rc = alloc_parts(s);
    if (rc != 0)
        snprintf(err, errlen, "out of memory");
    int kept = 0;
    if (rc == 0) {
        plan_stores(s);
        for (size_t i = 0; i < p->store_count; i++)
            kept += s->kept[i];
    }
    if (rc == 0 && kept == 0) { /* nothing a standby could keep warm */
        ks_info(WHERE, "standby_replicas: no store has a changelog a standby could follow: "
                       "no standbys");
        free_standby(s);
        return 0;
    }
    if (rc == 0) {
        if (!(s->consumer =
                  ks_kafka_side_consumer(p, "standby", NULL, NULL, "standby", err, errlen)) ||
            !(s->admin = ks_kafka_admin_client(p, err, errlen)) ||
            !(s->adminq = rd_kafka_queue_new(s->admin)))
            rc = KS_ERR_IO;
    }
    if (rc == 0 && pthread_create(&s->thread, NULL, standby_main, s) != 0) {
        snprintf(err, errlen, "cannot start the standby thread: %s", strerror(errno));
        rc = KS_ERR_STATE;
    }
    if (rc != 0) {
        free_standby(s);
        return rc;
    }
    *out = s;
    return 0;
}

void ks_standby_stop(ks_standby *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    s->quit = 1;
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    free_standby(s);
}

void ks_standby_claim(ks_standby *s, int32_t partition)
{
    if (!s || partition < 0 || partition >= s->partitions)
        return;
    pthread_mutex_lock(&s->lock);
    s->active[partition] = 1;
    int waited = s->held[partition] != NULL;
    while (s->held[partition] && !s->quit)
        pthread_cond_wait(&s->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
    if (waited)
        ks_info(WHERE, "task %d taken over from its standby", (int)partition);
}

void ks_standby_reserve(ks_standby *s, int32_t partition)
{
    if (!s || partition < 0 || partition >= s->partitions)
        return;
    pthread_mutex_lock(&s->lock);
    s->active[partition] = 1;
    pthread_mutex_unlock(&s->lock);
}

void ks_standby_release(ks_standby *s, int32_t partition)
{
    if (!s || partition < 0 || partition >= s->partitions)
        return;
    pthread_mutex_lock(&s->lock);
    s->active[partition] = 0;
    pthread_mutex_unlock(&s->lock);
}

ks_task *ks_standby_lock(ks_standby *s, int32_t partition, int store, int64_t *lag)
{
    *lag = -1;
    if (!s)
        return NULL;
    pthread_mutex_lock(&s->lock);
    if (partition < 0 || partition >= s->partitions ||
        (store >= 0 && (size_t)store >= s->p->store_count) || !s->held[partition])
        return NULL;
    if (store < 0) /* any store */
        return s->held[partition];
    if (!s->kept[store])
        return NULL;
    *lag = s->lag[(size_t)partition * s->p->store_count + (size_t)store];
    return s->held[partition];
}

void ks_standby_unlock(ks_standby *s)
{
    if (s)
        pthread_mutex_unlock(&s->lock);
}

void ks_standby_rebalanced(ks_standby *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    s->rebalances++;
    pthread_mutex_unlock(&s->lock);
}
