/*
 * cache.h - the record cache of one stateful node in one task: the keys
 * the node updated in the open batch whose changelog record and forward
 * are still owed, each with its latest forwarded record only.
 *
 * Kafka Streams' record cache (statestore.cache.max.bytes) for kstreams:
 * the store itself is written at once (LMDB, so reads see every update);
 * what the cache folds is the output. An update of a key already in the
 * cache replaces its record (a fold, counted in `folds`) and makes it the
 * newest entry. The entries are kept in the order of their latest
 * update: the oldest is evicted first when the cache holds more than its
 * size, or when it has not been updated for KS_CACHE_AGE_UPDATES updates
 * of other keys (so keys that stopped changing leave during the batch,
 * not in one burst at the commit), and a flush (task_cache.c, before the
 * commit) passes them on in that order, so the last updates of different
 * keys keep their order. An entry keeps the value its first written store
 * got, so passing it on needs no store read.
 *
 * A cache that does not fold stands aside: every update is observed in a
 * small table of key hashes (one slot per hash, tagged with the batch), and
 * when fewer than KS_CACHE_BYPASS_BELOW percent of KS_CACHE_SAMPLE updates
 * repeated a key of their batch, the next batches pass every update on at
 * once (`bypass`), as without a cache, until the repeats come back above
 * KS_CACHE_RESUME_ABOVE percent (observed in one batch in 8 meanwhile). The mode changes only between batches,
 * when the cache is empty.
 *
 * No Kafka, no LMDB, no task here: task_cache.c does the flushing. One
 * thread (the task's owner).
 */
#ifndef KS_CACHE_H
#define KS_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "kstreams/kstreams.h"

/* An entry untouched by this many later updates of the cache is passed on. */
#define KS_CACHE_AGE_UPDATES 4096
/* Updates between two decisions on `bypass` (at a batch's end). */
#define KS_CACHE_SAMPLE 2048
#define KS_CACHE_BYPASS_BELOW 15 /* percent of updates repeating a key */
#define KS_CACHE_RESUME_ABOVE 25

typedef struct ks_cache_entry {
    /* `rec` is owned: rec.key (always set, also without a record; kept
     * right after the entry), value (in `small` when it fits) and headers
     * are copies; rec.topic is the cache's copy (valid while the cache
     * lives) */
    ks_record rec;
    int has_rec;           /* a forward is owed: rec                */
    uint32_t dirty_stores; /* bit s: the node's store s was written
                              under this key, its changelog is owed */
    size_t bytes;          /* what the entry counts against the size */
    uint64_t hash;
    uint64_t seq;          /* the cache's update count at its latest update */
    /* the value store number `kept_store` (-1: none) was last written
     * with: in `kept_small` when it fits, else owned; NULL = deleted */
    int kept_store;
    const void *kept;
    size_t kept_len;
    unsigned char kept_small[16];
    struct ks_cache_entry *older, *newer; /* update order            */
    struct ks_cache_entry *next_in_bucket;
    unsigned char small[16]; /* rec.value when it fits (an int64 count) */
    unsigned char key[];     /* rec.key                                */
} ks_cache_entry;

typedef struct ks_cache {
    size_t max_bytes;
    size_t bytes;
    size_t count;
    ks_cache_entry *oldest, *newest;
    ks_cache_entry **buckets;
    size_t bucket_count; /* a power of two */
    char **topics;       /* the source topics the records named, one copy each */
    size_t topic_count;
    uint64_t seq;        /* updates of entries, for their age        */
    /* the fold estimate: hashes of the keys updated, tagged with the batch */
    uint64_t *seen;
    size_t seen_mask;
    uint64_t batch;            /* batches ended (the tag)                  */
    uint64_t sample_updates;   /* since the last decision                  */
    uint64_t sample_repeats;   /* of them, of a key seen in its batch      */
    int bypass;                /* 1: updates pass on at once, uncached     */
    /* since the cache was made */
    uint64_t updates;   /* forwards kept (and store writes of keys
                           without one)                                   */
    uint64_t folds;     /* of them, replacing one of the same key        */
    uint64_t evictions; /* entries passed on because the cache was full  */
    uint64_t flushed;   /* entries passed on by a flush                  */
} ks_cache;

/* A cache of `max_bytes` (> 0). NULL when out of memory. */
ks_cache *ks_cache_new(size_t max_bytes);

/* Free the cache and every entry. NULL is fine. */
void ks_cache_free(ks_cache *c);

/* Drop every entry (the batch was aborted: nothing of it is owed). */
void ks_cache_clear(ks_cache *c);

/* Key `key` wrote the node's store number `store` (0..31) with `value`
 * (NULL: deleted; copied when the entry keeps it): its changelog record is
 * owed. Makes the key the newest entry. 0 or KS_ERR_NOMEM, KS_ERR_INVALID
 * for a store number over 31. */
int ks_cache_mark_store(ks_cache *c, ks_bytes key, int store, const ks_bytes *value);

/* Store number `store` of `key` was written outside the cache (a
 * punctuation): the entry, if any, no longer keeps its value (passing on
 * reads the store). */
void ks_cache_drop_kept(ks_cache *c, ks_bytes key, int store);

/* Count an update of `key` for the fold estimate (with the cache in use;
 * standing aside, in one batch in 8). */
void ks_cache_observe(ks_cache *c, ks_bytes key);

/* The batch ended with the cache empty (flushed, or cleared by an abort):
 * start a new batch for the estimate and, every KS_CACHE_SAMPLE updates,
 * decide `bypass` for the batches that follow. The percentage of updates
 * that repeated a key when `bypass` changed, else -1. */
int ks_cache_end_batch(ks_cache *c);

/* Keep a copy of `rec` as the forward owed for its key, replacing the one
 * before. Makes the key the newest entry. 0 or KS_ERR_NOMEM. */
int ks_cache_put_record(ks_cache *c, const ks_record *rec);

/* The entry of `key`, or NULL. */
ks_cache_entry *ks_cache_find(const ks_cache *c, ks_bytes key);

/* The oldest entry when the cache holds more than max_bytes or when
 * KS_CACHE_AGE_UPDATES updates came after its last one, else NULL:
 * the caller passes it on and removes it (ks_cache_take + ks_cache_entry_free). */
ks_cache_entry *ks_cache_over(const ks_cache *c);

/* Unlink `e` from the cache; the caller owns it then. */
void ks_cache_take(ks_cache *c, ks_cache_entry *e);

/* Empty the cache in one step: its entries, oldest first, linked by
 * `newer`; the caller owns them (ks_cache_entry_free each). */
ks_cache_entry *ks_cache_take_all(ks_cache *c);

/* Free an entry taken out of its cache (before the cache itself). */
void ks_cache_entry_free(ks_cache_entry *e);

#endif /* KS_CACHE_H */
