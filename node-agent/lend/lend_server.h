/*
 * lend_server.h — the lender's side of one lend contract.
 *
 * Holds the contract's pages in a lend_store (ramex.ko's pool in
 * production), listens on one TCP port (TLS when configured) and serves
 * READ/WRITE/TRIM/FLUSH of those pages to the one borrower that proves it
 * holds the contract's secret; everyone else is refused after the
 * handshake and counted. Owns the listening socket, the borrower's
 * connection, the store and the lender's meter.
 *
 * Recall: lend_server_recall() (safe from a signal handler or another
 * thread) sends the borrower a NOTICE with the notice period. The borrower
 * moves its pages back and sends RELEASE; the server then frees the pages.
 * If the deadline passes first, the server frees them anyway and drops the
 * connection: the borrower's pages that were still here are lost, and the
 * meter says the recall ended at the deadline (see docs/lending.md).
 *
 * Single-threaded: lend_server_run() polls the listener, the connection
 * and a wake-up pipe. One borrower connection at a time; a newly
 * authenticated one replaces the old (the borrower reconnected).
 */
#ifndef RAMEX_LEND_SERVER_H
#define RAMEX_LEND_SERVER_H

#include <stdint.h>

#include "node-agent/lend/lend_conn.h"
#include "node-agent/lend/lend_meter.h"
#include "node-agent/lend/lend_proto.h"
#include "node-agent/lend/lend_store.h"

struct lend_server_config {
	uint64_t contract;
	uint8_t secret[LEND_SECRET_LEN];
	int64_t pages;    /* pages under contract */
	const char *host; /* address to listen on, e.g. "127.0.0.1" */
	int port;         /* 0 = any free port (see lend_server.port) */
	SSL_CTX *tls;     /* server context, or NULL for plain TCP */
	enum lend_store_kind store;
	const char *device; /* /dev/ramex unless set */
	int64_t notice_ms;  /* recall notice period */
	int handshake_ms;   /* bound on one connection's handshake */
	/* called about once a second and once at the end (may be NULL) */
	void (*on_tick)(const struct lend_meter_report *r, void *arg);
	void *arg;
};

/* How lend_server_run ended. */
enum lend_server_end {
	LEND_END_STOPPED,  /* lend_server_stop */
	LEND_END_RELEASED, /* the borrower released the pages after recall */
	LEND_END_DEADLINE, /* the recall deadline passed: pages freed anyway */
	LEND_END_ERROR,    /* the listener failed */
};

struct lend_server {
	struct lend_server_config cfg;
	int lfd, port;
	int wake[2]; /* 'r' recall, 's' stop */
	struct lend_store store;
	struct lend_meter meter;
	struct lend_conn conn; /* fd -1 when no borrower is connected */
	int recalling, released;
	int64_t deadline_ms;
	int64_t connections, auth_failures;
	char err[200];
};

/* Takes the pages and starts listening. Returns 0, or -1 with err set. */
int lend_server_open(struct lend_server *s, const struct lend_server_config *c,
                     char *err, size_t errlen);
enum lend_server_end lend_server_run(struct lend_server *s);
/* Async-signal-safe. */
void lend_server_recall(struct lend_server *s);
void lend_server_stop(struct lend_server *s);
struct lend_meter_report lend_server_report(struct lend_server *s);
void lend_server_close(struct lend_server *s);

/* Monotonic milliseconds, shared by both sides' meters. */
int64_t lend_now_ms(void);

#endif
