/*
 * ramex_bench.c - pages per second offlined and onlined by ramex.ko, beside
 * the rate at which user space allocates and touches the same memory.
 * Runs inside the qemu guest booted by bench/30-kmod.sh.
 *
 * Usage: ramex_bench PATH/TO/ramex.ko PAGES ROUNDS
 *
 * Prints "RAMEX-BENCH name=pages_per_second" lines, the median of ROUNDS.
 * Measures only; never passes or fails on a number.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sys/mman.h>

#include "tests/kernel/guest_util.h"

#define PAGE 4096
#define MAX_ROUNDS 64

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return v[n / 2];
}

/* Moves @pages pages with calls of at most @chunk; returns seconds or -1. */
static double timed_pages(int fd, unsigned long cmd, uint64_t pages,
			  uint64_t chunk)
{
	uint64_t left = pages, done, n;
	double t0 = gu_now();

	while (left) {
		n = left < chunk ? left : chunk;
		if (gu_pages(fd, cmd, n, &done) || done != n)
			return -1;
		left -= n;
	}
	return gu_now() - t0;
}

static double timed_touch(uint64_t pages, double *unmap_s)
{
	size_t len = (size_t)pages * PAGE, i;
	double t0 = gu_now(), t;
	volatile char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return -1;
	for (i = 0; i < len; i += PAGE)
		p[i] = 1;
	t = gu_now() - t0;
	t0 = gu_now();
	munmap((void *)p, len);
	*unmap_s = gu_now() - t0;
	return t;
}

static void report(const char *name, uint64_t pages, double *secs, int n)
{
	double s = median(secs, n);

	printf("RAMEX-BENCH %s=%.0f\n", name, s > 0 ? (double)pages / s : 0);
}

int main(int argc, char **argv)
{
	double off[MAX_ROUNDS], on[MAX_ROUNDS], off_c[MAX_ROUNDS],
		on_c[MAX_ROUNDS], touch[MAX_ROUNDS], unmap[MAX_ROUNDS];
	uint64_t pages;
	int rounds, r, fd, ret;

	if (argc != 4) {
		fprintf(stderr, "usage: ramex_bench KO PAGES ROUNDS\n");
		return 2;
	}
	pages = strtoull(argv[2], NULL, 10);
	rounds = atoi(argv[3]);
	if (rounds < 1 || rounds > MAX_ROUNDS || !pages)
		return 2;
	ret = gu_load(argv[1], "");
	if (ret) {
		printf("RAMEX-BENCH-ERROR load %s\n", strerror(-ret));
		return 1;
	}
	fd = open(RAMEX_DEVICE, O_RDWR | O_CLOEXEC);
	for (r = 0; r < rounds; r++) {
		off[r] = timed_pages(fd, RAMEX_IOC_OFFLINE, pages, pages);
		on[r] = timed_pages(fd, RAMEX_IOC_ONLINE, pages, pages);
		off_c[r] = timed_pages(fd, RAMEX_IOC_OFFLINE, pages, 256);
		on_c[r] = timed_pages(fd, RAMEX_IOC_ONLINE, pages, 256);
		touch[r] = timed_touch(pages, &unmap[r]);
		if (off[r] < 0 || on[r] < 0 || off_c[r] < 0 || on_c[r] < 0 ||
		    touch[r] < 0) {
			printf("RAMEX-BENCH-ERROR round %d fell short\n", r);
			return 1;
		}
	}
	printf("RAMEX-BENCH pages=%llu\n", (unsigned long long)pages);
	report("offline_pages_per_s", pages, off, rounds);
	report("online_pages_per_s", pages, on, rounds);
	report("offline_256_per_call_pages_per_s", pages, off_c, rounds);
	report("online_256_per_call_pages_per_s", pages, on_c, rounds);
	report("user_alloc_touch_pages_per_s", pages, touch, rounds);
	report("user_munmap_pages_per_s", pages, unmap, rounds);
	close(fd);
	ret = gu_unload();
	printf("RAMEX-BENCH-END unload=%d\n", ret);
	return 0;
}
