/* probe.c — the active probing decision; see probe.h. */
#include "node-agent/core/probe.h"

#include <string.h>

void probe_config_default(struct probe_config *c)
{
	memset(c, 0, sizeof *c);
	c->ceiling_ppm = 5000;
	c->step_pct = 10;
	c->step_min = 256;
	c->step_max = 16384;
	c->backoff_samples = 10;
}

const char *probe_config_check(const struct probe_config *c)
{
	if (c->ceiling_ppm < 1 || c->ceiling_ppm > 1000000)
		return "the probing PSI ceiling must be 1..1000000 ppm";
	if (c->step_pct < 1 || c->step_pct > 100)
		return "the probe step must be 1..100 percent of the cold "
		       "pages";
	if (c->step_min < 1 || c->step_max < c->step_min)
		return "the probe's smallest step must be positive and at most "
		       "its largest";
	if (c->backoff_samples < 0)
		return "the probe back-off cannot be negative";
	return NULL;
}

rx_pages probe_next(const struct probe_config *c, struct probe *p,
                    const struct wsest_estimate *e)
{
	/* At once under pressure: the workload's own stall counts too, so a
	 * probe never adds to a stall that is already near the ceiling. */
	if (e->pressure || e->stall_ppm * 2 >= c->ceiling_ppm) {
		p->cooldown = c->backoff_samples;
		return 0;
	}
	if (p->cooldown > 0) {
		p->cooldown--;
		return 0;
	}
	if (e->source == WSEST_NONE)
		return 0;
	/* Refaulting: working pages are missing already, none are cold. */
	if (e->deficit > 0)
		return 0;
	rx_pages cold = e->resident - e->wss - e->wss_err;
	/* With MGLRU, no more than the generations know idle a window:
	 * reclaim takes the oldest generation first, and once it has taken
	 * the pages known cold it ages the rest, several times in a row if
	 * need be, which merges working pages into the oldest generation
	 * with the cold ones (in the guest, after a phase change at a 256
	 * MiB limit, the estimate then read every resident page as maybe
	 * working: 189 ± 59 MiB for a hot set of 150). */
	if (e->source == WSEST_MGLRU && cold > e->cold_known)
		cold = e->cold_known;
	if (cold < c->step_min)
		return 0;
	rx_pages step =
	    cold / 100 * c->step_pct + cold % 100 * c->step_pct / 100;
	if (step < c->step_min)
		step = c->step_min;
	if (step > c->step_max)
		step = c->step_max;
	return step;
}
