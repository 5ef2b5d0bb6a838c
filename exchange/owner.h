/*
 * owner.h — which markets this ramexd owns, and who owns the others.
 *
 * Several ramexd may serve one database; each market's book is kept and
 * written by exactly one of them at a time (docs/ARCHITECTURE.md,
 * "Scaling"). This module owns the ownership: a connection of its own
 * (the lock session) holding one session-level advisory lock per market
 * owned, pg_try_advisory_lock(OWNER_LOCK_CLASS, market id), and a thread
 * that every `poll_ms`
 *
 *   - checks that the lock session is alive: when it is not, the session
 *     is made again and the markets held are locked again if their epochs
 *     are unchanged (nobody took them meanwhile; a lone ramexd whose
 *     PostgreSQL restarted goes on without a rebuild); a market another
 *     session took is given up (the writer drops its book, WR_DISOWN);
 *   - tries to take each market the settings want (`markets`: all, or a
 *     list) that nobody holds: the lock, then the market's epoch bumped in
 *     market_owners (schema/0017), then the writer rebuilds its book from
 *     the database (WR_OWN);
 *   - reads market_owners into the routing table: for a market owned
 *     elsewhere, the owner's base URL, which requests are redirected to.
 *
 * The lock decides who may take a market; the epoch fences the writer
 * (every batch checks the epochs of the markets it touches in its own
 * transaction, market_fence), so a writer whose lock session died can
 * never commit after the market was taken, even before this thread notices.
 *
 * Thread-safe: owner_where is called by the writer and the handlers.
 */
#ifndef RAMEX_OWNER_H
#define RAMEX_OWNER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct owner;
struct writer;

/* the advisory lock's first key ("RXMK"), the market id the second */
#define OWNER_LOCK_CLASS  1381518667
#define OWNER_URL_MAX     128
#define OWNER_MAX_MARKETS 256 /* ROWS_MAX_MARKETS */

struct owner_opts {
	const char *conninfo;
	const char *markets;  /* "all", or market names separated by commas */
	const char *instance; /* this instance's name ("" = host:pid) */
	int poll_ms;          /* how often free markets are tried */
};

/* A market held, and the epoch its take wrote. */
struct owner_held {
	int64_t id, epoch;
};

enum owner_where {
	OWNER_HERE,      /* this instance holds it */
	OWNER_ELSEWHERE, /* another does: url is its base URL */
	OWNER_NOBODY,    /* nobody now, or its owner has no URL yet */
	OWNER_UNKNOWN,   /* no such market known */
};

/* Checks that `markets` is "all" or a list of market names (spot,
 * perm-YYYY), at most 256. -1 with err set. */
int owner_markets_check(const char *markets, char *err, size_t errlen);

/* Connects the lock session and takes, before returning, every market
 * wanted that nobody holds, so that a lone ramexd starts with all its
 * books. NULL with err set. */
struct owner *owner_new(const struct owner_opts *o, char *err, size_t errlen);
/* What it holds now; how many (at most max). */
int owner_held(struct owner *ow, struct owner_held *out, int max);
/* Starts the thread, which hands markets taken and lost to w. */
int owner_run(struct owner *ow, struct writer *w, char *err, size_t errlen);
/* The base URL clients are sent to for the markets held here (e.g.
 * http://10.0.0.5:8080), written to market_owners by the thread. */
void owner_set_url(struct owner *ow, const char *url);
/* Who owns market `name` (or id `id` when name is NULL): with
 * OWNER_ELSEWHERE, its URL into url. */
enum owner_where owner_where(struct owner *ow, const char *name, int64_t id,
                             char *url, size_t urllen);
/* Whether every market known is held here (one ramexd; the writer then
 * needs no lookup for an order it does not hold). */
bool owner_holds_all(struct owner *ow);
/* A market just created by this instance: taken at once when wanted.
 * 1 with *epoch set when taken, 0 when not (not wanted, or held), -1 when
 * the lock session failed. */
int owner_claim(struct owner *ow, int64_t id, const char *name, int64_t *epoch);
/* The writer found it fenced (another instance took it): forget it. */
void owner_lost(struct owner *ow, int64_t id);
/* Stops the thread (it tells the writer nothing more); the locks stay
 * held until owner_free, so that the writer can finish its batches first.
 * NULL is fine. */
void owner_stop(struct owner *ow);
/* Stops the thread and ends the lock session: the markets are free for
 * the other instances. NULL is fine. */
void owner_free(struct owner *ow);

#endif
