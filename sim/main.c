/*
 * main.c — ramex-fleet: runs the policies on one simulated fleet and prints
 * the figures; the only part of the simulator that reads a clock (to print
 * its own speed and progress, on stderr, so that stdout and the files it
 * writes are the same for the same seed). Before any work it checks the
 * run's size against fleet_cost_estimate: a large run says its cost, one
 * past the limit is refused.
 */
#include "sim/fleet.h"
#include "sim/report.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The largest run it starts without --max-machine-days: machines × days,
 * counted at the 30 s step (a shorter step costs more in proportion), about
 * twice the scale run (10 000 x 7). Past it a run of every policy takes
 * more than 50 min of CPU and 3.5 GiB (fleet_cost_estimate);
 * --machines 1000000 --days 366 would take three months and 8 TiB. */
#define MAX_MACHINE_DAYS 150000
/* Runs estimated past either figure are announced before they start: the
 * default fleet (1000 x 7, about 140 s by the estimate) is not. */
#define SAY_CPU_S  180.0
#define SAY_BYTES  (1024.0 * 1024 * 1024)
#define PROGRESS_S 15.0

static void usage(FILE *o)
{
	fprintf(
	    o, "usage: ramex-fleet [options]\n"
	       "  --machines N    machines in the fleet (1000)\n"
	       "  --first K       the fleet is machines K..K+N-1 of the seed's "
	       "(0): a machine\n                  alone, the same as in the "
	       "whole fleet\n"
	       "  --days D        simulated days (7)\n"
	       "  --seed S        the seed: same seed, same output (1)\n"
	       "  --policies L    comma-separated: static,tmo,market,oracle "
	       "(all)\n"
	       "  --step S        seconds per step, dividing 3600 (30)\n"
	       "  --threads T     threads for the workloads (2)\n"
	       "  --stall-value N n$ a second of stall costs an agent, per "
	       "GiB of its machine (20000; 0: the strategy's own stall_value)\n"
	       "  --agent-stall-value N  instead, N n$ a second on every "
	       "machine\n"
	       "  --tmo-target P  tmo's PSI some target, %% of time (0.05)\n"
	       "  --pressure P    the agents' PSI pressure threshold, %% of "
	       "time (0.5; 0: the estimator's default, 10)\n"
	       "  --source S      the agents' working-set signal: mglru (a "
	       "stock kernel's\n                  generations, the default) or "
	       "page_idle\n"
	       "  --json FILE     write the JSON summary there\n"
	       "  --svg FILE      write the chart there\n"
	       "  --max-machine-days N  refuse a run of more than N "
	       "machines x days\n");
	fprintf(
	    o,
	    "                  (%d; a step under 30 s counts 30/step "
	    "times): past\n                  it a run takes hours and "
	    "GiB; refused before any work\n"
	    "  --progress      a progress line on stderr every %.0f s (the "
	    "default when\n                  stderr is a terminal)\n"
	    "Prints the figures table on stdout and its speed on stderr; "
	    "before a run\nestimated at more than %.0f s of CPU or %.0f GiB "
	    "of memory, that estimate\non stderr.\n"
	    "The model and its figures: docs/economics.md.\n",
	    MAX_MACHINE_DAYS, PROGRESS_S, SAY_CPU_S,
	    SAY_BYTES / (1024.0 * 1024 * 1024));
}

/* A number in lo..hi; `whole`: an integer. strtod also reads "nan",
 * "inf" and hex floats: a NaN passed every range check (--days nan
 * crashed in calloc, --machines nan ran on a cast of NaN), so only finite
 * values are numbers here. */
static int num(const char *s, double lo, double hi, int whole, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi ||
	    (whole && v != floor(v)))
		return -1;
	*out = v;
	return 0;
}

/* Opens an output file before the run, so that a path that cannot be
 * written is said at once, not after minutes of simulation. */
static FILE *open_out(const char *path)
{
	FILE *f = path ? fopen(path, "w") : NULL;
	if (path && !f)
		fprintf(stderr, "ramex-fleet: cannot write %s: %s\n", path,
		        strerror(errno));
	return f;
}

static double clock_s(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static double now_s(void)
{
	return clock_s(CLOCK_MONOTONIC);
}

/* CPU time of all threads: on shared cores the honest measure of work. */
static double cpu_s(void)
{
	return clock_s(CLOCK_PROCESS_CPUTIME_ID);
}

/* A duration as a person reads it: "40 s", "14 min", "3.2 h", "51 days". */
static const char *human_s(double s, char *buf, size_t len)
{
	if (s < 90)
		snprintf(buf, len, "%.0f s", s);
	else if (s < 90 * 60)
		snprintf(buf, len, "%.0f min", s / 60);
	else if (s < 48 * 3600)
		snprintf(buf, len, "%.1f h", s / 3600);
	else
		snprintf(buf, len, "%.0f days", s / 86400);
	return buf;
}

static const char *human_bytes(double b, char *buf, size_t len)
{
	static const char *unit[] = {"MiB", "GiB", "TiB", "PiB"};
	int u = 0;
	b /= 1024.0 * 1024;
	while (b >= 1024 && u < 3) {
		b /= 1024;
		u++;
	}
	snprintf(buf, len, b < 10 ? "%.1f %s" : "%.0f %s", b, unit[u]);
	return buf;
}

/* The progress lines: at most one every PROGRESS_S of wall, on the
 * engine's hourly call. */
struct progress {
	const char *policy;
	int i, np;
	double days, t0, last;
};

static void progress_line(void *ctx, double done)
{
	struct progress *p = ctx;
	double t = now_s();
	if (t - p->last < PROGRESS_S || done <= 0)
		return;
	p->last = t;
	char a[32], b[32];
	double el = t - p->t0;
	fprintf(stderr,
	        "ramex-fleet: %s (%d of %d): day %.1f of %g (%.0f %%), %s so "
	        "far, about %s to go for it\n",
	        p->policy, p->i + 1, p->np, done * p->days, p->days, done * 100,
	        human_s(el, a, sizeof a),
	        human_s(el * (1 - done) / done, b, sizeof b));
}

int main(int argc, char **argv)
{
	struct fleet_config c;
	int pol[FLEET_NPOLICIES], np = 0;
	const char *json = NULL, *svg = NULL;
	double max_md = MAX_MACHINE_DAYS;
	int progress = isatty(STDERR_FILENO);

	fleet_config_default(&c);
	for (int p = 0; p < FLEET_NPOLICIES; p++)
		pol[np++] = p;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		double d;
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return 0;
		}
		if (!strcmp(a, "--progress")) {
			progress = 1;
			continue;
		}
		if (!v) {
			fprintf(stderr, "ramex-fleet: %s needs a value\n", a);
			usage(stderr);
			return 2;
		}
		i++;
		if (!strcmp(a, "--machines") && num(v, 1, 1e6, 1, &d) == 0)
			c.machines = (int)d;
		else if (!strcmp(a, "--first") && num(v, 0, 1e6, 1, &d) == 0)
			c.first = (int)d;
		else if (!strcmp(a, "--days") && num(v, 0.01, 366, 0, &d) == 0)
			c.days = d;
		else if (!strcmp(a, "--seed") && num(v, 0, 1e15, 1, &d) == 0)
			c.seed = (uint64_t)d;
		else if (!strcmp(a, "--step") && num(v, 1, 3600, 1, &d) == 0)
			c.dt_s = (int64_t)d;
		else if (!strcmp(a, "--threads") && num(v, 1, 64, 1, &d) == 0)
			c.threads = (int)d;
		else if (!strcmp(a, "--pressure") && num(v, 0, 100, 0, &d) == 0)
			c.pressure_ppm = (int64_t)(d * 10000);
		else if (!strcmp(a, "--tmo-target") &&
		         num(v, 0.0001, 50, 0, &d) == 0)
			c.tmo_target = d / 100;
		else if (!strcmp(a, "--agent-stall-value") &&
		         num(v, 0, 1e15, 1, &d) == 0) {
			c.strat.stall_value = (int64_t)d;
			c.stall_value_per_gib = 0;
		} else if (!strcmp(a, "--stall-value") &&
		           num(v, 0, 1e12, 1, &d) == 0)
			c.stall_value_per_gib = (int64_t)d;
		else if (!strcmp(a, "--source") && !strcmp(v, "mglru"))
			c.costs.source = WL_MGLRU;
		else if (!strcmp(a, "--source") && !strcmp(v, "page_idle"))
			c.costs.source = WL_PAGE_IDLE;
		else if (!strcmp(a, "--max-machine-days") &&
		         num(v, 1, 1e15, 0, &d) == 0)
			max_md = d;
		else if (!strcmp(a, "--json"))
			json = v;
		else if (!strcmp(a, "--svg"))
			svg = v;
		else if (!strcmp(a, "--policies")) {
			char buf[128];
			if (strlen(v) >= sizeof buf) {
				fprintf(
				    stderr,
				    "ramex-fleet: --policies is too long\n");
				return 2;
			}
			snprintf(buf, sizeof buf, "%s", v);
			np = 0;
			for (char *s = strtok(buf, ","); s;
			     s = strtok(NULL, ",")) {
				int p = fleet_policy_parse(s);
				if (p < 0 || np == FLEET_NPOLICIES) {
					fprintf(
					    stderr,
					    "ramex-fleet: unknown policy '%s' "
					    "(static, tmo, market, oracle)\n",
					    s);
					return 2;
				}
				pol[np++] = p;
			}
			if (np == 0) {
				fprintf(stderr,
				        "ramex-fleet: --policies names none "
				        "(static, tmo, market, oracle)\n");
				return 2;
			}
		} else {
			fprintf(stderr,
			        "ramex-fleet: bad option or value: %s %s\n", a,
			        v);
			usage(stderr);
			return 2;
		}
	}

	if (3600 % c.dt_s != 0) {
		fprintf(stderr,
		        "ramex-fleet: --step %lld does not divide an hour "
		        "(3600 s): 1, 2, 3, 4, 5, 6, 10, 15, 20, 30, 60 ... \n",
		        (long long)c.dt_s);
		return 2;
	}
	/* The size, before anything is written or allocated: a run past the
	 * limit is refused, a large one says what it will cost. */
	struct fleet_cost cost;
	char ts[32], ms[32];
	double md = c.machines * c.days * (c.dt_s < 30 ? 30.0 / c.dt_s : 1);
	fleet_cost_estimate(&c, pol, np, &cost);
	human_s(cost.cpu_s, ts, sizeof ts);
	human_bytes(cost.peak_bytes, ms, sizeof ms);
	if (md > max_md) {
		fprintf(stderr,
		        "ramex-fleet: %d machines x %g days is %.0f "
		        "machine-days, over the limit of %.0f: about %s of CPU "
		        "and %s of memory at its peak (the default fleet is "
		        "1000 machines x 7 days); --max-machine-days N raises "
		        "the limit\n",
		        c.machines, c.days, md, max_md, ts, ms);
		return 2;
	}
	if (cost.cpu_s > SAY_CPU_S || cost.peak_bytes > SAY_BYTES) {
		long pages = sysconf(_SC_PHYS_PAGES),
		     psz = sysconf(_SC_PAGESIZE);
		double have = pages > 0 && psz > 0 ? (double)pages * psz : 0;
		char hs[32];
		fprintf(
		    stderr,
		    "ramex-fleet: %d machines x %g days, %d %s: about %s of "
		    "CPU (the wall time on a free core) and %s of memory at "
		    "its peak%s%s%s\n",
		    c.machines, c.days, np, np == 1 ? "policy" : "policies", ts,
		    ms,
		    have > 0 && cost.peak_bytes > have ? ", more than the "
		                                       : "",
		    have > 0 && cost.peak_bytes > have
		        ? human_bytes(have, hs, sizeof hs)
		        : "",
		    have > 0 && cost.peak_bytes > have ? " this machine has"
		                                       : "");
	}
	struct progress pr = {.np = np, .days = c.days};
	if (progress) {
		c.progress = progress_line;
		c.progress_ctx = &pr;
	}
	FILE *jf = open_out(json), *sf = open_out(svg);
	if ((json && !jf) || (svg && !sf))
		return 1;
	struct fleet_result r[FLEET_NPOLICIES];
	double total = 0, total_cpu = 0;
	int bad = 0;
	for (int i = 0; i < np; i++) {
		char err[256];
		c.policy = pol[i];
		double t0 = now_s(), c0 = cpu_s();
		pr.policy = fleet_policy_name(pol[i]);
		pr.i = i;
		pr.t0 = pr.last = t0;
		if (fleet_run(&c, &r[i], err, sizeof err) < 0) {
			fprintf(stderr, "ramex-fleet: %s\n", err);
			return 1;
		}
		double s = now_s() - t0, cs = cpu_s() - c0;
		total += s;
		total_cpu += cs;
		fprintf(
		    stderr,
		    "ramex-fleet: %-6s %.1f s, %.0f machine-days/s (CPU %.1f "
		    "s, %.0f machine-days per CPU-second)\n",
		    fleet_policy_name(pol[i]), s,
		    c.machines * c.days / (s > 0 ? s : 1e-9), cs,
		    c.machines * c.days / (cs > 0 ? cs : 1e-9));
		bad += r[i].bad_balance + r[i].bad_billing + r[i].bad_core > 0;
	}
	fprintf(stderr,
	        "ramex-fleet: all %.1f s, %.0f machine-days/s (CPU %.1f s)\n",
	        total, np * c.machines * c.days / (total > 0 ? total : 1e-9),
	        total_cpu);
	report_table(stdout, &c, r, np);
	if (jf) {
		report_json(jf, &c, r, np);
		if (fclose(jf) != 0) {
			fprintf(stderr, "ramex-fleet: cannot write %s: %s\n",
			        json, strerror(errno));
			return 1;
		}
	}
	if (sf) {
		report_svg(sf, &c, r, np);
		if (fclose(sf) != 0) {
			fprintf(stderr, "ramex-fleet: cannot write %s: %s\n",
			        svg, strerror(errno));
			return 1;
		}
	}
	for (int i = 0; i < np; i++)
		fleet_result_free(&r[i]);
	return bad ? 3 : 0;
}
