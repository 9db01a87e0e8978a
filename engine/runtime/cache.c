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

ks_cache *ks_cache_new(size_t max_bytes)
{
    ks_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->max_bytes = max_bytes;
    c->bucket_count = 64;
    c->buckets = calloc(c->bucket_count, sizeof *c->buckets);
    if (!c->buckets) {
        free(c);
        return NULL;
    }
    return c;
}

static void free_record(ks_record *r)
{
    free((void *)r->value);
    for (size_t i = 0; i < r->header_count; i++) {
        free((void *)r->headers[i].name);
        free((void *)r->headers[i].value);
    }
    free((void *)r->headers);
    free((void *)r->topic);
    r->value = NULL;
    r->value_len = 0;
    r->headers = NULL;
    r->header_count = 0;
    r->topic = NULL;
}

void ks_cache_entry_free(ks_cache_entry *e)
{
    if (!e)
        return;
    free_record(&e->rec);
    free((void *)e->rec.key);
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
    free(c->buckets);
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

/* The entry of `key`, made (and counted) when missing, now the newest;
 * NULL when out of memory. */
static ks_cache_entry *touch(ks_cache *c, ks_bytes key)
{
    c->updates++;
    ks_cache_entry *e = ks_cache_find(c, key);
    if (e) {
        c->folds++;
        unlink_order(c, e);
        append_order(c, e);
        return e;
    }
    e = calloc(1, sizeof *e);
    void *k = malloc(key.len ? key.len : 1);
    if (!e || !k) {
        free(e);
        free(k);
        return NULL;
    }
    if (key.len)
        memcpy(k, key.data, key.len);
    e->rec.key = k;
    e->rec.key_len = key.len;
    e->rec.partition = -1;
    e->rec.offset = -1;
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

int ks_cache_mark_store(ks_cache *c, ks_bytes key, int store)
{
    if (store < 0 || store > 31)
        return KS_ERR_INVALID;
    ks_cache_entry *e = touch(c, key);
    if (!e)
        return KS_ERR_NOMEM;
    e->dirty_stores |= UINT32_C(1) << store;
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

/* Copy value, headers and topic of `src` into `dst` (key and the rest
 * as they are). 0 or KS_ERR_NOMEM (dst then holds no copies). */
static int copy_record(ks_record *dst, const ks_record *src)
{
    ks_record r = *src;
    r.key = dst->key;
    r.key_len = dst->key_len;
    r.value = src->value ? dup_bytes(src->value, src->value_len) : NULL;
    r.topic = src->topic ? dup_bytes(src->topic, strlen(src->topic)) : NULL;
    r.headers = NULL;
    r.header_count = 0;
    int bad = (src->value && !r.value) || (src->topic && !r.topic);
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
    if (bad) {
        free_record(&r);
        return KS_ERR_NOMEM;
    }
    *dst = r;
    return 0;
}

static size_t record_bytes(const ks_record *r)
{
    size_t n = r->value_len + (r->topic ? strlen(r->topic) : 0);
    for (size_t i = 0; i < r->header_count; i++)
        n += strlen(r->headers[i].name) + r->headers[i].value_len + 16;
    return n;
}

int ks_cache_put_record(ks_cache *c, const ks_record *rec)
{
    ks_cache_entry *e = touch(c, (ks_bytes){rec->key, rec->key_len});
    if (!e)
        return KS_ERR_NOMEM;
    ks_record copy = {.key = e->rec.key, .key_len = e->rec.key_len};
    if (copy_record(&copy, rec) != 0)
        return KS_ERR_NOMEM;
    c->bytes -= e->bytes;
    if (e->has_rec)
        free_record(&e->rec);
    e->rec = copy;
    e->has_rec = 1;
    e->bytes = e->rec.key_len + ENTRY_OVERHEAD + record_bytes(&e->rec);
    c->bytes += e->bytes;
    return 0;
}

ks_cache_entry *ks_cache_over(const ks_cache *c)
{
    return c->bytes > c->max_bytes ? c->oldest : NULL;
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
