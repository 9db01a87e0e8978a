/*
 * outbox_held.c - events from processors: ids derived from the request
 * record (the same in every process), requests held as PREQUEUED rows with
 * their record's position ("held"), and settling them once the request
 * record's fate is known (release to PENDING, or forget).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outbox/outbox_internal.h"

/* ------------------------------------------------------------------ */
/* Events from processors                                              */
/* ------------------------------------------------------------------ */

/* FNV-1a: a stable hash (ids must be the same in every process). */
static uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

int ks_outbox_derive_id(const char *application, const char *topic, int32_t partition,
                        int64_t offset, uint32_t rank, char id_out[KS_OUTBOX_ID_LEN + 1])
{
    if (!application || !topic || partition < 0 || offset < 0 ||
        offset >= (INT64_C(1) << 53) || rank >= KS_OUTBOX_MAX_RANK)
        return KS_ERR_INVALID;
    unsigned char part[4];
    for (int i = 0; i < 4; i++)
        part[i] = (unsigned char)((uint32_t)partition >> (24 - 8 * i));
    uint64_t h = 14695981039346656037ull;
    h = fnv1a(h, application, strlen(application) + 1);
    h = fnv1a(h, topic, strlen(topic) + 1);
    h = fnv1a(h, part, sizeof part);
    uint64_t seq = (uint64_t)offset * KS_OUTBOX_MAX_RANK + rank;
    snprintf(id_out, KS_OUTBOX_ID_LEN + 1, "%016llx%016llx", (unsigned long long)h,
             (unsigned long long)seq);
    return 0;
}

static int request_ok(const ks_outbox_request *r)
{
    size_t ulen = slen(r->user);
    return r->id && strlen(r->id) == KS_OUTBOX_ID_LEN && ulen > 0 &&
           ulen <= KS_OUTBOX_MAX_USER && topic_ok(r->topic) && (r->payload || !r->payload_len);
}

/* One request as a held row (lock and txn held); *added += 1 when new. */
static int hold_one(ks_outbox *ob, const ks_outbox_request *r, int64_t now, size_t *added)
{
    ks_bytes k = {r->id, KS_OUTBOX_ID_LEN}, v;
    int rc = ks_store_get(ob->events, k, &v);
    if (rc != KS_ERR_NOT_FOUND)
        return rc; /* 0: a replay of an event we have: leave it alone */
    ks_outbox_event ev;
    memset(&ev, 0, sizeof ev);
    memcpy(ev.id, r->id, KS_OUTBOX_ID_LEN);
    ev.status = KS_OUTBOX_PREQUEUED;
    /* borrowed for the encoding only */
    ev.user = (char *)r->user;
    ev.topic = (char *)r->topic;
    ev.payload = (void *)r->payload;
    ev.payload_len = r->payload_len;
    ev.partition = -1;
    ev.offset = -1;
    ev.created_ms = ev.updated_ms = now;
    if ((rc = store_row(ob, &ev)))
        return rc;
    ob->entering[ev.status]++;
    unsigned char pos[12];
    ks_int64_encode(r->offset, pos + 4);
    for (int i = 0; i < 4; i++)
        pos[i] = (unsigned char)((uint32_t)r->partition >> (24 - 8 * i));
    ks_bytes pv = {pos, sizeof pos};
    if ((rc = ks_store_put(ob->held, k, pv)) == 0)
        (*added)++;
    return rc;
}

int ks_outbox_hold_requests(ks_outbox *ob, const ks_outbox_request *reqs, size_t n,
                            size_t *added)
{
    *added = 0;
    if (!ob || ob->readonly || (n && !reqs))
        return KS_ERR_INVALID;
    for (size_t i = 0; i < n; i++)
        if (!request_ok(&reqs[i]))
            return KS_ERR_INVALID;
    int64_t now = ks_outbox_now_ms();
    pthread_mutex_lock(&ob->lock);
    int rc = txn_begin(ob);
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = hold_one(ob, &reqs[i], now, added);
    if (rc && rc != KS_ERR_STATE)
        snprintf(ob->err, sizeof ob->err, "%s", ks_store_last_error(ob->env));
    rc = txn_end(ob, rc, 1);
    pthread_mutex_unlock(&ob->lock);
    if (rc)
        *added = 0;
    return rc;
}

typedef struct held_list {
    char (*ids)[KS_OUTBOX_ID_LEN + 1];
    int32_t *parts;
    int64_t *offs;
    size_t n, cap;
    int rc;
} held_list;

static int held_cb(void *arg, ks_bytes key, ks_bytes value)
{
    held_list *l = arg;
    if (key.len != KS_OUTBOX_ID_LEN || value.len != 12)
        return 0;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        void *a = realloc(l->ids, cap * sizeof *l->ids);
        if (a)
            l->ids = a;
        void *b = a ? realloc(l->parts, cap * sizeof *l->parts) : NULL;
        if (b)
            l->parts = b;
        void *c = b ? realloc(l->offs, cap * sizeof *l->offs) : NULL;
        if (!c) {
            l->rc = KS_ERR_NOMEM;
            return 1;
        }
        l->offs = c;
        l->cap = cap;
    }
    const unsigned char *p = value.data;
    memcpy(l->ids[l->n], key.data, KS_OUTBOX_ID_LEN);
    l->ids[l->n][KS_OUTBOX_ID_LEN] = '\0';
    l->parts[l->n] = (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
                               ((uint32_t)p[2] << 8) | p[3]);
    l->offs[l->n] = ks_int64_decode(p + 4);
    l->n++;
    return 0;
}

/* Release (PREQUEUED -> PENDING) or forget (delete) one held row. */
static int settle_one(ks_outbox *ob, const char *id, int release)
{
    ks_bytes k = {id, KS_OUTBOX_ID_LEN};
    ks_outbox_event ev;
    memset(&ev, 0, sizeof ev);
    int rc = load_row(ob, id, &ev);
    if (rc == 0 && ev.status == KS_OUTBOX_PREQUEUED) {
        if (release)
            rc = move(ob, &ev, KS_OUTBOX_PENDING);
        else if ((rc = ks_store_del(ob->events, k)) == 0)
            rc = ks_store_del(ob->active, k);
    }
    ks_outbox_event_clear(&ev);
    if (rc == 0 || rc == KS_ERR_NOT_FOUND)
        rc = ks_store_del(ob->held, k);
    return rc;
}

int ks_outbox_settle_held(ks_outbox *ob, ks_outbox_held_fate fate, void *arg,
                          size_t *released, size_t *forgotten)
{
    *released = *forgotten = 0;
    if (!ob || ob->readonly || !fate)
        return KS_ERR_INVALID;
    held_list l;
    memset(&l, 0, sizeof l);
    pthread_mutex_lock(&ob->lock);
    int rc = txn_begin(ob);
    ks_bytes none = {NULL, 0};
    if (rc == 0 && (rc = ks_store_range(ob->held, none, none, held_cb, &l)) == 0)
        rc = l.rc;
    for (size_t i = 0; rc == 0 && i < l.n; i++) {
        int f = fate(arg, l.parts[i], l.offs[i]);
        if (f == KS_HELD_KEEP)
            continue;
        rc = settle_one(ob, l.ids[i], f == KS_HELD_RELEASE);
        if (rc == 0)
            (*(f == KS_HELD_RELEASE ? released : forgotten))++;
    }
    if (rc && rc != KS_ERR_STATE)
        snprintf(ob->err, sizeof ob->err, "%s", ks_store_last_error(ob->env));
    rc = txn_end(ob, rc, 1);
    pthread_mutex_unlock(&ob->lock);
    free(l.ids);
    free(l.parts);
    free(l.offs);
    if (rc)
        *released = *forgotten = 0;
    return rc;
}
