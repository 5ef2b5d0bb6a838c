/* test_auth.c — exchange/auth driven without a server: auth_authenticate
 * takes a view of the request (struct auth_request), so the refusals that
 * need no database are checked here on plain strings (the database paths
 * are test_ramexd's and test_http_edge's, against a real ramexd). */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/sign.h"
#include "exchange/auth.h"

static struct auth *a;
static struct auth_principal p;
static char why[256];
static int status;

static void setup(void)
{
	a = auth_new(NULL, (int64_t)time(NULL), NULL, 16);
	ck_assert_ptr_nonnull(a);
}

static void teardown(void)
{
	auth_free(a);
}

static int check(const struct auth_request *rq, int may_block)
{
	why[0] = '\0';
	status = 0;
	return auth_authenticate(a, rq, &p, &status, why, sizeof why,
	                         may_block);
}

static const char token[] =
    "rx_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

START_TEST(no_credentials_is_401)
{
	struct auth_request rq = {
	    .method = "GET", .target = "/v1/markets", .body = ""};
	ck_assert_int_eq(check(&rq, 1), -1);
	ck_assert_int_eq(status, 401);
	ck_assert_msg(strstr(why, "no credentials"), "%s", why);
}
END_TEST

START_TEST(a_bearer_token_must_have_its_shape)
{
	struct auth_request rq = {.method = "GET",
	                          .target = "/v1/markets",
	                          .authorization = "Bearer not-a-token",
	                          .body = ""};
	ck_assert_int_eq(check(&rq, 1), -1);
	ck_assert_int_eq(status, 401);
	ck_assert_msg(strstr(why, "not a ramex token"), "%s", why);
	/* a scheme other than Bearer is no credential */
	rq.authorization = "Basic dXNlcjpwdw==";
	ck_assert_int_eq(check(&rq, 1), -1);
	ck_assert_msg(strstr(why, "no credentials"), "%s", why);
}
END_TEST

START_TEST(a_signature_needs_its_headers_and_their_shapes)
{
	struct auth_request rq = {.method = "GET",
	                          .target = "/v1/whoami",
	                          .key = "nk_0123456789abcdef",
	                          .body = ""};
	ck_assert_int_eq(check(&rq, 1), -1);
	ck_assert_int_eq(status, 401);
	ck_assert_msg(strstr(why, "needs the headers"), "%s", why);
	rq.timestamp = "0123"; /* a leading zero */
	rq.nonce = "abcdefghijklmnop0001";
	rq.signature = "00";
	ck_assert_int_eq(check(&rq, 1), -1);
	ck_assert_msg(strstr(why, SIGN_HDR_TIMESTAMP " must be Unix seconds"),
	              "%s", why);
	rq.timestamp = "1700000000";
	rq.key = "nk_NOT-HEX";
	ck_assert_int_eq(check(&rq, 1), -1);
	ck_assert_msg(strstr(why, "is not a ramex node key id"), "%s", why);
}
END_TEST

/* On an HTTP thread (may_block 0) a credential that is not cached is not
 * checked at all: -2 asks the server to ask again on a worker. */
START_TEST(uncached_credentials_wait_for_a_worker)
{
	struct auth_request rq = {.method = "GET",
	                          .target = "/v1/markets",
	                          .authorization = NULL,
	                          .body = ""};
	char bearer[sizeof token + 8];
	snprintf(bearer, sizeof bearer, "Bearer %s", token);
	rq.authorization = bearer;
	ck_assert_int_eq(check(&rq, 0), -2);
	struct auth_request sig = {.method = "GET",
	                           .target = "/v1/whoami",
	                           .key = "nk_0123456789abcdef",
	                           .timestamp = "1700000000",
	                           .nonce = "abcdefghijklmnop0001",
	                           .signature = "00",
	                           .body = ""};
	ck_assert_int_eq(check(&sig, 0), -2);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("auth");
	TCase *t = tcase_create("view");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, no_credentials_is_401);
	tcase_add_test(t, a_bearer_token_must_have_its_shape);
	tcase_add_test(t, a_signature_needs_its_headers_and_their_shapes);
	tcase_add_test(t, uncached_credentials_wait_for_a_worker);
	suite_add_tcase(s, t);
	SRunner *r = srunner_create(s);
	srunner_run_all(r, CK_NORMAL);
	int failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? 1 : 0;
}
