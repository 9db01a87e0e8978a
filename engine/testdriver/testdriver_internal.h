/*
 * testdriver_internal.h - what the files of the test driver share: the
 * struct behind ks_driver and its helpers. Only the testdriver*.c files
 * of engine/testdriver/ include it (include/kstreams/testdriver.h is the
 * interface).
 *
 *   testdriver.c        the driver's invariants, murmur2, open/close,
 *                       the small getters
 *   testdriver_io.c     the task io callbacks (what a worker would send
 *                       to Kafka) and the batches (commit, abort,
 *                       repartition topics read back)
 *   testdriver_drive.c  piping records in, advancing the wall clock
 *   testdriver_read.c   outputs, outbox events and stores as a test reads
 *                       them
 *
 * The library exports only ks_driver_* (engine/Makefile.am), so the shared
 * helpers are named ks_drv_* (the short names below are what the code
 * calls them). Errors: 0 or a negative ks_err with drv->err set where the
 * public function says so.
 */
#ifndef KS_TESTDRIVER_INTERNAL_H
#define KS_TESTDRIVER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "kstreams/testdriver.h"
#include "config/config.h"
#include "outbox/outbox.h"
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
    struct ks_global *global; /* the global tables' store, or NULL (io.global) */
    int64_t *next_global;  /* per global table: next offset piped */
    char tmp[4096];        /* temporary root ("" when none) */
    char err[2048];
};

/* Format drv->err. */
void ks_drv_set_err(ks_driver *drv, const char *fmt, ...) KS_PRINTF(2, 3);
#define set_err(...) ks_drv_set_err(__VA_ARGS__)

/* A copy of n bytes plus a NUL (never malloc(0)); NULL when out of memory. */
void *ks_drv_dup_bytes(const void *p, size_t n);
#define dup_bytes(p, n) ks_drv_dup_bytes(p, n)

/* Free what an output record or an outbox event holds, and zero it. */
void ks_drv_out_free(drv_out *o);
#define out_free(o) ks_drv_out_free(o)
void ks_drv_event_free(drv_event *e);
#define event_free(e) ks_drv_event_free(e)

/* The io callbacks of the driver's tasks (testdriver_io.c), arg = drv. */
ks_task_io ks_drv_task_io(ks_driver *drv);

/* After a piped record or a punctuation: end the batch like a worker
 * (repartition records read back, then commit unless manual_commit, or
 * abort on retry/fatal). Returns the verdict or a commit's ks_err. */
int ks_drv_finish(ks_driver *drv, ks_verdict v);
#define finish(drv, v) ks_drv_finish(drv, v)

#endif
