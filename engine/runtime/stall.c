/*
 * stall.c - stalled partition watch (stall.h).
 */
#include "runtime/stall.h"

int64_t ks_stall_observe(ks_stall *s, int64_t committed, int64_t lag, int64_t now_ms,
                         int64_t limit_ms, int *warn)
{
    *warn = 0;
    if (!s->started || lag <= 0 || committed != s->committed) {
        s->started = 1;
        s->committed = committed;
        s->since_ms = now_ms;
        s->warned_ms = 0;
        return 0;
    }
    int64_t stalled = now_ms - s->since_ms;
    if (stalled >= limit_ms && (s->warned_ms == 0 || now_ms - s->warned_ms >= limit_ms)) {
        s->warned_ms = now_ms;
        *warn = 1;
    }
    return stalled;
}
