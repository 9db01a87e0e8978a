/*
 * testdriver.c - the in-process test driver (include/kstreams/testdriver.h):
 * a pipeline's tasks run by the engine's own task code, with the worker's
 * Kafka side replaced by memory.
 *
 * What it owns: the topology (plugins loaded from private copies), one task
 * per partition, a queue of sink records in production order, a queue of
 * outbox events (the requests api->outbox_enqueue sends through
 * io.emit_topic), a simulated changelog offset per task and store (so
 * checkpoints advance as with a broker), the driver's wall clock, and the
 * temporary directories it made.
 *
 * Invariants: like a worker, one batch spans every task; a batch ends with
 * ks_task_commit_stores on every task, or ks_task_abort_stores on every
 * task, which also drops the batch's unread sink records and outbox
 * events. Each task's `wallclock` always equals the driver's clock, so
 * plugins see it through now(KS_TIME_WALLCLOCK).
 */
#include "kstreams/testdriver.h"

#include <errno.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "outbox/outbox.h"
#include "outbox/outbox_requests.h"
#include "runtime/serde.h"
#include "state/store.h"
#include "runtime/task.h"
#include "runtime/topology.h"

#define KS_DRIVER_MAGIC 0x6b736476u /* "ksdv" */

/* One sink record as emitted (copied). */
typedef struct drv_out {
    const ks_topo_node *sink;
    int32_t partition;
    int32_t task;
    unsigned char *key; /* NULL: null key */
    size_t key_len;
    unsigned char *value; /* NULL: tombstone */
    size_t value_len;
    int64_t timestamp;
    ks_header *headers;
    size_t header_count;
    int committed; /* its batch committed: an abort keeps it */
    int read;      /* handed out by read_output */
} drv_out;

/* One outbox event: a request record of api->outbox_enqueue (copied). */
typedef struct drv_event {
    char id[KS_OUTBOX_ID_LEN + 1];
    char *user; /* NUL-terminated */
    size_t user_len;
    unsigned char *payload; /* never NULL; NUL after payload_len bytes */
    size_t payload_len;
    char *in_topic; /* the input record being processed */
    int32_t in_partition;
    int64_t in_offset;
    uint32_t rank;
    int32_t task;
    int64_t timestamp;
    int committed; /* its batch committed: an abort keeps it */
    int read;      /* handed out by read_event */
} drv_event;

struct ks_driver {
    uint32_t magic;
    ks_topology *topo;
    ks_task **tasks;
    int32_t partitions;
    ks_task_io io;
    int manual_commit;
    int64_t wallclock;
    uint32_t round_robin;  /* partition of the next null-key record */
    int64_t *next_input;   /* per task: next source offset */
    int64_t *next_cl;      /* per task * store: next changelog offset */
    drv_out *out;
    size_t nout, cap;
    /* records written to repartition topics, read back by their internal
     * sources when the piped record is done (as a worker reads them after
     * its commit) */
    drv_out *rp;
    size_t nrp, rp_cap;
    int64_t next_rp_offset;
    size_t head;           /* outputs before head are all read */
    size_t handed;         /* index+1 of the record last handed out, 0 none */
    drv_event *ev;         /* outbox events, in enqueue order */
    size_t nev, ev_cap;
    size_t ev_head;        /* events before ev_head are all read */
    size_t ev_handed;      /* index+1 of the event last handed out, 0 none */
    unsigned char *buf;    /* store_get's copy */
    size_t buf_cap;
    char tmp[4096];        /* temporary root ("" when none) */
    char err[2048];
};

static void set_err(ks_driver *drv, const char *fmt, ...) KS_PRINTF(2, 3);
static void set_err(ks_driver *drv, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(drv->err, sizeof drv->err, fmt, ap);
    va_end(ap);
}

/* ---- murmur2 ------------------------------------------------------------ */

/* Java's Utils.murmur2, in unsigned arithmetic (Java ints wrap). */
int32_t ks_driver_murmur2(const void *data, size_t len)
{
    const unsigned char *d = data;
    const uint32_t m = 0x5bd1e995u;
    const int r = 24;
    uint32_t h = 0x9747b28cu ^ (uint32_t)len;
    size_t len4 = len / 4;
    for (size_t i = 0; i < len4; i++) {
        size_t i4 = i * 4;
        uint32_t k = (uint32_t)d[i4] | (uint32_t)d[i4 + 1] << 8 |
                     (uint32_t)d[i4 + 2] << 16 | (uint32_t)d[i4 + 3] << 24;
        k *= m;
        k ^= k >> r;
        k *= m;
        h *= m;
        h ^= k;
    }
    size_t tail = len & ~(size_t)3;
    switch (len % 4) {
    case 3:
        h ^= (uint32_t)d[tail + 2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)d[tail + 1] << 8;
        /* fall through */
    case 1:
        h ^= d[tail];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return (int32_t)h;
}

int32_t ks_driver_partition_for(const void *key, size_t key_len, int32_t partitions)
{
    if (partitions <= 0)
        return -1;
    uint32_t h = (uint32_t)ks_driver_murmur2(key, key_len) & 0x7fffffffu;
    return (int32_t)(h % (uint32_t)partitions);
}

/* ---- io callbacks: what a worker would send to Kafka ------------------- */

static void *dup_bytes(const void *p, size_t n)
{
    unsigned char *c = malloc(n + 1); /* +1: never malloc(0); NUL for text */
    if (c) {
        if (n)
            memcpy(c, p, n);
        c[n] = '\0';
    }
    return c;
}

static void out_free(drv_out *o)
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
    if (*n == *capp) {
        size_t cap = *capp ? *capp * 2 : 64;
        drv_out *o = realloc(*arr, cap * sizeof *o);
        if (!o)
            return KS_ERR_NOMEM;
        *arr = o;
        *capp = cap;
    }
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

static void event_free(drv_event *e)
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
    if (drv->nev == drv->ev_cap) {
        size_t cap = drv->ev_cap ? drv->ev_cap * 2 : 16;
        drv_event *e = realloc(drv->ev, cap * sizeof *e);
        if (!e)
            return KS_ERR_NOMEM;
        drv->ev = e;
        drv->ev_cap = cap;
    }
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
static int finish(ks_driver *drv, ks_verdict v)
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

/* ---- open / close ------------------------------------------------------- */

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int64_t real_wallclock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Prepend the ':'-separated dirs of `extra` to p->plugin_path. */
static int add_plugin_path(ks_pipeline *p, const char *extra)
{
    if (!extra || !*extra)
        return 0;
    size_t n = 1;
    for (const char *c = extra; *c; c++)
        n += *c == ':';
    char **dirs = calloc(n + p->plugin_path_count, sizeof *dirs);
    if (!dirs)
        return -1;
    size_t nd = 0;
    const char *start = extra;
    for (;;) {
        const char *end = strchr(start, ':');
        size_t len = end ? (size_t)(end - start) : strlen(start);
        if (len) {
            dirs[nd] = dup_bytes(start, len);
            if (!dirs[nd]) {
                for (size_t i = 0; i < nd; i++)
                    free(dirs[i]);
                free(dirs);
                return -1;
            }
            nd++;
        }
        if (!end)
            break;
        start = end + 1;
    }
    for (size_t i = 0; i < p->plugin_path_count; i++)
        dirs[nd++] = p->plugin_path[i];
    free(p->plugin_path);
    p->plugin_path = dirs;
    p->plugin_path_count = nd;
    return 0;
}

/* Takes ownership of p. */
static int driver_open(ks_pipeline *p, const ks_driver_options *opt, ks_driver **out,
                       char *err, size_t errlen)
{
    ks_driver_options defaults = {0};
    if (!opt)
        opt = &defaults;
    ks_driver *drv = calloc(1, sizeof *drv);
    if (!drv) {
        ks_pipeline_free(p);
        snprintf(err, errlen, "out of memory");
        return KS_ERR_NOMEM;
    }
    drv->magic = KS_DRIVER_MAGIC;
    drv->partitions = opt->partitions > 0 ? opt->partitions : 1;
    drv->manual_commit = opt->manual_commit;
    drv->wallclock = opt->wallclock_start_ms > 0 ? opt->wallclock_start_ms : real_wallclock();
    drv->io = (ks_task_io){
        .arg = drv, .emit = on_emit, .changelog = on_changelog, .emit_topic = on_emit_topic};

    int rc = KS_ERR_IO;
    const char *tmp = getenv("TMPDIR");
    snprintf(drv->tmp, sizeof drv->tmp, "%s/ks-driver-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(drv->tmp)) {
        snprintf(err, errlen, "%s: cannot create a temporary directory: %s", drv->tmp,
                 strerror(errno));
        drv->tmp[0] = '\0';
        ks_pipeline_free(p);
        goto fail;
    }
    char copy_dir[4200], state_dir[4200];
    snprintf(copy_dir, sizeof copy_dir, "%s/plugins", drv->tmp);
    if (opt->state_dir)
        snprintf(state_dir, sizeof state_dir, "%s", opt->state_dir);
    else
        snprintf(state_dir, sizeof state_dir, "%s/state", drv->tmp);
    char *sd = strdup(state_dir);
    if (!sd || add_plugin_path(p, opt->plugin_path) != 0) {
        free(sd);
        ks_pipeline_free(p);
        snprintf(err, errlen, "out of memory");
        rc = KS_ERR_NOMEM;
        goto fail;
    }
    free(p->state_dir);
    p->state_dir = sd;

    if (ks_topology_build(p, ks_host_api_table(), copy_dir, &drv->topo, err, errlen) != 0) {
        rc = KS_ERR_INVALID;
        goto fail;
    }
    drv->topo->partitions = drv->partitions;
    size_t nstores = drv->topo->pipeline->store_count;
    drv->tasks = calloc((size_t)drv->partitions, sizeof *drv->tasks);
    drv->next_input = calloc((size_t)drv->partitions, sizeof *drv->next_input);
    drv->next_cl = calloc((size_t)drv->partitions * (nstores ? nstores : 1),
                          sizeof *drv->next_cl);
    if (!drv->tasks || !drv->next_input || !drv->next_cl) {
        snprintf(err, errlen, "out of memory");
        rc = KS_ERR_NOMEM;
        goto fail;
    }
    for (int32_t part = 0; part < drv->partitions; part++) {
        if (ks_task_create(drv->topo, part, &drv->io, &drv->tasks[part], err, errlen) != 0) {
            rc = KS_ERR_INVALID;
            goto fail;
        }
        ks_task *task = drv->tasks[part];
        /* a state_dir kept from an earlier run may hold an older format:
         * the migration runs in the first batch, as in the engine */
        if (ks_task_check_versions(task, err, errlen) != 0) {
            rc = KS_ERR_STATE;
            goto fail;
        }
        task->wallclock = drv->wallclock;
        /* changelog offsets go on from the committed checkpoints */
        for (size_t s = 0; s < nstores; s++) {
            int64_t cp = ks_task_checkpoint(task, (int)s);
            drv->next_cl[(size_t)part * nstores + s] = cp > 0 ? cp : 0;
        }
        /* arm the wall-clock schedules set in init(): nothing is due yet */
        ks_task_punctuate_wallclock(task, drv->wallclock);
    }
    *out = drv;
    return 0;
fail:
    ks_driver_close(drv);
    return rc;
}

int ks_driver_open(const char *path, const ks_driver_options *opt, ks_driver **out,
                   char *err, size_t errlen)
{
    char dummy[8];
    if (!err) {
        err = dummy;
        errlen = sizeof dummy;
    }
    if (!out || !path) {
        snprintf(err, errlen, "ks_driver_open: NULL argument");
        return KS_ERR_INVALID;
    }
    *out = NULL;
    ks_pipeline *p = NULL;
    if (ks_pipeline_load(path, &p, err, errlen) != 0)
        return KS_ERR_INVALID;
    return driver_open(p, opt, out, err, errlen);
}

int ks_driver_open_text(const char *name, const char *text, size_t len,
                        const ks_driver_options *opt, ks_driver **out, char *err,
                        size_t errlen)
{
    char dummy[8];
    if (!err) {
        err = dummy;
        errlen = sizeof dummy;
    }
    if (!out || !text) {
        snprintf(err, errlen, "ks_driver_open_text: NULL argument");
        return KS_ERR_INVALID;
    }
    *out = NULL;
    ks_pipeline *p = NULL;
    if (ks_pipeline_parse(name ? name : "pipeline.yaml", text, len, &p, err, errlen) != 0)
        return KS_ERR_INVALID;
    return driver_open(p, opt, out, err, errlen);
}

void ks_driver_close(ks_driver *drv)
{
    if (!drv || drv->magic != KS_DRIVER_MAGIC)
        return;
    if (drv->tasks) {
        ks_driver_commit(drv); /* a clean stop commits, as the engine does */
        for (int32_t p = 0; p < drv->partitions; p++)
            ks_task_destroy(drv->tasks[p]);
    }
    ks_topology_free(drv->topo);
    for (size_t i = 0; i < drv->nout; i++)
        out_free(&drv->out[i]);
    free(drv->out);
    for (size_t i = 0; i < drv->nrp; i++)
        out_free(&drv->rp[i]);
    free(drv->rp);
    for (size_t i = 0; i < drv->nev; i++)
        event_free(&drv->ev[i]);
    free(drv->ev);
    free(drv->tasks);
    free(drv->next_input);
    free(drv->next_cl);
    free(drv->buf);
    if (drv->tmp[0])
        nftw(drv->tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    drv->magic = 0;
    free(drv);
}

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

int ks_driver_pipe_record(ks_driver *drv, const char *source, const ks_record *rec)
{
    if (!drv || drv->magic != KS_DRIVER_MAGIC || !rec)
        return KS_ERR_INVALID;
    drv->err[0] = '\0';
    const ks_topo_node *src = find_source(drv, source);
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
    int rc = ks_store_get(task->dbs[s], (ks_bytes){key, key_len}, &v);
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

int64_t ks_driver_wallclock(const ks_driver *drv)
{
    return drv && drv->magic == KS_DRIVER_MAGIC ? drv->wallclock : -1;
}

int64_t ks_driver_stream_time(const ks_driver *drv, int32_t partition)
{
    if (!drv || drv->magic != KS_DRIVER_MAGIC || partition < 0 ||
        partition >= drv->partitions)
        return -1;
    return drv->tasks[partition]->stream_time;
}

int32_t ks_driver_partitions(const ks_driver *drv)
{
    return drv && drv->magic == KS_DRIVER_MAGIC ? drv->partitions : 0;
}

const char *ks_driver_last_error(const ks_driver *drv)
{
    return drv && drv->magic == KS_DRIVER_MAGIC ? drv->err : "invalid driver handle";
}
