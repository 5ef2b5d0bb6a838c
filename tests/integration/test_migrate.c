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

int main(void)
{
	Suite *s = suite_create("migrate");
	TCase *tc = tcase_create("migrate");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, applies_in_order_once);
	tcase_add_test(tc, failure_leaves_database_as_it_was);
	tcase_add_test(tc, changed_migration_is_refused);
	tcase_add_test(tc, embedded_schema_applies);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
