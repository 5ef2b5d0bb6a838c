/* exec_cgroup.c — the cgroup v2 executor backend (see exec.h).
 *
 * The cgroup may use `base` pages when nothing is sold. Pages given away
 * (offline or lent: to a cgroup both just mean "use fewer") lower its limit,
 * borrowed pages raise it: limit = base − given + borrowed. Lowering writes
 * memory.high first (reclaim without OOM), asks memory.reclaim for the
 * excess where the kernel has it (5.19+), then sets memory.max no lower
 * than what the cgroup still uses: the workload is never OOM-killed for a
 * sale, the sale is delivered short instead. Raising writes memory.max
 * first, so the limits never cross.
 *
 * Limits left by an agent that crashed stay in place until the restarted
 * agent re-takes its contracts' pages (exec_take), which rewrites them.
 */
#include "node-agent/exec.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct cg {
	char dir[PATH_MAX];
	rx_pages base;
	struct exec_totals held;
};

static int cg_path(const struct cg *c, const char *file, char *out)
{
	return snprintf(out, PATH_MAX, "%s/%s", c->dir, file) < PATH_MAX ? 0
	                                                                 : -1;
}

/* Reads a number of bytes, or "max" as -1, from a cgroup file. */
static int cg_read(const struct cg *c, const char *file, int64_t *v, char *err,
                   size_t errlen)
{
	char path[PATH_MAX], buf[64];
	int fd;
	ssize_t n;

	if (cg_path(c, file, path) < 0 ||
	    (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		snprintf(err, errlen, "could not open %s/%s: %s", c->dir, file,
		         strerror(errno));
		return -1;
	}
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0) {
		snprintf(err, errlen, "could not read %s/%s", c->dir, file);
		return -1;
	}
	buf[n] = 0;
	if (strncmp(buf, "max", 3) == 0) {
		*v = -1;
		return 0;
	}
	char *end;
	errno = 0;
	long long x = strtoll(buf, &end, 10);
	if (errno || end == buf || x < 0) {
		snprintf(err, errlen, "%s/%s does not hold a byte count",
		         c->dir, file);
		return -1;
	}
	*v = x;
	return 0;
}

/* Writes a byte count. `optional`: a missing file is not an error. */
static int cg_write(const struct cg *c, const char *file, int64_t bytes,
                    int optional, char *err, size_t errlen)
{
	char path[PATH_MAX], buf[32];
	int fd, len;

	if (cg_path(c, file, path) < 0)
		return -1;
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 && optional && errno == ENOENT)
		return 0;
	if (fd < 0) {
		snprintf(err, errlen, "could not open %s/%s: %s", c->dir, file,
		         strerror(errno));
		return -1;
	}
	len = snprintf(buf, sizeof buf, "%" PRId64 "\n", bytes);
	ssize_t w = write(fd, buf, (size_t)len);
	int saved = errno;
	close(fd);
	/* memory.reclaim says EAGAIN when it reclaimed less than asked;
	 * memory.current tells how far it got. */
	if (w != len && !(optional && saved == EAGAIN)) {
		snprintf(err, errlen, "could not write %s/%s: %s", c->dir, file,
		         strerror(saved));
		return -1;
	}
	return 0;
}

static rx_pages pages_up(int64_t bytes)
{
	return (bytes + RX_PAGE_SIZE - 1) / RX_PAGE_SIZE;
}

static int cg_apply(void *impl, const struct exec_totals *want,
                    struct exec_totals *got, char *err, size_t errlen)
{
	struct cg *c = impl;
	rx_pages borrow = want->pages[EXEC_BORROW];
	rx_pages out = want->pages[EXEC_OFFLINE] + want->pages[EXEC_LEND];
	rx_pages held_out =
	    c->held.pages[EXEC_OFFLINE] + c->held.pages[EXEC_LEND];
	rx_pages limit = c->base - out + borrow;
	int64_t cur;

	if (limit < 0)
		limit = 0;
	if (out <= held_out && borrow >= c->held.pages[EXEC_BORROW]) {
		/* Raising (or no change): max first, then high. */
		if (cg_write(c, "memory.max", limit * RX_PAGE_SIZE, 0, err,
		             errlen) < 0 ||
		    cg_write(c, "memory.high", limit * RX_PAGE_SIZE, 0, err,
		             errlen) < 0)
			return -1;
		*got = *want;
		c->held = *got;
		return 0;
	}
	if (cg_write(c, "memory.high", limit * RX_PAGE_SIZE, 0, err, errlen) <
	        0 ||
	    cg_read(c, "memory.current", &cur, err, errlen) < 0)
		return -1;
	if (pages_up(cur) > limit) {
		if (cg_write(c, "memory.reclaim",
		             (pages_up(cur) - limit) * RX_PAGE_SIZE, 1, err,
		             errlen) < 0 ||
		    cg_read(c, "memory.current", &cur, err, errlen) < 0)
			return -1;
	}
	rx_pages reach = pages_up(cur) > limit ? pages_up(cur) : limit;
	if (cg_write(c, "memory.max", reach * RX_PAGE_SIZE, 0, err, errlen) <
	        0 ||
	    cg_write(c, "memory.high", reach * RX_PAGE_SIZE, 0, err, errlen) <
	        0)
		return -1;

	/* What could not be freed is missing from the kinds that grew. */
	rx_pages short_by = reach - limit;
	*got = *want;
	for (int k = EXEC_OFFLINE; k <= EXEC_LEND && short_by > 0; k++) {
		rx_pages grew = want->pages[k] - c->held.pages[k];
		if (grew <= 0)
			continue;
		rx_pages cut = grew < short_by ? grew : short_by;
		got->pages[k] -= cut;
		short_by -= cut;
	}
	c->held = *got;
	return 0;
}

static int cg_read_state(void *impl, struct exec_totals *now, char *err,
                         size_t errlen)
{
	struct cg *c = impl;
	(void)err;
	(void)errlen;
	*now = c->held;
	return 0;
}

static void cg_close(void *impl)
{
	free(impl);
}

static const struct exec_ops cgroup_ops = {"cgroup", cg_apply, cg_read_state,
                                           cg_close};

struct exec *exec_cgroup_new(const char *dir, rx_pages pages, char *err,
                             size_t errlen)
{
	struct cg *c = calloc(1, sizeof *c);
	int64_t max;

	if (!c) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (snprintf(c->dir, sizeof c->dir, "%s", dir) >= (int)sizeof c->dir) {
		snprintf(err, errlen, "cgroup path too long");
		goto fail;
	}
	if (cg_read(c, "memory.max", &max, err, errlen) < 0)
		goto fail;
	c->base = pages;
	if (pages <= 0) {
		if (max < 0) {
			snprintf(
			    err, errlen,
			    "%s/memory.max is \"max\": set cgroup_pages to the "
			    "pages the cgroup may use when nothing is sold",
			    dir);
			goto fail;
		}
		c->base = max / RX_PAGE_SIZE;
	}
	struct exec *e = exec_new(&cgroup_ops, c);
	if (!e)
		snprintf(err, errlen, "out of memory");
	return e;
fail:
	free(c);
	return NULL;
}
