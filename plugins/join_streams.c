/*
 * join_streams.c - processor type "streams" of the shipped plugin "join":
 * the windowed stream-stream join (join.streams, docs/tables-and-joins.md),
 * Kafka Streams' KStream#join / #leftJoin / #outerJoin with JoinWindows.
 *
 * The node reads two streams (`from: [a, b]`, config `left: a`, `right:
 * b`) and tells them apart by the input each record comes from
 * (host input_name, ABI 1.5). With `window: { before: B, after: A, grace:
 * G }`, a left record at t and a right record at t' with the same key join
 * when t - B <= t' <= t + A. Every record is buffered in the node's store
 * (mirrored to its changelog, so exactly-once like every store); a record
 * joins each buffered record of the other side in its window when it
 * arrives, so each pair is output once, when its second record comes.
 *
 * Time is the node's own stream time st (the largest timestamp of either
 * side, kept in the store):
 *  - late: a left record with t + A + G < st, a right one with
 *    t + B + G < st (its window closed more than grace ago). Dropped: not
 *    joined, not buffered, no unmatched result; metric late_records, a
 *    debug log.
 *  - expired: a buffered record with t + B + A + G < st. No record that
 *    is not late can join it any more, so it is deleted then, and that is
 *    also when a left join (left records) or an outer join (both sides)
 *    outputs it with a null other side if it never joined. An unmatched
 *    result is therefore never followed by a joined one for the same
 *    record (Kafka Streams 3.1+). Retention = B + A + G.
 * Outputs keep the key; a joined result has the later of the two
 * timestamps and the arriving record's headers, an unmatched one its
 * record's timestamp. Joined results come in the buffered records' (time,
 * arrival) order, unmatched ones in their records' (time, arrival) order.
 *
 * Store layout (state_version 1):
 *   0x10                               T(st), arrival sequence (8, BE)
 *   0x51|0x52 key* 00 00 T(t) T(seq)   a left|right record: flags, value
 *   0x20 T(t) T(seq) <0x51/0x52 key>   expiry index, in time order
 * key* is the key with 0x00 escaped and T() the sortable time of
 * lib/window/window_core.h; the flags byte says whether it has joined.
 */
#include "join_streams.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "joiner.h"
#include "keyed.h"
#include "window/window_core.h"

#define TAG_META KS_WIN_TAG_META
#define TAG_INDEX KS_WIN_TAG_INDEX
#define TAG_LEFT 0x51
#define TAG_RIGHT 0x52

#define FLAG_MATCHED 0x01

/* An index key is 17 bytes + a buffer key; both under the store's limit. */
#define INDEX_HEAD 17
#define BUF_KEY_MAX (KS_KEY_MAX - INDEX_HEAD)

enum { KIND_INNER, KIND_LEFT, KIND_OUTER };
enum { LEFT = 0, RIGHT = 1 };

static const ks_host_api *host;

typedef struct sjoin {
    ks_store *store;
    ks_joiner joiner;
    ks_keyed keyed;
    const char *side_name[2]; /* the `left:` and `right:` inputs */
    int kind;
    int64_t before, after, grace;
    uint64_t late;
    unsigned char *scratch; /* flags + value for store_put */
    size_t scratch_cap;
} sjoin;

/* Records copied out of a range scan (forward() may write stores). */
typedef struct entry {
    unsigned char *key, *val;
    size_t klen, vlen;
} entry;

typedef struct entries {
    entry *v;
    size_t n, cap;
    int nomem;
} entries;

static void entries_free(entries *es)
{
    for (size_t i = 0; i < es->n; i++) {
        free(es->v[i].key);
        free(es->v[i].val);
    }
    free(es->v);
    memset(es, 0, sizeof *es);
}

static int collect(void *arg, ks_bytes k, ks_bytes v)
{
    entries *es = arg;
    if (es->n == es->cap) {
        size_t cap = es->cap ? es->cap * 2 : 16;
        entry *grown = realloc(es->v, cap * sizeof *grown);
        if (!grown)
            return es->nomem = 1;
        es->v = grown;
        es->cap = cap;
    }
    entry *e = &es->v[es->n];
    e->key = malloc(k.len ? k.len : 1);
    e->val = malloc(v.len ? v.len : 1);
    if (!e->key || !e->val) {
        free(e->key);
        free(e->val);
        return es->nomem = 1;
    }
    memcpy(e->key, k.data, k.len);
    if (v.len)
        memcpy(e->val, v.data, v.len);
    e->klen = k.len;
    e->vlen = v.len;
    es->n++;
    return 0;
}

static int scan(sjoin *j, const unsigned char *from, size_t flen, const unsigned char *to,
                size_t tlen, entries *es)
{
    int rc = host->store_range(j->store, (ks_bytes){from, flen}, (ks_bytes){to, tlen},
                               collect, es);
    return rc ? rc : es->nomem ? KS_ERR_NOMEM : 0;
}

/* Put k = flags + value. */
static int put_record(sjoin *j, ks_bytes k, unsigned char flags, ks_bytes value)
{
    if (value.len + 1 > j->scratch_cap) {
        unsigned char *grown = realloc(j->scratch, value.len + 1);
        if (!grown)
            return KS_ERR_NOMEM;
        j->scratch = grown;
        j->scratch_cap = value.len + 1;
    }
    j->scratch[0] = flags;
    if (value.len)
        memcpy(j->scratch + 1, value.data, value.len);
    return host->store_put(j->store, k, (ks_bytes){j->scratch, value.len + 1});
}

/* 1 when records of `side` give a result of their own if they never join. */
static int keeps_unmatched(const sjoin *j, int side)
{
    return j->kind == KIND_OUTER || (j->kind == KIND_LEFT && side == LEFT);
}

/* Output the join of `mine` (of side `side`) with the other side's
 * `theirs` (NULL: unmatched), under tmpl's key and headers, at ts. */
static ks_verdict emit(sjoin *j, ks_ctx *ctx, const ks_record *tmpl, int side,
                       const ks_bytes *mine, const ks_bytes *theirs, int64_t ts)
{
    const ks_bytes *l = side == LEFT ? mine : theirs;
    const ks_bytes *r = side == LEFT ? theirs : mine;
    return ks_joiner_emit(&j->joiner, ctx, tmpl, l, r, ts);
}

/* The buffered records of the other side of `side` with key `key` in the
 * window of a record at ts, in (time, arrival) order. */
static int partners(sjoin *j, int side, ks_bytes key, int64_t ts, entries *es)
{
    int64_t lo = side == LEFT ? ts - j->before : ts - j->after;
    int64_t hi = side == LEFT ? ts + j->after : ts + j->before;
    int64_t from[2] = {lo, INT64_MIN}, to[2] = {hi, INT64_MAX};
    unsigned char f[KS_KEY_MAX], t[KS_KEY_MAX];
    unsigned char tag = side == LEFT ? TAG_RIGHT : TAG_LEFT;
    size_t fl = ks_win_key_encode(tag, key, from, 2, f, sizeof f);
    size_t tl = ks_win_key_encode(tag, key, to, 2, t, sizeof t);
    /* `to` is exclusive: T(hi) T(INT64_MAX) is no key a record has */
    return scan(j, f, fl, t, tl, es);
}

/* Join rec (of `side`, at ts) with every partner; *matched = 1 when any. */
static ks_verdict join_partners(sjoin *j, ks_ctx *ctx, const ks_record *rec, int side,
                                int64_t ts, int *matched)
{
    ks_bytes key = {rec->key, rec->key_len}, mine = {rec->value, rec->value_len};
    entries es = {0};
    int rc = partners(j, side, key, ts, &es);
    ks_verdict v = rc ? ks_keyed_store_failed(&j->keyed, ctx, "scan", rc) : KS_OK;
    for (size_t i = 0; i < es.n && v == KS_OK; i++) {
        entry *e = &es.v[i];
        if (e->vlen < 1)
            continue; /* not a record of ours */
        int64_t pts = ks_win_time_get(e->key + e->klen - 16);
        ks_bytes theirs = {e->val + 1, e->vlen - 1};
        *matched = 1;
        v = emit(j, ctx, rec, side, &mine, &theirs, pts > ts ? pts : ts);
        if (v == KS_OK && keeps_unmatched(j, !side) && !(e->val[0] & FLAG_MATCHED)) {
            rc = put_record(j, (ks_bytes){e->key, e->klen}, FLAG_MATCHED, theirs);
            v = rc ? ks_keyed_store_failed(&j->keyed, ctx, "put", rc) : KS_OK;
        }
    }
    entries_free(&es);
    return v;
}

/* Buffer rec (of `side`, at ts, arrival seq) and index it for expiry. */
static ks_verdict buffer(sjoin *j, ks_ctx *ctx, const ks_record *rec, int side, int64_t ts,
                         int64_t seq, int matched)
{
    unsigned char k[KS_KEY_MAX];
    int64_t times[2] = {ts, seq};
    ks_bytes key = {rec->key, rec->key_len};
    size_t kl = ks_win_key_encode(side == LEFT ? TAG_LEFT : TAG_RIGHT, key, times, 2,
                                  k + INDEX_HEAD, BUF_KEY_MAX);
    int rc = put_record(j, (ks_bytes){k + INDEX_HEAD, kl}, matched ? FLAG_MATCHED : 0,
                        (ks_bytes){rec->value, rec->value_len});
    k[0] = TAG_INDEX;
    ks_win_time_put(k + 1, ts);
    ks_win_time_put(k + 9, seq);
    if (rc == 0)
        rc = host->store_put(j->store, (ks_bytes){k, INDEX_HEAD + kl}, (ks_bytes){"", 0});
    return rc ? ks_keyed_store_failed(&j->keyed, ctx, "put", rc) : KS_OK;
}

/* An expired buffered record (its buffer key): its unmatched result if it
 * is owed one, then its deletion. */
static ks_verdict expire(sjoin *j, ks_ctx *ctx, const unsigned char *bk, size_t blen)
{
    unsigned char key[KS_KEY_MAX];
    size_t key_len;
    int64_t times[2];
    if (blen < 1 || ks_win_key_decode(bk, blen, key, sizeof key, &key_len, times, 2) != 0)
        return KS_OK; /* not ours */
    int side = bk[0] == TAG_LEFT ? LEFT : RIGHT;
    ks_bytes v;
    int rc = host->store_get(j->store, (ks_bytes){bk, blen}, &v);
    if (rc == KS_ERR_NOT_FOUND)
        return KS_OK;
    if (rc != 0)
        return ks_keyed_store_failed(&j->keyed, ctx, "get", rc);
    if (v.len >= 1 && keeps_unmatched(j, side) &&
        !(((const unsigned char *)v.data)[0] & FLAG_MATCHED)) {
        /* copy: forward() may write stores, which ends v's loan */
        unsigned char *copy = malloc(v.len);
        if (!copy)
            return ks_keyed_store_failed(&j->keyed, ctx, "get", KS_ERR_NOMEM);
        memcpy(copy, (const unsigned char *)v.data + 1, v.len - 1);
        ks_bytes mine = {copy, v.len - 1};
        ks_record tmpl = {.key = key, .key_len = key_len, .partition = -1, .offset = -1};
        ks_verdict ve = emit(j, ctx, &tmpl, side, &mine, NULL, times[0]);
        free(copy);
        /* the joiner refused a value buffered long ago (logged): failing
         * the record that moved stream time would fail every later one */
        if (ve == KS_SKIP)
            host->metric_add(ctx, "unjoinable", 1);
        else if (ve != KS_OK)
            return ve;
    }
    rc = host->store_delete(j->store, (ks_bytes){bk, blen});
    return rc ? ks_keyed_store_failed(&j->keyed, ctx, "delete", rc) : KS_OK;
}

/* Expire every buffered record with t + before + after + grace < st. */
static ks_verdict run_expiry(sjoin *j, ks_ctx *ctx, int64_t st)
{
    int64_t window = j->before + j->after + j->grace;
    unsigned char from[1] = {TAG_INDEX}, to[9] = {TAG_INDEX};
    ks_win_time_put(to + 1, st - window); /* t < st - window */
    entries due = {0};
    int rc = scan(j, from, sizeof from, to, sizeof to, &due);
    ks_verdict v = rc ? ks_keyed_store_failed(&j->keyed, ctx, "scan", rc) : KS_OK;
    for (size_t i = 0; i < due.n && v == KS_OK; i++) {
        entry *e = &due.v[i];
        if (e->klen <= INDEX_HEAD)
            continue;
        rc = host->store_delete(j->store, (ks_bytes){e->key, e->klen});
        v = rc ? ks_keyed_store_failed(&j->keyed, ctx, "delete", rc)
               : expire(j, ctx, e->key + INDEX_HEAD, e->klen - INDEX_HEAD);
    }
    entries_free(&due);
    return v;
}

/* Which side rec came from: LEFT, RIGHT, or -1 (logged). */
static int side_of(sjoin *j, ks_ctx *ctx)
{
    const char *in = host->input_name(ctx);
    for (int s = LEFT; s <= RIGHT; s++)
        if (in && strcmp(in, j->side_name[s]) == 0)
            return s;
    host->log(ctx, KS_LOG_ERROR,
              "join: node '%s': a record from '%s', which is neither left '%s' nor right "
              "'%s' (a stream-stream join reads exactly its two inputs, and cannot yet "
              "follow a key change: re-key each side into a topic of its own first)",
              host->node_name(ctx), in ? in : "?", j->side_name[LEFT], j->side_name[RIGHT]);
    return -1;
}

/* 1 when rec is too late for its window (counted and logged). */
static int too_late(sjoin *j, ks_ctx *ctx, const ks_record *rec, int side, int64_t st)
{
    int64_t end = rec->timestamp + (side == LEFT ? j->after : j->before);
    if (end + j->grace >= st)
        return 0;
    j->late++;
    host->metric_add(ctx, "late_records", 1);
    host->log(ctx, KS_LOG_DEBUG,
              "join: node '%s': dropped a late %s record (%s[%d]@%lld, time %" PRId64
              ", stream time %" PRId64 ", grace %" PRId64 " ms); %llu so far",
              host->node_name(ctx), side == LEFT ? "left" : "right",
              rec->topic ? rec->topic : "-", (int)rec->partition, (long long)rec->offset,
              rec->timestamp, st, j->grace, (unsigned long long)j->late);
    return 1;
}

/* 1 when the escaped key leaves room for the times and the index. */
static int key_fits(const ks_record *rec)
{
    size_t n = 1 + rec->key_len + 2 + 16;
    for (size_t i = 0; i < rec->key_len; i++)
        n += ((const unsigned char *)rec->key)[i] == 0x00;
    return n <= BUF_KEY_MAX;
}

static ks_verdict streams_process(ks_ctx *ctx, void *state, const ks_record *rec)
{
    sjoin *j = state;
    ks_verdict v;
    if (ks_keyed_check(&j->keyed, ctx, rec, &v))
        return v;
    int side = side_of(j, ctx);
    if (side < 0)
        return KS_FATAL;
    /* past KS_WIN_TIME_MAX, times plus the window would overflow */
    int bad_ts = rec->timestamp < 0 || rec->timestamp > KS_WIN_TIME_MAX;
    if (bad_ts || !key_fits(rec)) {
        host->log(ctx, KS_LOG_WARN,
                  "join: node '%s': record at %s[%d]@%lld has %s; poison",
                  host->node_name(ctx), rec->topic ? rec->topic : "-", (int)rec->partition,
                  (long long)rec->offset,
                  bad_ts ? "a timestamp outside 0..2^62" : "a key too long to buffer");
        return KS_SKIP;
    }
    int64_t st, seq;
    int rc = ks_win_meta_load(host, j->store, &st, &seq);
    if (rc == KS_ERR_INVALID) {
        host->log(ctx, KS_LOG_ERROR, "join: the store of node '%s' holds no join buffer; "
                                     "is it shared with another node?",
                  host->node_name(ctx));
        return KS_FATAL;
    }
    if (rc != 0)
        return ks_keyed_store_failed(&j->keyed, ctx, "get", rc);
    int64_t old_st = st;
    st = rec->timestamp > st ? rec->timestamp : st;
    rc = ks_win_meta_save(host, j->store, st, ++seq);
    if (rc != 0)
        return ks_keyed_store_failed(&j->keyed, ctx, "put", rc);
    if (too_late(j, ctx, rec, side, st))
        return KS_OK;
    int matched = 0;
    v = join_partners(j, ctx, rec, side, rec->timestamp, &matched);
    if (v == KS_OK)
        v = buffer(j, ctx, rec, side, rec->timestamp, seq, matched);
    if (v == KS_OK && st > old_st)
        v = run_expiry(j, ctx, st);
    return v;
}

/* ---- init ----------------------------------------------------------------- */

static ks_verdict duration(ks_ctx *ctx, const char *key, int64_t *ms)
{
    if (host->config_duration_ms(ctx, key, ms) == 0 && *ms >= 0 && *ms <= KS_WIN_DURATION_MAX)
        return KS_OK;
    host->log(ctx, KS_LOG_ERROR, "join: node '%s': %s must be a duration of 0..2^59 ms",
              host->node_name(ctx), key);
    return KS_FATAL;
}

static ks_verdict windows_init(ks_ctx *ctx, sjoin *j)
{
    if (duration(ctx, "window.before", &j->before) != KS_OK)
        return KS_FATAL;
    /* no `after:`: the window is symmetric, as JoinWindows.ofTimeDifference */
    if (host->config_duration_ms(ctx, "window.after", &j->after) != 0)
        j->after = j->before;
    else if (j->after < 0 || j->after > KS_WIN_DURATION_MAX)
        return duration(ctx, "window.after", &j->after);
    if (duration(ctx, "window.grace", &j->grace) != KS_OK)
        return KS_FATAL;
    return KS_OK;
}

static ks_verdict streams_init(ks_ctx *ctx, void **state)
{
    sjoin *j = calloc(1, sizeof *j);
    if (!j)
        return KS_FATAL;
    *state = j;
    ks_keyed_init(&j->keyed, host, "join");
    if (!KS_API_HAS(host, input_name)) {
        host->log(ctx, KS_LOG_ERROR, "join: node '%s': the engine is older than ABI 1.5",
                  host->node_name(ctx));
        return KS_FATAL;
    }
    if (host->store(ctx, NULL, &j->store) != 0) {
        host->log(ctx, KS_LOG_ERROR, "join: node '%s' has no store (`store:`) to buffer "
                                     "the two streams in",
                  host->node_name(ctx));
        return KS_FATAL;
    }
    static const char *const kinds[] = {"inner", "left", "outer", NULL};
    j->kind = ks_join_config_choice(host, ctx, "kind", kinds);
    if (j->kind < 0 || host->config_string(ctx, "left", &j->side_name[LEFT]) != 0 ||
        host->config_string(ctx, "right", &j->side_name[RIGHT]) != 0 ||
        windows_init(ctx, j) != KS_OK)
        return KS_FATAL;
    return ks_joiner_init(&j->joiner, host, ctx);
}

static void streams_close(ks_ctx *ctx, void *state)
{
    (void)ctx;
    sjoin *j = state;
    if (!j)
        return;
    ks_joiner_free(&j->joiner);
    free(j->scratch);
    free(j);
}

static const ks_config_field fields[] = {
    {"left", KS_CONFIG_STRING, 1, NULL, "the left stream (one of the node's from:)"},
    {"right", KS_CONFIG_STRING, 1, NULL, "the right stream (one of the node's from:)"},
    {"kind", KS_CONFIG_STRING, 0, "inner",
     "inner: joined pairs only; left: also left records that never joined; outer: also "
     "right ones"},
    {"joiner", KS_CONFIG_STRING, 0, "pair",
     "built-in JSON joiner: pair or merge; ignored when functions: { joiner: ... } names one"},
    {"window.before", KS_CONFIG_DURATION, 1, NULL,
     "how much earlier than a left record a right record may be"},
    {"window.after", KS_CONFIG_DURATION, 0, NULL,
     "how much later than a left record a right record may be; default: before"},
    {"window.grace", KS_CONFIG_DURATION, 0, "0",
     "how long after its window a record is still joined"},
};

const ks_processor_type ks_join_streams_type = {
    .struct_size = sizeof(ks_processor_type),
    .name = "streams",
    .description = "windowed stream-stream join (inner, left, outer) of the two streams in "
                   "from:",
    .flags = KS_PROC_NEEDS_STORE | KS_PROC_KEYED,
    .config = fields,
    .config_count = sizeof fields / sizeof fields[0],
    .state_version = 1,
    .init = streams_init,
    .process = streams_process,
    .close = streams_close,
};

void ks_join_streams_set_host(const ks_host_api *api)
{
    host = api;
}
