/*
 * spool.h — the agent's durable outbox of usage reports.
 *
 * Every usage report is appended to this file and fsync'd before it is sent,
 * and stays "pending" until the exchange acknowledges it; the agent resends
 * pending reports until then, across its own crashes and exchange outages.
 * Reports are numbered per node by (epoch, seq): the epoch is fixed when the
 * spool file is created, seq grows by one per report and is never reused, so
 * the exchange recognises a resent report and counts it once.
 *
 * The file is a sequence of fixed-size, checksummed records (header, report,
 * ack). Reports are fsync'd, acks are not, so a power cut can tear the
 * report being appended and any acks written since the last fsync, in any
 * order. Opening the spool drops such a torn tail (every bad record after
 * the part the valid records prove was synced, and what follows it) and
 * refuses a file damaged inside that part, since guessing there could lose
 * or duplicate money. The module owns the file and an in-memory index
 * of pending reports and of the last report per contract (where metering of
 * that contract resumes after a restart).
 */
#ifndef RAMEX_SPOOL_H
#define RAMEX_SPOOL_H

#include "common/units.h"

#include <stddef.h>
#include <stdint.h>

#define SPOOL_CONTRACT_LEN 48 /* contract ids up to 47 characters */
#define SPOOL_RECORD_SIZE  128

struct spool_report {
	uint64_t epoch, seq; /* set by spool_append */
	char contract[SPOOL_CONTRACT_LEN];
	rx_time_ns start, end;   /* the metered period [start, end) */
	rx_pagesec page_seconds; /* delivered during it */
	/* Page-nanoseconds below one page-second, carried into the next
	 * period (see meter.h), so a restart resumes without losing them. */
	int64_t carry_pns;
	/* The contract's cumulative page-seconds at `end` (this report
	 * included) and the pages held then: the executor's counters as the
	 * exchange checks them (kmod_page_seconds, kmod_pages), kept here so
	 * that they keep growing across restarts within the epoch. */
	rx_pagesec cum_page_seconds;
	rx_pages pages_at_end;
	int final;     /* the contract's last report */
	int acked;     /* set once the exchange acknowledged */
	int set_aside; /* refused alone by the exchange: never resent */
};

struct spool;

/* Opens or creates the spool at `path`. A new file gets epoch `new_epoch`
 * (the caller passes something that never repeats for this node, e.g. the
 * wall clock in seconds); an existing file keeps its own. On failure returns
 * NULL and writes a reason into err. */
struct spool *spool_open(const char *path, uint64_t new_epoch, char *err,
                         size_t errlen);
void spool_close(struct spool *s);

uint64_t spool_epoch(const struct spool *s);
/* How many bytes of a torn tail the last open dropped (0 normally), and
 * how many whole records they held (a partial one is not counted). */
size_t spool_dropped(const struct spool *s);
int spool_dropped_records(const struct spool *s);

/* Numbers `r` (sets epoch and seq), appends it and fsyncs. Returns 0 once
 * the report is durable, -1 with err set otherwise (nothing is numbered). */
int spool_append(struct spool *s, struct spool_report *r, char *err,
                 size_t errlen);

/* Marks report `seq` acknowledged. Not fsync'd: a lost ack only means one
 * more resend, which the exchange recognises. Unknown or repeated seqs are
 * ignored (returns 0). Returns -1 with err set when the write fails. */
int spool_ack(struct spool *s, uint64_t seq, char *err, size_t errlen);

/* Marks report `seq` set aside: the exchange refused it on its own (409
 * or 422), so resending can never succeed. It stays in the file (evidence
 * for a person, see spool_set_aside_count) and is no longer pending.
 * fsync'd. Returns 0, or -1 with err set. */
int spool_set_aside(struct spool *s, uint64_t seq, char *err, size_t errlen);
/* Reports set aside so far (in this file). */
int spool_set_aside_count(const struct spool *s);

/* Copies up to `cap` pending reports, oldest first; returns how many are
 * pending in all. */
int spool_pending(const struct spool *s, struct spool_report *out, int cap);

/* Copies up to `cap` of the reports in the file (acked, pending and set
 * aside alike), oldest first; returns how many there are in all. For
 * audits and tests: what this node metered. */
int spool_reports(const struct spool *s, struct spool_report *out, int cap);

/* The latest report for `contract` (acked or not); returns 0, or -1 when
 * the spool has none. */
int spool_last(const struct spool *s, const char *contract,
               struct spool_report *out);

/* Rewrites the file without acknowledged reports (keeping the last one of
 * each contract that is not final), atomically: write, fsync, rename, fsync
 * the directory. Returns 0 or -1 with err set (the old file is intact). */
int spool_compact(struct spool *s, char *err, size_t errlen);

/* Records in the file now, to decide when to compact. */
int64_t spool_records(const struct spool *s);

#endif
