/*
 * test_events.c — the event ring (exchange/events.c) as the shared stream
 * fills it (events_put, with the database's ids) and as one instance does
 * (events_publish): ids, gaps, what a subscriber reads, Last-Event-ID, and
 * the outbox that takes published events when the stream is shared.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exchange/auth.h"
#include "exchange/events.h"

/* Reads every event a subscriber may read now into out ("id type;" each);
 * returns how many. */
static int drain(struct events_sub *s, char *out, size_t max)
{
	char buf[4096];
	int n = 0;
	out[0] = 0;
	long k;
	while ((k = events_poll(s, buf, sizeof buf)) > 0) {
		buf[k] = 0;
		long long id;
		char type[32];
		if (sscanf(buf, "id: %lld\nevent: %31s", &id, type) != 2)
			continue; /* the hello, a keep-alive */
		size_t len = strlen(out);
		snprintf(out + len, max - len, "%lld %s;", id, type);
		n++;
	}
	return n;
}

START_TEST(put_keeps_the_database_ids_and_skips_gaps)
{
	struct events *e = events_new(8, 15);
	ck_assert_ptr_nonnull(e);
	struct events_sub *s = events_subscribe(e, AUTH_ADMIN, 0, 0, -1);
	char got[512];
	events_put(e, 5, "fill", 1, 1, 2, 1, "{}");
	events_put(e, 6, "contract", 1, 1, 2, 1, "{}");
	events_put(e, 9, "fill", 1, 1, 2, 1, "{}"); /* 7, 8: a gap */
	events_put(e, 8, "fill", 1, 1, 2, 1, "{}"); /* older: ignored */
	ck_assert_int_eq(drain(s, got, sizeof got), 3);
	ck_assert_str_eq(got, "5 fill;6 contract;9 fill;");
	events_unsubscribe(s);
	events_free(e);
}
END_TEST

START_TEST(a_node_sees_its_own_account_only)
{
	struct events *e = events_new(8, 15);
	struct events_sub *s = events_subscribe(e, AUTH_NODE, 7, 1, -1);
	char got[512];
	events_put(e, 1, "fill", 7, 1, 8, 1, "{}");
	events_put(e, 2, "fill", 3, 1, 4, 1, "{}");
	events_put(e, 3, "order", 0, 0, 7, 1, "{}");
	ck_assert_int_eq(drain(s, got, sizeof got), 2);
	ck_assert_str_eq(got, "1 fill;3 order;");
	events_unsubscribe(s);
	events_free(e);
}
END_TEST

static int outs;
static char out_type[32];
static void out(void *arg, const char *type, int64_t a, int64_t ta, int64_t b,
                int64_t tb, const char *data)
{
	(void)arg, (void)a, (void)ta, (void)b, (void)tb, (void)data;
	outs++;
	snprintf(out_type, sizeof out_type, "%s", type);
}

START_TEST(shared_publish_goes_out_and_resume_may_be_ahead)
{
	struct events *e = events_new(8, 15);
	char got[512];
	ck_assert(!events_shared(e));
	events_set_outbox(e, out, NULL);
	ck_assert(events_shared(e));
	/* published: to the database, not the ring */
	struct events_sub *all = events_subscribe(e, AUTH_ADMIN, 0, 0, -1);
	events_publish(e, "automation", 1, 1, 0, 0, "{}");
	ck_assert_int_eq(outs, 1);
	ck_assert_str_eq(out_type, "automation");
	ck_assert_int_eq(drain(all, got, sizeof got), 0);
	events_put(e, 10, "fill", 1, 1, 2, 1, "{}");
	/* a client that saw id 12 on another instance, before this one read
	 * it: it goes on after 12, nothing twice */
	struct events_sub *s = events_subscribe(e, AUTH_ADMIN, 0, 0, 12);
	ck_assert_int_eq(drain(s, got, sizeof got), 0);
	events_put(e, 11, "fill", 1, 1, 2, 1, "{}");
	events_put(e, 12, "fill", 1, 1, 2, 1, "{}");
	events_put(e, 13, "fill", 1, 1, 2, 1, "{}");
	ck_assert_int_eq(drain(s, got, sizeof got), 1);
	ck_assert_str_eq(got, "13 fill;");
	/* an id far beyond anything (another database): from now on */
	struct events_sub *far =
	    events_subscribe(e, AUTH_ADMIN, 0, 0, 13 + EVENTS_RING + 1);
	events_put(e, 14, "fill", 1, 1, 2, 1, "{}");
	ck_assert_int_eq(drain(far, got, sizeof got), 1);
	ck_assert_str_eq(got, "14 fill;");
	events_unsubscribe(all);
	events_unsubscribe(s);
	events_unsubscribe(far);
	events_free(e);
}
END_TEST

START_TEST(alone_an_id_ahead_starts_from_now)
{
	struct events *e = events_new(8, 15);
	char got[512], buf[256];
	struct events_sub *all = events_subscribe(e, AUTH_ADMIN, 0, 0, -1);
	events_publish(e, "fill", 1, 1, 2, 1, "{}");
	ck_assert_int_eq(drain(all, got, sizeof got), 1);
	long long first = atoll(got);
	/* one instance: an id it never gave is not waited for, and one
	 * from before its start (ids go on from the clock, not from 1) is
	 * not taken for its own: either is told that what followed it is
	 * not held (overflow, lost unknown), then goes on from now */
	long long ids[] = {first + 5, 5};
	for (int i = 0; i < 2; i++) {
		struct events_sub *s =
		    events_subscribe(e, AUTH_ADMIN, 0, 0, ids[i]);
		ck_assert_int_gt(events_poll(s, buf, sizeof buf),
		                 0); /* hello */
		long k = events_poll(s, buf, sizeof buf);
		ck_assert_int_gt(k, 0);
		buf[k] = 0;
		ck_assert_str_eq(buf,
		                 "event: overflow\ndata: {\"lost\":null}\n\n");
		events_publish(e, "fill", 1, 1, 2, 1, "{}");
		ck_assert_int_eq(drain(s, got, sizeof got), 1);
		ck_assert_int_eq(atoll(got), first + 1 + i);
		events_unsubscribe(s);
	}
	ck_assert_int_gt(first, 1000000000000000LL); /* not 1 at each start */
	events_unsubscribe(all);
	events_free(e);
}
END_TEST

/* The first chunk says the stream's keep-alive interval, the server's or
 * the one the stream asked for: a client that knows it can tell a frozen
 * exchange (no byte for two intervals) from a quiet one. */
START_TEST(the_hello_says_the_keepalive_interval)
{
	struct events *e = events_new(8, 15);
	char buf[256];
	struct events_sub *a = events_subscribe(e, AUTH_ADMIN, 0, 0, -1);
	long n = events_poll(a, buf, sizeof buf - 1);
	ck_assert_int_gt(n, 0);
	buf[n] = 0;
	ck_assert_msg(strstr(buf, ": ramex events, keep-alive every 15 s\n"),
	              "%s", buf);
	struct events_sub *b = events_subscribe(e, AUTH_ADMIN, 0, 0, -1);
	events_set_keepalive(b, 2);
	n = events_poll(b, buf, sizeof buf - 1);
	ck_assert_int_gt(n, 0);
	buf[n] = 0;
	ck_assert_msg(strstr(buf, ": ramex events, keep-alive every 2 s\n"),
	              "%s", buf);
	events_unsubscribe(a);
	events_unsubscribe(b);
	events_free(e);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("events");
	TCase *tc = tcase_create("ring");
	tcase_add_test(tc, put_keeps_the_database_ids_and_skips_gaps);
	tcase_add_test(tc, a_node_sees_its_own_account_only);
	tcase_add_test(tc, shared_publish_goes_out_and_resume_may_be_ahead);
	tcase_add_test(tc, alone_an_id_ahead_starts_from_now);
	tcase_add_test(tc, the_hello_says_the_keepalive_interval);
	suite_add_tcase(s, tc);
	SRunner *r = srunner_create(s);
	srunner_run_all(r, CK_NORMAL);
	int failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
