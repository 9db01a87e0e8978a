/*
 * window_ref.h - a brute-force reference of windowed counts, written from
 * docs/windows.md and independent of plugins/window.c: tests feed the same
 * records to the engine and to wref_feed(), then compare.
 *
 * Counts only (the values are int64 counts). Sliding windows: the
 * reference covers inputs whose late records are late for every window
 * holding them; a record late for only some of its sliding windows is not
 * modelled (and not yet tested).
 */
#ifndef KS_TEST_WINDOW_REF_H
#define KS_TEST_WINDOW_REF_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WREF_MAX 4096

typedef enum { WREF_TUMBLING, WREF_HOPPING, WREF_SLIDING, WREF_SESSION } wref_kind;

typedef struct wref_win {
    char key[32];
    int64_t start, end; /* as output: end exclusive; sessions: last record */
    int64_t count;
    int live; /* sessions: 0 once merged away */
} wref_win;

typedef struct wref {
    wref_kind kind;
    int64_t size, advance, gap, grace;
    int64_t st;
    wref_win w[WREF_MAX];
    size_t n;
    /* sliding: accepted records */
    char rkey[WREF_MAX][32];
    int64_t rts[WREF_MAX];
    size_t nr;
    size_t late;
} wref;

static inline wref_win *wref_find(wref *r, const char *key, int64_t start, int64_t end)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->w[i].live && strcmp(r->w[i].key, key) == 0 && r->w[i].start == start &&
            (end == INT64_MIN || r->w[i].end == end))
            return &r->w[i];
    return NULL;
}

static inline wref_win *wref_add(wref *r, const char *key, int64_t start, int64_t end,
                                 int64_t count)
{
    wref_win *w = &r->w[r->n++];
    memset(w, 0, sizeof *w);
    snprintf(w->key, sizeof w->key, "%.31s", key);
    w->start = start;
    w->end = end;
    w->count = count;
    w->live = 1;
    return w;
}

static inline void wref_time(wref *r, const char *key, int64_t ts)
{
    int any = 0;
    for (int64_t s = ts - ts % r->advance; s > ts - r->size && s >= 0; s -= r->advance) {
        if (s + r->size + r->grace <= r->st)
            continue;
        any = 1;
        wref_win *w = wref_find(r, key, s, s + r->size);
        if (w)
            w->count++;
        else
            wref_add(r, key, s, s + r->size, 1);
    }
    r->late += !any;
}

/* Sessions: closed ones (end + gap + grace < st) take no part; late when
 * the merged session ends more than grace before stream time. */
static inline int wref_touches(const wref *r, const wref_win *w, const char *key,
                               int64_t ts)
{
    return w->live && strcmp(w->key, key) == 0 && w->start - r->gap <= ts &&
           ts <= w->end + r->gap && !(w->end + r->gap + r->grace < r->st);
}

static inline void wref_session(wref *r, const char *key, int64_t ts)
{
    int64_t s = ts, e = ts, c = 1;
    for (size_t i = 0; i < r->n; i++)
        if (wref_touches(r, &r->w[i], key, ts))
            e = r->w[i].end > e ? r->w[i].end : e;
    if (e + r->grace < r->st) {
        r->late++;
        return;
    }
    for (size_t i = 0; i < r->n; i++) {
        wref_win *w = &r->w[i];
        if (wref_touches(r, w, key, ts)) {
            s = w->start < s ? w->start : s;
            c += w->count;
            w->live = 0;
        }
    }
    wref_add(r, key, s, e, c);
}

/* Sliding: derive every window from the accepted records. Call once,
 * after the last wref_feed. */
static inline void wref_sliding_finish(wref *r)
{
    for (size_t i = 0; i < r->nr; i++) {
        int64_t cand[2] = {r->rts[i] - r->size, r->rts[i] + 1};
        for (int c = 0; c < 2; c++) {
            int64_t s = cand[c], n = 0;
            for (size_t j = 0; j < r->nr; j++)
                n += strcmp(r->rkey[j], r->rkey[i]) == 0 && r->rts[j] >= s &&
                     r->rts[j] <= s + r->size;
            if (n && !wref_find(r, r->rkey[i], s, s + r->size + 1))
                wref_add(r, r->rkey[i], s, s + r->size + 1, n);
        }
    }
}

static inline void wref_feed(wref *r, const char *key, int64_t ts)
{
    r->st = ts > r->st ? ts : r->st;
    switch (r->kind) {
    case WREF_TUMBLING:
    case WREF_HOPPING: wref_time(r, key, ts); break;
    case WREF_SESSION: wref_session(r, key, ts); break;
    case WREF_SLIDING:
        if (ts + r->size + 1 + r->grace <= r->st) {
            r->late++;
        } else {
            snprintf(r->rkey[r->nr], sizeof r->rkey[r->nr], "%.31s", key);
            r->rts[r->nr++] = ts;
        }
        break;
    }
}

/* 1 when window w has closed at stream time st (final results exist). */
static inline int wref_closed(const wref *r, const wref_win *w, int64_t st)
{
    if (r->kind == WREF_SESSION)
        return w->end + r->gap + r->grace < st;
    return w->end + r->grace <= st;
}

#endif /* KS_TEST_WINDOW_REF_H */
