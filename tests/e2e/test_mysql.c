/*
 * test_mysql.c - idemfcgi with the MySQL store, end to end: one private
 * MariaDB for the program, one or two real idemfcgi instances sharing it,
 * executions counted in one shared testkit log.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "calls.h"
#include "harness.h"
#include "mariadb.h"

/* Starts an instance on the shared MariaDB with server_extra under
 * [server], idem under [idempotency]; log NULL: its own testkit log.  The
 * [mysql] pool-size follows the threads of server_extra. */
static void
start_node(harness *h, const char *server, const char *idem, const char *log)
{
	char pool[32];
	const char *threads = server != NULL ? strstr(server, "threads = ") :
	    NULL;
	mariadb m;

	cr_assert_eq(mariadb_from_env(&m), 0);
	snprintf(pool, sizeof(pool), "pool-size = %d\n",
	    threads != NULL ? atoi(threads + 10) : 8);
	cr_assert_eq(harness_start(h, &(harness_opts){ .server = server,
	    .idem = idem, .mysql = 1, .db = &m, .rest = pool,
	    .testkit_log = log }), 0);
}

/* A unique key prefix per test run (the database outlives one test). */
static const char *
run_id(void)
{
	static char id[32];

	if (id[0] == '\0')
		snprintf(id, sizeof(id), "%lx", (unsigned long)getpid());
	return id;
}

/* Over TCP (the others use the unix socket). */
Test(mysql_e2e, replay_and_conflict)
{
	harness h;
	call a, b;
	char key[64];
	mariadb m;

	cr_assert_eq(mariadb_from_env(&m), 0);
	cr_assert_eq(harness_start(&h, &(harness_opts){ .mysql_tcp = 1,
	    .db = &m }), 0);
	snprintf(key, sizeof(key), "rc-%s", run_id());
	a = call_one(h.addr, "/testkit/echo", key, "{\"a\": 1, \"b\": 2}");
	cr_expect_eq(a.status, 201);
	b = call_one(h.addr, "/testkit/echo", key, "{\"b\":2,\"a\":1}");
	cr_expect_eq(b.status, 201);
	cr_expect_str_eq(b.replayed, "true");
	cr_expect_str_eq(b.exec, a.exec);
	cr_expect_str_eq(b.body_out, a.body_out);
	b = call_one(h.addr, "/testkit/echo", key, "{\"a\": 2}");
	cr_expect_eq(b.status, 409);
	cr_expect_str_eq(b.code, "IDEMPOTENCY_CONFLICT");
	b = call_one(h.addr, "/testkit/status/503", key, NULL);
	cr_expect_eq(b.status, 409, "another route with the key: %s",
	    b.body_out);
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", key), 1);
	/* released answers run again */
	snprintf(key, sizeof(key), "rel-%s", run_id());
	call_one(h.addr, "/testkit/status/502", key, NULL);
	call_one(h.addr, "/testkit/status/502", key, NULL);
	cr_expect_eq(harness_count_key(&h, "/testkit/status/502", key), 2);
	harness_stop(&h);
}

/* Two instances, 200 concurrent requests over 50 keys spread across both:
 * exactly one execution per key. */
Test(mysql_e2e, two_nodes_one_execution_per_key)
{
	harness n1, n2;
	call c[200];
	char keys[50][48], log[128];
	int i, k, final;

	snprintf(log, sizeof(log), "/tmp/idemfcgi-shared-%d.log", (int)getpid());
	harness_log_reset(log);
	start_node(&n1, "threads = 24", NULL, log);
	start_node(&n2, "threads = 24", NULL, log);
	for (k = 0; k < 50; k++)
		snprintf(keys[k], sizeof(keys[k]), "two-%s-%d", run_id(), k);
	for (i = 0; i < 200; i++) {
		k = i % 50;
		c[i] = call_make(i % 2 ? n1.addr : n2.addr, "/testkit/sleep/50",
		    keys[k], NULL);
	}
	call_all(c, 200);
	for (i = 0; i < 200; i++)
		cr_expect(c[i].status == 201 || (c[i].status == 409 &&
		    strcmp(c[i].code, "IDEMPOTENCY_IN_FLIGHT") == 0),
		    "request %d: %d %s", i, c[i].status, c[i].body_out);
	/* retry whatever was in flight until every key has its answer */
	for (final = 0; final < 50; final++)
		for (i = 0; i < 200; i++)
			if (c[i].status == 409) {
				call_sleep(20);
				call_send(&c[i]);
			}
	for (k = 0; k < 50; k++) {
		const char *exec = NULL;
		cr_expect_eq(harness_count_key(&n1, "/testkit/sleep/50", keys[k]),
		    1, "key %d ran %zu times", k,
		    harness_count_key(&n1, "/testkit/sleep/50", keys[k]));
		for (i = k; i < 200; i += 50) {
			cr_expect_eq(c[i].status, 201);
			if (exec == NULL)
				exec = c[i].exec;
			cr_expect_str_eq(c[i].exec, exec, "key %d: two answers", k);
		}
	}
	harness_stop(&n1);
	harness_stop(&n2);
	harness_log_reset(log);
}

/* A whole node dies (master and workers) holding a reservation: nobody is
 * left to release it.  After inflight-ttl two live nodes race for it:
 * exactly one takes it over and runs the handler. */
Test(mysql_e2e, dead_node_reservation_taken_over_once)
{
	harness dead, n1, n2;
	call doomed, c[20];
	char key[64], log[128];
	int i, ok = 0;
	pthread_t t;

	snprintf(log, sizeof(log), "/tmp/idemfcgi-race-%d.log", (int)getpid());
	harness_log_reset(log);
	snprintf(key, sizeof(key), "dead-%s", run_id());
	start_node(&dead, NULL, "inflight-ttl = 1s", log);
	start_node(&n1, NULL, "inflight-ttl = 1s", log);
	start_node(&n2, NULL, "inflight-ttl = 1s", log);
	doomed = call_make(dead.addr, "/testkit/sleep/1500", key, NULL);
	pthread_create(&t, NULL, call_thread, &doomed);
	cr_assert(harness_await_started(&dead, "/testkit/sleep/1500", key, 1));
	harness_kill(&dead);

	pthread_join(t, NULL);
	cr_expect_eq(doomed.status, -1, "the node should have died");
	/* still held by the dead node */
	c[0] = call_one(n1.addr, "/testkit/sleep/1500", key, NULL);
	cr_expect_eq(c[0].status, 409);
	cr_expect_str_eq(c[0].code, "IDEMPOTENCY_IN_FLIGHT");
	call_sleep(1200);
	for (i = 0; i < 20; i++)
		c[i] = call_make(i % 2 ? n1.addr : n2.addr, "/testkit/sleep/1500",
		    key, NULL);
	call_all(c, 20);
	for (i = 0; i < 20; i++)
		if (c[i].status == 201)
			ok++;
	cr_expect_geq(ok, 1);
	cr_expect_eq(harness_count_key(&n1, "/testkit/sleep/1500", key), 1);
	cr_expect_eq(harness_logged(&n1, "took over the reservation") +
	    harness_logged(&n2, "took over the reservation"), 1);
	harness_stop(&dead);
	harness_stop(&n1);
	harness_stop(&n2);
	harness_log_reset(log);
}

/* Issue 35.2: a whole node dies holding a reservation, and the retries
 * come with another body (a client that rebuilt its request): nobody will
 * ever take it over or release it.  Within the key's lifetime they get
 * the conflict; once the lifetime is over and the lease lapsed, the
 * reservation is abandoned: the next request has the key, runs once, and
 * the takeover of an abandoned record is logged. */
Test(mysql_e2e, abandoned_reservation_frees_its_key, .timeout = 60)
{
	harness dead, n1;
	call doomed, c;
	char key[64], log[128];
	pthread_t t;
	int i;

	snprintf(log, sizeof(log), "/tmp/idemfcgi-aband-%d.log", (int)getpid());
	harness_log_reset(log);
	snprintf(key, sizeof(key), "aband-%s", run_id());
	start_node(&dead, NULL, "inflight-ttl = 1s\nlifetime = 2s\n"
	    "abandon-after = 1s", log);
	start_node(&n1, NULL, "inflight-ttl = 1s\nlifetime = 2s\n"
	    "abandon-after = 1s", log);
	doomed = call_make(dead.addr, "/testkit/sleep/5000", key, "{\"v\":1}");
	pthread_create(&t, NULL, call_thread, &doomed);
	cr_assert(harness_await_started(&dead, "/testkit/sleep/5000", key, 1));
	harness_kill(&dead);
	pthread_join(t, NULL);
	c = call_one(n1.addr, "/testkit/sleep/5000", key, "{\"v\":2}");
	cr_expect_eq(c.status, 409);
	cr_expect_str_eq(c.code, "IDEMPOTENCY_CONFLICT");
	/* past the lifetime (2 s after the reservation), the lease lapsed (1
	 * s after its last renewal) and not renewed for abandon-after (1 s):
	 * the key is the new body's */
	for (i = 0; i < 100; i++) {
		call_sleep(100);
		c = call_one(n1.addr, "/testkit/sleep/10", key, "{\"v\":2}");
		if (c.status != 409)
			break;
		cr_assert_str_eq(c.code, "IDEMPOTENCY_CONFLICT");
	}
	cr_expect_eq(c.status, 201, "%d %s", c.status, c.body_out);
	cr_expect_eq(harness_count_key(&n1, "/testkit/sleep/10", key), 1);
	cr_expect(harness_logged(&n1, "event=abandoned") ||
	    harness_logged(&n1, "\"abandoned\""));
	c = call_one(n1.addr, "/testkit/sleep/10", key, "{\"v\":2}");
	cr_expect_str_eq(c.replayed, "true");
	harness_stop(&dead);
	harness_stop(&n1);
	harness_log_reset(log);
}

/* Expired rows go in batches from the purge thread; live rows stay. */
Test(mysql_e2e, purge_thread)
{
	harness h;
	mariadb m;
	char sql[1024], *out;
	int i;

	mariadb_from_env(&m);
	snprintf(sql, sizeof(sql), "INSERT INTO idempotency_keys SELECT "
	    "UNHEX(SHA2('purge-%s', 256)), CONCAT('old-', seq), "
	    "UNHEX(SHA2('x', 256)), 'committed', 'o', 'r', UTC_TIMESTAMP(6), "
	    "UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) - INTERVAL 1 SECOND, 200, '', "
	    "'', NULL, NULL, NULL, NULL FROM seq_1_to_2500", run_id());
	free(mariadb_sql(&m, sql));
	snprintf(sql, sizeof(sql), "INSERT INTO idempotency_keys SELECT "
	    "UNHEX(SHA2('purge-%s', 256)), CONCAT('live-', seq), "
	    "UNHEX(SHA2('x', 256)), 'committed', 'o', 'r', UTC_TIMESTAMP(6), "
	    "UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 1 HOUR, 200, '', "
	    "'', NULL, NULL, NULL, NULL FROM seq_1_to_30", run_id());
	free(mariadb_sql(&m, sql));
	start_node(&h, NULL, "cleanup-interval = 1s", NULL);
	snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM idempotency_keys "
	    "WHERE scope_hash = UNHEX(SHA2('purge-%s', 256))", run_id());
	for (i = 0; i < 50; i++) {
		out = mariadb_sql(&m, sql);
		if (out != NULL && atoi(out) == 30) {
			free(out);
			break;
		}
		free(out);
		call_sleep(100);
	}
	cr_expect_lt(i, 50, "expired rows were not purged");
	harness_stop(&h);
}

/* The ledger keeps its accounts in MySQL when the store is MySQL: money
 * moves once per key, across two nodes. */
Test(mysql_e2e, ledger_in_mysql)
{
	harness n1, n2;
	call c[40];
	char path[96], acct[64], keys[40][48];
	mariadb m;
	char sql[256], *out;
	int i;

	mariadb_from_env(&m);
	start_node(&n1, "threads = 16", NULL, NULL);
	start_node(&n2, "threads = 16", NULL, NULL);
	snprintf(acct, sizeof(acct), "acct-%s", run_id());
	snprintf(path, sizeof(path), "/accounts/%s/deposit", acct);
	/* 40 deposits of 5 under 10 keys, each key 4 times on both nodes */
	for (i = 0; i < 40; i++) {
		snprintf(keys[i], sizeof(keys[i]), "dep-%s-%d", run_id(), i % 10);
		c[i] = call_make(i % 2 ? n1.addr : n2.addr, path, keys[i],
		    "{\"amount\": 5}");
	}
	call_all(c, 40);
	for (i = 0; i < 40; i++)
		while (c[i].status == 409) {
			call_sleep(20);
			call_send(&c[i]);
		}
	for (i = 0; i < 40; i++)
		cr_expect_eq(c[i].status, 201, "%d: %s", i, c[i].body_out);
	snprintf(sql, sizeof(sql), "SELECT balance FROM ledger_accounts WHERE "
	    "id = '%s'", acct);
	out = mariadb_sql(&m, sql);
	cr_expect_eq(out != NULL ? atoi(out) : -1, 50, "10 keys x 5 = 50, got %s",
	    out);
	free(out);

	snprintf(path, sizeof(path), "/accounts/%s/withdraw", acct);
	c[0] = call_one(n1.addr, path, "w1", "{\"amount\": 20}");
	cr_expect_eq(c[0].status, 201);
	cr_expect(strstr(c[0].body_out, "\"balance\":30") != NULL, "%s",
	    c[0].body_out);
	c[0] = call_one(n2.addr, path, "w2", "{\"amount\": 31}");
	cr_expect_eq(c[0].status, 409);
	cr_expect_str_eq(c[0].code, "INSUFFICIENT_FUNDS");
	c[0] = call_one(n2.addr, "/accounts/nobody-here/withdraw", "w3",
	    "{\"amount\": 1}");
	cr_expect_eq(c[0].status, 404);
	harness_stop(&n1);
	harness_stop(&n2);
}
