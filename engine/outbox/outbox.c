/*
 * outbox.c - the durable outbox (see outbox.h).
 *
 * Layout of the environment <state_dir>/<application>/outbox:
 *   "events"  id -> row (encoding below)
 *   "active"  id -> status byte + user id, for rows that still need the
 *             dispatcher (PREQUEUED, PENDING, DISPATCHING): claims and the
 *             stale scan read this small index, not every row ever written
 *   "meta"    "prefix" -> 8 random bytes; "seq" -> uint64 big-endian
 *   "held"    id -> partition (int32 BE) + offset (int64 BE) of the request
 *             record a PREQUEUED row came from (events from processors,
 *             see ks_outbox_hold_requests)
 *   (partition_assign.c adds its own databases to the same env)
 *
 * Row encoding (native byte order: the env is local to one host):
 *   ks_outbox_row_hdr (outbox.h), then user, topic, key, payload, last_error, result
 *   back to back, lengths in the header (key_len UINT32_MAX: no key).
 *
 * Invariant: a row is in "active" iff its status is PREQUEUED, PENDING or
 * DISPATCHING, and the status byte there equals the row's.
 */
#include "outbox/outbox.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ROW_VERSION 1
#define NO_KEY UINT32_MAX
#define MAX_REASON 400

struct ks_outbox {
    ks_store_env *env;
    ks_store_db *events, *active, *meta;
    ks_store_db *held; /* id -> request partition, offset (NULL read-only) */
    pthread_mutex_t lock;
    int readonly;
    char err[512];
    /* rows that entered each status since open: committed, and in the open
     * txn (added to `entered` when it commits) */
    uint64_t entered[KS_OUTBOX_STATUS_COUNT], entering[KS_OUTBOX_STATUS_COUNT];
};

typedef ks_outbox_row_hdr row_hdr;

int64_t ks_outbox_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void ks_outbox_event_clear(ks_outbox_event *ev)
{
    if (!ev)
        return;
    free(ev->user);
    free(ev->topic);
    free(ev->key);
    free(ev->payload);
    free(ev->last_error);
    free(ev->result);
    memset(ev, 0, sizeof *ev);
}

void ks_outbox_events_free(ks_outbox_event *evs, size_t n)
{
    for (size_t i = 0; evs && i < n; i++)
        ks_outbox_event_clear(&evs[i]);
    free(evs);
}

ks_store_env *ks_outbox_env(ks_outbox *ob) { return ob->env; }
void ks_outbox_lock(ks_outbox *ob) { pthread_mutex_lock(&ob->lock); }
void ks_outbox_unlock(ks_outbox *ob) { pthread_mutex_unlock(&ob->lock); }
const char *ks_outbox_last_error(const ks_outbox *ob) { return ob->err; }

/* ------------------------------------------------------------------ */
/* Encoding                                                            */
/* ------------------------------------------------------------------ */

static size_t slen(const char *s) { return s ? strlen(s) : 0; }

void *ks_outbox_row_encode(const ks_outbox_event *ev, size_t *len)
{
    row_hdr h;
    memset(&h, 0, sizeof h);
    h.version = ROW_VERSION;
    h.status = (uint8_t)ev->status;
    h.attempts = ev->attempts;
    h.partition = ev->partition;
    h.user_len = (uint32_t)slen(ev->user);
    h.topic_len = (uint32_t)slen(ev->topic);
    h.key_len = ev->key ? (uint32_t)strlen(ev->key) : NO_KEY;
    h.error_len = (uint32_t)slen(ev->last_error);
    h.result_len = (uint32_t)slen(ev->result);
    h.payload_len = ev->payload_len;
    h.offset = ev->offset;
    h.created_ms = ev->created_ms;
    h.updated_ms = ev->updated_ms;
    h.claimed_ms = ev->claimed_ms;
    size_t keylen = ev->key ? h.key_len : 0;
    *len = sizeof h + h.user_len + h.topic_len + keylen + ev->payload_len + h.error_len +
           h.result_len;
    char *buf = malloc(*len), *p = buf;
    if (!buf)
        return NULL;
    memcpy(p, &h, sizeof h);
    p += sizeof h;
    memcpy(p, ev->user, h.user_len), p += h.user_len;
    memcpy(p, ev->topic, h.topic_len), p += h.topic_len;
    if (keylen)
        memcpy(p, ev->key, keylen), p += keylen;
    if (ev->payload_len)
        memcpy(p, ev->payload, ev->payload_len), p += ev->payload_len;
    if (h.error_len)
        memcpy(p, ev->last_error, h.error_len), p += h.error_len;
    if (h.result_len)
        memcpy(p, ev->result, h.result_len);
    return buf;
}

/* A NUL-terminated copy of n bytes at *p (advanced); n was checked
 * against the bytes left and is below SIZE_MAX. */
static char *take_str(const char **p, size_t n)
{
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, *p, n);
        s[n] = '\0';
    }
    *p += n;
    return s;
}

/* Take `want` bytes of the `*left` that remain, for field `what`: every
 * length of a stored row is checked here, one at a time, by subtraction,
 * so no sum of hostile lengths can wrap. 0, or -1 with err set. */
static int take_len(const char *id, const char *what, uint64_t want, size_t *left, char *err,
                    size_t errlen)
{
    if (want > *left) {
        snprintf(err, errlen,
                 "outbox event %.64s: unreadable row: %s of %llu bytes, but only %zu bytes "
                 "left",
                 id, what, (unsigned long long)want, *left);
        return -1;
    }
    *left -= (size_t)want;
    return 0;
}

/* The text fields are C strings once decoded: a NUL byte inside one would
 * cut it short (a user id read as another user's). The lengths were
 * checked; `p` is the first field. 1 with err set, or 0. */
static int text_with_nul(const char *id, const char *p, const row_hdr *h, char *err,
                         size_t errlen)
{
    size_t keylen = h->key_len == NO_KEY ? 0 : h->key_len;
    const struct {
        const char *what;
        size_t off, len;
    } text[] = {
        {"user", 0, h->user_len},
        {"topic", h->user_len, h->topic_len},
        {"key", (size_t)h->user_len + h->topic_len, keylen},
        {"last_error", (size_t)h->user_len + h->topic_len + keylen + h->payload_len,
         h->error_len},
        {"result",
         (size_t)h->user_len + h->topic_len + keylen + h->payload_len + h->error_len,
         h->result_len},
    };
    for (size_t i = 0; i < sizeof text / sizeof text[0]; i++) {
        if (memchr(p + text[i].off, '\0', text[i].len)) {
            snprintf(err, errlen, "outbox event %.64s: unreadable row: %s holds a NUL byte",
                     id, text[i].what);
            return 1;
        }
    }
    return 0;
}

int ks_outbox_row_decode(const char *id, const void *data, size_t len, ks_outbox_event *ev,
                         char *err, size_t errlen)
{
    row_hdr h;
    memset(ev, 0, sizeof *ev);
    if (!id)
        id = "?";
    if (!data || len < sizeof h) {
        snprintf(err, errlen, "outbox event %.64s: unreadable row: %zu bytes, shorter than "
                              "its %zu-byte header",
                 id, len, sizeof h);
        return KS_ERR_INVALID;
    }
    memcpy(&h, data, sizeof h);
    if (h.version != ROW_VERSION || h.status >= KS_OUTBOX_STATUS_COUNT) {
        snprintf(err, errlen, "outbox event %.64s: unreadable row: version %u, status %u",
                 id, (unsigned)h.version, (unsigned)h.status);
        return KS_ERR_INVALID;
    }
    size_t left = len - sizeof h;
    size_t keylen = h.key_len == NO_KEY ? 0 : h.key_len;
    if (take_len(id, "user", h.user_len, &left, err, errlen) ||
        take_len(id, "topic", h.topic_len, &left, err, errlen) ||
        take_len(id, "key", keylen, &left, err, errlen) ||
        take_len(id, "payload", h.payload_len, &left, err, errlen) ||
        take_len(id, "last_error", h.error_len, &left, err, errlen) ||
        take_len(id, "result", h.result_len, &left, err, errlen))
        return KS_ERR_INVALID;
    if (left) {
        snprintf(err, errlen, "outbox event %.64s: unreadable row: %zu bytes after its last "
                              "field",
                 id, left);
        return KS_ERR_INVALID;
    }
    const char *p = (const char *)data + sizeof h;
    if (text_with_nul(id, p, &h, err, errlen))
        return KS_ERR_INVALID;
    snprintf(ev->id, sizeof ev->id, "%s", id);
    ev->status = (ks_outbox_status)h.status;
    ev->attempts = h.attempts;
    ev->partition = h.partition;
    ev->offset = h.offset;
    ev->created_ms = h.created_ms;
    ev->updated_ms = h.updated_ms;
    ev->claimed_ms = h.claimed_ms;
    ev->user = take_str(&p, h.user_len);
    ev->topic = take_str(&p, h.topic_len);
    if (h.key_len != NO_KEY)
        ev->key = take_str(&p, keylen);
    ev->payload_len = (size_t)h.payload_len;
    ev->payload = take_str(&p, (size_t)h.payload_len); /* NUL-terminated for JSON */
    if (h.error_len)
        ev->last_error = take_str(&p, h.error_len);
    if (h.result_len)
        ev->result = take_str(&p, h.result_len);
    if (!ev->user || !ev->topic || !ev->payload || (h.key_len != NO_KEY && !ev->key) ||
        (h.error_len && !ev->last_error) || (h.result_len && !ev->result)) {
        ks_outbox_event_clear(ev);
        snprintf(err, errlen, "outbox event %.64s: out of memory", id);
        return KS_ERR_NOMEM;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* Open / close                                                        */
/* ------------------------------------------------------------------ */

static int random_bytes(unsigned char *buf, size_t n)
{
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t got = read(fd, buf, n);
    close(fd);
    return got == (ssize_t)n ? 0 : -1;
}

/* Write the random id prefix on first open (writable env only). */
static int ensure_prefix(ks_outbox *ob)
{
    ks_bytes k = {"prefix", 6}, v;
    int rc = ks_store_begin(ob->env);
    if (rc)
        return rc;
    if (ks_store_get(ob->meta, k, &v) == 0) {
        ks_store_abort(ob->env);
        return 0;
    }
    unsigned char prefix[8];
    if (random_bytes(prefix, sizeof prefix) != 0) {
        ks_store_abort(ob->env);
        return KS_ERR_IO;
    }
    ks_bytes pv = {prefix, sizeof prefix};
    rc = ks_store_put(ob->meta, k, pv);
    if (rc) {
        ks_store_abort(ob->env);
        return rc;
    }
    return ks_store_commit(ob->env);
}

static int outbox_open(const char *dir, int readonly, uint64_t map_size, ks_outbox **out,
                       char *err, size_t errlen)
{
    *out = NULL;
    ks_outbox *ob = calloc(1, sizeof *ob);
    if (!ob)
        return KS_ERR_NOMEM;
    pthread_mutex_init(&ob->lock, NULL);
    ob->readonly = readonly;
    int rc = readonly ? ks_store_env_open_readonly(dir, &ob->env, err, errlen)
                      : ks_store_env_open(dir, map_size ? map_size : (1ull << 30), 16,
                                          &ob->env, err, errlen);
    if (rc) {
        pthread_mutex_destroy(&ob->lock);
        free(ob);
        return rc;
    }
    if ((rc = ks_store_db_open(ob->env, "events", &ob->events)) ||
        (rc = ks_store_db_open(ob->env, "active", &ob->active)) ||
        (rc = ks_store_db_open(ob->env, "meta", &ob->meta)) ||
        (!readonly && (rc = ks_store_db_open(ob->env, "held", &ob->held))) ||
        (!readonly && (rc = ensure_prefix(ob)))) {
        snprintf(err, errlen, "%s: outbox: %s", dir, ks_store_last_error(ob->env));
        ks_outbox_close(ob);
        return rc;
    }
    *out = ob;
    return 0;
}

int ks_outbox_open(const char *dir, uint64_t map_size, ks_outbox **out, char *err,
                   size_t errlen)
{
    return outbox_open(dir, 0, map_size, out, err, errlen);
}

int ks_outbox_open_readonly(const char *dir, ks_outbox **out, char *err, size_t errlen)
{
    return outbox_open(dir, 1, 0, out, err, errlen);
}

void ks_outbox_close(ks_outbox *ob)
{
    if (!ob)
        return;
    ks_store_env_close(ob->env);
    pthread_mutex_destroy(&ob->lock);
    free(ob);
}

/* ------------------------------------------------------------------ */
/* Transactions under the lock                                         */
/* ------------------------------------------------------------------ */

/* Begin the one write txn (lock held). Read-only envs read through their
 * snapshot instead; it is ended in txn_end. */
static int txn_begin(ks_outbox *ob)
{
    if (ob->readonly)
        return 0;
    int rc = ks_store_begin(ob->env);
    if (rc)
        snprintf(ob->err, sizeof ob->err, "%s", ks_store_last_error(ob->env));
    return rc;
}

/* Commit when rc == 0 and `write`, else abort. Returns the final rc. */
static int txn_end(ks_outbox *ob, int rc, int write)
{
    if (ob->readonly) {
        ks_store_read_end(ob->env);
        return rc;
    }
    if (rc == 0 && write) {
        rc = ks_store_commit(ob->env);
        if (rc)
            snprintf(ob->err, sizeof ob->err, "%s", ks_store_last_error(ob->env));
    } else {
        ks_store_abort(ob->env);
    }
    for (int s = 0; s < KS_OUTBOX_STATUS_COUNT; s++) {
        if (rc == 0 && write)
            ob->entered[s] += ob->entering[s];
        ob->entering[s] = 0;
    }
    return rc;
}

static int load_row(ks_outbox *ob, const char *id, ks_outbox_event *ev)
{
    size_t len = id ? strlen(id) : 0;
    if (len != KS_OUTBOX_ID_LEN) {
        snprintf(ob->err, sizeof ob->err, "invalid event id '%.64s'", id ? id : "");
        return KS_ERR_INVALID;
    }
    ks_bytes k = {id, len}, v;
    int rc = ks_store_get(ob->events, k, &v);
    if (rc == KS_ERR_NOT_FOUND) {
        snprintf(ob->err, sizeof ob->err, "no outbox event %s", id);
        return rc;
    }
    /* a damaged row is a storage failure, not an unknown id */
    if (rc == 0 && (rc = ks_outbox_row_decode(id, v.data, v.len, ev, ob->err,
                                              sizeof ob->err)) == KS_ERR_INVALID)
        rc = KS_ERR_IO;
    return rc;
}

static int is_active(ks_outbox_status s)
{
    return s == KS_OUTBOX_PREQUEUED || s == KS_OUTBOX_PENDING || s == KS_OUTBOX_DISPATCHING;
}

/* Write ev and keep "active" in step (see the invariant at the top). */
static int store_row(ks_outbox *ob, const ks_outbox_event *ev)
{
    size_t len;
    void *buf = ks_outbox_row_encode(ev, &len);
    if (!buf)
        return KS_ERR_NOMEM;
    ks_bytes k = {ev->id, KS_OUTBOX_ID_LEN}, v = {buf, len};
    int rc = ks_store_put(ob->events, k, v);
    free(buf);
    if (rc)
        return rc;
    if (!is_active(ev->status))
        return ks_store_del(ob->active, k);
    size_t ulen = strlen(ev->user);
    char *a = malloc(1 + ulen);
    if (!a)
        return KS_ERR_NOMEM;
    a[0] = (char)ev->status;
    memcpy(a + 1, ev->user, ulen);
    ks_bytes av = {a, 1 + ulen};
    rc = ks_store_put(ob->active, k, av);
    free(a);
    return rc;
}

/* Move `ev` to `to` if the table allows it from where it is. */
static int move(ks_outbox *ob, ks_outbox_event *ev, ks_outbox_status to)
{
    if (!ks_outbox_transition_allowed(ev->status, to)) {
        snprintf(ob->err, sizeof ob->err, "outbox event %s: %s -> %s not allowed", ev->id,
                 ks_outbox_status_name(ev->status), ks_outbox_status_name(to));
        return KS_ERR_STATE;
    }
    ev->status = to;
    ev->updated_ms = ks_outbox_now_ms();
    ob->entering[to]++;
    return store_row(ob, ev);
}

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
/* Enqueue and read                                                    */
/* ------------------------------------------------------------------ */

static int topic_ok(const char *t)
{
    size_t n = slen(t);
    if (n == 0 || n > KS_OUTBOX_MAX_TOPIC)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((t[i] >= 'a' && t[i] <= 'z') || (t[i] >= 'A' && t[i] <= 'Z') ||
              (t[i] >= '0' && t[i] <= '9') || strchr("._-", t[i])))
            return 0;
    return 1;
}

/* Next id: prefix + sequence, the sequence bumped in the caller's txn. */
static int next_id(ks_outbox *ob, char id[KS_OUTBOX_ID_LEN + 1])
{
    ks_bytes pk = {"prefix", 6}, sk = {"seq", 3}, v;
    unsigned char prefix[8];
    int rc = ks_store_get(ob->meta, pk, &v);
    if (rc || v.len != 8)
        return rc ? rc : KS_ERR_INVALID;
    memcpy(prefix, v.data, 8);
    uint64_t seq = 0;
    if (ks_store_get(ob->meta, sk, &v) == 0 && v.len == 8)
        seq = (uint64_t)ks_int64_decode(v.data);
    seq++;
    unsigned char enc[8];
    ks_int64_encode((int64_t)seq, enc);
    ks_bytes sv = {enc, 8};
    if ((rc = ks_store_put(ob->meta, sk, sv)))
        return rc;
    for (int i = 0; i < 8; i++)
        snprintf(id + 2 * i, 3, "%02x", prefix[i]);
    snprintf(id + 16, 17, "%016llx", (unsigned long long)seq);
    return 0;
}

int ks_outbox_enqueue(ks_outbox *ob, const char *user, const char *topic, const char *key,
                      const void *payload, size_t payload_len, int held,
                      char id_out[KS_OUTBOX_ID_LEN + 1])
{
    size_t ulen = slen(user);
    if (!ob || ob->readonly || ulen == 0 || ulen > KS_OUTBOX_MAX_USER || !topic_ok(topic) ||
        (key && (!*key || strlen(key) > KS_KEY_MAX)) || (payload_len && !payload) || !id_out)
        return KS_ERR_INVALID;
    ks_outbox_event ev;
    memset(&ev, 0, sizeof ev);
    ev.status = held ? KS_OUTBOX_PREQUEUED : KS_OUTBOX_PENDING;
    /* borrowed for the encoding only: casts are safe, nothing is freed */
    ev.user = (char *)user;
    ev.topic = (char *)topic;
    ev.key = (char *)key;
    ev.payload = (void *)payload;
    ev.payload_len = payload_len;
    ev.partition = -1;
    ev.offset = -1;
    ev.created_ms = ev.updated_ms = ks_outbox_now_ms();
    pthread_mutex_lock(&ob->lock);
    int rc = txn_begin(ob);
    if (rc == 0 && (rc = next_id(ob, ev.id)) == 0 && (rc = store_row(ob, &ev)) == 0)
        ob->entering[ev.status]++;
    if (rc && rc != KS_ERR_STATE)
        snprintf(ob->err, sizeof ob->err, "%s", ks_store_last_error(ob->env));
    rc = txn_end(ob, rc, 1);
    pthread_mutex_unlock(&ob->lock);
    if (rc == 0)
        memcpy(id_out, ev.id, sizeof ev.id);
    return rc;
}

int ks_outbox_get(ks_outbox *ob, const char *id, ks_outbox_event *out)
{
    pthread_mutex_lock(&ob->lock);
    int rc = txn_begin(ob);
    if (rc == 0)
        rc = load_row(ob, id, out);
    rc = txn_end(ob, rc, 0);
    pthread_mutex_unlock(&ob->lock);
    return rc;
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

int ks_outbox_claim_pending(ks_outbox *ob, size_t max, ks_outbox_event **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!ob || ob->readonly || max == 0)
        return KS_ERR_INVALID;
    scan s = {.want = KS_OUTBOX_PENDING, .max = max};
    ks_outbox_event *evs = calloc(max, sizeof *evs);
    if (!evs)
        return KS_ERR_NOMEM;
    pthread_mutex_lock(&ob->lock);
    int rc = txn_begin(ob);
    if (rc == 0)
        rc = scan_active(ob, &s);
    int64_t now = ks_outbox_now_ms();
    size_t got = 0;
    for (size_t i = 0; rc == 0 && i < s.n; i++) {
        ks_outbox_event *ev = &evs[got];
        if ((rc = load_row(ob, s.ids[i], ev)))
            break;
        ev->attempts++;
        ev->claimed_ms = now;
        if ((rc = move(ob, ev, KS_OUTBOX_DISPATCHING)))
            break;
        got++;
    }
    rc = txn_end(ob, rc, 1);
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

int ks_outbox_stale(ks_outbox *ob, int64_t claimed_before_ms, size_t max,
                    ks_outbox_event **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!ob || max == 0)
        return KS_ERR_INVALID;
    /* scan for every DISPATCHING row, then keep the old ones */
    scan s = {.want = KS_OUTBOX_DISPATCHING, .max = max};
    ks_outbox_event *evs = calloc(max, sizeof *evs);
    if (!evs)
        return KS_ERR_NOMEM;
    pthread_mutex_lock(&ob->lock);
    int rc = txn_begin(ob);
    if (rc == 0)
        rc = scan_active(ob, &s);
    size_t got = 0;
    for (size_t i = 0; rc == 0 && i < s.n; i++) {
        if ((rc = load_row(ob, s.ids[i], &evs[got])))
            break;
        if (evs[got].claimed_ms < claimed_before_ms)
            got++;
        else
            ks_outbox_event_clear(&evs[got]);
    }
    rc = txn_end(ob, rc, 0);
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

int ks_outbox_meta_put(ks_outbox *ob, const char *key, const void *val, size_t len)
{
    if (!ob || ob->readonly || !key || strcmp(key, "prefix") == 0)
        return KS_ERR_INVALID; /* "prefix" is the id prefix: never rewritten */
    pthread_mutex_lock(&ob->lock);
    int rc = txn_begin(ob);
    if (rc == 0)
        rc = ks_store_put(ob->meta, (ks_bytes){key, strlen(key)}, (ks_bytes){val, len});
    rc = txn_end(ob, rc, 1);
    pthread_mutex_unlock(&ob->lock);
    return rc;
}

int ks_outbox_meta_get(ks_outbox *ob, const char *key, void *buf, size_t cap, size_t *len)
{
    if (!ob || !key)
        return KS_ERR_INVALID;
    ks_bytes v;
    pthread_mutex_lock(&ob->lock);
    int rc = txn_begin(ob);
    if (rc == 0 && (rc = ks_store_get(ob->meta, (ks_bytes){key, strlen(key)}, &v)) == 0) {
        memcpy(buf, v.data, v.len < cap ? v.len : cap);
        *len = v.len;
    }
    rc = txn_end(ob, rc, 0);
    pthread_mutex_unlock(&ob->lock);
    return rc;
}

static int count_cb(void *arg, ks_bytes key, ks_bytes value)
{
    (void)key;
    uint64_t *counts = arg;
    row_hdr h;
    if (value.len >= sizeof h) {
        memcpy(&h, value.data, sizeof h);
        if (h.status < KS_OUTBOX_STATUS_COUNT)
            counts[h.status]++;
    }
    return 0;
}

int ks_outbox_counts(ks_outbox *ob, uint64_t *counts)
{
    memset(counts, 0, KS_OUTBOX_STATUS_COUNT * sizeof *counts);
    pthread_mutex_lock(&ob->lock);
    int rc = txn_begin(ob);
    ks_bytes none = {NULL, 0};
    if (rc == 0)
        rc = ks_store_range(ob->events, none, none, count_cb, counts);
    rc = txn_end(ob, rc, 0);
    pthread_mutex_unlock(&ob->lock);
    return rc;
}

int ks_outbox_sizes(ks_outbox *ob, uint64_t *active, uint64_t *total,
                    uint64_t *entered)
{
    pthread_mutex_lock(&ob->lock);
    memcpy(entered, ob->entered, sizeof ob->entered);
    int rc = txn_begin(ob);
    if (rc == 0)
        rc = ks_store_count(ob->active, active);
    if (rc == 0)
        rc = ks_store_count(ob->events, total);
    rc = txn_end(ob, rc, 0);
    pthread_mutex_unlock(&ob->lock);
    return rc;
}

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
