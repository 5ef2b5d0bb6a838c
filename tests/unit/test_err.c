/* test_err.c — common/err: the one error formatter, its NULL and empty
 * buffers, and cutting a long message on a UTF-8 character boundary. */
#include <check.h>
#include <string.h>

#include "common/err.h"

START_TEST(formats_and_returns_minus_one)
{
	char b[64];
	ck_assert_int_eq(err_set(b, sizeof b, "%s:%d: %s", "f.conf", 7, "bad"),
	                 -1);
	ck_assert_str_eq(b, "f.conf:7: bad");
}
END_TEST

START_TEST(null_and_empty_buffers_are_left_alone)
{
	char b[4] = "xyz";
	ck_assert_int_eq(err_set(NULL, 10, "no %s", "buffer"), -1);
	ck_assert_int_eq(err_set(b, 0, "no %s", "room"), -1);
	ck_assert_str_eq(b, "xyz");
	ck_assert_int_eq(err_fail(NULL, 3, "nowhere"), -1);
}
END_TEST

START_TEST(ascii_is_cut_at_the_buffer)
{
	char b[6];
	err_set(b, sizeof b, "%s", "abcdefgh");
	ck_assert_str_eq(b, "abcde");
	err_set(b, sizeof b, "%s", "abcde"); /* exact fit: nothing cut */
	ck_assert_str_eq(b, "abcde");
	err_set(b, 1, "%s", "abc");
	ck_assert_str_eq(b, "");
}
END_TEST

/* "é" is 2 bytes, "€" 3, "😀" 4: a cut through any of them drops the
 * whole character. */
START_TEST(utf8_is_cut_on_a_character_boundary)
{
	char b[8];
	err_set(b, 5, "%s", "abcé"); /* 5 bytes + NUL in a 5-byte buffer */
	ck_assert_str_eq(b, "abc");
	err_set(b, 6, "%s", "abcé!"); /* é kept whole, '!' cut */
	ck_assert_str_eq(b, "abcé");
	for (size_t len = 2; len <= 5; len++) { /* a€: 4 bytes */
		err_set(b, len, "%s", "a€b");
		ck_assert_str_eq(b, len < 5 ? "a" : "a€");
	}
	for (size_t len = 2; len <= 6; len++) { /* a😀: 5 bytes */
		err_set(b, len, "%s", "a😀b");
		ck_assert_str_eq(b, len < 6 ? "a" : "a😀");
	}
	err_set(b, 3, "%s", "€"); /* nothing whole fits */
	ck_assert_str_eq(b, "");
}
END_TEST

START_TEST(invalid_utf8_is_not_made_worse)
{
	/* stray continuation bytes are not a character cut short: kept */
	ck_assert_uint_eq(err_utf8_prefix("a\x80\x80", 3), 3);
	ck_assert_uint_eq(err_utf8_prefix("\x80\x80\x80\x80\x80", 5), 5);
	ck_assert_uint_eq(err_utf8_prefix("ab\xE2\x82", 4), 2);
	ck_assert_uint_eq(err_utf8_prefix("", 0), 0);
}
END_TEST

START_TEST(the_value_carries_code_and_message)
{
	struct err e;
	err_clear(&e);
	ck_assert_int_eq(e.code, 0);
	ck_assert_str_eq(e.msg, "");
	ck_assert_int_eq(err_fail(&e, 2, "line %d: unknown key %s", 4, "x"),
	                 -1);
	ck_assert_int_eq(e.code, 2);
	ck_assert_str_eq(e.msg, "line 4: unknown key x");
	char big[2 * ERR_MSG_MAX];
	memset(big, 'x', sizeof big - 3);
	memcpy(big + sizeof big - 3, "é", 3); /* é at the very end */
	err_fail(&e, 1, "%s", big);
	ck_assert_uint_eq(strlen(e.msg), ERR_MSG_MAX - 1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("err");
	TCase *t = tcase_create("core");
	tcase_add_test(t, formats_and_returns_minus_one);
	tcase_add_test(t, null_and_empty_buffers_are_left_alone);
	tcase_add_test(t, ascii_is_cut_at_the_buffer);
	tcase_add_test(t, utf8_is_cut_on_a_character_boundary);
	tcase_add_test(t, invalid_utf8_is_not_made_worse);
	tcase_add_test(t, the_value_carries_code_and_message);
	suite_add_tcase(s, t);
	SRunner *r = srunner_create(s);
	srunner_run_all(r, CK_NORMAL);
	int failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? 1 : 0;
}
