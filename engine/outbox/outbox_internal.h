/*
 * outbox_internal.h - what the files of the LMDB outbox store share: the
 * struct behind ks_outbox, the row encoding's constants, and the row
 * primitives that keep the "active" index in step. Only outbox*.c of the
 * store include it (outbox.h is the interface).
 *
 *   outbox.c         layout, open/close, transactions under the lock, row
 *                    load/store/move, enqueue and the reads (get, meta,
 *                    counts, sizes)
 *   outbox_codec.c   the row encoding (ks_outbox_row_encode/decode)
 *   outbox_moves.c   status moves of one row, and the scans of "active"
 *                    (claim_pending, stale)
 *   outbox_held.c    events from processors: derived ids, held rows,
 *                    release or forget
 *
 * Errors: 0 or a negative ks_err (ob->err says why where it is set). The
 * helpers are defined with a ks_outbox_ prefix; the short names below are
 * what the code calls them.
 */
#ifndef KS_OUTBOX_INTERNAL_H
#define KS_OUTBOX_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "outbox/outbox.h"

#define ROW_VERSION 1
#define NO_KEY UINT32_MAX
#define MAX_REASON 400

struct ks_outbox {
    ks_store_env *env;
    ks_store_db *events, *active, *meta;
    ks_store_db *held; /* id -> request partition, offset (NULL read-only) */
    pthread_mutex_t lock;
    int readonly;
    char err[512];
    /* rows that entered each status since open: committed, and in the open
     * txn (added to `entered` when it commits) */
    uint64_t entered[KS_OUTBOX_STATUS_COUNT], entering[KS_OUTBOX_STATUS_COUNT];
};

typedef ks_outbox_row_hdr row_hdr;

static inline size_t slen(const char *s) { return s ? strlen(s) : 0; }

/* Begin the one write txn (lock held). Read-only envs read through their
 * snapshot instead; it is ended in txn_end. */
int ks_outbox_txn_begin(ks_outbox *ob);
#define txn_begin(ob) ks_outbox_txn_begin(ob)

/* Commit when rc == 0 and `write`, else abort. Returns the final rc. */
int ks_outbox_txn_end(ks_outbox *ob, int rc, int write);
#define txn_end(ob, rc, write) ks_outbox_txn_end(ob, rc, write)

/* Read row `id` into *ev (lock and txn held); KS_ERR_NOT_FOUND, KS_ERR_IO
 * for a damaged row. */
int ks_outbox_load_row(ks_outbox *ob, const char *id, ks_outbox_event *ev);
#define load_row(ob, id, ev) ks_outbox_load_row(ob, id, ev)

/* Write ev and keep "active" in step (see the invariant in outbox.c). */
int ks_outbox_store_row(ks_outbox *ob, const ks_outbox_event *ev);
#define store_row(ob, ev) ks_outbox_store_row(ob, ev)

/* Move `ev` to `to` if the table allows it from where it is
 * (KS_ERR_STATE otherwise), and store it. */
int ks_outbox_move(ks_outbox *ob, ks_outbox_event *ev, ks_outbox_status to);
#define move(ob, ev, to) ks_outbox_move(ob, ev, to)

/* 1 when t is a topic name an event may name, else 0. */
int ks_outbox_topic_ok(const char *t);
#define topic_ok(t) ks_outbox_topic_ok(t)

#endif
