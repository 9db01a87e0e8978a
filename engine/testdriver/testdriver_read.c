/*
 * testdriver_read.c - what a test reads back: sink records and outbox
 * events in production order (each handed out once, valid until the next
 * read), and the tasks' stores (get, range, count).
 */
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "state/store.h"
#include "runtime/task.h"
#include "runtime/topology.h"
#include "testdriver/testdriver_internal.h"

/* ---- outputs ------------------------------------------------------------ */

static int out_matches(const drv_out *o, const char *sink)
{
    return !sink || strcmp(o->sink->name, sink) == 0 || strcmp(o->sink->sink->topic, sink) == 0;
}

int ks_driver_read_output(ks_driver *drv, const char *sink, ks_driver_record *rec)
{
    if (!drv || drv->magic != KS_DRIVER_MAGIC || !rec)
        return KS_ERR_INVALID;
    /* the record handed out last time is no longer needed */
    if (drv->handed) {
        out_free(&drv->out[drv->handed - 1]);
        drv->out[drv->handed - 1].read = 1;
        drv->handed = 0;
    }
    while (drv->head < drv->nout && drv->out[drv->head].read)
        drv->head++;
    if (drv->head == drv->nout) /* everything read: reuse the array */
        drv->head = drv->nout = 0;
    for (size_t i = drv->head; i < drv->nout; i++) {
        drv_out *o = &drv->out[i];
        if (o->read || !out_matches(o, sink))
            continue;
        o->read = 1;
        drv->handed = i + 1;
        *rec = (ks_driver_record){.sink = o->sink->name,
                                  .topic = o->sink->sink->topic,
                                  .partition = o->partition,
                                  .task = o->task,
                                  .key = o->key,
                                  .key_len = o->key_len,
                                  .value = o->value,
                                  .value_len = o->value_len,
                                  .timestamp = o->timestamp,
                                  .headers = o->headers,
                                  .header_count = o->header_count};
        return 0;
    }
    memset(rec, 0, sizeof *rec);
    return KS_ERR_NOT_FOUND;
}

size_t ks_driver_output_count(const ks_driver *drv, const char *sink)
{
    if (!drv || drv->magic != KS_DRIVER_MAGIC)
        return 0;
    size_t n = 0;
    for (size_t i = drv->head; i < drv->nout; i++)
        n += !drv->out[i].read && out_matches(&drv->out[i], sink);
    return n;
}

/* ---- outbox events ------------------------------------------------------ */

static int event_matches(const ks_driver *drv, const char *outbox)
{
    const ks_cfg_outbox *o = drv->topo->pipeline->outbox;
    return !outbox || (o && strcmp(o->name, outbox) == 0);
}

int ks_driver_read_event(ks_driver *drv, const char *outbox, ks_driver_event *ev)
{
    if (!drv || drv->magic != KS_DRIVER_MAGIC || !ev)
        return KS_ERR_INVALID;
    /* the event handed out last time is no longer needed */
    if (drv->ev_handed) {
        event_free(&drv->ev[drv->ev_handed - 1]);
        drv->ev[drv->ev_handed - 1].read = 1;
        drv->ev_handed = 0;
    }
    while (drv->ev_head < drv->nev && drv->ev[drv->ev_head].read)
        drv->ev_head++;
    if (drv->ev_head == drv->nev) /* everything read: reuse the array */
        drv->ev_head = drv->nev = 0;
    if (drv->ev_head < drv->nev && event_matches(drv, outbox)) {
        /* one outbox per pipeline: the oldest unread event is the next */
        drv_event *e = &drv->ev[drv->ev_head];
        e->read = 1;
        drv->ev_handed = drv->ev_head + 1;
        *ev = (ks_driver_event){.outbox = drv->topo->pipeline->outbox->name,
                                .id = e->id,
                                .user = e->user,
                                .user_len = e->user_len,
                                .payload = e->payload,
                                .payload_len = e->payload_len,
                                .input_topic = e->in_topic,
                                .input_partition = e->in_partition,
                                .input_offset = e->in_offset,
                                .rank = e->rank,
                                .task = e->task,
                                .timestamp = e->timestamp};
        return 0;
    }
    memset(ev, 0, sizeof *ev);
    return KS_ERR_NOT_FOUND;
}

size_t ks_driver_event_count(const ks_driver *drv, const char *outbox)
{
    if (!drv || drv->magic != KS_DRIVER_MAGIC || !event_matches(drv, outbox))
        return 0;
    size_t n = 0;
    for (size_t i = drv->ev_head; i < drv->nev; i++)
        n += !drv->ev[i].read;
    return n;
}

/* ---- stores ------------------------------------------------------------- */

static int store_index(ks_driver *drv, const char *store)
{
    const ks_pipeline *p = drv->topo->pipeline;
    for (size_t s = 0; store && s < p->store_count; s++)
        if (strcmp(p->stores[s].name, store) == 0)
            return (int)s;
    set_err(drv, "no store named '%s' in %s", store ? store : "(null)", p->file);
    return -1;
}

/* End the read snapshot unless a batch is open (then reads use it). */
static void read_done(ks_task *task)
{
    if (task->env && !ks_store_in_txn(task->env))
        ks_store_read_end(task->env);
}

int ks_driver_store_get(ks_driver *drv, const char *store, int32_t partition,
                        const void *key, size_t key_len, ks_bytes *value)
{
    if (!drv || drv->magic != KS_DRIVER_MAGIC || !value || !key)
        return KS_ERR_INVALID;
    int s = store_index(drv, store);
    if (s < 0)
        return KS_ERR_NOT_FOUND;
    if (partition < 0)
        partition = ks_driver_partition_for(key, key_len, drv->partitions);
    if (partition >= drv->partitions) {
        set_err(drv, "partition %d out of range (the driver has %d)", (int)partition,
                (int)drv->partitions);
        return KS_ERR_NOT_FOUND;
    }
    ks_task *task = drv->tasks[partition];
    ks_bytes v;
    ks_global_reader gr = {0};
    int rc = drv->topo->pipeline->stores[s].global
                 ? (drv->global ? ks_global_get(drv->global, &gr, s, (ks_bytes){key, key_len}, &v)
                                : KS_ERR_NOT_FOUND)
                 : ks_store_get(task->dbs[s], (ks_bytes){key, key_len}, &v);
    if (rc == 0) {
        if (v.len + 1 > drv->buf_cap) {
            unsigned char *b = realloc(drv->buf, v.len + 1);
            if (!b) {
                read_done(task);
                return KS_ERR_NOMEM;
            }
            drv->buf = b;
            drv->buf_cap = v.len + 1;
        }
        if (v.len)
            memcpy(drv->buf, v.data, v.len);
        drv->buf[v.len] = '\0';
        *value = (ks_bytes){drv->buf, v.len};
    } else if (rc == KS_ERR_NOT_FOUND) {
        set_err(drv, "store '%s' of task-%d has no such key", store, (int)partition);
    }
    read_done(task);
    ks_global_reader_end(&gr);
    return rc;
}

int ks_driver_store_range(ks_driver *drv, const char *store, int32_t partition,
                          const void *from, size_t from_len, const void *to,
                          size_t to_len, ks_range_cb cb, void *arg)
{
    if (!drv || drv->magic != KS_DRIVER_MAGIC || !cb)
        return KS_ERR_INVALID;
    int s = store_index(drv, store);
    if (s < 0)
        return KS_ERR_NOT_FOUND;
    if (partition >= drv->partitions)
        return KS_ERR_NOT_FOUND;
    int32_t first = partition < 0 ? 0 : partition;
    int32_t last = partition < 0 ? drv->partitions - 1 : partition;
    ks_bytes f = {from, from ? from_len : 0}, t = {to, to ? to_len : 0};
    if (drv->topo->pipeline->stores[s].global) { /* one store for every task */
        ks_global_reader gr = {0};
        int rc = drv->global ? ks_global_range(drv->global, &gr, s, f, t, cb, arg) : 0;
        ks_global_reader_end(&gr);
        return rc;
    }
    for (int32_t p = first; p <= last; p++) {
        ks_task *task = drv->tasks[p];
        int rc = ks_store_range(task->dbs[s], f, t, cb, arg);
        read_done(task);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int ks_driver_store_count(ks_driver *drv, const char *store, uint64_t *count)
{
    if (!drv || drv->magic != KS_DRIVER_MAGIC || !count)
        return KS_ERR_INVALID;
    int s = store_index(drv, store);
    if (s < 0)
        return KS_ERR_NOT_FOUND;
    *count = 0;
    for (int32_t p = 0; p < drv->partitions; p++) {
        uint64_t n = 0;
        int rc = ks_store_count(drv->tasks[p]->dbs[s], &n);
        read_done(drv->tasks[p]);
        if (rc != 0)
            return rc;
        *count += n;
    }
    return 0;
}
