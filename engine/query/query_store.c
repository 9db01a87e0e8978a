/*
 * query_store.c - what `kstreams query FILE STORE` reads and prints
 * (cmd_query.c parses its arguments): one key, a key range or a whole
 * store from the state directory of a running or stopped instance; on the
 * store of a windowed node (count, aggregate, reduce with
 * `window:`), the windows of one key or of a key range, by window start.
 *
 * It loads only the pipeline YAML (no plugins), finds
 * STATE_DIR/<application>/task-<P>/ and opens each environment read-only
 * (ks_store_env_open_readonly). LMDB readers take no lock the writer waits
 * on; each snapshot is ended (ks_store_read_end) as soon as the partition
 * has been read so the engine can reuse its pages. Nothing here writes.
 *
 * Windowed stores are decoded with the layout of plugins/window.c (state
 * format 1 of a windowed node, docs/windows.md "Store layout") by the
 * plugins' own key functions and spec rules: lib/window/window_core.c, which
 * the engine compiles too (it does not link the plugin modules):
 *
 *   0x10                          stream time T(st), record sequence
 *   0x30 key* 00 00 T(start)      tumbling, hopping (value: flags + agg);
 *                                 sliding with emit: final (flags only)
 *   0x30 key* 00 00 T(end) T(start)  session (value: flags + agg)
 *   0x40 key* 00 00 T(ts) T(seq)  sliding: one raw record
 *   0x20 T(t) ...                 due-time index (skipped)
 *
 * Sliding windows store raw records, not results: their windows are
 * enumerated from the records as the engine defines them (each record r
 * has [r - size, r], and [r + 1, r + 1 + size] when a record falls in it),
 * and for `count` the value is the number of records. aggregate and
 * reduce fold them with the plugin's functions, which a query does not
 * load: such a query is refused (use --raw).
 */
#include "query/query_store.h"
#include "base/grow.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "query/query_time.h"

/* ---- printing ----------------------------------------------------------- */

/* Valid UTF-8 that cannot move the cursor or change how a terminal shows
 * what follows: no C0 or C1 control characters, no DEL, no overlong forms,
 * surrogates or code points over U+10FFFF, no line/paragraph separators
 * and no bidirectional overrides or isolates. */
int ks_query_printable(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t len = ks_win_utf8_next(p + i, n - i, &cp);
        if (!len || cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x2028 ||
            cp == 0x2029 || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069))
            return 0;
        i += len;
    }
    return 1;
}

static void print_hex(FILE *f, const unsigned char *p, size_t n)
{
    fputs("0x", f);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%02x", p[i]);
}

static char *hex_string(const unsigned char *p, size_t n)
{
    char *s = malloc(2 * n + 1);
    if (!s)
        return NULL;
    for (size_t i = 0; i < n; i++)
        snprintf(s + 2 * i, 3, "%02x", p[i]);
    s[2 * n] = '\0';
    return s;
}

static void print_text(const ks_query *q, ks_bytes b)
{
    if (!q->hex && ks_query_printable(b.data, b.len))
        fwrite(b.data, 1, b.len, q->out);
    else
        print_hex(q->out, b.data, b.len);
}

static void print_value(const ks_query *q, ks_bytes v)
{
    if (q->int64 && v.len == 8)
        fprintf(q->out, "%lld", (long long)ks_int64_decode(v.data));
    else
        print_text(q, v);
}

/* Set obj[name] (or obj[name_hex]) to the bytes. */
static void json_bytes(const ks_query *q, json_t *obj, const char *name, const char *name_hex,
                       ks_bytes b)
{
    if (!q->hex && ks_query_printable(b.data, b.len)) {
        json_object_set_new(obj, name, json_stringn(b.data, b.len));
        return;
    }
    char *h = hex_string(b.data, b.len);
    json_object_set_new(obj, name_hex, h ? json_string(h) : json_null());
    free(h);
}

/* ---- reading: the owner's snapshot, or another thread's (q->snap) ---- */

static int q_get(const ks_query *q, ks_store_db *db, ks_bytes k, ks_bytes *v)
{
    return q->snap ? ks_store_snap_get(q->snap, db, k, v) : ks_store_get(db, k, v);
}

static int q_range(const ks_query *q, ks_store_db *db, ks_bytes from, ks_bytes to, ks_range_cb cb)
{
    return q->snap ? ks_store_snap_range(q->snap, db, from, to, cb, (void *)q)
                   : ks_store_range(db, from, to, cb, (void *)q);
}

/* ---- window keys ------------------------------------------------------- */

static int bytes_cmp(const unsigned char *a, size_t alen, const unsigned char *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    return c ? c : (alen > blen) - (alen < blen);
}

/* Does the decoded key pass --key / --from-key / --to-key? */
static int key_selected(const ks_query *q, const unsigned char *k, size_t klen)
{
    if (q->key)
        return klen == q->key->len && memcmp(k, q->key->data, klen) == 0;
    if (q->kfrom && q->kfrom->set && bytes_cmp(k, klen, q->kfrom->data, q->kfrom->len) < 0)
        return 0;
    if (q->kto && q->kto->set && bytes_cmp(k, klen, q->kto->data, q->kto->len) >= 0)
        return 0;
    return 1;
}

/* ---- results ------------------------------------------------------------ */

static int emit(void *arg, ks_bytes key, ks_bytes value)
{
    ks_query *q = arg;
    q->found++;
    if (!q->json) {
        if (!q->single) {
            print_text(q, key);
            fputc('\t', q->out);
        }
        print_value(q, value);
        fputc('\n', q->out);
        return 0;
    }
    json_t *o = json_object();
    json_object_set_new(o, "partition", json_integer(q->partition));
    json_bytes(q, o, "key", "key_hex", key);
    if (q->int64 && value.len == 8)
        json_object_set_new(o, "value", json_integer(ks_int64_decode(value.data)));
    else
        json_bytes(q, o, "value", "value_hex", value);
    json_array_append_new(q->array, o);
    return 0;
}

static void emit_window(ks_query *q, ks_bytes key, int64_t start, int64_t end, ks_bytes value)
{
    q->found++;
    if (!q->json) {
        if (!q->single) {
            print_text(q, key);
            fputc('\t', q->out);
        }
        if (q->ms) {
            fprintf(q->out, "%lld\t%lld\t", (long long)start, (long long)end);
        } else {
            char s[40], e[40];
            ks_query_format_time(start, s, sizeof s);
            ks_query_format_time(end, e, sizeof e);
            fprintf(q->out, "%s\t%s\t", s, e);
        }
        print_value(q, value);
        fputc('\n', q->out);
        return;
    }
    json_t *o = json_object();
    json_object_set_new(o, "partition", json_integer(q->partition));
    json_bytes(q, o, "key", "key_hex", key);
    json_object_set_new(o, "start", json_integer(start));
    json_object_set_new(o, "end", json_integer(end));
    if (q->int64 && value.len == 8)
        json_object_set_new(o, "value", json_integer(ks_int64_decode(value.data)));
    else
        json_bytes(q, o, "value", "value_hex", value);
    json_array_append_new(q->array, o);
}

/* One stored window (tumbling, hopping, session). */
static int window_entry(void *arg, ks_bytes k, ks_bytes v)
{
    ks_query *q = arg;
    unsigned char key[KS_KEY_MAX];
    size_t klen;
    int64_t times[2];
    size_t ntimes = q->kind == KS_WIN_SESSION ? 2 : 1;
    if (ks_win_key_decode(k.data, k.len, key, sizeof key, &klen, times, ntimes) != 0 ||
        v.len < 1)
        return 0; /* not a window of this format: skipped */
    int64_t start = ntimes == 2 ? times[1] : times[0];
    int64_t end = ntimes == 2 ? times[0] : start + q->size;
    if (!key_selected(q, key, klen) || start < q->tfrom || start > q->tto)
        return 0;
    emit_window(q, (ks_bytes){key, klen},
                start, end, (ks_bytes){(const unsigned char *)v.data + 1, v.len - 1});
    return 0;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The sliding windows of the key collected in q->cur_key from its raw
 * record times q->ts (ascending): each record's left window, and its right
 * window when a record falls in it; those not yet expired (start +
 * retention > stream time: all their records are still stored). */
static void sliding_flush(ks_query *q)
{
    if (!q->have_cur || q->nts == 0) {
        q->have_cur = 0;
        q->nts = 0;
        return;
    }
    int64_t *starts = malloc(2 * q->nts * sizeof *starts);
    if (!starts) {
        q->nomem = 1;
        q->have_cur = 0;
        q->nts = 0;
        return;
    }
    size_t n = 0, j = 0;
    for (size_t i = 0; i < q->nts; i++) {
        int64_t r = q->ts[i];
        starts[n++] = r - q->size;
        while (j < q->nts && q->ts[j] <= r)
            j++;
        if (j < q->nts && q->ts[j] <= r + 1 + q->size)
            starts[n++] = r + 1;
    }
    qsort(starts, n, sizeof *starts, cmp_i64);
    size_t lo = 0, hi = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t s = starts[i], e = s + q->size; /* both inclusive */
        if ((i > 0 && starts[i - 1] == s) || s < q->tfrom || s > q->tto)
            continue;
        if (q->stream_time != INT64_MIN && s + q->retention <= q->stream_time)
            continue;
        while (lo < q->nts && q->ts[lo] < s)
            lo++;
        if (hi < lo)
            hi = lo;
        while (hi < q->nts && q->ts[hi] <= e)
            hi++;
        unsigned char count[8];
        ks_int64_encode((int64_t)(hi - lo), count);
        emit_window(q, (ks_bytes){q->cur_key, q->cur_len}, s, e + 1,
                    (ks_bytes){count, sizeof count});
    }
    free(starts);
    q->have_cur = 0;
    q->nts = 0;
}

/* One raw record of a sliding window node. */
static int raw_entry(void *arg, ks_bytes k, ks_bytes v)
{
    (void)v;
    ks_query *q = arg;
    unsigned char key[KS_KEY_MAX];
    size_t klen;
    int64_t times[2];
    if (ks_win_key_decode(k.data, k.len, key, sizeof key, &klen, times, 2) != 0 ||
        !key_selected(q, key, klen))
        return 0;
    if (q->have_cur && (klen != q->cur_len || memcmp(key, q->cur_key, klen) != 0))
        sliding_flush(q);
    if (!q->have_cur) {
        memcpy(q->cur_key, key, klen);
        q->cur_len = klen;
        q->have_cur = 1;
    }
    int64_t *grown = ks_grow(q->ts, &q->capts, q->nts, sizeof *grown, 64);
    if (!grown) {
        q->nomem = 1;
        return 1;
    }
    q->ts = grown;
    q->ts[q->nts++] = times[0];
    return 0;
}

/* Read the windows of one partition's store. */
static int query_windows(ks_query *q, ks_store_db *db)
{
    static const unsigned char meta_key[1] = {KS_WIN_TAG_META};
    ks_bytes meta;
    q->stream_time = INT64_MIN;
    int rc = q_get(q, db, (ks_bytes){meta_key, 1}, &meta);
    if (rc == 0 && meta.len == 16)
        q->stream_time = ks_win_time_get(meta.data);
    else if (rc != 0 && rc != KS_ERR_NOT_FOUND)
        return rc;

    unsigned char tag = q->kind == KS_WIN_SLIDING ? KS_WIN_TAG_RAW : KS_WIN_TAG_WIN;
    unsigned char lo[KS_KEY_MAX], hi[KS_KEY_MAX];
    size_t nlo = 1, nhi = 1;
    lo[0] = tag;
    hi[0] = (unsigned char)(tag + 1);
    /* bounds narrow the scan; key_selected() decides exactly */
    if (q->key) {
        nlo = ks_win_key_prefix(tag, (ks_bytes){q->key->data, q->key->len}, 1, lo, sizeof lo);
        memcpy(hi, lo, nlo);
        nhi = nlo;
        if (nlo == sizeof lo || hi[nhi - 1] != 0x00) { /* cut: scan to the tag's end */
            hi[0] = (unsigned char)(tag + 1);
            nhi = 1;
        } else {
            hi[nhi - 1] = 0x01; /* just past key* 00 00 */
        }
    } else {
        if (q->kfrom && q->kfrom->set)
            nlo = ks_win_key_prefix(tag, (ks_bytes){q->kfrom->data, q->kfrom->len}, 1, lo,
                                    sizeof lo);
        if (q->kto && q->kto->set) {
            size_t n = ks_win_key_prefix(tag, (ks_bytes){q->kto->data, q->kto->len}, 1, hi,
                                         sizeof hi);
            if (n < sizeof hi && n >= 3 && hi[n - 1] == 0x00 && hi[n - 2] == 0x00) {
                nhi = n;
            } else {
                hi[0] = (unsigned char)(tag + 1);
                nhi = 1;
            }
        }
    }
    rc = q_range(q, db, (ks_bytes){lo, nlo}, (ks_bytes){hi, nhi},
                 q->kind == KS_WIN_SLIDING ? raw_entry : window_entry);
    if (q->kind == KS_WIN_SLIDING && rc == 0)
        sliding_flush(q);
    q->have_cur = 0;
    q->nts = 0;
    return rc != 0 ? rc : q->nomem ? KS_ERR_NOMEM : 0;
}

/* ---- partitions --------------------------------------------------------- */

static int cmp_int32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The task-<P> directories of `base`, sorted. -1 when base is missing. */
int ks_query_list_partitions(const char *base, int32_t **parts, size_t *count)
{
    DIR *d = opendir(base);
    if (!d)
        return -1;
    size_t n = 0, cap = 0;
    int32_t *v = NULL;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end;
        if (strncmp(e->d_name, "task-", 5) != 0)
            continue;
        long p = strtol(e->d_name + 5, &end, 10);
        if (*end || end == e->d_name + 5 || p < 0 || p > INT32_MAX)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            int32_t *nv = realloc(v, cap * sizeof *v);
            if (!nv)
                break;
            v = nv;
        }
        v[n++] = (int32_t)p;
    }
    closedir(d);
    if (n)
        qsort(v, n, sizeof *v, cmp_int32);
    *parts = v;
    *count = n;
    return 0;
}

int ks_query_read(ks_query *q, ks_store_db *db)
{
    if (q->kind != KS_WIN_NONE)
        return query_windows(q, db);
    if (q->key) {
        ks_bytes k = {q->key->data, q->key->len}, v;
        int rc = q_get(q, db, k, &v);
        if (rc == 0)
            emit(q, k, v);
        return rc == KS_ERR_NOT_FOUND ? 0 : rc;
    }
    ks_bytes from = {0}, to = {0};
    if (q->kfrom && q->kfrom->set)
        from = (ks_bytes){q->kfrom->data, q->kfrom->len};
    if (q->kto && q->kto->set)
        to = (ks_bytes){q->kto->data, q->kto->len};
    return q_range(q, db, from, to, emit);
}

/* Read one partition (query_store.h). *missing set when the
 * partition has no environment or no such store. */
int ks_query_partition(ks_query *q, const char *dir, int *missing, FILE *errf)
{
    char err[1024];
    ks_store_env *env = NULL;
    *missing = 0;
    int rc = ks_store_env_open_readonly(dir, &env, err, sizeof err);
    if (rc == KS_ERR_NOT_FOUND) {
        *missing = 1;
        return 0;
    }
    if (rc != 0) {
        fprintf(errf, "kstreams query: %s\n", err);
        return -1;
    }
    ks_store_db *db = NULL;
    rc = ks_store_db_open(env, q->store, &db);
    int result = 0;
    if (rc == KS_ERR_NOT_FOUND) {
        *missing = 1;
    } else if (rc != 0) {
        fprintf(errf, "kstreams query: %s: cannot open store '%s': %s\n", dir, q->store,
                ks_store_last_error(env));
        result = -1;
    } else {
        rc = ks_query_read(q, db);
        if (rc == KS_ERR_NOMEM) {
            fprintf(errf, "kstreams query: %s: out of memory\n", dir);
            result = -1;
        } else if (rc != 0) {
            fprintf(errf, "kstreams query: %s: %s\n", dir, ks_store_last_error(env));
            result = -1;
        }
    }
    ks_store_read_end(env); /* let the writer reuse the snapshot's pages */
    ks_store_env_close(env);
    return result;
}
