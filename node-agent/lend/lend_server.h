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
 * lend_server_run() polls the listener, the borrower's connection and two
 * pipes on one thread, which alone serves requests and owns the state.
 * Requests are served in the order they arrive, in batches: the loop reads
 * ahead whatever requests are waiting (up to LEND_SERVER_BATCH), then sends
 * all their replies with one writev, a READ's pages straight from the
 * store. It never waits for more input while it holds replies, and it
 * sends the replies before it changes pages that a pending READ reply
 * points at (a WRITE, TRIM or RELEASE after it).
 * It never waits for the rest of a request either: the borrower's sockets
 * are non-blocking, and a request that has only partly arrived (half a
 * header, a WRITE's header and part of its pages, part of a TLS record)
 * stays in its link (what arrived: the header in `cur`, a WRITE's pages
 * in the store) while the loop goes back to poll on everything, the
 * recall and stop pipe, the listener and the other link included. A link
 * still mid-request LEND_SERVER_STALL_MS after that request began is
 * dropped and logged (which link, how many bytes of what had arrived).
 * Replies are written whole: a borrower that leaves them unread while its
 * socket is full holds the loop (recall, stop, handshakes and the other
 * link wait) up to LEND_SERVER_STALL_MS, then is dropped.
 * Each new connection's handshake (TLS, HELLO, AUTH, WELCOME) runs on a
 * thread of its own, so that a peer that sends its AUTH one byte at a time
 * stalls nobody: at most LEND_HANDSHAKES handshakes at once (more are
 * closed at once and counted), each cut off when one overall deadline,
 * handshake_ms after the accept, passes. A finished handshake is handed
 * back through a pipe. One borrower connection at a time; a newly
 * authenticated one replaces the old (the borrower reconnected).
 *
 * The direct path (lend_proto.h, docs/lending.md): beside that lend
 * connection (then the CONTROL one: NOTICE, METER, RELEASE, BYE) the
 * borrower may hold one DATA connection, in NBD's transmission phase, that
 * its kernel's nbd.ko speaks itself. The same loop serves it, in the same
 * batches, with the same meter events as READ/WRITE/TRIM; a request
 * outside the contract gets an NBD error (EINVAL, ENOSPC for a WRITE past
 * the end, EIO once the pages are freed) and a broken stream closes that
 * connection alone. A new DATA connection replaces the old one; the recall
 * deadline and the end of the run close both.
 *
 * Plain TCP carries the borrower's pages in clear: it is allowed only on
 * a loopback address, unless `plaintext` says so (and it is logged).
 */
#ifndef RAMEX_LEND_SERVER_H
#define RAMEX_LEND_SERVER_H

#include <pthread.h>
#include <stdint.h>
#include <sys/uio.h>

#include "node-agent/lend/lend_awake.h"
#include "node-agent/lend/lend_qos.h"
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
	int handshake_ms;   /* bound on one connection's whole handshake */
	int plaintext;      /* allow plain TCP off loopback (logged) */
	int keep_awake;     /* lend_awake threads while serving (0: none) */
	int idle_poll;      /* lend_qos while serving: idle cores poll */
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

#define LEND_HANDSHAKES 8 /* handshakes under way at once */
/* How long one borrower connection may stay mid-request (or keep its
 * replies from being written) before it is dropped. The borrower's own
 * reply timeout is 5 s by default (LEND_CLIENT_REPLY_TIMEOUT_MS, and
 * nbd.ko's from --reply-timeout-ms): a request still incomplete after
 * that, or replies still unread, has been given up at its end already,
 * so a live borrower loses nothing; and 5 s carries even the largest
 * request (a 32 MiB NBD WRITE) at 7 MB/s. While a link is mid-request the
 * loop serves everything else; only a full socket under unread replies
 * holds it, for this long at most. */
#define LEND_SERVER_STALL_MS 5000
#define LEND_SERVER_BATCH 64        /* replies sent with one writev */
#define LEND_SERVER_IBUF  (64u << 10) /* requests read ahead */

/* One borrower connection and its requests read ahead: headers and small
 * payloads come out of ib; the bulk of a WRITE goes straight to the
 * store. */
struct lend_server_link {
	struct lend_conn conn; /* fd -1 when closed; non-blocking */
	uint32_t role;         /* enum lend_role_conn */
	uint8_t *ib;
	size_t ib_off, ib_len;
	/* the request being taken in: `got` of its bytes have arrived (its
	 * header into cur, a WRITE's pages into the store), of `want` (0
	 * until the header is whole); part_ms, when it was first found
	 * incomplete (0: between requests) */
	uint8_t cur[LEND_HDR_LEN];
	size_t got, want;
	int64_t part_ms;
};

/* One handshake under way, on its own thread. */
struct lend_handshake {
	struct lend_server *s;
	pthread_t thr;
	int used;           /* the thread runs or has not been joined */
	int watch;          /* a dup of its socket, to cut it at the deadline */
	int64_t deadline_ms;
	int ok, refused;    /* set by the thread before it reports */
	struct lend_conn c; /* the authenticated connection when ok */
	uint32_t role;      /* what its AUTH asked it to be */
};

struct lend_server {
	struct lend_server_config cfg;
	int lfd, port;
	int wake[2]; /* 'r' recall, 's' stop */
	struct lend_store store;
	struct lend_meter meter;
	/* the lend (or CONTROL) connection and the direct path's DATA one */
	struct lend_server_link lend, data;
	int recalling, released;
	int64_t deadline_ms;
	int64_t connections, auth_failures;
	int64_t handshakes_busy;     /* closed: LEND_HANDSHAKES under way */
	int64_t handshakes_timed_out; /* cut at the overall deadline */
	int done[2];                 /* handshake threads report here */
	struct lend_handshake hs[LEND_HANDSHAKES];
	/* replies not yet sent, to link ol: headers here, READ data
	 * straight from the store (no copy), all sent with one writev */
	struct lend_server_link *ol;
	uint8_t oh[LEND_SERVER_BATCH][LEND_HDR_LEN];
	uint8_t om[LEND_METER_WIRE]; /* a METER reply's payload */
	struct iovec ov[2 * LEND_SERVER_BATCH];
	int oh_n, ov_n;
	int out_reads; /* the batch points into the store */
	int64_t batches, batched_replies; /* for the log and tests */
	int64_t data_connections, nbd_errors; /* the direct path's */
	int64_t stalled; /* links dropped mid-request (LEND_SERVER_STALL_MS) */
	/* cores kept out of idle while a borrower's requests come (off
	 * unless cfg.keep_awake) */
	struct lend_awake awake;
	/* the CPU latency request held at 0 µs while a borrower's requests
	 * come (off unless cfg.idle_poll; off too when the device cannot
	 * be opened, which is logged) */
	struct lend_qos qos;
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

#endif
