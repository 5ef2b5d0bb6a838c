/* usage.c — checks, dedup, gaps, month shares and lend reconciliation of
 * usage reports; see usage.h and docs/money.md. */
#include "exchange/core/usage.h"
#include "common/err.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef __int128 i128;

#define NS INT64_C(1000000000)

bool usage_body_equal(const struct usage_report *a,
                      const struct usage_report *b)
{
	return a->node == b->node && a->epoch == b->epoch && a->seq == b->seq &&
	       a->contract_id == b->contract_id &&
	       a->period_start == b->period_start &&
	       a->period_end == b->period_end &&
	       a->page_seconds == b->page_seconds &&
	       a->kmod_page_seconds == b->kmod_page_seconds &&
	       a->kmod_pages == b->kmod_pages;
}

enum usage_verdict usage_classify(const struct usage_report *r,
                                  const struct usage_report *stored)
{
	if (!stored)
		return USAGE_NEW;
	assert(stored->node == r->node && stored->epoch == r->epoch &&
	       stored->seq == r->seq);
	return usage_body_equal(r, stored) ? USAGE_DUPLICATE : USAGE_CONFLICT;
}

static uint64_t fnv_add(uint64_t h, int64_t v)
{
	uint64_t u = (uint64_t)v;
	for (int i = 0; i < 8; i++) {
		h ^= (u >> (8 * i)) & 0xff; /* little-endian, on every host */
		h *= UINT64_C(0x100000001b3);
	}
	return h;
}

uint64_t usage_body_hash(const struct usage_report *r)
{
	uint64_t h = UINT64_C(0xcbf29ce484222325);
	const int64_t f[] = {r->node,         r->epoch,
	                     r->seq,          r->contract_id,
	                     r->period_start, r->period_end,
	                     r->page_seconds, r->kmod_page_seconds,
	                     r->kmod_pages};
	for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
		h = fnv_add(h, f[i]);
	return h;
}

int usage_check(const struct usage_report *r, const struct usage_contract *c,
                rx_time_ns now, enum usage_side *side, char *err, size_t errlen)
{
	if (r->epoch < 1 || r->seq < 1)
		return err_set(err, errlen,
		               "report number (epoch %lld, seq %lld) must have "
		               "both parts >= 1",
		               (long long)r->epoch, (long long)r->seq);
	if (r->contract_id != c->id)
		return err_set(err, errlen,
		               "report is for contract %lld, not %lld",
		               (long long)r->contract_id, (long long)c->id);
	enum usage_side s;
	if (r->node == c->seller) {
		s = USAGE_SELLER;
	} else if (r->node == c->buyer) {
		if (!c->lend)
			return err_set(
			    err, errlen,
			    "offline contract %lld is reported by its "
			    "seller only",
			    (long long)c->id);
		s = USAGE_BUYER;
	} else {
		return err_set(err, errlen,
		               "node %lld is not a party to contract %lld",
		               (long long)r->node, (long long)c->id);
	}
	if (r->period_end <= r->period_start)
		return err_set(
		    err, errlen, "period [%lld, %lld) is empty or backwards",
		    (long long)r->period_start, (long long)r->period_end);
	if ((i128)r->period_end - r->period_start > USAGE_MAX_PERIOD)
		return err_set(err, errlen,
		               "period is longer than 35 days; report at least "
		               "every few minutes");
	if ((i128)r->period_end > (i128)now + USAGE_CLOCK_SLACK)
		return err_set(err, errlen,
		               "period ends at %lld, in the future (now %lld); "
		               "check the node's clock",
		               (long long)r->period_end, (long long)now);
	if (c->delivered_at == 0)
		return err_set(err, errlen,
		               "contract %lld has not been delivered; confirm "
		               "delivery before reporting usage",
		               (long long)c->id);
	i128 span_from = (i128)c->delivered_at - USAGE_CLOCK_SLACK;
	i128 span_to =
	    c->ended_at ? (i128)c->ended_at + USAGE_CLOCK_SLACK : r->period_end;
	if (r->period_start < span_from || r->period_end > span_to)
		return err_set(
		    err, errlen,
		    "period [%lld, %lld) lies outside contract %lld's "
		    "delivery [%lld, %lld)",
		    (long long)r->period_start, (long long)r->period_end,
		    (long long)c->id, (long long)c->delivered_at,
		    (long long)(c->ended_at ? c->ended_at : now));
	if (r->page_seconds < 0 || r->kmod_page_seconds < 0 ||
	    r->kmod_pages < 0)
		return err_set(err, errlen,
		               "usage and counters cannot be negative");
	if (r->kmod_pages > c->pages)
		return err_set(
		    err, errlen,
		    "module holds %lld pages for contract %lld of %lld "
		    "pages",
		    (long long)r->kmod_pages, (long long)c->id,
		    (long long)c->pages);
	/* exact, in page-nanoseconds: ceil admits an agent's carried
	 * remainder, and only that (usage_total_add bounds what bills) */
	i128 pns = ((i128)r->period_end - r->period_start) * c->pages;
	if ((i128)r->page_seconds > (pns + NS - 1) / NS)
		return err_set(err, errlen,
		               "%lld page-seconds is more than %lld pages can "
		               "deliver in %lld ns",
		               (long long)r->page_seconds, (long long)c->pages,
		               (long long)(r->period_end - r->period_start));
	if (r->page_seconds > r->kmod_page_seconds)
		return err_set(
		    err, errlen,
		    "%lld page-seconds is more than the module's own "
		    "cumulative counter %lld",
		    (long long)r->page_seconds,
		    (long long)r->kmod_page_seconds);
	*side = s;
	return 0;
}

bool usage_span(const struct usage_contract *c, rx_time_ns now,
                rx_time_ns *from, rx_time_ns *to)
{
	if (c->delivered_at == 0)
		return false;
	rx_time_ns end = c->ended_at;
	if (!end) {
		end = now;
		if (c->term_end && c->term_end < end)
			end = c->term_end;
		if (c->notice_end && c->notice_end < end)
			end = c->notice_end;
	}
	*from = c->delivered_at;
	*to = end > c->delivered_at ? end : c->delivered_at;
	return true;
}

rx_time_ns usage_delivered_ns(const struct usage_report *r, rx_time_ns from,
                              rx_time_ns to)
{
	rx_time_ns a = r->period_start > from ? r->period_start : from;
	rx_time_ns b = r->period_end < to ? r->period_end : to;
	return b > a ? b - a : 0;
}

rx_pagesec usage_billable(rx_pages pages, rx_pagesec reported,
                          rx_time_ns delivered)
{
	assert(pages >= 0 && reported >= 0 && delivered >= 0);
	i128 cap = (i128)pages * delivered / NS; /* < 2^63 * 2^63 / 1e9 */
	return (i128)reported < cap ? reported : (rx_pagesec)cap;
}

int usage_total_add(struct usage_total *t, rx_pages pages, rx_time_ns span_ns,
                    rx_pagesec ps, rx_time_ns dns, rx_pagesec *added, char *err,
                    size_t errlen)
{
	assert(ps >= 0 && dns >= 0 && t->reported >= 0 && t->delivered >= 0);
	i128 rep = (i128)t->reported + ps;
	i128 del = (i128)t->delivered + dns;
	if (del > span_ns)
		return err_set(err, errlen,
		               "reports cover %lld ns of a %lld ns delivery "
		               "span: the same time cannot bill twice (or the "
		               "clock went back; retry later)",
		               (long long)(del > INT64_MAX ? INT64_MAX : del),
		               (long long)span_ns);
	if (rep > INT64_MAX)
		return err_set(
		    err, errlen,
		    "the reports' page-seconds overflow a 64-bit total");
	rx_pagesec was = t->billable;
	t->reported = (rx_pagesec)rep;
	t->delivered = (rx_time_ns)del;
	t->billable = usage_billable(pages, t->reported, t->delivered);
	/* the invariant of docs/money.md: billed <= pages x delivered span */
	assert(t->billable <= t->reported);
	assert((i128)t->billable * NS <= (i128)pages * t->delivered);
	assert((i128)t->billable * NS <= (i128)pages * span_ns);
	assert(t->billable >= was);
	*added = t->billable - was;
	return 0;
}

/* Within one epoch the module's counter at `b`'s end must have grown by at
 * least b's usage since `a`'s end. */
static int counters_grow(const struct usage_report *a,
                         const struct usage_report *b, char *err, size_t errlen)
{
	if (a->node != b->node || a->epoch != b->epoch)
		return 0; /* counters restart with an epoch */
	if ((i128)b->kmod_page_seconds - a->kmod_page_seconds < b->page_seconds)
		return err_set(
		    err, errlen,
		    "module counter grew by %lld from seq %lld to seq "
		    "%lld but %lld page-seconds were reported",
		    (long long)(b->kmod_page_seconds - a->kmod_page_seconds),
		    (long long)a->seq, (long long)b->seq,
		    (long long)b->page_seconds);
	return 0;
}

int usage_check_neighbours(const struct usage_report *r,
                           const struct usage_report *prev,
                           const struct usage_report *next, char *err,
                           size_t errlen)
{
	if (prev && prev->period_end > r->period_start)
		return err_set(
		    err, errlen,
		    "period overlaps report (epoch %lld, seq %lld) "
		    "which ends at %lld; the same time cannot bill twice",
		    (long long)prev->epoch, (long long)prev->seq,
		    (long long)prev->period_end);
	if (next && next->period_start < r->period_end)
		return err_set(
		    err, errlen,
		    "period overlaps report (epoch %lld, seq %lld) "
		    "which starts at %lld; the same time cannot bill "
		    "twice",
		    (long long)next->epoch, (long long)next->seq,
		    (long long)next->period_start);
	if (prev && counters_grow(prev, r, err, errlen))
		return -1;
	if (next && counters_grow(r, next, err, errlen))
		return -1;
	return 0;
}

static int key_cmp(const struct usage_report *b, size_t i, size_t j)
{
	const struct usage_report *x = &b[i], *y = &b[j];
	if (x->node != y->node)
		return x->node < y->node ? -1 : 1;
	if (x->epoch != y->epoch)
		return x->epoch < y->epoch ? -1 : 1;
	if (x->seq != y->seq)
		return x->seq < y->seq ? -1 : 1;
	return i < j ? -1 : i > j; /* stable: earlier in the batch first */
}

static void sift_down(const struct usage_report *b, size_t *o, size_t root,
                      size_t n)
{
	for (;;) {
		size_t child = 2 * root + 1;
		if (child >= n)
			return;
		if (child + 1 < n && key_cmp(b, o[child], o[child + 1]) < 0)
			child++;
		if (key_cmp(b, o[root], o[child]) >= 0)
			return;
		size_t t = o[root];
		o[root] = o[child];
		o[child] = t;
		root = child;
	}
}

size_t usage_classify_batch(const struct usage_report *batch, size_t n,
                            const struct usage_report *const *stored,
                            size_t *order, enum usage_verdict *out)
{
	/* Heapsort: no allocation, O(n log n) for batches of any size. */
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	for (size_t i = n / 2; i-- > 0;)
		sift_down(batch, order, i, n);
	for (size_t end = n; end > 1; end--) {
		size_t t = order[0];
		order[0] = order[end - 1];
		order[end - 1] = t;
		sift_down(batch, order, 0, end - 1);
	}
	/* The first of a run of equal numbers is judged against what is
	 * stored; the rest against what the first leaves stored: the stored
	 * report, or the first itself when it is new. */
	size_t fresh = 0, i0 = 0;
	for (size_t k = 0; k < n; k++) {
		size_t i = order[k];
		const struct usage_report *r = &batch[i];
		const struct usage_report *p = k ? &batch[order[k - 1]] : NULL;
		bool first = !p || p->node != r->node || p->epoch != r->epoch ||
		             p->seq != r->seq;
		const struct usage_report *ref;
		if (first) {
			i0 = i;
			ref = stored ? stored[i] : NULL;
		} else {
			ref = stored && stored[i0] ? stored[i0] : &batch[i0];
		}
		out[i] = usage_classify(r, ref);
		fresh += out[i] == USAGE_NEW;
	}
	return fresh;
}

rx_pagesec usage_share(const struct usage_report *r, rx_time_ns from,
                       rx_time_ns to)
{
	i128 len = (i128)r->period_end - r->period_start;
	assert(len > 0);
	i128 a = (i128)from - r->period_start, b = (i128)to - r->period_start;
	if (a < 0)
		a = 0;
	if (b > len)
		b = len;
	if (b <= a)
		return 0;
	/* floor(ps * b / len) - floor(ps * a / len): telescopes exactly */
	i128 hi = (i128)r->page_seconds * b / len;
	i128 lo = (i128)r->page_seconds * a / len;
	return (rx_pagesec)(hi - lo);
}

/* ---- sequence tracker ---- */

#define WORDS (USAGE_SEQ_WINDOW / 64)

static bool bit_get(const struct usage_seq *s, int64_t i)
{
	return (s->above[i / 64] >> (i % 64)) & 1;
}

/* Drops the lowest k bits of the window (k <= USAGE_SEQ_WINDOW). */
static void shift_down(struct usage_seq *s, int64_t k)
{
	assert(k >= 0 && k <= USAGE_SEQ_WINDOW);
	int64_t w = k / 64, b = k % 64;
	for (int64_t i = 0; i < WORDS; i++) {
		uint64_t lo = i + w < WORDS ? s->above[i + w] : 0;
		uint64_t hi = i + w + 1 < WORDS ? s->above[i + w + 1] : 0;
		s->above[i] = b ? (lo >> b) | (hi << (64 - b)) : lo;
	}
}

bool usage_seq_mark(struct usage_seq *s, int64_t seq)
{
	assert(seq >= 1);
	if (seq <= s->upto)
		return false;
	int64_t off = seq - s->upto - 1;
	if (off >= USAGE_SEQ_WINDOW) {
		/* slide so seq is the window's last slot */
		int64_t k = off - USAGE_SEQ_WINDOW + 1;
		int64_t seen = 0;
		for (int64_t i = 0; i < k && i < USAGE_SEQ_WINDOW; i++)
			seen += bit_get(s, i);
		s->abandoned += k - seen;
		if (k >= USAGE_SEQ_WINDOW)
			memset(s->above, 0, sizeof s->above);
		else
			shift_down(s, k);
		s->upto += k;
		off = USAGE_SEQ_WINDOW - 1;
	}
	if (bit_get(s, off))
		return false;
	s->above[off / 64] |= UINT64_C(1) << (off % 64);
	if (seq > s->highest)
		s->highest = seq;
	int64_t run = 0;
	while (run < USAGE_SEQ_WINDOW && bit_get(s, run))
		run++;
	if (run) {
		shift_down(s, run);
		s->upto += run;
	}
	return true;
}

int64_t usage_seq_missing(const struct usage_seq *s)
{
	int64_t present = 0;
	for (int i = 0; i < WORDS; i++)
		present += __builtin_popcountll(s->above[i]);
	int64_t span = s->highest > s->upto ? s->highest - s->upto : 0;
	return span - present + s->abandoned;
}

size_t usage_seq_gaps(const struct usage_seq *s, int64_t (*ranges)[2],
                      size_t max)
{
	size_t n = 0;
	int64_t span = s->highest - s->upto;
	for (int64_t i = 0; i < span;) {
		if (bit_get(s, i)) {
			i++;
			continue;
		}
		int64_t j = i;
		while (j + 1 < span && !bit_get(s, j + 1))
			j++;
		if (n < max) {
			ranges[n][0] = s->upto + 1 + i;
			ranges[n][1] = s->upto + 1 + j;
		}
		n++;
		i = j + 1;
	}
	return n;
}

struct usage_recon usage_reconcile(rx_pages pages, bool seller_reported,
                                   rx_pagesec seller, bool buyer_reported,
                                   rx_pagesec buyer)
{
	struct usage_recon r = {0, 0, USAGE_RECON_NONE};
	if (seller_reported && buyer_reported) {
		rx_pagesec lo = seller < buyer ? seller : buyer;
		rx_pagesec hi = seller < buyer ? buyer : seller;
		r.billed = lo;
		r.diff = hi - lo;
		i128 tol = (i128)pages * USAGE_DIFF_SECONDS;
		if (hi / USAGE_DIFF_RATIO > tol)
			tol = hi / USAGE_DIFF_RATIO;
		r.flag = r.diff > tol ? USAGE_RECON_DIFFER : USAGE_RECON_AGREE;
	} else if (seller_reported || buyer_reported) {
		r.billed = seller_reported ? seller : buyer;
		r.flag = USAGE_RECON_ONE_SIDED;
	}
	return r;
}

const char *usage_verdict_name(enum usage_verdict v)
{
	static const char *names[] = {"new", "duplicate", "conflict"};
	return v >= 0 && v <= USAGE_CONFLICT ? names[v] : "unknown";
}

const char *usage_recon_name(enum usage_recon_flag f)
{
	static const char *names[] = {"agree", "differ", "one_sided", "none"};
	return f >= 0 && f <= USAGE_RECON_NONE ? names[f] : "unknown";
}
