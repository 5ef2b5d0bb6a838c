/*
 * main.c — ramex-fleet: runs the policies on one simulated fleet and prints
 * the figures; the only part of the simulator that reads a clock (to print
 * its own speed, on stderr, so that stdout and the files it writes are the
 * same for the same seed).
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

static void usage(FILE *o)
{
	fprintf(o,
	        "usage: ramex-fleet [options]\n"
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
	        "Prints the figures table on stdout and its speed on stderr.\n"
	        "The model and its figures: docs/economics.md.\n");
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

int main(int argc, char **argv)
{
	struct fleet_config c;
	int pol[FLEET_NPOLICIES], np = 0;
	const char *json = NULL, *svg = NULL;

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
		else if (!strcmp(a, "--tmo-target") && num(v, 0.0001, 50, 0, &d) == 0)
			c.tmo_target = d / 100;
		else if (!strcmp(a, "--agent-stall-value") &&
		         num(v, 0, 1e15, 1, &d) == 0) {
			c.strat.stall_value = (int64_t)d;
			c.stall_value_per_gib = 0;
		} else if (!strcmp(a, "--stall-value") && num(v, 0, 1e12, 1, &d) == 0)
			c.stall_value_per_gib = (int64_t)d;
		else if (!strcmp(a, "--source") && !strcmp(v, "mglru"))
			c.costs.source = WL_MGLRU;
		else if (!strcmp(a, "--source") && !strcmp(v, "page_idle"))
			c.costs.source = WL_PAGE_IDLE;
		else if (!strcmp(a, "--json"))
			json = v;
		else if (!strcmp(a, "--svg"))
			svg = v;
		else if (!strcmp(a, "--policies")) {
			char buf[128];
			if (strlen(v) >= sizeof buf) {
				fprintf(stderr,
				        "ramex-fleet: --policies is too long\n");
				return 2;
			}
			snprintf(buf, sizeof buf, "%s", v);
			np = 0;
			for (char *s = strtok(buf, ","); s; s = strtok(NULL, ",")) {
				int p = fleet_policy_parse(s);
				if (p < 0 || np == FLEET_NPOLICIES) {
					fprintf(stderr,
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
			fprintf(stderr, "ramex-fleet: bad option or value: %s %s\n",
			        a, v);
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
		if (fleet_run(&c, &r[i], err, sizeof err) < 0) {
			fprintf(stderr, "ramex-fleet: %s\n", err);
			return 1;
		}
		double s = now_s() - t0, cs = cpu_s() - c0;
		total += s;
		total_cpu += cs;
		fprintf(stderr,
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
