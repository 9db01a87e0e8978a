/*
 * outbox_status.c - names and the transition table of outbox statuses.
 * The table below is the only place that says which moves exist; the
 * named operations of outbox.c and outbox_moves.c each perform one of
 * them.
 */
#include "outbox/outbox_status.h"

#include <string.h>

static const char *const NAMES[KS_OUTBOX_STATUS_COUNT] = {
    "PREQUEUED", "PENDING", "DISPATCHING", "PUBLISHED",
    "UNDER_PROCESSING", "SUCCESS", "PUSHED_FAILURE", "FAILURE"};

#define P KS_OUTBOX_PREQUEUED
#define N KS_OUTBOX_PENDING
#define D KS_OUTBOX_DISPATCHING
#define B KS_OUTBOX_PUBLISHED
#define U KS_OUTBOX_UNDER_PROCESSING
#define S KS_OUTBOX_SUCCESS
#define X KS_OUTBOX_PUSHED_FAILURE
#define F KS_OUTBOX_FAILURE

/* ALLOWED[from][to]. Why each row holds what it holds:
 *  PREQUEUED   -> PENDING (release)
 *  PENDING     -> DISPATCHING (claim)
 *  DISPATCHING -> PUBLISHED (delivery), PENDING (retry, or the stale probe
 *                 found nothing), FAILURE (retries exhausted),
 *                 UNDER_PROCESSING (a consumer was faster than the
 *                 delivery report)
 *  PUBLISHED   -> UNDER_PROCESSING (consumption starts)
 *  UNDER_PROCESSING -> SUCCESS, PUSHED_FAILURE (the handler's verdict)
 *  terminal rows move nowhere. */
static const unsigned char ALLOWED[KS_OUTBOX_STATUS_COUNT][KS_OUTBOX_STATUS_COUNT] = {
    /*        P  N  D  B  U  S  X  F */
    [P] = {0, 1, 0, 0, 0, 0, 0, 0},
    [N] = {0, 0, 1, 0, 0, 0, 0, 0},
    [D] = {0, 1, 0, 1, 1, 0, 0, 1},
    [B] = {0, 0, 0, 0, 1, 0, 0, 0},
    [U] = {0, 0, 0, 0, 0, 1, 1, 0},
    [S] = {0, 0, 0, 0, 0, 0, 0, 0},
    [X] = {0, 0, 0, 0, 0, 0, 0, 0},
    [F] = {0, 0, 0, 0, 0, 0, 0, 0},
};

static int valid(ks_outbox_status s)
{
    return (int)s >= 0 && (int)s < KS_OUTBOX_STATUS_COUNT;
}

const char *ks_outbox_status_name(ks_outbox_status s)
{
    return valid(s) ? NAMES[s] : "UNKNOWN";
}

int ks_outbox_status_parse(const char *name, ks_outbox_status *out)
{
    for (int i = 0; name && i < KS_OUTBOX_STATUS_COUNT; i++)
        if (strcmp(name, NAMES[i]) == 0) {
            *out = (ks_outbox_status)i;
            return 0;
        }
    return -1;
}

int ks_outbox_status_terminal(ks_outbox_status s)
{
    return s == S || s == X || s == F;
}

int ks_outbox_transition_allowed(ks_outbox_status from, ks_outbox_status to)
{
    return valid(from) && valid(to) && ALLOWED[from][to];
}

int ks_outbox_status_published_or_later(ks_outbox_status s)
{
    return s == B || s == U || s == S || s == X;
}
