/* test_migrate.c — migrations apply in order, once, and atomically. */
#include <check.h>
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

/* 0012 on a database with data from before it: the usage stored is
 * counted again by the rule of exchange/core/usage.c (only the delivered
 * span bills), and operator accounts and non-trader tokens lose their
 * team. The data is issue 25's: 256 pages delivered for 2.003 s, reported
 * with the 60 s clock slack on both sides. */
START_TEST(schema_0012_recounts_usage_and_clears_teams)
{
	char err[512] = "";
	PGconn *c = testdb_connect(testdb_create("ramex_t_migrate_0012"));
	int k = 0;
	while (k < schema_migrations_count &&
	       strncmp(schema_migrations[k].name, "0012", 4) != 0)
		k++;
	ck_assert_int_lt(k, schema_migrations_count);
	ck_assert_msg(migrate_apply(c, schema_migrations, k, err,
	                            sizeof err) == k,
	              "%s", err);
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
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
