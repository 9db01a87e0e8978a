/*
 * global_table.h - the global tables of a process (`global_tables:`), as
 * Kafka Streams' GlobalKTable: every process reads each global table's
 * topic whole (all partitions) into one LMDB environment of its own,
 * state_dir/<application>/global/, shared read-only by all its tasks.
 *
 * One writer: the thread that restores and then follows the topics
 * (global_thread.c in the engine, the piping thread in the test driver).
 * A table record puts its value under its key, a tombstone deletes it, in
 * offset order per partition; each value is stored as a table's is
 * (table.h): the record's timestamp, 8 bytes big-endian, then its value.
 * The next offset to read of each partition is kept in the same LMDB
 * transaction as the values, so a crash never applies a record twice or
 * skips one. No changelog: the topic is the table's log.
 *
 * Readers (tasks, on any worker thread) each hold their own read
 * snapshot (ks_global_reader), renewed at every get: a lookup sees the
 * table as of processing. The environment is opened with MDB_NOTLS, so
 * one thread may hold many readers.
 */
#ifndef KS_GLOBAL_TABLE_H
#define KS_GLOBAL_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "kstreams/kstreams.h"

typedef struct ks_global ks_global;

/* A reader's snapshot; zero-initialise, end with ks_global_reader_end. */
typedef struct ks_global_reader {
    void *txn; /* MDB_txn *, reset between gets */
    int active;
} ks_global_reader;

/*
 * Open (creating) the environment of p's global tables in `dir` (created
 * with parents). p is borrowed and must outlive the handle. 0 and *out, or
 * a negative ks_err with a message in err. NULL *out when p has none.
 */
int ks_global_open(const ks_pipeline *p, const char *dir, ks_global **out, char *err,
                   size_t errlen);

/* The directory of p's global environment: state_dir/<application>/global. */
void ks_global_dir(const ks_pipeline *p, char *buf, size_t len);

/* Close; no reader or write may be in progress. NULL is fine. */
void ks_global_close(ks_global *g);

/* ---- the writer (one thread) --------------------------------------------- */

/* Begin a write transaction (idempotent). 0 or a negative ks_err. */
int ks_global_begin(ks_global *g);

/*
 * Apply the record at `offset` of partition `partition` of global table
 * `table` (an index into p->globals): value NULL is a tombstone; key and
 * value borrowed. A record the table cannot hold (no key, a key over
 * KS_KEY_MAX, key or value not in the table's serde) is skipped (logged);
 * its offset still moves on. Opens the write transaction when none is.
 * 0 or a negative ks_err (then abort).
 */
int ks_global_apply(ks_global *g, int table, int32_t partition, int64_t offset, ks_bytes key,
                    const ks_bytes *value, int64_t timestamp);

/* Commit (readers see it from their next get) or abort the writes. */
int ks_global_commit(ks_global *g);
void ks_global_abort(ks_global *g);

/* The next offset to read of the partition (committed): 0 and *next, or
 * KS_ERR_NOT_FOUND when none was ever applied. */
int ks_global_position(ks_global *g, int table, int32_t partition, int64_t *next);

/* Empty global table `table` and forget the positions of its partitions
 * 0..partitions-1, committed at once (an open write transaction commits
 * with it). 0 or a negative ks_err (nothing changed). */
int ks_global_wipe(ks_global *g, int table, int32_t partitions);

/* ---- readers ------------------------------------------------------------- */

/* Look key up in the global store `store` (an index into p->stores) with
 * a fresh snapshot: 0 and *value (borrowed until the next call with r or
 * ks_global_reader_end), KS_ERR_NOT_FOUND, or a negative ks_err. */
int ks_global_get(ks_global *g, ks_global_reader *r, int store, ks_bytes key,
                  ks_bytes *value);

/* Scan [from, to) of store `store` as ks_store_range does. */
int ks_global_range(ks_global *g, ks_global_reader *r, int store, ks_bytes from, ks_bytes to,
                    ks_range_cb cb, void *arg);

/* End r's snapshot but keep its handle for a cheap renew: a snapshot held
 * while a task is idle would keep the writer from reusing pages. Values
 * read through r become invalid. */
void ks_global_reader_reset(ks_global_reader *r);

/* Release r's snapshot and handle. */
void ks_global_reader_end(ks_global_reader *r);

#endif /* KS_GLOBAL_TABLE_H */
