/*
 * ramex-lend-server — the lender's side of one lend contract, as a program.
 *
 *   ramex-lend-server --contract ID --secret-file F --pages N [OPTION...]
 *
 * (every option: --help, printed from the table in main)
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

/* --help around the options of the table in main */
static const char synopsis[] =
    "usage: ramex-lend-server --contract ID --secret-file F --pages N "
    "[OPTION...]\n";
static const char notes[] =
    "SIGUSR1 recalls the pages (the agent sends it when the exchange says "
    "so);\n"
    "SIGTERM stops.\n"
    "Plain TCP (no --tls-cert) carries the borrower's pages in clear: it is "
    "refused\n"
    "unless --listen is a loopback address or --plaintext is given.\n";

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
	    lend_args_contract(&contract),
	    lend_args_secret_file(&secret_file),
	    {"--pages", ARGS_INT, &cfg.pages, 1, LEND_MAX_PAGES,
	     "--pages must be 1..2^28", "N", "the pages lent"},
	    {"--listen", ARGS_STR, &listen_at, 0, 0, NULL, "HOST:PORT",
	     "where borrowers connect (default 127.0.0.1:0, a port the "
	     "system picks)"},
	    {"--port-file", ARGS_STR, &port_file, 0, 0, NULL, "F",
	     "once listening, write the port to F"},
	    {"--tls-cert", ARGS_STR, &cert, 0, 0, NULL, "F",
	     "serve TLS with this certificate (PEM), with --tls-key"},
	    {"--tls-key", ARGS_STR, &key, 0, 0, NULL, "F",
	     "the certificate's private key (PEM)"},
	    {"--store", ARGS_STR, &store, 0, 0, NULL, "auto|ramex|anon",
	     "where the pages are held: ramex.ko's lending pool (ramex), "
	     "anonymous memory the OS still counts (anon: tests only), or "
	     "the pool when /dev/ramex is there (auto, the default)"},
	    {"--notice-ms", ARGS_INT, &cfg.notice_ms, 0, INT32_MAX,
	     "--notice-ms is 0..2147483647 (ms)", "MS",
	     "a recall's notice: how long the borrower has to take its "
	     "pages back"},
	    lend_args_meter_file(&meter_file),
	    {"--mlock", ARGS_FLAG, &lock, 0, 0, NULL, NULL,
	     "keep the lender out of memory reclaim (mlockall, "
	     "PR_SET_IO_FLUSHER, oom_score_adj -1000)"},
	    {"--plaintext", ARGS_FLAG, &cfg.plaintext, 0, 0, NULL, NULL,
	     "allow plain TCP (no --tls-cert) on an address off loopback"},
	    lend_args_keep_awake(&awake),
	    lend_args_idle_poll(&idle_poll),
	};
	const struct args_prog prog = {"ramex-lend-server", synopsis, opts,
	                               sizeof opts / sizeof opts[0], notes};
	int done = args_main(argc, argv, &prog, err, sizeof err);
	if (done >= 0)
		return done;
	if (contract) {
		cfg.contract = (uint64_t)contract;
		have_contract = 1;
	}
	if (listen_at) {
		if (hostport_split(listen_at, host, sizeof host, &cfg.port) < 0)
			return args_done(-1, &prog, "--listen wants HOST:PORT");
		cfg.host = host;
	}
	if (store) {
		if (strcmp(store, "ramex") == 0)
			cfg.store = LEND_STORE_RAMEX;
		else if (strcmp(store, "anon") == 0)
			cfg.store = LEND_STORE_ANON;
		else if (strcmp(store, "auto") != 0)
			return args_done(-1, &prog,
			                 "--store is auto, ramex or anon");
	}
	if (!have_contract || !secret_file || cfg.pages == 0)
		return args_done(-1, &prog,
		                 "--contract, --secret-file and --pages are "
		                 "required");
	if ((cert == NULL) != (key == NULL))
		return args_done(-1, &prog,
		                 "TLS needs both --tls-cert and --tls-key");
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
