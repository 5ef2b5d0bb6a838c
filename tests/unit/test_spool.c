/*
 * test_spool.c — the report spool survives crashes: every durable report
 * comes back exactly once, torn tails are dropped, damage is refused, and
 * sequence numbers are never reused, not even across compaction.
 */
#include "node-agent/spool.h"

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256], path[300];
static char err[512];

static void setup(void)
{
	const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(dir, sizeof dir, "%s/test_spool.XXXXXX", base);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/spool", dir);
}

static void teardown(void)
{
	char p[400];
	snprintf(p, sizeof p, "%s.tmp", path);
	unlink(p);
	unlink(path);
	rmdir(dir);
}

static struct spool *open_ok(uint64_t epoch)
{
	struct spool *s = spool_open(path, epoch, err, sizeof err);
	ck_assert_msg(s, "open: %s", err);
	return s;
}

static uint64_t add(struct spool *s, const char *contract, int64_t start,
                    int64_t ps, int final)
{
	struct spool_report r;
	memset(&r, 0, sizeof r);
	snprintf(r.contract, sizeof r.contract, "%s", contract);
	r.start = start;
	r.end = start + 60;
	r.page_seconds = ps;
	r.carry_pns = ps * 7 % 1000000000;
	r.final = final;
	ck_assert_msg(spool_append(s, &r, err, sizeof err) == 0, "append: %s",
	              err);
	return r.seq;
}

static long file_size(const char *p)
{
	struct stat st;
	ck_assert_int_eq(stat(p, &st), 0);
	return (long)st.st_size;
}

static void read_file(const char *p, char *buf, long n)
{
	FILE *f = fopen(p, "rb");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
}

static void write_file(const char *p, const char *buf, long n)
{
	unlink(p);
	FILE *f = fopen(p, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fwrite(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
}

START_TEST(append_and_reopen)
{
	struct spool *s = open_ok(1700000000);
	struct spool_report p[8];

	ck_assert_int_eq(add(s, "c-1", 0, 100, 0), 1);
	ck_assert_int_eq(add(s, "c-2", 0, 200, 0), 2);
	ck_assert_int_eq(add(s, "c-1", 60, 300, 0), 3);
	spool_close(s);

	s = open_ok(1800000000); /* an existing spool keeps its epoch */
	ck_assert_int_eq(spool_epoch(s), 1700000000);
	ck_assert_int_eq(spool_pending(s, p, 8), 3);
	ck_assert_str_eq(p[2].contract, "c-1");
	ck_assert_int_eq(p[2].seq, 3);
	ck_assert_int_eq(p[2].epoch, 1700000000);
	ck_assert_int_eq(p[2].start, 60);
	ck_assert_int_eq(p[2].end, 120);
	ck_assert_int_eq(p[2].page_seconds, 300);
	ck_assert_int_eq(p[2].carry_pns, 2100);
	ck_assert_int_eq(spool_last(s, "c-1", &p[0]), 0);
	ck_assert_int_eq(p[0].seq, 3);
	ck_assert_int_eq(spool_last(s, "c-9", &p[0]), -1);
	ck_assert_int_eq(add(s, "c-2", 60, 1, 0), 4);
	spool_close(s);
}
END_TEST

START_TEST(acks_survive_reopen)
{
	struct spool *s = open_ok(7);
	struct spool_report p[8];

	for (int i = 0; i < 4; i++)
		add(s, "c", i * 60, i, 0);
	ck_assert_int_eq(spool_ack(s, 2, err, sizeof err), 0);
	ck_assert_int_eq(spool_ack(s, 2, err, sizeof err), 0);  /* again */
	ck_assert_int_eq(spool_ack(s, 99, err, sizeof err), 0); /* unknown */
	ck_assert_int_eq(spool_pending(s, p, 8), 3);
	spool_close(s);
	s = open_ok(7);
	ck_assert_int_eq(spool_pending(s, p, 8), 3);
	ck_assert_int_eq(p[0].seq, 1);
	ck_assert_int_eq(p[1].seq, 3);
	ck_assert_int_eq(p[2].seq, 4);
	ck_assert_int_eq(spool_records(s), 1 + 4 + 1);
	spool_close(s);
}
END_TEST

/* A crash can stop the file at any byte. Every prefix must open, hold
 * exactly the reports whose records are complete, and go on numbering
 * after them. */
START_TEST(every_truncation_recovers)
{
	struct spool *s = open_ok(42);
	static char full[64 * SPOOL_RECORD_SIZE];
	struct spool_report p[16];

	for (int i = 0; i < 5; i++)
		add(s, i % 2 ? "odd" : "even", i * 60, 1000 + i, 0);
	spool_ack(s, 1, err, sizeof err);
	spool_ack(s, 4, err, sizeof err);
	spool_close(s);
	long n = file_size(path);
	ck_assert_int_eq(n, 8 * SPOOL_RECORD_SIZE);
	read_file(path, full, n);

	for (long len = 0; len <= n; len++) {
		write_file(path, full, len);
		s = spool_open(path, 43, err, sizeof err);
		ck_assert_msg(s, "prefix %ld: %s", len, err);
		long whole = len / SPOOL_RECORD_SIZE;
		/* records: header, 5 reports, ack 1, ack 4 */
		int reports =
		    whole < 1 ? 0 : (int)(whole - 1 > 5 ? 5 : whole - 1);
		int acked = (whole >= 7) + (whole >= 8);
		ck_assert_int_eq(spool_epoch(s), whole >= 1 ? 42 : 43);
		ck_assert_int_eq(spool_pending(s, p, 16), reports - acked);
		for (int i = 1; i < reports - acked; i++)
			ck_assert(p[i].seq > p[i - 1].seq);
		for (int i = 0; i < reports - acked; i++)
			ck_assert_int_eq(p[i].page_seconds,
			                 1000 + (int)p[i].seq - 1);
		ck_assert_int_eq(spool_dropped(s),
		                 whole >= 1 ? len % SPOOL_RECORD_SIZE : 0);
		ck_assert_int_eq(add(s, "new", 0, 1, 0), (uint64_t)reports + 1);
		spool_close(s);
		/* ... and the cut file plus the new report reads back. */
		s = open_ok(44);
		ck_assert_int_eq(spool_pending(s, p, 16), reports - acked + 1);
		spool_close(s);
	}
}
END_TEST

START_TEST(torn_last_record_is_dropped)
{
	struct spool *s = open_ok(1);
	static char buf[8 * SPOOL_RECORD_SIZE];
	struct spool_report p[8];

	for (int i = 0; i < 3; i++)
		add(s, "c", i, i, 0);
	spool_close(s);
	long n = file_size(path);
	read_file(path, buf, n);
	buf[n - 10] ^= 0x5a; /* the last report half-written */
	write_file(path, buf, n);
	s = open_ok(1);
	ck_assert_int_eq(spool_dropped(s), SPOOL_RECORD_SIZE);
	ck_assert_int_eq(spool_pending(s, p, 8), 2);
	ck_assert_int_eq(add(s, "c", 9, 9, 0), 3);
	spool_close(s);
	ck_assert_int_eq(file_size(path), 4 * SPOOL_RECORD_SIZE);
}
END_TEST

/* Acks are not fsync'd, so a power cut can tear several of them, and the
 * report being appended behind them, in any order the page cache wrote
 * them back. Garbage from every byte offset of the last records on, and a
 * single bad record among them with good ones behind it, must open with
 * every synced report and only the torn part dropped. */
START_TEST(torn_unsynced_tail_recovers_at_every_byte)
{
	struct spool *s = open_ok(5);
	static char full[16 * SPOOL_RECORD_SIZE], buf[16 * SPOOL_RECORD_SIZE];
	struct spool_report p[16];

	/* header, reports 1..4, acks 1..3 (unsynced), report 5 (its fsync
	 * lost with the power, so it and the acks may all be torn) */
	for (int i = 0; i < 4; i++)
		add(s, "c", i * 60, 100 + i, 0);
	for (uint64_t q = 1; q <= 3; q++)
		ck_assert_int_eq(spool_ack(s, q, err, sizeof err), 0);
	add(s, "c", 240, 104, 0);
	spool_close(s);
	long n = file_size(path);
	ck_assert_int_eq(n, 9 * SPOOL_RECORD_SIZE);
	read_file(path, full, n);
	long synced = 5 * SPOOL_RECORD_SIZE; /* header + reports 1..4 */

	for (int mode = 0; mode < 3; mode++) {
		for (long off = synced; off < n; off++) {
			memcpy(buf, full, (size_t)n);
			if (mode == 0) /* garbage from off to the end */
				memset(buf + off, 0xa5, (size_t)(n - off));
			else if (mode == 1) /* zeros there: blocks never written */
				memset(buf + off, 0, (size_t)(n - off));
			else /* one byte flipped, good records behind it */
				buf[off] ^= 0x40;
			write_file(path, buf, n);
			s = spool_open(path, 6, err, sizeof err);
			ck_assert_msg(s, "mode %d, torn at %ld: %s", mode, off,
			              err);
			/* the first record the tear changed (zeros over a
			 * record's zero padding change nothing) */
			long first = off;
			while (first < n && buf[first] == full[first])
				first++;
			long rec = first / SPOOL_RECORD_SIZE;
			/* what survives: the records before the torn one */
			int acks = (int)(rec - 5 < 0 ? 0 : rec - 5);
			if (acks > 3)
				acks = 3;
			/* report 5 survives only when nothing was torn */
			int pending = 4 - acks + (rec == 9);
			ck_assert_int_eq(spool_epoch(s), 5);
			ck_assert_msg(spool_pending(s, p, 16) == pending,
			              "mode %d, torn at %ld: %d pending", mode,
			              off, spool_pending(s, p, 16));
			ck_assert_int_eq(spool_dropped(s),
			                 (size_t)(n - rec * SPOOL_RECORD_SIZE));
			ck_assert_int_eq(spool_dropped_records(s), 9 - rec);
			/* the unacked reports are all there, in order */
			for (int i = 0; i < pending; i++)
				ck_assert_int_eq(p[i].seq,
				                 (uint64_t)(acks + 1 + i));
			/* numbering goes on after the synced reports */
			ck_assert_int_eq(add(s, "new", 0, 1, 0), 5 + (rec == 9));
			spool_close(s);
			s = open_ok(7);
			ck_assert_int_eq(spool_pending(s, p, 16), pending + 1);
			spool_close(s);
		}
	}
}
END_TEST

/* An ack followed by a report whose fsync is known to have returned (a
 * later report was appended) went to disk with it: a bad one there is
 * damage, not a tear. */
START_TEST(bad_ack_before_a_synced_report_is_damage)
{
	struct spool *s = open_ok(1);
	static char buf[8 * SPOOL_RECORD_SIZE];

	add(s, "c", 0, 1, 0);
	ck_assert_int_eq(spool_ack(s, 1, err, sizeof err), 0);
	add(s, "c", 60, 2, 0);
	add(s, "c", 120, 3, 0); /* so report 2's fsync returned */
	spool_close(s);
	long n = file_size(path);
	read_file(path, buf, n);
	buf[2 * SPOOL_RECORD_SIZE + 3] ^= 1; /* the ack */
	write_file(path, buf, n);
	ck_assert_ptr_null(spool_open(path, 1, err, sizeof err));
	ck_assert_msg(strstr(err, "damaged at byte 256"), "%s", err);
}
END_TEST

START_TEST(damage_inside_is_refused)
{
	struct spool *s = open_ok(1);
	static char buf[8 * SPOOL_RECORD_SIZE];

	/* report 2 of 4: report 4 was appended only after report 3's fsync
	 * returned, and that one only after report 2's */
	for (int i = 0; i < 4; i++)
		add(s, "c", i, i, 0);
	spool_close(s);
	long n = file_size(path);
	read_file(path, buf, n);
	buf[2 * SPOOL_RECORD_SIZE + 40] ^= 1;
	write_file(path, buf, n);
	ck_assert_ptr_null(spool_open(path, 1, err, sizeof err));
	ck_assert_msg(strstr(err, "damaged at byte 256"), "%s", err);
	ck_assert_msg(strstr(err, "move it aside"), "%s", err);

	memset(buf, 'x', 2 * SPOOL_RECORD_SIZE);
	write_file(path, buf, 2 * SPOOL_RECORD_SIZE);
	ck_assert_ptr_null(spool_open(path, 1, err, sizeof err));
}
END_TEST

START_TEST(compaction_keeps_what_matters)
{
	struct spool *s = open_ok(5);
	struct spool_report p[256], r;

	for (int i = 0; i < 90; i++)
		add(s,
		    i % 3 == 0   ? "a"
		    : i % 3 == 1 ? "b"
		                 : "done",
		    i * 60, i, i == 89);
	/* The exchange acknowledged everything but seqs 10 and 50. */
	for (uint64_t q = 1; q <= 90; q++)
		if (q != 10 && q != 50)
			ck_assert_int_eq(spool_ack(s, q, err, sizeof err), 0);
	ck_assert_int_eq(spool_records(s), 1 + 90 + 88);
	ck_assert_msg(spool_compact(s, err, sizeof err) == 0, "%s", err);
	/* header + 2 pending + the last of a (seq 88) and of b (seq 89), each
	 * with its ack; "done" ended and is gone */
	ck_assert_int_eq(spool_records(s), 1 + 2 + 4);
	ck_assert_int_eq(spool_pending(s, p, 256), 2);
	ck_assert_int_eq(add(s, "a", 90 * 60, 1, 0), 91);
	spool_close(s);

	s = open_ok(6);
	ck_assert_int_eq(spool_epoch(s), 5);
	ck_assert_int_eq(spool_pending(s, p, 256), 3);
	ck_assert_int_eq(p[0].seq, 10);
	ck_assert_int_eq(p[1].seq, 50);
	ck_assert_int_eq(p[2].seq, 91);
	ck_assert_int_eq(spool_last(s, "b", &r), 0);
	ck_assert_int_eq(r.seq, 89); /* i = 88 */
	ck_assert(r.acked);
	ck_assert_int_eq(spool_last(s, "done", &r), -1);
	spool_close(s);

	/* The highest seq was acked and dropped: it must not come back. */
	s = open_ok(6);
	for (uint64_t q = 1; q <= 91; q++)
		spool_ack(s, q, err, sizeof err);
	add(s, "done2", 0, 1, 1);
	spool_ack(s, 92, err, sizeof err);
	ck_assert_int_eq(spool_compact(s, err, sizeof err), 0);
	spool_close(s);
	s = open_ok(6);
	ck_assert_int_eq(add(s, "x", 0, 1, 0), 93);
	spool_close(s);
}
END_TEST

START_TEST(bad_reports)
{
	struct spool *s = open_ok(1);
	struct spool_report r;

	memset(&r, 0, sizeof r);
	ck_assert_int_eq(spool_append(s, &r, err, sizeof err), -1);
	ck_assert(strstr(err, "contract id"));
	memset(r.contract, 'x', sizeof r.contract - 1);
	r.end = -1;
	ck_assert_int_eq(spool_append(s, &r, err, sizeof err), -1);
	ck_assert(strstr(err, "negative"));
	ck_assert_int_eq(add(s, "ok", 0, 0, 0), 1); /* nothing was numbered */
	spool_close(s);

	ck_assert_ptr_null(
	    spool_open("/nonexistent-dir/spool", 1, err, sizeof err));
	ck_assert(strstr(err, "could not create spool"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("spool");
	TCase *tc = tcase_create("spool");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, append_and_reopen);
	tcase_add_test(tc, acks_survive_reopen);
	tcase_add_test(tc, every_truncation_recovers);
	tcase_add_test(tc, torn_last_record_is_dropped);
	tcase_add_test(tc, torn_unsynced_tail_recovers_at_every_byte);
	tcase_add_test(tc, bad_ack_before_a_synced_report_is_damage);
	tcase_add_test(tc, damage_inside_is_refused);
	tcase_add_test(tc, compaction_keeps_what_matters);
	tcase_add_test(tc, bad_reports);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf ? 1 : 0;
}
