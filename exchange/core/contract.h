/*
 * contract.h — the contract made by a trade, and the state machine that
 * moves it from delivery to its end.
 *
 * A trade becomes a contract (contract_open): the buyer's kind decides the
 * delivery (an operator's bid buys pages offline, a node's bid borrows them:
 * lend), the market's terms are copied into it (the delivery window, the
 * recall notice, the breach penalty) so a later change of the market never
 * changes a running contract. Afterwards the contract only moves through
 * contract_apply, a pure function of (contract, command) that either moves
 * it and describes the move in a struct contract_transition — who, when,
 * why; the caller stores that row and pushes it on the event stream in the
 * same transaction as the new state — or refuses with a reason and changes
 * nothing. The module owns no storage, reads no clock (every command carries
 * its `now`) and has no globals beyond its constant tables.
 *
 *                     contract_open
 *                           |
 *                           v
 *                 +------------------+   DELIVERY_LATE
 *                 | PENDING_DELIVERY |---------------------------+
 *                 +------------------+                           |
 *            DELIVERED |         | BUYER_END                     |
 *                      v         |                               v
 *                 +--------+     |     BUYER_END,          +----------+
 *       +---------| ACTIVE |-----|---- TERM_ENDED ---+     |          |
 *       |         +--------+     |                   |     |          |
 *       |              |         v                   v     |          |
 *       |  RECALL      |      +-------+<-------------+     | BREACHED |
 *       |  (perm)      |      | ENDED |                    |          |
 *       |  or BREACH   |      +-------+<----------+        |          |
 *       +--------------|--------------------------|------->|          |
 *               RECALL |                          |        |          |
 *               (spot) v             NOTICE_ENDED,|        |          |
 *               +-----------+        BUYER_END    |        |          |
 *               | RECALLING |---------------------+        |          |
 *               +-----------+------------ BREACH --------->|          |
 *                                                          +----------+
 *
 *  from       event          who         to         guard
 *  ---------  -------------  ----------  ---------  -----------------
 *  PENDING    DELIVERED      seller      ACTIVE     now < deadline
 *  PENDING    DELIVERY_LATE  exchange    BREACHED   now >= deadline
 *  PENDING    BUYER_END      buyer       ENDED      buyer_may_end
 *  ACTIVE     RECALL         seller      RECALLING  recall = NOTICE
 *  ACTIVE     RECALL         seller      BREACHED   recall = BREACH
 *  ACTIVE     BUYER_END      buyer       ENDED      buyer_may_end
 *  ACTIVE     TERM_ENDED     exchange    ENDED      now >= term_end
 *  ACTIVE     BREACH         exch/admin  BREACHED
 *  RECALLING  NOTICE_ENDED   exchange    ENDED      now >= notice_end
 *  RECALLING  BUYER_END      buyer       ENDED      buyer_may_end
 *  RECALLING  BREACH         exch/admin  BREACHED
 *
 * (PENDING is PENDING_DELIVERY.) Each row is one entry of `steps` in
 * contract.c, except that the two RECALL rows share one and the product's
 * recall rule picks the outcome; contract_apply makes every transition.
 *
 * ENDED and BREACHED are final. Every other (state, event) pair is refused.
 * Deadlines come first: while contract_due says a deadline has passed, every
 * command but that deadline's event is refused (CONTRACT_REJ_DEADLINE_DUE),
 * so a late delivery can never beat its own breach and a buyer cannot end a
 * contract whose notice already ended it. The caller's timer asks
 * contract_due for the next deadline and applies it at that instant.
 *
 * What differs per product is data (contract_rules), not code paths: whether
 * the seller's recall gives notice or breaches, whether the contract runs to
 * the end of a term, whether the buyer may end it, who may buy it, and how it
 * settles (see exchange/core/invoice.h and docs/money.md).
 */
#ifndef RAMEX_CONTRACT_H
#define RAMEX_CONTRACT_H

#include "common/units.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CONTRACT_MSG_MAX  160 /* a refusal or a transition's why */
#define CONTRACT_NOTE_MAX 80  /* the part of a caller's note kept in why */

enum contract_product {
	CONTRACT_SPOT = 0, /* as long as it runs; the seller may recall */
	CONTRACT_PERM = 1, /* offline to the end of calendar year perm_year */
	CONTRACT_PRODUCT_COUNT_
};

enum contract_delivery {
	CONTRACT_OFFLINE = 0, /* bought by the operator: pages powered off */
	CONTRACT_LEND = 1,    /* bought by a node: pages hold its data */
};

enum contract_state {
	CONTRACT_PENDING_DELIVERY = 0,
	CONTRACT_ACTIVE = 1,
	CONTRACT_RECALLING = 2,
	CONTRACT_ENDED = 3,
	CONTRACT_BREACHED = 4,
	CONTRACT_STATE_COUNT_
};

enum contract_event {
	CONTRACT_EV_DELIVERED = 0,     /* the seller confirms delivery */
	CONTRACT_EV_DELIVERY_LATE = 1, /* the delivery deadline passed */
	CONTRACT_EV_RECALL = 2,        /* the seller wants its pages back */
	CONTRACT_EV_NOTICE_ENDED = 3,  /* the recall notice ran out */
	CONTRACT_EV_BUYER_END = 4,     /* the buyer releases the pages */
	CONTRACT_EV_TERM_ENDED = 5,    /* the end of a perm contract's term */
	CONTRACT_EV_BREACH = 6,        /* found in breach (e.g. by metering) */
	CONTRACT_EV_COUNT_
};

enum contract_actor {
	CONTRACT_BY_SELLER = 0,
	CONTRACT_BY_BUYER = 1,
	CONTRACT_BY_EXCHANGE = 2, /* ramexd itself: timers, metering checks */
	CONTRACT_BY_ADMIN = 3,
	CONTRACT_ACTOR_COUNT_
};

/* What a seller's recall does. */
enum contract_recall {
	CONTRACT_RECALL_NOTICE = 0, /* recalling, for the market's notice */
	CONTRACT_RECALL_BREACH = 1, /* taking pages back early is a breach */
};

/* How a contract settles; the arithmetic is in invoice.h. */
enum contract_settle {
	CONTRACT_SETTLE_USAGE = 0, /* metered usage at the contract price */
	CONTRACT_SETTLE_TERM = 1,  /* full price to end of term, or the
	                              breach rule (min(price, spot) - penalty) */
};

/* The rules of one product. */
struct contract_rules {
	const char *name; /* "spot", "perm" */
	enum contract_recall recall;
	bool has_term;      /* runs to the end of calendar year perm_year */
	bool buyer_may_end; /* the buyer may release the pages early */
	bool operator_only; /* only the operator buys it (so: offline) */
	enum contract_settle settle;
};

/* The rules of `p`, never NULL for a valid product. */
const struct contract_rules *contract_rules_of(enum contract_product p);

/* The market's terms, copied into each contract it makes. */
struct contract_market {
	int64_t market_id;
	enum contract_product product;
	int perm_year;              /* CONTRACT_PERM: the YYYY of perm-YYYY */
	rx_time_ns delivery_window; /* > 0: the seller's time to deliver */
	rx_time_ns recall_notice;   /* >= 0: the buyer's notice on a recall */
	rx_price breach_penalty;    /* >= 0, n$/page-year off a breach */
};

/* One trade, as the matching engine reports it. */
struct contract_trade {
	int64_t contract_id; /* chosen by the caller (the database) */
	int64_t trade_id;
	int64_t buyer, seller; /* account ids */
	bool buyer_is_operator;
	rx_pages pages; /* > 0 */
	rx_price price; /* > 0, n$/page-year */
	rx_time_ns now;
};

/* A contract: plain data that the caller stores and loads as it is. */
struct contract {
	int64_t id, trade_id, market_id;
	enum contract_product product;
	int perm_year;
	enum contract_delivery delivery;
	int64_t buyer, seller;
	rx_pages pages;
	rx_price price;
	rx_price breach_penalty;
	rx_time_ns recall_notice;
	enum contract_state state;
	rx_time_ns created;
	rx_time_ns delivery_deadline; /* created + delivery_window */
	rx_time_ns term_end;          /* perm: 1 January of perm_year + 1 */
	rx_time_ns delivered_at;      /* 0 until DELIVERED */
	rx_time_ns notice_end;        /* 0 unless RECALLING */
	rx_time_ns ended_at;          /* 0 until ENDED or BREACHED */
	rx_time_ns changed_at;        /* the last transition (or created) */
};

/* One command to a contract. */
struct contract_cmd {
	enum contract_event event;
	enum contract_actor actor;
	int64_t actor_account; /* must be the seller / buyer for those actors */
	rx_time_ns now;
	const char *note; /* optional: the caller's why, kept in the record */
};

/* The record of one move: store it, push it on the event stream. */
struct contract_transition {
	int64_t contract_id;
	enum contract_state from, to;
	enum contract_event event;
	enum contract_actor actor;
	int64_t actor_account;
	rx_time_ns at;
	char why[CONTRACT_MSG_MAX];
};

/* Why a command was refused. */
enum contract_reject {
	CONTRACT_REJ_NONE = 0,
	CONTRACT_REJ_BAD_INPUT,    /* unknown event/actor, time backwards */
	CONTRACT_REJ_NOT_ALLOWED,  /* this actor may not send this event */
	CONTRACT_REJ_WRONG_STATE,  /* no such move from the current state */
	CONTRACT_REJ_PRODUCT_RULE, /* the product's rules forbid it */
	CONTRACT_REJ_TOO_EARLY,    /* a deadline event before its deadline */
	CONTRACT_REJ_DEADLINE_DUE, /* another deadline must be applied first */
	CONTRACT_REJ_COUNT_
};

/*
 * Makes the contract of a trade in PENDING_DELIVERY. Returns 0, or -1 with
 * a reason in err when the trade cannot make a contract on this market
 * (a node buying perm, a perm year already over, bad terms).
 */
int contract_open(const struct contract_trade *t,
                  const struct contract_market *m, struct contract *out,
                  char *err, size_t errlen);

/*
 * Applies `cmd` to `c`. On CONTRACT_REJ_NONE, *c has moved and *out says
 * how; otherwise *c and *out are unchanged and `msg` (CONTRACT_MSG_MAX) says
 * why, in words a person can act on.
 */
enum contract_reject contract_apply(struct contract *c,
                                    const struct contract_cmd *cmd,
                                    struct contract_transition *out,
                                    char msg[CONTRACT_MSG_MAX]);

/* The next deadline of `c`: true with its event and instant, or false when
 * no deadline is pending. Due when now >= *at. */
bool contract_due(const struct contract *c, enum contract_event *ev,
                  rx_time_ns *at);

/* The half-open time [*from, *to) during which `c` delivers (and bills), as
 * far as known at `now`: from delivery to its end (or now when running).
 * False when nothing was ever delivered. */
bool contract_delivery_span(const struct contract *c, rx_time_ns now,
                            rx_time_ns *from, rx_time_ns *to);

/* Static names for the API and the database: "pending_delivery", "recall",
 * "seller", ...; and the reverse (-1 when unknown). */
const char *contract_state_name(enum contract_state s);
const char *contract_event_name(enum contract_event e);
const char *contract_actor_name(enum contract_actor a);
const char *contract_product_name(enum contract_product p);
const char *contract_delivery_name(enum contract_delivery d);
const char *contract_reject_name(enum contract_reject r);
int contract_state_parse(const char *s);
int contract_event_parse(const char *s);

#endif
