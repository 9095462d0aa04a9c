/*
 * test_mysql_statements.c - how many statements a request costs the
 * database, read from the server's global counters, so with a MariaDB of
 * its own that serves nothing else.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "calls.h"
#include "harness.h"
#include "mariadb.h"

/* A first execution costs 2 statements (reserve, commit), a replay 2
 * (reserve, read), counted by the server; the replays after it are
 * answered from the replay cache: none. */
Test(mysql_statements, per_request)
{
	harness h;
	mariadb m;
	char key[64];
	long long e0, e1, e2, e3, p0, p2, q1, q2, q3;
	call c, d;

	/* global counters: this server must serve this test alone */
	cr_assert_eq(mariadb_start(&m), 0);
	cr_assert_eq(harness_start(&h, &(harness_opts){ .server = "threads = 1",
	    .mysql_tcp = 1, .db = &m, .rest = "pool-size = 1\n" }), 0);
	/* the first request connects and prepares */
	snprintf(key, sizeof(key), "warm");
	call_one(h.addr, "/testkit/echo", key, NULL);
	snprintf(key, sizeof(key), "rt");
	p0 = mariadb_status(&m, "Com_stmt_prepare");
	e0 = mariadb_status(&m, "Com_stmt_execute");
	c = call_one(h.addr, "/testkit/echo", key, NULL);
	cr_expect_eq(c.status, 201);
	e1 = mariadb_status(&m, "Com_stmt_execute");
	c = call_one(h.addr, "/testkit/echo", key, NULL);
	cr_expect_str_eq(c.replayed, "true");
	e2 = mariadb_status(&m, "Com_stmt_execute");
	p2 = mariadb_status(&m, "Com_stmt_prepare");
	/* Questions counts every statement, text ones too, and those of
	 * reading it: the cost of reading it is q2 - q1 */
	q1 = mariadb_status(&m, "Questions");
	q2 = mariadb_status(&m, "Questions");
	d = call_one(h.addr, "/testkit/echo", key, NULL);
	cr_expect_str_eq(d.replayed, "true");
	q3 = mariadb_status(&m, "Questions");
	e3 = mariadb_status(&m, "Com_stmt_execute");
	cr_expect_eq(e1 - e0, 2, "a first execution took %lld statements",
	    e1 - e0);
	cr_expect_eq(e2 - e1, 2, "a replay took %lld statements", e2 - e1);
	cr_expect_eq(e3 - e2, 0, "a cached replay took %lld statements",
	    e3 - e2);
	cr_expect_eq(q3 - q2, q2 - q1, "a cached replay took %lld questions",
	    (q3 - q2) - (q2 - q1));
	cr_expect_eq(p2 - p0, 0, "statements were prepared again");
	/* the same answer, whichever way it came */
	cr_expect_eq(c.status, d.status);
	cr_expect_str_eq(c.body_out, d.body_out);
	cr_expect_str_eq(c.exec, d.exec);
	cr_expect_str_eq(c.location, d.location);
	harness_stop(&h);
	mariadb_destroy(&m);
}


/* A transactional first execution (DESIGN.md 2.7) costs the reservation,
 * the handler's own statement, the record's UPDATE and one COMMIT: one
 * durable commit.  A replay: the reservation, the read, a ROLLBACK that
 * ends the transaction the INSERT opened. */
Test(mysql_statements, per_transactional_request)
{
	harness h;
	mariadb m;
	long long e0, e1, e2, e3, c0, c1, c2, r0, r1, r2, r3;
	call c;

	cr_assert_eq(mariadb_start(&m), 0);
	cr_assert_eq(harness_start(&h, &(harness_opts){ .server = "threads = 1",
	    .mysql_tcp = 1, .db = &m, .rest = "pool-size = 1\n" }), 0);
	/* the first request connects, prepares and turns autocommit off */
	call_one(h.addr, "/testkit/tx/201", "warm", NULL);
	e0 = mariadb_status(&m, "Com_stmt_execute");
	c0 = mariadb_status(&m, "Com_commit");
	r0 = mariadb_status(&m, "Com_rollback");
	c = call_one(h.addr, "/testkit/tx/201", "tx-rt", NULL);
	cr_expect_eq(c.status, 201);
	e1 = mariadb_status(&m, "Com_stmt_execute");
	c1 = mariadb_status(&m, "Com_commit");
	r1 = mariadb_status(&m, "Com_rollback");
	c = call_one(h.addr, "/testkit/tx/201", "tx-rt", NULL);
	cr_expect_str_eq(c.replayed, "true");
	e2 = mariadb_status(&m, "Com_stmt_execute");
	c2 = mariadb_status(&m, "Com_commit");
	r2 = mariadb_status(&m, "Com_rollback");
	cr_expect_eq(e1 - e0, 3, "a first execution took %lld statements",
	    e1 - e0);
	cr_expect_eq(c1 - c0, 1, "a first execution took %lld commits",
	    c1 - c0);
	cr_expect_eq(r1 - r0, 0);
	cr_expect_eq(e2 - e1, 2, "a replay took %lld statements", e2 - e1);
	cr_expect_eq(c2 - c1, 0);
	cr_expect_eq(r2 - r1, 1, "a replay took %lld rollbacks", r2 - r1);
	/* a cached replay opens no transaction */
	c = call_one(h.addr, "/testkit/tx/201", "tx-rt", NULL);
	cr_expect_str_eq(c.replayed, "true");
	e3 = mariadb_status(&m, "Com_stmt_execute");
	r3 = mariadb_status(&m, "Com_rollback");
	cr_expect_eq(e3 - e2, 0, "a cached replay took %lld statements",
	    e3 - e2);
	cr_expect_eq(r3 - r2, 0);
	harness_stop(&h);
	mariadb_destroy(&m);
}
