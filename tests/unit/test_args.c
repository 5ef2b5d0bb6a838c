/* test_args.c — common/args, the option table of the lend programs:
 * values apart and after '=', flags, ranges, help, the errors, and the
 * --help text made from the table. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/args.h"

static const char *file, *listen_at;
static int64_t pages, contract;
static int lock;
static char err[256];

static const struct args_opt opts[] = {
    {"--secret-file", ARGS_STR, &file, 0, 0, NULL, "F", "the secret"},
    {"--listen", ARGS_STR, &listen_at, 0, 0, NULL, "HOST:PORT",
     "where borrowers connect"},
    {"--pages", ARGS_INT, &pages, 1, 1 << 28, "--pages must be 1..2^28", "N",
     "the pages lent"},
    {"--contract", ARGS_INT, &contract, 1, INT64_MAX, NULL, "ID",
     "the contract"},
    {"--mlock", ARGS_FLAG, &lock, 0, 0, NULL, NULL,
     "keep the lender out of memory reclaim"},
};
#define NOPTS (sizeof opts / sizeof opts[0])
static const struct args_prog prog = {"prog", "usage: prog --pages N\n", opts,
                                      NOPTS, "Notes.\n"};

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
	ck_assert_int_eq(pages, 0); /* not stored: --help shows the defaults */
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
	char *f[] = {"prog", "--pages", "5", "--mlock", "--colour", NULL};
	ck_assert_int_eq(parse(f), -1);
	ck_assert_int_eq(pages, 0); /* a refused line stores nothing */
	ck_assert_int_eq(lock, 0);
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

/* What args_usage writes for the table, with pages and contract as they
 * are now. */
static char *usage_text(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	ck_assert_ptr_nonnull(f);
	args_usage(f, &prog);
	fclose(f);
	return buf;
}

START_TEST(help_is_the_table)
{
	pages = 256;  /* in its range: the default */
	contract = 0; /* out of it: "none", not shown */
	char *t = usage_text();
	ck_assert_str_eq(t,
	                 "usage: prog --pages N\n"
	                 "options:\n"
	                 "  --secret-file F         the secret\n"
	                 "  --listen HOST:PORT      where borrowers connect\n"
	                 "  --pages N               the pages lent "
	                 "(1..268435456, default 256)\n"
	                 "  --contract ID           the contract (1 or more)\n"
	                 "  --mlock                 keep the lender out of "
	                 "memory reclaim\n"
	                 "  -h, --help              this text\n"
	                 "Notes.\n");
	free(t);
}
END_TEST

/* A long help wraps at 80 columns under its column; a long name puts it
 * on the next line. */
START_TEST(help_wraps_under_its_column)
{
	static const struct args_opt o[] = {
	    {"--a-rather-long-option-name", ARGS_STR, &file, 0, 0, NULL,
	     "HOST:PORT",
	     "one two three four five six seven eight nine ten eleven "
	     "twelve thirteen fourteen"},
	};
	const struct args_prog p = {"prog", "usage: prog\n", o, 1, NULL};
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	args_usage(f, &p);
	fclose(f);
	ck_assert_str_eq(buf,
	                 "usage: prog\n"
	                 "options:\n"
	                 "  --a-rather-long-option-name HOST:PORT\n"
	                 "                          one two three four "
	                 "five six seven eight nine ten\n"
	                 "                          eleven twelve thirteen "
	                 "fourteen\n"
	                 "  -h, --help              this text\n");
	for (char *l = buf; *l; l = strchr(l, '\n') + 1)
		ck_assert_int_le(strchr(l, '\n') - l, 80);
	free(buf);
}
END_TEST

/* Runs args_done with fd `fd` (1 or 2) going to a file; what was written
 * there into out. */
static int done_into(int fd, int parsed, const char *e, char *out, size_t cap)
{
	char path[] = "/tmp/test_args_XXXXXX";
	int tmp = mkstemp(path);
	ck_assert_int_ge(tmp, 0);
	unlink(path);
	fflush(fd == 1 ? stdout : stderr);
	int saved = dup(fd);
	dup2(tmp, fd);
	int rc = args_done(parsed, &prog, e);
	fflush(fd == 1 ? stdout : stderr);
	dup2(saved, fd);
	close(saved);
	ssize_t n = pread(tmp, out, cap - 1, 0);
	close(tmp);
	out[n > 0 ? n : 0] = '\0';
	return rc;
}

START_TEST(done_says_how_main_goes_on)
{
	char out[4096];
	ck_assert_int_eq(done_into(1, 0, "", out, sizeof out), -1);
	ck_assert_str_eq(out, ""); /* nothing printed */
	ck_assert_int_eq(done_into(1, 1, "", out, sizeof out), 0);
	ck_assert_ptr_nonnull(strstr(out, "  --mlock ")); /* --help: the */
	ck_assert_ptr_nonnull(strstr(out, "Notes.\n"));   /* whole text */
	/* an error: itself and the usage lines, the options left to --help */
	ck_assert_int_eq(done_into(2, -1,
	                           "unknown option \"--colour\" (see --help)",
	                           out, sizeof out),
	                 2);
	ck_assert_str_eq(out, "prog: unknown option \"--colour\" (see --help)\n"
	                      "usage: prog --pages N\n");
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
	tcase_add_test(t, help_is_the_table);
	tcase_add_test(t, help_wraps_under_its_column);
	tcase_add_test(t, done_says_how_main_goes_on);
	suite_add_tcase(s, t);
	SRunner *r = srunner_create(s);
	srunner_run_all(r, CK_NORMAL);
	int failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? 1 : 0;
}
