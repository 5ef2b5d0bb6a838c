/*
 * clock.h — the time the programs' edges read: the monotonic clock for
 * deadlines, timeouts, latencies and spins (in nanoseconds or
 * milliseconds), and the wall clock for what is stamped with a date
 * (rx_time_ns, nanoseconds since the Unix epoch, common/units.h).
 *
 * The one copy of the helpers a dozen files each had. The pure cores
 * (exchange/core: the book, contracts, usage, invoices; node-agent/core:
 * the estimator, the strategy) read no clock and do not link this: their
 * callers pass the time in, which keeps them deterministic under test and
 * in the simulator.
 */
#ifndef RAMEX_CLOCK_H
#define RAMEX_CLOCK_H

#include <stdint.h>

#include "common/units.h"

/* CLOCK_MONOTONIC: never jumps, counts from an arbitrary start (boot). */
int64_t clock_mono_ns(void);
int64_t clock_mono_ms(void);
int64_t clock_mono_s(void);

/* CLOCK_REALTIME: the date; may jump when the clock is set. */
rx_time_ns clock_wall_ns(void);

#endif
