/*
 * http_guard.h — what keeps slow or greedy clients from taking ramexd's HTTP
 * connections away from the rest (docs/operations.md, "Slow and greedy
 * clients"):
 *   - the most connections one client address may hold at once
 *     (max_connections_per_address);
 *   - a deadline for each request's head and body to arrive in full
 *     (request_timeout_ms), counted from the connection's accept, or, for
 *     the next request of a kept-alive connection, from the previous answer
 *     plus the idle allowance (connection_timeout_s). libmicrohttpd's own
 *     timeout starts again with every byte, so a client that sends one
 *     header line every few seconds would otherwise hold its connection for
 *     ever (slowloris).
 *
 * Not libmicrohttpd's MHD_OPTION_PER_IP_CONNECTION_LIMIT: it turns a
 * connection away without a word to ramexd (nothing to count or log), and
 * libmicrohttpd 0.9.75 has no deadline that a trickle of bytes does not
 * push back (MHD_OPTION_CONNECTION_TIMEOUT is the idle timeout).
 *
 * The module owns a record of each open connection, the table of the open
 * connections per address, and the sweep thread that closes the connections
 * past their deadline: it answers 408 (problem+json) where no other answer
 * can be under way, and shuts the socket down, which libmicrohttpd sees as
 * the client gone and closes. http.c calls it from libmicrohttpd's
 * callbacks; it knows nothing else of libmicrohttpd.
 *
 * A request moves through phases (HEAD: its head is coming; HEADERS: the
 * head is in; BODY: some of the body too; SERVING: all of it is in, the
 * deadline no longer applies) and back to HEAD when it is answered. Each
 * change is one compare-and-swap on the connection's record, against the
 * sweep's own (to CLOSING), so a request that completes at its deadline is
 * either served or closed, never both. The cost on the order path is those
 * compare-and-swaps on a record no other thread writes, and one clock read
 * when a request is answered.
 */
#ifndef RAMEX_HTTP_GUARD_H
#define RAMEX_HTTP_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct http_guard;
struct http_guard_conn;

struct http_guard_opts {
	int per_address;  /* most connections of one address; 0: no limit */
	int deadline_ms;  /* a request's head and body in full; 0: none */
	int keepalive_ms; /* idle allowance between two requests */
	int capacity;     /* most connections open at once (the table's size) */
};

struct http_guard *http_guard_start(const struct http_guard_opts *o, char *err,
                                    size_t errlen);
/* After the HTTP daemon stopped (no callback may come any more). */
void http_guard_stop(struct http_guard *g);

/* Whether `addr` may open one more connection; a refusal is counted in
 * /metrics and logged (at most once a second). */
bool http_guard_admit(struct http_guard *g, const struct sockaddr *addr);
/* At max_connections, a new connection may take the place of the one that
 * has waited longest for its request (since its accept, or its previous
 * answer), if that is at least a tenth of the deadline (at most 100 ms),
 * the time for a request sent at once to come in: it is ended
 * as a late one is (408), and the new one let in. Slow clients that
 * reconnect as fast as they are closed would otherwise keep every
 * connection, one deadline after another; a client that sends its request
 * at once is never the one that waited longest. true: one was ended (and
 * counted, and logged at most once a second); false: none waits so long,
 * or there is no deadline. */
bool http_guard_evict(struct http_guard *g);
/* A connection was opened (socket fd, peer address): its record, or NULL
 * when out of memory (the socket is then shut down, and libmicrohttpd
 * closes it). */
struct http_guard_conn *http_guard_opened(struct http_guard *g, int fd,
                                          const struct sockaddr *addr);
/* The connection is closing (before its socket is closed); c may be NULL. */
void http_guard_closed(struct http_guard *g, struct http_guard_conn *c);

/* The phases of a request, on the connection's HTTP thread; c may be NULL
 * (then nothing is checked). false: the deadline passed and the sweep is
 * closing the connection: refuse the request (the access handler returns
 * MHD_NO). */
bool http_guard_head_in(struct http_guard_conn *c);
void http_guard_body_in(struct http_guard_conn *c);
bool http_guard_serving(struct http_guard_conn *c);
/* The request was answered (or ended): the next one's deadline starts. */
void http_guard_done(struct http_guard_conn *c);

#endif
