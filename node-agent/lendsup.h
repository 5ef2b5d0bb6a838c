/*
 * lendsup.h — the agent's supervision of the lend children: one
 * ramex-lend-server per contract it lends, one ramex-lend-nbd (or
 * ramex-lend-ublk, lend_device) per contract it borrows (docs/lending.md,
 * node-agent/lend/).
 *
 * Owns the child process and its files in the agent's state directory: the
 * contract secret (written 0600, never on a command line), the meter file
 * the child rewrites about once a second, and its log. A child that dies
 * of an error is started again with a doubling backoff (1 s to 30 s); one
 * that ends on its own terms (exit 0: released, recalled, disconnected; or
 * one of its final_exits) or was stopped stays down. The children get
 * PR_SET_PDEATHSIG (death_signal), so they wind down after a crashed
 * agent, which could no longer meter or report them: a bridge moves its
 * pages back, a lender gives notice and serves until the release.
 */
#ifndef RAMEX_LENDSUP_H
#define RAMEX_LENDSUP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "node-agent/lend/lend_meter.h"

#define LENDSUP_ARGS 24
#define LENDSUP_PATH 512

struct lendsup_child {
	int64_t contract;
	char name[24]; /* "lend-server", "lend-nbd" or "lend-ublk", for logs */
	char argv_buf[LENDSUP_ARGS][LENDSUP_PATH];
	int argc;
	char secret_file[LENDSUP_PATH];
	char meter_file[LENDSUP_PATH];
	char log_file[LENDSUP_PATH];
	pid_t pid;          /* 0: not running */
	int stopping;       /* stopped or ended: never restarted */
	int starts;         /* how many times it was started */
	int64_t backoff_ms; /* before the next restart */
	int64_t restart_at_ms;
	int last_status;     /* wait status of the last exit */
	int64_t deadline_ms; /* stop it for good then (0: none) */
	/* exit codes besides 0 that end it for good (bit n: code n), e.g.
	 * the bridge's 3, "lender lost": its data is gone, and a bridge
	 * started again would offer the kernel an empty device as if it
	 * were the old one's (docs/lending.md, a lender that vanishes) */
	unsigned final_exits;
	int ended_code; /* -1 until it ends for good on its own terms */
	/* what the child gets when the agent dies (PR_SET_PDEATHSIG):
	 * SIGTERM by default; a lender gets SIGUSR1, its recall notice, so
	 * that its borrower moves the pages out before it stops */
	int death_signal;
};

/* Sets up `c` for contract `id`: its files are DIR/NAME-ID.{secret,
 * meter,log}. Then add arguments with lendsup_arg. */
void lendsup_init(struct lendsup_child *c, const char *dir, const char *name,
                  int64_t id);
void lendsup_arg(struct lendsup_child *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Writes the 64-hex-digit secret to c->secret_file, mode 0600. 0, or -1
 * with err. */
int lendsup_write_secret(struct lendsup_child *c, const char *hex, char *err,
                         size_t errlen);
/* Starts the child now. 0, or -1 with err. */
int lendsup_start(struct lendsup_child *c, int64_t now_ms, char *err,
                  size_t errlen);
/* Reaps an exited child and restarts one that failed once its backoff
 * has passed; stops it for good at its deadline. Call every round. */
void lendsup_poll(struct lendsup_child *c, int64_t now_ms);
/* The exit code of a child that ended for good (0 or one of its
 * final_exits), or -1 while it runs, was stopped or will be restarted. */
int lendsup_final_code(const struct lendsup_child *c);
/* Sends `sig` to a running child (SIGUSR1: the lender's recall notice). */
void lendsup_signal(struct lendsup_child *c, int sig);
/* Its work is over, but it must finish on its own (a bridge moving pages
 * back, which a kill would lose): sends `sig` (0: none), never restarts
 * it, and lendsup_poll stops it only if it still runs at deadline_ms. */
void lendsup_retire(struct lendsup_child *c, int sig, int64_t deadline_ms);
/* SIGTERM, up to wait_ms for it to end, then SIGKILL; never restarted. */
void lendsup_stop(struct lendsup_child *c, int wait_ms);
/* The child's last meter line. 0, or -1 when there is none yet. */
int lendsup_meter(const struct lendsup_child *c, struct lend_meter_report *r);
/* Removes the secret file (the contract is over for this side); the meter
 * and log files stay for people to read. */
void lendsup_cleanup(struct lendsup_child *c);

/* A free TCP port on host right now: bound and closed again, so another
 * process could take it before the child binds (the child then fails and
 * is retried on the same port: give lend_listen a fixed port where that
 * matters). 0 when none. */
int lendsup_free_port(const char *host);

#endif
