/*
 * billing.h — ramexd's billing job: turns counted usage reports into
 * movements of balanced postings on the monthly invoices of the buyer, the
 * seller and (with a fee) the exchange, settles ended and breached perm
 * contracts, and makes invoices final once their month and grace period are
 * over. The arithmetic is exchange/core/invoice (docs/money.md); this module
 * loads its inputs from PostgreSQL and stores what it returns.
 *
 * Which contracts to look at is kept by the database itself: a trigger on
 * usage_reports (and on contracts reaching ended/breached) puts the contract
 * into billing_dirty, and a run takes contracts out of it in the same
 * transaction that bills them — a batch of contracts per transaction, every
 * contract wholly inside one — so a failed run leaves them for the next.
 * The job owns its own connection and thread; one run at a time per
 * database (a PostgreSQL advisory lock), so several ramexd may share one.
 * A run that billed something logs where its time went, phase by phase
 * ("billing run phases", level info; bench/46-billing.sh prints it).
 */
#ifndef RAMEX_BILLING_H
#define RAMEX_BILLING_H

#include <stddef.h>
#include <stdint.h>

#include "common/units.h"

#define BILLING_MSG_MAX 512

struct billing_opts {
	const char *conninfo;
	int interval_s;  /* 0: no thread, runs only on demand */
	int fee_bps;     /* the exchange's fee on new contracts, 0..10000 */
	int64_t grace_s; /* an invoice is final this long after its month */
	int batch;       /* contracts per transaction; 0 = 500 */
};

/* What one run did. */
struct billing_result {
	int64_t run_id;
	rx_time_ns as_of;  /* the instant it billed as of */
	int64_t contracts; /* contracts looked at */
	int64_t movements; /* movements posted (settlements included) */
	int64_t postings;
	int64_t settled;   /* perm settlements posted */
	int64_t finalized; /* invoices made final */
	int64_t flagged;   /* lend months whose two sides differ or where
	                      one side did not report */
	int64_t unbilled;  /* contracts the arithmetic refused (an amount
	                      past int64), or whose postings an invoice
	                      could not take (its total past int64), left
	                      queued and logged */
	int64_t elapsed_ms;
};

struct billing;

/* Starts the job (and its thread when interval_s > 0). The connection is
 * opened on the first run, so a database that is down now does not stop
 * ramexd from starting. NULL with err when out of memory or threads. */
struct billing *billing_start(const struct billing_opts *o, char *err,
                              size_t errlen);

/* Stops the thread (waiting for a run in progress) and frees the job. */
void billing_stop(struct billing *b);

/*
 * Runs the job once, now (as_of 0) or as of an instant in the past (for
 * backfills and tests; never earlier than the last run's, never in the
 * future). Waits for a run of the thread in progress. `api` records who
 * asked. Returns 0 with *out; -2 when the run is refused (as_of in the
 * future or before the last run's, another run holds the lock) and -1 when
 * it failed, both with err saying what to do; a run that fails part-way
 * keeps what its committed batches billed.
 */
int billing_run(struct billing *b, rx_time_ns as_of, int api,
                struct billing_result *out, char *err, size_t errlen);

#endif
