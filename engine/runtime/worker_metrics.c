/*
 * worker_metrics.c - one worker's counters, task counts, lag and stalls
 * into the engine's metrics (worker_metrics.h).
 */
#include "runtime/worker_metrics.h"

#include <stdio.h>
#include <stdlib.h>

#include "base/clock.h"
#include "base/log.h"
#include "http/metrics.h"
#include "runtime/cache.h"

int ks_worker_metrics_init(ks_worker_metrics *m, struct ks_metrics *registry, const char *where,
                           int id, const ks_assignment *a, rd_kafka_t *consumer)
{
    size_t parts = (size_t)a->partitions;
    size_t slots = parts * (a->p->source_count ? a->p->source_count : 1);
    *m = (ks_worker_metrics){.registry = registry, .where = where, .id = id, .a = a,
                             .consumer = consumer};
    m->stalls = calloc(slots, sizeof *m->stalls);
    m->group_pos = calloc(slots, sizeof *m->group_pos);
    m->published_in = calloc(parts + 1, sizeof *m->published_in);
    m->published_out = calloc(parts + 1, sizeof *m->published_out);
    if (!m->stalls || !m->group_pos || !m->published_in || !m->published_out)
        return KS_ERR_NOMEM;
    return 0;
}

void ks_worker_metrics_free(ks_worker_metrics *m)
{
    free(m->stalls);
    free(m->group_pos);
    free(m->published_in);
    free(m->published_out);
    m->stalls = NULL;
    m->group_pos = NULL;
    m->published_in = m->published_out = NULL;
}

void ks_worker_metrics_task_opened(ks_worker_metrics *m, int32_t partition)
{
    m->published_in[partition] = m->published_out[partition] = 0;
    for (size_t s = 0; s < m->a->p->source_count; s++)
        m->group_pos[ks_slot(m->a, partition, s)] = -1;
}

void ks_worker_metrics_task_counts(ks_worker_metrics *m, int32_t p)
{
    const ks_task *task = m->a->tasks[p];
    char l[64];
    snprintf(l, sizeof l, "task=\"%d\"", (int)p);
    ks_metrics_add(m->registry, "kstreams_records_in_total", l,
                   (double)(task->records_in - m->published_in[p]));
    ks_metrics_add(m->registry, "kstreams_records_out_total", l,
                   (double)(task->records_out - m->published_out[p]));
    m->published_in[p] = task->records_in;
    m->published_out[p] = task->records_out;
    if (!task->caches)
        return;
    /* the record caches of the task's nodes, summed */
    static const char *const names[3] = {"kstreams_cache_folds_total",
                                         "kstreams_cache_flushed_total",
                                         "kstreams_cache_evictions_total"};
    uint64_t now[3] = {0, 0, 0};
    for (size_t i = 0; i < task->topo->node_count; i++) {
        const ks_cache *c = task->caches[i];
        if (c) {
            now[0] += c->folds;
            now[1] += c->flushed;
            now[2] += c->evictions;
        }
    }
    ks_task *t = m->a->tasks[p];
    for (int k = 0; k < 3; k++) {
        ks_metrics_add(m->registry, names[k], l, (double)(now[k] - t->cache_published[k]));
        t->cache_published[k] = now[k];
    }
}

/* Where a partition that has delivered nothing since its assignment
 * stands: the group's committed offset, else `low` (auto.offset.reset is
 * earliest). A partition starved from its start has no position of its
 * own to measure lag by. Looked up once per assignment (group_pos: -1 not
 * yet, -2 the look-up failed): this runs on the worker's thread, and a
 * broker that does not answer must not cost it 0.5 s every second. */
static int64_t group_position(ks_worker_metrics *m, int32_t p, size_t s, int64_t low)
{
    int64_t *at = &m->group_pos[ks_slot(m->a, p, s)];
    if (*at != -1)
        return *at;
    *at = -2;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, m->a->p->sources[s].topic, p);
    if (rd_kafka_committed(m->consumer, l, 500) == RD_KAFKA_RESP_ERR_NO_ERROR &&
        !l->elems[0].err)
        *at = l->elems[0].offset >= 0 ? l->elems[0].offset : low;
    rd_kafka_topic_partition_list_destroy(l);
    return *at;
}

/* A partition with a backlog and no committed progress for
 * stall_warning_ms is logged with its lag, again every stall_warning_ms
 * while it lasts; kstreams_partition_stall_seconds shows every stall. */
static void watch_stall(ks_worker_metrics *m, int32_t p, size_t s, int64_t lag,
                        const char *labels)
{
    const ks_pipeline *pl = m->a->p;
    int64_t committed = m->a->committed[ks_slot(m->a, p, s)];
    int warn;
    int64_t stalled = ks_stall_observe(&m->stalls[ks_slot(m->a, p, s)], committed, lag,
                                       ks_mono_ms(), pl->stall_warning_ms, &warn);
    ks_metrics_set(m->registry, "kstreams_partition_stall_seconds", labels,
                   (double)stalled / 1000.0);
    if (warn)
        ks_warn(m->where,
                "partition %s[%d] has made no committed progress for %lld s with %lld records "
                "to go (committed offset %lld)",
                pl->sources[s].topic, (int)p, (long long)(stalled / 1000), (long long)lag,
                (long long)committed);
}

/* Lag and stall of every source partition of task p. */
static void publish_lag(ks_worker_metrics *m, int32_t p)
{
    const ks_assignment *a = m->a;
    char l[256];
    for (size_t s = 0; s < a->p->source_count; s++) {
        const char *topic = a->p->sources[s].topic;
        int64_t lo, hi, at = a->pos[ks_slot(a, p, s)];
        if (at < 0)
            at = a->committed[ks_slot(a, p, s)];
        if (rd_kafka_get_watermark_offsets(m->consumer, topic, p, &lo, &hi) != 0 || hi < 0)
            continue;
        if (at < 0)
            at = group_position(m, p, s, lo);
        if (at < 0)
            continue;
        snprintf(l, sizeof l, "topic=\"%s\",partition=\"%d\"", topic, (int)p);
        int64_t lag = hi > at ? hi - at : 0;
        ks_metrics_set(m->registry, "kstreams_consumer_lag", l, (double)lag);
        watch_stall(m, p, s, lag, l);
    }
}

void ks_worker_metrics_publish(ks_worker_metrics *m, const ks_committer *c, uint64_t poisons,
                               int64_t now_ms)
{
    if (now_ms - m->last_publish_ms < 1000)
        return;
    m->last_publish_ms = now_ms;
    struct ks_metrics *r = m->registry;
    char l[256];
    snprintf(l, sizeof l, "worker=\"%d\"", m->id);
    ks_metrics_set(r, "kstreams_commits_total", l, (double)c->commits);
    ks_metrics_set(r, "kstreams_aborts_total", l, (double)c->aborts);
    ks_metrics_set(r, "kstreams_commit_seconds_sum", l, c->commit_seconds);
    ks_metrics_set(r, "kstreams_commit_seconds_count", l, (double)c->commits);
    ks_metrics_set(r, "kstreams_process_seconds_sum", l, m->process_seconds);
    ks_metrics_set(r, "kstreams_process_seconds_count", l, (double)m->processed);
    ks_metrics_set(r, "kstreams_poison_records_total", l, (double)poisons);
    int tasks = 0;
    for (int32_t p = 0; p < m->a->partitions; p++) {
        if (!m->a->tasks[p])
            continue;
        tasks++;
        ks_worker_metrics_task_counts(m, p);
        publish_lag(m, p);
    }
    ks_metrics_set(r, "kstreams_tasks", l, tasks);
}
