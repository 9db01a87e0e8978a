/*
 * outbox_moves.c - the status moves of one existing row (release,
 * mark_published, mark_failed, requeue, start_processing, finish: load,
 * check the table, store, in one transaction under the lock) and the scans
 * of the "active" index that claim pending rows (oldest first, one claim
 * per user at a time) and find stale ones.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outbox/outbox_internal.h"

static int set_str(char **dst, const char *src)
{
    free(*dst);
    *dst = NULL;
    if (!src)
        return 0;
    size_t n = strnlen(src, MAX_REASON);
    *dst = strndup(src, n);
    return *dst ? 0 : KS_ERR_NOMEM;
}

/* ------------------------------------------------------------------ */
/* Single-row moves                                                    */
/* ------------------------------------------------------------------ */

typedef struct move_args {
    ks_outbox_status to;
    const char *reason;   /* last_error, when set */
    const char *result;   /* result, when set */
    int32_t partition;    /* >= 0: record */
    int64_t offset;
    int accept_advanced;  /* mark_published: advanced rows are fine */
    int moved;            /* out */
    ks_outbox_status was; /* out */
} move_args;

/* Load `id`, check, mutate, store: one txn, under the lock. */
static int move_one(ks_outbox *ob, const char *id, move_args *a)
{
    if (!ob || ob->readonly)
        return KS_ERR_INVALID;
    ks_outbox_event ev;
    memset(&ev, 0, sizeof ev);
    a->moved = 0;
    pthread_mutex_lock(&ob->lock);
    int rc = txn_begin(ob);
    if (rc == 0)
        rc = load_row(ob, id, &ev);
    if (rc == 0) {
        a->was = ev.status;
        if (a->partition >= 0 && ev.partition < 0) {
            ev.partition = a->partition;
            ev.offset = a->offset;
        }
        if (a->accept_advanced && ks_outbox_status_published_or_later(ev.status)) {
            rc = store_row(ob, &ev); /* only fills a missing position */
        } else {
            rc = a->reason ? set_str(&ev.last_error, a->reason) : 0;
            if (rc == 0 && a->result)
                rc = set_str(&ev.result, a->result);
            if (rc == 0) {
                rc = move(ob, &ev, a->to);
                a->moved = rc == 0;
            }
        }
    }
    rc = txn_end(ob, rc, 1);
    pthread_mutex_unlock(&ob->lock);
    ks_outbox_event_clear(&ev);
    return rc;
}

int ks_outbox_release(ks_outbox *ob, const char *id)
{
    move_args a = {.to = KS_OUTBOX_PENDING, .partition = -1};
    return move_one(ob, id, &a);
}

int ks_outbox_mark_published(ks_outbox *ob, const char *id, int32_t partition,
                             int64_t offset, int *moved)
{
    move_args a = {.to = KS_OUTBOX_PUBLISHED, .partition = partition, .offset = offset,
                   .accept_advanced = 1};
    int rc = move_one(ob, id, &a);
    if (moved)
        *moved = a.moved;
    return rc;
}

int ks_outbox_mark_failed(ks_outbox *ob, const char *id, const char *reason)
{
    move_args a = {.to = KS_OUTBOX_FAILURE, .reason = reason, .partition = -1};
    return move_one(ob, id, &a);
}

int ks_outbox_requeue(ks_outbox *ob, const char *id, const char *reason)
{
    move_args a = {.to = KS_OUTBOX_PENDING, .reason = reason, .partition = -1};
    return move_one(ob, id, &a);
}

int ks_outbox_start_processing(ks_outbox *ob, const char *id, ks_outbox_status *was)
{
    move_args a = {.to = KS_OUTBOX_UNDER_PROCESSING, .partition = -1};
    int rc = move_one(ob, id, &a);
    if (was)
        *was = a.was;
    return rc;
}

int ks_outbox_finish(ks_outbox *ob, const char *id, int ok, const char *result,
                     ks_outbox_status *was)
{
    move_args a = {.to = ok ? KS_OUTBOX_SUCCESS : KS_OUTBOX_PUSHED_FAILURE,
                   .result = result ? result : "",
                   .partition = -1};
    int rc = move_one(ob, id, &a);
    if (was)
        *was = a.was;
    return rc;
}

/* ------------------------------------------------------------------ */
/* Scans of the active index                                           */
/* ------------------------------------------------------------------ */

/* A small set of user ids (open addressing), for the per-user order rule. */
typedef struct user_set {
    char **slot;
    size_t cap, n;
} user_set;

static uint64_t hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static size_t set_find(const user_set *s, const char *u, size_t n)
{
    size_t i = hash(u, n) & (s->cap - 1);
    while (s->slot[i] && !(strlen(s->slot[i]) == n && memcmp(s->slot[i], u, n) == 0))
        i = (i + 1) & (s->cap - 1);
    return i;
}

static int set_has(const user_set *s, const char *u, size_t n)
{
    return s->cap && s->slot[set_find(s, u, n)] != NULL;
}

static int set_add(user_set *s, const char *u, size_t n)
{
    if ((s->n + 1) * 2 > s->cap) {
        user_set g = {calloc(s->cap ? s->cap * 2 : 64, sizeof(char *)),
                      s->cap ? s->cap * 2 : 64, 0};
        if (!g.slot)
            return KS_ERR_NOMEM;
        for (size_t i = 0; i < s->cap; i++)
            if (s->slot[i]) {
                g.slot[set_find(&g, s->slot[i], strlen(s->slot[i]))] = s->slot[i];
                g.n++;
            }
        free(s->slot);
        *s = g;
    }
    size_t i = set_find(s, u, n);
    if (!s->slot[i]) {
        if (!(s->slot[i] = strndup(u, n)))
            return KS_ERR_NOMEM;
        s->n++;
    }
    return 0;
}

static void set_free(user_set *s)
{
    for (size_t i = 0; i < s->cap; i++)
        free(s->slot[i]);
    free(s->slot);
}

typedef struct scan {
    ks_outbox_status want; /* PENDING (claim) or DISPATCHING (stale) */
    size_t max;
    char (*ids)[KS_OUTBOX_ID_LEN + 1];
    size_t n;
    user_set blocked; /* claim: users with an earlier unclaimed active row */
    int rc;
} scan;

static int scan_cb(void *arg, ks_bytes key, ks_bytes value)
{
    scan *s = arg;
    if (key.len != KS_OUTBOX_ID_LEN || value.len < 2)
        return 0;
    ks_outbox_status st = (ks_outbox_status)((const unsigned char *)value.data)[0];
    const char *user = (const char *)value.data + 1;
    size_t ulen = value.len - 1;
    int take = st == s->want && s->n < s->max;
    if (take && s->want == KS_OUTBOX_PENDING && set_has(&s->blocked, user, ulen))
        take = 0;
    if (take) {
        memcpy(s->ids[s->n], key.data, KS_OUTBOX_ID_LEN);
        s->ids[s->n][KS_OUTBOX_ID_LEN] = '\0';
        s->n++;
    } else if (s->want == KS_OUTBOX_PENDING && (s->rc = set_add(&s->blocked, user, ulen)))
        return 1;
    /* stale scan: stop once full; claim: keep going only to learn nothing
     * more, so stop as well */
    return s->n >= s->max;
}

/* Collect up to max ids from "active" (lock and txn held). */
static int scan_active(ks_outbox *ob, scan *s)
{
    s->ids = calloc(s->max ? s->max : 1, sizeof *s->ids);
    if (!s->ids)
        return KS_ERR_NOMEM;
    ks_bytes none = {NULL, 0};
    int rc = ks_store_range(ob->active, none, none, scan_cb, s);
    set_free(&s->blocked);
    return rc ? rc : s->rc;
}

/* What a scan does with one row it loaded (lock and txn held): sets *keep
 * when the row goes to the caller; 0 or an error, which ends the scan. */
typedef int (*scan_take_fn)(ks_outbox *ob, ks_outbox_event *ev, int64_t arg, int *keep);

/* The rows of status `want` in "active" (at most max), each loaded and
 * handed to `take` in one transaction (`write`: a write transaction).
 * 0 with *out (caller frees with ks_outbox_events_free(*out, *n)) and *n. */
static int scan_rows(ks_outbox *ob, ks_outbox_status want, size_t max, int write,
                     scan_take_fn take, int64_t arg, ks_outbox_event **out, size_t *n)
{
    scan s = {.want = want, .max = max};
    ks_outbox_event *evs = calloc(max, sizeof *evs);
    if (!evs)
        return KS_ERR_NOMEM;
    pthread_mutex_lock(&ob->lock);
    int rc = txn_begin(ob);
    if (rc == 0)
        rc = scan_active(ob, &s);
    size_t got = 0;
    for (size_t i = 0; rc == 0 && i < s.n; i++) {
        int keep = 0;
        if ((rc = load_row(ob, s.ids[i], &evs[got])) || (rc = take(ob, &evs[got], arg, &keep)))
            break;
        if (keep)
            got++;
        else
            ks_outbox_event_clear(&evs[got]);
    }
    rc = txn_end(ob, rc, write);
    pthread_mutex_unlock(&ob->lock);
    free(s.ids);
    if (rc) {
        ks_outbox_events_free(evs, max);
        return rc;
    }
    *out = evs;
    *n = got;
    return 0;
}

/* claim: every PENDING row found goes DISPATCHING, claimed now (read under
 * the lock: a wait for it must not make the claim look older). */
static int take_claim(ks_outbox *ob, ks_outbox_event *ev, int64_t unused, int *keep)
{
    (void)unused;
    ev->attempts++;
    ev->claimed_ms = ks_outbox_now_ms();
    int rc = move(ob, ev, KS_OUTBOX_DISPATCHING);
    *keep = rc == 0;
    return rc;
}

/* stale: the DISPATCHING rows claimed before `before`. */
static int take_stale(ks_outbox *ob, ks_outbox_event *ev, int64_t before, int *keep)
{
    (void)ob;
    *keep = ev->claimed_ms < before;
    return 0;
}

int ks_outbox_claim_pending(ks_outbox *ob, size_t max, ks_outbox_event **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!ob || ob->readonly || max == 0)
        return KS_ERR_INVALID;
    return scan_rows(ob, KS_OUTBOX_PENDING, max, 1, take_claim, 0, out, n);
}

int ks_outbox_stale(ks_outbox *ob, int64_t claimed_before_ms, size_t max,
                    ks_outbox_event **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!ob || max == 0)
        return KS_ERR_INVALID;
    /* scan for every DISPATCHING row, then keep the old ones */
    return scan_rows(ob, KS_OUTBOX_DISPATCHING, max, 0, take_stale, claimed_before_ms, out, n);
}
