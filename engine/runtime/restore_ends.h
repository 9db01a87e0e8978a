/*
 * restore_ends.h - where each replay of a restore pass starts and ends
 * (restorer.h): the stores' checkpoints, the changelogs' last stable
 * offsets (asked for all partitions in one request per client), and the
 * limit of a table whose changes flow on (the group's committed offsets,
 * one request for all).
 *
 * Private to restorer.c. One thread: the worker's.
 */
#ifndef KS_RESTORE_ENDS_H
#define KS_RESTORE_ENDS_H

#include <librdkafka/rdkafka.h>
#include <stdint.h>

#include "runtime/restore_fold.h"
#include "runtime/restorer.h"

/* One store's replay: what it reads and how far it got. */
typedef struct ks_replay {
    ks_task *task;     /* borrowed */
    size_t task_index; /* in the pass's task array */
    int store;
    int table;         /* the store of a table: restored from the table's topic */
    int flows_on;      /* a table whose changes reach nodes: stops at the group's offset */
    const char *name;  /* the store's, borrowed from the pipeline */
    char topic[512];   /* its changelog, or the table's topic */
    int32_t partition;
    rd_kafka_topic_t *rkt; /* the handle its messages carry, once seen (dispatch) */
    int64_t checkpoint; /* -1: none (replay from the beginning) */
    int64_t from;      /* first offset replayed */
    int start_known;   /* `from` is the log start read by ks_restore_ends (no
                        * checkpoint, or a stale one; else a replay without a
                        * checkpoint starts at "beginning") */
    int stale;         /* its checkpoint is below the log start or past the high
                        * watermark: wipe the store */
    int64_t lso;       /* replayed up to here (at most a table's limit) */
    int64_t hw;        /* the partition's high watermark when its ends were read */
    int64_t ended_ms;  /* when it reached lso */
    uint64_t done;     /* records applied */
    ks_fold *fold;     /* a changelog's records since the last commit; NULL for a
                        * table (a record its serdes refuse is skipped, so an
                        * earlier one of its key must stay: no folding) */
    int active;        /* assigned and not at its end yet */
} ks_replay;

/* Set rp[i].lso of the n replays to their changelog's last stable offset,
 * after waiting (two minutes at most) for a previous owner's open
 * transactions on them to end, then lower a table's to its limit; set
 * `from` of a replay without a checkpoint, or with one below the log start
 * or past the high watermark (then `stale`), to its log start offset (and
 * start_known) when that can be read. 0,
 * KS_ERR_STATE when the engine is stopping, KS_ERR_IO (engine stopped,
 * the message names a topic and partition) when the offsets cannot be
 * read. `group` (the worker's consumer) is borrowed. */
int ks_restore_ends(ks_restorer *r, rd_kafka_t *group, ks_replay *rp, size_t n);

#endif /* KS_RESTORE_ENDS_H */
