/*
 * agent_lend.c — see agent_lend.h.
 */
#include "node-agent/agent_lend.h"

#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "node-agent/agent_contract.h"
#include "node-agent/agent_report.h"
#include "node-agent/events.h"
#include "node-agent/exec.h"
#include "node-agent/lend/lend_bridge.h" /* LEND_EXIT_LOST */

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* A child named `name` for h, its contract secret written; NULL with
 * err. */
static struct lendsup_child *lend_child(struct agent *a, struct held *h,
                                        const char *name, const char *secret,
                                        char *err, size_t errlen)
{
	struct lendsup_child *c = calloc(1, sizeof *c);
	if (!c) {
		err_set(err, errlen, "out of memory");
		return NULL;
	}
	lendsup_init(c, a->lend_dir, name, h->id);
	if (lendsup_write_secret(c, secret, err, errlen) < 0) {
		lendsup_cleanup(c);
		free(c);
		return NULL;
	}
	return c;
}

/* A child that never ran (NULL: none). */
static void lend_child_free(struct lendsup_child *c)
{
	if (!c)
		return;
	lendsup_cleanup(c);
	free(c);
}

/* The levers against slow wakeups, as the agent's settings say, for a
 * child whose process is on the pages' way (lend_awake.h, lend_qos.h). */
static void wakeup_args(const struct agent *a, struct lendsup_child *c)
{
	lendsup_arg(c, "--keep-awake");
	lendsup_arg(c, "%lld", (long long)a->cfg.lend_keep_awake);
	lendsup_arg(c, "--idle-poll");
	lendsup_arg(c, "%d", a->cfg.lend_idle_poll ? 1 : 0);
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
	int rc = agent_call(a, "POST", path, b, NULL, &r);
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
	struct lendsup_child *c =
	    lend_child(a, h, "lend-server", secret, err, sizeof err);
	if (!c)
		goto fail;
	/* if the agent dies, its server gives notice (as on a recall)
	 * rather than stopping: a borrower's pages are not lost with it */
	c->death_signal = SIGUSR1;
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
	wakeup_args(a, c);
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
	lend_child_free(c);
	client_resp_clear(&r);
	return -1;
}

/* The device a lend child attaches (its --attach argument), or NULL. */
static const char *child_device(const struct lendsup_child *c)
{
	for (int i = 0; c && i + 1 < c->argc; i++)
		if (!strcmp(c->argv_buf[i], "--attach"))
			return c->argv_buf[i + 1];
	return NULL;
}

/* Is dev the device of one of our bridges, running or moving pages back? */
static int device_ours(const struct agent *a, const char *dev)
{
	const char *d;
	for (int i = 0; i < a->nheld; i++)
		if ((d = child_device(a->held[i].lc)) && !strcmp(d, dev))
			return 1;
	for (int i = 0; i < a->ndraining; i++)
		if ((d = child_device(a->draining[i].lc)) && !strcmp(d, dev))
			return 1;
	return 0;
}

/* The NBD device for a new bridge: lend_nbd_device, or the next one after
 * it (/dev/nbd1, /dev/nbd2, ...) that none of our bridges holds and the
 * kernel has connected to nobody (/sys/block/nbdN/pid exists while
 * connected). Every contract needs a device of its own: with one for
 * all, a second contract's bridge found /dev/nbd0 busy and was restarted
 * for as long as the contract ran. 0, or -1 with err. */
static int pick_device(const struct agent *a, char *dev, size_t len, char *err,
                       size_t errlen)
{
	const char *first = a->cfg.lend_nbd_device;
	size_t n = strlen(first);
	while (n > 0 && first[n - 1] >= '0' && first[n - 1] <= '9')
		n--;
	if (!first[n]) { /* no number: that device alone */
		snprintf(dev, len, "%s", first);
		return 0;
	}
	const char *name = strrchr(first, '/');
	name = name ? name + 1 : first;
	for (long k = strtol(first + n, NULL, 10); k < 1024; k++) {
		char pid[CONFIG_STR + 48];
		snprintf(dev, len, "%.*s%ld", (int)n, first, k);
		if (access(dev, F_OK) != 0)
			break;
		snprintf(pid, sizeof pid, "/sys/block/%.*s%ld/pid",
		         (int)(first + n - name), name, k);
		if (!device_ours(a, dev) && access(pid, F_OK) != 0)
			return 0;
	}
	snprintf(err, errlen,
	         "no free NBD device from %s on (every one is in use; load "
	         "nbd.ko with more: nbds_max)",
	         first);
	return -1;
}

/* Where a kernel with ublk_drv loaded has its control device. */
#define LEND_UBLK_CONTROL "/dev/ublk-control"

/* Does h's borrow go through ramex-lend-ublk? Said in the log when the
 * choice is not the default or changes (auto, the module loaded later),
 * with the settings that then do not apply. */
static int borrow_ublk(struct agent *a, const struct held *h)
{
	int ublk = config_lend_ublk(&a->cfg, LEND_UBLK_CONTROL);
	if (strcmp(a->cfg.lend_device, "nbd") &&
	    a->lend_device_said != ublk + 1) {
		a->lend_device_said = ublk + 1;
		log_info("borrowed pages go to a device",
		         "contract=%" PRId64 " lend_device=%s device=%s%s",
		         h->id, a->cfg.lend_device, ublk ? "ublk" : "nbd",
		         ublk ? " note=\"lend_direct, lend_keep_awake and "
		                "lend_idle_poll do not apply to ublk\""
		              : "");
	}
	return ublk;
}

/* A borrower's swap on its device at priority 100, the child's memory
 * locked: a process of ours is on the pages' way (the bridge's, or
 * ramex-lend-ublk's) and must not page for them (docs/lending.md, the
 * swap path's headroom). */
static void swap_args(struct lendsup_child *c)
{
	lendsup_arg(c, "--swap-priority");
	lendsup_arg(c, "100");
	lendsup_arg(c, "--mlock");
}

/* ramex-lend-nbd's arguments for lend_borrow_mode and the direct path.
 * 0, or -1 with err. */
static int nbd_args(struct agent *a, const struct held *h,
                    struct lendsup_child *c, int direct, char *err,
                    size_t errlen)
{
	/* on the direct path no process of ours is on the pages' way: the
	 * cores a wakeup would need are the kernel's, so neither applies */
	if (!direct)
		wakeup_args(a, c);
	if (!strcmp(a->cfg.lend_borrow_mode, "listen")) {
		/* NBD on loopback for user space and tests; the port goes
		 * to lend-nbd-ID.port for whoever connects */
		char pf[LENDSUP_PATH + 48];
		int port = lendsup_free_port("127.0.0.1");
		if (!port) {
			snprintf(err, errlen, "no free port on 127.0.0.1");
			return -1;
		}
		lendsup_arg(c, "--listen");
		lendsup_arg(c, "127.0.0.1:%d", port);
		snprintf(pf, sizeof pf, "%s/lend-nbd-%" PRId64 ".port",
		         a->lend_dir, h->id);
		FILE *f = fopen(pf, "w");
		if (!f || fprintf(f, "%d\n", port) < 0 || fclose(f) != 0) {
			snprintf(err, errlen, "could not write %.400s", pf);
			return -1;
		}
		return 0;
	}
	char dev[CONFIG_STR + 16];
	if (pick_device(a, dev, sizeof dev, err, errlen) < 0)
		return -1;
	lendsup_arg(c, "--attach");
	lendsup_arg(c, "%s", dev);
	swap_args(c);
	if (direct)
		lendsup_arg(c, "--direct");
	return 0;
}

/* Buyer: once the lender registered, start ramex-lend-nbd (or
 * ramex-lend-ublk, borrow_ublk) towards it. 0 when it runs, -1 to ask
 * again later (404 until the lender is up). */
static int lend_borrow(struct agent *a, struct held *h, int64_t now_ms)
{
	char path[96], err[512];
	struct client_resp r;

	snprintf(path, sizeof path, "/v1/contracts/%" PRId64 "/lend", h->id);
	if (agent_call(a, "GET", path, NULL, NULL, &r) < 0)
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
	int ublk = borrow_ublk(a, h);
	/* the children's files are lend-nbd-ID.* or lend-ublk-ID.* */
	struct lendsup_child *c = lend_child(
	    a, h, ublk ? "lend-ublk" : "lend-nbd", secret, err, sizeof err);
	if (!c)
		goto fail;
	/* not to be papered over; ramex-lend-ublk exits as the bridge does */
	c->final_exits = 1u << LEND_EXIT_LOST;
	lend_program(a, c, ublk ? "ramex-lend-ublk" : "ramex-lend-nbd");
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
	lendsup_arg(c, "--reply-timeout-ms");
	lendsup_arg(c, "%lld", (long long)a->cfg.lend_reply_timeout_ms);
	int direct = !ublk && config_lend_direct(&a->cfg);
	if (ublk)
		swap_args(c); /* it adds /dev/ublkbN itself */
	else if (nbd_args(a, h, c, direct, err, sizeof err) < 0)
		goto fail;
	if (lendsup_start(c, now_ms, err, sizeof err) < 0)
		goto fail;
	h->lc = c;
	log_info("borrowing through the lend bridge",
	         "contract=%" PRId64 " lender=%s mode=%s device=%s direct=%d",
	         h->id, ep, a->cfg.lend_borrow_mode, ublk ? "ublk" : "nbd",
	         direct);
	client_resp_clear(&r); /* ep is the answer's */
	return 0;
fail:
	log_error("could not start the lend bridge",
	          "contract=%" PRId64 " err=%s", h->id,
	          log_quote((char[600]){0}, 600, err));
	lend_child_free(c);
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

/* The bridge of borrowed contract `id` ended with "lender lost": the
 * pages on the lender are gone and a new bridge may not reconnect (a
 * restarted lender could answer with zeros). The contract can deliver
 * nothing more, so the buyer ends it now, saying why: the exchange's
 * transitions then show who lost the pages (an admin decides on a breach,
 * docs/lending.md), the buyer stops paying for capacity it cannot use,
 * and the strategy, no longer counting these pages, can buy again. */
static void lender_lost(struct agent *a, int64_t id, rx_time_ns t)
{
	struct held *h = agent_contract_find(a, id);
	if (!h || h->tell)
		return;
	a->n_lenders_lost++;
	agent_contract_give_up(a, h, "end",
	                       "ramex-agent: the lender vanished or stopped "
	                       "answering; its pages are lost",
	                       t);
}

/* Every round: start the data paths not yet running (at most once a
 * sample each), supervise the running ones and the draining lenders. */
void agent_lend_tick(struct agent *a, rx_time_ns t)
{
	int64_t now = clock_mono_ms();
	int64_t lost[STRATEGY_MAX_CONTRACTS];
	int nlost = 0;
	for (int i = 0; i < a->nheld; i++) {
		struct held *h = &a->held[i];
		if (h->lc) {
			lendsup_poll(h->lc, now);
			if (h->kind == EXEC_BORROW && !h->tell &&
			    lendsup_final_code(h->lc) == LEND_EXIT_LOST &&
			    nlost < STRATEGY_MAX_CONTRACTS)
				lost[nlost++] = h->id;
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
	/* after the walk: ending a contract drops it from a->held */
	for (int i = 0; i < nlost; i++)
		lender_lost(a, lost[i], t);
	(void)agent_lend_draining(a, t);
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
void agent_lend_adjust(const struct agent *a, struct held *h,
                       struct meter_period *p)
{
	if (!h)
		return;
	lend_read(h);
	if (!h->lend_real) {
		/* This node runs the contract's data path and its child has
		 * no meter yet: it never came up (a lender whose server
		 * could not start, a bridge that never reached its lender),
		 * so nothing was delivered and nothing bills. The executor's
		 * pages x time would bill it all (seen in the guest: 340 558
		 * page-seconds for a server that never started). Where this
		 * node runs no data path, the executor's figure stands. */
		if (lend_wanted(a, h)) {
			p->page_seconds = 0;
			p->carry_pns = 0;
		}
		return;
	}
	int64_t avail = h->lend_cum - h->lend_reported;
	if (avail < 0)
		avail = 0;
	if (avail < p->page_seconds)
		p->page_seconds = avail;
	p->carry_pns = 0;
	h->lend_reported += p->page_seconds;
}

/* How far past its own sight of the recall a draining contract's last
 * period may reach. The lender's notice runs from its SIGUSR1 and ends
 * before the exchange's (signalled before the exchange is told); a buyer
 * hears of the recall after the exchange, and its bridge ends at most its
 * reply timeout and 5 s past the lender's end, seen within a round. The
 * exchange admits periods ending up to 60 s (USAGE_CLOCK_SLACK) past the
 * contract's end and bills only the time inside it: 30 s keeps every
 * report admitted whatever the rounds' delays. */
#define LEND_TAIL_SLACK_NS (INT64_C(30) * 1000000000)

/* h's pages are back: the lender gives its borrower notice and is served
 * until the borrower released or the notice ended; the borrower's bridge
 * moves its pages back (swapoff), releases and ends. Either child finishes
 * on its own, supervised in a->draining: a bridge killed while it moves
 * pages back would lose the pages still on the lender, and a lender
 * stopped before the release would lose its borrower's. Each is stopped
 * only past the notice (the lender drops the pages then anyway). */
int agent_lend_finish(struct agent *a, struct held *h, rx_time_ns t)
{
	if (!h->lc)
		return 0;
	int64_t now = clock_mono_ms();
	lendsup_poll(h->lc, now);
	lend_read(h);
	if (h->kind == EXEC_BORROW)
		/* after the notice, the lender is gone and the bridge's
		 * requests fail within its reply timeout: it ends then */
		lendsup_retire(h->lc, SIGTERM,
		               now + h->notice_s * 1000 +
		                   a->cfg.lend_reply_timeout_ms + 5000);
	else
		/* its own deadline is --notice-ms; a little more here. Never
		 * started again: a server that failed (the ramex.ko pool
		 * taken) would come up for a contract that is over and hold
		 * its pages through the notice, and one that died lost its
		 * borrower's pages (a new one would hand out zeros) */
		lendsup_retire(h->lc, SIGUSR1, now + h->notice_s * 1000 + 5000);
	if (a->ndraining >= STRATEGY_MAX_CONTRACTS) {
		lendsup_stop(h->lc, 2000);
		lendsup_cleanup(h->lc);
		free(h->lc);
		h->lc = NULL;
		return 0;
	}
	struct held *d = &a->draining[a->ndraining++];
	*d = *h;
	h->lc = NULL;
	/* metered from the child's meter: that meter goes on counting the
	 * pages it holds until the child ends, and so does ours */
	d->metering = h->metering && h->lend_real && !h->last_unspooled;
	d->last_unspooled = 0;
	d->lend_tail_end = t + h->notice_s * 1000000000 + LEND_TAIL_SLACK_NS;
	if (d->metering)
		h->metering = 0;
	return d->metering;
}

struct held *agent_lend_tail(struct agent *a, int64_t id)
{
	for (int i = 0; i < a->ndraining; i++)
		if (a->draining[i].id == id && a->draining[i].metering)
			return &a->draining[i];
	return NULL;
}

/* A period the spool refuses stays in the meter, and
 * agent_report_cut_all spools it later as a contract no longer held. */
void agent_lend_tail_end(struct agent *a, struct held *d, rx_time_ns t)
{
	char id[32];
	const char *why;
	struct meter_period p;
	if (!d->metering)
		return;
	d->metering = 0;
	snprintf(id, sizeof id, "%" PRId64, d->id);
	if (t > d->lend_tail_end)
		t = d->lend_tail_end;
	if (meter_stop(a->meter, id, t, &p, &why) < 0) {
		log_error("could not end a lend contract's metering",
		          "contract=%s err=%s", id,
		          log_quote((char[300]){0}, 300, why));
		a->n_errors++;
		return;
	}
	agent_lend_adjust(a, d, &p);
	(void)agent_report_spool(a, d, &p, 0, 1);
}

void agent_lend_deliver(struct agent *a, struct held *h)
{
	if (lend_wanted(a, h) && h->kind == EXEC_LEND && !h->lc &&
	    lend_dir_ready(a) == 0)
		lend_serve(a, h, clock_mono_ms());
}

void agent_lend_drop(struct held *h)
{
	if (!h->lc)
		return;
	lendsup_stop(h->lc, 2000);
	lendsup_cleanup(h->lc);
	free(h->lc);
	h->lc = NULL;
}

int agent_lend_draining(struct agent *a, rx_time_ns t)
{
	int64_t now = clock_mono_ms();
	for (int i = 0; i < a->ndraining;) {
		struct held *d = &a->draining[i];
		lendsup_poll(d->lc, now);
		if (d->lc->stopping && d->lc->pid == 0) {
			agent_lend_tail_end(a, d, t);
			lendsup_cleanup(d->lc);
			free(d->lc);
			a->draining[i] = a->draining[--a->ndraining];
			continue;
		}
		i++;
	}
	return a->ndraining;
}

void agent_lend_stop_draining(struct agent *a, rx_time_ns t)
{
	for (int i = 0; i < a->ndraining; i++) {
		struct held *d = &a->draining[i];
		lendsup_stop(d->lc, 2000);
		agent_lend_tail_end(a, d, t);
		lendsup_cleanup(d->lc);
		free(d->lc);
	}
	a->ndraining = 0;
}
