/*
 * billing_batch.h — one batch of the billing job (billing.c): the dirty
 * contracts it took, loaded from PostgreSQL with their billing state and
 * the month sums of their usage reports, and priced into movements by the
 * pure billing core (invoice_plan, invoice_charge, invoice_settle). What a
 * batch holds is what billing_store.h writes. Also the job's timing of
 * its phases and its error helper. Internal to the billing job; reads
 * PostgreSQL, writes nothing.
 */
#ifndef RAMEX_BILLING_BATCH_H
#define RAMEX_BILLING_BATCH_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "exchange/billing.h"
#include "exchange/core/contract.h"
#include "exchange/core/invoice.h"
#include "exchange/core/usage.h"

/* The phases of a run, timed on the monotonic clock and logged at the end
 * of every run (log level info), so that a slow run says where it spent
 * its time without a profiler (bench/46-billing.sh prints them). */
enum billing_phase {
	PH_TAKE,      /* BEGIN, take dirty contracts out of billing_dirty */
	PH_CONTRACTS, /* contract rows and billing state */
	PH_USAGE,     /* month sums of the reports, billed so far */
	PH_PRICE,     /* invoice_plan/charge/settle, in C */
	PH_INVOICES,  /* make and load the invoices the movements land on */
	PH_LEDGER,    /* movements, postings, invoice totals */
	PH_STATE,     /* billing_contracts, billing_months, later runs */
	PH_COMMIT,
	PH_FINALIZE, /* final invoices and the cents carry */
	PH_N
};

struct billing_phases {
	int64_t us[PH_N];
	int64_t batches;
	struct timespec at; /* the end of the last lap */
};

struct billing_month {
	int key; /* year * 12 + month - 1 */
	rx_pagesec seller, buyer;
	bool seller_rep, buyer_rep;
	rx_pagesec billed; /* billed for this month so far */
	bool touched;      /* billed_ps or the reconciliation changed */
	enum usage_recon_flag recon;
	bool offline;
};

struct billing_ctr {
	struct contract k;
	struct invoice_contract ic;
	struct billing_month *m;
	int nm, capm;
	bool changed; /* billing state to store */
	rx_price settle_price, spot_ref;
	bool has_settle;
	bool spans; /* its reports span more than one month */
	bool later; /* has reports for a later run (start >= as_of) */
	/* what its pricing added to the run's flagged and settled counts */
	int flagged, settled;
	/* left out of the batch after it was priced (an invoice its postings
	 * land on would overflow: billing_store_batch); queued again */
	bool refused;
};

struct billing_mv {
	struct invoice_movement m;
	int usage_key; /* -1: settlement */
	const char *recon;
};

struct billing_inv {
	int64_t account;
	int key;
	int64_t id;
	struct invoice inv;
	bool changed;
};

struct billing_batch {
	struct billing_ctr *c;
	int nc;
	struct billing_mv *mv;
	int nmv, capmv;
	struct billing_inv *inv;
	int ninv, capinv;
};

/* The phases' names for the run's log line, PH_N of them. */
extern const char *const billing_phase_name[];

void billing_lap_start(struct billing_phases *ph);
/* Adds the time since the last lap to phase p. */
void billing_lap(struct billing_phases *ph, enum billing_phase p);

/* A month as year * 12 + month - 1, the key months are sorted by. */
int billing_month_key(int year, int month);

void billing_batch_free(struct billing_batch *b);

/* The contracts ids (a PostgreSQL array literal) with their billing state
 * into b, sorted by id; 0, or -1 with err set. */
int billing_load_contracts(PGconn *db, const char *ids, int fee_bps,
                           struct billing_batch *b, char *err, size_t errlen);
/* The month sums of their usage reports up to as_of, and what each
 * month has billed so far; 0, or -1 with err set. */
int billing_load_usage(PGconn *db, const char *ids, rx_time_ns as_of,
                       struct billing_batch *b, char *err, size_t errlen);
/* What billing_price_contract answers besides 0. */
enum {
	BILLING_PRICE_FAILED = -1, /* the database or memory: the batch fails */
	/* the arithmetic refuses this contract (an amount past int64: the
	 * API's largest pages at its highest price); nothing of it is in b
	 * then, and the batch goes on without it */
	BILLING_PRICE_REFUSED = -2,
};
/* Prices what is new for contract c; appends its movements to b. 0, or
 * BILLING_PRICE_FAILED or BILLING_PRICE_REFUSED with err set. */
/* Forgets what pricing did to c (its state, months and settlement are not
 * stored) and takes its counts back out of res; its movements are the
 * caller's to drop. */
void billing_unprice(struct billing_ctr *c, struct billing_result *res);
int billing_price_contract(PGconn *db, struct billing_batch *b,
                           struct billing_ctr *c, rx_time_ns as_of,
                           rx_time_ns grace, int64_t exchange,
                           struct billing_result *res, char *err,
                           size_t errlen);

#endif
