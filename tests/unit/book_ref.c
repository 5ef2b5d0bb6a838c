/*
 * book_ref.c — the obviously-right order book; see book_ref.h.
 */
#include "tests/unit/book_ref.h"
#include "common/err.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ref_order {
	struct book_order o;
	uint64_t arrival; /* time priority: smaller is earlier */
};

struct book_ref {
	struct book_params p;
	struct ref_order *o; /* open orders, any order */
	size_t n;
	uint64_t seq;
	uint64_t arrivals;
	book_emit_fn emit;
	void *ctx;
	rx_time_ns now;
	bool quiet; /* a dry run for FOK: no events, no sequence */
	/* scratch, allocated once: malloc per command makes ASan runs slow */
	struct ref_order *fok, *sorted;
	struct book_order *got;
	struct book_level *levels;
};

struct book_ref *book_ref_new(const struct book_params *p)
{
	struct book_ref *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->p = *p;
	size_t n = (size_t)p->capacity + 1;
	r->o = calloc(n, sizeof(*r->o));
	r->fok = calloc(n, sizeof(*r->fok));
	r->sorted = calloc(n, sizeof(*r->sorted));
	r->got = calloc(n, sizeof(*r->got));
	r->levels = calloc(n, sizeof(*r->levels));
	if (!r->o || !r->fok || !r->sorted || !r->got || !r->levels) {
		book_ref_free(r);
		return NULL;
	}
	return r;
}

void book_ref_free(struct book_ref *r)
{
	if (!r)
		return;
	free(r->o);
	free(r->fok);
	free(r->sorted);
	free(r->got);
	free(r->levels);
	free(r);
}

size_t book_ref_count(const struct book_ref *r)
{
	return r->n;
}

static void emit(struct book_ref *r, struct book_event *ev)
{
	if (r->quiet)
		return;
	ev->seq = ++r->seq;
	ev->now = r->now;
	if (r->emit)
		r->emit(r->ctx, ev);
}

static struct book_event order_event(enum book_event_kind kind,
                                     const struct book_order *o)
{
	struct book_event ev = {.kind = kind,
	                        .id = o->id,
	                        .account = o->account,
	                        .side = o->side,
	                        .pages = o->pages,
	                        .price = o->price};
	return ev;
}

static void drop(struct book_ref *r, size_t i)
{
	r->o[i] = r->o[--r->n];
}

static ptrdiff_t find(const struct book_ref *r, uint64_t id)
{
	for (size_t i = 0; i < r->n; i++)
		if (r->o[i].o.id == id)
			return (ptrdiff_t)i;
	return -1;
}

static enum book_reject rej(struct book_ref *r, const struct book_cmd *c,
                            enum book_reject why)
{
	struct book_event ev = {.kind = BOOK_EV_REJECTED,
	                        .id = c->id,
	                        .cmd = c->kind,
	                        .reject = why,
	                        .message = book_reject_name(why)};
	emit(r, &ev);
	return why;
}

static void expire(struct book_ref *r)
{
	for (;;) {
		ptrdiff_t k = -1;
		for (size_t i = 0; i < r->n; i++) {
			const struct book_order *o = &r->o[i].o;
			if (o->tif != BOOK_GTD || o->expires > r->now)
				continue;
			if (k < 0 || o->expires < r->o[k].o.expires ||
			    (o->expires == r->o[k].o.expires &&
			     o->id < r->o[k].o.id))
				k = (ptrdiff_t)i;
		}
		if (k < 0)
			return;
		struct book_event ev = order_event(BOOK_EV_EXPIRED, &r->o[k].o);
		emit(r, &ev);
		drop(r, (size_t)k);
	}
}

static bool can_trade(const struct book_cmd *c, const struct book_order *m)
{
	if (m->side == c->side)
		return false;
	return c->side == BOOK_BUY ? m->price <= c->price
	                           : m->price >= c->price;
}

/* The maker a taker meets next: best price, then earliest; -1 if none. */
static ptrdiff_t best_maker(const struct book_ref *r, const struct book_cmd *c)
{
	ptrdiff_t k = -1;
	for (size_t i = 0; i < r->n; i++) {
		const struct ref_order *m = &r->o[i];
		if (!can_trade(c, &m->o))
			continue;
		if (k < 0) {
			k = (ptrdiff_t)i;
			continue;
		}
		const struct ref_order *b = &r->o[k];
		bool better = c->side == BOOK_BUY ? m->o.price < b->o.price
		                                  : m->o.price > b->o.price;
		if (better ||
		    (m->o.price == b->o.price && m->arrival < b->arrival))
			k = (ptrdiff_t)i;
	}
	return k;
}

static void cancel_taker(struct book_ref *r, const struct book_cmd *c,
                         rx_pages left, enum book_cancel why)
{
	struct book_event ev = {.kind = BOOK_EV_CANCELLED,
	                        .id = c->id,
	                        .account = c->account,
	                        .side = c->side,
	                        .pages = left,
	                        .price = c->price,
	                        .cancel = why};
	emit(r, &ev);
}

/* Pages left after matching, or -1 when self-trade prevention cancelled
 * the taker. */
static rx_pages match(struct book_ref *r, const struct book_cmd *c)
{
	rx_pages left = c->pages;
	while (left > 0) {
		ptrdiff_t k = best_maker(r, c);
		if (k < 0)
			break;
		struct book_order *m = &r->o[k].o;
		if (m->account == c->account) {
			bool maker_goes = c->stp == BOOK_STP_CANCEL_MAKER ||
			                  c->stp == BOOK_STP_CANCEL_BOTH;
			bool taker_goes = c->stp == BOOK_STP_CANCEL_TAKER ||
			                  c->stp == BOOK_STP_CANCEL_BOTH;
			if (maker_goes) {
				struct book_event ev =
				    order_event(BOOK_EV_CANCELLED, m);
				ev.cancel = BOOK_CANCEL_SELF_TRADE;
				emit(r, &ev);
				drop(r, (size_t)k);
			}
			if (taker_goes) {
				cancel_taker(r, c, left,
				             BOOK_CANCEL_SELF_TRADE);
				return -1;
			}
			continue;
		}
		rx_pages q = left < m->pages ? left : m->pages;
		left -= q;
		m->pages -= q;
		struct book_event ev = {.kind = BOOK_EV_TRADE,
		                        .id = c->id,
		                        .account = c->account,
		                        .side = c->side,
		                        .pages = q,
		                        .price = m->price,
		                        .remaining = left,
		                        .maker_id = m->id,
		                        .maker_account = m->account,
		                        .maker_remaining = m->pages};
		emit(r, &ev);
		if (m->pages == 0)
			drop(r, (size_t)k);
	}
	return left;
}

static bool fok_fills(const struct book_ref *r, const struct book_cmd *c)
{
	struct book_ref copy = *r;
	copy.o = r->fok;
	memcpy(copy.o, r->o, r->n * sizeof(*r->o));
	copy.quiet = true;
	return match(&copy, c) == 0;
}

static enum book_reject cmd_new(struct book_ref *r, const struct book_cmd *c)
{
	const struct book_params *p = &r->p;
	if (c->id == 0)
		return rej(r, c, BOOK_REJ_BAD_ID);
	if (c->side != BOOK_BUY && c->side != BOOK_SELL)
		return rej(r, c, BOOK_REJ_BAD_SIDE);
	if (c->tif != BOOK_GTC && c->tif != BOOK_IOC && c->tif != BOOK_FOK &&
	    c->tif != BOOK_GTD)
		return rej(r, c, BOOK_REJ_BAD_TIF);
	if (c->stp != BOOK_STP_CANCEL_TAKER &&
	    c->stp != BOOK_STP_CANCEL_MAKER && c->stp != BOOK_STP_CANCEL_BOTH)
		return rej(r, c, BOOK_REJ_BAD_STP);
	if (c->post_only && (c->tif == BOOK_IOC || c->tif == BOOK_FOK))
		return rej(r, c, BOOK_REJ_POST_ONLY_TIF);
	if (c->pages <= 0 || c->pages % p->lot != 0)
		return rej(r, c, BOOK_REJ_PAGES_LOT);
	if (c->pages < p->min_pages)
		return rej(r, c, BOOK_REJ_PAGES_MIN);
	if (c->pages > p->max_pages)
		return rej(r, c, BOOK_REJ_PAGES_MAX);
	if (c->price % p->tick != 0)
		return rej(r, c, BOOK_REJ_PRICE_TICK);
	if (c->price < p->price_min)
		return rej(r, c, BOOK_REJ_PRICE_LOW);
	if (c->price > p->price_max)
		return rej(r, c, BOOK_REJ_PRICE_HIGH);
	if (c->tif == BOOK_GTD && c->expires <= c->now)
		return rej(r, c, BOOK_REJ_EXPIRES_PAST);
	if (find(r, c->id) >= 0)
		return rej(r, c, BOOK_REJ_DUPLICATE_ID);
	if (r->n >= p->capacity)
		return rej(r, c, BOOK_REJ_BOOK_FULL);

	struct book_event ev = {.kind = BOOK_EV_ACCEPTED,
	                        .id = c->id,
	                        .account = c->account,
	                        .side = c->side,
	                        .pages = c->pages,
	                        .price = c->price};
	emit(r, &ev);
	if (c->post_only) {
		for (size_t i = 0; i < r->n; i++) {
			if (can_trade(c, &r->o[i].o)) {
				cancel_taker(r, c, c->pages,
				             BOOK_CANCEL_POST_ONLY);
				return BOOK_REJ_NONE;
			}
		}
	}
	if (c->tif == BOOK_FOK && !fok_fills(r, c)) {
		cancel_taker(r, c, c->pages, BOOK_CANCEL_FOK);
		return BOOK_REJ_NONE;
	}
	rx_pages left = match(r, c);
	if (left <= 0)
		return BOOK_REJ_NONE;
	if (c->tif == BOOK_IOC || c->tif == BOOK_FOK) {
		cancel_taker(r, c, left, BOOK_CANCEL_IOC);
		return BOOK_REJ_NONE;
	}
	assert(r->n < p->capacity);
	struct ref_order *o = &r->o[r->n++];
	o->arrival = ++r->arrivals;
	o->o =
	    (struct book_order){.id = c->id,
	                        .account = c->account,
	                        .side = c->side,
	                        .tif = c->tif,
	                        .stp = c->stp,
	                        .post_only = c->post_only,
	                        .price = c->price,
	                        .pages = left,
	                        .expires = c->tif == BOOK_GTD ? c->expires : 0};
	return BOOK_REJ_NONE;
}

enum book_reject book_ref_apply(struct book_ref *r, const struct book_cmd *c,
                                book_emit_fn emit_fn, void *ctx)
{
	r->emit = emit_fn;
	r->ctx = ctx;
	r->now = c->now;
	expire(r);
	ptrdiff_t k;
	switch (c->kind) {
	case BOOK_CMD_NEW:
		return cmd_new(r, c);
	case BOOK_CMD_CANCEL:
		k = c->id ? find(r, c->id) : -1;
		if (k < 0)
			return rej(r, c, BOOK_REJ_UNKNOWN_ORDER);
		struct book_event ev =
		    order_event(BOOK_EV_CANCELLED, &r->o[k].o);
		ev.cancel = BOOK_CANCEL_USER;
		emit(r, &ev);
		drop(r, (size_t)k);
		return BOOK_REJ_NONE;
	case BOOK_CMD_REDUCE:
		k = c->id ? find(r, c->id) : -1;
		if (k < 0)
			return rej(r, c, BOOK_REJ_UNKNOWN_ORDER);
		struct book_order *o = &r->o[k].o;
		if (c->pages <= 0 || c->pages >= o->pages)
			return rej(r, c, BOOK_REJ_REDUCE_NOT_LESS);
		if (c->pages % r->p.lot != 0)
			return rej(r, c, BOOK_REJ_REDUCE_LOT);
		struct book_event rv = order_event(BOOK_EV_REDUCED, o);
		rv.remaining = o->pages;
		rv.pages = c->pages;
		o->pages = c->pages;
		emit(r, &rv);
		return BOOK_REJ_NONE;
	case BOOK_CMD_EXPIRE:
		return BOOK_REJ_NONE;
	}
	return rej(r, c, BOOK_REJ_BAD_KIND);
}

/* ---- comparison ---- */

/* Priority order: bids (highest price first) then asks (lowest first),
 * earliest first within a price. */
static int priority_cmp(const void *x, const void *y)
{
	const struct ref_order *a = x, *b = y;
	if (a->o.side != b->o.side)
		return a->o.side == BOOK_BUY ? -1 : 1;
	if (a->o.price != b->o.price) {
		bool first = a->o.side == BOOK_BUY ? a->o.price > b->o.price
		                                   : a->o.price < b->o.price;
		return first ? -1 : 1;
	}
	return a->arrival < b->arrival ? -1 : a->arrival > b->arrival;
}

struct collect {
	struct book_order *o;
	size_t n, max;
};

static void collect(void *ctx, const struct book_order *o)
{
	struct collect *c = ctx;
	if (c->n < c->max)
		c->o[c->n] = *o;
	c->n++;
}

static int order_cmp(const struct book_order *a, const struct book_order *b,
                     char *err, size_t errlen)
{
	if (a->id != b->id || a->account != b->account || a->side != b->side ||
	    a->tif != b->tif || a->stp != b->stp ||
	    a->post_only != b->post_only || a->price != b->price ||
	    a->pages != b->pages || a->expires != b->expires)
		return err_set(
		    err, errlen,
		    "order differs: model id=%llu acct=%lld side=%d "
		    "price=%lld pages=%lld exp=%lld tif=%d, book "
		    "id=%llu acct=%lld side=%d price=%lld pages=%lld "
		    "exp=%lld tif=%d",
		    (unsigned long long)a->id, (long long)a->account, a->side,
		    (long long)a->price, (long long)a->pages,
		    (long long)a->expires, a->tif, (unsigned long long)b->id,
		    (long long)b->account, b->side, (long long)b->price,
		    (long long)b->pages, (long long)b->expires, b->tif);
	return 0;
}

static int compare_side(const struct ref_order *sorted, size_t n, int side,
                        struct book_level *lv, const struct book *b, char *err,
                        size_t errlen)
{
	size_t got = book_depth(b, (enum book_side)side, lv, n + 1);
	size_t want = 0, i = 0;
	int rc = 0;
	while (i < n) {
		if ((int)sorted[i].o.side != side) {
			i++;
			continue;
		}
		rx_price price = sorted[i].o.price;
		rx_pages pages = 0;
		uint32_t orders = 0;
		for (; i < n && (int)sorted[i].o.side == side &&
		       sorted[i].o.price == price;
		     i++) {
			pages += sorted[i].o.pages;
			orders++;
		}
		if (want >= got || lv[want].price != price ||
		    lv[want].pages != pages || lv[want].orders != orders) {
			rc = err_set(
			    err, errlen,
			    "side %d level %zu: model %lld x %lld (%u), "
			    "book has %zu levels",
			    side, want, (long long)price, (long long)pages,
			    orders, got);
			goto out;
		}
		if (want == 0) {
			rx_price bp;
			rx_pages bq;
			bool ok = side == BOOK_BUY ? book_best_bid(b, &bp, &bq)
			                           : book_best_ask(b, &bp, &bq);
			if (!ok || bp != price || bq != pages) {
				rc = err_set(err, errlen,
				             "side %d best differs from depth",
				             side);
				goto out;
			}
		}
		want++;
	}
	if (got != want) {
		rc = err_set(err, errlen, "side %d: model %zu levels, book %zu",
		             side, want, got);
		goto out;
	}
	if (want == 0) {
		bool any = side == BOOK_BUY ? book_best_bid(b, NULL, NULL)
		                            : book_best_ask(b, NULL, NULL);
		if (any)
			rc = err_set(err, errlen,
			             "side %d: book has a best, model is empty",
			             side);
	}
out:
	return rc;
}

int book_ref_compare(const struct book_ref *r, const struct book *b, char *err,
                     size_t errlen)
{
	int rc = -1;
	struct ref_order *sorted = r->sorted;
	struct collect got = {r->got, 0, r->n + 1};
	if (book_seq(b) != r->seq) {
		err_set(err, errlen, "seq: model %llu, book %llu",
		        (unsigned long long)r->seq,
		        (unsigned long long)book_seq(b));
		goto out;
	}
	if (book_count(b) != r->n) {
		err_set(err, errlen, "count: model %zu, book %zu", r->n,
		        book_count(b));
		goto out;
	}
	memcpy(sorted, r->o, r->n * sizeof(*sorted));
	qsort(sorted, r->n, sizeof(*sorted), priority_cmp);
	book_foreach(b, collect, &got);
	if (got.n != r->n) {
		err_set(err, errlen, "foreach: model %zu orders, book %zu",
		        r->n, got.n);
		goto out;
	}
	for (size_t i = 0; i < r->n; i++) {
		if (order_cmp(&sorted[i].o, &got.o[i], err, errlen))
			goto out;
		struct book_order one;
		if (!book_get(b, sorted[i].o.id, &one) ||
		    order_cmp(&sorted[i].o, &one, err, errlen))
			goto out;
	}
	for (int side = 0; side < 2; side++)
		if (compare_side(sorted, r->n, side, r->levels, b, err, errlen))
			goto out;
	rc = 0;
out:
	return rc;
}

int book_ref_event_cmp(const struct book_event *a, const struct book_event *b,
                       char *err, size_t errlen)
{
	bool same =
	    a->seq == b->seq && a->kind == b->kind && a->now == b->now &&
	    a->id == b->id && a->account == b->account && a->side == b->side &&
	    a->pages == b->pages && a->price == b->price &&
	    a->remaining == b->remaining && a->maker_id == b->maker_id &&
	    a->maker_account == b->maker_account &&
	    a->maker_remaining == b->maker_remaining && a->cmd == b->cmd &&
	    a->reject == b->reject && a->cancel == b->cancel;
	if (a->kind == BOOK_EV_REJECTED)
		same = same && a->message && b->message && a->message[0] &&
		       b->message[0];
	else
		same = same && !a->message && !b->message;
	if (same)
		return 0;
	return err_set(
	    err, errlen,
	    "events differ: seq %llu/%llu kind %d/%d id %llu/%llu "
	    "acct %lld/%lld side %d/%d pages %lld/%lld price "
	    "%lld/%lld rem %lld/%lld maker %llu/%llu macct "
	    "%lld/%lld mrem %lld/%lld cmd %d/%d rej %d/%d cancel "
	    "%d/%d",
	    (unsigned long long)a->seq, (unsigned long long)b->seq, a->kind,
	    b->kind, (unsigned long long)a->id, (unsigned long long)b->id,
	    (long long)a->account, (long long)b->account, a->side, b->side,
	    (long long)a->pages, (long long)b->pages, (long long)a->price,
	    (long long)b->price, (long long)a->remaining,
	    (long long)b->remaining, (unsigned long long)a->maker_id,
	    (unsigned long long)b->maker_id, (long long)a->maker_account,
	    (long long)b->maker_account, (long long)a->maker_remaining,
	    (long long)b->maker_remaining, a->cmd, b->cmd, a->reject, b->reject,
	    a->cancel, b->cancel);
}
