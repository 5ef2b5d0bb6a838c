/* test_seal.c — secrets at rest: seal, open, the row binding, rotation,
 * the key file. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exchange/seal.h"

static const char *secret =
    "rxs_00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

static struct seal_keys *keys_from(const char *text)
{
	char path[] = "/tmp/test_seal_XXXXXX", err[256];
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq((int)write(fd, text, strlen(text)), (int)strlen(text));
	close(fd);
	struct seal_keys *k = seal_load(path, err, sizeof err);
	unlink(path);
	return k;
}

#define K1 "k1 " \
	   "1111111111111111111111111111111111111111111111111111111111111111\n"
#define K2 "k2 " \
	   "2222222222222222222222222222222222222222222222222222222222222222\n"

START_TEST(seal_opens_only_for_its_row)
{
	char s[SEAL_TEXT_MAX], out[128];
	struct seal_keys *k = keys_from(K1);
	ck_assert_ptr_nonnull(k);
	ck_assert_int_eq(seal_seal(k, secret, "node_key:nk_a", s), 0);
	ck_assert_ptr_null(strstr(s, secret + 4)); /* nothing of it shows */
	ck_assert_int_eq(strncmp(s, "rxseal1:k1:", 11), 0);
	ck_assert_int_eq(seal_open(k, s, "node_key:nk_a", out, sizeof out), 0);
	ck_assert_str_eq(out, secret);
	/* copied into another row, it does not open */
	ck_assert_int_eq(seal_open(k, s, "node_key:nk_b", out, sizeof out), -1);
	/* a changed byte anywhere is refused */
	for (size_t i = 11; s[i]; i++) {
		char t[SEAL_TEXT_MAX];
		memcpy(t, s, sizeof t);
		t[i] = t[i] == '0' ? '1' : '0';
		ck_assert_int_eq(
		    seal_open(k, t, "node_key:nk_a", out, sizeof out), -1);
	}
	/* two seals of one secret differ (fresh IV) */
	char s2[SEAL_TEXT_MAX];
	ck_assert_int_eq(seal_seal(k, secret, "node_key:nk_a", s2), 0);
	ck_assert_str_ne(s, s2);
	seal_free(k);
}
END_TEST

START_TEST(another_key_cannot_open)
{
	char s[SEAL_TEXT_MAX], out[128];
	struct seal_keys *a = keys_from(K1), *demo;
	char err[128];
	ck_assert_int_eq(seal_seal(a, secret, "lend:1", s), 0);
	/* a key file with another key under the same id */
	struct seal_keys *b = keys_from(
	    "k1 3333333333333333333333333333333333333333333333333333333333333333");
	ck_assert_int_eq(seal_open(b, s, "lend:1", out, sizeof out), -1);
	demo = seal_load("", err, sizeof err);
	ck_assert(seal_is_demo(demo));
	ck_assert_int_eq(seal_open(demo, s, "lend:1", out, sizeof out), -1);
	seal_free(a), seal_free(b), seal_free(demo);
}
END_TEST

/* Rotation: the new key first seals; the old one still opens. */
START_TEST(rotation_keeps_old_rows_open)
{
	char s[SEAL_TEXT_MAX], out[128];
	struct seal_keys *old = keys_from(K1);
	ck_assert_int_eq(seal_seal(old, secret, "lend:7", s), 0);
	struct seal_keys *both = keys_from("# rotated\n" K2 K1);
	ck_assert_str_eq(seal_current_id(both), "k2");
	ck_assert(!seal_is_current(both, s));
	ck_assert_int_eq(seal_open(both, s, "lend:7", out, sizeof out), 0);
	ck_assert_str_eq(out, secret);
	char s2[SEAL_TEXT_MAX];
	ck_assert_int_eq(seal_seal(both, out, "lend:7", s2), 0);
	ck_assert(seal_is_current(both, s2));
	seal_free(old), seal_free(both);
}
END_TEST

START_TEST(bad_key_files_refused)
{
	const char *bad[] = {
	    "",
	    "k1 1111\n",
	    "K1 1111111111111111111111111111111111111111111111111111111111111111",
	    "k1 111111111111111111111111111111111111111111111111111111111111111g",
	    "k1 1111111111111111111111111111111111111111111111111111111111111111"
	    " extra",
	    K1 K1,
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		ck_assert_msg(keys_from(bad[i]) == NULL, "accepted: %s",
		              bad[i]);
	char err[256];
	ck_assert_ptr_null(seal_load("/nonexistent/k", err, sizeof err));
	ck_assert_ptr_nonnull(strstr(err, "/nonexistent/k"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("seal");
	TCase *tc = tcase_create("seal");
	tcase_add_test(tc, seal_opens_only_for_its_row);
	tcase_add_test(tc, another_key_cannot_open);
	tcase_add_test(tc, rotation_keeps_old_rows_open);
	tcase_add_test(tc, bad_key_files_refused);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
