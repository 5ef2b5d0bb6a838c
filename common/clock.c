/* clock.c — see clock.h. */
#include "common/clock.h"

#include <time.h>

int64_t clock_mono_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

int64_t clock_mono_ms(void)
{
	return clock_mono_ns() / 1000000;
}

int64_t clock_mono_s(void)
{
	return clock_mono_ns() / 1000000000;
}

rx_time_ns clock_wall_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	return (rx_time_ns)t.tv_sec * 1000000000 + t.tv_nsec;
}
