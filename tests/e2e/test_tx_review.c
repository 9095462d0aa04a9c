/*
 * test_tx_review.c - adversarial review of transactional routes (issue
 * 14).  Each test asserts what the documentation promises; a failing
 * test is a finding.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <criterion/criterion.h>

#include "calls.h"
#include "harness.h"
#include "mariadb.h"

static long long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
start_on(harness *h, const char *server, const char *idem)
{
	char rest[512];

	setenv("IDEMFCGI_TEST_FAULTS", "1", 1);
	snprintf(rest, sizeof(rest), "pool-size = 8\n[idempotency]\n%s\n",
	    idem != NULL ? idem : "");
	cr_assert_eq(harness_start_store(h, 1, server, rest), 0);
}

/* DESIGN 2.7: "A duplicate's INSERT IGNORE waits on its row lock for at
 * most inflight-wait ..., then answers 409 IDEMPOTENCY_IN_FLIGHT".  Each
 * lock-wait timeout is retried CONTENTION_TRIES (6) times inside
 * my_tx_begin, and the middleware only starts its inflight-wait deadline
 * after the first IDEM_ERR_BUSY, then calls tx_begin again: the duplicate
 * holds its worker thread (and a plugin-pool connection) for about
 * 2 * 6 * inflight-wait. */
Test(review, duplicate_wait_is_bounded_by_inflight_wait, .timeout = 120)
{
	harness h;
	const char *key = call_key("rv-wait");
	call first, dup;
	pthread_t t;
	long long t0, took;

	start_on(&h, "threads = 8\nworkers = 1", "inflight-wait = 1s");
	first = call_make(h.addr, "/testkit/tx/201?ms=40000", key, NULL);
	pthread_create(&t, NULL, call_thread, &first);
	call_sleep(500);
	t0 = now_ms();
	dup = call_one(h.addr, "/testkit/tx/201?ms=40000", key, NULL);
	took = now_ms() - t0;
	cr_expect_eq(dup.status, 409, "%d %s", dup.status, dup.body_out);
	cr_expect_lt(took, 3000, "a duplicate with inflight-wait = 1s waited "
	    "%lld ms for its 409", took);
	pthread_join(t, NULL);
	harness_stop(&h);
}

/* A keyless request to a transactional route whose handler refuses the
 * input before touching the database (400) did not end any transaction,
 * yet tx_check_open logs tx_ended_by_handler at ERROR ("fix the plugin"):
 * with autocommit off and no statement yet, SERVER_STATUS_IN_TRANS is
 * clear. */
Test(review, keyless_refusal_is_not_a_handler_ending_its_transaction,
    .timeout = 60)
{
	harness h;
	call a;

	start_on(&h, "threads = 8\nworkers = 1", "required = false");
	a = call_one(h.addr, "/testkit/tx/abc", NULL, NULL);
	cr_expect_eq(a.status, 400, "%d %s", a.status, a.body_out);
	call_sleep(300);
	cr_expect(!harness_logged(&h, "tx_ended_by_handler"), "a handler that "
	    "ran no statement was logged as ending its transaction");
	harness_stop(&h);
}

/* A node that stops answering without closing its sockets (power loss,
 * kernel panic, partition; here: the worker is SIGSTOPped) keeps its open
 * transaction, and with it the key's row lock, until the server's
 * wait_timeout (8 h by default) or TCP keepalive (~2 h) notices.  Another
 * node's retries get 409 IDEMPOTENCY_IN_FLIGHT long past inflight-ttl,
 * where the two-phase path takes over after inflight-ttl. */
Test(review, hung_node_does_not_hold_the_key_past_inflight_ttl,
    .timeout = 120)
{
	harness a, b;
	const char *ktx = call_key("rv-hung-tx"), *k2p = call_key("rv-hung-2p");
	call first, first2p, r;
	pthread_t t, t2;
	int pids[4], n, i, got = 0, got2p = 0;

	start_on(&a, "threads = 8\nworkers = 1", "inflight-ttl = 1s");
	start_on(&b, "threads = 8\nworkers = 1", "inflight-ttl = 1s");
	first = call_make(a.addr, "/testkit/tx/201?ms=1500", ktx, NULL);
	first2p = call_make(a.addr, "/testkit/sleep/1500", k2p, NULL);
	pthread_create(&t, NULL, call_thread, &first);
	pthread_create(&t2, NULL, call_thread, &first2p);
	call_sleep(500);
	n = harness_workers(&a, pids, 4);
	cr_assert_eq(n, 1);
	kill(pids[0], SIGSTOP);
	/* node a is gone as far as anybody can tell: 10 x inflight-ttl */
	for (i = 0; i < 20 && !(got && got2p); i++) {
		call_sleep(500);
		if (!got2p) {
			r = call_one(b.addr, "/testkit/sleep/1500", k2p, NULL);
			got2p = r.status == 201;
		}
		if (!got) {
			r = call_one(b.addr, "/testkit/tx/201?ms=1500", ktx, NULL);
			got = r.status == 201;
		}
	}
	kill(pids[0], SIGCONT);
	pthread_join(t, NULL);
	pthread_join(t2, NULL);
	cr_expect(got2p, "the two-phase key was never taken over");
	cr_expect(got, "the transactional key stayed locked for 10 s with "
	    "inflight-ttl = 1s (last retry: %d %s)", r.status, r.code);
	harness_stop(&a);
	harness_stop(&b);
}

/* Regression on the two-phase path: S_INSERT now runs under
 * "SET STATEMENT innodb_lock_wait_timeout = 0" (inflight-wait 0, the
 * default).  A statement holding a gap lock that covers a brand-new key
 * for longer than the ~35 ms of back-off (here: a purge-like range DELETE
 * on expires_at, which locks up to the supremum when every row is
 * expired) makes a first request for a never-seen key answer 409
 * IDEMPOTENCY_IN_FLIGHT.  Before issue 14 the INSERT waited and ran. */
typedef struct holder_arg {
	mariadb m;
	const char *sql;
} holder_arg;

static void *
hold_sql(void *arg)
{
	holder_arg *h = arg;

	free(mariadb_sql(&h->m, h->sql));
	return NULL;
}

Test(review, new_key_is_not_in_flight_during_a_purge, .timeout = 60)
{
	harness h;
	holder_arg ha;
	pthread_t t;
	call a;
	const char *key = call_key("rv-purge");

	cr_assert_eq(mariadb_from_env(&ha.m), 0);
	start_on(&h, "threads = 8\nworkers = 1", NULL);
	/* every row expired, as after a quiet night */
	free(mariadb_sql(&ha.m, "UPDATE idempotency_keys SET expires_at = "
	    "UTC_TIMESTAMP(6) - INTERVAL 1 DAY, state = 'committed'"));
	ha.sql = "BEGIN; DELETE FROM idempotency_keys WHERE state = "
	    "'committed' AND expires_at < UTC_TIMESTAMP(6) LIMIT 1000; "
	    "SELECT SLEEP(1); ROLLBACK";
	pthread_create(&t, NULL, hold_sql, &ha);
	call_sleep(300);
	a = call_one(h.addr, "/testkit/status/201", key, NULL);
	cr_expect_eq(a.status, 201, "a never-seen key got %d %s", a.status,
	    a.code);
	pthread_join(t, NULL);
	harness_stop(&h);
}
