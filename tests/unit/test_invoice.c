/* test_invoice.c — exchange/core/invoice: the brief's worked examples as
 * movements and invoices, twelve months against the exact year, the cents
 * carry of final invoices, a mid-month recall, perm settlement (term and
 * breach), late usage as an adjustment, immutability of final invoices,
 * fees, the ledger check and the CSV rows. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/money.h"
#include "exchange/core/contract.h"
#include "exchange/core/invoice.h"
#include "exchange/core/usage.h"

#define Y      RX_SECONDS_PER_YEAR
#define S      MONEY_NS_PER_S
#define DAY    (INT64_C(86400) * S)
#define GIB4   (INT64_C(1) << 20) /* 4 GiB in pages */
#define GRACE  (3 * DAY)
#define BUYER  100
#define SELLER 200
#define EXCH   900

static char err[INVOICE_MSG_MAX];

static struct invoice_contract terms(rx_price price, int fee_bps)
{
	return (struct invoice_contract){.contract_id = 7,
	                                 .buyer = BUYER,
	                                 .seller = SELLER,
	                                 .delivery = CONTRACT_OFFLINE,
	                                 .price = price,
	                                 .fee_bps = fee_bps};
}

static rx_ndollars amount_of(rx_pagesec ps, rx_price price)
{
	rx_ndollars a;
	ck_assert_msg(money_amount(ps, price, &a, err, sizeof err) == 0, "%s",
	              err);
	return a;
}

static rx_pagesec month_ps(rx_pages pages, int year, int month)
{
	return pages * ((money_month_start(year, month + 1) -
	                 money_month_start(year, month)) /
	                S);
}

static rx_ndollars posting_sum(const struct invoice_movement *m)
{
	rx_ndollars s = 0;
	for (int i = 0; i < m->n; i++)
		s += m->p[i].amount;
	return s;
}

/* Bills `ps` of (year, month) at `now` for c; returns the movement. */
static struct invoice_movement bill(struct invoice_contract *c, rx_pagesec ps,
                                    rx_pagesec billed_ps, int year, int month,
                                    rx_time_ns now, int64_t mid)
{
	struct invoice_due due;
	struct invoice_movement m;
	invoice_plan(ps, billed_ps, year, month, now, GRACE, &due);
	ck_assert_msg(invoice_charge(c, &due, money_month_start(year, month),
	                             money_month_start(year, month + 1), mid,
	                             EXCH, &m, err, sizeof err) == 0,
	              "%s", err);
	ck_assert_int_eq(posting_sum(&m), 0);
	return m;
}

/* 2^20 pages offline or lent for the whole of 2025, billed month by month
 * while each month is open: the three figures of the brief, to the
 * nanodollar, debited to the buyer and credited to the seller. */
START_TEST(worked_examples_as_monthly_invoices)
{
	static const struct {
		rx_price price;
		rx_ndollars want;
		const char *shown;
	} ex[] = {{100000, INT64_C(104857600000), "104.86"},
	          {200000, INT64_C(209715200000), "209.72"},
	          {150000, INT64_C(157286400000), "157.29"}};
	for (size_t e = 0; e < 3; e++) {
		struct invoice_contract c = terms(ex[e].price, 0);
		struct invoice buyer[12], seller[12];
		rx_ndollars debit = 0, credit = 0;
		for (int mo = 1; mo <= 12; mo++) {
			buyer[mo - 1] = (struct invoice){.id = mo,
			                                 .account = BUYER,
			                                 .year = 2025,
			                                 .month = mo};
			seller[mo - 1] = (struct invoice){.id = 100 + mo,
			                                  .account = SELLER,
			                                  .year = 2025,
			                                  .month = mo};
			/* billed on the last day of the month: still open */
			rx_time_ns now = money_month_start(2025, mo + 1) - DAY;
			struct invoice_movement m = bill(
			    &c, month_ps(GIB4, 2025, mo), 0, 2025, mo, now, mo);
			ck_assert_int_eq(m.kind, INVOICE_USAGE);
			ck_assert_int_eq(m.n, 2);
			ck_assert_int_eq(invoice_add(&buyer[mo - 1], &m.p[0],
			                             err, sizeof err),
			                 0);
			ck_assert_int_eq(invoice_add(&seller[mo - 1], &m.p[1],
			                             err, sizeof err),
			                 0);
			debit += buyer[mo - 1].total;
			credit += seller[mo - 1].total;
		}
		ck_assert_int_eq(debit, ex[e].want);
		ck_assert_int_eq(credit, -ex[e].want);
		ck_assert_int_eq(c.billed, ex[e].want);
		ck_assert_int_eq(c.billed_ps, GIB4 * Y);
		char shown[MONEY_TEXT_MAX];
		money_format_cents(debit, shown, sizeof shown);
		ck_assert_str_eq(shown, ex[e].shown);
		/* one charge of the whole year says the same */
		struct invoice_contract whole = terms(ex[e].price, 0);
		struct invoice_movement m =
		    bill(&whole, GIB4 * Y, 0, 2025, 12,
		         money_month_start(2025, 12) + DAY, 1);
		ck_assert_int_eq(m.amount, ex[e].want);
		ck_assert_int_eq(m.p[1].amount, -ex[e].want);
	}
}
END_TEST

/* An awkward size and price leave a remainder every month; the carry makes
 * the twelve invoices sum to the exact yearly amount, and the cents paid
 * over the twelve final invoices plus the last carry to the same. */
START_TEST(twelve_months_sum_exactly_and_cents_carry)
{
	rx_pages pages = 1000003;
	rx_price price = 123457;
	struct invoice_contract c = terms(price, 0);
	struct money_carry cents = {0};
	rx_ndollars sum = 0;
	int64_t paid = 0, truncated = 0;
	rx_pagesec ps_year = 0;
	for (int mo = 1; mo <= 12; mo++) {
		rx_pagesec ps = month_ps(pages, 2025, mo);
		ps_year += ps;
		struct invoice_movement m = bill(
		    &c, ps, 0, 2025, mo, money_month_start(2025, mo) + DAY, mo);
		/* a month alone, without the carry, rounds down */
		ck_assert_int_le(amount_of(ps, price), m.amount);
		struct invoice inv = {
		    .id = mo, .account = BUYER, .year = 2025, .month = mo};
		ck_assert_int_eq(invoice_add(&inv, &m.p[0], err, sizeof err),
		                 0);
		/* too early: the month and its grace are not over */
		ck_assert_int_eq(
		    invoice_finalize(&inv, &cents,
		                     money_month_start(2025, mo + 1), GRACE,
		                     err, sizeof err),
		    -1);
		ck_assert_msg(strstr(err, "stays a draft"), "%s", err);
		ck_assert_int_eq(
		    invoice_finalize(&inv, &cents,
		                     money_month_start(2025, mo + 1) + GRACE,
		                     GRACE, err, sizeof err),
		    0);
		ck_assert_int_eq(inv.status, INVOICE_FINAL);
		ck_assert_int_eq(inv.cents_out.rem, cents.rem);
		sum += inv.total;
		paid += inv.payable_cents;
		truncated += inv.total / RX_NANODOLLARS_PER_CENT;
	}
	ck_assert_int_eq(ps_year, pages * Y);
	ck_assert_int_eq(sum, amount_of(pages * Y, price));
	ck_assert_int_eq(paid * RX_NANODOLLARS_PER_CENT + cents.rem, sum);
	ck_assert_int_eq(paid, sum / RX_NANODOLLARS_PER_CENT);
	/* twelve separate roundings down would have lost cents */
	ck_assert_int_lt(truncated, paid);
}
END_TEST

/* The brief's operator: $104.857 600 000 over twelve final invoices pays
 * 10 485 cents and carries the 0.76 cent. */
START_TEST(worked_example_cents)
{
	struct invoice_contract c = terms(100000, 0);
	struct money_carry cents = {0};
	int64_t paid = 0;
	for (int mo = 1; mo <= 12; mo++) {
		struct invoice_movement m =
		    bill(&c, month_ps(GIB4, 2025, mo), 0, 2025, mo,
		         money_month_start(2025, mo), mo);
		struct invoice inv = {
		    .id = mo, .account = BUYER, .year = 2025, .month = mo};
		ck_assert_int_eq(invoice_add(&inv, &m.p[0], err, sizeof err),
		                 0);
		ck_assert_int_eq(invoice_finalize(&inv, &cents,
		                                  money_month_start(2026, 6),
		                                  GRACE, err, sizeof err),
		                 0);
		paid += inv.payable_cents;
	}
	ck_assert_int_eq(paid, 10485);
	ck_assert_int_eq(cents.rem, 7600000);
}
END_TEST

/* A spot contract recalled half-way through March: one report spans
 * 20 February to the recall on 16 March; usage_share splits it between the
 * months and the two months' amounts sum to the amount of the whole. */
START_TEST(month_with_mid_way_recall)
{
	rx_pages pages = 777777;
	rx_time_ns from = money_month_start(2025, 2) + 19 * DAY;
	rx_time_ns recall = money_month_start(2025, 3) + 15 * DAY;
	rx_pagesec whole =
	    pages * ((recall - from) / S) - 12345; /* a bit short */
	struct usage_report r = {.node = SELLER,
	                         .epoch = 1,
	                         .seq = 1,
	                         .contract_id = 7,
	                         .period_start = from,
	                         .period_end = recall,
	                         .page_seconds = whole};
	rx_pagesec feb = usage_share(&r, money_month_start(2025, 2),
	                             money_month_start(2025, 3));
	rx_pagesec mar = usage_share(&r, money_month_start(2025, 3),
	                             money_month_start(2025, 4));
	ck_assert_int_eq(feb + mar, whole);
	ck_assert_int_gt(feb, 0);
	ck_assert_int_gt(mar, feb); /* 15 days against 9 */
	struct invoice_contract c = terms(100003, 0);
	rx_time_ns now = recall + DAY;
	struct invoice_movement mf = bill(&c, feb, 0, 2025, 2, now, 1);
	struct invoice_movement mm = bill(&c, mar, 0, 2025, 3, now, 2);
	/* February's grace ended on 4 March: billed on 17 March, its share
	 * is an adjustment on March's invoice. */
	ck_assert_int_eq(mf.kind, INVOICE_ADJUSTMENT);
	ck_assert_int_eq(mf.month, 3);
	ck_assert_int_eq(mm.kind, INVOICE_USAGE);
	ck_assert_int_eq(mm.month, 3);
	ck_assert_int_eq(mf.amount + mm.amount, amount_of(whole, 100003));
	/* billing March again with nothing new posts nothing */
	struct invoice_due due;
	invoice_plan(mar, mar, 2025, 3, now, GRACE, &due);
	ck_assert_int_eq(due.ps, 0);
}
END_TEST

static struct contract perm_contract(rx_price price, rx_price penalty)
{
	return (struct contract){.id = 7,
	                         .product = CONTRACT_PERM,
	                         .perm_year = 2025,
	                         .delivery = CONTRACT_OFFLINE,
	                         .buyer = BUYER,
	                         .seller = SELLER,
	                         .pages = GIB4,
	                         .price = price,
	                         .breach_penalty = penalty,
	                         .state = CONTRACT_ACTIVE,
	                         .created = money_month_start(2025, 1) - DAY,
	                         .term_end = money_month_start(2026, 1),
	                         .delivered_at = money_month_start(2025, 1)};
}

/* A perm-2025 contract billed at 200 000 for January to June, then
 * breached on 1 July: the delivered half-year re-prices at
 * min(price, spot) - penalty and the difference is credited back. */
START_TEST(breached_perm_settles_at_min_less_penalty)
{
	static const struct {
		rx_price spot, penalty, want_price;
	} cases[] = {
	    {150000, 20000, 130000}, /* spot below the price */
	    {300000, 20000, 180000}, /* spot above: the price */
	    {150000, 400000, 0},     /* a penalty above both: nothing */
	};
	for (size_t i = 0; i < 3; i++) {
		struct contract k = perm_contract(200000, cases[i].penalty);
		struct invoice_contract c = terms(200000, 0);
		rx_pagesec delivered = 0;
		for (int mo = 1; mo <= 6; mo++) {
			rx_pagesec ps = month_ps(GIB4, 2025, mo);
			delivered += ps;
			bill(&c, ps, 0, 2025, mo, money_month_start(2025, mo),
			     mo);
		}
		rx_ndollars billed = c.billed;
		ck_assert_int_eq(billed, amount_of(delivered, 200000));
		k.state = CONTRACT_BREACHED;
		k.ended_at = money_month_start(2025, 7);
		rx_time_ns now = k.ended_at + DAY;
		rx_price at;
		struct invoice_movement m;
		ck_assert_msg(invoice_settle(&c, &k, delivered, cases[i].spot,
		                             now, GRACE, 50, EXCH, &at, &m, err,
		                             sizeof err) == 0,
		              "%s", err);
		ck_assert_int_eq(at, cases[i].want_price);
		ck_assert_int_eq(m.kind, INVOICE_SETTLEMENT);
		ck_assert_int_eq(posting_sum(&m), 0);
		rx_ndollars target = amount_of(delivered, cases[i].want_price);
		ck_assert_int_eq(m.amount, target - billed);
		ck_assert_int_eq(c.billed, target);
		ck_assert_int_eq(c.billed_ps, delivered);
		/* breached on 1 July 00:00: the settlement is June's, which
		 * is still a draft the day after */
		ck_assert_int_eq(m.year, 2025);
		ck_assert_int_eq(m.month, 6);
		/* once settled, usage is no longer charged */
		struct invoice_due due = {.ps = 1, .year = 2025, .month = 7};
		ck_assert_int_eq(invoice_charge(&c, &due, 0, 0, 51, EXCH, &m,
		                                err, sizeof err),
		                 -1);
		/* settling again with no new usage moves nothing */
		ck_assert_int_eq(invoice_settle(&c, &k, delivered,
		                                cases[i].spot, now, GRACE, 52,
		                                EXCH, &at, &m, err, sizeof err),
		                 0);
		ck_assert_int_eq(m.amount, 0);
	}
}
END_TEST

/* A perm contract the timer ended a moment after its term end (ended_at >
 * term_end) settles the whole term at its price, topping up what the
 * reports undercounted. */
START_TEST(perm_term_end_settles_full_term)
{
	struct contract k = perm_contract(200000, 20000);
	struct invoice_contract c = terms(200000, 0);
	for (int mo = 1; mo <= 12; mo++)
		bill(&c, month_ps(GIB4, 2025, mo) - 1000, 0, 2025, mo,
		     money_month_start(2025, mo), mo);
	k.state = CONTRACT_ENDED;
	k.ended_at = k.term_end + 700 * INT64_C(1000000); /* the tick */
	rx_price at;
	struct invoice_movement m;
	ck_assert_msg(invoice_settle(&c, &k, 0, 0, k.ended_at + DAY, GRACE, 60,
	                             EXCH, &at, &m, err, sizeof err) == 0,
	              "%s", err);
	ck_assert_int_eq(at, 200000);
	ck_assert_int_eq(c.billed, INT64_C(209715200000));
	ck_assert_int_eq(m.page_seconds, 12 * 1000);
	ck_assert_int_gt(m.amount, 0);
	ck_assert_int_eq(m.charge_end, k.term_end);
	/* ended just after midnight: January's invoice, not December's */
	ck_assert_int_eq(m.year, 2026);
	ck_assert_int_eq(m.month, 1);
	/* a spot contract has nothing to settle */
	k.product = CONTRACT_SPOT;
	ck_assert_int_eq(invoice_settle(&c, &k, 0, 0, k.ended_at, GRACE, 61,
	                                EXCH, &at, &m, err, sizeof err),
	                 -1);
}
END_TEST

/* January 2026 is final on 4 February; a report for it that arrives on
 * 10 March bills as an adjustment on March's draft, and a downward
 * correction lands there as a CORRECTION. */
START_TEST(late_report_is_an_adjustment)
{
	rx_time_ns now = money_month_start(2026, 3) + 9 * DAY;
	ck_assert_int_eq(invoice_status_at(2026, 1, now, GRACE), INVOICE_FINAL);
	ck_assert_int_eq(invoice_status_at(2026, 3, now, GRACE), INVOICE_DRAFT);
	struct invoice_due due;
	invoice_plan(5000, 3000, 2026, 1, now, GRACE, &due);
	ck_assert_int_eq(due.ps, 2000);
	ck_assert_int_eq(due.kind, INVOICE_ADJUSTMENT);
	ck_assert_int_eq(due.year, 2026);
	ck_assert_int_eq(due.month, 3);
	invoice_plan(2000, 3000, 2026, 1, now, GRACE, &due);
	ck_assert_int_eq(due.ps, -1000);
	ck_assert_int_eq(due.kind, INVOICE_CORRECTION);
	/* on 2 March February is still in its grace: it takes the usage */
	now = money_month_start(2026, 3) + DAY;
	invoice_plan(5000, 3000, 2026, 1, now, GRACE, &due);
	ck_assert_int_eq(due.month, 2);
	invoice_plan(5000, 3000, 2026, 2, now, GRACE, &due);
	ck_assert_int_eq(due.kind, INVOICE_USAGE);
	ck_assert_int_eq(due.month, 2);

	/* charged and corrected, the amounts are those of the net usage */
	struct invoice_contract c = terms(99991, 0);
	struct invoice_movement a =
	    bill(&c, 7777777, 0, 2026, 1, money_month_start(2026, 1), 1);
	struct invoice_movement b =
	    bill(&c, 9999999, 7777777, 2026, 1,
	         money_month_start(2026, 3) + 9 * DAY, 2);
	struct invoice_movement d =
	    bill(&c, 8888888, 9999999, 2026, 1, money_month_start(2026, 4), 3);
	ck_assert_int_eq(b.kind, INVOICE_ADJUSTMENT);
	ck_assert_int_eq(d.kind, INVOICE_CORRECTION);
	ck_assert_int_lt(d.amount, 0);
	ck_assert_int_eq(a.amount + b.amount + d.amount,
	                 amount_of(8888888, 99991));
}
END_TEST

START_TEST(final_invoice_refuses_additions)
{
	struct invoice_contract c = terms(100000, 0);
	struct invoice_movement m =
	    bill(&c, 1000000, 0, 2025, 5, money_month_start(2025, 5), 1);
	struct invoice inv = {
	    .id = 3, .account = BUYER, .year = 2025, .month = 5};
	struct money_carry cents = {0};
	ck_assert_int_eq(invoice_add(&inv, &m.p[0], err, sizeof err), 0);
	/* the seller's posting does not belong on the buyer's invoice */
	ck_assert_int_eq(invoice_add(&inv, &m.p[1], err, sizeof err), -1);
	ck_assert_msg(strstr(err, "does not belong"), "%s", err);
	ck_assert_int_eq(invoice_finalize(&inv, &cents,
	                                  money_month_start(2025, 7), GRACE,
	                                  err, sizeof err),
	                 0);
	rx_ndollars total = inv.total;
	ck_assert_int_eq(invoice_add(&inv, &m.p[0], err, sizeof err), -1);
	ck_assert_msg(strstr(err, "is final"), "%s", err);
	ck_assert_int_eq(inv.total, total);
	ck_assert_int_eq(inv.lines, 1);
	ck_assert_int_eq(invoice_finalize(&inv, &cents,
	                                  money_month_start(2025, 8), GRACE,
	                                  err, sizeof err),
	                 -1);
}
END_TEST

/* With a fee of 2.5 %, every movement has three postings that balance; the
 * exchange's fees, carried, are exactly 2.5 % of the total rounded down
 * once, and the seller gets the rest. */
START_TEST(fee_postings_balance)
{
	struct invoice_contract c = terms(133333, 250);
	rx_ndollars buyer = 0, seller = 0, exch = 0;
	for (int mo = 1; mo <= 12; mo++) {
		struct invoice_movement m =
		    bill(&c, month_ps(999999, 2025, mo), 0, 2025, mo,
		         money_month_start(2025, mo), mo);
		ck_assert_int_eq(m.n, 3);
		ck_assert_int_eq(m.p[0].role, INVOICE_BUYER);
		ck_assert_int_eq(m.p[1].role, INVOICE_SELLER);
		ck_assert_int_eq(m.p[2].role, INVOICE_EXCHANGE);
		ck_assert_int_eq(m.p[2].account, EXCH);
		ck_assert_int_eq(m.p[2].amount, -m.fee);
		buyer += m.p[0].amount;
		seller += m.p[1].amount;
		exch += m.p[2].amount;
	}
	ck_assert_int_eq(buyer + seller + exch, 0);
	ck_assert_int_eq(buyer, c.billed);
	ck_assert_int_eq(-exch, c.fees);
	ck_assert_int_eq(c.fees, (__int128)c.billed * 250 / 10000);
	ck_assert_int_eq(-seller, c.billed - c.fees);
	/* a contract with both sides on one account is refused */
	struct invoice_contract self = terms(1, 0);
	self.seller = self.buyer;
	struct invoice_due due = {.ps = 1, .year = 2025, .month = 1};
	struct invoice_movement m;
	ck_assert_int_eq(
	    invoice_charge(&self, &due, 0, 0, 1, EXCH, &m, err, sizeof err),
	    -1);
}
END_TEST

START_TEST(ledger_check_catches_errors)
{
	struct invoice_contract c = terms(100000, 100);
	struct invoice_movement ms[3];
	for (int i = 0; i < 3; i++)
		ms[i] = bill(&c, 1000000 * (i + 1), 0, 2025, 4,
		             money_month_start(2025, 4), 10 + i);
	struct invoice_ledger l;
	invoice_ledger_init(&l);
	for (int i = 0; i < 3; i++)
		for (int k = 0; k < ms[i].n; k++)
			ck_assert_int_eq(invoice_ledger_add(&l, &ms[i].p[k],
			                                    err, sizeof err),
			                 0);
	ck_assert_int_eq(invoice_ledger_finish(&l, err, sizeof err), 0);
	ck_assert_int_eq(l.movements, 3);
	ck_assert_int_eq(l.postings, 9);

	/* one posting off by a nanodollar */
	struct invoice_movement bad = ms[1];
	bad.p[1].amount += 1;
	invoice_ledger_init(&l);
	int rc = 0;
	for (int k = 0; k < ms[0].n; k++)
		rc |= invoice_ledger_add(&l, &ms[0].p[k], err, sizeof err);
	for (int k = 0; k < bad.n && rc == 0; k++)
		rc |= invoice_ledger_add(&l, &bad.p[k], err, sizeof err);
	for (int k = 0; k < ms[2].n && rc == 0; k++)
		rc |= invoice_ledger_add(&l, &ms[2].p[k], err, sizeof err);
	ck_assert_int_eq(rc, -1);
	ck_assert_msg(strstr(err, "movement 11 does not balance"), "%s", err);
	/* the last movement unbalanced is caught by finish */
	invoice_ledger_init(&l);
	for (int k = 0; k < bad.n; k++)
		ck_assert_int_eq(
		    invoice_ledger_add(&l, &bad.p[k], err, sizeof err), 0);
	ck_assert_int_eq(invoice_ledger_finish(&l, err, sizeof err), -1);
	/* out of order */
	invoice_ledger_init(&l);
	ck_assert_int_eq(invoice_ledger_add(&l, &ms[2].p[0], err, sizeof err),
	                 0);
	ck_assert_int_eq(invoice_ledger_add(&l, &ms[2].p[1], err, sizeof err),
	                 0);
	ck_assert_int_eq(invoice_ledger_add(&l, &ms[2].p[2], err, sizeof err),
	                 0);
	ck_assert_int_eq(invoice_ledger_add(&l, &ms[0].p[0], err, sizeof err),
	                 -1);

	/* the buyer's invoice against its postings */
	struct invoice inv = {
	    .id = 4, .account = BUYER, .year = 2025, .month = 4};
	struct invoice_posting ps[3];
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(
		    invoice_add(&inv, &ms[i].p[0], err, sizeof err), 0);
		ps[i] = ms[i].p[0];
	}
	ck_assert_int_eq(invoice_check_invoice(&inv, ps, 3, err, sizeof err),
	                 0);
	inv.total -= 1;
	ck_assert_int_eq(invoice_check_invoice(&inv, ps, 3, err, sizeof err),
	                 -1);
	ck_assert_msg(strstr(err, "postings sum to"), "%s", err);
	inv.total += 1;
	ck_assert_int_eq(invoice_check_invoice(&inv, ps, 2, err, sizeof err),
	                 -1);
	ps[2] = ms[2].p[1]; /* the seller's */
	ck_assert_int_eq(invoice_check_invoice(&inv, ps, 3, err, sizeof err),
	                 -1);
}
END_TEST

/* Splits a CSV line into fields (quotes understood); returns the count. */
static int csv_split(const char *line, char fields[32][96])
{
	int n = 0;
	size_t o = 0;
	int q = 0;
	for (const char *p = line; *p && *p != '\n'; p++) {
		if (q && *p == '"' && p[1] == '"') {
			fields[n][o++] = '"';
			p++;
		} else if (*p == '"') {
			q = !q;
		} else if (!q && *p == ',') {
			fields[n][o] = 0;
			n++;
			o = 0;
		} else if (o < 95) {
			fields[n][o++] = *p;
		}
	}
	fields[n][o] = 0;
	return n + 1;
}

START_TEST(csv_rows)
{
	char buf[INVOICE_CSV_MAX];
	static char f[32][96], h[32][96];
	int hl = invoice_csv_header(buf, sizeof buf);
	ck_assert_int_gt(hl, 0);
	ck_assert_int_eq(buf[hl - 1], '\n');
	int nh = csv_split(buf, h);
	ck_assert_int_eq(nh, 19);
	ck_assert_int_eq(invoice_csv_header(buf, 10), -1);

	struct invoice_contract c = terms(100000, 100);
	struct invoice_movement m =
	    bill(&c, GIB4 * Y, 0, 2025, 12, money_month_start(2025, 12), 42);
	int n = invoice_csv_row(&m, 0, "team \"a\",b", buf, sizeof buf);
	ck_assert_int_gt(n, 0);
	ck_assert_int_eq(buf[n - 1], '\n');
	ck_assert_ptr_null(memchr(buf, '\n', (size_t)n - 1));
	ck_assert_int_eq(csv_split(buf, f), nh);
	static const struct {
		const char *col, *want;
	} want[] = {
	    {"BillingAccountId", "100"},
	    {"SubAccountName", "team \"a\",b"},
	    {"BillingPeriodStart", "2025-12-01T00:00:00Z"},
	    {"BillingPeriodEnd", "2026-01-01T00:00:00Z"},
	    {"ChargePeriodStart", "2025-12-01T00:00:00Z"},
	    {"ResourceId", "contract-7"},
	    {"ResourceType", "memory"},
	    {"ChargeCategory", "Usage"},
	    {"ConsumedQuantity", "33067892736000"},
	    {"ConsumedUnit", "PageSecond"},
	    {"PricingQuantity", "1048576.000000"},
	    {"PricingUnit", "PageYear"},
	    {"ContractedUnitPrice", "0.000100000"},
	    {"BilledCost", "104.857600000"},
	    {"BillingCurrency", "USD"},
	    {"x_Role", "buyer"},
	};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		int k = 0;
		while (k < nh && strcmp(h[k], want[i].col))
			k++;
		ck_assert_msg(k < nh, "no column %s", want[i].col);
		ck_assert_msg(!strcmp(f[k], want[i].want), "%s: %s, not %s",
		              want[i].col, f[k], want[i].want);
	}
	/* the fee row: the exchange's credit, 1 % */
	n = invoice_csv_row(&m, 2, "", buf, sizeof buf);
	ck_assert_int_gt(n, 0);
	csv_split(buf, f);
	ck_assert_str_eq(f[7], "fee");
	ck_assert_str_eq(f[16], "-1.048576000");
	ck_assert_str_eq(f[18], "exchange");
	/* a row that does not fit is refused, not cut */
	ck_assert_int_eq(invoice_csv_row(&m, 0, "x", buf, 40), -1);
	ck_assert_str_eq(invoice_kind_name(INVOICE_ADJUSTMENT), "adjustment");
	ck_assert_str_eq(invoice_status_name(INVOICE_FINAL), "final");
}
END_TEST

/* invoice_market_check against the arithmetic it guards: at the largest
 * price_max it allows, a contract of max_pages for the whole time a market
 * allows bills (in one charge, or two: the carry makes them the same), and
 * at one nanodollar more invoice_charge refuses it; past the page-seconds
 * no price is allowed; the markets of the tests and the demo pass. */
START_TEST(market_limits_bound_what_a_contract_bills)
{
	char e[256];
	rx_time_ns from = money_month_start(2026, 12),
	           until = money_month_start(2200, 1); /* spot */
	int64_t secs = (until - from) / S;
	rx_pages pages = GIB4;
	ck_assert_int_eq(invoice_market_check(pages, 1000000000, from, until,
	                                      e, sizeof e),
	                 0);
	ck_assert_int_eq(invoice_market_check(INT64_C(1) << 30, 10000000,
	                                      from, until, e, sizeof e),
	                 0); /* the demo's spot market */
	int64_t top = money_price_bound(pages * secs);
	ck_assert_int_eq(
	    invoice_market_check(pages, top, from, until, e, sizeof e), 0);
	ck_assert_int_eq(
	    invoice_market_check(pages, top + 1, from, until, e, sizeof e), -1);
	char want[64];
	snprintf(want, sizeof want, "price_max may be at most %lld",
	         (long long)top);
	ck_assert_msg(strstr(e, want), "%s", e);
	/* the bound is the arithmetic's: whole at top, refused at top + 1 */
	struct invoice_contract c = terms(top, 250);
	struct invoice_due due = {.ps = pages * secs,
	                          .kind = INVOICE_USAGE,
	                          .year = 2026,
	                          .month = 12};
	struct invoice_movement m;
	ck_assert_msg(invoice_charge(&c, &due, from, until, 1, EXCH, &m, err,
	                             sizeof err) == 0,
	              "%s", err);
	struct invoice_contract two = terms(top, 250);
	due.ps = pages * secs / 2;
	ck_assert(invoice_charge(&two, &due, from, until, 1, EXCH, &m, err,
	                         sizeof err) == 0);
	due.ps = pages * secs - due.ps;
	ck_assert(invoice_charge(&two, &due, from, until, 2, EXCH, &m, err,
	                         sizeof err) == 0);
	ck_assert_int_eq(two.billed, c.billed);
	struct invoice_contract over = terms(top + 1, 0);
	due.ps = pages * secs;
	ck_assert_int_eq(invoice_charge(&over, &due, from, until, 1, EXCH, &m,
	                                err, sizeof err),
	                 -1);
	/* the page-seconds themselves */
	rx_pages most = INT64_MAX / secs;
	ck_assert_int_eq(invoice_market_check(most, 0, from, until, e,
	                                      sizeof e),
	                 0);
	ck_assert_int_eq(invoice_market_check(most + 1, 0, from, until, e,
	                                      sizeof e),
	                 -1);
	ck_assert_msg(strstr(e, "max_pages may be at most"), "%s", e);
	/* a market whose contracts cannot run any more bills nothing */
	ck_assert_int_eq(invoice_market_check(INT64_C(1) << 36,
	                                      INT64_C(1000000000000000), until,
	                                      from, e, sizeof e),
	                 0);
	ck_assert_int_eq(money_price_bound(0), INT64_MAX);
	ck_assert_int_eq(money_price_bound(-1), -1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("invoice");
	TCase *tc = tcase_create("invoice");
	tcase_add_test(tc, worked_examples_as_monthly_invoices);
	tcase_add_test(tc, twelve_months_sum_exactly_and_cents_carry);
	tcase_add_test(tc, worked_example_cents);
	tcase_add_test(tc, month_with_mid_way_recall);
	tcase_add_test(tc, breached_perm_settles_at_min_less_penalty);
	tcase_add_test(tc, perm_term_end_settles_full_term);
	tcase_add_test(tc, late_report_is_an_adjustment);
	tcase_add_test(tc, final_invoice_refuses_additions);
	tcase_add_test(tc, fee_postings_balance);
	tcase_add_test(tc, ledger_check_catches_errors);
	tcase_add_test(tc, csv_rows);
	tcase_add_test(tc, market_limits_bound_what_a_contract_bills);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
