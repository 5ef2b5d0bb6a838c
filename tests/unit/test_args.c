/* test_args.c — common/args, the option table of the lend programs:
 * values apart and after '=', flags, ranges, help, and the errors. */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "common/args.h"

static const char *file, *listen_at;
static int64_t pages, contract;
static int lock;
static char err[256];

static const struct args_opt opts[] = {
    {"--secret-file", ARGS_STR, &file, 0, 0, NULL},
    {"--listen", ARGS_STR, &listen_at, 0, 0, NULL},
    {"--pages", ARGS_INT, &pages, 1, 1 << 28, "--pages must be 1..2^28"},
    {"--contract", ARGS_INT, &contract, 1, INT64_MAX, NULL},
    {"--mlock", ARGS_FLAG, &lock, 0, 0, NULL},
};
#define NOPTS (sizeof opts / sizeof opts[0])

static int parse(char **argv)
{
	int argc = 0;
	while (argv[argc])
		argc++;
	file = listen_at = NULL;
	pages = contract = 0;
	lock = 0;
	err[0] = '\0';
	return args_parse(argc, argv, opts, NOPTS, err, sizeof err);
}

START_TEST(values_apart_and_after_equals)
{
	char *a[] = {"prog",        "--secret-file",    "/s",
	             "--pages=256", "--contract",       "7",
	             "--mlock",     "--listen=[::1]:9", NULL};
	ck_assert_int_eq(parse(a), 0);
	ck_assert_str_eq(file, "/s");
	ck_assert_int_eq(pages, 256);
	ck_assert_int_eq(contract, 7);
	ck_assert_int_eq(lock, 1);
	ck_assert_str_eq(listen_at, "[::1]:9"); /* only the first '=' splits */
	char *none[] = {"prog", NULL};
	ck_assert_int_eq(parse(none), 0);
	ck_assert_ptr_null(file);
}
END_TEST

START_TEST(help_stops_reading)
{
	char *a[] = {"prog", "--pages", "1", "-h", "--nonsense", NULL};
	ck_assert_int_eq(parse(a), 1);
	char *b[] = {"prog", "--help", NULL};
	ck_assert_int_eq(parse(b), 1);
	char *c[] = {"prog", "--secret-file", "--help", NULL};
	ck_assert_int_eq(parse(c), 0); /* a value, not a request for help */
	ck_assert_str_eq(file, "--help");
}
END_TEST

START_TEST(errors_name_the_option)
{
	char *a[] = {"prog", "--colour", "blue", NULL};
	ck_assert_int_eq(parse(a), -1);
	ck_assert_str_eq(err, "unknown option \"--colour\" (see --help)");
	char *b[] = {"prog", "--colour=blue", NULL};
	ck_assert_int_eq(parse(b), -1);
	ck_assert_str_eq(err, "unknown option \"--colour\" (see --help)");
	char *c[] = {"prog", "--pages", NULL};
	ck_assert_int_eq(parse(c), -1);
	ck_assert_str_eq(err, "--pages needs a value");
	char *d[] = {"prog", "--mlock=yes", NULL};
	ck_assert_int_eq(parse(d), -1);
	ck_assert_str_eq(err, "--mlock takes no value");
	char *e[] = {"prog", "stray", NULL};
	ck_assert_int_eq(parse(e), -1);
	ck_assert_str_eq(err, "unknown option \"stray\" (see --help)");
}
END_TEST

START_TEST(integers_are_whole_and_in_range)
{
	char *a[] = {"prog", "--pages", "0", NULL};
	ck_assert_int_eq(parse(a), -1);
	ck_assert_str_eq(err, "--pages must be 1..2^28"); /* its own why */
	char *b[] = {"prog", "--contract", "12x", NULL};
	ck_assert_int_eq(parse(b), -1);
	ck_assert_str_eq(err, "--contract must be an integer in "
	                      "1..9223372036854775807, not \"12x\"");
	char *c[] = {"prog", "--contract", "99999999999999999999", NULL};
	ck_assert_int_eq(parse(c), -1);
	char *d[] = {"prog", "--contract", "", NULL};
	ck_assert_int_eq(parse(d), -1);
	char *e[] = {"prog", "--pages", "268435456", NULL};
	ck_assert_int_eq(parse(e), 0);
	ck_assert_int_eq(pages, 1 << 28);
	int64_t v = 5;
	ck_assert_int_eq(args_int(" 1", 0, 9, &v), -1);
	ck_assert_int_eq(args_int("+1", 0, 9, &v), -1);
	ck_assert_int_eq(args_int("-", -5, 9, &v), -1);
	ck_assert_int_eq(args_int("-3", -5, 9, &v), 0);
	ck_assert_int_eq(v, -3);
}
END_TEST

static FILE *usage_to;
static void usage(FILE *f)
{
	usage_to = f;
}

START_TEST(done_says_how_main_goes_on)
{
	usage_to = NULL;
	ck_assert_int_eq(args_done(0, "prog", "", usage), -1);
	ck_assert_ptr_null(usage_to); /* nothing printed */
	ck_assert_int_eq(args_done(1, "prog", "", usage), 0);
	ck_assert_ptr_eq(usage_to, stdout);
	ck_assert_int_eq(args_done(-1, "prog", "--pages needs a value", usage),
	                 2);
	ck_assert_ptr_eq(usage_to, stderr);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("args");
	TCase *t = tcase_create("core");
	tcase_add_test(t, values_apart_and_after_equals);
	tcase_add_test(t, help_stops_reading);
	tcase_add_test(t, errors_name_the_option);
	tcase_add_test(t, integers_are_whole_and_in_range);
	tcase_add_test(t, done_says_how_main_goes_on);
	suite_add_tcase(s, t);
	SRunner *r = srunner_create(s);
	srunner_run_all(r, CK_NORMAL);
	int failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? 1 : 0;
}
