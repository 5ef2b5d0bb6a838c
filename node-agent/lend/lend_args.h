/*
 * lend_args.h — command-line helpers shared by the two lending programs.
 *
 * Owns nothing: reading the contract secret from a file (never from argv, where
 * `ps` would show it), the meter file (one logfmt line, replaced atomically
 * so a reader never sees half a line), and the borrower programs' common
 * way to their lender (ramex-lend-nbd, ramex-lend-ublk).
 */
#ifndef RAMEX_LEND_ARGS_H
#define RAMEX_LEND_ARGS_H

#include <stddef.h>
#include <stdint.h>

#include "node-agent/lend/lend_conn.h"
#include "node-agent/lend/lend_meter.h"
#include "node-agent/lend/lend_proto.h"

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

/* What a borrower program needs to reach its lender. */
struct lend_args_lender {
	char host[256];
	int port;
	uint8_t secret[LEND_SECRET_LEN];
	SSL_CTX *tls; /* a client context when --tls-ca was given, else NULL */
};
/*
 * From --lender HOST:PORT, --secret-file, --tls-ca (or NULL) and
 * --plaintext: splits the address, refuses plain TCP to a lender off
 * loopback unless plaintext (the node's pages would cross the network in
 * clear; logged when allowed), reads the secret, makes the TLS context.
 * Returns 0; -2 when the arguments are wrong (a usage error, err says
 * which); -1 when a file or TLS failed (err says why). Free l->tls with
 * lend_tls_ctx_free.
 */
int lend_args_lender(struct lend_args_lender *l, const char *lender,
                     const char *secret_file, const char *ca, int plaintext,
                     char *err, size_t errlen);
/* --mlock of a borrower program (lend_mem_guard, before any thread
 * starts so that they inherit the I/O-flusher flag): warns, naming what
 * failed, when the program is not fully kept out of reclaim. */
void lend_args_mlock(void);

#endif
