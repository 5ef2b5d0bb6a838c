/*
 * events.h — the event stream behind /v1/events (Server-Sent Events).
 *
 * The writer publishes an event after the batch that caused it committed:
 * fills, order changes (cancelled, expired, reduced) and contracts created.
 * Each event names the one or two accounts it concerns and their teams, so
 * that a subscriber sees only what its role may see: a node its own account,
 * a trader its team's nodes, admin everything, the operator every fill and
 * contract but only its own account's orders (as GET /v1/orders). Events stay
 * in a ring of EVENTS_RING entries; a subscriber that reconnects with
 * Last-Event-ID gets what it missed if the ring still holds it. Reading
 * never blocks: a subscriber is woken (its wake function) when an event it
 * may see is published, when its keep-alive is due (a ticker thread checks
 * once a second) and when the stream ends. The module owns the ring, the
 * subscribers and the ticker; it does no network I/O itself.
 *
 * Several ramexd on one database (`shared = 1`) share one stream through
 * PostgreSQL (events_db.h): events then reach the ring only through
 * events_put, with the id the database gave them, the same on every
 * instance, and what is published goes to the database instead
 * (events_set_outbox).
 */
#ifndef RAMEX_EVENTS_H
#define RAMEX_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EVENTS_RING 8192

struct events;
struct events_sub;

struct events *events_new(int max_clients, int keepalive_s);
void events_free(struct events *e);

/* Publishes one event; `data` is a JSON text (copied). acct_b/team_b may
 * be 0. */
void events_publish(struct events *e, const char *type, int64_t acct_a,
                    int64_t team_a, int64_t acct_b, int64_t team_b,
                    const char *data);

/* Puts an event the database holds (events_db.h) into the ring with its
 * id: ids only grow (an older one is ignored), and a gap is left empty. */
void events_put(struct events *e, int64_t id, const char *type,
                int64_t acct_a, int64_t team_a, int64_t acct_b,
                int64_t team_b, const char *data);
/* From now on events_publish hands each event to out(arg, ...) (the
 * database's stream) instead of the ring. Set once, before serving. */
typedef void events_out_fn(void *arg, const char *type, int64_t acct_a,
                           int64_t team_a, int64_t acct_b, int64_t team_b,
                           const char *data);
void events_set_outbox(struct events *e, events_out_fn *out, void *arg);
/* Whether events go through the database (an outbox is set): the writer
 * then writes its batches' events in their own transactions. */
bool events_shared(const struct events *e);

/* A subscriber with AUTH_* role `role`; sees everything when role is admin,
 * every event but other accounts' orders when operator (its `account`),
 * else events of `account` (node) or `team` (trader).
 * `last_id` is the Last-Event-ID the client sent, or -1: the stream goes on
 * after it, or from now when the ring has no such id yet. Shared, an id up
 * to EVENTS_RING ahead of this instance is taken as one another instance
 * showed first (this one is about to read it). NULL when too many
 * subscribers are connected. */
struct events_sub *events_subscribe(struct events *e, unsigned role,
                                    int64_t account, int64_t team,
                                    int64_t last_id);
/* Who to tell that there may be something to read: wake(arg) is called
 * (under the module's lock: it must be quick and must not call back into
 * this module) until events_unsubscribe. */
void events_set_wake(struct events_sub *s, void (*wake)(void *arg), void *arg);
/* The keep-alive interval of this stream, 1..EVENTS_KEEPALIVE_MAX_S
 * seconds, instead of the server's (events_new): a page that shows whether
 * it is live asks for a short one, a machine's agent keeps the long one.
 * The stream's first comment says the interval ("keep-alive every N s"). */
#define EVENTS_KEEPALIVE_MAX_S 300
void events_set_keepalive(struct events_sub *s, int keepalive_s);
/* Writes the SSE text of the next visible event (or a keep-alive comment,
 * when one is due) into buf; returns the bytes written, 0 when there is
 * nothing now, or -1 when the stream is over (shutdown). */
long events_poll(struct events_sub *s, char *buf, size_t max);
void events_unsubscribe(struct events_sub *s);

/* Ends every stream (graceful shutdown): wakes them all. */
void events_close(struct events *e);

#endif
