/*
 * stall.h - notice a source partition that has a backlog but makes no
 * committed progress (a starved partition, a stuck task), so that it is
 * logged with its lag and exported as a metric instead of going unseen.
 */
#ifndef KS_STALL_H
#define KS_STALL_H

#include <stdint.h>

/* One partition's watch; zero-initialise it. */
typedef struct ks_stall {
    int64_t committed;     /* last committed offset seen (-1: none yet)   */
    int64_t since_ms;      /* when it last moved, or was caught up        */
    int64_t warned_ms;     /* last warning; 0: none in this stall          */
    int started;
} ks_stall;

/* Observe the partition at `now_ms`: its committed offset (-1 when
 * unknown) and its lag (records between its position and the end). The
 * watch restarts whenever the committed offset moves or the lag is 0.
 * Returns how long it has been stalled in ms (0 when it is not), and sets
 * *warn to 1 when that reached `limit_ms` and no warning was given for
 * `limit_ms` (so a long stall is logged once per limit), else 0. */
int64_t ks_stall_observe(ks_stall *s, int64_t committed, int64_t lag, int64_t now_ms,
                         int64_t limit_ms, int *warn);

#endif /* KS_STALL_H */
