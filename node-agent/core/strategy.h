/*
 * strategy.h — what a node agent wants to do in the market, decided anew on
 * every estimate.
 *
 * Given the working-set estimate, the pages the agent manages, its open
 * quotes, its contracts and the top of the book, strategy_decide returns the
 * actions that bring the market position to what the node needs: keep a
 * safety margin above the working set, offer the rest on spot (and a share on
 * perm when the estimate is stable), and when the workload is short of memory
 * cancel offers (under PSI pressure asking for at least the margin or all the
 * refaults say may be missing, as the smoothed estimate lags a burst, and
 * four margins when the stall is so long that the refaults no longer bound
 * what is missing), recall sold contracts whole (spot first, then perm, which
 * breaches; the one that covers the shortfall with the least excess first)
 * and bid for the remainder, never past what it lacks at need plus what
 * was measured missing, counting the pages it holds and has borrowed. Prices are the marginal value of a page at the
 * size the node would keep plus the cost of moving it, within the operator's
 * floors and ceilings; when the best bid pays less than the page at the
 * margin is worth, the node keeps the pages worth more and offers only those
 * below the bid. A quote is replaced only when price or size moved past a
 * threshold, and spare memory is offered only once it exceeds a band
 * (min_offer, sell_band_pct) whose half stays kept, so noise in the estimate
 * neither sells small slices nor recalls them a minute later (the churn
 * ramex-fleet showed: docs/economics.md).
 *
 * Pure: no clock, no I/O, no allocation. Owns no state between calls: the
 * open quotes passed in are the memory that the hysteresis compares with.
 */
#ifndef RAMEX_STRATEGY_H
#define RAMEX_STRATEGY_H

#include "common/units.h"
#include "node-agent/core/wsest.h"

#include <stdint.h>

#define STRATEGY_MARKET_LEN 32
#define STRATEGY_MAX_QUOTES 32 /* open quotes an agent tracks */
/* Live contracts an agent holds: a 2 TiB machine sold whole in offers of
 * 256 MiB (ramex-fleet's agents' min_offer), or 32 TiB in the spot
 * market's 4 GiB orders. The agent's executor and meter hold as many
 * (EXEC_MAX_CONTRACTS, METER_MAX_CONTRACTS), and the strategy never
 * quotes more than the contracts left to hold can take (a trade is at
 * least one lot, so one contract a lot). */
#define STRATEGY_MAX_CONTRACTS 8192
/* Every quote cancelled, every contract recalled, plus two new quotes. */
#define STRATEGY_MAX_ACTIONS (STRATEGY_MAX_QUOTES + STRATEGY_MAX_CONTRACTS + 2)

/* PSI some past this share of the interval (ppm): the refaults are
 * bounded by the time the workload waited, not by the pages it misses, so
 * under pressure the strategy asks back four margins at least. */
#define STRATEGY_SATURATED_PPM 500000

enum strategy_product { STRATEGY_SPOT, STRATEGY_PERM, STRATEGY_NPRODUCTS };
enum strategy_side { STRATEGY_BUY, STRATEGY_SELL };
enum strategy_tif { STRATEGY_GTC, STRATEGY_IOC };

struct strategy_config {
	int margin_pct;      /* margin above wss + error, % of wss */
	rx_pages margin_min; /* ... and at least this many pages */
	rx_pages lot;        /* quotes are whole multiples of this */
	/* The spot market's largest order (0: no limit); the agent reads it
	 * from the exchange, so a quote is never one it would refuse. */
	rx_pages max_order;
	rx_price tick;      /* prices too: asks round up, bids down */
	int perm_share_pct; /* share of the spare offered on perm */
	char spot_market[STRATEGY_MARKET_LEN];
	char perm_market[STRATEGY_MARKET_LEN]; /* "" = never sell perm */
	rx_price spot_floor;                   /* never ask less */
	rx_price spot_ceiling; /* never ask more: pages worth more stay */
	rx_price perm_floor;
	rx_price perm_ceiling;
	rx_price bid_ceiling;  /* never bid more */
	int64_t stall_value;   /* n$ one second of workload stall costs */
	rx_ndollars move_cost; /* n$ to take one page out and back */
	int64_t hold_s;        /* move cost is spread over this holding */
	int perm_premium_pct;  /* perm is irrevocable: ask this much more */
	int requote_price_pct; /* replace a quote when its price is off by */
	int requote_qty_pct;   /* ... or its size by more than this */
	int breach_perm;       /* under pressure, recall perm pages too */
	/* Hysteresis between selling and recalling: spare memory is offered
	 * only once it exceeds the band, max(min_offer, sell_band_pct of the
	 * working set), and half the band stays kept above the need, so the
	 * working set must grow by half a band before a recall. */
	int sell_band_pct;
	rx_pages min_offer; /* no offer smaller: not worth moving */
};

struct strategy_quote { /* an open order of ours */
	uint64_t id;
	enum strategy_product product;
	enum strategy_side side;
	rx_pages pages; /* still open */
	rx_price price;
};

struct strategy_contract { /* a live contract of ours */
	uint64_t id;
	enum strategy_product product;
	enum strategy_side side; /* SELL: our pages are out; BUY: borrowed */
	rx_pages pages;
};

struct strategy_top { /* top of one market's book; 0 = empty side */
	rx_price best_bid, best_ask;
};

/* Pages still open in orders a person placed for this node (not ours):
 * they stand until a person cancels them. The strategy plans around them:
 * a person's bid covers part of a shortfall (we bid only for the rest), a
 * person's offer takes part of the spare (we offer only the rest). The
 * contracts they win are among `contracts`, like ours. */
struct strategy_others {
	rx_pages buy[STRATEGY_NPRODUCTS], sell[STRATEGY_NPRODUCTS];
};

struct strategy_input {
	const struct wsest_estimate *est;
	rx_pages total; /* pages the agent manages: machine or cgroup */
	const struct strategy_quote *quotes; /* ours only */
	int nquotes;
	struct strategy_others others;
	const struct strategy_contract *contracts;
	int ncontracts;
	struct strategy_top top[STRATEGY_NPRODUCTS];
};

enum strategy_kind {
	STRATEGY_PLACE,   /* side, product, pages, price, tif */
	STRATEGY_CANCEL,  /* id: a quote */
	STRATEGY_RECALL,  /* id, pages: take sold pages back (perm: breach) */
	STRATEGY_RELEASE, /* id: give borrowed pages back, ending it */
};

struct strategy_action {
	enum strategy_kind kind;
	uint64_t id;
	enum strategy_product product;
	enum strategy_side side;
	enum strategy_tif tif;
	rx_pages pages;
	rx_price price;
	const char *reason; /* for the log: why, in a few words */
};

/* The position the decision was made from, for logs and /metrics. */
struct strategy_view {
	rx_pages need; /* wss + error + margin */
	rx_pages kept; /* total − sold + borrowed */
	rx_pages sold, borrowed;
	rx_pages spare;                   /* kept − need, may be negative */
	/* Pages past the need kept because the estimate's curve values them
	 * above the best bid (0 when short or without a bid). */
	rx_pages valued;
	rx_price ask[STRATEGY_NPRODUCTS]; /* 0 = not offering */
	rx_price bid;                     /* 0 = not bidding */
	rx_pages others_buy, others_sell; /* open in people's orders */
	enum wsest_source source;         /* what `need` was measured from */
};

void strategy_config_default(struct strategy_config *c);

/* Returns NULL when `c` is usable, or a reason a person can act on. */
const char *strategy_config_check(const struct strategy_config *c);

/* Fills `out` (room for STRATEGY_MAX_ACTIONS) and returns the number of
 * actions, in the order they must run: cancels, recalls and releases
 * before new quotes. Returns -1 with *why set when the input is malformed
 * (too many quotes or contracts, negative pages). */
int strategy_decide(const struct strategy_config *c,
                    const struct strategy_input *in,
                    struct strategy_action out[STRATEGY_MAX_ACTIONS],
                    struct strategy_view *view, const char **why);

/* Price in n$/page-year of a page worth `value` stall-µs per page-year. */
rx_price strategy_price_of(const struct strategy_config *c, int64_t value);

#endif
