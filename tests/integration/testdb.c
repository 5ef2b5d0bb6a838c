/* testdb.c — see testdb.h. */
#include "tests/integration/testdb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static PGconn *admin_connect(void)
{
	PGconn *c = PQconnectdb("dbname=postgres");
	if (PQstatus(c) != CONNECTION_OK) {
		fprintf(stderr,
		        "testdb: cannot reach the test PostgreSQL (%s); "
		        "run the tests through `make check`\n",
		        PQerrorMessage(c));
		exit(2);
	}
	return c;
}

const char *testdb_create(const char *name)
{
	static char conninfo[512];
	char sql[256];
	PGconn *c = admin_connect();
	PGresult *r;

	/* Names come from the tests themselves, never from outside. */
	snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS \"%s\" WITH (FORCE)",
	         name);
	PQclear(PQexec(c, sql));
	snprintf(sql, sizeof sql, "CREATE DATABASE \"%s\"", name);
	r = PQexec(c, sql);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		fprintf(stderr, "testdb: %s", PQerrorMessage(c));
		exit(2);
	}
	PQclear(r);
	PQfinish(c);
	snprintf(conninfo, sizeof conninfo, "dbname=%s", name);
	return conninfo;
}

PGconn *testdb_connect(const char *conninfo)
{
	PGconn *c = PQconnectdb(conninfo);
	if (PQstatus(c) != CONNECTION_OK) {
		fprintf(stderr, "testdb: %s", PQerrorMessage(c));
		exit(2);
	}
	PQclear(PQexec(c, "SET client_min_messages = warning"));
	return c;
}

long testdb_scalar(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	long v = 0;
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		fprintf(stderr, "testdb: %s: %s", sql, PQerrorMessage(c));
		exit(2);
	}
	if (PQntuples(r) > 0)
		v = strtol(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	return v;
}

long testdb_scalar_at(const char *conninfo, const char *sql)
{
	PGconn *c = testdb_connect(conninfo);
	long v = testdb_scalar(c, sql);
	PQfinish(c);
	return v;
}

void testdb_run(const char *conninfo, const char *sql)
{
	PGconn *c = testdb_connect(conninfo);
	PGresult *r = PQexec(c, sql);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		fprintf(stderr, "testdb: %s: %s", sql, PQerrorMessage(c));
		exit(2);
	}
	PQclear(r);
	PQfinish(c);
}
