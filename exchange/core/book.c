/*
 * book.c — the order book; see book.h for the interface and
 * exchange/core/README.md for the data structures and why they were chosen.
 *
 * In short: one array of price levels per side indexed by tick, each level
 * an intrusive doubly linked FIFO of orders (indices into one order pool);
 * a three-to-four-tier bitmap per side finds the next non-empty level in a
 * few word operations; an open-addressing table maps order id to pool
 * index; a binary heap keyed by (expires, id) holds GTD orders. Everything
 * is allocated by book_new; book_apply never allocates.
 *
 * The bitmap is tickset.h; the snapshot, built on this interface alone, is
 * book_snap.c. What stays here is one unit: the order pool, the levels'
 * FIFOs, the id table and the expiry heap are all indices into the same
 * pool, and matching moves an order through all of them in one step. They
 * stay in one file so that the compiler inlines them into book_apply (the
 * order path; bench/10-book.sh).
 */
#include "exchange/core/book.h"
#include "common/err.h"
#include "exchange/core/tickset.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NIL UINT32_MAX

struct order {
	uint64_t id;
	int64_t account;
	rx_pages pages; /* remaining */
	rx_time_ns expires;
	uint32_t prev,
	    next;       /* FIFO within the level; next links the free list */
	uint32_t level; /* tick index */
	uint32_t heap;  /* position in the expiry heap, NIL if not GTD */
	uint8_t side, tif, stp, post_only;
};

struct level {
	rx_pages pages; /* sum of remaining pages */
	uint32_t head, tail;
	uint32_t count;
};

struct side {
	struct level *lv;
	struct tickset bits;
	int64_t best; /* tick index of the best level, -1 when empty */
};

struct book {
	struct book_params p;
	uint32_t ticks;
	int64_t lot_mask; /* lot - 1 when lot is a power of two, else -1 */
	struct side s[2];

	struct order *ord;
	uint32_t free_head; /* recycled pool entries */
	uint32_t high;      /* entries [high, capacity) never used yet */
	uint32_t count;     /* open orders */

	uint32_t *tab; /* order index by id, NIL when empty */
	uint64_t tab_mask;
	int tab_shift; /* log2 of the table size */

	uint32_t *heap;
	uint32_t heap_n;

	uint64_t seq;

	/* the command being applied */
	book_emit_fn emit;
	void *ctx;
	rx_time_ns now;
	char msg[BOOK_MSG_MAX];
};

/* ---- id table (linear probing, backward-shift deletion) ---- */

/* Ids come from a database sequence, so consecutive orders have
 * consecutive ids: taking the low bits (folded with the high ones) keeps
 * them in consecutive slots, and the table lines a busy book touches stay in
 * cache. A multiplicative hash spreads them instead and costs a cache miss
 * per lookup (measured: 2.5x slower on bench/10-book.sh). Ids that share
 * their low bits (a stride of a large power of two) would cluster; ramexd's
 * ids do not. */
static uint64_t tab_home(const struct book *b, uint64_t id)
{
	return (id ^ (id >> b->tab_shift)) & b->tab_mask;
}

/* Slots hold only the pool index (4 bytes, so the table is a quarter of
 * the size and more of it stays in cache); the id is read from the order,
 * which a lookup is about to touch anyway. */
static uint32_t tab_find(const struct book *b, uint64_t id)
{
	for (uint64_t i = tab_home(b, id);; i = (i + 1) & b->tab_mask) {
		uint32_t oi = b->tab[i];
		if (oi == NIL || b->ord[oi].id == id)
			return oi;
	}
}

static void tab_insert(struct book *b, uint64_t id, uint32_t ord)
{
	uint64_t i = tab_home(b, id);
	while (b->tab[i] != NIL) {
		assert(b->ord[b->tab[i]].id != id);
		i = (i + 1) & b->tab_mask;
	}
	b->tab[i] = ord;
}

static void tab_delete(struct book *b, uint64_t id)
{
	uint64_t i = tab_home(b, id);
	for (;; i = (i + 1) & b->tab_mask) {
		assert(b->tab[i] != NIL);
		if (b->ord[b->tab[i]].id == id)
			break;
	}
	/* Pull later entries of the probe run back so lookups never stop at a
	 * hole in front of their key. */
	for (uint64_t j = (i + 1) & b->tab_mask; b->tab[j] != NIL;
	     j = (j + 1) & b->tab_mask) {
		uint64_t k = tab_home(b, b->ord[b->tab[j]].id);
		bool movable = i <= j ? (k <= i || k > j) : (k <= i && k > j);
		if (movable) {
			b->tab[i] = b->tab[j];
			i = j;
		}
	}
	b->tab[i] = NIL;
}

/* ---- expiry heap, keyed by (expires, id) ---- */

static bool heap_less(const struct book *b, uint32_t x, uint32_t y)
{
	const struct order *a = &b->ord[x], *c = &b->ord[y];
	return a->expires < c->expires ||
	       (a->expires == c->expires && a->id < c->id);
}

static void heap_place(struct book *b, uint32_t pos, uint32_t oi)
{
	b->heap[pos] = oi;
	b->ord[oi].heap = pos;
}

static void heap_up(struct book *b, uint32_t pos)
{
	uint32_t oi = b->heap[pos];
	while (pos > 0) {
		uint32_t parent = (pos - 1) / 2;
		if (!heap_less(b, oi, b->heap[parent]))
			break;
		heap_place(b, pos, b->heap[parent]);
		pos = parent;
	}
	heap_place(b, pos, oi);
}

static void heap_down(struct book *b, uint32_t pos)
{
	uint32_t oi = b->heap[pos];
	for (;;) {
		uint32_t l = 2 * pos + 1, m = l;
		if (l >= b->heap_n)
			break;
		if (l + 1 < b->heap_n &&
		    heap_less(b, b->heap[l + 1], b->heap[l]))
			m = l + 1;
		if (!heap_less(b, b->heap[m], oi))
			break;
		heap_place(b, pos, b->heap[m]);
		pos = m;
	}
	heap_place(b, pos, oi);
}

static void heap_push(struct book *b, uint32_t oi)
{
	assert(b->heap_n < b->p.capacity);
	heap_place(b, b->heap_n++, oi);
	heap_up(b, b->heap_n - 1);
}

static void heap_remove(struct book *b, uint32_t oi)
{
	uint32_t pos = b->ord[oi].heap;
	assert(pos < b->heap_n && b->heap[pos] == oi);
	b->ord[oi].heap = NIL;
	uint32_t last = b->heap[--b->heap_n];
	if (pos == b->heap_n)
		return;
	heap_place(b, pos, last);
	heap_down(b, pos);
	heap_up(b, b->ord[last].heap);
}

/* ---- params ---- */

int book_params_check(const struct book_params *p, char *err, size_t errlen)
{
	if (p->tick <= 0)
		return err_set(err, errlen, "tick %lld must be positive",
		               (long long)p->tick);
	if (p->lot <= 0)
		return err_set(err, errlen, "lot %lld must be positive",
		               (long long)p->lot);
	if (p->min_pages < p->lot || p->min_pages % p->lot)
		return err_set(err, errlen,
		               "min_pages %lld must be a multiple of the lot "
		               "%lld and at least one lot",
		               (long long)p->min_pages, (long long)p->lot);
	if (p->max_pages < p->min_pages || p->max_pages % p->lot)
		return err_set(err, errlen,
		               "max_pages %lld must be a multiple of the lot "
		               "%lld and at least min_pages %lld",
		               (long long)p->max_pages, (long long)p->lot,
		               (long long)p->min_pages);
	if (p->price_min < 0 || p->price_min % p->tick)
		return err_set(err, errlen,
		               "price_min %lld must be a non-negative multiple "
		               "of the tick %lld",
		               (long long)p->price_min, (long long)p->tick);
	if (p->price_max < p->price_min || p->price_max % p->tick)
		return err_set(err, errlen,
		               "price_max %lld must be a multiple of the tick "
		               "%lld and at least price_min %lld",
		               (long long)p->price_max, (long long)p->tick,
		               (long long)p->price_min);
	int64_t ticks = (p->price_max - p->price_min) / p->tick + 1;
	if (ticks > BOOK_MAX_TICKS)
		return err_set(err, errlen,
		               "the price grid has %lld ticks, more than the "
		               "limit of %lld; use a larger tick or a narrower "
		               "price range",
		               (long long)ticks, (long long)BOOK_MAX_TICKS);
	if ((__int128)p->max_pages * p->price_max > INT64_MAX)
		return err_set(err, errlen,
		               "max_pages %lld times price_max %lld overflows "
		               "64 bits; lower one of them",
		               (long long)p->max_pages,
		               (long long)p->price_max);
	if (p->capacity < 1 || p->capacity > BOOK_MAX_CAPACITY)
		return err_set(err, errlen,
		               "capacity %u must be between 1 and %u orders",
		               p->capacity, BOOK_MAX_CAPACITY);
	if ((__int128)p->capacity * p->max_pages > INT64_MAX)
		return err_set(err, errlen,
		               "capacity %u times max_pages %lld overflows 64 "
		               "bits; lower one of them",
		               p->capacity, (long long)p->max_pages);
	return 0;
}

/* ---- life cycle ---- */

struct book *book_new(const struct book_params *p, char *err, size_t errlen)
{
	if (book_params_check(p, err, errlen))
		return NULL;
	struct book *b = calloc(1, sizeof(*b));
	if (!b)
		goto oom;
	b->p = *p;
	b->ticks = (uint32_t)((p->price_max - p->price_min) / p->tick + 1);
	b->lot_mask = (p->lot & (p->lot - 1)) == 0 ? p->lot - 1 : -1;
	for (int sd = 0; sd < 2; sd++) {
		b->s[sd].best = -1;
		/* calloc: the kernel hands out zero pages lazily, so a wide
		 * grid costs memory only where orders rest. */
		b->s[sd].lv = calloc(b->ticks, sizeof(struct level));
		if (!b->s[sd].lv || tickset_init(&b->s[sd].bits, b->ticks))
			goto oom;
	}
	b->ord = malloc((size_t)p->capacity * sizeof(struct order));
	b->heap = malloc((size_t)p->capacity * sizeof(uint32_t));
	uint64_t size = 16;
	int shift = 4;
	while (size < 2 * (uint64_t)p->capacity) {
		size *= 2;
		shift++;
	}
	b->tab = malloc(size * sizeof(uint32_t));
	if (!b->ord || !b->heap || !b->tab)
		goto oom;
	for (uint64_t i = 0; i < size; i++)
		b->tab[i] = NIL;
	b->tab_mask = size - 1;
	b->tab_shift = shift;
	b->free_head = NIL;
	return b;
oom:
	book_free(b);
	err_set(err, errlen,
	        "could not allocate a book for %u orders and %lld ticks: out "
	        "of memory",
	        p->capacity,
	        (long long)((p->price_max - p->price_min) / p->tick + 1));
	return NULL;
}

void book_free(struct book *b)
{
	if (!b)
		return;
	for (int sd = 0; sd < 2; sd++) {
		free(b->s[sd].lv);
		tickset_release(&b->s[sd].bits);
	}
	free(b->ord);
	free(b->heap);
	free(b->tab);
	free(b);
}

const struct book_params *book_params_of(const struct book *b)
{
	return &b->p;
}

/* ---- orders and levels ---- */

static rx_price level_price(const struct book *b, uint32_t li)
{
	return b->p.price_min + (rx_price)li * b->p.tick;
}

static bool crosses(const struct book *b, int side, uint32_t li)
{
	int64_t best = b->s[!side].best;
	if (best < 0)
		return false;
	return side == BOOK_BUY ? best <= (int64_t)li : best >= (int64_t)li;
}

/* Next level after `li` on `side`, worse for the taker, or -1. */
static int64_t level_after(const struct book *b, int side, int64_t li)
{
	const struct tickset *bs = &b->s[side].bits;
	return side == BOOK_SELL ? tickset_next(bs, (uint64_t)li + 1)
	                         : tickset_prev(bs, li - 1);
}

static uint32_t order_alloc(struct book *b)
{
	uint32_t oi;
	if (b->free_head != NIL) {
		oi = b->free_head;
		b->free_head = b->ord[oi].next;
	} else {
		assert(b->high < b->p.capacity);
		oi = b->high++;
	}
	return oi;
}

/* Appends a new order at the tail of its level; the caller checked room,
 * a free id and that it does not cross. */
static void order_rest(struct book *b, const struct book_order *o, uint32_t li)
{
	assert(b->count < b->p.capacity);
	uint32_t oi = order_alloc(b);
	struct order *r = &b->ord[oi];
	r->id = o->id;
	r->account = o->account;
	r->pages = o->pages;
	r->expires = o->tif == BOOK_GTD ? o->expires : 0;
	r->level = li;
	r->heap = NIL;
	r->side = (uint8_t)o->side;
	r->tif = (uint8_t)o->tif;
	r->stp = (uint8_t)o->stp;
	r->post_only = o->post_only;

	struct side *sd = &b->s[o->side];
	struct level *lv = &sd->lv[li];
	r->next = NIL;
	if (lv->count == 0) {
		assert(lv->pages == 0);
		r->prev = NIL;
		lv->head = oi;
		tickset_set(&sd->bits, li);
		if (sd->best < 0 ||
		    (o->side == BOOK_BUY ? (int64_t)li > sd->best
		                         : (int64_t)li < sd->best))
			sd->best = li;
	} else {
		r->prev = lv->tail;
		b->ord[lv->tail].next = oi;
	}
	lv->tail = oi;
	lv->count++;
	lv->pages += o->pages;
	tab_insert(b, o->id, oi);
	if (o->tif == BOOK_GTD)
		heap_push(b, oi);
	b->count++;
}

static void order_remove(struct book *b, uint32_t oi)
{
	struct order *r = &b->ord[oi];
	struct side *sd = &b->s[r->side];
	struct level *lv = &sd->lv[r->level];
	if (r->prev != NIL)
		b->ord[r->prev].next = r->next;
	else
		lv->head = r->next;
	if (r->next != NIL)
		b->ord[r->next].prev = r->prev;
	else
		lv->tail = r->prev;
	assert(lv->count > 0 && lv->pages >= r->pages);
	lv->count--;
	lv->pages -= r->pages;
	if (lv->count == 0) {
		assert(lv->pages == 0);
		lv->head = lv->tail = NIL;
		tickset_clear(&sd->bits, r->level);
		if (sd->best == (int64_t)r->level)
			sd->best = level_after(b, r->side, r->level);
	}
	tab_delete(b, r->id);
	if (r->heap != NIL)
		heap_remove(b, oi);
	r->next = b->free_head;
	b->free_head = oi;
	b->count--;
}

/* ---- events ---- */

/* Events start as a copy of this rather than from an initializer: gcc
 * zeroes a 120-byte initializer with `rep stos`, whose start-up cost showed
 * as 15 % of book_apply; a copy is a few vector moves. */
static const struct book_event ev_zero;

static void emit(struct book *b, struct book_event *ev)
{
	ev->seq = ++b->seq;
	ev->now = b->now;
	if (b->emit)
		b->emit(b->ctx, ev);
}

static void emit_order(struct book *b, enum book_event_kind kind, uint32_t oi,
                       enum book_cancel why)
{
	const struct order *r = &b->ord[oi];
	struct book_event ev = ev_zero;
	ev.kind = kind;
	ev.id = r->id;
	ev.account = r->account;
	ev.side = (enum book_side)r->side;
	ev.pages = r->pages;
	ev.price = level_price(b, r->level);
	ev.cancel = kind == BOOK_EV_CANCELLED ? why : 0;
	emit(b, &ev);
}

static enum book_reject reject(struct book *b, const struct book_cmd *c,
                               enum book_reject why, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static enum book_reject reject(struct book *b, const struct book_cmd *c,
                               enum book_reject why, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(b->msg, sizeof(b->msg), fmt, ap);
	va_end(ap);
	struct book_event ev = ev_zero;
	ev.kind = BOOK_EV_REJECTED;
	ev.id = c->id;
	ev.cmd = c->kind;
	ev.reject = why;
	ev.message = b->msg;
	emit(b, &ev);
	return why;
}

/* ---- commands ---- */

static void expire_due(struct book *b)
{
	while (b->heap_n && b->ord[b->heap[0]].expires <= b->now) {
		uint32_t oi = b->heap[0];
		emit_order(b, BOOK_EV_EXPIRED, oi, 0);
		order_remove(b, oi);
	}
}

/* x is a multiple of step; a mask for power-of-two steps spares a
 * division on the hot path. */
static bool multiple_of(int64_t x, int64_t step, int64_t mask)
{
	return mask >= 0 ? (x & mask) == 0 : x % step == 0;
}

/* Checks a new order in the documented order; on success *li is its tick
 * index, found with the one division the tick check needs anyway. */
static enum book_reject validate_new(struct book *b, const struct book_cmd *c,
                                     uint32_t *li)
{
	const struct book_params *p = &b->p;
	if (c->id == 0)
		return reject(b, c, BOOK_REJ_BAD_ID,
		              "order id 0 is reserved; use the id the database "
		              "assigned");
	if (c->side != BOOK_BUY && c->side != BOOK_SELL)
		return reject(b, c, BOOK_REJ_BAD_SIDE,
		              "side %d is neither buy (0) nor sell (1)",
		              (int)c->side);
	if ((unsigned)c->tif > BOOK_GTD)
		return reject(b, c, BOOK_REJ_BAD_TIF,
		              "time in force %d is unknown; use gtc, ioc, fok "
		              "or gtd",
		              (int)c->tif);
	if ((unsigned)c->stp > BOOK_STP_CANCEL_BOTH)
		return reject(b, c, BOOK_REJ_BAD_STP,
		              "self-trade policy %d is unknown; use cancel "
		              "taker, cancel maker or cancel both",
		              (int)c->stp);
	if (c->post_only && (c->tif == BOOK_IOC || c->tif == BOOK_FOK))
		return reject(b, c, BOOK_REJ_POST_ONLY_TIF,
		              "a post-only order cannot be ioc or fok: it "
		              "would never rest in the book");
	if (c->pages <= 0 || !multiple_of(c->pages, p->lot, b->lot_mask))
		return reject(b, c, BOOK_REJ_PAGES_LOT,
		              "pages %lld is not a positive multiple of the "
		              "lot of %lld pages",
		              (long long)c->pages, (long long)p->lot);
	if (c->pages < p->min_pages)
		return reject(b, c, BOOK_REJ_PAGES_MIN,
		              "pages %lld is below this market's minimum order "
		              "of %lld pages",
		              (long long)c->pages, (long long)p->min_pages);
	if (c->pages > p->max_pages)
		return reject(b, c, BOOK_REJ_PAGES_MAX,
		              "pages %lld is above this market's maximum order "
		              "of %lld pages",
		              (long long)c->pages, (long long)p->max_pages);
	int64_t k = -1;
	bool on_tick;
	if (c->price >= p->price_min) {
		/* price_min is on the grid, so this is the tick check too */
		int64_t d = c->price - p->price_min;
		k = d / p->tick;
		on_tick = d - k * p->tick == 0;
	} else {
		on_tick = c->price % p->tick == 0;
	}
	if (!on_tick)
		return reject(b, c, BOOK_REJ_PRICE_TICK,
		              "price %lld is not a multiple of the tick %lld",
		              (long long)c->price, (long long)p->tick);
	if (c->price < p->price_min)
		return reject(b, c, BOOK_REJ_PRICE_LOW,
		              "price %lld is below this market's lowest price "
		              "%lld",
		              (long long)c->price, (long long)p->price_min);
	if (c->price > p->price_max)
		return reject(b, c, BOOK_REJ_PRICE_HIGH,
		              "price %lld is above this market's highest price "
		              "%lld",
		              (long long)c->price, (long long)p->price_max);
	if (c->tif == BOOK_GTD && c->expires <= c->now)
		return reject(
		    b, c, BOOK_REJ_EXPIRES_PAST,
		    "gtd expiry %lld ns is not after the command time "
		    "%lld ns",
		    (long long)c->expires, (long long)c->now);
	if (tab_find(b, c->id) != NIL)
		return reject(b, c, BOOK_REJ_DUPLICATE_ID,
		              "order %llu is already open in this book; ids "
		              "must be unique",
		              (unsigned long long)c->id);
	if (b->count >= p->capacity)
		return reject(b, c, BOOK_REJ_BOOK_FULL,
		              "the book already holds its maximum of %u open "
		              "orders; try again after some are cancelled",
		              p->capacity);
	assert(k >= 0 && k < (int64_t)b->ticks);
	*li = (uint32_t)k;
	return BOOK_REJ_NONE;
}

/* Whether a FOK taker can fill in full, walking makers exactly as the
 * match would, self-trade prevention included. */
static bool fok_fillable(const struct book *b, const struct book_cmd *c,
                         uint32_t li)
{
	int opp = !c->side;
	rx_pages need = c->pages;
	for (int64_t l = b->s[opp].best; l >= 0; l = level_after(b, opp, l)) {
		if (c->side == BOOK_BUY ? l > (int64_t)li : l < (int64_t)li)
			return false;
		for (uint32_t oi = b->s[opp].lv[l].head; oi != NIL;
		     oi = b->ord[oi].next) {
			const struct order *m = &b->ord[oi];
			if (m->account == c->account) {
				if (c->stp == BOOK_STP_CANCEL_MAKER)
					continue;
				return false;
			}
			need -= m->pages;
			if (need <= 0)
				return true;
		}
	}
	return false;
}

static void cancel_taker(struct book *b, const struct book_cmd *c,
                         rx_pages left, enum book_cancel why)
{
	struct book_event ev = ev_zero;
	ev.kind = BOOK_EV_CANCELLED;
	ev.id = c->id;
	ev.account = c->account;
	ev.side = c->side;
	ev.pages = left;
	ev.price = c->price;
	ev.cancel = why;
	emit(b, &ev);
}

/* Trades the taker against the other side; returns the pages left, or -1
 * after self-trade prevention cancelled the taker. */
static rx_pages match(struct book *b, const struct book_cmd *c, uint32_t li)
{
	int opp = !c->side;
	struct side *sd = &b->s[opp];
	rx_pages left = c->pages;
	while (left > 0 && crosses(b, c->side, li)) {
		uint32_t l = (uint32_t)sd->best;
		struct level *lv = &sd->lv[l];
		rx_price price = level_price(b, l);
		while (left > 0 && lv->count > 0) {
			uint32_t oi = lv->head;
			struct order *m = &b->ord[oi];
			if (m->account == c->account) {
				if (c->stp != BOOK_STP_CANCEL_TAKER) {
					emit_order(b, BOOK_EV_CANCELLED, oi,
					           BOOK_CANCEL_SELF_TRADE);
					order_remove(b, oi);
				}
				if (c->stp == BOOK_STP_CANCEL_MAKER)
					continue;
				cancel_taker(b, c, left,
				             BOOK_CANCEL_SELF_TRADE);
				return -1;
			}
			rx_pages q = left < m->pages ? left : m->pages;
			left -= q;
			m->pages -= q;
			lv->pages -= q;
			struct book_event ev = ev_zero;
			ev.kind = BOOK_EV_TRADE;
			ev.id = c->id;
			ev.account = c->account;
			ev.side = c->side;
			ev.pages = q;
			ev.price = price;
			ev.remaining = left;
			ev.maker_id = m->id;
			ev.maker_account = m->account;
			ev.maker_remaining = m->pages;
			emit(b, &ev);
			if (m->pages == 0)
				order_remove(b, oi);
		}
	}
	return left;
}

static enum book_reject cmd_new(struct book *b, const struct book_cmd *c)
{
	uint32_t li = 0;
	enum book_reject r = validate_new(b, c, &li);
	if (r)
		return r;
	struct book_event ev = ev_zero;
	ev.kind = BOOK_EV_ACCEPTED;
	ev.id = c->id;
	ev.account = c->account;
	ev.side = c->side;
	ev.pages = c->pages;
	ev.price = c->price;
	emit(b, &ev);
	if (c->post_only && crosses(b, c->side, li)) {
		cancel_taker(b, c, c->pages, BOOK_CANCEL_POST_ONLY);
		return BOOK_REJ_NONE;
	}
	if (c->tif == BOOK_FOK && !fok_fillable(b, c, li)) {
		cancel_taker(b, c, c->pages, BOOK_CANCEL_FOK);
		return BOOK_REJ_NONE;
	}
	rx_pages left = match(b, c, li);
	if (left <= 0)
		return BOOK_REJ_NONE;
	assert(c->tif != BOOK_FOK);
	if (c->tif == BOOK_IOC) {
		cancel_taker(b, c, left, BOOK_CANCEL_IOC);
		return BOOK_REJ_NONE;
	}
	struct book_order o = {
	    .id = c->id,
	    .account = c->account,
	    .side = c->side,
	    .tif = c->tif,
	    .stp = c->stp,
	    .post_only = c->post_only,
	    .price = c->price,
	    .pages = left,
	    .expires = c->expires,
	};
	order_rest(b, &o, li);
	return BOOK_REJ_NONE;
}

static enum book_reject cmd_cancel(struct book *b, const struct book_cmd *c)
{
	uint32_t oi = c->id ? tab_find(b, c->id) : NIL;
	if (oi == NIL)
		return reject(b, c, BOOK_REJ_UNKNOWN_ORDER,
		              "order %llu is not open in this book: it was "
		              "filled, cancelled, expired or never placed",
		              (unsigned long long)c->id);
	emit_order(b, BOOK_EV_CANCELLED, oi, BOOK_CANCEL_USER);
	order_remove(b, oi);
	return BOOK_REJ_NONE;
}

static enum book_reject cmd_reduce(struct book *b, const struct book_cmd *c)
{
	uint32_t oi = c->id ? tab_find(b, c->id) : NIL;
	if (oi == NIL)
		return reject(b, c, BOOK_REJ_UNKNOWN_ORDER,
		              "order %llu is not open in this book: it was "
		              "filled, cancelled, expired or never placed",
		              (unsigned long long)c->id);
	struct order *r = &b->ord[oi];
	if (c->pages <= 0 || c->pages >= r->pages)
		return reject(b, c, BOOK_REJ_REDUCE_NOT_LESS,
		              "cannot reduce order %llu to %lld pages: the new "
		              "quantity must be above 0 and below the %lld "
		              "pages it has left",
		              (unsigned long long)c->id, (long long)c->pages,
		              (long long)r->pages);
	if (!multiple_of(c->pages, b->p.lot, b->lot_mask))
		return reject(b, c, BOOK_REJ_REDUCE_LOT,
		              "cannot reduce order %llu to %lld pages: not a "
		              "multiple of the lot of %lld pages",
		              (unsigned long long)c->id, (long long)c->pages,
		              (long long)b->p.lot);
	struct book_event ev = ev_zero;
	ev.kind = BOOK_EV_REDUCED;
	ev.id = r->id;
	ev.account = r->account;
	ev.side = (enum book_side)r->side;
	ev.pages = c->pages;
	ev.price = level_price(b, r->level);
	ev.remaining = r->pages;
	b->s[r->side].lv[r->level].pages -= r->pages - c->pages;
	r->pages = c->pages;
	emit(b, &ev);
	return BOOK_REJ_NONE;
}

enum book_reject book_apply(struct book *b, const struct book_cmd *c,
                            book_emit_fn emit_fn, void *ctx)
{
	b->emit = emit_fn;
	b->ctx = ctx;
	b->now = c->now;
	expire_due(b);
	enum book_reject r;
	switch (c->kind) {
	case BOOK_CMD_NEW:
		r = cmd_new(b, c);
		break;
	case BOOK_CMD_CANCEL:
		r = cmd_cancel(b, c);
		break;
	case BOOK_CMD_REDUCE:
		r = cmd_reduce(b, c);
		break;
	case BOOK_CMD_EXPIRE:
		r = BOOK_REJ_NONE;
		break;
	default:
		r = reject(
		    b, c, BOOK_REJ_BAD_KIND,
		    "command kind %d is unknown; use new, cancel, reduce "
		    "or expire",
		    (int)c->kind);
		break;
	}
	/* Not crossed after any command. */
	assert(b->s[0].best < 0 || b->s[1].best < 0 ||
	       b->s[0].best < b->s[1].best);
	b->emit = NULL;
	b->ctx = NULL;
	return r;
}

const char *book_reject_name(enum book_reject r)
{
	static const char *const names[BOOK_REJ_COUNT_] = {
	    [BOOK_REJ_NONE] = "none",
	    [BOOK_REJ_BAD_KIND] = "bad_kind",
	    [BOOK_REJ_BAD_ID] = "bad_id",
	    [BOOK_REJ_BAD_SIDE] = "bad_side",
	    [BOOK_REJ_BAD_TIF] = "bad_tif",
	    [BOOK_REJ_BAD_STP] = "bad_stp",
	    [BOOK_REJ_POST_ONLY_TIF] = "post_only_tif",
	    [BOOK_REJ_PAGES_LOT] = "pages_lot",
	    [BOOK_REJ_PAGES_MIN] = "pages_min",
	    [BOOK_REJ_PAGES_MAX] = "pages_max",
	    [BOOK_REJ_PRICE_TICK] = "price_tick",
	    [BOOK_REJ_PRICE_LOW] = "price_low",
	    [BOOK_REJ_PRICE_HIGH] = "price_high",
	    [BOOK_REJ_EXPIRES_PAST] = "expires_past",
	    [BOOK_REJ_DUPLICATE_ID] = "duplicate_id",
	    [BOOK_REJ_BOOK_FULL] = "book_full",
	    [BOOK_REJ_UNKNOWN_ORDER] = "unknown_order",
	    [BOOK_REJ_REDUCE_NOT_LESS] = "reduce_not_less",
	    [BOOK_REJ_REDUCE_LOT] = "reduce_lot",
	};
	if ((unsigned)r >= BOOK_REJ_COUNT_ || !names[r])
		return "unknown";
	return names[r];
}

const char *book_cancel_name(enum book_cancel c)
{
	switch (c) {
	case BOOK_CANCEL_USER:
		return "user";
	case BOOK_CANCEL_IOC:
		return "ioc_remainder";
	case BOOK_CANCEL_FOK:
		return "fok_not_fillable";
	case BOOK_CANCEL_POST_ONLY:
		return "post_only_would_take";
	case BOOK_CANCEL_SELF_TRADE:
		return "self_trade";
	}
	return "unknown";
}

/* ---- queries ---- */

static void order_copy(const struct book *b, uint32_t oi, struct book_order *o)
{
	const struct order *r = &b->ord[oi];
	o->id = r->id;
	o->account = r->account;
	o->side = (enum book_side)r->side;
	o->tif = (enum book_tif)r->tif;
	o->stp = (enum book_stp)r->stp;
	o->post_only = r->post_only;
	o->price = level_price(b, r->level);
	o->pages = r->pages;
	o->expires = r->expires;
}

bool book_get(const struct book *b, uint64_t id, struct book_order *out)
{
	uint32_t oi = id ? tab_find(b, id) : NIL;
	if (oi == NIL)
		return false;
	order_copy(b, oi, out);
	return true;
}

static bool best(const struct book *b, int side, rx_price *price,
                 rx_pages *pages)
{
	int64_t l = b->s[side].best;
	if (l < 0)
		return false;
	if (price)
		*price = level_price(b, (uint32_t)l);
	if (pages)
		*pages = b->s[side].lv[l].pages;
	return true;
}

bool book_best_bid(const struct book *b, rx_price *price, rx_pages *pages)
{
	return best(b, BOOK_BUY, price, pages);
}

bool book_best_ask(const struct book *b, rx_price *price, rx_pages *pages)
{
	return best(b, BOOK_SELL, price, pages);
}

size_t book_depth(const struct book *b, enum book_side side,
                  struct book_level *out, size_t max)
{
	if (side != BOOK_BUY && side != BOOK_SELL)
		return 0;
	size_t n = 0;
	for (int64_t l = b->s[side].best; l >= 0 && n < max;
	     l = level_after(b, side, l)) {
		const struct level *lv = &b->s[side].lv[l];
		out[n].price = level_price(b, (uint32_t)l);
		out[n].pages = lv->pages;
		out[n].orders = lv->count;
		n++;
	}
	return n;
}

size_t book_count(const struct book *b)
{
	return b->count;
}

uint64_t book_seq(const struct book *b)
{
	return b->seq;
}

void book_set_seq(struct book *b, uint64_t seq)
{
	b->seq = seq;
}

void book_foreach(const struct book *b,
                  void (*fn)(void *ctx, const struct book_order *o), void *ctx)
{
	for (int side = 0; side < 2; side++) {
		for (int64_t l = b->s[side].best; l >= 0;
		     l = level_after(b, side, l)) {
			for (uint32_t oi = b->s[side].lv[l].head; oi != NIL;
			     oi = b->ord[oi].next) {
				struct book_order o;
				order_copy(b, oi, &o);
				fn(ctx, &o);
			}
		}
	}
}

int book_insert_resting(struct book *b, const struct book_order *o, char *err,
                        size_t errlen)
{
	const struct book_params *p = &b->p;
	if (o->id == 0)
		return err_set(err, errlen, "order id 0 is reserved");
	if (o->side != BOOK_BUY && o->side != BOOK_SELL)
		return err_set(err, errlen, "order %llu: side %d is unknown",
		               (unsigned long long)o->id, (int)o->side);
	if (o->tif != BOOK_GTC && o->tif != BOOK_GTD)
		return err_set(err, errlen,
		               "order %llu: only gtc and gtd orders rest, not "
		               "time in force %d",
		               (unsigned long long)o->id, (int)o->tif);
	if ((unsigned)o->stp > BOOK_STP_CANCEL_BOTH)
		return err_set(err, errlen,
		               "order %llu: self-trade policy %d is unknown",
		               (unsigned long long)o->id, (int)o->stp);
	if (o->pages <= 0 || o->pages % p->lot || o->pages > p->max_pages)
		return err_set(err, errlen,
		               "order %llu: %lld pages left is not a positive "
		               "multiple of the lot %lld up to %lld",
		               (unsigned long long)o->id, (long long)o->pages,
		               (long long)p->lot, (long long)p->max_pages);
	if (o->price % p->tick || o->price < p->price_min ||
	    o->price > p->price_max)
		return err_set(err, errlen,
		               "order %llu: price %lld is off this book's grid "
		               "(%lld to %lld by %lld)",
		               (unsigned long long)o->id, (long long)o->price,
		               (long long)p->price_min, (long long)p->price_max,
		               (long long)p->tick);
	if (tab_find(b, o->id) != NIL)
		return err_set(err, errlen, "order %llu is already in the book",
		               (unsigned long long)o->id);
	if (b->count >= p->capacity)
		return err_set(err, errlen,
		               "order %llu: the book is full at %u orders",
		               (unsigned long long)o->id, p->capacity);
	uint32_t li = (uint32_t)((o->price - p->price_min) / p->tick);
	if (crosses(b, o->side, li))
		return err_set(err, errlen,
		               "order %llu at %lld would cross the other side; "
		               "the open orders are not a consistent book",
		               (unsigned long long)o->id, (long long)o->price);
	order_rest(b, o, li);
	return 0;
}
