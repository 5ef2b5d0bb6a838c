/*
 * writer.c — see writer.h: the writer's thread, its queue and its public
 * interface; its connections (made, checked, given up, their backends
 * ended) and the recovery after a failure. The parts it runs:
 *
 *   writer_apply.c  the books, and the commands applied to them
 *   writer_idem.c   the lookups before applying: keys, accounts
 *   writer_rows.c   the rows and answers of a batch, as data
 *   writer_pipe.c   the commit pipeline (its states drawn in writer_pipe.h)
 *   writer_pq.c     the libpq calls under the pipeline
 *
 * One batch, as writer_main runs it (struct flight, prepare_batch,
 * wpipe_turn):
 *
 *   take batch N+1 ──> reads and markets ──> idem_lookup (lconn) ──> apply
 *        each command (books mutate, rows collect in struct rows_batch)
 *        ──> wait for N's COMMIT ──ok──> answer N, publish its events
 *                                ──fail─> answer N and N+1 503/500, rebuild
 *        ──> send N+1 (build_batch), which is now the batch in flight
 */
#include "exchange/writer.h"

#include <assert.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "exchange/db.h"
#include "exchange/events.h"
#include "exchange/metrics.h"
#include "exchange/owner.h"
#include "exchange/pgpipe.h"
#include "exchange/writer_apply.h"
#include "exchange/writer_idem.h"
#include "exchange/writer_pipe.h"
#include "exchange/writer_pq.h"
#include "exchange/writer_rows.h"

#define WRITER_IDLE_MS 1000 /* GTD expiry and reconnect tick */
/* /readyz fails when commands wait and the writer has made no progress
 * for this long (a batch that never lands, a loop that never ends) */
#define WRITER_STALL_NS INT64_C(5000000000)
/* reconnecting while PostgreSQL is away: first after this, doubling up
 * to the most */
#define WRITER_BACKOFF_MIN_MS 100
#define WRITER_BACKOFF_MAX_MS 2000
/* A command whose batch lost a key race to another ramexd (wpipe_batch.
 * retry) runs again with its keys looked up; one race a key is the most a
 * command meets (the lookup then sees the winner), so more means something
 * else is wrong: it is answered 503 after this many runs */
#define WRITER_KEY_TRIES 4

/* A batch: the pipeline's part first (writer_pipe.h), then the writer's. */
struct flight {
	struct wpipe_batch p;
	struct rows_batch b;
	struct idem_keys keys; /* its idempotency keys, held back from others */
	struct writer_cmd *deferred;
	uint64_t seq[ROWS_MAX_MARKETS]; /* the seqs this batch writes */
};

/* build_batch fills one column set per statement before ROWS_IDEM */
_Static_assert(ROWS_IDEM == ROWS_NSTMT - 1, "the idempotency rows come last");

static struct flight *flight_of(struct wpipe_batch *p)
{
	return (struct flight *)p; /* its first member */
}

struct writer {
	struct writer_opts o;
	char conninfo[512];
	/* the batches' transactions, pipelined: two, so that a batch's
	 * inserts run while the one before it commits (pipe.conn) */
	struct wpipe pipe;
	struct idem idem;      /* lookups (idem.lconn) and the key filter */
	struct apply_books bk; /* the books */
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct writer_cmd *head, *tail;
	/* commands of batches to run again (requeue), in the order they came;
	 * put back before the queue's head at the next turn */
	struct writer_cmd *again, *again_last;
	bool accepting, stopping;
	bool ready;
	/* progress, for /readyz (atomics): CLOCK_MONOTONIC ns of the last
	 * batch answered, or of the last turn of the writer's loop with none
	 * under way; and whether it holds commands not yet answered */
	int64_t beat;
	bool inflight;
	/* reconnecting: not before retry_at (monotonic ns), unless the last
	 * attempt was the idle tick's (idle_failed) and commands wait */
	int64_t retry_at;
	int backoff_ms;
	bool idle_failed;
	/* the backend of each writer connection (pid, backend_start), and
	 * those of connections given up: such a backend may still run, and
	 * commit, the batch it was sent, after the connection is gone; it is
	 * ended before the books are rebuilt (end_gone_backends) */
	struct backend {
		int pid;
		char start[40];
	} be[2], gone[8];
	int ngone;
};

/* --- helpers ----------------------------------------------------------- */

static void beat(struct writer *w)
{
	__atomic_store_n(&w->beat, clock_mono_ns(), __ATOMIC_RELAXED);
}

/* --- connections ------------------------------------------------------- */

static int tune_session(PGconn *c, char *err, size_t errlen);
static int prepare_stmts(PGconn *c, char *err, size_t errlen);

/* Gives up writer connection i (which may be NULL), noting its backend. */
static void forget_conn(struct writer *w, int i)
{
	if (!w->pipe.conn[i])
		return;
	if (w->be[i].pid) {
		if (w->ngone == (int)(sizeof w->gone / sizeof w->gone[0])) {
			memmove(w->gone, w->gone + 1,
			        sizeof w->gone - sizeof w->gone[0]);
			w->ngone--;
		}
		w->gone[w->ngone++] = w->be[i];
	}
	memset(&w->be[i], 0, sizeof w->be[i]);
	PQfinish(w->pipe.conn[i]);
	w->pipe.conn[i] = NULL;
}

static int connect_db(struct writer *w, int i, char *err, size_t errlen)
{
	PGconn **c = &w->pipe.conn[i];
	forget_conn(w, i);
	*c = db_connect(w->conninfo, err, errlen);
	if (!*c)
		return -1;
	PGresult *r = NULL;
	if (db_check_durable(*c, err, errlen) < 0 ||
	    tune_session(*c, err, errlen) < 0 ||
	    prepare_stmts(*c, err, errlen) < 0 ||
	    !(r = db_exec(*c, PGRES_TUPLES_OK,
	                  "SELECT pg_backend_pid(), backend_start::text FROM "
	                  "pg_stat_activity WHERE pid = pg_backend_pid()",
	                  0, NULL, err, errlen))) {
		PQfinish(*c);
		*c = NULL;
		return -1;
	}
	if (PQntuples(r) == 1) {
		w->be[i].pid = (int)db_int(r, 0, 0);
		snprintf(w->be[i].start, sizeof w->be[i].start, "%s",
		         PQgetvalue(r, 0, 1));
	}
	PQclear(r);
	return 0;
}

/* Waits until the backends of the connections given up are gone: up to
 * 2 s for each to finish by itself (it runs what it was sent, then reads
 * the end of its connection and exits), then ends it (waiting up to 10 s
 * more). A connection lost after its batch was sent leaves a backend that
 * may still be running that batch, and commit it: books rebuilt before
 * then would miss it, and the next batch would reuse its ids (a unique
 * violation, all of that batch refused). -1 when c failed. */
static int end_gone_backends(struct writer *w, PGconn *c, char *err,
                             size_t errlen)
{
	for (int k = 0; k < w->ngone; k++) {
		char pid[16];
		snprintf(pid, sizeof pid, "%d", w->gone[k].pid);
		const char *pv[] = {pid, w->gone[k].start};
		char state[6];
		PGresult *r = NULL;
		for (int t = 0; t < 200; t++) {
			r = db_exec_state(
			    c, PGRES_TUPLES_OK,
			    "SELECT 1 FROM pg_stat_activity WHERE "
			    "pid = $1::int AND backend_start = "
			    "$2::timestamptz",
			    2, pv, err, errlen, state);
			if (!r || PQntuples(r) == 0)
				break; /* gone (or c failed) */
			PQclear(r);
			r = NULL;
			nanosleep(&(struct timespec){0, 10 * 1000000}, NULL);
		}
		if (!r && (db_broken(c) || db_state_lost(state)))
			return -1;
		PQclear(r);
		r = db_exec_state(
		    c, PGRES_TUPLES_OK,
		    "SELECT pg_terminate_backend(pid, 10000) FROM "
		    "pg_stat_activity WHERE pid = $1::int AND backend_start = "
		    "$2::timestamptz",
		    2, pv, err, errlen, state);
		if (!r && (db_broken(c) || db_state_lost(state)))
			return -1;
		if (!r) /* not allowed to: the rebuild may race it */
			log_warn("could not end a lost connection's backend",
			         "pid=%s err=\"%s\"", pid, err);
		else if (PQntuples(r) == 1)
			log_info("ended a lost connection's backend", "pid=%s",
			         pid);
		PQclear(r);
	}
	w->ngone = 0;
	return 0;
}

/* Every statement of the writer touches a handful of rows by their keys.
 * A plan that scans a whole table instead (the planner's choice while a
 * table is new and small, kept by a prepared statement after it has grown,
 * or when it guesses the rows of a batch too high) would cost a scan of
 * orders or idempotency per batch; so the writer's sessions never pick a
 * sequential scan where an index serves. And since every statement's plan
 * is the same whatever the batch holds (index lookups and inserts), its
 * prepared statements keep one generic plan: PostgreSQL otherwise plans
 * each of them again for every batch (custom plans, about a tenth of its
 * CPU an order). A generic plan is made once, at the first batch, often
 * while the tables are empty, and knows no batch's size: it then joined
 * the batch's keys to every order with a client order id by hash (a scan
 * of them all per batch, 92 us an order after a minute), so hash and merge
 * joins are off too, leaving the nested loop of index lookups by key that
 * every statement here means. JIT is off: it never pays for a handful of
 * rows, and a scan the settings above penalise (the rebuild's, or the
 * retry's search for a contract written before 0010) looks costly enough
 * to compile, which a generic plan would then do at every execution. */
static int tune_session(PGconn *c, char *err, size_t errlen)
{
	PGresult *r =
	    PQexec(c, "SET enable_seqscan = off; SET enable_hashjoin = "
	              "off; SET enable_mergejoin = off; SET "
	              "plan_cache_mode = force_generic_plan; SET jit = off");
	bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
	if (!ok)
		snprintf(err, errlen, "could not set up the session: %s",
		         PQresultErrorMessage(r));
	PQclear(r);
	return ok ? 0 : -1;
}

static int connect_lookup(struct writer *w, char *err, size_t errlen)
{
	if (w->idem.lconn)
		PQfinish(w->idem.lconn);
	w->idem.lconn = db_connect(w->conninfo, err, errlen);
	if (w->idem.lconn && (tune_session(w->idem.lconn, err, errlen) < 0 ||
	                      idem_prepare(w->idem.lconn, err, errlen) < 0)) {
		PQfinish(w->idem.lconn);
		w->idem.lconn = NULL;
	}
	return w->idem.lconn ? 0 : -1;
}

static int prepare_stmts(PGconn *c, char *err, size_t errlen)
{
	for (int i = 0; i < ROWS_NSTMT; i++) {
		PGresult *r = PQprepare(c, rows_stmts[i].name,
		                        rows_stmts[i].sql, 0, NULL);
		bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
		if (!ok)
			snprintf(err, errlen, "could not prepare %s: %s",
			         rows_stmts[i].name, PQresultErrorMessage(r));
		PQclear(r);
		if (!ok) {
			err[strcspn(err, "\n")] = 0;
			return -1;
		}
	}
	return 0;
}

/* --- the batch hooks of the pipeline ----------------------------------- */

/* Wakes each command's thread. One semaphore per command, not a condition
 * variable under the writer's mutex: dozens of threads woken at once would
 * each wake, find the mutex taken and sleep again. A command may be gone
 * as soon as it is posted. */
static void answer(struct writer_cmd **cmds, int n)
{
	for (int i = 0; i < n; i++) {
		struct writer_cmd *c = cmds[i];
		if (!c)
			continue;
		if (c->on_done)
			c->on_done(c, c->on_done_arg);
		else
			sem_post(&c->done);
	}
}

static void publish(struct writer *w, struct rows_batch *b)
{
	/* shared, the batch wrote them: every instance reads them back */
	if (!w->o.events || events_shared(w->o.events))
		return;
	for (size_t i = 0; i < b->pub.n; i++) {
		const struct rows_event *e = &b->pub.v[i];
		events_publish(w->o.events, e->type, e->a, e->ta, e->b, e->tb,
		               b->pubtext.p + e->off);
	}
}

/* Turns the batch's rows into each statement's parameters (f->par), and
 * notes the seq each market it touched reaches. Returns how many
 * statements have rows: 0 when there is nothing to write (all replays,
 * reads or refusals). */
static int build_batch(void *ctx, struct wpipe_batch *pb)
{
	struct writer *w = ctx;
	struct flight *f = flight_of(pb);
	struct rows_batch *b = &f->b;
	/* one column set per statement (enum rows_stmt_id), but the
	 * idempotency rows (b->idem), collected as the commands ran */
	struct rows_cols cs[ROWS_IDEM];
	int n = 0;

	memset(cs, 0, sizeof cs);
	for (int i = 0; i < w->bk.nm; i++) {
		/* every market it touches is fenced by its epoch */
		if (b->touched[i]) {
			rows_col_i(&cs[ROWS_FENCE], 0, w->bk.m[i].id);
			rows_col_i(&cs[ROWS_FENCE], 1, w->bk.m[i].epoch);
			cs[ROWS_FENCE].rows++;
		}
		f->seq[i] = book_seq(w->bk.m[i].book);
		/* seq_saved may be behind a batch still in flight: then this
		 * writes a seq already written, which is harmless */
		if (b->touched[i] && f->seq[i] != w->bk.m[i].seq_saved) {
			rows_col_i(&cs[ROWS_SEQ], 0, w->bk.m[i].id);
			rows_col_i(&cs[ROWS_SEQ], 1, (int64_t)f->seq[i]);
			cs[ROWS_SEQ].rows++;
		}
	}
	for (size_t i = 0; i < b->orders.n; i++) {
		const struct rows_order *o = &b->orders.v[i];
		rows_order_cols(&cs[ROWS_INS_ORDERS], &cs[ROWS_UPD_ORDERS], o);
		if (o->is_new && o->coid[0])
			idem_note_coid(&w->idem, o->account_id, o->coid);
	}
	idem_stats(&w->idem);
	for (size_t i = 0; i < b->trades.n; i++)
		rows_trade_cols(&cs[ROWS_INS_TRADES], &b->trades.v[i]);
	for (size_t i = 0; i < b->contracts.n; i++)
		rows_contract_cols(&cs[ROWS_INS_CONTRACTS], &b->contracts.v[i]);
	if (events_shared(w->o.events))
		for (size_t i = 0; i < b->pub.n; i++)
			rows_event_cols(&cs[ROWS_EVENTS], b, &b->pub.v[i]);
	for (int i = 0; i < ROWS_NSTMT; i++) {
		struct rows_cols *c = i < ROWS_IDEM ? &cs[i] : &b->idem;
		n += i != ROWS_FENCE && c->rows > 0;
	}
	for (int i = 0; i < ROWS_NSTMT; i++) {
		struct rows_cols *c = i < ROWS_IDEM ? &cs[i] : &b->idem;
		/* the fence alone is nothing to write */
		pb->rows[i] = n ? c->rows : 0;
		if (pb->rows[i])
			rows_cols_take(c, rows_stmts[i].ncol, pb->par[i]);
	}
	n += n && cs[ROWS_FENCE].rows > 0;
	for (int i = 0; i < ROWS_IDEM; i++)
		for (int k = 0; k < ROWS_COLS_MAX; k++)
			pgarr_free(&cs[i].c[k]);
	return n;
}

/* A batch committed: its time, and the seqs the database now holds. */
static void committed(void *ctx, struct wpipe_batch *pb)
{
	struct writer *w = ctx;
	struct flight *f = flight_of(pb);
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	metrics_batch(pb->n, (int64_t)(t1.tv_sec - pb->t0.tv_sec) * 1000000000 +
	                         (t1.tv_nsec - pb->t0.tv_nsec));
	for (int i = 0; i < w->bk.nm; i++)
		if (f->b.touched[i])
			w->bk.m[i].seq_saved = f->seq[i];
}

/*
 * The commands of a batch that lost a key race: another ramexd on the
 * database committed one of its idempotency keys or client order ids after
 * this one's lookup (or after its key filter was made), and the unique
 * index refused the batch. Nothing of it committed; its commands run again
 * in the next batch, their keys looked up this time (the key filter noted
 * them as the batch was built), so that the one whose key was taken gets
 * the stored answer (a replay, or 422 for another request) and the others
 * are carried out once. No client saw a failure; the books are rebuilt,
 * as after any batch that did not commit.
 */
static void requeue(struct writer *w, struct wpipe_batch *pb)
{
	for (int i = 0; i < pb->n; i++) {
		struct writer_cmd *c = pb->cmds[i];
		if (!c)
			continue;
		if (c->kind == WR_DEPTH || c->kind == WR_MARKET) {
			/* answered outside the batch's transaction (a read, a
			 * market made on its own): that answer stands */
			answer(&c, 1);
			continue;
		}
		if (++c->tries >= WRITER_KEY_TRIES) {
			c->retry_after = true;
			rows_fail_cmd(c, 503, "key-contended", "key contended",
			              "this command's idempotency key or "
			              "client_order_id was taken by another "
			              "request while it ran, several times; "
			              "retry with the same key to learn its "
			              "outcome");
			answer(&c, 1);
			continue;
		}
		free(c->body);
		c->body = NULL;
		c->status = 0;
		c->replayed = false;
		c->next = NULL;
		if (w->again_last)
			w->again_last->next = c;
		else
			w->again = c;
		w->again_last = c;
	}
}

/* Answers every command of f: its own answers when it committed (or had
 * nothing to commit), else those the pipeline set (503/500), and the books
 * are rebuilt, or runs them again (requeue); then publishes and requeues
 * what it deferred. */
static void land(void *ctx, struct wpipe_batch *pb)
{
	struct writer *w = ctx;
	struct flight *f = flight_of(pb);
	beat(w);
	if (pb->ok) {
		metrics_orders(f->b.accepted, f->b.rejected, f->b.ntrades);
		answer(pb->cmds, pb->n);
		publish(w, &f->b);
	} else if (pb->retry) {
		w->bk.need_rebuild = true;
		metrics_key_races(1);
		log_info("batch lost a key race, run again",
		         "commands=%d err=\"%s\"", pb->n, pb->err);
		requeue(w, pb);
	} else {
		if (pb->fenced)
			metrics_batch_fenced();
		if (!pb->pause) {
			w->bk.need_rebuild = true;
			log_error(pb->unknown ? "batch outcome unknown"
			                      : "batch not committed",
			          "commands=%d down=%d err=\"%s\"", pb->n,
			          pb->down, pb->err);
		}
		answer(pb->cmds, pb->n);
	}
	rows_batch_free(&f->b);
	if (f->deferred) {
		pthread_mutex_lock(&w->mu);
		struct writer_cmd *last = f->deferred;
		while (last->next)
			last = last->next;
		last->next = w->head;
		w->head = f->deferred;
		if (!w->tail)
			w->tail = last;
		pthread_mutex_unlock(&w->mu);
		f->deferred = NULL;
	}
	if (pb->pause) {
		struct timespec ts = {0, 200 * 1000000};
		nanosleep(&ts, NULL); /* do not spin while it is away */
	}
}

/* Gives up a writer connection that failed in a way that leaves it
 * unusable or in doubt (lost, or out of step with its pipeline); db_usable
 * makes a new one before the next batch. */
static void drop(void *ctx, int i)
{
	forget_conn(ctx, i);
}

static const struct wpipe_hooks writer_hooks = {
    .build = build_batch,
    .committed = committed,
    .land = land,
    .drop = drop,
};

/* --- the thread -------------------------------------------------------- */

/* PostgreSQL cannot be reached: readyz says so, and the next attempt
 * waits a little longer, up to WRITER_BACKOFF_MAX_MS. `waiting`: commands
 * wait on this attempt (else it was the idle tick's). */
static bool db_unusable(struct writer *w, const char *err, bool waiting)
{
	w->idle_failed = !waiting;
	if (__atomic_exchange_n(&w->ready, false, __ATOMIC_RELAXED))
		log_error("database unavailable", "err=\"%s\"", err);
	metrics_db_up(0);
	int b = w->backoff_ms ? w->backoff_ms * 2 : WRITER_BACKOFF_MIN_MS;
	w->backoff_ms = b < WRITER_BACKOFF_MAX_MS ? b : WRITER_BACKOFF_MAX_MS;
	w->retry_at = clock_mono_ns() + (int64_t)w->backoff_ms * 1000000;
	return false;
}

/* Only while no batch is in flight: the connections are then idle, and
 * one that PostgreSQL closed meanwhile (a shutdown, a restart) is
 * noticed here without blocking, and made again; after a failure the
 * books are rebuilt from the database. The idle tick calls it every
 * second, so a restart while idle is over before the next order comes.
 * `waiting`: commands wait on it. The backoff keeps a stream of commands
 * from trying at every batch while PostgreSQL is away; but the first
 * command after the idle tick's failures tries at once: PostgreSQL may be
 * back (a restart that took a few seconds), and nothing else would have
 * tried for up to WRITER_BACKOFF_MAX_MS more. */
static bool db_usable(struct writer *w, bool waiting)
{
	char err[512];
	bool bad[2] = {!db_alive(w->pipe.conn[0]),
	               !db_alive(w->pipe.conn[1])};
	bool lbad = !db_alive(w->idem.lconn);
	if (!lbad && !bad[0] && !bad[1] && !w->bk.need_rebuild)
		return true;
	if (clock_mono_ns() < w->retry_at && !(waiting && w->idle_failed))
		return false; /* still backing off */
	if (lbad && connect_lookup(w, err, sizeof err) < 0)
		return db_unusable(w, err, waiting);
	for (int i = 0; i < 2; i++) {
		if (!bad[i])
			continue;
		if (connect_db(w, i, err, sizeof err) < 0)
			return db_unusable(w, err, waiting);
		log_info("database reconnected", NULL);
		w->bk.need_rebuild = true;
	}
	if (w->ngone &&
	    end_gone_backends(w, w->pipe.conn[0], err, sizeof err) < 0)
		return db_unusable(w, err, waiting);
	if (w->bk.need_rebuild &&
	    apply_load(&w->bk, w->pipe.conn[0], err, sizeof err) < 0) {
		log_error("could not rebuild the books", "err=\"%s\"", err);
		forget_conn(w, 0); /* made again, whatever the problem */
		return db_unusable(w, err, waiting);
	}
	w->backoff_ms = 0;
	__atomic_store_n(&w->ready, true, __ATOMIC_RELAXED);
	metrics_db_up(1);
	return true;
}

static void flight_reset(struct flight *f)
{
	struct idem_keys k = f->keys;
	wpipe_batch_reset(&f->p);
	memset((char *)f + sizeof f->p, 0, sizeof *f - sizeof f->p);
	f->keys = k;
	f->keys.n = 0;
}

/* Applies f's commands [from, n) to the books and collects the rows to
 * write; answers that need no transaction (replays, refusals) are set too.
 * `held` are the keys that batches in flight, and f's earlier commands,
 * hold. */
static void apply_cmds(struct writer *w, struct flight *f, int from,
                       const struct idem_keys *held)
{
	struct wpipe_batch *p = &f->p;
	struct writer_cmd *def = NULL, **tail = &f->deferred;
	int rc = apply_ids_reserve(&w->bk, p->n - from, p->err, sizeof p->err);
	if (rc == 0)
		rc = idem_accounts(&w->idem, &w->bk, p->cmds + from,
		                   p->n - from, p->err, sizeof p->err);
	if (rc == 0)
		rc = idem_lookup(&w->idem, &w->bk, p->cmds + from, p->n - from,
		                 held, &f->keys, &def, p->err, sizeof p->err);
	while (*tail)
		tail = &(*tail)->next;
	*tail = def;
	if (rc < 0) {
		p->ok = false;
		p->down = w->idem.lookup_lost || db_broken(w->idem.lconn);
		return;
	}
	rx_time_ns now = clock_wall_ns();
	for (int i = from; i < p->n; i++) {
		struct writer_cmd *c = p->cmds[i];
		if (!c || c->status)
			continue;
		if (c->kind == WR_NEW)
			apply_new(&w->bk, &f->b, c, now);
		else if (c->kind == WR_CANCEL || c->kind == WR_REDUCE)
			apply_change(&w->bk, &f->b, c, now);
		idem_store(&w->idem, &f->b, c);
	}
	if (w->bk.ids_lost && p->ok) { /* its ids are not its own */
		p->ok = false;
		p->down = db_broken(w->idem.lconn);
		snprintf(p->err, sizeof p->err, "no block of ids");
	}
}

/* The first commands of a new batch: reads and markets are answered
 * first, then the rest applied. `busy`: batches are in flight (whose keys
 * `held` holds); a batch with reads comes only when none is. */
static void prepare_batch(struct writer *w, struct flight *f, bool busy,
                          const struct idem_keys *held)
{
	struct writer_cmd **cmds = f->p.cmds;
	int n = f->p.n;

	rows_batch_init(&f->b);
	/* markets taken or lost first: the books are rebuilt (db_usable)
	 * before any other command of the batch runs */
	for (int i = 0; i < n; i++) {
		if (cmds[i]->kind != WR_OWN && cmds[i]->kind != WR_DISOWN)
			continue;
		apply_own(&w->bk, cmds[i]);
		/* taken from another instance: the keys it wrote are not
		 * in the filter of keys written here */
		if (cmds[i]->kind == WR_OWN && cmds[i]->own_epoch > 1)
			idem_reload(&w->idem);
	}
	if (!busy && !db_usable(w, true)) {
		for (int i = 0; i < n; i++)
			if (cmds[i]->kind == WR_DEPTH && !w->bk.need_rebuild &&
			    w->bk.nm)
				apply_depth(&w->bk, cmds[i]);
		f->p.ok = false, f->p.down = true, f->p.pause = true;
		return;
	}
	for (int i = 0; i < n; i++) {
		if (cmds[i]->kind == WR_DEPTH)
			apply_depth(&w->bk, cmds[i]);
		else if (cmds[i]->kind == WR_MARKET)
			apply_create_market(&w->bk, &w->idem.lconn, cmds[i]);
	}
	apply_cmds(w, f, 0, held);
}

/* Expires the GTD orders due, in a transaction of their own; only while
 * nothing is in flight. */
static void expire_tick(struct writer *w, struct flight *f)
{
	if (!db_usable(w, false) || w->bk.nm == 0)
		return;
	flight_reset(f);
	rows_batch_init(&f->b);
	apply_expire(&w->bk, &f->b, clock_wall_ns());
	if (f->b.orders.n && build_batch(w, &f->p) > 0) {
		wpipe_run(&w->pipe, &f->p);
		if (!f->p.ok) {
			w->bk.need_rebuild = true;
			log_error(f->p.unknown ? "expiry outcome unknown"
			                       : "expiry not committed",
			          "err=\"%s\"", f->p.err);
		} else {
			publish(w, &f->b);
		}
	}
	rows_batch_free(&f->b);
}

/* Whether a batch must wait for those in flight: reads of the books (they
 * see only what is committed), and markets taken or lost (the books are
 * rebuilt). */
static bool has_reads(struct writer_cmd **cmds, int n)
{
	for (int i = 0; i < n; i++)
		if (cmds[i]->kind == WR_DEPTH || cmds[i]->kind == WR_OWN ||
		    cmds[i]->kind == WR_DISOWN)
			return true;
	return false;
}

/* The keys held by the batches in flight, and by g's commands so far. */
static void held_keys(struct idem_keys *k, const struct wpipe *p,
                      const struct flight *g)
{
	const struct flight *fs[] = {p->cf ? flight_of(p->cf) : NULL,
	                             p->of ? flight_of(p->of) : NULL, g};
	k->n = 0;
	for (int j = 0; j < 3; j++)
		for (size_t i = 0; fs[j] && i < fs[j]->keys.n; i++)
			idem_keys_add(k, fs[j]->keys.h[i]);
}

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	struct flight fl[3];
	struct wpipe *q = &w->pipe;
	struct flight *g = NULL; /* gathering */
	struct idem_keys held = {0};
	memset(fl, 0, sizeof fl);
	for (int i = 0; i < 3; i++) {
		fl[i].p.cmds =
		    calloc((size_t)w->o.batch_max, sizeof *fl[i].p.cmds);
		assert(fl[i].p.cmds);
	}
	for (;;) {
		if (!g) {
			for (int i = 0; i < 3 && !g; i++)
				if (&fl[i].p != q->cf && &fl[i].p != q->of)
					g = &fl[i];
			flight_reset(g);
		}
		bool busy = q->cf != NULL;
		int from = g->p.n;
		if (!busy) /* back at the top, nothing under way: progress */
			beat(w);
		pthread_mutex_lock(&w->mu);
		if (w->again) { /* before what came after them */
			w->again_last->next = w->head;
			if (!w->head)
				w->tail = w->again_last;
			w->head = w->again;
			w->again = w->again_last = NULL;
		}
		if (!w->head && !w->stopping && !busy && from == 0) {
			struct timespec until;
			clock_gettime(CLOCK_MONOTONIC, &until);
			until.tv_sec += WRITER_IDLE_MS / 1000;
			pthread_cond_timedwait(&w->cv, &w->mu, &until);
		}
		/* A batch that has commands takes only more orders, cancels
		 * and reduces: reads and markets wait for a batch of their
		 * own. */
		while (w->head && g->p.ok && g->p.n < w->o.batch_max &&
		       (from == 0 || w->head->kind == WR_NEW ||
		        w->head->kind == WR_CANCEL ||
		        w->head->kind == WR_REDUCE)) {
			g->p.cmds[g->p.n++] = w->head;
			w->head = w->head->next;
		}
		if (!w->head)
			w->tail = NULL;
		bool stop = w->stopping && !w->head && g->p.n == 0 && !busy;
		pthread_mutex_unlock(&w->mu);
		/* the writer holds commands: from now on, progress is a
		 * batch that lands (land) */
		__atomic_store_n(&w->inflight, busy || g->p.n > 0,
		                 __ATOMIC_RELAXED);
		if (stop)
			break;
		bool took = g->p.n > from;
		if (!took && from == 0 && !busy) {
			expire_tick(w, g);
			g = NULL; /* the tick used it: reset it */
			continue;
		}
		if (took && from == 0) {
			/* Reads of the books see only what is committed. */
			if (busy && has_reads(g->p.cmds, g->p.n)) {
				wpipe_drain(q);
				busy = false;
			}
			held_keys(&held, q, NULL);
			prepare_batch(w, g, busy, &held);
		} else if (took) {
			held_keys(&held, q, g);
			apply_cmds(w, g, from, &held);
		}
		struct wpipe_batch *gp = &g->p;
		wpipe_turn(q, &gp, took);
		if (!gp) /* sent or answered */
			g = NULL;
	}
	for (int i = 0; i < 3; i++) {
		free(fl[i].p.cmds);
		free(fl[i].keys.h);
	}
	free(held.h);
	return NULL;
}

struct writer *writer_start(const struct writer_opts *o, char *err,
                            size_t errlen)
{
	struct writer *w = calloc(1, sizeof *w);
	if (!w) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	w->o = *o;
	snprintf(w->conninfo, sizeof w->conninfo, "%s", o->conninfo);
	w->bk.book_capacity = o->book_capacity;
	w->bk.owner = o->owner;
	if (o->owner)
		w->bk.nown = owner_held(o->owner, w->bk.own, ROWS_MAX_MARKETS);
	w->bk.idconn = &w->idem.lconn;
	w->pipe.pq = &writer_pq_libpq;
	w->pipe.h = &writer_hooks;
	w->pipe.ctx = w;
	w->pipe.overlap = o->overlap;
	pthread_mutex_init(&w->mu, NULL);
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cv, &a);
	pthread_condattr_destroy(&a);
	const char *fault = getenv("RAMEX_WRITER_FAULT");
	if (pgpipe_fault_parse(&w->pipe.fault, fault) < 0) {
		snprintf(err, errlen,
		         "RAMEX_WRITER_FAULT must be STEP:N (STEP idle, open, "
		         "close or result; N >= 1), not '%.40s'",
		         fault);
		goto fail;
	}
	if (w->pipe.fault.step != PGPIPE_NONE)
		log_warn("writer fault hook on: a test breaks connections",
		         "RAMEX_WRITER_FAULT=%.40s", fault);
	beat(w);
	if (connect_db(w, 0, err, errlen) < 0 ||
	    connect_db(w, 1, err, errlen) < 0 ||
	    connect_lookup(w, err, errlen) < 0 ||
	    apply_load(&w->bk, w->pipe.conn[0], err, errlen) < 0)
		goto fail;
	if (idem_init(&w->idem, w->conninfo, err, errlen) < 0)
		goto fail;
	w->ready = true;
	w->accepting = true;
	if (pthread_create(&w->th, NULL, writer_main, w) != 0) {
		snprintf(err, errlen, "could not start the writer thread");
		goto fail;
	}
	pthread_setname_np(w->th, "ramexd-writer"); /* for top -H, perf */
	idem_start_loader(&w->idem);
	return w;
fail:
	apply_free(&w->bk);
	for (int i = 0; i < 2; i++)
		if (w->pipe.conn[i])
			PQfinish(w->pipe.conn[i]);
	idem_free(&w->idem);
	free(w);
	return NULL;
}

/* Queues c; false (c answered 503) when the writer takes no more. */
static bool enqueue(struct writer *w, struct writer_cmd *c)
{
	c->next = NULL;
	c->status = 0;
	c->body = NULL;
	c->tries = 0;
	pthread_mutex_lock(&w->mu);
	if (!w->accepting) {
		pthread_mutex_unlock(&w->mu);
		c->retry_after = true;
		rows_fail_cmd(c, 503, "shutting-down", "shutting down",
		              "the exchange is shutting down; retry in a few "
		              "seconds");
		return false;
	}
	if (w->tail)
		w->tail->next = c;
	else
		w->head = c;
	w->tail = c;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	return true;
}

void writer_submit(struct writer *w, struct writer_cmd *c)
{
	c->on_done = NULL;
	sem_init(&c->done, 0, 0);
	if (enqueue(w, c))
		while (sem_wait(&c->done) < 0)
			; /* EINTR */
	sem_destroy(&c->done);
}

void writer_submit_async(struct writer *w, struct writer_cmd *c,
                         void (*on_done)(struct writer_cmd *c, void *arg),
                         void *arg)
{
	c->on_done = on_done;
	c->on_done_arg = arg;
	if (!enqueue(w, c))
		on_done(c, arg);
}

bool writer_ready(struct writer *w)
{
	if (!__atomic_load_n(&w->ready, __ATOMIC_RELAXED))
		return false;
	if (clock_mono_ns() - __atomic_load_n(&w->beat, __ATOMIC_RELAXED) <
	    WRITER_STALL_NS)
		return true;
	/* no progress for a while: fine only when there is nothing to do */
	pthread_mutex_lock(&w->mu);
	bool waiting = w->head != NULL;
	pthread_mutex_unlock(&w->mu);
	return !waiting && !__atomic_load_n(&w->inflight, __ATOMIC_RELAXED);
}

void writer_stop(struct writer *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	w->accepting = false;
	w->stopping = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->th, NULL);
	idem_free(&w->idem);
	apply_free(&w->bk);
	for (int i = 0; i < 2; i++)
		if (w->pipe.conn[i])
			PQfinish(w->pipe.conn[i]);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
	free(w);
}
