/*
 * agent_report.c — see agent_report.h.
 */
#include "node-agent/agent_report.h"

#include "common/log.h"
#include "node-agent/agent_contract.h"
#include "node-agent/agent_lend.h"
#include "node-agent/core/meter.h"
#include "node-agent/spool.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AGENT_BATCH       1000 /* reports per POST /v1/usage (the API's most) */
#define AGENT_MAX_BATCHES 8    /* batches sent per round */

/* Spools one metered period; `pages` is what the contract holds at its
 * end. The cumulative counter continues from the contract's last report. */
int agent_report_spool(struct agent *a, struct held *h,
                       const struct meter_period *p, rx_pages pages, int final)
{
	struct spool_report r, last;
	char err[512];
	const char *why;

	/* The exchange refuses empty periods; nothing was metered anyway. */
	if (p->end <= p->start)
		return 0;
	memset(&r, 0, sizeof r);
	snprintf(r.contract, sizeof r.contract, "%s", p->contract);
	r.start = p->start;
	r.end = p->end;
	r.page_seconds = p->page_seconds;
	r.carry_pns = p->carry_pns;
	r.cum_page_seconds = p->page_seconds;
	if (spool_last(a->spool, p->contract, &last) == 0)
		r.cum_page_seconds += last.cum_page_seconds;
	r.pages_at_end = pages < 0 ? 0 : pages;
	r.final = final;
	if (spool_append(a->spool, &r, err, sizeof err) < 0) {
		/* Not durable means not sent: the period goes back into the
		 * meter and is reported with the next one once the spool can
		 * be written again (it was lost: the pages delivered meanwhile
		 * were never billed). What the lend child's meter counted for
		 * it is counted again then. */
		if (h && h->lend_real)
			h->lend_reported -= p->page_seconds;
		int kept = meter_uncut(a->meter, p, pages, &why) == 0;
		log_error("could not spool a usage report",
		          "contract=%s page_seconds=%lld err=%s kept=%s",
		          p->contract, (long long)p->page_seconds,
		          log_quote((char[600]){0}, 600, err),
		          kept ? "\"in the meter, for the next report\""
		               : log_quote((char[300]){0}, 300, why));
		a->n_errors++;
		return -1;
	}
	a->n_reports++;
	return 0;
}

static json_t *report_json(const struct spool_report *p)
{
	return json_pack(
	    "{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "epoch", (json_int_t)p->epoch,
	    "seq", (json_int_t)p->seq, "contract_id",
	    (json_int_t)strtoll(p->contract, NULL, 10), "period_start_ns",
	    (json_int_t)p->start, "period_end_ns", (json_int_t)p->end,
	    "page_seconds", (json_int_t)p->page_seconds, "kmod_page_seconds",
	    (json_int_t)p->cum_page_seconds, "kmod_pages",
	    (json_int_t)p->pages_at_end);
}

enum sent { SENT_OK, SENT_REFUSED, SENT_LATER, SENT_DOWN };

/* POSTs reports p[0..n) as one batch. */
static enum sent post_batch(struct agent *a, const struct spool_report *p,
                            int n, struct client_resp *r)
{
	json_t *arr = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(arr, report_json(&p[i]));
	json_t *b = json_pack("{s:o}", "reports", arr);
	int rc = agent_call(a, "POST", "/v1/usage", b, NULL, r);
	json_decref(b);
	if (rc < 0)
		return SENT_DOWN;
	a->n_batches++;
	if (r->status == 200 || r->status == 201)
		return SENT_OK;
	/* 400 too: a report the exchange cannot read will never be read. */
	if (r->status == 400 || r->status == 409 || r->status == 422)
		return SENT_REFUSED;
	if (r->status == 404 || r->status == 405) {
		if (!a->warned_no_usage)
			log_warn("the exchange has no usage endpoint; "
			         "reports stay in the spool",
			         "status=%ld", r->status);
		a->warned_no_usage = 1;
	} else {
		a->n_send_fail++;
		log_warn("usage batch not taken; kept for resending",
		         "reports=%d status=%ld detail=%s", n, r->status,
		         log_quote((char[300]){0}, 300, r->detail));
	}
	return SENT_LATER;
}

static void ack(struct agent *a, const struct spool_report *p)
{
	char err[512];
	/* counted when marked: a report whose mark failed stays pending,
	 * is sent again and counted then (once, here and at the exchange) */
	if (spool_ack(a->spool, p->seq, err, sizeof err) < 0) {
		log_warn("could not mark a report acknowledged; it will be "
		         "resent and counted once",
		         "seq=%" PRIu64 " err=%s", p->seq,
		         log_quote((char[600]){0}, 600, err));
		return;
	}
	a->n_acked++;
}

/* The exchange refused a batch (409: a number reused with another body;
 * 422: a report it cannot take): one by one, so that only the reports
 * refused on their own are set aside and the rest are counted. */
static enum sent send_one_by_one(struct agent *a, const struct spool_report *p,
                                 int n)
{
	char err[512];
	for (int i = 0; i < n; i++) {
		struct client_resp r;
		enum sent st = post_batch(a, &p[i], 1, &r);
		if (st == SENT_OK) {
			ack(a, &p[i]);
		} else if (st == SENT_REFUSED) {
			json_t *e = json_array_get(
			    json_object_get(r.json, "errors"), 0);
			const char *d =
			    json_string_value(json_object_get(e, "detail"));
			log_error(
			    "usage report refused by the exchange; set aside "
			    "in the spool (a person must look)",
			    "epoch=%" PRIu64 " seq=%" PRIu64
			    " contract=%s status=%ld detail=%s",
			    p[i].epoch, p[i].seq, p[i].contract, r.status,
			    log_quote((char[400]){0}, 400, d ? d : r.detail));
			/* counted when marked, as an ack */
			if (spool_set_aside(a->spool, p[i].seq, err,
			                    sizeof err) < 0)
				log_error("could not set a report aside",
				          "err=%s",
				          log_quote((char[600]){0}, 600, err));
			else
				a->n_set_aside++;
		}
		client_resp_clear(&r);
		if (st == SENT_LATER || st == SENT_DOWN)
			return st;
	}
	return SENT_OK;
}

void agent_report_send(struct agent *a)
{
	static struct spool_report p[AGENT_BATCH];
	char err[512];

	for (int round = 0; round < AGENT_MAX_BATCHES; round++) {
		int n = spool_pending(a->spool, p, AGENT_BATCH);
		if (n > AGENT_BATCH)
			n = AGENT_BATCH;
		if (n == 0)
			break;
		struct client_resp r;
		enum sent st = post_batch(a, p, n, &r);
		client_resp_clear(&r);
		if (st == SENT_OK)
			for (int i = 0; i < n; i++)
				ack(a, &p[i]);
		else if (st == SENT_REFUSED)
			st = send_one_by_one(a, p, n);
		if (st != SENT_OK)
			break;
	}
	if (spool_records(a->spool) > 4096 &&
	    spool_pending(a->spool, p, 0) < 1024 &&
	    spool_compact(a->spool, err, sizeof err) < 0)
		log_warn("could not compact the spool", "err=%s",
		         log_quote((char[600]){0}, 600, err));
}

void agent_report_cut_all(struct agent *a, rx_time_ns t)
{
	struct meter_period p;
	const char *why;
	/* from the last: a contract stopped here leaves the table (its
	 * place taken by the last one, already cut), and one put back after
	 * a failed spool joins it at the end, not cut twice a round */
	for (int i = meter_count(a->meter) - 1; i >= 0; i--) {
		const char *id = meter_id(a->meter, i);
		int64_t cid = strtoll(id, NULL, 10);
		struct held *h = agent_contract_find(a, cid);
		/* a draining one: its lender still holds the pages, so this
		 * is not its last period, unless its time to report is over */
		if (!h && (h = agent_lend_tail(a, cid)) &&
		    t >= h->lend_tail_end) {
			agent_lend_tail_end(a, h, t);
			continue;
		}
		if (!h || h->last_unspooled) {
			/* its last period, which the spool refused before
			 * (the contract may be over and forgotten since) */
			if (meter_stop(a->meter, id, t, &p, &why) == 0) {
				agent_lend_adjust(a, h, &p);
				if (agent_report_spool(a, h, &p, 0, 1) == 0 &&
				    h)
					h->last_unspooled = h->metering = 0;
			}
			continue;
		}
		if (meter_cut(a->meter, id, t, &p, &why) == 0) {
			agent_lend_adjust(a, h, &p);
			agent_report_spool(a, h, &p, meter_pages(a->meter, id),
			                   0);
		}
	}
}
