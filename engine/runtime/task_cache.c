/*
 * task_cache.c - the record caches of a task's nodes: hooks of the store
 * writes and forwards, eviction and the flush before the commit
 * (task_cache.h).
 */
#include "runtime/task_cache.h"

#include <stdlib.h>

#include "base/log.h"
#include "runtime/cache.h"

int ks_task_cache_open(ks_task *task)
{
    if (!task->io.cache)
        return 0;
    const ks_topology *topo = task->topo;
    for (size_t i = 0; i < topo->node_count; i++) {
        const ks_topo_node *n = &topo->nodes[i];
        if (n->kind != KS_NODE_PROCESSOR || n->cache_bytes == 0)
            continue;
        if (!task->caches && !(task->caches = calloc(topo->node_count, sizeof *task->caches)))
            return KS_ERR_NOMEM;
        if (!(task->caches[i] = ks_cache_new((size_t)n->cache_bytes)))
            return KS_ERR_NOMEM;
    }
    return 0;
}

void ks_task_cache_free(ks_task *task)
{
    if (!task->caches)
        return;
    for (size_t i = 0; i < task->topo->node_count; i++)
        ks_cache_free(task->caches[i]);
    free(task->caches);
    task->caches = NULL;
}

void ks_task_cache_clear(ks_task *task)
{
    for (size_t i = 0; task->caches && i < task->topo->node_count; i++)
        ks_cache_clear(task->caches[i]);
    ks_task_cache_end_batch(task);
}

void ks_task_cache_end_batch(ks_task *task)
{
    for (size_t i = 0; task->caches && i < task->topo->node_count; i++) {
        ks_cache *c = task->caches[i];
        int pct = c ? ks_cache_end_batch(c) : -1;
        if (pct < 0)
            continue;
        if (c->bypass)
            ks_info(task->where,
                    "node '%s': %d%% of its updates repeated a key within a commit: its record "
                    "cache stands aside, every update is passed on at once",
                    task->topo->nodes[i].name, pct);
        else
            ks_info(task->where,
                    "node '%s': %d%% of its updates repeated a key within a commit: its record "
                    "cache folds them again",
                    task->topo->nodes[i].name, pct);
    }
}

size_t ks_task_cache_count(const ks_task *task)
{
    size_t n = 0;
    for (size_t i = 0; task->caches && i < task->topo->node_count; i++)
        n += task->caches[i] ? task->caches[i]->count : 0;
    return n;
}

int ks_task_cache_on(const ks_task *task, const ks_topo_node *n)
{
    return task->caches && task->caches[n->index] && !task->caches[n->index]->bypass;
}

static void worse(ks_task *task, ks_verdict v)
{
    if (v > task->verdict)
        task->verdict = v;
}

/* Pass on what entry `e` (taken out of node n's cache) owes: a changelog
 * record per written store, with the store's value now (a tombstone when
 * the key is gone), then its latest forward to n's children. The records
 * carry the latest update's timestamp, headers and source position, as if
 * that update were being processed. */
static void pass_on(ks_task *task, const ks_topo_node *n, ks_cache_entry *e)
{
    const ks_pipeline *p = task->topo->pipeline;
    const ks_record *saved = task->current;
    uint32_t calls = task->outbox_calls;
    task->current = &e->rec;
    task->outbox_calls = 0;
    task->in_cache_flush++;
    ks_bytes key = {e->rec.key, e->rec.key_len};
    for (size_t s = 0; s < n->store_count && s < 32; s++) {
        int idx = n->stores[s];
        if (!(e->dirty_stores & (UINT32_C(1) << s)) || !task->io.changelog ||
            !p->stores[idx].changelog)
            continue;
        ks_bytes v = {e->kept, e->kept_len};
        int rc = e->kept ? 0 : KS_ERR_NOT_FOUND; /* kept: no store read */
        if (e->kept_store != (int)s)
            rc = ks_store_get(task->dbs[idx], key, &v);
        if (rc == 0 || rc == KS_ERR_NOT_FOUND)
            rc = task->io.changelog(task->io.arg, task, idx, key, rc == 0 ? &v : NULL);
        if (rc != 0) {
            worse(task, KS_RETRY);
            goto out;
        }
    }
    for (size_t c = 0; e->has_rec && c < n->child_count; c++)
        if (ks_task_dispatch(task, n, &task->topo->nodes[n->children[c]], &e->rec) != 0)
            break;
out:
    task->in_cache_flush--;
    task->current = saved;
    task->outbox_calls = calls;
}

/* Pass on the oldest entries of node n's cache until it fits its size. */
static void evict(ks_task *task, const ks_topo_node *n, ks_cache *c)
{
    ks_cache_entry *e;
    while ((e = ks_cache_over(c)) != NULL) {
        ks_cache_take(c, e);
        c->evictions++;
        pass_on(task, n, e);
        ks_cache_entry_free(e);
    }
}

int ks_task_cache_store(ks_task *task, struct ks_ctx *ctx, int node_store, ks_bytes key,
                        const ks_bytes *value)
{
    const ks_topo_node *n = ctx->node;
    if (!task->caches || !task->caches[n->index])
        return 0;
    ks_cache *c = task->caches[n->index];
    if (ctx->phase != KS_PHASE_PROCESS) {
        /* produced at once: a value the cache kept is older now */
        ks_cache_drop_kept(c, key, node_store);
        return 0;
    }
    ks_cache_observe(c, key);
    if (c->bypass)
        return 0;
    int rc = ks_cache_mark_store(c, key, node_store, value);
    if (rc != 0)
        return rc;
    ks_cache_entry *e = c->newest; /* the key just marked */
    if (e && !e->has_rec && task->current)
        e->rec.timestamp = task->current->timestamp;
    evict(task, n, c);
    return 1;
}

int ks_task_cache_forward(ks_task *task, const ks_topo_node *n, const ks_record *rec)
{
    ks_cache *c = task->caches[n->index];
    /* the record as the children would see it (ks_task_dispatch): the
     * source's position, and its headers when the node gave none */
    ks_record r = *rec;
    if (task->current) {
        r.topic = task->current->topic;
        r.partition = task->current->partition;
        r.offset = task->current->offset;
        if (!r.headers) {
            r.headers = task->current->headers;
            r.header_count = task->current->header_count;
        }
    }
    int rc = ks_cache_put_record(c, &r);
    if (rc != 0)
        return rc;
    evict(task, n, c);
    return task->verdict == KS_OK ? 0 : KS_ERR_STATE;
}

ks_verdict ks_task_flush_caches(ks_task *task)
{
    task->sink_err = 0;
    task->verdict = KS_OK;
    if (!task->caches)
        return KS_OK;
    /* a flush may fill the cache of a node further down: go round until
     * every cache is empty (at most once per node and level) */
    for (size_t round = 0; round <= task->topo->node_count; round++) {
        int any = 0;
        for (size_t i = 0; i < task->topo->node_count; i++) {
            ks_cache *c = task->caches[i];
            /* nothing enters this cache while it is passed on: the graph
             * has no cycle */
            ks_cache_entry *e = c ? ks_cache_take_all(c) : NULL, *next;
            for (; e; e = next) {
                any = 1;
                next = e->newer;
                c->flushed++;
                if (task->verdict == KS_OK)
                    pass_on(task, &task->topo->nodes[i], e);
                ks_cache_entry_free(e);
                if (task->verdict == KS_SKIP) {
                    ks_warn(task->where,
                            "a processor downstream of node '%s' returned skip for a record "
                            "of its record cache; the record is dropped",
                            task->topo->nodes[i].name);
                    task->verdict = KS_OK;
                }
            }
            if (task->verdict != KS_OK)
                return task->verdict; /* the batch aborts: nothing is owed */
        }
        if (!any)
            break;
    }
    return task->verdict;
}
