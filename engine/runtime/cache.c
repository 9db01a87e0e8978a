/*
 * cache.c - the record cache of one node in one task (cache.h): a hash of
 * the keys with output owed, in the order of their latest update.
 */
#include "runtime/cache.h"

#include <stdlib.h>
#include <string.h>

/* What an entry costs besides its bytes (the entry, the bucket slot and
 * malloc's own overhead, roughly). */
#define ENTRY_OVERHEAD 96

static uint64_t hash_of(const void *key, size_t len)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    const unsigned char *b = key;
    for (size_t i = 0; i < len; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* Slots of the fold estimate: about one per entry the size holds, a power
 * of two between 1024 and 65536 (the slot index must fit in 16 bits: the
 * batch tag takes the low 16 bits of a slot). */
static size_t seen_slots(size_t max_bytes)
{
    size_t n = 1024;
    while (n < 65536 && n * 128 < max_bytes)
        n *= 2;
    return n;
}

ks_cache *ks_cache_new(size_t max_bytes)
{
    ks_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->max_bytes = max_bytes;
    c->bucket_count = 64;
    c->buckets = calloc(c->bucket_count, sizeof *c->buckets);
    size_t slots = seen_slots(max_bytes);
    c->seen = calloc(slots, sizeof *c->seen);
    c->seen_mask = slots - 1;
    c->batch = 1; /* a zeroed slot never carries the tag of batch 1 */
    if (!c->buckets || !c->seen) {
        free(c->buckets);
        free(c->seen);
        free(c);
        return NULL;
    }
    return c;
}

void ks_cache_observe(ks_cache *c, ks_bytes key)
{
    /* standing aside, one batch in 8 is enough to notice keys repeating
     * again (the hash and the slot's cache miss cost ~3% of a count) */
    if (c->bypass && (c->batch & 7))
        return;
    uint64_t h = hash_of(key.data, key.len);
    uint64_t tag = (h & ~UINT64_C(0xFFFF)) | (c->batch & 0xFFFF);
    uint64_t *slot = &c->seen[h & c->seen_mask];
    c->sample_updates++;
    c->sample_repeats += *slot == tag;
    *slot = tag;
}

int ks_cache_end_batch(ks_cache *c)
{
    c->batch++;
    /* entries left (not flushed) would come out after the updates that
     * bypass them: the mode changes only with the cache empty */
    if (c->sample_updates < KS_CACHE_SAMPLE || c->count > 0)
        return -1;
    int pct = (int)(c->sample_repeats * 100 / c->sample_updates);
    int was = c->bypass;
    if (c->bypass && pct >= KS_CACHE_RESUME_ABOVE)
        c->bypass = 0;
    else if (!c->bypass && pct < KS_CACHE_BYPASS_BELOW)
        c->bypass = 1;
    c->sample_updates = c->sample_repeats = 0;
    return c->bypass != was ? pct : -1;
}

/* Free what the entry's record owns (value, headers), keeping the key. */
static void free_record(ks_cache_entry *e)
{
    ks_record *r = &e->rec;
    if (r->value != e->small)
        free((void *)r->value);
    for (size_t i = 0; i < r->header_count; i++) {
        free((void *)r->headers[i].name);
        free((void *)r->headers[i].value);
    }
    free((void *)r->headers);
    r->value = NULL;
    r->value_len = 0;
    r->headers = NULL;
    r->header_count = 0;
    r->topic = NULL;
}

static void free_kept(ks_cache_entry *e)
{
    if (e->kept != e->kept_small)
        free((void *)e->kept);
    e->kept = NULL;
    e->kept_len = 0;
}

void ks_cache_entry_free(ks_cache_entry *e)
{
    if (!e)
        return;
    free_record(e);
    free_kept(e);
    free(e);
}

void ks_cache_clear(ks_cache *c)
{
    if (!c)
        return;
    for (ks_cache_entry *e = c->oldest, *n; e; e = n) {
        n = e->newer;
        ks_cache_entry_free(e);
    }
    memset(c->buckets, 0, c->bucket_count * sizeof *c->buckets);
    c->oldest = c->newest = NULL;
    c->bytes = 0;
    c->count = 0;
}

void ks_cache_free(ks_cache *c)
{
    if (!c)
        return;
    ks_cache_clear(c);
    for (size_t i = 0; i < c->topic_count; i++)
        free(c->topics[i]);
    free(c->topics);
    free(c->buckets);
    free(c->seen);
    free(c);
}

ks_cache_entry *ks_cache_find(const ks_cache *c, ks_bytes key)
{
    uint64_t h = hash_of(key.data, key.len);
    for (ks_cache_entry *e = c->buckets[h & (c->bucket_count - 1)]; e; e = e->next_in_bucket)
        if (e->hash == h && e->rec.key_len == key.len &&
            (key.len == 0 || memcmp(e->rec.key, key.data, key.len) == 0))
            return e;
    return NULL;
}

static void unlink_order(ks_cache *c, ks_cache_entry *e)
{
    if (e->older)
        e->older->newer = e->newer;
    else
        c->oldest = e->newer;
    if (e->newer)
        e->newer->older = e->older;
    else
        c->newest = e->older;
    e->older = e->newer = NULL;
}

static void append_order(ks_cache *c, ks_cache_entry *e)
{
    e->older = c->newest;
    e->newer = NULL;
    if (c->newest)
        c->newest->newer = e;
    else
        c->oldest = e;
    c->newest = e;
}

/* Twice the buckets when there are more entries than buckets (a failed
 * allocation only keeps the chains longer). */
static void maybe_grow(ks_cache *c)
{
    if (c->count < c->bucket_count)
        return;
    size_t n = c->bucket_count * 2;
    ks_cache_entry **b = calloc(n, sizeof *b);
    if (!b)
        return;
    for (ks_cache_entry *e = c->oldest; e; e = e->newer) {
        e->next_in_bucket = b[e->hash & (n - 1)];
        b[e->hash & (n - 1)] = e;
    }
    free(c->buckets);
    c->buckets = b;
    c->bucket_count = n;
}

/* The entry of `key`, made when missing (*made = 1), now the newest;
 * NULL when out of memory. The key is kept right after the entry: one
 * allocation per key. */
static ks_cache_entry *touch(ks_cache *c, ks_bytes key, int *made)
{
    /* a forward follows the store write of the same key: no look-up */
    ks_cache_entry *e = c->newest;
    if (!e || e->rec.key_len != key.len || (key.len && memcmp(e->rec.key, key.data, key.len)))
        e = ks_cache_find(c, key);
    *made = !e;
    c->seq++;
    if (e) {
        e->seq = c->seq;
        if (c->newest != e) {
            unlink_order(c, e);
            append_order(c, e);
        }
        return e;
    }
    e = calloc(1, sizeof *e + (key.len ? key.len : 1));
    if (!e)
        return NULL;
    if (key.len)
        memcpy(e->key, key.data, key.len);
    e->rec.key = e->key;
    e->rec.key_len = key.len;
    e->rec.partition = -1;
    e->rec.offset = -1;
    e->kept_store = -1;
    e->seq = c->seq;
    e->hash = hash_of(key.data, key.len);
    e->bytes = key.len + ENTRY_OVERHEAD;
    maybe_grow(c);
    e->next_in_bucket = c->buckets[e->hash & (c->bucket_count - 1)];
    c->buckets[e->hash & (c->bucket_count - 1)] = e;
    append_order(c, e);
    c->bytes += e->bytes;
    c->count++;
    return e;
}

static size_t record_bytes(const ks_record *r);

/* What entry e counts against the size. */
static size_t entry_bytes(const ks_cache_entry *e)
{
    return e->rec.key_len + ENTRY_OVERHEAD + (e->has_rec ? record_bytes(&e->rec) : 0) +
           (e->kept && e->kept != e->kept_small ? e->kept_len : 0);
}

/* Keep `value` (NULL: deleted) as the value of e's store `store`, when e
 * keeps none or that one's (out of memory, it keeps none: passing on
 * reads the store). */
static void keep_value(ks_cache_entry *e, int store, const ks_bytes *value)
{
    if (e->kept_store >= 0 && e->kept_store != store)
        return; /* a second store: passing on reads it */
    free_kept(e);
    e->kept_store = store;
    if (!value)
        return;
    if (value->len <= sizeof e->kept_small) {
        e->kept = e->kept_small;
    } else if (!(e->kept = malloc(value->len))) {
        e->kept_store = -1;
        return;
    }
    if (value->len)
        memcpy((void *)e->kept, value->data, value->len);
    e->kept_len = value->len;
}

void ks_cache_drop_kept(ks_cache *c, ks_bytes key, int store)
{
    ks_cache_entry *e = ks_cache_find(c, key);
    if (!e || e->kept_store != store)
        return;
    c->bytes -= e->bytes;
    free_kept(e);
    e->kept_store = -1;
    e->bytes = entry_bytes(e);
    c->bytes += e->bytes;
}

int ks_cache_mark_store(ks_cache *c, ks_bytes key, int store, const ks_bytes *value)
{
    if (store < 0 || store > 31)
        return KS_ERR_INVALID;
    int made;
    ks_cache_entry *e = touch(c, key, &made);
    if (!e)
        return KS_ERR_NOMEM;
    uint32_t bit = UINT32_C(1) << store;
    if (!e->has_rec) { /* with a forward, the forward counts the update */
        c->updates++;
        c->folds += !made && (e->dirty_stores & bit);
    }
    e->dirty_stores |= bit;
    c->bytes -= e->bytes;
    keep_value(e, store, value);
    e->bytes = entry_bytes(e);
    c->bytes += e->bytes;
    return 0;
}

static char *dup_bytes(const void *p, size_t len)
{
    char *d = malloc(len + 1);
    if (d) {
        if (len)
            memcpy(d, p, len);
        d[len] = '\0';
    }
    return d;
}

/* The cache's copy of a source topic's name (few: one per source). */
static const char *intern_topic(ks_cache *c, const char *topic)
{
    for (size_t i = 0; i < c->topic_count; i++)
        if (strcmp(c->topics[i], topic) == 0)
            return c->topics[i];
    char **t = realloc(c->topics, (c->topic_count + 1) * sizeof *t);
    if (!t)
        return NULL;
    c->topics = t;
    if (!(t[c->topic_count] = dup_bytes(topic, strlen(topic))))
        return NULL;
    return t[c->topic_count++];
}

/* Copy value and headers of `src` into entry e's record (the topic
 * interned, the rest as it is), freeing what it held. 0 or KS_ERR_NOMEM
 * (the entry then holds no record). */
static int copy_record(ks_cache *c, ks_cache_entry *e, const ks_record *src)
{
    const void *old = e->rec.value;
    int reuse = old && old != e->small && e->rec.value_len >= src->value_len;
    if (reuse)
        e->rec.value = NULL; /* kept from free_record: reused below */
    free_record(e);
    ks_record r = *src;
    r.key = e->key;
    r.key_len = e->rec.key_len;
    r.headers = NULL;
    r.header_count = 0;
    r.topic = src->topic ? intern_topic(c, src->topic) : NULL;
    int bad = src->topic && !r.topic;
    if (!src->value) {
        r.value = NULL;
    } else if (src->value_len <= sizeof e->small) {
        memcpy(e->small, src->value, src->value_len);
        r.value = e->small;
    } else if (reuse) {
        memcpy((void *)old, src->value, src->value_len);
        r.value = old;
        old = NULL;
    } else {
        r.value = dup_bytes(src->value, src->value_len);
        bad |= !r.value;
    }
    if (reuse && old)
        free((void *)old);
    if (!bad && src->header_count) {
        ks_header *h = calloc(src->header_count, sizeof *h);
        bad = !h;
        for (size_t i = 0; h && i < src->header_count; i++) {
            const ks_header *s = &src->headers[i];
            h[i].name = dup_bytes(s->name, strlen(s->name));
            h[i].value = s->value ? dup_bytes(s->value, s->value_len) : NULL;
            h[i].value_len = s->value_len;
            r.header_count = i + 1;
            if (!h[i].name || (s->value && !h[i].value)) {
                bad = 1;
                break;
            }
        }
        r.headers = h;
    }
    e->rec = r;
    if (bad) {
        free_record(e);
        e->has_rec = 0;
        return KS_ERR_NOMEM;
    }
    return 0;
}

static size_t record_bytes(const ks_record *r)
{
    size_t n = r->value_len;
    for (size_t i = 0; i < r->header_count; i++)
        n += strlen(r->headers[i].name) + r->headers[i].value_len + 16;
    return n;
}

int ks_cache_put_record(ks_cache *c, const ks_record *rec)
{
    int made;
    ks_cache_entry *e = touch(c, (ks_bytes){rec->key, rec->key_len}, &made);
    if (!e)
        return KS_ERR_NOMEM;
    c->updates++;
    c->folds += e->has_rec;
    c->bytes -= e->bytes;
    int rc = copy_record(c, e, rec);
    e->has_rec = rc == 0;
    e->bytes = entry_bytes(e);
    c->bytes += e->bytes;
    return rc;
}

ks_cache_entry *ks_cache_take_all(ks_cache *c)
{
    ks_cache_entry *all = c->oldest;
    if (!all)
        return NULL;
    memset(c->buckets, 0, c->bucket_count * sizeof *c->buckets);
    c->oldest = c->newest = NULL;
    c->bytes = 0;
    c->count = 0;
    return all;
}

ks_cache_entry *ks_cache_over(const ks_cache *c)
{
    const ks_cache_entry *o = c->oldest;
    if (o && (c->bytes > c->max_bytes || c->seq - o->seq > KS_CACHE_AGE_UPDATES))
        return c->oldest;
    return NULL;
}

void ks_cache_take(ks_cache *c, ks_cache_entry *e)
{
    ks_cache_entry **at = &c->buckets[e->hash & (c->bucket_count - 1)];
    while (*at && *at != e)
        at = &(*at)->next_in_bucket;
    if (*at)
        *at = e->next_in_bucket;
    e->next_in_bucket = NULL;
    unlink_order(c, e);
    c->bytes -= e->bytes;
    c->count--;
}
