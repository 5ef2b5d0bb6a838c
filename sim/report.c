/* report.c — table, JSON and SVG of a fleet run; see report.h. */
#include "sim/report.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#define GIB_PAGES 262144.0

static double share(double a, double b)
{
	return b > 0 ? 100 * a / b : 0;
}

/* Dollars with cents, from nanodollars, exact. */
static const char *dollars(char *buf, size_t len, int64_t nd)
{
	int64_t c = nd / 10000000, a = c < 0 ? -c : c;
	snprintf(buf, len, "%s%" PRId64 ".%02" PRId64, c < 0 ? "-" : "",
	         a / 100, a % 100);
	return buf;
}

static const char *dur(char *buf, size_t len, double s)
{
	if (s >= 7200)
		snprintf(buf, len, "%.1f h", s / 3600);
	else if (s >= 120)
		snprintf(buf, len, "%.1f min", s / 60);
	else
		snprintf(buf, len, "%.0f s", s);
	return buf;
}

static double given(const struct fleet_result *r)
{
	return r->offline_ps + r->lent_ps;
}

static const char *report_source(enum wl_source s)
{
	return s == WL_MGLRU ? "mglru" : "page_idle";
}

/* Millions of pages a machine, averaged over the agents' decisions. */
static double per_decision(const struct fleet_result *x, double sum)
{
	return x->decisions > 0 ? sum / x->decisions / 1e6 : 0;
}

void report_table(FILE *out, const struct fleet_config *c,
                  const struct fleet_result *r, int n)
{
	char b[64];

	fprintf(out, "ramex-fleet: %d machines, %.1f days, seed %" PRIu64
	             ", step %" PRId64 " s, source %s",
	        c->machines, c->days, c->seed, c->dt_s,
	        report_source(c->costs.source));
	if (c->first > 0)
		fprintf(out, ", machines %d..%d of the seed's fleet", c->first,
		        c->first + c->machines - 1);
	fprintf(out, "\n");
	fprintf(out, "fleet RAM %.1f TiB, working set %.1f%% of it on "
	             "average\n\n",
	        n ? r[0].installed_ps / (r[0].machine_s / r[0].machines) /
	                GIB_PAGES / 1024
	          : 0,
	        n ? share(r[0].ws_ps, r[0].installed_ps) : 0);
	fprintf(out, "%-34s", "");
	for (int i = 0; i < n; i++)
		fprintf(out, "%14s", fleet_policy_name(r[i].policy));
	fprintf(out, "\n");
#define ROW(label, fmt, expr)                                                  \
	do {                                                                   \
		fprintf(out, "%-34s", label);                                  \
		for (int i = 0; i < n; i++) {                                  \
			const struct fleet_result *x = &r[i];                  \
			(void)x;                                               \
			fprintf(out, fmt, expr);                               \
		}                                                              \
		fprintf(out, "\n");                                            \
	} while (0)
	ROW("given back, % of installed", "%14.1f",
	    share(given(x), x->installed_ps));
	ROW("  offline, % of installed", "%14.1f",
	    share(x->offline_ps, x->installed_ps));
	ROW("  lent, % of installed", "%14.1f",
	    share(x->lent_ps, x->installed_ps));
	ROW("given back, % of idle", "%14.1f", share(given(x), x->idle_ps));
	ROW("stall, % of machine-time", "%14.4f",
	    share(x->stall_s, x->machine_s));
	ROW("stall, worst machine %", "%14.3f", 100 * x->worst_stall_share);
	ROW("  worst machine (--first)", "%14d", x->worst_machine);
	ROW("kept above the truth, M pages/mach.", "%14.3f",
	    per_decision(x, x->above));
	ROW("  estimate's bias", "%14.3f", per_decision(x, x->bias));
	ROW("  error bar", "%14.3f", per_decision(x, x->err));
	ROW("  margin", "%14.3f", per_decision(x, x->margin));
	ROW("  valued above the bid", "%14.3f", per_decision(x, x->valued));
	ROW("  band, lots, moves", "%14.3f",
	    per_decision(x, x->above - x->bias - x->err - x->margin -
	                        x->valued));
	ROW("contracts", "%14" PRId64, x->contracts);
	ROW("  offline / lend", "%14s",
	    (snprintf(b, sizeof b, "%" PRId64 "/%" PRId64,
	              x->offline_contracts, x->lend_contracts),
	     b));
	ROW("contract duration, median", "%14s", dur(b, sizeof b, x->dur_median_s));
	ROW("contract duration, p10", "%14s", dur(b, sizeof b, x->dur_p10_s));
	ROW("moving time, median", "%14s", dur(b, sizeof b, x->move_median_s));
	ROW("duration / moving time, median", "%14.0f", x->ratio_median);
	ROW("duration / moving time, p10", "%14.1f", x->ratio_p10);
	ROW("GiB moved per hour", "%14.1f",
	    x->pages_moved / GIB_PAGES / (x->days * 24));
	ROW("recalls", "%14" PRId64, x->recalls);
	ROW("releases (buyer ends)", "%14" PRId64, x->releases);
	ROW("breaches", "%14" PRId64, x->breaches);
	ROW("orders placed", "%14" PRId64, x->orders);
	ROW("operator spend, $", "%14s", dollars(b, sizeof b, x->operator_spend));
	ROW("sellers' revenue, $", "%14s", dollars(b, sizeof b, x->seller_revenue));
	ROW("borrowers' spend, $", "%14s", dollars(b, sizeof b, x->buyer_spend));
	ROW("exchange fees, $", "%14s", dollars(b, sizeof b, x->fees));
	ROW("ledger sum, n$", "%14" PRId64, (int64_t)x->ledger_sum);
	ROW("invariants broken (bal/bill/core/refused)", "%14s", (snprintf(b, sizeof b, "%" PRId64 "/%" PRId64 "/%" PRId64 "/%" PRId64, x->bad_balance, x->bad_billing, x->bad_core, x->refused), b));
	ROW("invariants broken", "%14" PRId64,
	    x->bad_balance + x->bad_billing + x->bad_core);
#undef ROW
}

void report_json(FILE *out, const struct fleet_config *c,
                 const struct fleet_result *r, int n)
{
	fprintf(out,
	        "{\"machines\":%d,\"first\":%d,\"days\":%.3f,\"seed\":%" PRIu64
	        ",\"step_s\":%" PRId64 ",\"source\":\"%s\",\"policies\":{",
	        c->machines, c->first, c->days, c->seed, c->dt_s,
	        report_source(c->costs.source));
	for (int i = 0; i < n; i++) {
		const struct fleet_result *x = &r[i];
		fprintf(
		    out,
		    "%s\"%s\":{\"given_back_pct_installed\":%.3f,"
		    "\"offline_pct_installed\":%.3f,\"lent_pct_installed\":%.3f,"
		    "\"given_back_pct_idle\":%.3f,\"ws_pct_installed\":%.3f,"
		    "\"stall_pct\":%.5f,\"worst_stall_pct\":%.4f,"
		    "\"worst_machine\":%d,"
		    "\"contracts\":%" PRId64 ",\"offline_contracts\":%" PRId64
		    ",\"lend_contracts\":%" PRId64
		    ",\"duration_median_s\":%.0f,\"duration_p10_s\":%.0f,"
		    "\"moving_median_s\":%.1f,\"duration_over_moving_median\":%."
		    "1f,\"duration_over_moving_p10\":%.2f,"
		    "\"gib_moved_per_hour\":%.2f,\"recalls\":%" PRId64
		    ",\"releases\":%" PRId64 ",\"breaches\":%" PRId64
		    ",\"late_deliveries\":%" PRId64 ",\"orders\":%" PRId64
		    ",\"operator_spend_nd\":%" PRId64
		    ",\"seller_revenue_nd\":%" PRId64
		    ",\"buyer_spend_nd\":%" PRId64 ",\"fees_nd\":%" PRId64
		    ",\"ledger_sum_nd\":%" PRId64 ",\"movements\":%" PRId64
		    ",\"usage_reports\":%" PRId64 ",\"invariants_broken\":%" PRId64
		    ",\"above_truth_mpages\":{\"all\":%.4f,\"bias\":%.4f,"
		    "\"error\":%.4f,\"margin\":%.4f,\"valued\":%.4f}"
		    "}",
		    i ? "," : "", fleet_policy_name(x->policy),
		    share(given(x), x->installed_ps),
		    share(x->offline_ps, x->installed_ps),
		    share(x->lent_ps, x->installed_ps),
		    share(given(x), x->idle_ps),
		    share(x->ws_ps, x->installed_ps),
		    share(x->stall_s, x->machine_s), 100 * x->worst_stall_share,
		    x->worst_machine,
		    x->contracts, x->offline_contracts, x->lend_contracts,
		    x->dur_median_s, x->dur_p10_s, x->move_median_s,
		    x->ratio_median, x->ratio_p10,
		    x->pages_moved / GIB_PAGES / (x->days * 24), x->recalls,
		    x->releases, x->breaches, x->late_deliveries, x->orders,
		    x->operator_spend, x->seller_revenue, x->buyer_spend,
		    x->fees, (int64_t)x->ledger_sum, x->movements,
		    x->usage_reports,
		    x->bad_balance + x->bad_billing + x->bad_core,
		    per_decision(x, x->above), per_decision(x, x->bias),
		    per_decision(x, x->err), per_decision(x, x->margin),
		    per_decision(x, x->valued));
	}
	fprintf(out, "}}\n");
}

static void polyline(FILE *out, const struct fleet_result *r, double x0,
                     double y0, double w, double h, double tmax,
                     double ymax, int which, const char *style)
{
	fprintf(out, "<polyline fill=\"none\" %s points=\"", style);
	for (int i = 0; i < r->npoints; i++) {
		const struct fleet_point *p = &r->timeline[i];
		double v = which == 0   ? p->installed
		           : which == 1 ? p->ws
		           : which == 2 ? p->used
		           : which == 3 ? p->offline
		           : which == 4 ? p->lent
		                        : p->offline + p->lent;
		fprintf(out, "%.1f,%.1f ", x0 + w * p->t_s / tmax,
		        y0 + h - h * v / ymax);
	}
	fprintf(out, "\"/>\n");
}

void report_svg(FILE *out, const struct fleet_config *c,
                const struct fleet_result *r, int n)
{
	const double pw = 560, ph = 250, ml = 60, mt = 40, gap = 70;
	int cols = n > 1 ? 2 : 1, rows = (n + cols - 1) / cols;
	double W = cols * (ml + pw + 20), H = rows * (ph + gap) + 80;
	double tmax = c->days * 86400, ymax = 0;

	for (int i = 0; i < n; i++)
		for (int j = 0; j < r[i].npoints; j++)
			if (r[i].timeline[j].installed > ymax)
				ymax = r[i].timeline[j].installed;
	double tib = GIB_PAGES * 1024;
	/* Round the axis up to a step of 1, 2 or 5 × 10^k TiB, 4 to 8 steps. */
	static const double mant[] = {1, 2, 5};
	double step = 1e-3, top = ymax * 1.02 / tib;
	for (int i = 0; top / step > 8; i++)
		step = mant[i % 3] * pow(10, i / 3 - 2);
	int nticks = (int)ceil(top / step);
	ymax = nticks * step * tib;
	fprintf(out,
	        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
	        "height=\"%.0f\" font-family=\"sans-serif\" font-size=\"12\">\n"
	        "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
	        "<text x=\"%.0f\" y=\"22\" font-size=\"15\">ramex-fleet: %d "
	        "machines, %.0f days, seed %" PRIu64
	        " — fleet RAM (TiB) over time</text>\n",
	        W, H, ml, c->machines, c->days, c->seed);
	static const char *legend[][2] = {
	    {"installed", "stroke=\"#888\" stroke-dasharray=\"4 3\""},
	    {"in use by workloads", "stroke=\"#1f6fd1\""},
	    {"working set (truth)", "stroke=\"#d62728\""},
	    {"offline", "stroke=\"#2ca02c\""},
	    {"lent", "stroke=\"#ff7f0e\""},
	    {"given back (offline + lent)", "stroke=\"#111\""}};
	for (int l = 0; l < 6; l++) {
		double lx = ml + l * 175 % (int)(W - ml), ly = H - 40 + (l * 175 >= W - ml ? 18 : 0);
		fprintf(out,
		        "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" "
		        "stroke-width=\"2\" %s/><text x=\"%.0f\" y=\"%.0f\">%s</text>\n",
		        lx, ly - 4, lx + 24, ly - 4, legend[l][1], lx + 30, ly,
		        legend[l][0]);
	}
	for (int i = 0; i < n; i++) {
		double x0 = ml + (i % cols) * (ml + pw + 20);
		double y0 = mt + (i / cols) * (ph + gap);
		fprintf(out,
		        "<text x=\"%.0f\" y=\"%.0f\" font-weight=\"bold\">%s</text>\n"
		        "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" "
		        "fill=\"none\" stroke=\"#ccc\"/>\n",
		        x0, y0 - 6, fleet_policy_name(r[i].policy), x0, y0, pw, ph);
		for (int k = 0; k <= nticks; k++) {
			double v = step * k, y = y0 + ph - ph * k / nticks;
			fprintf(out,
			        "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">%g"
			        "</text><line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" "
			        "y2=\"%.0f\" stroke=\"#eee\"/>\n",
			        x0 - 4, y + 4, v, x0, y, x0 + pw, y);
		}
		for (int d = 0; d <= (int)c->days; d++) {
			double x = x0 + pw * d * 86400 / tmax;
			fprintf(out,
			        "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">"
			        "day %d</text>\n",
			        x, y0 + ph + 16, d);
		}
		polyline(out, &r[i], x0, y0, pw, ph, tmax, ymax, 0,
		         "stroke=\"#888\" stroke-dasharray=\"4 3\"");
		polyline(out, &r[i], x0, y0, pw, ph, tmax, ymax, 2,
		         "stroke=\"#1f6fd1\" stroke-width=\"1.5\"");
		polyline(out, &r[i], x0, y0, pw, ph, tmax, ymax, 1,
		         "stroke=\"#d62728\" stroke-width=\"1.5\"");
		polyline(out, &r[i], x0, y0, pw, ph, tmax, ymax, 3,
		         "stroke=\"#2ca02c\" stroke-width=\"1.5\"");
		polyline(out, &r[i], x0, y0, pw, ph, tmax, ymax, 4,
		         "stroke=\"#ff7f0e\" stroke-width=\"1.5\"");
		polyline(out, &r[i], x0, y0, pw, ph, tmax, ymax, 5,
		         "stroke=\"#111\" stroke-width=\"1\"");
	}
	fprintf(out, "</svg>\n");
}
