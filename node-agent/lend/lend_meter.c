/* lend_meter.c — per-contract meter and its reconciliation (see header). */
#include "node-agent/lend/lend_meter.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node-agent/lend/lend_proto.h"

int lend_meter_init(struct lend_meter *m, uint64_t contract,
                    enum lend_meter_role role, int64_t pages, int64_t now_ms)
{
	assert(pages > 0 && pages <= LEND_MAX_PAGES);
	memset(m, 0, sizeof *m);
	m->inuse = calloc((size_t)(pages + 7) / 8, 1);
	if (!m->inuse)
		return -1;
	m->pages = pages;
	m->r.contract = contract;
	m->r.role = role;
	m->r.pages_hosted = pages;
	m->last_ms = now_ms;
	return 0;
}

void lend_meter_free(struct lend_meter *m)
{
	free(m->inuse);
	m->inuse = NULL;
}

void lend_meter_tick(struct lend_meter *m, int64_t now_ms)
{
	if (now_ms <= m->last_ms)
		return;
	int64_t dt = now_ms - m->last_ms;
	m->hosted_page_ms += m->r.pages_hosted * dt;
	m->used_page_ms += m->r.pages_in_use * dt;
	m->last_ms = now_ms;
}

static void mark(struct lend_meter *m, uint64_t page, uint32_t count, int on)
{
	assert(page + count <= (uint64_t)m->pages);
	for (uint64_t p = page; p < page + count; p++) {
		uint8_t bit = (uint8_t)(1u << (p & 7));
		int was = (m->inuse[p >> 3] & bit) != 0;
		if (on && !was) {
			m->inuse[p >> 3] |= bit;
			m->r.pages_in_use++;
		} else if (!on && was) {
			m->inuse[p >> 3] &= (uint8_t)~bit;
			m->r.pages_in_use--;
		}
	}
	assert(m->r.pages_in_use >= 0 && m->r.pages_in_use <= m->pages);
}

void lend_meter_write(struct lend_meter *m, uint64_t page, uint32_t count,
                      int64_t now_ms)
{
	lend_meter_tick(m, now_ms);
	mark(m, page, count, 1);
	m->r.page_writes += count;
}

void lend_meter_read(struct lend_meter *m, uint32_t count, int64_t now_ms)
{
	lend_meter_tick(m, now_ms);
	m->r.page_reads += count;
}

void lend_meter_trim(struct lend_meter *m, uint64_t page, uint32_t count,
                     int64_t now_ms)
{
	lend_meter_tick(m, now_ms);
	mark(m, page, count, 0);
	m->r.page_trims += count;
}

void lend_meter_release(struct lend_meter *m, int64_t now_ms)
{
	lend_meter_tick(m, now_ms);
	memset(m->inuse, 0, (size_t)(m->pages + 7) / 8);
	m->r.pages_in_use = 0;
	m->r.pages_hosted = 0;
}

struct lend_meter_report lend_meter_report(struct lend_meter *m, int64_t now_ms)
{
	lend_meter_tick(m, now_ms);
	struct lend_meter_report r = m->r;
	r.hosted_page_s = m->hosted_page_ms / 1000;
	r.used_page_s = m->used_page_ms / 1000;
	return r;
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (56 - 8 * i));
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = (v << 8) | p[i];
	return v;
}

void lend_meter_encode(const struct lend_meter_report *r,
                       uint8_t out[LEND_METER_WIRE])
{
	const int64_t f[10] = {(int64_t)r->contract, (int64_t)r->role,
	                       r->pages_hosted,      r->pages_in_use,
	                       r->page_writes,       r->page_reads,
	                       r->page_trims,        r->hosted_page_s,
	                       r->used_page_s,       r->lost};
	for (int i = 0; i < 10; i++)
		put64(out + 8 * i, (uint64_t)f[i]);
}

void lend_meter_decode(const uint8_t in[LEND_METER_WIRE],
                       struct lend_meter_report *r)
{
	r->contract = get64(in);
	r->role = get64(in + 8);
	r->pages_hosted = (int64_t)get64(in + 16);
	r->pages_in_use = (int64_t)get64(in + 24);
	r->page_writes = (int64_t)get64(in + 32);
	r->page_reads = (int64_t)get64(in + 40);
	r->page_trims = (int64_t)get64(in + 48);
	r->hosted_page_s = (int64_t)get64(in + 56);
	r->used_page_s = (int64_t)get64(in + 64);
	r->lost = (int64_t)get64(in + 72);
}

int lend_meter_format(const struct lend_meter_report *r, char *out,
                      size_t outlen)
{
	int n = snprintf(
	    out, outlen,
	    "role=%s contract=%" PRIu64 " pages_hosted=%" PRId64
	    " pages_in_use=%" PRId64 " page_writes=%" PRId64
	    " page_reads=%" PRId64 " page_trims=%" PRId64
	    " hosted_page_s=%" PRId64 " used_page_s=%" PRId64 " lost=%" PRId64,
	    r->role == LEND_METER_LENDER ? "lender" : "borrower", r->contract,
	    r->pages_hosted, r->pages_in_use, r->page_writes, r->page_reads,
	    r->page_trims, r->hosted_page_s, r->used_page_s, r->lost);
	return n < 0 || (size_t)n >= outlen ? -1 : n;
}

int lend_meter_parse(const char *line, struct lend_meter_report *r)
{
	char role[16];
	memset(r, 0, sizeof *r);
	int n = sscanf(line,
	               "role=%15s contract=%" SCNu64 " pages_hosted=%" SCNd64
	               " pages_in_use=%" SCNd64 " page_writes=%" SCNd64
	               " page_reads=%" SCNd64 " page_trims=%" SCNd64
	               " hosted_page_s=%" SCNd64 " used_page_s=%" SCNd64
	               " lost=%" SCNd64,
	               role, &r->contract, &r->pages_hosted, &r->pages_in_use,
	               &r->page_writes, &r->page_reads, &r->page_trims,
	               &r->hosted_page_s, &r->used_page_s, &r->lost);
	if (n != 10)
		return -1;
	if (strcmp(role, "lender") == 0)
		r->role = LEND_METER_LENDER;
	else if (strcmp(role, "borrower") == 0)
		r->role = LEND_METER_BORROWER;
	else
		return -1;
	return 0;
}

static int64_t min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

static int64_t max64(int64_t a, int64_t b)
{
	return a > b ? a : b;
}

/* lender ahead of borrower by at most the replies lost in flight */
static int count_ok(int64_t lender, int64_t borrower)
{
	return lender >= borrower && lender - borrower <= LEND_WINDOW_PAGES;
}

static int seconds_ok(int64_t a, int64_t b, int64_t pages)
{
	int64_t diff = a > b ? a - b : b - a;
	int64_t slack = max64(a, b) / 100 * LEND_RECON_SLACK_PCT +
	                pages * LEND_RECON_SLACK_S;
	return diff <= slack;
}

enum lend_recon lend_meter_reconcile(const struct lend_meter_report *l,
                                     const struct lend_meter_report *b,
                                     struct lend_recon_result *out)
{
	memset(out, 0, sizeof *out);
	out->used_page_s = min64(l->used_page_s, b->used_page_s);
	out->hosted_page_s = min64(l->hosted_page_s, b->hosted_page_s);
	out->verdict = LEND_RECON_DISPUTE;
	int64_t pages = max64(max64(l->pages_hosted, b->pages_hosted),
	                      max64(l->pages_in_use, b->pages_in_use));
	if (l->contract != b->contract || l->role != LEND_METER_LENDER ||
	    b->role != LEND_METER_BORROWER) {
		snprintf(out->why, sizeof out->why,
		         "the two reports are not the lender's and the "
		         "borrower's of one contract");
		return out->verdict;
	}
	if (!count_ok(l->page_writes, b->page_writes) ||
	    !count_ok(l->page_reads, b->page_reads) ||
	    !count_ok(l->page_trims, b->page_trims)) {
		snprintf(out->why, sizeof out->why,
		         "page counts differ: writes %" PRId64 "/%" PRId64
		         " reads %" PRId64 "/%" PRId64 " trims %" PRId64
		         "/%" PRId64 " (lender/borrower)",
		         l->page_writes, b->page_writes, l->page_reads,
		         b->page_reads, l->page_trims, b->page_trims);
		return out->verdict;
	}
	if (!seconds_ok(l->used_page_s, b->used_page_s, pages) ||
	    !seconds_ok(l->hosted_page_s, b->hosted_page_s, pages)) {
		snprintf(out->why, sizeof out->why,
		         "page-seconds differ beyond the slack: used %" PRId64
		         "/%" PRId64 " hosted %" PRId64 "/%" PRId64
		         " (lender/borrower)",
		         l->used_page_s, b->used_page_s, l->hosted_page_s,
		         b->hosted_page_s);
		return out->verdict;
	}
	out->verdict = LEND_RECON_AGREE;
	return out->verdict;
}
