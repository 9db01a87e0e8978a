/*
 * cli_query.c - `kstreams query FILE STORE`: read one key, a key range or a
 * whole store from the state directory of a running or stopped instance;
 * on the store of a windowed node (count, aggregate, reduce with
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
#include "cli/cli_query.h"

#include <dirent.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "window/window_core.h"
#include "cli/cli_help.h"
#include "config/config.h"
#include "state/store.h"
#include "runtime/topology.h"
#include "state/layout.h"


/* A byte string given on the command line (text or hex); owned. */
typedef struct arg_bytes {
    unsigned char *data;
    size_t len;
    int set;
} arg_bytes;

/* ---- printing ----------------------------------------------------------- */

typedef struct query {
    const char *store;
    int json;
    int int64;
    int hex;    /* --hex: every key and value as hex */
    int ms;     /* --time-format ms: window bounds as epoch ms in text */
    int single; /* --key / --key-hex: no key column (text), one object (json, unwindowed) */
    FILE *out;
    json_t *array; /* json output being built */
    int32_t partition; /* being read */
    size_t found;
    int nomem;

    /* filters */
    const arg_bytes *key;             /* one key, or NULL */
    const arg_bytes *kfrom, *kto;     /* key range [kfrom, kto); either may be unset */
    int64_t tfrom, tto;               /* window start in [tfrom, tto] */

    /* windowed store */
    ks_win_kind kind;
    int64_t size, retention;
    int64_t stream_time; /* of the partition being read; INT64_MIN: none yet */
    /* sliding: the raw record times of the key being collected */
    unsigned char cur_key[KS_KEY_MAX];
    size_t cur_len;
    int have_cur;
    int64_t *ts;
    size_t nts, capts;
} query;

/* Valid UTF-8 that cannot move the cursor or change how a terminal shows
 * what follows: no C0 or C1 control characters, no DEL, no overlong forms,
 * surrogates or code points over U+10FFFF, no line/paragraph separators
 * and no bidirectional overrides or isolates. */
static int printable(const unsigned char *p, size_t n)
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

static void print_text(const query *q, ks_bytes b)
{
    if (!q->hex && printable(b.data, b.len))
        fwrite(b.data, 1, b.len, q->out);
    else
        print_hex(q->out, b.data, b.len);
}

static void print_value(const query *q, ks_bytes v)
{
    if (q->int64 && v.len == 8)
        fprintf(q->out, "%lld", (long long)ks_int64_decode(v.data));
    else
        print_text(q, v);
}

/* Set obj[name] (or obj[name_hex]) to the bytes. */
static void json_bytes(const query *q, json_t *obj, const char *name, const char *name_hex,
                       ks_bytes b)
{
    if (!q->hex && printable(b.data, b.len)) {
        json_object_set_new(obj, name, json_stringn(b.data, b.len));
        return;
    }
    char *h = hex_string(b.data, b.len);
    json_object_set_new(obj, name_hex, h ? json_string(h) : json_null());
    free(h);
}

/* ---- times -------------------------------------------------------------- */

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

/* "2026-03-02T10:15:00.000Z" */
static void format_time(int64_t ms, char *buf, size_t len)
{
    int64_t days = ms / 86400000, rem = ms % 86400000;
    if (rem < 0) {
        rem += 86400000;
        days--;
    }
    int64_t y;
    int m, d;
    civil_from_days(days, &y, &m, &d);
    snprintf(buf, len, "%04lld-%02d-%02dT%02d:%02d:%02d.%03dZ", (long long)y, m, d,
             (int)(rem / 3600000), (int)(rem / 60000 % 60), (int)(rem / 1000 % 60),
             (int)(rem % 1000));
}

/* n decimal digits at *p into *v; advances *p. */
static int digits(const char **p, int n, int *v)
{
    *v = 0;
    for (int i = 0; i < n; i++, (*p)++) {
        if (**p < '0' || **p > '9')
            return -1;
        *v = *v * 10 + (**p - '0');
    }
    return 0;
}

/* Epoch milliseconds ("-5000", "1700000000000") or an ISO-8601 date-time
 * in UTC or with an offset: YYYY-MM-DD, YYYY-MM-DDTHH:MM[:SS[.fff]] with
 * Z or +HH:MM / -HH:MM (a time needs one). 0 or -1. */
static int parse_time(const char *s, int64_t *ms)
{
    const char *p = s;
    int neg = *p == '-';
    p += neg;
    size_t nd = strspn(p, "0123456789");
    if (nd > 0 && p[nd] == '\0') {
        if (nd > 18)
            return -1;
        int64_t v = 0;
        for (; *p; p++)
            v = v * 10 + (*p - '0');
        *ms = neg ? -v : v;
        return 0;
    }
    if (neg || nd != 4)
        return -1;
    int y, mo, d, h = 0, mi = 0, sec = 0, frac = 0;
    if (digits(&p, 4, &y) || *p++ != '-' || digits(&p, 2, &mo) || *p++ != '-' ||
        digits(&p, 2, &d))
        return -1;
    static const int mdays[12] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1])
        return -1;
    if (mo == 2 && d == 29 && !(y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)))
        return -1;
    int64_t offset_min = 0;
    if (*p == 'T' || *p == 't') {
        p++;
        if (digits(&p, 2, &h) || *p++ != ':' || digits(&p, 2, &mi))
            return -1;
        if (*p == ':') {
            p++;
            if (digits(&p, 2, &sec))
                return -1;
            if (*p == '.' || *p == ',') {
                p++;
                size_t nf = strspn(p, "0123456789");
                if (nf == 0 || nf > 9)
                    return -1;
                for (size_t i = 0; i < 3; i++)
                    frac = frac * 10 + (i < nf ? p[i] - '0' : 0);
                p += nf;
            }
        }
        if (h > 23 || mi > 59 || sec > 59)
            return -1;
        if (*p == 'Z' || *p == 'z') {
            p++;
        } else if (*p == '+' || *p == '-') {
            int sign = *p++ == '-' ? -1 : 1, oh, om = 0;
            if (digits(&p, 2, &oh))
                return -1;
            if (*p == ':')
                p++;
            if (*p && digits(&p, 2, &om))
                return -1;
            if (oh > 23 || om > 59)
                return -1;
            offset_min = sign * (oh * 60 + om);
        } else {
            return -1; /* local time: not accepted */
        }
    }
    if (*p)
        return -1;
    int64_t days = days_from_civil(y, mo, d);
    *ms = ((days * 24 + h) * 60 + mi - offset_min) * 60000 + (int64_t)sec * 1000 + frac;
    return 0;
}

/* ---- window keys ------------------------------------------------------- */

static int bytes_cmp(const unsigned char *a, size_t alen, const unsigned char *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    return c ? c : (alen > blen) - (alen < blen);
}

/* Does the decoded key pass --key / --from-key / --to-key? */
static int key_selected(const query *q, const unsigned char *k, size_t klen)
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
    query *q = arg;
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

static void emit_window(query *q, ks_bytes key, int64_t start, int64_t end, ks_bytes value)
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
            format_time(start, s, sizeof s);
            format_time(end, e, sizeof e);
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
    query *q = arg;
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
static void sliding_flush(query *q)
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
    query *q = arg;
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
    if (q->nts == q->capts) {
        size_t cap = q->capts ? q->capts * 2 : 64;
        int64_t *grown = realloc(q->ts, cap * sizeof *grown);
        if (!grown) {
            q->nomem = 1;
            return 1;
        }
        q->ts = grown;
        q->capts = cap;
    }
    q->ts[q->nts++] = times[0];
    return 0;
}

/* Read the windows of one partition's store. */
static int query_windows(query *q, ks_store_db *db)
{
    static const unsigned char meta_key[1] = {KS_WIN_TAG_META};
    ks_bytes meta;
    q->stream_time = INT64_MIN;
    int rc = ks_store_get(db, (ks_bytes){meta_key, 1}, &meta);
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
    rc = ks_store_range(db, (ks_bytes){lo, nlo}, (ks_bytes){hi, nhi},
                        q->kind == KS_WIN_SLIDING ? raw_entry : window_entry, q);
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
static int list_partitions(const char *base, int32_t **parts, size_t *count)
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

/* Read one partition. Returns a KS_EXIT_* code; *missing set when the
 * partition has no environment or no such store. */
static int query_partition(query *q, const char *dir, int *missing, FILE *errf)
{
    char err[1024];
    ks_store_env *env = NULL;
    *missing = 0;
    int rc = ks_store_env_open_readonly(dir, &env, err, sizeof err);
    if (rc == KS_ERR_NOT_FOUND) {
        *missing = 1;
        return KS_EXIT_OK;
    }
    if (rc != 0) {
        fprintf(errf, "kstreams query: %s\n", err);
        return KS_EXIT_FAILURE;
    }
    ks_store_db *db = NULL;
    rc = ks_store_db_open(env, q->store, &db);
    int exit_code = KS_EXIT_OK;
    if (rc == KS_ERR_NOT_FOUND) {
        *missing = 1;
    } else if (rc != 0) {
        fprintf(errf, "kstreams query: %s: cannot open store '%s': %s\n", dir, q->store,
                ks_store_last_error(env));
        exit_code = KS_EXIT_FAILURE;
    } else {
        if (q->kind != KS_WIN_NONE) {
            rc = query_windows(q, db);
        } else if (q->key) {
            ks_bytes k = {q->key->data, q->key->len}, v;
            rc = ks_store_get(db, k, &v);
            if (rc == 0)
                emit(q, k, v);
            else if (rc == KS_ERR_NOT_FOUND)
                rc = 0;
        } else {
            ks_bytes from = {0}, to = {0};
            if (q->kfrom && q->kfrom->set)
                from = (ks_bytes){q->kfrom->data, q->kfrom->len};
            if (q->kto && q->kto->set)
                to = (ks_bytes){q->kto->data, q->kto->len};
            rc = ks_store_range(db, from, to, emit, q);
        }
        if (rc == KS_ERR_NOMEM) {
            fprintf(errf, "kstreams query: %s: out of memory\n", dir);
            exit_code = KS_EXIT_FAILURE;
        } else if (rc != 0) {
            fprintf(errf, "kstreams query: %s: %s\n", dir, ks_store_last_error(env));
            exit_code = KS_EXIT_FAILURE;
        }
    }
    ks_store_read_end(env); /* let the writer reuse the snapshot's pages */
    ks_store_env_close(env);
    return exit_code;
}

/* ---- the command -------------------------------------------------------- */

static const char *key_limit_text(void)
{
    static char text[48];
    snprintf(text, sizeof text, "keys have at most %d bytes", KS_KEY_MAX);
    return text;
}

static int usage_error(FILE *errf, const char *fmt, const char *arg)
{
    fputs("kstreams query: ", errf);
    fprintf(errf, fmt, arg);
    fputs("\n", errf);
    ks_cli_command_help("query", errf);
    return KS_EXIT_USAGE;
}

/* Text argument into b (a copy). */
static int set_text(arg_bytes *b, const char *s)
{
    free(b->data);
    b->len = strlen(s);
    b->data = malloc(b->len ? b->len : 1);
    if (!b->data)
        return -1;
    memcpy(b->data, s, b->len);
    b->set = 1;
    return 0;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* Hex argument ("0102ff", "0x0102ff") into b. -1 when malformed. */
static int set_hex(arg_bytes *b, const char *s)
{
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
        s += 2;
    size_t n = strlen(s);
    if (n % 2)
        return -1;
    free(b->data);
    b->data = malloc(n / 2 ? n / 2 : 1);
    if (!b->data)
        return -1;
    for (size_t i = 0; i < n / 2; i++) {
        int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            free(b->data);
            b->data = NULL;
            return -1;
        }
        b->data[i] = (unsigned char)(hi << 4 | lo);
    }
    b->len = n / 2;
    b->set = 1;
    return 0;
}

/* A key for messages: as text when printable, else 0x... */
static void describe_key(const arg_bytes *k, char *buf, size_t len)
{
    if (printable(k->data, k->len) && k->len < len) {
        memcpy(buf, k->data, k->len);
        buf[k->len] = '\0';
        return;
    }
    size_t n = (size_t)snprintf(buf, len, "0x");
    for (size_t i = 0; i < k->len && n + 3 < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%02x", k->data[i]);
}

/* The windowed node whose (first) store is `store`: its window from the
 * YAML `window:` map, read and checked with the plugins' rules (the
 * defaults of the shipped count, aggregate and reduce; no plugin is
 * loaded). 1 with *spec (kind KS_WIN_NONE) when the store is not windowed,
 * 0 with *node and *spec, -1 with "FILE:LINE:COL: ..." in err when the
 * window is invalid (`kstreams check` refuses it too). */
static int window_of(const ks_pipeline *p, const char *store, const ks_cfg_node **node,
                     ks_win_spec *spec, char *err, size_t errlen)
{
    for (size_t i = 0; i < p->node_count; i++) {
        const ks_cfg_node *n = &p->nodes[i];
        if (n->store_count == 0 || strcmp(n->stores[0], store) != 0)
            continue;
        int rc = ks_topology_window_spec(n, NULL, spec, err, errlen);
        if (rc == 1)
            continue;
        *node = n;
        return rc;
    }
    memset(spec, 0, sizeof *spec);
    return 1;
}

int ks_cli_query(int argc, char **argv, FILE *out, FILE *errf)
{
    const char *file = NULL, *store = NULL, *from = NULL, *to = NULL;
    const char *format = "text", *time_format = "iso";
    arg_bytes key = {0}, kfrom = {0}, kto = {0};
    int key_args = 0, kfrom_args = 0, kto_args = 0;
    long partition = -1;
    int int64 = 0, hex = 0, raw = 0;
    int exit_code = KS_EXIT_OK;
    ks_pipeline *p = NULL;
    int32_t *parts = NULL;
    query q = {0};
#define USAGE(...)                                        \
    do {                                                  \
        exit_code = usage_error(errf, __VA_ARGS__);       \
        goto done;                                        \
    } while (0)
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_value = i + 1 < argc;
        int bad = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            ks_cli_command_help("query", out);
            goto done;
        } else if (!strcmp(a, "--int64")) {
            int64 = 1;
        } else if (!strcmp(a, "--hex")) {
            hex = 1;
        } else if (!strcmp(a, "--raw")) {
            raw = 1;
        } else if (!strcmp(a, "--key") && has_value) {
            key_args++;
            bad = set_text(&key, argv[++i]);
        } else if (!strcmp(a, "--key-hex") && has_value) {
            key_args++;
            if (set_hex(&key, argv[++i]) != 0)
                USAGE("--key-hex needs an even number of hex digits, not '%s'", argv[i]);
        } else if (!strcmp(a, "--from-key") && has_value) {
            kfrom_args++;
            bad = set_text(&kfrom, argv[++i]);
        } else if (!strcmp(a, "--from-key-hex") && has_value) {
            kfrom_args++;
            if (set_hex(&kfrom, argv[++i]) != 0)
                USAGE("--from-key-hex needs an even number of hex digits, not '%s'", argv[i]);
        } else if (!strcmp(a, "--to-key") && has_value) {
            kto_args++;
            bad = set_text(&kto, argv[++i]);
        } else if (!strcmp(a, "--to-key-hex") && has_value) {
            kto_args++;
            if (set_hex(&kto, argv[++i]) != 0)
                USAGE("--to-key-hex needs an even number of hex digits, not '%s'", argv[i]);
        } else if (!strcmp(a, "--from") && has_value) {
            from = argv[++i];
        } else if (!strcmp(a, "--to") && has_value) {
            to = argv[++i];
        } else if (!strcmp(a, "--format") && has_value) {
            format = argv[++i];
        } else if (!strcmp(a, "--time-format") && has_value) {
            time_format = argv[++i];
        } else if (!strcmp(a, "--partition") && has_value) {
            char *end;
            partition = strtol(argv[++i], &end, 10);
            if (*end || end == argv[i] || partition < 0 || partition > INT32_MAX)
                USAGE("--partition needs a number >= 0, not '%s'", argv[i]);
        } else if (a[0] != '-' && !file) {
            file = a;
        } else if (a[0] != '-' && !store) {
            store = a;
        } else if (a[0] == '-' && !has_value &&
                   (!strcmp(a, "--key") || !strcmp(a, "--key-hex") || !strcmp(a, "--from") ||
                    !strcmp(a, "--to") || !strcmp(a, "--from-key") || !strcmp(a, "--to-key") ||
                    !strcmp(a, "--from-key-hex") || !strcmp(a, "--to-key-hex") ||
                    !strcmp(a, "--format") || !strcmp(a, "--time-format") ||
                    !strcmp(a, "--partition"))) {
            USAGE("%s needs a value", a);
        } else {
            USAGE("unexpected argument '%s'", a);
        }
        if (bad) {
            fprintf(errf, "kstreams query: out of memory\n");
            exit_code = KS_EXIT_FAILURE;
            goto done;
        }
    }
    if (!file || !store)
        USAGE("%s", !file ? "missing pipeline FILE" : "missing STORE");
    if (key_args > 1)
        USAGE("%s", "give one key: --key or --key-hex, once");
    if (kfrom_args > 1 || kto_args > 1)
        USAGE("%s", "give each key bound once: --from-key or --from-key-hex, --to-key or "
                    "--to-key-hex");
    if (key.set && (kfrom.set || kto.set))
        USAGE("%s", "--key and a key range (--from-key, --to-key) exclude each other");
    if (key.set && key.len == 0)
        USAGE("%s", "--key needs a non-empty key");
    if (key.len > KS_KEY_MAX || kfrom.len > KS_KEY_MAX || kto.len > KS_KEY_MAX)
        USAGE("%s", key_limit_text());
    if (strcmp(format, "text") != 0 && strcmp(format, "json") != 0)
        USAGE("--format is text or json, not '%s'", format);
    if (strcmp(time_format, "iso") != 0 && strcmp(time_format, "ms") != 0)
        USAGE("--time-format is iso or ms, not '%s'", time_format);

    char err[2048];
    if (ks_pipeline_load(file, &p, err, sizeof err) != 0) {
        fprintf(errf, "%s\n", err);
        exit_code = KS_EXIT_INVALID;
        goto done;
    }
    if (!ks_pipeline_store(p, store)) {
        fprintf(errf, "kstreams query: %s: no store '%s'; stores:", file, store);
        for (size_t s = 0; s < p->store_count; s++)
            fprintf(errf, " %s", p->stores[s].name);
        fprintf(errf, "%s\n", p->store_count ? "" : " (none)");
        exit_code = KS_EXIT_NOT_FOUND;
        goto done;
    }

    const ks_cfg_node *wnode = NULL;
    ks_win_spec wspec = {0};
    if (!raw && window_of(p, store, &wnode, &wspec, err, sizeof err) < 0) {
        fprintf(errf, "%s\n", err);
        exit_code = KS_EXIT_INVALID;
        goto done;
    }
    ks_win_kind kind = wspec.kind;
    q.tfrom = INT64_MIN;
    q.tto = INT64_MAX;
    if (kind == KS_WIN_NONE) {
        /* --from/--to: keys, the same as --from-key/--to-key */
        if ((from && kfrom.set) || (to && kto.set))
            USAGE("%s", "give a key bound once: --from or --from-key, --to or --to-key");
        if (key.set && (from || to))
            USAGE("%s", "--key and --from/--to exclude each other");
        if (from && set_text(&kfrom, from) != 0)
            USAGE("%s", "out of memory");
        if (to && set_text(&kto, to) != 0)
            USAGE("%s", "out of memory");
        if (kfrom.len > KS_KEY_MAX || kto.len > KS_KEY_MAX)
            USAGE("%s", key_limit_text());
    } else {
        /* --from/--to: window start times */
        if (from && parse_time(from, &q.tfrom) != 0)
            USAGE("--from '%s' is not a time: give epoch milliseconds or ISO-8601 "
                  "(2026-03-02T10:15:00Z); for a key range use --from-key",
                  from);
        if (to && parse_time(to, &q.tto) != 0)
            USAGE("--to '%s' is not a time: give epoch milliseconds or ISO-8601 "
                  "(2026-03-02T10:15:00Z); for a key range use --to-key",
                  to);
        if (q.tfrom > q.tto)
            USAGE("--from %s is after --to", from);
        if (kind == KS_WIN_SLIDING && strcmp(wnode->type, "count") != 0) {
            fprintf(errf,
                    "kstreams query: store '%s' holds the sliding windows of node '%s' (%s): "
                    "only their records are stored, and their values are folded by the "
                    "plugin's functions when emitted; read the node's output topic, or "
                    "the stored records with --raw\n",
                    store, wnode->name, wnode->type);
            exit_code = KS_EXIT_USAGE;
            goto done;
        }
    }

    size_t nparts = 0;
    char base[4096];
    ks_layout_app_dir(p->state_dir, p->application, base, sizeof base);
    if (list_partitions(base, &parts, &nparts) != 0) {
        fprintf(errf, "kstreams query: %s: no state directory (has the pipeline run with "
                      "this state_dir?)\n",
                base);
        exit_code = KS_EXIT_NOT_FOUND;
        goto done;
    }
    if (partition >= 0) {
        free(parts);
        parts = malloc(sizeof *parts);
        if (!parts) {
            exit_code = KS_EXIT_FAILURE;
            goto done;
        }
        parts[0] = (int32_t)partition;
        nparts = 1;
    }

    q.store = store;
    q.json = strcmp(format, "json") == 0;
    q.int64 = int64;
    q.hex = hex;
    q.ms = strcmp(time_format, "ms") == 0;
    q.single = key.set;
    q.out = out;
    q.key = key.set ? &key : NULL;
    q.kfrom = &kfrom;
    q.kto = &kto;
    q.kind = kind;
    q.size = wspec.size;
    q.retention = wspec.retention;
    if (q.json)
        q.array = json_array();
    size_t present = 0;
    for (size_t i = 0; i < nparts && exit_code == KS_EXIT_OK; i++) {
        char dir[4200];
        ks_layout_task_dir(p->state_dir, p->application, parts[i], dir, sizeof dir);
        int missing = 0;
        q.partition = parts[i];
        exit_code = query_partition(&q, dir, &missing, errf);
        present += !missing;
        if (key.set && q.found) /* a key lives in one partition */
            break;
    }
    char kdesc[128];
    if (key.set)
        describe_key(&key, kdesc, sizeof kdesc);
    if (exit_code == KS_EXIT_OK && partition >= 0 && !present) {
        fprintf(errf, "kstreams query: %s/task-%ld: no store '%s' here\n", base, partition,
                store);
        exit_code = KS_EXIT_NOT_FOUND;
    } else if (exit_code == KS_EXIT_OK && key.set && !q.found && kind != KS_WIN_NONE) {
        fprintf(errf, "kstreams query: no window of key '%s' in store '%s'", kdesc, store);
        if (from || to)
            fprintf(errf, " with a start in [%s, %s]", from ? from : "-", to ? to : "-");
        fputc('\n', errf);
        exit_code = KS_EXIT_NOT_FOUND;
    } else if (exit_code == KS_EXIT_OK && key.set && !q.found) {
        fprintf(errf, "kstreams query: key '%s' not found in store '%s'\n", kdesc, store);
        exit_code = KS_EXIT_NOT_FOUND;
    } else if (exit_code == KS_EXIT_OK && q.json) {
        /* one object for one key of a key-value store; windows: an array */
        json_t *doc = key.set && kind == KS_WIN_NONE ? json_array_get(q.array, 0) : q.array;
        char *s = json_dumps(doc, JSON_COMPACT);
        if (s) {
            fprintf(out, "%s\n", s);
            free(s);
        } else {
            exit_code = KS_EXIT_FAILURE;
        }
    }
done:
#undef USAGE
    json_decref(q.array);
    free(q.ts);
    free(parts);
    free(key.data);
    free(kfrom.data);
    free(kto.data);
    ks_pipeline_free(p);
    if (fflush(out) != 0 && exit_code == KS_EXIT_OK)
        exit_code = KS_EXIT_FAILURE;
    return exit_code;
}
