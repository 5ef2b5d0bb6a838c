/*
 * events.h — the agent's reader of ramexd's event stream (GET /v1/events,
 * Server-Sent Events), so that a fill or a contract move is acted on at
 * once rather than at the next poll.
 *
 * Single-threaded on purpose: events_wait is the agent's sleep. It waits
 * up to a deadline on the stream's socket (poll) and returns early
 * when an event that concerns contracts arrived (fill, contract, or an
 * overflow that lost some), so the main loop reconciles right away. The
 * module owns one connection (node-agent/http1.h), the SSE parser and the
 * reconnect schedule: a stream that ends or fails is opened again after a
 * backoff (1 s doubling to 30 s, reset once a stream is accepted), with
 * Last-Event-ID so the exchange can replay what was missed. Every open is
 * signed like every other call (client_stream_open). While the stream is down
 * the caller falls back to polling (events_up says which).
 */
#ifndef RAMEX_AGENT_EVENTS_H
#define RAMEX_AGENT_EVENTS_H

#include "node-agent/client.h"

#include <stddef.h>
#include <stdint.h>

#define EVENTS_BACKOFF_MIN_MS 1000
#define EVENTS_BACKOFF_MAX_MS 30000

struct events_stream;

/* Borrows `cl` (for its URL, key and CA file). `wake_fd` (or -1) is a
 * descriptor that becomes readable when the wait must end early (the read
 * end of the signal handler's self-pipe); events_wait drains it. NULL when
 * out of memory. */
struct events_stream *events_new(struct client *cl, int wake_fd);
void events_free(struct events_stream *s);

/* Waits until `deadline_ms` (CLOCK_MONOTONIC, ms), until an event about
 * contracts arrived or until wake_fd is readable, (re)connecting as
 * needed. Returns how many such events arrived (0 otherwise). */
int events_wait(struct events_stream *s, int64_t deadline_ms);

/* 1 while a stream is open and accepted (200), else 0. */
int events_up(const struct events_stream *s);

/* Counters for the status file. */
int64_t events_received(const struct events_stream *s);
int64_t events_connects(const struct events_stream *s);

#endif
