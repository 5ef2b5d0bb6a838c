/*
 * probe.h — active probing, Senpai/TMO-style: how much memory to take away
 * from the workload next (the agent writes it to the cgroup's
 * memory.reclaim), so that what it costs shows as refaults and stall: dy/dx
 * measured by moving dx.
 *
 * Owns the decision only, bounded by its cost: never a probe while PSI
 * `some` (the workload's own stall included) is at or over half the ceiling
 * or the estimator says pressure, and after such a sample none for
 * `backoff_samples`; a probe takes a share of the pages the estimate calls
 * cold (resident beyond working set + error), never working pages, and
 * with MGLRU never more than its generations know idle a window (what
 * reclaim takes first: past it the kernel ages to find more).
 *
 * Pure: no clock, no I/O, no globals.
 */
#ifndef RAMEX_PROBE_H
#define RAMEX_PROBE_H

#include "node-agent/core/wsest.h"

struct probe_config {
	int64_t ceiling_ppm; /* PSI some share probing must stay under */
	int step_pct;        /* share of the cold pages one probe takes */
	rx_pages step_min;   /* smaller probes are not worth a write */
	rx_pages step_max;   /* the most one probe takes */
	int backoff_samples; /* no probe for this many after pressure */
};

struct probe {
	int cooldown; /* samples left without probing */
};

/* 0.5 % ceiling, 10 % of the cold pages a probe, 1 MiB to 64 MiB, 10
 * samples of back-off. */
void probe_config_default(struct probe_config *c);

/* NULL when usable, or a reason a person can act on. */
const char *probe_config_check(const struct probe_config *c);

/* Pages to take away now (0: none), given the latest estimate. */
rx_pages probe_next(const struct probe_config *c, struct probe *p,
                    const struct wsest_estimate *e);

#endif
