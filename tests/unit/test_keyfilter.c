/* test_keyfilter.c — the writer's filter of known keys
 * (exchange/core/keyfilter.h): never "no" for a key added, and few false
 * "maybe"s, also after it has grown. */
#include "exchange/core/keyfilter.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>

/* splitmix64 as a seeded stream of distinct keys */
static uint64_t next_key(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15u);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
	return z ^ (z >> 31);
}

/* The share of n keys never added (from seed) that it calls "maybe". */
static double false_rate(const struct keyfilter *kf, uint64_t seed, int n)
{
	int fp = 0;
	for (int i = 0; i < n; i++)
		fp += keyfilter_maybe(kf, next_key(&seed));
	return (double)fp / n;
}

/* Adds n keys (from seed), then finds every one of them. */
static void add_and_find(struct keyfilter *kf, uint64_t seed, int n)
{
	uint64_t s = seed;
	for (int i = 0; i < n; i++)
		ck_assert_int_eq(keyfilter_add(kf, next_key(&s)), 0);
	s = seed;
	for (int i = 0; i < n; i++)
		ck_assert(keyfilter_maybe(kf, next_key(&s)));
}

START_TEST(empty_says_no)
{
	struct keyfilter *kf = keyfilter_new(0);
	ck_assert_ptr_nonnull(kf);
	ck_assert(false_rate(kf, 7, 100000) == 0.0);
	struct keyfilter_stats s;
	keyfilter_stats(kf, &s);
	ck_assert_uint_eq(s.keys, 0);
	ck_assert_int_eq(s.filters, 1);
	/* made for at least 4 096 keys, at 2 bytes a key */
	ck_assert_uint_ge(s.bytes, 8192);
	keyfilter_free(kf);
	keyfilter_free(NULL);
}
END_TEST

START_TEST(sized_filter_no_false_no_few_false_maybe)
{
	enum { N = 1 << 18 };
	struct keyfilter *kf = keyfilter_new(N);
	add_and_find(kf, 1, N);
	struct keyfilter_stats st;
	keyfilter_stats(kf, &st);
	ck_assert_int_eq(st.filters, 1); /* made for them: did not grow */
	ck_assert_uint_eq(st.bytes, (size_t)N * 2);
	/* a few keys of so many land on bits all set already, and are
	 * not counted (they are "maybe" before they are added) */
	ck_assert_uint_le(st.keys, N);
	ck_assert_uint_ge(st.keys, N - N / 200);
	double r = false_rate(kf, 99, 400000);
	ck_assert_msg(r < 0.003, "false maybe rate %.5f", r);
	keyfilter_free(kf);
}
END_TEST

START_TEST(grows_and_keeps_every_key)
{
	enum { N = 200000 };
	struct keyfilter *kf = keyfilter_new(4096);
	add_and_find(kf, 5, N);
	struct keyfilter_stats st;
	keyfilter_stats(kf, &st);
	/* 4 096, 8 192, ... 131 072: six filters, for 258 048 keys */
	ck_assert_int_eq(st.filters, 6);
	ck_assert_uint_le(st.bytes, (size_t)N * 2 * 4);
	/* every full filter adds its rate: still low */
	double r = false_rate(kf, 1234, 400000);
	ck_assert_msg(r < 0.02, "false maybe rate %.5f", r);
	keyfilter_free(kf);
}
END_TEST

/* The writer's hashes are FNV-1a of keys that differ in their last
 * characters; here the weakest such input, consecutive integers. */
START_TEST(weak_hashes_spread)
{
	enum { N = 100000 };
	struct keyfilter *kf = keyfilter_new(N);
	for (uint64_t i = 0; i < N; i++)
		keyfilter_add(kf, i);
	for (uint64_t i = 0; i < N; i++)
		ck_assert(keyfilter_maybe(kf, i));
	int fp = 0;
	for (uint64_t i = N; i < 11 * N; i++)
		fp += keyfilter_maybe(kf, i);
	ck_assert_msg(fp < N * 10 / 300, "%d false maybes of %d", fp, N * 10);
	keyfilter_free(kf);
}
END_TEST

START_TEST(adding_twice_counts_once)
{
	struct keyfilter *kf = keyfilter_new(0);
	for (int i = 0; i < 3; i++)
		keyfilter_add(kf, 42);
	struct keyfilter_stats st;
	keyfilter_stats(kf, &st);
	ck_assert_uint_eq(st.keys, 1);
	ck_assert(keyfilter_maybe(kf, 42));
	keyfilter_free(kf);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("keyfilter");
	TCase *t = tcase_create("core");
	tcase_set_timeout(t, 60);
	tcase_add_test(t, empty_says_no);
	tcase_add_test(t, sized_filter_no_false_no_few_false_maybe);
	tcase_add_test(t, grows_and_keeps_every_key);
	tcase_add_test(t, weak_hashes_spread);
	tcase_add_test(t, adding_twice_counts_once);
	suite_add_tcase(s, t);
	SRunner *r = srunner_create(s);
	srunner_run_all(r, CK_NORMAL);
	int failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? 1 : 0;
}
