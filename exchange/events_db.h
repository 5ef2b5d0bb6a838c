/*
 * events_db.h — the event stream shared by several ramexd on one database
 * (`shared = 1`), through PostgreSQL's events table (0018_shared_state.sql).
 *
 * Who writes: each writer batch writes its events (fills, order changes,
 * contracts created) with EVENTS_DB_INSERT_SQL in the batch's own
 * transaction, so an event exists iff its batch committed; so does a
 * contract move or recall (events_db_write, in its transaction). Events
 * published with events_publish after their own transaction (automation
 * changes) go to this module's outbox and are written by its thread a
 * moment later. Ids are dense and in commit
 * order on every instance: the statement takes them from event_head, whose
 * row stays locked until the transaction ends, so the writers of events
 * commit one after another.
 *
 * Who reads: a thread per instance, LISTENing on `ramex_events` (a trigger
 * NOTIFYs once per transaction that wrote events), reads what is new in id
 * order and puts it into the instance's ring (events_put), from where every
 * /v1/events stream of that instance is served; at start it reads the last
 * EVENTS_RING events, so Last-Event-ID resumes on any instance. It also
 * deletes what is older than EVENTS_DB_KEEP events, every
 * EVENTS_DB_PRUNE_S. When PostgreSQL is away it reconnects and reads on
 * from its last id: nothing is skipped.
 */
#ifndef RAMEX_EVENTS_DB_H
#define RAMEX_EVENTS_DB_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

#include "exchange/events.h"

/* The events table keeps this many of the newest events (>= the ring:
 * an instance that starts, or falls behind, reads them from there). */
#define EVENTS_DB_KEEP    65536
#define EVENTS_DB_PRUNE_S 10

/* Writes events whose columns are six arrays (type, acct_a, team_a,
 * acct_b, team_b, data), in array order, with the next ids of event_head. */
#define EVENTS_DB_INSERT_SQL                                                   \
	"WITH h AS (UPDATE event_head SET last = last + "                      \
	"cardinality($1::text[]) RETURNING last) INSERT INTO events (id, "     \
	"type, acct_a, team_a, acct_b, team_b, data) SELECT h.last - "         \
	"cardinality($1::text[]) + k.n, k.t, k.a, k.ta, k.b, k.tb, k.d FROM "  \
	"h, unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], "     \
	"$5::bigint[], $6::text[]) WITH ORDINALITY AS k(t, a, ta, b, tb, d, "  \
	"n)"

struct events_db;

/* Writes one event in c's open transaction, for a move whose event must
 * exist iff the move commits (contracts.c); the instances read it once it
 * does. 0, or -1 with err. */
int events_db_write(PGconn *c, const char *type, int64_t acct_a, int64_t team_a,
                    int64_t acct_b, int64_t team_b, const char *data, char *err,
                    size_t errlen);

/* Connects, reads the newest events into e's ring, sets e's outbox, and
 * starts the thread. NULL with err when it cannot. */
struct events_db *events_db_start(struct events *e, const char *conninfo,
                                  char *err, size_t errlen);
/* Writes what the outbox still holds (best effort), stops the thread. */
void events_db_stop(struct events_db *d);

#endif
