/*
 * restore_fold.c - a restore batch folded by key (restore_fold.h): the
 * entries in an array, an open-addressing index over them, keys and
 * values in one growing arena (offsets, as the arena moves when it grows).
 */
#include "runtime/restore_fold.h"
#include "base/grow.h"

#include <stdlib.h>
#include <string.h>

typedef struct entry {
    uint64_t hash;
    size_t key, value; /* arena offsets */
    uint32_t key_len, value_len, value_cap;
    int deleted;
    int64_t offset;
} entry;

struct ks_fold {
    entry *e;
    size_t n, cap;
    uint32_t *index;   /* entry number + 1; 0: free slot */
    size_t slots;      /* a power of two, at least twice n */
    char *arena;
    size_t used, size;
};

ks_fold *ks_fold_new(void)
{
    return calloc(1, sizeof(ks_fold));
}

void ks_fold_free(ks_fold *f)
{
    if (!f)
        return;
    free(f->e);
    free(f->index);
    free(f->arena);
    free(f);
}

size_t ks_fold_bytes(const ks_fold *f)
{
    return f->used + f->n * sizeof(entry) + f->slots * sizeof(uint32_t);
}

/* FNV-1a: keys are short, and this is far cheaper than the store put it
 * saves. */
static uint64_t hash_of(ks_bytes k)
{
    const unsigned char *p = k.data;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < k.len; i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

/* Room for `len` more arena bytes; the offset they start at, or
 * (size_t)-1. */
static size_t reserve(ks_fold *f, size_t len)
{
    if (f->used + len > f->size) {
        size_t size = f->size ? f->size : 1 << 16;
        while (size < f->used + len)
            size *= 2;
        char *a = realloc(f->arena, size);
        if (!a)
            return (size_t)-1;
        f->arena = a;
        f->size = size;
    }
    size_t at = f->used;
    f->used += len;
    return at;
}

/* Rebuild the index with twice the slots. 0, or KS_ERR_NOMEM. */
static int grow_index(ks_fold *f)
{
    size_t slots = f->slots ? f->slots * 2 : 1024;
    uint32_t *index = calloc(slots, sizeof *index);
    if (!index)
        return KS_ERR_NOMEM;
    for (size_t i = 0; i < f->n; i++) {
        size_t s = f->e[i].hash & (slots - 1);
        while (index[s])
            s = (s + 1) & (slots - 1);
        index[s] = (uint32_t)i + 1;
    }
    free(f->index);
    f->index = index;
    f->slots = slots;
    return 0;
}

/* The slot of key (its entry, or the free slot where it goes). */
static size_t find(const ks_fold *f, ks_bytes key, uint64_t h)
{
    size_t s = h & (f->slots - 1);
    for (;; s = (s + 1) & (f->slots - 1)) {
        uint32_t i = f->index[s];
        if (!i)
            return s;
        const entry *e = &f->e[i - 1];
        if (e->hash == h && e->key_len == key.len &&
            memcmp(f->arena + e->key, key.data, key.len) == 0)
            return s;
    }
}

/* Store value as entry e's: in place when it fits. 0, or KS_ERR_NOMEM. */
static int set_value(ks_fold *f, entry *e, const ks_bytes *value, int64_t offset)
{
    size_t len = value ? value->len : 0;
    if (len > e->value_cap) {
        size_t at = reserve(f, len);
        if (at == (size_t)-1)
            return KS_ERR_NOMEM;
        e->value = at;
        e->value_cap = (uint32_t)len;
    }
    if (len)
        memcpy(f->arena + e->value, value->data, len);
    e->value_len = (uint32_t)len;
    e->deleted = value == NULL;
    e->offset = offset;
    return 0;
}

int ks_fold_put(ks_fold *f, ks_bytes key, const ks_bytes *value, int64_t offset)
{
    if (key.len > UINT32_MAX || (value && value->len > UINT32_MAX))
        return KS_ERR_INVALID;
    if ((f->n + 1) * 2 > f->slots && grow_index(f) != 0)
        return KS_ERR_NOMEM;
    uint64_t h = hash_of(key);
    size_t s = find(f, key, h);
    if (f->index[s])
        return set_value(f, &f->e[f->index[s] - 1], value, offset);
    entry *grown = ks_grow(f->e, &f->cap, f->n, sizeof *grown, 1024);
    if (!grown)
        return KS_ERR_NOMEM;
    f->e = grown;
    size_t at = reserve(f, key.len);
    if (at == (size_t)-1)
        return KS_ERR_NOMEM;
    memcpy(f->arena + at, key.data, key.len);
    entry *e = &f->e[f->n];
    *e = (entry){.hash = h, .key = at, .key_len = (uint32_t)key.len};
    if (set_value(f, e, value, offset) != 0)
        return KS_ERR_NOMEM;
    f->index[s] = (uint32_t)++f->n;
    return 0;
}

/* LMDB's default key order: bytewise, then the shorter first. */
static _Thread_local const char *sort_arena; /* qsort has no argument */
static int by_key(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
    int c = memcmp(sort_arena + x->key, sort_arena + y->key, n);
    return c ? c : (x->key_len > y->key_len) - (x->key_len < y->key_len);
}

int ks_fold_drain(ks_fold *f, ks_fold_fn fn, void *arg)
{
    int rc = 0;
    sort_arena = f->arena;
    if (f->n > 1) /* an empty fold has no array: qsort's pointer must not be NULL */
        qsort(f->e, f->n, sizeof *f->e, by_key);
    for (size_t i = 0; rc == 0 && i < f->n; i++) {
        const entry *e = &f->e[i];
        ks_bytes key = {f->arena + e->key, e->key_len};
        ks_bytes value = {f->arena + e->value, e->value_len};
        rc = fn(arg, key, e->deleted ? NULL : &value, e->offset);
    }
    f->n = 0;
    f->used = 0;
    if (f->index)
        memset(f->index, 0, f->slots * sizeof *f->index);
    return rc;
}
