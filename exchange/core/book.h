/*
 * book.h — the order book of one market: validation, price-time matching,
 * self-trade prevention, GTD expiry, snapshot and restore.
 *
 * The book is pure: it reads no clock, does no I/O and touches no globals.
 * A caller feeds it commands (struct book_cmd), each carrying its own `now`;
 * the book answers with events (struct book_event) through a callback, each
 * numbered by the book's sequence. The same command stream from the same
 * starting state always gives the same events, so the owner (ramexd's writer
 * thread) can persist the stream and rebuild a book by replaying it, by
 * restoring a snapshot, or by re-inserting its open orders (book_insert_
 * resting) in priority order.
 *
 * The book owns its orders, its price levels and its id table, all allocated
 * once by book_new for `capacity` orders: applying a command never allocates.
 * Order and account ids come from the caller (the database), never from the
 * book. A book is not thread-safe; one writer owns it.
 *
 * Rules every caller can rely on (see exchange/core/README.md for why):
 *  - Prices are on the grid price_min + k * tick, k in [0, ticks), and
 *    multiples of tick; pages are multiples of lot in [min_pages, max_pages].
 *  - Trades happen at the resting (maker) order's price; price, then time,
 *    priority; partial fills.
 *  - Before every command, every resting GTD order with expires <= cmd.now
 *    expires (BOOK_EV_EXPIRED, in order of expiry time then order id).
 *    BOOK_CMD_EXPIRE does only that.
 *  - Self-trade prevention is the taker's choice (enum book_stp): an
 *    account's orders never trade with each other.
 *  - A new order is answered by exactly one ACCEPTED or REJECTED first;
 *    after ACCEPTED come its trades and self-trade cancels in the order they
 *    happen, then at most one CANCELLED of the taker. An accepted order
 *    with pages left and no CANCELLED of its own rests in the book.
 */
#ifndef RAMEX_BOOK_H
#define RAMEX_BOOK_H

#include "common/units.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Limits. The price grid of one book has at most BOOK_MAX_TICKS levels per
 * side: levels are an array indexed by tick (24 bytes each, per side, plus a
 * bitmap), so 2^20 ticks cost 48 MiB of address space per book, touched only
 * where orders rest. A market that needs more must use a coarser tick.
 * BOOK_MAX_CAPACITY bounds the open orders of one book (the order pool, id
 * table and expiry heap are allocated up front, about 72 bytes per order of
 * capacity, touched only as orders arrive).
 */
#define BOOK_MAX_TICKS    (INT64_C(1) << 20)
#define BOOK_MAX_CAPACITY (UINT32_C(1) << 26)

/* Room for a rejection's message, formatted with the offending values. */
#define BOOK_MSG_MAX 160

enum book_side { BOOK_BUY = 0, BOOK_SELL = 1 };

enum book_tif {
	BOOK_GTC = 0, /* good till cancelled */
	BOOK_IOC = 1, /* immediate or cancel: trade what you can, cancel rest */
	BOOK_FOK = 2, /* fill or kill: trade it all now or nothing at all */
	BOOK_GTD = 3, /* good till `expires` (ns, exclusive: gone at expires) */
};

/*
 * Self-trade prevention: what happens when a taker would trade with a
 * resting order of the same account. The taker's choice decides.
 */
enum book_stp {
	BOOK_STP_CANCEL_TAKER = 0, /* the taker's remainder is cancelled */
	BOOK_STP_CANCEL_MAKER = 1, /* the resting order is cancelled, matching
	                              goes on */
	BOOK_STP_CANCEL_BOTH = 2,  /* both are cancelled */
};

struct book_params {
	rx_price tick;      /* price step, > 0 */
	rx_pages lot;       /* quantity step, > 0 */
	rx_pages min_pages; /* smallest new order, a multiple of lot, >= lot */
	rx_pages max_pages; /* largest new order, a multiple of lot */
	rx_price price_min; /* lowest limit price, a multiple of tick, >= 0 */
	rx_price price_max; /* highest limit price, a multiple of tick */
	uint32_t capacity;  /* most open orders at once, 1..BOOK_MAX_CAPACITY */
};

/*
 * Checks that `p` describes a book that can exist: the steps and bounds
 * above, at most BOOK_MAX_TICKS prices, max_pages * price_max fits in int64
 * (so pages x price of any order never overflows), and capacity * max_pages
 * fits in int64 (so a level's total never overflows). Returns 0, or -1 with
 * a message in err.
 */
int book_params_check(const struct book_params *p, char *err, size_t errlen);

struct book;

/* Allocates an empty book; NULL with a message in err when params are
 * invalid or memory is short. */
struct book *book_new(const struct book_params *p, char *err, size_t errlen);
void book_free(struct book *b);
const struct book_params *book_params_of(const struct book *b);

enum book_cmd_kind {
	BOOK_CMD_NEW = 0,    /* place a limit order */
	BOOK_CMD_CANCEL = 1, /* cancel order `id` */
	BOOK_CMD_REDUCE = 2, /* order `id` keeps its priority and is left with
	                        `pages` remaining (0 < pages < remaining) */
	BOOK_CMD_EXPIRE = 3, /* only expire GTD orders up to `now` */
};

/* One command. Fields a kind does not use are ignored. */
struct book_cmd {
	enum book_cmd_kind kind;
	rx_time_ns now;  /* every kind: the time of the command */
	uint64_t id;     /* NEW, CANCEL, REDUCE: the order; 0 is never valid */
	int64_t account; /* NEW */
	enum book_side side; /* NEW */
	enum book_tif tif;   /* NEW */
	enum book_stp stp;   /* NEW */
	bool post_only;      /* NEW: cancel instead of taking (GTC/GTD only) */
	rx_pages pages;      /* NEW: quantity; REDUCE: the new remaining */
	rx_price price;      /* NEW: limit price */
	rx_time_ns expires;  /* NEW with GTD: must be > now; else ignored */
};

enum book_event_kind {
	BOOK_EV_ACCEPTED = 0,
	BOOK_EV_REJECTED = 1,
	BOOK_EV_TRADE = 2,
	BOOK_EV_CANCELLED = 3,
	BOOK_EV_EXPIRED = 4,
	BOOK_EV_REDUCED = 5,
};

/* Why a command was refused. A rejected command changes nothing but the
 * sequence (and the expiries that run before every command). */
enum book_reject {
	BOOK_REJ_NONE = 0,
	BOOK_REJ_BAD_KIND,        /* unknown command kind */
	BOOK_REJ_BAD_ID,          /* id 0 */
	BOOK_REJ_BAD_SIDE,        /* side is neither buy nor sell */
	BOOK_REJ_BAD_TIF,         /* unknown time in force */
	BOOK_REJ_BAD_STP,         /* unknown self-trade policy */
	BOOK_REJ_POST_ONLY_TIF,   /* post-only with IOC or FOK */
	BOOK_REJ_PAGES_LOT,       /* pages not a positive multiple of lot */
	BOOK_REJ_PAGES_MIN,       /* pages below min_pages */
	BOOK_REJ_PAGES_MAX,       /* pages above max_pages */
	BOOK_REJ_PRICE_TICK,      /* price not a multiple of tick */
	BOOK_REJ_PRICE_LOW,       /* price below price_min */
	BOOK_REJ_PRICE_HIGH,      /* price above price_max */
	BOOK_REJ_EXPIRES_PAST,    /* GTD whose expires <= now */
	BOOK_REJ_DUPLICATE_ID,    /* an open order already has this id */
	BOOK_REJ_BOOK_FULL,       /* capacity open orders already */
	BOOK_REJ_UNKNOWN_ORDER,   /* cancel/reduce of an id that is not open */
	BOOK_REJ_REDUCE_NOT_LESS, /* reduce to >= remaining (or <= 0) */
	BOOK_REJ_REDUCE_LOT,      /* reduce to a non-multiple of lot */
	BOOK_REJ_COUNT_
};

/* Why an order left the book without trading all of it. */
enum book_cancel {
	BOOK_CANCEL_USER = 0,      /* BOOK_CMD_CANCEL */
	BOOK_CANCEL_IOC = 1,       /* the unfilled rest of an IOC */
	BOOK_CANCEL_FOK = 2,       /* a FOK that could not fill in full */
	BOOK_CANCEL_POST_ONLY = 3, /* a post-only that would have taken */
	BOOK_CANCEL_SELF_TRADE = 4 /* self-trade prevention (taker or maker) */
};

/*
 * One event. Which fields mean something depends on kind; the others are 0.
 *
 *  kind       id / account / side   pages              other
 *  ACCEPTED   the new order         its pages          price (its limit)
 *  REJECTED   the command's id      -                  cmd, reject, message
 *  TRADE      the taker             traded pages       price (the maker's),
 *                                                       remaining (taker's),
 *                                                       maker_* fields
 *  CANCELLED  the order             pages it had left  cancel (the reason),
 *                                                       price (its limit)
 *  EXPIRED    the order             pages it had left  price (its limit)
 *  REDUCED    the order             the new remaining  remaining (before),
 *                                                       price (its limit)
 *
 * Every event carries seq and now. A CANCELLED whose id is not the taker's
 * during a new order is a resting order removed by self-trade prevention.
 */
struct book_event {
	uint64_t seq; /* 1, 2, 3, ... per book, no gaps */
	enum book_event_kind kind;
	rx_time_ns now; /* the command's now */
	uint64_t id;
	int64_t account;
	enum book_side side; /* TRADE: the taker's side */
	rx_pages pages;
	rx_price price;
	rx_pages remaining;
	uint64_t maker_id; /* TRADE only */
	int64_t maker_account;
	rx_pages maker_remaining;
	enum book_cmd_kind cmd; /* REJECTED: what was refused */
	enum book_reject reject;
	enum book_cancel cancel;
	/* REJECTED: a sentence a person can act on, e.g. "pages 150 is not a
	 * multiple of the lot 100"; valid only during the callback. */
	const char *message;
};

typedef void (*book_emit_fn)(void *ctx, const struct book_event *ev);

/*
 * Applies one command, emitting its events through emit(ctx, ev) in order
 * (emit may be NULL). Returns BOOK_REJ_NONE, or the reason the command was
 * rejected (also sent as a REJECTED event). The callback must not call
 * book_apply or change the book; queries made from it see the book halfway
 * through the command, so copy what you need from the event instead.
 */
enum book_reject book_apply(struct book *b, const struct book_cmd *c,
                            book_emit_fn emit, void *ctx);

/* A static name for a reason, e.g. "pages_lot"; for logs and the API. */
const char *book_reject_name(enum book_reject r);
const char *book_cancel_name(enum book_cancel c);

/* One open order, as the queries and book_insert_resting see it. */
struct book_order {
	uint64_t id;
	int64_t account;
	enum book_side side;
	enum book_tif tif; /* GTC or GTD for a resting order */
	enum book_stp stp;
	bool post_only;
	rx_price price;
	rx_pages pages;     /* remaining */
	rx_time_ns expires; /* GTD only, else 0 */
};

/* Copies open order `id` to *out; false when it is not open. O(1). */
bool book_get(const struct book *b, uint64_t id, struct book_order *out);

/* Best bid / best ask: false when that side is empty; else its price and
 * the total pages at that price. O(1). */
bool book_best_bid(const struct book *b, rx_price *price, rx_pages *pages);
bool book_best_ask(const struct book *b, rx_price *price, rx_pages *pages);

struct book_level {
	rx_price price;
	rx_pages pages;  /* total remaining at this price */
	uint32_t orders; /* how many orders */
};

/* Fills out[0..n) with the best `max` levels of `side`, best first; returns
 * n. O(n) plus a bitmap scan. */
size_t book_depth(const struct book *b, enum book_side side,
                  struct book_level *out, size_t max);

/* Open orders in the book. */
size_t book_count(const struct book *b);

/* The sequence number of the last event (0 for a new book). After
 * rebuilding with book_insert_resting, set it to the last persisted one. */
uint64_t book_seq(const struct book *b);
void book_set_seq(struct book *b, uint64_t seq);

/*
 * Puts an already accepted order back in the book at the tail of its price
 * level, with o->pages remaining, without matching and without events: for
 * rebuilding a book from persisted open orders, inserted in priority order.
 * Returns 0, or -1 with a message when the order is invalid for this book
 * (off grid, id 0 or already open, book full, pages not a positive multiple
 * of lot, tif not GTC/GTD) or would cross the other side. A GTD order past
 * its expiry is taken and expires, with its event, at the next command.
 */
int book_insert_resting(struct book *b, const struct book_order *o, char *err,
                        size_t errlen);

/* Calls fn for every open order: bids best price first, then asks, each
 * level in time priority — the order book_insert_resting needs. */
void book_foreach(const struct book *b,
                  void (*fn)(void *ctx, const struct book_order *o), void *ctx);

/*
 * Snapshot (book_snap.c): the whole state (params, sequence, every open
 * order in priority) as bytes in a fixed little-endian layout. book_snapshot_size
 * gives the bytes needed; book_snapshot writes them and returns that size,
 * or 0 when len is too small. book_restore rebuilds a book equal to the one
 * snapshotted (same future events for the same commands), or returns NULL
 * with a message when the bytes are not a valid snapshot.
 */
size_t book_snapshot_size(const struct book *b);
size_t book_snapshot(const struct book *b, void *buf, size_t len);
struct book *book_restore(const void *buf, size_t len, char *err,
                          size_t errlen);

#endif
