/* test_sign.c — request signatures: canonical form, verify, skew, tamper. */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/sign.h"

static const char *secret = "rxs_0123456789abcdef0123456789abcdef";

static struct sign_request req(const char *body)
{
	struct sign_request r = {
	    .method = "POST",
	    .path = "/v1/orders",
	    .timestamp = 1700000000,
	    .nonce = "abcdefghijklmnop",
	    .body = body,
	    .body_len = body ? strlen(body) : 0,
	};
	return r;
}

START_TEST(canonical_form_is_documented_one)
{
	char out[512];
	struct sign_request r = req("");
	int n = sign_canonical(&r, out, sizeof out);
	/* no query: an empty line for it; sha256 of the empty string */
	const char *want =
	    "RAMEX-HMAC-SHA256-2\nPOST\n/v1/orders\n\n1700000000\n"
	    "abcdefghijklmnop\n"
	    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca49599"
	    "1b7852b855";
	ck_assert_int_eq(n, (int)strlen(want));
	ck_assert_str_eq(out, want);
}
END_TEST

/* The path and the query are signed as sent: split at the first '?',
 * nothing decoded, so "%26" (a '&' inside a value) and "&" (two
 * parameters) sign differently, as do "%77hoami" and "whoami". */
START_TEST(canonical_form_keeps_encoding)
{
	char a[512], b[512], sa[65], sb[65];
	struct sign_request r = req("");
	r.method = "GET";
	r.path = "/v1/contracts?market=spot%26state=active";
	ck_assert_int_gt(sign_canonical(&r, a, sizeof a), 0);
	ck_assert_ptr_nonnull(
	    strstr(a, "\n/v1/contracts\nmarket=spot%26state=active\n"));
	ck_assert_int_eq(sign_compute(secret, &r, sa), 0);
	r.path = "/v1/contracts?market=spot&state=active";
	ck_assert_int_gt(sign_canonical(&r, b, sizeof b), 0);
	ck_assert_ptr_nonnull(
	    strstr(b, "\n/v1/contracts\nmarket=spot&state=active\n"));
	ck_assert_int_eq(sign_compute(secret, &r, sb), 0);
	ck_assert_str_ne(sa, sb);

	r.path = "/v1/%77hoami";
	ck_assert_int_eq(sign_compute(secret, &r, sa), 0);
	r.path = "/v1/whoami";
	ck_assert_int_eq(sign_compute(secret, &r, sb), 0);
	ck_assert_str_ne(sa, sb);
	/* only the first '?' splits: one in the query stays in it */
	r.path = "/v1/x?a=?b";
	ck_assert_int_gt(sign_canonical(&r, a, sizeof a), 0);
	ck_assert_ptr_nonnull(strstr(a, "\n/v1/x\na=?b\n"));
}
END_TEST

/* Every byte of the longest target is signed; a longer one is not signed
 * at all (ramexd answers 414), never a prefix of it. */
START_TEST(long_target_signed_whole_or_not_at_all)
{
	char t[SIGN_TARGET_MAX + 2], sa[65], sb[65];
	struct sign_request r = req("");
	memset(t, 'a', sizeof t);
	memcpy(t, "/v1/x?p=", 8);
	t[SIGN_TARGET_MAX] = 0;
	r.path = t;
	ck_assert_int_eq(sign_compute(secret, &r, sa), 0);
	t[SIGN_TARGET_MAX - 1] = 'b'; /* the last byte counts */
	ck_assert_int_eq(sign_compute(secret, &r, sb), 0);
	ck_assert_str_ne(sa, sb);
	t[SIGN_TARGET_MAX] = 'a';
	t[SIGN_TARGET_MAX + 1] = 0;
	ck_assert_int_eq(sign_compute(secret, &r, sa), -1);
}
END_TEST

START_TEST(known_vector)
{
	/* Computed independently with:
	 * printf 'RAMEX-HMAC-SHA256-2\nGET\n/v1/markets\nstate=a%%26b\n1\n'\
	 *   'abcdefghijklmnop\n%s' "$(printf '' | sha256sum | cut -c1-64)" |
	 *   openssl dgst -sha256 -hmac key */
	char sig[65];
	struct sign_request r = {
	    "GET", "/v1/markets?state=a%26b", 1, "abcdefghijklmnop", NULL, 0};
	ck_assert_int_eq(sign_compute("key", &r, sig), 0);
	ck_assert_str_eq(
	    sig,
	    "9c831ae65a2c55b9840e47f4b5e887916fbdac7e4944b31bc1c286ead5fb5731");
}
END_TEST

/* The timestamp header: decimal digits and nothing else. "+T", "0T",
 * " T" and "T " named the same second as "T" when strtoll read them. */
START_TEST(timestamp_digits_only)
{
	int64_t t = -1;
	ck_assert_int_eq(sign_parse_timestamp("1700000000", &t), 0);
	ck_assert_int_eq(t, 1700000000);
	ck_assert_int_eq(sign_parse_timestamp("0", &t), 0);
	ck_assert_int_eq(t, 0);
	const char *bad[] = {"+1700000000", "01700000000", " 1700000000",
	                     "1700000000 ", "-1700000000", "1700000000x",
	                     "0x65",        "",            "1e9",
	                     "1700000000.5", "9999999999999", "\t1"};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		t = -1;
		ck_assert_msg(sign_parse_timestamp(bad[i], &t) == -1,
		              "'%s' was taken as a timestamp", bad[i]);
		ck_assert_int_eq(t, -1);
	}
	ck_assert_int_eq(sign_parse_timestamp(NULL, &t), -1);
}
END_TEST

/* The window is SIGN_MAX_SKEW_S both ways: 299 s early or late passes,
 * 301 s either way does not. */
START_TEST(window_is_symmetric)
{
	char sig[65];
	const char *why;
	struct sign_request r = req("{}");
	ck_assert_int_eq(sign_compute(secret, &r, sig), 0);
	for (int d = -301; d <= 301; d += 602) {
		ck_assert_int_eq(sign_verify(secret, &r, sig, 1700000000 + d,
		                             SIGN_MAX_SKEW_S, &why),
		                 SIGN_STALE);
		ck_assert_ptr_nonnull(strstr(why, "before or after"));
	}
	for (int d = -299; d <= 299; d += 598)
		ck_assert_int_eq(sign_verify(secret, &r, sig, 1700000000 + d,
		                             SIGN_MAX_SKEW_S, &why),
		                 SIGN_OK);
}
END_TEST

/* The hash of bodies and bearer tokens (FIPS 180-2's examples), from
 * several threads at once: its algorithm is fetched once, on first use. */
static void *hash_abc(void *arg)
{
	char *out = arg;
	sign_sha256_hex("abc", 3, out);
	return NULL;
}

START_TEST(sha256_known_answers)
{
	char h[65], t[4][65];
	sign_sha256_hex(NULL, 0, h);
	ck_assert_str_eq(
	    h,
	    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	pthread_t th[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, hash_abc, t[i]);
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		ck_assert_str_eq(t[i],
		                 "ba7816bf8f01cfea414140de5dae2223b00361a39"
		                 "6177a9cb410ff61f20015ad");
	}
	const char *m =
	    "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	sign_sha256_hex(m, strlen(m), h);
	ck_assert_str_eq(
	    h,
	    "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}
END_TEST

START_TEST(verify_accepts_own_signature)
{
	char sig[65];
	const char *why;
	struct sign_request r = req("{\"pages\":100}");
	ck_assert_int_eq(sign_compute(secret, &r, sig), 0);
	ck_assert_int_eq(sign_verify(secret, &r, sig, 1700000000 + 299,
	                             SIGN_MAX_SKEW_S, &why),
	                 SIGN_OK);
	ck_assert_int_eq(sign_verify(secret, &r, sig, 1700000000 - 300,
	                             SIGN_MAX_SKEW_S, &why),
	                 SIGN_OK);
}
END_TEST

START_TEST(verify_refuses_stale_and_tampered)
{
	char sig[65];
	const char *why;
	struct sign_request r = req("{\"pages\":100}");
	ck_assert_int_eq(sign_compute(secret, &r, sig), 0);
	ck_assert_int_eq(sign_verify(secret, &r, sig, 1700000000 + 301,
	                             SIGN_MAX_SKEW_S, &why),
	                 SIGN_STALE);
	ck_assert_ptr_nonnull(strstr(why, "clock"));

	struct sign_request t = req("{\"pages\":900}");
	ck_assert_int_eq(
	    sign_verify(secret, &t, sig, 1700000000, SIGN_MAX_SKEW_S, &why),
	    SIGN_MISMATCH);
	t = r;
	t.path = "/v1/orders/2";
	ck_assert_int_eq(
	    sign_verify(secret, &t, sig, 1700000000, SIGN_MAX_SKEW_S, &why),
	    SIGN_MISMATCH);
	t = r;
	t.method = "GET";
	ck_assert_int_eq(
	    sign_verify(secret, &t, sig, 1700000000, SIGN_MAX_SKEW_S, &why),
	    SIGN_MISMATCH);
	t = r;
	t.nonce = "abcdefghijklmnoq";
	ck_assert_int_eq(
	    sign_verify(secret, &t, sig, 1700000000, SIGN_MAX_SKEW_S, &why),
	    SIGN_MISMATCH);
	ck_assert_int_eq(sign_verify("rxs_other", &r, sig, 1700000000,
	                             SIGN_MAX_SKEW_S, &why),
	                 SIGN_MISMATCH);
}
END_TEST

START_TEST(malformed_parts_refused)
{
	char sig[65];
	const char *why;
	struct sign_request r = req("");
	r.nonce = "short";
	ck_assert_int_eq(sign_compute(secret, &r, sig), -1);
	ck_assert_int_eq(
	    sign_verify(secret, &r, "00", 1700000000, SIGN_MAX_SKEW_S, &why),
	    SIGN_MALFORMED);
	r = req("");
	r.path = "/v1/a b";
	ck_assert_int_eq(sign_compute(secret, &r, sig), -1);
	r = req("");
	r.nonce = "abcdefghijklmno\n";
	ck_assert_int_eq(sign_compute(secret, &r, sig), -1);
}
END_TEST

START_TEST(nonces_differ)
{
	char a[33], b[33];
	ck_assert_int_eq(sign_nonce(a), 0);
	ck_assert_int_eq(sign_nonce(b), 0);
	ck_assert_int_eq((int)strlen(a), 32);
	ck_assert_str_ne(a, b);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sign");
	TCase *tc = tcase_create("sign");
	tcase_add_test(tc, canonical_form_is_documented_one);
	tcase_add_test(tc, canonical_form_keeps_encoding);
	tcase_add_test(tc, long_target_signed_whole_or_not_at_all);
	tcase_add_test(tc, known_vector);
	tcase_add_test(tc, timestamp_digits_only);
	tcase_add_test(tc, window_is_symmetric);
	tcase_add_test(tc, sha256_known_answers);
	tcase_add_test(tc, verify_accepts_own_signature);
	tcase_add_test(tc, verify_refuses_stale_and_tampered);
	tcase_add_test(tc, malformed_parts_refused);
	tcase_add_test(tc, nonces_differ);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
