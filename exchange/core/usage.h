/*
 * usage.h — usage reports from node agents: what is plausible, what is new,
 * what is a retry, what conflicts, what is missing, how a report's usage
 * falls into billing months, and how the two sides of a lend contract are
 * reconciled (the rules are docs/money.md's "Usage reports").
 *
 * A report says: on contract C, over [period_start, period_end), this node
 * delivered (seller) or received (buyer, lend only) page_seconds, and the
 * kernel module's cumulative counters for C stood at kmod_* at period_end.
 * Reports are numbered per node: (node, epoch, seq), seq = 1, 2, 3, ...
 * within an epoch; an agent starts a new epoch whenever it loses its
 * numbering or the module's counters restart. The number is the idempotency
 * key: the same number with the same body is a retry (counted once), the
 * same number with another body is a conflict (refused, 409, and logged).
 *
 * The module is pure and owns nothing but the small struct usage_seq that
 * tracks which numbers of one (node, epoch) have arrived; the caller keeps
 * reports and trackers in the database and hands in what it knows.
 */
#ifndef RAMEX_USAGE_H
#define RAMEX_USAGE_H

#include "common/units.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define USAGE_MSG_MAX 160
/* A report covers at most 35 days, so it spans at most two months and an
 * agent that stops reporting for longer must send several. */
#define USAGE_MAX_PERIOD (INT64_C(35) * 86400 * 1000000000)
/* Agent clocks are NTP-synchronised but not exact: a period may reach this
 * far outside the contract's delivery span, or into the future. */
#define USAGE_CLOCK_SLACK (INT64_C(60) * 1000000000)
/* Lend figures that differ by at most this many seconds of the contract's
 * pages, or by at most 1/USAGE_DIFF_RATIO of the larger, are not flagged:
 * the two agents sample their counters at slightly different instants. */
#define USAGE_DIFF_SECONDS 60
#define USAGE_DIFF_RATIO   100
/* The ranges of a report's integers (api/openapi.yaml, UsageReport), checked
 * where a report comes in. Numbers and ids stay below 2^53, so a JSON reader
 * that keeps numbers as doubles (a browser) reads them exactly and n + 1
 * never overflows; instants lie in the calendar of common/money.h
 * (1970-2200); page-second counters stay at or below 2^62, so that the sum of
 * two never overflows an int64. */
#define USAGE_NUMBER_MAX  INT64_C(9007199254740991) /* 2^53 - 1 */
#define USAGE_TIME_MAX    INT64_C(7289654400000000000) /* 2201-01-01 */
#define USAGE_COUNTER_MAX INT64_C(4611686018427387904) /* 2^62 */
/* How far past the lowest missing number the tracker sees; see usage_seq. */
#define USAGE_SEQ_WINDOW 1024

enum usage_side {
	USAGE_SELLER = 0, /* delivered the pages */
	USAGE_BUYER = 1,  /* received them (lend contracts only) */
};

struct usage_report {
	int64_t node;  /* the reporting node's account */
	int64_t epoch; /* >= 1 */
	int64_t seq;   /* >= 1 */
	int64_t contract_id;
	rx_time_ns period_start, period_end; /* [start, end) */
	rx_pagesec page_seconds;             /* >= 0 */
	rx_pagesec kmod_page_seconds; /* module's cumulative total for C */
	rx_pages kmod_pages;          /* pages the module held at end */
};

/* What the checks need to know of the contract (see contract.h). */
struct usage_contract {
	int64_t id;
	int64_t buyer, seller;
	bool lend;
	rx_pages pages;
	rx_time_ns delivered_at; /* 0: not delivered, nothing to report */
	rx_time_ns ended_at;     /* 0: still running */
	/* The instants at which a running contract ends by itself (0: none):
	 * perm's term end, a recall's notice end. The contract timer ends it
	 * there even when it ticks a little later, so the delivery span never
	 * reaches past them. */
	rx_time_ns term_end, notice_end;
};

enum usage_verdict {
	USAGE_NEW = 0,       /* count it */
	USAGE_DUPLICATE = 1, /* a retry of a counted report: answer OK again */
	USAGE_CONFLICT = 2,  /* the number was used for another body: 409 */
};

/* Same number: is `r` the report `stored` again? stored NULL: new. */
enum usage_verdict usage_classify(const struct usage_report *r,
                                  const struct usage_report *stored);

/* True when every field matches. */
bool usage_body_equal(const struct usage_report *a,
                      const struct usage_report *b);

/* A 64-bit FNV-1a digest of every field, for a column beside the stored
 * report; a match still needs usage_body_equal to be sure. */
uint64_t usage_body_hash(const struct usage_report *r);

/*
 * Checks one report against its contract at `now`: numbering, period,
 * that the node is a party (the buyer only on a lend contract), that the
 * period lies in the delivery span (with USAGE_CLOCK_SLACK), and that
 * page_seconds is possible: at most ceil(pages x the period's length in
 * page-nanoseconds / 1e9) (an agent that carries its sub-second remainder
 * reports up to that), and no more than the module's own cumulative
 * counter. Admitting a report is not billing it: what bills is
 * usage_total_add's. On 0, *side says which side reported; on -1, err
 * says what is wrong.
 */
int usage_check(const struct usage_report *r, const struct usage_contract *c,
                rx_time_ns now, enum usage_side *side, char *err,
                size_t errlen);

/*
 * The delivery span of `c` at `now`: [delivered_at, end) with end its
 * ended_at, else the earliest of now, term_end and notice_end (never
 * before delivered_at). False when it was not delivered.
 */
bool usage_span(const struct usage_contract *c, rx_time_ns now,
                rx_time_ns *from, rx_time_ns *to);

/* The nanoseconds of r's period that lie inside the span [from, to). */
rx_time_ns usage_delivered_ns(const struct usage_report *r, rx_time_ns from,
                              rx_time_ns to);

/*
 * What one contract side has reported and what of it bills (docs/money.md,
 * "What a report bills"). Its counted reports never overlap, so the sum of
 * their delivered nanoseconds is at most the delivery span, and
 *
 *     billable = min(reported, floor(pages x delivered / 1e9))
 *
 * is at most pages x the span in page-seconds, whatever the reports claim,
 * in whatever order and with whatever retries they arrive: it is a function
 * of the set of counted reports. The sub-second part of pages x delivered
 * is not lost: it stays in the exact total and bills as soon as it makes a
 * whole page-second.
 */
struct usage_total {
	rx_pagesec reported;  /* sum of the counted reports' page_seconds */
	rx_time_ns delivered; /* sum of their nanoseconds inside the span */
	rx_pagesec billable;  /* what bills, as above */
};

/*
 * Counts one more report of a contract side of `pages` pages, whose
 * delivery span is `span_ns` long: `ps` page-seconds claimed, `dns` of its
 * nanoseconds inside the span. *added gets what it adds to billable (>= 0;
 * may exceed ps when it completes a page-second clipped from an earlier
 * report). -1 with err, t unchanged, when the totals would exceed the span
 * (the periods overlap, or the clock went back) or int64.
 */
int usage_total_add(struct usage_total *t, rx_pages pages, rx_time_ns span_ns,
                    rx_pagesec ps, rx_time_ns dns, rx_pagesec *added, char *err,
                    size_t errlen);

/* min(reported, floor(pages x delivered / 1e9)), in 128-bit arithmetic. */
rx_pagesec usage_billable(rx_pages pages, rx_pagesec reported,
                          rx_time_ns delivered);

/*
 * Checks `r` against its neighbours among the counted reports of the same
 * contract and side, in period order: prev ends before it, next starts after
 * it (either may be NULL). Periods must not overlap — two numbers for the
 * same time would bill it twice — and within one epoch the module's counter
 * must grow by at least each report's page_seconds. 0 or -1 with err.
 */
int usage_check_neighbours(const struct usage_report *r,
                           const struct usage_report *prev,
                           const struct usage_report *next, char *err,
                           size_t errlen);

/*
 * Classifies a batch (many nodes at once). stored[i] is the counted report
 * with batch[i]'s number, or NULL; within the batch the first of several
 * equal numbers is judged against stored, the others against it. order is
 * scratch for n indices. out[i] gets each verdict. Returns how many are new.
 */
size_t usage_classify_batch(const struct usage_report *batch, size_t n,
                            const struct usage_report *const *stored,
                            size_t *order, enum usage_verdict *out);

/*
 * The page-seconds of `r` that fall in [from, to), pro rata by time and
 * rounded so that the shares of any partition of the period sum to exactly
 * page_seconds (each share is a difference of floors of one line).
 */
rx_pagesec usage_share(const struct usage_report *r, rx_time_ns from,
                       rx_time_ns to);

/*
 * Which numbers of one (node, epoch) have arrived: all of 1..upto, and,
 * above, those set in `above` (bit i: upto + 1 + i). A number more than
 * USAGE_SEQ_WINDOW past upto pushes upto forward, counting what it passes
 * over as `abandoned` (still countable if it arrives: the database's key
 * decides duplicates, this tracker only makes gaps visible).
 */
struct usage_seq {
	int64_t upto;
	int64_t highest;
	int64_t abandoned;
	uint64_t above[USAGE_SEQ_WINDOW / 64];
};

/* Records seq (>= 1); false when it was already recorded. */
bool usage_seq_mark(struct usage_seq *s, int64_t seq);
/* How many numbers below `highest` are missing (abandoned included). */
int64_t usage_seq_missing(const struct usage_seq *s);
/* Writes up to max missing ranges [first, last] in order; returns how many
 * ranges there are in all (abandoned numbers are not listed). */
size_t usage_seq_gaps(const struct usage_seq *s, int64_t (*ranges)[2],
                      size_t max);

/* Lend reconciliation: the result for one contract and month. */
enum usage_recon_flag {
	USAGE_RECON_AGREE = 0,     /* both reported, within tolerance */
	USAGE_RECON_DIFFER = 1,    /* both reported, differ: flagged */
	USAGE_RECON_ONE_SIDED = 2, /* only one side reported: flagged */
	USAGE_RECON_NONE = 3,      /* nobody reported */
};

struct usage_recon {
	rx_pagesec billed; /* what bills (docs/money.md) */
	rx_pagesec diff;   /* |seller - buyer| when both reported */
	enum usage_recon_flag flag;
};

/* The lower of two reported figures bills; one figure bills alone. */
struct usage_recon usage_reconcile(rx_pages pages, bool seller_reported,
                                   rx_pagesec seller, bool buyer_reported,
                                   rx_pagesec buyer);

const char *usage_verdict_name(enum usage_verdict v);
const char *usage_recon_name(enum usage_recon_flag f);

#endif
