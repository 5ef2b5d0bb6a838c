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
 *
 * This file owns the process: flags and settings, start (client, executor,
 * estimator, spool, event stream), the round, signals and shutdown. Each
 * concern of a round is a module of its own (agent.h lists them).
 */
#include "node-agent/agent.h"

#include "common/clock.h"
#include "common/log.h"
#include "node-agent/agent_contract.h"
#include "node-agent/agent_lend.h"
#include "node-agent/agent_market.h"
#include "node-agent/agent_report.h"
#include "node-agent/agent_sample.h"
#include "node-agent/agent_status.h"
#include "node-agent/core/simload.h"
#include "node-agent/http1.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop;  /* signals received, up to 2 */
static int wake_pipe[2] = {-1, -1}; /* the signal handler wakes the wait */

static void on_signal(int sig)
{
	(void)sig;
	if (stop < 2)
		stop++; /* the second one hurries the shutdown */
	if (wake_pipe[1] >= 0) {
		int saved = errno;
		ssize_t w = write(wake_pipe[1], "x", 1);
		(void)w;
		errno = saved;
	}
}

int agent_call(struct agent *a, const char *method, const char *path,
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

/* ---- start and stop ---- */

/* Called before whoami: the principal an exchange without a "scope" in
 * its whoami records (0002_markets_orders.sql: node:KEY). */
static void default_scope(struct agent *a)
{
	snprintf(a->scope, sizeof a->scope, "node:%.40s", a->cfg.key_id);
}

/* Learns this node's account. 0 when known; -1 with err when the
 * exchange refused the key (401, 403: a configuration error, stop); 0
 * with the account still unknown when the exchange cannot be reached, or
 * answers something else (a 5xx while its database is away, a proxy's
 * page, an answer that names no account): said in the log, once until
 * it changes, and asked again. */
int agent_whoami(struct agent *a, char *err, size_t errlen)
{
	struct client_resp r;

	if (agent_call(a, "GET", "/v1/whoami", NULL, NULL, &r) < 0)
		return 0;
	if (r.status == 401 || r.status == 403) {
		snprintf(err, errlen,
		         "the exchange refused this node's key (%ld %s): check "
		         "key_id and secret_file",
		         r.status, r.detail);
		client_resp_clear(&r);
		return -1;
	}
	json_t *id = json_object_get(r.json, "account_id");
	if (r.status != 200 || !json_is_integer(id) ||
	    json_integer_value(id) <= 0) {
		if (a->whoami_bad != r.status)
			log_warn("the exchange did not say who this node is; "
			         "asking again",
			         "status=%ld detail=%s hint=%s", r.status,
			         log_quote((char[300]){0}, 300, r.detail),
			         log_quote((char[200]){0}, 200,
			                   r.status == 200 || r.status == 404
			                       ? "is exchange_url ramexd's "
			                         "address?"
			                       : "the exchange is failing"));
		a->whoami_bad = r.status;
		client_resp_clear(&r);
		return 0;
	}
	a->whoami_bad = 0;
	a->account = json_integer_value(id);
	const char *scope = json_string_value(json_object_get(r.json, "scope"));
	/* an exchange without it: our key is our principal (default_scope) */
	if (scope)
		snprintf(a->scope, sizeof a->scope, "%s", scope);
	agent_market_set_paused(
	    a, json_is_true(json_object_get(r.json, "trading_paused")),
	    json_string_value(json_object_get(r.json, "trading_pause_note")));
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
	if (agent_call(a, "GET", path, NULL, NULL, &r) < 0)
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
	} else if (!strcmp(a->cfg.backend, "cgroup"))
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
	/* reports_total counts the reports this run takes charge of: those
	 * an earlier run left pending are sent (and acked) by this one */
	a->n_reports = spool_pending(a->spool, NULL, 0);
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
		struct sample_source src = {"", NULL, 0};
		if (sample_take(&src, 1, &s, &m, err, errlen) < 0)
			return -1;
		a->managed = m.total;
	}
	if (strcmp(a->cfg.backend, "sim") && a->cfg.mglru)
		agent_sample_mglru_start(a);
	agent_sample_probe_start(a);
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
	if (agent_whoami(a, err, errlen) < 0)
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
	rx_time_ns t = clock_wall_ns();

	/* Stop selling, then give every page back before anything else. */
	for (int i = 0; i < a->nquotes && a->reachable; i++) {
		struct strategy_action x = {.kind = STRATEGY_CANCEL,
		                            .id = a->quotes[i].id,
		                            .reason = "shutting down"};
		agent_market_act(a, &x, t);
	}
	if (a->ex && exec_release_all(a->ex, err, sizeof err) < 0)
		log_error("could not give every page back", "err=%s",
		          log_quote((char[600]){0}, 600, err));
	else if (a->ex)
		log_info("gave every page back", NULL);
	if (a->meter && a->spool) {
		/* The pages are back: each contract's metering ends here. */
		for (int i = 0; i < a->nheld; i++)
			agent_contract_take_back(a, &a->held[i],
			                         a->held[i].pages, t);
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
				agent_contract_move(
				    a, h->id, move,
				    "ramex-agent: shutting down");
			else if (h->product == STRATEGY_PERM)
				log_warn(
				    "perm contract not delivered while the "
				    "agent is stopped",
				    "contract=%" PRId64, h->id);
		}
		agent_report_send(a);
	}
	/* Lenders giving notice serve their borrowers until they release,
	 * and bridges move their pages back: each ends on its own within the
	 * notice. Stopping one now would lose a borrower's pages (or ours),
	 * so the agent waits, unless told again. */
	int n = agent_lend_draining(a, clock_wall_ns());
	if (n > 0) {
		log_info("waiting for lend children to finish",
		         "children=%d hint=\"each ends once its pages are "
		         "released, at most at the end of its notice; signal "
		         "again to stop them now (pages still on a lender are "
		         "then lost)\"",
		         n);
		agent_status_write(a);
		while (stop < 2 &&
		       agent_lend_draining(a, clock_wall_ns()) > 0) {
			struct timespec ts = {0, 50 * 1000000L};
			nanosleep(&ts, NULL);
		}
		if (a->ndraining > 0)
			log_warn("stopping lend children before they finished",
			         "children=%d", a->ndraining);
	}
	agent_lend_stop_draining(a, clock_wall_ns());
	/* the last reports of the contracts that drained, while the
	 * exchange may still answer (else they go at the next start) */
	if (a->spool && a->reachable)
		agent_report_send(a);
	agent_status_write(a);
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
	/* a URL the client cannot use is a setting's fault, as any other:
	 * exit 2 before anything starts (not 1, as a failure at work) */
	if (rc < 0 || config_check(&a.cfg, err, sizeof err) < 0 ||
	    http1_url_check(a.cfg.exchange_url, err, sizeof err) < 0) {
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
	int64_t next = clock_mono_ms(), last_report = next;
	while (!stop) {
		rx_time_ns t = clock_wall_ns();
		struct wsest_sample s;
		agent_sample_take(&a, t, &s);
		if (!a.account && agent_whoami(&a, err, sizeof err) < 0)
			log_error("the exchange refused this node", "err=%s",
			          log_quote((char[600]){0}, 600, err));
		int known = a.account != 0;
		/* With the stream up, events say when to look; the listing
		 * every poll_s is the safety net for a lost event. */
		if (known &&
		    (!a.ev || !events_up(a.ev) ||
		     clock_mono_ms() - a.last_list_ms >= a.cfg.poll_s * 1000))
			agent_contract_reconcile(&a, t);
		agent_contract_moving_tick(&a, t);
		agent_contract_sync_losses(&a, t);
		if (known)
			agent_lend_tick(&a, t);
		if (known && a.reachable)
			agent_market_refresh(&a);
		/* The view (need, spare) is the node's own: kept current,
		 * and in the status file, even before the exchange answers. */
		agent_market_decide(&a, t, known);
		agent_sample_probe(&a);
		if (clock_mono_ms() - last_report >= a.cfg.report_s * 1000) {
			agent_report_cut_all(&a, clock_wall_ns());
			last_report =
			    clock_mono_ms(); /* no burst after a stall */
		}
		agent_report_send(&a);
		agent_status_write(&a);
		next += a.cfg.sample_s * 1000;
		if (next < clock_mono_ms())
			next =
			    clock_mono_ms(); /* fell behind: do not catch up */
		while (!stop && clock_mono_ms() < next) {
			int n = 0;
			if (a.ev) {
				n = events_wait(a.ev, next);
			} else {
				struct timespec ts = {0, 0};
				int64_t left = next - clock_mono_ms();
				ts.tv_sec = left / 1000;
				ts.tv_nsec = (left % 1000) * 1000000;
				nanosleep(&ts, NULL);
			}
			if (n > 0 && !stop && known) {
				agent_contract_reconcile(&a, clock_wall_ns());
				agent_report_send(&a);
				agent_status_write(&a);
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
	free(a.mg_probe);
	return 0;
}
