/* test_conf.c — common/conf, the `key = value` reader of both daemons:
 * comments, blank lines, quoting, bad lines with their numbers,
 * duplicates, unknown keys, values the key refuses, huge lines. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/conf.h"

/* A table of two keys; every setting is recorded in order. */
struct rec {
	int n;
	char key[16][CONF_KEY_MAX];
	char val[16][CONF_LINE_MAX];
};

static int rec_set(void *ctx, const char *key, const char *value, struct err *e)
{
	struct rec *r = ctx;
	if (strcmp(key, "colour") && strcmp(key, "size") && strcmp(key, "db"))
		return err_fail(e, CONF_UNKNOWN, "unknown setting \"%s\"", key);
	if (!strcmp(key, "size") &&
	    strspn(value, "0123456789") != strlen(value))
		return err_fail(e, CONF_VALUE, "size: expected a whole number");
	ck_assert_int_lt(r->n, 16);
	snprintf(r->key[r->n], sizeof r->key[0], "%s", key);
	snprintf(r->val[r->n], sizeof r->val[0], "%s", value);
	r->n++;
	return 0;
}

static struct rec rec;
static struct err e;

static int read_text(const char *text)
{
	memset(&rec, 0, sizeof rec);
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	ck_assert_ptr_nonnull(f);
	int rc = conf_read_stream(f, "t.conf", rec_set, &rec, &e);
	fclose(f);
	return rc;
}

START_TEST(comments_blank_lines_and_spaces)
{
	ck_assert_int_eq(read_text("# a node\n"
	                           "\n"
	                           "   \t\n"
	                           "  colour=blue   # a comment\n"
	                           "size = 12\r\n"
	                           "db =\n"
	                           "# size = 99\n"),
	                 0);
	ck_assert_int_eq(e.code, 0);
	ck_assert_int_eq(rec.n, 3);
	ck_assert_str_eq(rec.key[0], "colour");
	ck_assert_str_eq(rec.val[0], "blue");
	ck_assert_str_eq(rec.val[1], "12");
	ck_assert_str_eq(rec.val[2], ""); /* an empty value is a value */
}
END_TEST

START_TEST(the_last_line_needs_no_newline)
{
	ck_assert_int_eq(read_text("size = 7"), 0);
	ck_assert_str_eq(rec.val[0], "7");
	ck_assert_int_eq(read_text(""), 0);
	ck_assert_int_eq(rec.n, 0);
}
END_TEST

START_TEST(quotes_keep_hashes_and_spaces)
{
	ck_assert_int_eq(
	    read_text("db = \"host=a password=x#y \\\"q\\\" \\\\ \"  # c\n"),
	    0);
	ck_assert_str_eq(rec.val[0], "host=a password=x#y \"q\" \\ ");
	ck_assert_int_eq(read_text("db = \"open\n"), -1);
	ck_assert_int_eq(e.code, CONF_SYNTAX);
	ck_assert_msg(strstr(e.msg, "t.conf:1: ") == e.msg, "%s", e.msg);
	ck_assert_int_eq(read_text("db = \"a\" b\n"), -1);
	ck_assert_int_eq(e.code, CONF_SYNTAX);
}
END_TEST

START_TEST(bad_lines_say_where)
{
	ck_assert_int_eq(read_text("size = 1\n\njust words\n"), -1);
	ck_assert_int_eq(e.code, CONF_SYNTAX);
	ck_assert_str_eq(e.msg, "t.conf:3: expected key = value");
	ck_assert_int_eq(rec.n, 1); /* what came before stands */
	ck_assert_int_eq(read_text("= 3\n"), -1);
	ck_assert_str_eq(e.msg, "t.conf:1: expected key = value");
	ck_assert_int_eq(read_text("a b = 3\n"), -1);
	ck_assert_int_eq(e.code, CONF_SYNTAX);
	ck_assert_int_eq(read_text("size: 3\n"), -1);
	ck_assert_int_eq(e.code, CONF_SYNTAX);
}
END_TEST

/* Found from outside: a NUL in a line cut its value short in silence
 * ("colour = red\0x" read as "red"), and a file saved with a UTF-8
 * byte-order mark was refused as "expected key = value" at line 1. */
START_TEST(nul_bytes_and_a_bom)
{
	static const char nul[] = "size = 1\ncolour = red\0blue\nsize = 2\n";
	memset(&rec, 0, sizeof rec);
	FILE *f = fmemopen((void *)nul, sizeof nul - 1, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(conf_read_stream(f, "t.conf", rec_set, &rec, &e), -1);
	fclose(f);
	ck_assert_int_eq(e.code, CONF_SYNTAX);
	ck_assert_msg(strstr(e.msg, "t.conf:2: a NUL byte"), "%s", e.msg);
	ck_assert_int_eq(read_text("\xEF\xBB\xBFsize = 3\n"), 0);
	ck_assert_int_eq(rec.n, 1);
	ck_assert_str_eq(rec.key[0], "size");
	/* only at the start of the file */
	ck_assert_int_eq(read_text("size = 3\n\xEF\xBB\xBF" "colour = red\n"), -1);
}
END_TEST

START_TEST(unknown_keys_and_bad_values_come_from_the_table)
{
	ck_assert_int_eq(read_text("colour = red\nweight = 3\n"), -1);
	ck_assert_int_eq(e.code, CONF_UNKNOWN);
	ck_assert_str_eq(e.msg, "t.conf:2: unknown setting \"weight\"");
	ck_assert_int_eq(read_text("size = soon\n"), -1);
	ck_assert_int_eq(e.code, CONF_VALUE);
	ck_assert_str_eq(e.msg, "t.conf:1: size: expected a whole number");
}
END_TEST

START_TEST(a_key_set_twice_is_refused)
{
	ck_assert_int_eq(read_text("size = 1\ncolour = red\nsize = 2\n"), -1);
	ck_assert_int_eq(e.code, CONF_DUPLICATE);
	ck_assert_str_eq(
	    e.msg, "t.conf:3: size is set twice (first on line 1): remove one");
	ck_assert_str_eq(rec.val[0], "1"); /* the first one stood */
}
END_TEST

START_TEST(huge_lines_and_keys_are_refused)
{
	size_t n = CONF_LINE_MAX * 3;
	char *t = malloc(n + 16);
	ck_assert_ptr_nonnull(t);
	memcpy(t, "db = ", 5);
	memset(t + 5, 'v', n - 5);
	strcpy(t + n, "\nsize = 1\n");
	ck_assert_int_eq(read_text(t), -1);
	ck_assert_int_eq(e.code, CONF_TOO_LONG);
	ck_assert_msg(strstr(e.msg, "t.conf:1: line longer than"), "%s", e.msg);
	ck_assert_int_eq(rec.n, 0); /* no part of it was taken */
	/* the longest line that fits is read whole */
	size_t fit = CONF_LINE_MAX - 2; /* the newline and the NUL */
	memset(t + 5, 'v', fit - 5);
	strcpy(t + fit, "\n");
	ck_assert_int_eq(read_text(t), 0);
	ck_assert_uint_eq(strlen(rec.val[0]), fit - 5);
	/* a key longer than any key */
	memset(t, 'k', 200);
	strcpy(t + 200, " = 1\n");
	ck_assert_int_eq(read_text(t), -1);
	ck_assert_int_eq(e.code, CONF_UNKNOWN);
	free(t);
}
END_TEST

START_TEST(a_missing_file_says_which)
{
	struct rec r = {0};
	ck_assert_int_eq(conf_read_file("/nonexistent/x.conf", rec_set, &r, &e),
	                 -1);
	ck_assert_int_eq(e.code, CONF_IO);
	ck_assert_msg(strstr(e.msg, "/nonexistent/x.conf"), "%s", e.msg);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("conf");
	TCase *t = tcase_create("core");
	tcase_add_test(t, comments_blank_lines_and_spaces);
	tcase_add_test(t, the_last_line_needs_no_newline);
	tcase_add_test(t, quotes_keep_hashes_and_spaces);
	tcase_add_test(t, bad_lines_say_where);
	tcase_add_test(t, nul_bytes_and_a_bom);
	tcase_add_test(t, unknown_keys_and_bad_values_come_from_the_table);
	tcase_add_test(t, a_key_set_twice_is_refused);
	tcase_add_test(t, huge_lines_and_keys_are_refused);
	tcase_add_test(t, a_missing_file_says_which);
	suite_add_tcase(s, t);
	SRunner *r = srunner_create(s);
	srunner_run_all(r, CK_NORMAL);
	int failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? 1 : 0;
}
