/*
 * invoice.h — pure invoicing: a contract's usage priced into balanced
 * double-entry movements, the monthly invoice of each account, permanent-
 * offline settlement, the ledger check and the FOCUS-style CSV export.
 * docs/money.md is the rule book; this module and common/money are its
 * implementation.
 *
 * Data flows one way. The caller (ramexd's billing job) loads, per contract,
 * a struct invoice_contract (the contract's terms and its billing state: the
 * carries and what it has billed), asks invoice_plan what a month's usage
 * still owes and where it lands, and turns that into a movement with
 * invoice_charge (or invoice_settle for a finished perm contract). A
 * movement holds its postings — the buyer's debit, the seller's credit and
 * the exchange's fee — that always sum to zero. The caller stores the
 * postings (append-only: a correction is a new movement, never an update),
 * the updated invoice_contract and the invoice totals in one transaction.
 *
 * Sign: a posting's amount is positive for a debit (the account owes it)
 * and negative for a credit (the account is paid it). An invoice's total is
 * the sum of its account's postings in that month: positive means the
 * account pays, negative means it is paid.
 *
 * Pure: no clock (every call that needs one takes `now`), no I/O, no
 * globals, no allocation. Functions return 0 or -1 with a message in err.
 */
#ifndef RAMEX_INVOICE_H
#define RAMEX_INVOICE_H

#include "common/money.h"
#include "common/units.h"
#include "exchange/core/contract.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define INVOICE_MSG_MAX  200
#define INVOICE_POSTINGS 3 /* buyer, seller, exchange */
#define INVOICE_TEAM_MAX 64
#define INVOICE_CSV_MAX  1024 /* room for one CSV row */

enum invoice_kind {
	INVOICE_USAGE = 0,      /* usage in its own, still open month */
	INVOICE_ADJUSTMENT = 1, /* late usage of a month already final */
	INVOICE_SETTLEMENT = 2, /* perm true-up when the contract ends */
	INVOICE_CORRECTION = 3, /* reverses an earlier movement */
	INVOICE_KIND_COUNT_
};

enum invoice_role {
	INVOICE_BUYER = 0,
	INVOICE_SELLER = 1,
	INVOICE_EXCHANGE = 2,
};

/* A contract's terms and billing state; plain data, stored per contract. */
struct invoice_contract {
	int64_t contract_id;
	int64_t buyer, seller;
	enum contract_delivery delivery;
	rx_price price;
	int fee_bps; /* 0..10000: the exchange's share of each amount */
	/* state, advanced by invoice_charge / invoice_settle */
	struct money_carry amount_carry; /* den RX_SECONDS_PER_YEAR */
	struct money_carry fee_carry;    /* den MONEY_BPS_DENOM */
	rx_pagesec billed_ps;            /* page-seconds billed, all months */
	rx_ndollars billed;              /* the buyer's debits, all months */
	rx_ndollars fees;                /* the exchange's fees, all months */
	bool settled;                    /* a perm settlement was posted */
};

struct invoice_posting {
	int64_t movement_id;
	int64_t account;
	int64_t contract_id;
	int year, month; /* the invoice it lands on */
	enum invoice_role role;
	rx_ndollars amount; /* > 0 debit, < 0 credit */
};

/* One movement of money, and the line it makes on each party's invoice. */
struct invoice_movement {
	int64_t movement_id;
	int64_t contract_id;
	enum invoice_kind kind;
	int year, month;                     /* the invoice month it lands in */
	rx_time_ns charge_start, charge_end; /* the usage it charges for */
	rx_pagesec page_seconds;             /* the usage quantity */
	rx_price unit_price;                 /* n$/page-year */
	rx_ndollars amount;                  /* the buyer's debit */
	rx_ndollars fee;                     /* the exchange's part of it */
	int n;                               /* postings used: 2 or 3 */
	struct invoice_posting p[INVOICE_POSTINGS];
};

/* Where and how a month's usage bills, from invoice_plan. */
struct invoice_due {
	rx_pagesec ps;          /* still to bill (may be < 0: a correction) */
	enum invoice_kind kind; /* USAGE or ADJUSTMENT (CORRECTION if < 0) */
	int year, month;        /* the invoice it lands in */
};

enum invoice_status {
	INVOICE_DRAFT = 0, /* the month, or its grace period, is not over */
	INVOICE_FINAL = 1, /* immutable */
};

/* The invoice of one account for one calendar month. */
struct invoice {
	int64_t id;
	int64_t account;
	int year, month;
	enum invoice_status status;
	rx_ndollars total;            /* the sum of its postings, exact */
	int64_t lines;                /* postings on it */
	int64_t payable_cents;        /* set when final: see invoice_finalize */
	struct money_carry cents_in;  /* the account's carry before */
	struct money_carry cents_out; /* ... and after this invoice */
};

/*
 * Whether every contract of a market can be billed: one of at most
 * `max_pages` pages at at most `price_max`, running at most from `from` to
 * `until` (ns; a perm market's term end, a spot market's the end of the
 * exchange's time range), has page-seconds and an amount that fit the
 * int64 totals a contract keeps (struct invoice_contract: billed_ps,
 * billed), so invoice_charge and invoice_settle never refuse it. 0, or -1
 * with err saying the largest price_max allowed with this max_pages (and
 * the largest max_pages at this price_max).
 */
int invoice_market_check(rx_pages max_pages, rx_price price_max,
                         rx_time_ns from, rx_time_ns until, char *err,
                         size_t errlen);

/* Draft until the month's end plus `grace`, final from then on. */
enum invoice_status invoice_status_at(int year, int month, rx_time_ns now,
                                      rx_time_ns grace);

/* The month into which an amount for (year, month) goes at `now`: the month
 * itself while its invoice is a draft, else the earliest month after it
 * whose invoice is still a draft. */
void invoice_open_month(int year, int month, rx_time_ns now, rx_time_ns grace,
                        int *out_year, int *out_month);

/*
 * What a contract still owes for (year, month): `usage` is the month's
 * page-seconds as they stand now (for a lend contract, reconciled:
 * usage_reconcile), `billed_ps` what has already been billed for that month
 * (usage plus adjustments). The difference lands in the month itself while
 * it is a draft, else as an ADJUSTMENT (or CORRECTION, when it is negative)
 * in the next draft month. out->ps == 0: nothing to do.
 */
void invoice_plan(rx_pagesec usage, rx_pagesec billed_ps, int year, int month,
                  rx_time_ns now, rx_time_ns grace, struct invoice_due *out);

/*
 * Prices `due` for contract `c` with the carry rule, takes the fee with its
 * own carry, and fills `m` (movement_id from the caller) with the balanced
 * postings: buyer +amount, seller -(amount - fee), exchange -fee (only when
 * fee_bps > 0). Advances c only on success. Refused once c is settled.
 */
int invoice_charge(struct invoice_contract *c, const struct invoice_due *due,
                   rx_time_ns charge_start, rx_time_ns charge_end,
                   int64_t movement_id, int64_t exchange_account,
                   struct invoice_movement *m, char *err, size_t errlen);

/*
 * Settles a perm contract `k` that has ended or breached
 * (contract_rules settle == CONTRACT_SETTLE_TERM):
 *  - ENDED at (or, by the timer's tick, just after) its term end: the
 *    full price for its pages from delivery to term_end, whatever the
 *    reports said;
 *  - BREACHED: the delivered page-seconds (`delivered_ps`, all reports) at
 *    max(0, min(price, spot_reference) - breach_penalty).
 * The movement is the difference between that total and what c has billed
 * (a SETTLEMENT: usually a credit back to the buyer for a breach, a top-up
 * for an undercounted term), landing in the month the contract ended while
 * that invoice is a draft, else in the next draft month. Marks c
 * settled; may run again after late reports (it posts only the new
 * difference). *settle_price gets the price it settled at.
 */
int invoice_settle(struct invoice_contract *c, const struct contract *k,
                   rx_pagesec delivered_ps, rx_price spot_reference,
                   rx_time_ns now, rx_time_ns grace, int64_t movement_id,
                   int64_t exchange_account, rx_price *settle_price,
                   struct invoice_movement *m, char *err, size_t errlen);

/* Adds one posting to its account's draft invoice (same account and
 * month). Refused when the invoice is final: immutable. */
int invoice_add(struct invoice *inv, const struct invoice_posting *p, char *err,
                size_t errlen);

/*
 * Makes a draft final at `now` (refused before the month's end plus grace).
 * payable_cents = the whole cents of total, carrying the sub-cent part in
 * the account's `carry` (which becomes cents_out), so that over an account's
 * invoices the cents paid plus the last carry equal the exact total.
 */
int invoice_finalize(struct invoice *inv, struct money_carry *carry,
                     rx_time_ns now, rx_time_ns grace, char *err,
                     size_t errlen);

/*
 * The ledger check. Feed every posting in movement order; it proves that
 * each movement sums to zero (so the ledger does), and counts. Then, per
 * invoice, invoice_check_invoice proves the total equals its postings.
 */
struct invoice_ledger {
	int64_t movement; /* the movement being summed */
	__int128 movement_sum;
	__int128 total;
	int64_t movements, postings;
};

void invoice_ledger_init(struct invoice_ledger *l);
int invoice_ledger_add(struct invoice_ledger *l,
                       const struct invoice_posting *p, char *err,
                       size_t errlen);
int invoice_ledger_finish(struct invoice_ledger *l, char *err, size_t errlen);

/* `p[0..n)` must be all the postings of inv's account and month. */
int invoice_check_invoice(const struct invoice *inv,
                          const struct invoice_posting *p, size_t n, char *err,
                          size_t errlen);

/* ---- export: FOCUS-style CSV, one row per posting ---- */

/* The header row, with a newline. Length, or -1 when buf is too small. */
int invoice_csv_header(char *buf, size_t len);

/* One posting of movement m as a CSV row (newline included): billing and
 * charge periods in ISO 8601 UTC, the account and its team (quoted as CSV
 * needs), the contract as the resource, page-seconds as the usage quantity,
 * the unit price in dollars per page-year and the billed cost in dollars,
 * both exact to the nanodollar, the charge category and class. */
int invoice_csv_row(const struct invoice_movement *m, int posting,
                    const char *team, char *buf, size_t len);

const char *invoice_kind_name(enum invoice_kind k);
const char *invoice_role_name(enum invoice_role r);
const char *invoice_status_name(enum invoice_status s);

#endif
