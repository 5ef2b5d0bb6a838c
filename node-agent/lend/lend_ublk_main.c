/*
 * ramex-lend-ublk — the borrower's pages as a ublk block device.
 *
 *   ramex-lend-ublk --lender HOST:PORT --contract ID --secret-file F
 *       [--tls-ca F] [--plaintext] [--meter-file F] [--ready-file F]
 *       [--mlock] [--reply-timeout-ms N] [--swap-priority N]
 *
 * Adds /dev/ublkbN (the kernel's ublk driver, Linux >= 6.0, root) whose
 * block b is page b of the contract, and serves it through one lend
 * connection until SIGTERM, a recall notice or the lender's loss; then
 * stops and deletes the device. --ready-file gets the device's path once
 * it serves. The same lender options as ramex-lend-nbd, whose --help says
 * more. --swap-priority formats the device as swap and swaps to it at
 * that priority once it serves (what `mkswap DEV && swapon -p N DEV`
 * would do; give --mlock then). Swap or not: on a
 * recall, SIGTERM or the lender's loss it is swapped off first (the pages
 * move back), then stopped; after a recall or SIGTERM the pages are
 * released (as ramex-lend-nbd does).
 * Exit status: 0 stopped or recalled, 3 lender lost, 4 recall failed
 * (swapoff could not move the pages back), 1 any other error.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "common/args.h"
#include "common/log.h"
#include "node-agent/lend/lend_args.h"
#include "node-agent/lend/lend_bridge.h"
#include "node-agent/lend/lend_ublk.h"

static struct lend_ublk ublk;
static struct lend_args_borrower ba = {.reply_timeout_ms =
                                           LEND_CLIENT_REPLY_TIMEOUT_MS};

static void on_signal(int sig)
{
	(void)sig;
	lend_ublk_stop(&ublk);
}

static void on_tick(const struct lend_meter_report *r, void *arg)
{
	lend_args_write_meter(arg, r);
}

static void on_ready(struct lend_ublk *u)
{
	char err[256];
	if (ba.ready_file && lend_args_write_small(ba.ready_file, u->dev_path,
	                                           err, sizeof err) < 0) {
		log_error("cannot say the device is ready", "why=\"%s\"", err);
		lend_ublk_stop(u);
	}
}

static const char synopsis[] =
    "usage: ramex-lend-ublk --lender HOST:PORT --contract ID --secret-file "
    "F\n"
    "           [--tls-ca F] [--plaintext] [--meter-file F] [--ready-file "
    "F]\n"
    "           [--mlock] [--reply-timeout-ms MS] [--swap-priority N]\n";

static const char notes[] =
    "Needs root and the kernel's ublk driver (modprobe ublk_drv). "
    "--ready-file gets\n"
    "/dev/ublkbN once it serves. Plain TCP (no --tls-ca) sends this "
    "node's pages in\n"
    "clear: it is refused unless the lender is a loopback address or "
    "--plaintext is\n"
    "given. On a recall, SIGTERM or the lender's loss the device is "
    "swapped off\n"
    "first (the pages move back), then stopped and, but for a lost "
    "lender, released.\nExit status: 0 stopped or recalled,\n"
    "3 lender lost, 4 recall failed, 1 any other error.\n";

int main(int argc, char **argv)
{
	struct lend_args_lender lnd;
	struct lend_client client;
	char err[256];
	int rc = 1;

	log_init("lend-ublk", LOG_INFO);
	int64_t prio = -1;
	const struct args_opt opts[] = {
	    LEND_ARGS_BORROWER_OPTS(&ba),
	    lend_args_swap_priority(&prio),
	};
	const struct args_prog prog = {"ramex-lend-ublk", synopsis, opts,
	                               sizeof opts / sizeof opts[0], notes};
	int done = args_main(argc, argv, &prog, err, sizeof err);
	if (done >= 0)
		return done;
	int lrc = lend_args_lender(&lnd, &ba, err, sizeof err);
	if (lrc == -2)
		return args_done(-1, &prog, err);
	if (lrc < 0) {
		log_error("cannot start", "why=\"%s\"", err);
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	/* before any thread starts, so that they inherit its flags */
	if (ba.mlock)
		lend_args_mlock();
	if (lend_client_connect(&client, lnd.host, lnd.port, lnd.tls,
	                        (uint64_t)ba.contract, lnd.secret, 5000) < 0) {
		log_error("cannot reach the lender", "why=\"%s\"", client.err);
		goto out_tls;
	}
	client.reply_timeout_ms = ba.reply_timeout_ms;
	if (lend_ublk_init(&ublk, &client) < 0) {
		log_error("cannot add the ublk device", "why=\"%s\"", ublk.err);
		goto out_ublk;
	}
	if (prio >= 0 && lend_ublk_swap(&ublk, (int)prio) < 0) {
		log_error("cannot swap", "why=\"%s\"", ublk.err);
		goto out_ublk;
	}
	log_info("ublk server reached its lender",
	         "lender=%s contract=%lld tls=%d dev=%s", ba.lender,
	         (long long)ba.contract, lnd.tls != NULL, ublk.dev_path);
	ublk.on_tick = on_tick;
	ublk.arg = (void *)ba.meter_file;
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	enum lend_ublk_end end = lend_ublk_run(&ublk, on_ready);
	/* recalled, or stopped with its pages moved back (as the bridge
	 * does on SIGTERM: the agent stops it when the contract is over):
	 * the device is gone, nothing of ours reads the pages again, so the
	 * lender may free them now rather than at its notice's end */
	if ((end == LEND_UBLK_RECALLED ||
	     (end == LEND_UBLK_STOPPED && ublk.swapoff_rc == 0)) &&
	    lend_client_release(&client) < 0)
		log_warn("could not release the pages", "why=\"%s\"",
		         client.err);
	static const char *names[] = {"stopped", "recalled", "lender-lost",
	                              "ublk-error", "recall-failed"};
	struct lend_meter_report r = lend_client_report(&client);
	char line[512];
	lend_meter_format(&r, line, sizeof line);
	log_info("ublk server ends",
	         "end=%s reads=%lld writes=%lld trims=%lld flushes=%lld "
	         "errors=%lld meter=\"%s\"",
	         names[end], (long long)ublk.reads, (long long)ublk.writes,
	         (long long)ublk.trims, (long long)ublk.flushes,
	         (long long)ublk.errors, line);
	if (end == LEND_UBLK_ERROR)
		log_error("the ublk device failed", "why=\"%s\"", ublk.err);
	lend_args_write_meter(ba.meter_file, &r);
	rc = end == LEND_UBLK_LOST     ? LEND_EXIT_LOST
	     : end == LEND_UBLK_ERROR  ? LEND_EXIT_ERROR
	     : end == LEND_UBLK_FAILED ? LEND_EXIT_FAILED
	                               : LEND_EXIT_OK;
out_ublk:
	lend_ublk_free(&ublk);
	lend_client_close(&client);
out_tls:
	lend_tls_ctx_free(lnd.tls);
	return rc;
}
