/*
 * writer.c — see writer.h.
 *
 * One batch, as writer_main runs it (struct flight, prepare_batch, land):
 *
 *   take batch N+1 ──> reads and markets ──> idem_lookup (lconn) ──> apply
 *        each command (books mutate, rows collect in struct batch)
 *        ──> wait for N's COMMIT ──ok──> answer N, publish its events
 *                                ──fail─> answer N and N+1 503/500, rebuild
 *        ──> send_batch(N+1), which is now the batch in flight
 */
#include "exchange/writer.h"

#include <assert.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "exchange/auth.h"
#include "exchange/core/contract.h"
#include "exchange/core/keyfilter.h"
#include "exchange/db.h"
#include "exchange/events.h"
#include "exchange/metrics.h"
#include "exchange/pgarr.h"
#include "exchange/pgpipe.h"

#define WRITER_MAX_MARKETS 256
#define WRITER_IDLE_MS     1000 /* GTD expiry and reconnect tick */
/* /readyz fails when commands wait and the writer has made no progress
 * for this long (a batch that never lands, a loop that never ends) */
#define WRITER_STALL_NS INT64_C(5000000000)
/* reconnecting while PostgreSQL is away: first after this, doubling up
 * to the most */
#define WRITER_BACKOFF_MIN_MS 100
#define WRITER_BACKOFF_MAX_MS 2000

struct market {
	int64_t id;
	char name[16];
	bool perm;
	int perm_year;      /* perm: the YYYY of perm-YYYY */
	int64_t term_end_s; /* perm: the end of its term, unix seconds */
	char term_end[32];  /* ISO 8601, "" for spot */
	int64_t notice_period_s, breach_penalty, delivery_deadline_s;
	struct book *book;
	uint64_t seq_saved;
};

struct acct {
	char kind; /* 'n'ode, 'o'perator, 'e'xchange; 0 = not known */
	int64_t team;
};

/* Per-batch scratch: the rows to write and the events to publish. Rows are
 * plain structs, written out as JSON text in one pass when the batch is
 * sent (jansson objects per row cost more than the rest of the batch). */
struct orow {
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

struct trow {
	uint64_t id, taker, maker;
	int64_t market_id, seq, buyer, seller, price, pages, ts;
	int64_t maker_remaining; /* the maker's pages left after it */
	enum book_side side;
};

/* One fill as the answer to POST /v1/orders shows it. */
struct fill {
	int64_t trade_id, price, pages, taker, maker, buyer, seller;
	int64_t maker_remaining, taker_remaining, contract_id;
	enum book_side side;
	const char *market;
};

struct crow {
	uint64_t id, trade_id;
	const struct market *m;
	int64_t buyer, seller, pages, price;
	struct contract k;
	rx_time_ns now;
};

struct pubev {
	const char *type;
	int64_t a, ta, b, tb;
	size_t off; /* its JSON text in batch.pubtext, NUL-terminated */
};

/* A growing text buffer; out of memory is fatal (assert), as for events. */
struct sb {
	char *p;
	size_t n, cap;
};

/* The columns of rows to write, each a PostgreSQL array literal
 * ("{1,2,NULL}"), for INSERT ... SELECT FROM unnest($1::bigint[], ...):
 * cheaper for the server to read than JSON, and for us to write. */
#define COLS_MAX 25
struct colset {
	struct pgarr c[COLS_MAX];
	size_t rows;
};

#define VEC(T)                                                                 \
	struct {                                                               \
		T *v;                                                          \
		size_t n, cap;                                                 \
	}

struct omap_ent {
	uint64_t id;
	size_t row; /* index into batch.orders */
};

struct batch {
	VEC(struct orow) orders;
	VEC(struct trow) trades;
	VEC(struct crow) contracts;
	VEC(struct pubev) pub;
	struct colset idem; /* the idempotency rows */
	struct sb pubtext;
	struct omap_ent *map;
	size_t mapcap, mapn;
	bool touched[WRITER_MAX_MARKETS];
	int accepted, rejected, ntrades;
};

#define VEC_PUSH(vec)                                                          \
	(((vec).n == (vec).cap                                                 \
	      ? vec_grow((void **)&(vec).v, &(vec).cap, sizeof *(vec).v)       \
	      : (void)0),                                                      \
	 memset(&(vec).v[(vec).n], 0, sizeof *(vec).v), &(vec).v[(vec).n++])

static void vec_grow(void **v, size_t *cap, size_t elem)
{
	size_t n = *cap ? *cap * 2 : 64;
	void *x = realloc(*v, n * elem);
	assert(x);
	*v = x, *cap = n;
}

struct writer {
	struct writer_opts o;
	char conninfo[512];
	/* the batches' transactions, pipelined: two, so that a batch's
	 * inserts run while the one before it commits (struct flight) */
	PGconn *conn[2];
	PGconn *lconn; /* lookups while batches are in flight on conn */
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct writer_cmd *head, *tail;
	bool accepting, stopping;
	bool ready;
	bool need_rebuild;
	/* progress, for /readyz (atomics): CLOCK_MONOTONIC ns of the last
	 * batch answered, or of the last turn of the writer's loop with none
	 * under way; and whether it holds commands not yet answered */
	int64_t beat;
	bool inflight;
	/* reconnecting: not before retry_at (monotonic ns) */
	int64_t retry_at;
	int backoff_ms;
	bool lookup_lost; /* the last failed lookup lost lconn */
	/* the backend of each writer connection (pid, backend_start), and
	 * those of connections given up: such a backend may still run, and
	 * commit, the batch it was sent, after the connection is gone; it is
	 * ended before the books are rebuilt (end_gone_backends) */
	struct backend {
		int pid;
		char start[40];
	} be[2], gone[8];
	int ngone;
	struct pgpipe_fault fault; /* RAMEX_WRITER_FAULT (pgpipe.h), tests */
	uint64_t nbatch;           /* batches sent, for the fault hook */
	struct market m[WRITER_MAX_MARKETS];
	int nm;
	struct acct *acct;
	size_t nacct;
	/* a trade's contract has the trade's id (0010_contract_is_trade.sql) */
	uint64_t next_order, next_trade;
	/* every idempotency key and client order id the database may hold:
	 * those it held when ramexd started, read by the loader thread
	 * (`loaded`, NULL until it is done), and those the writer wrote since
	 * (`known`); a key in neither needs no lookup */
	struct keyfilter *known;
	struct keyfilter *loaded;
	pthread_t loader;
	bool loader_started;
	int loader_stop; /* atomic */
	/* events of the command being applied */
	struct book_event *ev;
	size_t nev, capev;
	char reject_msg[BOOK_MSG_MAX];
};

/* --- names ------------------------------------------------------------- */

static const char *side_names[] = {"buy", "sell"};
static const char *tif_names[] = {"gtc", "ioc", "fok", "gtd"};
static const char *stp_names[] = {"cancel_taker", "cancel_maker",
                                  "cancel_both"};

const char *writer_side_name(enum book_side s)
{
	return side_names[s & 1];
}
const char *writer_tif_name(enum book_tif t)
{
	return tif_names[t & 3];
}
const char *writer_stp_name(enum book_stp s)
{
	return (unsigned)s < 3 ? stp_names[s] : "?";
}

static int parse_name(const char *s, const char **names, int n, int *out)
{
	for (int i = 0; i < n; i++)
		if (s && strcmp(s, names[i]) == 0)
			return *out = i, 0;
	return -1;
}

int writer_side_parse(const char *s, enum book_side *out)
{
	int v;
	if (parse_name(s, side_names, 2, &v) < 0)
		return -1;
	*out = (enum book_side)v;
	return 0;
}

int writer_tif_parse(const char *s, enum book_tif *out)
{
	int v;
	if (parse_name(s, tif_names, 4, &v) < 0)
		return -1;
	*out = (enum book_tif)v;
	return 0;
}

int writer_stp_parse(const char *s, enum book_stp *out)
{
	int v;
	if (parse_name(s, stp_names, 3, &v) < 0)
		return -1;
	*out = (enum book_stp)v;
	return 0;
}

/* --- helpers ----------------------------------------------------------- */

static int64_t mono_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void beat(struct writer *w)
{
	__atomic_store_n(&w->beat, mono_ns(), __ATOMIC_RELAXED);
}

static rx_time_ns now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	return (rx_time_ns)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void iso_time(int64_t unix_s, char out[32])
{
	struct tm tm;
	time_t t = (time_t)unix_s;
	gmtime_r(&t, &tm);
	strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static char *problem(int status, const char *slug, const char *title,
                     const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static char *problem(int status, const char *slug, const char *title,
                     const char *fmt, ...)
{
	char detail[512], type[96];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof detail, fmt, ap);
	va_end(ap);
	snprintf(type, sizeof type, "urn:ramex:problem:%s", slug);
	json_t *j = json_pack("{s:s,s:s,s:i,s:s}", "type", type, "title", title,
	                      "status", status, "detail", detail);
	char *s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return s;
}

static void set_answer(struct writer_cmd *c, int status, char *body)
{
	free(c->body);
	c->status = status;
	c->body = body;
}

static void fail_cmd(struct writer_cmd *c, int status, const char *slug,
                     const char *title, const char *detail)
{
	set_answer(c, status, problem(status, slug, title, "%s", detail));
}

static struct market *market_by_name(struct writer *w, const char *name)
{
	for (int i = 0; i < w->nm; i++)
		if (strcmp(w->m[i].name, name) == 0)
			return &w->m[i];
	return NULL;
}

static struct acct *acct_get(struct writer *w, int64_t id)
{
	if (id <= 0 || (size_t)id >= w->nacct || !w->acct[id].kind)
		return NULL;
	return &w->acct[id];
}

static int acct_put(struct writer *w, int64_t id, char kind, int64_t team)
{
	if (id <= 0)
		return -1;
	if ((size_t)id >= w->nacct) {
		size_t n = (size_t)id * 2 + 64;
		struct acct *a = realloc(w->acct, n * sizeof *a);
		if (!a)
			return -1;
		memset(a + w->nacct, 0, (n - w->nacct) * sizeof *a);
		w->acct = a, w->nacct = n;
	}
	w->acct[id].kind = kind;
	w->acct[id].team = team;
	return 0;
}

static void emit(void *ctx, const struct book_event *ev)
{
	struct writer *w = ctx;
	if (w->nev == w->capev) {
		size_t n = w->capev ? w->capev * 2 : 64;
		struct book_event *e = realloc(w->ev, n * sizeof *e);
		assert(e); /* events are small; out of memory here is fatal */
		w->ev = e, w->capev = n;
	}
	w->ev[w->nev] = *ev;
	w->ev[w->nev].message = NULL;
	if (ev->kind == BOOK_EV_REJECTED && ev->message)
		snprintf(w->reject_msg, sizeof w->reject_msg, "%s",
		         ev->message);
	w->nev++;
}

/* --- loading ----------------------------------------------------------- */

static void free_books(struct writer *w)
{
	for (int i = 0; i < w->nm; i++)
		book_free(w->m[i].book);
	w->nm = 0;
}

static int load_accounts(struct writer *w, char *err, size_t errlen)
{
	PGresult *r = db_exec(w->conn[0], PGRES_TUPLES_OK,
	                      "SELECT id, kind, coalesce(team_id, 0) FROM "
	                      "accounts",
	                      0, NULL, err, errlen);
	if (!r)
		return -1;
	for (int i = 0; i < PQntuples(r); i++)
		if (acct_put(w, db_int(r, i, 0), PQgetvalue(r, i, 1)[0],
		             db_int(r, i, 2)) < 0) {
			PQclear(r);
			snprintf(err, errlen, "out of memory for accounts");
			return -1;
		}
	PQclear(r);
	return 0;
}

static int add_market(struct writer *w, const PGresult *r, int i, char *err,
                      size_t errlen)
{
	if (w->nm >= WRITER_MAX_MARKETS) {
		snprintf(err, errlen, "more than %d markets",
		         WRITER_MAX_MARKETS);
		return -1;
	}
	struct market *m = &w->m[w->nm];
	struct book_params p = {
	    .tick = db_int(r, i, 3),
	    .lot = db_int(r, i, 4),
	    .min_pages = db_int(r, i, 5),
	    .max_pages = db_int(r, i, 6),
	    .price_min = db_int(r, i, 7),
	    .price_max = db_int(r, i, 8),
	    .capacity = w->o.book_capacity,
	};
	memset(m, 0, sizeof *m);
	m->id = db_int(r, i, 0);
	snprintf(m->name, sizeof m->name, "%s", PQgetvalue(r, i, 1));
	m->perm = strcmp(PQgetvalue(r, i, 2), "perm") == 0;
	if (m->perm)
		m->perm_year = atoi(m->name + 5);
	if (!PQgetisnull(r, i, 9)) {
		m->term_end_s = db_int(r, i, 9);
		iso_time(m->term_end_s, m->term_end);
	}
	m->notice_period_s = db_int(r, i, 10);
	m->breach_penalty = db_int(r, i, 11);
	m->delivery_deadline_s = db_int(r, i, 12);
	m->seq_saved = (uint64_t)db_int(r, i, 13);
	m->book = book_new(&p, err, errlen);
	if (!m->book)
		return -1;
	book_set_seq(m->book, m->seq_saved);
	w->nm++;
	return 0;
}

#define MARKET_COLS                                                            \
	"id, name, product, tick, lot, min_pages, max_pages, price_min, "      \
	"price_max, extract(epoch FROM term_end)::bigint, notice_period_s, "   \
	"breach_penalty, delivery_deadline_s, seq"

static int next_id(struct writer *w, const char *table, uint64_t *out,
                   char *err, size_t errlen)
{
	char sql[96];
	snprintf(sql, sizeof sql, "SELECT coalesce(max(id), 0) + 1 FROM %s",
	         table); /* table is one of ours, never input */
	PGresult *r =
	    db_exec(w->conn[0], PGRES_TUPLES_OK, sql, 0, NULL, err, errlen);
	if (!r)
		return -1;
	*out = (uint64_t)db_int(r, 0, 0);
	PQclear(r);
	return 0;
}

/* Rebuilds every book from the open orders, in priority order. */
static int load_all(struct writer *w, char *err, size_t errlen)
{
	PGresult *r = NULL;
	uint64_t next_contract;
	free_books(w);
	if (load_accounts(w, err, errlen) < 0)
		return -1;
	r = db_exec(w->conn[0], PGRES_TUPLES_OK,
	            "SELECT " MARKET_COLS " FROM markets ORDER BY id", 0, NULL,
	            err, errlen);
	if (!r)
		return -1;
	for (int i = 0; i < PQntuples(r); i++)
		if (add_market(w, r, i, err, errlen) < 0)
			goto fail;
	PQclear(r);
	r = db_exec(w->conn[0], PGRES_TUPLES_OK,
	            "SELECT o.id, o.market_id, o.account_id, o.side, o.tif, "
	            "o.stp, o.post_only, o.price, o.remaining, "
	            "coalesce(o.expires_ns, 0) FROM orders o WHERE o.status = "
	            "'open' ORDER BY o.market_id, o.side, CASE WHEN o.side = "
	            "'buy' THEN -o.price ELSE o.price END, o.priority",
	            0, NULL, err, errlen);
	if (!r)
		goto fail;
	long n = PQntuples(r);
	for (long i = 0; i < n; i++) {
		int64_t mid = db_int(r, i, 1);
		struct market *m = NULL;
		for (int k = 0; k < w->nm; k++)
			if (w->m[k].id == mid)
				m = &w->m[k];
		struct book_order o = {
		    .id = (uint64_t)db_int(r, i, 0),
		    .account = db_int(r, i, 2),
		    .price = db_int(r, i, 7),
		    .pages = db_int(r, i, 8),
		    .expires = db_int(r, i, 9),
		    .post_only = PQgetvalue(r, i, 6)[0] == 't',
		};
		if (!m || writer_side_parse(PQgetvalue(r, i, 3), &o.side) < 0 ||
		    writer_tif_parse(PQgetvalue(r, i, 4), &o.tif) < 0 ||
		    writer_stp_parse(PQgetvalue(r, i, 5), &o.stp) < 0) {
			snprintf(err, errlen, "open order %llu has a bad row",
			         (unsigned long long)o.id);
			goto fail;
		}
		if (book_insert_resting(m->book, &o, err, errlen) < 0)
			goto fail;
	}
	PQclear(r);
	r = NULL;
	if (next_id(w, "orders", &w->next_order, err, errlen) < 0 ||
	    next_id(w, "trades", &w->next_trade, err, errlen) < 0 ||
	    next_id(w, "contracts", &next_contract, err, errlen) < 0)
		goto fail;
	/* past every id of both: rows written before 0010 may differ */
	if (next_contract > w->next_trade)
		w->next_trade = next_contract;
	log_info("books rebuilt", "markets=%d open_orders=%ld", w->nm, n);
	w->need_rebuild = false;
	return 0;
fail:
	PQclear(r);
	free_books(w);
	return -1;
}

static int prepare_stmts(PGconn *c, char *err, size_t errlen);
static int prepare_lookups(PGconn *c, char *err, size_t errlen);
static int tune_session(PGconn *c, char *err, size_t errlen);

/* Gives up writer connection i (which may be NULL), noting its backend. */
static void forget_conn(struct writer *w, int i)
{
	if (!w->conn[i])
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
	PQfinish(w->conn[i]);
	w->conn[i] = NULL;
}

static int connect_db(struct writer *w, int i, char *err, size_t errlen)
{
	PGconn **c = &w->conn[i];
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
			r = db_exec_state(c, PGRES_TUPLES_OK,
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
	if (w->lconn)
		PQfinish(w->lconn);
	w->lconn = db_connect(w->conninfo, err, errlen);
	if (w->lconn && (tune_session(w->lconn, err, errlen) < 0 ||
	                 prepare_lookups(w->lconn, err, errlen) < 0)) {
		PQfinish(w->lconn);
		w->lconn = NULL;
	}
	return w->lconn ? 0 : -1;
}

/* --- text ---------------------------------------------------------------- */

static void sb_need(struct sb *b, size_t more)
{
	if (b->n + more + 1 <= b->cap)
		return;
	size_t cap = b->cap ? b->cap : 4096;
	while (cap < b->n + more + 1)
		cap *= 2;
	char *p = realloc(b->p, cap);
	assert(p); /* out of memory here is fatal, as for the events */
	b->p = p, b->cap = cap;
}

static void sb_put(struct sb *b, const char *s, size_t n)
{
	sb_need(b, n);
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = 0;
}

static void sb_s(struct sb *b, const char *s)
{
	sb_put(b, s, strlen(s));
}

static void sb_i(struct sb *b, int64_t v)
{
	char t[24];
	char *e = t + sizeof t, *q = e;
	uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
	do
		*--q = (char)('0' + u % 10);
	while (u /= 10);
	if (v < 0)
		*--q = '-';
	sb_put(b, q, (size_t)(e - q));
}

/* A JSON string: quotes, and escapes for what JSON requires. */
static void sb_js(struct sb *b, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	sb_need(b, strlen(s) * 6 + 2);
	char *o = b->p + b->n;
	*o++ = '"';
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\') {
			*o++ = '\\', *o++ = (char)*p;
		} else if (*p < 0x20) {
			*o++ = '\\', *o++ = 'u', *o++ = '0', *o++ = '0';
			*o++ = hex[*p >> 4], *o++ = hex[*p & 15];
		} else {
			*o++ = (char)*p;
		}
	}
	*o++ = '"';
	b->n = (size_t)(o - b->p);
	b->p[b->n] = 0;
}

/* ,"key": */
static void sb_k(struct sb *b, const char *key)
{
	size_t n = strlen(key);
	sb_need(b, n + 4);
	char *o = b->p + b->n;
	if (b->n && b->p[b->n - 1] != '{' && b->p[b->n - 1] != '[')
		*o++ = ',';
	*o++ = '"';
	memcpy(o, key, n);
	o += n;
	*o++ = '"', *o++ = ':';
	b->n = (size_t)(o - b->p);
	b->p[b->n] = 0;
}

static void sb_ki(struct sb *b, const char *key, int64_t v)
{
	sb_k(b, key);
	sb_i(b, v);
}

/* a string, or null for NULL */
static void sb_ks(struct sb *b, const char *key, const char *v)
{
	sb_k(b, key);
	if (v)
		sb_js(b, v);
	else
		sb_s(b, "null");
}

static void sb_kb(struct sb *b, const char *key, bool v)
{
	sb_k(b, key);
	sb_s(b, v ? "true" : "false");
}

static void sb_open(struct sb *b, char c)
{
	if (b->n && b->p[b->n - 1] != '{' && b->p[b->n - 1] != '[' &&
	    b->p[b->n - 1] != ':')
		sb_put(b, ",", 1);
	sb_put(b, &c, 1);
}

static char *sb_take(struct sb *b)
{
	char *p = b->p ? b->p : strdup("");
	b->p = NULL, b->n = b->cap = 0;
	return p;
}

/* --- batch rows -------------------------------------------------------- */

static struct omap_ent *omap_find(struct batch *b, uint64_t id, bool add)
{
	if (add && (b->mapn + 1) * 2 > b->mapcap) {
		size_t cap = b->mapcap ? b->mapcap * 2 : 1024;
		struct omap_ent *m = calloc(cap, sizeof *m);
		assert(m);
		for (size_t i = 0; i < b->mapcap; i++) {
			if (!b->map[i].id)
				continue;
			size_t k =
			    (b->map[i].id * 0x9E3779B97F4A7C15u) & (cap - 1);
			while (m[k].id)
				k = (k + 1) & (cap - 1);
			m[k] = b->map[i];
		}
		free(b->map);
		b->map = m, b->mapcap = cap;
	}
	if (!b->mapcap)
		return NULL;
	size_t k = (id * 0x9E3779B97F4A7C15u) & (b->mapcap - 1);
	while (b->map[k].id && b->map[k].id != id)
		k = (k + 1) & (b->mapcap - 1);
	if (b->map[k].id == id)
		return &b->map[k];
	if (!add)
		return NULL;
	b->map[k].id = id;
	b->map[k].row = SIZE_MAX;
	b->mapn++;
	return &b->map[k];
}

static void batch_init(struct batch *b)
{
	memset(b, 0, sizeof *b);
}

static void batch_free(struct batch *b)
{
	free(b->orders.v);
	free(b->trades.v);
	free(b->contracts.v);
	free(b->pub.v);
	for (int i = 0; i < COLS_MAX; i++)
		pgarr_free(&b->idem.c[i]);
	free(b->pubtext.p);
	free(b->map);
	memset(b, 0, sizeof *b);
}

/* Queues an event; `data` is its JSON text. */
static void publish_later(struct writer *w, struct batch *b, const char *type,
                          int64_t a1, int64_t a2, const char *data, size_t len)
{
	struct acct *x = acct_get(w, a1), *y = acct_get(w, a2);
	struct pubev *e = VEC_PUSH(b->pub);
	e->type = type;
	e->a = a1, e->ta = x ? x->team : 0;
	e->b = a2, e->tb = y ? y->team : 0;
	e->off = b->pubtext.n;
	sb_put(&b->pubtext, data, len);
	sb_put(&b->pubtext, "", 1); /* the NUL that ends it */
}

/* The row of order `id` in this batch, made an update row when it is an
 * order of an earlier batch. The pointer lasts until the next row. */
static struct orow *order_row(struct batch *b, uint64_t id, rx_time_ns now)
{
	struct omap_ent *e = omap_find(b, id, true);
	if (e->row == SIZE_MAX) {
		struct orow *r = VEC_PUSH(b->orders);
		r->id = id;
		r->status = "open";
		r->updated = now;
		e->row = b->orders.n - 1;
	}
	return &b->orders.v[e->row];
}

static void order_closed(struct writer *w, struct batch *b, uint64_t id,
                         int64_t account, rx_pages left, const char *status,
                         const char *reason, rx_time_ns now)
{
	struct orow *row = order_row(b, id, now);
	struct sb t = {0};
	row->remaining = left;
	row->status = status;
	row->reason = reason;
	row->updated = now;
	sb_open(&t, '{');
	sb_ki(&t, "id", (int64_t)id);
	sb_ki(&t, "account_id", account);
	sb_ks(&t, "status", status);
	sb_ki(&t, "remaining", left);
	sb_ks(&t, "reason", reason);
	if (row->cancelled_by) {
		sb_ks(&t, "cancelled_by", row->cancelled_by);
		sb_ks(&t, "cancel_note", row->cancel_note);
	}
	sb_s(&t, "}");
	publish_later(w, b, "order", account, 0, t.p, t.n);
	free(t.p);
}

/* --- columns ------------------------------------------------------------ */

static void col_i(struct colset *cs, int k, int64_t v)
{
	pgarr_i64(&cs->c[k], v);
}

static void col_null(struct colset *cs, int k)
{
	pgarr_raw(&cs->c[k], "NULL");
}

/* a text element, quoted; NULL for NULL */
static void col_s(struct colset *cs, int k, const char *v)
{
	pgarr_str(&cs->c[k], v);
}

static void col_b(struct colset *cs, int k, bool v)
{
	pgarr_raw(&cs->c[k], v ? "t" : "f");
}

/* Closes the arrays and hands them out as the statement's parameters (the
 * caller frees them); n columns. */
static void cols_take(struct colset *cs, int n, char **out)
{
	for (int k = 0; k < n; k++) {
		out[k] = pgarr_take(&cs->c[k]);
		assert(out[k]); /* out of memory here is fatal, as in sb_need */
	}
	cs->rows = 0;
}

static void orow_upd(struct colset *upd, const struct orow *r,
                     int64_t filled_add)
{
	col_i(upd, 0, (int64_t)r->id);
	col_i(upd, 1, r->remaining);
	col_i(upd, 2, filled_add);
	col_s(upd, 3, r->status);
	col_s(upd, 4, r->reason);
	col_i(upd, 5, r->updated);
	col_s(upd, 6, r->cancelled_by);
	col_s(upd, 7, r->cancel_note);
	upd->rows++;
}

static void orow_cols(struct colset *ins, struct colset *upd,
                      const struct orow *r)
{
	if (!r->is_new) {
		orow_upd(upd, r, r->filled);
		return;
	}
	/* placed and cancelled by someone in the same batch (rare): who and
	 * why go in by an update after the insert, in the same transaction,
	 * so that the insert, every order's statement, carries no column
	 * for them */
	if (r->cancelled_by)
		orow_upd(upd, r, 0);
	col_i(ins, 0, (int64_t)r->id);
	col_i(ins, 1, r->market_id);
	col_i(ins, 2, r->account_id);
	col_s(ins, 3, writer_side_name(r->side));
	col_s(ins, 4, writer_tif_name(r->tif));
	col_s(ins, 5, writer_stp_name(r->stp));
	col_b(ins, 6, r->post_only);
	col_i(ins, 7, r->price);
	col_i(ins, 8, r->pages);
	col_i(ins, 9, r->remaining);
	col_i(ins, 10, r->filled);
	if (r->tif == BOOK_GTD)
		col_i(ins, 11, r->expires);
	else
		col_null(ins, 11);
	col_s(ins, 12, r->coid[0] ? r->coid : NULL);
	col_s(ins, 13, r->status);
	col_s(ins, 14, r->reason);
	col_i(ins, 15, r->priority);
	col_i(ins, 16, r->created);
	col_i(ins, 17, r->updated);
	col_s(ins, 18, r->placed_by);
	col_s(ins, 19, r->placed_reason);
	ins->rows++;
}

static void trow_cols(struct colset *cs, const struct trow *t)
{
	col_i(cs, 0, (int64_t)t->id);
	col_i(cs, 1, t->market_id);
	col_i(cs, 2, t->seq);
	col_i(cs, 3, (int64_t)t->taker);
	col_i(cs, 4, (int64_t)t->maker);
	col_i(cs, 5, t->buyer);
	col_i(cs, 6, t->seller);
	col_s(cs, 7, writer_side_name(t->side));
	col_i(cs, 8, t->price);
	col_i(cs, 9, t->pages);
	col_i(cs, 10, t->ts);
	col_i(cs, 11, t->maker_remaining);
	cs->rows++;
}

/* The contract row: the same values, column by column, as crow_json. Its
 * trade id is its id, its timestamptz columns are made by the statement
 * from the instants in ns (parsing their text cost more than the rest of
 * the row), and what every new contract holds (its state, the instants of
 * later moves) is in the statement's text (w_ins_contracts). */
static void crow_cols(struct colset *cs, const struct crow *c)
{
	const struct contract *k = &c->k;
	assert(c->id == c->trade_id && k->created == c->now);
	col_i(cs, 0, (int64_t)c->id);
	col_i(cs, 1, c->m->id);
	col_i(cs, 2, c->buyer);
	col_i(cs, 3, c->seller);
	col_s(cs, 4, contract_delivery_name(k->delivery));
	col_i(cs, 5, c->pages);
	col_i(cs, 6, c->price);
	col_s(cs, 7, c->m->perm ? c->m->term_end : NULL);
	col_i(cs, 8, c->m->notice_period_s);
	col_s(cs, 9, contract_product_name(k->product));
	col_i(cs, 10, k->perm_year);
	col_i(cs, 11, k->breach_penalty);
	col_i(cs, 12, k->recall_notice);
	col_i(cs, 13, k->created);
	col_i(cs, 14, k->delivery_deadline);
	col_i(cs, 15, k->term_end);
	col_i(cs, 16, k->changed_at);
	cs->rows++;
}

/* The order as the API shows it (the answer to POST /v1/orders). */
static void order_view(struct sb *o, const struct orow *r, const char *market)
{
	sb_open(o, '{');
	sb_ki(o, "id", (int64_t)r->id);
	sb_ki(o, "account_id", r->account_id);
	sb_ks(o, "side", writer_side_name(r->side));
	sb_ks(o, "tif", writer_tif_name(r->tif));
	sb_ks(o, "stp", writer_stp_name(r->stp));
	sb_kb(o, "post_only", r->post_only);
	sb_ki(o, "price", r->price);
	sb_ki(o, "pages", r->pages);
	sb_ki(o, "remaining", r->remaining);
	sb_ki(o, "filled", r->filled);
	sb_ks(o, "status", r->status);
	sb_ks(o, "reason", r->reason);
	sb_ki(o, "created_ns", r->created);
	sb_ki(o, "updated_ns", r->updated);
	if (r->tif == BOOK_GTD)
		sb_ki(o, "expires_ns", r->expires);
	else
		sb_ks(o, "expires_ns", NULL);
	sb_ks(o, "client_order_id", r->coid[0] ? r->coid : NULL);
	sb_ks(o, "market", market);
	sb_s(o, "}");
}

static void fill_view(struct sb *o, const struct fill *f)
{
	sb_open(o, '{');
	sb_ki(o, "trade_id", f->trade_id);
	sb_ks(o, "market", f->market);
	sb_ki(o, "price", f->price);
	sb_ki(o, "pages", f->pages);
	sb_ki(o, "taker_order_id", f->taker);
	sb_ki(o, "maker_order_id", f->maker);
	sb_ki(o, "buyer_id", f->buyer);
	sb_ki(o, "seller_id", f->seller);
	sb_ks(o, "taker_side", writer_side_name(f->side));
	sb_ki(o, "maker_remaining", f->maker_remaining);
	sb_ki(o, "taker_remaining", f->taker_remaining);
	sb_ki(o, "contract_id", f->contract_id);
	sb_s(o, "}");
}

/* The answer to a placed order: the order as placed, and the JSON texts of
 * its fills (fill_view, comma-separated). A retry answered from the stored
 * rows (coid_replay) goes through this too, so both are the same text. */
static char *order_answer(const struct orow *r, const char *market,
                          const struct sb *fills)
{
	struct sb ans = {0};
	sb_s(&ans, "{\"order\":");
	order_view(&ans, r, market);
	sb_s(&ans, ",\"trades\":[");
	if (fills->n)
		sb_put(&ans, fills->p, fills->n);
	sb_s(&ans, "]}");
	return sb_take(&ans);
}

/* The contract event's data: the contract row, and its market's name. */
static void crow_json(struct sb *o, const struct crow *c, bool market)
{
	char created[32], deliver_by[32];
	const struct contract *k = &c->k;
	iso_time(c->now / 1000000000, created);
	iso_time(k->delivery_deadline / 1000000000, deliver_by);
	sb_open(o, '{');
	sb_ki(o, "id", (int64_t)c->id);
	sb_ki(o, "trade_id", (int64_t)c->trade_id);
	sb_ki(o, "market_id", c->m->id);
	sb_ki(o, "buyer_id", c->buyer);
	sb_ki(o, "seller_id", c->seller);
	sb_ks(o, "delivery", contract_delivery_name(k->delivery));
	sb_ki(o, "pages", c->pages);
	sb_ki(o, "price", c->price);
	sb_ks(o, "state", "pending_delivery");
	sb_ks(o, "deliver_by", deliver_by);
	sb_ks(o, "term_end", c->m->perm ? c->m->term_end : NULL);
	sb_ki(o, "notice_period_s", c->m->notice_period_s);
	sb_ks(o, "created_at", created);
	sb_ks(o, "updated_at", created);
	sb_ks(o, "product", contract_product_name(k->product));
	sb_ki(o, "perm_year", k->perm_year);
	sb_ki(o, "breach_penalty", k->breach_penalty);
	sb_ki(o, "recall_notice_ns", k->recall_notice);
	sb_ki(o, "created_ns", k->created);
	sb_ki(o, "deliver_by_ns", k->delivery_deadline);
	sb_ki(o, "term_end_ns", k->term_end);
	sb_ki(o, "delivered_ns", 0);
	sb_ki(o, "notice_end_ns", 0);
	sb_ki(o, "ended_ns", 0);
	sb_ki(o, "changed_ns", k->changed_at);
	if (market)
		sb_ks(o, "market", c->m->name);
	sb_s(o, "}");
}

/* The contract row of a trade, as exchange/core/contract.h opens it. The
 * order path has already refused what contract_open refuses (a node buying
 * perm, a term that is over), so a failure here is a bug; it is logged and
 * the row is still written from the trade, since the trade has happened. */
static void contract_row(struct crow *row, struct market *m, uint64_t cid,
                         uint64_t tid, int64_t buyer, int64_t seller,
                         bool buyer_is_operator, const struct book_event *ev,
                         rx_time_ns now)
{
	struct contract_trade t = {
	    .contract_id = (int64_t)cid,
	    .trade_id = (int64_t)tid,
	    .buyer = buyer,
	    .seller = seller,
	    .buyer_is_operator = buyer_is_operator,
	    .pages = ev->pages,
	    .price = ev->price,
	    .now = now,
	};
	struct contract_market cm = {
	    .market_id = m->id,
	    .product = m->perm ? CONTRACT_PERM : CONTRACT_SPOT,
	    .perm_year = m->perm_year,
	    .delivery_window = m->delivery_deadline_s * INT64_C(1000000000),
	    .recall_notice = m->notice_period_s * INT64_C(1000000000),
	    .breach_penalty = m->breach_penalty,
	};
	struct contract *k = &row->k;
	char err[256];
	if (contract_open(&t, &cm, k, err, sizeof err) < 0) {
		log_error("trade makes no valid contract; writing it as traded",
		          "trade=%llu err=%s", (unsigned long long)tid,
		          log_quote((char[300]){0}, 300, err));
		memset(k, 0, sizeof *k);
		k->product = cm.product;
		k->perm_year = m->perm_year;
		k->delivery =
		    buyer_is_operator ? CONTRACT_OFFLINE : CONTRACT_LEND;
		k->breach_penalty = m->breach_penalty;
		k->recall_notice = cm.recall_notice;
		k->created = k->changed_at = now;
		k->delivery_deadline = now + cm.delivery_window;
	}
	row->id = cid;
	row->trade_id = tid;
	row->m = m;
	row->buyer = buyer;
	row->seller = seller;
	row->pages = ev->pages;
	row->price = ev->price;
	row->now = now;
}

/* Rows and events of one trade; appends the fill's JSON to `fills`. */
static void trade_rows(struct writer *w, struct batch *b, struct market *m,
                       const struct book_event *ev, rx_time_ns now,
                       struct sb *fills)
{
	int64_t buyer = ev->side == BOOK_BUY ? ev->account : ev->maker_account;
	int64_t seller = ev->side == BOOK_BUY ? ev->maker_account : ev->account;
	struct acct *ba = acct_get(w, buyer);
	bool operator_buys = ba && ba->kind == 'o';
	uint64_t tid = w->next_trade++, cid = tid;

	struct trow *t = VEC_PUSH(b->trades);
	t->id = tid, t->market_id = m->id, t->seq = (int64_t)ev->seq;
	t->taker = ev->id, t->maker = ev->maker_id;
	t->buyer = buyer, t->seller = seller, t->side = ev->side;
	t->price = ev->price, t->pages = ev->pages, t->ts = now;
	t->maker_remaining = ev->maker_remaining;
	struct crow *c = VEC_PUSH(b->contracts);
	contract_row(c, m, cid, tid, buyer, seller, operator_buys, ev, now);

	/* the maker's row: filled counts up on a new row, filled_add on an
	 * update of an earlier batch's order */
	struct orow *row = order_row(b, ev->maker_id, now);
	row->remaining = ev->maker_remaining;
	row->filled += ev->pages;
	row->status = ev->maker_remaining ? "open" : "filled";
	row->updated = now;

	struct sb f = {0};
	struct fill fv = {
	    .trade_id = (int64_t)tid,
	    .price = ev->price,
	    .pages = ev->pages,
	    .taker = (int64_t)ev->id,
	    .maker = (int64_t)ev->maker_id,
	    .buyer = buyer,
	    .seller = seller,
	    .maker_remaining = ev->maker_remaining,
	    .taker_remaining = ev->remaining,
	    .contract_id = (int64_t)cid,
	    .side = ev->side,
	    .market = m->name,
	};
	fill_view(&f, &fv);
	publish_later(w, b, "fill", buyer, seller, f.p, f.n);
	if (fills) {
		sb_open(fills, '{');
		sb_put(fills, f.p + 1, f.n - 1);
	}
	f.n = 0;
	crow_json(&f, c, true);
	publish_later(w, b, "contract", buyer, seller, f.p, f.n);
	free(f.p);
	b->ntrades++;
}

/* Handles events that concern resting orders (expiry, self-trade cancels
 * of makers); returns 1 when it handled ev. */
static int resting_event(struct writer *w, struct batch *b,
                         const struct book_event *ev, uint64_t taker,
                         rx_time_ns now)
{
	if (ev->kind == BOOK_EV_EXPIRED) {
		order_closed(w, b, ev->id, ev->account, ev->pages, "expired",
		             "gtd", now);
		return 1;
	}
	if (ev->kind == BOOK_EV_CANCELLED && ev->id != taker) {
		order_closed(w, b, ev->id, ev->account, ev->pages, "cancelled",
		             book_cancel_name(ev->cancel), now);
		return 1;
	}
	return 0;
}

/* --- authorisation ----------------------------------------------------- */

/* 0 when the principal of c may act for `account`; else answers c. */
static int may_act_for(struct writer *w, struct writer_cmd *c, int64_t account)
{
	struct acct *a = acct_get(w, account);
	char why[256];
	if (!a) {
		snprintf(why, sizeof why, "there is no account %lld",
		         (long long)account);
		fail_cmd(c, 404, "not-found", "no such account", why);
		return -1;
	}
	switch (c->role) {
	case AUTH_NODE:
		if (account == c->p_account)
			return 0;
		snprintf(why, sizeof why,
		         "a node may act only for itself (account %lld), not "
		         "for account %lld",
		         (long long)c->p_account, (long long)account);
		break;
	case AUTH_TRADER:
		if (a->kind == 'n' && a->team == c->p_team)
			return 0;
		snprintf(why, sizeof why,
		         "a trader may act only for the nodes of its team; "
		         "account %lld is not one",
		         (long long)account);
		break;
	case AUTH_OPERATOR:
		if (account == c->p_account && a->kind == 'o')
			return 0;
		snprintf(why, sizeof why,
		         "an operator token acts only for its operator account "
		         "%lld",
		         (long long)c->p_account);
		break;
	default:
		snprintf(why, sizeof why, "the %s role may not trade",
		         auth_role_name(c->role));
	}
	fail_cmd(c, 403, "forbidden", "not your account", why);
	return -1;
}

/* --- commands ---------------------------------------------------------- */

static int64_t cmd_account(const struct writer_cmd *c)
{
	return c->account ? c->account : c->p_account;
}

static void apply_new(struct writer *w, struct batch *b, struct writer_cmd *c,
                      rx_time_ns now)
{
	int64_t account = cmd_account(c);
	struct market *m = market_by_name(w, c->market);
	char why[256];

	if (!m) {
		snprintf(why, sizeof why,
		         "there is no market named '%s'; GET /v1/markets lists "
		         "them",
		         c->market);
		fail_cmd(c, 404, "not-found", "no such market", why);
		return;
	}
	if (!account) {
		fail_cmd(c, 422, "invalid", "account_id required",
		         "say which account the order is for (account_id)");
		return;
	}
	if (may_act_for(w, c, account) < 0)
		return;
	struct acct *a = acct_get(w, account);
	if (c->side == BOOK_BUY && m->perm && a->kind != 'o') {
		snprintf(why, sizeof why,
		         "only the operator buys in %s: a perm market buys "
		         "pages kept offline",
		         m->name);
		fail_cmd(c, 403, "forbidden", "buyer not allowed", why);
		return;
	}
	if (m->perm && now / 1000000000 >= m->term_end_s) {
		snprintf(why, sizeof why,
		         "%s ended at %s: its pages can no longer be "
		         "committed; trade a later year",
		         m->name, m->term_end);
		fail_cmd(c, 422, "invalid", "market term over", why);
		return;
	}
	if (c->side == BOOK_SELL && a->kind != 'n') {
		fail_cmd(c, 403, "forbidden", "seller not allowed",
		         "only nodes sell pages");
		return;
	}

	uint64_t id = w->next_order++;
	struct book_cmd bc = {
	    .kind = BOOK_CMD_NEW,
	    .now = now,
	    .id = id,
	    .account = account,
	    .side = c->side,
	    .tif = c->tif,
	    .stp = c->stp,
	    .post_only = c->post_only,
	    .pages = c->pages,
	    .price = c->price,
	    .expires = c->tif == BOOK_GTD ? c->expires : 0,
	};
	w->nev = 0;
	enum book_reject rej = book_apply(m->book, &bc, emit, w);
	b->touched[m - w->m] = true;

	/* the new order's row, by index: trade_rows adds rows */
	size_t ri = SIZE_MAX;
	struct sb fills = {0};
	for (size_t i = 0; i < w->nev; i++) {
		const struct book_event *ev = &w->ev[i];
		struct orow *row;
		if (resting_event(w, b, ev, id, now))
			continue;
		switch (ev->kind) {
		case BOOK_EV_ACCEPTED:
			row = order_row(b, id, now);
			ri = (size_t)(row - b->orders.v);
			row->is_new = true;
			row->market_id = m->id;
			row->account_id = account;
			row->side = c->side;
			row->tif = c->tif;
			row->stp = c->stp;
			row->post_only = c->post_only;
			row->price = c->price;
			row->pages = row->remaining = c->pages;
			row->priority = (int64_t)ev->seq;
			row->created = row->updated = now;
			row->expires = c->tif == BOOK_GTD ? c->expires : 0;
			snprintf(row->coid, sizeof row->coid, "%s",
			         c->client_order_id);
			snprintf(row->placed_by, sizeof row->placed_by, "%s",
			         c->p_scope);
			break;
		case BOOK_EV_TRADE:
			assert(ri != SIZE_MAX);
			row = &b->orders.v[ri];
			row->remaining = ev->remaining;
			row->filled += ev->pages;
			if (!ev->remaining)
				row->status = "filled";
			trade_rows(w, b, m, ev, now, &fills);
			break;
		case BOOK_EV_CANCELLED:
			assert(ri != SIZE_MAX && ev->id == id);
			row = &b->orders.v[ri];
			row->status = "cancelled";
			row->reason = book_cancel_name(ev->cancel);
			row->placed_reason = row->reason;
			break;
		default:
			break;
		}
	}
	if (rej != BOOK_REJ_NONE) {
		free(fills.p);
		char *p = problem(422, "order-rejected", "order rejected", "%s",
		                  w->reject_msg);
		json_t *pj = json_loads(p, 0, NULL);
		free(p);
		json_object_set_new(pj, "reason",
		                    json_string(book_reject_name(rej)));
		set_answer(c, 422, json_dumps(pj, JSON_COMPACT));
		json_decref(pj);
		b->rejected++;
		return;
	}
	assert(ri != SIZE_MAX);
	b->accepted++;
	set_answer(c, 201, order_answer(&b->orders.v[ri], m->name, &fills));
	free(fills.p);
}

static void apply_change(struct writer *w, struct batch *b,
                         struct writer_cmd *c, rx_time_ns now)
{
	struct book_order o;
	struct market *m = NULL;
	char why[256];
	for (int i = 0; i < w->nm && !m; i++)
		if (book_get(w->m[i].book, c->order_id, &o))
			m = &w->m[i];
	if (!m) {
		snprintf(why, sizeof why,
		         "order %llu is not open: it was filled, cancelled or "
		         "expired, or never existed",
		         (unsigned long long)c->order_id);
		fail_cmd(c, 404, "not-found", "no open order", why);
		return;
	}
	if (may_act_for(w, c, o.account) < 0)
		return;
	struct book_cmd bc = {
	    .kind = c->kind == WR_CANCEL ? BOOK_CMD_CANCEL : BOOK_CMD_REDUCE,
	    .now = now,
	    .id = c->order_id,
	    .pages = c->pages,
	};
	w->nev = 0;
	enum book_reject rej = book_apply(m->book, &bc, emit, w);
	b->touched[m - w->m] = true;
	const char *status = "open";
	rx_pages left = o.pages;
	for (size_t i = 0; i < w->nev; i++) {
		const struct book_event *ev = &w->ev[i];
		if (ev->kind == BOOK_EV_EXPIRED) {
			resting_event(w, b, ev, 0, now);
			if (ev->id == c->order_id)
				status = "expired";
		} else if (ev->kind == BOOK_EV_CANCELLED) {
			if (ev->id == c->order_id) {
				struct orow *row = order_row(b, ev->id, now);
				row->cancelled_by = c->p_scope;
				row->cancel_note = c->note[0] ? c->note : NULL;
			}
			order_closed(w, b, ev->id, ev->account, ev->pages,
			             "cancelled", book_cancel_name(ev->cancel),
			             now);
			status = "cancelled", left = ev->pages;
		} else if (ev->kind == BOOK_EV_REDUCED) {
			struct orow *row = order_row(b, ev->id, now);
			row->remaining = ev->pages;
			row->updated = now;
			left = ev->pages;
			struct sb t = {0};
			sb_open(&t, '{');
			sb_ki(&t, "id", (int64_t)ev->id);
			sb_ki(&t, "account_id", ev->account);
			sb_ks(&t, "status", "open");
			sb_ki(&t, "remaining", ev->pages);
			sb_s(&t, "}");
			publish_later(w, b, "order", ev->account, 0, t.p, t.n);
			free(t.p);
		}
	}
	if (rej != BOOK_REJ_NONE) {
		int st = rej == BOOK_REJ_UNKNOWN_ORDER ? 404 : 422;
		char *p = problem(st, "order-rejected", "change rejected", "%s",
		                  w->reject_msg);
		set_answer(c, st, p);
		return;
	}
	json_t *ans =
	    json_pack("{s:{s:I,s:s,s:I,s:s,s:I,s:I,s:s}}", "order", "id",
	              (json_int_t)c->order_id, "market", m->name, "account_id",
	              (json_int_t)o.account, "side", writer_side_name(o.side),
	              "price", (json_int_t)o.price, "remaining",
	              (json_int_t)left, "status", status);
	set_answer(c, 200, json_dumps(ans, JSON_COMPACT));
	json_decref(ans);
}

static void answer_depth(struct writer *w, struct writer_cmd *c)
{
	struct market *m = market_by_name(w, c->market);
	struct book_level lv[200];
	if (!m) {
		fail_cmd(c, 404, "not-found", "no such market",
		         "there is no market with that name; GET /v1/markets "
		         "lists them");
		return;
	}
	size_t max = c->depth > 0 && c->depth <= 200 ? (size_t)c->depth : 20;
	json_t *sides[2];
	for (int s = 0; s < 2; s++) {
		size_t n = book_depth(m->book, (enum book_side)s, lv, max);
		sides[s] = json_array();
		for (size_t i = 0; i < n; i++)
			json_array_append_new(
			    sides[s],
			    json_pack("{s:I,s:I,s:i}", "price",
			              (json_int_t)lv[i].price, "pages",
			              (json_int_t)lv[i].pages, "orders",
			              (int)lv[i].orders));
	}
	json_t *ans = json_pack("{s:s,s:I,s:o,s:o}", "market", m->name, "seq",
	                        (json_int_t)book_seq(m->book), "bids", sides[0],
	                        "asks", sides[1]);
	set_answer(c, 200, json_dumps(ans, JSON_COMPACT));
	json_decref(ans);
}

static json_t *market_json(const struct market *m)
{
	const struct book_params *p = book_params_of(m->book);
	return json_pack(
	    "{s:I,s:s,s:s,s:s?,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "id",
	    (json_int_t)m->id, "name", m->name, "product",
	    m->perm ? "perm" : "spot", "term_end", m->perm ? m->term_end : NULL,
	    "tick", (json_int_t)p->tick, "lot", (json_int_t)p->lot, "min_pages",
	    (json_int_t)p->min_pages, "max_pages", (json_int_t)p->max_pages,
	    "price_min", (json_int_t)p->price_min, "price_max",
	    (json_int_t)p->price_max, "notice_period_s",
	    (json_int_t)m->notice_period_s, "breach_penalty",
	    (json_int_t)m->breach_penalty, "delivery_deadline_s",
	    (json_int_t)m->delivery_deadline_s);
}

static void create_market(struct writer *w, struct writer_cmd *c)
{
	struct writer_market_spec *s = &c->spec;
	char err[256], args[13][32], term_end[32] = "";
	bool perm = strncmp(s->name, "perm-", 5) == 0;

	if (market_by_name(w, s->name)) {
		fail_cmd(c, 409, "conflict", "market exists",
		         "a market with this name exists already");
		return;
	}
	if (w->nm >= WRITER_MAX_MARKETS) {
		fail_cmd(c, 409, "conflict", "too many markets",
		         "this exchange holds at most 256 markets");
		return;
	}
	s->p.capacity = w->o.book_capacity;
	if (book_params_check(&s->p, err, sizeof err) < 0) {
		fail_cmd(c, 422, "invalid", "invalid market", err);
		return;
	}
	if (perm) {
		struct tm tm = {.tm_year = atoi(s->name + 5) + 1 - 1900,
		                .tm_mday = 1};
		iso_time((int64_t)timegm(&tm), term_end);
	}
	snprintf(args[0], 32, "%s", s->name);
	snprintf(args[1], 32, "%s", perm ? "perm" : "spot");
	snprintf(args[2], 32, "%s", term_end);
	snprintf(args[3], 32, "%lld", (long long)s->p.tick);
	snprintf(args[4], 32, "%lld", (long long)s->p.lot);
	snprintf(args[5], 32, "%lld", (long long)s->p.min_pages);
	snprintf(args[6], 32, "%lld", (long long)s->p.max_pages);
	snprintf(args[7], 32, "%lld", (long long)s->p.price_min);
	snprintf(args[8], 32, "%lld", (long long)s->p.price_max);
	snprintf(args[9], 32, "%lld", (long long)s->notice_period_s);
	snprintf(args[10], 32, "%lld", (long long)s->breach_penalty);
	snprintf(args[11], 32, "%lld", (long long)s->delivery_deadline_s);
	const char *pv[12];
	for (int i = 0; i < 12; i++)
		pv[i] = args[i];
	if (!perm)
		pv[2] = NULL;
	struct db_fail f;
	PGresult *r = db_exec_fail(
	    w->lconn, PGRES_TUPLES_OK,
	    "INSERT INTO markets (name, product, term_end, tick, lot, "
	    "min_pages, max_pages, price_min, price_max, notice_period_s, "
	    "breach_penalty, delivery_deadline_s) VALUES ($1, $2, $3, $4, $5, "
	    "$6, $7, $8, $9, $10, $11, $12) RETURNING " MARKET_COLS,
	    12, pv, &f);
	if (!r) {
		if (db_broken(w->lconn) || db_state_lost(f.state)) {
			/* the INSERT commits by itself: lost on its way back,
			 * it may have */
			c->retry_after = true;
			w->need_rebuild = true;
			PQfinish(w->lconn);
			w->lconn = NULL;
			fail_cmd(c, 503, "outcome-unknown", "outcome unknown",
			         "the connection to PostgreSQL was lost while "
			         "the market was being created, so it may or "
			         "may not exist; GET /v1/markets tells which, "
			         "and creating it again is refused (409) if "
			         "it does");
		} else {
			/* PostgreSQL's text is for the log: the edge checked
			 * every field, so a rule of the schema that still
			 * refuses is named, not quoted */
			char q[600];
			bool rule = f.state[0] == '2' &&
			            (f.state[1] == '2' || f.state[1] == '3');
			log_error("market not created",
			          "name=%s state=%s constraint=%s err=%s",
			          s->name, f.state, f.constraint,
			          log_quote(q, sizeof q, f.text));
			snprintf(err, sizeof err,
			         "the database refused the market (rule %s of "
			         "the schema); the exchange's log says more",
			         f.constraint[0] ? f.constraint : "-");
			fail_cmd(c, rule ? 422 : 500,
			         rule ? "invalid" : "internal",
			         "market not created", err);
		}
		return;
	}
	if (add_market(w, r, 0, err, sizeof err) < 0) {
		PQclear(r);
		/* committed but unusable: rebuild to find out why */
		w->need_rebuild = true;
		fail_cmd(c, 500, "internal", "market not loaded", err);
		return;
	}
	PQclear(r);
	json_t *j = market_json(&w->m[w->nm - 1]);
	set_answer(c, 201, json_dumps(j, JSON_COMPACT));
	json_decref(j);
	log_info("market created", "name=%s", s->name);
}

/* --- lookups ------------------------------------------------------------ */

/* The lookups of every batch, on lconn, prepared once per connection: sent
 * as plain PQexecParams they were parsed and planned again for every batch
 * (about a fifth of PostgreSQL's CPU an order). */
enum lookup_id { L_IDEM, L_COID, L_COID_TRADES, L_ACCOUNT, L_COUNT };
static const char *const lookup_sql[L_COUNT][2] = {
    [L_IDEM] = {"l_idem",
                "SELECT i.scope, i.key, i.request_sha, i.status, i.response "
                "FROM unnest($1::text[], $2::text[]) AS k(scope, key) JOIN "
                "idempotency i ON i.scope = k.scope AND i.key = k.key"},
    [L_COID] = {"l_coid",
                "SELECT o.id, o.account_id, o.side, o.tif, o.stp, "
                "o.post_only, o.price, o.pages, coalesce(o.expires_ns, 0), "
                "o.client_order_id, o.placed_reason, o.created_ns, m.name "
                "FROM unnest($1::bigint[], $2::text[]) AS k(account_id, "
                "coid) JOIN orders o ON o.account_id = k.account_id AND "
                "o.client_order_id = k.coid JOIN markets m ON m.id = "
                "o.market_id ORDER BY o.id"},
    /* a contract has its trade's id (0010); the subquery, a scan, finds
     * the contract of a trade written before that, were its id another */
    [L_COID_TRADES] = {"l_coid_trades",
                       "SELECT t.taker_order_id, t.id, t.price, t.pages, "
                       "t.maker_order_id, t.buyer_id, t.seller_id, "
                       "t.taker_side, t.maker_remaining, coalesce(c.id, "
                       "(SELECT c2.id FROM contracts c2 WHERE c2.trade_id "
                       "= t.id)) FROM trades t LEFT JOIN contracts c ON "
                       "c.id = t.id AND c.trade_id = t.id WHERE "
                       "t.taker_order_id = ANY ($1::bigint[]) ORDER BY "
                       "t.taker_order_id, t.id"},
    [L_ACCOUNT] = {"l_account", "SELECT kind, coalesce(team_id, 0) FROM "
                                "accounts WHERE id = $1"},
};

static int prepare_lookups(PGconn *c, char *err, size_t errlen)
{
	for (int i = 0; i < L_COUNT; i++) {
		PGresult *r =
		    PQprepare(c, lookup_sql[i][0], lookup_sql[i][1], 0, NULL);
		bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
		if (!ok) {
			snprintf(err, errlen, "could not prepare %s: %s",
			         lookup_sql[i][0], PQresultErrorMessage(r));
			err[strcspn(err, "\n")] = 0;
		}
		PQclear(r);
		if (!ok)
			return -1;
	}
	return 0;
}

/* Runs lookup `id` on lconn; its rows, or NULL with err set. */
static PGresult *lookup(struct writer *w, enum lookup_id id, int n,
                        const char *const *params, char *err, size_t errlen)
{
	PGresult *r = PQexecPrepared(w->lconn, lookup_sql[id][0], n, params,
	                             NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		snprintf(err, errlen, "%s", PQerrorMessage(w->lconn));
		err[strcspn(err, "\n")] = 0;
		/* PostgreSQL going away (an admin shutdown's FATAL, a closed
		 * socket) while libpq may still call the connection good:
		 * drop it, db_usable makes a new one */
		w->lookup_lost = db_result_lost(w->lconn, r);
		PQclear(r);
		if (w->lookup_lost) {
			PQfinish(w->lconn);
			w->lconn = NULL;
		}
		return NULL;
	}
	return r;
}

/* --- idempotency ------------------------------------------------------- */

/* The key of a client order id: its account's, whoever placed it. */
static void coid_key(int64_t account, const char *coid, char scope[48],
                     char key[140])
{
	snprintf(scope, 48, "acct:%lld", (long long)account);
	snprintf(key, 140, "coid:%s", coid);
}

/* The keys of one command: its header key and its client order id. */
static int cmd_keys(const struct writer_cmd *c, char scope[2][48],
                    char key[2][140])
{
	int n = 0;
	if (c->kind != WR_NEW && c->kind != WR_CANCEL && c->kind != WR_REDUCE)
		return 0;
	if (c->idem_key[0]) {
		snprintf(scope[n], 48, "%s", c->p_scope);
		snprintf(key[n], 140, "%s", c->idem_key);
		n++;
	}
	if (c->kind == WR_NEW && c->client_order_id[0]) {
		coid_key(cmd_account(c), c->client_order_id, scope[n], key[n]);
		n++;
	}
	return n;
}

static uint64_t hash2(const char *a, const char *b)
{
	uint64_t h = 1469598103934665603u;
	for (; *a; a++)
		h = (h ^ (unsigned char)*a) * 1099511628211u;
	h = (h ^ 0xff) * 1099511628211u;
	for (; *b; b++)
		h = (h ^ (unsigned char)*b) * 1099511628211u;
	return h ? h : 1;
}

/* Notes that the database will hold key (scope, key) once the batch being
 * built commits. Added before it does: a batch that then fails leaves a key
 * that is not there, which costs a lookup, never a wrong answer. */
static void known_add(struct writer *w, const char *scope, const char *key)
{
	if (keyfilter_add(w->known, hash2(scope, key)) < 0)
		log_warn("key filter full: no memory to grow it",
		         "hint=\"idempotency lookups grow more frequent; give "
		         "ramexd more memory\"");
}

static void known_stats(const struct writer *w)
{
	struct keyfilter_stats st;
	keyfilter_stats(w->known, &st);
	metrics_key_filter(false, st.keys, st.bytes);
}

/* Whether the database may hold the key of hash h. */
static bool known_maybe(const struct writer *w, uint64_t h)
{
	const struct keyfilter *l =
	    __atomic_load_n(&w->loaded, __ATOMIC_ACQUIRE);
	if (!l)
		return true; /* not loaded yet: look everything up */
	return keyfilter_maybe(w->known, h) || keyfilter_maybe(l, h);
}

/*
 * Reads every key the database holds into a new filter (*out): each stored
 * answer's (scope, key), and the key of each order's client order id.
 * Through a cursor, so that millions of keys never sit in one result; the
 * filter is made for twice the rows PostgreSQL counts (at least a million
 * keys, 2 MiB), and grows. Returns 0; READ_KEYS_DB when the database failed
 * (or the writer stops), READ_KEYS_MEMORY without memory for the filter,
 * err set either way.
 */
enum { READ_KEYS_DB = -1, READ_KEYS_MEMORY = -2 };
static int read_keys(struct writer *w, PGconn *c, struct keyfilter **out,
                     long *rows, char *err, size_t errlen)
{
	static const char *const decl[2] = {
	    "DECLARE known_keys NO SCROLL CURSOR FOR SELECT scope, key FROM "
	    "idempotency",
	    "DECLARE known_keys NO SCROLL CURSOR FOR SELECT account_id, "
	    "client_order_id FROM orders WHERE client_order_id IS NOT NULL",
	};
	struct keyfilter *kf = NULL;
	int rc = READ_KEYS_DB;
	PGresult *r = db_exec(
	    c, PGRES_TUPLES_OK,
	    "SELECT (greatest((SELECT reltuples FROM pg_class WHERE oid = "
	    "'idempotency'::regclass), 0) + greatest((SELECT reltuples FROM "
	    "pg_class WHERE oid = 'orders'::regclass), 0))::bigint",
	    0, NULL, err, errlen);
	if (!r)
		return READ_KEYS_DB;
	int64_t est = db_int(r, 0, 0);
	PQclear(r);
	size_t want = est > (1 << 19) ? (size_t)est * 2 : (size_t)1 << 20;
	kf = keyfilter_new(want);
	if (!kf) {
		snprintf(err, errlen,
		         "out of memory for the key filter (%zu MiB for %lld "
		         "keys)",
		         want * 2 >> 20, (long long)est);
		return READ_KEYS_MEMORY;
	}
	*rows = 0;
	r = db_exec(c, PGRES_COMMAND_OK, "BEGIN", 0, NULL, err, errlen);
	if (!r)
		goto fail;
	PQclear(r);
	for (int q = 0; q < 2; q++) {
		r = db_exec(c, PGRES_COMMAND_OK, decl[q], 0, NULL, err, errlen);
		if (!r)
			goto fail;
		PQclear(r);
		for (;;) {
			if (__atomic_load_n(&w->loader_stop,
			                    __ATOMIC_RELAXED)) {
				snprintf(err, errlen, "stopped");
				goto fail;
			}
			r = db_exec(c, PGRES_TUPLES_OK,
			            "FETCH 50000 FROM known_keys", 0, NULL, err,
			            errlen);
			if (!r)
				goto fail;
			int n = PQntuples(r);
			for (int i = 0; i < n; i++) {
				char scope[48], key[140];
				const char *sc = PQgetvalue(r, i, 0),
				           *ky = PQgetvalue(r, i, 1);
				if (q == 1) {
					coid_key(db_int(r, i, 0), ky, scope,
					         key);
					sc = scope, ky = key;
				}
				if (keyfilter_add(kf, hash2(sc, ky)) < 0) {
					PQclear(r);
					snprintf(err, errlen,
					         "out of memory for the key "
					         "filter after %ld keys",
					         *rows + i);
					rc = READ_KEYS_MEMORY;
					goto fail;
				}
			}
			PQclear(r);
			*rows += n;
			if (n == 0)
				break;
		}
		r = db_exec(c, PGRES_COMMAND_OK, "CLOSE known_keys", 0, NULL,
		            err, errlen);
		if (!r)
			goto fail;
		PQclear(r);
	}
	r = db_exec(c, PGRES_COMMAND_OK, "COMMIT", 0, NULL, err, errlen);
	if (!r)
		goto fail;
	PQclear(r);
	*out = kf;
	return 0;
fail:
	keyfilter_free(kf);
	return rc;
}

/*
 * The loader thread: fills w->loaded once, while the writer already runs
 * (looking every key up meanwhile), so that ramexd starts at once however
 * many keys its history holds (about a second for two million here). No key
 * falls between the two filters: a row committed before the loader's
 * snapshot is read by it, and one committed after was written by this
 * writer, the only writer of either table, which notes every key it writes
 * (known_add) before it commits. Tries again every few seconds while the
 * database is away. Without memory for the filter, it gives up: every key
 * is then looked up, as before there was a filter.
 */
static void *loader_main(void *arg)
{
	struct writer *w = arg;
	bool said = false;
	while (!__atomic_load_n(&w->loader_stop, __ATOMIC_RELAXED)) {
		char err[512];
		long rows = 0;
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		struct keyfilter *kf = NULL;
		PGconn *c = db_connect(w->conninfo, err, sizeof err);
		int rc = c ? read_keys(w, c, &kf, &rows, err, sizeof err)
		           : READ_KEYS_DB;
		if (c)
			PQfinish(c);
		if (rc == 0) {
			clock_gettime(CLOCK_MONOTONIC, &t1);
			struct keyfilter_stats st;
			keyfilter_stats(kf, &st);
			metrics_key_filter(true, st.keys, st.bytes);
			__atomic_store_n(&w->loaded, kf, __ATOMIC_RELEASE);
			log_info(
			    "key filter loaded", "keys=%ld bytes=%zu ms=%lld",
			    rows, st.bytes,
			    (long long)((t1.tv_sec - t0.tv_sec) * 1000 +
			                (t1.tv_nsec - t0.tv_nsec) / 1000000));
			return NULL;
		}
		if (__atomic_load_n(&w->loader_stop, __ATOMIC_RELAXED))
			break;
		if (rc == READ_KEYS_MEMORY) {
			log_error(
			    "key filter not loaded: every idempotency key "
			    "is looked up",
			    "err=\"%s\"", err);
			return NULL;
		}
		if (!said)
			log_warn("key filter not loaded yet, trying again",
			         "err=\"%s\"", err);
		said = true;
		for (int i = 0; i < 30 && !__atomic_load_n(&w->loader_stop,
		                                           __ATOMIC_RELAXED);
		     i++)
			usleep(100000);
	}
	return NULL;
}

/* The hashes of the idempotency keys of one batch. */
struct keyset {
	uint64_t *h;
	size_t n, cap;
};

static void keyset_add(struct keyset *k, uint64_t h)
{
	if (k->n == k->cap) {
		size_t cap = k->cap ? k->cap * 2 : 256;
		uint64_t *x = realloc(k->h, cap * sizeof *x);
		assert(x); /* small; out of memory here is fatal */
		k->h = x, k->cap = cap;
	}
	k->h[k->n++] = h;
}

/* The answer for a client order id that is used already: the same order
 * again gets its first answer, rebuilt from its rows exactly as apply_new
 * wrote it (order_answer); another order gets 422. `o` is a row of the
 * orders query in coid_replay, `t` its trades as taker from row *ti on. */
static void coid_answer(struct writer_cmd *c, const PGresult *o, int i,
                        const PGresult *t, int *ti)
{
	struct orow r = {0};
	struct sb fills = {0};
	int64_t id = db_int(o, i, 0);
	bool gtd = strcmp(PQgetvalue(o, i, 3), "gtd") == 0;
	if (writer_side_parse(PQgetvalue(o, i, 2), &r.side) < 0 ||
	    writer_tif_parse(PQgetvalue(o, i, 3), &r.tif) < 0 ||
	    writer_stp_parse(PQgetvalue(o, i, 4), &r.stp) < 0)
		goto bad;
	r.id = (uint64_t)id;
	r.account_id = db_int(o, i, 1);
	r.post_only = PQgetvalue(o, i, 5)[0] == 't';
	r.price = db_int(o, i, 6);
	r.pages = db_int(o, i, 7);
	r.expires = gtd ? db_int(o, i, 8) : 0;
	r.created = r.updated = db_int(o, i, 11);
	if (strcmp(PQgetvalue(o, i, 12), c->market) || r.side != c->side ||
	    r.tif != c->tif || r.stp != c->stp || r.post_only != c->post_only ||
	    r.price != c->price || r.pages != c->pages ||
	    (gtd && r.expires != c->expires)) {
		fail_cmd(c, 422, "idempotency-conflict",
		         "key reused for another request",
		         "this client_order_id was already used for a "
		         "different order; use a new one");
		return;
	}
	snprintf(r.coid, sizeof r.coid, "%s", PQgetvalue(o, i, 9));
	/* its trades as taker all happened as it was placed, in id order */
	for (; *ti < PQntuples(t) && db_int(t, *ti, 0) == id; (*ti)++) {
		int k = *ti;
		if (PQgetisnull(t, k, 8))
			goto bad; /* written before 0007: no maker_remaining */
		struct fill f = {
		    .trade_id = db_int(t, k, 1),
		    .price = db_int(t, k, 2),
		    .pages = db_int(t, k, 3),
		    .taker = id,
		    .maker = db_int(t, k, 4),
		    .buyer = db_int(t, k, 5),
		    .seller = db_int(t, k, 6),
		    .maker_remaining = db_int(t, k, 8),
		    .contract_id = db_int(t, k, 9),
		    .side = r.side,
		    .market = PQgetvalue(o, i, 12),
		};
		r.filled += f.pages;
		f.taker_remaining = r.pages - r.filled;
		fill_view(&fills, &f);
	}
	r.remaining = r.pages - r.filled;
	if (!PQgetisnull(o, i, 10)) {
		r.status = "cancelled";
		r.reason = PQgetvalue(o, i, 10);
	} else {
		r.status = r.remaining ? "open" : "filled";
	}
	set_answer(c, 201, order_answer(&r, PQgetvalue(o, i, 12), &fills));
	c->replayed = true;
	free(fills.p);
	return;
bad:
	free(fills.p);
	log_error("order of a client order id cannot be replayed", "order=%lld",
	          (long long)id);
	fail_cmd(c, 500, "internal", "first answer lost",
	         "this client_order_id was used for an order whose first "
	         "answer cannot be rebuilt; GET /v1/orders lists it");
}

/*
 * Orders placed with a client order id store no idempotency row for it
 * (idem_store): the order row (unique per account and client order id)
 * says that it was placed, and it and its trades hold the first answer.
 * Answers the commands of cmds[0..n) that no stored answer answered and
 * whose client order id names an order. Returns 0, or -1 when the
 * database failed.
 */
static int coid_replay(struct writer *w, struct writer_cmd **cmds, int n,
                       char *err, size_t errlen)
{
	struct colset keys = {0}; /* account, client order id */
	char *kv[2] = {NULL, NULL};
	PGresult *o = NULL, *t = NULL;
	int rc = -1;
	for (int i = 0; i < n; i++) {
		if (!cmds[i] || cmds[i]->status || cmds[i]->kind != WR_NEW ||
		    !cmds[i]->client_order_id[0])
			continue;
		if (cmds[i]->coid_fresh)
			continue; /* no order has it (idem_lookup) */
		col_i(&keys, 0, cmd_account(cmds[i]));
		col_s(&keys, 1, cmds[i]->client_order_id);
		keys.rows++;
	}
	if (keys.rows == 0) {
		rc = 0;
		goto out;
	}
	cols_take(&keys, 2, kv);
	const char *pv[] = {kv[0], kv[1]};
	o = lookup(w, L_COID, 2, pv, err, errlen);
	if (!o)
		goto out;
	if (PQntuples(o) == 0) {
		rc = 0;
		goto out;
	}
	free(kv[0]);
	kv[0] = NULL;
	for (int i = 0; i < PQntuples(o); i++)
		col_i(&keys, 0, db_int(o, i, 0));
	cols_take(&keys, 1, kv);
	const char *tv[] = {kv[0]};
	t = lookup(w, L_COID_TRADES, 1, tv, err, errlen);
	if (!t)
		goto out;
	int ti = 0;
	for (int i = 0; i < PQntuples(o); i++) {
		int64_t acct = db_int(o, i, 1);
		const char *coid = PQgetvalue(o, i, 9);
		int from = ti;
		for (int k = 0; k < n; k++) {
			struct writer_cmd *c = cmds[k];
			if (!c || c->status || c->kind != WR_NEW ||
			    cmd_account(c) != acct ||
			    strcmp(c->client_order_id, coid))
				continue;
			ti = from; /* (a batch holds each key once) */
			coid_answer(c, o, i, t, &ti);
		}
		/* past this order's trades, answered or not */
		while (ti < PQntuples(t) && db_int(t, ti, 0) == db_int(o, i, 0))
			ti++;
	}
	rc = 0;
out:
	PQclear(o);
	PQclear(t);
	for (int k = 0; k < 2; k++) {
		free(kv[k]);
		pgarr_free(&keys.c[k]);
	}
	return rc;
}

/*
 * Looks up every key of cmds[0..n) at once. Commands whose key was seen
 * are answered (replay, or 422 for another body); a command whose key is
 * also used by an earlier command of this batch, or by the batch in flight
 * (`busy`), is returned through *deferred to run in a later batch, when
 * the first one's answer is stored. The keys looked up are added to
 * `mine`. Runs on the lookup connection, which sees only what has been
 * committed. Returns 0, or -1 when the database failed.
 */
static int idem_lookup(struct writer *w, struct writer_cmd **cmds, int n,
                       const struct keyset *busy, struct keyset *mine,
                       struct writer_cmd **deferred, char *err, size_t errlen)
{
	size_t cap = 16;
	while (cap < ((size_t)n + busy->n) * 4)
		cap *= 2;
	uint64_t *seen = calloc(cap, sizeof *seen);
	struct colset keys = {0}; /* scope, key */
	char *kv[2] = {NULL, NULL};
	struct writer_cmd **dtail = deferred;
	int rc = -1, filtered = 0;
	assert(seen);
	/* The keys of the batch in flight: a command that shares one waits
	 * for the next batch, when that answer is committed or not. */
	for (size_t i = 0; i < busy->n; i++) {
		size_t s = busy->h[i] & (cap - 1);
		while (seen[s] && seen[s] != busy->h[i])
			s = (s + 1) & (cap - 1);
		seen[s] = busy->h[i];
	}

	for (int i = 0; i < n; i++) {
		/* A client order id is keyed by its account, not by who asks:
		 * check who asks first, or naming another account's id would
		 * show that account's order (and a refusal stored under its
		 * key would answer the owner's own order later). Answers to an
		 * Idempotency-Key are per principal and need no check. */
		if (cmds[i]->kind == WR_NEW && cmds[i]->client_order_id[0] &&
		    cmd_account(cmds[i]) &&
		    may_act_for(w, cmds[i], cmd_account(cmds[i])) < 0)
			continue;
		char scope[2][48], key[2][140];
		int k = cmd_keys(cmds[i], scope, key);
		bool dup = false;
		for (int j = 0; j < k && !dup; j++) {
			uint64_t h = hash2(scope[j], key[j]);
			size_t s = h & (cap - 1);
			while (seen[s] && seen[s] != h)
				s = (s + 1) & (cap - 1);
			/* A hash collision only defers a command: harmless. */
			dup = seen[s] == h;
		}
		cmds[i]->coid_fresh = false;
		if (dup) {
			*dtail = cmds[i];
			dtail = &cmds[i]->next;
			cmds[i] = NULL;
			continue;
		}
		for (int j = 0; j < k; j++) {
			uint64_t h = hash2(scope[j], key[j]);
			size_t s = h & (cap - 1);
			while (seen[s] && seen[s] != h)
				s = (s + 1) & (cap - 1);
			seen[s] = h;
			keyset_add(mine, h);
			/* a key never written has no answer to find; the
			 * client order id's is the last (cmd_keys) */
			if (!known_maybe(w, h)) {
				filtered++;
				cmds[i]->coid_fresh =
				    j == k - 1 && cmds[i]->kind == WR_NEW &&
				    cmds[i]->client_order_id[0];
				continue;
			}
			col_s(&keys, 0, scope[j]);
			col_s(&keys, 1, key[j]);
			keys.rows++;
		}
	}
	*dtail = NULL;
	metrics_idem_keys((int)keys.rows, filtered);
	if (keys.rows == 0) {
		rc = 0;
		goto out;
	}
	cols_take(&keys, 2, kv);
	const char *pv[] = {kv[0], kv[1]};
	PGresult *r = lookup(w, L_IDEM, 2, pv, err, errlen);
	if (!r)
		goto out;
	for (int row = 0; row < PQntuples(r); row++) {
		const char *rs = PQgetvalue(r, row, 0),
		           *rk = PQgetvalue(r, row, 1);
		for (int i = 0; i < n; i++) {
			if (!cmds[i] || cmds[i]->status)
				continue;
			char scope[2][48], key[2][140];
			int k = cmd_keys(cmds[i], scope, key);
			for (int j = 0; j < k; j++) {
				if (strcmp(scope[j], rs) || strcmp(key[j], rk))
					continue;
				if (strcmp(PQgetvalue(r, row, 2),
				           cmds[i]->req_sha) == 0) {
					set_answer(
					    cmds[i], (int)db_int(r, row, 3),
					    strdup(PQgetvalue(r, row, 4)));
					cmds[i]->replayed = true;
				} else {
					fail_cmd(
					    cmds[i], 422,
					    "idempotency-conflict",
					    "key reused for another request",
					    strncmp(rk, "coid:", 5) == 0
					        ? "this client_order_id was "
					          "already used for a "
					          "different "
					          "order; use a new one"
					        : "this Idempotency-Key was "
					          "already used for a "
					          "different "
					          "request; use a new key for "
					          "a "
					          "new request");
				}
				break;
			}
		}
	}
	PQclear(r);
	rc = coid_replay(w, cmds, n, err, errlen);
out:
	for (int k = 0; k < 2; k++) {
		free(kv[k]);
		pgarr_free(&keys.c[k]);
	}
	free(seen);
	return rc;
}

static void idem_store(struct writer *w, struct batch *b,
                       const struct writer_cmd *c)
{
	char scope[2][48], key[2][140];
	int k = cmd_keys(c, scope, key);
	if (c->replayed || c->status >= 500 || !c->body)
		return;
	for (int j = 0; j < k; j++) {
		/* a placed order's row holds its client order id and, with its
		 * trades, its answer (coid_replay; build_batch notes its key);
		 * refusals leave no order */
		if (c->status == 201 && strncmp(key[j], "coid:", 5) == 0)
			continue;
		known_add(w, scope[j], key[j]);
		col_s(&b->idem, 0, scope[j]);
		col_s(&b->idem, 1, key[j]);
		col_s(&b->idem, 2, c->req_sha);
		col_i(&b->idem, 3, c->status);
		col_s(&b->idem, 4, c->body);
		b->idem.rows++;
	}
}

/* --- commit ------------------------------------------------------------ */

/* The statements of a batch, prepared once per connection; each takes one
 * array per column (struct colset). */
static const struct wstmt {
	const char *name, *sql;
	int ncol;
} wstmts[] = {
    {"w_ins_orders",
     "INSERT INTO orders (id, market_id, account_id, side, tif, stp, "
     "post_only, price, pages, remaining, filled, expires_ns, "
     "client_order_id, status, reason, priority, created_ns, updated_ns, "
     "placed_by, placed_reason) SELECT * FROM unnest($1::bigint[], "
     "$2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::text[], "
     "$7::boolean[], $8::bigint[], $9::bigint[], $10::bigint[], "
     "$11::bigint[], $12::bigint[], $13::text[], $14::text[], $15::text[], "
     "$16::bigint[], $17::bigint[], $18::bigint[], $19::text[], "
     "$20::text[])",
     20},
    {"w_upd_orders",
     "UPDATE orders o SET remaining = u.remaining, filled = o.filled + "
     "u.filled_add, status = u.status, reason = coalesce(u.reason, "
     "o.reason), updated_ns = u.updated_ns, cancelled_by = "
     "coalesce(u.cancelled_by, o.cancelled_by), cancel_note = "
     "coalesce(u.cancel_note, o.cancel_note) FROM unnest($1::bigint[], "
     "$2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::bigint[], "
     "$7::text[], $8::text[]) AS u(id, remaining, filled_add, status, "
     "reason, updated_ns, cancelled_by, cancel_note) WHERE o.id = u.id",
     8},
    {"w_ins_trades",
     "INSERT INTO trades (id, market_id, seq, taker_order_id, "
     "maker_order_id, buyer_id, seller_id, taker_side, price, pages, ts_ns, "
     "maker_remaining) SELECT * FROM unnest($1::bigint[], $2::bigint[], "
     "$3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], "
     "$8::text[], $9::bigint[], $10::bigint[], $11::bigint[], "
     "$12::bigint[])",
     12},
    /* the timestamptz columns whole seconds of the ns ones, as crow_json
     * shows them (iso_time); nonnegative, so / rounds down as it does */
    {"w_ins_contracts",
     "INSERT INTO contracts (id, trade_id, market_id, buyer_id, seller_id, "
     "delivery, pages, price, state, deliver_by, term_end, "
     "notice_period_s, created_at, updated_at, product, perm_year, "
     "breach_penalty, recall_notice_ns, created_ns, deliver_by_ns, "
     "term_end_ns, delivered_ns, notice_end_ns, ended_ns, changed_ns) "
     "SELECT u.id, u.id, u.market_id, u.buyer_id, u.seller_id, u.delivery, "
     "u.pages, u.price, 'pending_delivery', to_timestamp(u.deliver_by_ns / "
     "1000000000), u.term_end, u.notice_period_s, to_timestamp(u.created_ns "
     "/ 1000000000), to_timestamp(u.created_ns / 1000000000), u.product, "
     "u.perm_year, u.breach_penalty, u.recall_notice_ns, u.created_ns, "
     "u.deliver_by_ns, u.term_end_ns, 0, 0, 0, u.changed_ns FROM "
     "unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[], "
     "$5::text[], $6::bigint[], $7::bigint[], $8::timestamptz[], "
     "$9::bigint[], $10::text[], $11::int[], $12::bigint[], $13::bigint[], "
     "$14::bigint[], $15::bigint[], $16::bigint[], $17::bigint[]) AS u(id, "
     "market_id, buyer_id, seller_id, delivery, pages, price, term_end, "
     "notice_period_s, product, perm_year, breach_penalty, "
     "recall_notice_ns, created_ns, deliver_by_ns, term_end_ns, "
     "changed_ns)",
     17},
    {"w_seq",
     "UPDATE markets m SET seq = u.seq FROM unnest($1::bigint[], "
     "$2::bigint[]) AS u(id, seq) WHERE m.id = u.id",
     2},
    {"w_idem",
     "INSERT INTO idempotency (scope, key, request_sha, status, response) "
     "SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], "
     "$5::text[])",
     5},
};
#define WSTMTS ((int)(sizeof wstmts / sizeof wstmts[0]))

static int prepare_stmts(PGconn *c, char *err, size_t errlen)
{
	for (int i = 0; i < WSTMTS; i++) {
		PGresult *r =
		    PQprepare(c, wstmts[i].name, wstmts[i].sql, 0, NULL);
		bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
		if (!ok)
			snprintf(err, errlen, "could not prepare %s: %s",
			         wstmts[i].name, PQresultErrorMessage(r));
		PQclear(r);
		if (!ok) {
			err[strcspn(err, "\n")] = 0;
			return -1;
		}
	}
	return 0;
}

/*
 * A batch on its way to PostgreSQL. Up to three are under way at once
 * with batch_overlap (writer_opts.overlap), two without it (no batch is
 * open while one commits; the gathering one grows until the COMMIT is
 * back, then goes out whole):
 *
 *   committing  its whole transaction is sent, on one of the two writer
 *               connections, and its COMMIT is awaited;
 *   open        on the other connection, BEGIN and its INSERTs are sent, so
 *               that PostgreSQL runs them (on a second backend, so on the
 *               second core) while the batch before it commits; its UPDATEs
 *               and COMMIT are sent once that COMMIT is back;
 *   gathering   the commands that keep arriving are applied to the books
 *               (their lookups on lconn, which sees only what is
 *               committed); it is sent, and opens, when the open one moves
 *               on to committing.
 *
 * The UPDATEs wait because they touch rows that an earlier batch may have
 * inserted or changed: before that commits they would find nothing (an
 * insert not yet visible to them) or wait on its row locks. The INSERTs
 * touch only new rows: ids come from the writer's counters, and a command
 * whose idempotency key or client order id a batch in flight holds waits
 * for a later batch (idem_lookup). Batches commit in the order they were
 * applied. When one fails, the open one is rolled back and the gathering
 * one failed, since both were applied on top of it, and the books are
 * rebuilt, exactly as for a failed batch alone.
 */
struct flight {
	struct writer_cmd **cmds;
	int n;
	struct batch b;
	struct keyset keys; /* its idempotency keys, held back from others */
	struct writer_cmd *deferred;
	PGconn *conn; /* where it is sent; NULL before */
	uint64_t no;  /* its number among the batches sent, from 1 */
	bool piped;   /* in pipeline mode on conn: its results are to read */
	bool synced;  /* its sync was sent */
	bool commit_sent; /* its COMMIT went to libpq: it may have run */
	int nsent;    /* statements sent, BEGIN and COMMIT included */
	char *par[WSTMTS][COLS_MAX]; /* parameters of statements not sent */
	size_t rows[WSTMTS];
	bool ok;    /* false: not committed, or not known to be (err) */
	bool down;  /* not committed because PostgreSQL is away */
	bool unknown; /* the connection was lost after its COMMIT was sent
	               * and before its answer came: it may have committed */
	bool pause; /* PostgreSQL unusable: wait a little before the next */
	uint64_t seq[WRITER_MAX_MARKETS]; /* the seqs this batch writes */
	struct timespec t0;
	char err[512];
};

/* What send_batch sends: BEGIN and the INSERTs (w_ins_*, w_idem), or the
 * rest (the UPDATEs), COMMIT and the sync; a whole batch is both. */
enum { SEND_OPEN = 1, SEND_CLOSE = 2 };

static int stmt_part(int i)
{
	return i == 1 || i == 4 ? SEND_CLOSE : SEND_OPEN;
}

/* Turns the batch's rows into each statement's parameters (f->par), and
 * notes the seq each market it touched reaches. Returns how many
 * statements have rows: 0 when there is nothing to write (all replays,
 * reads or refusals). */
static int build_batch(struct writer *w, struct flight *f)
{
	struct batch *b = &f->b;
	/* 0 new orders, 1 order updates, 2 trades, 3 contracts, 4 seqs; the
	 * idempotency rows (5) were collected as the commands ran */
	struct colset cs[5];
	int n = 0;

	memset(cs, 0, sizeof cs);
	for (int i = 0; i < w->nm; i++) {
		f->seq[i] = book_seq(w->m[i].book);
		/* seq_saved may be behind a batch still in flight: then this
		 * writes a seq already written, which is harmless */
		if (b->touched[i] && f->seq[i] != w->m[i].seq_saved) {
			col_i(&cs[4], 0, w->m[i].id);
			col_i(&cs[4], 1, (int64_t)f->seq[i]);
			cs[4].rows++;
		}
	}
	for (size_t i = 0; i < b->orders.n; i++) {
		const struct orow *o = &b->orders.v[i];
		orow_cols(&cs[0], &cs[1], o);
		if (o->is_new && o->coid[0]) {
			char scope[48], key[140];
			coid_key(o->account_id, o->coid, scope, key);
			known_add(w, scope, key);
		}
	}
	known_stats(w);
	for (size_t i = 0; i < b->trades.n; i++)
		trow_cols(&cs[2], &b->trades.v[i]);
	for (size_t i = 0; i < b->contracts.n; i++)
		crow_cols(&cs[3], &b->contracts.v[i]);
	for (int i = 0; i < WSTMTS; i++) {
		struct colset *c = i < 5 ? &cs[i] : &b->idem;
		f->rows[i] = c->rows;
		if (f->rows[i])
			cols_take(c, wstmts[i].ncol, f->par[i]);
		n += f->rows[i] > 0;
	}
	for (int i = 0; i < 5; i++)
		for (int k = 0; k < COLS_MAX; k++)
			pgarr_free(&cs[i].c[k]);
	return n;
}

static void free_params(struct flight *f, int part)
{
	for (int i = 0; i < WSTMTS; i++) {
		if (!(stmt_part(i) & part))
			continue;
		for (int k = 0; k < COLS_MAX; k++) {
			free(f->par[i][k]);
			f->par[i][k] = NULL;
		}
		f->rows[i] = 0;
	}
}

/* Gives up a writer connection that failed in a way that leaves it
 * unusable or in doubt (lost, or out of step with its pipeline); db_usable
 * makes a new one before the next batch. */
static void drop_conn(struct writer *w, struct flight *f)
{
	for (int i = 0; i < 2; i++)
		if (w->conn[i] && w->conn[i] == f->conn)
			forget_conn(w, i);
	f->conn = NULL;
	f->piped = false;
}

static void send_stmts(struct flight *f, int part, bool *sent)
{
	for (int i = 0; *sent && i < WSTMTS; i++) {
		if (!f->rows[i] || stmt_part(i) != part)
			continue;
		*sent = PQsendQueryPrepared(f->conn, wstmts[i].name,
		                            wstmts[i].ncol,
		                            (const char *const *)f->par[i],
		                            NULL, NULL, 0);
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
static void send_batch(struct writer *w, struct flight *f, int part)
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
		pgpipe_fault_hit(&w->fault, PGPIPE_IDLE, f->no, c);
		if (!pgpipe_alive(c)) {
			snprintf(f->err, sizeof f->err,
			         "the connection was lost before the batch "
			         "was sent");
			f->ok = false;
			f->down = true;
			goto out;
		}
		clock_gettime(CLOCK_MONOTONIC, &f->t0);
		if (!PQenterPipelineMode(c)) {
			snprintf(f->err, sizeof f->err,
			         "could not enter pipeline mode: %s",
			         PQerrorMessage(c));
			f->ok = false;
			goto out;
		}
		f->piped = true;
		sent =
		    PQsendQueryParams(c, "BEGIN", 0, NULL, NULL, NULL, NULL, 0);
		f->nsent += sent;
		send_stmts(f, SEND_OPEN, &sent);
		pgpipe_fault_hit(&w->fault, PGPIPE_OPEN, f->no, c);
	}
	if ((part & SEND_CLOSE) && sent) {
		if (!pgpipe_alive(c)) {
			snprintf(f->err, sizeof f->err,
			         "the connection was lost before the COMMIT "
			         "was sent");
			f->ok = false;
			f->down = true;
			sent = false;
		}
		send_stmts(f, SEND_CLOSE, &sent);
		if (sent) {
			sent = PQsendQueryParams(c, "COMMIT", 0, NULL, NULL,
			                         NULL, NULL, 0);
			f->nsent += sent;
			f->commit_sent = sent;
		}
	}
	if (!sent && f->ok) {
		snprintf(f->err, sizeof f->err, "could not send: %s",
		         PQerrorMessage(c));
		f->ok = false;
	}
	if (!f->piped)
		goto out;
	if (part & SEND_CLOSE) {
		f->synced = PQpipelineSync(c);
		if (!f->synced && f->ok) {
			snprintf(f->err, sizeof f->err, "could not send: %s",
			         PQerrorMessage(c));
			f->ok = false;
		}
		pgpipe_fault_hit(&w->fault, PGPIPE_CLOSE, f->no, c);
	} else if (PQflush(c) != 0 && f->ok) {
		/* in pipeline mode libpq keeps small queries in its buffer:
		 * the open part must reach PostgreSQL now, to run now */
		snprintf(f->err, sizeof f->err, "could not send: %s",
		         PQerrorMessage(c));
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
static void finish_batch(struct writer *w, struct flight *f)
{
	PGconn *c = f->conn;
	bool ok = f->ok;
	bool lost = false;      /* the connection went away */
	bool committed = false; /* COMMIT's own answer came, and was OK */
	bool refused = false;   /* PostgreSQL answered an error before COMMIT */
	free_params(f, SEND_OPEN | SEND_CLOSE);
	if (!f->piped)
		goto out;
	if (!f->synced)
		f->synced = PQpipelineSync(c);
	if (!f->synced) {
		if (ok)
			snprintf(f->err, sizeof f->err, "connection lost: %s",
			         PQerrorMessage(c));
		ok = false;
		lost = true;
		goto unpipe;
	}
	for (int i = 0; i < f->nsent; i++) {
		PGresult *r = pgpipe_result(c, &lost);
		if (!r) {
			if (ok)
				snprintf(f->err, sizeof f->err,
				         "connection lost: %s",
				         PQerrorMessage(c));
			ok = false;
			break;
		}
		if (i == 0)
			pgpipe_fault_hit(&w->fault, PGPIPE_RESULT, f->no, c);
		bool is_commit = f->commit_sent && i == f->nsent - 1;
		ExecStatusType st = PQresultStatus(r);
		if (st == PGRES_COMMAND_OK) {
			committed = is_commit;
		} else if (st == PGRES_PIPELINE_ABORTED) {
			/* an error before it said why: nothing after ran */
			if (ok)
				snprintf(f->err, sizeof f->err,
				         "pipeline aborted");
			ok = false;
		} else {
			const char *state =
			    PQresultErrorField(r, PG_DIAG_SQLSTATE);
			if (ok) {
				snprintf(f->err, sizeof f->err, "%s",
				         PQresultErrorMessage(r));
				f->err[strcspn(f->err, "\n")] = 0;
			}
			ok = false;
			/* an error PostgreSQL sent for a statement before
			 * COMMIT: it stopped there (the answers come in
			 * order), so COMMIT did not run */
			if (state && state[0] && !is_commit)
				refused = true;
			if (db_result_lost(c, r)) {
				lost = true; /* nothing more will come */
				PQclear(r);
				break;
			}
		}
		PQclear(r);
	}
	/* read up to and including the sync; a connection that cannot
	 * give it is out of step and given up */
	while (!lost) {
		PGresult *r = pgpipe_result(c, &lost);
		if (!r)
			break;
		ExecStatusType st = PQresultStatus(r);
		PQclear(r);
		if (st == PGRES_PIPELINE_SYNC)
			break;
	}
unpipe:
	if (lost) {
		log_warn("writer connection lost",
		         "batch=%llu commands=%d commit_sent=%d committed=%d",
		         (unsigned long long)f->no, f->n, f->commit_sent,
		         committed);
		drop_conn(w, f);
	} else {
		PQexitPipelineMode(c);
		f->piped = false;
		if (!ok) { /* an open one, or a failed */
			PGresult *r = PQexec(c, "ROLLBACK");
			bool rolled = PQresultStatus(r) == PGRES_COMMAND_OK;
			PQclear(r);
			if (!rolled)
				drop_conn(w, f);
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
	if (ok && f->nsent > 0) {
		struct timespec t1;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		metrics_batch(f->n,
		              (int64_t)(t1.tv_sec - f->t0.tv_sec) * 1000000000 +
		                  (t1.tv_nsec - f->t0.tv_nsec));
		for (int i = 0; i < w->nm; i++)
			if (f->b.touched[i])
				w->m[i].seq_saved = f->seq[i];
	}
}

/* --- the thread -------------------------------------------------------- */

/* Wakes each command's thread. One semaphore per command, not a condition
 * variable under the writer's mutex: dozens of threads woken at once would
 * each wake, find the mutex taken and sleep again. A command may be gone
 * as soon as it is posted. */
static void answer(struct writer *w, struct writer_cmd **cmds, int n)
{
	(void)w;
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

/* How a batch that was not acknowledged is answered. */
enum fail_kind {
	FAIL_UNAVAILABLE, /* not carried out: PostgreSQL is away (503) */
	FAIL_UNKNOWN,     /* may have committed: retry to learn (503) */
	FAIL_INTERNAL,    /* PostgreSQL refused it: a bug (500) */
};

static enum fail_kind fail_kind_of(const struct flight *f)
{
	return f->unknown ? FAIL_UNKNOWN
	       : f->down  ? FAIL_UNAVAILABLE
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
			fail_cmd(c, 503, "database-unavailable",
			         "database unavailable",
			         "the exchange could not reach PostgreSQL, so "
			         "this command was not carried out; retry with "
			         "the same Idempotency-Key or client_order_id "
			         "after a few seconds");
		else if (kind == FAIL_UNKNOWN && c->kind == WR_NEW)
			fail_cmd(c, 503, "outcome-unknown", "outcome unknown",
			         "the connection to PostgreSQL was lost while "
			         "this order was being committed, so the order "
			         "may or may not have been placed; retry with "
			         "the same client_order_id or Idempotency-Key "
			         "to learn which: the retry answers the placed "
			         "order, or places it once");
		else if (kind == FAIL_UNKNOWN)
			set_answer(
			    c, 503,
			    problem(503, "outcome-unknown", "outcome unknown",
			            "the connection to PostgreSQL was lost while "
			            "this %s was being committed, so it may or "
			            "may not have been carried out; retry with "
			            "the same Idempotency-Key to learn which, or "
			            "read the order",
			            cmd_what(c)));
		else
			fail_cmd(c, 500, "internal", "not committed",
			         "PostgreSQL refused the batch holding this "
			         "command, so nothing of it was carried out; "
			         "this is a bug, and the exchange's log says "
			         "why (\"batch not committed\")");
	}
}

/* Make sure accounts of new orders are in the cache. */
static int ensure_accounts(struct writer *w, struct writer_cmd **cmds, int n,
                           char *err, size_t errlen)
{
	for (int i = 0; i < n; i++) {
		if (!cmds[i] || cmds[i]->kind != WR_NEW)
			continue;
		int64_t a = cmd_account(cmds[i]);
		if (a <= 0 || acct_get(w, a))
			continue;
		char s[24];
		snprintf(s, sizeof s, "%lld", (long long)a);
		const char *pv[] = {s};
		PGresult *r = lookup(w, L_ACCOUNT, 1, pv, err, errlen);
		if (!r)
			return -1;
		if (PQntuples(r) == 1)
			acct_put(w, a, PQgetvalue(r, 0, 0)[0], db_int(r, 0, 1));
		PQclear(r);
	}
	return 0;
}

static void publish(struct writer *w, struct batch *b)
{
	if (!w->o.events)
		return;
	for (size_t i = 0; i < b->pub.n; i++) {
		const struct pubev *e = &b->pub.v[i];
		events_publish(w->o.events, e->type, e->a, e->ta, e->b, e->tb,
		               b->pubtext.p + e->off);
	}
}

/* PostgreSQL cannot be reached: readyz says so, and the next attempt
 * waits a little longer, up to WRITER_BACKOFF_MAX_MS. */
static bool db_unusable(struct writer *w, const char *err)
{
	if (__atomic_exchange_n(&w->ready, false, __ATOMIC_RELAXED))
		log_error("database unavailable", "err=\"%s\"", err);
	metrics_db_up(0);
	int b = w->backoff_ms ? w->backoff_ms * 2 : WRITER_BACKOFF_MIN_MS;
	w->backoff_ms = b < WRITER_BACKOFF_MAX_MS ? b : WRITER_BACKOFF_MAX_MS;
	w->retry_at = mono_ns() + (int64_t)w->backoff_ms * 1000000;
	return false;
}

/* Only while no batch is in flight: the connections are then idle, and
 * one that PostgreSQL closed meanwhile (a shutdown, a restart) is
 * noticed here without blocking, and made again; after a failure the
 * books are rebuilt from the database. */
static bool db_usable(struct writer *w)
{
	char err[512];
	bool bad[2] = {!pgpipe_alive(w->conn[0]), !pgpipe_alive(w->conn[1])};
	bool lbad = !pgpipe_alive(w->lconn);
	if (!lbad && !bad[0] && !bad[1] && !w->need_rebuild)
		return true;
	if (mono_ns() < w->retry_at)
		return false; /* still backing off */
	if (lbad && connect_lookup(w, err, sizeof err) < 0)
		return db_unusable(w, err);
	for (int i = 0; i < 2; i++) {
		if (!bad[i])
			continue;
		if (connect_db(w, i, err, sizeof err) < 0)
			return db_unusable(w, err);
		log_info("database reconnected", NULL);
		w->need_rebuild = true;
	}
	if (w->ngone && end_gone_backends(w, w->conn[0], err, sizeof err) < 0)
		return db_unusable(w, err);
	if (w->need_rebuild && load_all(w, err, sizeof err) < 0) {
		log_error("could not rebuild the books", "err=\"%s\"", err);
		forget_conn(w, 0); /* made again, whatever the problem */
		return db_unusable(w, err);
	}
	w->backoff_ms = 0;
	__atomic_store_n(&w->ready, true, __ATOMIC_RELAXED);
	metrics_db_up(1);
	return true;
}

static void flight_reset(struct flight *f)
{
	struct writer_cmd **cmds = f->cmds;
	struct keyset k = f->keys;
	memset(f, 0, sizeof *f);
	f->cmds = cmds;
	f->keys = k;
	f->keys.n = 0;
	f->ok = true;
}

/* Applies f->cmds[from..f->n) to the books and collects the rows to write;
 * answers that need no transaction (replays, refusals) are set too. `held`
 * are the keys that batches in flight, and f's earlier commands, hold. */
static void apply_cmds(struct writer *w, struct flight *f, int from,
                       const struct keyset *held)
{
	struct writer_cmd *def = NULL, **tail = &f->deferred;
	int rc = ensure_accounts(w, f->cmds + from, f->n - from, f->err,
	                         sizeof f->err);
	if (rc == 0)
		rc = idem_lookup(w, f->cmds + from, f->n - from, held, &f->keys,
		                 &def, f->err, sizeof f->err);
	while (*tail)
		tail = &(*tail)->next;
	*tail = def;
	if (rc < 0) {
		f->ok = false;
		f->down = w->lookup_lost || db_broken(w->lconn);
		return;
	}
	rx_time_ns now = now_ns();
	for (int i = from; i < f->n; i++) {
		struct writer_cmd *c = f->cmds[i];
		if (!c || c->status)
			continue;
		if (c->kind == WR_NEW)
			apply_new(w, &f->b, c, now);
		else if (c->kind == WR_CANCEL || c->kind == WR_REDUCE)
			apply_change(w, &f->b, c, now);
		idem_store(w, &f->b, c);
	}
}

/* The first commands of a new batch: reads and markets are answered
 * first, then the rest applied. `busy`: batches are in flight (whose keys
 * `held` holds); a batch with reads comes only when none is. */
static void prepare_batch(struct writer *w, struct flight *f, bool busy,
                          const struct keyset *held)
{
	struct writer_cmd **cmds = f->cmds;
	int n = f->n;

	batch_init(&f->b);
	if (!busy && !db_usable(w)) {
		for (int i = 0; i < n; i++)
			if (cmds[i]->kind == WR_DEPTH && !w->need_rebuild &&
			    w->nm)
				answer_depth(w, cmds[i]);
		f->ok = false, f->down = true, f->pause = true;
		return;
	}
	for (int i = 0; i < n; i++) {
		if (cmds[i]->kind == WR_DEPTH)
			answer_depth(w, cmds[i]);
		else if (cmds[i]->kind == WR_MARKET)
			create_market(w, cmds[i]);
	}
	apply_cmds(w, f, 0, held);
}

/* Answers every command of f: its own answers when it committed (or had
 * nothing to commit), else 503/500; then publishes and requeues what it
 * deferred. */
static void complete_batch(struct writer *w, struct flight *f)
{
	beat(w);
	if (f->ok) {
		metrics_orders(f->b.accepted, f->b.rejected, f->b.ntrades);
		answer(w, f->cmds, f->n);
		publish(w, &f->b);
	} else {
		if (!f->pause)
			w->need_rebuild = true;
		if (!f->pause)
			log_error(f->unknown ? "batch outcome unknown"
			                     : "batch not committed",
			          "commands=%d down=%d err=\"%s\"", f->n,
			          f->down, f->err);
		fail_all(f->cmds, f->n, fail_kind_of(f));
		answer(w, f->cmds, f->n);
	}
	batch_free(&f->b);
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
	if (f->pause) {
		struct timespec ts = {0, 200 * 1000000};
		nanosleep(&ts, NULL); /* do not spin while it is away */
	}
}

static bool db_down(struct writer *w)
{
	return db_broken(w->conn[0]) || db_broken(w->conn[1]);
}

/* Fails f, which was applied on top of a batch that did not commit. */
static void fail_after(struct flight *f, bool down)
{
	if (!f->ok)
		return;
	f->ok = false;
	f->down = down;
	snprintf(f->err, sizeof f->err,
	         "the batch before it was not committed");
}

/* The batches in flight, oldest first: *cf committing, *of open. */
struct inflight {
	struct flight *cf, *of;
};

static int build_batch(struct writer *w, struct flight *f);
static void launch(struct writer *w, struct inflight *q, struct flight *f);

/* Whether the gathering batch g may be sent now: nothing is open, and
 * either nothing commits or batch_overlap lets it open beside that. */
static bool may_send(const struct writer *w, const struct inflight *q,
                     const struct flight *g)
{
	return g->n && g->ok && !q->of && (w->o.overlap || !q->cf);
}

/* Waits for the committing batch and answers it, then sends the rest of
 * the open one, which commits next; or, when the committing one failed,
 * rolls the open one back and answers it too. Returns false when a batch
 * failed: what was applied after it must fail as well.
 *
 * *gp, when given, is the gathering batch: if it may go out now (as
 * writer_main would send it next), it is sent before the answers, so that
 * PostgreSQL works on it while they go out, and *gp becomes NULL. */
static bool advance(struct writer *w, struct inflight *q, struct flight **gp)
{
	struct flight *c = q->cf, *o = q->of;
	finish_batch(w, c);
	bool ok = c->ok;
	bool down = c->down || db_down(w);
	/* the next COMMIT goes out before this batch's answers */
	if (o && ok)
		send_batch(w, o, SEND_CLOSE);
	q->cf = o;
	q->of = NULL;
	/* and so does the next batch: answering one takes a few µs a
	 * command, with PostgreSQL idle meanwhile when nothing else is under
	 * way (docs/ARCHITECTURE.md, round eight) */
	struct flight *g = gp ? *gp : NULL;
	if (ok && g && may_send(w, q, g) && build_batch(w, g) > 0) {
		launch(w, q, g);
		*gp = NULL;
	}
	complete_batch(w, c);
	if (o && !ok) {
		fail_after(o, down);
		finish_batch(w, o);
		complete_batch(w, o);
		q->cf = NULL;
	}
	return ok;
}

/* Lands every batch in flight; false when one failed. */
static bool drain(struct writer *w, struct inflight *q)
{
	bool ok = true;
	while (q->cf)
		ok = advance(w, q, NULL) && ok;
	return ok;
}

/* Whether results are waiting on c (within ms milliseconds). */
static bool conn_ready(PGconn *c, int ms)
{
	struct pollfd pfd = {.fd = PQsocket(c), .events = POLLIN};
	return pfd.fd < 0 || poll(&pfd, 1, ms) != 0;
}

/* Sends f, which has rows to write: whole when nothing is in flight, else
 * opened on the connection the committing batch does not use. */
static void launch(struct writer *w, struct inflight *q, struct flight *f)
{
	assert(!q->of);
	f->conn = q->cf && q->cf->conn == w->conn[0] ? w->conn[1] : w->conn[0];
	f->no = ++w->nbatch;
	if (q->cf) {
		send_batch(w, f, SEND_OPEN);
		q->of = f;
	} else {
		send_batch(w, f, SEND_OPEN | SEND_CLOSE);
		q->cf = f;
	}
}

static void expire_tick(struct writer *w, struct flight *f)
{
	if (!db_usable(w) || w->nm == 0)
		return;
	rx_time_ns now = now_ns();
	flight_reset(f);
	batch_init(&f->b);
	for (int i = 0; i < w->nm; i++) {
		struct book_cmd bc = {.kind = BOOK_CMD_EXPIRE, .now = now};
		w->nev = 0;
		book_apply(w->m[i].book, &bc, emit, w);
		for (size_t k = 0; k < w->nev; k++)
			resting_event(w, &f->b, &w->ev[k], 0, now);
		if (w->nev)
			f->b.touched[i] = true;
	}
	if (f->b.orders.n && build_batch(w, f) > 0) {
		f->conn = w->conn[0];
		f->no = ++w->nbatch;
		send_batch(w, f, SEND_OPEN | SEND_CLOSE);
		finish_batch(w, f);
		if (!f->ok) {
			w->need_rebuild = true;
			log_error(f->unknown ? "expiry outcome unknown"
			                     : "expiry not committed",
			          "err=\"%s\"", f->err);
		} else {
			publish(w, &f->b);
		}
	}
	batch_free(&f->b);
}

static bool has_reads(struct writer_cmd **cmds, int n)
{
	for (int i = 0; i < n; i++)
		if (cmds[i]->kind == WR_DEPTH)
			return true;
	return false;
}

/* The keys held by the batches in flight, and by g's commands so far. */
static void held_keys(struct keyset *k, const struct inflight *q,
                      const struct flight *g)
{
	const struct flight *fs[] = {q->cf, q->of, g};
	k->n = 0;
	for (int j = 0; j < 3; j++)
		for (size_t i = 0; fs[j] && i < fs[j]->keys.n; i++)
			keyset_add(k, fs[j]->keys.h[i]);
}

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	struct flight fl[3];
	struct inflight q = {0};
	struct flight *g = NULL; /* gathering */
	struct keyset held = {0};
	memset(fl, 0, sizeof fl);
	for (int i = 0; i < 3; i++) {
		fl[i].cmds = calloc((size_t)w->o.batch_max, sizeof *fl[i].cmds);
		assert(fl[i].cmds);
	}
	for (;;) {
		if (!g) {
			for (int i = 0; i < 3 && !g; i++)
				if (&fl[i] != q.cf && &fl[i] != q.of)
					g = &fl[i];
			flight_reset(g);
		}
		bool busy = q.cf != NULL;
		int from = g->n;
		if (!busy) /* back at the top, nothing under way: progress */
			beat(w);
		pthread_mutex_lock(&w->mu);
		if (!w->head && !w->stopping && !busy && from == 0) {
			struct timespec until;
			clock_gettime(CLOCK_MONOTONIC, &until);
			until.tv_sec += WRITER_IDLE_MS / 1000;
			pthread_cond_timedwait(&w->cv, &w->mu, &until);
		}
		/* A batch that has commands takes only more orders, cancels
		 * and reduces: reads and markets wait for a batch of their
		 * own. */
		while (w->head && g->ok && g->n < w->o.batch_max &&
		       (from == 0 || w->head->kind == WR_NEW ||
		        w->head->kind == WR_CANCEL ||
		        w->head->kind == WR_REDUCE)) {
			g->cmds[g->n++] = w->head;
			w->head = w->head->next;
		}
		if (!w->head)
			w->tail = NULL;
		bool stop = w->stopping && !w->head && g->n == 0 && !busy;
		pthread_mutex_unlock(&w->mu);
		/* the writer holds commands: from now on, progress is a
		 * batch that lands (complete_batch) */
		__atomic_store_n(&w->inflight, busy || g->n > 0,
		                 __ATOMIC_RELAXED);
		if (stop)
			break;
		bool took = g->n > from;
		if (!took && from == 0 && !busy) {
			expire_tick(w, g);
			g = NULL; /* the tick used it: reset it */
			continue;
		}
		if (took && from == 0) {
			/* Reads of the books see only what is committed. */
			if (busy && has_reads(g->cmds, g->n)) {
				drain(w, &q);
				busy = false;
			}
			held_keys(&held, &q, NULL);
			prepare_batch(w, g, busy, &held);
		} else if (took) {
			held_keys(&held, &q, g);
			apply_cmds(w, g, from, &held);
		}
		/* Lands the committing batch once its answer has come; waits
		 * up to 1 ms for it when no command came either. */
		if (q.cf && conn_ready(q.cf->conn, took ? 0 : 1) &&
		    !advance(w, &q, &g) && g && g->n)
			fail_after(g, db_down(w));
		if (!g) /* advance sent it */
			continue;
		if (g->n && !g->ok) {
			if (!drain(w, &q))
				fail_after(g, db_down(w));
			complete_batch(w, g);
			g = NULL;
		} else if (may_send(w, &q, g)) {
			if (build_batch(w, g) > 0) {
				launch(w, &q, g);
				g = NULL;
			} else if (!q.cf) { /* nothing to write or wait for */
				complete_batch(w, g);
				g = NULL;
			}
		}
	}
	for (int i = 0; i < 3; i++) {
		free(fl[i].cmds);
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
	pthread_mutex_init(&w->mu, NULL);
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cv, &a);
	pthread_condattr_destroy(&a);
	const char *fault = getenv("RAMEX_WRITER_FAULT");
	if (pgpipe_fault_parse(&w->fault, fault) < 0) {
		snprintf(err, errlen,
		         "RAMEX_WRITER_FAULT must be STEP:N (STEP idle, open, "
		         "close or result; N >= 1), not '%.40s'",
		         fault);
		goto fail;
	}
	if (w->fault.step != PGPIPE_NONE)
		log_warn("writer fault hook on: a test breaks connections",
		         "RAMEX_WRITER_FAULT=%.40s", fault);
	beat(w);
	if (connect_db(w, 0, err, errlen) < 0 ||
	    connect_db(w, 1, err, errlen) < 0 ||
	    connect_lookup(w, err, errlen) < 0 || load_all(w, err, errlen) < 0)
		goto fail;
	w->known = keyfilter_new(1 << 20);
	if (!w->known) {
		snprintf(err, errlen, "out of memory for the key filter");
		goto fail;
	}
	known_stats(w);
	w->ready = true;
	w->accepting = true;
	if (pthread_create(&w->th, NULL, writer_main, w) != 0) {
		snprintf(err, errlen, "could not start the writer thread");
		goto fail;
	}
	pthread_setname_np(w->th, "ramexd-writer"); /* for top -H, perf */
	/* without it, every key is looked up: slower, still right */
	w->loader_started =
	    pthread_create(&w->loader, NULL, loader_main, w) == 0;
	if (w->loader_started)
		pthread_setname_np(w->loader, "ramexd-keys");
	else
		log_error("could not start the key loader thread",
		          "hint=\"every idempotency key is looked up\"");
	return w;
fail:
	free_books(w);
	for (int i = 0; i < 2; i++)
		if (w->conn[i])
			PQfinish(w->conn[i]);
	if (w->lconn)
		PQfinish(w->lconn);
	keyfilter_free(w->known);
	free(w->acct);
	free(w);
	return NULL;
}

/* Queues c; false (c answered 503) when the writer takes no more. */
static bool enqueue(struct writer *w, struct writer_cmd *c)
{
	c->next = NULL;
	c->status = 0;
	c->body = NULL;
	pthread_mutex_lock(&w->mu);
	if (!w->accepting) {
		pthread_mutex_unlock(&w->mu);
		c->retry_after = true;
		fail_cmd(c, 503, "shutting-down", "shutting down",
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
	if (mono_ns() - __atomic_load_n(&w->beat, __ATOMIC_RELAXED) <
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
	__atomic_store_n(&w->loader_stop, 1, __ATOMIC_RELAXED);
	if (w->loader_started)
		pthread_join(w->loader, NULL);
	free_books(w);
	for (int i = 0; i < 2; i++)
		if (w->conn[i])
			PQfinish(w->conn[i]);
	if (w->lconn)
		PQfinish(w->lconn);
	free(w->ev);
	free(w->acct);
	keyfilter_free(w->known);
	keyfilter_free(w->loaded);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
	free(w);
}
