/*
 * testdriver_io.c - what the driver's tasks would send to Kafka, kept in
 * memory: sink records (checked against the sink's serdes), outbox
 * requests as events, changelog records "delivered" at once; and the
 * batches over every task: commit, abort (dropping what the batch wrote),
 * repartition records read back by their internal sources.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "base/grow.h"
#include "outbox/outbox.h"
#include "outbox/outbox_requests.h"
#include "runtime/serde.h"
#include "state/store.h"
#include "runtime/task.h"
#include "runtime/topology.h"
#include "testdriver/testdriver_internal.h"

/* ---- io callbacks: what a worker would send to Kafka ------------------- */

void *ks_drv_dup_bytes(const void *p, size_t n)
{
    unsigned char *c = malloc(n + 1); /* +1: never malloc(0); NUL for text */
    if (c) {
        if (n)
            memcpy(c, p, n);
        c[n] = '\0';
    }
    return c;
}

void ks_drv_out_free(drv_out *o)
{
    free(o->key);
    free(o->value);
    for (size_t i = 0; i < o->header_count; i++) {
        free((char *)o->headers[i].name);
        free((void *)o->headers[i].value);
    }
    free(o->headers);
    memset(o, 0, sizeof *o);
}

static int on_emit(void *arg, ks_task *task, const ks_topo_node *sink, const ks_record *rec)
{
    ks_driver *drv = arg;
    const ks_cfg_sink *cs = sink->sink;
    const char *why = NULL;
    if (ks_serde_check(cs->key_serde, rec->key, rec->key_len, &why) != 0 ||
        ks_serde_check(cs->value_serde, rec->value, rec->value_len, &why) != 0) {
        set_err(drv, "%s: record for sink '%s' (topic %s) does not match its serde: %s",
                task->where, sink->name, cs->topic, why);
        return KS_ERR_INVALID;
    }
    /* a repartition topic is read back by tasks of the driver: as many
     * partitions as it has tasks */
    drv_out **arr = cs->feeds ? &drv->rp : &drv->out;
    size_t *n = cs->feeds ? &drv->nrp : &drv->nout, *capp = cs->feeds ? &drv->rp_cap : &drv->cap;
    drv_out *grown = ks_grow(*arr, capp, *n, sizeof *grown, 64);
    if (!grown)
        return KS_ERR_NOMEM;
    *arr = grown;
    drv_out *o = &(*arr)[*n];
    memset(o, 0, sizeof *o);
    o->sink = sink;
    o->task = task->partition;
    o->timestamp = rec->timestamp;
    int32_t parts = !cs->feeds && cs->create && cs->partitions > 0 ? cs->partitions
                                                                   : drv->partitions;
    o->partition = rec->key ? ks_driver_partition_for(rec->key, rec->key_len, parts) : -1;
    o->key_len = rec->key_len;
    o->value_len = rec->value_len;
    int nomem = 0;
    if (rec->key && !(o->key = dup_bytes(rec->key, rec->key_len)))
        nomem = 1;
    if (rec->value && !(o->value = dup_bytes(rec->value, rec->value_len)))
        nomem = 1;
    if (!nomem && rec->header_count) {
        o->headers = calloc(rec->header_count, sizeof *o->headers);
        nomem = !o->headers;
        for (size_t i = 0; !nomem && i < rec->header_count; i++) {
            const ks_header *h = &rec->headers[i];
            o->header_count = i + 1;
            o->headers[i].name = dup_bytes(h->name, strlen(h->name));
            o->headers[i].value = h->value ? dup_bytes(h->value, h->value_len) : NULL;
            o->headers[i].value_len = h->value_len;
            nomem = !o->headers[i].name || (h->value && !o->headers[i].value);
        }
    }
    if (nomem) {
        out_free(o);
        return KS_ERR_NOMEM;
    }
    if (cs->feeds && o->partition < 0)
        o->partition = (int32_t)(drv->round_robin++ % (uint32_t)drv->partitions);
    (*n)++;
    return 0;
}

void ks_drv_event_free(drv_event *e)
{
    free(e->user);
    free(e->payload);
    free(e->in_topic);
    memset(e, 0, sizeof *e);
}

/* api->outbox_enqueue's request record for `<application>-outbox-requests`
 * (key = user, value = payload, header ks-event-id = the derived id): kept
 * as an outbox event. Any other topic is refused as before this callback
 * existed. */
static int on_emit_topic(void *arg, ks_task *task, const char *topic, const ks_record *rec)
{
    ks_driver *drv = arg;
    const ks_pipeline *p = drv->topo->pipeline;
    char want[512] = "";
    if (p->outbox)
        ks_outbox_requests_topic(p, want, sizeof want);
    const ks_header *idh = NULL;
    for (size_t i = 0; i < rec->header_count; i++)
        if (rec->headers[i].name && strcmp(rec->headers[i].name, KS_OUTBOX_ID_HEADER) == 0)
            idh = &rec->headers[i];
    if (!p->outbox || strcmp(topic, want) != 0 || !idh || !idh->value ||
        idh->value_len != KS_OUTBOX_ID_LEN || !rec->key || !rec->key_len) {
        set_err(drv, "%s: the test driver keeps no records for topic %s", task->where, topic);
        return KS_ERR_UNSUPPORTED;
    }
    drv_event *grown = ks_grow(drv->ev, &drv->ev_cap, drv->nev, sizeof *grown, 16);
    if (!grown)
        return KS_ERR_NOMEM;
    drv->ev = grown;
    drv_event *e = &drv->ev[drv->nev];
    memset(e, 0, sizeof *e);
    memcpy(e->id, idh->value, KS_OUTBOX_ID_LEN);
    e->id[KS_OUTBOX_ID_LEN] = '\0';
    const ks_record *in = task->current;
    e->user_len = rec->key_len;
    e->payload_len = rec->value ? rec->value_len : 0;
    e->in_partition = in ? in->partition : task->partition;
    e->in_offset = in ? in->offset : -1;
    e->rank = task->outbox_calls;
    e->task = task->partition;
    e->timestamp = rec->timestamp;
    e->user = dup_bytes(rec->key, rec->key_len);
    e->payload = dup_bytes(rec->value, e->payload_len);
    const char *t = in && in->topic ? in->topic : "";
    e->in_topic = dup_bytes(t, strlen(t));
    if (!e->user || !e->payload || !e->in_topic) {
        event_free(e);
        return KS_ERR_NOMEM;
    }
    drv->nev++;
    return 0;
}

/* The changelog record is "delivered" at once at the next offset of its
 * (task, store), as the worker's delivery report would report it. */
static int on_changelog(void *arg, ks_task *task, int store, ks_bytes key,
                        const ks_bytes *value)
{
    (void)key;
    (void)value;
    ks_driver *drv = arg;
    size_t nstores = drv->topo->pipeline->store_count;
    int64_t *next = &drv->next_cl[(size_t)task->partition * nstores + (size_t)store];
    task->changelog_hi[store] = (*next)++;
    return 0;
}

ks_task_io ks_drv_task_io(ks_driver *drv)
{
    return (ks_task_io){
        .arg = drv, .emit = on_emit, .changelog = on_changelog, .emit_topic = on_emit_topic};
}

/* ---- batches ------------------------------------------------------------- */

static void abort_all(ks_driver *drv)
{
    for (int32_t p = 0; p < drv->partitions; p++)
        if (drv->tasks[p])
            ks_task_abort_stores(drv->tasks[p]);
    /* a read_committed consumer never sees the aborted batch's records */
    size_t w = drv->head;
    for (size_t i = drv->head; i < drv->nout; i++) {
        drv_out *o = &drv->out[i];
        if (!o->committed && !o->read && drv->handed != i + 1) {
            out_free(o);
            continue;
        }
        if (drv->handed == i + 1)
            drv->handed = w + 1;
        if (w != i)
            drv->out[w] = *o;
        w++;
    }
    drv->nout = w;
    /* the same for outbox events: their requests were never committed */
    w = drv->ev_head;
    for (size_t i = drv->ev_head; i < drv->nev; i++) {
        drv_event *e = &drv->ev[i];
        if (!e->committed && !e->read && drv->ev_handed != i + 1) {
            event_free(e);
            continue;
        }
        if (drv->ev_handed == i + 1)
            drv->ev_handed = w + 1;
        if (w != i)
            drv->ev[w] = *e;
        w++;
    }
    drv->nev = w;
}

int ks_driver_commit(ks_driver *drv)
{
    if (!drv || drv->magic != KS_DRIVER_MAGIC)
        return KS_ERR_INVALID;
    int rc = 0;
    for (int32_t p = 0; p < drv->partitions; p++) {
        ks_task *task = drv->tasks[p];
        if (!task)
            continue;
        int r = ks_task_commit_stores(task);
        if (r != 0 && rc == 0) {
            rc = r;
            set_err(drv, "%s: commit failed: %s", task->where,
                    task->env ? ks_store_last_error(task->env) : "");
        }
    }
    if (rc != 0) {
        abort_all(drv);
        return rc;
    }
    for (size_t i = drv->head; i < drv->nout; i++)
        drv->out[i].committed = 1;
    for (size_t i = drv->ev_head; i < drv->nev; i++)
        drv->ev[i].committed = 1;
    return 0;
}

/* The internal source reading repartition topic `topic`. */
static const ks_topo_node *repartition_source(const ks_driver *drv, const char *topic)
{
    for (size_t i = 0; i < drv->topo->node_count; i++) {
        const ks_topo_node *n = &drv->topo->nodes[i];
        if (n->kind == KS_NODE_SOURCE && n->source->internal &&
            strcmp(n->source->topic, topic) == 0)
            return n;
    }
    return NULL;
}

/* Run the records written to repartition topics through the sub-topologies
 * that read them, in the order written, until none is left (a sub-topology
 * may write to the next topic). Returns the worst verdict. */
static ks_verdict drain_repartitions(ks_driver *drv, ks_verdict v)
{
    size_t i = 0;
    for (; i < drv->nrp && v != KS_RETRY && v != KS_FATAL; i++) {
        drv_out o = drv->rp[i]; /* processing may grow drv->rp */
        const ks_topo_node *src = repartition_source(drv, o.sink->sink->topic);
        ks_record r = {.key = o.key, .key_len = o.key_len, .value = o.value,
                       .value_len = o.value_len, .timestamp = o.timestamp,
                       .headers = o.headers, .header_count = o.header_count,
                       .topic = o.sink->sink->topic, .partition = o.partition,
                       .offset = drv->next_rp_offset++};
        ks_verdict rv = src ? ks_task_process(drv->tasks[o.partition], src, &r) : KS_FATAL;
        if (rv != KS_OK && !drv->err[0])
            set_err(drv, "record %s/%d/%lld: a processor returned %s", r.topic,
                    (int)r.partition, (long long)r.offset,
                    rv == KS_SKIP ? "skip" : rv == KS_RETRY ? "retry" : "fatal");
        if (rv > v)
            v = rv;
        out_free(&drv->rp[i]);
    }
    for (; i < drv->nrp; i++) /* an aborted batch never wrote them */
        out_free(&drv->rp[i]);
    drv->nrp = 0;
    return v;
}

/* After a piped record or a punctuation: end the batch like a worker. */
int ks_drv_finish(ks_driver *drv, ks_verdict v)
{
    v = drain_repartitions(drv, v);
    if (v == KS_RETRY || v == KS_FATAL) {
        abort_all(drv);
        return (int)v;
    }
    if (!drv->manual_commit) {
        int rc = ks_driver_commit(drv);
        if (rc != 0)
            return rc;
    }
    return (int)v;
}
