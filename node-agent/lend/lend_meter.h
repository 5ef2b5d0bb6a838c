/*
 * lend_meter.h — what one side of a lend contract measured, and the rule
 * the exchange uses to reconcile the two sides.
 *
 * Both agents keep the same meter over the same events (each READ, WRITE and
 * TRIM the lender acknowledged), so when nothing went wrong the two agree
 * exactly on counts and nearly on page-seconds (the clocks start a few
 * milliseconds apart). Owns a bitmap of the pages that hold data ("in use":
 * written and not trimmed since) and two integrals over time:
 * hosted page-ms (pages under contract) and used page-ms (pages in use).
 * Pure: the caller passes the monotonic time in ms; no I/O, no globals.
 */
#ifndef RAMEX_LEND_METER_H
#define RAMEX_LEND_METER_H

#include <stddef.h>
#include <stdint.h>

#define LEND_METER_WIRE 80 /* bytes of a meter on the wire (METER reply) */
/* Reconciliation slack on page-seconds: 1 % of the larger side plus two
 * seconds of the whole contract, for the clocks starting apart. */
#define LEND_RECON_SLACK_PCT 1
#define LEND_RECON_SLACK_S   2

enum lend_meter_role { LEND_METER_LENDER = 1, LEND_METER_BORROWER = 2 };

/* A reading: what an agent reports to the exchange for one contract. */
struct lend_meter_report {
	uint64_t contract;
	uint64_t role;         /* enum lend_meter_role */
	int64_t pages_hosted;  /* pages under contract now (0 once released) */
	int64_t pages_in_use;  /* pages holding the borrower's data now */
	int64_t page_writes;   /* pages written (acknowledged), ever */
	int64_t page_reads;    /* pages read, ever */
	int64_t page_trims;    /* pages trimmed, ever */
	int64_t hosted_page_s; /* integral of pages_hosted, page-seconds */
	int64_t used_page_s;   /* integral of pages_in_use, page-seconds */
	int64_t lost;          /* 1 when the borrower lost the lender */
};

struct lend_meter {
	struct lend_meter_report r;
	int64_t pages; /* contract size: the bitmap's length in pages */
	uint8_t *inuse;
	int64_t hosted_page_ms, used_page_ms, last_ms;
};

/* Returns 0, or -1 when the bitmap cannot be allocated. */
int lend_meter_init(struct lend_meter *m, uint64_t contract,
                    enum lend_meter_role role, int64_t pages, int64_t now_ms);
void lend_meter_free(struct lend_meter *m);

/* Each event first brings the integrals up to now_ms. */
void lend_meter_write(struct lend_meter *m, uint64_t page, uint32_t count,
                      int64_t now_ms);
void lend_meter_read(struct lend_meter *m, uint32_t count, int64_t now_ms);
void lend_meter_trim(struct lend_meter *m, uint64_t page, uint32_t count,
                     int64_t now_ms);
/* The pages went back: nothing hosted or in use from now on. */
void lend_meter_release(struct lend_meter *m, int64_t now_ms);
void lend_meter_tick(struct lend_meter *m, int64_t now_ms);
/* The current reading (after a tick to now_ms). */
struct lend_meter_report lend_meter_report(struct lend_meter *m,
                                           int64_t now_ms);

void lend_meter_encode(const struct lend_meter_report *r,
                       uint8_t out[LEND_METER_WIRE]);
void lend_meter_decode(const uint8_t in[LEND_METER_WIRE],
                       struct lend_meter_report *r);
/* One logfmt line "role=lender contract=7 pages_hosted=..." (no newline).
 * Returns its length, or -1 when it does not fit. */
int lend_meter_format(const struct lend_meter_report *r, char *out,
                      size_t outlen);
/* Parses what lend_meter_format wrote. Returns 0 or -1. */
int lend_meter_parse(const char *line, struct lend_meter_report *r);

enum lend_recon { LEND_RECON_AGREE, LEND_RECON_DISPUTE };

struct lend_recon_result {
	enum lend_recon verdict;
	int64_t used_page_s;   /* what the borrower is billed for */
	int64_t hosted_page_s; /* what the lender is credited for */
	char why[200];         /* for a dispute: which figures differ */
};

/*
 * The exchange's rule. Counts must agree, except that the lender may be
 * ahead by the requests in flight (at most LEND_WINDOW_PAGES pages) whose
 * replies were lost with the connection. Page-seconds must agree within the slack above. Either
 * way both sides are settled on the smaller figure, so no side is paid for
 * what the other did not see; a dispute is also flagged for a person.
 */
enum lend_recon lend_meter_reconcile(const struct lend_meter_report *lender,
                                     const struct lend_meter_report *borrower,
                                     struct lend_recon_result *out);

#endif
