/*
 * The monotonic clock, the one helper of the tree: durations, deadlines and
 * timeouts are measured with it, never with the wall clock (which jumps).
 */
#ifndef GBR_CLOCK_H
#define GBR_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Monotonic milliseconds and nanoseconds since an arbitrary start. */
long long	clock_mono_ms(void);
uint64_t	clock_mono_ns(void);
/* Milliseconds from *since (a CLOCK_MONOTONIC reading) to now. */
long long	clock_since_ms(const struct timespec *since);

#endif
