/*
 * simload.h — the workload of a simulated machine: how many pages it uses
 * at time t, for the sim executor (node-agent/exec_sim.c) in the demo and
 * in tests.
 *
 *   steady   always `base` pages
 *   diurnal  a day's sine around `base` with amplitude `swing`, one day
 *            compressed into `period_s` seconds; `seed` shifts the phase
 *            so that machines do not peak together
 *   bursty   `base` pages, and in some of the `period_s`-long slots a
 *            burst of up to `swing` more pages for part of the slot; which
 *            slots, when and how high follow from `seed` alone, so a run
 *            is reproducible and two seeds give two different machines
 *
 * The result is always within 0..total. Pure: integer arithmetic only (the
 * sine is Bhaskara's rational approximation, within 0.2 % of the amplitude),
 * no clock, no state, so the same (config, t) always gives the same pages.
 */
#ifndef RAMEX_SIMLOAD_H
#define RAMEX_SIMLOAD_H

#include "common/units.h"

#include <stdint.h>

enum simload_kind { SIMLOAD_STEADY, SIMLOAD_DIURNAL, SIMLOAD_BURSTY };

struct simload_config {
	enum simload_kind kind;
	rx_pages total;   /* the machine's pages: the load never exceeds */
	rx_pages base;    /* steady level; diurnal mean; bursty quiet level */
	rx_pages swing;   /* diurnal amplitude; bursty highest burst */
	int64_t period_s; /* diurnal: one day; bursty: one slot */
	uint64_t seed;
};

/* The fraction of bursty slots that hold a burst, in percent. */
#define SIMLOAD_BURST_PCT 40

/* "steady", "diurnal" or "bursty"; returns 0, or -1 for anything else. */
int simload_kind_parse(const char *name, enum simload_kind *out);
const char *simload_kind_name(enum simload_kind k);

/* NULL when `c` is usable, or a reason a person can act on. */
const char *simload_check(const struct simload_config *c);

/* Pages the workload uses at time t (ns since the epoch); `c` must have
 * passed simload_check. */
rx_pages simload_pages(const struct simload_config *c, rx_time_ns t);

#endif
