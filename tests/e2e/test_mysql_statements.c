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
 * (reserve, read), counted by the server. */
Test(mysql_statements, per_request)
{
	harness h;
	mariadb m;
	char key[64], rest[1000], my[600];
	long long e0, e1, e2, p0, p2;
	call c;

	/* global counters: this server must serve this test alone */
	cr_assert_eq(mariadb_start(&m), 0);
	mariadb_conf_tcp(&m, my, sizeof(my));
	snprintf(rest, sizeof(rest), "[idempotency]\nstore = mysql\n%s"
	    "pool-size = 1\n", my);
	cr_assert_eq(harness_start(&h, "threads = 1", rest), 0);
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
	cr_expect_eq(e1 - e0, 2, "a first execution took %lld statements",
	    e1 - e0);
	cr_expect_eq(e2 - e1, 2, "a replay took %lld statements", e2 - e1);
	cr_expect_eq(p2 - p0, 0, "statements were prepared again");
	harness_stop(&h);
	mariadb_destroy(&m);
}

