/*
 * clock.h - the two clocks of the engine: monotonic for deadlines and
 * durations (never jumps), wall for timestamps users see.
 */
#ifndef KS_BASE_CLOCK_H
#define KS_BASE_CLOCK_H

#include <stdint.h>

/* Milliseconds of CLOCK_MONOTONIC: for timeouts, intervals, rates. */
int64_t ks_mono_ms(void);

/* Milliseconds since the Unix epoch (CLOCK_REALTIME): for record
 * timestamps, status and crash reports. */
int64_t ks_wall_ms(void);

#endif /* KS_BASE_CLOCK_H */
