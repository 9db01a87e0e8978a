/*
 * outbox.c - the durable outbox (see outbox.h): open and close, the
 * transactions under the lock, loading, storing and moving rows, enqueue
 * and the reads. The row encoding, status moves and scans, and held rows
 * are in outbox_codec.c, outbox_moves.c and outbox_held.c
 * (outbox_internal.h).
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

#include "outbox/outbox_internal.h"

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
int ks_outbox_txn_begin(ks_outbox *ob)
{
    if (ob->readonly)
        return 0;
    int rc = ks_store_begin(ob->env);
    if (rc)
        snprintf(ob->err, sizeof ob->err, "%s", ks_store_last_error(ob->env));
    return rc;
}

/* Commit when rc == 0 and `write`, else abort. Returns the final rc. */
int ks_outbox_txn_end(ks_outbox *ob, int rc, int write)
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

int ks_outbox_load_row(ks_outbox *ob, const char *id, ks_outbox_event *ev)
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
int ks_outbox_store_row(ks_outbox *ob, const ks_outbox_event *ev)
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
int ks_outbox_move(ks_outbox *ob, ks_outbox_event *ev, ks_outbox_status to)
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

/* ------------------------------------------------------------------ */
/* Enqueue and read                                                    */
/* ------------------------------------------------------------------ */

int ks_outbox_topic_ok(const char *t)
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
/* Meta, counts and sizes                                              */
/* ------------------------------------------------------------------ */

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
