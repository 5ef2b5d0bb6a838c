/*
 * usage_db.h — usage reports into PostgreSQL: one batch of a node's reports
 * checked and stored in one transaction, all or nothing.
 *
 * The rules are exchange/core/usage.h (pure): this module loads what they
 * need — the contracts, the stored reports with the same numbers, the
 * stored neighbours of each report in period order, the contract sides'
 * totals (usage_totals) — judges every report, counts what each bills
 * (usage_total_add: only time inside the delivery span), and stores the
 * new ones with ONE multi-row INSERT (unnest of arrays), so
 * a batch of 1000 costs a handful of round trips, not a thousand. A node's
 * batches are serialised by a lock on its account row, and the reports of
 * one contract by a lock on the contract row (taken in id order), so two
 * batches can never both pass the overlap check for the same time. The
 * module owns no state between calls.
 */
#ifndef RAMEX_USAGE_DB_H
#define RAMEX_USAGE_DB_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "exchange/core/usage.h"

#define USAGE_DB_BATCH_MAX 1000
/* The most bodies usage_conflicts keeps for one number (node, epoch,
 * seq), each distinct body once: evidence of what was sent, not a row per
 * retry, which a node could add without end. */
#define USAGE_DB_CONFLICTS_KEPT 10

/* One report of a batch and what became of it. */
struct usage_db_item {
	struct usage_report r; /* r.node is the caller's node */
	enum usage_verdict verdict;
	bool invalid;            /* refused by usage_check / neighbours */
	char err[USAGE_MSG_MAX]; /* why, when invalid or a conflict */
};

enum usage_db_status {
	USAGE_DB_OK = 0,      /* stored: the new ones counted */
	USAGE_DB_CONFLICT,    /* a number reused with another body: nothing
	                         stored but the conflicts (usage_conflicts),
	                         and of those only the ones that are valid
	                         reports (the others are `invalid` items) */
	USAGE_DB_INVALID,     /* some report is invalid: nothing stored */
	USAGE_DB_UNAVAILABLE, /* the connection broke */
	USAGE_DB_FAILED,      /* a query failed: err says why */
};

/*
 * Judges and stores the n (1..USAGE_DB_BATCH_MAX) reports of node `node`
 * at `now`. bodies[i] is the JSON object report i came as, kept in
 * usage_conflicts when it conflicts; principal names the caller there.
 * On USAGE_DB_OK *counted and *duplicates say how many were new and how
 * many retries; every item's verdict, invalid and err are set.
 */
enum usage_db_status usage_db_ingest(PGconn *c, int64_t node,
                                     const char *principal,
                                     struct usage_db_item *items, size_t n,
                                     json_t *const *bodies, int64_t now,
                                     size_t *counted, size_t *duplicates,
                                     char *err, size_t errlen);

#endif
