/* strategy.c — market decisions from the estimate; see strategy.h. */
#include "node-agent/core/strategy.h"

#include <assert.h>
#include <string.h>

void strategy_config_default(struct strategy_config *c)
{
	memset(c, 0, sizeof *c);
	c->margin_pct = 10;
	c->margin_min = 16384; /* 64 MiB */
	c->lot = 256;          /* 1 MiB */
	c->tick = 1;
	c->perm_share_pct = 25;
	strcpy(c->spot_market, "spot");
	c->spot_floor = 50000;       /* 5/1000 cent per page-year */
	c->spot_ceiling = 100000000; /* 10 cents */
	c->perm_floor = 100000;
	c->perm_ceiling = 100000000;
	c->bid_ceiling = 1000000; /* 1/10 cent */
	/* 1 m$ per second of stall, $3.60 an hour: about what a mid-size
	 * machine and its users lose while it waits. At the old 1 µ$ the
	 * agent sold pages its workload refaults every few minutes
	 * (ramex-fleet: 0.22 % stall, the worst machine 5 %). */
	c->stall_value = 1000000;
	c->move_cost = 1;
	c->hold_s = 86400;
	c->perm_premium_pct = 50;
	c->requote_price_pct = 5;
	c->requote_qty_pct = 10;
	c->breach_perm = 1;
	c->sell_band_pct = 5;
	c->min_offer = 4096; /* 16 MiB */
}

const char *strategy_config_check(const struct strategy_config *c)
{
	if (c->lot <= 0)
		return "the lot must be at least one page";
	if (c->tick <= 0)
		return "the price tick must be at least one nanodollar";
	if (c->margin_pct < 0 || c->margin_min < 0)
		return "the safety margin cannot be negative";
	if (c->perm_share_pct < 0 || c->perm_share_pct > 100)
		return "the perm share must be 0..100 percent";
	if (!c->spot_market[0])
		return "the spot market needs a name";
	if (c->spot_floor < 0 || c->spot_floor > c->spot_ceiling)
		return "the spot floor must be between 0 and the spot ceiling";
	if (c->perm_floor < 0 || c->perm_floor > c->perm_ceiling)
		return "the perm floor must be between 0 and the perm ceiling";
	if (c->bid_ceiling < 0 || c->stall_value < 0 || c->move_cost < 0)
		return "prices and costs cannot be negative";
	if (c->hold_s <= 0)
		return "the holding period must be positive";
	if (c->perm_premium_pct < 0 || c->requote_price_pct < 0 ||
	    c->requote_qty_pct < 0 || c->sell_band_pct < 0)
		return "percentages cannot be negative";
	if (c->min_offer < 0)
		return "the smallest offer cannot be negative";
	return NULL;
}

static int64_t clamp128(__int128 v)
{
	if (v > INT64_MAX)
		return INT64_MAX;
	if (v < 0)
		return 0;
	return (int64_t)v;
}

rx_price strategy_price_of(const struct strategy_config *c, int64_t value)
{
	return clamp128((__int128)value * c->stall_value / 1000000);
}

static rx_price move_price(const struct strategy_config *c)
{
	return clamp128((__int128)c->move_cost * RX_SECONDS_PER_YEAR /
	                c->hold_s);
}

static rx_pages round_down(rx_pages p, rx_pages lot)
{
	return p > 0 ? p / lot * lot : 0;
}

static rx_pages round_up(rx_pages p, rx_pages lot)
{
	return p > 0 ? (p + lot - 1) / lot * lot : 0;
}

/* Within `pct` percent of `want` (both positive): leave the quote alone. */
static int near(int64_t have, int64_t want, int pct)
{
	__int128 d = (__int128)(have > want ? have - want : want - have) * 100;
	return d <= (__int128)pct * want;
}

/* The most pages a new quote may have so that the contracts it and a
 * person's open orders can fill into still fit what the agent holds: a
 * trade is at least one lot, so a quote fills into at most one contract a
 * lot. A kept quote may be requote_qty_pct larger than the one wanted. */
static rx_pages fill_room(const struct strategy_config *c,
                          const struct strategy_input *in,
                          const struct strategy_view *v)
{
	__int128 r =
	    (__int128)(STRATEGY_MAX_CONTRACTS - in->ncontracts) * c->lot -
	    v->others_buy - v->others_sell;
	if (r <= 0)
		return 0;
	r = r * 100 / (100 + c->requote_qty_pct);
	return round_down(clamp128(r), c->lot);
}

struct out {
	struct strategy_action *a;
	int n;
};

static void emit(struct out *o, struct strategy_action a)
{
	assert(o->n < STRATEGY_MAX_ACTIONS);
	o->a[o->n++] = a;
}

/* Brings the open quotes on one side of one market to a single quote of
 * `pages` at `price` (none when pages is 0), keeping an existing quote that
 * is close enough. */
static void converge(const struct strategy_config *c,
                     const struct strategy_input *in, struct out *o,
                     enum strategy_product p, enum strategy_side side,
                     rx_pages pages, rx_price price, enum strategy_tif tif,
                     const char *why)
{
	int keep = -1;

	if (pages > 0 && tif == STRATEGY_GTC) {
		for (int i = 0; i < in->nquotes; i++) {
			const struct strategy_quote *q = &in->quotes[i];
			if (q->product == p && q->side == side &&
			    near(q->pages, pages, c->requote_qty_pct) &&
			    near(q->price, price, c->requote_price_pct)) {
				keep = i;
				break;
			}
		}
	}
	for (int i = 0; i < in->nquotes; i++) {
		const struct strategy_quote *q = &in->quotes[i];
		if (q->product != p || q->side != side || i == keep)
			continue;
		emit(o, (struct strategy_action){
		            .kind = STRATEGY_CANCEL,
		            .id = q->id,
		            .product = p,
		            .side = side,
		            .pages = q->pages,
		            .price = q->price,
		            .reason = pages > 0 ? "re-quote" : why});
	}
	if (pages > 0 && keep < 0)
		emit(o, (struct strategy_action){.kind = STRATEGY_PLACE,
		                                 .product = p,
		                                 .side = side,
		                                 .tif = tif,
		                                 .pages = pages,
		                                 .price = price,
		                                 .reason = why});
}

/* Short of memory: the workload wins. Take back what we sold, spot first
 * (recall is the seller's right), perm only if allowed (a breach, settled
 * by the market's rules), then bid for what is still missing, but never
 * for more than `bid_max` less what the recalls cover: short_by may hold
 * a guess past what was measured (a saturated stall), and pressure asks
 * for more although the node already holds it (borrowed pages among
 * them); both are taken back from what we sold, never bid for, as a
 * lender may first have to write its own data out (minutes, at a disk's
 * rate) and the pages cost it its own. */
static void cover_shortfall(const struct strategy_config *c,
                            const struct strategy_input *in, struct out *o,
                            rx_pages short_by, rx_pages bid_max,
                            struct strategy_view *v)
{
	rx_pages left = short_by;
	const struct wsest_estimate *e = in->est;

	/* Stop selling before taking back, so no fill races the recall. */
	for (int p = 0; p < STRATEGY_NPRODUCTS; p++)
		converge(c, in, o, p, STRATEGY_SELL, 0, 0, STRATEGY_GTC,
		         "workload needs the pages");
	/* The agent recalls whole contracts: take the one that covers what
	 * is missing with the least excess, else the largest, and again.
	 * Until one fits, the ones taken are the largest in the order
	 * (pages down, index up), so the contracts still free are those
	 * after the last one taken in that order: no list of the taken. */
	for (int pass = 0; pass < 2 && left > 0; pass++) {
		enum strategy_product p =
		    pass == 0 ? STRATEGY_SPOT : STRATEGY_PERM;
		if (p == STRATEGY_PERM && !c->breach_perm)
			break;
		rx_pages last_pages = 0;
		int last = -1;
		while (left > 0) {
			int best = -1, fits = 0;
			for (int i = 0; i < in->ncontracts; i++) {
				const struct strategy_contract *k =
				    &in->contracts[i];
				if (k->side != STRATEGY_SELL || k->product != p)
					continue;
				if (last >= 0 &&
				    (k->pages > last_pages ||
				     (k->pages == last_pages && i <= last)))
					continue; /* taken already */
				int f = k->pages >= left;
				if (best < 0 || (f && !fits) ||
				    (f && k->pages <
				              in->contracts[best].pages) ||
				    (!f && !fits &&
				     k->pages > in->contracts[best].pages)) {
					best = i;
					fits = f;
				}
			}
			if (best < 0)
				break;
			const struct strategy_contract *k =
			    &in->contracts[best];
			last = best;
			last_pages = k->pages;
			emit(o, (struct strategy_action){
			            .kind = STRATEGY_RECALL,
			            .id = k->id,
			            .product = p,
			            .side = STRATEGY_SELL,
			            .pages = k->pages,
			            .reason = p == STRATEGY_SPOT
			                          ? "workload needs the pages"
			                          : "workload needs the pages "
			                            "(breaches perm)"});
			left -= k->pages < left ? k->pages : left;
		}
	}

	rx_pages covered = short_by - left;
	left = bid_max > covered ? bid_max - covered : 0;
	/* a person's open bids for this node cover their part */
	left = left > v->others_buy ? left - v->others_buy : 0;
	rx_pages want = round_up(left, c->lot);
	if (c->max_order > 0 && want > c->max_order)
		want = round_down(c->max_order, c->lot);
	if (want > fill_room(c, in, v))
		want = fill_room(c, in, v);
	rx_price move = move_price(c);
	rx_price value = strategy_price_of(c, e->dydx_above);
	rx_price bid = value > move ? value - move : 0;
	enum strategy_tif tif = STRATEGY_GTC;

	if (bid > c->bid_ceiling)
		bid = c->bid_ceiling;
	bid = bid / c->tick * c->tick;
	/* A resting ask we can afford is taken now; otherwise our bid rests
	 * until someone sells. */
	rx_price ask = in->top[STRATEGY_SPOT].best_ask;
	if (ask > 0 && ask <= bid) {
		bid = ask;
		tif = STRATEGY_IOC;
	}
	if (bid <= 0)
		want = 0;
	v->bid = want > 0 ? bid : 0;
	converge(c, in, o, STRATEGY_SPOT, STRATEGY_BUY, want, bid, tif,
	         "short of memory");
	converge(c, in, o, STRATEGY_PERM, STRATEGY_BUY, 0, 0, STRATEGY_GTC,
	         "never buy perm");
}

/* What the page at size x is worth: the estimate's curve, except that
 * memory the workload does not hold and does not fault for is free. */
static int64_t page_value(const struct wsest_estimate *e, rx_pages x)
{
	if (x >= e->resident && e->deficit == 0)
		return 0;
	return wsest_value_at(e, x);
}

/* The next size past x where the curve's value changes (or `to`). */
static rx_pages next_step(const struct wsest_estimate *e, rx_pages x,
                          rx_pages to)
{
	for (int i = 0; i < e->npoints; i++)
		if (e->curve[i].size > x && e->curve[i].size < to)
			return e->curve[i].size;
	return x < e->resident && e->resident < to ? e->resident : to;
}

/* Spare memory: give borrowed pages back first, then offer the rest. */
static void offer_spare(const struct strategy_config *c,
                        const struct strategy_input *in, struct out *o,
                        rx_pages spare, struct strategy_view *v)
{
	const struct wsest_estimate *e = in->est;

	for (int i = 0; i < in->ncontracts; i++) {
		const struct strategy_contract *k = &in->contracts[i];
		if (k->side != STRATEGY_BUY || k->pages > spare)
			continue;
		emit(o, (struct strategy_action){.kind = STRATEGY_RELEASE,
		                                 .id = k->id,
		                                 .product = k->product,
		                                 .side = STRATEGY_BUY,
		                                 .pages = k->pages,
		                                 .reason = "no longer needed"});
		spare -= k->pages;
	}
	for (int p = 0; p < STRATEGY_NPRODUCTS; p++)
		converge(c, in, o, p, STRATEGY_BUY, 0, 0, STRATEGY_GTC,
		         "no longer short");

	/* a person's open offers for this node take their part */
	spare = spare > v->others_sell ? spare - v->others_sell : 0;
	/* Keep the pages the best bid does not pay for: walk up the curve
	 * from the need to the first size whose page is worth less than the
	 * bid, and offer only above it. Without a bid, offer from the need. */
	rx_pages need = v->need;
	rx_price bid = in->top[STRATEGY_SPOT].best_bid;
	rx_price move = move_price(c);
	if (bid > 0) {
		rx_pages at = need;
		while (at < v->kept &&
		       strategy_price_of(c, page_value(e, at)) + move > bid)
			at = next_step(e, at, v->kept);
		spare -= at - need;
		v->valued = at - need;
		need = at;
	}
	/* Hysteresis: offer only a spare past the band, and keep half the
	 * band, so a working set that wobbles neither sells a slice nor
	 * recalls it a step later. */
	rx_pages band = (rx_pages)((__int128)e->wss * c->sell_band_pct / 100);
	if (band < c->min_offer)
		band = c->min_offer;
	int selling = 0;
	for (int i = 0; i < in->nquotes; i++)
		if (in->quotes[i].side == STRATEGY_SELL)
			selling = 1;
	rx_pages target = 0;
	if (spare >= band || (selling && spare >= band / 2))
		target = round_down(spare - band / 2, c->lot);
	if (target < c->min_offer && target < spare - band / 2)
		target = 0;
	/* Pages that hold data must be written out before they can go, far
	 * slower than free pages go offline: while what was sold still waits
	 * for the workload's pages to be written out (the workload holds more
	 * than the node keeps), offer nothing more, so that deliveries never
	 * queue past their deadline. */
	if (v->kept - v->borrowed < e->resident)
		target = 0;
	if (c->max_order > 0 && target > c->max_order)
		target = round_down(c->max_order, c->lot);
	if (target > fill_room(c, in, v))
		target = fill_room(c, in, v);
	rx_pages perm = 0;
	if (e->stable && c->perm_market[0])
		perm = round_down(target * c->perm_share_pct / 100, c->lot);

	/* The last page offered is the one at size `need`: the most valuable
	 * one we would give up. */
	rx_price spot_ask = strategy_price_of(c, page_value(e, need)) + move;
	rx_price perm_ask =
	    clamp128((__int128)spot_ask * (100 + c->perm_premium_pct) / 100);
	if (spot_ask < c->spot_floor)
		spot_ask = c->spot_floor;
	if (perm_ask < c->perm_floor)
		perm_ask = c->perm_floor;
	if (perm_ask > c->perm_ceiling)
		perm = 0; /* worth more to us than the market may pay */
	spot_ask =
	    clamp128(((__int128)spot_ask + c->tick - 1) / c->tick * c->tick);
	perm_ask =
	    clamp128(((__int128)perm_ask + c->tick - 1) / c->tick * c->tick);
	rx_pages spot = target - perm;
	if (spot_ask > c->spot_ceiling)
		spot = 0;
	v->ask[STRATEGY_SPOT] = spot > 0 ? spot_ask : 0;
	v->ask[STRATEGY_PERM] = perm > 0 ? perm_ask : 0;
	converge(c, in, o, STRATEGY_SPOT, STRATEGY_SELL, spot, spot_ask,
	         STRATEGY_GTC, "spare memory");
	converge(c, in, o, STRATEGY_PERM, STRATEGY_SELL, perm, perm_ask,
	         STRATEGY_GTC, "spare memory, stable");
}

int strategy_decide(const struct strategy_config *c,
                    const struct strategy_input *in,
                    struct strategy_action out[STRATEGY_MAX_ACTIONS],
                    struct strategy_view *v, const char **why)
{
	const struct wsest_estimate *e = in->est;
	struct out o = {out, 0};

	memset(v, 0, sizeof *v);
	if (in->nquotes < 0 || in->nquotes > STRATEGY_MAX_QUOTES ||
	    in->ncontracts < 0 || in->ncontracts > STRATEGY_MAX_CONTRACTS) {
		*why = "too many open quotes or contracts for one agent";
		return -1;
	}
	if (in->total <= 0) {
		*why = "the agent manages no pages";
		return -1;
	}
	for (int i = 0; i < in->ncontracts; i++) {
		const struct strategy_contract *k = &in->contracts[i];
		if (k->pages <= 0) {
			*why = "a contract with no pages";
			return -1;
		}
		if (k->side == STRATEGY_SELL)
			v->sold += k->pages;
		else
			v->borrowed += k->pages;
	}
	for (int p = 0; p < STRATEGY_NPRODUCTS; p++) {
		if (in->others.buy[p] < 0 || in->others.sell[p] < 0) {
			*why = "negative pages in a person's order";
			return -1;
		}
		v->others_buy += in->others.buy[p];
		v->others_sell += in->others.sell[p];
	}
	v->kept = in->total - v->sold + v->borrowed;
	v->source = e->source;
	if (e->source == WSEST_NONE)
		return 0; /* nothing measured yet: change nothing */

	rx_pages margin = e->wss * c->margin_pct / 100;
	if (margin < c->margin_min)
		margin = c->margin_min;
	v->need = e->wss + e->wss_err + margin;
	v->spare = v->kept - v->need;

	if (v->spare < 0 || e->pressure) {
		/* Under pressure the estimate is too low by definition, and
		 * it follows a burst only by its smoothing: ask for the
		 * margin's worth more at once, or for all the refaults say
		 * may be missing (twice the deficit), whichever is more. */
		rx_pages short_by = v->spare < 0 ? -v->spare : 0;
		rx_pages bid_max = short_by;
		if (e->pressure) {
			rx_pages more = margin > 2 * e->deficit ? margin
			                                        : 2 * e->deficit;
			/* Stalled half the interval or more, the workload
			 * refaulted as fast as the faults were served: the
			 * refaults bound the time it waited, not the pages
			 * it misses (ramex-fleet: a burst then took two or
			 * three steps of full stall to take back). */
			rx_pages measured = more;
			if (e->stall_ppm >= STRATEGY_SATURATED_PPM &&
			    more < 4 * margin)
				more = 4 * margin;
			if (more < c->lot)
				more = c->lot;
			/* Bid only for what the node lacks at need +
			 * measured, counting all it holds: short by the
			 * estimate, the larger of the two; with pages to
			 * spare, what they leave of it. Pressure that
			 * persists (pages lost to something the node cannot
			 * see) otherwise bought `measured` again every step:
			 * in ramex-fleet a 16 GiB node borrowed 180 GiB in
			 * 157 lend contracts, its stall unchanged. */
			if (v->spare < 0)
				bid_max =
				    short_by > measured ? short_by : measured;
			else
				bid_max = measured > v->spare
				              ? measured - v->spare
				              : 0;
			if (short_by < more)
				short_by = more;
		}
		cover_shortfall(c, in, &o, short_by, bid_max, v);
	} else {
		offer_spare(c, in, &o, v->spare, v);
	}
	return o.n;
}
