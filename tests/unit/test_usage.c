/* test_usage.c — usage reports: plausibility, retries and conflicts, gaps,
 * out-of-order and batched reports, month shares and lend reconciliation. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/money.h"
#include "exchange/core/usage.h"

#define S      MONEY_NS_PER_S
#define MINUTE (60 * S)
#define PAGES  INT64_C(1048576)

static uint64_t rng_state;
static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static rx_time_ns T0; /* delivery of the test contract */

static struct usage_contract lend_contract(void)
{
	return (struct usage_contract){.id = 5,
	                               .buyer = 20,
	                               .seller = 10,
	                               .lend = true,
	                               .pages = PAGES,
	                               .delivered_at = T0,
	                               .ended_at = 0};
}

/* The seller's n-th one-minute report, fully delivered. */
static struct usage_report minute(int64_t node, int64_t seq)
{
	rx_pagesec ps = PAGES * 60;
	return (struct usage_report){.node = node,
	                             .epoch = 1,
	                             .seq = seq,
	                             .contract_id = 5,
	                             .period_start = T0 + (seq - 1) * MINUTE,
	                             .period_end = T0 + seq * MINUTE,
	                             .page_seconds = ps,
	                             .kmod_page_seconds = ps * seq,
	                             .kmod_pages = PAGES};
}

static void setup(void)
{
	T0 = money_month_start(2027, 3) + 12345 * S;
}

START_TEST(plausible_reports_pass)
{
	struct usage_contract c = lend_contract();
	enum usage_side side = 9;
	char err[USAGE_MSG_MAX] = "";
	struct usage_report r = minute(10, 3);
	ck_assert_msg(
	    usage_check(&r, &c, r.period_end, &side, err, sizeof err) == 0,
	    "%s", err);
	ck_assert_int_eq(side, USAGE_SELLER);
	r.node = 20;
	ck_assert_msg(
	    usage_check(&r, &c, r.period_end, &side, err, sizeof err) == 0,
	    "%s", err);
	ck_assert_int_eq(side, USAGE_BUYER);
	/* a little clock skew is tolerated */
	r = minute(10, 1);
	r.period_start -= 30 * S;
	r.period_end -= 30 * S;
	ck_assert_msg(usage_check(&r, &c, r.period_end - 45 * S, &side, err,
	                          sizeof err) == 0,
	              "%s", err);
}
END_TEST

/* Each broken report is refused for its own reason. */
START_TEST(implausible_reports_are_refused)
{
	struct usage_contract c = lend_contract();
	struct usage_contract offline = c;
	offline.lend = false;
	struct usage_contract undelivered = c;
	undelivered.delivered_at = 0;
	struct usage_contract ended = c;
	ended.ended_at = T0 + 10 * MINUTE;
	struct usage_report base = minute(10, 5);
	rx_time_ns now = base.period_end + MINUTE;
	struct {
		struct usage_report r;
		const struct usage_contract *c;
		const char *why;
	} cases[12];
	int n = 0;
	for (int i = 0; i < 12; i++) {
		cases[i].r = base;
		cases[i].c = &c;
	}
	cases[n].r.seq = 0, cases[n++].why = ">= 1";
	cases[n].r.contract_id = 6, cases[n++].why = "not 5";
	cases[n].r.node = 20, cases[n].c = &offline,
	cases[n++].why = "seller only";
	cases[n].r.node = 99, cases[n++].why = "not a party";
	cases[n].r.period_end = base.period_start, cases[n++].why = "empty";
	cases[n].r.period_start = base.period_end - 36 * 86400 * S,
	cases[n++].why = "35 days";
	cases[n].r.period_end = now + 2 * MINUTE,
	cases[n].r.period_start = now + MINUTE, cases[n++].why = "future";
	cases[n].c = &undelivered, cases[n++].why = "not been delivered";
	cases[n].r = minute(10, 12), cases[n].c = &ended,
	cases[n++].why = "outside";
	cases[n].r.page_seconds = PAGES * 60 + 1,
	cases[n].r.kmod_page_seconds = PAGES * 1000,
	cases[n++].why = "more than 1048576 pages";
	cases[n].r.kmod_page_seconds = PAGES * 60 - 1,
	cases[n++].why = "cumulative counter";
	cases[n].r.kmod_pages = PAGES + 1, cases[n++].why = "module holds";
	for (int i = 0; i < n; i++) {
		char err[USAGE_MSG_MAX] = "";
		enum usage_side side = 7;
		rx_time_ns when = i == 8 ? ended.ended_at + 5 * MINUTE : now;
		ck_assert_msg(usage_check(&cases[i].r, cases[i].c, when, &side,
		                          err, sizeof err) == -1,
		              "case %d accepted", i);
		ck_assert_msg(strstr(err, cases[i].why), "case %d: %s", i, err);
		ck_assert_int_eq(side, 7);
	}
}
END_TEST

START_TEST(retry_counts_once_and_conflict_is_refused)
{
	struct usage_report stored = minute(10, 4);
	struct usage_report retry = stored;
	ck_assert_int_eq(usage_classify(&stored, NULL), USAGE_NEW);
	ck_assert_int_eq(usage_classify(&retry, &stored), USAGE_DUPLICATE);
	ck_assert_uint_eq(usage_body_hash(&retry), usage_body_hash(&stored));
	/* any one field changed makes it another body */
	int64_t *fields[] = {&retry.contract_id,       &retry.period_start,
	                     &retry.period_end,        &retry.page_seconds,
	                     &retry.kmod_page_seconds, &retry.kmod_pages};
	for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
		retry = stored;
		*fields[i] += 1;
		ck_assert_int_eq(usage_classify(&retry, &stored),
		                 USAGE_CONFLICT);
		ck_assert_uint_ne(usage_body_hash(&retry),
		                  usage_body_hash(&stored));
	}
	struct usage_report other_seq = stored;
	other_seq.seq++;
	ck_assert_uint_ne(usage_body_hash(&other_seq),
	                  usage_body_hash(&stored));
	ck_assert_str_eq(usage_verdict_name(USAGE_CONFLICT), "conflict");
}
END_TEST

START_TEST(neighbours_may_not_overlap_and_counters_grow)
{
	struct usage_report a = minute(10, 1), b = minute(10, 2),
	                    c = minute(10, 3);
	char err[USAGE_MSG_MAX] = "";
	ck_assert_msg(usage_check_neighbours(&b, &a, &c, err, sizeof err) == 0,
	              "%s", err);
	ck_assert_int_eq(
	    usage_check_neighbours(&a, NULL, NULL, err, sizeof err), 0);
	struct usage_report early = b;
	early.period_start -= S;
	ck_assert_int_eq(
	    usage_check_neighbours(&early, &a, &c, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "cannot bill twice"), "%s", err);
	struct usage_report long_b = b;
	long_b.period_end += S;
	ck_assert_int_eq(
	    usage_check_neighbours(&long_b, &a, &c, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "seq 3"), "%s", err);
	struct usage_report stuck = b;
	stuck.kmod_page_seconds = a.kmod_page_seconds + 10;
	ck_assert_int_eq(
	    usage_check_neighbours(&stuck, &a, NULL, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "counter grew by 10"), "%s", err);
	/* the next report's growth is checked from this one too */
	ck_assert_int_eq(
	    usage_check_neighbours(&stuck, NULL, &c, err, sizeof err), 0);
	struct usage_report high = b;
	high.kmod_page_seconds = c.kmod_page_seconds;
	ck_assert_int_eq(
	    usage_check_neighbours(&high, NULL, &c, err, sizeof err), -1);
	/* a new epoch restarts the counters */
	struct usage_report restarted = b;
	restarted.epoch = 2;
	restarted.seq = 1;
	restarted.kmod_page_seconds = restarted.page_seconds;
	ck_assert_int_eq(
	    usage_check_neighbours(&restarted, &a, NULL, err, sizeof err), 0);
}
END_TEST

/* In order, out of order, duplicated: the tracker shows exactly the gaps. */
START_TEST(gaps_are_visible)
{
	struct usage_seq s = {0};
	ck_assert(usage_seq_mark(&s, 1));
	ck_assert(usage_seq_mark(&s, 2));
	ck_assert(usage_seq_mark(&s, 5)); /* out of order: 3, 4 missing */
	ck_assert(usage_seq_mark(&s, 9));
	ck_assert(!usage_seq_mark(&s, 5)); /* a retry */
	ck_assert(!usage_seq_mark(&s, 1));
	ck_assert_int_eq(s.upto, 2);
	ck_assert_int_eq(usage_seq_missing(&s), 5); /* 3 4 6 7 8 */
	int64_t r[4][2];
	ck_assert_uint_eq(usage_seq_gaps(&s, r, 4), 2);
	ck_assert(r[0][0] == 3 && r[0][1] == 4);
	ck_assert(r[1][0] == 6 && r[1][1] == 8);
	ck_assert_uint_eq(usage_seq_gaps(&s, r, 1), 2); /* counts them all */
	ck_assert(usage_seq_mark(&s, 4)); /* late ones still arrive */
	ck_assert(usage_seq_mark(&s, 3));
	ck_assert_int_eq(s.upto, 5);
	ck_assert_int_eq(usage_seq_missing(&s), 3);
	/* far ahead: what is passed over is abandoned, not forgotten */
	ck_assert(usage_seq_mark(&s, 9 + USAGE_SEQ_WINDOW + 10));
	ck_assert_int_eq(s.highest, 9 + USAGE_SEQ_WINDOW + 10);
	ck_assert_int_eq(usage_seq_missing(&s),
	                 s.highest - 5 - 2); /* all but 9 and the last */
	ck_assert_int_gt(s.abandoned, 0);
}
END_TEST

/* The tracker against a plain array, with random arrival orders. */
START_TEST(gap_tracker_matches_reference)
{
	enum { N = 5000 };
	static bool seen[N + 1];
	rng_state = 11;
	for (int round = 0; round < 20; round++) {
		memset(seen, 0, sizeof seen);
		struct usage_seq s = {0};
		int64_t highest = 0;
		for (int k = 0; k < 3000; k++) {
			/* mostly in order, with stragglers and retries */
			int64_t seq = highest + 1 - (int64_t)(rng() % 40) +
			              (int64_t)(rng() % 4);
			if (seq < 1)
				seq = 1;
			if (seq > N)
				continue;
			ck_assert_int_eq(usage_seq_mark(&s, seq), !seen[seq]);
			seen[seq] = true;
			if (seq > highest)
				highest = seq;
		}
		int64_t missing = 0;
		for (int64_t q = 1; q <= highest; q++)
			missing += !seen[q];
		ck_assert_int_eq(s.abandoned, 0);
		ck_assert_int_eq(usage_seq_missing(&s), missing);
		int64_t ranges[64][2];
		size_t nr = usage_seq_gaps(&s, ranges, 64);
		int64_t listed = 0;
		for (size_t i = 0; i < nr && i < 64; i++) {
			for (int64_t q = ranges[i][0]; q <= ranges[i][1]; q++)
				ck_assert(!seen[q]);
			listed += ranges[i][1] - ranges[i][0] + 1;
		}
		if (nr <= 64)
			ck_assert_int_eq(listed, missing);
	}
}
END_TEST

/* 1000 nodes x 10 reports in one shuffled batch, with retries and conflicts
 * both within the batch and against what is stored, judged against a
 * quadratic reference. */
START_TEST(many_nodes_in_one_batch)
{
	enum { NODES = 1000, PER = 10, N = NODES * PER + 3000 };
	static struct usage_report batch[N], stored_rows[N];
	static const struct usage_report *stored[N];
	static size_t order[N];
	static enum usage_verdict out[N], want[N];
	rng_state = 5;
	size_t n = 0;
	for (int64_t node = 1; node <= NODES; node++)
		for (int64_t q = 1; q <= PER; q++)
			batch[n++] = minute(node, q);
	for (int k = 0; k < 3000; k++) { /* retries, half of them altered */
		batch[n] = batch[rng() % (NODES * PER)];
		if (k % 2)
			batch[n].page_seconds -= 1 + (int64_t)(rng() % 5);
		n++;
	}
	for (size_t i = n - 1; i > 0; i--) { /* shuffle */
		size_t j = rng() % (i + 1);
		struct usage_report t = batch[i];
		batch[i] = batch[j];
		batch[j] = t;
	}
	/* every 7th number was already counted, sometimes with another body */
	for (size_t i = 0; i < n; i++) {
		stored[i] = NULL;
		if (batch[i].seq % 7 == 0) {
			stored_rows[i] = minute(batch[i].node, batch[i].seq);
			if (batch[i].node % 5 == 0)
				stored_rows[i].kmod_pages -= 1;
			stored[i] = &stored_rows[i];
		}
	}
	/* reference: the first in batch order of each number decides */
	size_t want_new = 0;
	for (size_t i = 0; i < n; i++) {
		const struct usage_report *ref = stored[i];
		for (size_t j = 0; !ref && j < i; j++)
			if (batch[j].node == batch[i].node &&
			    batch[j].epoch == batch[i].epoch &&
			    batch[j].seq == batch[i].seq)
				ref = &batch[j];
		want[i] = !ref                               ? USAGE_NEW
		          : usage_body_equal(ref, &batch[i]) ? USAGE_DUPLICATE
		                                             : USAGE_CONFLICT;
		want_new += want[i] == USAGE_NEW;
	}
	ck_assert_uint_eq(usage_classify_batch(batch, n, stored, order, out),
	                  want_new);
	size_t dup = 0, conflict = 0;
	for (size_t i = 0; i < n; i++) {
		ck_assert_int_eq(out[i], want[i]);
		dup += out[i] == USAGE_DUPLICATE;
		conflict += out[i] == USAGE_CONFLICT;
	}
	ck_assert_uint_gt(dup, 100);
	ck_assert_uint_gt(conflict, 100);
	ck_assert_uint_lt(want_new, (size_t)(NODES * PER));
}
END_TEST

/* Property: the shares of any partition of a period sum to the whole. */
START_TEST(shares_of_a_partition_sum_to_the_whole)
{
	rng_state = 3;
	for (int round = 0; round < 2000; round++) {
		struct usage_report r = minute(10, 1);
		r.period_start = (rx_time_ns)(rng() % (UINT64_C(1) << 61));
		r.period_end =
		    r.period_start + 1 + (rx_time_ns)(rng() % USAGE_MAX_PERIOD);
		r.page_seconds = (rx_pagesec)(rng() % (UINT64_C(1) << 52));
		int cuts = (int)(rng() % 10);
		rx_time_ns at = r.period_start - (rx_time_ns)(rng() % 1000);
		rx_pagesec sum = 0;
		for (int i = 0; i <= cuts; i++) {
			rx_time_ns next =
			    i == cuts
			        ? r.period_end + 5
			        : at + (rx_time_ns)(rng() %
			                            (uint64_t)(r.period_end -
			                                       at + 1));
			rx_pagesec sh = usage_share(&r, at, next);
			ck_assert_int_ge(sh, 0);
			sum += sh;
			at = next > at ? next : at;
		}
		ck_assert_int_eq(sum, r.page_seconds);
	}
	/* a report across midnight of 1 April splits by time */
	struct usage_report x = minute(10, 1);
	x.period_start = money_month_start(2027, 4) - 45 * S;
	x.period_end = money_month_start(2027, 4) + 15 * S;
	x.page_seconds = 60 * 4;
	ck_assert_int_eq(usage_share(&x, 0, money_month_start(2027, 4)),
	                 45 * 4);
	ck_assert_int_eq(usage_share(&x, money_month_start(2027, 4),
	                             money_month_start(2027, 5)),
	                 15 * 4);
	ck_assert_int_eq(usage_share(&x, money_month_start(2027, 5),
	                             money_month_start(2027, 6)),
	                 0);
}
END_TEST

START_TEST(lend_sides_reconcile_to_the_lower_figure)
{
	rx_pagesec full = PAGES * 86400;
	struct usage_recon r = usage_reconcile(PAGES, true, full, true, full);
	ck_assert_int_eq(r.flag, USAGE_RECON_AGREE);
	ck_assert_int_eq(r.billed, full);
	/* within a minute of the pages: sampling jitter, not flagged */
	r = usage_reconcile(PAGES, true, full, true, full - PAGES * 59);
	ck_assert_int_eq(r.flag, USAGE_RECON_AGREE);
	ck_assert_int_eq(r.billed, full - PAGES * 59);
	/* 2% apart: flagged, the lower bills */
	r = usage_reconcile(PAGES, true, full, true, full / 50 * 49);
	ck_assert_int_eq(r.flag, USAGE_RECON_DIFFER);
	ck_assert_int_eq(r.billed, full / 50 * 49);
	ck_assert_int_eq(r.diff, full - full / 50 * 49);
	r = usage_reconcile(PAGES, true, full / 2, true, full);
	ck_assert_int_eq(r.billed, full / 2); /* the buyer's higher figure
	                                         never bills more */
	r = usage_reconcile(PAGES, false, 0, true, 777);
	ck_assert_int_eq(r.flag, USAGE_RECON_ONE_SIDED);
	ck_assert_int_eq(r.billed, 777);
	r = usage_reconcile(PAGES, true, 555, false, 0);
	ck_assert_int_eq(r.billed, 555);
	r = usage_reconcile(PAGES, false, 0, false, 0);
	ck_assert_int_eq(r.flag, USAGE_RECON_NONE);
	ck_assert_int_eq(r.billed, 0);
	ck_assert_str_eq(usage_recon_name(USAGE_RECON_DIFFER), "differ");
}
END_TEST

/* ---- what bills: the delivery span bounds every total ---------------- */

/* One contract side as usage_db counts it: each report checked, a retry
 * (a number already counted) counted once, the rest added to the total. */
struct side_sim {
	struct usage_contract c;
	rx_time_ns now, from, to;
	struct usage_total t;
	rx_pagesec added; /* the sum of every *added */
	bool *seen;       /* by seq */
};

static void sim_count(struct side_sim *m, const struct usage_report *r)
{
	char err[USAGE_MSG_MAX] = "";
	enum usage_side side;
	ck_assert_msg(usage_check(r, &m->c, m->now, &side, err, sizeof err) ==
	                  0,
	              "seq %lld refused: %s", (long long)r->seq, err);
	if (m->seen[r->seq])
		return; /* a retry: usage_classify says duplicate */
	m->seen[r->seq] = true;
	rx_pagesec add = -1;
	ck_assert_msg(usage_total_add(&m->t, m->c.pages, m->to - m->from,
	                              r->page_seconds,
	                              usage_delivered_ns(r, m->from, m->to),
	                              &add, err, sizeof err) == 0,
	              "%s", err);
	ck_assert_int_ge(add, 0);
	m->added += add;
	/* the invariant, after every report, in page-nanoseconds */
	ck_assert(m->t.billable <= m->t.reported);
	ck_assert((__int128)m->t.billable * S <=
	          (__int128)m->c.pages * (m->to - m->from));
	ck_assert_int_eq(m->added, m->t.billable);
}

/* n + 1 cut points t[0] = a < ... < t[n] = b, some 1 ns apart. */
static int cut_span(rx_time_ns a, rx_time_ns b, rx_time_ns *t, int n)
{
	t[0] = a;
	int k = 1;
	for (int i = 1; i < n && t[k - 1] < b - 1; i++) {
		rx_time_ns left = b - t[k - 1];
		rx_time_ns step;
		switch (rng() % 4) {
		case 0:
			step = 1; /* down to one nanosecond */
			break;
		case 1:
			step = 1 + (rx_time_ns)(rng() % 1000000);
			break;
		default:
			step = 1 + (rx_time_ns)(rng() % (uint64_t)(2 * (b - a) /
			                                           n + 1));
		}
		if (step >= left)
			break;
		t[k] = t[k - 1] + step;
		k++;
	}
	t[k] = b;
	return k; /* periods [t[i], t[i+1]), i < k */
}

static void shuffle(struct usage_report *r, int n)
{
	for (int i = n - 1; i > 0; i--) {
		int j = (int)(rng() % (uint64_t)(i + 1));
		struct usage_report x = r[i];
		r[i] = r[j];
		r[j] = x;
	}
}

/* Feeds the reports in random order, a quarter of them twice or more. */
static void sim_feed(struct side_sim *m, struct usage_report *r, int n)
{
	shuffle(r, n);
	for (int i = 0; i < n; i++) {
		sim_count(m, &r[i]);
		if (rng() % 4 == 0)
			sim_count(m, &r[rng() % (uint64_t)(i + 1)]);
	}
}

#define SIM_MAX 600

/* Property: a span cut into random periods (down to 1 ns), reported in any
 * order with retries. An honest seller, whose agent carries its sub-second
 * remainder (reports floor(pages x elapsed) - what it reported before),
 * bills floor(pages x span / 1e9): it loses less than one page-second, the
 * remainder its agent still holds. A greedy seller, who claims the most a
 * report is admitted with and stretches the first and last periods into
 * the clock slack, bills no more than that. */
START_TEST(billed_never_exceeds_pages_times_the_span)
{
	static rx_time_ns t[SIM_MAX + 1];
	static struct usage_report r[SIM_MAX];
	static bool seen[SIM_MAX + 1];
	rng_state = 11;
	for (int round = 0; round < 400; round++) {
		bool greedy = round % 2;
		rx_pages pages = 1 + (rx_pages)(rng() % (rng() % 2 ? 300 : PAGES));
		/* spans from 1 ns to 40 days, on every scale */
		rx_time_ns span = 1 + (rx_time_ns)(rng() % ((UINT64_C(1)
		                                          << (rng() % 52)) + 1));
		struct side_sim m = {.c = lend_contract(), .seen = seen};
		m.c.pages = pages;
		m.c.ended_at = T0 + span;
		m.from = T0, m.to = T0 + span;
		m.now = m.to + (greedy ? USAGE_CLOCK_SLACK : 0);
		memset(seen, 0, sizeof seen);
		int n = cut_span(T0, T0 + span, t, 1 + (int)(rng() % SIM_MAX));
		if (greedy) {
			t[0] -= (rx_time_ns)(rng() % (USAGE_CLOCK_SLACK + 1));
			t[n] += (rx_time_ns)(rng() % (USAGE_CLOCK_SLACK + 1));
		}
		__int128 cum = 0;
		rx_pagesec told = 0, kmod = 0;
		for (int i = 0; i < n; i++) {
			rx_time_ns len = t[i + 1] - t[i];
			rx_pagesec ps;
			if (greedy) {
				ps = (rx_pagesec)(((__int128)pages * len + S -
				                   1) / S);
			} else {
				cum += (__int128)pages * len;
				ps = (rx_pagesec)(cum / S) - told;
			}
			told += ps;
			kmod += ps;
			r[i] = (struct usage_report){
			    .node = 10,
			    .epoch = 1,
			    .seq = i + 1,
			    .contract_id = 5,
			    .period_start = t[i],
			    .period_end = t[i + 1],
			    .page_seconds = ps,
			    .kmod_page_seconds = kmod,
			    .kmod_pages = pages};
		}
		sim_feed(&m, r, n);
		rx_pagesec most = (rx_pagesec)((__int128)pages * span / S);
		ck_assert_int_eq(m.t.delivered, span);
		if (greedy)
			ck_assert_int_eq(m.t.billable, most);
		else
			ck_assert_int_eq(m.t.billable, told);
		ck_assert_int_eq(m.t.billable, most);
	}
}
END_TEST

/* Issue 25: 1000 back-to-back 1 ms reports of 256 pages each claimed a
 * whole second, and a 2.003 s delivery was billed the 60 s slack on both
 * sides. */
START_TEST(short_periods_and_the_slack_do_not_bill)
{
	static bool seen[1001];
	struct side_sim m = {.c = lend_contract(), .seen = seen};
	m.c.pages = 256;
	m.c.ended_at = T0 + S;
	m.from = T0, m.to = T0 + S;
	m.now = m.to;
	char err[USAGE_MSG_MAX] = "";
	enum usage_side side;
	struct usage_report r = minute(10, 1);
	r.period_start = T0;
	r.period_end = T0 + S / 1000;
	r.kmod_pages = 256;
	r.kmod_page_seconds = r.page_seconds = 256;
	ck_assert_int_eq(usage_check(&r, &m.c, m.now, &side, err, sizeof err),
	                 -1);
	ck_assert_msg(strstr(err, "256 pages can deliver in 1000000 ns"), "%s",
	              err);
	/* one page-second each is admitted (an agent's carry), not billed */
	for (int i = 0; i < 1000; i++) {
		r.seq = i + 1;
		r.period_start = T0 + i * (S / 1000);
		r.period_end = r.period_start + S / 1000;
		r.page_seconds = 1;
		r.kmod_page_seconds = i + 1;
		sim_count(&m, &r);
	}
	ck_assert_int_eq(m.t.reported, 1000);
	ck_assert_int_eq(m.t.billable, 256);

	/* 2.003 s, claimed with the slack on both sides */
	memset(seen, 0, sizeof seen);
	struct side_sim d = {.c = lend_contract(), .seen = seen};
	d.c.pages = 256;
	d.c.ended_at = T0 + 2003 * (S / 1000);
	d.from = T0, d.to = d.c.ended_at;
	d.now = d.to + USAGE_CLOCK_SLACK;
	r = minute(10, 1);
	r.period_start = T0 - USAGE_CLOCK_SLACK;
	r.period_end = d.c.ended_at + USAGE_CLOCK_SLACK;
	r.kmod_pages = 256;
	r.page_seconds = r.kmod_page_seconds = 15872;
	sim_count(&d, &r);
	ck_assert_int_eq(d.t.billable, 512); /* floor(256 x 2.003) */
	/* a second report cannot cover the same time again */
	struct usage_total before = d.t;
	rx_pagesec add;
	ck_assert_int_eq(usage_total_add(&d.t, 256, d.to - d.from, 10, S, &add,
	                                 err, sizeof err),
	                 -1);
	ck_assert_msg(strstr(err, "cannot bill twice"), "%s", err);
	ck_assert_int_eq(d.t.billable, before.billable);
	ck_assert_int_eq(d.t.delivered, before.delivered);
}
END_TEST

/* The span of a running contract stops at now, and at the instants it
 * ends by itself even before its timer ticks. */
START_TEST(the_span_of_a_running_contract)
{
	struct usage_contract c = lend_contract();
	rx_time_ns from, to;
	ck_assert(usage_span(&c, T0 + 5 * S, &from, &to));
	ck_assert_int_eq(from, T0);
	ck_assert_int_eq(to, T0 + 5 * S);
	ck_assert(usage_span(&c, T0 - 5 * S, &from, &to));
	ck_assert_int_eq(to, T0); /* a clock behind the delivery: empty */
	c.notice_end = T0 + 3 * S;
	ck_assert(usage_span(&c, T0 + 5 * S, &from, &to));
	ck_assert_int_eq(to, T0 + 3 * S);
	c.notice_end = 0;
	c.term_end = T0 + 4 * S;
	ck_assert(usage_span(&c, T0 + 5 * S, &from, &to));
	ck_assert_int_eq(to, T0 + 4 * S);
	c.ended_at = T0 + 2 * S;
	ck_assert(usage_span(&c, T0 + 5 * S, &from, &to));
	ck_assert_int_eq(to, T0 + 2 * S);
	c.delivered_at = 0;
	ck_assert(!usage_span(&c, T0 + 5 * S, &from, &to));
	struct usage_report r = minute(10, 1);
	r.period_start = T0 - S, r.period_end = T0 + 3 * S;
	ck_assert_int_eq(usage_delivered_ns(&r, T0, T0 + 2 * S), 2 * S);
	ck_assert_int_eq(usage_delivered_ns(&r, T0 + 5 * S, T0 + 6 * S), 0);
	/* 128-bit: the largest figures neither wrap nor lose the floor */
	ck_assert_int_eq(usage_billable(INT64_MAX, INT64_MAX, INT64_MAX),
	                 INT64_MAX);
	ck_assert_int_eq(usage_billable(3, 100, S / 3), 0);
	ck_assert_int_eq(usage_billable(3, 100, S / 3 + 1), 1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("usage");
	TCase *tc = tcase_create("usage");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, plausible_reports_pass);
	tcase_add_test(tc, implausible_reports_are_refused);
	tcase_add_test(tc, retry_counts_once_and_conflict_is_refused);
	tcase_add_test(tc, neighbours_may_not_overlap_and_counters_grow);
	tcase_add_test(tc, gaps_are_visible);
	tcase_add_test(tc, gap_tracker_matches_reference);
	tcase_add_test(tc, many_nodes_in_one_batch);
	tcase_add_test(tc, shares_of_a_partition_sum_to_the_whole);
	tcase_add_test(tc, lend_sides_reconcile_to_the_lower_figure);
	tcase_add_test(tc, billed_never_exceeds_pages_times_the_span);
	tcase_add_test(tc, short_periods_and_the_slack_do_not_bill);
	tcase_add_test(tc, the_span_of_a_running_contract);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
