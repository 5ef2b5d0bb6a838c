/*
 * writer.h — the one thread that owns every order book and writes their
 * effects to PostgreSQL, many commands per transaction (group commit).
 *
 * HTTP handlers fill a struct writer_cmd and call writer_submit, which
 * blocks until the command's batch has committed (synchronous_commit on) or
 * failed, or writer_submit_async, which calls back then (the order routes,
 * whose requests wait parked); only then is the command answered. In one
 * batch the writer:
 *
 *   1. answers reads of the books (depth) and creates markets;
 *   2. looks up every idempotency key of the batch in one query: a key seen
 *      before gets its first answer again, with nothing done twice. Only
 *      keys that the database may hold are looked up: a filter of every key
 *      written (exchange/core/keyfilter.h, filled from the database by a
 *      thread of its own at start) knows a fresh key for one, so a batch
 *      of fresh keys, the usual case, costs no query. An
 *      order placed with a client order id stores no answer for it: its
 *      order row says it was placed, and that row, its trades and their
 *      contracts rebuild the first answer exactly (0007_order_path.sql);
 *      refusals are stored as answers;
 *   3. runs the rest through the books (exchange/core/book.h), turning their
 *      events into rows: orders, trades, contracts (one per trade), order
 *      updates, the idempotency answers and each book's sequence;
 *   4. sends it all as one pipelined transaction (prepared statements, one
 *      array per column) and, while PostgreSQL commits it, does 1 to 3 for
 *      the next batch (its lookups on a second connection);
 *   5. when the COMMIT is back, answers every command and publishes the
 *      events (events.h), then sends the next batch.
 *
 * When a batch fails, nothing of it is acknowledged (503 when PostgreSQL is
 * away, 500 when it refused the batch), nor of the batch applied after it;
 * the books are rebuilt from the database before the next batch. When the
 * connection was lost after the batch's COMMIT went out and before its
 * answer came, the batch may have committed: it is answered 503
 * outcome-unknown, and a retry with the same key finds out which. A batch
 * that PostgreSQL refused because another ramexd on the database committed
 * one of its idempotency keys or client order ids first (the unique
 * indexes of 0002) is not answered but run again, its keys looked up: the
 * command whose key was taken gets the stored answer, the others are
 * carried out once (writer.c, requeue). So the books
 * run at most one batch ahead of what is committed, and nothing of that batch
 * is answered or shown (depth reads wait for it) before its COMMIT.
 * writer_start rebuilds every book from the open orders in the database the
 * same way.
 *
 * Authorisation of who may act for which account happens here too, against
 * the writer's cache of accounts, so that the order path needs no query of
 * its own: a node acts only for itself, a trader for its team's nodes, an
 * operator buys for its operator account (apply_may_act_for).
 *
 * Where each step lives: 1 and 3 in writer_apply.h (the books), 2 in
 * writer_idem.h (the lookups), the rows and answers in writer_rows.h, 4
 * and 5 in writer_pipe.h (the commit pipeline, its states drawn there, on
 * libpq through writer_pq.h); this interface, the thread and its queue,
 * the connections and the recovery in writer.c.
 */
#ifndef RAMEX_WRITER_H
#define RAMEX_WRITER_H

#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "exchange/core/book.h"

struct events;
struct owner;
struct writer;

enum writer_kind {
	WR_NEW,    /* place an order */
	WR_CANCEL, /* cancel open order `order_id` */
	WR_REDUCE, /* reduce open order `order_id` to `pages` remaining */
	WR_DEPTH,  /* read the book of `market` (no transaction) */
	WR_MARKET, /* create market (operator) */
	WR_OWN,    /* market `own_market` taken at `own_epoch` (owner.h) */
	WR_DISOWN, /* market `own_market` lost: drop its book at once */
};

struct writer_market_spec {
	char name[16]; /* "spot" or "perm-YYYY" */
	struct book_params p;
	int64_t notice_period_s, breach_penalty, delivery_deadline_s;
};

struct writer_cmd {
	enum writer_kind kind;
	/* who asks (auth.h): role bit, its account and team, its scope */
	unsigned role;
	int64_t p_account, p_team;
	char p_scope[48];
	/* Idempotency-Key header ("" = none), and the request's SHA-256 */
	char idem_key[129];
	char req_sha[65];

	/* WR_NEW */
	char market[16];
	int64_t account; /* 0 = the principal's own */
	enum book_side side;
	enum book_tif tif;
	enum book_stp stp;
	bool post_only;
	rx_pages pages; /* WR_NEW: quantity; WR_REDUCE: new remaining */
	rx_price price;
	rx_time_ns expires;
	char client_order_id[65];
	/* WR_CANCEL, WR_REDUCE */
	uint64_t order_id;
	/* WR_CANCEL: why, in the canceller's words ("" = none), kept with
	 * the order beside who cancelled it (p_scope) */
	char note[4 * 200 + 1]; /* IN_NOTE_BUF: 200 characters of UTF-8 */
	/* WR_DEPTH */
	int depth;
	/* WR_MARKET */
	struct writer_market_spec spec;
	/* WR_OWN, WR_DISOWN */
	int64_t own_market, own_epoch;

	/* the answer, set by the writer: HTTP status and a JSON text (malloc'd,
	 * problem+json when status >= 400; the caller frees). */
	int status;
	char *body;
	bool replayed;    /* the answer is the stored first one */
	bool retry_after; /* 503: PostgreSQL is away */
	bool not_kept;    /* a refusal a retry may not get again (a held
	                     market: the operator fixes it): not stored as
	                     the key's answer (idem_store) */
	/* 307: the base URL of the instance that owns the market; the
	 * reply's Location is it and the request's target */
	char redirect[128];

	/* private to the writer */
	sem_t done; /* posted once, when the answer is set */
	void (*on_done)(struct writer_cmd *c, void *arg); /* instead, if set */
	void *on_done_arg;
	struct writer_cmd *next;
	bool coid_fresh; /* its client order id was never used (key filter) */
	/* runs of it whose batch was not committed because another ramexd
	 * on the database committed one of its keys first (writer.c) */
	int tries;
};

struct writer_opts {
	const char *conninfo;
	int batch_max;
	uint32_t book_capacity;
	struct events *events;
	/* Open the next batch on the second connection while one commits, so
	 * that its INSERTs run meanwhile (a second backend, a second core).
	 * Off, one batch is under way at a time: batches twice as large and
	 * PostgreSQL's CPU an order a quarter lower, which wins when ramexd
	 * and PostgreSQL share the cores (docs/ARCHITECTURE.md, round eight).
	 */
	bool overlap;
	/* which markets this instance owns (owner.h); the writer keeps only
	 * their books, and fences every batch by their epochs */
	struct owner *owner;
};

/* Connects, checks durability, rebuilds every book from the database and
 * starts the thread. NULL with a message in err when it cannot. */
struct writer *writer_start(const struct writer_opts *o, char *err,
                            size_t errlen);
/* Queues `c` and waits for its answer (c->status, c->body); `c` may be on
 * the caller's stack. */
void writer_submit(struct writer *w, struct writer_cmd *c);
/* Queues `c` and returns at once; on_done(c, arg) is called exactly once
 * when the answer is set: from the writer's thread (it must not block, and
 * `c` may be freed in it), or from the caller's own, before this returns,
 * when the writer refuses new commands. `c` must live until then. The
 * HTTP edge uses it so that a connection waiting for its batch holds no
 * thread. */
void writer_submit_async(struct writer *w, struct writer_cmd *c,
                         void (*on_done)(struct writer_cmd *c, void *arg),
                         void *arg);
/* For /readyz: whether the writer reaches PostgreSQL, and makes progress:
 * false too when commands wait and no batch has landed for 5 s. */
bool writer_ready(struct writer *w);
/* Refuses new commands (503), finishes those queued, joins the thread. */
void writer_stop(struct writer *w);

/* Order and book fields as the API spells them (writer_rows.c). */
const char *writer_side_name(enum book_side s);
const char *writer_tif_name(enum book_tif t);
const char *writer_stp_name(enum book_stp s);
int writer_side_parse(const char *s, enum book_side *out);
int writer_tif_parse(const char *s, enum book_tif *out);
int writer_stp_parse(const char *s, enum book_stp *out);

#endif
