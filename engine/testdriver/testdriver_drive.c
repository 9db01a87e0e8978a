/*
 * testdriver_drive.c - what makes the driver's tasks process: records
 * piped into a source (partitioned like a Kafka producer, checked against
 * the source's serdes) and the wall clock advanced (each due punctuation
 * in time order). Each ends its batch like a worker (finish).
 */
#include <stdio.h>
#include <string.h>

#include "runtime/global_table.h"
#include "runtime/serde.h"
#include "runtime/task.h"
#include "runtime/topology.h"
#include "testdriver/testdriver_internal.h"

/* ---- piping ------------------------------------------------------------- */

static const ks_topo_node *find_source(const ks_driver *drv, const char *name)
{
    for (size_t i = 0; name && i < drv->topo->node_count; i++) {
        const ks_topo_node *n = &drv->topo->nodes[i];
        if (n->kind == KS_NODE_SOURCE && strcmp(n->name, name) == 0)
            return n;
    }
    return NULL;
}

/* A record piped to a global table: applied to the shared store at once
 * (as the engine's global thread does), partitioned over the table's
 * `partitions`; no task processes it. */
static int pipe_global(ks_driver *drv, const ks_cfg_source *t, const ks_record *rec)
{
    const ks_pipeline *p = drv->topo->pipeline;
    int gi = (int)(t - p->globals);
    int32_t part = rec->partition >= 0 ? rec->partition
                   : rec->key ? ks_driver_partition_for(rec->key, rec->key_len, t->partitions)
                              : 0;
    int64_t offset = drv->next_global[gi]++;
    const char *why = NULL;
    if (ks_serde_check(t->key_serde, rec->key, rec->key_len, &why) != 0 ||
        ks_serde_check(t->value_serde, rec->value, rec->value_len, &why) != 0) {
        set_err(drv, "poison record at %s/%d/%lld: %s", t->topic, (int)part,
                (long long)offset, why);
        return KS_SKIP;
    }
    ks_bytes key = {rec->key, rec->key_len}, val = {rec->value, rec->value_len};
    int rc = ks_global_apply(drv->global, gi, part, offset, key, rec->value ? &val : NULL,
                             rec->timestamp);
    if (rc == 0)
        rc = ks_global_commit(drv->global);
    if (rc != 0) {
        ks_global_abort(drv->global);
        set_err(drv, "global table %s: the store write failed (%d)", t->name, rc);
    }
    return rc;
}

int ks_driver_pipe_record(ks_driver *drv, const char *source, const ks_record *rec)
{
    if (!drv || drv->magic != KS_DRIVER_MAGIC || !rec)
        return KS_ERR_INVALID;
    drv->err[0] = '\0';
    const ks_topo_node *src = find_source(drv, source);
    const ks_cfg_source *global = ks_pipeline_global(drv->topo->pipeline, source);
    if (!src && global)
        return pipe_global(drv, global, rec);
    if (!src) {
        set_err(drv, "no source named '%s' in %s", source ? source : "(null)",
                drv->topo->pipeline->file);
        return KS_ERR_NOT_FOUND;
    }
    int32_t part = rec->partition;
    if (part >= drv->partitions) {
        set_err(drv, "partition %d out of range (the driver has %d)", (int)part,
                (int)drv->partitions);
        return KS_ERR_INVALID;
    }
    if (part < 0)
        part = rec->key ? ks_driver_partition_for(rec->key, rec->key_len, drv->partitions)
                        : (int32_t)(drv->round_robin++ % (uint32_t)drv->partitions);
    ks_record r = *rec;
    r.topic = src->source->topic;
    r.partition = part;
    r.offset = drv->next_input[part]++;
    const char *why = NULL;
    if (ks_serde_check(src->source->key_serde, r.key, r.key_len, &why) != 0 ||
        ks_serde_check(src->source->value_serde, r.value, r.value_len, &why) != 0) {
        set_err(drv, "poison record at %s/%d/%lld: %s", r.topic, (int)part,
                (long long)r.offset, why);
        return KS_SKIP;
    }
    ks_verdict v = ks_task_process(drv->tasks[part], src, &r);
    if (v != KS_OK && !drv->err[0])
        set_err(drv, "record %s/%d/%lld: a processor returned %s", r.topic, (int)part,
                (long long)r.offset,
                v == KS_SKIP ? "skip" : v == KS_RETRY ? "retry" : "fatal");
    return finish(drv, v);
}

int ks_driver_pipe(ks_driver *drv, const char *source, const void *key, size_t key_len,
                   const void *value, size_t value_len, int64_t timestamp)
{
    ks_record rec = {.key = key,
                     .key_len = key ? key_len : 0,
                     .value = value,
                     .value_len = value ? value_len : 0,
                     .timestamp = timestamp,
                     .partition = -1,
                     .offset = -1};
    return ks_driver_pipe_record(drv, source, &rec);
}

/* ---- time --------------------------------------------------------------- */

static void set_clock(ks_driver *drv, int64_t now)
{
    drv->wallclock = now;
    for (int32_t p = 0; p < drv->partitions; p++)
        drv->tasks[p]->wallclock = now;
}

/* The earliest armed wall-clock punctuation due at or before `until`;
 * 0 when none. */
static int next_due(const ks_driver *drv, int64_t until, int64_t *due)
{
    int found = 0;
    for (int32_t p = 0; p < drv->partitions; p++) {
        const ks_task *task = drv->tasks[p];
        for (size_t i = 0; i < drv->topo->node_count; i++) {
            const struct ks_ctx *ctx = &task->ctxs[i];
            const ks_schedule *s = &ctx->schedules[KS_TIME_WALLCLOCK];
            if (!ctx->inited || !s->interval || !ctx->node->ptype->punctuate || s->next == 0 ||
                s->next > until)
                continue;
            if (!found || s->next < *due)
                *due = s->next;
            found = 1;
        }
    }
    return found;
}

int ks_driver_advance_wallclock(ks_driver *drv, int64_t ms)
{
    if (!drv || drv->magic != KS_DRIVER_MAGIC || ms < 0)
        return KS_ERR_INVALID;
    drv->err[0] = '\0';
    int64_t target = drv->wallclock + ms, due = 0;
    ks_verdict v = KS_OK;
    while (v == KS_OK && next_due(drv, target, &due)) {
        set_clock(drv, due);
        for (int32_t p = 0; p < drv->partitions && v == KS_OK; p++) {
            v = ks_task_punctuate_wallclock(drv->tasks[p], due);
            if (v != KS_OK && !drv->err[0])
                set_err(drv, "task-%d: a wall-clock punctuation at %lld returned %s", (int)p,
                        (long long)due,
                        v == KS_SKIP ? "skip" : v == KS_RETRY ? "retry" : "fatal");
        }
    }
    set_clock(drv, target);
    /* arms schedules not armed yet; everything due has fired */
    for (int32_t p = 0; p < drv->partitions && v == KS_OK; p++)
        v = ks_task_punctuate_wallclock(drv->tasks[p], target);
    return finish(drv, v);
}
