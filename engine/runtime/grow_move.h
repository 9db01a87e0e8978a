/*
 * grow_move.h - the state half of `kstreams grow-partitions`: read the
 * changelogs of the key-value stores (read_committed, to their ends) into
 * memory, each key's latest value per partition, and then, in one Kafka
 * transaction, write every live key whose partition under the new count
 * differs to the partition it now belongs to, with a tombstone in the one
 * it leaves. A task's local checkpoint stays valid: an old partition
 * replays the tombstones after it, a new one restores from the start.
 */
#ifndef KS_GROW_MOVE_H
#define KS_GROW_MOVE_H

#include <stddef.h>
#include <stdint.h>

#include <librdkafka/rdkafka.h>

#include "runtime/grow_plan.h"

/* One live key of a changelog. */
typedef struct ks_grow_entry {
    unsigned char *key, *value; /* owned */
    size_t key_len, value_len;
    int32_t partition;          /* where it is now */
} ks_grow_entry;

/* What one store's changelog holds. */
typedef struct ks_grow_changelog {
    const ks_grow_store *store; /* borrowed from the plan */
    int32_t partitions;         /* the changelog's count when read; 0: no changelog yet */
    ks_grow_entry *entries;     /* live keys, owned */
    size_t count, cap;
    int64_t *versions;          /* per partition: its state version record, -1 none */
} ks_grow_changelog;

/*
 * Read the changelog of every store of `plan` (partitions[i] partitions
 * each; 0: it does not exist, nothing read) with `committed`, a
 * read_committed consumer (borrowed; this call assigns and unassigns), up
 * to each partition's end. 0 with *out (plan->store_count entries, free
 * with ks_grow_changelogs_free); -1 with err.
 */
int ks_grow_read(rd_kafka_t *committed, const ks_grow_plan *plan, const int32_t *partitions,
                 ks_grow_changelog **out, char *err, size_t errlen);

/* The state version the partitions of c (borrowed) agree on (>= 0), -1
 * when none has one, -2 with err naming `store` when they differ (a task
 * that never ran with the current build: start the application once, stop
 * it, run again). */
int64_t ks_grow_version(const ks_grow_changelog *c, const char *store, char *err,
                        size_t errlen);

/* Live keys of c whose partition among `partitions` differs from where
 * they are. */
size_t ks_grow_moves(const ks_grow_changelog *c, int32_t partitions);

/*
 * In one transaction of `producer` (transactional, initialised: borrowed),
 * move the keys of the n changelogs to their partitions among
 * `partitions` (value to the new one, tombstone to the old) and write the
 * store's state version record to each partition that lacks it. *moved
 * (may be NULL) receives the keys moved. 0, or -1 with err (the
 * transaction aborted: nothing moved).
 */
int ks_grow_write(rd_kafka_t *producer, const ks_grow_changelog *c, size_t n,
                  int32_t partitions, size_t *moved, char *err, size_t errlen);

/* Free what ks_grow_read made (n entries). NULL is fine. */
void ks_grow_changelogs_free(ks_grow_changelog *c, size_t n);

#endif /* KS_GROW_MOVE_H */
