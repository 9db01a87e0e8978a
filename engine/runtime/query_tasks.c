/*
 * query_tasks.c - see query_tasks.h. One mutex over a slot per partition:
 * queries are short reads, and a worker waits on it only when it opens,
 * restores or closes a task.
 */
#include "runtime/query_tasks.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One store's restore progress. */
typedef struct progress {
    char store[128];
    uint64_t done;
    int64_t total;
} progress;

/* A task's stores replay together: the progress of each (of the first
 * KS_QT_STORES; the last entry is shared past that). */
#define KS_QT_STORES 32

typedef struct slot {
    ks_task *task;
    ks_qt_status st;
    progress stores[KS_QT_STORES];
    int nstores, last; /* entries used; the one reported last */
} slot;

struct ks_query_tasks {
    pthread_mutex_t lock;
    int32_t partitions;
    slot *slots;
    uint64_t generation;
};

ks_query_tasks *ks_query_tasks_new(int32_t partitions)
{
    ks_query_tasks *qt = calloc(1, sizeof *qt);
    if (!qt || !(qt->slots = calloc(partitions > 0 ? (size_t)partitions : 1, sizeof *qt->slots))) {
        free(qt);
        return NULL;
    }
    qt->partitions = partitions;
    pthread_mutex_init(&qt->lock, NULL);
    return qt;
}

void ks_query_tasks_free(ks_query_tasks *qt)
{
    if (!qt)
        return;
    pthread_mutex_destroy(&qt->lock);
    free(qt->slots);
    free(qt);
}

/* The slot of `partition` with the lock held, or NULL (nothing locked). */
static slot *take(ks_query_tasks *qt, int32_t partition)
{
    if (!qt || partition < 0 || partition >= qt->partitions)
        return NULL;
    pthread_mutex_lock(&qt->lock);
    return &qt->slots[partition];
}

void ks_query_tasks_restoring(ks_query_tasks *qt, ks_task *task)
{
    slot *s = take(qt, task->partition);
    if (!s)
        return;
    s->task = task;
    memset(&s->st, 0, sizeof s->st);
    s->nstores = s->last = 0;
    s->st.state = KS_QT_RESTORING;
    qt->generation++;
    pthread_mutex_unlock(&qt->lock);
}

void ks_query_tasks_progress(ks_query_tasks *qt, int32_t partition, const char *store,
                             uint64_t done, int64_t total)
{
    slot *s = take(qt, partition);
    if (!s)
        return;
    if (s->st.state == KS_QT_RESTORING) {
        int i = 0;
        while (i < s->nstores && strcmp(s->stores[i].store, store) != 0)
            i++;
        if (i == s->nstores) {
            if (s->nstores < KS_QT_STORES)
                s->nstores++;
            else
                i = KS_QT_STORES - 1;
            snprintf(s->stores[i].store, sizeof s->stores[i].store, "%s", store);
        }
        s->stores[i].done = done;
        s->stores[i].total = total;
        s->last = i;
    }
    pthread_mutex_unlock(&qt->lock);
}

void ks_query_tasks_active(ks_query_tasks *qt, int32_t partition)
{
    slot *s = take(qt, partition);
    if (!s)
        return;
    if (s->task)
        s->st.state = KS_QT_ACTIVE;
    pthread_mutex_unlock(&qt->lock);
}

void ks_query_tasks_remove(ks_query_tasks *qt, int32_t partition)
{
    slot *s = take(qt, partition);
    if (!s)
        return;
    s->task = NULL;
    memset(&s->st, 0, sizeof s->st);
    s->nstores = s->last = 0;
    qt->generation++;
    pthread_mutex_unlock(&qt->lock);
}

uint64_t ks_query_tasks_generation(ks_query_tasks *qt)
{
    if (!qt)
        return 0;
    pthread_mutex_lock(&qt->lock);
    uint64_t g = qt->generation;
    pthread_mutex_unlock(&qt->lock);
    return g;
}

/* The progress of `store` in s (NULL or not reported: the one reported
 * last) into st. */
static void fill_progress(const slot *s, const char *store, ks_qt_status *st)
{
    if (s->st.state != KS_QT_RESTORING || s->nstores == 0)
        return;
    int i = s->last;
    for (int k = 0; store && k < s->nstores; k++)
        if (strcmp(s->stores[k].store, store) == 0)
            i = k;
    snprintf(st->store, sizeof st->store, "%s", s->stores[i].store);
    st->done = s->stores[i].done;
    st->total = s->stores[i].total;
}

/* ks_query_tasks_lock; `restoring`: a restoring task is returned too. */
static ks_task *lock_task(ks_query_tasks *qt, int32_t partition, const char *store,
                          ks_qt_status *st, int restoring)
{
    memset(st, 0, sizeof *st);
    if (!qt)
        return NULL;
    pthread_mutex_lock(&qt->lock);
    if (partition < 0 || partition >= qt->partitions)
        return NULL;
    *st = qt->slots[partition].st;
    fill_progress(&qt->slots[partition], store, st);
    return st->state == KS_QT_ACTIVE || (restoring && st->state == KS_QT_RESTORING)
               ? qt->slots[partition].task
               : NULL;
}

ks_task *ks_query_tasks_lock(ks_query_tasks *qt, int32_t partition, const char *store,
                             ks_qt_status *st)
{
    return lock_task(qt, partition, store, st, 0);
}

ks_task *ks_query_tasks_lock_stale(ks_query_tasks *qt, int32_t partition, const char *store,
                                   ks_qt_status *st)
{
    return lock_task(qt, partition, store, st, 1);
}

void ks_query_tasks_unlock(ks_query_tasks *qt)
{
    if (qt)
        pthread_mutex_unlock(&qt->lock);
}
