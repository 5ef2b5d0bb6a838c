/*
 * book_fixture.h — what the order book's named suites (test_book,
 * test_book_recovery) share: a small book (params, mk), the events of the last
 * command (R, filled by run), commands built by name (order, gtc, cancel,
 * reduce), and checks of the events (place, expect_trade, expect_cancel,
 * remaining). Test code only; the names are kept short as the suites'
 * bodies use them.
 */
#ifndef RAMEX_TESTS_BOOK_FIXTURE_H
#define RAMEX_TESTS_BOOK_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "exchange/core/book.h"

#define MAXEV 64

/* the events of the last command given to run(), messages copied */
struct rec {
	struct book_event ev[MAXEV];
	char msg[MAXEV][BOOK_MSG_MAX];
	size_t n;
};

extern struct rec R;
/* the time a command is given at unless it says otherwise */
extern const rx_time_ns NOW;

/* tick 10, lot 100, 100..100000 pages, prices 10..10000, 64 orders */
struct book_params params(void);
/* a book of params() */
struct book *mk(void);
/* applies c (at NOW unless c.now is set), its events into R */
enum book_reject run(struct book *b, struct book_cmd c);
struct book_cmd order(uint64_t id, int64_t acct, enum book_side side,
                      rx_pages pages, rx_price price, enum book_tif tif);
struct book_cmd gtc(uint64_t id, int64_t acct, enum book_side side,
                    rx_pages pages, rx_price price);
struct book_cmd cancel(uint64_t id);
struct book_cmd reduce(uint64_t id, rx_pages pages);
/* runs c, which must be accepted (after any expiries due) */
void place(struct book *b, struct book_cmd c);
/* R.ev[i] is this trade / this cancel */
void expect_trade(size_t i, uint64_t maker, uint64_t taker, rx_pages pages,
                  rx_price price, rx_pages mrem, rx_pages trem);
void expect_cancel(size_t i, uint64_t id, rx_pages pages, enum book_cancel why);
/* the open pages of order id, -1 when it is not in the book */
rx_pages remaining(struct book *b, uint64_t id);

#endif
