/*
 * outbox_status.h - the statuses of an outbox row and the ONE table of
 * allowed transitions (docs/outbox-and-mailbox.md, "The state machine").
 *
 *   PREQUEUED -> PENDING -> DISPATCHING -> PUBLISHED -> UNDER_PROCESSING
 *                   ^            |    \                      |
 *                   +------------+     +--> UNDER_PROCESSING  +-> SUCCESS
 *                   (retry/probe: absent)                     +-> PUSHED_FAILURE
 *   DISPATCHING -> FAILURE (retries exhausted)
 *
 * SUCCESS, PUSHED_FAILURE and FAILURE are terminal: nothing leaves them.
 * Every change of a row's status goes through ks_outbox_transition_allowed
 * (outbox.c checks it inside the LMDB write txn that performs the move, so
 * each move is a compare-and-set on the current status).
 */
#ifndef KS_OUTBOX_STATUS_H
#define KS_OUTBOX_STATUS_H

typedef enum ks_outbox_status {
    KS_OUTBOX_PREQUEUED = 0,        /* held until released to PENDING      */
    KS_OUTBOX_PENDING = 1,          /* waiting for the dispatcher           */
    KS_OUTBOX_DISPATCHING = 2,      /* claimed, produce in flight           */
    KS_OUTBOX_PUBLISHED = 3,        /* in the topic, not yet consumed       */
    KS_OUTBOX_UNDER_PROCESSING = 4, /* a consumer started the command       */
    KS_OUTBOX_SUCCESS = 5,          /* terminal: the handler succeeded      */
    KS_OUTBOX_PUSHED_FAILURE = 6,   /* terminal: the handler refused it     */
    KS_OUTBOX_FAILURE = 7           /* terminal: publication gave up        */
} ks_outbox_status;

#define KS_OUTBOX_STATUS_COUNT 8

/* Upper-case name ("PENDING"); "UNKNOWN" for a value out of range. Static
 * string, never freed. */
const char *ks_outbox_status_name(ks_outbox_status s);

/* Parse a name as returned by ks_outbox_status_name (exact, upper case).
 * 0 and *out, or -1 when unknown. */
int ks_outbox_status_parse(const char *name, ks_outbox_status *out);

/* Non-zero for SUCCESS, PUSHED_FAILURE and FAILURE. */
int ks_outbox_status_terminal(ks_outbox_status s);

/* Non-zero when a row may move from `from` to `to`. A status never moves
 * to itself (callers treat "already there" on their own terms, e.g.
 * mark_published accepting an advanced row). Out-of-range values: 0. */
int ks_outbox_transition_allowed(ks_outbox_status from, ks_outbox_status to);

/* Non-zero when `s` is at or beyond PUBLISHED on the success path
 * (PUBLISHED, UNDER_PROCESSING, SUCCESS, PUSHED_FAILURE): completing the
 * publication of such a row is a no-op, never a move backward. */
int ks_outbox_status_published_or_later(ks_outbox_status s);

#endif /* KS_OUTBOX_STATUS_H */
