/* mglru.c — MGLRU generations to page-age bins; see mglru.h. */
#include "node-agent/mglru.h"
#include "common/err.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MGLRU_SANE (INT64_C(1) << 40) /* pages: above is a racy sum */

static const char *skip_sp(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

/* Reads up to `max` unsigned decimals separated by blanks up to the end of
 * the line; returns how many, or -1 when something else is on it. */
static int numbers(const char *p, const char *end, uint64_t *v, int max)
{
	int n = 0;
	for (p = skip_sp(p); p < end; p = skip_sp(p)) {
		uint64_t x = 0;
		if (*p < '0' || *p > '9' || n == max)
			return -1;
		for (; p < end && *p >= '0' && *p <= '9'; p++) {
			uint64_t d = (uint64_t)(*p - '0');
			if (x > (UINT64_MAX - d) / 10)
				return -1;
			x = x * 10 + d;
		}
		if (p < end && *p != ' ' && *p != '\t')
			return -1;
		v[n++] = x;
	}
	return n;
}

static int memcg_matches(const char *want, const char *path, size_t plen)
{
	size_t wl;
	if (!want || !strcmp(want, "/"))
		return 1;
	wl = strlen(want);
	while (wl > 1 && want[wl - 1] == '/')
		wl--;
	return plen >= wl && !memcmp(path, want, wl) &&
	       (plen == wl || path[wl] == '/');
}

static int64_t gap(int64_t a, int64_t b)
{
	if (a == WSEST_GEN_OPEN || b == WSEST_GEN_OPEN)
		return a == b ? 0 : INT64_MAX;
	return a > b ? a - b : b - a;
}

/* Adds a bin, merged into one whose range lies within `tol`. */
static void add_bin(struct wsest_gens *g, int64_t mn, int64_t mx, int64_t pages,
                    int64_t tol)
{
	int best = -1;
	int64_t best_d = INT64_MAX;

	for (int i = 0; i < g->nbins; i++) {
		struct wsest_gen_bin *b = &g->bin[i];
		int64_t d1 = gap(b->idle_min_ms, mn),
		        d2 = gap(b->idle_max_ms, mx);
		int64_t d = d1 > d2 ? d1 : d2;
		if (d < best_d) {
			best_d = d;
			best = i;
		}
	}
	if (best < 0 || (best_d > tol && g->nbins < WSEST_GEN_BINS)) {
		g->bin[g->nbins++] = (struct wsest_gen_bin){mn, mx, pages};
		return;
	}
	/* The union of both ranges holds every page of either. */
	struct wsest_gen_bin *b = &g->bin[best];
	if (mn < b->idle_min_ms)
		b->idle_min_ms = mn;
	if (mx > b->idle_max_ms)
		b->idle_max_ms = mx;
	b->pages += pages;
}

struct gen {
	uint64_t seq, age_ms, pages;
};

/* One lruvec's generations (oldest first, as printed) become bins: a page
 * in generation i was last seen accessed after that generation was made
 * and before the next younger one was, so it has been idle between the two
 * ages; the youngest from 0, the oldest (older ones merged in) open. */
static void flush_lruvec(struct mglru_view *v, const struct gen *gs, int n,
                         int64_t memcg, int node, int64_t tol)
{
	if (n == 0)
		return;
	for (int i = n - 1; i >= 0; i--) {
		int64_t mn = i == n - 1 ? 0 : (int64_t)gs[i + 1].age_ms;
		int64_t mx = i == 0 ? WSEST_GEN_OPEN : (int64_t)gs[i].age_ms;
		if (mx != WSEST_GEN_OPEN && mx < mn)
			mx = mn; /* ages from one read of jiffies: never */
		if (gs[i].pages)
			add_bin(&v->gens, mn, mx, (int64_t)gs[i].pages, tol);
		v->pages += (int64_t)gs[i].pages;
	}
	int64_t young = (int64_t)gs[n - 1].age_ms;
	if (v->nlv < MGLRU_MAX_LRUVECS) {
		struct mglru_lruvec *l = &v->lv[v->nlv++];
		memset(l, 0, sizeof *l);
		l->memcg_id = memcg;
		l->node = node;
		l->max_seq = gs[n - 1].seq;
		l->min_seq = gs[0].seq;
		l->youngest_age_ms = young;
		l->ngens = n;
		l->young_pages = (int64_t)gs[n - 1].pages;
		for (int i = 0; i < n; i++) {
			l->seq[i] = gs[i].seq;
			l->age_ms[i] = (int64_t)gs[i].age_ms;
			l->pages[i] = (int64_t)gs[i].pages;
		}
	}
	/* lru_gen (the debugfs file that takes commands) prints from the
	 * anonymous pages' oldest generation on */
	v->gens.min_seq_sum += gs[0].seq;
	if (v->nlv == 1 || young < v->gens.walk_age_ms)
		v->gens.walk_age_ms = young;
}

int mglru_parse(const char *text, const char *memcg, int64_t merge_ms,
                struct mglru_view *out, char *err, size_t errlen)
{
	const char *p = text;
	struct gen gs[MGLRU_MAX_GENS];
	int ng = 0, in = 0, node = -1, matched = 0;
	int64_t id = -1;

	memset(out, 0, sizeof *out);
	while (*p) {
		const char *nl = strchr(p, '\n');
		const char *end = nl ? nl : p + strlen(p);
		const char *q = skip_sp(p);
		uint64_t v[4];

		if (!strncmp(q, "memcg", 5) || !strncmp(q, "node", 4)) {
			if (in)
				flush_lruvec(out, gs, ng, id, node, merge_ms);
			ng = 0;
		}
		if (!strncmp(q, "memcg", 5)) {
			const char *r = skip_sp(q + 5), *path;
			char *e2;
			errno = 0;
			long long x = strtoll(r, &e2, 10);
			if (errno || e2 == r || x < 0)
				goto bad;
			path = skip_sp(e2);
			id = x;
			in = memcg_matches(memcg, path,
			                   (size_t)(end - path) -
			                       (end > path && end[-1] == ' '));
			matched |= in;
			node = -1;
		} else if (!strncmp(q, "node", 4)) {
			if (numbers(q + 4, end, v, 1) != 1)
				goto bad;
			node = (int)v[0];
		} else if (q < end) {
			int n = numbers(q, end, v, 4);
			if (n != 4 || node < 0)
				goto bad;
			if (in && ng < MGLRU_MAX_GENS) {
				uint64_t pages = 0;
				for (int k = 2; k < 4; k++)
					if (v[k] < (uint64_t)MGLRU_SANE)
						pages += v[k];
				gs[ng++] = (struct gen){v[0], v[1], pages};
			}
		}
		p = nl ? nl + 1 : end;
		continue;
	bad:
		err_set(err, errlen,
		        "lru_gen: cannot parse line \"%.*s\" (expected memcg, "
		        "node, or \"seq age_ms anon file\" lines)",
		        (int)(end - p > 120 ? 120 : end - p), p);
		return -1;
	}
	if (in)
		flush_lruvec(out, gs, ng, id, node, merge_ms);
	if (!matched) {
		err_set(err, errlen, "lru_gen has no memcg %s",
		        memcg ? memcg : "/");
		return -1;
	}
	if (out->gens.nbins == 0) {
		/* Nothing on the LRU at all: one empty bin says so. */
		out->gens.bin[0] = (struct wsest_gen_bin){0, WSEST_GEN_OPEN, 0};
		out->gens.nbins = 1;
	}
	return 0;
}

/* The lruvec of `v` that is `a`'s memcg on `a`'s node, or NULL. */
static const struct mglru_lruvec *same_lruvec(const struct mglru_view *v,
                                              const struct mglru_lruvec *a)
{
	for (int j = 0; j < v->nlv; j++)
		if (v->lv[j].memcg_id == a->memcg_id &&
		    v->lv[j].node == a->node)
			return &v->lv[j];
	return NULL;
}

int64_t mglru_young_gain(const struct mglru_view *before,
                         const struct mglru_view *after)
{
	int64_t gain = 0;

	for (int i = 0; i < after->nlv; i++) {
		const struct mglru_lruvec *a = &after->lv[i],
		                          *b = same_lruvec(before, a);
		if (!b)
			continue;
		if (a->max_seq != b->max_seq)
			gain += a->young_pages;
		else if (a->young_pages > b->young_pages)
			gain += a->young_pages - b->young_pages;
	}
	return gain;
}

int64_t mglru_window_gain(const struct mglru_view *before,
                          const struct mglru_view *after, int64_t window_ms)
{
	int64_t gain = 0;

	for (int i = 0; i < after->nlv; i++) {
		const struct mglru_lruvec *a = &after->lv[i],
		                          *b = same_lruvec(before, a);
		if (!b || a->max_seq != b->max_seq)
			continue; /* new, or walked or aged: not comparable */
		int64_t d = 0;
		for (int g = 0; g + 1 < a->ngens; g++) {
			if (a->age_ms[g + 1] >= window_ms)
				continue; /* not counted as working */
			int64_t was = 0;
			for (int h = 0; h < b->ngens; h++)
				if (b->seq[h] == a->seq[g])
					was = b->pages[h];
			d += a->pages[g] - was;
		}
		if (d > 0)
			gain += d;
	}
	return gain;
}

static int write_str(const char *path, const char *s, char *err, size_t errlen)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	size_t n = strlen(s);
	ssize_t w;

	if (fd < 0) {
		err_set(err, errlen, "could not open %s: %s", path,
		        strerror(errno));
		return -1;
	}
	w = write(fd, s, n);
	int e = errno;
	close(fd);
	if (w != (ssize_t)n) {
		err_set(err, errlen, "could not write \"%.*s\" to %s: %s",
		        (int)(n && s[n - 1] == '\n' ? n - 1 : n), s, path,
		        w < 0 ? strerror(e) : "short write");
		errno = w < 0 ? e : EIO;
		return -1;
	}
	return 0;
}

int mglru_age(const char *debug_file, const struct mglru_view *v,
              int64_t interval_ms, char *err, size_t errlen)
{
	int aged = 0;

	for (int i = 0; i < v->nlv; i++) {
		const struct mglru_lruvec *l = &v->lv[i];
		char cmd[96];
		if (l->youngest_age_ms < interval_ms)
			continue;
		int n = snprintf(cmd, sizeof cmd,
		                 "+ %" PRId64 " %d %" PRIu64 " 1 1\n",
		                 l->memcg_id, l->node, l->max_seq);
		/* One command an open: debugfs files do not seek, and one
		 * refused command fails the whole write it is in. */
		int fd = open(debug_file, O_WRONLY | O_CLOEXEC);
		if (fd < 0) {
			err_set(err, errlen, "could not open %s: %s",
			        debug_file, strerror(errno));
			return -1;
		}
		ssize_t w = write(fd, cmd, (size_t)n);
		int e = errno;
		close(fd);
		if (w == n) {
			aged++;
			continue;
		}
		/* EINVAL: the memcg went away, or the kernel's own reclaim
		 * made a generation since the read; the next sample tries
		 * again. */
		if (w < 0 && e == EINVAL)
			continue;
		err_set(err, errlen, "could not write \"%.*s\" to %s: %s",
		        n - 1, cmd, debug_file,
		        w < 0 ? strerror(e) : "short write");
		return -1;
	}
	return aged;
}

int mglru_enable(const char *enabled_file, int enable, char *err, size_t errlen)
{
	char buf[32];
	int fd = open(enabled_file, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0) {
		err_set(err, errlen,
		        "%s: %s (kernel without MGLRU, CONFIG_LRU_GEN)",
		        enabled_file, strerror(errno));
		return -1;
	}
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0) {
		err_set(err, errlen, "could not read %s", enabled_file);
		return -1;
	}
	buf[n] = 0;
	unsigned long caps = strtoul(buf, NULL, 0);
	if (caps & 1)
		return 1;
	if (!enable) {
		err_set(err, errlen,
		        "MGLRU is off (%s reads %.*s) and mglru_enable is off",
		        enabled_file, (int)strcspn(buf, "\n"), buf);
		return 0;
	}
	if (write_str(enabled_file, "y\n", err, errlen) < 0)
		return 0;
	return 1;
}

int mglru_memcg_path(const char *mounts, const char *dir, char *out,
                     size_t outlen)
{
	const char *p = mounts;
	size_t best = 0;
	int found = 0;

	while (*p) {
		const char *nl = strchr(p, '\n');
		const char *end = nl ? nl : p + strlen(p);
		char dev[64], mnt[512], type[32];
		if (sscanf(p, "%63s %511s %31s", dev, mnt, type) == 3 &&
		    !strcmp(type, "cgroup2")) {
			size_t ml = strlen(mnt);
			while (ml > 1 && mnt[ml - 1] == '/')
				ml--;
			if (!strncmp(dir, mnt, ml) &&
			    (dir[ml] == 0 || dir[ml] == '/' || ml == 1) &&
			    (!found || ml > best)) {
				best = ml;
				found = 1;
			}
		}
		p = nl ? nl + 1 : end;
	}
	if (!found)
		return -1;
	const char *rest = best == 1 ? dir : dir + best;
	size_t rl = strlen(rest);
	while (rl > 1 && rest[rl - 1] == '/')
		rl--;
	if (rl == 0)
		snprintf(out, outlen, "/");
	else
		snprintf(out, outlen, "%.*s", (int)rl, rest);
	return 0;
}
