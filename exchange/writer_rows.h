/*
 * writer_rows.h — what a batch of the writer writes and answers, as data:
 * the rows it collects (orders, trades, contracts, events to publish), the
 * PostgreSQL array columns they become (one array per column, for the
 * `unnest` statements), the statements themselves (rows_stmts: their
 * columns are filled here, in the same order), and the JSON texts of the
 * answers (an order as placed, a fill, a contract, problem+json).
 *
 * Pure: no connection, no clock, no global. Out of memory while a batch's
 * rows grow is fatal (assert), as for the events: a batch cannot be half
 * written. Used by writer_apply (which fills rows), writer_idem (replayed
 * answers), writer_pipe (failure answers) and writer.c (columns).
 */
#ifndef RAMEX_WRITER_ROWS_H
#define RAMEX_WRITER_ROWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "exchange/core/book.h"
#include "exchange/core/contract.h"
#include "exchange/pgarr.h"

struct writer_cmd;

#define ROWS_MAX_MARKETS 256

/* A market and its book, as the writer holds it. */
struct rows_market {
	int64_t id;
	char name[16];
	bool perm;
	int perm_year;      /* perm: the YYYY of perm-YYYY */
	int64_t term_end_s; /* perm: the end of its term, unix seconds */
	char term_end[32];  /* ISO 8601, "" for spot */
	int64_t notice_period_s, breach_penalty, delivery_deadline_s;
	struct book *book;
	uint64_t seq_saved;
	int64_t epoch; /* of its take (schema/0017): every batch's fence */
};

/* Rows are plain structs, written out as text in one pass when the batch
 * is sent (jansson objects per row cost more than the rest of the batch). */
struct rows_order {
	uint64_t id;
	bool is_new; /* an INSERT; else an UPDATE of an earlier batch's order */
	bool post_only;
	enum book_side side;
	enum book_tif tif;
	enum book_stp stp;
	int64_t market_id, account_id, price, pages, remaining;
	int64_t filled; /* new: filled; update: filled_add */
	int64_t expires, priority, created, updated;
	const char *status; /* static strings */
	const char *reason; /* static string or NULL */
	/* new: why the order was cancelled as it was placed, or NULL: the
	 * status of its first answer (0007_order_path.sql) */
	const char *placed_reason;
	char coid[65];
	char placed_by[48];
	/* cancelled by a person or an agent (WR_CANCEL): its scope and note,
	 * pointing into the command, which lives until its batch is answered;
	 * NULL otherwise (0014_people.sql) */
	const char *cancelled_by, *cancel_note;
};

struct rows_trade {
	uint64_t id, taker, maker;
	int64_t market_id, seq, buyer, seller, price, pages, ts;
	int64_t maker_remaining; /* the maker's pages left after it */
	enum book_side side;
};

/* One fill as the answer to POST /v1/orders shows it. */
struct rows_fill {
	int64_t trade_id, price, pages, taker, maker, buyer, seller;
	int64_t maker_remaining, taker_remaining, contract_id;
	enum book_side side;
	const char *market;
};

struct rows_contract {
	uint64_t id, trade_id;
	const struct rows_market *m;
	int64_t buyer, seller, pages, price;
	struct contract k;
	rx_time_ns now;
};

/* An event to publish once the batch commits (or, shared, to write in it:
 * rows_event_cols). */
struct rows_event {
	const char *type;
	int64_t a, ta, b, tb;
	size_t off; /* its JSON text in batch.pubtext, NUL-terminated */
};

/* A growing text buffer. */
struct rows_buf {
	char *p;
	size_t n, cap;
};

/* The columns of rows to write, each a PostgreSQL array literal
 * ("{1,2,NULL}"), for INSERT ... SELECT FROM unnest($1::bigint[], ...):
 * cheaper for the server to read than JSON, and for us to write. */
#define ROWS_COLS_MAX 25
struct rows_cols {
	struct pgarr c[ROWS_COLS_MAX];
	size_t rows;
};

#define ROWS_VEC(T)                                                            \
	struct {                                                               \
		T *v;                                                          \
		size_t n, cap;                                                 \
	}

/* Appends a zeroed element to a ROWS_VEC and points at it. */
#define ROWS_PUSH(vec)                                                         \
	(((vec).n == (vec).cap                                                 \
	      ? rows_vec_grow((void **)&(vec).v, &(vec).cap, sizeof *(vec).v)  \
	      : (void)0),                                                      \
	 memset(&(vec).v[(vec).n], 0, sizeof *(vec).v), &(vec).v[(vec).n++])

void rows_vec_grow(void **v, size_t *cap, size_t elem);

struct rows_omap {
	uint64_t id;
	size_t row; /* index into batch.orders */
};

/* Per-batch scratch: the rows to write and the events to publish. */
struct rows_batch {
	ROWS_VEC(struct rows_order) orders;
	ROWS_VEC(struct rows_trade) trades;
	ROWS_VEC(struct rows_contract) contracts;
	ROWS_VEC(struct rows_event) pub;
	struct rows_cols idem; /* the idempotency rows */
	struct rows_buf pubtext;
	struct rows_omap *map;
	size_t mapcap, mapn;
	bool touched[ROWS_MAX_MARKETS];
	int accepted, rejected, ntrades;
};

void rows_batch_init(struct rows_batch *b);
void rows_batch_free(struct rows_batch *b);
/* The row of order `id` in this batch, made an update row when it is an
 * order of an earlier batch. The pointer lasts until the next row. */
struct rows_order *rows_order_row(struct rows_batch *b, uint64_t id,
                                  rx_time_ns now);

/* --- text -------------------------------------------------------------- */

void rows_put(struct rows_buf *b, const char *s, size_t n);
void rows_s(struct rows_buf *b, const char *s);
/* ,"key":value — an integer, a string or null for NULL, a boolean */
void rows_ki(struct rows_buf *b, const char *key, int64_t v);
void rows_ks(struct rows_buf *b, const char *key, const char *v);
void rows_kb(struct rows_buf *b, const char *key, bool v);
/* opens an object or array ('{' or '['), after a comma when one is due */
void rows_open(struct rows_buf *b, char c);
/* the text, which the caller frees; the buffer is empty after */
char *rows_take(struct rows_buf *b);

/* ISO 8601 UTC of unix seconds */
void rows_iso_time(int64_t unix_s, char out[32]);

/* --- answers ----------------------------------------------------------- */

/* problem+json text (malloc'd) */
char *rows_problem(int status, const char *slug, const char *title,
                   const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Sets c's answer (frees an earlier one); body is malloc'd, taken. */
void rows_set_answer(struct writer_cmd *c, int status, char *body);
void rows_fail_cmd(struct writer_cmd *c, int status, const char *slug,
                   const char *title, const char *detail);
/* The answer to a placed order: the order as placed, and the JSON texts
 * of its fills (rows_fill_view, comma-separated). */
char *rows_order_answer(const struct rows_order *r, const char *market,
                        const struct rows_buf *fills);
void rows_fill_view(struct rows_buf *o, const struct rows_fill *f);
/* The contract event's data: the contract row, and its market's name. */
void rows_contract_json(struct rows_buf *o, const struct rows_contract *c,
                        bool market);

/* --- statements and columns -------------------------------------------- */

/* The statements of a batch, prepared once per connection; each takes one
 * array per column (struct rows_cols), filled by the rows_*_cols below. */
enum rows_stmt_id {
	ROWS_FENCE, /* first: the markets' epochs checked, rows share-locked */
	ROWS_INS_ORDERS,
	ROWS_UPD_ORDERS,
	ROWS_INS_TRADES,
	ROWS_INS_CONTRACTS,
	ROWS_SEQ,
	ROWS_EVENTS, /* shared = 1 only: the events, in their batch (events_db.h) */
	ROWS_IDEM,
	ROWS_NSTMT
};
struct rows_stmt {
	const char *name, *sql;
	int ncol;
	/* sent only once the batch before has committed: it touches rows an
	 * earlier batch may have inserted or changed (writer_pipe.h) */
	bool late;
};
extern const struct rows_stmt rows_stmts[ROWS_NSTMT];

void rows_col_i(struct rows_cols *cs, int k, int64_t v);
void rows_col_s(struct rows_cols *cs, int k, const char *v); /* NULL: NULL */
/* Closes the arrays and hands them out as the statement's parameters (the
 * caller frees them); n columns. */
void rows_cols_take(struct rows_cols *cs, int n, char **out);
/* An event's row (ROWS_EVENTS), its text in b->pubtext. */
void rows_event_cols(struct rows_cols *cs, const struct rows_batch *b,
                     const struct rows_event *e);
/* An order's row: into `ins` when new, else into `upd` */
void rows_order_cols(struct rows_cols *ins, struct rows_cols *upd,
                     const struct rows_order *r);
void rows_trade_cols(struct rows_cols *cs, const struct rows_trade *t);
void rows_contract_cols(struct rows_cols *cs, const struct rows_contract *c);

#endif
