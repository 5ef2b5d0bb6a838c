/*
 * writer_pipe.c — see writer_pipe.h (the states of a batch, drawn).
 *
 * Up to three batches are under way at once with overlap, two without it
 * (no batch is open while one commits; the gathering one grows until the
 * COMMIT is back, then goes out whole):
 *
 *   committing  its whole transaction is sent, on one of the two writer
 *               connections, and its COMMIT is awaited;
 *   open        on the other connection, BEGIN and its INSERTs are sent, so
 *               that PostgreSQL runs them (on a second backend, so on the
 *               second core) while the batch before it commits; its UPDATEs
 *               and COMMIT are sent once that COMMIT is back;
 *   gathering   the commands that keep arriving are applied to the books
 *               (their lookups on the writer's lookup connection, which
 *               sees only what is committed); it is sent, and opens, when
 *               the open one moves on to committing.
 *
 * The UPDATEs wait (rows_stmts[].late) because they touch rows that an
 * earlier batch may have inserted or changed: before that commits they
 * would find nothing (an insert not yet visible to them) or wait on its
 * row locks. The INSERTs touch only new rows: ids come from the writer's
 * counters, and a command whose idempotency key or client order id a batch
 * in flight holds waits for a later batch (idem_lookup).
 */
#include "exchange/writer_pipe.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "exchange/writer.h"

/* What send_batch sends: BEGIN and the INSERTs (w_ins_*, w_idem), or the
 * rest (the UPDATEs), COMMIT and the sync; a whole batch is both. */
enum { SEND_OPEN = 1, SEND_CLOSE = 2 };

static int stmt_part(int i)
{
	return rows_stmts[i].late ? SEND_CLOSE : SEND_OPEN;
}

void wpipe_batch_reset(struct wpipe_batch *b)
{
	struct writer_cmd **cmds = b->cmds;
	memset(b, 0, sizeof *b);
	b->cmds = cmds;
	b->ok = true;
}

static void free_params(struct wpipe_batch *f, int part)
{
	for (int i = 0; i < ROWS_NSTMT; i++) {
		if (!(stmt_part(i) & part))
			continue;
		for (int k = 0; k < ROWS_COLS_MAX; k++) {
			free(f->par[i][k]);
			f->par[i][k] = NULL;
		}
		f->rows[i] = 0;
	}
}

/* Gives up a writer connection that failed in a way that leaves it
 * unusable or in doubt (lost, or out of step with its pipeline); db_usable
 * makes a new one before the next batch. */
static void drop_conn(struct wpipe *p, struct wpipe_batch *f)
{
	for (int i = 0; i < 2; i++)
		if (p->conn[i] && p->conn[i] == f->conn)
			p->h->drop(p->ctx, i);
	f->conn = NULL;
	f->piped = false;
}

static void send_stmts(struct wpipe *p, struct wpipe_batch *f, int part,
                       bool *sent)
{
	for (int i = 0; *sent && i < ROWS_NSTMT; i++) {
		if (!f->rows[i] || stmt_part(i) != part)
			continue;
		*sent = p->pq->send_prepared(f->conn, rows_stmts[i].name,
		                             rows_stmts[i].ncol,
		                             (const char *const *)f->par[i]);
		f->nsent += *sent;
	}
}

/* Sends a part of the built batch on f->conn, in pipeline mode, without
 * waiting for it: BEGIN and the INSERTs, then the UPDATEs, COMMIT and the
 * sync. Whatever fails leaves f->ok false and f->err set; finish_batch
 * then reads back what was sent and rolls it back. Before the COMMIT goes
 * out, the connection is checked (without blocking): one that PostgreSQL
 * closed meanwhile is noticed here, while the batch has certainly not been
 * carried out. */
static void send_batch(struct wpipe *p, struct wpipe_batch *f, int part)
{
	PGconn *c = f->conn;
	bool sent = f->ok;
	if (!c) {
		if (f->ok)
			snprintf(f->err, sizeof f->err,
			         "no connection to PostgreSQL");
		f->ok = false;
		f->down = true;
		goto out;
	}
	if ((part & SEND_OPEN) && sent) {
		p->pq->step(&p->fault, PGPIPE_IDLE, f->no, c);
		if (!p->pq->alive(c)) {
			snprintf(f->err, sizeof f->err,
			         "the connection was lost before the batch "
			         "was sent");
			f->ok = false;
			f->down = true;
			goto out;
		}
		clock_gettime(CLOCK_MONOTONIC, &f->t0);
		if (!p->pq->enter(c)) {
			snprintf(f->err, sizeof f->err,
			         "could not enter pipeline mode: %s",
			         p->pq->error(c));
			f->ok = false;
			goto out;
		}
		f->piped = true;
		sent = p->pq->send_sql(c, "BEGIN");
		f->nsent += sent;
		send_stmts(p, f, SEND_OPEN, &sent);
		p->pq->step(&p->fault, PGPIPE_OPEN, f->no, c);
	}
	if ((part & SEND_CLOSE) && sent) {
		if (!p->pq->alive(c)) {
			snprintf(f->err, sizeof f->err,
			         "the connection was lost before the COMMIT "
			         "was sent");
			f->ok = false;
			f->down = true;
			sent = false;
		}
		send_stmts(p, f, SEND_CLOSE, &sent);
		if (sent) {
			sent = p->pq->send_sql(c, "COMMIT");
			f->nsent += sent;
			f->commit_sent = sent;
		}
	}
	if (!sent && f->ok) {
		snprintf(f->err, sizeof f->err, "could not send: %s",
		         p->pq->error(c));
		f->ok = false;
	}
	if (!f->piped)
		goto out;
	if (part & SEND_CLOSE) {
		f->synced = p->pq->sync(c);
		if (!f->synced && f->ok) {
			snprintf(f->err, sizeof f->err, "could not send: %s",
			         p->pq->error(c));
			f->ok = false;
		}
		p->pq->step(&p->fault, PGPIPE_CLOSE, f->no, c);
	} else if (!p->pq->flush(c) && f->ok) {
		/* in pipeline mode libpq keeps small queries in its buffer:
		 * the open part must reach PostgreSQL now, to run now */
		snprintf(f->err, sizeof f->err, "could not send: %s",
		         p->pq->error(c));
		f->ok = false;
	}
out:
	free_params(f, f->ok ? part : SEND_OPEN | SEND_CLOSE);
	f->err[strcspn(f->err, "\n")] = 0;
}

/* Waits for the results of a sent batch (sending its sync first when it
 * was only opened, as when the batch before it failed) and says what
 * became of it: f->ok when it committed; else f->unknown when it may have
 * (the connection was lost after its COMMIT went out, before COMMIT's
 * answer came: PostgreSQL runs a pipeline ahead of the answers it has
 * sent, so no missing answer proves a statement did not run), else not
 * committed, f->down when because PostgreSQL went away. A lost connection
 * is given up; one whose batch failed otherwise is rolled back and kept. */
static void finish_batch(struct wpipe *p, struct wpipe_batch *f)
{
	PGconn *c = f->conn;
	bool ok = f->ok;
	bool was_ok = f->ok;    /* not failed already (fail_after) */
	bool taken = false;     /* a key another writer committed first */
	bool lost = false;      /* the connection went away */
	bool committed = false; /* COMMIT's own answer came, and was OK */
	bool refused = false;   /* PostgreSQL answered an error before COMMIT */
	free_params(f, SEND_OPEN | SEND_CLOSE);
	if (!f->piped)
		goto out;
	if (!f->synced)
		f->synced = p->pq->sync(c);
	if (!f->synced) {
		if (ok)
			snprintf(f->err, sizeof f->err, "connection lost: %s",
			         p->pq->error(c));
		ok = false;
		lost = true;
		goto unpipe;
	}
	for (int i = 0; i < f->nsent; i++) {
		struct wpipe_res r;
		if (!p->pq->result(c, &r, &lost)) {
			if (ok)
				snprintf(f->err, sizeof f->err,
				         "connection lost: %s",
				         p->pq->error(c));
			ok = false;
			break;
		}
		if (i == 0)
			p->pq->step(&p->fault, PGPIPE_RESULT, f->no, c);
		bool is_commit = f->commit_sent && i == f->nsent - 1;
		if (r.kind == WPIPE_RES_OK) {
			committed = is_commit;
		} else if (r.kind == WPIPE_RES_ABORTED) {
			/* an error before it said why: nothing after ran */
			if (ok)
				snprintf(f->err, sizeof f->err,
				         "pipeline aborted");
			ok = false;
		} else {
			if (ok) {
				snprintf(f->err, sizeof f->err, "%s", r.msg);
				f->err[strcspn(f->err, "\n")] = 0;
			}
			ok = false;
			/* an error PostgreSQL sent for a statement before
			 * COMMIT: it stopped there (the answers come in
			 * order), so COMMIT did not run */
			if (r.state[0] && !is_commit)
				refused = true;
			taken = taken || (r.key_taken && !is_commit);
			if (strcmp(r.state, "RX001") == 0)
				f->fenced = true;
			if (r.lost) {
				lost = true; /* nothing more will come */
				break;
			}
		}
	}
	/* read up to and including the sync; a connection that cannot
	 * give it is out of step and given up */
	while (!lost) {
		struct wpipe_res r;
		if (!p->pq->result(c, &r, &lost) || r.kind == WPIPE_RES_SYNC)
			break;
	}
unpipe:
	if (lost) {
		log_warn("writer connection lost",
		         "batch=%llu commands=%d commit_sent=%d committed=%d",
		         (unsigned long long)f->no, f->n, f->commit_sent,
		         committed);
		drop_conn(p, f);
	} else {
		p->pq->leave(c);
		f->piped = false;
		if (!ok) { /* an open one, or a failed */
			if (!p->pq->rollback(c))
				drop_conn(p, f);
		}
	}
	if (committed) {
		/* the answer of its COMMIT came: what was lost after it
		 * (the sync) changes nothing */
		ok = true;
	} else if (!ok && lost) {
		f->down = true;
		f->unknown = f->commit_sent && !refused;
	}
out:
	f->err[strcspn(f->err, "\n")] = 0;
	f->ok = ok;
	if (was_ok && !ok) {
		/* rolled back and kept: nothing of it stays, so it may run
		 * again; after a lost connection it may have committed */
		f->retry = taken && refused && !lost && !f->fenced;
		p->retry = f->retry;
	}
	if (ok && f->nsent > 0)
		p->h->committed(p->ctx, f);
}

/* How a batch that was not acknowledged is answered. */
enum fail_kind {
	FAIL_UNAVAILABLE, /* not carried out: PostgreSQL is away (503) */
	FAIL_UNKNOWN,     /* may have committed: retry to learn (503) */
	FAIL_INTERNAL,    /* PostgreSQL refused it: a bug (500) */
	FAIL_FENCED,      /* a market of it changed hands: not carried out */
};

static enum fail_kind fail_kind_of(const struct wpipe_batch *f)
{
	return f->unknown  ? FAIL_UNKNOWN
	       : f->down   ? FAIL_UNAVAILABLE
	       : f->fenced ? FAIL_FENCED
	                   : FAIL_INTERNAL;
}

static const char *cmd_what(const struct writer_cmd *c)
{
	return c->kind == WR_NEW      ? "order"
	       : c->kind == WR_CANCEL ? "cancel"
	                              : "reduce";
}

/* Answers every command of a batch that was not acknowledged, but those
 * answered from their first answer (replays) and reads. The outcome-unknown
 * answer is documented in docs/operations.md and api/openapi.yaml. */
static void fail_all(struct writer_cmd **cmds, int n, enum fail_kind kind)
{
	for (int i = 0; i < n; i++) {
		struct writer_cmd *c = cmds[i];
		if (!c || (c->status && c->replayed))
			continue;
		if (c->kind == WR_DEPTH && c->status)
			continue;
		c->replayed = false;
		c->retry_after = kind != FAIL_INTERNAL;
		if (kind == FAIL_UNAVAILABLE)
			rows_fail_cmd(
			    c, 503, "database-unavailable",
			    "database unavailable",
			    "the exchange could not reach PostgreSQL, so "
			    "this command was not carried out; retry with "
			    "the same Idempotency-Key or client_order_id "
			    "after a few seconds");
		else if (kind == FAIL_FENCED)
			rows_fail_cmd(
			    c, 503, "market-unavailable",
			    "market changed hands",
			    "another exchange instance took over a market of "
			    "the batch holding this command, so nothing of it "
			    "was carried out; retry with the same "
			    "Idempotency-Key or client_order_id after a few "
			    "seconds (you may be sent to the new owner)");
		else if (kind == FAIL_UNKNOWN && c->kind == WR_NEW)
			rows_fail_cmd(
			    c, 503, "outcome-unknown", "outcome unknown",
			    "the connection to PostgreSQL was lost while "
			    "this order was being committed, so the order "
			    "may or may not have been placed; retry with "
			    "the same client_order_id or Idempotency-Key "
			    "to learn which: the retry answers the placed "
			    "order, or places it once");
		else if (kind == FAIL_UNKNOWN)
			rows_set_answer(
			    c, 503,
			    rows_problem(
			        503, "outcome-unknown", "outcome unknown",
			        "the connection to PostgreSQL was lost while "
			        "this %s was being committed, so it may or "
			        "may not have been carried out; retry with "
			        "the same Idempotency-Key to learn which, or "
			        "read the order",
			        cmd_what(c)));
		else
			rows_fail_cmd(
			    c, 500, "internal", "not committed",
			    "PostgreSQL refused the batch holding this "
			    "command, so nothing of it was carried out; "
			    "this is a bug, and the exchange's log says "
			    "why (\"batch not committed\")");
	}
}

bool wpipe_down(const struct wpipe *p)
{
	return p->pq->broken(p->conn[0]) || p->pq->broken(p->conn[1]);
}

/* Fails f, which was applied on top of a batch that did not commit: it
 * runs again when that one does (p->retry), or is answered as that one
 * was when it was fenced. */
static void fail_after(struct wpipe *p, struct wpipe_batch *f, bool down)
{
	if (!f->ok)
		return;
	f->ok = false;
	f->down = down;
	f->retry = p->retry && !down;
	f->fenced = p->fenced; /* answered as the one before it */
	snprintf(f->err, sizeof f->err,
	         "the batch before it was not committed");
}

/* f is over: a failure's answers are set, and the writer answers it. */
static void land(struct wpipe *p, struct wpipe_batch *f)
{
	if (!f->ok && !f->retry)
		fail_all(f->cmds, f->n, fail_kind_of(f));
	p->h->land(p->ctx, f);
}

/* Whether the gathering batch g may be sent now: nothing is open, and
 * either nothing commits or overlap lets it open beside that. */
static bool may_send(const struct wpipe *p, const struct wpipe_batch *g)
{
	return g->n && g->ok && !p->of && (p->overlap || !p->cf);
}

/* Sends f, which has rows to write: whole when nothing is in flight, else
 * opened on the connection the committing batch does not use. */
static void launch(struct wpipe *p, struct wpipe_batch *f)
{
	assert(!p->of);
	f->conn = p->cf && p->cf->conn == p->conn[0] ? p->conn[1] : p->conn[0];
	f->no = ++p->nbatch;
	if (p->cf) {
		send_batch(p, f, SEND_OPEN);
		p->of = f;
	} else {
		send_batch(p, f, SEND_OPEN | SEND_CLOSE);
		p->cf = f;
	}
}

/* Waits for the committing batch and answers it, then sends the rest of
 * the open one, which commits next; or, when the committing one failed,
 * rolls the open one back and answers it too. Returns false when a batch
 * failed: what was applied after it must fail as well.
 *
 * *gp, when given, is the gathering batch: if it may go out now (as
 * wpipe_turn would send it next), it is sent before the answers, so that
 * PostgreSQL works on it while they go out, and *gp becomes NULL. */
static bool advance(struct wpipe *p, struct wpipe_batch **gp)
{
	struct wpipe_batch *c = p->cf, *o = p->of;
	finish_batch(p, c);
	bool ok = c->ok;
	if (!ok)
		p->fenced = c->fenced;
	bool down = c->down || wpipe_down(p);
	/* the next COMMIT goes out before this batch's answers */
	if (o && ok)
		send_batch(p, o, SEND_CLOSE);
	p->cf = o;
	p->of = NULL;
	/* and so does the next batch: answering one takes a few µs a
	 * command, with PostgreSQL idle meanwhile when nothing else is under
	 * way (docs/ARCHITECTURE.md, round eight) */
	struct wpipe_batch *g = gp ? *gp : NULL;
	if (ok && g && may_send(p, g) && p->h->build(p->ctx, g) > 0) {
		launch(p, g);
		*gp = NULL;
	}
	land(p, c);
	if (o && !ok) {
		fail_after(p, o, down);
		finish_batch(p, o);
		land(p, o);
		p->cf = NULL;
	}
	return ok;
}

bool wpipe_drain(struct wpipe *p)
{
	bool ok = true;
	while (p->cf)
		ok = advance(p, NULL) && ok;
	return ok;
}

void wpipe_turn(struct wpipe *p, struct wpipe_batch **gp, bool took)
{
	struct wpipe_batch *g = *gp;
	/* Lands the committing batch once its answer has come; waits up to
	 * 1 ms for it when no command came either. */
	if (p->cf && p->pq->ready(p->cf->conn, took ? 0 : 1) &&
	    !advance(p, &g) && g && g->n)
		fail_after(p, g, wpipe_down(p));
	if (!g) { /* advance sent it */
		*gp = NULL;
		return;
	}
	if (g->n && !g->ok) {
		if (!wpipe_drain(p))
			fail_after(p, g, wpipe_down(p));
		land(p, g);
		*gp = NULL;
	} else if (may_send(p, g)) {
		if (p->h->build(p->ctx, g) > 0) {
			launch(p, g);
			*gp = NULL;
		} else if (!p->cf) { /* nothing to write or wait for */
			land(p, g);
			*gp = NULL;
		}
	}
}

void wpipe_run(struct wpipe *p, struct wpipe_batch *b)
{
	assert(!p->cf && !p->of);
	b->conn = p->conn[0];
	b->no = ++p->nbatch;
	send_batch(p, b, SEND_OPEN | SEND_CLOSE);
	finish_batch(p, b);
}
