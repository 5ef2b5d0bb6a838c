/*
 * test_strategy.c — the agent's market decisions on scripted markets.
 *
 * Each test builds the node's situation (estimate, contracts, open quotes,
 * top of book), runs one decision and checks every action it returns; the
 * scripted market replays a day in the life of one node, feeding each
 * decision's quotes back as the next step's open orders.
 */
#include "node-agent/core/strategy.h"

#include <check.h>
#include <string.h>

#define TOTAL 1048576 /* a 4 GiB node */

static struct strategy_config cfg;

static void setup(void)
{
	strategy_config_default(&cfg);
	strcpy(cfg.perm_market, "perm-2027");
	/* Most tests check sizes to the page: no selling band (see
	 * band_keeps_small_spares for it). */
	cfg.sell_band_pct = 0;
	cfg.min_offer = 0;
	/* Prices below are worked out at 1 µ$ a stall-second. */
	cfg.stall_value = 1000;
	ck_assert_ptr_null(strategy_config_check(&cfg));
}

/* A flat curve: every page worth `value` stall-µs per page-year. */
static struct wsest_estimate est(rx_pages wss, rx_pages err, int64_t value,
                                 int stable, int pressure)
{
	struct wsest_estimate e;
	memset(&e, 0, sizeof e);
	e.source = WSEST_IDLE;
	e.wss = wss;
	e.wss_err = err;
	e.resident = wss * 2;
	e.dydx = e.dydx_above = value;
	e.stable = stable;
	e.pressure = pressure;
	e.npoints = 1;
	e.curve[0].value = value;
	return e;
}

struct run {
	struct strategy_action a[STRATEGY_MAX_ACTIONS];
	struct strategy_view v;
	int n;
};

static struct run decide(const struct wsest_estimate *e,
                         const struct strategy_quote *q, int nq,
                         const struct strategy_contract *k, int nk,
                         rx_price best_bid, rx_price best_ask)
{
	struct run r;
	const char *why = NULL;
	struct strategy_input in = {.est = e,
	                            .total = TOTAL,
	                            .quotes = q,
	                            .nquotes = nq,
	                            .contracts = k,
	                            .ncontracts = nk};
	in.top[STRATEGY_SPOT].best_bid = best_bid;
	in.top[STRATEGY_SPOT].best_ask = best_ask;
	r.n = strategy_decide(&cfg, &in, r.a, &r.v, &why);
	ck_assert_msg(r.n >= 0, "decide: %s", why);
	return r;
}

START_TEST(offers_the_spare_on_spot)
{
	struct wsest_estimate e = est(200000, 10000, 10000000, 0, 0);
	struct run r = decide(&e, NULL, 0, NULL, 0, 0, 0);

	/* need = 200000 + 10000 + 10 % = 230000; spare 818576 → lots of 256 */
	ck_assert_int_eq(r.v.need, 230000);
	ck_assert_int_eq(r.v.spare, TOTAL - 230000);
	ck_assert_int_eq(r.n, 1);
	ck_assert_int_eq(r.a[0].kind, STRATEGY_PLACE);
	ck_assert_int_eq(r.a[0].side, STRATEGY_SELL);
	ck_assert_int_eq(r.a[0].product, STRATEGY_SPOT);
	ck_assert_int_eq(r.a[0].tif, STRATEGY_GTC);
	ck_assert_int_eq(r.a[0].pages, 818432);
	/* 10 s of stall a page-year at 1 µ$/s is 10000 n$, plus 365 n$ of
	 * moving cost, is under the 50000 floor. */
	ck_assert_int_eq(r.a[0].price, cfg.spot_floor);
	ck_assert_int_eq(r.v.source, WSEST_IDLE);

	/* The view names the source need came from, whichever it is. */
	e.source = WSEST_MGLRU;
	r = decide(&e, NULL, 0, NULL, 0, 0, 0);
	ck_assert_int_eq(r.v.source, WSEST_MGLRU);
	ck_assert_int_eq(r.v.need, 230000);
}
END_TEST

START_TEST(price_follows_marginal_value)
{
	/* 1000 s of stall per page-year: 1000000 n$ + 365 moving. */
	struct wsest_estimate e = est(200000, 10000, 1000000000, 1, 0);
	struct run r = decide(&e, NULL, 0, NULL, 0, 0, 0);

	ck_assert_int_eq(r.n, 2);
	ck_assert_int_eq(r.a[0].product, STRATEGY_SPOT);
	ck_assert_int_eq(r.a[0].price, 1000365);
	/* Stable: a quarter of the spare goes to perm at a 50 % premium. */
	ck_assert_int_eq(r.a[1].product, STRATEGY_PERM);
	ck_assert_int_eq(r.a[1].pages, 204544); /* 818432 / 4 in lots */
	ck_assert_int_eq(r.a[0].pages, 818432 - 204544);
	ck_assert_int_eq(r.a[1].price, 1500547);
	ck_assert_int_eq(r.v.ask[STRATEGY_PERM], 1500547);
}
END_TEST

START_TEST(prices_round_to_the_tick)
{
	struct wsest_estimate e = est(200000, 10000, 1000000000, 1, 0);
	cfg.tick = 1000;
	struct run r = decide(&e, NULL, 0, NULL, 0, 0, 0);
	ck_assert_int_eq(r.a[0].price, 1001000); /* asks round up */
	ck_assert_int_eq(r.a[1].price, 1501000);
	e = est(2000000, 10000, 1999999000, 0, 1);
	r = decide(&e, NULL, 0, NULL, 0, 0, 0);
	ck_assert_int_eq(r.a[0].side, STRATEGY_BUY);
	cfg.bid_ceiling = 5000000;
	r = decide(&e, NULL, 0, NULL, 0, 0, 0);
	ck_assert_int_eq(r.a[0].price, 1999000); /* bids round down */
}
END_TEST

START_TEST(ceiling_keeps_valuable_pages)
{
	struct wsest_estimate e = est(200000, 10000, 1000000000, 1, 0);
	cfg.spot_ceiling = 900000;
	cfg.perm_ceiling = 900000;
	struct run r = decide(&e, NULL, 0, NULL, 0, 0, 0);
	ck_assert_int_eq(r.n, 0);
	ck_assert_int_eq(r.v.ask[STRATEGY_SPOT], 0);
}
END_TEST

START_TEST(hysteresis_keeps_close_quotes)
{
	struct wsest_estimate e = est(200000, 10000, 1000000000, 0, 0);
	struct strategy_quote q = {.id = 7,
	                           .product = STRATEGY_SPOT,
	                           .side = STRATEGY_SELL,
	                           .pages = 818432,
	                           .price = 1000365};
	struct run r = decide(&e, &q, 1, NULL, 0, 0, 0);
	ck_assert_int_eq(r.n, 0);

	/* 3 % more working set, 4 % dearer pages: still inside the band. */
	e = est(206000, 10000, 1040000000, 0, 0);
	r = decide(&e, &q, 1, NULL, 0, 0, 0);
	ck_assert_int_eq(r.n, 0);

	/* 8 % dearer: cancel, then place at the new price. */
	e = est(200000, 10000, 1080000000, 0, 0);
	r = decide(&e, &q, 1, NULL, 0, 0, 0);
	ck_assert_int_eq(r.n, 2);
	ck_assert_int_eq(r.a[0].kind, STRATEGY_CANCEL);
	ck_assert_int_eq(r.a[0].id, 7);
	ck_assert_int_eq(r.a[1].kind, STRATEGY_PLACE);
	ck_assert_int_eq(r.a[1].price, 1080365);

	/* Working set doubles: the offer shrinks by more than 10 %. */
	e = est(400000, 10000, 1000000000, 0, 0);
	r = decide(&e, &q, 1, NULL, 0, 0, 0);
	ck_assert_int_eq(r.n, 2);
	ck_assert_int_eq(r.a[1].pages, (TOTAL - 450000) / 256 * 256);
}
END_TEST

START_TEST(pressure_recalls_spot_then_perm_then_bids)
{
	/* Sold 600000 of 1 M pages; the working set grew to 700000. */
	struct wsest_estimate e = est(700000, 20000, 2000000000, 0, 1);
	struct strategy_contract k[] = {
	    {.id = 1,
	     .product = STRATEGY_PERM,
	     .side = STRATEGY_SELL,
	     .pages = 400000},
	    {.id = 2,
	     .product = STRATEGY_SPOT,
	     .side = STRATEGY_SELL,
	     .pages = 150000},
	    {.id = 3,
	     .product = STRATEGY_SPOT,
	     .side = STRATEGY_SELL,
	     .pages = 50000},
	};
	struct strategy_quote q = {.id = 9,
	                           .product = STRATEGY_SPOT,
	                           .side = STRATEGY_SELL,
	                           .pages = 1000,
	                           .price = 60000};
	struct run r = decide(&e, &q, 1, k, 3, 0, 0);

	/* need 700000 + 20000 + 70000 = 790000; kept 448576; short 341424 */
	ck_assert_int_eq(r.v.spare, 448576 - 790000);
	ck_assert_int_eq(r.n, 4);
	ck_assert_int_eq(r.a[0].kind, STRATEGY_CANCEL);
	ck_assert_int_eq(r.a[0].id, 9);
	ck_assert_int_eq(r.a[1].kind, STRATEGY_RECALL);
	ck_assert_int_eq(r.a[1].id, 2);
	ck_assert_int_eq(r.a[1].pages, 150000);
	ck_assert_int_eq(r.a[2].id, 3);
	ck_assert_int_eq(r.a[2].pages, 50000);
	ck_assert_int_eq(r.a[3].kind, STRATEGY_RECALL);
	ck_assert_int_eq(r.a[3].id, 1);
	/* 141424 are missing, but the agent recalls whole contracts. */
	ck_assert_int_eq(r.a[3].pages, 400000);
	ck_assert(strstr(r.a[3].reason, "breach"));

	/* Not allowed to breach: bid for the rest instead. Value 2000000 n$
	 * less 365 moving is over the 1000000 ceiling; no ask to take, so the
	 * bid rests (GTC). */
	cfg.breach_perm = 0;
	r = decide(&e, NULL, 0, k, 3, 0, 0);
	ck_assert_int_eq(r.n, 3);
	ck_assert_int_eq(r.a[2].kind, STRATEGY_PLACE);
	ck_assert_int_eq(r.a[2].side, STRATEGY_BUY);
	ck_assert_int_eq(r.a[2].product, STRATEGY_SPOT);
	ck_assert_int_eq(r.a[2].pages, 141568); /* 141424 rounded up to lots */
	ck_assert_int_eq(r.a[2].price, cfg.bid_ceiling);
	ck_assert_int_eq(r.a[2].tif, STRATEGY_GTC);

	/* An ask under our bid is taken at its price, now. */
	r = decide(&e, NULL, 0, k, 3, 0, 700000);
	ck_assert_int_eq(r.a[2].price, 700000);
	ck_assert_int_eq(r.a[2].tif, STRATEGY_IOC);
}
END_TEST

/* PSI says the workload stalls although the estimate shows spare pages:
 * trust the stall and take back at least one lot: a whole contract. */
START_TEST(pressure_wins_over_the_estimate)
{
	struct wsest_estimate e = est(200000, 10000, 1000000000, 0, 1);
	struct strategy_contract k = {.id = 5,
	                              .product = STRATEGY_SPOT,
	                              .side = STRATEGY_SELL,
	                              .pages = 100000};
	struct run r = decide(&e, NULL, 0, &k, 1, 0, 0);
	ck_assert_int_eq(r.n, 1);
	ck_assert_int_eq(r.a[0].kind, STRATEGY_RECALL);
	ck_assert_int_eq(r.a[0].pages, 100000);
}
END_TEST

START_TEST(releases_borrowed_pages_when_spare)
{
	struct wsest_estimate e = est(200000, 10000, 10000000, 0, 0);
	struct strategy_contract k[] = {
	    {.id = 11,
	     .product = STRATEGY_SPOT,
	     .side = STRATEGY_BUY,
	     .pages = 50000},
	};
	struct strategy_quote q = {.id = 12,
	                           .product = STRATEGY_SPOT,
	                           .side = STRATEGY_BUY,
	                           .pages = 256,
	                           .price = 1000};
	struct run r = decide(&e, &q, 1, k, 1, 0, 0);
	ck_assert_int_eq(r.n, 3);
	ck_assert_int_eq(r.a[0].kind, STRATEGY_RELEASE);
	ck_assert_int_eq(r.a[0].id, 11);
	ck_assert_int_eq(r.a[1].kind, STRATEGY_CANCEL);
	ck_assert_int_eq(r.a[1].id, 12);
	ck_assert_int_eq(r.a[2].kind, STRATEGY_PLACE);
	ck_assert_int_eq(r.a[2].pages,
	                 (TOTAL + 50000 - 230000 - 50000) / 256 * 256);
}
END_TEST

/* A person's orders for the node are not ours to converge: they are not
 * among the quotes, so never cancelled, and what they ask for or offer is
 * taken off what the agent bids for or offers. */
START_TEST(plans_around_peoples_orders)
{
	const char *why = NULL;
	struct run r;
	/* spare: the agent offers the spare less a person's 100000-page
	 * offer on perm */
	struct wsest_estimate e = est(200000, 10000, 10000000, 0, 0);
	struct strategy_input in = {.est = &e, .total = TOTAL};
	in.others.sell[STRATEGY_PERM] = 100000;
	r.n = strategy_decide(&cfg, &in, r.a, &r.v, &why);
	ck_assert_int_eq(r.n, 1);
	ck_assert_int_eq(r.v.others_sell, 100000);
	ck_assert_int_eq(r.a[0].kind, STRATEGY_PLACE);
	ck_assert_int_eq(r.a[0].pages,
	                 (TOTAL - 230000 - 100000) / 256 * 256);
	/* a person offers more than the spare: the agent offers nothing */
	in.others.sell[STRATEGY_PERM] = TOTAL;
	r.n = strategy_decide(&cfg, &in, r.a, &r.v, &why);
	ck_assert_int_eq(r.n, 0);

	/* short by 341424 with nothing to recall: a person's 100000-page
	 * bid covers part, the agent bids for the rest */
	cfg.breach_perm = 0;
	struct wsest_estimate p = est(700000, 20000, 2000000000, 0, 1);
	struct strategy_input s = {.est = &p, .total = 448576};
	s.others.buy[STRATEGY_SPOT] = 100000;
	r.n = strategy_decide(&cfg, &s, r.a, &r.v, &why);
	ck_assert_int_eq(r.n, 1);
	ck_assert_int_eq(r.a[0].kind, STRATEGY_PLACE);
	ck_assert_int_eq(r.a[0].side, STRATEGY_BUY);
	ck_assert_int_eq(r.a[0].pages, (341424 - 100000 + 255) / 256 * 256);
	/* the person bids for all of it: the agent bids for nothing */
	s.others.buy[STRATEGY_SPOT] = 341424;
	r.n = strategy_decide(&cfg, &s, r.a, &r.v, &why);
	ck_assert_int_eq(r.n, 0);
	/* negative pages are refused */
	s.others.buy[STRATEGY_SPOT] = -1;
	ck_assert_int_eq(strategy_decide(&cfg, &s, r.a, &r.v, &why), -1);
}
END_TEST

START_TEST(no_estimate_no_action)
{
	struct wsest_estimate e;
	memset(&e, 0, sizeof e);
	struct run r = decide(&e, NULL, 0, NULL, 0, 0, 0);
	ck_assert_int_eq(r.n, 0);
}
END_TEST

START_TEST(malformed_input)
{
	struct wsest_estimate e = est(1000, 10, 1, 0, 0);
	struct strategy_contract k = {.id = 1, .pages = 0};
	struct strategy_action a[STRATEGY_MAX_ACTIONS];
	struct strategy_view v;
	const char *why = NULL;
	struct strategy_input in = {
	    .est = &e, .total = TOTAL, .contracts = &k, .ncontracts = 1};

	ck_assert_int_eq(strategy_decide(&cfg, &in, a, &v, &why), -1);
	ck_assert_str_eq(why, "a contract with no pages");
	in.ncontracts = STRATEGY_MAX_CONTRACTS + 1;
	ck_assert_int_eq(strategy_decide(&cfg, &in, a, &v, &why), -1);
	cfg.spot_floor = cfg.spot_ceiling + 1;
	ck_assert_ptr_nonnull(strategy_config_check(&cfg));
}
END_TEST

/* A node of a large machine holds up to STRATEGY_MAX_CONTRACTS contracts
 * (ramex-fleet used to hand the strategy only the oldest 256). At the
 * limit it still decides, and recalls, but quotes nothing that could fill
 * into one contract more than it can hold: a trade is at least a lot. */
START_TEST(contracts_up_to_the_limit)
{
	enum { N = STRATEGY_MAX_CONTRACTS };
	static struct strategy_contract k[N + 1];
	static struct strategy_action a[STRATEGY_MAX_ACTIONS];
	struct strategy_view v;
	const char *why = NULL;
	rx_pages total = (rx_pages)N * 1024 + 4 * TOTAL;

	for (int i = 0; i <= N; i++)
		k[i] = (struct strategy_contract){.id = (uint64_t)i + 1,
		                                  .product = STRATEGY_SPOT,
		                                  .side = STRATEGY_SELL,
		                                  .pages = 1024};
	k[N - 1].pages = 50000; /* the one that fits a shortfall of 40000 */
	struct wsest_estimate e = est(200000, 10000, 10000000, 0, 0);
	struct strategy_input in = {
	    .est = &e, .total = total, .contracts = k, .ncontracts = N};

	/* At the limit: a spare of millions of pages, and no offer. */
	int n = strategy_decide(&cfg, &in, a, &v, &why);
	ck_assert_int_eq(n, 0);
	ck_assert_int_gt(v.spare, 1000000);
	/* Ten contracts short of it: at most ten lots, less the room a
	 * kept quote may take above the one wanted (10 %), in lots. */
	in.ncontracts = N - 10;
	n = strategy_decide(&cfg, &in, a, &v, &why);
	ck_assert_int_eq(n, 1);
	ck_assert_int_eq(a[0].kind, STRATEGY_PLACE);
	ck_assert_int_eq(a[0].pages, 2304); /* 2560 * 100 / 110, in lots */
	/* One more than it can hold is malformed input. */
	in.ncontracts = N + 1;
	ck_assert_int_eq(strategy_decide(&cfg, &in, a, &v, &why), -1);
	ck_assert_str_eq(why,
	                 "too many open quotes or contracts for one agent");
	/* At the limit and short: the contract that fits, found among all
	 * of them (the last but one), and no bid it could not hold. */
	in.ncontracts = N;
	rx_pages kept = total - (rx_pages)(N - 1) * 1024 - 50000;
	e.wss = (kept + 40000) * 10 / 11; /* need = wss + 10 % */
	e.wss_err = 0;
	n = strategy_decide(&cfg, &in, a, &v, &why);
	ck_assert_int_ge(n, 1);
	ck_assert_int_lt(v.spare, -39990);
	ck_assert_int_gt(v.spare, -40010);
	ck_assert_int_eq(a[0].kind, STRATEGY_RECALL);
	ck_assert_int_eq(a[0].id, N);
	for (int i = 0; i < n; i++)
		ck_assert_int_ne(a[i].kind, STRATEGY_PLACE);
}
END_TEST

/* Applies a decision to the node's open quotes, as the exchange would. */
static int apply(const struct run *r, struct strategy_quote *q, int nq,
                 uint64_t *next_id)
{
	for (int i = 0; i < r->n; i++) {
		const struct strategy_action *a = &r->a[i];
		if (a->kind == STRATEGY_CANCEL) {
			for (int j = 0; j < nq; j++)
				if (q[j].id == a->id)
					q[j--] = q[--nq];
		} else if (a->kind == STRATEGY_PLACE &&
		           a->tif == STRATEGY_GTC) {
			q[nq++] = (struct strategy_quote){.id = (*next_id)++,
			                                  .product = a->product,
			                                  .side = a->side,
			                                  .pages = a->pages,
			                                  .price = a->price};
		}
	}
	return nq;
}

/* A day in the market: offer, a partial fill, noise, growth, pressure,
 * calm again. Counts the orders the node sends: noise must cost none. */
START_TEST(scripted_day)
{
	struct strategy_quote q[STRATEGY_MAX_QUOTES] = {0};
	struct strategy_contract k[4] = {0};
	int nq = 0, nk = 0, sent = 0;
	uint64_t next_id = 100;
	struct wsest_estimate e;
	struct run r;

	/* 1. first estimate: offer everything spare on spot */
	e = est(200000, 10000, 1000000000, 0, 0);
	r = decide(&e, q, nq, k, nk, 0, 0);
	sent += r.n;
	nq = apply(&r, q, nq, &next_id);
	ck_assert_int_eq(nq, 1);

	/* 2. the operator buys 300000 pages of it: a contract, the rest of the
	 * quote stays open. The remaining spare matches it: no new orders. */
	k[nk++] = (struct strategy_contract){.id = 1,
	                                     .product = STRATEGY_SPOT,
	                                     .side = STRATEGY_SELL,
	                                     .pages = 300000};
	q[0].pages -= 300000;
	r = decide(&e, q, nq, k, nk, 0, 0);
	ck_assert_int_eq(r.n, 0);

	/* 3. ten estimates of noise (±1 %) send nothing */
	for (int i = 0; i < 10; i++) {
		e = est(200000 + (i % 2 ? 2000 : -2000), 10000,
		        1000000000 + (i % 3) * 10000000, 0, 0);
		r = decide(&e, q, nq, k, nk, 0, 0);
		ck_assert_int_eq(r.n, 0);
	}

	/* 4. the working set grows to 500000: the offer shrinks */
	e = est(500000, 10000, 1000000000, 0, 0);
	e.resident = 600000; /* under the 748576 kept: nothing to write out */
	r = decide(&e, q, nq, k, nk, 0, 0);
	ck_assert_int_eq(r.n, 2);
	sent += r.n;
	nq = apply(&r, q, nq, &next_id);
	ck_assert_int_eq(q[0].pages, (TOTAL - 300000 - 560000) / 256 * 256);

	/* 5. it grows to 800000 with stalls: need 890000, kept 748576;
	 * cancel the offer, recall what is missing from the spot contract */
	e = est(800000, 10000, 2000000000, 0, 1);
	r = decide(&e, q, nq, k, nk, 0, 0);
	ck_assert_int_eq(r.a[0].kind, STRATEGY_CANCEL);
	ck_assert_int_eq(r.a[1].kind, STRATEGY_RECALL);
	ck_assert_int_eq(r.a[1].pages, 300000); /* the whole contract */
	ck_assert_int_eq(r.n, 2);
	sent += r.n;
	nq = apply(&r, q, nq, &next_id);
	nk = 0;
	ck_assert_int_eq(nq, 0);

	/* 6. calm again at 300000: offer again */
	e = est(300000, 10000, 1000000000, 1, 0);
	r = decide(&e, q, nq, k, nk, 0, 0);
	ck_assert_int_eq(r.n, 2); /* spot and perm */
	sent += r.n;
	ck_assert_int_eq(sent, 1 + 2 + 2 + 2);
}
END_TEST

/* Hysteresis against churn (ramex-fleet saw agents sell a few MiB and
 * recall a whole contract a minute later): a spare under the band is not
 * offered, and half the band stays kept. */
START_TEST(band_keeps_small_spares)
{
	strategy_config_default(&cfg);
	cfg.stall_value = 1000;
	struct wsest_estimate e = est(200000, 10000, 10000000, 0, 0);
	struct run r = decide(&e, NULL, 0, NULL, 0, 0, 0);
	/* band = max(5 % of 200000, 4096) = 10000: keep 5000 of it */
	ck_assert_int_eq(r.n, 1);
	ck_assert_int_eq(r.a[0].pages, (TOTAL - 230000 - 5000) / 256 * 256);

	/* Sold all but 8000 spare pages: under the band, nothing to do. */
	struct strategy_contract k = {.id = 1,
	                              .product = STRATEGY_SPOT,
	                              .side = STRATEGY_SELL,
	                              .pages = TOTAL - 230000 - 8000};
	r = decide(&e, NULL, 0, &k, 1, 0, 0);
	ck_assert_int_eq(r.v.spare, 8000);
	ck_assert_int_eq(r.n, 0);

	/* A small machine: the least band is min_offer. */
	e = est(20000, 1000, 10000000, 0, 0);
	k.pages = TOTAL - 20000 - 1000 - 16384 - 4000;
	r = decide(&e, NULL, 0, &k, 1, 0, 0);
	ck_assert_int_eq(r.v.spare, 4000);
	ck_assert_int_eq(r.n, 0);
}
END_TEST

/* The operator bids 100000 n$; the pages just above the need are worth
 * 1000000 n$ to us: keep them, and offer only those below the bid. */
START_TEST(sells_down_the_curve)
{
	struct wsest_estimate e = est(200000, 10000, 1000000000, 0, 0);
	e.resident = 600000;
	e.npoints = 2;
	e.curve[1].size = 300000;
	e.curve[1].value = 1000000; /* 1000 n$ a page-year */
	struct run r = decide(&e, NULL, 0, NULL, 0, 100000, 0);
	ck_assert_int_eq(r.n, 1);
	ck_assert_int_eq(r.a[0].pages, (TOTAL - 300000) / 256 * 256);
	ck_assert_int_eq(r.a[0].price, cfg.spot_floor);
	/* kept past the need (230000) for their value: up to 300000 */
	ck_assert_int_eq(r.v.valued, 70000);

	/* Every resident page is dear, but what the workload does not hold
	 * (and does not fault for) is worth nothing: offer that. */
	e = est(200000, 10000, 1000000000, 0, 0);
	e.resident = 400000;
	r = decide(&e, NULL, 0, NULL, 0, 100000, 0);
	ck_assert_int_eq(r.n, 1);
	ck_assert_int_eq(r.a[0].pages, (TOTAL - 400000) / 256 * 256);
	ck_assert_int_eq(r.a[0].price, cfg.spot_floor);
	ck_assert_int_eq(r.v.valued, 170000);

	/* No bid in the book: offer from the need at its value. */
	r = decide(&e, NULL, 0, NULL, 0, 0, 0);
	ck_assert_int_eq(r.a[0].pages, (TOTAL - 230000) / 256 * 256);
	ck_assert_int_eq(r.a[0].price, 1000365);
	ck_assert_int_eq(r.v.valued, 0);
}
END_TEST

/* The agent recalls whole contracts: cover 50000 missing pages with the
 * 60000-page contract, not by recalling the 300000-page one. */
START_TEST(recall_takes_the_contract_that_fits)
{
	struct wsest_estimate e = est(200000, 10000, 1000000000, 0, 0);
	struct strategy_contract k[] = {
	    {.id = 1, .product = STRATEGY_SPOT, .side = STRATEGY_SELL,
	     .pages = 300000},
	    {.id = 2, .product = STRATEGY_SPOT, .side = STRATEGY_SELL,
	     .pages = 60000},
	    {.id = 3, .product = STRATEGY_SPOT, .side = STRATEGY_SELL,
	     .pages = 20000},
	};
	/* kept = TOTAL - 380000 = 668576; need = 718576 */
	e.wss = 200000 + 453251;
	e.wss_err = 0;
	struct run r = decide(&e, NULL, 0, k, 3, 0, 0);
	ck_assert_int_eq(r.v.spare, -50000);
	ck_assert_int_eq(r.n, 1);
	ck_assert_int_eq(r.a[0].kind, STRATEGY_RECALL);
	ck_assert_int_eq(r.a[0].id, 2);
	ck_assert_int_eq(r.a[0].pages, 60000);
}
END_TEST

/* Sold pages still hold the workload's data (it holds more than the node
 * keeps): they are being written out; sell nothing more until they are. */
START_TEST(no_offer_while_data_waits)
{
	struct wsest_estimate e = est(100000, 0, 1000, 0, 0);
	e.resident = 400000;
	struct strategy_contract k = {.id = 1,
	                              .product = STRATEGY_SPOT,
	                              .side = STRATEGY_SELL,
	                              .pages = TOTAL - 350000};
	struct run r = decide(&e, NULL, 0, &k, 1, 0, 0);
	ck_assert_int_gt(r.v.spare, 200000);
	ck_assert_int_eq(r.n, 0);
	e.resident = 300000; /* written out: 50000 free again */
	r = decide(&e, NULL, 0, &k, 1, 0, 0);
	ck_assert_int_eq(r.n, 1);
	ck_assert_int_eq(r.a[0].kind, STRATEGY_PLACE);
}
END_TEST

/* PSI pressure while the refaults say 100000 working-set pages are
 * missing: the smoothed estimate lags the burst, so take back what the
 * refaults bound (2 x 100000), not one lot a step. */
START_TEST(pressure_takes_back_what_refaults_bound)
{
	struct wsest_estimate e = est(200000, 10000, 1000000000, 0, 1);
	e.deficit = 100000;
	struct strategy_contract k[] = {
	    {.id = 1, .product = STRATEGY_SPOT, .side = STRATEGY_SELL,
	     .pages = 150000},
	    {.id = 2, .product = STRATEGY_SPOT, .side = STRATEGY_SELL,
	     .pages = 300000},
	};
	struct run r = decide(&e, NULL, 0, k, 2, 0, 0);
	ck_assert_int_gt(r.v.spare, 0);
	ck_assert_int_eq(r.n, 1);
	ck_assert_int_eq(r.a[0].kind, STRATEGY_RECALL);
	ck_assert_int_eq(r.a[0].id, 2);
	/* Without refaults the margin (10 % of 200000) is what it asks. */
	e.deficit = 0;
	r = decide(&e, NULL, 0, k, 2, 0, 0);
	ck_assert_int_eq(r.a[0].id, 1);
}
END_TEST

/* Stalled most of the interval, the refaults bound only the time it
 * waited (deficit 1000 here, for a burst of far more): ask back four
 * margins (4 x 20000), not the one margin the refaults would give. */
START_TEST(saturated_stall_takes_back_four_margins)
{
	struct wsest_estimate e = est(200000, 10000, 1000000000, 0, 1);
	e.deficit = 1000;
	e.stall_ppm = 600000;
	struct strategy_contract k[] = {
	    {.id = 1, .product = STRATEGY_SPOT, .side = STRATEGY_SELL,
	     .pages = 50000},
	    {.id = 2, .product = STRATEGY_SPOT, .side = STRATEGY_SELL,
	     .pages = 90000},
	    {.id = 3, .product = STRATEGY_SPOT, .side = STRATEGY_SELL,
	     .pages = 300000},
	};
	struct run r = decide(&e, NULL, 0, k, 3, 0, 0);
	ck_assert_int_gt(r.v.spare, 0);
	ck_assert_int_eq(r.n, 1);
	ck_assert_int_eq(r.a[0].kind, STRATEGY_RECALL);
	ck_assert_int_eq(r.a[0].id, 2);
	/* Under the saturation, the margin (20000) is enough. */
	e.stall_ppm = STRATEGY_SATURATED_PPM - 1;
	r = decide(&e, NULL, 0, k, 3, 0, 0);
	ck_assert_int_eq(r.n, 1);
	ck_assert_int_eq(r.a[0].id, 1);
	/* Nothing sold to take back, and the node holds just its need
	 * (wss 944160 + 10000 + a margin of 94416 = TOTAL): the guess past
	 * the margin is never bid for (a lender's pages take minutes and
	 * cost it its own; on 10 000 machines bidding for it made 22 645
	 * lend contracts, 112 late deliveries and one machine stalled 30 %
	 * of the week): the bid is for the margin the refaults bound, as
	 * without saturation. */
	e = est(944160, 10000, 1000000000, 0, 1);
	e.deficit = 1000;
	e.stall_ppm = 600000;
	r = decide(&e, NULL, 0, NULL, 0, 0, 0);
	ck_assert_int_eq(r.v.spare, 0);
	ck_assert_int_eq(r.n, 1);
	ck_assert_int_eq(r.a[0].kind, STRATEGY_PLACE);
	ck_assert_int_eq(r.a[0].side, STRATEGY_BUY);
	ck_assert_int_eq(r.a[0].pages, 94464); /* the margin, in lots */
}
END_TEST

/* Pressure that persists with nothing left to recall: the node bids for
 * what it lacks at need + the margin, counting the pages it holds and has
 * borrowed, not for the margin again every step. (ramex-fleet: a 16 GiB
 * node whose pages were lost to it went on buying the margin every 30 s,
 * 157 lend contracts and 180 GiB borrowed, its stall unchanged.) */
START_TEST(pressure_buys_only_what_it_lacks)
{
	/* need = 944160 + 10000 + 94416 = TOTAL: without borrowed pages
	 * it bids for the margin (saturated_stall_takes_back_four_margins) */
	struct wsest_estimate e = est(944160, 10000, 1000000000, 0, 1);
	e.deficit = 1000;
	struct strategy_contract k = {.id = 7,
	                              .product = STRATEGY_SPOT,
	                              .side = STRATEGY_BUY,
	                              .pages = 30000};
	struct run r = decide(&e, NULL, 0, &k, 1, 0, 0);
	ck_assert_int_eq(r.v.spare, 30000);
	ck_assert_int_eq(r.n, 1);
	ck_assert_int_eq(r.a[0].kind, STRATEGY_PLACE);
	ck_assert_int_eq(r.a[0].side, STRATEGY_BUY);
	ck_assert_int_eq(r.a[0].pages, 64512); /* 94416 - 30000, in lots */
	/* Borrowed past the margin already: no bid, and the borrowed
	 * contract is kept (pressure: nothing is given back). */
	k.pages = 200000;
	r = decide(&e, NULL, 0, &k, 1, 0, 0);
	ck_assert_int_eq(r.n, 0);
	ck_assert_int_eq(r.v.bid, 0);
	/* Stalled all the time, the same: four margins are a guess. */
	e.stall_ppm = 1000000;
	r = decide(&e, NULL, 0, &k, 1, 0, 0);
	ck_assert_int_eq(r.n, 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("strategy");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, offers_the_spare_on_spot);
	tcase_add_test(tc, band_keeps_small_spares);
	tcase_add_test(tc, sells_down_the_curve);
	tcase_add_test(tc, recall_takes_the_contract_that_fits);
	tcase_add_test(tc, no_offer_while_data_waits);
	tcase_add_test(tc, pressure_takes_back_what_refaults_bound);
	tcase_add_test(tc, saturated_stall_takes_back_four_margins);
	tcase_add_test(tc, pressure_buys_only_what_it_lacks);
	tcase_add_test(tc, price_follows_marginal_value);
	tcase_add_test(tc, prices_round_to_the_tick);
	tcase_add_test(tc, ceiling_keeps_valuable_pages);
	tcase_add_test(tc, hysteresis_keeps_close_quotes);
	tcase_add_test(tc, pressure_recalls_spot_then_perm_then_bids);
	tcase_add_test(tc, pressure_wins_over_the_estimate);
	tcase_add_test(tc, releases_borrowed_pages_when_spare);
	tcase_add_test(tc, plans_around_peoples_orders);
	tcase_add_test(tc, no_estimate_no_action);
	tcase_add_test(tc, malformed_input);
	tcase_add_test(tc, contracts_up_to_the_limit);
	tcase_add_test(tc, scripted_day);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf ? 1 : 0;
}
