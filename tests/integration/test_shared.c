/*
 * test_shared.c — two ramexd on one database behave as one exchange to a
 * client: what each keeps of idempotency keys, nonces and events is shared
 * through PostgreSQL (docs/ARCHITECTURE.md, "Scaling beyond one ramexd").
 *
 * Every test starts instance A on a fresh database, builds the world
 * there, then starts instance B on the same database, and waits until both have loaded their key filters (so
 * that a key A writes afterwards is one B's filter does not know: the
 * case the database must catch).
 *
 *   an_idempotency_key_replayed_on_the_other_instance_is_one_order:
 *     an order with an Idempotency-Key placed on A, the same request sent
 *     to B: B answers A's order (same id, replayed), one order in the
 *     database; the key with another body on B is refused 422.
 *   a_client_order_id_replayed_on_the_other_instance_is_one_order: the
 *     same with client_order_id, and with both in one batch of B's among
 *     fresh orders, which are placed once each.
 */
#include <check.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/integration/ramexd_fixture.h"
#include "tests/integration/ramexd_harness.h"
#include "tests/integration/testdb.h"

static void sleep_ms(int ms)
{
	struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000};
	nanosleep(&t, NULL);
}

/* Waits up to 20 s for `needle` in h's log. */
static void wait_log(struct rxh *h, const char *needle)
{
	for (int i = 0; i < 400; i++) {
		if (rxh_log_count(h, needle) > 0)
			return;
		sleep_ms(50);
	}
	ck_abort_msg("no '%s' in %s", needle, h->log);
}

/* A on a fresh database `db` with the world, B on the same one. */
static void pair(struct rxh *a, struct rxh *b, struct rxh_world *w,
                 const char *db)
{
	char bname[64];
	rxh_start(a, db, "");
	rxh_world(a, w);
	snprintf(bname, sizeof bname, "%s_b", db);
	rxh_start_at(b, bname, a->conninfo, "");
	wait_log(a, "key filter loaded");
	wait_log(b, "key filter loaded");
}

START_TEST(an_idempotency_key_replayed_on_the_other_instance_is_one_order)
{
	struct rxh a, b;
	struct rxh_world w;
	struct rxh_resp r1, r2, r3;
	pair(&a, &b, &w, "shared_idem");
	const char *hdr = "Idempotency-Key: shared-k1";
	ck_assert_int_eq(place(&a, w.trader_token, w.node_a, "sell", 256, 90000,
	                       NULL, hdr, &r1),
	                 201);
	int64_t id = order_id(&r1);
	ck_assert_int_gt(id, 0);
	/* the same request on B: A's answer, not a second order */
	ck_assert_int_eq(place(&b, w.trader_token, w.node_a, "sell", 256, 90000,
	                       NULL, hdr, &r2),
	                 201);
	ck_assert_int_eq(order_id(&r2), id);
	char buf[64];
	ck_assert_ptr_nonnull(
	    rxh_header(&r2, "Idempotent-Replayed", buf, sizeof buf));
	ck_assert_int_eq(count(&a, "SELECT count(*) FROM orders"), 1);
	/* another body under the key, on B: refused */
	ck_assert_int_eq(place(&b, w.trader_token, w.node_a, "sell", 512, 90000,
	                       NULL, hdr, &r3),
	                 422);
	ck_assert_int_eq(count(&a, "SELECT count(*) FROM orders"), 1);
	/* B goes on placing fresh orders */
	rxh_resp_free(&r3);
	ck_assert_int_eq(place(&b, w.trader_token, w.node_b, "sell", 256, 91000,
	                       NULL, NULL, &r3),
	                 201);
	ck_assert_int_eq(count(&a, "SELECT count(*) FROM orders"), 2);
	rxh_resp_free(&r1);
	rxh_resp_free(&r2);
	rxh_resp_free(&r3);
	rxh_stop(&b);
	rxh_stop(&a);
}
END_TEST

/* Sends `n` orders at once (one thread each) to h, so that they share a
 * batch; bodies[i] are their JSON bodies, statuses and ids come back. */
struct shot {
	struct rxh *h;
	const char *tok, *body;
	long status;
	int64_t id;
};

static void *fire(void *arg)
{
	struct shot *s = arg;
	struct rxh_resp r;
	s->status =
	    rxh_call(s->h, "POST", "/v1/orders", s->tok, s->body, NULL, &r);
	s->id = order_id(&r);
	rxh_resp_free(&r);
	return NULL;
}

START_TEST(a_client_order_id_replayed_on_the_other_instance_is_one_order)
{
	struct rxh a, b;
	struct rxh_world w;
	struct rxh_resp r1, r2;
	pair(&a, &b, &w, "shared_coid");
	char body[256];
	snprintf(body, sizeof body,
	         "{\"market\":\"spot\",\"account_id\":%lld,\"side\":\"sell\","
	         "\"pages\":256,\"price\":95000,\"client_order_id\":\"c-1\"}",
	         (long long)w.node_a);
	ck_assert_int_eq(
	    rxh_call(&a, "POST", "/v1/orders", w.trader_token, body, NULL, &r1),
	    201);
	int64_t id = order_id(&r1);
	/* on B, with fresh orders around it in the same batch */
	enum { N = 8 };
	struct shot s[N];
	pthread_t th[N];
	char bodies[N][256];
	for (int i = 0; i < N; i++) {
		if (i == N / 2)
			snprintf(bodies[i], sizeof bodies[i], "%s", body);
		else
			snprintf(bodies[i], sizeof bodies[i],
			         "{\"market\":\"spot\",\"account_id\":%lld,"
			         "\"side\":\"sell\",\"pages\":256,\"price\":"
			         "96000,\"client_order_id\":\"f-%d\"}",
			         (long long)w.node_b, i);
		s[i] = (struct shot){&b, w.trader_token, bodies[i], 0, 0};
		ck_assert_int_eq(pthread_create(&th[i], NULL, fire, &s[i]), 0);
	}
	for (int i = 0; i < N; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(s[i].status, 201);
		if (i == N / 2)
			ck_assert_int_eq(s[i].id, id);
		else
			ck_assert_int_ne(s[i].id, id);
	}
	ck_assert_int_eq(count(&a, "SELECT count(*) FROM orders"), N);
	ck_assert_int_eq(count(&a, "SELECT count(*) FROM orders WHERE "
	                           "client_order_id = 'c-1'"),
	                 1);
	/* the id for another order, on B: refused, nothing placed */
	snprintf(body, sizeof body,
	         "{\"market\":\"spot\",\"account_id\":%lld,\"side\":\"sell\","
	         "\"pages\":512,\"price\":95000,\"client_order_id\":\"c-1\"}",
	         (long long)w.node_a);
	ck_assert_int_eq(
	    rxh_call(&b, "POST", "/v1/orders", w.trader_token, body, NULL, &r2),
	    422);
	ck_assert_int_eq(count(&a, "SELECT count(*) FROM orders"), N);
	ck_assert_int_ge(rxh_log_count(&b, "batch lost a key race"), 1);
	rxh_resp_free(&r1);
	rxh_resp_free(&r2);
	rxh_stop(&b);
	rxh_stop(&a);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("shared");
	TCase *t = tcase_create("two instances");
	tcase_set_timeout(t, 120);
	tcase_add_test(
	    t, an_idempotency_key_replayed_on_the_other_instance_is_one_order);
	tcase_add_test(
	    t, a_client_order_id_replayed_on_the_other_instance_is_one_order);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *r = srunner_create(suite());
	srunner_run_all(r, CK_NORMAL);
	int failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
