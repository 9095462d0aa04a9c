/*
 * test_mysql_outage.c - the database goes away under a running idemfcgi and
 * comes back: 503 and no execution while it is away, normal service after,
 * without restarting idemfcgi.  Its own MariaDB, since it stops it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>

#include <criterion/criterion.h>

#include "calls.h"
#include "harness.h"
#include "mariadb.h"

Test(mysql_outage, stopped_then_started)
{
	mariadb db;
	harness h;
	char rest[1000], my[600];
	call c;
	int i;

	cr_assert_eq(mariadb_start(&db), 0);
	mariadb_conf(&db, my, sizeof(my));
	snprintf(rest, sizeof(rest), "[idempotency]\nstore = mysql\n%s", my);
	cr_assert_eq(harness_start(&h, "threads = 4", rest), 0);
	c = call_one(h.addr, "/testkit/echo", "before", NULL);
	cr_expect_eq(c.status, 201);

	mariadb_stop(&db);
	for (i = 0; i < 3; i++) {
		c = call_one(h.addr, "/testkit/echo", "during", NULL);
		cr_expect_eq(c.status, 503);
		cr_expect_str_eq(c.code, "IDEMPOTENCY_STORE_UNAVAILABLE");
	}
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", "during"), 0);

	cr_assert_eq(mariadb_restart(&db), 0);
	c = call_one(h.addr, "/testkit/echo", "during", NULL);
	cr_expect_eq(c.status, 201, "after the restart: %d %s", c.status,
	    c.body_out);
	c = call_one(h.addr, "/testkit/echo", "before", NULL);
	cr_expect_str_eq(c.replayed, "true");
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", "during"), 1);
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", "before"), 1);

	/* killed, not stopped: the same */
	mariadb_kill(&db);
	c = call_one(h.addr, "/testkit/echo", "killed", NULL);
	cr_expect_eq(c.status, 503);
	cr_assert_eq(mariadb_restart(&db), 0);
	c = call_one(h.addr, "/testkit/echo", "killed", NULL);
	cr_expect_eq(c.status, 201);
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", "killed"), 1);
	cr_expect_eq(kill(h.pid, 0), 0, "idemfcgi died");
	harness_stop(&h);
	mariadb_destroy(&db);
}
