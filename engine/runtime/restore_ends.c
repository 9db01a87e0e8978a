/*
 * restore_ends.c - where the replays of a restore pass end (restore_ends.h).
 */
#include "runtime/restore_ends.h"

#include <stdlib.h>
#include <unistd.h>

#include "base/clock.h"
#include "kafka/kafka.h"
#include "runtime/table.h"

#define ENDS_WAIT_MS 120000   /* a previous owner's open transactions */
#define LIMIT_WAIT_MS 60000   /* the group's committed offsets */

/* The list of the replays' partitions that `want` selects (NULL: all),
 * each element's opaque pointing at its replay; NULL when none is. */
static rd_kafka_topic_partition_list_t *partitions_of(ks_replay *rp, size_t n,
                                                      int (*want)(const ks_replay *))
{
    rd_kafka_topic_partition_list_t *l = NULL;
    for (size_t i = 0; i < n; i++) {
        if (want && !want(&rp[i]))
            continue;
        if (!l)
            l = rd_kafka_topic_partition_list_new((int)n);
        rd_kafka_topic_partition_list_add(l, rp[i].topic, rp[i].partition)->opaque = &rp[i];
    }
    return l;
}

/* The offset `which` (RD_KAFKA_OFFSET_END or _BEGINNING) of every
 * partition of `l` as `client` sees it (ListOffsets "latest": the last
 * stable offset on a read_committed client, the log end on a
 * read_uncommitted one; "earliest": the log start), in each element's
 * offset: one request per leader for all of them. 0, or KS_ERR_IO when
 * any is missing. */
static int list_offsets(rd_kafka_t *client, rd_kafka_topic_partition_list_t *l, int64_t which)
{
    for (int i = 0; i < l->cnt; i++)
        l->elems[i].offset = which; /* the "timestamp" of the latest or earliest */
    if (rd_kafka_offsets_for_times(client, l, 10000) != RD_KAFKA_RESP_ERR_NO_ERROR)
        return KS_ERR_IO;
    for (int i = 0; i < l->cnt; i++)
        if (l->elems[i].err || l->elems[i].offset < 0)
            return KS_ERR_IO;
    return 0;
}

/* Read both ends of every partition of `l` into rp->lso and *hw (by
 * element). 0, or KS_ERR_IO. */
static int read_ends(ks_restorer *r, rd_kafka_topic_partition_list_t *l, int64_t *hw)
{
    int rc = list_offsets(r->consumer, l, RD_KAFKA_OFFSET_END);
    for (int i = 0; rc == 0 && i < l->cnt; i++)
        ((ks_replay *)l->elems[i].opaque)->lso = l->elems[i].offset;
    if (rc == 0)
        rc = list_offsets(r->probe, l, RD_KAFKA_OFFSET_END);
    for (int i = 0; rc == 0 && i < l->cnt; i++)
        hw[i] = l->elems[i].offset;
    return rc;
}

/* Wait until no partition of `l` has an open transaction (LSO == HW), up
 * to ENDS_WAIT_MS; past it the LSO stands. 0, KS_ERR_STATE, KS_ERR_IO
 * (engine stopped). */
static int wait_stable(ks_restorer *r, rd_kafka_topic_partition_list_t *l)
{
    int64_t *hw = calloc((size_t)l->cnt, sizeof *hw);
    if (!hw)
        return KS_ERR_NOMEM;
    int64_t deadline = ks_mono_ms() + ENDS_WAIT_MS;
    int rc;
    for (;;) {
        rc = read_ends(r, l, hw);
        int open = 0;
        for (int i = 0; rc == 0 && i < l->cnt; i++)
            open |= ((ks_replay *)l->elems[i].opaque)->lso < hw[i];
        if (rc == 0 && (!open || ks_mono_ms() > deadline)) {
            for (int i = 0; i < l->cnt; i++)
                ((ks_replay *)l->elems[i].opaque)->hw = hw[i];
            break;
        }
        /* an error is transient just after the topic's creation (no leader
         * yet) or while the broker restarts (found by the crash suite,
         * tests/integration/test_crash.c): retry until the deadline */
        if (rc != 0 && ks_mono_ms() > deadline) {
            ks_engine_fail(r->eng, r->where, "restore of %s [%d]: cannot read its offsets",
                           l->elems[0].topic, (int)l->elems[0].partition);
            break;
        }
        if (ks_engine_stopping(r->eng)) {
            rc = KS_ERR_STATE;
            break;
        }
        usleep(rc != 0 ? 200 * 1000 : 100 * 1000);
    }
    free(hw);
    return rc;
}

static int flows_on(const ks_replay *rp)
{
    return rp->flows_on;
}

/* Lower the end of each table whose changes flow on to the offset the
 * group committed for its partition: the group's consumer processes the
 * rest, so that every change reaches its readers once. 0, KS_ERR_STATE,
 * KS_ERR_IO (engine stopped) when the offsets cannot be read within
 * LIMIT_WAIT_MS. */
static int table_limits(ks_restorer *r, rd_kafka_t *group, ks_replay *rp, size_t n)
{
    rd_kafka_topic_partition_list_t *l = partitions_of(rp, n, flows_on);
    if (!l)
        return 0;
    int64_t end = ks_mono_ms() + LIMIT_WAIT_MS;
    int rc = KS_ERR_IO;
    while (ks_mono_ms() < end) {
        if (ks_engine_stopping(r->eng)) {
            rc = KS_ERR_STATE;
            break;
        }
        int missing = rd_kafka_committed(group, l, 10000) != RD_KAFKA_RESP_ERR_NO_ERROR;
        for (int i = 0; !missing && i < l->cnt; i++)
            missing = l->elems[i].err != 0;
        if (!missing) {
            for (int i = 0; i < l->cnt; i++) {
                ks_replay *t = l->elems[i].opaque;
                int64_t limit = l->elems[i].offset >= 0 ? l->elems[i].offset : 0;
                if (limit < t->lso)
                    t->lso = limit;
            }
            rc = 0;
            break;
        }
        usleep(200 * 1000); /* e.g. a previous owner's offsets still pending */
    }
    if (rc == KS_ERR_IO)
        ks_engine_fail(r->eng, r->where, "table %s [%d]: cannot read the group's committed offset",
                       l->elems[0].topic, (int)l->elems[0].partition);
    rd_kafka_topic_partition_list_destroy(l);
    return rc;
}

/* Read every replay's log start offset. A replay without a checkpoint
 * starts there, so that the restore consumer is assigned explicit offsets:
 * assigned "beginning", librdkafka 2.0.2 looks the offset up itself once
 * the partition's leader is known to it, and retries only after 500 ms
 * when it is not yet (measured: the first record of a restore came 20 ms
 * after the assign in some runs and 520 ms in the others). A checkpoint
 * outside the partition (ks_kafka_offset_gone: below the log start, or
 * past the high watermark) marks the replay stale: its store is wiped and
 * replayed from the log start, as Kafka Streams does. When the starts
 * cannot be read, a replay without a checkpoint starts at "beginning". */
static void read_starts(ks_restorer *r, ks_replay *rp, size_t n)
{
    rd_kafka_topic_partition_list_t *l = partitions_of(rp, n, NULL);
    if (!l)
        return;
    if (list_offsets(r->consumer, l, RD_KAFKA_OFFSET_BEGINNING) == 0)
        for (int i = 0; i < l->cnt; i++) {
            ks_replay *e = l->elems[i].opaque;
            int64_t start = l->elems[i].offset;
            ks_offset_gone gone;
            e->stale = ks_kafka_offset_gone(e->checkpoint, start, e->hw, &gone);
            if (e->checkpoint >= 0 && !e->stale)
                continue;
            e->from = start;
            e->start_known = 1;
        }
    rd_kafka_topic_partition_list_destroy(l);
}

int ks_restore_ends(ks_restorer *r, rd_kafka_t *group, ks_replay *rp, size_t n)
{
    rd_kafka_topic_partition_list_t *l = partitions_of(rp, n, NULL);
    if (!l)
        return 0;
    int rc = wait_stable(r, l);
    rd_kafka_topic_partition_list_destroy(l);
    if (rc == 0)
        read_starts(r, rp, n);
    return rc == 0 ? table_limits(r, group, rp, n) : rc;
}
