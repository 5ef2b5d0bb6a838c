/*
 * workload.c — ramex-lend-workload, the qemu lending suite's memory hog.
 *
 *   ramex-lend-workload MIB            write a pattern over MIB MiB, read it
 *                                      all back, compare
 *   ramex-lend-workload MIB GO-FILE    write, print "written", wait until
 *                                      GO-FILE exists, then read and compare
 *
 * Every 8-byte word holds splitmix64(word index), so a page swapped back to
 * the wrong place, or zeros from a lost page, shows as a mismatch. Prints
 * "workload: mib=N sum=HEX want=HEX bad_words=K" and exits 0 only when
 * nothing differs. Touching a lost page kills it with SIGBUS: that is the
 * failure the suite looks for when the lender vanishes.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static uint64_t mix(uint64_t x)
{
	x += UINT64_C(0x9e3779b97f4a7c15);
	x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
	return x ^ (x >> 31);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: ramex-lend-workload MIB [GO-FILE]\n");
		return 2;
	}
	long mib = atol(argv[1]);
	if (mib <= 0) {
		fprintf(stderr, "workload: MIB must be positive\n");
		return 2;
	}
	size_t words = (size_t)mib << 17; /* 2^20 / 8 */
	uint64_t *m = mmap(NULL, words * 8, PROT_READ | PROT_WRITE,
	                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		perror("workload: mmap");
		return 1;
	}
	uint64_t want = 0, sum = 0, bad = 0;
	for (size_t i = 0; i < words; i++) {
		m[i] = mix(i);
		want += m[i];
	}
	if (argc > 2) {
		printf("workload: written mib=%ld\n", mib);
		fflush(stdout);
		while (access(argv[2], F_OK) != 0)
			usleep(100000);
	}
	for (size_t i = 0; i < words; i++) {
		sum += m[i];
		bad += m[i] != mix(i);
	}
	printf("workload: mib=%ld sum=%016" PRIx64 " want=%016" PRIx64
	       " bad_words=%" PRIu64 "\n",
	       mib, sum, want, bad);
	return bad == 0 && sum == want ? 0 : 1;
}
