/* invoice.c — movements, invoices, perm settlement, the ledger check and
 * the CSV export; see invoice.h and docs/money.md. */
#include "exchange/core/invoice.h"
#include "common/err.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef __int128 i128;

enum invoice_status invoice_status_at(int year, int month, rx_time_ns now,
                                      rx_time_ns grace)
{
	assert(grace >= 0);
	i128 final_at = (i128)money_month_start(year, month + 1) + grace;
	return now < final_at ? INVOICE_DRAFT : INVOICE_FINAL;
}

void invoice_open_month(int year, int month, rx_time_ns now, rx_time_ns grace,
                        int *out_year, int *out_month)
{
	if (invoice_status_at(year, month, now, grace) == INVOICE_DRAFT) {
		*out_year = year;
		*out_month = month;
		return;
	}
	/* Months still draft at now are those that end after now - grace;
	 * the earliest is the one containing now - grace, which is later
	 * than (year, month) because that one is final. */
	money_month_of(now - grace, out_year, out_month);
	assert(*out_year > year || (*out_year == year && *out_month > month));
}

void invoice_plan(rx_pagesec usage, rx_pagesec billed_ps, int year, int month,
                  rx_time_ns now, rx_time_ns grace, struct invoice_due *out)
{
	out->ps = usage - billed_ps;
	invoice_open_month(year, month, now, grace, &out->year, &out->month);
	if (out->year == year && out->month == month)
		out->kind = INVOICE_USAGE;
	else
		out->kind =
		    out->ps >= 0 ? INVOICE_ADJUSTMENT : INVOICE_CORRECTION;
}

/* Fills m with the movement of `amount` (and its `fee`) for contract c. */
static void build(const struct invoice_contract *c, enum invoice_kind kind,
                  int year, int month, rx_time_ns from, rx_time_ns to,
                  rx_pagesec ps, rx_price price, rx_ndollars amount,
                  rx_ndollars fee, int64_t movement_id,
                  int64_t exchange_account, struct invoice_movement *m)
{
	struct invoice_movement v = {
	    .movement_id = movement_id,
	    .contract_id = c->contract_id,
	    .kind = kind,
	    .year = year,
	    .month = month,
	    .charge_start = from,
	    .charge_end = to,
	    .page_seconds = ps,
	    .unit_price = price,
	    .amount = amount,
	    .fee = fee,
	};
	struct invoice_posting base = {.movement_id = movement_id,
	                               .contract_id = c->contract_id,
	                               .year = year,
	                               .month = month};
	v.p[0] = base;
	v.p[0].account = c->buyer;
	v.p[0].role = INVOICE_BUYER;
	v.p[0].amount = amount;
	v.p[1] = base;
	v.p[1].account = c->seller;
	v.p[1].role = INVOICE_SELLER;
	v.p[1].amount = -(amount - fee); /* |fee| <= |amount|: no overflow */
	v.n = 2;
	if (c->fee_bps > 0) {
		v.p[2] = base;
		v.p[2].account = exchange_account;
		v.p[2].role = INVOICE_EXCHANGE;
		v.p[2].amount = -fee;
		v.n = 3;
	}
	assert(v.p[0].amount + v.p[1].amount + (v.n == 3 ? v.p[2].amount : 0) ==
	       0);
	*m = v;
}

/* Takes the fee of `amount` and advances every total of c, or changes
 * nothing when a total would overflow. */
static int advance(struct invoice_contract *c, struct money_carry amount_carry,
                   rx_pagesec ps, rx_ndollars amount, rx_ndollars *fee,
                   char *err, size_t errlen)
{
	struct invoice_contract n = *c;
	n.amount_carry = amount_carry;
	if (money_fee(&n.fee_carry, amount, c->fee_bps, fee, err, errlen))
		return -1;
	if (!money_add(n.billed_ps, ps, &n.billed_ps) ||
	    !money_add(n.billed, amount, &n.billed) ||
	    !money_add(n.fees, *fee, &n.fees))
		return err_set(err, errlen,
		               "contract %lld's billing totals would overflow",
		               (long long)c->contract_id);
	*c = n;
	return 0;
}

int invoice_charge(struct invoice_contract *c, const struct invoice_due *due,
                   rx_time_ns charge_start, rx_time_ns charge_end,
                   int64_t movement_id, int64_t exchange_account,
                   struct invoice_movement *m, char *err, size_t errlen)
{
	if (c->settled)
		return err_set(
		    err, errlen,
		    "contract %lld is settled; late usage goes into a "
		    "new settlement, not a charge",
		    (long long)c->contract_id);
	if (c->buyer == c->seller)
		return err_set(err, errlen,
		               "contract %lld has account %lld on both sides",
		               (long long)c->contract_id, (long long)c->buyer);
	struct money_carry carry = c->amount_carry;
	rx_ndollars amount, fee;
	if (money_accrue(&carry, due->ps, c->price, &amount, err, errlen))
		return -1;
	struct invoice_contract before = *c;
	if (advance(c, carry, due->ps, amount, &fee, err, errlen))
		return -1;
	build(&before, due->kind, due->year, due->month, charge_start,
	      charge_end, due->ps, c->price, amount, fee, movement_id,
	      exchange_account, m);
	return 0;
}

int invoice_settle(struct invoice_contract *c, const struct contract *k,
                   rx_pagesec delivered_ps, rx_price spot_reference,
                   rx_time_ns now, rx_time_ns grace, int64_t movement_id,
                   int64_t exchange_account, rx_price *settle_price,
                   struct invoice_movement *m, char *err, size_t errlen)
{
	if (contract_rules_of(k->product)->settle != CONTRACT_SETTLE_TERM)
		return err_set(
		    err, errlen,
		    "%s contract %lld settles by its usage; there is "
		    "nothing to settle",
		    contract_product_name(k->product), (long long)k->id);
	if (k->id != c->contract_id)
		return err_set(err, errlen,
		               "billing state is for contract %lld, "
		               "not %lld",
		               (long long)c->contract_id, (long long)k->id);
	if (delivered_ps < 0 || spot_reference < 0)
		return err_set(
		    err, errlen,
		    "delivered usage and the spot reference cannot be "
		    "negative");
	if (k->ended_at <= 0)
		return err_set(
		    err, errlen,
		    "contract %lld has no end instant; it settles once "
		    "it has ended or breached",
		    (long long)k->id);
	/* The settlement belongs to the month the contract ended in, while
	 * that invoice is a draft; afterwards to the next open one. */
	int year, month;
	money_month_of(k->ended_at - 1, &year, &month);
	invoice_open_month(year, month, now, grace, &year, &month);
	rx_time_ns from = k->delivered_at, to = k->ended_at;
	struct money_carry carry = c->amount_carry;
	rx_pagesec ps;
	rx_price price;
	rx_ndollars amount;

	if (k->state == CONTRACT_ENDED && k->term_end > 0 &&
	    k->ended_at >= k->term_end && k->delivered_at > 0 &&
	    k->delivered_at < k->term_end) {
		/* Delivered to the end: the whole term at the full price. The
		 * contract timer ends it at the first tick at or after
		 * term_end, so ended_at is usually a little later; the term
		 * still ends at term_end. The top-up goes through the carry,
		 * so the total is exact. */
		to = k->term_end;
		i128 term_ps = (i128)k->pages *
		               ((i128)k->term_end - k->delivered_at) /
		               MONEY_NS_PER_S;
		if (term_ps > INT64_MAX)
			return err_set(
			    err, errlen,
			    "contract %lld's term usage does not fit "
			    "64 bits",
			    (long long)k->id);
		price = c->price;
		if (!money_sub((int64_t)term_ps, c->billed_ps, &ps))
			return err_set(err, errlen, "settlement overflows");
		if (money_accrue(&carry, ps, price, &amount, err, errlen))
			return -1;
	} else if (k->state == CONTRACT_BREACHED) {
		/* The lower of its price and the spot reference, less the
		 * market's penalty, on what was delivered. */
		price = c->price < spot_reference ? c->price : spot_reference;
		price =
		    price > k->breach_penalty ? price - k->breach_penalty : 0;
		rx_ndollars target;
		if (money_amount(delivered_ps, price, &target, err, errlen))
			return -1;
		if (!money_sub(target, c->billed, &amount))
			return err_set(err, errlen, "settlement overflows");
		ps = delivered_ps;
		/* billed_ps below counts the settled usage once: the usage
		 * already billed is re-priced, not billed again */
		if (!money_sub(ps, c->billed_ps, &ps))
			return err_set(err, errlen, "settlement overflows");
		carry = (struct money_carry){0};
		if (from == 0)
			from = to; /* never delivered: nothing was billed */
	} else {
		return err_set(
		    err, errlen,
		    "contract %lld is %s; a perm contract settles when "
		    "its term ends or it is breached",
		    (long long)k->id, contract_state_name(k->state));
	}
	struct invoice_contract before = *c;
	rx_ndollars fee;
	if (advance(c, carry, ps, amount, &fee, err, errlen))
		return -1;
	c->settled = true;
	*settle_price = price;
	build(&before, INVOICE_SETTLEMENT, year, month, from, to,
	      k->state == CONTRACT_BREACHED ? delivered_ps : ps, price, amount,
	      fee, movement_id, exchange_account, m);
	return 0;
}

int invoice_market_check(rx_pages max_pages, rx_price price_max,
                         rx_time_ns from, rx_time_ns until, char *err,
                         size_t errlen)
{
	if (max_pages <= 0 || price_max < 0)
		return err_set(err, errlen,
		               "max_pages must be positive and price_max not "
		               "negative");
	if (until <= from)
		return 0; /* no contract can run: nothing to bill */
	/* whole seconds, rounded up: usage is reported in page-seconds */
	int64_t secs = (until - from) / MONEY_NS_PER_S +
	               ((until - from) % MONEY_NS_PER_S != 0);
	int64_t most_pages = INT64_MAX / secs; /* page-seconds fit */
	if (max_pages <= most_pages &&
	    price_max <= money_price_bound(max_pages * secs))
		return 0;
	/* the most pages at price_max: page-seconds and amount both fit */
	int64_t at_price = most_pages;
	if (price_max > 0) {
		i128 p = (((i128)INT64_MAX + 1) * RX_SECONDS_PER_YEAR - 1) /
		         ((i128)secs * price_max);
		if (p < at_price)
			at_price = (int64_t)p;
	}
	if (max_pages > most_pages)
		return err_set(err, errlen,
		               "a contract of this market may run %lld s, and "
		               "max_pages %lld for that long is past the 64-bit "
		               "page-seconds of a contract; max_pages may be at "
		               "most %lld (at this price_max: %lld)",
		               (long long)secs, (long long)max_pages,
		               (long long)most_pages, (long long)at_price);
	return err_set(err, errlen,
	               "a contract of this market may run %lld s, and "
	               "max_pages %lld at price_max %lld would bill past the "
	               "64-bit nanodollar total of a contract; price_max may be "
	               "at most %lld with this max_pages (or max_pages at most "
	               "%lld at this price_max)",
	               (long long)secs, (long long)max_pages,
	               (long long)price_max,
	               (long long)money_price_bound(max_pages * secs),
	               (long long)at_price);
}

int invoice_add(struct invoice *inv, const struct invoice_posting *p, char *err,
                size_t errlen)
{
	if (inv->status == INVOICE_FINAL)
		return err_set(err, errlen,
		               "invoice %lld for %04d-%02d is final and cannot "
		               "change; post into the next open invoice",
		               (long long)inv->id, inv->year, inv->month);
	if (p->account != inv->account || p->year != inv->year ||
	    p->month != inv->month)
		return err_set(
		    err, errlen,
		    "posting for account %lld %04d-%02d does not belong "
		    "on invoice %lld (account %lld %04d-%02d)",
		    (long long)p->account, p->year, p->month,
		    (long long)inv->id, (long long)inv->account, inv->year,
		    inv->month);
	rx_ndollars total;
	if (!money_add(inv->total, p->amount, &total))
		return err_set(err, errlen,
		               "the invoice of account %lld for %04d-%02d "
		               "would pass the largest total (int64 n$)",
		               (long long)inv->account, inv->year, inv->month);
	inv->total = total;
	inv->lines++;
	return 0;
}

int invoice_finalize(struct invoice *inv, struct money_carry *carry,
                     rx_time_ns now, rx_time_ns grace, char *err, size_t errlen)
{
	if (inv->status == INVOICE_FINAL)
		return err_set(err, errlen, "invoice %lld is already final",
		               (long long)inv->id);
	if (invoice_status_at(inv->year, inv->month, now, grace) !=
	    INVOICE_FINAL)
		return err_set(
		    err, errlen,
		    "invoice %lld for %04d-%02d stays a draft until its "
		    "month and grace period are over",
		    (long long)inv->id, inv->year, inv->month);
	struct money_carry c = *carry;
	int64_t cents;
	if (money_to_cents(&c, inv->total, &cents, err, errlen))
		return -1;
	inv->cents_in = *carry;
	inv->cents_out = c;
	inv->payable_cents = cents;
	inv->status = INVOICE_FINAL;
	*carry = c;
	return 0;
}

void invoice_ledger_init(struct invoice_ledger *l)
{
	memset(l, 0, sizeof *l);
}

static int movement_done(const struct invoice_ledger *l, char *err,
                         size_t errlen)
{
	if (l->movement_sum != 0)
		return err_set(
		    err, errlen,
		    "movement %lld does not balance: its postings sum "
		    "to %lld n$",
		    (long long)l->movement, (long long)l->movement_sum);
	return 0;
}

int invoice_ledger_add(struct invoice_ledger *l,
                       const struct invoice_posting *p, char *err,
                       size_t errlen)
{
	if (l->postings == 0 || p->movement_id != l->movement) {
		if (l->postings && movement_done(l, err, errlen))
			return -1;
		if (l->postings && p->movement_id < l->movement)
			return err_set(
			    err, errlen,
			    "posting of movement %lld after movement "
			    "%lld; feed postings in movement order",
			    (long long)p->movement_id, (long long)l->movement);
		l->movement = p->movement_id;
		l->movement_sum = 0;
		l->movements++;
	}
	l->movement_sum += p->amount;
	l->total += p->amount;
	l->postings++;
	return 0;
}

int invoice_ledger_finish(struct invoice_ledger *l, char *err, size_t errlen)
{
	if (l->postings && movement_done(l, err, errlen))
		return -1;
	if (l->total != 0)
		return err_set(err, errlen,
		               "the ledger sums to %lld n$, not zero",
		               (long long)l->total);
	return 0;
}

int invoice_check_invoice(const struct invoice *inv,
                          const struct invoice_posting *p, size_t n, char *err,
                          size_t errlen)
{
	i128 sum = 0;
	for (size_t i = 0; i < n; i++) {
		if (p[i].account != inv->account || p[i].year != inv->year ||
		    p[i].month != inv->month)
			return err_set(
			    err, errlen,
			    "posting of movement %lld is not on invoice "
			    "%lld",
			    (long long)p[i].movement_id, (long long)inv->id);
		sum += p[i].amount;
	}
	if (sum != inv->total || (int64_t)n != inv->lines)
		return err_set(
		    err, errlen,
		    "invoice %lld says %lld n$ in %lld lines but its "
		    "postings sum to %lld n$ in %zu",
		    (long long)inv->id, (long long)inv->total,
		    (long long)inv->lines, (long long)sum, n);
	return 0;
}

/* ---- CSV ---- */

static const char *const csv_columns =
    "BillingAccountId,SubAccountName,BillingPeriodStart,BillingPeriodEnd,"
    "ChargePeriodStart,ChargePeriodEnd,ResourceId,ResourceType,"
    "ChargeCategory,ChargeClass,ChargeDescription,ConsumedQuantity,"
    "ConsumedUnit,PricingQuantity,PricingUnit,ContractedUnitPrice,"
    "BilledCost,BillingCurrency,x_Role\n";

int invoice_csv_header(char *buf, size_t len)
{
	size_t n = strlen(csv_columns);
	if (n + 1 > len)
		return -1;
	memcpy(buf, csv_columns, n + 1);
	return (int)n;
}

static void iso8601(rx_time_ns t, char out[32])
{
	int y, mo, d, s;
	money_civil_of(t < 0 ? 0 : t, &y, &mo, &d, &s);
	snprintf(out, 32, "%04d-%02d-%02dT%02d:%02d:%02dZ", y % 10000, mo, d,
	         s / 3600, s / 60 % 60, s % 60);
}

/* The team as one CSV field: quoted, inner quotes doubled, control
 * characters dropped (a name is no place for a line break). */
static void csv_quote(const char *s, char out[2 * INVOICE_TEAM_MAX + 3])
{
	size_t o = 0;
	out[o++] = '"';
	for (size_t i = 0; s && s[i] && i < INVOICE_TEAM_MAX; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch < 0x20 || ch == 0x7f)
			continue;
		if (ch == '"')
			out[o++] = '"';
		out[o++] = (char)ch;
	}
	out[o++] = '"';
	out[o] = 0;
}

int invoice_csv_row(const struct invoice_movement *m, int posting,
                    const char *team, char *buf, size_t len)
{
	assert(posting >= 0 && posting < m->n);
	const struct invoice_posting *p = &m->p[posting];
	static const char *category[INVOICE_KIND_COUNT_] = {
	    "Usage", "Usage", "Adjustment", "Usage"};
	static const char *klass[INVOICE_KIND_COUNT_] = {"", "Correction", "",
	                                                 "Correction"};
	static const char *descr[INVOICE_KIND_COUNT_] = {
	    "metered usage", "late usage of a final month", "perm settlement",
	    "correction of an earlier charge"};
	char bs[32], be[32], cs[32], ce[32], q[2 * INVOICE_TEAM_MAX + 3];
	char py[MONEY_TEXT_MAX], price[MONEY_TEXT_MAX], cost[MONEY_TEXT_MAX];
	iso8601(money_month_start(m->year, m->month), bs);
	iso8601(money_month_start(m->year, m->month + 1), be);
	iso8601(m->charge_start, cs);
	iso8601(m->charge_end, ce);
	csv_quote(team, q);
	money_format_page_years(m->page_seconds, py, sizeof py);
	money_format_exact(m->unit_price, price, sizeof price);
	money_format_exact(p->amount, cost, sizeof cost);
	int n = snprintf(
	    buf, len,
	    "%lld,%s,%s,%s,%s,%s,contract-%lld,%s,%s,%s,%s,%lld,"
	    "PageSecond,%s,PageYear,%s,%s,USD,%s\n",
	    (long long)p->account, q, bs, be, cs, ce, (long long)m->contract_id,
	    p->role == INVOICE_EXCHANGE ? "fee" : "memory", category[m->kind],
	    klass[m->kind], descr[m->kind], (long long)m->page_seconds, py,
	    price, cost, invoice_role_name(p->role));
	if (n < 0 || (size_t)n >= len)
		return -1;
	return n;
}

const char *invoice_kind_name(enum invoice_kind k)
{
	static const char *names[] = {"usage", "adjustment", "settlement",
	                              "correction"};
	return k >= 0 && k < INVOICE_KIND_COUNT_ ? names[k] : "unknown";
}

const char *invoice_role_name(enum invoice_role r)
{
	static const char *names[] = {"buyer", "seller", "exchange"};
	return r >= 0 && r <= INVOICE_EXCHANGE ? names[r] : "unknown";
}

const char *invoice_status_name(enum invoice_status s)
{
	return s == INVOICE_DRAFT   ? "draft"
	       : s == INVOICE_FINAL ? "final"
	                            : "unknown";
}
