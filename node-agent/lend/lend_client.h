/*
 * lend_client.h — the borrower's side of one lend contract.
 *
 * Connects to the lender, proves it holds the contract secret and checks
 * that the lender does too, then moves pages with many requests in flight:
 * lend_client_submit sends a request without waiting for its reply, and
 * the replies, read whenever they arrive (lend_client_pump), are matched to
 * their requests by handle, in whatever order they come. At most
 * LEND_WINDOW_PAGES pages are in flight, so that after a lost link the
 * lender's meter is at most that far ahead of the borrower's
 * (lend_meter_reconcile). The synchronous calls (read, write, ...) are
 * built on the same machinery and pipeline their own pieces.
 *
 * Owns the connection (non-blocking once authenticated: it sends and
 * reads replies in the same loop, so neither direction can fill up and
 * stall the other), the table of requests in flight, the borrower's meter
 * and what it heard from the lender: a recall notice may arrive between
 * any two replies. Once the connection fails the client is "lost" for
 * good, and every request in flight completes with LEND_E_LOST: the
 * lender's memory may be gone, so no later answer could be trusted to hold
 * the data written before (docs/lending.md, failure semantics). A lender
 * that stops answering without closing fails the same way once the oldest
 * request in flight has waited reply_timeout_ms: no wait of this module,
 * for a reply, the rest of its data, or room to send, lasts longer.
 */
#ifndef RAMEX_LEND_CLIENT_H
#define RAMEX_LEND_CLIENT_H

#include <stdint.h>
#include <sys/uio.h>

#include "node-agent/lend/lend_conn.h"
#include "node-agent/lend/lend_meter.h"
#include "node-agent/lend/lend_proto.h"

#define LEND_CLIENT_WINDOW LEND_WINDOW_PAGES /* pages in flight */
#define LEND_CLIENT_SLOTS  256                /* requests in flight */
#define LEND_CLIENT_CHUNK  64 /* pages per request when a call splits */
#define LEND_E_LOST        0x100 /* completion: the link failed (not wire) */
#define LEND_CLIENT_RBUF   (64u << 10) /* replies read ahead */
/* A request unanswered this long means the lender is lost: one that stops
 * answering without closing the connection would otherwise hold the
 * borrower's swap forever (the kernel's nbd driver waits without end). */
#define LEND_CLIENT_REPLY_TIMEOUT_MS 5000

/* Called once per submitted request: error is LEND_OK, the lender's
 * refusal (enum lend_err), or LEND_E_LOST. */
typedef void (*lend_client_done_fn)(void *arg, uint64_t tag, uint32_t error);

/* One request in flight. */
struct lend_client_req {
	uint64_t handle; /* 0: the slot is free */
	uint16_t type;
	uint64_t page;
	uint32_t count;
	const struct iovec *iov; /* READ: where the data goes; METER: too */
	int iovcnt;
	struct iovec one; /* iov when the caller gave one buffer */
	lend_client_done_fn done;
	void *arg;
	uint64_t tag;
	int64_t
	    sent_ms; /* clock_mono_ms when sent (held ones: when uncorked) */
	uint8_t hdr[LEND_HDR_LEN]; /* its header, until sent */
};

#define LEND_CLIENT_OUTV 512 /* iovecs held while corked */

struct lend_client {
	struct lend_conn conn;
	uint64_t contract;
	int64_t pages; /* from the lender's WELCOME */
	uint64_t next_handle;
	int lost;             /* the connection failed; every call fails */
	int released;         /* RELEASE was acknowledged */
	int notice;           /* a recall notice arrived */
	int64_t notice_ms;    /* its period, ms from its arrival */
	int64_t notice_at_ms; /* when it arrived (clock_mono_ms) */
	uint32_t last_error;  /* enum lend_err of the last refused request */
	struct lend_meter meter;
	struct lend_client_req req[LEND_CLIENT_SLOTS]; /* by handle % SLOTS */
	int inflight;                 /* requests in flight */
	int64_t inflight_pages;       /* their pages, <= LEND_CLIENT_WINDOW */
	uint64_t oldest; /* no handle below it is in flight */
	/* corked: requests are held here and go out with one writev at
	 * lend_client_uncork (or when full, or before any wait) */
	int corked, out_n, nheld;
	struct iovec out[LEND_CLIENT_OUTV];
	/* the slots of the held requests: their reply clock starts when
	 * they are sent, not when held */
	int held[LEND_CLIENT_SLOTS];
	/* the bound on a reply's wait (LEND_CLIENT_REPLY_TIMEOUT_MS after
	 * connect; the caller may change it): the oldest request in flight
	 * unanswered this long loses the lender, as a closed link would */
	int64_t reply_timeout_ms;
	/* replies read ahead: one recv takes many small ones; a long
	 * payload's rest goes straight where it belongs */
	uint8_t *rb;
	size_t rb_off, rb_len;
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
/* The same over a stream already connected (fd is taken over, closed on
 * failure): the handshake alone. */
int lend_client_open(struct lend_client *c, int fd, SSL_CTX *tls,
                     uint64_t contract, const uint8_t secret[LEND_SECRET_LEN],
                     int timeout_ms);

/*
 * The same for one connection of the direct path (role: enum
 * lend_role_conn; LEND_CONN_LEND is the two calls above). A lender
 * without roles is refused before anything is sent, with a message that
 * says to upgrade it or to leave the direct path off.
 */
int lend_client_connect_role(struct lend_client *c, const char *host,
                             int port, SSL_CTX *tls, uint64_t contract,
                             const uint8_t secret[LEND_SECRET_LEN],
                             int timeout_ms, uint32_t role);
int lend_client_open_role(struct lend_client *c, int fd, SSL_CTX *tls,
                          uint64_t contract,
                          const uint8_t secret[LEND_SECRET_LEN],
                          int timeout_ms, uint32_t role);
/*
 * A DATA connection after its handshake: the socket, blocking again, for
 * an NBD speaker (nbd.ko, the bench); c is closed and keeps nothing
 * (c->pages stays). Plain TCP only: returns -1 under TLS (the kernel's
 * NBD client cannot speak it) or when c is lost.
 */
int lend_client_take_fd(struct lend_client *c);

/*
 * Sends one request (count <= LEND_MAX_REQ_PAGES; 0 for FLUSH, METER,
 * RELEASE) and returns without its reply. iov: a WRITE's data, or where a
 * READ's pages (or METER's LEND_METER_WIRE bytes) go; it must stay valid
 * until done is called. Waits, reading replies meanwhile, while the window
 * or the table is full. Returns 0 when the request is in flight (done is
 * then called exactly once, maybe before this returns), or -1 when the
 * lender is lost (done is not called).
 */
int lend_client_submit(struct lend_client *c, uint16_t type, uint64_t page,
                       uint32_t count, const struct iovec *iov, int iovcnt,
                       lend_client_done_fn done, void *arg, uint64_t tag);
/* Between cork and uncork, submitted requests are held and sent together
 * (one system call for many requests) when uncorked, when the held ones
 * fill LEND_CLIENT_OUTV iovecs, or before any wait for a reply. Uncork
 * returns 0, or -1 when the lender is lost. */
void lend_client_cork(struct lend_client *c);
int lend_client_uncork(struct lend_client *c);

/*
 * Reads every reply (and notice) that has arrived and completes its
 * request; with wait_ms != 0 first waits up to wait_ms (-1: until one
 * frame) for something to arrive. Returns the frames taken, or -1 when the
 * link failed (every request in flight then completed with LEND_E_LOST).
 */
int lend_client_pump(struct lend_client *c, int wait_ms);

/* count may exceed LEND_MAX_REQ_PAGES: the call splits it (pieces of
 * LEND_CLIENT_CHUNK pages, in flight together) and waits for all. Each
 * returns 0, or -1 with c->err (and c->last_error when the lender
 * refused). */
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

/* When the oldest request in flight times out (clock_mono_ms clock), or -1
 * when nothing is in flight: a caller that polls the fd itself waits no
 * longer than this and then calls lend_client_expire. */
int64_t lend_client_deadline_ms(struct lend_client *c);
/* Loses the lender when that deadline has passed (every request in flight
 * completes with LEND_E_LOST). Returns -1 when lost, else 0. */
int lend_client_expire(struct lend_client *c, int64_t now_ms);

/* Reads the frames that have arrived (lend_client_pump without waiting).
 * Call when the fd is readable or lend_conn_pending > 0. Returns 1 when a
 * notice was read, 0 when none was, -1 when the link failed. */
int lend_client_poll(struct lend_client *c);

/* The borrower's meter now. */
struct lend_meter_report lend_client_report(struct lend_client *c);
/* Sends BYE when still connected and frees everything. */
void lend_client_close(struct lend_client *c);

#endif
