/*
 * agent_status.c — see agent_status.h.
 */
#include "node-agent/agent_status.h"

#include "common/log.h"
#include "node-agent/core/meter.h"
#include "node-agent/events.h"
#include "node-agent/exec.h"
#include "node-agent/spool.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static rx_pages held_of(const struct agent *a, enum exec_kind k)
{
	rx_pages n = 0;
	if (!a->ex)
		return 0;
	for (int i = 0; i < exec_count(a->ex); i++)
		if (exec_kind_of(a->ex, i) == k)
			n += exec_held(a->ex, exec_id(a->ex, i));
	return n;
}

/* A status file that cannot be written (no such folder, a full or
 * read-only disk) leaves the node's monitoring with stale figures or none:
 * the log says so once when it starts failing, with why, and once when it
 * is written again, not every sample. */
static void status_result(struct agent *a, int err)
{
	if (err && err != a->status_errno) {
		log_warn("could not write the status file; its figures are "
		         "stale until it can be",
		         "path=%s err=%s",
		         log_quote((char[CONFIG_STR + 8]){0}, CONFIG_STR + 8,
		                   a->cfg.status_file),
		         log_quote((char[200]){0}, 200, strerror(err)));
		a->n_errors++;
	} else if (!err && a->status_errno) {
		log_info("status file written again", "path=%s",
		         log_quote((char[CONFIG_STR + 8]){0}, CONFIG_STR + 8,
		                   a->cfg.status_file));
	}
	a->status_errno = err;
}

void agent_status_write(struct agent *a)
{
	char tmp[CONFIG_STR + 8];
	FILE *f;

	if (!a->cfg.status_file[0] || !a->spool)
		return;
	snprintf(tmp, sizeof tmp, "%s.tmp", a->cfg.status_file);
	if (!(f = fopen(tmp, "w"))) {
		status_result(a, errno);
		return;
	}
	static struct spool_report none[1];
	fprintf(f,
	        "# ramex-agent status (Prometheus text format)\n"
	        "ramex_agent_wss_pages %lld\n"
	        "ramex_agent_wss_err_pages %lld\n"
	        "ramex_agent_wss_source{source=\"%s\"} 1\n"
	        "ramex_agent_resident_pages %lld\n"
	        "ramex_agent_deficit_pages %lld\n"
	        "ramex_agent_thrashing %d\n"
	        "ramex_agent_collapsed_pages %lld\n"
	        "ramex_agent_dydx_us_per_page_year %lld\n"
	        "ramex_agent_probe_dydx_us_per_page_year %lld\n"
	        "ramex_agent_probes_total %lld\n"
	        "ramex_agent_probed_pages_total %lld\n"
	        "ramex_agent_stall_ppm %lld\n"
	        "ramex_agent_pressure %d\n"
	        "ramex_agent_stable %d\n"
	        "ramex_agent_need_pages %lld\n"
	        "ramex_agent_sold_pages %lld\n"
	        "ramex_agent_borrowed_pages %lld\n"
	        "ramex_agent_spare_pages %lld\n"
	        "ramex_agent_ask_spot %lld\n"
	        "ramex_agent_ask_perm %lld\n"
	        "ramex_agent_bid %lld\n"
	        "ramex_agent_contracts %d\n"
	        "ramex_agent_exchange_up %d\n"
	        "ramex_agent_samples_total %lld\n"
	        "ramex_agent_orders_total %lld\n"
	        "ramex_agent_cancels_total %lld\n"
	        "ramex_agent_deliveries_total %lld\n"
	        "ramex_agent_recalls_total %lld\n"
	        "ramex_agent_reports_total %lld\n"
	        "ramex_agent_reports_acked_total %lld\n"
	        "ramex_agent_reports_pending %d\n"
	        "ramex_agent_reports_set_aside %d\n"
	        "ramex_agent_usage_batches_total %lld\n"
	        "ramex_agent_reconciles_total %lld\n"
	        "ramex_agent_events_up %d\n"
	        "ramex_agent_events_total %lld\n"
	        "ramex_agent_event_connects_total %lld\n"
	        "ramex_agent_offline_pages %lld\n"
	        "ramex_agent_lent_pages %lld\n"
	        "ramex_agent_borrowed_held_pages %lld\n"
	        "ramex_agent_offline_moving_pages %lld\n"
	        "ramex_agent_lent_moving_pages %lld\n"
	        "ramex_agent_borrowed_moving_pages %lld\n"
	        "ramex_agent_errors_total %lld\n",
	        (long long)a->e.wss, (long long)a->e.wss_err,
	        wsest_source_name(a->e.source), (long long)a->e.resident,
	        (long long)a->e.deficit, a->e.thrashing,
	        (long long)a->e.collapsed, (long long)a->e.dydx,
	        (long long)a->e.probe_dydx, (long long)a->n_probes,
	        (long long)a->probed_total, (long long)a->e.stall_ppm,
	        a->e.pressure, a->e.stable, (long long)a->view.need,
	        (long long)a->view.sold, (long long)a->view.borrowed,
	        (long long)a->view.spare, (long long)a->view.ask[STRATEGY_SPOT],
	        (long long)a->view.ask[STRATEGY_PERM], (long long)a->view.bid,
	        exec_count(a->ex), a->reachable, (long long)a->n_samples,
	        (long long)a->n_orders, (long long)a->n_cancels,
	        (long long)a->n_deliveries, (long long)a->n_recalls,
	        (long long)a->n_reports, (long long)a->n_acked,
	        spool_pending(a->spool, none, 0),
	        spool_set_aside_count(a->spool), (long long)a->n_batches,
	        (long long)a->n_reconciles, a->ev ? events_up(a->ev) : 0,
	        (long long)(a->ev ? events_received(a->ev) : 0),
	        (long long)(a->ev ? events_connects(a->ev) : 0),
	        (long long)held_of(a, EXEC_OFFLINE),
	        (long long)held_of(a, EXEC_LEND),
	        (long long)held_of(a, EXEC_BORROW),
	        (long long)exec_moving_total(a->ex, EXEC_OFFLINE),
	        (long long)exec_moving_total(a->ex, EXEC_LEND),
	        (long long)exec_moving_total(a->ex, EXEC_BORROW),
	        (long long)a->n_errors);
	/* a person paused the automation; what people's orders hold open */
	fprintf(f,
	        "ramex_agent_paused %d\n"
	        "ramex_agent_others_buy_pages %lld\n"
	        "ramex_agent_others_sell_pages %lld\n",
	        a->paused, (long long)a->view.others_buy,
	        (long long)a->view.others_sell);
	/* the workload's pages out of memory and how often they come back:
	 * the floor under what a kept page is worth (wsest's comeback) */
	fprintf(f,
	        "ramex_agent_swapped_pages %lld\n"
	        "ramex_agent_comeback_rate_nps %lld\n"
	        "ramex_agent_comeback_value %lld\n",
	        (long long)a->swapped, (long long)a->e.comeback_nps,
	        (long long)a->e.comeback_value);
	for (int i = 0; i < meter_count(a->meter); i++)
		fprintf(
		    f, "ramex_agent_contract_pages{contract=\"%s\"} %lld\n",
		    meter_id(a->meter, i),
		    (long long)meter_pages(a->meter, meter_id(a->meter, i)));
	/* lend children running now, and started in all (restarts show as
	 * the second growing faster than the contracts) */
	int lend_up = 0, lend_starts = 0;
	for (int i = 0; i < a->nheld; i++)
		if (a->held[i].lc) {
			lend_up += a->held[i].lc->pid > 0;
			lend_starts += a->held[i].lc->starts;
		}
	for (int i = 0; i < a->ndraining; i++) {
		lend_up += a->draining[i].lc->pid > 0;
		lend_starts += a->draining[i].lc->starts;
	}
	fprintf(f,
	        "ramex_agent_lend_children %d\n"
	        "ramex_agent_lend_child_starts %d\n"
	        "ramex_agent_lenders_lost_total %lld\n",
	        lend_up, lend_starts, (long long)a->n_lenders_lost);
	/* What was metered and spooled per contract: the figure the
	 * exchange's counted usage must equal once the spool is sent. */
	for (int i = 0; i < a->nheld; i++) {
		struct spool_report last;
		char id[32];
		snprintf(id, sizeof id, "%" PRId64, a->held[i].id);
		if (spool_last(a->spool, id, &last) == 0)
			fprintf(f,
			        "ramex_agent_contract_page_seconds{contract="
			        "\"%s\"} %lld\n",
			        id, (long long)last.cum_page_seconds);
	}
	int err = ferror(f) ? EIO : 0;
	if (fclose(f) != 0 && !err)
		err = errno;
	if (!err && rename(tmp, a->cfg.status_file) != 0)
		err = errno;
	if (err)
		unlink(tmp);
	status_result(a, err);
}
