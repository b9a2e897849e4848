/* The monotonic clock (see clock.h). */
#include "gbr-config.h"

#include "clock.h"

long long
clock_mono_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint64_t
clock_mono_ns(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

long long
clock_since_ms(const struct timespec *since)
{
	struct timespec	now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (long long)(now.tv_sec - since->tv_sec) * 1000 +
	    (now.tv_nsec - since->tv_nsec) / 1000000;
}
