/* test_migrate.c — migrations apply in order, once, and atomically. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exchange/migrate.h"
#include "tests/integration/testdb.h"

static const struct migration good[] = {
    {"0001_one", "CREATE TABLE t1 (x int);\nINSERT INTO t1 VALUES (1);"},
    {"0002_two", "CREATE TABLE t2 (y int);"},
};

/* The second statement fails, after the first has created a table. */
static const struct migration bad[] = {
    {"0003_bad", "CREATE TABLE t3 (z int);\nINSERT INTO nowhere VALUES (1);"},
    {"0004_after", "CREATE TABLE t4 (w int);"},
};

START_TEST(applies_in_order_once)
{
	char err[512];
	PGconn *c = testdb_connect(testdb_create("ramex_t_migrate_once"));

	ck_assert_int_eq(migrate_apply(c, good, 2, err, sizeof err), 2);
	ck_assert_int_eq(
	    testdb_scalar(c, "SELECT count(*) FROM schema_migrations"), 2);
	ck_assert_int_eq(migrate_apply(c, good, 2, err, sizeof err), 0);
	ck_assert_int_eq(testdb_scalar(c, "SELECT count(*) FROM t1"), 1);
	PQfinish(c);
}
END_TEST

START_TEST(failure_leaves_database_as_it_was)
{
	char err[512] = "";
	PGconn *c = testdb_connect(testdb_create("ramex_t_migrate_fail"));
	struct migration all[4] = {good[0], good[1], bad[0], bad[1]};

	ck_assert_int_eq(migrate_apply(c, all, 4, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "0003_bad") && strstr(err, "rolled back"),
	              "%s", err);
	ck_assert_int_eq(
	    testdb_scalar(c, "SELECT count(*) FROM schema_migrations"), 2);
	ck_assert_int_eq(testdb_scalar(c, "SELECT count(*) FROM pg_tables "
	                                  "WHERE tablename IN ('t3','t4')"),
	                 0);
	PQfinish(c);
}
END_TEST

START_TEST(changed_migration_is_refused)
{
	char err[512] = "";
	PGconn *c = testdb_connect(testdb_create("ramex_t_migrate_changed"));
	struct migration edited = {"0001_one", "CREATE TABLE t1 (x bigint);"};

	ck_assert_int_eq(migrate_apply(c, good, 1, err, sizeof err), 1);
	ck_assert_int_eq(migrate_apply(c, &edited, 1, err, sizeof err), -1);
	ck_assert_msg(strstr(err, "changed after it was applied"), "%s", err);
	PQfinish(c);
}
END_TEST

START_TEST(embedded_schema_applies)
{
	char err[512] = "";
	PGconn *c = testdb_connect(testdb_create("ramex_t_migrate_schema"));

	ck_assert_msg(migrate_apply(c, schema_migrations,
	                            schema_migrations_count, err,
	                            sizeof err) == schema_migrations_count,
	              "%s", err);
	ck_assert_int_eq(migrate_apply(c, schema_migrations,
	                               schema_migrations_count, err,
	                               sizeof err),
	                 0);
	PQfinish(c);
}
END_TEST

/* Applies the embedded migrations before the one numbered `num`; returns
 * how many (that one's index). */
static int apply_before(PGconn *c, const char *num)
{
	char err[512] = "";
	int k = 0;
	while (k < schema_migrations_count &&
	       strncmp(schema_migrations[k].name, num, 4) != 0)
		k++;
	ck_assert_int_lt(k, schema_migrations_count);
	ck_assert_msg(migrate_apply(c, schema_migrations, k, err,
	                            sizeof err) == k,
	              "%s", err);
	return k;
}

/* 0012 on a database with data from before it: the usage stored is
 * counted again by the rule of exchange/core/usage.c (only the delivered
 * span bills), and operator accounts and non-trader tokens lose their
 * team. The data is issue 25's: 256 pages delivered for 2.003 s, reported
 * with the 60 s clock slack on both sides. */
START_TEST(schema_0012_recounts_usage_and_clears_teams)
{
	char err[512] = "";
	PGconn *c = testdb_connect(testdb_create("ramex_t_migrate_0012"));
	int k = apply_before(c, "0012");
	static const char *before[] = {
	    "INSERT INTO teams (id, name) VALUES (1, 'blue')",
	    "INSERT INTO accounts (id, name, kind, team_id) VALUES (1, 'n1', "
	    "'node', 1), (2, 'op1', 'operator', 1)",
	    "INSERT INTO api_tokens (name, role, team_id, sha256, prefix) "
	    "VALUES ('adm', 'admin', 1, repeat('a', 64), 'rx_a'), ('tr', "
	    "'trader', 1, repeat('b', 64), 'rx_b')",
	    "INSERT INTO markets (id, name, product, tick, lot, min_pages, "
	    "max_pages, price_min, price_max, notice_period_s, "
	    "breach_penalty, delivery_deadline_s) VALUES (1, 'spot', 'spot', "
	    "1, 1, 1, 1000000, 0, 1000000000, 0, 0, 600)",
	    "INSERT INTO orders (id, market_id, account_id, side, tif, stp, "
	    "post_only, price, pages, remaining, filled, status, priority, "
	    "created_ns, updated_ns, placed_by) VALUES (1, 1, 2, 'buy', "
	    "'gtc', 'cancel_taker', false, 100000, 256, 0, 256, 'filled', 1, "
	    "1, 1, 't'), (2, 1, 1, 'sell', 'gtc', 'cancel_taker', false, "
	    "100000, 256, 0, 256, 'filled', 2, 1, 1, 't')",
	    "INSERT INTO trades (id, market_id, seq, taker_order_id, "
	    "maker_order_id, buyer_id, seller_id, taker_side, price, pages, "
	    "ts_ns) VALUES (10, 1, 1, 1, 2, 2, 1, 'buy', 100000, 256, 1)",
	    /* delivered at D = 1.8e18, ended 2.003 s later */
	    "INSERT INTO contracts (id, trade_id, market_id, buyer_id, "
	    "seller_id, delivery, pages, price, state, deliver_by, "
	    "notice_period_s, created_at, updated_at, created_ns, "
	    "deliver_by_ns, delivered_ns, ended_ns, changed_ns) VALUES (100, "
	    "10, 1, 2, 1, 'offline', 256, 100000, 'ended', now(), 0, now(), "
	    "now(), 1, 2, 1800000000000000000, 1800000002003000000, "
	    "1800000002003000000)",
	    /* [D - 60 s, D + 1 s) and [D + 1 s, E + 60 s), each claiming
	     * every second of its period */
	    "INSERT INTO usage_reports (node_id, epoch, seq, contract_id, "
	    "side, period_start_ns, period_end_ns, page_seconds, "
	    "kmod_page_seconds, kmod_pages, body_hash) VALUES (1, 1, 1, 100, "
	    "'seller', 1799999940000000000, 1800000001000000000, 15616, "
	    "15616, 256, 1), (1, 1, 2, 100, 'seller', 1800000001000000000, "
	    "1800000062003000000, 15872, 31488, 256, 2)",
	    "DELETE FROM billing_dirty",
	};
	for (size_t i = 0; i < sizeof before / sizeof before[0]; i++) {
		PGresult *b = PQexec(c, before[i]);
		ck_assert_msg(PQresultStatus(b) == PGRES_COMMAND_OK, "%s: %s",
		              before[i], PQerrorMessage(c));
		PQclear(b);
	}
	ck_assert_msg(migrate_apply(c, schema_migrations,
	                            schema_migrations_count, err,
	                            sizeof err) == schema_migrations_count - k,
	              "%s", err);
	/* each report bills its delivered second(s), floor(256 x 2.003) in
	 * all, and the contract is billed again */
	ck_assert_int_eq(testdb_scalar(c, "SELECT billable_ps FROM "
	                                  "usage_reports WHERE seq = 1"),
	                 256);
	ck_assert_int_eq(testdb_scalar(c, "SELECT billable_ps FROM "
	                                  "usage_reports WHERE seq = 2"),
	                 256);
	ck_assert_int_eq(testdb_scalar(c, "SELECT delivered_ns FROM "
	                                  "usage_reports WHERE seq = 2"),
	                 1003000000);
	ck_assert_int_eq(
	    testdb_scalar(c, "SELECT count(*) FROM usage_totals WHERE "
	                     "contract_id = 100 AND side = 'seller' AND "
	                     "reported_ps = 31488 AND delivered_ns = "
	                     "2003000000 AND billable_ps = 512"),
	    1);
	ck_assert_int_eq(testdb_scalar(c, "SELECT count(*) FROM billing_dirty "
	                                  "WHERE contract_id = 100"),
	                 1);
	/* teams: the node's and the trader's stay, the others are gone */
	ck_assert_int_eq(testdb_scalar(c, "SELECT count(*) FROM accounts "
	                                  "WHERE team_id IS NOT NULL"),
	                 1);
	ck_assert_int_eq(testdb_scalar(c, "SELECT count(*) FROM api_tokens "
	                                  "WHERE team_id IS NOT NULL AND role "
	                                  "= 'trader'"),
	                 1);
	ck_assert_int_eq(testdb_scalar(c, "SELECT count(*) FROM api_tokens "
	                                  "WHERE team_id IS NOT NULL"),
	                 1);
	PGresult *r = PQexec(c, "UPDATE accounts SET team_id = 1 WHERE id = 2");
	ck_assert_str_eq(PQresultErrorField(r, PG_DIAG_SQLSTATE), "23514");
	PQclear(r);
	/* the database holds the invariant too: one page-second more than
	 * 256 pages x 2.003 s is refused */
	r = PQexec(c, "UPDATE usage_totals SET billable_ps = 513");
	ck_assert_str_eq(PQresultErrorField(r, PG_DIAG_SQLSTATE), "23514");
	PQclear(r);
	r = PQexec(c, "INSERT INTO usage_reports (node_id, epoch, seq, "
	              "contract_id, side, period_start_ns, period_end_ns, "
	              "page_seconds, kmod_page_seconds, kmod_pages, body_hash) "
	              "VALUES (1, 1, 3, 100, 'seller', 1, 2, 0, 0, 0, 3)");
	ck_assert_str_eq(PQresultErrorField(r, PG_DIAG_SQLSTATE), "23502");
	PQclear(r);
	PQfinish(c);
}
END_TEST

/* The first column of the first row of sql, as text, into out. */
static void text_of(PGconn *c, const char *sql, char *out, size_t len)
{
	PGresult *r = PQexec(c, sql);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s: %s", sql,
	              PQerrorMessage(c));
	snprintf(out, len, "%s", PQntuples(r) ? PQgetvalue(r, 0, 0) : "");
	PQclear(r);
}

static void run_ok(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK ||
	                  PQresultStatus(r) == PGRES_TUPLES_OK,
	              "%s: %s", sql, PQerrorMessage(c));
	PQclear(r);
}

/* The SQLSTATE of a statement that must fail. */
static void run_fails(PGconn *c, const char *sql, const char *state)
{
	PGresult *r = PQexec(c, sql);
	const char *st = PQresultErrorField(r, PG_DIAG_SQLSTATE);
	ck_assert_msg(st && strcmp(st, state) == 0, "%s: %s, not %s", sql,
	              st ? st : "success", state);
	PQclear(r);
}

/* Every row of the three tables and what billing reads of them: a
 * fingerprint of the rows (in key order) and of the sums by month. */
static const char *const fingerprints[] = {
    "SELECT count(*) || ':' || md5(string_agg(t::text, '|' ORDER BY id)) "
    "FROM trades t",
    "SELECT count(*) || ':' || md5(string_agg(t::text, '|' ORDER BY "
    "node_id, epoch, seq)) FROM usage_reports t",
    "SELECT count(*) || ':' || md5(string_agg(t::text, '|' ORDER BY id)) "
    "FROM postings t",
    /* what the billing summary and invoices add up */
    "SELECT string_agg(format('%s-%s/%s:%s', year, month, account_id, s), "
    "',' ORDER BY year, month, account_id) FROM (SELECT year, month, "
    "account_id, sum(amount) AS s FROM postings GROUP BY 1, 2, 3) x",
    /* what the billing job sums of the reports, per contract and month */
    "SELECT string_agg(format('%s/%s:%s', contract_id, m, s), ',' ORDER BY "
    "contract_id, m) FROM (SELECT contract_id, period_start_ns / "
    "2592000000000000 AS m, sum(billable_ps) AS s FROM usage_reports GROUP "
    "BY 1, 2) x",
    /* the market history: volume per month */
    "SELECT string_agg(format('%s:%s:%s', m, n, v), ',' ORDER BY m) FROM "
    "(SELECT ts_ns / 2592000000000000 AS m, count(*) AS n, sum(pages * "
    "price) AS v FROM trades GROUP BY 1) x",
};
#define NFP (sizeof fingerprints / sizeof fingerprints[0])

/* 0015 on a database with five months of history, and rows from 1970 and
 * from beyond the months made ahead: every row kept, every sum the same,
 * the ledger still balanced and append-only; new rows land in their
 * month's partition, and a month made later takes its rows out of the
 * default partition. */
/* 0019 on tokens from before it: a finance or admin token that was given
 * an account loses it (nothing scoped by it), an operator's keeps its own,
 * and the database refuses another such token from then on. */
START_TEST(schema_0019_clears_accounts_of_non_operator_tokens)
{
	char err[512] = "";
	PGconn *c = testdb_connect(testdb_create("ramex_t_migrate_0019"));
	int k = apply_before(c, "0019");
	run_ok(c, "INSERT INTO accounts (id, name, kind) VALUES (1, 'op1', "
	          "'operator')");
	run_ok(c, "INSERT INTO api_tokens (name, role, account_id, sha256, "
	          "prefix) VALUES ('fin', 'finance', 1, repeat('a', 64), "
	          "'rx_a'), ('adm', 'admin', 1, repeat('b', 64), 'rx_b'), "
	          "('op', 'operator', 1, repeat('c', 64), 'rx_c')");
	ck_assert_msg(migrate_apply(c, schema_migrations + k, 1, err,
	                            sizeof err) == 1,
	              "%s", err);
	ck_assert_int_eq(testdb_scalar(c, "SELECT count(*) FROM api_tokens "
	                                  "WHERE account_id IS NOT NULL"),
	                 1);
	ck_assert_int_eq(testdb_scalar(c, "SELECT account_id FROM api_tokens "
	                                  "WHERE role = 'operator'"),
	                 1);
	run_fails(c,
	          "INSERT INTO api_tokens (name, role, account_id, sha256, "
	          "prefix) VALUES ('f2', 'finance', 1, repeat('d', 64), 'rx_d')",
	          "23514");
	PQfinish(c);
}
END_TEST

START_TEST(schema_0015_partitions_history_keeping_every_row)
{
	char err[512] = "";
	PGconn *c = testdb_connect(testdb_create("ramex_t_migrate_0015"));
	int k = apply_before(c, "0015");
	run_ok(c, "SET TIME ZONE 'UTC'");
	static const char *seed[] = {
	    "INSERT INTO teams (id, name) VALUES (1, 'blue')",
	    "INSERT INTO accounts (id, name, kind, team_id) VALUES (1, 'n1', "
	    "'node', 1), (2, 'n2', 'node', 1), (3, 'op', 'operator', NULL), "
	    "(4, 'exchange', 'exchange', NULL)",
	    "INSERT INTO markets (id, name, product, tick, lot, min_pages, "
	    "max_pages, price_min, price_max, notice_period_s, "
	    "breach_penalty, delivery_deadline_s) VALUES (1, 'spot', 'spot', "
	    "1, 1, 1, 1000000, 0, 1000000000, 0, 0, 600)",
	    /* the first of this month and four months before, in ns */
	    "CREATE TEMP TABLE m0 AS SELECT (extract(epoch FROM "
	    "date_trunc('month', now()) - interval '4 months') * "
	    "1e9)::bigint AS ns",
	    "INSERT INTO trades (id, market_id, seq, taker_order_id, "
	    "maker_order_id, buyer_id, seller_id, taker_side, price, pages, "
	    "ts_ns, maker_remaining) SELECT g, 1, g, 2 * g, 2 * g - 1, 3, 1 + "
	    "g % 2, 'buy', 100000 + g, 256 * (1 + g % 5), m0.ns + g * "
	    "6500000000000, 0 FROM m0, generate_series(1, 2000) g",
	    /* 1970, and ten months ahead: no partition of their own */
	    "INSERT INTO trades (id, market_id, seq, taker_order_id, "
	    "maker_order_id, buyer_id, seller_id, taker_side, price, pages, "
	    "ts_ns) VALUES (2001, 1, 2001, 1, 2, 3, 1, 'sell', 5, 256, 1), "
	    "(2002, 1, 2002, 3, 4, 3, 2, 'sell', 7, 512, (extract(epoch FROM "
	    "date_trunc('month', now()) + interval '10 months 3 days') * "
	    "1e9)::bigint)",
	    "INSERT INTO contracts (id, trade_id, market_id, buyer_id, "
	    "seller_id, delivery, pages, price, state, deliver_by, "
	    "notice_period_s, created_at, updated_at, delivered_ns) SELECT g, "
	    "g, 1, 3, 1 + g % 2, 'offline', 256, 100000, 'active', now(), 0, "
	    "now(), now(), m0.ns FROM m0, generate_series(1, 40) g",
	    "INSERT INTO usage_reports (node_id, epoch, seq, contract_id, "
	    "side, period_start_ns, period_end_ns, page_seconds, "
	    "kmod_page_seconds, kmod_pages, body_hash, delivered_ns, "
	    "billable_ps) SELECT 1 + g % 2, 1, g, 1 + g % 40, 'seller', m0.ns "
	    "+ g * 4300000000000, m0.ns + g * 4300000000000 + 60000000000, "
	    "15360, 15360, 256, g, 60000000000, 15360 - g % 7 FROM m0, "
	    "generate_series(1, 3000) g",
	    "INSERT INTO usage_reports (node_id, epoch, seq, contract_id, "
	    "side, period_start_ns, period_end_ns, page_seconds, "
	    "kmod_page_seconds, kmod_pages, body_hash, delivered_ns, "
	    "billable_ps) VALUES (1, 2, 1, 1, 'seller', 1000, 2000, 0, 0, 0, 1, "
	    "0, 0)",
	    /* the ledger: per contract and month, one movement, its postings
	     * summing to zero, on the drafts of its accounts' months */
	    "CREATE TEMP TABLE months AS SELECT extract(year FROM d)::int AS "
	    "y, extract(month FROM d)::int AS m FROM generate_series("
	    "date_trunc('month', now()) - interval '4 months', "
	    "date_trunc('month', now()), interval '1 month') d",
	    "INSERT INTO invoices (account_id, year, month) SELECT a, y, m FROM "
	    "months, generate_series(1, 4) a",
	    "INSERT INTO movements (contract_id, kind, year, month, "
	    "charge_start_ns, charge_end_ns, page_seconds, unit_price, amount, "
	    "fee) SELECT g, 'usage', y, m, 0, 1, 1000 * g, 100000, 100000 + g * "
	    "7 + m, (100000 + g * 7 + m) / 10 FROM months, generate_series(1, "
	    "40) g",
	    "INSERT INTO postings (movement_id, invoice_id, account_id, "
	    "contract_id, year, month, role, amount) SELECT v.id, i.id, "
	    "i.account_id, v.contract_id, v.year, v.month, p.role, p.amount "
	    "FROM movements v CROSS JOIN LATERAL (VALUES ('buyer', 3, "
	    "v.amount), ('seller', 1 + v.contract_id % 2, v.fee - v.amount), "
	    "('exchange', 4, -v.fee)) p (role, acct, amount) JOIN invoices i "
	    "ON i.account_id = p.acct AND i.year = v.year AND i.month = "
	    "v.month",
	    "UPDATE invoices i SET total = s.t, lines = s.n FROM (SELECT "
	    "invoice_id, sum(amount) AS t, count(*) AS n FROM postings GROUP "
	    "BY 1) s WHERE s.invoice_id = i.id",
	};
	for (size_t i = 0; i < sizeof seed / sizeof seed[0]; i++)
		run_ok(c, seed[i]);
	char before[NFP][256], after[256];
	for (size_t i = 0; i < NFP; i++)
		text_of(c, fingerprints[i], before[i], sizeof before[i]);
	ck_assert_int_eq(testdb_scalar(c, "SELECT count(*) FROM postings"),
	                 5 * 40 * 3);

	ck_assert_msg(migrate_apply(c, schema_migrations,
	                            schema_migrations_count, err,
	                            sizeof err) == schema_migrations_count - k,
	              "%s", err);
	ck_assert_int_eq(testdb_scalar(c, "SELECT count(*) FROM pg_class WHERE "
	                                  "relkind = 'p' AND relname IN "
	                                  "('trades', 'usage_reports', "
	                                  "'postings')"),
	                 3);
	for (size_t i = 0; i < NFP; i++) {
		text_of(c, fingerprints[i], after, sizeof after);
		ck_assert_msg(strcmp(before[i], after) == 0,
		              "%s: %s before, %s after", fingerprints[i],
		              before[i], after);
	}
	/* the ledger balances: in all, per movement, per invoice */
	ck_assert_int_eq(testdb_scalar(c, "SELECT sum(amount) FROM postings"),
	                 0);
	ck_assert_int_eq(testdb_scalar(c, "SELECT count(*) FROM (SELECT "
	                                  "movement_id FROM postings GROUP BY "
	                                  "1 HAVING sum(amount) <> 0) x"),
	                 0);
	ck_assert_int_eq(testdb_scalar(c, "SELECT count(*) FROM invoices i "
	                                  "WHERE total <> (SELECT "
	                                  "coalesce(sum(amount), 0) FROM "
	                                  "postings p WHERE p.invoice_id = "
	                                  "i.id)"),
	                 0);
	/* each month's rows in its partition, the rest in the default */
	ck_assert_int_eq(
	    testdb_scalar(c, "SELECT count(*) FROM trades WHERE "
	                     "tableoid::regclass::text <> format('trades_y%sm%s', "
	                     "extract(year FROM to_timestamp(ts_ns / 1e9)), "
	                     "lpad(extract(month FROM to_timestamp(ts_ns / "
	                     "1e9))::text, 2, '0'))"),
	    2);
	ck_assert_int_eq(testdb_scalar(c, "SELECT count(*) FROM trades_default"),
	                 2);
	ck_assert_int_eq(
	    testdb_scalar(c, "SELECT count(*) FROM usage_reports_default"), 1);
	ck_assert_int_eq(testdb_scalar(c, "SELECT count(*) FROM postings_default"),
	                 0);
	ck_assert_int_eq(
	    testdb_scalar(c, "SELECT count(*) FROM postings WHERE "
	                     "tableoid::regclass::text <> format('postings_y%sm%s', "
	                     "year, lpad(month::text, 2, '0'))"),
	    0);
	/* a new row of a month ahead lands in that month's partition */
	run_ok(c, "INSERT INTO trades (id, market_id, seq, taker_order_id, "
	          "maker_order_id, buyer_id, seller_id, taker_side, price, "
	          "pages, ts_ns) VALUES (3000, 1, 3000, 5, 6, 3, 1, 'buy', 9, "
	          "256, (extract(epoch FROM date_trunc('month', now()) + "
	          "interval '2 months 1 day') * 1e9)::bigint)");
	ck_assert_int_eq(
	    testdb_scalar(c, "SELECT count(*) FROM trades WHERE id = 3000 AND "
	                     "tableoid::regclass::text = format('trades_y%sm%s', "
	                     "extract(year FROM now() + interval '2 months 1 "
	                     "day'), to_char(date_trunc('month', now()) + "
	                     "interval '2 months', 'MM'))"),
	    1);
	/* a month made later takes its rows from the default partition */
	ck_assert_int_eq(
	    testdb_scalar(c, "SELECT ramex_history_month(extract(year FROM d)::int, "
	                     "extract(month FROM d)::int) FROM (SELECT "
	                     "date_trunc('month', now()) + interval '10 months' "
	                     "AS d) x"),
	    3);
	ck_assert_int_eq(testdb_scalar(c, "SELECT count(*) FROM trades_default"),
	                 1);
	ck_assert_int_eq(testdb_scalar(c, "SELECT count(*) FROM trades WHERE "
	                                  "id = 2002"),
	                 1);
	ck_assert_int_eq(testdb_scalar(c, "SELECT ramex_history_ahead(3)"), 0);
	/* the keys and triggers hold on the partitioned tables */
	run_fails(c, "DELETE FROM postings WHERE id = 1", "P0001");
	run_fails(c, "UPDATE postings SET amount = 0 WHERE id = 1", "P0001");
	run_fails(c, "TRUNCATE postings", "P0001");
	run_fails(c,
	          "INSERT INTO postings (movement_id, invoice_id, account_id, "
	          "contract_id, year, month, role, amount) VALUES (1, 999999, "
	          "3, 1, 2026, 1, 'buyer', 5)",
	          "P0001");
	run_fails(c,
	          "INSERT INTO trades (id, market_id, seq, taker_order_id, "
	          "maker_order_id, buyer_id, seller_id, taker_side, price, "
	          "pages, ts_ns) SELECT id, market_id, seq, taker_order_id, "
	          "maker_order_id, buyer_id, seller_id, taker_side, price, "
	          "pages, ts_ns FROM trades WHERE id = 7",
	          "23505");
	run_ok(c, "DELETE FROM billing_dirty");
	run_ok(c, "INSERT INTO usage_reports (node_id, epoch, seq, contract_id, "
	          "side, period_start_ns, period_end_ns, page_seconds, "
	          "kmod_page_seconds, kmod_pages, body_hash, delivered_ns, "
	          "billable_ps) VALUES (1, 3, 1, 7, 'seller', (extract(epoch "
	          "FROM now()) * 1e9)::bigint, (extract(epoch FROM now()) * "
	          "1e9)::bigint + 1000, 0, 0, 0, 1, 0, 0)");
	ck_assert_int_eq(testdb_scalar(c, "SELECT count(*) FROM billing_dirty "
	                                  "WHERE contract_id = 7"),
	                 1);
	/* postings_id_seq goes on past the copied ids */
	ck_assert_int_gt(testdb_scalar(c, "SELECT nextval('postings_id_seq')"),
	                 600);
	PQfinish(c);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("migrate");
	TCase *tc = tcase_create("migrate");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, applies_in_order_once);
	tcase_add_test(tc, failure_leaves_database_as_it_was);
	tcase_add_test(tc, changed_migration_is_refused);
	tcase_add_test(tc, embedded_schema_applies);
	tcase_add_test(tc, schema_0012_recounts_usage_and_clears_teams);
	tcase_add_test(tc, schema_0015_partitions_history_keeping_every_row);
	tcase_add_test(tc, schema_0019_clears_accounts_of_non_operator_tokens);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
