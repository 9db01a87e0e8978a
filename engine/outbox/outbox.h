/*
 * outbox.h - the durable outbox: intended events in their own LMDB
 * environment (<state_dir>/<application>/outbox), written before anything
 * is published, so accepting an event never depends on Kafka being up.
 *
 * Rows are keyed by event id: 32 lower-case hex digits, the outbox's
 * random 64-bit prefix (chosen when the environment is created) followed
 * by a 64-bit sequence number. Ids are unique across outboxes (the probe
 * of stale dispatches relies on it) and sort in enqueue order within one.
 *
 * Every status change is a named operation below; each one is a
 * compare-and-set on the current status, checked against the one table
 * in outbox_status.c, inside ONE LMDB write transaction that is committed
 * (durable) before the call returns.
 *
 * Threads: any thread may call any function; a mutex serialises them
 * because LMDB allows one writer per environment and a write transaction
 * may not span threads. Reads also run inside a (then aborted) write
 * transaction so that no read snapshot is shared between threads.
 */
#ifndef KS_OUTBOX_H
#define KS_OUTBOX_H

#include <stddef.h>
#include <stdint.h>

#include "outbox/outbox_status.h"
#include "state/store.h"

typedef struct ks_outbox ks_outbox;

#define KS_OUTBOX_ID_LEN 32     /* hex digits, without the NUL */
#define KS_OUTBOX_MAX_USER 200  /* bytes of a user id            */
#define KS_OUTBOX_MAX_TOPIC 249 /* Kafka's limit                 */

/* One row, as returned by get/claim/stale. Every pointer is owned by the
 * struct: free it with ks_outbox_event_clear (or ks_outbox_events_free for
 * arrays). key, last_error and result may be NULL. */
typedef struct ks_outbox_event {
    char id[KS_OUTBOX_ID_LEN + 1];
    ks_outbox_status status;
    char *user;  /* canonical user id: the Kafka key unless `key` is set */
    char *topic;
    char *key;   /* optional explicit key, NULL: the user id   */
    void *payload;
    size_t payload_len;
    char *last_error; /* why the last publication attempt failed */
    char *result;     /* the handler's result (mailbox)           */
    int32_t attempts; /* publication attempts so far               */
    int32_t partition; /* published to, -1 until known            */
    int64_t offset;    /* published at, -1 until known            */
    int64_t created_ms, updated_ms, claimed_ms; /* wall clock ms  */
} ks_outbox_event;

void ks_outbox_event_clear(ks_outbox_event *ev);
void ks_outbox_events_free(ks_outbox_event *evs, size_t n);

/*
 * A stored row (native byte order: the environment is local to one host):
 * this header, then user, topic, key, payload, last_error and result back
 * to back, their lengths in the header (key_len UINT32_MAX: no key).
 * Public for the decoder's tests; nothing else should need it.
 */
typedef struct ks_outbox_row_hdr {
    uint8_t version;
    uint8_t status;
    uint8_t pad[2];
    int32_t attempts;
    int32_t partition;
    uint32_t user_len, topic_len, key_len, error_len, result_len;
    uint64_t payload_len;
    int64_t offset;
    int64_t created_ms, updated_ms, claimed_ms;
} ks_outbox_row_hdr;

/* Encode ev as a row: a new malloc'd buffer of *len bytes owned by the
 * caller, or NULL when out of memory. */
void *ks_outbox_row_encode(const ks_outbox_event *ev, size_t *len);

/*
 * Decode the row stored under `id` (data, len: borrowed) into *ev, which
 * owns copies (clear it with ks_outbox_event_clear). The row is untrusted
 * (a damaged or hostile state directory): every length is checked against
 * the bytes left, without sums that could wrap, and the lengths must add
 * up to `len` exactly. 0; KS_ERR_INVALID with err "outbox event ID:
 * unreadable row: <which field>" and *ev zeroed; KS_ERR_NOMEM.
 */
int ks_outbox_row_decode(const char *id, const void *data, size_t len, ks_outbox_event *ev,
                         char *err, size_t errlen);

/*
 * Open (creating) the outbox environment in `dir` with a map of `map_size`
 * bytes (0: 1 GiB). 0 and *out, or a negative ks_err with err "DIR:
 * reason" (KS_ERR_STATE when this process has it open already).
 */
int ks_outbox_open(const char *dir, uint64_t map_size, ks_outbox **out, char *err,
                   size_t errlen);
/* Open an existing outbox read-only (for `kstreams outbox-status`): only
 * ks_outbox_get and ks_outbox_counts work on it. KS_ERR_NOT_FOUND when
 * there is no outbox in `dir`. */
int ks_outbox_open_readonly(const char *dir, ks_outbox **out, char *err,
                            size_t errlen);
void ks_outbox_close(ks_outbox *ob);

/* The environment, for partition_assign.c which keeps its mapping in the
 * same env under the same mutex (use ks_outbox_lock/unlock around it). */
ks_store_env *ks_outbox_env(ks_outbox *ob);
void ks_outbox_lock(ks_outbox *ob);
void ks_outbox_unlock(ks_outbox *ob);

/* One line on the last failure, valid until the next call on ob. */
const char *ks_outbox_last_error(const ks_outbox *ob);

/*
 * Add an event: PENDING, or PREQUEUED when `held`. `user` 1..200 bytes,
 * `topic` a topic name, `key` NULL or 1..500 bytes, payload copied. The row
 * is committed (fsync'ed) before the call returns; id_out gets its id.
 * 0, KS_ERR_INVALID (bad argument), KS_ERR_STORE_FULL, KS_ERR_IO.
 */
int ks_outbox_enqueue(ks_outbox *ob, const char *user, const char *topic,
                      const char *key, const void *payload, size_t payload_len,
                      int held, char id_out[KS_OUTBOX_ID_LEN + 1]);

/* Read a row into *out (caller clears it). 0, KS_ERR_NOT_FOUND,
 * KS_ERR_INVALID (not an id), KS_ERR_IO (the stored row is damaged:
 * ks_outbox_last_error names the event and the field). */
int ks_outbox_get(ks_outbox *ob, const char *id, ks_outbox_event *out);

/*
 * The named moves. Each returns 0 when the move happened, KS_ERR_NOT_FOUND
 * for an unknown id, KS_ERR_STATE when the row is not in a status the move
 * starts from (nothing is written; *was, when given, says where it is).
 */
/* PREQUEUED -> PENDING. */
int ks_outbox_release(ks_outbox *ob, const char *id);
/*
 * Claim up to `max` PENDING rows in enqueue order: PENDING -> DISPATCHING,
 * attempts + 1, claimed_ms = now, all in one txn. A row is skipped while
 * an earlier row of the same user is still PREQUEUED, PENDING-but-not-
 * claimed or DISPATCHING, so a user's events are published in order.
 * *out (caller frees with ks_outbox_events_free) gets the claimed rows.
 */
int ks_outbox_claim_pending(ks_outbox *ob, size_t max, ks_outbox_event **out,
                            size_t *n);
/* DISPATCHING -> PUBLISHED, recording partition/offset. A row already at
 * PUBLISHED or beyond on the success path (consumption was faster) is left
 * where it is and 0 is returned with *moved = 0: never a move backward.
 * `moved` may be NULL. */
int ks_outbox_mark_published(ks_outbox *ob, const char *id, int32_t partition,
                             int64_t offset, int *moved);
/* DISPATCHING -> FAILURE (terminal), keeping `reason`. */
int ks_outbox_mark_failed(ks_outbox *ob, const char *id, const char *reason);
/* DISPATCHING -> PENDING, keeping `reason` (retry, or the stale probe found
 * nothing). */
int ks_outbox_requeue(ks_outbox *ob, const char *id, const char *reason);
/* PUBLISHED or DISPATCHING -> UNDER_PROCESSING. */
int ks_outbox_start_processing(ks_outbox *ob, const char *id,
                               ks_outbox_status *was);
/* UNDER_PROCESSING -> SUCCESS (ok != 0) or PUSHED_FAILURE, keeping
 * `result` (may be NULL). */
int ks_outbox_finish(ks_outbox *ob, const char *id, int ok, const char *result,
                     ks_outbox_status *was);

/* DISPATCHING rows claimed before `claimed_before_ms`, in enqueue order, at
 * most `max`. *out freed by the caller with ks_outbox_events_free. */
int ks_outbox_stale(ks_outbox *ob, int64_t claimed_before_ms, size_t max,
                    ks_outbox_event **out, size_t *n);

/* Small bookkeeping values of the outbox's own threads (the dispatcher's
 * probe positions, the requests consumer's holder token), in the outbox
 * env's "meta" db. put: one committed txn; 0 or a KS_ERR_ code. get:
 * copies at most cap bytes into buf and sets *len to the stored length;
 * 0, KS_ERR_NOT_FOUND, or a KS_ERR_ code. */
int ks_outbox_meta_put(ks_outbox *ob, const char *key, const void *val, size_t len);
int ks_outbox_meta_get(ks_outbox *ob, const char *key, void *buf, size_t cap, size_t *len);

/* Number of rows per status (counts[KS_OUTBOX_STATUS_COUNT]): a scan of
 * every row. */
int ks_outbox_counts(ks_outbox *ob, uint64_t *counts);

/* For metrics, without a scan: rows not yet published (PREQUEUED,
 * PENDING, DISPATCHING: the "active" index), all rows, and how many rows
 * entered each status (entered[KS_OUTBOX_STATUS_COUNT]) in committed
 * transactions since this process opened the outbox. 0 or a KS_ERR_ code. */
int ks_outbox_sizes(ks_outbox *ob, uint64_t *active, uint64_t *total, uint64_t *entered);

/* ---- events from processors (api->outbox_enqueue) --------------------
 *
 * A processor's event travels as a request record through the Kafka topic
 * ks_outbox_requests_topic() inside the processor's transaction; the
 * outbox's requests consumer (outbox_requests.c) turns each into a row:
 * held (PREQUEUED) until the consumer's offset commit for the request is
 * known to have succeeded, then released to PENDING. A row whose request
 * was not committed is forgotten, since the request will be consumed
 * again (by this instance or the one that takes its partition). */

#define KS_OUTBOX_MAX_RANK 1024u /* events per input record */

/* The id of the `rank`-th event a processor hands the outbox while
 * processing the input record at topic/partition/offset: the same in
 * every process and on every replay. 0, or KS_ERR_INVALID (bad input,
 * rank >= KS_OUTBOX_MAX_RANK). */
int ks_outbox_derive_id(const char *application, const char *topic, int32_t partition,
                        int64_t offset, uint32_t rank, char id_out[KS_OUTBOX_ID_LEN + 1]);

/* One request record, borrowed. */
typedef struct ks_outbox_request {
    const char *id; /* KS_OUTBOX_ID_LEN hex digits */
    const char *user;
    const char *topic; /* where the event is published */
    const void *payload;
    size_t payload_len;
    int32_t partition; /* of the request record */
    int64_t offset;
} ks_outbox_request;

/* Add each request as a held PREQUEUED row remembering its request's
 * partition/offset, in one committed txn. An id already present (in any
 * status) is a replay and is left alone. *added counts new rows. 0,
 * KS_ERR_INVALID (a bad request: nothing written), KS_ERR_STORE_FULL,
 * KS_ERR_IO. */
int ks_outbox_hold_requests(ks_outbox *ob, const ks_outbox_request *reqs, size_t n,
                            size_t *added);

enum { KS_HELD_KEEP = 0, KS_HELD_RELEASE = 1, KS_HELD_FORGET = 2 };
/* What to do with a held row whose request is at partition/offset. */
typedef int (*ks_outbox_held_fate)(void *arg, int32_t partition, int64_t offset);

/* Ask `fate` about every held row and release (PREQUEUED -> PENDING) or
 * forget (delete) it, in one committed txn; counts in *released and
 * *forgotten. 0 or a negative ks_err (nothing changed). */
int ks_outbox_settle_held(ks_outbox *ob, ks_outbox_held_fate fate, void *arg,
                          size_t *released, size_t *forgotten);

/* Milliseconds since the epoch (wall clock). */
int64_t ks_outbox_now_ms(void);

#endif /* KS_OUTBOX_H */
