/*
 * guest_util.h - helpers for the programs that run inside the qemu guest.
 *
 * Loading and unloading ramex.ko by system call (the guest has no kmod
 * tools), reading /proc/meminfo, /proc/zoneinfo and /sys/kernel/ramex, and
 * thin wrappers over the /dev/ramex ioctls. Shared by ramex_test.c and
 * ramex_bench.c; header-only because each program is one static binary.
 */
#ifndef RAMEX_GUEST_UTIL_H
#define RAMEX_GUEST_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "kmod/uapi/ramex.h"

/* Loads the module at @path with @params; returns 0 or -errno. */
static inline int gu_load(const char *path, const char *params)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	int ret;

	if (fd < 0)
		return -errno;
	ret = (int)syscall(SYS_finit_module, fd, params, 0);
	ret = ret ? -errno : 0;
	close(fd);
	return ret;
}

/* Unloads ramex without waiting for users; returns 0 or -errno. */
static inline int gu_unload(void)
{
	return syscall(SYS_delete_module, "ramex", O_NONBLOCK) ? -errno : 0;
}

/*
 * Reads a whole /proc file into @buf with plain read(): no stdio buffer,
 * so measuring memory does not itself allocate user memory.
 */
static inline int gu_slurp(const char *path, char *buf, size_t size)
{
	size_t len = 0;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	while (len + 1 < size && (n = read(fd, buf + len, size - 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	buf[len] = 0;
	return (int)len;
}

/* One field of a /proc/meminfo text in kB, or -1 when it is missing. */
static inline int64_t gu_meminfo_in(const char *text, const char *field)
{
	size_t n = strlen(field);
	const char *p = text;

	while ((p = strstr(p, field))) {
		if ((p == text || p[-1] == '\n') && p[n] == ':')
			return strtoll(p + n + 1, NULL, 10);
		p += n;
	}
	return -1;
}

/* One /proc/meminfo field in kB, or -1. */
static inline int64_t gu_meminfo(const char *field)
{
	static char buf[8192];

	if (gu_slurp("/proc/meminfo", buf, sizeof(buf)) < 0)
		return -1;
	return gu_meminfo_in(buf, field);
}

/*
 * Folds the per-CPU vmstat deltas into the global counters, so that
 * MemFree and MemAvailable are exact at the moment they are read.
 */
static inline void gu_stat_refresh(void)
{
	int fd = open("/proc/sys/vm/stat_refresh", O_WRONLY);

	if (fd >= 0) {
		if (write(fd, "1", 1) < 0)
			perror("stat_refresh");
		close(fd);
	}
}

/*
 * Free pages sitting on per-CPU lists: the kernel counts them as used in
 * MemFree, so exact accounting adds them back.
 */
static inline int64_t gu_pcp_pages(void)
{
	static char buf[1 << 16];
	long long sum = 0;
	const char *p = buf;

	if (gu_slurp("/proc/zoneinfo", buf, sizeof(buf)) < 0)
		return -1;
	while ((p = strstr(p, "\n              count: "))) {
		p += strlen("\n              count: ");
		sum += strtoll(p, NULL, 10);
	}
	return sum;
}

/* One /sys/kernel/ramex counter, or -1. */
static inline int64_t gu_sysfs(const char *name)
{
	char path[128];
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", RAMEX_SYSFS_DIR, name);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/* Runs a page ioctl; returns 0 or -errno and stores the pages moved. */
static inline int gu_pages(int fd, unsigned long cmd, uint64_t want,
			   uint64_t *done)
{
	struct ramex_pages req = { .pages = want };
	int ret = ioctl(fd, cmd, &req) ? -errno : 0;

	if (done)
		*done = req.done;
	return ret;
}

static inline int gu_stats(int fd, struct ramex_stats *st)
{
	memset(st, 0, sizeof(*st));
	return ioctl(fd, RAMEX_IOC_STATS, st) ? -errno : 0;
}

static inline double gu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#endif /* RAMEX_GUEST_UTIL_H */
