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
 * size, and a flush (task_cache.c, before the commit) passes them on in
 * that order, so the last updates of different keys keep their order.
 *
 * No Kafka, no LMDB, no task here: task_cache.c does the flushing. One
 * thread (the task's owner).
 */
#ifndef KS_CACHE_H
#define KS_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "kstreams/kstreams.h"

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

/* Key `key` wrote the node's store number `store` (0..31): its changelog
 * record is owed. Makes the key the newest entry. 0 or KS_ERR_NOMEM,
 * KS_ERR_INVALID for a store number over 31. */
int ks_cache_mark_store(ks_cache *c, ks_bytes key, int store);

/* Keep a copy of `rec` as the forward owed for its key, replacing the one
 * before. Makes the key the newest entry. 0 or KS_ERR_NOMEM. */
int ks_cache_put_record(ks_cache *c, const ks_record *rec);

/* The entry of `key`, or NULL. */
ks_cache_entry *ks_cache_find(const ks_cache *c, ks_bytes key);

/* The oldest entry when the cache holds more than max_bytes, else NULL:
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
