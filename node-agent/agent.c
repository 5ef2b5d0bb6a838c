/*
 * agent.c — ramex-agent's main loop: the edges wired around the pure core.
 *
 * Every sample_s seconds: sample → estimate → reconcile contracts with the
 * exchange (deliver new sales, take back recalled or ended ones) → strategy
 * → orders; every report_s seconds: cut the meter, spool every report
 * (fsync), send what is pending in batches. Between samples the agent
 * sleeps on the event stream (events.h): a fill or a contract move wakes
 * it and it reconciles at once; while the stream is down it lists the
 * contracts every sample instead of every poll_s. The machine's own
 * workload always wins: a recall gives the pages back locally first and
 * tells the exchange after. When the exchange cannot be reached the agent
 * keeps delivering, metering and spooling, and sends everything once it is
 * back. SIGTERM/SIGINT: cancel the open offers, give every page back,
 * recall what it sold on spot and end what it borrowed, spool the final
 * reports, send them, exit.
 */
#include "common/log.h"
#include "node-agent/client.h"
#include "node-agent/config.h"
#include "node-agent/core/meter.h"
#include "node-agent/core/simload.h"
#include "node-agent/core/strategy.h"
#include "node-agent/core/wsest.h"
#include "node-agent/events.h"
#include "node-agent/exec.h"
#include "node-agent/lendsup.h"
#include "node-agent/mglru.h"
#include "node-agent/sample.h"
#include "node-agent/spool.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define AGENT_BATCH       1000 /* reports per POST /v1/usage (the API's most) */
#define AGENT_MAX_BATCHES 8    /* batches sent per round */

struct held { /* a contract of ours the exchange knows */
	int64_t id;
	enum strategy_product product;
	enum strategy_side side; /* SELL: we deliver; BUY: we receive */
	enum exec_kind kind;
	rx_pages pages; /* contract size */
	int seen;       /* in this round's listing */
	int confirmed;  /* seller: the exchange has our delivery; buyer: active
	                 */
	int metering;   /* its pages are held and metered */
	int refused;    /* the exchange refused our delivery: stop trying */
	/* Pages given back, the exchange not yet told (recall or end): the
	 * call is retried until it answers. */
	const char *tell; /* "recall", "end" or NULL */
	/* The lend data path (lendsup.h), when this node runs one for it:
	 * the child, the page-seconds its meter file says (hosted, the
	 * pages under contract) and how many of those are reported. */
	struct lendsup_child *lc;
	int64_t notice_s; /* the contract's recall notice */
	int64_t lend_cum, lend_reported;
	int lend_real;        /* usage comes from the child's meter */
	int64_t lend_next_ms; /* when to try to start the path again */
};

struct agent {
	struct agent_config cfg;
	struct client *cl;
	struct exec *ex;
	struct wsest *est;
	struct meter *meter;
	struct spool *spool;
	struct sample_idle *idle;
	/* MGLRU: on when the kernel has it and its file reads; the memcg
	 * path lru_gen prints for our cgroup (NULL: the whole machine). */
	int mglru_on;
	char memcg[CONFIG_STR];
	char *mglru_buf;
	struct mglru_view *mg;
	enum wsest_source source; /* the last estimate's, for the log */
	/* Active probing (cgroup backend, memory.reclaim present). */
	int probe_on;
	struct probe probe;
	rx_pages probed_pending; /* taken since the last sample */
	int64_t n_probes, probed_total;
	int64_t account;
	/* this agent's principal as orders record it (node:KEY): the orders
	 * it placed are its quotes; the account's other orders are a
	 * person's, which it plans around and never cancels */
	char scope[48]; /* key ids are nk_ and 16 hex digits */
	/* a person paused this node's automation (GET /v1/whoami): deliver
	 * and meter, withdraw our quotes, place nothing */
	int paused;
	struct strategy_others others;
	rx_pages managed;
	struct wsest_estimate e;
	struct strategy_view view;
	int nheld;
	struct held held[STRATEGY_MAX_CONTRACTS];
	/* lend contracts we bought whose seller has not delivered yet: not
	 * held (nothing to receive), but ours, so the strategy counts them
	 * and does not bid for the same pages again while they move */
	int npend;
	struct strategy_contract pend[STRATEGY_MAX_QUOTES];
	int nquotes;
	struct strategy_quote quotes[STRATEGY_MAX_QUOTES];
	struct strategy_top top[STRATEGY_NPRODUCTS];
	int reachable;
	uint64_t order_seq;
	/* An order whose fate is not known: no answer came, or a 503 (the
	 * exchange could not reach PostgreSQL, or lost it while committing
	 * the order: outcome-unknown). It is sent again with the same
	 * Idempotency-Key and client_order_id before anything new is
	 * placed, so that it is placed at most once (docs/operations.md). */
	json_t *pending;
	char pending_key[64];
	/* counters for the status file */
	int64_t n_samples, n_orders, n_cancels, n_recalls, n_deliveries;
	int64_t n_reports, n_acked, n_send_fail, n_errors, n_set_aside;
	int64_t n_batches, n_reconciles;
	int warned_no_usage;
	struct events_stream *ev;
	int64_t last_list_ms; /* when the contracts were last listed */
	char
	    lend_dir[LENDSUP_PATH]; /* secrets, meters, logs of lend children */
	char lend_bin[LENDSUP_PATH]; /* where ramex-lend-server/-nbd are */
	/* lenders given notice: served until released or the deadline */
	struct lendsup_child *draining[STRATEGY_MAX_CONTRACTS];
	int ndraining;
};

static volatile sig_atomic_t stop;
static int wake_pipe[2] = {-1, -1}; /* the signal handler wakes the wait */

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
	if (wake_pipe[1] >= 0) {
		int saved = errno;
		ssize_t w = write(wake_pipe[1], "x", 1);
		(void)w;
		errno = saved;
	}
}

static rx_time_ns now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (rx_time_ns)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static const char *market_of(const struct agent *a, enum strategy_product p)
{
	return p == STRATEGY_PERM ? a->cfg.strat.perm_market
	                          : a->cfg.strat.spot_market;
}

static int call(struct agent *a, const char *method, const char *path,
                json_t *body, const char *idem, struct client_resp *r)
{
	char err[512];
	if (client_call(a->cl, method, path, body, idem, r, err, sizeof err) <
	    0) {
		if (a->reachable)
			log_warn("exchange unreachable; delivering, metering "
			         "and spooling locally",
			         "err=%s", log_quote((char[600]){0}, 600, err));
		a->reachable = 0;
		return -1;
	}
	if (!a->reachable)
		log_info("exchange reachable again", NULL);
	a->reachable = 1;
	return 0;
}

/* ---- sampling ---- */

/* sim: the workload's size may be changed from outside (tests, demos)
 * through sim_usage_file, re-read every sample. */
static void sim_read_usage(struct agent *a)
{
	char buf[64];
	long long v;
	char *end;

	if (!a->cfg.sim_usage_file[0])
		return;
	FILE *f = fopen(a->cfg.sim_usage_file, "r");
	if (!f)
		return; /* absent: keep the current usage */
	if (fgets(buf, sizeof buf, f)) {
		errno = 0;
		v = strtoll(buf, &end, 10);
		if (!errno && end != buf && v >= 0 && v <= a->cfg.sim_total &&
		    v != a->cfg.sim_usage) {
			log_info("sim workload changed", "usage_pages=%lld", v);
			a->cfg.sim_usage = v;
			exec_sim_set_usage(a->ex, v);
		}
	}
	fclose(f);
}

#define AGENT_LRU_GEN_MAX (1 << 20) /* lru_gen of ~2000 memcgs */

/* Reads the generations; when the youngest is half a window old, ages them
 * and reads again, so that the histogram has the walk just made. */
static int mglru_sample(struct agent *a, struct wsest_sample *s, char *err,
                        size_t errlen)
{
	const char *memcg = a->memcg[0] ? a->memcg : NULL;
	/* Aged every half window (at the first sample after), the oldest
	 * generation, which older ones are merged into, lies a window back
	 * or more, so that its pages are known not to be working. */
	int64_t half_ms = a->cfg.est.window_ns / 2000000;
	if (sample_read_file(a->cfg.mglru_file, a->mglru_buf, AGENT_LRU_GEN_MAX,
	                     err, errlen) < 0 ||
	    mglru_parse(a->mglru_buf, memcg, 1000, a->mg, err, errlen) < 0)
		return -1;
	int aged = mglru_age(a->cfg.mglru_file, a->mg, half_ms, err, errlen);
	if (aged < 0)
		return -1;
	if (aged > 0 &&
	    (sample_read_file(a->cfg.mglru_file, a->mglru_buf,
	                      AGENT_LRU_GEN_MAX, err, errlen) < 0 ||
	     mglru_parse(a->mglru_buf, memcg, 1000, a->mg, err, errlen) < 0))
		return -1;
	s->gens = a->mg->gens;
	s->has_gens = 1;
	return 0;
}

static int take_sample(struct agent *a, rx_time_ns t, struct wsest_sample *s)
{
	char err[512];
	const char *why;

	if (!strcmp(a->cfg.backend, "sim")) {
		sim_read_usage(a);
		/* The sim's workload touches all of its pages: its working
		 * set is its usage, measured through the same estimator. */
		memset(s, 0, sizeof *s);
		s->t = t;
		/* A workload profile (sim_profile) moves along the clock;
		 * growing into pages it gave away takes offline pages back,
		 * which sync_losses turns into recalls. */
		s->active = exec_sim_advance(a->ex, t);
	} else {
		struct sample_source src = {
		    "",
		    !strcmp(a->cfg.backend, "cgroup") ? a->cfg.cgroup : NULL};
		if (sample_take(&src, t, s, NULL, err, sizeof err) < 0) {
			log_error("could not sample memory", "err=%s",
			          log_quote((char[600]){0}, 600, err));
			return -1;
		}
		s->probed = a->probed_pending;
		a->probed_pending = 0;
		if (a->mglru_on && mglru_sample(a, s, err, sizeof err) < 0) {
			log_warn("MGLRU generations unreadable; working set "
			         "from the other sources from now on",
			         "err=%s", log_quote((char[600]){0}, 600, err));
			a->mglru_on = 0;
		}
		if (!s->has_gens && a->idle &&
		    sample_idle_scan(a->idle, &s->idle, err, sizeof err) == 0 &&
		    s->idle.sampled > 0)
			s->has_idle = 1;
	}
	if (wsest_update(a->est, s, &a->e, &why) < 0) {
		log_error("estimator refused a sample", "why=%s",
		          log_quote((char[300]){0}, 300, why));
		return -1;
	}
	if (a->e.source != a->source && a->e.source != WSEST_NONE) {
		log_info("working-set source", "ramex_agent_wss_source=%s",
		         wsest_source_name(a->e.source));
		a->source = a->e.source;
	}
	a->n_samples++;
	return 0;
}

/* Takes the next probe's pages away (probe.h decides how many); the next
 * sample carries what memory.current fell by, so that the estimator sees
 * the refaults that follow against it. */
static void probe_tick(struct agent *a)
{
	char err[512];
	rx_pages want, taken;

	if (!a->probe_on)
		return;
	want = probe_next(&a->cfg.prb, &a->probe, &a->e);
	if (want <= 0)
		return;
	if (sample_reclaim(a->cfg.cgroup, want, &taken, err, sizeof err) < 0) {
		log_warn("probing stopped", "err=%s",
		         log_quote((char[600]){0}, 600, err));
		a->probe_on = 0;
		return;
	}
	log_debug("probe", "asked_pages=%lld taken_pages=%lld stall_ppm=%lld",
	          (long long)want, (long long)taken, (long long)a->e.stall_ppm);
	a->probed_pending += taken;
	a->probed_total += taken;
	a->n_probes++;
}

/* ---- reports ---- */

/* Spools one metered period; `pages` is what the contract holds at its
 * end. The cumulative counter continues from the contract's last report. */
static void spool_period(struct agent *a, const struct meter_period *p,
                         rx_pages pages, int final)
{
	struct spool_report r, last;
	char err[512];

	/* The exchange refuses empty periods; nothing was metered anyway. */
	if (p->end <= p->start)
		return;
	memset(&r, 0, sizeof r);
	snprintf(r.contract, sizeof r.contract, "%s", p->contract);
	r.start = p->start;
	r.end = p->end;
	r.page_seconds = p->page_seconds;
	r.carry_pns = p->carry_pns;
	r.cum_page_seconds = p->page_seconds;
	if (spool_last(a->spool, p->contract, &last) == 0)
		r.cum_page_seconds += last.cum_page_seconds;
	r.pages_at_end = pages < 0 ? 0 : pages;
	r.final = final;
	if (spool_append(a->spool, &r, err, sizeof err) < 0) {
		/* Not durable means not sent: the meter keeps nothing back,
		 * so this period is lost unless the operator acts. */
		log_error("could not spool a usage report",
		          "contract=%s err=%s", p->contract,
		          log_quote((char[600]){0}, 600, err));
		a->n_errors++;
		return;
	}
	a->n_reports++;
}

static json_t *report_json(const struct spool_report *p)
{
	return json_pack(
	    "{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "epoch", (json_int_t)p->epoch,
	    "seq", (json_int_t)p->seq, "contract_id",
	    (json_int_t)strtoll(p->contract, NULL, 10), "period_start_ns",
	    (json_int_t)p->start, "period_end_ns", (json_int_t)p->end,
	    "page_seconds", (json_int_t)p->page_seconds, "kmod_page_seconds",
	    (json_int_t)p->cum_page_seconds, "kmod_pages",
	    (json_int_t)p->pages_at_end);
}

enum sent { SENT_OK, SENT_REFUSED, SENT_LATER, SENT_DOWN };

/* POSTs reports p[0..n) as one batch. */
static enum sent post_batch(struct agent *a, const struct spool_report *p,
                            int n, struct client_resp *r)
{
	json_t *arr = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(arr, report_json(&p[i]));
	json_t *b = json_pack("{s:o}", "reports", arr);
	int rc = call(a, "POST", "/v1/usage", b, NULL, r);
	json_decref(b);
	if (rc < 0)
		return SENT_DOWN;
	a->n_batches++;
	if (r->status == 200 || r->status == 201)
		return SENT_OK;
	/* 400 too: a report the exchange cannot read will never be read. */
	if (r->status == 400 || r->status == 409 || r->status == 422)
		return SENT_REFUSED;
	if (r->status == 404 || r->status == 405) {
		if (!a->warned_no_usage)
			log_warn("the exchange has no usage endpoint; "
			         "reports stay in the spool",
			         "status=%ld", r->status);
		a->warned_no_usage = 1;
	} else {
		a->n_send_fail++;
		log_warn("usage batch not taken; kept for resending",
		         "reports=%d status=%ld detail=%s", n, r->status,
		         log_quote((char[300]){0}, 300, r->detail));
	}
	return SENT_LATER;
}

static void ack(struct agent *a, const struct spool_report *p)
{
	char err[512];
	if (spool_ack(a->spool, p->seq, err, sizeof err) < 0)
		log_warn("could not mark a report acknowledged; it will be "
		         "resent and counted once",
		         "seq=%" PRIu64 " err=%s", p->seq,
		         log_quote((char[600]){0}, 600, err));
	a->n_acked++;
}

/* The exchange refused a batch (409: a number reused with another body;
 * 422: a report it cannot take): one by one, so that only the reports
 * refused on their own are set aside and the rest are counted. */
static enum sent send_one_by_one(struct agent *a, const struct spool_report *p,
                                 int n)
{
	char err[512];
	for (int i = 0; i < n; i++) {
		struct client_resp r;
		enum sent st = post_batch(a, &p[i], 1, &r);
		if (st == SENT_OK) {
			ack(a, &p[i]);
		} else if (st == SENT_REFUSED) {
			json_t *e = json_array_get(
			    json_object_get(r.json, "errors"), 0);
			const char *d =
			    json_string_value(json_object_get(e, "detail"));
			log_error(
			    "usage report refused by the exchange; set aside "
			    "in the spool (a person must look)",
			    "epoch=%" PRIu64 " seq=%" PRIu64
			    " contract=%s status=%ld detail=%s",
			    p[i].epoch, p[i].seq, p[i].contract, r.status,
			    log_quote((char[400]){0}, 400, d ? d : r.detail));
			if (spool_set_aside(a->spool, p[i].seq, err,
			                    sizeof err) < 0)
				log_error("could not set a report aside",
				          "err=%s",
				          log_quote((char[600]){0}, 600, err));
			a->n_set_aside++;
		}
		client_resp_clear(&r);
		if (st == SENT_LATER || st == SENT_DOWN)
			return st;
	}
	return SENT_OK;
}

static void send_reports(struct agent *a)
{
	static struct spool_report p[AGENT_BATCH];
	char err[512];

	for (int round = 0; round < AGENT_MAX_BATCHES; round++) {
		int n = spool_pending(a->spool, p, AGENT_BATCH);
		if (n > AGENT_BATCH)
			n = AGENT_BATCH;
		if (n == 0)
			break;
		struct client_resp r;
		enum sent st = post_batch(a, p, n, &r);
		client_resp_clear(&r);
		if (st == SENT_OK)
			for (int i = 0; i < n; i++)
				ack(a, &p[i]);
		else if (st == SENT_REFUSED)
			st = send_one_by_one(a, p, n);
		if (st != SENT_OK)
			break;
	}
	if (spool_records(a->spool) > 4096 &&
	    spool_pending(a->spool, p, 0) < 1024 &&
	    spool_compact(a->spool, err, sizeof err) < 0)
		log_warn("could not compact the spool", "err=%s",
		         log_quote((char[600]){0}, 600, err));
}

struct held;
static struct held *find_held(struct agent *a, int64_t id);
static int whoami(struct agent *a, char *err, size_t errlen);
static void lend_adjust(struct held *h, struct meter_period *p);

static void cut_all(struct agent *a, rx_time_ns t)
{
	struct meter_period p;
	const char *why;
	for (int i = 0; i < meter_count(a->meter); i++) {
		const char *id = meter_id(a->meter, i);
		if (meter_cut(a->meter, id, t, &p, &why) == 0) {
			lend_adjust(find_held(a, strtoll(id, NULL, 10)), &p);
			spool_period(a, &p, meter_pages(a->meter, id), 0);
		}
	}
}

/* ---- contracts ---- */

static struct held *find_held(struct agent *a, int64_t id)
{
	for (int i = 0; i < a->nheld; i++)
		if (a->held[i].id == id)
			return &a->held[i];
	return NULL;
}

/* Starts metering h's pages from t, or, after a restart, from where the
 * spool's last report of it stopped (unless that report was its last). */
static void start_meter(struct agent *a, struct held *h, rx_pages got,
                        rx_time_ns t)
{
	char id[32];
	const char *why;
	struct spool_report last;

	snprintf(id, sizeof id, "%" PRId64, h->id);
	rx_time_ns from = t;
	int64_t carry = 0;
	if (spool_last(a->spool, id, &last) == 0 && !last.final &&
	    last.end <= t) {
		from = last.end;
		carry = last.carry_pns;
	} else if (spool_last(a->spool, id, &last) == 0 && last.end > t) {
		from = last.end; /* the clock stepped back: never overlap */
	}
	if (meter_start(a->meter, id, from, got, carry, &why) < 0) {
		log_error("could not meter", "contract=%s why=%s", id,
		          log_quote((char[300]){0}, 300, why));
		a->n_errors++;
		return;
	}
	h->metering = 1;
}

/* Takes the pages of a contract we sell (offline or lent) or receive. */
static int take_pages(struct agent *a, struct held *h, rx_pages *got)
{
	char id[32], err[512];

	snprintf(id, sizeof id, "%" PRId64, h->id);
	rx_pages have = exec_held(a->ex, id);
	if (have >= h->pages) {
		*got = have;
		return 0;
	}
	rx_pages more = 0;
	if (exec_take(a->ex, id, h->kind, h->pages - (have > 0 ? have : 0),
	              &more, err, sizeof err) < 0) {
		log_error("could not take the contract's pages",
		          "contract=%s err=%s", id,
		          log_quote((char[600]){0}, 600, err));
		a->n_errors++;
		return -1;
	}
	*got = (have > 0 ? have : 0) + more;
	/* still moving (a rate-limited backend) is not short */
	if (*got < h->pages && exec_moving(a->ex, id) <= 0)
		log_warn("delivered short: memory in use",
		         "contract=%s missing=%lld", id,
		         (long long)(h->pages - *got));
	return 0;
}

/* A contract move on the exchange (deliver, recall, end). 1 when the
 * exchange answered with the move made (or made before), 0 when it refused
 * it for good, -1 when it must be retried. */
static int contract_move(struct agent *a, int64_t id, const char *move,
                         const char *note)
{
	struct client_resp r;
	char path[128];

	snprintf(path, sizeof path, "/v1/contracts/%" PRId64 "/%s", id, move);
	json_t *b = json_pack("{s:s}", "note", note);
	int rc = call(a, "POST", path, b, NULL, &r);
	json_decref(b);
	if (rc < 0)
		return -1;
	int out;
	if (r.status == 200) {
		out = 1;
	} else if (r.status == 409 || r.status == 403 || r.status == 404 ||
	           r.status == 422) {
		log_warn("the exchange refused a contract move",
		         "contract=%" PRId64 " move=%s status=%ld detail=%s",
		         id, move, r.status,
		         log_quote((char[300]){0}, 300, r.detail));
		out = 0;
	} else {
		log_warn("contract move not taken; retrying",
		         "contract=%" PRId64 " move=%s status=%ld detail=%s",
		         id, move, r.status,
		         log_quote((char[300]){0}, 300, r.detail));
		out = -1;
	}
	client_resp_clear(&r);
	return out;
}

/* ---- the lend data path (lendsup.h, docs/lending.md) ---- */

/* Where the lend children's files go: next to the spool, 0700 (it holds
 * contract secrets). 0, or -1 with a log line. */
static int lend_dir_ready(struct agent *a)
{
	if (!a->lend_dir[0])
		snprintf(a->lend_dir, sizeof a->lend_dir, "%s-lend",
		         a->cfg.spool);
	if (mkdir(a->lend_dir, 0700) < 0 && errno != EEXIST) {
		log_error("cannot make the lend state directory",
		          "dir=%s err=%s", a->lend_dir, strerror(errno));
		return -1;
	}
	chmod(a->lend_dir, 0700);
	return 0;
}

static void lend_program(struct agent *a, struct lendsup_child *c,
                         const char *prog)
{
	lendsup_arg(c, "%s/%s", a->lend_bin, prog);
}

/* Seller: start ramex-lend-server for h and tell the exchange where it
 * listens; the exchange answers the contract secret the server needs, so
 * the endpoint is registered first, on a port chosen beforehand. 0 when
 * it runs, -1 to try again later. */
static int lend_serve(struct agent *a, struct held *h, int64_t now_ms)
{
	char host[CONFIG_STR], ep[CONFIG_STR + 8], path[96], err[512];
	struct client_resp r;
	const char *colon = strrchr(a->cfg.lend_listen, ':');
	int port = atoi(colon + 1);

	snprintf(host, sizeof host, "%.*s", (int)(colon - a->cfg.lend_listen),
	         a->cfg.lend_listen);
	if (port == 0 && !(port = lendsup_free_port(host))) {
		log_error("no free port for a lend server", "host=%s", host);
		return -1;
	}
	if (!a->cfg.lend_advertise[0])
		snprintf(ep, sizeof ep, "%s:%d", host, port);
	else if (a->cfg.lend_advertise[0] == '['
	             ? strstr(a->cfg.lend_advertise, "]:") != NULL
	             : strchr(a->cfg.lend_advertise, ':') != NULL)
		snprintf(ep, sizeof ep, "%s", a->cfg.lend_advertise);
	else
		snprintf(ep, sizeof ep, "%s:%d", a->cfg.lend_advertise, port);
	snprintf(path, sizeof path, "/v1/contracts/%" PRId64 "/lend", h->id);
	json_t *b = json_pack("{s:s}", "endpoint", ep);
	int rc = call(a, "POST", path, b, NULL, &r);
	json_decref(b);
	if (rc < 0)
		return -1;
	const char *secret =
	    json_string_value(json_object_get(r.json, "secret"));
	if (r.status != 200 || !secret) {
		log_warn("the exchange did not take the lend endpoint",
		         "contract=%" PRId64 " status=%ld detail=%s", h->id,
		         r.status, log_quote((char[300]){0}, 300, r.detail));
		client_resp_clear(&r);
		return -1;
	}
	struct lendsup_child *c = calloc(1, sizeof *c);
	if (!c) {
		client_resp_clear(&r);
		return -1;
	}
	lendsup_init(c, a->lend_dir, "lend-server", h->id);
	if (lendsup_write_secret(c, secret, err, sizeof err) < 0)
		goto fail;
	lend_program(a, c, "ramex-lend-server");
	lendsup_arg(c, "--contract");
	lendsup_arg(c, "%" PRId64, h->id);
	lendsup_arg(c, "--secret-file");
	lendsup_arg(c, "%s", c->secret_file);
	lendsup_arg(c, "--pages");
	lendsup_arg(c, "%lld", (long long)h->pages);
	lendsup_arg(c, "--listen");
	lendsup_arg(c, "%s:%d", host, port);
	lendsup_arg(c, "--meter-file");
	lendsup_arg(c, "%s", c->meter_file);
	lendsup_arg(c, "--notice-ms");
	lendsup_arg(c, "%lld", (long long)h->notice_s * 1000);
	if (a->cfg.lend_tls_cert[0]) {
		lendsup_arg(c, "--tls-cert");
		lendsup_arg(c, "%s", a->cfg.lend_tls_cert);
		lendsup_arg(c, "--tls-key");
		lendsup_arg(c, "%s", a->cfg.lend_tls_key);
	}
	if (a->cfg.lend_plaintext)
		lendsup_arg(c, "--plaintext");
	/* root may lock its memory; a lender must not page for its
	 * borrower (docs/lending.md, the swap path's headroom) */
	if (geteuid() == 0)
		lendsup_arg(c, "--mlock");
	if (lendsup_start(c, now_ms, err, sizeof err) < 0)
		goto fail;
	client_resp_clear(&r);
	h->lc = c;
	log_info("serving a lend contract",
	         "contract=%" PRId64 " endpoint=%s pages=%lld", h->id, ep,
	         (long long)h->pages);
	return 0;
fail:
	log_error("could not start the lend server",
	          "contract=%" PRId64 " err=%s", h->id,
	          log_quote((char[600]){0}, 600, err));
	lendsup_cleanup(c);
	free(c);
	client_resp_clear(&r);
	return -1;
}

/* Buyer: once the lender registered, start ramex-lend-nbd towards it.
 * 0 when it runs, -1 to ask again later (404 until the lender is up). */
static int lend_borrow(struct agent *a, struct held *h, int64_t now_ms)
{
	char path[96], err[512];
	struct client_resp r;

	snprintf(path, sizeof path, "/v1/contracts/%" PRId64 "/lend", h->id);
	if (call(a, "GET", path, NULL, NULL, &r) < 0)
		return -1;
	const char *secret =
	    json_string_value(json_object_get(r.json, "secret"));
	const char *ep = json_string_value(json_object_get(r.json, "endpoint"));
	if (r.status != 200 || !secret || !ep) {
		if (r.status != 404)
			log_warn("could not learn the lender's endpoint",
			         "contract=%" PRId64 " status=%ld detail=%s",
			         h->id, r.status,
			         log_quote((char[300]){0}, 300, r.detail));
		client_resp_clear(&r);
		return -1;
	}
	struct lendsup_child *c = calloc(1, sizeof *c);
	if (!c) {
		client_resp_clear(&r);
		return -1;
	}
	lendsup_init(c, a->lend_dir, "lend-nbd", h->id);
	c->final_exits = 1u << 3; /* lender lost: not to be papered over */
	if (lendsup_write_secret(c, secret, err, sizeof err) < 0)
		goto fail;
	lend_program(a, c, "ramex-lend-nbd");
	lendsup_arg(c, "--lender");
	lendsup_arg(c, "%s", ep);
	lendsup_arg(c, "--contract");
	lendsup_arg(c, "%" PRId64, h->id);
	lendsup_arg(c, "--secret-file");
	lendsup_arg(c, "%s", c->secret_file);
	lendsup_arg(c, "--meter-file");
	lendsup_arg(c, "%s", c->meter_file);
	if (a->cfg.lend_tls_ca[0]) {
		lendsup_arg(c, "--tls-ca");
		lendsup_arg(c, "%s", a->cfg.lend_tls_ca);
	}
	if (a->cfg.lend_plaintext)
		lendsup_arg(c, "--plaintext");
	if (!strcmp(a->cfg.lend_borrow_mode, "listen")) {
		/* NBD on loopback for user space and tests; the port goes
		 * to lend-nbd-ID.port for whoever connects */
		char pf[LENDSUP_PATH + 48];
		int port = lendsup_free_port("127.0.0.1");
		if (!port) {
			snprintf(err, sizeof err, "no free port on 127.0.0.1");
			goto fail;
		}
		lendsup_arg(c, "--listen");
		lendsup_arg(c, "127.0.0.1:%d", port);
		snprintf(pf, sizeof pf, "%s/lend-nbd-%" PRId64 ".port",
		         a->lend_dir, h->id);
		FILE *f = fopen(pf, "w");
		if (!f || fprintf(f, "%d\n", port) < 0 || fclose(f) != 0) {
			snprintf(err, sizeof err, "could not write %.400s", pf);
			goto fail;
		}
	} else {
		lendsup_arg(c, "--attach");
		lendsup_arg(c, "%s", a->cfg.lend_nbd_device);
		lendsup_arg(c, "--swap-priority");
		lendsup_arg(c, "100");
		lendsup_arg(c, "--mlock");
	}
	if (lendsup_start(c, now_ms, err, sizeof err) < 0)
		goto fail;
	h->lc = c;
	log_info("borrowing through the lend bridge",
	         "contract=%" PRId64 " lender=%s mode=%s", h->id, ep,
	         a->cfg.lend_borrow_mode);
	client_resp_clear(&r); /* ep is the answer's */
	return 0;
fail:
	log_error("could not start the lend bridge",
	          "contract=%" PRId64 " err=%s", h->id,
	          log_quote((char[600]){0}, 600, err));
	lendsup_cleanup(c);
	free(c);
	client_resp_clear(&r);
	return -1;
}

/* Does this node run the data path of h? */
static int lend_wanted(const struct agent *a, const struct held *h)
{
	if (h->kind == EXEC_LEND)
		return a->cfg.lend_listen[0] != 0;
	if (h->kind == EXEC_BORROW)
		return strcmp(a->cfg.lend_borrow_mode, "off") != 0;
	return 0;
}

/* Every round: start the data paths not yet running (at most once a
 * sample each), supervise the running ones and the draining lenders. */
static void lend_tick(struct agent *a)
{
	int64_t now = events_now_ms();
	for (int i = 0; i < a->nheld; i++) {
		struct held *h = &a->held[i];
		if (h->lc) {
			lendsup_poll(h->lc, now);
			continue;
		}
		if (!lend_wanted(a, h) || h->tell || !h->confirmed ||
		    now < h->lend_next_ms || lend_dir_ready(a) < 0)
			continue;
		h->lend_next_ms = now + a->cfg.sample_s * 1000;
		if (h->kind == EXEC_LEND)
			lend_serve(a, h, now);
		else
			lend_borrow(a, h, now);
	}
	for (int i = 0; i < a->ndraining;) {
		struct lendsup_child *c = a->draining[i];
		lendsup_poll(c, now);
		if (c->stopping && c->pid == 0) {
			lendsup_cleanup(c);
			free(c);
			a->draining[i] = a->draining[--a->ndraining];
			continue;
		}
		i++;
	}
}

/* Brings h's lend meter reading up to date. */
static void lend_read(struct held *h)
{
	struct lend_meter_report r;
	if (!h->lc || lendsup_meter(h->lc, &r) < 0)
		return;
	/* both sides report the pages under contract: the lender hosts
	 * them, the borrower has them (its meter's hosted figure), so the
	 * two reports measure the same thing and reconcile */
	if (r.hosted_page_s > h->lend_cum)
		h->lend_cum = r.hosted_page_s;
	h->lend_real = 1;
}

/* A metered period of h, from the lend child's meter once it runs: what
 * its meter counted since the last report, never more than the period can
 * hold (the executor's pages × seconds; the meter file may be a second
 * fresher than the period's end), the rest carried to the next. */
static void lend_adjust(struct held *h, struct meter_period *p)
{
	if (!h)
		return;
	lend_read(h);
	if (!h->lend_real)
		return; /* not up yet: the executor's figure stands */
	int64_t avail = h->lend_cum - h->lend_reported;
	if (avail < 0)
		avail = 0;
	if (avail < p->page_seconds)
		p->page_seconds = avail;
	p->carry_pns = 0;
	h->lend_reported += p->page_seconds;
}

/* h's pages are back: the lender gives its borrower notice and is served
 * until the borrower released or the notice ended; the borrower's bridge
 * moves its pages back, releases and ends (SIGTERM). */
static void lend_finish(struct agent *a, struct held *h)
{
	if (!h->lc)
		return;
	lendsup_poll(h->lc, events_now_ms());
	if (h->kind == EXEC_BORROW) {
		lendsup_stop(h->lc, 10000);
		lend_read(h);
		lendsup_cleanup(h->lc);
		free(h->lc);
	} else {
		lend_read(h);
		lendsup_signal(h->lc, SIGUSR1);
		/* its own deadline is --notice-ms; a little more here */
		h->lc->deadline_ms =
		    events_now_ms() + h->notice_s * 1000 + 5000;
		if (a->ndraining < STRATEGY_MAX_CONTRACTS) {
			a->draining[a->ndraining++] = h->lc;
		} else {
			lendsup_stop(h->lc, 2000);
			lendsup_cleanup(h->lc);
			free(h->lc);
		}
	}
	h->lc = NULL;
}

/* Seller of a contract pending delivery: take the pages, then confirm. The
 * meter starts once the exchange has the delivery, since it counts usage
 * from then on. */
static void deliver(struct agent *a, struct held *h, rx_time_ns t)
{
	rx_pages got = 0;

	if (take_pages(a, h, &got) < 0 || got == 0)
		return;
	/* a lend's server is up and registered before the buyer hears of
	 * the delivery (lend_tick retries when this fails) */
	if (lend_wanted(a, h) && h->kind == EXEC_LEND && !h->lc &&
	    lend_dir_ready(a) == 0)
		lend_serve(a, h, events_now_ms());
	int rc = contract_move(a, h->id, "deliver", "ramex-agent: pages out");
	if (rc < 0)
		return; /* pages stay out; confirmed at the next round */
	if (rc == 0) {
		/* Too late or no longer ours: the contract's next listing
		 * (breached, ended) gives the pages back. */
		h->refused = 1;
		return;
	}
	h->confirmed = 1;
	start_meter(a, h, got, t);
	a->n_deliveries++;
	log_info("delivered", "contract=%" PRId64 " pages=%lld of=%lld kind=%d",
	         h->id, (long long)got, (long long)h->pages, h->kind);
}

/* Gives back up to `pages` of h (all when pages >= held); the period is
 * the contract's last when every page is back. */
static void take_back(struct agent *a, struct held *h, rx_pages pages,
                      rx_time_ns t)
{
	char id[32], err[512];
	const char *why;
	struct meter_period p;

	snprintf(id, sizeof id, "%" PRId64, h->id);
	rx_pages have = exec_held(a->ex, id);
	/* held but nothing moved yet: giving back stops the move */
	if (have >= 0 &&
	    exec_give_back(a->ex, id, pages, err, sizeof err) < 0) {
		log_error("could not give pages back", "contract=%s err=%s", id,
		          log_quote((char[600]){0}, 600, err));
		a->n_errors++;
		return;
	}
	rx_pages left = exec_held(a->ex, id);
	if (left < 0)
		left = 0;
	if (left == 0)
		lend_finish(a, h); /* its meter's last reading, below */
	if (!h->metering)
		return;
	if (left == 0) {
		if (meter_stop(a->meter, id, t, &p, &why) == 0) {
			lend_adjust(h, &p);
			spool_period(a, &p, 0, 1);
		}
		h->metering = 0;
	} else {
		meter_set(a->meter, id, t, left, &why);
	}
}

static int kind_of(const char *delivery, enum strategy_side side)
{
	if (side == STRATEGY_BUY)
		return EXEC_BORROW;
	return delivery && !strcmp(delivery, "lend") ? EXEC_LEND : EXEC_OFFLINE;
}

static void drop_held(struct agent *a, struct held *h)
{
	if (h->lc) {
		lendsup_stop(h->lc, 2000);
		lendsup_cleanup(h->lc);
		free(h->lc);
	}
	*h = a->held[--a->nheld];
}

/* One listed contract. */
static void reconcile_one(struct agent *a, json_t *c, rx_time_ns t)
{
	int64_t id = json_integer_value(json_object_get(c, "id"));
	const char *state = json_string_value(json_object_get(c, "state"));
	const char *market = json_string_value(json_object_get(c, "market"));
	const char *delivery =
	    json_string_value(json_object_get(c, "delivery"));
	int64_t seller = json_integer_value(json_object_get(c, "seller_id"));
	int64_t buyer = json_integer_value(json_object_get(c, "buyer_id"));
	int pending = state && !strcmp(state, "pending_delivery");
	int active = state && !strcmp(state, "active");
	struct held *h = find_held(a, id);

	if (!pending && !active)
		return; /* over: handled as "not seen" */
	if (seller != a->account && buyer != a->account)
		return;
	/* An offline buyer (the operator) receives nothing; a lend buyer
	 * receives once the seller delivered. */
	if (seller != a->account &&
	    (!delivery || strcmp(delivery, "lend") || !active)) {
		if (pending && delivery && !strcmp(delivery, "lend") &&
		    a->npend < STRATEGY_MAX_QUOTES)
			a->pend[a->npend++] = (struct strategy_contract){
			    (uint64_t)id, STRATEGY_SPOT, STRATEGY_BUY,
			    json_integer_value(json_object_get(c, "pages"))};
		return;
	}
	if (!h) {
		if (a->nheld == STRATEGY_MAX_CONTRACTS) {
			log_error("too many contracts to hold; not delivering",
			          "contract=%" PRId64, id);
			return;
		}
		h = &a->held[a->nheld++];
		memset(h, 0, sizeof *h);
		h->id = id;
		h->side = seller == a->account ? STRATEGY_SELL : STRATEGY_BUY;
		h->product = market && !strncmp(market, "perm-", 5)
		                 ? STRATEGY_PERM
		                 : STRATEGY_SPOT;
		h->kind = kind_of(delivery, h->side);
		h->pages = json_integer_value(json_object_get(c, "pages"));
		h->notice_s =
		    json_integer_value(json_object_get(c, "notice_period_s"));
	}
	h->seen = 1;
	if (h->tell)
		return; /* given back; the exchange is told below */
	if (h->side == STRATEGY_SELL && pending && !h->confirmed) {
		if (!h->refused)
			deliver(a, h, t);
	} else if (!h->metering) {
		/* Active and not held here: a buyer's new lend, or our own
		 * contract after a restart (metering resumes from the spool).
		 */
		rx_pages got = 0;
		if (take_pages(a, h, &got) == 0 && got > 0) {
			h->confirmed = 1;
			start_meter(a, h, got, t);
			a->n_deliveries++;
			log_info(h->side == STRATEGY_SELL ? "delivering"
			                                  : "receiving",
			         "contract=%" PRId64 " pages=%lld", id,
			         (long long)got);
		}
	}
}

static int list_contracts(struct agent *a, const char *state, rx_time_ns t)
{
	struct client_resp r;
	char path[128];
	int64_t before = INT64_MAX;

	/* 500 a page, newest first: an agent may hold far more */
	for (;;) {
		snprintf(path, sizeof path,
		         "/v1/contracts?state=%s&limit=500&before=%" PRId64,
		         state, before);
		if (call(a, "GET", path, NULL, NULL, &r) < 0)
			return -1;
		if (r.status != 200) {
			log_warn("could not list contracts",
			         "status=%ld detail=%s", r.status,
			         log_quote((char[300]){0}, 300, r.detail));
			client_resp_clear(&r);
			return -1;
		}
		json_t *c, *items = json_object_get(r.json, "items");
		size_t i, n = json_array_size(items);
		json_array_foreach(items, i, c)
		{
			int64_t id =
			    json_integer_value(json_object_get(c, "id"));
			if (id > 0 && id < before)
				before = id;
			reconcile_one(a, c, t);
		}
		client_resp_clear(&r);
		if (n < 500 || before <= 1)
			return 0;
	}
}

/* Brings local contracts in line with the exchange's: deliver what we
 * sold, receive what we borrowed, give back what is over, and tell the
 * exchange about pages we took back while it could not hear us. */
static void reconcile(struct agent *a, rx_time_ns t)
{
	for (int i = 0; i < a->nheld; i++)
		a->held[i].seen = 0;
	a->npend = 0;
	if (list_contracts(a, "pending_delivery", t) < 0 ||
	    list_contracts(a, "active", t) < 0)
		return; /* without the whole picture, change nothing */
	/* whether a person paused us: read with the contracts, so on every
	 * event (an "automation" event among them) and every poll_s */
	char err[512];
	if (whoami(a, err, sizeof err) < 0)
		log_warn("could not read the automation state", "err=%s",
		         log_quote((char[600]){0}, 600, err));
	a->n_reconciles++;
	a->last_list_ms = events_now_ms();
	for (int i = 0; i < a->nheld;) {
		struct held *h = &a->held[i];
		if (!h->seen) {
			/* recalling, ended or breached: the contract is over
			 * for the pages (a recall's notice is the buyer's
			 * time to move out, not ours to keep delivering). */
			if (!h->tell)
				log_info("contract over", "contract=%" PRId64,
				         h->id);
			take_back(a, h, h->pages, t);
			drop_held(a, h);
			continue;
		}
		if (h->tell &&
		    contract_move(a, h->id, h->tell,
		                  "ramex-agent: pages taken back") >= 0) {
			drop_held(a, h);
			continue;
		}
		i++;
	}
}

/* Takes every page of h back, then tells the exchange (`move`: recall
 * for a sale, end for a borrow). The workload wins: the pages come back
 * whether or not the exchange can be told now. */
static void give_up(struct agent *a, struct held *h, const char *move,
                    const char *why, rx_time_ns t)
{
	if (h->side == STRATEGY_SELL && !h->confirmed) {
		/* A sale still moving (pending delivery): the exchange
		 * recalls only a delivered contract, so deliver what has
		 * moved, then recall it. With nothing out yet the move
		 * stops, and the contract ends at its delivery deadline. */
		char id[32];
		snprintf(id, sizeof id, "%" PRId64, h->id);
		if (!h->refused && exec_held(a->ex, id) > 0)
			deliver(a, h, t);
		if (!h->confirmed) {
			take_back(a, h, h->pages, t);
			h->refused = 1;
			log_warn("gave up a sale before its delivery",
			         "contract=%" PRId64 " why=%s", h->id,
			         log_quote((char[200]){0}, 200, why));
			return;
		}
	}
	take_back(a, h, h->pages, t);
	h->tell = move;
	a->n_recalls++;
	log_warn(!strcmp(move, "recall") ? "recalled a contract"
	                                 : "ended a borrowed contract",
	         "contract=%" PRId64 " pages=%lld why=%s", h->id,
	         (long long)h->pages, log_quote((char[200]){0}, 200, why));
	if (contract_move(a, h->id, move, why) >= 0)
		drop_held(a, h);
}

/* Moves take time (exec_set_rates: the sim at the real path's rates): every
 * sample, the pages moved since are delivered (a sale's first pages), and
 * metered (the meter follows what has moved, so usage is only ever the
 * pages actually out). */
static void moving_tick(struct agent *a, rx_time_ns t)
{
	char err[512];
	const char *why;

	if (exec_advance(a->ex, t, err, sizeof err) < 0) {
		log_error("could not move pages", "err=%s",
		          log_quote((char[600]){0}, 600, err));
		a->n_errors++;
		return;
	}
	for (int i = 0; i < a->nheld; i++) {
		struct held *h = &a->held[i];
		char id[32];
		snprintf(id, sizeof id, "%" PRId64, h->id);
		rx_pages have = exec_held(a->ex, id);
		if (h->tell || have <= 0)
			continue;
		if (h->side == STRATEGY_SELL && !h->confirmed) {
			if (!h->refused && a->account)
				deliver(a, h, t);
		} else if (!h->metering) {
			h->confirmed = 1;
			start_meter(a, h, have, t);
			a->n_deliveries++;
			log_info("receiving", "contract=%" PRId64 " pages=%lld",
			         h->id, (long long)have);
		} else if (meter_pages(a->meter, id) != have) {
			meter_set(a->meter, id, t, have, &why);
			if (exec_moving(a->ex, id) == 0)
				log_info("moved",
				         "contract=%" PRId64
				         " pages=%lld of=%lld",
				         h->id, (long long)have,
				         (long long)h->pages);
		}
	}
}

/* The kernel took offline pages back (OOM): meter the loss. */
static void sync_losses(struct agent *a, rx_time_ns t)
{
	static struct exec_loss lost[EXEC_MAX_CONTRACTS];
	char err[512];
	const char *why;
	int n = exec_sync(a->ex, lost, err, sizeof err);
	for (int i = 0; i < n; i++) {
		rx_pages left = exec_held(a->ex, lost[i].id);
		meter_set(a->meter, lost[i].id, t, left < 0 ? 0 : left, &why);
		log_warn("the kernel took pages back", "contract=%s pages=%lld",
		         lost[i].id, (long long)lost[i].pages);
		/* A contract cannot be delivered in part: the rest comes back
		 * too and the exchange hears of a recall. */
		struct held *h = find_held(a, strtoll(lost[i].id, NULL, 10));
		if (h && h->side == STRATEGY_SELL && !h->tell)
			give_up(a, h, "recall", "the kernel took pages back",
			        t);
	}
}

/* ---- market ---- */

/* A person paused or resumed this node's automation (GET /v1/whoami). */
static void set_paused(struct agent *a, int paused, const char *note)
{
	if (paused == a->paused)
		return;
	a->paused = paused;
	if (paused)
		log_warn("automation paused by a person: delivering and "
		         "metering, not trading",
		         "note=%s", log_quote((char[300]){0}, 300, note));
	else
		log_info("automation resumed", NULL);
}

static void refresh_market(struct agent *a)
{
	struct client_resp r;
	char path[128];

	a->nquotes = 0;
	if (call(a, "GET", "/v1/orders?status=open&limit=200", NULL, NULL,
	         &r) == 0 &&
	    r.status == 200) {
		json_t *o;
		size_t i;
		memset(&a->others, 0, sizeof a->others);
		json_array_foreach(json_object_get(r.json, "items"), i, o)
		{
			const char *m =
			    json_string_value(json_object_get(o, "market"));
			const char *side =
			    json_string_value(json_object_get(o, "side"));
			const char *by =
			    json_string_value(json_object_get(o, "placed_by"));
			if (!m || !side)
				continue;
			if (by && strcmp(by, a->scope)) {
				/* a person's: it stands, we plan around it */
				enum strategy_product p =
				    strncmp(m, "perm-", 5) ? STRATEGY_SPOT
				                           : STRATEGY_PERM;
				rx_pages n = json_integer_value(
				    json_object_get(o, "remaining"));
				if (!strcmp(side, "buy"))
					a->others.buy[p] += n;
				else
					a->others.sell[p] += n;
				continue;
			}
			if (a->nquotes == STRATEGY_MAX_QUOTES)
				continue;
			struct strategy_quote *q = &a->quotes[a->nquotes++];
			q->id = (uint64_t)json_integer_value(
			    json_object_get(o, "id"));
			q->product = strncmp(m, "perm-", 5) ? STRATEGY_SPOT
			                                    : STRATEGY_PERM;
			q->side =
			    strcmp(side, "buy") ? STRATEGY_SELL : STRATEGY_BUY;
			q->pages =
			    json_integer_value(json_object_get(o, "remaining"));
			q->price =
			    json_integer_value(json_object_get(o, "price"));
		}
	}
	client_resp_clear(&r);
	for (int p = 0; p < STRATEGY_NPRODUCTS; p++) {
		memset(&a->top[p], 0, sizeof a->top[p]);
		if (!market_of(a, p)[0] || !a->reachable)
			continue;
		snprintf(path, sizeof path, "/v1/markets/%s/book",
		         market_of(a, p));
		if (call(a, "GET", path, NULL, NULL, &r) == 0 &&
		    r.status == 200) {
			json_t *b =
			    json_array_get(json_object_get(r.json, "bids"), 0);
			json_t *s =
			    json_array_get(json_object_get(r.json, "asks"), 0);
			a->top[p].best_bid =
			    json_integer_value(json_object_get(b, "price"));
			a->top[p].best_ask =
			    json_integer_value(json_object_get(s, "price"));
		}
		client_resp_clear(&r);
	}
}

/* Sends order b under key idem; true when its fate is known (placed or
 * refused), false when it must be sent again with the same key. */
static bool place_order(struct agent *a, json_t *b, const char *idem,
                        const char *why)
{
	struct client_resp r;
	bool known = false;
	if (call(a, "POST", "/v1/orders", b, idem, &r) == 0) {
		known = r.status != 503;
		if (r.status == 201) {
			a->n_orders++;
			log_info(
			    "placed",
			    "side=%s market=%s pages=%lld price=%lld key=%s "
			    "why=%s",
			    json_string_value(json_object_get(b, "side")),
			    json_string_value(json_object_get(b, "market")),
			    (long long)json_integer_value(
				json_object_get(b, "pages")),
			    (long long)json_integer_value(
				json_object_get(b, "price")),
			    idem, log_quote((char[200]){0}, 200, why));
		} else if (known) {
			log_warn("order refused", "status=%ld detail=%s",
			         r.status,
			         log_quote((char[300]){0}, 300, r.detail));
		} else {
			log_warn("order not known to be placed; sending it "
			         "again with the same key",
			         "key=%s detail=%s", idem,
			         log_quote((char[300]){0}, 300, r.detail));
		}
	}
	client_resp_clear(&r);
	return known;
}

/* The order in doubt first: true when there is none (any more). */
static bool settle_pending(struct agent *a)
{
	if (!a->pending)
		return true;
	if (!place_order(a, a->pending, a->pending_key, "retry"))
		return false;
	json_decref(a->pending);
	a->pending = NULL;
	return true;
}

static void act(struct agent *a, const struct strategy_action *x, rx_time_ns t)
{
	struct client_resp r;
	char path[128], idem[64];

	switch (x->kind) {
	case STRATEGY_CANCEL:
		snprintf(path, sizeof path, "/v1/orders/%" PRIu64, x->id);
		/* a cancel lost on its way back is sent again under the
		 * same key the next time the strategy asks for it */
		snprintf(idem, sizeof idem, "agent-%" PRIu64 "-c%" PRIu64,
		         spool_epoch(a->spool), x->id);
		json_t *note = json_pack("{s:s}", "note", x->reason);
		if (call(a, "DELETE", path, note, idem, &r) == 0) {
			a->n_cancels++;
			log_info("cancelled", "order=%" PRIu64 " why=%s", x->id,
			         log_quote((char[200]){0}, 200, x->reason));
		}
		json_decref(note);
		client_resp_clear(&r);
		break;
	case STRATEGY_PLACE: {
		if (!settle_pending(a))
			break;
		snprintf(idem, sizeof idem, "agent-%" PRIu64 "-%" PRIu64,
		         spool_epoch(a->spool), ++a->order_seq);
		json_t *b = json_pack("{s:s,s:s,s:I,s:I,s:s,s:s}", "market",
		                      market_of(a, x->product), "side",
		                      x->side == STRATEGY_SELL ? "sell" : "buy",
		                      "pages", (json_int_t)x->pages, "price",
		                      (json_int_t)x->price, "tif",
		                      x->tif == STRATEGY_IOC ? "ioc" : "gtc",
		                      "client_order_id", idem);
		if (!place_order(a, b, idem, x->reason)) {
			a->pending = b;
			snprintf(a->pending_key, sizeof a->pending_key, "%s",
			         idem);
			break;
		}
		json_decref(b);
		break;
	}
	case STRATEGY_RECALL:
	case STRATEGY_RELEASE: {
		/* Whole contracts: the API recalls and ends contracts, not
		 * parts of them. Pages first, then the exchange. */
		struct held *h = find_held(a, (int64_t)x->id);
		if (!h || h->tell)
			break;
		give_up(a, h, x->kind == STRATEGY_RECALL ? "recall" : "end",
		        x->reason, t);
		break;
	}
	}
}

static void decide(struct agent *a, rx_time_ns t, int known)
{
	static struct strategy_action acts[STRATEGY_MAX_ACTIONS];
	static struct strategy_contract ks[STRATEGY_MAX_CONTRACTS];
	const char *why;
	int nk = 0;

	for (int i = 0; i < a->nheld; i++) {
		char id[32];
		snprintf(id, sizeof id, "%" PRId64, a->held[i].id);
		/* pages still moving are the contract's too: not to sell
		 * again */
		rx_pages p = exec_held(a->ex, id);
		if (p >= 0)
			p += exec_moving(a->ex, id);
		if (p <= 0)
			continue;
		ks[nk++] = (struct strategy_contract){(uint64_t)a->held[i].id,
		                                      a->held[i].product,
		                                      a->held[i].side, p};
	}
	for (int i = 0; i < a->npend && nk < STRATEGY_MAX_CONTRACTS; i++)
		if (a->pend[i].pages > 0 &&
		    !find_held(a, (int64_t)a->pend[i].id))
			ks[nk++] = a->pend[i];
	struct strategy_input in = {.est = &a->e,
	                            .total = a->managed,
	                            .quotes = a->quotes,
	                            .nquotes = a->nquotes,
	                            .others = a->others,
	                            .contracts = ks,
	                            .ncontracts = nk};
	memcpy(in.top, a->top, sizeof in.top);
	int n = strategy_decide(&a->cfg.strat, &in, acts, &a->view, &why);
	if (n < 0) {
		log_error("strategy refused its input", "why=%s",
		          log_quote((char[300]){0}, 300, why));
		return;
	}
	if (!known)
		return; /* the view (need) is up to date; acting waits until
		         * the exchange has said who this node is */
	/* an order in doubt is settled before any new one goes out */
	settle_pending(a);
	if (a->paused) {
		/* A person took over: withdraw what we placed, place nothing.
		 * Recalls and releases still run: the workload comes first. */
		for (int i = 0; i < a->nquotes && a->reachable; i++)
			act(a,
			    &(struct strategy_action){
			        .kind = STRATEGY_CANCEL,
			        .id = a->quotes[i].id,
			        .reason = "automation paused by a person"},
			    t);
		a->nquotes = 0;
	}
	for (int i = 0; i < n; i++) {
		/* Without the exchange only the local half of a recall can
		 * run; orders wait for the next round. */
		if ((!a->reachable || a->paused) &&
		    (acts[i].kind == STRATEGY_PLACE ||
		     acts[i].kind == STRATEGY_CANCEL))
			continue;
		act(a, &acts[i], t);
	}
}

/* ---- status ---- */

static rx_pages held_of(const struct agent *a, enum exec_kind k)
{
	rx_pages n = 0;
	if (!a->ex)
		return 0;
	for (int i = 0; i < exec_count(a->ex); i++)
		if (exec_kind_of(a->ex, i) == k)
			n += exec_held(a->ex, exec_id(a->ex, i));
	return n;
}

static void write_status(struct agent *a)
{
	char tmp[CONFIG_STR + 8];
	FILE *f;

	if (!a->cfg.status_file[0])
		return;
	snprintf(tmp, sizeof tmp, "%s.tmp", a->cfg.status_file);
	if (!a->spool || !(f = fopen(tmp, "w")))
		return;
	static struct spool_report none[1];
	fprintf(f,
	        "# ramex-agent status (Prometheus text format)\n"
	        "ramex_agent_wss_pages %lld\n"
	        "ramex_agent_wss_err_pages %lld\n"
	        "ramex_agent_wss_source{source=\"%s\"} 1\n"
	        "ramex_agent_resident_pages %lld\n"
	        "ramex_agent_dydx_us_per_page_year %lld\n"
	        "ramex_agent_probe_dydx_us_per_page_year %lld\n"
	        "ramex_agent_probes_total %lld\n"
	        "ramex_agent_probed_pages_total %lld\n"
	        "ramex_agent_stall_ppm %lld\n"
	        "ramex_agent_pressure %d\n"
	        "ramex_agent_stable %d\n"
	        "ramex_agent_need_pages %lld\n"
	        "ramex_agent_sold_pages %lld\n"
	        "ramex_agent_borrowed_pages %lld\n"
	        "ramex_agent_spare_pages %lld\n"
	        "ramex_agent_ask_spot %lld\n"
	        "ramex_agent_ask_perm %lld\n"
	        "ramex_agent_bid %lld\n"
	        "ramex_agent_contracts %d\n"
	        "ramex_agent_exchange_up %d\n"
	        "ramex_agent_samples_total %lld\n"
	        "ramex_agent_orders_total %lld\n"
	        "ramex_agent_cancels_total %lld\n"
	        "ramex_agent_deliveries_total %lld\n"
	        "ramex_agent_recalls_total %lld\n"
	        "ramex_agent_reports_total %lld\n"
	        "ramex_agent_reports_acked_total %lld\n"
	        "ramex_agent_reports_pending %d\n"
	        "ramex_agent_reports_set_aside %d\n"
	        "ramex_agent_usage_batches_total %lld\n"
	        "ramex_agent_reconciles_total %lld\n"
	        "ramex_agent_events_up %d\n"
	        "ramex_agent_events_total %lld\n"
	        "ramex_agent_event_connects_total %lld\n"
	        "ramex_agent_offline_pages %lld\n"
	        "ramex_agent_lent_pages %lld\n"
	        "ramex_agent_borrowed_held_pages %lld\n"
	        "ramex_agent_offline_moving_pages %lld\n"
	        "ramex_agent_lent_moving_pages %lld\n"
	        "ramex_agent_borrowed_moving_pages %lld\n"
	        "ramex_agent_errors_total %lld\n",
	        (long long)a->e.wss, (long long)a->e.wss_err,
	        wsest_source_name(a->e.source), (long long)a->e.resident,
	        (long long)a->e.dydx, (long long)a->e.probe_dydx,
	        (long long)a->n_probes, (long long)a->probed_total,
	        (long long)a->e.stall_ppm, a->e.pressure, a->e.stable,
	        (long long)a->view.need, (long long)a->view.sold,
	        (long long)a->view.borrowed, (long long)a->view.spare,
	        (long long)a->view.ask[STRATEGY_SPOT],
	        (long long)a->view.ask[STRATEGY_PERM], (long long)a->view.bid,
	        exec_count(a->ex), a->reachable, (long long)a->n_samples,
	        (long long)a->n_orders, (long long)a->n_cancels,
	        (long long)a->n_deliveries, (long long)a->n_recalls,
	        (long long)a->n_reports, (long long)a->n_acked,
	        spool_pending(a->spool, none, 0),
	        spool_set_aside_count(a->spool), (long long)a->n_batches,
	        (long long)a->n_reconciles, a->ev ? events_up(a->ev) : 0,
	        (long long)(a->ev ? events_received(a->ev) : 0),
	        (long long)(a->ev ? events_connects(a->ev) : 0),
	        (long long)held_of(a, EXEC_OFFLINE),
	        (long long)held_of(a, EXEC_LEND),
	        (long long)held_of(a, EXEC_BORROW),
	        (long long)exec_moving_total(a->ex, EXEC_OFFLINE),
	        (long long)exec_moving_total(a->ex, EXEC_LEND),
	        (long long)exec_moving_total(a->ex, EXEC_BORROW),
	        (long long)a->n_errors);
	/* a person paused the automation; what people's orders hold open */
	fprintf(f,
	        "ramex_agent_paused %d\n"
	        "ramex_agent_others_buy_pages %lld\n"
	        "ramex_agent_others_sell_pages %lld\n",
	        a->paused, (long long)a->view.others_buy,
	        (long long)a->view.others_sell);
	for (int i = 0; i < meter_count(a->meter); i++)
		fprintf(
		    f, "ramex_agent_contract_pages{contract=\"%s\"} %lld\n",
		    meter_id(a->meter, i),
		    (long long)meter_pages(a->meter, meter_id(a->meter, i)));
	/* lend children running now, and started in all (restarts show as
	 * the second growing faster than the contracts) */
	int lend_up = 0, lend_starts = 0;
	for (int i = 0; i < a->nheld; i++)
		if (a->held[i].lc) {
			lend_up += a->held[i].lc->pid > 0;
			lend_starts += a->held[i].lc->starts;
		}
	for (int i = 0; i < a->ndraining; i++) {
		lend_up += a->draining[i]->pid > 0;
		lend_starts += a->draining[i]->starts;
	}
	fprintf(f,
	        "ramex_agent_lend_children %d\n"
	        "ramex_agent_lend_child_starts %d\n",
	        lend_up, lend_starts);
	/* What was metered and spooled per contract: the figure the
	 * exchange's counted usage must equal once the spool is sent. */
	for (int i = 0; i < a->nheld; i++) {
		struct spool_report last;
		char id[32];
		snprintf(id, sizeof id, "%" PRId64, a->held[i].id);
		if (spool_last(a->spool, id, &last) == 0)
			fprintf(f,
			        "ramex_agent_contract_page_seconds{contract="
			        "\"%s\"} %lld\n",
			        id, (long long)last.cum_page_seconds);
	}
	if (fclose(f) == 0)
		rename(tmp, a->cfg.status_file);
}

/* ---- start and stop ---- */

/* Called before whoami: the principal an exchange without a "scope" in
 * its whoami records (0002_markets_orders.sql: node:KEY). */
static void default_scope(struct agent *a)
{
	snprintf(a->scope, sizeof a->scope, "node:%.40s", a->cfg.key_id);
}

/* Learns this node's account. 0 when known; -1 with err when the
 * exchange refused the key (a configuration error: stop); 0 with the
 * account still unknown when the exchange cannot be reached (ask again). */
static int whoami(struct agent *a, char *err, size_t errlen)
{
	struct client_resp r;

	if (call(a, "GET", "/v1/whoami", NULL, NULL, &r) < 0)
		return 0;
	if (r.status != 200) {
		snprintf(err, errlen,
		         "the exchange refused this node's key (%ld %s): check "
		         "key_id and secret_file",
		         r.status, r.detail);
		client_resp_clear(&r);
		return -1;
	}
	a->account = json_integer_value(json_object_get(r.json, "account_id"));
	const char *scope =
	    json_string_value(json_object_get(r.json, "scope"));
	/* an exchange without it: our key is our principal (default_scope) */
	if (scope)
		snprintf(a->scope, sizeof a->scope, "%s", scope);
	set_paused(a, json_is_true(json_object_get(r.json, "trading_paused")),
	           json_string_value(
	               json_object_get(r.json, "trading_pause_note")));
	client_resp_clear(&r);
	return 0;
}

/* The spot market's order limits, so that no quote is one the exchange
 * refuses. Unknown (exchange down) means no limit until the next start. */
static void learn_market(struct agent *a)
{
	struct client_resp r;
	char path[128];

	snprintf(path, sizeof path, "/v1/markets/%s", a->cfg.strat.spot_market);
	if (call(a, "GET", path, NULL, NULL, &r) < 0)
		return;
	if (r.status == 200) {
		json_t *m = json_object_get(r.json, "market");
		if (!m)
			m = r.json;
		a->cfg.strat.max_order =
		    json_integer_value(json_object_get(m, "max_pages"));
	} else {
		log_warn("could not read the spot market",
		         "market=%s status=%ld", a->cfg.strat.spot_market,
		         r.status);
	}
	client_resp_clear(&r);
}

/* MGLRU as the working-set source: switched on if allowed, the cgroup's
 * path as lru_gen prints it found, and one read that parses. Any failure is
 * logged and leaves the other sources. */
static void mglru_start(struct agent *a)
{
	char err[512], mounts[16384];
	int on = mglru_enable(MGLRU_ENABLED_FILE, a->cfg.mglru_enable, err,
	                      sizeof err);
	if (on <= 0)
		goto off;
	if (!strcmp(a->cfg.backend, "cgroup")) {
		if (sample_read_file("/proc/mounts", mounts, sizeof mounts, err,
		                     sizeof err) < 0)
			goto off;
		if (mglru_memcg_path(mounts, a->cfg.cgroup, a->memcg,
		                     sizeof a->memcg) < 0) {
			snprintf(err, sizeof err,
			         "%s is under no cgroup2 mount in /proc/mounts",
			         a->cfg.cgroup);
			goto off;
		}
	}
	a->mglru_buf = malloc(AGENT_LRU_GEN_MAX);
	a->mg = malloc(sizeof *a->mg);
	if (!a->mglru_buf || !a->mg) {
		snprintf(err, sizeof err, "out of memory");
		goto off;
	}
	if (sample_read_file(a->cfg.mglru_file, a->mglru_buf, AGENT_LRU_GEN_MAX,
	                     err, sizeof err) < 0 ||
	    mglru_parse(a->mglru_buf, a->memcg[0] ? a->memcg : NULL, 1000,
	                a->mg, err, sizeof err) < 0)
		goto off;
	a->mglru_on = 1;
	log_info("MGLRU generations found", "file=%s memcg=%s lruvecs=%d",
	         a->cfg.mglru_file, a->memcg[0] ? a->memcg : "(all)",
	         a->mg->nlv);
	return;
off:
	log_info("no MGLRU working-set source", "why=%s",
	         log_quote((char[600]){0}, 600, err));
}

static int start(struct agent *a, char *err, size_t errlen)
{
	char secret[256];
	const char *why;

	if (client_read_secret(a->cfg.secret_file, secret, sizeof secret, err,
	                       errlen) < 0)
		return -1;
	a->cl = client_new(a->cfg.exchange_url, a->cfg.key_id, secret,
	                   a->cfg.ca_file, err, errlen);
	memset(secret, 0, sizeof secret);
	if (!a->cl)
		return -1;
	default_scope(a);
	if (!strcmp(a->cfg.backend, "sim")) {
		a->ex = exec_sim_new(a->cfg.sim_total, a->cfg.sim_usage);
		/* the sim moves at the real path's rates (sim_*_rate) */
		int64_t rate[EXEC_NKINDS] = {a->cfg.sim_offline_rate,
		                             a->cfg.sim_lend_rate,
		                             a->cfg.sim_lend_rate};
		if (a->ex) {
			exec_set_rates(a->ex, rate);
			exec_sim_set_online_rate(a->ex, a->cfg.sim_online_rate);
		}
	}
	else if (!strcmp(a->cfg.backend, "cgroup"))
		a->ex = exec_cgroup_new(a->cfg.cgroup, a->cfg.cgroup_pages, err,
		                        errlen);
	else
		a->ex = exec_kmod_new(a->cfg.kmod_device, err, errlen);
	if (!a->ex)
		return -1;
	if (a->ex && !strcmp(a->cfg.backend, "sim") &&
	    strcmp(a->cfg.sim_profile, "steady")) {
		struct simload_config l;
		if (config_sim_load(&a->cfg, &l, err, errlen) < 0 ||
		    exec_sim_set_load(a->ex, &l, err, errlen) < 0)
			return -1;
	}
	if (!(a->est = wsest_new(&a->cfg.est, &why))) {
		snprintf(err, errlen, "estimator: %s", why);
		return -1;
	}
	if (!(a->meter = meter_new())) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	a->spool = spool_open(a->cfg.spool, (uint64_t)time(NULL), err, errlen);
	if (!a->spool)
		return -1;
	if (spool_dropped(a->spool))
		log_warn("dropped the torn tail of the spool (written after "
		         "its last fsync: unsent reports are metered again, "
		         "lost acks cost a resend)",
		         "bytes=%zu records=%d", spool_dropped(a->spool),
		         spool_dropped_records(a->spool));
	a->managed = a->cfg.managed_pages;
	if (!a->managed && !strcmp(a->cfg.backend, "sim"))
		a->managed = a->cfg.sim_total;
	if (!a->managed && !strcmp(a->cfg.backend, "cgroup"))
		a->managed = a->cfg.cgroup_pages;
	if (!a->managed) {
		struct wsest_sample s;
		struct sample_mem m;
		struct sample_source src = {"", NULL};
		if (sample_take(&src, 1, &s, &m, err, errlen) < 0)
			return -1;
		a->managed = m.total;
	}
	if (strcmp(a->cfg.backend, "sim") && a->cfg.mglru)
		mglru_start(a);
	if (!strcmp(a->cfg.backend, "cgroup") && a->cfg.probe) {
		char rp[CONFIG_STR + 32];
		snprintf(rp, sizeof rp, "%s/memory.reclaim", a->cfg.cgroup);
		a->probe_on = access(rp, W_OK) == 0;
		if (a->probe_on)
			log_info("probing through memory.reclaim",
			         "ceiling_ppm=%lld step_pct=%d",
			         (long long)a->cfg.prb.ceiling_ppm,
			         a->cfg.prb.step_pct);
		else
			log_info("no probing",
			         "why=%s is not writable "
			         "(kernel older than 5.19?)",
			         rp);
	}
	if (strcmp(a->cfg.backend, "sim") && a->cfg.idle_sampling &&
	    !a->mglru_on) {
		char e2[512];
		a->idle = sample_idle_new(
		    SAMPLE_PAGE_IDLE_BITMAP, 0, (uint64_t)a->managed * 5 / 4,
		    (uint64_t)a->cfg.idle_stride, e2, sizeof e2);
		if (!a->idle)
			log_info("no idle-page sampling", "why=%s",
			         log_quote((char[600]){0}, 600, e2));
	}
	a->reachable = 1;
	if (whoami(a, err, errlen) < 0)
		return -1;
	if (pipe(wake_pipe) < 0 ||
	    fcntl(wake_pipe[0], F_SETFL, O_NONBLOCK) < 0 ||
	    fcntl(wake_pipe[1], F_SETFL, O_NONBLOCK) < 0) {
		snprintf(err, errlen, "could not make the wake-up pipe: %s",
		         strerror(errno));
		return -1;
	}
	if (a->cfg.events && !(a->ev = events_new(a->cl, wake_pipe[0]))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	learn_market(a);
	log_info("started",
	         "backend=%s managed_pages=%lld account=%lld "
	         "epoch=%" PRIu64 " pending_reports=%d events=%d",
	         exec_name(a->ex), (long long)a->managed, (long long)a->account,
	         spool_epoch(a->spool), spool_pending(a->spool, NULL, 0),
	         a->cfg.events);
	return 0;
}

static void shutdown_agent(struct agent *a)
{
	char err[512];
	rx_time_ns t = now_ns();

	/* Stop selling, then give every page back before anything else. */
	for (int i = 0; i < a->nquotes && a->reachable; i++) {
		struct strategy_action x = {.kind = STRATEGY_CANCEL,
		                            .id = a->quotes[i].id,
		                            .reason = "shutting down"};
		act(a, &x, t);
	}
	if (a->ex && exec_release_all(a->ex, err, sizeof err) < 0)
		log_error("could not give every page back", "err=%s",
		          log_quote((char[600]){0}, 600, err));
	else if (a->ex)
		log_info("gave every page back", NULL);
	if (a->meter && a->spool) {
		/* The pages are back: each contract's metering ends here. */
		for (int i = 0; i < a->nheld; i++)
			take_back(a, &a->held[i], a->held[i].pages, t);
		/* Spot sales are recalled and borrows ended, so that the
		 * exchange does not hold us to pages we no longer deliver.
		 * A perm contract stays: recalling it would breach it, and
		 * the agent started again delivers it once more. */
		for (int i = 0; i < a->nheld && a->reachable; i++) {
			struct held *h = &a->held[i];
			const char *move = h->tell;
			if (!move && h->confirmed &&
			    h->product == STRATEGY_SPOT)
				move =
				    h->side == STRATEGY_SELL ? "recall" : "end";
			if (move)
				contract_move(a, h->id, move,
				              "ramex-agent: shutting down");
			else if (h->product == STRATEGY_PERM)
				log_warn(
				    "perm contract not delivered while the "
				    "agent is stopped",
				    "contract=%" PRId64, h->id);
		}
		send_reports(a);
	}
	/* lenders still giving notice: the agent that supervises them goes */
	for (int i = 0; i < a->ndraining; i++) {
		lendsup_stop(a->draining[i], 2000);
		lendsup_cleanup(a->draining[i]);
		free(a->draining[i]);
	}
	a->ndraining = 0;
	write_status(a);
	log_info("stopped", "reports_pending=%d",
	         a->spool ? spool_pending(a->spool, NULL, 0) : 0);
}

int main(int argc, char **argv)
{
	static struct agent a;
	char err[512];
	struct sigaction sa;

	int rc = config_args(&a.cfg, argc, argv, err, sizeof err);
	if (rc == 1) {
		config_help(stdout);
		return 0;
	}
	if (rc < 0 || config_check(&a.cfg, err, sizeof err) < 0) {
		fprintf(stderr, "ramex-agent: %s\n", err);
		return 2;
	}
	log_init("agent", log_level_parse(a.cfg.log_level));
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	/* the lend programs are installed beside the agent by default */
	if (a.cfg.lend_bin_dir[0]) {
		snprintf(a.lend_bin, sizeof a.lend_bin, "%s",
		         a.cfg.lend_bin_dir);
	} else {
		char self[LENDSUP_PATH];
		ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
		if (n > 0) {
			self[n] = '\0';
			snprintf(a.lend_bin, sizeof a.lend_bin, "%s",
			         dirname(self));
		} else {
			snprintf(a.lend_bin, sizeof a.lend_bin, ".");
		}
	}
	if (start(&a, err, sizeof err) < 0) {
		log_error("could not start", "err=%s",
		          log_quote((char[600]){0}, 600, err));
		shutdown_agent(&a);
		return 1;
	}
	int64_t next = events_now_ms(), last_report = next;
	while (!stop) {
		rx_time_ns t = now_ns();
		struct wsest_sample s;
		take_sample(&a, t, &s);
		if (!a.account && whoami(&a, err, sizeof err) < 0)
			log_error("the exchange refused this node", "err=%s",
			          log_quote((char[600]){0}, 600, err));
		int known = a.account != 0;
		/* With the stream up, events say when to look; the listing
		 * every poll_s is the safety net for a lost event. */
		if (known &&
		    (!a.ev || !events_up(a.ev) ||
		     events_now_ms() - a.last_list_ms >= a.cfg.poll_s * 1000))
			reconcile(&a, t);
		moving_tick(&a, t);
		sync_losses(&a, t);
		if (known)
			lend_tick(&a);
		if (known && a.reachable)
			refresh_market(&a);
		/* The view (need, spare) is the node's own: kept current,
		 * and in the status file, even before the exchange answers. */
		decide(&a, t, known);
		probe_tick(&a);
		if (events_now_ms() - last_report >= a.cfg.report_s * 1000) {
			cut_all(&a, now_ns());
			last_report =
			    events_now_ms(); /* no burst after a stall */
		}
		send_reports(&a);
		write_status(&a);
		next += a.cfg.sample_s * 1000;
		if (next < events_now_ms())
			next =
			    events_now_ms(); /* fell behind: do not catch up */
		while (!stop && events_now_ms() < next) {
			int n = 0;
			if (a.ev) {
				n = events_wait(a.ev, next);
			} else {
				struct timespec ts = {0, 0};
				int64_t left = next - events_now_ms();
				ts.tv_sec = left / 1000;
				ts.tv_nsec = (left % 1000) * 1000000;
				nanosleep(&ts, NULL);
			}
			if (n > 0 && !stop && known) {
				reconcile(&a, now_ns());
				send_reports(&a);
				write_status(&a);
			}
		}
	}
	shutdown_agent(&a);
	events_free(a.ev);
	json_decref(a.pending);
	client_free(a.cl);
	exec_close(a.ex);
	wsest_free(a.est);
	meter_free(a.meter);
	spool_close(a.spool);
	sample_idle_free(a.idle);
	free(a.mglru_buf);
	free(a.mg);
	return 0;
}
