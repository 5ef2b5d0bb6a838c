/*
 * fuzz_spool.c — libFuzzer target for the agent's spool recovery, the
 * bytes a disk gives back after a crash. The input first builds a real
 * spool (appends, acks, set-asides, compactions, from its opening bytes)
 * and then damages the file: a torn tail of the unsynced records (garbage
 * or zeros from an offset on), or bytes changed anywhere. Opening it must
 * either refuse with a reason, leaving the file as it was, or give back
 * pending reports in order, keep every report that was synced when the
 * damage is a torn unsynced tail, and number new reports after every
 * report it read. Files live on /dev/shm, so fsync costs nothing.
 */
#include "node-agent/spool.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char path[64];

static void die(const char *what)
{
	fprintf(stderr, "fuzz_spool: %s\n", what);
	abort();
}

static long read_all(char *buf, long cap)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	long n = read(fd, buf, (size_t)cap);
	close(fd);
	return n;
}

static void write_all(const char *buf, long n)
{
	int fd = open(path, O_WRONLY | O_TRUNC);
	if (fd < 0 || write(fd, buf, (size_t)n) != n)
		abort();
	close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char before[1 << 16], after[1 << 16];
	static struct spool_report p[512];
	char err[512];
	size_t i = 0;

	if (!path[0])
		snprintf(path, sizeof path, "/dev/shm/fuzz_spool.%d",
		         (int)getpid());
	unlink(path);
	struct spool *s = spool_open(path, 77, err, sizeof err);
	if (!s)
		die(err);

	/* build: one byte an operation until a 0xff byte or 200 of them */
	uint64_t appended = 0, max_seq = 0;
	long synced_size = 0; /* the file's size after its last fsync */
	struct stat st;
	if (stat(path, &st) == 0) /* the header, synced as it was made */
		synced_size = st.st_size;
	for (int ops = 0; i < size && data[i] != 0xff && ops < 200; ops++) {
		uint8_t op = data[i++];
		struct spool_report r;
		switch (op % 4) {
		case 0:
		case 1:
			memset(&r, 0, sizeof r);
			snprintf(r.contract, sizeof r.contract, "c%u", op >> 4);
			r.start = (int64_t)appended * 60;
			r.end = r.start + 60;
			r.page_seconds = op;
			if (spool_append(s, &r, err, sizeof err) < 0)
				die(err);
			appended++;
			max_seq = r.seq;
			break;
		case 2:
			if (appended && spool_ack(s, 1 + (op >> 2) % appended,
			                          err, sizeof err) < 0)
				die(err);
			continue; /* not synced */
		case 3:
			if (op & 0x80) {
				if (spool_compact(s, err, sizeof err) < 0)
					die(err);
			} else if (appended &&
			           spool_set_aside(s, 1 + (op >> 2) % appended,
			                           err, sizeof err) < 0) {
				die(err);
			}
			break;
		}
		if (stat(path, &st) == 0)
			synced_size = st.st_size;
	}
	int pending_before = spool_pending(s, p, 512);
	spool_close(s);
	if (i < size)
		i++; /* the 0xff */

	long n = read_all(before, sizeof before);
	if (n < 0)
		die("the spool file is gone");
	memcpy(after, before, (size_t)n);
	/* damage: mode, then offset (2 bytes), then the bytes to write */
	int mode = i < size ? data[i++] % 3 : 0;
	long off = 0;
	if (i + 1 < size) {
		off = (long)data[i] << 8 | data[i + 1];
		i += 2;
	}
	int torn = 0;
	if (mode == 0 && n > synced_size) { /* torn unsynced tail */
		off = synced_size + off % (n - synced_size + 1);
		for (long k = off; k < n; k++)
			after[k] = i < size ? (char)data[i++] : 0;
		torn = 1;
	} else if (n > 0) { /* bytes changed anywhere */
		off %= n;
		for (long k = off; k < n && i < size; k++)
			after[k] = (char)data[i++];
	}
	write_all(after, n);

	s = spool_open(path, 78, err, sizeof err);
	if (!s) {
		if (torn) {
			fprintf(stderr, "%s (synced %ld of %ld, off %ld)\n",
			        err, synced_size, n, off);
			die("a torn unsynced tail was refused");
		}
		if (!err[0])
			die("refused without a reason");
		long m = read_all(before, sizeof before);
		if (m != n || memcmp(before, after, (size_t)n) != 0)
			die("a refused spool was changed");
		unlink(path);
		return 0;
	}
	int np = spool_pending(s, p, 512);
	uint64_t seen = 0;
	for (int k = 0; k < np; k++) {
		if (p[k].seq <= seen)
			die("pending reports out of order");
		seen = p[k].seq;
	}
	/* a torn tail may lose acks (more pending), never a synced report */
	if (torn && np < pending_before)
		die("a torn unsynced tail lost a synced report");
	struct spool_report r;
	memset(&r, 0, sizeof r);
	snprintf(r.contract, sizeof r.contract, "new");
	if (spool_append(s, &r, err, sizeof err) < 0)
		die(err);
	if (r.seq <= seen || (torn && r.seq <= max_seq))
		die("a new report reuses a number");
	spool_close(s);
	unlink(path);
	return 0;
}
