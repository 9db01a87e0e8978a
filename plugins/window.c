/*
 * window.c - the runtime of event-time windows, shared by the count,
 * aggregate and reduce modules (compiled into each; see window.h). The
 * host-free rules it builds on (spec checks, arithmetic, key format,
 * windowed-json keys) are in window_core.c, which the engine compiles too.
 *
 * Store layout (state_version 1 of a windowed node; all in the node's
 * first store, every write mirrored to its changelog by the host):
 *
 *   0x10                                  meta: stream time (8, sortable)
 *                                         and a record sequence (8, BE)
 *   0x30 key* 00 00 T(start)              tumbling, hopping, sliding window
 *   0x30 key* 00 00 T(end) T(start)       session (sorted by end)
 *   0x40 key* 00 00 T(ts) T(seq)          sliding: one raw record
 *   0x20 T(t) <0x30... or 0x40... key>    index: act on that key when
 *                                         stream time reaches t
 *
 * key* is the record key with 0x00 escaped (ks_win_key_encode), T() the
 * sortable big-endian time: a key's windows range-scan in time order, and
 * the index range-scans in due order. A window value is one flags byte
 * (FLAG_EMITTED) then the aggregate (sliding: the flags only; its value is
 * folded from the raw records when needed).
 *
 * The index holds, per window, its close time (emit: final, not yet
 * emitted) or its expiry (start + retention; sessions: end + retention +
 * 1), and per raw record its expiry. Every index time is later than the
 * stream time when written, so the due entries are looked at only when
 * stream time advances, inside process(): what is emitted, deleted and
 * stored depends only on the input sequence, which is why a replay after a
 * crash gives the same outputs, and why emission, deletion and the
 * "emitted" flag commit in the record's exactly-once transaction.
 *
 * Stream time is this node's own: the largest event time it has seen,
 * kept in the store (meta) so that it survives restarts, and taken from
 * the JSON field when the window names one.
 */
#include "window.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAG_META KS_WIN_TAG_META
#define TAG_INDEX KS_WIN_TAG_INDEX
#define TAG_WIN KS_WIN_TAG_WIN
#define TAG_RAW KS_WIN_TAG_RAW

#define FLAG_EMITTED 0x01

/* Host limit on store keys; the index key = 9 bytes + a window key. */
#define STORE_KEY_MAX 500
#define WIN_KEY_MAX (STORE_KEY_MAX - 9)

#define MAX_HOPS KS_WIN_MAX_HOPS

/* Index entries one record acts on at most when none of them can emit
 * (emit: update), besides twice the windows one record can open: all the
 * windows of a minute expire at the same stream time, and deleting 47 000
 * of them at once held the records behind them for 70-130 ms (measured with
 * a 60 s tumbling window, 100 000 keys). The rest go with the records that
 * follow, which is still decided by the input alone (see due_left). */
#define EXPIRE_PER_RECORD 64

/* Log the 1st dropped record, then every LOG_EVERY-th. */
#define LOG_EVERY 1000

/* ---- runtime ------------------------------------------------------------ */

struct ks_win {
    const ks_host_api *api;
    ks_ctx *ctx;
    const char *who;
    ks_store *store;
    ks_win_ops ops;
    ks_win_spec spec;
    ks_buf *buf[2];          /* alternating outputs of ops while folding */
    unsigned char *scratch;  /* flags byte + aggregate for store_put     */
    size_t scratch_cap;
    int64_t starts[MAX_HOPS];
    uint64_t late;     /* records dropped as late       */
    uint64_t bad_time; /* records without an event time */
    uint64_t big_keys; /* keys too long for window keys */
    size_t due_limit;  /* index entries per record; 0 = all (final mode) */
    int due_left;      /* the last run_due stopped at due_limit */
};

/* One key (and value) copied out of a range scan. */
typedef struct item {
    unsigned char *key;
    size_t klen;
    unsigned char *val;
    size_t vlen;
} item;

typedef struct items {
    item *v;
    size_t n, cap;
    int nomem;
    int with_values;
    /* sessions: stop at the first whose start (last 8 key bytes) > this */
    int has_stop;
    int64_t stop_start;
    size_t limit; /* stop after this many (0: no limit) */
} items;

static void items_free(items *it)
{
    for (size_t i = 0; i < it->n; i++) {
        free(it->v[i].key);
        free(it->v[i].val);
    }
    free(it->v);
    memset(it, 0, sizeof *it);
}

static int collect_cb(void *arg, ks_bytes k, ks_bytes v)
{
    items *it = arg;
    if (it->has_stop && k.len >= 8 &&
        ks_win_time_get((const unsigned char *)k.data + k.len - 8) > it->stop_start)
        return 1;
    if (it->limit && it->n == it->limit)
        return 1;
    if (it->n == it->cap) {
        size_t cap = it->cap ? it->cap * 2 : 16;
        item *grown = realloc(it->v, cap * sizeof *grown);
        if (!grown) {
            it->nomem = 1;
            return 1;
        }
        it->v = grown;
        it->cap = cap;
    }
    item *e = &it->v[it->n];
    e->key = malloc(k.len ? k.len : 1);
    e->val = it->with_values ? malloc(v.len ? v.len : 1) : NULL;
    if (!e->key || (it->with_values && !e->val)) {
        free(e->key);
        free(e->val);
        it->nomem = 1;
        return 1;
    }
    memcpy(e->key, k.data, k.len);
    e->klen = k.len;
    if (it->with_values && v.len)
        memcpy(e->val, v.data, v.len);
    e->vlen = it->with_values ? v.len : 0;
    it->n++;
    return 0;
}

static ks_verdict store_failed(ks_win *w, const char *what, int rc)
{
    if (rc == KS_ERR_STORE_FULL) {
        w->api->log(w->ctx, KS_LOG_ERROR,
                    "%s: the store of node '%s' is full; raise `map_size` of that "
                    "store under `stores:` in the pipeline YAML",
                    w->who, w->api->node_name(w->ctx));
        return KS_FATAL;
    }
    if (rc == KS_ERR_NOMEM)
        w->api->log(w->ctx, KS_LOG_WARN, "%s: out of memory in window %s; retrying",
                    w->who, what);
    else
        w->api->log(w->ctx, KS_LOG_WARN, "%s: window store %s failed (error %d); retrying",
                    w->who, what, rc);
    return KS_RETRY;
}

static int scan(ks_win *w, const unsigned char *from, size_t flen, const unsigned char *to,
                size_t tlen, items *it)
{
    int rc = w->api->store_range(w->store, (ks_bytes){from, flen}, (ks_bytes){to, tlen},
                                 collect_cb, it);
    return rc != 0 ? rc : it->nomem ? KS_ERR_NOMEM : 0;
}

/* Put key = flags byte + agg. */
static int put_window(ks_win *w, const unsigned char *k, size_t klen, unsigned char flags,
                      ks_bytes agg)
{
    if (agg.len + 1 > w->scratch_cap) {
        unsigned char *grown = realloc(w->scratch, agg.len + 1);
        if (!grown)
            return KS_ERR_NOMEM;
        w->scratch = grown;
        w->scratch_cap = agg.len + 1;
    }
    w->scratch[0] = flags;
    if (agg.len)
        memcpy(w->scratch + 1, agg.data, agg.len);
    return w->api->store_put(w->store, (ks_bytes){k, klen},
                             (ks_bytes){w->scratch, agg.len + 1});
}

/* Index entry: act on `target` when stream time reaches t. */
static int index_write(ks_win *w, int64_t t, const unsigned char *target, size_t tlen,
                       int del)
{
    unsigned char k[STORE_KEY_MAX];
    k[0] = TAG_INDEX;
    ks_win_time_put(k + 1, t);
    memcpy(k + 9, target, tlen);
    ks_bytes key = {k, tlen + 9};
    if (del)
        return w->api->store_delete(w->store, key);
    return w->api->store_put(w->store, key, (ks_bytes){"", 0});
}

/* Forward one window result (value NULL: a tombstone for a session that
 * a merge replaced). */
static ks_verdict emit(ks_win *w, ks_bytes key, int64_t start, int64_t end,
                       const ks_bytes *value, int64_t ts)
{
    char jkey[6 * STORE_KEY_MAX + 64]; /* every byte may become \\u00XX */
    char hs[24], he[24];
    snprintf(hs, sizeof hs, "%" PRId64, start);
    snprintf(he, sizeof he, "%" PRId64, end);
    ks_header hdrs[2] = {{KS_WIN_HDR_START, hs, strlen(hs)},
                         {KS_WIN_HDR_END, he, strlen(he)}};
    ks_record out = {.key = key.data, .key_len = key.len, .timestamp = ts,
                     .partition = -1, .offset = -1, .headers = hdrs, .header_count = 2};
    if (w->spec.key_format == KS_WIN_KEY_JSON) {
        size_t n = ks_win_json_key(key, start, end, jkey, sizeof jkey);
        if (n == 0)
            return KS_SKIP; /* cannot happen: keys are < 500 bytes */
        out.key = jkey;
        out.key_len = n;
    }
    if (value) {
        out.value = value->data ? value->data : "";
        out.value_len = value->len;
    }
    return w->api->forward(w->ctx, &out) == 0 ? KS_OK : KS_RETRY;
}

static ks_verdict late(ks_win *w, const ks_record *rec, int64_t ts, int64_t st)
{
    if (w->late++ % LOG_EVERY == 0)
        w->api->log(w->ctx, KS_LOG_WARN,
                    "%s: dropped a late record (%s[%d]@%lld, event time %" PRId64
                    ", stream time %" PRId64 ", grace %" PRId64 " ms); %llu so far",
                    w->who, rec->topic ? rec->topic : "-", (int)rec->partition,
                    (long long)rec->offset, ts, st, w->spec.grace,
                    (unsigned long long)w->late);
    w->api->metric_add(w->ctx, "late_records", 1);
    return KS_OK;
}

/* Fold the values of raw records (sorted) with ts in [from, to] into
 * *agg, which points into one of w->buf afterwards. */
static ks_verdict fold_raw(ks_win *w, ks_bytes key, const items *raw, int64_t from,
                           int64_t to, ks_bytes *agg)
{
    int have = 0, b = 0;
    for (size_t i = 0; i < raw->n; i++) {
        int64_t t = ks_win_time_get(raw->v[i].key + raw->v[i].klen - 16);
        if (t < from || t > to)
            continue;
        ks_verdict v = w->ops.add(w->ops.arg, key, have ? agg : NULL,
                                  (ks_bytes){raw->v[i].val, raw->v[i].vlen}, w->buf[b]);
        if (v != KS_OK)
            return v;
        *agg = w->api->buf_get(w->buf[b]);
        have = 1;
        b ^= 1;
    }
    return have ? KS_OK : KS_SKIP;
}

/* Raw records of `key` with timestamps in [from, to], in (ts, seq) order. */
static int scan_raw(ks_win *w, ks_bytes key, int64_t from, int64_t to, items *raw)
{
    unsigned char lo[WIN_KEY_MAX], hi[WIN_KEY_MAX];
    int64_t tlo[2] = {from, INT64_MIN}, thi[2] = {to + 1, INT64_MIN};
    size_t nlo = ks_win_key_encode(TAG_RAW, key, tlo, 2, lo, sizeof lo);
    size_t nhi = ks_win_key_encode(TAG_RAW, key, thi, 2, hi, sizeof hi);
    raw->with_values = 1;
    return scan(w, lo, nlo, hi, nhi, raw);
}

/* A window reached its index time t: emit it (final mode), then keep it
 * as emitted until its expiry, or delete it. */
static ks_verdict due_window(ks_win *w, const unsigned char *k, size_t klen, int64_t st)
{
    const ks_win_spec *sp = &w->spec;
    unsigned char keybuf[STORE_KEY_MAX];
    size_t key_len;
    int64_t times[2];
    size_t ntimes = sp->kind == KS_WIN_SESSION ? 2 : 1;
    if (ks_win_key_decode(k, klen, keybuf, sizeof keybuf, &key_len, times, ntimes) != 0)
        return KS_OK; /* not ours: written by another state format */
    ks_bytes key = {keybuf, key_len};
    ks_bytes wk = {k, klen};
    ks_bytes v;
    int rc = w->api->store_get(w->store, wk, &v);
    if (rc == KS_ERR_NOT_FOUND || (rc == 0 && v.len == 0))
        return KS_OK;
    if (rc != 0)
        return store_failed(w, "get", rc);
    unsigned char flags = ((const unsigned char *)v.data)[0];
    int64_t start = ntimes == 2 ? times[1] : times[0];
    int64_t end = ntimes == 2 ? times[0] : ks_win_end(sp, start);
    int64_t expire = ntimes == 2 ? end + sp->retention + 1 : start + sp->retention;
    ks_verdict verdict = KS_OK;

    if (sp->emit == KS_WIN_EMIT_FINAL && !(flags & FLAG_EMITTED)) {
        ks_bytes agg;
        items raw = {0};
        if (sp->kind == KS_WIN_SLIDING) {
            rc = scan_raw(w, key, start, end - 1, &raw);
            if (rc != 0) {
                items_free(&raw);
                return store_failed(w, "scan", rc);
            }
            verdict = fold_raw(w, key, &raw, start, end - 1, &agg);
        } else {
            /* copy: forward() may run processors that write to stores */
            rc = w->api->buf_set(w->buf[0], (const unsigned char *)v.data + 1, v.len - 1);
            agg = w->api->buf_get(w->buf[0]);
            verdict = rc == 0 ? KS_OK : KS_RETRY;
        }
        if (verdict == KS_OK)
            verdict = emit(w, key, start, end, &agg, ntimes == 2 ? end : end - 1);
        else if (verdict == KS_SKIP)
            verdict = KS_OK; /* empty sliding window: nothing to say */
        items_free(&raw);
        if (verdict != KS_OK)
            return verdict;
        if (sp->kind != KS_WIN_SLIDING && expire > st) {
            rc = put_window(w, k, klen, flags | FLAG_EMITTED, agg);
            if (rc == 0)
                rc = index_write(w, expire, k, klen, 0);
            return rc == 0 ? KS_OK : store_failed(w, "put", rc);
        }
    }
    rc = w->api->store_delete(w->store, wk);
    return rc == 0 ? KS_OK : store_failed(w, "delete", rc);
}

/* Act on the index entries due at stream time st, in time order: every
 * one, or the first due_limit (w->due_left says whether more wait). */
static ks_verdict run_due(ks_win *w, int64_t st)
{
    unsigned char from[1] = {TAG_INDEX}, to[9] = {TAG_INDEX};
    ks_win_time_put(to + 1, st + 1);
    items due = {.limit = w->due_limit};
    int rc = scan(w, from, sizeof from, to, sizeof to, &due);
    w->due_left = rc == 0 && due.limit && due.n == due.limit;
    ks_verdict v = rc == 0 ? KS_OK : store_failed(w, "scan", rc);
    for (size_t i = 0; i < due.n && v == KS_OK; i++) {
        /* an entry too short for its time (a damaged store) is only
         * deleted: its length must not underflow into a read past it */
        const unsigned char *target = due.v[i].key + 9;
        size_t tlen = due.v[i].klen > 9 ? due.v[i].klen - 9 : 0;
        rc = w->api->store_delete(w->store, (ks_bytes){due.v[i].key, due.v[i].klen});
        if (rc != 0) {
            v = store_failed(w, "delete", rc);
        } else if (tlen > 0 && target[0] == TAG_RAW) {
            rc = w->api->store_delete(w->store, (ks_bytes){target, tlen});
            v = rc == 0 ? KS_OK : store_failed(w, "delete", rc);
        } else if (tlen > 0 && target[0] == TAG_WIN) {
            v = due_window(w, target, tlen, st);
        }
    }
    items_free(&due);
    return v;
}

/* ---- tumbling and hopping ---------------------------------------------- */

static ks_verdict time_process(ks_win *w, ks_bytes key, ks_bytes value, int64_t ts,
                               int64_t st, const ks_record *rec)
{
    const ks_win_spec *sp = &w->spec;
    size_t n = ks_win_time_starts(sp, ts, w->starts, MAX_HOPS);
    int any_open = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t start = w->starts[i], end = start + sp->size;
        if (ks_win_time_closed(sp, end, st))
            continue;
        any_open = 1;
        unsigned char k[WIN_KEY_MAX];
        size_t klen = ks_win_key_encode(TAG_WIN, key, &start, 1, k, sizeof k);
        ks_bytes old, agg;
        int rc = w->api->store_get(w->store, (ks_bytes){k, klen}, &old);
        int fresh = rc == KS_ERR_NOT_FOUND;
        if (rc != 0 && !fresh)
            return store_failed(w, "get", rc);
        if (!fresh && old.len == 0)
            return store_failed(w, "get", KS_ERR_INVALID);
        if (!fresh)
            agg = (ks_bytes){(const unsigned char *)old.data + 1, old.len - 1};
        /* agg stays valid until our put: add() cannot write stores */
        ks_verdict v = w->ops.add(w->ops.arg, key, fresh ? NULL : &agg, value, w->buf[0]);
        if (v != KS_OK)
            return v;
        ks_bytes result = w->api->buf_get(w->buf[0]);
        rc = put_window(w, k, klen, 0, result);
        if (rc == 0 && fresh)
            rc = index_write(w, sp->emit == KS_WIN_EMIT_FINAL ? end + sp->grace
                                                              : start + sp->retention,
                             k, klen, 0);
        if (rc != 0)
            return store_failed(w, "put", rc);
        if (sp->emit == KS_WIN_EMIT_UPDATE) {
            result = w->api->buf_get(w->buf[0]);
            v = emit(w, key, start, end, &result, end - 1);
            if (v != KS_OK)
                return v;
        }
    }
    return any_open ? KS_OK : late(w, rec, ts, st);
}

/* ---- sessions ----------------------------------------------------------- */

static int64_t session_index_time(const ks_win_spec *sp, int64_t end)
{
    return sp->emit == KS_WIN_EMIT_FINAL ? end + sp->gap + sp->grace + 1
                                         : end + sp->retention + 1;
}

/* Replace the merged-away sessions (update mode: tombstones for their
 * keys) and store the merged one. */
static ks_verdict session_store(ks_win *w, ks_bytes key, const items *old, int64_t ns,
                                int64_t ne, ks_bytes agg, int *had_same)
{
    const ks_win_spec *sp = &w->spec;
    *had_same = 0;
    for (size_t i = 0; i < old->n; i++) {
        const unsigned char *k = old->v[i].key;
        size_t klen = old->v[i].klen;
        int64_t e = ks_win_time_get(k + klen - 16), s = ks_win_time_get(k + klen - 8);
        if (s == ns && e == ne) {
            *had_same = 1;
            continue;
        }
        int rc = w->api->store_delete(w->store, (ks_bytes){k, klen});
        if (rc == 0)
            rc = index_write(w, session_index_time(sp, e), k, klen, 1);
        if (rc != 0)
            return store_failed(w, "delete", rc);
        if (sp->emit == KS_WIN_EMIT_UPDATE) {
            ks_verdict v = emit(w, key, s, e, NULL, e);
            if (v != KS_OK)
                return v;
        }
    }
    unsigned char k[WIN_KEY_MAX];
    int64_t times[2] = {ne, ns};
    size_t klen = ks_win_key_encode(TAG_WIN, key, times, 2, k, sizeof k);
    int rc = put_window(w, k, klen, 0, agg);
    if (rc == 0 && !*had_same)
        rc = index_write(w, session_index_time(sp, ne), k, klen, 0);
    return rc == 0 ? KS_OK : store_failed(w, "put", rc);
}

static ks_verdict session_process(ks_win *w, ks_bytes key, ks_bytes value, int64_t ts,
                                  int64_t st, const ks_record *rec)
{
    const ks_win_spec *sp = &w->spec;
    unsigned char from[WIN_KEY_MAX], to[WIN_KEY_MAX];
    int64_t tfrom[2] = {ts - sp->gap, INT64_MIN}, tto[2] = {INT64_MAX, INT64_MAX};
    size_t nfrom = ks_win_key_encode(TAG_WIN, key, tfrom, 2, from, sizeof from);
    size_t nto = ks_win_key_encode(TAG_WIN, key, tto, 2, to, sizeof to);
    /* sessions of a key never overlap: sorted by end, their starts grow */
    items old = {.with_values = 1, .has_stop = 1, .stop_start = ts + sp->gap};
    int rc = scan(w, from, nfrom, to, nto, &old);
    if (rc != 0) {
        items_free(&old);
        return store_failed(w, "scan", rc);
    }
    /* Closed sessions (emitted, or past end + gap + grace) take no part:
     * they may still be stored (retention) but never change. Then, as in
     * Kafka Streams, the record is late when the session it would end up
     * in ends more than grace before stream time. */
    int64_t ne = ts;
    size_t kept = 0;
    for (size_t i = 0; i < old.n; i++) {
        int64_t e = ks_win_time_get(old.v[i].key + old.v[i].klen - 16);
        if (ks_win_session_closed(sp, e, st) || old.v[i].vlen == 0 ||
            (old.v[i].val[0] & FLAG_EMITTED)) {
            free(old.v[i].key);
            free(old.v[i].val);
            continue;
        }
        ne = e > ne ? e : ne;
        old.v[kept++] = old.v[i];
    }
    old.n = kept;
    if (ne + sp->grace < st) {
        items_free(&old);
        return late(w, rec, ts, st);
    }
    /* merge the old sessions in time order, then add the value */
    ks_verdict v = KS_OK;
    int b = 0;
    ks_bytes acc = {0};
    int64_t ns = ts;
    for (size_t i = 0; i < old.n && v == KS_OK; i++) {
        const unsigned char *k = old.v[i].key;
        int64_t e = ks_win_time_get(k + old.v[i].klen - 16);
        int64_t s = ks_win_time_get(k + old.v[i].klen - 8);
        (void)e;
        ns = s < ns ? s : ns;
        ks_bytes agg = {old.v[i].val + 1, old.v[i].vlen - 1};
        if (i == 0) {
            acc = agg;
            continue;
        }
        v = w->ops.merge(w->ops.arg, key, acc, agg, w->buf[b]);
        acc = w->api->buf_get(w->buf[b]);
        b ^= 1;
    }
    if (v == KS_OK)
        v = w->ops.add(w->ops.arg, key, old.n ? &acc : NULL, value, w->buf[b]);
    int had_same = 0;
    if (v == KS_OK) {
        acc = w->api->buf_get(w->buf[b]);
        v = session_store(w, key, &old, ns, ne, acc, &had_same);
    }
    if (v == KS_OK && w->spec.emit == KS_WIN_EMIT_UPDATE) {
        acc = w->api->buf_get(w->buf[b]);
        v = emit(w, key, ns, ne, &acc, ne);
    }
    items_free(&old);
    return v;
}

/* ---- sliding ------------------------------------------------------------ */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Starts of the windows this record changes or creates (Kafka Streams'
 * sliding windows: each record r defines [r - size, r] and, when not
 * empty, [r + 1, r + 1 + size]). raw holds the key's records in
 * [ts - size - 1, ts + size + 1], this one (seq) included. */
static size_t sliding_starts(const ks_win_spec *sp, const items *raw, int64_t ts,
                             int64_t seq, int64_t *starts)
{
    size_t n = 0;
    int right_nonempty = 0, right_existed = 0;
    starts[n++] = ts - sp->size;
    for (size_t i = 0; i < raw->n; i++) {
        const unsigned char *k = raw->v[i].key + raw->v[i].klen - 16;
        int64_t r = ks_win_time_get(k), rseq = ks_win_time_get(k + 8);
        if (r >= ts - sp->size - 1 && r <= ts - 1)
            starts[n++] = r + 1; /* its right window now holds ts */
        if (r >= ts && r <= ts + sp->size && rseq != seq)
            starts[n++] = r - sp->size; /* its left window holds ts */
        right_nonempty |= r >= ts + 1 && r <= ts + 1 + sp->size;
        right_existed |= (r == ts && rseq != seq) || r == ts + 1 + sp->size;
    }
    if (right_nonempty && !right_existed)
        starts[n++] = ts + 1;
    qsort(starts, n, sizeof *starts, cmp_i64);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (u == 0 || starts[u - 1] != starts[i])
            starts[u++] = starts[i];
    return u;
}

static ks_verdict sliding_process(ks_win *w, ks_bytes key, ks_bytes value, int64_t ts,
                                  int64_t seq, int64_t st, const ks_record *rec)
{
    const ks_win_spec *sp = &w->spec;
    if (ks_win_time_closed(sp, ks_win_end(sp, ts), st))
        return late(w, rec, ts, st); /* every window holding ts has closed */
    unsigned char k[WIN_KEY_MAX];
    int64_t times[2] = {ts, seq};
    size_t klen = ks_win_key_encode(TAG_RAW, key, times, 2, k, sizeof k);
    int rc = w->api->store_put(w->store, (ks_bytes){k, klen}, value);
    if (rc == 0)
        rc = index_write(w, ts + 1 + sp->retention, k, klen, 0);
    if (rc != 0)
        return store_failed(w, "put", rc);

    items raw = {0};
    rc = scan_raw(w, key, ts - sp->size - 1, ts + sp->size + 1, &raw);
    int64_t *starts = rc == 0 ? malloc((2 * raw.n + 2) * sizeof *starts) : NULL;
    if (!starts) {
        items_free(&raw);
        return store_failed(w, "scan", rc ? rc : KS_ERR_NOMEM);
    }
    size_t n = sliding_starts(sp, &raw, ts, seq, starts);
    ks_verdict v = KS_OK;
    for (size_t i = 0; i < n && v == KS_OK; i++) {
        int64_t start = starts[i], end = ks_win_end(sp, start);
        if (ks_win_time_closed(sp, end, st))
            continue;
        if (sp->emit == KS_WIN_EMIT_UPDATE) {
            ks_bytes agg;
            v = fold_raw(w, key, &raw, start, end - 1, &agg);
            if (v == KS_OK)
                v = emit(w, key, start, end, &agg, end - 1);
            continue;
        }
        /* final: remember the window so that it is emitted when it closes */
        unsigned char wk[WIN_KEY_MAX];
        size_t wlen = ks_win_key_encode(TAG_WIN, key, &start, 1, wk, sizeof wk);
        ks_bytes old;
        rc = w->api->store_get(w->store, (ks_bytes){wk, wlen}, &old);
        if (rc == KS_ERR_NOT_FOUND) {
            rc = put_window(w, wk, wlen, 0, (ks_bytes){"", 0});
            if (rc == 0)
                rc = index_write(w, end + sp->grace, wk, wlen, 0);
        }
        if (rc != 0)
            v = store_failed(w, "put", rc);
    }
    free(starts);
    items_free(&raw);
    return v;
}

/* ---- process ------------------------------------------------------------ */

/* 0..KS_WIN_TIME_MAX: past it, window ends and due times would overflow. */
static int event_time(ks_win *w, const ks_record *rec, int64_t *ts)
{
    if (!w->spec.time_field[0])
        *ts = rec->timestamp;
    else if (ks_win_json_time(rec->value, rec->value_len, w->spec.time_field, ts) != 0)
        return -1;
    return *ts >= 0 && *ts <= KS_WIN_TIME_MAX ? 0 : -1;
}

/* Escaped length of key + separator + 16 bytes of times + the tag. */
static size_t window_key_len(ks_bytes key)
{
    size_t n = 1 + key.len + 2 + 16;
    for (size_t i = 0; i < key.len; i++)
        n += ((const unsigned char *)key.data)[i] == 0x00;
    return n;
}

ks_verdict ks_win_process(ks_win *w, const ks_record *rec)
{
    int64_t ts;
    if (event_time(w, rec, &ts) != 0) {
        if (w->bad_time++ % LOG_EVERY == 0)
            w->api->log(w->ctx, KS_LOG_WARN,
                        "%s: record without a usable event time (%s%s%s) at "
                        "%s[%d]@%lld; %llu so far",
                        w->who, w->spec.time_field[0] ? "integer field '" : "timestamp",
                        w->spec.time_field,
                        w->spec.time_field[0] ? "' of a JSON object" : " in 0..2^62",
                        rec->topic ? rec->topic : "-", (int)rec->partition,
                        (long long)rec->offset, (unsigned long long)w->bad_time);
        w->api->metric_add(w->ctx, "invalid_timestamps", 1);
        return KS_SKIP;
    }
    ks_bytes key = {rec->key, rec->key_len};
    if (window_key_len(key) > WIN_KEY_MAX) {
        if (w->big_keys++ % LOG_EVERY == 0)
            w->api->log(w->ctx, KS_LOG_WARN,
                        "%s: key of %zu bytes is too long for window keys (at most "
                        "%d bytes with 0x00 counted twice) at %s[%d]@%lld",
                        w->who, rec->key_len, WIN_KEY_MAX - 19,
                        rec->topic ? rec->topic : "-", (int)rec->partition,
                        (long long)rec->offset);
        return KS_SKIP;
    }
    int64_t st, seq;
    int rc = ks_win_meta_load(w->api, w->store, &st, &seq);
    if (rc == KS_ERR_INVALID) {
        w->api->log(w->ctx, KS_LOG_ERROR,
                    "%s: the store of node '%s' holds no window state; is it shared "
                    "with another processor or was the node unwindowed before?",
                    w->who, w->api->node_name(w->ctx));
        return KS_FATAL;
    }
    if (rc != 0)
        return store_failed(w, "get", rc);
    int64_t old_st = st;
    st = ts > st ? ts : st;
    seq++;
    if (st != old_st || w->spec.kind == KS_WIN_SLIDING) {
        rc = ks_win_meta_save(w->api, w->store, st, seq);
        if (rc != 0)
            return store_failed(w, "put", rc);
    }
    ks_bytes value = {rec->value, rec->value_len};
    ks_verdict v;
    switch (w->spec.kind) {
    case KS_WIN_SESSION: v = session_process(w, key, value, ts, st, rec); break;
    case KS_WIN_SLIDING: v = sliding_process(w, key, value, ts, seq, st, rec); break;
    default: v = time_process(w, key, value, ts, st, rec); break;
    }
    if (v == KS_OK && (st > old_st || w->due_left))
        v = run_due(w, st);
    return v;
}

/* ---- open / free -------------------------------------------------------- */

typedef struct win_cfg {
    const ks_host_api *api;
    ks_ctx *ctx;
} win_cfg;

/* The node's window keys through the host's config API (ks_win_config). */
static int cfg_string(void *arg, const char *name, const char **out)
{
    const win_cfg *c = arg;
    return c->api->config_string(c->ctx, name, out);
}

static int cfg_duration(void *arg, const char *name, int64_t *ms)
{
    const win_cfg *c = arg;
    return c->api->config_duration_ms(c->ctx, name, ms);
}

/* run_due's limit for `spec` (see EXPIRE_PER_RECORD): 0 when a due entry
 * may emit (final mode), since emission must not wait for later records. */
static size_t due_limit(const ks_win_spec *spec)
{
    if (spec->emit == KS_WIN_EMIT_FINAL)
        return 0;
    int64_t opened = 2; /* sessions and sliding: a record opens at most two */
    if ((spec->kind == KS_WIN_TUMBLING || spec->kind == KS_WIN_HOPPING) && spec->advance > 0)
        opened = (spec->size + spec->advance - 1) / spec->advance;
    return EXPIRE_PER_RECORD + 2 * (size_t)opened;
}

int ks_win_open(const ks_host_api *api, ks_ctx *ctx, const char *who, ks_store *store,
                const ks_win_ops *ops, ks_win **out)
{
    *out = NULL;
    ks_win_spec spec = {0};
    char err[256] = "";
    win_cfg c = {api, ctx};
    const ks_win_config cfg = {&c, cfg_string, cfg_duration};
    /* the engine applied these rules when it built the topology
     * (topology.c, `kstreams check`); a plugin checks what it relies on */
    int rc = ks_win_spec_read(&cfg, &spec, err, sizeof err, NULL);
    if (rc == 1)
        return 0;
    if (rc == 0 && spec.kind == KS_WIN_SESSION && !ops->merge) {
        snprintf(err, sizeof err,
                 "session windows need a merger: name one under `functions: { merge: "
                 "plugin.function }`");
        rc = -1;
    }
    if (rc != 0) {
        api->log(ctx, KS_LOG_ERROR, "%s: node '%s': %s", who, api->node_name(ctx), err);
        return -1;
    }
    ks_win *w = calloc(1, sizeof *w);
    if (w) {
        w->buf[0] = api->buf_new();
        w->buf[1] = api->buf_new();
    }
    if (!w || !w->buf[0] || !w->buf[1]) {
        if (w) {
            api->buf_free(w->buf[0]);
            api->buf_free(w->buf[1]);
        }
        free(w);
        api->log(ctx, KS_LOG_ERROR, "%s: out of memory", who);
        return -1;
    }
    w->api = api;
    w->ctx = ctx;
    w->who = who;
    w->store = store;
    w->ops = *ops;
    w->spec = spec;
    w->due_limit = due_limit(&spec);
    /* the first record looks for entries left due: the same record that
     * would have, had the node not been (re)started, since none is left
     * due once a run_due stops short of its limit */
    w->due_left = 1;
    *out = w;
    return 0;
}

void ks_win_free(ks_win *w)
{
    if (!w)
        return;
    w->api->buf_free(w->buf[0]);
    w->api->buf_free(w->buf[1]);
    free(w->scratch);
    free(w);
}
