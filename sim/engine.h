/*
 * engine.h — the state of one ramex-fleet run, shared by its two halves:
 * fleet.c (the machines, their workloads, estimators, strategies and
 * movers; the policies; the step loop and the figures) and exchange.c (the
 * simulated exchange: the spot market's book, the contracts as the
 * exchange and both agents see them, their deadlines, metering and
 * billing into the ledger). Types and constants only; fleet.c allocates
 * and frees the state, each half changes its own part and reads the other.
 */
#ifndef RAMEX_SIM_ENGINE_H
#define RAMEX_SIM_ENGINE_H

#include "common/units.h"
#include "exchange/core/book.h"
#include "exchange/core/contract.h"
#include "exchange/core/invoice.h"
#include "node-agent/core/strategy.h"
#include "node-agent/core/wsest.h"
#include "sim/fleet.h"
#include "sim/rng.h"
#include "sim/workload.h"

#include <stdint.h>

#define NS            INT64_C(1000000000)
#define ACCT_OPERATOR 1
#define ACCT_EXCHANGE 2
#define ACCT_NODE0    100
#define GRACE_NS      (INT64_C(3) * 86400 * NS)
/* 2027-01-04 00:00:00 UTC, a Monday: the simulated week starts there. */
#define T0_NS (INT64_C(1798934400) * NS)

/* ---- contracts as the exchange and the two agents see them ---- */

struct fl_contract {
	struct contract k;
	int seller, buyer;           /* machine index; buyer -1: the operator */
	rx_pages placed;             /* the seller's pages out for it now */
	rx_pages todo_out;           /* still to take out (delivery) */
	rx_pages todo_back;          /* still to bring back (after its end) */
	rx_pages data_in;            /* lend: the buyer's pages on the lender */
	rx_pages todo_in, todo_away; /* lend: to move there, and back */
	int recalled, released, closed, watched;
	int stranded; /* over with pages out not coming back: counted once */
	rx_time_ns moved_at; /* all moved: delivered (and moved in) */
	/* metering and billing */
	rx_pagesec ps, ps_reported;
	rx_time_ns metered_to; /* ps counts the delivery up to here */
	rx_time_ns reported_to;
	int64_t seq;
	int month_y, month_m;
	rx_pagesec month_ps, month_billed;
	struct invoice_contract ic;
};

struct fl_machine {
	int idx;
	int64_t account;
	/* Two streams: the workload's (the same under every policy, so all
	 * policies see the same fleet) and the kernel's sampling noise. */
	struct rng rng, noise;
	struct wl_params wp;
	struct wl_state ws;
	struct wl_now now;
	struct wl_step st;
	struct wsest_sample sample;
	struct wsest *est;
	struct wsest_estimate e;
	/* resident: pages the machine's workload can use; the movers keep
	 * it apart from offline and lent, so the sum is a check. */
	rx_pages installed, resident, offline, lent;
	rx_pages borrowed;
	rx_pages limit; /* tmo: what the workload may hold */
	double stall_s;
	struct strategy_quote quotes[STRATEGY_MAX_QUOTES];
	int nquotes;
	int *ks; /* contract indices where it is a party, oldest first */
	int nks, capks;
	int64_t report_seq;
	/* The contracts of ks it may have pages to move for, oldest first
	 * (the order its movers share their rates in): the movers look at
	 * these, not at every contract it ever had (sx_moving). */
	int *mv;
	int nmv, capmv;
	/* The contracts as the strategy sees them, rebuilt when one of them
	 * changes (dirty), not every step. */
	struct strategy_contract *sk;
	int nsk, capsk, dirty;
};

struct fleet {
	const struct fleet_config *c;
	struct fleet_result *r;
	struct fl_machine *m;
	int n;
	struct book *book;
	uint64_t next_order;
	struct fl_contract *k;
	int nk, capk;
	int *live; /* contracts not yet closed, oldest first */
	int nlive, caplive;
	int *watch; /* contracts with a deadline or an end to see to */
	int nwatch, capwatch;
	struct strategy_quote opq[4096];
	int nop, op_want;
	struct contract_market market;
	struct invoice_ledger ledger;
	int64_t movement_id;
	/* the events of the command being applied: a trade is at least a
	 * lot, so at most one a lot of the largest order, and a few more */
	struct book_event *ev;
	int nev, capev;
	rx_time_ns now;
	/* The strategy's actions, room for STRATEGY_MAX_ACTIONS (460 KiB):
	 * on the heap, once; thread-local, every thread of every step
	 * cleared it as it started. */
	struct strategy_action *acts;
	double *dur, *mv;
	int ndur;
};

#endif
