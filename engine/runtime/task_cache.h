/*
 * task_cache.h - the record caches of a task's stateful nodes (cache.h):
 * where a cached node's changelog records and forwards wait, and how they
 * leave.
 *
 * A node gets a cache when its type is KS_PROC_CACHEABLE, it has no
 * `window:`, its `cache_bytes` is not 0 (ks_topo_node.cache_bytes), and the
 * task's owner flushes (ks_task_io.cache). Then, while a record runs:
 *  - the node's store writes go to LMDB at once (later reads see them),
 *    but their changelog records are owed, not produced
 *    (ks_task_cache_store, from store_write in host_api.c);
 *  - its forwards (api->forward in process()) are kept, the latest per
 *    key (ks_task_cache_forward);
 *  - when the cache holds more than cache_bytes, or its oldest key has
 *    not changed for KS_CACHE_AGE_UPDATES updates, that key is passed on
 *    at once: its changelog record with the store's current value, then
 *    its latest forward through the rest of the graph;
 *  - a cache whose keys rarely repeat within a batch stands aside
 *    (cache.h: `bypass`): its updates are produced and forwarded at once.
 * Before the batch commits, the owner calls ks_task_flush_caches: every
 * owed key is passed on the same way, in the order of its latest update,
 * inside the batch's transaction (its changelog records and outputs commit
 * with the offsets of the records that caused them). An aborted batch
 * drops the caches with the store transaction (ks_task_abort_stores).
 */
#ifndef KS_TASK_CACHE_H
#define KS_TASK_CACHE_H

#include "runtime/task.h"

/* Make the caches of the task's nodes that get one. 0 or KS_ERR_NOMEM. */
int ks_task_cache_open(ks_task *task);

/* Free every cache of the task (NULL-safe). */
void ks_task_cache_free(ks_task *task);

/* Drop every owed output (the batch was aborted) and end the batch
 * (ks_task_cache_end_batch). */
void ks_task_cache_clear(ks_task *task);

/* The batch is over and every cache of the task is empty (flushed): each
 * decides whether it stands aside in the batches that follow (logged). */
void ks_task_cache_end_batch(ks_task *task);

/* Store write of ctx's node with `value` (NULL: a delete; the cache copies
 * what it keeps): 1 when the node's cache is in use and the changelog
 * record of `key` in its store number `node_store` is now owed (the caller
 * produces nothing), 0 when the caller produces it at once, or a negative
 * ks_err. */
int ks_task_cache_store(ks_task *task, struct ks_ctx *ctx, int node_store, ks_bytes key,
                        const ks_bytes *value);

/* 1 when node `n` has a cache in use, not standing aside (its forwards go
 * to ks_task_cache_forward). */
int ks_task_cache_on(const ks_task *task, const ks_topo_node *n);

/* Keep `rec` as the latest forward of its key from node `n`; evicts when
 * the cache is over its size. 0 or a negative ks_err. */
int ks_task_cache_forward(ks_task *task, const ks_topo_node *n, const ks_record *rec);

/* Pass on everything owed, node by node until no cache holds anything.
 * The verdict of the processors downstream (KS_OK; KS_RETRY or KS_FATAL:
 * the batch must abort; a sink that refused a record leaves
 * task->sink_err KS_ERR_INVALID). A processor's KS_SKIP drops that one
 * record with a warning (there is no input record to set aside). */
ks_verdict ks_task_flush_caches(ks_task *task);

/* Owed entries in all caches of the task. */
size_t ks_task_cache_count(const ks_task *task);

#endif /* KS_TASK_CACHE_H */
