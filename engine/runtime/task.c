/*
 * task.c - processor instances and stores of one task, and the depth-first
 * walk of a record through the graph (as Kafka Streams does: forward() runs
 * the children before it returns).
 *
 * Invariants: a ctx is inited at most once and closed once; the store batch
 * (one LMDB write txn for the whole env) is open from the first write of a
 * batch until the owner commits or aborts it.
 */
#include "runtime/task.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime/crash.h"
#include "base/fault.h"
#include "runtime/host_json.h"
#include "runtime/table.h"
#include "runtime/task_cache.h"
#include "base/log.h"
#include "base/fs.h"
#include "state/layout.h"

/* The version record's key: this text, then NULs to KS_VERSION_KEY_LEN. */
static const char version_key[KS_VERSION_KEY_LEN] = "kstreams.state_version";

ks_bytes ks_task_version_key(void)
{
    return (ks_bytes){version_key, sizeof version_key};
}

int ks_task_is_version_key(ks_bytes key)
{
    return key.len == sizeof version_key && key.data &&
           memcmp(key.data, version_key, sizeof version_key) == 0;
}

/* Tell the crash handler that this thread now runs `call` of ctx's
 * instance (with the task's current record, if any); ks_crash_leave(s)
 * after the call. */
static void enter(ks_crash_scope *s, const struct ks_ctx *ctx, const char *call)
{
    const ks_task *t = ctx->task;
    const ks_plugin *pl = ctx->build.plugin;
    *s = (ks_crash_scope){.call = call,
                          .node = ctx->node->name,
                          .plugin = pl ? pl->desc->name : "?",
                          .build = pl ? pl->desc->build_id : "?",
                          .path = pl ? pl->path : "?",
                          .task = t->partition,
                          .topic = t->current ? t->current->topic : NULL,
                          .partition = t->current ? t->current->partition : -1,
                          .offset = t->current ? t->current->offset : -1};
    ks_crash_enter(s);
}

static int open_stores(ks_task *task, char *err, size_t errlen)
{
    const ks_pipeline *p = task->topo->pipeline;
    if (p->store_count == 0)
        return 0;
    ks_layout_task_dir(p->state_dir, p->application, task->partition, task->state_dir,
                       sizeof task->state_dir);
    if (ks_mkdir_p(task->state_dir, 0755) != 0) {
        snprintf(err, errlen, "%s: cannot create state directory: %s", task->state_dir,
                 strerror(errno));
        return -1;
    }
    uint64_t map_size = 0;
    for (size_t s = 0; s < p->store_count; s++)
        map_size += p->stores[s].map_size;
    if (ks_store_env_open(task->state_dir, map_size, (unsigned)p->store_count,
                          &task->env, err, errlen) != 0)
        return -1;
    task->dbs = calloc(p->store_count, sizeof *task->dbs);
    task->changelog_hi = calloc(p->store_count, sizeof *task->changelog_hi);
    if (!task->dbs || !task->changelog_hi) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t s = 0; s < p->store_count; s++) {
        task->changelog_hi[s] = -1;
        if (ks_store_db_open(task->env, p->stores[s].name, &task->dbs[s]) != 0) {
            snprintf(err, errlen, "%s: cannot open store '%s'", task->state_dir,
                     p->stores[s].name);
            return -1;
        }
    }
    return 0;
}

ks_node_build ks_task_node_build(const ks_topo_node *n)
{
    ks_node_build b;
    b.plugin = __atomic_load_n(&n->plugin, __ATOMIC_ACQUIRE);
    b.ptype = __atomic_load_n(&n->ptype, __ATOMIC_ACQUIRE);
    b.fns = __atomic_load_n(&n->fns, __ATOMIC_ACQUIRE);
    b.fn_count = n->fn_count;
    return b;
}

/* Set up `ctx` for node `n` on build `b` and run init. */
static int start_ctx(ks_task *task, struct ks_ctx *ctx, const ks_topo_node *n,
                     const ks_node_build *b, char *err, size_t errlen)
{
    ctx->magic = KS_CTX_MAGIC;
    ctx->build = *b;
    ctx->task = task;
    ctx->node = n;
    ctx->stores = calloc(n->store_count + 1, sizeof *ctx->stores);
    if (!ctx->stores) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t s = 0; s < n->store_count; s++) {
        ctx->stores[s].ctx = ctx;
        ctx->stores[s].index = n->stores[s];
        ctx->stores[s].db = task->dbs ? task->dbs[n->stores[s]] : NULL;
    }
    ctx->phase = KS_PHASE_INIT;
    ks_crash_scope cs;
    enter(&cs, ctx, "init");
    ks_verdict v = b->ptype->init ? b->ptype->init(ctx, &ctx->state) : KS_OK;
    ks_crash_leave(&cs);
    ctx->phase = KS_PHASE_NONE;
    if (v != KS_OK) {
        snprintf(err, errlen, "%s: init of node '%s' (%s, plugin %s, build %s) failed",
                 task->where, n->name, n->cfg->type, b->plugin->path,
                 b->plugin->desc->build_id);
        return -1;
    }
    ctx->inited = 1;
    return 0;
}

static int init_ctx(ks_task *task, const ks_topo_node *n, char *err, size_t errlen)
{
    ks_node_build b = ks_task_node_build(n);
    task->live[n->index] = &task->ctxs[n->index];
    return start_ctx(task, &task->ctxs[n->index], n, &b, err, errlen);
}

/* Close the instance in ctx (when inited) and free what the ctx owns. */
static void stop_ctx(struct ks_ctx *ctx)
{
    if (!ctx)
        return;
    if (ctx->inited && ctx->build.ptype->close) {
        ctx->phase = KS_PHASE_CLOSE;
        ks_crash_scope cs;
        enter(&cs, ctx, "close");
        ctx->build.ptype->close(ctx, ctx->state);
        ks_crash_leave(&cs);
    }
    ctx->inited = 0;
    for (size_t s = 0; ctx->stores && s < ctx->node->store_count; s++)
        ks_global_reader_end(&ctx->stores[s].global);
    free(ctx->stores);
    ctx->stores = NULL;
    ks_json_writer_free(ctx->json);
    ctx->json = NULL;
    if (ctx->heap)
        free(ctx);
}

int ks_task_create(const ks_topology *topo, int32_t partition, const ks_task_io *io,
                   ks_task **out, char *err, size_t errlen)
{
    *out = NULL;
    ks_task *task = calloc(1, sizeof *task);
    if (!task) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    task->topo = topo;
    task->partition = partition;
    task->io = *io;
    task->stream_time = -1;
    task->sub_time = malloc((size_t)(topo->sub_count > 0 ? topo->sub_count : 1) *
                            sizeof *task->sub_time);
    for (int s = 0; task->sub_time && s < (topo->sub_count > 0 ? topo->sub_count : 1); s++)
        task->sub_time[s] = -1;
    snprintf(task->where, sizeof task->where, "task-%d", (int)partition);
    task->ctxs = calloc(topo->node_count, sizeof *task->ctxs);
    task->live = calloc(topo->node_count + 1, sizeof *task->live);
    task->next = calloc(topo->node_count + 1, sizeof *task->next);
    if (!task->ctxs || !task->live || !task->next || !task->sub_time ||
        open_stores(task, err, errlen) != 0)
        goto fail;
    if (ks_task_cache_open(task) != 0) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < topo->node_count; i++)
        if (topo->nodes[i].kind == KS_NODE_PROCESSOR &&
            init_ctx(task, &topo->nodes[i], err, errlen) != 0)
            goto fail;
    *out = task;
    return 0;
fail:
    ks_task_destroy(task);
    return -1;
}

int ks_task_open_stores(const ks_topology *topo, int32_t partition, ks_task **out, char *err,
                        size_t errlen)
{
    *out = NULL;
    ks_task *task = calloc(1, sizeof *task);
    if (!task) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    task->topo = topo;
    task->partition = partition;
    task->stream_time = -1;
    snprintf(task->where, sizeof task->where, "standby-%d", (int)partition);
    if (open_stores(task, err, errlen) != 0) {
        ks_task_destroy(task);
        return -1;
    }
    *out = task;
    return 0;
}

void ks_task_destroy(ks_task *task)
{
    if (!task)
        return;
    for (size_t i = 0; task->ctxs && task->live && task->next && i < task->topo->node_count;
         i++) {
        stop_ctx(task->next[i]);
        if (task->live[i] != &task->ctxs[i])
            stop_ctx(task->live[i]);
        stop_ctx(&task->ctxs[i]);
    }
    ks_task_cache_free(task);
    free(task->ctxs);
    free(task->sub_time);
    free(task->live);
    free(task->next);
    if (task->env) {
        ks_store_abort(task->env);
        ks_store_env_close(task->env);
    }
    free(task->dbs);
    free(task->changelog_hi);
    free(task);
}

/* ---- the walk ----------------------------------------------------------- */

static ks_verdict worst(ks_verdict a, ks_verdict b) { return a > b ? a : b; }

int ks_task_dispatch(ks_task *task, const ks_topo_node *from, const ks_topo_node *child,
                     const ks_record *rec)
{
    /* children see the source record's metadata, as in Kafka Streams */
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
    if (child->kind == KS_NODE_SINK) {
        int rc = task->io.emit(task->io.arg, task, child, &r);
        if (rc != 0) {
            if (!task->sink_err || rc == KS_ERR_INVALID)
                task->sink_err = rc;
            task->verdict = worst(task->verdict, KS_RETRY);
            return rc;
        }
        task->records_out++;
        return 0;
    }
    struct ks_ctx *ctx = task->live[child->index];
    ks_phase saved = ctx->phase;
    const char *saved_input = ctx->input;
    ctx->phase = KS_PHASE_PROCESS;
    ctx->input = from->name;
    ks_crash_scope cs;
    enter(&cs, ctx, "process");
    ks_verdict v = ctx->build.ptype->process(ctx, ctx->state, &r);
    ks_crash_leave(&cs);
    ctx->phase = saved;
    ctx->input = saved_input;
    if (v != KS_OK) {
        task->verdict = worst(task->verdict, v);
        return KS_ERR_STATE;
    }
    return 0;
}

ks_verdict ks_task_process(ks_task *task, const ks_topo_node *source, const ks_record *rec)
{
    task->current = rec;
    task->outbox_calls = 0;
    task->sink_err = 0;
    task->skip_reason[0] = '\0';
    task->verdict = ks_task_run_migrations(task);
    task->records_in++;
    int64_t *now = &task->sub_time[source->sub];
    if (rec->timestamp > *now)
        *now = rec->timestamp;
    if (rec->timestamp > task->stream_time)
        task->stream_time = rec->timestamp;
    /* a table's record updates its store before its children see it */
    if (source->source && source->source->table && task->verdict == KS_OK)
        task->verdict = ks_table_apply(task, source, rec);
    for (size_t c = 0; c < source->child_count && task->verdict == KS_OK; c++)
        ks_task_dispatch(task, source, &task->topo->nodes[source->children[c]], rec);
    /* stream-time punctuations due after this record */
    for (size_t i = 0; i < task->topo->node_count && task->verdict == KS_OK; i++) {
        struct ks_ctx *ctx = task->live[i];
        if (!ctx || ctx->node->sub != source->sub)
            continue; /* other sub-topologies' time did not move */
        ks_schedule *s = &ctx->schedules[KS_TIME_STREAM];
        if (!ctx->inited || !s->interval || !ctx->build.ptype->punctuate)
            continue;
        if (s->next == 0)
            s->next = *now + s->interval;
        if (*now >= s->next) {
            ctx->phase = KS_PHASE_PUNCTUATE;
            ks_crash_scope cs;
            enter(&cs, ctx, "punctuate");
            ks_verdict v = ctx->build.ptype->punctuate(ctx, ctx->state, KS_TIME_STREAM,
                                                       *now);
            ks_crash_leave(&cs);
            ctx->phase = KS_PHASE_NONE;
            task->verdict = worst(task->verdict, v);
            s->next = *now + s->interval;
        }
    }
    task->current = NULL;
    ks_table_release_global_reads(task);
    return task->verdict;
}

ks_verdict ks_task_punctuate_wallclock(ks_task *task, int64_t now_ms)
{
    task->sink_err = 0;
    task->verdict = ks_task_run_migrations(task);
    for (size_t i = 0; i < task->topo->node_count && task->verdict == KS_OK; i++) {
        struct ks_ctx *ctx = task->live[i];
        if (!ctx)
            continue;
        ks_schedule *s = &ctx->schedules[KS_TIME_WALLCLOCK];
        if (!ctx->inited || !s->interval || !ctx->build.ptype->punctuate)
            continue;
        if (s->next == 0)
            s->next = now_ms + s->interval;
        if (now_ms >= s->next) {
            ctx->phase = KS_PHASE_PUNCTUATE;
            ks_crash_scope cs;
            enter(&cs, ctx, "punctuate");
            ks_verdict v =
                ctx->build.ptype->punctuate(ctx, ctx->state, KS_TIME_WALLCLOCK, now_ms);
            ks_crash_leave(&cs);
            ctx->phase = KS_PHASE_NONE;
            task->verdict = worst(task->verdict, v);
            s->next = now_ms + s->interval;
        }
    }
    ks_table_release_global_reads(task);
    return task->verdict;
}

/* ---- store batches ------------------------------------------------------ */

int ks_task_begin(ks_task *task)
{
    return task->env ? ks_store_begin(task->env) : 0;
}

/* The batch ended: migrations that ran in it are done when it committed,
 * and must run again (in the replay) when it aborted. */
static void migrations_end(ks_task *task, int committed)
{
    for (size_t i = 0; task->live && i < task->topo->node_count; i++) {
        struct ks_ctx *ctx = task->live[i];
        if (!ctx || !ctx->migrated_in_batch)
            continue;
        ctx->migrated_in_batch = 0;
        if (committed)
            ctx->migrate_pending = ctx->stamp_pending = 0;
    }
}

/* Each store's checkpoint, in the open batch: the changelog offset after
 * the last record it wrote (stores that wrote none keep theirs). */
static int write_checkpoints(ks_task *task)
{
    const ks_pipeline *p = task->topo->pipeline;
    for (size_t s = 0; s < p->store_count; s++) {
        if (task->changelog_hi[s] < 0)
            continue;
        int rc = ks_store_checkpoint_set(task->dbs[s], task->changelog_hi[s] + 1);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int ks_task_prepare_stores(ks_task *task)
{
    if (!task->env || !ks_store_in_txn(task->env))
        return 0;
    int rc = write_checkpoints(task);
    return rc ? rc : ks_store_prepare_commit(task->env);
}

int ks_task_commit_stores(ks_task *task)
{
    if (!task->env || !ks_store_in_txn(task->env)) {
        migrations_end(task, 1);
        return 0;
    }
    int rc = write_checkpoints(task);
    if (rc != 0) {
        ks_task_abort_stores(task);
        return rc;
    }
    int migrated = ks_task_migrated_in_batch(task);
    rc = ks_store_commit(task->env);
    for (size_t s = 0; s < task->topo->pipeline->store_count; s++)
        task->changelog_hi[s] = -1;
    migrations_end(task, rc == 0);
    if (rc == 0 && migrated)
        ks_fault_point(KS_FAULT_MIGRATE_COMMITTED);
    return rc;
}

void ks_task_abort_stores(ks_task *task)
{
    ks_task_cache_clear(task);
    migrations_end(task, 0);
    if (!task->env)
        return;
    ks_store_abort(task->env);
    for (size_t s = 0; s < task->topo->pipeline->store_count; s++)
        task->changelog_hi[s] = -1;
}

const char *ks_task_store_message(const ks_task *task)
{
    return task->env ? ks_store_last_error(task->env) : "";
}

int ks_task_batch_error(const ks_task *task, const char **msg)
{
    return task->env ? ks_store_batch_error(task->env, msg) : 0;
}

int ks_task_restore_put(ks_task *task, int store, ks_bytes key, const ks_bytes *value,
                        int64_t offset)
{
    int rc = ks_store_begin(task->env);
    if (rc == 0 && ks_task_is_version_key(key)) {
        if (!value || value->len != 4)
            return KS_ERR_IO;
        const unsigned char *b = value->data;
        rc = ks_store_version_set(task->dbs[store], (uint32_t)b[0] << 24 |
                                                        (uint32_t)b[1] << 16 |
                                                        (uint32_t)b[2] << 8 | b[3]);
    } else if (rc == 0) {
        rc = value ? ks_store_put(task->dbs[store], key, *value)
                   : ks_store_del(task->dbs[store], key);
    }
    if (rc == 0 && offset > task->changelog_hi[store])
        task->changelog_hi[store] = offset;
    return rc;
}

int ks_task_restore_wipe(ks_task *task, int store, int64_t start)
{
    ks_task_cache_clear(task);
    int rc = ks_store_begin(task->env);
    if (rc == 0)
        rc = ks_store_clear(task->dbs[store]);
    if (rc == 0 && start - 1 > task->changelog_hi[store])
        task->changelog_hi[store] = start - 1; /* the checkpoint becomes `start` */
    return rc;
}

int64_t ks_task_checkpoint(ks_task *task, int store)
{
    int64_t off;
    if (!task->dbs || ks_store_checkpoint_get(task->dbs[store], &off) != 0)
        return -1;
    return off;
}

/* ---- hot deploy ------------------------------------------------------------ */

int ks_task_prepare_node(ks_task *task, const ks_topo_node *n, const ks_node_build *b,
                         uint32_t migrate_from, char *err, size_t errlen)
{
    struct ks_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    ctx->heap = 1;
    if (start_ctx(task, ctx, n, b, err, errlen) != 0) {
        stop_ctx(ctx);
        return -1;
    }
    if (b->ptype->state_version != migrate_from) {
        ctx->migrate_pending = 1;
        ctx->migrate_from = migrate_from;
    }
    stop_ctx(task->next[n->index]);
    task->next[n->index] = ctx;
    return 0;
}

int ks_task_swap_node(ks_task *task, int index)
{
    struct ks_ctx *next = task->next[index];
    if (!next)
        return 0;
    struct ks_ctx *old = task->live[index];
    task->live[index] = next;
    task->next[index] = NULL;
    /* What the new instance owes follows from the format the stores are
     * in now (no batch is open): the old instance's source format when it
     * still owed a migration, else its own; an unrecorded version is
     * recorded by whichever instance runs first. */
    if (old && old->inited) {
        uint32_t data = old->migrate_pending ? old->migrate_from
                                             : old->build.ptype->state_version;
        next->migrate_from = data;
        next->migrate_pending = data != next->build.ptype->state_version;
        next->stamp_pending = !next->migrate_pending && old->stamp_pending;
    }
    stop_ctx(old); /* frees a heap ctx; &ctxs[i] stays, closed */
    return 1;
}

void ks_task_discard_prepared(ks_task *task)
{
    for (size_t i = 0; task->next && i < task->topo->node_count; i++) {
        stop_ctx(task->next[i]);
        task->next[i] = NULL;
    }
}

const struct ks_ctx *ks_task_live(const ks_task *task, int index)
{
    return task->live ? task->live[index] : NULL;
}

/* Record the build's state version in every store of ctx's node: LMDB
 * __meta and a version record in the store's changelog, in the open
 * batch. 0 or a negative ks_err. */
static int write_versions(ks_task *task, struct ks_ctx *ctx)
{
    const ks_topo_node *n = ctx->node;
    uint32_t v = ctx->build.ptype->state_version;
    unsigned char enc[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16),
                            (unsigned char)(v >> 8), (unsigned char)v};
    int rc = ks_task_begin(task);
    for (size_t s = 0; rc == 0 && s < n->store_count; s++) {
        int idx = n->stores[s];
        if (!ks_cfg_store_writable(task->topo->pipeline, n->cfg, idx))
            continue; /* a table's format is the engine's (table.h); a
                         node's table's, that node's */
        rc = ks_store_version_set(task->dbs[idx], v);
        ks_bytes val = {enc, sizeof enc};
        if (rc == 0 && task->io.changelog && task->topo->pipeline->stores[idx].changelog)
            rc = task->io.changelog(task->io.arg, task, idx, ks_task_version_key(), &val);
    }
    return rc;
}

ks_verdict ks_task_run_migrations(ks_task *task)
{
    ks_verdict worst_v = KS_OK;
    for (size_t i = 0; task->live && i < task->topo->node_count; i++) {
        struct ks_ctx *ctx = task->live[i];
        if (!ctx || !ctx->inited || ctx->migrated_in_batch || !task->dbs ||
            (!ctx->migrate_pending && !ctx->stamp_pending))
            continue;
        ks_verdict v = KS_OK;
        if (ctx->migrate_pending) {
            if (!ctx->build.ptype->migrate)
                return KS_FATAL; /* refused at open and at reload: cannot happen */
            ks_fault_point(KS_FAULT_BEFORE_MIGRATE);
            ks_info(task->where, "node %s: migrating its stores from state version %u to %u "
                                 "(plugin %s, build %s)",
                    ctx->node->name, (unsigned)ctx->migrate_from,
                    (unsigned)ctx->build.ptype->state_version, ctx->build.plugin->desc->name,
                    ctx->build.plugin->desc->build_id);
            ks_phase saved = ctx->phase;
            ctx->phase = KS_PHASE_PROCESS; /* migrate may read and write stores */
            ctx->migrating = 1;
            /* a store write that failed inside migrate() fails the
             * migration even when migrate() returns KS_OK */
            ks_verdict before = task->verdict;
            task->verdict = KS_OK;
            ks_crash_scope cs;
            enter(&cs, ctx, "migrate");
            v = worst(ctx->build.ptype->migrate(ctx, ctx->migrate_from), task->verdict);
            ks_crash_leave(&cs);
            task->verdict = before;
            ctx->migrating = 0;
            ctx->phase = saved;
        }
        if (v == KS_OK && write_versions(task, ctx) != 0)
            v = KS_RETRY; /* store or changelog failed: the batch aborts */
        if (v == KS_OK) {
            ctx->migrated_in_batch = 1 + ctx->migrate_pending;
            if (ctx->migrate_pending) {
                ks_fault_point(KS_FAULT_AFTER_MIGRATE);
                ks_info(task->where,
                        "node %s: migrated its stores from state version %u to %u; commits "
                        "with this batch",
                        ctx->node->name, (unsigned)ctx->migrate_from,
                        (unsigned)ctx->build.ptype->state_version);
            }
        } else {
            ks_warn(task->where, "node %s: migration from state version %u to %u %s: the "
                                 "batch aborts and it runs again",
                    ctx->node->name, (unsigned)ctx->migrate_from,
                    (unsigned)ctx->build.ptype->state_version,
                    v == KS_FATAL ? "failed (fatal)" : "did not complete");
        }
        worst_v = worst(worst_v, v);
    }
    return worst_v;
}

int ks_task_migration_pending(const ks_task *task)
{
    for (size_t i = 0; task->dbs && task->live && i < task->topo->node_count; i++) {
        const struct ks_ctx *ctx = task->live[i];
        if (ctx && ctx->inited && !ctx->migrated_in_batch &&
            (ctx->migrate_pending || ctx->stamp_pending))
            return 1;
    }
    return 0;
}

int ks_task_versions_in_batch(const ks_task *task)
{
    for (size_t i = 0; task->live && i < task->topo->node_count; i++)
        if (task->live[i] && task->live[i]->migrated_in_batch)
            return 1;
    return 0;
}

int ks_task_migrated_in_batch(const ks_task *task)
{
    for (size_t i = 0; task->live && i < task->topo->node_count; i++)
        if (task->live[i] && task->live[i]->migrated_in_batch == 2)
            return 1;
    return 0;
}

int ks_task_check_versions(ks_task *task, char *err, size_t errlen)
{
    if (!task->dbs)
        return 0;
    const ks_pipeline *p = task->topo->pipeline;
    for (size_t i = 0; task->live && i < task->topo->node_count; i++) {
        struct ks_ctx *ctx = task->live[i];
        if (!ctx || !ctx->inited || ctx->node->store_count == 0)
            continue;
        const ks_topo_node *n = ctx->node;
        const ks_processor_type *pt = ctx->build.ptype;
        const ks_plugin *pl = ctx->build.plugin;
        /* the oldest format among the node's stores is what migrate() gets */
        int found = 0;
        uint32_t stored = 0;
        const char *store = p->stores[n->stores[0]].name;
        for (size_t s = 0; s < n->store_count; s++) {
            uint32_t v;
            if (!ks_cfg_store_writable(p, n->cfg, n->stores[s]))
                continue; /* read by the node, never written: not its version */
            int rc = ks_store_version_get(task->dbs[n->stores[s]], &v);
            if (rc == KS_ERR_NOT_FOUND)
                continue;
            if (rc != 0) {
                snprintf(err, errlen, "%s: %s", task->where, ks_store_last_error(task->env));
                ks_store_read_end(task->env);
                return -1;
            }
            if (!found || v < stored) {
                stored = v;
                store = p->stores[n->stores[s]].name;
            }
            found = 1;
        }
        ks_store_read_end(task->env);
        ctx->migrate_pending = ctx->stamp_pending = 0;
        if (!found) {
            ctx->stamp_pending = 1;
            continue;
        }
        if (stored > pt->state_version) {
            snprintf(err, errlen,
                     "%s: node '%s': store '%s' holds state version %u, written by a newer "
                     "build; build %s of plugin %s (%s) writes version %u and cannot read "
                     "it: kstreams does not downgrade state (deploy a build with "
                     "state_version %u or later)",
                     task->where, n->name, store, (unsigned)stored, pl->desc->build_id,
                     pl->desc->name, pl->path, (unsigned)pt->state_version, (unsigned)stored);
            return -1;
        }
        if (stored < pt->state_version) {
            if (!pt->migrate) {
                snprintf(err, errlen,
                         "%s: node '%s': store '%s' holds state version %u; build %s of "
                         "plugin %s (%s) writes version %u and has no migrate()",
                         task->where, n->name, store, (unsigned)stored, pl->desc->build_id,
                         pl->desc->name, pl->path, (unsigned)pt->state_version);
                return -1;
            }
            ctx->migrate_pending = 1;
            ctx->migrate_from = stored;
            ks_info(task->where,
                    "node %s: store '%s' holds state version %u, build %s writes %u: "
                    "migrates before its first record",
                    n->name, store, (unsigned)stored, pl->desc->build_id,
                    (unsigned)pt->state_version);
        }
    }
    return 0;
}
