/*
 * agent_sample.c — see agent_sample.h.
 */
#include "node-agent/agent_sample.h"

#include "common/log.h"
#include "node-agent/core/probe.h"
#include "node-agent/exec.h"
#include "node-agent/mglru.h"
#include "node-agent/sample.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* sim: the workload's size may be changed from outside (tests, demos)
 * through sim_usage_file, re-read every sample. */
static void sim_read_usage(struct agent *a)
{
	char buf[64];
	long long v;
	char *end;

	if (!a->cfg.sim_usage_file[0])
		return;
	FILE *f = fopen(a->cfg.sim_usage_file, "r");
	if (!f)
		return; /* absent: keep the current usage */
	if (fgets(buf, sizeof buf, f)) {
		errno = 0;
		v = strtoll(buf, &end, 10);
		if (!errno && end != buf && v >= 0 && v <= a->cfg.sim_total &&
		    v != a->cfg.sim_usage) {
			log_info("sim workload changed", "usage_pages=%lld", v);
			a->cfg.sim_usage = v;
			exec_sim_set_usage(a->ex, v);
		}
	}
	fclose(f);
}

#define AGENT_LRU_GEN_MAX (1 << 20) /* lru_gen of ~2000 memcgs */

/* Reads the generations into a->mg, the previous read going to
 * a->mg_probe; what the window's generations gained between the two
 * without a walk (mglru.h) is kept for the next sample. */
static int mglru_read(struct agent *a, char *err, size_t errlen)
{
	const char *memcg = a->memcg[0] ? a->memcg : NULL;
	struct mglru_view *prev = a->mg;

	if (sample_read_file(a->cfg.mglru_file, a->mglru_buf, AGENT_LRU_GEN_MAX,
	                     err, errlen) < 0 ||
	    mglru_parse(a->mglru_buf, memcg, 1000, a->mg_probe, err, errlen) <
	        0)
		return -1;
	a->window_gain_pending += mglru_window_gain(
	    prev, a->mg_probe, a->cfg.est.window_ns / 1000000);
	a->mg = a->mg_probe;
	a->mg_probe = prev;
	return 0;
}

/* Reads the generations; when the youngest is half a window old, ages them
 * and reads again, so that the histogram has the walk just made. */
static int mglru_sample(struct agent *a, struct wsest_sample *s, char *err,
                        size_t errlen)
{
	/* Aged every half window (at the first sample after), the oldest
	 * generation, which older ones are merged into, lies a window back
	 * or more, so that its pages are known not to be working. */
	int64_t half_ms = a->cfg.est.window_ns / 2000000;
	if (mglru_read(a, err, errlen) < 0)
		return -1;
	int aged = mglru_age(a->cfg.mglru_file, a->mg, half_ms, err, errlen);
	if (aged < 0)
		return -1;
	if (aged > 0 && mglru_read(a, err, errlen) < 0)
		return -1;
	s->gens = a->mg->gens;
	s->has_gens = 1;
	s->window_gain = a->window_gain_pending;
	a->window_gain_pending = 0;
	return 0;
}

int agent_sample_take(struct agent *a, rx_time_ns t, struct wsest_sample *s)
{
	char err[512];
	const char *why;

	if (!strcmp(a->cfg.backend, "sim")) {
		sim_read_usage(a);
		/* The sim's workload touches all of its pages: its working
		 * set is its usage, measured through the same estimator. */
		memset(s, 0, sizeof *s);
		s->t = t;
		/* A workload profile (sim_profile) moves along the clock;
		 * growing into pages it gave away takes offline pages back,
		 * which agent_contract_sync_losses turns into recalls. */
		s->active = exec_sim_advance(a->ex, t);
	} else {
		struct sample_source src = {
		    "",
		    !strcmp(a->cfg.backend, "cgroup") ? a->cfg.cgroup : NULL,
		    a->thp_pages};
		if (sample_take(&src, t, s, NULL, err, sizeof err) < 0) {
			log_error("could not sample memory", "err=%s",
			          log_quote((char[600]){0}, 600, err));
			return -1;
		}
		s->probed = a->probed_pending;
		s->rejected = a->rejected_pending;
		a->probed_pending = 0;
		a->rejected_pending = 0;
		if (a->mglru_on && mglru_sample(a, s, err, sizeof err) < 0) {
			log_warn("MGLRU generations unreadable; working set "
			         "from the other sources from now on",
			         "err=%s", log_quote((char[600]){0}, 600, err));
			a->mglru_on = 0;
		}
		if (!s->has_gens && a->idle &&
		    sample_idle_scan(a->idle, &s->idle, err, sizeof err) == 0 &&
		    s->idle.sampled > 0)
			s->has_idle = 1;
	}
	if (wsest_update(a->est, s, &a->e, &why) < 0) {
		log_error("estimator refused a sample", "why=%s",
		          log_quote((char[300]){0}, 300, why));
		return -1;
	}
	if (a->e.source != a->source && a->e.source != WSEST_NONE) {
		log_info("working-set source", "ramex_agent_wss_source=%s",
		         wsest_source_name(a->e.source));
		a->source = a->e.source;
	}
	a->swapped = s->swapped;
	a->n_samples++;
	return 0;
}

/* Takes the next probe's pages away (probe.h decides how many); the next
 * sample carries what memory.current fell by, so that the estimator sees
 * the refaults that follow against it. */
void agent_sample_probe(struct agent *a)
{
	char err[512];
	rx_pages want, taken;

	if (!a->probe_on)
		return;
	want = probe_next(&a->cfg.prb, &a->probe, &a->e);
	if (want <= 0)
		return;
	/* The generations either side of the probe: what it could not
	 * evict, reclaim puts into the youngest one (mglru.h). */
	int gens = a->mglru_on && mglru_read(a, err, sizeof err) == 0;
	if ((a->probe_on == PROBE_RECLAIM
	         ? sample_reclaim(a->probe_dir, want, &taken, err, sizeof err)
	         : sample_probe_high(a->probe_dir, want, a->probe_marker,
	                             &taken, err, sizeof err)) < 0) {
		log_warn("probing stopped", "err=%s",
		         log_quote((char[600]){0}, 600, err));
		a->probe_on = PROBE_OFF;
		return;
	}
	if (gens && mglru_read(a, err, sizeof err) == 0) {
		/* a->mg_probe: the read before, a->mg: after */
		rx_pages r = mglru_young_gain(a->mg_probe, a->mg);
		a->rejected_pending += r;
		log_debug("probe rejected", "pages=%lld", (long long)r);
	}
	log_debug("probe", "asked_pages=%lld taken_pages=%lld stall_ppm=%lld",
	          (long long)want, (long long)taken, (long long)a->e.stall_ppm);
	a->probed_pending += taken;
	a->probed_total += taken;
	a->n_probes++;
}

/* MGLRU as the working-set source: switched on if allowed, the cgroup's
 * path as lru_gen prints it found, and one read that parses. Any failure is
 * logged and leaves the other sources. */
void agent_sample_mglru_start(struct agent *a)
{
	char err[512], mounts[16384];
	int on = mglru_enable(MGLRU_ENABLED_FILE, a->cfg.mglru_enable, err,
	                      sizeof err);
	if (on <= 0)
		goto off;
	if (!strcmp(a->cfg.backend, "cgroup")) {
		if (sample_read_file("/proc/mounts", mounts, sizeof mounts, err,
		                     sizeof err) < 0)
			goto off;
		if (mglru_memcg_path(mounts, a->cfg.cgroup, a->memcg,
		                     sizeof a->memcg) < 0) {
			snprintf(err, sizeof err,
			         "%s is under no cgroup2 mount in /proc/mounts",
			         a->cfg.cgroup);
			goto off;
		}
	}
	a->mglru_buf = malloc(AGENT_LRU_GEN_MAX);
	a->mg = malloc(sizeof *a->mg);
	a->mg_probe = malloc(sizeof *a->mg_probe);
	if (!a->mglru_buf || !a->mg || !a->mg_probe) {
		snprintf(err, sizeof err, "out of memory");
		goto off;
	}
	if (sample_read_file(a->cfg.mglru_file, a->mglru_buf, AGENT_LRU_GEN_MAX,
	                     err, sizeof err) < 0 ||
	    mglru_parse(a->mglru_buf, a->memcg[0] ? a->memcg : NULL, 1000,
	                a->mg, err, sizeof err) < 0)
		goto off;
	a->mglru_on = 1;
	/* Collapses into huge pages count only where the kernel has THP. */
	a->thp_pages = sample_thp_pages(SAMPLE_THP_PMD_SIZE);
	log_info("MGLRU generations found", "file=%s memcg=%s lruvecs=%d",
	         a->cfg.mglru_file, a->memcg[0] ? a->memcg : "(all)",
	         a->mg->nlv);
	return;
off:
	log_info("no MGLRU working-set source", "why=%s",
	         log_quote((char[600]){0}, 600, err));
}

/* Probing: through the cgroup backend's cgroup, or for the whole machine
 * (kmod) through probe_cgroup; memory.reclaim or memory.high as probe_via
 * says and the cgroup offers. A memory.high an earlier agent left lowered
 * (killed mid-probe) is set back first. */
void agent_sample_probe_start(struct agent *a)
{
	char rp[CONFIG_STR + 32], hp[CONFIG_STR + 32], err[512];
	const char *dir = !strcmp(a->cfg.backend, "cgroup") ? a->cfg.cgroup
	                  : !strcmp(a->cfg.backend, "kmod")
	                      ? a->cfg.probe_cgroup
	                      : "";
	const char *via = a->cfg.probe_via;

	if (!a->cfg.probe || !dir[0])
		return;
	snprintf(a->probe_dir, sizeof a->probe_dir, "%s", dir);
	snprintf(a->probe_marker, sizeof a->probe_marker, "%s.probe-high",
	         a->cfg.spool);
	int r =
	    sample_probe_high_restore(dir, a->probe_marker, err, sizeof err);
	if (r < 0) {
		log_error(
		    "memory.high left lowered by a probe could not be set "
		    "back; no probing",
		    "err=%s", log_quote((char[600]){0}, 600, err));
		return;
	}
	if (r > 0)
		log_warn("set back memory.high that a probe had lowered when "
		         "the agent stopped",
		         "cgroup=%s", dir);
	snprintf(rp, sizeof rp, "%s/memory.reclaim", dir);
	snprintf(hp, sizeof hp, "%s/memory.high", dir);
	if (strcmp(via, "high") && access(rp, W_OK) == 0)
		a->probe_on = PROBE_RECLAIM;
	else if (strcmp(via, "reclaim") && access(hp, W_OK) == 0)
		a->probe_on = PROBE_HIGH;
	if (a->probe_on)
		log_info(a->probe_on == PROBE_RECLAIM
		             ? "probing through memory.reclaim"
		             : "probing through memory.high",
		         "cgroup=%s ceiling_ppm=%lld step_pct=%d", dir,
		         (long long)a->cfg.prb.ceiling_ppm,
		         a->cfg.prb.step_pct);
	else
		log_info(
		    "no probing",
		    "why=%s is not writable "
		    "(memory.reclaim: kernel 5.19+; memory.high: not at the "
		    "cgroup2 root)",
		    !strcmp(via, "high") ? hp : rp);
}
