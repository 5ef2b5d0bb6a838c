/*
 * test_exec.c — the executor's contract table on the sim backend, the
 * cgroup backend on a fake cgroup directory (its files are plain files
 * here, so the test plays the kernel: it sets memory.current), and the kmod
 * backend's refusals (the real device is tested in the kernel suite).
 */
#include "node-agent/exec.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char err[512];

START_TEST(sim_take_and_give_back)
{
	struct exec *e = exec_sim_new(1000, 600); /* 400 free */
	rx_pages got;

	ck_assert_str_eq(exec_name(e), "sim");
	ck_assert_int_eq(
	    exec_take(e, "a", EXEC_OFFLINE, 300, &got, err, sizeof err), 0);
	ck_assert_int_eq(got, 300);
	/* only 100 left: a partial delivery */
	ck_assert_int_eq(
	    exec_take(e, "b", EXEC_LEND, 250, &got, err, sizeof err), 0);
	ck_assert_int_eq(got, 100);
	ck_assert_int_eq(exec_held(e, "b"), 100);
	/* nothing left: a contract that got nothing is not recorded */
	ck_assert_int_eq(
	    exec_take(e, "c", EXEC_OFFLINE, 10, &got, err, sizeof err), 0);
	ck_assert_int_eq(got, 0);
	ck_assert_int_eq(exec_held(e, "c"), -1);
	ck_assert_int_eq(exec_count(e), 2);

	/* borrowing 50 pages frees 50 to give away */
	ck_assert_int_eq(
	    exec_take(e, "d", EXEC_BORROW, 50, &got, err, sizeof err), 0);
	ck_assert_int_eq(got, 50);
	ck_assert_int_eq(
	    exec_take(e, "a", EXEC_OFFLINE, 80, &got, err, sizeof err), 0);
	ck_assert_int_eq(got, 50);
	ck_assert_int_eq(exec_held(e, "a"), 350);

	ck_assert_int_eq(exec_give_back(e, "a", 200, err, sizeof err), 0);
	ck_assert_int_eq(exec_held(e, "a"), 150);
	ck_assert_int_eq(exec_give_back(e, "a", 1000, err, sizeof err), 0);
	ck_assert_int_eq(exec_held(e, "a"), -1);
	ck_assert_int_eq(exec_give_back(e, "a", 1, err, sizeof err), -1);
	ck_assert(strstr(err, "holds no pages"));
	ck_assert_int_eq(
	    exec_take(e, "b", EXEC_OFFLINE, 1, &got, err, sizeof err), -1);
	ck_assert(strstr(err, "another kind"));

	ck_assert_int_eq(exec_release_all(e, err, sizeof err), 0);
	ck_assert_int_eq(exec_count(e), 0);
	/* everything back: the whole free memory can be given again */
	ck_assert_int_eq(
	    exec_take(e, "z", EXEC_OFFLINE, 1000, &got, err, sizeof err), 0);
	ck_assert_int_eq(got, 400);
	exec_close(e);
}
END_TEST

/* The kernel gives offline pages back on OOM; sync takes them from the
 * newest contracts and says so. */
START_TEST(sim_oom_sync)
{
	struct exec *e = exec_sim_new(10000, 0);
	struct exec_loss lost[EXEC_MAX_CONTRACTS];
	rx_pages got;

	exec_take(e, "old", EXEC_OFFLINE, 3000, &got, err, sizeof err);
	exec_take(e, "mid", EXEC_OFFLINE, 1000, &got, err, sizeof err);
	exec_take(e, "lend", EXEC_LEND, 1000, &got, err, sizeof err);
	exec_take(e, "new", EXEC_OFFLINE, 500, &got, err, sizeof err);
	ck_assert_int_eq(exec_sync(e, lost, err, sizeof err), 0);

	exec_sim_oom(e, 1200);
	ck_assert_int_eq(exec_sync(e, lost, err, sizeof err), 2);
	ck_assert_str_eq(lost[0].id, "new");
	ck_assert_int_eq(lost[0].pages, 500);
	ck_assert_str_eq(lost[1].id, "mid");
	ck_assert_int_eq(lost[1].pages, 700);
	ck_assert_int_eq(exec_held(e, "new"), -1);
	ck_assert_int_eq(exec_held(e, "mid"), 300);
	ck_assert_int_eq(exec_held(e, "lend"), 1000);
	ck_assert_int_eq(exec_sync(e, lost, err, sizeof err), 0);
	exec_close(e);
}
END_TEST

START_TEST(sim_adopt)
{
	struct exec *e = exec_sim_new(10000, 0);
	rx_pages got;

	exec_take(e, "a", EXEC_OFFLINE, 3000, &got, err, sizeof err);
	exec_sim_oom(e, 0);
	ck_assert_int_eq(exec_adopt(e, "b", EXEC_OFFLINE, 1, err, sizeof err),
	                 -1);
	ck_assert_msg(strstr(err, "holds 3000 pages"), "%s", err);
	ck_assert_int_eq(exec_adopt(e, "a", EXEC_OFFLINE, 1, err, sizeof err),
	                 -1);
	exec_close(e);
}
END_TEST

#define S INT64_C(1000000000)

/* Moves at a rate (the demo's sim at the real path's rates): a contract
 * holds, and is metered for, only what has moved by the clock passed in;
 * the oldest moves first; asking again adds nothing; an idle mover saves
 * up nothing; a recall mid-move stops the rest. */
START_TEST(sim_moves_at_a_rate)
{
	struct exec *e = exec_sim_new(1000000, 0);
	int64_t rate[EXEC_NKINDS] = {1000, 0, 0}; /* offline: 1000 pages/s */
	rx_pages got;
	rx_time_ns t0 = 1000 * S;

	ck_assert_int_eq(exec_set_rates(e, rate), 0);
	ck_assert_int_eq(exec_advance(e, t0, err, sizeof err), 0);
	ck_assert_int_eq(
	    exec_take(e, "a", EXEC_OFFLINE, 5000, &got, err, sizeof err), 0);
	ck_assert_int_eq(got, 0); /* in flight, held 0, not unknown */
	ck_assert_int_eq(exec_held(e, "a"), 0);
	ck_assert_int_eq(exec_moving(e, "a"), 5000);
	ck_assert_int_eq(exec_moving_total(e, EXEC_OFFLINE), 5000);
	/* the mover starts at the first clock after the ask */
	ck_assert_int_eq(exec_advance(e, t0 + S, err, sizeof err), 0);
	ck_assert_int_eq(exec_held(e, "a"), 0);
	ck_assert_int_eq(exec_advance(e, t0 + 2 * S, err, sizeof err), 0);
	ck_assert_int_eq(exec_held(e, "a"), 1000);
	/* half a second is 500 pages, a third of a ms a third of a page:
	 * the remainder carries */
	ck_assert_int_eq(exec_advance(e, t0 + 2 * S + S / 2, err, sizeof err),
	                 0);
	ck_assert_int_eq(exec_held(e, "a"), 1500);
	for (int i = 1; i <= 3; i++)
		exec_advance(e, t0 + 2 * S + S / 2 + i * S / 3000, err,
		             sizeof err);
	ck_assert_int_eq(exec_held(e, "a"), 1501);
	/* asking again for what is moving adds nothing */
	ck_assert_int_eq(
	    exec_take(e, "a", EXEC_OFFLINE, 3499, &got, err, sizeof err), 0);
	ck_assert_int_eq(exec_moving(e, "a"), 3499);
	/* a second contract waits for the first; a clock that goes back
	 * moves nothing */
	exec_take(e, "b", EXEC_OFFLINE, 2000, &got, err, sizeof err);
	ck_assert_int_eq(exec_advance(e, t0, err, sizeof err), 0);
	ck_assert_int_eq(exec_held(e, "a"), 1501);
	rx_time_ns t = t0 + 2 * S + S / 2 + S / 1000; /* where it was */
	exec_advance(e, t + 4 * S, err, sizeof err);  /* 4000 pages */
	ck_assert_int_eq(exec_held(e, "a"), 5000);
	ck_assert_int_eq(exec_held(e, "b"), 501);
	/* a recall mid-move: what moved comes back, the rest never goes */
	ck_assert_int_eq(exec_give_back(e, "b", 501, err, sizeof err), 0);
	ck_assert_int_eq(exec_held(e, "b"), -1);
	ck_assert_int_eq(exec_moving_total(e, EXEC_OFFLINE), 0);
	/* idle for a minute: the next contract still takes its time */
	exec_advance(e, t + 5 * S, err, sizeof err);
	exec_advance(e, t + 65 * S, err, sizeof err);
	exec_take(e, "c", EXEC_OFFLINE, 3000, &got, err, sizeof err);
	ck_assert_int_eq(got, 0);
	exec_advance(e, t + 66 * S, err, sizeof err);
	exec_advance(e, t + 67 * S, err, sizeof err);
	ck_assert_int_eq(exec_held(e, "c"), 1000);
	/* a recall of a contract none of whose pages moved yet */
	exec_take(e, "d", EXEC_OFFLINE, 100, &got, err, sizeof err);
	ck_assert_int_eq(exec_held(e, "d"), 0);
	ck_assert_int_eq(exec_give_back(e, "d", 0, err, sizeof err), 0);
	ck_assert_int_eq(exec_held(e, "d"), -1);
	/* kinds without a rate move at once */
	ck_assert_int_eq(
	    exec_take(e, "l", EXEC_LEND, 700, &got, err, sizeof err), 0);
	ck_assert_int_eq(got, 700);
	int64_t bad[EXEC_NKINDS] = {-1, 0, 0};
	ck_assert_int_eq(exec_set_rates(e, bad), -1);
	exec_close(e);
}
END_TEST

/* Short of memory mid-move: the contract keeps what moved and stops. */
START_TEST(sim_rate_short_of_memory)
{
	struct exec *e = exec_sim_new(10000, 8000); /* 2000 free */
	int64_t rate[EXEC_NKINDS] = {1000, 1000, 1000};
	rx_pages got;

	exec_set_rates(e, rate);
	exec_advance(e, 0, err, sizeof err);
	exec_take(e, "a", EXEC_LEND, 5000, &got, err, sizeof err);
	exec_advance(e, S, err, sizeof err);
	exec_advance(e, 10 * S, err, sizeof err);
	ck_assert_int_eq(exec_held(e, "a"), 2000);
	ck_assert_int_eq(exec_moving(e, "a"), 0);
	exec_close(e);
}
END_TEST

/* Offline pages given back come online at the online rate: until then
 * they are neither the contract's nor free to give again. */
START_TEST(sim_online_takes_time)
{
	struct exec *e = exec_sim_new(10000, 0);
	rx_pages got;

	exec_sim_set_online_rate(e, 500);
	exec_sim_advance(e, 0);
	exec_take(e, "a", EXEC_OFFLINE, 10000, &got, err, sizeof err);
	ck_assert_int_eq(got, 10000);
	ck_assert_int_eq(exec_give_back(e, "a", 1000, err, sizeof err), 0);
	ck_assert_int_eq(exec_held(e, "a"), 9000);
	exec_take(e, "b", EXEC_LEND, 1000, &got, err, sizeof err);
	ck_assert_int_eq(got, 0); /* still coming back online */
	exec_sim_advance(e, S);
	exec_take(e, "b", EXEC_LEND, 1000, &got, err, sizeof err);
	ck_assert_int_eq(got, 500);
	exec_sim_advance(e, 3 * S);
	exec_take(e, "b", EXEC_LEND, 500, &got, err, sizeof err);
	ck_assert_int_eq(got, 500);
	exec_close(e);
}
END_TEST

static char dir[256];

static void put(const char *file, const char *text)
{
	char p[512];
	snprintf(p, sizeof p, "%s/%s", dir, file);
	FILE *f = fopen(p, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static long long get(const char *file)
{
	char p[512];
	long long v = -2;
	snprintf(p, sizeof p, "%s/%s", dir, file);
	FILE *f = fopen(p, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fscanf(f, "%lld", &v), 1);
	fclose(f);
	return v;
}

static void cg_setup(void)
{
	const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(dir, sizeof dir, "%s/test_exec_cg.XXXXXX", base);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	put("memory.max", "max\n");
	put("memory.high", "max\n");
	put("memory.current", "1073741824\n"); /* 262144 pages */
	put("memory.reclaim", "");
}

static void cg_teardown(void)
{
	static const char *files[] = {"memory.max", "memory.high",
	                              "memory.current", "memory.reclaim"};
	char p[512];
	for (int i = 0; i < 4; i++) {
		snprintf(p, sizeof p, "%s/%s", dir, files[i]);
		unlink(p);
	}
	rmdir(dir);
}

#define PG 4096LL

START_TEST(cgroup_limits)
{
	struct exec *e;
	rx_pages got;

	ck_assert_ptr_null(exec_cgroup_new(dir, 0, err, sizeof err));
	ck_assert_msg(strstr(err, "set cgroup_pages"), "%s", err);
	e = exec_cgroup_new(dir, 524288, err, sizeof err); /* 2 GiB */
	ck_assert_msg(e, "%s", err);

	/* 100000 pages offline: the limit drops to 424288, above usage */
	ck_assert_int_eq(
	    exec_take(e, "a", EXEC_OFFLINE, 100000, &got, err, sizeof err), 0);
	ck_assert_int_eq(got, 100000);
	ck_assert_int_eq(get("memory.max"), 424288 * PG);
	ck_assert_int_eq(get("memory.high"), 424288 * PG);

	/* 200000 more would put the limit (224288) under usage (262144):
	 * reclaim is asked for the difference, but here it frees nothing,
	 * so the limit stops at usage and the sale is delivered short. */
	ck_assert_int_eq(
	    exec_take(e, "b", EXEC_LEND, 200000, &got, err, sizeof err), 0);
	ck_assert_int_eq(get("memory.reclaim"), (262144 - 224288) * PG);
	ck_assert_int_eq(get("memory.max"), 262144 * PG);
	ck_assert_int_eq(got, 200000 - (262144 - 224288));
	ck_assert_int_eq(exec_held(e, "a"), 100000);

	/* the workload shrank: the rest can go */
	put("memory.current", "819200000\n"); /* 200000 pages */
	ck_assert_int_eq(
	    exec_take(e, "b", EXEC_LEND, 37856, &got, err, sizeof err), 0);
	ck_assert_int_eq(got, 37856);
	ck_assert_int_eq(get("memory.max"), 224288 * PG);

	/* borrowing raises the limit */
	ck_assert_int_eq(
	    exec_take(e, "c", EXEC_BORROW, 50000, &got, err, sizeof err), 0);
	ck_assert_int_eq(get("memory.max"), 274288 * PG);
	ck_assert_int_eq(get("memory.high"), 274288 * PG);

	ck_assert_int_eq(exec_give_back(e, "a", 100000, err, sizeof err), 0);
	ck_assert_int_eq(get("memory.max"), 374288 * PG);
	ck_assert_int_eq(exec_release_all(e, err, sizeof err), 0);
	ck_assert_int_eq(get("memory.max"), 524288 * PG);
	ck_assert_int_eq(get("memory.high"), 524288 * PG);
	exec_close(e);

	put("memory.max", "1048576000\n");
	e = exec_cgroup_new(dir, 0, err, sizeof err);
	ck_assert_msg(e, "%s", err);
	ck_assert_int_eq(
	    exec_take(e, "a", EXEC_OFFLINE, 1000, &got, err, sizeof err), 0);
	ck_assert_int_eq(get("memory.max"), (256000 - 1000) * PG);
	exec_close(e);

	put("memory.current", "lots\n");
	e = exec_cgroup_new(dir, 524288, err, sizeof err);
	ck_assert_int_eq(
	    exec_take(e, "a", EXEC_OFFLINE, 400000, &got, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "byte count"), "%s", err);
	exec_close(e);
	ck_assert_ptr_null(
	    exec_cgroup_new("/nonexistent/cg", 100, err, sizeof err));
	ck_assert(strstr(err, "could not open"));
}
END_TEST

START_TEST(kmod_refusals)
{
	ck_assert_ptr_null(
	    exec_kmod_new("/nonexistent/ramex", err, sizeof err));
	ck_assert_msg(strstr(err, "is ramex.ko loaded"), "%s", err);
	ck_assert_ptr_null(exec_kmod_new("/dev/null", err, sizeof err));
	ck_assert_msg(strstr(err, "not a ramex device"), "%s", err);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("exec");
	TCase *tc = tcase_create("sim");
	tcase_add_test(tc, sim_take_and_give_back);
	tcase_add_test(tc, sim_oom_sync);
	tcase_add_test(tc, sim_adopt);
	tcase_add_test(tc, sim_moves_at_a_rate);
	tcase_add_test(tc, sim_rate_short_of_memory);
	tcase_add_test(tc, sim_online_takes_time);
	tcase_add_test(tc, kmod_refusals);
	suite_add_tcase(s, tc);
	TCase *cg = tcase_create("cgroup");
	tcase_add_checked_fixture(cg, cg_setup, cg_teardown);
	tcase_add_test(cg, cgroup_limits);
	suite_add_tcase(s, cg);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf ? 1 : 0;
}
