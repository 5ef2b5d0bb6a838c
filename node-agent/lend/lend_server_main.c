/*
 * ramex-lend-server — the lender's side of one lend contract, as a program.
 *
 *   ramex-lend-server --contract ID --secret-file F --pages N
 *       [--listen 127.0.0.1:0] [--port-file F] [--tls-cert F --tls-key F]
 *       [--store auto|ramex|anon] [--notice-ms MS] [--meter-file F] [--mlock]
 *       [--keep-awake N] [--idle-poll 0|1]
 *
 * --mlock keeps the lender out of memory reclaim (lend_mem.h).
 * --keep-awake N (default 0) runs N SCHED_IDLE threads that keep cores out
 * of idle while a borrower's requests come, and 1 ms after (lend_awake.h).
 * --idle-poll 1 holds the CPU latency request at 0 µs meanwhile instead
 * (lend_qos.h: idle cores poll rather than halt; without the device it says
 * so once and serves on without). SIGUSR1
 * recalls the pages (the agent does this when the exchange says
 * so); SIGTERM stops. The agent daemon embeds lend_server instead.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/args.h"
#include "common/hostport.h"
#include "common/log.h"
#include "node-agent/lend/lend_args.h"
#include "node-agent/lend/lend_mem.h"
#include "node-agent/lend/lend_server.h"

static struct lend_server srv;

static void on_signal(int sig)
{
	if (sig == SIGUSR1)
		lend_server_recall(&srv);
	else
		lend_server_stop(&srv);
}

static void on_tick(const struct lend_meter_report *r, void *arg)
{
	lend_args_write_meter(arg, r);
}

static void usage_text(FILE *f)
{
	fprintf(f,
	        "usage: ramex-lend-server --contract ID --secret-file F "
	        "--pages N [--listen HOST:PORT] [--port-file F]\n"
	        "       [--tls-cert F --tls-key F] [--store auto|ramex|anon] "
	        "[--notice-ms MS] [--meter-file F] [--mlock] [--plaintext]\n"
	        "       [--keep-awake N (default 0, at most %d: threads that "
	        "keep cores out of idle,\n"
	        "        under SCHED_IDLE, while a borrower's requests come)]\n"
	        "       [--idle-poll 0|1 (default %d: 1 holds the CPU latency "
	        "request at 0 us while\n"
	        "        a borrower's requests come, so idle cores poll instead "
	        "of halting; needs root)]\n"
	        "Plain TCP (no --tls-cert) carries the borrower's pages in "
	        "clear: it is refused\n"
	        "unless --listen is a loopback address or --plaintext is "
	        "given.\n",
	        LEND_AWAKE_MAX_THREADS, LEND_QOS_DEFAULT);
}

static int usage(const char *why)
{
	return args_done(-1, "ramex-lend-server", why, usage_text);
}

int main(int argc, char **argv)
{
	struct lend_server_config cfg = {
	    .host = "127.0.0.1", .notice_ms = 30000, .store = LEND_STORE_AUTO};
	const char *secret_file = NULL, *port_file = NULL, *meter_file = NULL;
	const char *cert = NULL, *key = NULL;
	char host[256], err[256];
	int have_contract = 0, lock = 0;

	log_init("lend-server", LOG_INFO);
	/* A recall (SIGUSR1) or stop that arrives while the server opens
	 * waits until the handlers are there: unhandled, SIGUSR1 would kill
	 * the lender, and the agent would start it again with empty pages. */
	sigset_t early, prev;
	sigemptyset(&early);
	sigaddset(&early, SIGUSR1);
	sigaddset(&early, SIGTERM);
	sigaddset(&early, SIGINT);
	sigprocmask(SIG_BLOCK, &early, &prev);
	const char *listen_at = NULL, *store = NULL;
	int64_t contract = 0, awake = 0, idle_poll = LEND_QOS_DEFAULT;
	const struct args_opt opts[] = {
	    {"--contract", ARGS_INT, &contract, 1, INT64_MAX,
	     "--contract must be a positive integer"},
	    {"--secret-file", ARGS_STR, &secret_file, 0, 0, NULL},
	    {"--pages", ARGS_INT, &cfg.pages, 1, LEND_MAX_PAGES,
	     "--pages must be 1..2^28"},
	    {"--listen", ARGS_STR, &listen_at, 0, 0, NULL},
	    {"--port-file", ARGS_STR, &port_file, 0, 0, NULL},
	    {"--tls-cert", ARGS_STR, &cert, 0, 0, NULL},
	    {"--tls-key", ARGS_STR, &key, 0, 0, NULL},
	    {"--store", ARGS_STR, &store, 0, 0, NULL},
	    {"--notice-ms", ARGS_INT, &cfg.notice_ms, 0, INT32_MAX,
	     "--notice-ms is 0..2147483647 (ms)"},
	    {"--meter-file", ARGS_STR, &meter_file, 0, 0, NULL},
	    {"--mlock", ARGS_FLAG, &lock, 0, 0, NULL},
	    {"--plaintext", ARGS_FLAG, &cfg.plaintext, 0, 0, NULL},
	    {"--keep-awake", ARGS_INT, &awake, 0, LEND_AWAKE_MAX_THREADS,
	     "--keep-awake is 0..8 threads"},
	    {"--idle-poll", ARGS_INT, &idle_poll, 0, 1,
	     "--idle-poll is 0 (off) or 1 (on)"},
	};
	int done =
	    args_done(args_parse(argc, argv, opts, sizeof opts / sizeof opts[0],
	                         err, sizeof err),
	              "ramex-lend-server", err, usage_text);
	if (done >= 0)
		return done;
	if (contract) {
		cfg.contract = (uint64_t)contract;
		have_contract = 1;
	}
	if (listen_at) {
		if (hostport_split(listen_at, host, sizeof host, &cfg.port) < 0)
			return usage("--listen wants HOST:PORT");
		cfg.host = host;
	}
	if (store) {
		if (strcmp(store, "ramex") == 0)
			cfg.store = LEND_STORE_RAMEX;
		else if (strcmp(store, "anon") == 0)
			cfg.store = LEND_STORE_ANON;
		else if (strcmp(store, "auto") != 0)
			return usage("--store is auto, ramex or anon");
	}
	if (!have_contract || !secret_file || cfg.pages == 0)
		return usage("--contract, --secret-file and --pages are "
		             "required");
	if ((cert == NULL) != (key == NULL))
		return usage("TLS needs both --tls-cert and --tls-key");
	if (lend_args_secret(secret_file, cfg.secret, err, sizeof err) < 0) {
		log_error("cannot start", "why=\"%s\"", err);
		return 1;
	}
	if (cert &&
	    !(cfg.tls = lend_tls_server_ctx(cert, key, err, sizeof err))) {
		log_error("cannot start", "why=\"%s\"", err);
		return 1;
	}
	/* a lender that shares a kernel with its borrower (tests) is in that
	 * kernel's swap path too; on its own machine it still must not page
	 * on behalf of its borrower */
	if (lock) {
		int got = lend_mem_guard(err, sizeof err);
		if (got != (LEND_MEM_LOCKED | LEND_MEM_IO_FLUSHER |
		            LEND_MEM_OOM_EXEMPT))
			log_warn("the lender is not fully kept out of reclaim",
			         "why=\"%s\"", err);
	}
	cfg.keep_awake = (int)awake;
	cfg.idle_poll = (int)idle_poll;
	cfg.on_tick = on_tick;
	cfg.arg = (void *)meter_file;
	if (lend_server_open(&srv, &cfg, err, sizeof err) < 0) {
		log_error("cannot start", "why=\"%s\"", err);
		lend_tls_ctx_free(cfg.tls);
		return 1;
	}
	if (srv.store.kind == LEND_STORE_ANON)
		log_warn("TEST ONLY: the lent pages are anonymous memory, not "
		         "ramex.ko's pool; this OS still counts them",
		         "locked=%d", srv.store.locked);
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigprocmask(SIG_SETMASK, &prev, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (port_file) {
		char text[24];
		snprintf(text, sizeof text, "%d\n", srv.port);
		if (lend_args_write_small(port_file, text, err, sizeof err) <
		    0) {
			log_error("cannot start", "why=\"%s\"", err);
			lend_server_close(&srv);
			lend_tls_ctx_free(cfg.tls);
			return 1;
		}
	}
	enum lend_server_end end = lend_server_run(&srv);
	static const char *names[] = {"stopped", "released", "deadline",
	                              "error"};
	struct lend_meter_report r = lend_server_report(&srv);
	char line[512];
	lend_meter_format(&r, line, sizeof line);
	log_info("lender ends",
	         "end=%s auth_failures=%lld idle_poll_holds=%lld "
	         "meter=\"%s\"",
	         names[end], (long long)srv.auth_failures,
	         (long long)srv.qos.holds, line);
	lend_args_write_meter(meter_file, &r);
	lend_server_close(&srv);
	lend_tls_ctx_free(cfg.tls);
	return end == LEND_END_ERROR ? 1 : 0;
}
