/*
 * contracts.h — a contract's moves in PostgreSQL, and the timer that
 * applies its deadlines.
 *
 * The state machine is exchange/core/contract.h (pure); this module is its
 * edge. contracts_move loads a contract's row (the *_ns columns, exactly as
 * contract_apply sees them) under SELECT ... FOR UPDATE, checks that the
 * caller is the party the event needs, applies the command, writes the new
 * state and one contract_transitions row in the same transaction, commits,
 * and only then publishes a `contract` event to both parties. A retry of a
 * move already made by the same event changes nothing and is reported as
 * such, so callers may resend freely.
 *
 * The timer (contracts_timer_start) is one thread with its own connection:
 * every tick it finds the live contracts whose deadline has passed (delivery
 * late, notice over, term over) and applies each deadline's event at the
 * deadline's own instant, so a contract ends exactly when its rules say even
 * when the timer runs late. It reconnects by itself when PostgreSQL comes
 * back. Once a day it also makes the history's month partitions ahead
 * (db_history_ahead). The module owns the timer thread and its connection,
 * nothing else.
 */
#ifndef RAMEX_CONTRACTS_H
#define RAMEX_CONTRACTS_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

#include "common/units.h"
#include "exchange/core/contract.h"

struct events;

/*
 * The public view of a contract: what GET /v1/contracts/{id}, the move
 * calls and the `contract` events show. Alias `c` is contracts, `m` its
 * market; callers add WHERE clauses.
 */
#define CONTRACTS_VIEW                                                         \
	"SELECT c.id, c.trade_id, m.name AS market, c.product, c.perm_year, "  \
	"c.buyer_id, c.seller_id, c.delivery, c.pages, c.price, c.state, "     \
	"c.breach_penalty, c.notice_period_s, c.recall_notice_ns, "            \
	"c.created_ns, c.deliver_by_ns, c.term_end_ns, c.delivered_ns, "       \
	"c.notice_end_ns, c.ended_ns, c.changed_ns, c.deliver_by::text, "      \
	"c.term_end::text, c.created_at::text, c.updated_at::text, (SELECT "  \
	"name FROM accounts WHERE id = c.buyer_id) AS buyer_name, (SELECT "    \
	"name FROM accounts WHERE id = c.seller_id) AS seller_name FROM "      \
	"contracts c JOIN markets m ON m.id = c.market_id "

/* The public view of a transition (columns of contract_transitions). */
#define CONTRACTS_TRANSITION_COLS                                              \
	"id, contract_id, from_state, to_state, event, actor, actor_account, " \
	"at_ns, why, principal, recorded_at::text"
#define CONTRACTS_TRANSITION_VIEW                                              \
	"SELECT " CONTRACTS_TRANSITION_COLS " FROM contract_transitions "

/* Who asks for a move. role 0 is ramexd itself (the timer). */
struct contracts_caller {
	unsigned role;         /* one AUTH_* bit (auth.h), or 0 */
	int64_t account, team; /* the principal's account and team, 0: none */
	const char *principal; /* "tok:ID" or "node:KEY"; NULL for ramexd */
};

enum contracts_status {
	CONTRACTS_MOVED = 0, /* moved: body has the contract and transition */
	CONTRACTS_UNCHANGED, /* the same event made this move already */
	CONTRACTS_NOT_FOUND, /* no such contract */
	CONTRACTS_FORBIDDEN, /* the caller is not the party this event needs */
	CONTRACTS_REFUSED,   /* the state machine refused: see reject */
	CONTRACTS_UNAVAILABLE, /* the database connection broke */
	CONTRACTS_FAILED,      /* a query failed: see msg */
};

struct contracts_result {
	enum contracts_status status;
	enum contract_reject reject; /* CONTRACTS_REFUSED */
	char msg[256];               /* why, for everything but MOVED */
	json_t *body; /* MOVED, UNCHANGED: the contract as CONTRACTS_VIEW
	                 shows it, with the move in "transition"; the
	                 caller owns it */
};

/*
 * Applies `event` to contract `id` for `who` at `now`, in one transaction
 * on `c`, and publishes the move on `ev` (may be NULL) after the commit.
 * `note` (may be NULL) is kept in the transition's why. For ramexd itself
 * (role 0) now == 0 means "at the deadline of `event`", and a contract whose
 * due deadline is no longer `event` is left alone (CONTRACTS_UNCHANGED).
 * Returns out->status.
 */
enum contracts_status contracts_move(PGconn *c, struct events *ev,
                                     const struct contracts_caller *who,
                                     int64_t id, enum contract_event event,
                                     const char *note, rx_time_ns now,
                                     struct contracts_result *out);

/* The contract of one row of a query that selected CONTRACTS_LOAD_COLS
 * (in that order, from column `col`). 0, or -1 with err. */
#define CONTRACTS_LOAD_COLS                                                    \
	"c.id, c.trade_id, c.market_id, c.product, c.perm_year, c.delivery, "  \
	"c.buyer_id, c.seller_id, c.pages, c.price, c.breach_penalty, "        \
	"c.recall_notice_ns, c.state, c.created_ns, c.deliver_by_ns, "         \
	"c.term_end_ns, c.delivered_ns, c.notice_end_ns, c.ended_ns, "         \
	"c.changed_ns"
#define CONTRACTS_LOAD_NCOLS 20
int contracts_load(const PGresult *r, int row, int col, struct contract *out,
                   char *err, size_t errlen);

/* The wall clock in nanoseconds since the epoch. */
rx_time_ns contracts_now(void);

/* The timer's question each tick: the contracts whose deadline is at or
 * before $1 (ns), earliest first, with the event that deadline applies. It
 * is served by the index contracts_due (schema/0011_contract_deadlines.sql),
 * whose expression and predicate it repeats word for word; test_contracts
 * checks the plan. */
#define CONTRACTS_DUE_AT                                                       \
	"(CASE state WHEN 'pending_delivery' THEN deliver_by_ns WHEN "         \
	"'recalling' THEN notice_end_ns ELSE term_end_ns END)"
#define CONTRACTS_DUE_SQL                                                      \
	"SELECT id, CASE state WHEN 'pending_delivery' THEN 'delivery_late' "  \
	"WHEN 'recalling' THEN 'notice_ended' ELSE 'term_ended' END FROM "     \
	"contracts WHERE (state IN ('pending_delivery', 'recalling') OR "      \
	"(state = 'active' AND term_end_ns > 0)) AND " CONTRACTS_DUE_AT        \
	" <= $1 ORDER BY " CONTRACTS_DUE_AT ", id LIMIT 1000"

struct contracts_timer;

/* Starts the deadline timer: every tick_ms (>= 1) on its own connection
 * to `conninfo`. NULL with err when the thread cannot start (a database
 * that is away is not an error: the timer retries every tick). */
struct contracts_timer *contracts_timer_start(const char *conninfo, int tick_ms,
                                              struct events *ev, char *err,
                                              size_t errlen);
/* Stops the thread after the move in progress, closes its connection. */
void contracts_timer_stop(struct contracts_timer *t);

#endif
