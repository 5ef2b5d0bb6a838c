/* test_pgarr.c — PostgreSQL array literals (exchange/pgarr.h). */
#include "exchange/pgarr.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>

START_TEST(empty_and_numbers)
{
	struct pgarr a = {0};
	ck_assert_str_eq(pgarr_text(&a), "{}");
	pgarr_i64(&a, 0);
	pgarr_i64(&a, -42);
	pgarr_i64(&a, INT64_MAX);
	pgarr_i64(&a, INT64_MIN);
	pgarr_raw(&a, "NULL");
	ck_assert_str_eq(pgarr_text(&a), "{0,-42,9223372036854775807,"
	                                 "-9223372036854775808,NULL}");
	/* asking twice gives the same text; appending goes on after it */
	ck_assert_str_eq(pgarr_text(&a), "{0,-42,9223372036854775807,"
	                                 "-9223372036854775808,NULL}");
	pgarr_addf(&a, "%s", "t");
	ck_assert_int_eq(a.count, 6);
	ck_assert_str_eq(pgarr_text(&a), "{0,-42,9223372036854775807,"
	                                 "-9223372036854775808,NULL,t}");
	pgarr_free(&a);
	ck_assert_str_eq(pgarr_text(&a), "{}");
}
END_TEST

START_TEST(text_is_quoted)
{
	struct pgarr a = {0};
	pgarr_str(&a, "plain");
	pgarr_str(&a, "a \"quote\", a \\ and {braces}");
	pgarr_str(&a, "");
	pgarr_str(&a, NULL);
	ck_assert_str_eq(pgarr_text(&a),
	                 "{\"plain\",\"a \\\"quote\\\", a \\\\ and "
	                 "{braces}\",\"\",NULL}");
	pgarr_free(&a);
}
END_TEST

START_TEST(grows_and_refuses_long_formats)
{
	struct pgarr a = {0};
	for (int i = 0; i < 100000; i++)
		pgarr_i64(&a, i);
	const char *t = pgarr_text(&a);
	ck_assert_ptr_nonnull(t);
	ck_assert_int_eq(a.count, 100000);
	ck_assert_int_eq(t[0], '{');
	ck_assert_str_eq(t + a.n - 6, ",99999}");
	/* an element longer than pgarr_addf's room is an error, not a cut */
	pgarr_addf(&a, "%070d", 1);
	ck_assert_ptr_null(pgarr_text(&a));
	pgarr_free(&a);
}
END_TEST

START_TEST(take_hands_the_literal_over)
{
	struct pgarr a = {0};
	char *t = pgarr_take(&a);
	ck_assert_str_eq(t, "{}");
	free(t);
	pgarr_i64(&a, 1);
	pgarr_str(&a, "b");
	t = pgarr_take(&a);
	ck_assert_str_eq(t, "{1,\"b\"}");
	free(t);
	/* taken, the array is empty and usable again */
	ck_assert_int_eq(a.count, 0);
	pgarr_i64(&a, 2);
	t = pgarr_take(&a);
	ck_assert_str_eq(t, "{2}");
	free(t);
	pgarr_addf(&a, "%070d", 1);
	ck_assert_ptr_null(pgarr_take(&a));
	ck_assert_int_eq(a.oom, 0);
}
END_TEST

START_TEST(params_of_columns)
{
	struct pgarr c[3] = {{0}};
	const char *pv[3];
	pgarr_i64(&c[0], 7);
	pgarr_str(&c[1], "x");
	ck_assert_int_eq(pgarr_params(c, 3, pv), 0);
	ck_assert_str_eq(pv[0], "{7}");
	ck_assert_str_eq(pv[1], "{\"x\"}");
	ck_assert_str_eq(pv[2], "{}");
	/* one column out of memory: the whole set is refused */
	pgarr_addf(&c[2], "%070d", 1);
	ck_assert_int_eq(pgarr_params(c, 3, pv), -1);
	ck_assert_ptr_null(pv[2]);
	for (int i = 0; i < 3; i++)
		pgarr_free(&c[i]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("pgarr");
	TCase *t = tcase_create("pgarr");
	tcase_add_test(t, empty_and_numbers);
	tcase_add_test(t, text_is_quoted);
	tcase_add_test(t, grows_and_refuses_long_formats);
	tcase_add_test(t, take_hands_the_literal_over);
	tcase_add_test(t, params_of_columns);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
