/*
 * test_writer_pipe.c — the writer's commit pipeline (exchange/writer_pipe.c)
 * against a fake connection that fails at every step, with no PostgreSQL.
 *
 * The fake (struct fconn, behind struct wpipe_pq) plays a PostgreSQL that
 * runs each statement as it is sent, answers in order, aborts a pipeline
 * after an error, keeps an aborted transaction until ROLLBACK, and holds
 * the committed orders in `db`. A fault is scripted for one batch (by the
 * number the pipeline gives it): an INSERT refused, the connection gone
 * before the batch, as its COMMIT goes out, after COMMIT ran but before its
 * answer came, after COMMIT's answer and before the sync, a sync that
 * cannot be sent, or answers that are slow to come.
 *
 * A small writer drives it as writer_main does (gather, apply, wpipe_turn):
 * each command places a buy order in a real order book (exchange/core/
 * book.c, so no trades), and a batch that did not commit makes it rebuild
 * the book from `db` before the next, as the writer rebuilds from
 * PostgreSQL. What must hold, whatever failed, with overlap off and on:
 *
 *   - every command is answered exactly once;
 *   - a command answered 201 has its order committed;
 *   - a committed order was answered 201 or 503 outcome-unknown, never
 *     500 or 503 database-unavailable;
 *   - once nothing is in flight, the book holds exactly the committed
 *     orders (a failed batch leaves no trace in it);
 *   - the faulted batch is answered as the table in writer_pipe.h says,
 *     and the batches after it commit again.
 */
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exchange/core/book.h"
#include "exchange/writer.h"
#include "exchange/writer_pipe.h"
#include "exchange/writer_rows.h"

#define NCMD     400
#define NCONN    64
#define QMAX     64
#define MAXORDER (NCMD + 1)

/* --- the fake connection ------------------------------------------------ */

enum fault {
	F_NONE,
	F_INSERT_REFUSED,    /* the orders' INSERT answers 23505 */
	F_KEY_TAKEN,         /* 23505 on a key another writer committed */
	F_IDLE_CLOSED,       /* closed before the batch is sent */
	F_LOST_AT_COMMIT,    /* gone as COMMIT is sent: COMMIT never ran */
	F_LOST_AFTER_COMMIT, /* COMMIT ran, its answer never came */
	F_LOST_MID_SYNC,     /* COMMIT's answer came, the sync's did not */
	F_SYNC_UNSENT,       /* the sync cannot be sent: the socket is gone */
	F_STALLED,           /* the answers take many turns to come */
};

struct fconn {
	bool used, piped;
	bool closed; /* the client knows it is gone: every call fails */
	bool dead;   /* the server is gone, the client does not know yet:
	              * what is sent is taken and never runs */
	/* the results PostgreSQL sent, in order; those from `limit` on are
	 * lost with the connection (-1: none is) */
	struct wpipe_res q[QMAX];
	int nq, head, limit;
	bool pipe_aborted; /* an error came: the rest until sync is skipped */
	bool tx_open, tx_failed;
	uint64_t pending[NCMD];
	int npending;
	enum fault fault; /* of the batch being sent on it */
	int stall;        /* ready() says no this many more times */
	int rollbacks;
};

static struct fconn conns[NCONN];
static bool db[MAXORDER]; /* committed orders */
static uint64_t fault_batch;
static enum fault fault_kind;
static int latency; /* ready() says no this many times per batch */

static struct fconn *fc(PGconn *c)
{
	return (struct fconn *)(void *)c;
}

static PGconn *fake_new(void)
{
	for (int i = 0; i < NCONN; i++)
		if (!conns[i].used) {
			memset(&conns[i], 0, sizeof conns[i]);
			conns[i].used = true;
			conns[i].limit = -1;
			return (PGconn *)(void *)&conns[i];
		}
	ck_abort_msg("out of fake connections");
	return NULL;
}

/* The server side of a connection that is gone: an open transaction is
 * rolled back, and nothing more is read or sent. */
static void fake_close(struct fconn *f)
{
	f->closed = true;
	f->tx_open = f->tx_failed = false;
	f->npending = 0;
}

static void push(struct fconn *f, enum wpipe_res_kind k, const char *state)
{
	ck_assert_int_lt(f->nq, QMAX);
	struct wpipe_res *r = &f->q[f->nq++];
	memset(r, 0, sizeof *r);
	r->kind = k;
	if (state) {
		snprintf(r->state, sizeof r->state, "%s", state);
		snprintf(r->msg, sizeof r->msg, "fake error %s", state);
	}
	if (k == WPIPE_RES_ERROR)
		f->pipe_aborted = true;
}

/* Runs a statement as PostgreSQL would, and queues its result. */
static void run(struct fconn *f, const char *what, const char *ids)
{
	if (f->pipe_aborted) {
		push(f, WPIPE_RES_ABORTED, NULL);
		return;
	}
	if (f->tx_failed && strcmp(what, "COMMIT")) {
		push(f, WPIPE_RES_ERROR, "25P02"); /* in failed transaction */
		return;
	}
	if (strcmp(what, "BEGIN") == 0) {
		f->tx_open = true;
		f->npending = 0;
	} else if (strcmp(what, "COMMIT") == 0) {
		for (int i = 0; i < f->npending; i++)
			db[f->pending[i]] = true;
		f->npending = 0;
		f->tx_open = false;
	} else if (strcmp(what, "w_ins_orders") == 0) {
		ck_assert(f->tx_open);
		if (f->fault == F_INSERT_REFUSED || f->fault == F_KEY_TAKEN) {
			f->tx_failed = true;
			push(f, WPIPE_RES_ERROR, "23505");
			f->q[f->nq - 1].key_taken = f->fault == F_KEY_TAKEN;
			return;
		}
		/* the ids column, "{1,2,3}" */
		for (const char *p = ids + 1; *p && *p != '}';) {
			char *end;
			unsigned long long id = strtoull(p, &end, 10);
			ck_assert(end != p && id < MAXORDER && !db[id]);
			f->pending[f->npending++] = id;
			p = *end == ',' ? end + 1 : end;
		}
	}
	push(f, WPIPE_RES_OK, NULL);
}

static bool fk_alive(PGconn *c)
{
	return c && !fc(c)->closed;
}

static bool fk_enter(PGconn *c)
{
	struct fconn *f = fc(c);
	if (f->closed)
		return false;
	f->piped = true;
	f->nq = f->head = 0;
	f->limit = -1;
	f->pipe_aborted = false;
	return true;
}

static void fk_leave(PGconn *c)
{
	struct fconn *f = fc(c);
	ck_assert_msg(f->head == f->nq,
	              "left the pipeline with results unread");
	f->piped = false;
}

/* The server goes away: the results from index `from` on never come. */
static void die(struct fconn *f, int from)
{
	f->dead = true;
	f->limit = from;
	f->tx_open = f->tx_failed = false; /* rolled back, if still open */
	f->npending = 0;
}

static bool fk_send_sql(PGconn *c, const char *sql)
{
	struct fconn *f = fc(c);
	bool commit = strcmp(sql, "COMMIT") == 0;
	ck_assert(f->piped);
	if (f->closed)
		return false;
	if (f->dead)
		return true;
	if (commit &&
	    (f->fault == F_LOST_AT_COMMIT || f->fault == F_SYNC_UNSENT)) {
		/* libpq took it; the server never got it */
		die(f, f->nq);
		return true;
	}
	run(f, sql, NULL);
	if (commit && f->fault == F_LOST_AFTER_COMMIT)
		die(f, f->nq - 1); /* it committed; its answer is lost */
	return true;
}

static bool fk_send_prepared(PGconn *c, const char *name, int n,
                             const char *const *params)
{
	struct fconn *f = fc(c);
	ck_assert(f->piped && n > 0);
	if (f->closed)
		return false;
	if (!f->dead)
		run(f, name, params[0]);
	return true;
}

static bool fk_sync(PGconn *c)
{
	struct fconn *f = fc(c);
	if (f->closed)
		return false;
	if (f->fault == F_SYNC_UNSENT) {
		fake_close(f); /* the flush finds the socket closed */
		return false;
	}
	if (f->dead)
		return true;
	if (f->fault == F_LOST_MID_SYNC)
		die(f, f->nq); /* all but the sync's own answer arrives */
	f->pipe_aborted = false;
	push(f, WPIPE_RES_SYNC, NULL);
	return true;
}

static bool fk_flush(PGconn *c)
{
	return !fc(c)->closed;
}

static bool fk_result(PGconn *c, struct wpipe_res *r, bool *lost)
{
	struct fconn *f = fc(c);
	if (f->closed || f->head == f->limit || f->head == f->nq) {
		/* end of file, or nothing more will come (pgpipe_result) */
		if (f->dead || f->closed)
			fake_close(f);
		*lost = true;
		return false;
	}
	*r = f->q[f->head++];
	return true;
}

static bool fk_rollback(PGconn *c)
{
	struct fconn *f = fc(c);
	ck_assert(!f->piped);
	if (f->closed)
		return false;
	f->tx_open = f->tx_failed = false;
	f->npending = 0;
	f->rollbacks++;
	return true;
}

static bool fk_ready(PGconn *c, int ms)
{
	(void)ms;
	if (!c || fc(c)->closed)
		return true; /* its answer is at hand: that it is gone */
	if (fc(c)->stall > 0) {
		fc(c)->stall--;
		return false;
	}
	return true;
}

static bool fk_broken(PGconn *c)
{
	return !c || fc(c)->closed;
}

static const char *fk_error(PGconn *c)
{
	return c && fc(c)->closed ? "fake: server closed the connection"
	                          : "fake: no error";
}

/* Every batch goes through IDLE first: the fault of its number is set on
 * the connection it is sent on. */
static void fk_step(const struct pgpipe_fault *pf, enum pgpipe_step step,
                    uint64_t batch, PGconn *c)
{
	(void)pf;
	if (step != PGPIPE_IDLE)
		return;
	struct fconn *f = fc(c);
	f->fault = batch == fault_batch ? fault_kind : F_NONE;
	f->stall = latency + (f->fault == F_STALLED ? 5 : 0);
	if (f->fault == F_IDLE_CLOSED)
		fake_close(f);
}

static const struct wpipe_pq fake_pq = {
    .alive = fk_alive,
    .enter = fk_enter,
    .leave = fk_leave,
    .send_sql = fk_send_sql,
    .send_prepared = fk_send_prepared,
    .sync = fk_sync,
    .flush = fk_flush,
    .result = fk_result,
    .rollback = fk_rollback,
    .ready = fk_ready,
    .broken = fk_broken,
    .error = fk_error,
    .step = fk_step,
};

/* --- a small writer ------------------------------------------------------ */

struct tflight {
	struct wpipe_batch p; /* first, as in writer.c */
	uint64_t ids[NCMD];
	int nids;
};

static struct tw {
	struct wpipe pipe;
	struct tflight fl[3];
	struct tflight *g;
	struct book *book;
	bool need_rebuild;
	struct writer_cmd cmd[NCMD];
	struct writer_cmd *ptrs[3][NCMD];
	int ncmd;
	int landed[NCMD];        /* times each command was answered */
	bool retried[NCMD];      /* landed to run again (wpipe_batch.retry) */
	uint64_t batch_of[NCMD]; /* the batch number it was sent in, 0: none */
	uint64_t next_id;
	int drops, commits;
} t;

static const struct book_params params = {
    .tick = 1,
    .lot = 1,
    .min_pages = 1,
    .max_pages = 1 << 20,
    .price_min = 1,
    .price_max = 1000000,
    .capacity = 10000,
};

static void no_events(void *ctx, const struct book_event *ev)
{
	(void)ctx, (void)ev;
}

/* The writer's rebuild: the book again from what the database holds. */
static void rebuild(void)
{
	char err[256];
	book_free(t.book);
	t.book = book_new(&params, err, sizeof err);
	ck_assert_msg(t.book, "%s", err);
	for (uint64_t id = 1; id < MAXORDER; id++) {
		if (!db[id])
			continue;
		struct book_order o = {
		    .id = id,
		    .account = 1,
		    .side = BOOK_BUY,
		    .tif = BOOK_GTC,
		    .price = 100,
		    .pages = (rx_pages)id,
		};
		ck_assert_msg(
		    book_insert_resting(t.book, &o, err, sizeof err) == 0, "%s",
		    err);
	}
	t.need_rebuild = false;
}

static int h_build(void *ctx, struct wpipe_batch *pb)
{
	(void)ctx;
	struct tflight *f = (struct tflight *)pb;
	if (!f->nids)
		return 0;
	char *s = malloc((size_t)f->nids * 21 + 3), *o = s;
	ck_assert(s);
	*o++ = '{';
	for (int i = 0; i < f->nids; i++)
		o += sprintf(o, "%s%llu", i ? "," : "",
		             (unsigned long long)f->ids[i]);
	strcpy(o, "}");
	pb->par[ROWS_INS_ORDERS][0] = s;
	pb->rows[ROWS_INS_ORDERS] = (size_t)f->nids;
	return 1;
}

static void h_committed(void *ctx, struct wpipe_batch *pb)
{
	(void)ctx;
	struct tflight *f = (struct tflight *)pb;
	for (int i = 0; i < f->nids; i++)
		ck_assert_msg(db[f->ids[i]],
		              "batch %llu called committed, order %llu is not",
		              (unsigned long long)pb->no,
		              (unsigned long long)f->ids[i]);
	t.commits++;
}

static void h_land(void *ctx, struct wpipe_batch *pb)
{
	(void)ctx;
	for (int i = 0; i < pb->n; i++) {
		int k = (int)(pb->cmds[i] - t.cmd);
		ck_assert(k >= 0 && k < t.ncmd);
		t.landed[k]++;
		t.batch_of[k] = pb->no;
		ck_assert_int_ne(pb->cmds[i]->status, 0);
		if (pb->retry) {
			/* to run again: no failure's answer was set over the
			 * one it was applied with; the writer would queue it
			 * again, this one notes it */
			ck_assert_int_eq(pb->cmds[i]->status, 201);
			ck_assert(!pb->ok);
			t.retried[k] = true;
			rows_fail_cmd(pb->cmds[i], 409, "run-again", "again",
			              "queued again");
		}
	}
	if (!pb->ok)
		t.need_rebuild = true;
}

static void h_drop(void *ctx, int i)
{
	(void)ctx;
	ck_assert(t.pipe.conn[i]);
	fake_close(fc(t.pipe.conn[i]));
	fc(t.pipe.conn[i])->used = false;
	t.pipe.conn[i] = NULL;
	t.drops++;
}

static const struct wpipe_hooks hooks = {
    .build = h_build,
    .committed = h_committed,
    .land = h_land,
    .drop = h_drop,
};

static void tw_init(bool overlap, uint64_t batch, enum fault kind, int lat)
{
	char err[256];
	memset(&t, 0, sizeof t);
	memset(conns, 0, sizeof conns);
	memset(db, 0, sizeof db);
	fault_batch = batch;
	fault_kind = kind;
	latency = lat;
	t.pipe.pq = &fake_pq;
	t.pipe.h = &hooks;
	t.pipe.overlap = overlap;
	t.pipe.conn[0] = fake_new();
	t.pipe.conn[1] = fake_new();
	for (int i = 0; i < 3; i++)
		t.fl[i].p.cmds = t.ptrs[i];
	t.next_id = 1;
	t.book = book_new(&params, err, sizeof err);
	ck_assert(t.book);
}

/* What the writer does before a new batch with nothing in flight
 * (db_usable): new connections for lost ones, the books rebuilt. */
static void tw_usable(void)
{
	for (int i = 0; i < 2; i++)
		if (!t.pipe.conn[i] || fc(t.pipe.conn[i])->closed) {
			if (t.pipe.conn[i])
				fc(t.pipe.conn[i])->used = false;
			t.pipe.conn[i] = fake_new();
			t.need_rebuild = true;
		}
	if (t.need_rebuild)
		rebuild();
}

/* One turn of writer_main: take k commands (each a new buy order),
 * apply them, then the pipeline's turn. */
static void tw_turn(int k)
{
	if (!t.g) {
		for (int i = 0; i < 3 && !t.g; i++)
			if (&t.fl[i].p != t.pipe.cf && &t.fl[i].p != t.pipe.of)
				t.g = &t.fl[i];
		wpipe_batch_reset(&t.g->p);
		t.g->nids = 0;
	}
	struct tflight *g = t.g;
	bool busy = t.pipe.cf != NULL;
	int from = g->p.n;
	if (!g->p.ok)
		k = 0; /* a failed gathering batch takes no more */
	if (k > 0 && from == 0 && !busy)
		tw_usable();
	for (int i = 0; i < k && t.ncmd < NCMD; i++) {
		struct writer_cmd *c = &t.cmd[t.ncmd++];
		uint64_t id = t.next_id++;
		c->kind = WR_NEW;
		struct book_cmd bc = {
		    .kind = BOOK_CMD_NEW,
		    .now = 1,
		    .id = id,
		    .account = 1,
		    .side = BOOK_BUY,
		    .tif = BOOK_GTC,
		    .pages = (rx_pages)id,
		    .price = 100,
		};
		ck_assert_int_eq(book_apply(t.book, &bc, no_events, NULL),
		                 BOOK_REJ_NONE);
		rows_set_answer(c, 201, strdup("{\"order\":{}}"));
		g->p.cmds[g->p.n++] = c;
		g->ids[g->nids++] = id;
	}
	struct wpipe_batch *gp = &g->p;
	wpipe_turn(&t.pipe, &gp, g->p.n > from);
	if (!gp)
		t.g = NULL;
}

/* Runs `waves` turns of k commands, then turns until all is answered. */
static void tw_run(int waves, int k)
{
	for (int i = 0; i < waves; i++)
		tw_turn(k);
	for (int i = 0; i < 100 && (t.pipe.cf || (t.g && t.g->p.n)); i++)
		tw_turn(0);
	ck_assert_msg(!t.pipe.cf && !t.pipe.of, "batches still in flight");
	ck_assert_msg(!t.g || !t.g->p.n, "a gathering batch never went out");
}

static bool is_type(const struct writer_cmd *c, const char *slug)
{
	char want[96];
	snprintf(want, sizeof want, "\"urn:ramex:problem:%s\"", slug);
	return c->body && strstr(c->body, want);
}

/* What must hold whatever failed (see the top of this file). */
static void check_invariants(void)
{
	for (int k = 0; k < t.ncmd; k++) {
		const struct writer_cmd *c = &t.cmd[k];
		uint64_t id = (uint64_t)k + 1;
		ck_assert_msg(t.landed[k] == 1, "command %d answered %d times",
		              k, t.landed[k]);
		if (c->status == 201)
			ck_assert_msg(db[id],
			              "order %llu answered 201, not "
			              "committed",
			              (unsigned long long)id);
		if (db[id])
			ck_assert_msg(
			    c->status == 201 || (c->status == 503 &&
			                         is_type(c, "outcome-unknown")),
			    "order %llu committed, answered %d %s",
			    (unsigned long long)id, c->status, c->body);
		if (c->status >= 500)
			ck_assert_msg(c->retry_after == (c->status == 503),
			              "order %llu: retry_after %d with %d",
			              (unsigned long long)id, c->retry_after,
			              c->status);
	}
	/* the books hold what the database holds, once rebuilt */
	tw_usable();
	for (uint64_t id = 1; id < t.next_id; id++) {
		struct book_order o;
		ck_assert_msg(book_get(t.book, id, &o) == db[id],
		              "order %llu: in the book %d, committed %d",
		              (unsigned long long)id, !db[id], db[id]);
	}
}

/* The commands of batch `no`: how many, and whether all got status and
 * type (NULL: any). */
static int batch_answers(uint64_t no, int status, const char *slug)
{
	int n = 0;
	for (int k = 0; k < t.ncmd; k++) {
		if (t.batch_of[k] != no)
			continue;
		n++;
		ck_assert_msg(t.cmd[k].status == status,
		              "batch %llu: command %d answered %d, not %d: %s",
		              (unsigned long long)no, k, t.cmd[k].status,
		              status, t.cmd[k].body);
		if (slug)
			ck_assert_msg(is_type(&t.cmd[k], slug),
			              "batch %llu: command %d is %s, not %s",
			              (unsigned long long)no, k, t.cmd[k].body,
			              slug);
	}
	return n;
}

/* The batches sent after `no` that committed: the pipeline recovered. */
static int committed_after(uint64_t no)
{
	int n = 0;
	for (int k = 0; k < t.ncmd; k++)
		n += t.batch_of[k] > no && t.cmd[k].status == 201;
	return n;
}

static void tw_free(void)
{
	for (int k = 0; k < t.ncmd; k++)
		free(t.cmd[k].body);
	book_free(t.book);
}

/* Each test runs twice: _i 0 without overlap, 1 with it (one batch open
 * beside the committing one: the answers take a turn to come). */
#define SETUP(batch, kind) tw_init(_i == 1, (batch), (kind), _i == 1 ? 1 : 0)

START_TEST(clean_batches_all_commit)
{
	SETUP(0, F_NONE);
	tw_run(12, 7);
	check_invariants();
	for (int k = 0; k < t.ncmd; k++)
		ck_assert_int_eq(t.cmd[k].status, 201);
	ck_assert_int_eq(t.drops, 0);
	ck_assert_int_gt(t.commits, 1);
	tw_free();
}
END_TEST

START_TEST(refused_insert_fails_its_batch_500)
{
	SETUP(3, F_INSERT_REFUSED);
	tw_run(12, 5);
	check_invariants();
	ck_assert_int_gt(batch_answers(3, 500, "internal"), 0);
	for (int k = 0; k < t.ncmd; k++)
		if (t.batch_of[k] && t.batch_of[k] < 3)
			ck_assert_int_eq(t.cmd[k].status, 201);
	/* PostgreSQL answered: the connection is rolled back and kept, and
	 * the batches after commit on it (not rolled back, its transaction
	 * would refuse them all: 25P02) */
	ck_assert_int_eq(t.drops, 0);
	ck_assert_int_gt(committed_after(3), 0);
	int rb = 0;
	for (int i = 0; i < NCONN; i++)
		rb += conns[i].rollbacks;
	ck_assert_int_ge(rb, 1);
	tw_free();
}
END_TEST

START_TEST(idle_connection_closed_is_unavailable)
{
	SETUP(2, F_IDLE_CLOSED);
	tw_run(10, 5);
	check_invariants();
	ck_assert_int_gt(batch_answers(2, 503, "database-unavailable"), 0);
	ck_assert_int_gt(committed_after(2), 0);
	tw_free();
}
END_TEST

START_TEST(lost_as_commit_goes_out_is_unknown)
{
	SETUP(2, F_LOST_AT_COMMIT);
	tw_run(10, 5);
	check_invariants();
	ck_assert_int_gt(batch_answers(2, 503, "outcome-unknown"), 0);
	ck_assert_int_ge(t.drops, 1);
	ck_assert_int_gt(committed_after(2), 0);
	tw_free();
}
END_TEST

START_TEST(lost_commit_answer_is_unknown)
{
	SETUP(2, F_LOST_AFTER_COMMIT);
	tw_run(10, 5);
	check_invariants();
	/* it did commit: the retry will say so; the books hold it again */
	ck_assert_int_gt(batch_answers(2, 503, "outcome-unknown"), 0);
	for (int k = 0; k < t.ncmd; k++)
		if (t.batch_of[k] == 2)
			ck_assert(db[k + 1]);
	ck_assert_int_ge(t.drops, 1);
	ck_assert_int_gt(committed_after(2), 0);
	tw_free();
}
END_TEST

START_TEST(lost_mid_sync_after_commit_answer_commits)
{
	SETUP(2, F_LOST_MID_SYNC);
	tw_run(10, 5);
	check_invariants();
	ck_assert_int_gt(batch_answers(2, 201, NULL), 0);
	/* the connection is out of step all the same: given up */
	ck_assert_int_ge(t.drops, 1);
	ck_assert_int_gt(committed_after(2), 0);
	tw_free();
}
END_TEST

START_TEST(sync_not_sent_is_not_committed)
{
	SETUP(2, F_SYNC_UNSENT);
	tw_run(10, 5);
	check_invariants();
	/* COMMIT went to libpq, never to the server: unknown to the writer */
	ck_assert_int_gt(batch_answers(2, 503, "outcome-unknown"), 0);
	for (int k = 0; k < t.ncmd; k++)
		if (t.batch_of[k] == 2)
			ck_assert(!db[k + 1]);
	ck_assert_int_gt(committed_after(2), 0);
	tw_free();
}
END_TEST

START_TEST(stalled_answers_wait_then_commit)
{
	SETUP(2, F_STALLED);
	for (int i = 0; i < 3; i++)
		tw_turn(4);
	/* batch 2 is sent, its answers not in: nothing of it answered yet */
	int sent2 = 0;
	for (int k = 0; k < t.ncmd; k++) {
		sent2 += t.batch_of[k] == 2;
		if (k >= 4 && k < 8)
			ck_assert_int_eq(t.landed[k], 0);
	}
	ck_assert_int_eq(sent2, 0);
	ck_assert(t.pipe.cf && t.pipe.cf->no == 2);
	tw_run(6, 4);
	check_invariants();
	for (int k = 0; k < t.ncmd; k++)
		ck_assert_int_eq(t.cmd[k].status, 201);
	ck_assert_int_eq(t.drops, 0);
	tw_free();
}
END_TEST

/* Overlap only: the committing batch fails while the next is open on the
 * other connection; that one is rolled back, the gathering one failed. */
START_TEST(failure_fails_the_open_batch_behind_it)
{
	tw_init(true, 2, F_INSERT_REFUSED, 1);
	tw_turn(3); /* batch 1 committing */
	tw_turn(3); /* 1 not in yet: 2 opens on the other connection */
	tw_turn(3); /* 1 lands, 2 commits, 3 opens beside it */
	ck_assert(t.pipe.cf && t.pipe.cf->no == 2);
	ck_assert(t.pipe.of && t.pipe.of->no == 3);
	tw_turn(3); /* 2 fails: 3 rolled back, the gathering one failed */
	tw_run(4, 3);
	check_invariants();
	ck_assert_int_gt(batch_answers(2, 500, "internal"), 0);
	ck_assert_int_gt(batch_answers(3, 500, "internal"), 0);
	for (int k = 0; k < t.ncmd; k++)
		if (t.batch_of[k] == 3)
			ck_assert(!db[k + 1]);
	ck_assert_int_gt(committed_after(3), 0);
	tw_free();
}
END_TEST

/* A key another writer committed first: the batch and those applied on
 * top of it are not answered a failure but landed to run again, and what
 * comes after them commits. */
START_TEST(a_key_taken_runs_the_batch_again)
{
	SETUP(2, F_KEY_TAKEN);
	tw_run(10, 5);
	check_invariants();
	ck_assert_int_gt(batch_answers(2, 409, "run-again"), 0);
	int retried = 0, failed = 0;
	for (int k = 0; k < t.ncmd; k++) {
		retried += t.retried[k];
		failed += t.cmd[k].status >= 500;
		if (t.retried[k])
			ck_assert(!db[k + 1]);
	}
	ck_assert_int_eq(failed, 0);
	ck_assert_int_ge(retried, 5);
	ck_assert_int_gt(committed_after(2), 0);
	ck_assert_int_eq(t.drops, 0);
	tw_free();
}
END_TEST

/* Overlap: batch 2 fails with `kind` while 3 is open behind it; then on
 * to the end, and the invariants checked. */
static void fail_with_one_open(enum fault kind)
{
	tw_init(true, 2, kind, 1);
	tw_turn(3);
	tw_turn(3);
	tw_turn(3);
	ck_assert(t.pipe.of && t.pipe.of->no == 3);
	tw_run(4, 3);
	check_invariants();
}

START_TEST(a_key_taken_runs_the_open_batch_again)
{
	fail_with_one_open(F_KEY_TAKEN);
	ck_assert_int_gt(batch_answers(2, 409, "run-again"), 0);
	ck_assert_int_gt(batch_answers(3, 409, "run-again"), 0);
	ck_assert_int_gt(committed_after(3), 0);
	tw_free();
}
END_TEST

START_TEST(lost_commit_fails_the_open_batch_unavailable)
{
	fail_with_one_open(F_LOST_AFTER_COMMIT);
	ck_assert_int_gt(batch_answers(2, 503, "outcome-unknown"), 0);
	/* certainly not committed: rolled back on its own connection */
	ck_assert_int_gt(batch_answers(3, 503, "database-unavailable"), 0);
	ck_assert_int_gt(committed_after(3), 0);
	tw_free();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("writer_pipe");
	TCase *tc = tcase_create("faults");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, clean_batches_all_commit, 0, 2);
	tcase_add_loop_test(tc, refused_insert_fails_its_batch_500, 0, 2);
	tcase_add_loop_test(tc, idle_connection_closed_is_unavailable, 0, 2);
	tcase_add_loop_test(tc, lost_as_commit_goes_out_is_unknown, 0, 2);
	tcase_add_loop_test(tc, lost_commit_answer_is_unknown, 0, 2);
	tcase_add_loop_test(tc, lost_mid_sync_after_commit_answer_commits, 0,
	                    2);
	tcase_add_loop_test(tc, sync_not_sent_is_not_committed, 0, 2);
	tcase_add_loop_test(tc, stalled_answers_wait_then_commit, 0, 2);
	tcase_add_test(tc, failure_fails_the_open_batch_behind_it);
	tcase_add_test(tc, lost_commit_fails_the_open_batch_unavailable);
	tcase_add_loop_test(tc, a_key_taken_runs_the_batch_again, 0, 2);
	tcase_add_test(tc, a_key_taken_runs_the_open_batch_again);
	suite_add_tcase(s, tc);
	SRunner *r = srunner_create(s);
	srunner_run_all(r, CK_NORMAL);
	int failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? 1 : 0;
}
