/*
 * meter.h — page-seconds delivered per contract, integrated from the pages
 * an executor holds over time.
 *
 * The agent tells the meter each time the pages held for a contract change
 * (delivery, partial recall, an OOM give-back) and cuts a report period
 * whenever it reports. The pages are taken to be constant between two
 * observations, so the integral is exact as long as every change is
 * observed when it happens. The sum is kept in page-nanoseconds; a report
 * carries the whole page-seconds and the remainder is carried into the next
 * period (and written into the spool with the report, so a restart resumes
 * with it): the reports of a contract add up to floor(total / 1 s), and
 * only the last report of a contract drops less than one page-second.
 *
 * Pure: the caller passes every timestamp. Owns a fixed table of at most
 * METER_MAX_CONTRACTS contracts; no allocation after meter_new.
 */
#ifndef RAMEX_METER_H
#define RAMEX_METER_H

#include "common/units.h"

#include <stdint.h>

#define METER_MAX_CONTRACTS 8192 /* = STRATEGY_MAX_CONTRACTS */
#define METER_ID_LEN        48

struct meter_period {
	char contract[METER_ID_LEN];
	rx_time_ns start, end; /* [start, end) */
	rx_pagesec page_seconds;
	int64_t carry_pns; /* page-ns carried into the next period */
};

struct meter;

struct meter *meter_new(void);
void meter_free(struct meter *m);

/* Starts metering `id` at time t with `pages` held, carrying `carry_pns`
 * from an earlier period (0 for a new contract; a spool report's carry when
 * resuming after a restart). */
int meter_start(struct meter *m, const char *id, rx_time_ns t, rx_pages pages,
                int64_t carry_pns, const char **why);

/* The pages held for `id` are `pages` from time t on. */
int meter_set(struct meter *m, const char *id, rx_time_ns t, rx_pages pages,
              const char **why);

/* Closes the period ending at t into `out` and starts the next one. */
int meter_cut(struct meter *m, const char *id, rx_time_ns t,
              struct meter_period *out, const char **why);

/* The last cut for `id` at t; forgets the contract. */
int meter_stop(struct meter *m, const char *id, rx_time_ns t,
               struct meter_period *out, const char **why);

/* Puts back period p, which could not be kept (its report could not be
 * spooled): the contract's next cut starts at p->start again and holds
 * p's page-seconds too, so a period that was not written is reported
 * with the next one rather than lost. A contract p stopped is metered
 * again, with `pages` held from p->end on. */
int meter_uncut(struct meter *m, const struct meter_period *p, rx_pages pages,
                const char **why);
/* Pages held for `id` now, or -1 when it is not metered. */
rx_pages meter_pages(const struct meter *m, const char *id);
int meter_count(const struct meter *m);
/* The id of the i-th metered contract (0 <= i < meter_count). */
const char *meter_id(const struct meter *m, int i);

#endif
