/*
 * ramex-lend-nbd — the borrower's bridge: lent pages as an NBD device.
 *
 *   ramex-lend-nbd --lender HOST:PORT --contract ID --secret-file F
 *       [--tls-ca F] (--attach /dev/nbdX | --listen-unix PATH
 *                     | --listen 127.0.0.1:PORT) [OPTION...]
 *
 * (every option: --help, printed from the table in main)
 * --direct (with --attach; plain TCP: loopback or --plaintext) hands the
 * kernel's nbd driver the lender's own TCP connection (a DATA connection,
 * lend_proto.h), so pages go nbd.ko <-> lender with no process between;
 * this program keeps a CONTROL connection for the recall and the meter.
 * The lender must be as new as this program (it says so otherwise).
 *
 * --mlock keeps the bridge out of memory reclaim (lend_mem.h: mlockall,
 * PR_SET_IO_FLUSHER, oom_score_adj -1000); give it whenever the device is
 * swap. --attach hands the export to the kernel's nbd driver; --swap-priority
 * then formats it as swap and swaps to it at that priority (what
 * `mkswap /dev/nbdX && swapon -p N /dev/nbdX` would do).
 * --reply-timeout-ms (default 5000): a request the lender leaves unanswered
 * this long, however the connection looks, loses the lender as a closed
 * connection would: every request in flight and after gets EIO, never a
 * workload stalled on a silent peer. With --direct the kernel keeps that
 * clock (NBD_SET_TIMEOUT, whole seconds, rounded up).
 * --keep-awake N (default 0) runs N threads under SCHED_IDLE that spin
 * while requests are in flight and 1 ms after (lend_awake.h), so that the
 * wakeups of a request's way do not wait for an idle core to come back;
 * they take only time no other task wants.
 * --idle-poll 1 holds the CPU latency request at 0 µs while requests are in
 * flight and 1 ms after (lend_qos.h): idle cores poll instead of halting,
 * for the same reason, without a thread of ours. Without the device (not
 * root, no such kernel) it says so once and the bridge runs on without.
 * On a recall notice, on SIGTERM, or when the lender vanishes, it swaps the
 * device off (moving pages back), releases the contract and exits.
 * Exit status: 0 recalled or disconnected, 3 lender lost, 4 recall failed,
 * 1 any other error.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/args.h"
#include "common/hostport.h"
#include "common/log.h"
#include "node-agent/lend/lend_args.h"
#include "node-agent/lend/lend_bridge.h"

static struct lend_bridge bridge;

static void on_signal(int sig)
{
	(void)sig;
	lend_bridge_stop(&bridge);
}

static void on_tick(const struct lend_meter_report *r, void *arg)
{
	lend_args_write_meter(arg, r);
}

/* --help around the options of the table in main */
static const char synopsis[] =
    "usage: ramex-lend-nbd --lender HOST:PORT --contract ID --secret-file F "
    "[--tls-ca F]\n"
    "       (--attach /dev/nbdX | --listen-unix PATH | --listen "
    "127.0.0.1:PORT) [OPTION...]\n";
static const char notes[] =
    "Plain TCP (no --tls-ca) sends this node's pages in clear: it is "
    "refused\n"
    "unless the lender is a loopback address or --plaintext is given.\n"
    "On a recall notice, on SIGTERM, or when the lender vanishes, it swaps "
    "the\n"
    "device off, releases the contract and exits: 0 recalled or "
    "disconnected,\n"
    "3 lender lost, 4 recall failed, 1 any other error.\n";

static int accept_one(const char *unix_path, const char *hostport, char *err,
                      size_t errlen)
{
	int lfd, fd;
	if (unix_path) {
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		if (strlen(unix_path) >= sizeof sa.sun_path) {
			snprintf(err, errlen, "unix socket path too long");
			return -1;
		}
		strcpy(sa.sun_path, unix_path);
		unlink(unix_path);
		lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (lfd < 0 || bind(lfd, (void *)&sa, sizeof sa) < 0 ||
		    listen(lfd, 1) < 0) {
			snprintf(err, errlen, "could not listen on %s",
			         unix_path);
			return -1;
		}
	} else {
		char host[256];
		int port;
		if (hostport_split(hostport, host, sizeof host, &port) < 0) {
			snprintf(err, errlen, "--listen wants HOST:PORT");
			return -1;
		}
		lfd = lend_tcp_listen(host, port, &port, err, errlen);
		if (lfd < 0)
			return -1;
		/* the port bound (--listen 127.0.0.1:0 takes a free one) */
		log_info("bridge waits for one NBD client", "host=%s port=%d",
		         host, port);
	}
	if (unix_path)
		log_info("bridge waits for one NBD client", "path=%s",
		         unix_path);
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	close(lfd);
	if (fd < 0)
		snprintf(err, errlen, "accept failed");
	return fd;
}

int main(int argc, char **argv)
{
	const char *attach = NULL, *swap_dev = NULL, *unix_path = NULL;
	const char *listen_at = NULL;
	struct lend_args_borrower ba = {.reply_timeout_ms =
	                                    LEND_CLIENT_REPLY_TIMEOUT_MS};
	struct lend_args_lender lnd;
	uint64_t contract = 0;
	char err[256];
	int rc = 1, prio = -1, direct = 0;
	int data_fd = -1;
	SSL_CTX *tls = NULL;
	struct lend_client client;

	log_init("lend-nbd", LOG_INFO);
	int64_t prio_v = -1, awake = 0;
	int64_t idle_poll = LEND_QOS_DEFAULT;
	const struct args_opt opts[] = {
	    LEND_ARGS_BORROWER_OPTS(&ba),
	    {"--attach", ARGS_STR, &attach, 0, 0, NULL, "/dev/nbdX",
	     "hand the export to the kernel's nbd driver"},
	    {"--swap-device", ARGS_STR, &swap_dev, 0, 0, NULL, "DEV",
	     "what a recall swaps off, when it is not the --attach device"},
	    {"--listen-unix", ARGS_STR, &unix_path, 0, 0, NULL, "PATH",
	     "serve the export to one NBD client on this unix socket"},
	    {"--listen", ARGS_STR, &listen_at, 0, 0, NULL, "127.0.0.1:PORT",
	     "serve the export to one NBD client on this loopback port (NBD "
	     "has no authentication)"},
	    lend_args_swap_priority(&prio_v),
	    lend_args_keep_awake(&awake),
	    lend_args_idle_poll(&idle_poll),
	    {"--direct", ARGS_FLAG, &direct, 0, 0, NULL, NULL,
	     "with --attach and plain TCP: the kernel's nbd driver talks to "
	     "the lender itself; this program keeps the recall and the "
	     "meter"},
	};
	const struct args_prog prog = {"ramex-lend-nbd", synopsis, opts,
	                               sizeof opts / sizeof opts[0], notes};
	int done = args_main(argc, argv, &prog, err, sizeof err);
	if (done >= 0)
		return done;
	contract = (uint64_t)ba.contract;
	prio = (int)prio_v;
	if (!!attach + !!unix_path + !!listen_at != 1)
		return args_done(-1, &prog,
		                 "give exactly one of --attach, --listen-unix, "
		                 "--listen");
	if (direct && !attach)
		return args_done(
		    -1, &prog,
		    "--direct hands /dev/nbdX the lender's connection: "
		    "it needs --attach");
	if (direct && ba.ca)
		return args_done(
		    -1, &prog,
		    "--direct gives the lender's TCP connection to the "
		    "kernel's nbd driver, which cannot speak TLS (that "
		    "would need kTLS): leave out --direct with --tls-ca, "
		    "or use --direct on loopback or with --plaintext");
	if (direct && awake) {
		log_warn("--keep-awake does nothing with --direct: no process "
		         "is on the pages' way; no threads started",
		         "keep_awake=%lld", (long long)awake);
		awake = 0;
	}
	if (direct && idle_poll) {
		log_warn("--idle-poll does nothing with --direct: no process "
		         "of ours is on the pages' way (the lender's own "
		         "--idle-poll still applies)",
		         "idle_poll=%lld", (long long)idle_poll);
		idle_poll = 0;
	}
	/* NBD has no authentication: whoever reaches the export reads and
	 * writes the borrowed pages (this node's swapped memory). Found from
	 * outside: --listen 0.0.0.0:PORT served it on every interface. */
	if (listen_at) {
		char lh[256];
		int lp;
		if (hostport_split(listen_at, lh, sizeof lh, &lp) < 0)
			return args_done(-1, &prog,
			                 "--listen wants 127.0.0.1:PORT");
		if (!hostport_is_loopback(lh))
			return args_done(
			    -1, &prog,
			    "--listen must be a loopback address "
			    "(127.0.0.1:PORT): NBD has no "
			    "authentication, so anyone who reaches "
			    "it reads and writes this node's pages");
	}
	int lrc = lend_args_lender(&lnd, &ba, err, sizeof err);
	if (lrc == -2)
		return args_done(-1, &prog, err);
	if (lrc < 0) {
		log_error("cannot start", "why=\"%s\"", err);
		return 1;
	}
	tls = lnd.tls;
	signal(SIGPIPE, SIG_IGN);
	/* the bridge serves the kernel's swap: it must never wait for swap
	 * or for reclaim itself (lend_mem.h); before any thread starts, so
	 * that they inherit the I/O-flusher flag */
	if (ba.mlock)
		lend_args_mlock();
	/* direct: the CONTROL connection first, so that a recall notice
	 * finds it, then the DATA one for the kernel */
	if (lend_client_connect_role(
	        &client, lnd.host, lnd.port, tls, contract, lnd.secret, 5000,
	        direct ? LEND_CONN_CONTROL : LEND_CONN_LEND) < 0) {
		log_error("cannot reach the lender", "why=\"%s\"", client.err);
		goto out_tls;
	}
	client.reply_timeout_ms = ba.reply_timeout_ms;
	if (direct) {
		struct lend_client dc;
		if (lend_client_connect_role(&dc, lnd.host, lnd.port, NULL,
		                             contract, lnd.secret, 5000,
		                             LEND_CONN_DATA) < 0 ||
		    (data_fd = lend_client_take_fd(&dc)) < 0) {
			log_error("cannot open the data connection",
			          "why=\"%s\"", dc.err);
			goto out_client;
		}
	}
	log_info("bridge reached its lender",
	         "lender=%s contract=%llu tls=%d reply_timeout_ms=%lld "
	         "keep_awake=%lld idle_poll=%lld direct=%d",
	         ba.lender, (unsigned long long)contract, tls != NULL,
	         (long long)ba.reply_timeout_ms, (long long)awake,
	         (long long)idle_poll, direct);
	if (lend_bridge_init(&bridge, &client, "ramex") < 0) {
		log_error("cannot start", "why=\"%s\"", bridge.err);
		goto out_client;
	}
	/* after lend_mem_guard: the spinners inherit its flags */
	if (lend_bridge_keep_awake(&bridge, (int)awake) < 0) {
		log_error("cannot start", "why=\"%s\"", bridge.err);
		goto out_bridge;
	}
	/* without the device it runs on as before (logged once) */
	if (idle_poll)
		(void)lend_bridge_idle_poll(&bridge, NULL);
	bridge.on_tick = on_tick;
	bridge.arg = (void *)ba.meter_file;
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	if (attach) {
		int arc =
		    direct ? lend_bridge_attach_direct(
		                 &bridge, attach, swap_dev ? swap_dev : attach,
		                 data_fd,
		                 (int)((ba.reply_timeout_ms + 999) / 1000))
		           : lend_bridge_attach(&bridge, attach,
		                                swap_dev ? swap_dev : attach);
		data_fd = -1; /* the bridge's now */
		if (arc < 0) {
			log_error("cannot attach", "why=\"%s\"", bridge.err);
			goto out_bridge;
		}
		if (prio >= 0 && lend_bridge_swap(&bridge, prio) < 0) {
			log_error("cannot swap", "why=\"%s\"", bridge.err);
			goto out_bridge;
		}
	} else {
		int fd = accept_one(unix_path, listen_at, err, sizeof err);
		if (fd < 0 || lend_bridge_accept(&bridge, fd) < 0) {
			log_error("cannot serve NBD", "why=\"%s\"",
			          fd < 0 ? err : bridge.err);
			goto out_bridge;
		}
	}
	if (ba.ready_file &&
	    lend_args_write_small(ba.ready_file, "", err, sizeof err) < 0) {
		log_error("cannot start", "why=\"%s\"", err);
		goto out_bridge;
	}
	enum lend_bridge_end end = lend_bridge_run(&bridge);
	static const char *names[] = {"disconnected", "recalled", "lender-lost",
	                              "recall-failed", "nbd-error"};
	struct lend_meter_report r = lend_bridge_report(&bridge);
	char line[512];
	lend_meter_format(&r, line, sizeof line);
	log_info("bridge ends",
	         "end=%s nbd_reads=%lld nbd_writes=%lld nbd_errors=%lld "
	         "idle_poll_holds=%lld meter=\"%s\"",
	         names[end], (long long)bridge.st.reads,
	         (long long)bridge.st.writes, (long long)bridge.st.errors,
	         (long long)bridge.qos.holds, line);
	lend_args_write_meter(ba.meter_file, &r);
	rc = end == LEND_BRIDGE_LOST     ? LEND_EXIT_LOST
	     : end == LEND_BRIDGE_FAILED ? LEND_EXIT_FAILED
	     : end == LEND_BRIDGE_ERROR  ? LEND_EXIT_ERROR
	                                 : LEND_EXIT_OK;
out_bridge:
	lend_bridge_free(&bridge);
out_client:
	if (data_fd >= 0)
		close(data_fd);
	lend_client_close(&client);
out_tls:
	lend_tls_ctx_free(tls);
	return rc;
}
