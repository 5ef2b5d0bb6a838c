/*
 * lend_args.h — command-line helpers shared by the lending programs.
 *
 * Owns nothing: the rows of the option tables (common/args.h) the programs
 * share, so that an option means and says the same in each; reading the
 * contract secret from a file (never from argv, where `ps` would show it),
 * the meter file (one logfmt line, replaced atomically so a reader never
 * sees half a line), and the borrower programs' common way to their lender
 * (ramex-lend-nbd, ramex-lend-ublk).
 */
#ifndef RAMEX_LEND_ARGS_H
#define RAMEX_LEND_ARGS_H

#include <stddef.h>
#include <stdint.h>

#include "common/args.h"
#include "node-agent/lend/lend_conn.h"
#include "node-agent/lend/lend_meter.h"
#include "node-agent/lend/lend_proto.h"

/* Shared rows of the option tables, each writing to `out`:
 * --contract ID, --secret-file F, --tls-ca F, --meter-file F, and the
 * wakeup options of the two daemons, --keep-awake N and --idle-poll 0|1. */
struct args_opt lend_args_contract(int64_t *out);
struct args_opt lend_args_secret_file(const char **out);
struct args_opt lend_args_tls_ca(const char **out);
struct args_opt lend_args_meter_file(const char **out);
struct args_opt lend_args_keep_awake(int64_t *out);
struct args_opt lend_args_idle_poll(int64_t *out);
/* --swap-priority N of the borrower programs (0..32767) */
struct args_opt lend_args_swap_priority(int64_t *out);

/* The first line of path: 64 hex digits. Returns 0 or -1 with err. */
int lend_args_secret(const char *path, uint8_t secret[LEND_SECRET_LEN],
                     char *err, size_t errlen);
/* Writes r as one line to path (via path.tmp + rename). The meter file
 * is what the agent reports usage from: the first failure is logged (a
 * full disk, a folder gone), not passed over, and so is the recovery. */
void lend_args_write_meter(const char *path, const struct lend_meter_report *r);
/* Writes the text to path (the port file, the ready file): 0, or -1 with
 * err (a program told to write one must not run on without it: whoever
 * waits for it would wait for ever). */
int lend_args_write_small(const char *path, const char *text, char *err,
                          size_t errlen);

/* The options both borrower programs take (ramex-lend-nbd,
 * ramex-lend-ublk): LEND_ARGS_BORROWER_OPTS(&b) in their args_opt tables
 * fills b. reply_timeout_ms wants its default set before parsing. */
struct lend_args_borrower {
	const char *lender, *secret_file, *ca, *meter_file, *ready_file;
	int64_t contract, reply_timeout_ms;
	int plaintext, mlock;
};
/* clang-format off */
#define LEND_ARGS_BORROWER_OPTS(b)                                           \
	{"--lender", ARGS_STR, &(b)->lender, 0, 0, NULL, "HOST:PORT",        \
	 "the lender's address"},                                            \
	lend_args_contract(&(b)->contract),                                  \
	lend_args_secret_file(&(b)->secret_file),                            \
	lend_args_tls_ca(&(b)->ca),                                          \
	{"--plaintext", ARGS_FLAG, &(b)->plaintext, 0, 0, NULL, NULL,        \
	 "allow plain TCP (no --tls-ca) to a lender off loopback"},          \
	lend_args_meter_file(&(b)->meter_file),                              \
	{"--ready-file", ARGS_STR, &(b)->ready_file, 0, 0, NULL, "F",        \
	 "create F once the device is attached or the client connected"},    \
	{"--mlock", ARGS_FLAG, &(b)->mlock, 0, 0, NULL, NULL,                \
	 "keep the program out of memory reclaim (mlockall, "                \
	 "PR_SET_IO_FLUSHER, oom_score_adj -1000): give it whenever the "    \
	 "device is swap"},                                                  \
	{"--reply-timeout-ms", ARGS_INT, &(b)->reply_timeout_ms, 1, 3600000, \
	 "--reply-timeout-ms is 1..3600000", "MS",                           \
	 "a lender silent this long with a request in flight is lost: "      \
	 "its requests fail with EIO"}
/* clang-format on */

/* What a borrower program needs to reach its lender. */
struct lend_args_lender {
	char host[256];
	int port;
	uint8_t secret[LEND_SECRET_LEN];
	SSL_CTX *tls; /* a client context when --tls-ca was given, else NULL */
};
/*
 * From b's --lender HOST:PORT, --secret-file, --tls-ca (or NULL) and
 * --plaintext (--lender, --contract and --secret-file required): splits
 * the address, refuses plain TCP to a lender off
 * loopback unless plaintext (the node's pages would cross the network in
 * clear; logged when allowed), reads the secret, makes the TLS context.
 * Returns 0; -2 when the arguments are wrong (a usage error, err says
 * which); -1 when a file or TLS failed (err says why). Free l->tls with
 * lend_tls_ctx_free.
 */
int lend_args_lender(struct lend_args_lender *l,
                     const struct lend_args_borrower *b, char *err,
                     size_t errlen);
/* --mlock of a borrower program (lend_mem_guard, before any thread
 * starts so that they inherit the I/O-flusher flag): warns, naming what
 * failed, when the program is not fully kept out of reclaim. */
void lend_args_mlock(void);

#endif
