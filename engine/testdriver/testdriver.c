/*
 * testdriver.c - the in-process test driver (include/kstreams/testdriver.h):
 * a pipeline's tasks run by the engine's own task code, with the worker's
 * Kafka side replaced by memory. This file: murmur2, open and close, the
 * getters; the io callbacks and batches, piping and time, and reading are
 * in testdriver_io.c, testdriver_drive.c and testdriver_read.c
 * (testdriver_internal.h).
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
#include "kafka/partitioner.h"
#include "runtime/global_table.h"
#include "runtime/task.h"
#include "runtime/topology.h"
#include "testdriver/testdriver_internal.h"

void ks_drv_set_err(ks_driver *drv, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(drv->err, sizeof drv->err, fmt, ap);
    va_end(ap);
}

/* ---- murmur2 (kafka/partitioner.c) ------------------------------------- */

int32_t ks_driver_murmur2(const void *data, size_t len)
{
    return ks_kafka_murmur2(data, len);
}

int32_t ks_driver_partition_for(const void *key, size_t key_len, int32_t partitions)
{
    return ks_kafka_partition_for(key, key_len, partitions);
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
/* The global tables' store under the state dir, shared by every task
 * (io.global), piped to directly; offsets go on from what it holds. */
static int open_globals(ks_driver *drv, char *err, size_t errlen)
{
    const ks_pipeline *p = drv->topo->pipeline;
    char dir[4200];
    ks_global_dir(p, dir, sizeof dir);
    if (p->global_count == 0)
        return 0;
    drv->next_global = calloc(p->global_count, sizeof *drv->next_global);
    if (!drv->next_global || ks_global_open(p, dir, &drv->global, err, errlen) != 0)
        return -1;
    for (size_t t = 0; t < p->global_count; t++)
        for (int32_t part = 0; part < p->globals[t].partitions; part++) {
            int64_t next;
            if (ks_global_position(drv->global, (int)t, part, &next) == 0 &&
                next > drv->next_global[t])
                drv->next_global[t] = next;
        }
    drv->io.global = drv->global;
    return 0;
}

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
    drv->io = ks_drv_task_io(drv);

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
    if (open_globals(drv, err, errlen) != 0) {
        rc = KS_ERR_IO;
        goto fail;
    }
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
    ks_global_close(drv->global);
    free(drv->next_global);
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

/* ---- getters ------------------------------------------------------------ */

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
