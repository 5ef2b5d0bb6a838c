/*
 * fleet.h — ramex-fleet's engine: N simulated machines for D simulated days
 * under one policy, driven through ramex's real pure cores (the agent's
 * estimator and strategy, the order book, the contract state machine,
 * usage checks and invoicing), in simulated time, deterministic from a seed.
 *
 * Owns the machines, the exchange's state (one spot market, its contracts,
 * the ledger) and the figures of one run. No wall clock, no I/O: main.c
 * prints, report.c formats.
 */
#ifndef RAMEX_SIM_FLEET_H
#define RAMEX_SIM_FLEET_H

#include "common/units.h"
#include "node-agent/core/strategy.h"
#include "sim/workload.h"

#include <stddef.h>
#include <stdint.h>

enum fleet_policy {
	FLEET_STATIC = 0, /* no market: every page stays on */
	FLEET_TMO,        /* each machine reclaims to a PSI target, alone */
	FLEET_MARKET,     /* ramex: wsest + strategy + book + contracts */
	FLEET_ORACLE,     /* ramex with the true working set */
	FLEET_NPOLICIES
};

/* Rates of moving capacity, pages per second (docs/economics.md). */
struct fleet_rates {
	double offline;    /* kmod: free pages taken offline */
	double online;     /* kmod: offline pages given back */
	double swap_write; /* pages holding data written out first */
	double lend_write; /* a buyer's pages moved to a lender */
	double lend_read;  /* ... and back from it */
};

/* One machine at the end of one step, for the invariant checks. */
struct fleet_probe {
	double t_s;
	int machine;
	rx_pages installed, resident, offline, lent, borrowed;
};

struct fleet_config {
	int machines;
	/* The fleet is machines first .. first + machines − 1 of the seed's
	 * fleet: each machine draws from its own stream, so a slice (one
	 * machine a run found, say) is the same machines as in the whole. */
	int first;
	double days;
	uint64_t seed;
	int64_t dt_s; /* one step: the agent's sample interval */
	enum fleet_policy policy;
	int threads;
	struct wl_costs costs;
	struct fleet_rates rates;
	double tmo_target; /* tmo: PSI some share it reclaims towards */
	/* The spot market (docs/operations.md's example market). */
	rx_price tick;
	rx_pages lot, max_order;
	int64_t notice_s, delivery_s;
	int fee_bps;
	rx_price operator_price; /* the operator's standing bid */
	int64_t report_s;        /* agents report usage this often */
	struct strategy_config strat;
	/* n$ a second of stall costs, per GiB of the machine: what the
	 * machine costs while it waits (0: the strategy's own default). */
	int64_t stall_value_per_gib;
	/* The estimator's PSI pressure threshold, ppm of time (0: its own
	 * default); pressure ends at a fifth of it. */
	int64_t pressure_ppm;
	int64_t chart_s; /* one timeline point every chart_s */
	/* Called for every machine after every step when set (tests). */
	void (*probe)(void *ctx, const struct fleet_probe *p);
	void *probe_ctx;
	/* Called after every simulated hour when set (main.c's progress
	 * lines): the share of the run's steps done, 0..1. */
	void (*progress)(void *ctx, double done);
	void *progress_ctx;
};

/* One point of the fleet's timeline, in pages. */
struct fleet_point {
	double t_s;
	double installed, ws, used, offline, lent;
};

struct fleet_result {
	enum fleet_policy policy;
	int machines;
	double days;
	/* time integrals, page-seconds (double: sums of many int64) */
	double installed_ps, offline_ps, lent_ps, idle_ps, ws_ps;
	double stall_s, machine_s, worst_stall_share;
	int worst_machine; /* its index in the seed's fleet */
	/* contracts */
	int64_t contracts, offline_contracts, lend_contracts;
	int64_t recalls, releases, breaches, late_deliveries;
	double dur_median_s, dur_p10_s, move_median_s;
	double ratio_median, ratio_p10; /* duration / moving time */
	double pages_moved;
	int64_t orders, cancels;
	/* money, nanodollars */
	rx_ndollars operator_spend, seller_revenue, buyer_spend, fees;
	__int128 ledger_sum;
	int64_t movements, postings, usage_reports, usage_refused;
	/* invariants broken (the checks count; 0 is right) */
	int64_t bad_balance, bad_billing, bad_core;
	int64_t refused; /* contract commands the state machine refused */
	int64_t recall_refused; /* recalls of contracts not yet delivered */
	/* Where the pages a machine keeps above its true working set go,
	 * summed over the decisions of agents (market, oracle): all of them
	 * (resident + borrowed − the truth), the estimate's bias (wss − the
	 * truth), its error bar, the margin, and the pages the curve values
	 * above the best bid; the rest is the band, lots and moves. */
	double decisions, above, bias, err, margin, valued;
	struct fleet_point *timeline;
	int npoints;
	double cpu_s; /* filled by the caller */
};

void fleet_config_default(struct fleet_config *c);

/* What running these policies one after the other costs, from the
 * engine's measured cost per machine-step and per machine-day (the
 * figures and how they were measured: sim/README.md, "What a run
 * costs"): the CPU time on one core, which is the wall time on a free
 * core, and the peak memory (one policy's state at a time, the largest).
 * Rough, within a factor of two; a size check before the work, not a
 * promise. */
struct fleet_cost {
	double cpu_s;
	double peak_bytes;
};
void fleet_cost_estimate(const struct fleet_config *c, const int *policies,
                         int npolicies, struct fleet_cost *out);

/* Runs one policy. Returns 0, or -1 with a reason in err. */
int fleet_run(const struct fleet_config *c, struct fleet_result *r, char *err,
              size_t errlen);
void fleet_result_free(struct fleet_result *r);

const char *fleet_policy_name(enum fleet_policy p);
int fleet_policy_parse(const char *s);

#endif
