/*
 * query_tasks.h - the tasks this process runs, as the query server
 * (query_server.h) sees them: which partitions are here, whether each is
 * restoring (and how far) or active. The workers report a task when they
 * create it, as the restorer goes on, when it runs and before they
 * destroy it; the server reads a task's stores under the registry's lock,
 * so a task is never destroyed while a query reads it.
 * Every function is thread-safe and does nothing on a NULL registry (the
 * query server is off).
 */
#ifndef KS_QUERY_TASKS_H
#define KS_QUERY_TASKS_H

#include <stdint.h>

#include "runtime/task.h"

typedef struct ks_query_tasks ks_query_tasks;

typedef enum ks_qt_state {
    KS_QT_ABSENT = 0, /* not a task of this process */
    KS_QT_RESTORING,  /* created, its stores replaying their changelogs */
    KS_QT_ACTIVE      /* restored: its stores answer queries */
} ks_qt_state;

/* What a query learns of one partition here. */
typedef struct ks_qt_status {
    ks_qt_state state;
    char store[128]; /* restoring: the store asked about, else the one whose
                        replay reported last (a task's stores replay
                        together); "" before the first report */
    uint64_t done;   /* restoring: its records replayed so far */
    int64_t total;   /* restoring: about how many there are to replay */
} ks_qt_status;

/* A registry for `partitions` tasks; NULL when out of memory. */
ks_query_tasks *ks_query_tasks_new(int32_t partitions);
void ks_query_tasks_free(ks_query_tasks *qt);

/* The worker created `task` (borrowed until ks_query_tasks_remove) and
 * restores it now. */
void ks_query_tasks_restoring(ks_query_tasks *qt, ks_task *task);
/* The restore of `partition` has replayed `done` of about `total` records
 * of `store` (borrowed; kept per store). */
void ks_query_tasks_progress(ks_query_tasks *qt, int32_t partition, const char *store,
                             uint64_t done, int64_t total);
/* The task of `partition` is restored and runs. */
void ks_query_tasks_active(ks_query_tasks *qt, int32_t partition);
/* The worker is about to destroy the task of `partition`: waits for a
 * query reading it to finish. */
void ks_query_tasks_remove(ks_query_tasks *qt, int32_t partition);

/* Bumped whenever a task comes or goes here (a rebalance): the query
 * server describes the group again when it changed. */
uint64_t ks_query_tasks_generation(ks_query_tasks *qt);

/* Lock the registry and fill *st for `partition`, with the restore
 * progress of `store` (borrowed; NULL or not replayed: the store reported
 * last): the task (borrowed, valid until ks_query_tasks_unlock) when it
 * is active, else NULL. Call ks_query_tasks_unlock in any case. */
ks_task *ks_query_tasks_lock(ks_query_tasks *qt, int32_t partition, const char *store,
                             ks_qt_status *st);
/* As ks_query_tasks_lock, but the task also while it restores (a stale
 * read: its stores hold what the restore has committed so far; the
 * worker writes on beside a read snapshot). */
ks_task *ks_query_tasks_lock_stale(ks_query_tasks *qt, int32_t partition, const char *store,
                                   ks_qt_status *st);
void ks_query_tasks_unlock(ks_query_tasks *qt);

#endif /* KS_QUERY_TASKS_H */
