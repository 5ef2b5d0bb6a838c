/*
 * metrics.h — ramexd's counters, served as Prometheus text on /metrics.
 *
 * Counters are process-wide atomics updated from the HTTP threads and the
 * writer; reading them is lock-free. The module owns the counters and the
 * text format, nothing else.
 */
#ifndef RAMEX_METRICS_H
#define RAMEX_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct http_route;

/* Names the routes whose requests are counted (the route table). */
void metrics_init(const struct http_route *routes, size_t n);
/* One finished request; route -1 when no route matched. */
void metrics_http(int route, int status, int64_t ns);
/* One committed batch of `commands`, whose commit took `ns`. */
void metrics_batch(int commands, int64_t ns);
void metrics_orders(int accepted, int rejected, int trades);
void metrics_db_up(int up);
/* several instances (owner.h): books held, markets taken, batches fenced */
void metrics_markets_served(int n);
void metrics_market_taken(void);
void metrics_batch_fenced(void);
void metrics_sse_clients(int delta);
/* An HTTP connection opened (+1) or closed (-1); one refused at the limit. */
void metrics_http_connections(int delta);
void metrics_http_refused(void);
/* One refused at max_connections_per_address; n closed at their request
 * deadline (http_guard.h). */
void metrics_http_refused_per_address(void);
void metrics_http_deadline_closed(int n);
/* One waiting connection closed to let a new one in at max_connections. */
void metrics_http_evicted(void);
/* A query for credentials (auth.c). */
void metrics_auth_query(void);
/* Idempotency keys and client order ids of a batch: looked up in
 * PostgreSQL, or not, since the writer's key filter knew them to be new. */
void metrics_idem_keys(int looked_up, int filtered);
/* The key filter's keys and bytes (gauges), in two parts: those written
 * since ramexd started (loaded false), and those of the database's history,
 * set once they are loaded (until then every key is looked up). */
void metrics_key_filter(bool loaded, uint64_t keys, uint64_t bytes);
/* Batches run again because another ramexd on the database committed one
 * of their idempotency keys or client order ids first (writer.c). */
void metrics_key_races(int n);
/* Events read from PostgreSQL's shared stream (events_db.c). */
void metrics_events_read(int n);
/* A group of nonces written to PostgreSQL's shared store (auth_nonces.c):
 * how many, and whether it was written. */
void metrics_nonce_group(int n, bool ok);

/* Contracts the last billing run left unbilled (billing.c: the
 * arithmetic or an invoice refused them; each is logged "contract not
 * billed" and stays queued): a gauge, non-zero until a person sees to them. */
void metrics_billing_unbilled(int64_t n);

/* Writes the exposition text into a malloc'd string; the caller frees. */
char *metrics_render(size_t *len);

#endif
