/* test_contract.c — contracts from trades and every move of their state
 * machine, including the ones that must be refused. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/money.h"
#include "exchange/core/contract.h"

#define S      MONEY_NS_PER_S
#define HOUR   (3600 * S)
#define DAY    (24 * HOUR)
#define OP     1  /* the operator's account */
#define NODE_A 10 /* a seller */
#define NODE_B 11 /* a node that borrows */

static const struct contract_market spot_market = {
    .market_id = 1,
    .product = CONTRACT_SPOT,
    .delivery_window = 10 * 60 * S,
    .recall_notice = 2 * HOUR,
    .breach_penalty = 0,
};

static const struct contract_market perm_market = {
    .market_id = 2,
    .product = CONTRACT_PERM,
    .perm_year = 2027,
    .delivery_window = HOUR,
    .recall_notice = 0,
    .breach_penalty = 20000,
};

static struct contract open_one(const struct contract_market *m, int64_t buyer,
                                bool op, rx_time_ns now)
{
	struct contract_trade t = {.contract_id = 100,
	                           .trade_id = 7,
	                           .buyer = buyer,
	                           .seller = NODE_A,
	                           .buyer_is_operator = op,
	                           .pages = INT64_C(1) << 20,
	                           .price = 100000,
	                           .now = now};
	struct contract c;
	char err[CONTRACT_MSG_MAX] = "";
	ck_assert_msg(contract_open(&t, m, &c, err, sizeof err) == 0, "%s",
	              err);
	return c;
}

static enum contract_reject send(struct contract *c, enum contract_event ev,
                                 enum contract_actor who, rx_time_ns now,
                                 struct contract_transition *t,
                                 char msg[CONTRACT_MSG_MAX])
{
	int64_t acct = who == CONTRACT_BY_SELLER  ? c->seller
	               : who == CONTRACT_BY_BUYER ? c->buyer
	                                          : 0;
	struct contract_cmd cmd = {.event = ev,
	                           .actor = who,
	                           .actor_account = acct,
	                           .now = now,
	                           .note = NULL};
	return contract_apply(c, &cmd, t, msg);
}

/* Sends and insists that it works. */
static struct contract_transition ok(struct contract *c, enum contract_event ev,
                                     enum contract_actor who, rx_time_ns now)
{
	struct contract_transition t;
	char msg[CONTRACT_MSG_MAX];
	enum contract_reject r = send(c, ev, who, now, &t, msg);
	ck_assert_msg(r == CONTRACT_REJ_NONE, "%s: %s", contract_event_name(ev),
	              msg);
	return t;
}

/* Field by field: struct copies need not copy padding. */
static bool same(const struct contract *a, const struct contract *b)
{
	return a->id == b->id && a->trade_id == b->trade_id &&
	       a->market_id == b->market_id && a->product == b->product &&
	       a->perm_year == b->perm_year && a->delivery == b->delivery &&
	       a->buyer == b->buyer && a->seller == b->seller &&
	       a->pages == b->pages && a->price == b->price &&
	       a->breach_penalty == b->breach_penalty &&
	       a->recall_notice == b->recall_notice && a->state == b->state &&
	       a->created == b->created &&
	       a->delivery_deadline == b->delivery_deadline &&
	       a->term_end == b->term_end &&
	       a->delivered_at == b->delivered_at &&
	       a->notice_end == b->notice_end && a->ended_at == b->ended_at &&
	       a->changed_at == b->changed_at;
}

/* Sends and insists that it is refused, for `why`, changing nothing. */
static void refused(struct contract *c, enum contract_event ev,
                    enum contract_actor who, rx_time_ns now,
                    enum contract_reject why, const char *text)
{
	struct contract before = *c;
	struct contract_transition t = {.contract_id = -5};
	char msg[CONTRACT_MSG_MAX] = "";
	enum contract_reject r = send(c, ev, who, now, &t, msg);
	ck_assert_msg(r == why, "%s: got %s (%s)", contract_event_name(ev),
	              contract_reject_name(r), msg);
	ck_assert_msg(strstr(msg, text), "%s", msg);
	ck_assert(same(&before, c));
	ck_assert_int_eq(t.contract_id, -5);
}

START_TEST(delivery_kind_comes_from_the_buyer)
{
	rx_time_ns now = money_month_start(2027, 3);
	struct contract off = open_one(&spot_market, OP, true, now);
	struct contract lend = open_one(&spot_market, NODE_B, false, now);
	ck_assert_int_eq(off.delivery, CONTRACT_OFFLINE);
	ck_assert_int_eq(lend.delivery, CONTRACT_LEND);
	ck_assert_int_eq(off.state, CONTRACT_PENDING_DELIVERY);
	ck_assert_int_eq(off.delivery_deadline, now + 10 * 60 * S);
	ck_assert_int_eq(off.recall_notice, 2 * HOUR);
	ck_assert_int_eq(off.term_end, 0);

	struct contract perm = open_one(&perm_market, OP, true, now);
	ck_assert_int_eq(perm.term_end, money_month_start(2028, 1));
	ck_assert_int_eq(perm.breach_penalty, 20000);
	ck_assert_str_eq(contract_delivery_name(lend.delivery), "lend");
}
END_TEST

START_TEST(open_refuses_bad_trades)
{
	rx_time_ns now = money_month_start(2027, 3);
	struct contract_trade t = {.contract_id = 1,
	                           .trade_id = 2,
	                           .buyer = NODE_B,
	                           .seller = NODE_A,
	                           .buyer_is_operator = false,
	                           .pages = 100,
	                           .price = 5,
	                           .now = now};
	struct contract c = {.id = 42};
	char err[CONTRACT_MSG_MAX];
	ck_assert_int_eq(contract_open(&t, &perm_market, &c, err, sizeof err),
	                 -1);
	ck_assert_msg(strstr(err, "operator only"), "%s", err);

	struct contract_trade late = t;
	late.buyer_is_operator = true;
	late.now = money_month_start(2028, 1) - 30 * 60 * S;
	ck_assert_int_eq(
	    contract_open(&late, &perm_market, &c, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "next year"), "%s", err);

	struct contract_trade self = t;
	self.seller = self.buyer;
	ck_assert_int_eq(
	    contract_open(&self, &spot_market, &c, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "both sides"), "%s", err);

	struct contract_trade zero = t;
	zero.pages = 0;
	ck_assert_int_eq(
	    contract_open(&zero, &spot_market, &c, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "positive"), "%s", err);

	struct contract_market no_window = spot_market;
	no_window.delivery_window = 0;
	ck_assert_int_eq(contract_open(&t, &no_window, &c, err, sizeof err),
	                 -1);
	ck_assert_msg(strstr(err, "delivery window"), "%s", err);
	ck_assert_int_eq(c.id, 42); /* untouched */
}
END_TEST

/* Spot offline: delivered, recalled mid-month, ended by the notice. */
START_TEST(spot_recall_mid_month)
{
	rx_time_ns t0 = money_month_start(2027, 6);
	struct contract c = open_one(&spot_market, OP, true, t0);
	struct contract_transition t =
	    ok(&c, CONTRACT_EV_DELIVERED, CONTRACT_BY_SELLER, t0 + 5 * 60 * S);
	ck_assert_int_eq(t.from, CONTRACT_PENDING_DELIVERY);
	ck_assert_int_eq(t.to, CONTRACT_ACTIVE);
	ck_assert_int_eq(t.actor, CONTRACT_BY_SELLER);
	ck_assert_int_eq(t.actor_account, NODE_A);
	ck_assert_int_eq(t.at, t0 + 5 * 60 * S);
	ck_assert_msg(strstr(t.why, "confirmed delivery"), "%s", t.why);
	ck_assert_int_eq(c.delivered_at, t0 + 5 * 60 * S);

	enum contract_event ev;
	rx_time_ns at;
	ck_assert(!contract_due(&c, &ev, &at)); /* spot runs open-ended */

	rx_time_ns mid = t0 + 15 * DAY;
	struct contract_cmd recall = {.event = CONTRACT_EV_RECALL,
	                              .actor = CONTRACT_BY_SELLER,
	                              .actor_account = NODE_A,
	                              .now = mid,
	                              .note = "workload grew"};
	char msg[CONTRACT_MSG_MAX];
	ck_assert_int_eq(contract_apply(&c, &recall, &t, msg),
	                 CONTRACT_REJ_NONE);
	ck_assert_int_eq(c.state, CONTRACT_RECALLING);
	ck_assert_int_eq(c.notice_end, mid + 2 * HOUR);
	ck_assert_msg(strstr(t.why, "recalled") && strstr(t.why, "workload"),
	              "%s", t.why);

	ck_assert(contract_due(&c, &ev, &at));
	ck_assert_int_eq(ev, CONTRACT_EV_NOTICE_ENDED);
	ck_assert_int_eq(at, mid + 2 * HOUR);
	refused(&c, CONTRACT_EV_NOTICE_ENDED, CONTRACT_BY_EXCHANGE, at - 1,
	        CONTRACT_REJ_TOO_EARLY, "not before");
	refused(&c, CONTRACT_EV_BUYER_END, CONTRACT_BY_BUYER, at,
	        CONTRACT_REJ_DEADLINE_DUE, "decides first");
	t = ok(&c, CONTRACT_EV_NOTICE_ENDED, CONTRACT_BY_EXCHANGE, at);
	ck_assert_int_eq(c.state, CONTRACT_ENDED);
	ck_assert_int_eq(c.ended_at, mid + 2 * HOUR);

	rx_time_ns from, to;
	ck_assert(contract_delivery_span(&c, at + DAY, &from, &to));
	ck_assert_int_eq(from, t0 + 5 * 60 * S);
	ck_assert_int_eq(to, mid + 2 * HOUR);
	ck_assert(!contract_due(&c, &ev, &at));
}
END_TEST

START_TEST(late_delivery_is_a_breach)
{
	rx_time_ns t0 = money_month_start(2027, 2);
	struct contract c = open_one(&spot_market, NODE_B, false, t0);
	rx_time_ns deadline = c.delivery_deadline;
	refused(&c, CONTRACT_EV_DELIVERY_LATE, CONTRACT_BY_EXCHANGE,
	        deadline - 1, CONTRACT_REJ_TOO_EARLY, "not before");
	refused(&c, CONTRACT_EV_DELIVERED, CONTRACT_BY_SELLER, deadline,
	        CONTRACT_REJ_DEADLINE_DUE, "delivery_late");
	struct contract_transition t =
	    ok(&c, CONTRACT_EV_DELIVERY_LATE, CONTRACT_BY_EXCHANGE, deadline);
	ck_assert_int_eq(t.to, CONTRACT_BREACHED);
	ck_assert_int_eq(t.actor, CONTRACT_BY_EXCHANGE);
	ck_assert_msg(strstr(t.why, "did not confirm"), "%s", t.why);
	rx_time_ns from, to;
	ck_assert(!contract_delivery_span(&c, deadline, &from, &to));
	refused(&c, CONTRACT_EV_DELIVERED, CONTRACT_BY_SELLER, deadline + 1,
	        CONTRACT_REJ_WRONG_STATE, "breached");
}
END_TEST

START_TEST(perm_recall_is_a_breach_and_runs_to_term)
{
	rx_time_ns t0 = money_month_start(2027, 1);
	struct contract c = open_one(&perm_market, OP, true, t0);
	ok(&c, CONTRACT_EV_DELIVERED, CONTRACT_BY_SELLER, t0 + 60 * S);
	refused(&c, CONTRACT_EV_BUYER_END, CONTRACT_BY_BUYER, t0 + DAY,
	        CONTRACT_REJ_PRODUCT_RULE, "end of its term");
	enum contract_event ev;
	rx_time_ns at;
	ck_assert(contract_due(&c, &ev, &at));
	ck_assert_int_eq(ev, CONTRACT_EV_TERM_ENDED);
	ck_assert_int_eq(at, money_month_start(2028, 1));

	struct contract breach = c;
	struct contract_transition t =
	    ok(&breach, CONTRACT_EV_RECALL, CONTRACT_BY_SELLER,
	       money_month_start(2027, 8));
	ck_assert_int_eq(t.to, CONTRACT_BREACHED);
	ck_assert_msg(strstr(t.why, "before the end of term"), "%s", t.why);
	ck_assert_int_eq(breach.ended_at, money_month_start(2027, 8));

	refused(&c, CONTRACT_EV_TERM_ENDED, CONTRACT_BY_EXCHANGE, at - 1,
	        CONTRACT_REJ_TOO_EARLY, "not before");
	refused(&c, CONTRACT_EV_RECALL, CONTRACT_BY_SELLER, at,
	        CONTRACT_REJ_DEADLINE_DUE, "term_ended");
	t = ok(&c, CONTRACT_EV_TERM_ENDED, CONTRACT_BY_EXCHANGE, at);
	ck_assert_int_eq(c.state, CONTRACT_ENDED);
	ck_assert_int_eq(c.ended_at, money_month_start(2028, 1));
}
END_TEST

START_TEST(only_the_right_party_may_act)
{
	rx_time_ns t0 = money_month_start(2027, 4);
	struct contract c = open_one(&spot_market, NODE_B, false, t0);
	refused(&c, CONTRACT_EV_DELIVERED, CONTRACT_BY_BUYER, t0 + S,
	        CONTRACT_REJ_NOT_ALLOWED, "may not send delivered");
	refused(&c, CONTRACT_EV_DELIVERED, CONTRACT_BY_ADMIN, t0 + S,
	        CONTRACT_REJ_NOT_ALLOWED, "admin");
	struct contract_cmd imposter = {.event = CONTRACT_EV_DELIVERED,
	                                .actor = CONTRACT_BY_SELLER,
	                                .actor_account = NODE_B,
	                                .now = t0 + S};
	struct contract_transition t;
	char msg[CONTRACT_MSG_MAX];
	ck_assert_int_eq(contract_apply(&c, &imposter, &t, msg),
	                 CONTRACT_REJ_NOT_ALLOWED);
	ck_assert_msg(strstr(msg, "not the seller"), "%s", msg);
	ok(&c, CONTRACT_EV_DELIVERED, CONTRACT_BY_SELLER, t0 + S);
	refused(&c, CONTRACT_EV_RECALL, CONTRACT_BY_EXCHANGE, t0 + 2 * S,
	        CONTRACT_REJ_NOT_ALLOWED, "exchange");
	refused(&c, CONTRACT_EV_BREACH, CONTRACT_BY_SELLER, t0 + 2 * S,
	        CONTRACT_REJ_NOT_ALLOWED, "seller");
	refused(&c, CONTRACT_EV_TERM_ENDED, CONTRACT_BY_EXCHANGE, t0 + 2 * S,
	        CONTRACT_REJ_PRODUCT_RULE, "no term");
	refused(&c, CONTRACT_EV_BUYER_END, CONTRACT_BY_BUYER, t0,
	        CONTRACT_REJ_BAD_INPUT, "backwards");
	ok(&c, CONTRACT_EV_BREACH, CONTRACT_BY_ADMIN, t0 + 3 * S);
	ck_assert_int_eq(c.state, CONTRACT_BREACHED);
}
END_TEST

/* Brings a fresh contract of `m` into state `s`, or returns false. */
static bool reach(const struct contract_market *m, enum contract_state s,
                  struct contract *c, rx_time_ns t0)
{
	*c = open_one(m, OP, true, t0);
	switch (s) {
	case CONTRACT_PENDING_DELIVERY:
		return true;
	case CONTRACT_ACTIVE:
		ok(c, CONTRACT_EV_DELIVERED, CONTRACT_BY_SELLER, t0 + S);
		return true;
	case CONTRACT_RECALLING:
		if (m->product != CONTRACT_SPOT)
			return false;
		ok(c, CONTRACT_EV_DELIVERED, CONTRACT_BY_SELLER, t0 + S);
		ok(c, CONTRACT_EV_RECALL, CONTRACT_BY_SELLER, t0 + 2 * S);
		return true;
	case CONTRACT_ENDED:
		if (m->product != CONTRACT_SPOT)
			return false;
		ok(c, CONTRACT_EV_BUYER_END, CONTRACT_BY_BUYER, t0 + S);
		return true;
	default:
		ok(c, CONTRACT_EV_DELIVERY_LATE, CONTRACT_BY_EXCHANGE,
		   c->delivery_deadline);
		return true;
	}
}

/* Every (product, state, event, actor): either the move is one the table
 * in contract.h allows (written out again here, independently), or it is
 * refused and the contract is unchanged. Times are chosen so no deadline
 * interferes: just after the last change, before any deadline. */
START_TEST(every_other_move_is_refused)
{
	const struct contract_market *markets[] = {&spot_market, &perm_market};
	int allowed = 0, refusals = 0;
	for (int mi = 0; mi < 2; mi++) {
		bool spot = markets[mi]->product == CONTRACT_SPOT;
		for (int s = 0; s < CONTRACT_STATE_COUNT_; s++) {
			for (int e = 0; e < CONTRACT_EV_COUNT_; e++) {
				for (int a = 0; a < CONTRACT_ACTOR_COUNT_;
				     a++) {
					struct contract c;
					rx_time_ns t0 =
					    money_month_start(2027, 5);
					if (!reach(markets[mi], s, &c, t0))
						continue;
					struct contract before = c;
					rx_time_ns now = c.changed_at + S;
					struct contract_transition t;
					char msg[CONTRACT_MSG_MAX];
					enum contract_reject r =
					    send(&c, e, a, now, &t, msg);
					int expect = -1; /* refused */
					if (s == CONTRACT_PENDING_DELIVERY &&
					    e == CONTRACT_EV_DELIVERED &&
					    a == CONTRACT_BY_SELLER)
						expect = CONTRACT_ACTIVE;
					if (s == CONTRACT_PENDING_DELIVERY &&
					    e == CONTRACT_EV_BUYER_END &&
					    a == CONTRACT_BY_BUYER && spot)
						expect = CONTRACT_ENDED;
					if (s == CONTRACT_ACTIVE &&
					    e == CONTRACT_EV_RECALL &&
					    a == CONTRACT_BY_SELLER)
						expect =
						    spot ? CONTRACT_RECALLING
						         : CONTRACT_BREACHED;
					if ((s == CONTRACT_ACTIVE ||
					     s == CONTRACT_RECALLING) &&
					    e == CONTRACT_EV_BUYER_END &&
					    a == CONTRACT_BY_BUYER && spot)
						expect = CONTRACT_ENDED;
					if ((s == CONTRACT_ACTIVE ||
					     s == CONTRACT_RECALLING) &&
					    e == CONTRACT_EV_BREACH &&
					    (a == CONTRACT_BY_EXCHANGE ||
					     a == CONTRACT_BY_ADMIN))
						expect = CONTRACT_BREACHED;
					if (expect < 0) {
						ck_assert_msg(
						    r != CONTRACT_REJ_NONE,
						    "%s %s %s allowed",
						    contract_state_name(s),
						    contract_event_name(e),
						    contract_actor_name(a));
						ck_assert(same(&before, &c));
						ck_assert(msg[0] != 0);
						refusals++;
					} else {
						ck_assert_msg(
						    r == CONTRACT_REJ_NONE,
						    "%s", msg);
						ck_assert_int_eq(c.state,
						                 expect);
						ck_assert_int_eq(t.from, s);
						ck_assert_int_eq(t.to, expect);
						ck_assert_int_eq(t.at, now);
						allowed++;
					}
				}
			}
		}
	}
	ck_assert_int_eq(allowed, 13);
	ck_assert_int_gt(refusals, 150);
}
END_TEST

START_TEST(names_round_trip)
{
	for (int s = 0; s < CONTRACT_STATE_COUNT_; s++)
		ck_assert_int_eq(contract_state_parse(contract_state_name(s)),
		                 s);
	for (int e = 0; e < CONTRACT_EV_COUNT_; e++)
		ck_assert_int_eq(contract_event_parse(contract_event_name(e)),
		                 e);
	ck_assert_int_eq(contract_state_parse("nope"), -1);
	ck_assert_int_eq(contract_state_parse(NULL), -1);
	ck_assert_str_eq(contract_state_name(99), "unknown");
	ck_assert_str_eq(contract_product_name(CONTRACT_PERM), "perm");
	ck_assert(contract_rules_of(CONTRACT_PERM)->operator_only);
	ck_assert_int_eq(contract_rules_of(CONTRACT_SPOT)->recall,
	                 CONTRACT_RECALL_NOTICE);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("contract");
	TCase *tc = tcase_create("contract");
	tcase_add_test(tc, delivery_kind_comes_from_the_buyer);
	tcase_add_test(tc, open_refuses_bad_trades);
	tcase_add_test(tc, spot_recall_mid_month);
	tcase_add_test(tc, late_delivery_is_a_breach);
	tcase_add_test(tc, perm_recall_is_a_breach_and_runs_to_term);
	tcase_add_test(tc, only_the_right_party_may_act);
	tcase_add_test(tc, every_other_move_is_refused);
	tcase_add_test(tc, names_round_trip);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
