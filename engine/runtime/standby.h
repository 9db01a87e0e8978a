/*
 * standby.h - standby replicas (`standby_replicas: N`): this process keeps
 * copies of the stores of tasks other processes own, so that a task that
 * moves here restores only the tail of its changelogs.
 *
 * The copy IS the task's store environment in this process's state
 * directory (state_dir/<application>/task-<P>, same checkpoints), written
 * by one thread of its own (never a worker's) that tails the changelogs
 * read_committed and applies each poll's records with their checkpoints in
 * one LMDB transaction, as a restore does. When a worker is assigned a
 * task this process holds as a standby, ks_standby_claim makes the thread
 * close the standby environment first (an environment is opened once per
 * process); the worker's restorer then replays from the standby's
 * checkpoint. Placement: group_members.h.
 */
#ifndef KS_STANDBY_H
#define KS_STANDBY_H

#include <stdint.h>

#include "runtime/engine.h"
#include "runtime/task.h"

typedef struct ks_standby ks_standby;

/* Start the standby thread of `eng` (borrowed; must outlive it) when its
 * pipeline has standby_replicas > 0; *out is NULL otherwise (and every
 * call below accepts NULL). 0, or a negative ks_err with err set and
 * nothing running. */
int ks_standby_start(ks_engine *eng, ks_standby **out, char *err, size_t errlen);

/* Stop the thread, close the standby stores, free. After the workers are
 * joined (they may wait in ks_standby_claim). NULL is fine. */
void ks_standby_stop(ks_standby *s);

/* A worker is about to open task `partition`: returns once no standby
 * environment of that task is open in this process (closed by the standby
 * thread, its checkpoints committed), and keeps the standby away from it
 * until ks_standby_release. Any worker thread. */
void ks_standby_claim(ks_standby *s, int32_t partition);

/* A rebalance assigned task `partition` here: keep the standby away from
 * it and have its environment closed, without waiting (ks_standby_claim
 * waits), so that the standbys of every newly assigned task close at once. */
void ks_standby_reserve(ks_standby *s, int32_t partition);

/* The worker closed task `partition`: a standby may hold it again. */
void ks_standby_release(ks_standby *s, int32_t partition);

/* Lock the standbys: the standby of task `partition` held here (borrowed
 * until ks_standby_unlock; the standby thread neither closes nor commits
 * it meanwhile, and applies records beside a reader's snapshot) when it
 * keeps store `store` (an index into the pipeline's stores; -1: any)
 * warm, else NULL. *lag: that store's changelog records it had not applied at its
 * last report (about every second), -1 when not known yet. Call
 * ks_standby_unlock in any case. For the query server's standby reads;
 * any thread. */
ks_task *ks_standby_lock(ks_standby *s, int32_t partition, int store, int64_t *lag);
void ks_standby_unlock(ks_standby *s);

/* The group rebalanced: describe it again soon, and open no new standby
 * before a description taken after this call. Any thread. */
void ks_standby_rebalanced(ks_standby *s);

#endif /* KS_STANDBY_H */
