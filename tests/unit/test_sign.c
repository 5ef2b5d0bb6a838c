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
	/* sha256 of the empty string */
	const char *want =
	    "RAMEX-HMAC-SHA256\nPOST\n/v1/orders\n1700000000\n"
	    "abcdefghijklmnop\n"
	    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca49599"
	    "1b7852b855";
	ck_assert_int_eq(n, (int)strlen(want));
	ck_assert_str_eq(out, want);
}
END_TEST

START_TEST(known_vector)
{
	/* Computed independently with:
	 * printf 'RAMEX-HMAC-SHA256\nGET\n/v1/markets\n1\nabcdefghijklmnop\n'
	 * "$(printf '' | sha256sum | cut -c1-64)" |
	 *   openssl dgst -sha256 -hmac key */
	char sig[65];
	struct sign_request r = {
	    "GET", "/v1/markets", 1, "abcdefghijklmnop", NULL, 0};
	ck_assert_int_eq(sign_compute("key", &r, sig), 0);
	ck_assert_str_eq(
	    sig,
	    "65a1e58d7482f2b67ccba1535eb23789b22dc2e57ca40598e8c4e52390c4f063");
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
	tcase_add_test(tc, known_vector);
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
