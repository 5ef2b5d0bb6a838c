/*
 * writer_apply.h — the books and what changes them: every market's order
 * book (exchange/core/book.h), the cache of accounts, the ids the writer
 * hands out, and the commands applied to them — place, cancel, reduce,
 * expire, read a book, create a market — each turned into the rows of its
 * batch (writer_rows.h) and an answer. Also the one rule of who may act
 * for which account (apply_may_act_for), and the rebuild of every book
 * from the database (apply_load).
 *
 * Applying changes the books before the batch commits; a batch that then
 * fails sets need_rebuild, and the books are loaded again from what the
 * database holds before the next batch (writer.h). Single-threaded: only
 * the writer's thread touches a struct apply_books.
 */
#ifndef RAMEX_WRITER_APPLY_H
#define RAMEX_WRITER_APPLY_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "exchange/core/book.h"
#include "exchange/owner.h"
#include "exchange/writer_rows.h"

struct writer_cmd;

struct apply_acct {
	char kind; /* 'n'ode, 'o'perator, 'e'xchange; 0 = not known */
	int64_t team;
};

/* A market owned whose stored limits no book can hold (book_params_check:
 * a price grid past BOOK_MAX_TICKS, max_pages x price_max past 64 bits),
 * stored by an older version or by hand. It has no book: its orders and
 * its book are answered 409 market-held with why and what to do, its open
 * orders stay as they are, and the other markets are served. */
struct apply_held {
	int64_t id;
	char name[16];
	char why[BOOK_MSG_MAX + 32]; /* the book's reason, with an order id */
};

struct apply_books {
	/* the books of the markets owned, loaded from the database */
	struct rows_market m[ROWS_MAX_MARKETS];
	int nm;
	struct apply_held held[ROWS_MAX_MARKETS];
	int nheld;
	/* the markets owned (owner.h) and their epochs: apply_load loads
	 * those whose epoch is still theirs; NULL owner: none */
	struct owner *owner;
	struct owner_held own[ROWS_MAX_MARKETS];
	int nown;
	uint32_t book_capacity; /* of each book (writer_opts) */
	/* the accounts, by id (an array: ids are dense) */
	struct apply_acct *acct;
	size_t nacct;
	/* ids come in blocks from the database (0016_id_blocks.sql): the next
	 * order id and the end of its block (exclusive), the same for trades;
	 * a trade's contract has the trade's id (0010_contract_is_trade.sql) */
	uint64_t next_order, order_end, next_trade, trade_end;
	PGconn **idconn; /* where blocks are taken: the lookup connection */
	bool ids_lost;   /* a block could not be taken: the batch fails */
	/* memory runs ahead of the database: load again before the next */
	bool need_rebuild;
	/* events of the command being applied */
	struct book_event *ev;
	size_t nev, capev;
	char reject_msg[BOOK_MSG_MAX];
};

/* Ids taken with one nextval each (0016_id_blocks.sql): a block holds
 * APPLY_ID_BLOCK ids, so the order path costs a query every 65 536 ids. */
#define APPLY_ID_BLOCK 65536

/* Rebuilds the book of every market owned from the open orders on c, in
 * priority order, and reads the accounts. A market whose limits no book
 * can hold is held (struct apply_held), logged by name. A market whose
 * epoch is no longer the one it was taken at was taken by another
 * instance: it is dropped (and the owner told). -1 with err set. Ids go on from the blocks
 * held: none is ever handed out twice, even after a failed batch. */
int apply_load(struct apply_books *bk, PGconn *c, char *err, size_t errlen);
/* Frees the books, the accounts and the event buffer. */
void apply_free(struct apply_books *bk);

struct apply_acct *apply_acct_get(struct apply_books *bk, int64_t id);
int apply_acct_put(struct apply_books *bk, int64_t id, char kind, int64_t team);
/* The account a command acts for: its own, or the principal's. */
int64_t apply_cmd_account(const struct writer_cmd *c);
/* 0 when the principal of c may act for `account`; else answers c (404,
 * 403) and returns -1. */
int apply_may_act_for(struct apply_books *bk, struct writer_cmd *c,
                      int64_t account);

/* Before a batch of `orders` new orders: takes the blocks of ids it may
 * need (a new order block when fewer ids are left, a new trade block when
 * fewer than APPLY_ID_BLOCK / 16 are), so that applying it seldom queries.
 * A batch whose trades outrun the block takes one more as it goes; when
 * that fails, ids_lost is set and the batch must fail. -1 with err set. */
int apply_ids_reserve(struct apply_books *bk, int orders, char *err,
                      size_t errlen);

/* WR_NEW, WR_CANCEL and WR_REDUCE: through the book, rows into b, an
 * answer into c. */
void apply_new(struct apply_books *bk, struct rows_batch *b,
               struct writer_cmd *c, rx_time_ns now);
void apply_change(struct apply_books *bk, struct rows_batch *b,
                  struct writer_cmd *c, rx_time_ns now);
/* WR_DEPTH: answered from the book. */
void apply_depth(struct apply_books *bk, struct writer_cmd *c);
/* WR_MARKET: one INSERT on *lconn, which commits by itself; a lost
 * connection is closed (*lconn NULL) and answered outcome-unknown. */
void apply_create_market(struct apply_books *bk, PGconn **lconn,
                         struct writer_cmd *c);
/* WR_OWN, WR_DISOWN: a market taken or lost; the books are rebuilt
 * (need_rebuild) before any other command. */
void apply_own(struct apply_books *bk, struct writer_cmd *c);
/* Expires the GTD orders of every book due at `now`: their rows into b. */
void apply_expire(struct apply_books *bk, struct rows_batch *b, rx_time_ns now);

#endif
