/* test_target.c — the request target read the one way it was signed. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exchange/target.h"

static struct target tg;

static int ok(const char *raw)
{
	const char *why = NULL;
	int rc = target_parse(raw, &tg, &why);
	ck_assert_msg(rc == 0, "%s refused: %s", raw, why ? why : "");
	return rc;
}

static void bad(const char *raw, const char *because)
{
	const char *why = NULL;
	ck_assert_msg(target_parse(raw, &tg, &why) == -1, "%s taken", raw);
	ck_assert_msg(why && strstr(why, because), "%s: %s", raw,
	              why ? why : "(none)");
	ck_assert_int_eq(tg.nquery, 0);
	ck_assert_str_eq(tg.path, "");
}

START_TEST(decodes_once)
{
	ok("/v1/contracts?market=spot%26state=active");
	ck_assert_str_eq(tg.path, "/v1/contracts");
	ck_assert_int_eq(tg.nquery, 1);
	ck_assert_str_eq(target_query(&tg, "market"), "spot&state=active");
	ck_assert_ptr_null(target_query(&tg, "state"));

	ok("/v1/contracts?market=spot&state=active");
	ck_assert_int_eq(tg.nquery, 2);
	ck_assert_str_eq(target_query(&tg, "state"), "active");

	ok("/v1/%77hoami");
	ck_assert_str_eq(tg.path, "/v1/whoami");
	ok("/v1/x?a=%2541+b&flag&e=");
	ck_assert_str_eq(target_query(&tg, "a"), "%41 b"); /* once */
	ck_assert_str_eq(target_query(&tg, "flag"), "");
	ck_assert_str_eq(target_query(&tg, "e"), "");
	ok("/v1/x?a=?b=c"); /* only the first '?' splits */
	ck_assert_str_eq(target_query(&tg, "a"), "?b=c");
	ok("/v1/x?"); /* a bare '?': no query, as it signs */
	ck_assert_int_eq(tg.nquery, 0);
	ck_assert_str_eq(tg.path, "/v1/x");
	ok("/v1/x?a=%C3%A9"); /* bytes, not characters */
	ck_assert_str_eq(target_query(&tg, "a"), "\xc3\xa9");
}
END_TEST

START_TEST(refuses_what_reads_two_ways)
{
	bad("/v1/whoami%00junk", "control character");
	bad("/v1/x?a=b%00c", "control character");
	bad("/v1/x?a=%0a", "control character");
	bad("/v1/x?a=%7F", "control character");
	bad("/v1/orders%2F1", "'/'");
	bad("/v1/orders%2f1", "'/'");
	bad("/v1/x?%", "two hex digits");
	bad("/v1/x?a=%4", "two hex digits");
	bad("/v1/x?a=%4g", "two hex digits");
	bad("/v1/who%ami", "two hex digits");
	bad("/v1/x?a=1&a=2", "twice");
	bad("/v1/x?a=1&%61=2", "twice"); /* the same name, encoded */
	bad("/v1/x?&", "empty parameter");
	bad("/v1/x?a=1&&b=2", "empty parameter");
	bad("/v1/x?a=1&", "empty parameter");
	bad("/v1/x?=1", "empty parameter");
	bad("/v1/x y", "printable ASCII");
	bad("/v1/\xc3\xa9", "printable ASCII");
	bad("/v1/x?a=\x7f", "printable ASCII");
}
END_TEST

START_TEST(limits)
{
	char t[SIGN_TARGET_MAX + 2];
	/* 16 parameters without '=' in the longest target: each decoded
	 * name takes two bytes more than it did (the worst case for qbuf) */
	size_t n = (size_t)snprintf(t, sizeof t, "/?");
	for (int i = 0; i < 16; i++) {
		size_t len = i < 15 ? 127 : SIGN_TARGET_MAX - n;
		memset(t + n, 'a' + i, len);
		n += len;
		if (i < 15)
			t[n++] = '&';
	}
	t[n] = 0;
	ck_assert_int_eq((int)strlen(t), SIGN_TARGET_MAX);
	ok(t);
	ck_assert_int_eq(tg.nquery, 16);
	ck_assert_int_eq((int)strlen(tg.qname[15]),
	                 SIGN_TARGET_MAX - 2 - 15 * 128);
	/* a 17th is refused */
	strcpy(t, "/?a&b&c&d&e&f&g&h&i&j&k&l&m&n&o&p&q");
	bad(t, "more than 16");
	/* one byte past the longest target */
	memset(t, 'a', sizeof t - 1);
	t[0] = '/';
	t[sizeof t - 1] = 0;
	bad(t, "longer");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("target");
	TCase *tc = tcase_create("target");
	tcase_add_test(tc, decodes_once);
	tcase_add_test(tc, refuses_what_reads_two_ways);
	tcase_add_test(tc, limits);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
