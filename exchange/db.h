/*
 * db.h — ramexd's PostgreSQL connections: opening them, checking that the
 * database is durable, and a small pool for the query handlers.
 *
 * The writer thread has a connection of its own (writer.h); everything else
 * borrows one from the pool. A connection that fails is reset the next time
 * it is borrowed, so ramexd reconnects by itself when PostgreSQL comes back;
 * while it is away, db_acquire returns NULL and the handler answers 503.
 */
#ifndef RAMEX_DB_H
#define RAMEX_DB_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Opens a connection (client_min_messages=warning, synchronous_commit=on,
 * UTC). NULL with a message in err when it cannot. A conninfo without
 * connect_timeout (and no PGCONNECT_TIMEOUT) gets DB_CONNECT_TIMEOUT_S:
 * a server that accepts and never answers fails the attempt then. */
#define DB_CONNECT_TIMEOUT_S "5"
PGconn *db_connect(const char *conninfo, char *err, size_t errlen);

/* Refuses a database that does not sync: fsync must be on and
 * synchronous_commit not off, as a new session of this database and role
 * would get them (pg_settings.reset_val). Returns 0 or -1 with a message. */
int db_check_durable(PGconn *c, char *err, size_t errlen);

struct db_pool;
struct db_pool *db_pool_new(const char *conninfo, int n);
/* The same, its sessions read-only (default_transaction_read_only): a
 * pool for reports, which must never write (a replica refuses it anyway,
 * a primary named there must refuse it too). */
struct db_pool *db_pool_new_readonly(const char *conninfo, int n);
void db_pool_free(struct db_pool *p);
/* Borrows a working connection, waiting while all are in use; NULL when
 * PostgreSQL cannot be reached now. */
PGconn *db_acquire(struct db_pool *p);
/* The same, waiting at most timeout_ms for a free connection (-1: for
 * ever); NULL when none came free in time, and then *busy (when busy is
 * not NULL) is true. */
PGconn *db_acquire_within(struct db_pool *p, int timeout_ms, bool *busy);
/* Gives it back; a broken one is reconnected on its next use. */
void db_release(struct db_pool *p, PGconn *c);
/* Whether the last connection attempt or query of the pool succeeded. */
bool db_pool_up(struct db_pool *p);

/* PQexecParams with text parameters; the result or NULL (cleared) when
 * the status is not `want`; then err says why. */
PGresult *db_exec(PGconn *c, ExecStatusType want, const char *sql, int n,
                  const char *const *params, char *err, size_t errlen);

/* The same, also copying the SQLSTATE of a failure into state ("" when
 * none), e.g. "23505" for a unique violation. */
PGresult *db_exec_state(PGconn *c, ExecStatusType want, const char *sql, int n,
                        const char *const *params, char *err, size_t errlen,
                        char state[6]);

/* Why a statement failed: its SQLSTATE ("" when the connection broke
 * first), the constraint it broke (when one did), and PostgreSQL's text.
 * The text is for the log only; a client gets the exchange's own words
 * (handlers_db_refused). */
struct db_fail {
	char state[6];
	char constraint[64];
	char text[512];
};

/* db_exec, telling why a failure failed. */
PGresult *db_exec_fail(PGconn *c, ExecStatusType want, const char *sql, int n,
                       const char *const *params, struct db_fail *f);

/* SELECT 1 on c, waiting at most timeout_ms for the answer: 0, -1 (it
 * failed, or the connection broke) or -2 (no answer in time: a server
 * that hangs). After -2 the connection is shut down, broken for
 * db_broken and made again by the pool. err says why. */
int db_ping(PGconn *c, int timeout_ms, char *err, size_t errlen);

/* True when the connection itself is broken (not a mere SQL error). */
bool db_broken(PGconn *c);
/* Whether an idle connection (no query under way) still works, without
 * blocking: reads what the server sent meanwhile, so that one it closed
 * (a restart of PostgreSQL: FATAL, then end of file) is found dead here
 * rather than by the next query. Costs a poll(2) when nothing came. */
bool db_alive(PGconn *c);
/* Whether a failure with this SQLSTATE means PostgreSQL went away rather
 * than a fault of the statement: class 08 (connection exception), 57
 * (operator intervention: admin or crash shutdown, cannot connect now) and
 * 53 (insufficient resources), or no SQLSTATE at all (NULL or "": an error
 * libpq made itself, e.g. "server closed the connection"). Such a failure
 * answers 503, any other 500. */
bool db_state_lost(const char *sqlstate);
/* The same for a failed result r of c (r may be NULL): true when c is
 * broken or r's SQLSTATE says so. */
bool db_result_lost(PGconn *c, const PGresult *r);

int64_t db_int(const PGresult *r, int row, int col);

/* How many months ahead the history partitions are made (schema/0015). */
#define DB_HISTORY_AHEAD_MONTHS 3
/* Makes the month partitions of trades, usage reports and postings for
 * this month and the DB_HISTORY_AHEAD_MONTHS after it, those not made yet
 * (ramex_history_ahead, schema/0015). Returns how many it made, or -1 with
 * a message; a month without its partition still takes rows (the default
 * partition), so a failure here is worth a warning, not a stop. */
int db_history_ahead(PGconn *c, char *err, size_t errlen);

/* The rows of r as a JSON array of objects named by the columns: int2/4/8
 * become integers, bool booleans, json values, NULL null, the rest strings.
 * NULL when out of memory. */
struct json_t;
struct json_t *db_rows_json(const PGresult *r);

#endif
