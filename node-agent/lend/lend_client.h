/*
 * lend_client.h — the borrower's side of one lend contract.
 *
 * Connects to the lender, proves it holds the contract secret and checks
 * that the lender does too, then reads and writes pages synchronously (one
 * request in flight). Owns the connection, the borrower's meter and what it
 * heard from the lender: a recall notice may arrive between any two
 * replies. Once the connection fails the client is "lost" for good: the
 * lender's memory may be gone, so no later answer could be trusted to hold
 * the data written before (docs/lending.md, failure semantics).
 */
#ifndef RAMEX_LEND_CLIENT_H
#define RAMEX_LEND_CLIENT_H

#include <stdint.h>

#include "node-agent/lend/lend_conn.h"
#include "node-agent/lend/lend_meter.h"
#include "node-agent/lend/lend_proto.h"

struct lend_client {
	struct lend_conn conn;
	uint64_t contract;
	int64_t pages; /* from the lender's WELCOME */
	uint64_t next_handle;
	int lost;             /* the connection failed; every call fails */
	int released;         /* RELEASE was acknowledged */
	int notice;           /* a recall notice arrived */
	int64_t notice_ms;    /* its period, ms from its arrival */
	int64_t notice_at_ms; /* when it arrived (lend_now_ms) */
	uint32_t last_error;  /* enum lend_err of the last refused request */
	struct lend_meter meter;
	char err[240];
};

/*
 * Connects and authenticates. tls: a client context (lend_tls_client_ctx)
 * or NULL. Returns 0, or -1 with c->err saying why (refusals name the
 * lender's reason: wrong secret, another contract, ...).
 */
int lend_client_connect(struct lend_client *c, const char *host, int port,
                        SSL_CTX *tls, uint64_t contract,
                        const uint8_t secret[LEND_SECRET_LEN], int timeout_ms);

/* count may exceed LEND_MAX_REQ_PAGES: the call splits it. Each returns
 * 0, or -1 with c->err (and c->last_error when the lender refused). */
int lend_client_read(struct lend_client *c, uint64_t page, uint32_t count,
                     void *buf);
int lend_client_write(struct lend_client *c, uint64_t page, uint32_t count,
                      const void *buf);
int lend_client_trim(struct lend_client *c, uint64_t page, uint32_t count);
int lend_client_flush(struct lend_client *c);
/* The lender's meter, for reconciliation checks. */
int lend_client_lender_meter(struct lend_client *c,
                             struct lend_meter_report *r);
/* The borrower has moved its pages back: the lender may free them. */
int lend_client_release(struct lend_client *c);

/* Reads a frame that arrived while no request was outstanding (a NOTICE).
 * Call when the fd is readable or lend_conn_pending > 0. Returns 1 when a
 * notice was read, 0 when nothing was waiting, -1 when the link failed. */
int lend_client_poll(struct lend_client *c);

/* The borrower's meter now. */
struct lend_meter_report lend_client_report(struct lend_client *c);
/* Sends BYE when still connected and frees everything. */
void lend_client_close(struct lend_client *c);

#endif
