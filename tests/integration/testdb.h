/*
 * testdb.h — a fresh database per integration test.
 *
 * tests/run.sh starts one private PostgreSQL for the whole run and exports
 * PGHOST/PGPORT/PGUSER. Each test asks for its own database here, so tests
 * never see each other's rows and can run in any order.
 */
#ifndef RAMEX_TESTDB_H
#define RAMEX_TESTDB_H

#include <libpq-fe.h>

/* Drops and creates database `name`; returns its conninfo (static buffer).
 * Aborts the test run when PostgreSQL cannot be reached. */
const char *testdb_create(const char *name);

/* The same, with the schema in it: a copy of the migrated database that
 * tests/run.sh made once for the run (RAMEX_TEST_SCHEMA_DB, by `ramexd
 * migrate`), as ramexd finds it on every start after its first. Without
 * RAMEX_TEST_SCHEMA_DB it is created empty, and ramexd's first start
 * applies the migrations. Applying them to an empty database is
 * test_migrate's (and run.sh's own `ramexd migrate`): a copy saves each
 * ramexd of the integration suites their 19 transactions. */
const char *testdb_create_schema(const char *name);

/* Connects to the database made by testdb_create, aborting on failure. */
PGconn *testdb_connect(const char *conninfo);

/* Runs one SQL statement and returns the first column of the first row as
 * a long (0 when there are no rows); aborts on error. */
long testdb_scalar(PGconn *c, const char *sql);

/* The same on a connection of its own to `conninfo`, closed after. */
long testdb_scalar_at(const char *conninfo, const char *sql);

/* Runs one statement that returns no rows (DDL, INSERT, UPDATE) on a
 * connection of its own to `conninfo`; aborts on error. */
void testdb_run(const char *conninfo, const char *sql);

/* The run's PostgreSQL itself, for the tests that stop it under ramexd
 * (test_outage, test_shared): pg_ctl with `args` on its data directory
 * (PGHOST, PGBIN), as its owner; pg_ctl's exit status. */
int testdb_pg_ctl(const char *args);
/* Stops it at once (`-m immediate`, waiting until it is down); 0 or -1. */
int testdb_pg_stop_now(void);
/* Starts it again as scripts/pg.sh did, unless it runs; 0, or -1 (its
 * log is $PGHOST/log). */
int testdb_pg_start(void);

#endif
