/*
 * test_tx.c - transactional routes end to end (issue 14; on PostgreSQL,
 * issue 38): the real idemfcgi with the testkit's POST /testkit/tx/{code}
 * on a private database, whose side effect is a row of testkit_effects
 * written in the request's transaction.  Workers are killed at each point
 * of a first execution (X-Testkit-Crash in the handler, X-Idemfcgi-Fault
 * in the framework, with IDEMFCGI_TEST_FAULTS=1); every retry's answer is
 * checked against the database: a side effect is there exactly once,
 * with the answer that replays.
 *
 * Built twice: test_tx on MySQL (a private MariaDB) and test_tx_postgres
 * (TX_POSTGRES) on PostgreSQL.  The scenarios both stores share come
 * first, then each store's own (how its server is made to kill a
 * session, hold a lock, purge).
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
#ifdef TX_POSTGRES
#include "postgres.h"
#else
#include "mariadb.h"
#endif

static harness h;

#ifdef TX_POSTGRES
/* The program's PostgreSQL (its runner's). */
static postgres *
server(void)
{
	static postgres pg;

	cr_assert_eq(postgres_from_env(&pg), 0);
	return &pg;
}

/* Runs sql in the program's database; its rows (caller frees) or NULL. */
static char *
db_sql(const char *sql)
{
	return postgres_sql(server(), sql);
}

/* o, on the program's database. */
static harness_opts
on_store(harness_opts o)
{
	o.pg = server();
	return o;
}
#else
static char *
db_sql(const char *sql)
{
	mariadb m;

	cr_assert_eq(mariadb_from_env(&m), 0);
	return mariadb_sql(&m, sql);
}

static harness_opts
on_store(harness_opts o)
{
	o.mysql = 1;
	return o;
}
#endif

/* Starts hn on the program's database with srv under [server], idem
 * under [idempotency], a pool of 8, faults allowed. */
static void
start_on(harness *hn, const char *srv, const char *idem)
{
	harness_opts o = on_store((harness_opts){ .server = srv,
	    .rest = "pool-size = 8\n", .idem = idem });

	setenv("IDEMFCGI_TEST_FAULTS", "1", 1);
	cr_assert_eq(harness_start(hn, &o), 0);
}

/* Starts h with 8 threads, one worker. */
static void
start(const char *idem)
{
	start_on(&h, "threads = 8\nworkers = 1", idem);
}

/* Rows of testkit_effects for key, and of them with exec (NULL: any). */
static int
effects(const char *key, const char *exec)
{
	char sql[512], *out;
	int n;

	snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM testkit_effects WHERE "
	    "idem_key = '%s'%s%s%s", key, exec != NULL ? " AND exec = '" : "",
	    exec != NULL ? exec : "", exec != NULL ? "'" : "");
	out = db_sql(sql);
	cr_assert_not_null(out);
	n = atoi(out);
	free(out);
	return n;
}

/* The state of key's record ("committed", "in_flight") or "none", in the
 * rows out of a query (freed). */
static const char *
state_of(char *out)
{
	static char state[32];

	snprintf(state, sizeof(state), "%s", out != NULL && *out != '\0' ? out :
	    "none");
	state[strcspn(state, "\n")] = '\0';
	free(out);
	return state;
}

/* The state of key's record in the program's database. */
static const char *
record_state(const char *key)
{
	char sql[256];

	snprintf(sql, sizeof(sql), "SELECT state FROM idempotency_keys WHERE "
	    "idem_key = '%s'", key);
	return state_of(db_sql(sql));
}

/* The count of rows of testkit_effects matching the SQL condition cond. */
static int
effects_where(const char *cond)
{
	char sql[512], *out;
	int n;

	snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM testkit_effects WHERE "
	    "%s", cond);
	out = db_sql(sql);
	cr_assert_not_null(out);
	n = atoi(out);
	free(out);
	return n;
}

/* Sends c until it gets an answer other than IN_FLIGHT (the transaction
 * of a killed worker ends when the server sees its connection close) or
 * no answer (a worker being replaced), for up to 10 s. */
static void
send_until_settled(call *c)
{
	int i;

	for (i = 0; i < 200; i++) {
		call_send(c);
		if (c->status != -1 && !(c->status == 409 &&
		    strcmp(c->code, "IDEMPOTENCY_IN_FLIGHT") == 0))
			return;
		call_sleep(50);
	}
}

Test(tx, first_execution_then_replays)
{
	const char *key = call_key("tx-first");
	call a, b;

	start(NULL);
	a = call_one(h.addr, "/testkit/tx/201", key, NULL);
	cr_assert_eq(a.status, 201, "%d %s", a.status, a.body_out);
	cr_expect_str_eq(a.replayed, "");
	b = call_one(h.addr, "/testkit/tx/201", key, NULL);
	cr_expect_eq(b.status, 201);
	cr_expect_str_eq(b.replayed, "true");
	cr_expect_str_eq(b.exec, a.exec);
	cr_expect_eq(effects(key, a.exec), 1);
	cr_expect_eq(effects(key, NULL), 1);
	cr_expect_str_eq(record_state(key), "committed");
	cr_expect_eq(harness_count_key(&h, "/testkit/tx/201", key), 1);
	/* a different request under the key: a conflict, nothing written */
	b = call_one(h.addr, "/testkit/tx/201", key, "{\"other\":1}");
	cr_expect_str_eq(b.code, "IDEMPOTENCY_CONFLICT");
	cr_expect_eq(effects(key, NULL), 1);
	harness_stop(&h);
}

/* A 5xx (or 429) rolls the handler's writes back with the reservation: a
 * retry runs again, and nothing of the first remains; a deterministic 4xx
 * commits them with the answer. */
Test(tx, transient_answers_roll_back)
{
	const char *k503 = call_key("tx-503"), *k429 = call_key("tx-429"),
	    *k422 = call_key("tx-422");
	call a, b;

	start(NULL);
	a = call_one(h.addr, "/testkit/tx/503", k503, NULL);
	cr_expect_eq(a.status, 503);
	b = call_one(h.addr, "/testkit/tx/503", k503, NULL);
	cr_expect_eq(b.status, 503);
	cr_expect_str_neq(b.exec, a.exec);
	cr_expect_eq(harness_count_key(&h, "/testkit/tx/503", k503), 2);
	cr_expect_eq(effects(k503, NULL), 0);
	cr_expect_str_eq(record_state(k503), "none");
	a = call_one(h.addr, "/testkit/tx/429", k429, NULL);
	cr_expect_eq(a.status, 429);
	cr_expect_eq(effects(k429, NULL), 0);
	a = call_one(h.addr, "/testkit/tx/422", k422, NULL);
	cr_expect_eq(a.status, 422);
	b = call_one(h.addr, "/testkit/tx/422", k422, NULL);
	cr_expect_str_eq(b.replayed, "true");
	cr_expect_eq(effects(k422, a.exec), 1);
	cr_expect_eq(effects(k422, NULL), 1);
	harness_stop(&h);
}

/* Without a key the handler still runs in a transaction of its own:
 * committed for a 2xx, rolled back for a 5xx. */
Test(tx, keyless_requests_have_their_own_transaction)
{
	int before, after, after5;
	call a;

	start("required = false");
	before = effects_where("idem_key IS NULL");
	a = call_one(h.addr, "/testkit/tx/201", NULL, NULL);
	cr_expect_eq(a.status, 201);
	after = effects_where("idem_key IS NULL");
	a = call_one(h.addr, "/testkit/tx/500", NULL, NULL);
	cr_expect_eq(a.status, 500);
	after5 = effects_where("idem_key IS NULL");
	cr_expect_eq(after, before + 1);
	cr_expect_eq(after5, after);
	harness_stop(&h);
}

/* A worker killed at each point of a first execution: the retry finds the
 * database as if the first never happened (it runs, once), or, killed
 * once COMMIT was sent, as if it had completed (it replays). */
Test(tx, kill_at_each_point, .timeout = 120)
{
	static const struct {
		const char *header;   /* the fault */
		int committed;        /* whether the first execution took */
	} points[] = {
		{ "X-Testkit-Crash: before-writes", 0 },
		{ "X-Testkit-Crash: after-writes", 0 },
		{ "X-Idemfcgi-Fault: after-handler", 0 },
		{ "X-Idemfcgi-Fault: after-record", 0 },
		{ "X-Idemfcgi-Fault: in-commit", 1 },
	};
	size_t i;

	start(NULL);
	for (i = 0; i < sizeof(points) / sizeof(points[0]); i++) {
		char name[32];
		const char *key;
		call a, r;

		snprintf(name, sizeof(name), "tx-kill-%zu", i);
		key = call_key(name);
		a = call_make(h.addr, "/testkit/tx/201", key, NULL);
		snprintf(a.extra, sizeof(a.extra), "%s", points[i].header);
		call_send(&a);
		cr_expect_eq(a.status, -1, "%s: the worker answered %d",
		    points[i].header, a.status);
		r = call_make(h.addr, "/testkit/tx/201", key, NULL);
		send_until_settled(&r);
		cr_expect_eq(r.status, 201, "%s: retry got %d %s",
		    points[i].header, r.status, r.body_out);
		cr_expect_str_eq(r.replayed, points[i].committed ? "true" : "",
		    "%s", points[i].header);
		/* the answer is that of the one side effect there is */
		cr_expect_eq(effects(key, NULL), 1, "%s: %d side effects",
		    points[i].header, effects(key, NULL));
		cr_expect_eq(effects(key, r.exec), 1, "%s", points[i].header);
		cr_expect_str_eq(record_state(key), "committed");
		call_send(&r);
		cr_expect_str_eq(r.replayed, "true");
		cr_expect_eq(effects(key, NULL), 1);
	}
	harness_stop(&h);
}

/* The connection lost while COMMIT is under way, the worker alive: the
 * outcome is read back.  Cut after COMMIT was sent: it committed, and
 * the client gets the answer; cut before: it did not, and the client is
 * told nothing was done. */
Test(tx, lost_commit_answers_the_truth, .timeout = 60)
{
	const char *kin = call_key("tx-lost-in"), *kbefore =
	    call_key("tx-lost-before");
	call a, r;

	start(NULL);
	a = call_make(h.addr, "/testkit/tx/201", kin, NULL);
	snprintf(a.extra, sizeof(a.extra), "X-Idemfcgi-Fault: lose-in-commit");
	call_send(&a);
	cr_expect_eq(a.status, 201, "%d %s", a.status, a.body_out);
	cr_expect_eq(effects(kin, a.exec), 1);
	r = call_one(h.addr, "/testkit/tx/201", kin, NULL);
	cr_expect_str_eq(r.replayed, "true");
	cr_expect_str_eq(r.exec, a.exec);

	a = call_make(h.addr, "/testkit/tx/201", kbefore, NULL);
	snprintf(a.extra, sizeof(a.extra),
	    "X-Idemfcgi-Fault: lose-before-commit");
	call_send(&a);
	cr_expect_eq(a.status, 503, "%d %s", a.status, a.body_out);
	cr_expect_str_eq(a.code, "TRANSACTION_ROLLED_BACK");
	cr_expect_eq(effects(kbefore, NULL), 0);
	r = call_make(h.addr, "/testkit/tx/201", kbefore, NULL);
	send_until_settled(&r);
	cr_expect_eq(r.status, 201);
	cr_expect_str_eq(r.replayed, "");
	cr_expect_eq(effects(kbefore, NULL), 1);
	harness_stop(&h);
}

/* A handler that cannot tell whether its call outside happened, after
 * one of its statements failed (a duplicate key: on PostgreSQL that
 * aborts its transaction, so the mark of unknown outcome cannot be
 * written in it): it runs once, its database writes are rolled back or
 * kept with the mark, the key is kept of unknown outcome all the same,
 * and a retry never runs it again.  On PostgreSQL the retry ran it again
 * before (the mark went with the aborted transaction). */
Test(tx, unknown_outcome_is_kept_when_the_transaction_is_lost, .timeout = 60)
{
	const char *key = call_key("tx-unknown");
	call a, r;

	start(NULL);
	a = call_one(h.addr, "/testkit/tx/201?unknown=1", key, NULL);
	cr_expect_eq(a.status, 503, "%d %s", a.status, a.body_out);
	cr_expect_str_eq(a.code, "IDEMPOTENCY_OUTCOME_UNKNOWN");
	cr_expect_str_eq(record_state(key), "unknown");
	r = call_one(h.addr, "/testkit/tx/201?unknown=1", key, NULL);
	cr_expect_str_eq(r.code, "IDEMPOTENCY_OUTCOME_UNKNOWN", "%d %s",
	    r.status, r.body_out);
	cr_expect_eq(harness_count_key(&h, "/testkit/tx/201", key), 1,
	    "the handler ran again");
	harness_stop(&h);
}

/* The same on a route whose retry reconciles (the handler is its own
 * hook): each retry reconciles, and when the reconcile cannot tell either
 * (its statement failed again) the record is kept of unknown outcome
 * again, never left held in flight.  Before, the record was left held
 * by the failed reconcile on PostgreSQL, and the next retry got 409
 * IDEMPOTENCY_IN_FLIGHT instead of reconciling. */
Test(tx, failed_reconcile_keeps_the_key_unknown, .timeout = 60)
{
	const char *key = call_key("tx-reconcile");
	call a;
	int i;

	start(NULL);
	for (i = 0; i < 3; i++) {
		a = call_one(h.addr, "/testkit/txr/201?unknown=1", key, NULL);
		cr_expect_eq(a.status, 503, "call %d: %d %s", i, a.status,
		    a.body_out);
		cr_expect_str_eq(a.code, "IDEMPOTENCY_OUTCOME_UNKNOWN",
		    "call %d", i);
		cr_expect_str_eq(record_state(key), "unknown", "call %d", i);
	}
	/* the first run, then one reconcile a retry */
	cr_expect_eq(harness_count_key(&h, "/testkit/txr/201", key), 3);
	harness_stop(&h);
}

/* A transactional handler that runs a while: duplicates get 409 (after
 * a lock wait of a second: inflight-wait 0) and never run it again; then
 * they replay. */
Test(tx, duplicates_of_a_running_handler_get_409, .timeout = 60)
{
	const char *key = call_key("tx-slow");
	call first, dup[2];
	pthread_t t;
	int i;

	start("inflight-ttl = 10s");
	first = call_make(h.addr, "/testkit/tx/201?ms=4000", key, NULL);
	pthread_create(&t, NULL, call_thread, &first);
	cr_assert(harness_await_started(&h, "/testkit/tx/201", key, 1));
	for (i = 0; i < 2; i++) {
		dup[i] = call_one(h.addr, "/testkit/tx/201?ms=4000", key, NULL);
		cr_expect_eq(dup[i].status, 409, "%d %s", dup[i].status,
		    dup[i].body_out);
		call_sleep(300);
	}
	pthread_join(t, NULL);
	cr_expect_eq(first.status, 201);
	dup[0] = call_one(h.addr, "/testkit/tx/201?ms=4000", key, NULL);
	cr_expect_str_eq(dup[0].replayed, "true");
	cr_expect_str_eq(dup[0].exec, first.exec);
	cr_expect_eq(harness_count_key(&h, "/testkit/tx/201", key), 1);
	cr_expect_eq(effects(key, NULL), 1);
	harness_stop(&h);
}

#ifndef TX_POSTGRES
/*
 * A route that calls outside (calls-outside = true) reserves its key in a
 * commit of its own before its handler runs (DESIGN.md 2.7, protocol (a);
 * reliability.md G7): while it runs, its record is committed in flight
 * (seen by anyone, not a row lock), another body is told the conflict at
 * once, the same body 409 in flight; its writes and answer commit
 * together; an answer not stored releases the key with its writes gone;
 * an unknown outcome is kept with its writes.
 */
Test(tx, calls_outside_reserves_first, .timeout = 60)
{
	const char *key = call_key("tx-out"), *k503 = call_key("tx-out503"),
	    *kunk = call_key("tx-outunk");
	harness_opts o = on_store((harness_opts){ .server = "threads = 8\n"
	    "workers = 1", .rest = "pool-size = 8\n[route POST "
	    "/testkit/tx/{code}]\ncalls-outside = true\n" });
	call first, other, dup;
	pthread_t t;

	setenv("IDEMFCGI_TEST_FAULTS", "1", 1);
	cr_assert_eq(harness_start(&h, &o), 0);
	first = call_make(h.addr, "/testkit/tx/201?ms=1500", key, NULL);
	pthread_create(&t, NULL, call_thread, &first);
	cr_assert(harness_await_started(&h, "/testkit/tx/201", key, 1));
	cr_expect_str_eq(record_state(key), "in_flight");
	other = call_one(h.addr, "/testkit/tx/201?ms=1500", key,
	    "{\"other\":1}");
	cr_expect_eq(other.status, 409, "%d %s", other.status, other.body_out);
	cr_expect_str_eq(other.code, "IDEMPOTENCY_CONFLICT");
	dup = call_one(h.addr, "/testkit/tx/201?ms=1500", key, NULL);
	cr_expect_str_eq(dup.code, "IDEMPOTENCY_IN_FLIGHT");
	pthread_join(t, NULL);
	cr_expect_eq(first.status, 201, "%d %s", first.status, first.body_out);
	dup = call_one(h.addr, "/testkit/tx/201?ms=1500", key, NULL);
	cr_expect_str_eq(dup.replayed, "true");
	cr_expect_str_eq(dup.exec, first.exec);
	cr_expect_str_eq(record_state(key), "committed");
	cr_expect_eq(effects(key, first.exec), 1);
	cr_expect_eq(effects(key, NULL), 1);
	cr_expect_eq(harness_count_key(&h, "/testkit/tx/201", key), 1);
	/* not stored: released, its writes rolled back */
	first = call_one(h.addr, "/testkit/tx/503", k503, NULL);
	cr_expect_eq(first.status, 503);
	cr_expect_str_eq(record_state(k503), "none");
	cr_expect_eq(effects(k503, NULL), 0);
	/* of unknown outcome: kept so, with its writes */
	first = call_one(h.addr, "/testkit/tx/201?unknown=1", kunk, NULL);
	cr_expect_str_eq(first.code, "IDEMPOTENCY_OUTCOME_UNKNOWN", "%d %s",
	    first.status, first.body_out);
	cr_expect_str_eq(record_state(kunk), "unknown");
	cr_expect_eq(effects(kunk, NULL), 1);
	harness_stop(&h);
}
#endif

#ifndef TX_POSTGRES
/*
 * The review of issue 40: on a server whose InnoDB writes under snapshot
 * isolation (MariaDB 11.6 and later by default), a route that calls
 * outside still commits.  Its record is renewed by the lease thread while
 * the handler runs (twice in 2.5 s at inflight-ttl 3s), so the
 * answer's write meets a row changed since the transaction's snapshot;
 * the server refused it (1020), the client was told 503 after the
 * handler ran, and its retry ran the handler again.
 */
Test(tx, calls_outside_under_snapshot_isolation, .timeout = 90)
{
	const char *key = call_key("tx-snap");
	harness hs;
	mariadb m;
	call first, again;
	char *v;

	cr_assert_eq(mariadb_start(&m), 0);
	free(mariadb_sql(&m, "SET GLOBAL innodb_snapshot_isolation = ON"));
	v = mariadb_sql(&m, "SELECT @@GLOBAL.innodb_snapshot_isolation");
	cr_assert(v != NULL && atoi(v) == 1, "no snapshot isolation: %s",
	    v != NULL ? v : "?");
	free(v);
	cr_assert_eq(harness_start(&hs, &(harness_opts){ .server =
	    "threads = 8\nworkers = 1", .idem = "inflight-ttl = 3s",
	    .mysql = 1, .db = &m, .rest = "pool-size = 8\n[route POST "
	    "/testkit/tx/{code}]\ncalls-outside = true\n" }), 0);
	first = call_one(hs.addr, "/testkit/tx/201?ms=2500", key, NULL);
	cr_expect_eq(first.status, 201, "%d %s", first.status, first.body_out);
	again = call_one(hs.addr, "/testkit/tx/201?ms=2500", key, NULL);
	cr_expect_str_eq(again.replayed, "true", "%d %s", again.status,
	    again.body_out);
	cr_expect_eq(harness_count_key(&hs, "/testkit/tx/201", key), 1);
	if (first.status != 201) {
		char *log = harness_log(&hs);
		cr_log_error("%s", log != NULL ? log : "");
		free(log);
	}
	harness_stop(&hs);
	mariadb_destroy(&m);
}
#endif

/* A transactional handler idle on its connection past inflight-ttl looks
 * like a hung node: the server rolls its transaction back and the key is
 * free, as a takeover would free it on the two-phase path.  It is told
 * nothing was done; the retry runs once. */
Test(tx, idle_past_inflight_ttl_is_rolled_back, .timeout = 60)
{
	const char *key = call_key("tx-idle");
	call first, retry;
	pthread_t t;

	start("inflight-ttl = 1s");
	first = call_make(h.addr, "/testkit/tx/201?ms=3000", key, NULL);
	pthread_create(&t, NULL, call_thread, &first);
	cr_assert(harness_await_started(&h, "/testkit/tx/201", key, 1));
	call_sleep(2000);
	retry = call_make(h.addr, "/testkit/tx/201", key, NULL);
	send_until_settled(&retry);
	cr_expect_eq(retry.status, 201, "%d %s", retry.status, retry.body_out);
	cr_expect_str_eq(retry.replayed, "");
	pthread_join(t, NULL);
	cr_expect_eq(first.status, 503, "%d %s", first.status, first.body_out);
	cr_expect_eq(effects(key, NULL), 1);
	cr_expect_eq(effects(key, retry.exec), 1);
	harness_stop(&h);
}

/* With inflight-wait, a duplicate waits for the first's COMMIT and
 * replays its answer. */
Test(tx, duplicate_waits_and_replays, .timeout = 60)
{
	const char *key = call_key("tx-wait");
	call first, dup;
	pthread_t t;

	start("inflight-wait = 5s");
	first = call_make(h.addr, "/testkit/tx/201?ms=1000", key, NULL);
	pthread_create(&t, NULL, call_thread, &first);
	cr_assert(harness_await_started(&h, "/testkit/tx/201", key, 1));
	dup = call_one(h.addr, "/testkit/tx/201?ms=1000", key, NULL);
	pthread_join(t, NULL);
	cr_expect_eq(first.status, 201);
	cr_expect_eq(dup.status, 201, "%d %s", dup.status, dup.body_out);
	cr_expect_str_eq(dup.replayed, "true");
	cr_expect_str_eq(dup.exec, first.exec);
	cr_expect_eq(effects(key, NULL), 1);
	harness_stop(&h);
}

/* ---------------------------------- how long a key can be held (review) */

static long long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* DESIGN 2.7: "A duplicate's INSERT IGNORE waits on its row lock for at
 * most inflight-wait ..., then answers 409 IDEMPOTENCY_IN_FLIGHT".  Each
 * lock-wait timeout is retried CONTENTION_TRIES (6) times inside
 * my_tx_begin, and the middleware only starts its inflight-wait deadline
 * after the first IDEM_ERR_BUSY, then calls tx_begin again: the duplicate
 * holds its worker thread (and a plugin-pool connection) for about
 * 2 * 6 * inflight-wait. */
Test(tx, duplicate_wait_is_bounded_by_inflight_wait, .timeout = 120)
{
	harness hn;
	const char *key = call_key("rv-wait");
	call first, dup;
	pthread_t t;
	long long t0, took;

	start_on(&hn, "threads = 8\nworkers = 1", "inflight-wait = 1s");
	first = call_make(hn.addr, "/testkit/tx/201?ms=40000", key, NULL);
	pthread_create(&t, NULL, call_thread, &first);
	cr_assert(harness_await_started(&hn, "/testkit/tx/201", key, 1));
	t0 = now_ms();
	dup = call_one(hn.addr, "/testkit/tx/201?ms=40000", key, NULL);
	took = now_ms() - t0;
	cr_expect_eq(dup.status, 409, "%d %s", dup.status, dup.body_out);
	cr_expect_lt(took, 3000, "a duplicate with inflight-wait = 1s waited "
	    "%lld ms for its 409", took);
	pthread_join(t, NULL);
	harness_stop(&hn);
}

/* A keyless request to a transactional route whose handler refuses the
 * input before touching the database (400) did not end any transaction,
 * yet tx_check_open logs tx_ended_by_handler at ERROR ("fix the plugin"):
 * with autocommit off and no statement yet, SERVER_STATUS_IN_TRANS is
 * clear. */
Test(tx, keyless_refusal_is_not_a_handler_ending_its_transaction,
    .timeout = 60)
{
	harness hn;
	call a;

	start_on(&hn, "threads = 8\nworkers = 1", "required = false");
	a = call_one(hn.addr, "/testkit/tx/abc", NULL, NULL);
	cr_expect_eq(a.status, 400, "%d %s", a.status, a.body_out);
	call_sleep(300);
	cr_expect(!harness_logged(&hn, "tx_ended_by_handler"), "a handler that "
	    "ran no statement was logged as ending its transaction");
	harness_stop(&hn);
}

/* A node that stops answering without closing its sockets (power loss,
 * kernel panic, partition; here: the worker is SIGSTOPped) would keep its
 * open transaction, and the key's row lock, until the server's
 * wait_timeout (8 h) or TCP keepalive (~2 h) noticed; the server rolls it
 * back once it is idle past inflight-ttl (idle_write_transaction_timeout),
 * and another node's retry runs, as the two-phase path takes a stale
 * reservation over after inflight-ttl.  Handlers here stay under it. */
Test(tx, hung_node_does_not_hold_the_key_past_inflight_ttl,
    .timeout = 120)
{
	harness a, b;
	const char *ktx = call_key("rv-hung-tx"), *k2p = call_key("rv-hung-2p");
	call first, first2p, r;
	pthread_t t, t2;
	int pids[4], n, i, got = 0, got2p = 0;

	start_on(&a, "threads = 8\nworkers = 1", "inflight-ttl = 1s");
	start_on(&b, "threads = 8\nworkers = 1", "inflight-ttl = 1s");
	first = call_make(a.addr, "/testkit/tx/201?ms=900", ktx, NULL);
	first2p = call_make(a.addr, "/testkit/sleep/1500", k2p, NULL);
	pthread_create(&t, NULL, call_thread, &first);
	pthread_create(&t2, NULL, call_thread, &first2p);
	cr_assert(harness_await_started(&a, "/testkit/tx/201", ktx, 1));
	cr_assert(harness_await_started(&a, "/testkit/sleep/1500", k2p, 1));
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
			r = call_one(b.addr, "/testkit/tx/201?ms=900", ktx, NULL);
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

#ifndef TX_POSTGRES
/* ------------------------------------------------------ MySQL's own */

/* The state of key's record in m's database. */
static const char *
record_state_in(const mariadb *m, const char *key)
{
	char sql[256];

	snprintf(sql, sizeof(sql), "SELECT state FROM idempotency_keys WHERE "
	    "idem_key = '%s'", key);
	return state_of(mariadb_sql(m, sql));
}

/* Issue 35.4: a keyless request whose handler loses a deadlock and
 * ignores it (then writes again, in what is a new transaction, and
 * answers 201): the server rolled its transaction back; what it wrote
 * after must not commit alone.  503 TRANSACTION_ROLLED_BACK, no side
 * effect (before: 201, and the write after the deadlock committed). */
Test(tx, keyless_handler_ignoring_a_deadlock_commits_nothing, .timeout = 90)
{
	char release[400], *out;
	call a;
	pthread_t t;
	mariadb m;
	FILE *fp;
	int i, waiting = 0;

	/* a MariaDB of its own: the only transactions there are the
	 * handler's and the one below (the program's tests run at once, and
	 * hold transactions of their own on the shared one) */
	cr_assert_eq(mariadb_start(&m), 0);
	setenv("IDEMFCGI_TEST_FAULTS", "1", 1);
	cr_assert_eq(harness_start(&h, &(harness_opts){ .server = "threads = "
	    "8\nworkers = 1", .mysql = 1, .db = &m, .rest = "pool-size = 8\n",
	    .idem = "required = false" }), 0);
	/* the rows it locks: filled here, never by an instance's deploy */
	out = mariadb_sql(&m, "INSERT IGNORE INTO testkit_locks SELECT seq, 0 "
	    "FROM seq_1_to_201; SELECT COUNT(*) FROM testkit_locks");
	cr_assert(out != NULL && atoi(out) == 201, "rows: %s", out != NULL ?
	    out : "?");
	free(out);
	a = call_make(h.addr, "/testkit/tx/203?deadlock=1", NULL, NULL);
	cr_assert_eq(pthread_create(&t, NULL, call_thread, &a), 0);
	cr_assert(harness_await_started(&h, "/testkit/tx/203", "-", 1));
	/* rows 2 to 201, then row 1, which the handler holds: the heavier
	 * transaction, so the handler's is the deadlock's victim */
	cr_assert_eq(mariadb_sql_background(&m, "START TRANSACTION; UPDATE "
	    "testkit_locks SET n = n + 1 WHERE id >= 2; UPDATE testkit_locks SET "
	    "n = n + 1 WHERE id = 1; DO SLEEP(1); ROLLBACK"), 0);
	/* it waits once it runs its second UPDATE (its statements run in
	 * order; the handler's session is idem's): information_schema's
	 * innodb_trx, cached, was seen to leave such a wait out for
	 * seconds */
	for (i = 0; i < 200 && !waiting; i++) {
		out = mariadb_sql(&m, "SELECT COUNT(*) FROM information_schema."
		    "processlist WHERE user = 'root' AND info = 'UPDATE "
		    "testkit_locks SET n = n + 1 WHERE id = 1'");
		waiting = out != NULL && atoi(out) == 1;
		free(out);
		if (!waiting)
			call_sleep(50);
	}
	/* what the server ran, should it not have waited */
	out = waiting ? NULL : mariadb_sql(&m, "SELECT id, user, command, "
	    "state, info FROM information_schema.processlist WHERE command <> "
	    "'Sleep'");
	/* the handler goes on either way: it holds row 1 till then */
	snprintf(release, sizeof(release), "%s.release", h.testkit_log);
	cr_assert_not_null(fp = fopen(release, "w"));
	fclose(fp);
	pthread_join(t, NULL);
	cr_assert(waiting, "the other transaction never waited for row 1; "
	    "open: %s", out != NULL ? out : "?");
	unlink(release);
	cr_expect_eq(a.status, 503, "%d %s", a.status, a.body_out);
	cr_expect_str_eq(a.code, "TRANSACTION_ROLLED_BACK");
	out = mariadb_sql(&m, "SELECT COUNT(*) FROM testkit_effects WHERE "
	    "path = '/testkit/tx/203'");
	cr_assert_not_null(out);
	cr_expect_eq(atoi(out), 0, "the write after the deadlock committed");
	free(out);
	harness_stop(&h);
	mariadb_destroy(&m);
}

/* Fencing, checked in SQL: a transaction that loses its key (here the
 * server kills its connection, as it does to a partitioned node) cannot
 * commit its side effect; the retry that takes the key is the one that
 * counts, and the first is told nothing was done.  On a MariaDB of its
 * own, so the one open transaction there is the first request's. */
Test(tx, fenced_transaction_cannot_commit, .timeout = 120)
{
	const char *key = call_key("tx-fence");
	char sql[256], *out;
	call first, retry;
	pthread_t t;
	mariadb m;

	cr_assert_eq(mariadb_start(&m), 0);
	cr_assert_eq(harness_start(&h, &(harness_opts){ .server = "threads = 8",
	    .mysql = 1, .db = &m, .rest = "pool-size = 8\n" }), 0);
	first = call_make(h.addr, "/testkit/tx/201?ms=2000", key, NULL);
	pthread_create(&t, NULL, call_thread, &first);
	cr_assert(harness_await_started(&h, "/testkit/tx/201", key, 1));
	out = mariadb_sql(&m, "SELECT trx_mysql_thread_id FROM "
	    "information_schema.innodb_trx WHERE trx_rows_modified > 0");
	cr_assert(out != NULL && atoi(out) > 0, "no open transaction: %s",
	    out != NULL ? out : "?");
	snprintf(sql, sizeof(sql), "KILL %d", atoi(out));
	free(out);
	free(mariadb_sql(&m, sql));
	retry = call_make(h.addr, "/testkit/tx/201", key, NULL);
	send_until_settled(&retry);
	cr_expect_eq(retry.status, 201, "%d %s", retry.status, retry.body_out);
	pthread_join(t, NULL);
	cr_expect_eq(first.status, 503, "%d %s", first.status, first.body_out);
	cr_expect_str_eq(first.code, "TRANSACTION_ROLLED_BACK");
	snprintf(sql, sizeof(sql), "SELECT COUNT(*), SUM(exec = '%s') FROM "
	    "testkit_effects WHERE idem_key = '%s'", retry.exec, key);
	out = mariadb_sql(&m, sql);
	cr_expect(out != NULL && strncmp(out, "1\t1", 3) == 0,
	    "side effects (all, the retry's): %s", out != NULL ? out : "?");
	free(out);
	retry = call_one(h.addr, "/testkit/tx/201", key, NULL);
	cr_expect_str_eq(retry.replayed, "true");
	harness_stop(&h);
	mariadb_destroy(&m);
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
	holder_arg *ha = arg;

	free(mariadb_sql(&ha->m, ha->sql));
	return NULL;
}

Test(tx, new_key_is_not_in_flight_during_a_purge, .timeout = 120)
{
	harness hn;
	holder_arg ha;
	pthread_t t;
	call a;
	const char *key = call_key("rv-purge");

	/* a MariaDB of its own: every row of it is made expired */
	cr_assert_eq(mariadb_start(&ha.m), 0);
	cr_assert_eq(harness_start(&hn, &(harness_opts){
	    .server = "threads = 8\nworkers = 1", .mysql = 1, .db = &ha.m,
	    .rest = "pool-size = 8\n" }), 0);
	for (int i = 0; i < 20; i++) {
		char k[32];
		snprintf(k, sizeof(k), "old-%d", i);
		call_one(hn.addr, "/testkit/status/201", k, NULL);
	}
	/* every row expired, as after a quiet night */
	free(mariadb_sql(&ha.m, "UPDATE idempotency_keys SET expires_at = "
	    "UTC_TIMESTAMP(6) - INTERVAL 1 DAY"));
	/* a purge whose locks are held a while (by an open transaction) */
	ha.sql = "BEGIN; DELETE FROM idempotency_keys WHERE state = "
	    "'committed' AND expires_at < UTC_TIMESTAMP(6) LIMIT 1000; "
	    "SELECT SLEEP(0.6); ROLLBACK";
	pthread_create(&t, NULL, hold_sql, &ha);
	call_sleep(200);
	a = call_one(hn.addr, "/testkit/status/201", key, NULL);
	cr_expect_eq(a.status, 201, "a never-seen key got %d %s", a.status,
	    a.code);
	pthread_join(t, NULL);
	harness_stop(&hn);
	mariadb_destroy(&ha.m);
}

/* ------------------------------ lock waits and read timeouts (issue 23) */

/*
 * DESIGN 2.7: a reservation's INSERT waits up to inflight-wait on the row
 * lock of a running transaction, and that wait is contention however it
 * compares with [mysql] read-timeout.  Here inflight-wait (8 s) is four
 * times read-timeout (the tests' 2 s).  Key a's first request outlasts the wait: its
 * transactional duplicate and a two-phase request of another route under
 * the key both get 409 IN_FLIGHT.  Key b's first commits within it: its
 * duplicate replays, the other route's request is a conflict.  Nobody is
 * told the store is unavailable, no outage is logged or counted, and each
 * key ran once.
 */
Test(tx, lock_wait_longer_than_read_timeout_is_contention, .timeout = 120)
{
	harness hn;
	const char *ka = call_key("lw-a"), *kb = call_key("lw-b");
	call first[2], dup[4];
	pthread_t t[6];
	char *text;
	int i;

	setenv("IDEMFCGI_TEST_FAULTS", "1", 1);
	cr_assert_eq(harness_start(&hn, &(harness_opts){
	    .server = "threads = 8\nworkers = 1", .mysql = 1,
	    .idem = "inflight-ttl = 30s\ninflight-wait = 8s",
	    .rest = "pool-size = 8\n[metrics]\n"
	    "enabled = true\n" }), 0);
	first[0] = call_make(hn.addr, "/testkit/tx/201?ms=12000", ka, NULL);
	first[1] = call_make(hn.addr, "/testkit/tx/201?ms=5000", kb, NULL);
	for (i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, call_thread, &first[i]);
	cr_assert(harness_await_started(&hn, "/testkit/tx/201", ka, 1));
	cr_assert(harness_await_started(&hn, "/testkit/tx/201", kb, 1));
	dup[0] = call_make(hn.addr, "/testkit/tx/201?ms=12000", ka, NULL);
	dup[1] = call_make(hn.addr, "/testkit/status/201", ka, NULL);
	dup[2] = call_make(hn.addr, "/testkit/tx/201?ms=5000", kb, NULL);
	dup[3] = call_make(hn.addr, "/testkit/status/201", kb, NULL);
	for (i = 0; i < 4; i++)
		pthread_create(&t[2 + i], NULL, call_thread, &dup[i]);
	for (i = 0; i < 6; i++)
		pthread_join(t[i], NULL);
	for (i = 0; i < 2; i++) {
		cr_expect_eq(first[i].status, 201, "%d %s", first[i].status,
		    first[i].body_out);
		cr_expect_eq(dup[i].status, 409, "key a, duplicate %d: %d %s", i,
		    dup[i].status, dup[i].body_out);
		cr_expect_str_eq(dup[i].code, "IDEMPOTENCY_IN_FLIGHT");
	}
	cr_expect_eq(dup[2].status, 201, "%d %s", dup[2].status,
	    dup[2].body_out);
	cr_expect_str_eq(dup[2].replayed, "true");
	cr_expect_str_eq(dup[2].exec, first[1].exec);
	cr_expect_eq(dup[3].status, 409, "%d %s", dup[3].status,
	    dup[3].body_out);
	cr_expect_str_eq(dup[3].code, "IDEMPOTENCY_CONFLICT");
	cr_expect_eq(effects(ka, NULL), 1);
	cr_expect_eq(effects(kb, NULL), 1);
	cr_expect_eq(harness_count(&hn, "/testkit/status/201"), 0);
	cr_assert_not_null(text = harness_scrape(&hn));
	cr_expect_eq(harness_outcome(text, "store_unavailable"), 0, "%s", text);
	cr_expect_geq(harness_outcome(text, "contended"), 1, "%s", text);
	free(text);
	cr_expect(!harness_logged(&hn, "store_unavailable"), "a lock wait was "
	    "logged as a store outage");
	cr_expect(!harness_logged(&hn, "Lost connection"), "a lock wait was "
	    "cut by the read timeout");
	harness_stop(&hn);
}

/*
 * A worker killed while its reservation's INSERT waits on a running
 * transaction's row lock leaves that INSERT to the server, which runs it
 * once the lock is free (it does not read the dead connection meanwhile):
 * the row lands under the dead worker's owner after its master's first
 * sweeps found nothing, and would answer 409 until inflight-ttl.  The
 * master sweeps once more after the longest such wait (inflight-wait and
 * its margin), so the key is free again soon after, and its retry runs
 * once.
 */
Test(tx, killed_worker_insert_landing_late_is_released, .timeout = 120)
{
	harness a, b;
	const char *key = call_key("lw-orphan");
	call first, dup, retry;
	pthread_t t1, t2;
	int pids[4], n, i, waiting = 0;
	const char *state = "";
	char *out;
	mariadb m;

	/* a MariaDB of its own: the one lock wait there is the duplicate's */
	cr_assert_eq(mariadb_start(&m), 0);
	setenv("IDEMFCGI_TEST_FAULTS", "1", 1);
	for (i = 0; i < 2; i++)
		cr_assert_eq(harness_start(i == 0 ? &a : &b, &(harness_opts){
		    .server = "threads = 8\nworkers = 1", .mysql = 1, .db = &m,
		    .idem = "inflight-ttl = 60s\ninflight-wait = 8s",
		    .rest = "pool-size = 8\n" }), 0);
	/* rolled back (503) after 7 s, when the master's first three sweeps
	 * (at its death, 1 s and 5 s after) are done: the waiting INSERT then
	 * gets the lock */
	first = call_make(a.addr, "/testkit/tx/503?ms=7000", key, NULL);
	pthread_create(&t1, NULL, call_thread, &first);
	cr_assert(harness_await_started(&a, "/testkit/tx/503", key, 1));
	dup = call_make(b.addr,
 "/testkit/status/201", key, NULL);
	pthread_create(&t2, NULL, call_thread, &dup);
	/* the duplicate's INSERT waits on the first's row lock */
	for (i = 0; i < 50 && !waiting; i++) {
		call_sleep(50);
		out = mariadb_sql(&m, "SELECT COUNT(*) FROM "
		    "information_schema.innodb_trx WHERE trx_state = 'LOCK WAIT'");
		waiting = out != NULL && atoi(out) > 0;
		free(out);
	}
	cr_assert(waiting, "the duplicate's INSERT never waited on the lock");
	n = harness_workers(&b, pids, 4);
	cr_assert_eq(n, 1);
	kill(pids[0], SIGKILL);
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	cr_expect_eq(first.status, 503, "%d %s", first.status, first.body_out);
	cr_expect_eq(dup.status, -1, "%d %s", dup.status, dup.body_out);
	/* the INSERT lands as the lock frees, under the dead worker */
	for (i = 0; i < 30 && strcmp(record_state_in(&m, key), "in_flight") !=
	    0; i++)
		call_sleep(100);
	cr_expect_lt(i, 30, "the dead worker's INSERT never landed");
	/* its master's sweep after inflight-wait and its margin frees it */
	for (i = 0; i < 200; i++) {
		state = record_state_in(&m, key);
		if (strcmp(state, "none") == 0)
			break;
		call_sleep(100);
	}
	cr_expect_str_eq(state, "none", "the dead worker's reservation stayed");
	retry = call_one(a.addr, "/testkit/status/201", key, NULL);
	cr_expect_eq(retry.status, 201, "%d %s", retry.status, retry.body_out);
	cr_expect_eq(harness_count_key(&a, "/testkit/status/201", key), 1);
	out = mariadb_sql(&m, "SELECT COUNT(*) FROM testkit_effects");
	cr_expect(out != NULL && atoi(out) == 0, "rolled back effects: %s",
	    out != NULL ? out : "?");
	free(out);
	harness_stop(&a);
	harness_stop(&b);
	mariadb_destroy(&m);
}

#else
/* -------------------------------------------------- PostgreSQL's own */

/* Issue 35.4 on PostgreSQL: a keyless request whose handler loses a
 * deadlock and ignores it.  The server aborted its transaction; nothing
 * of it commits: 503 TRANSACTION_ROLLED_BACK, no side effect.  The other
 * session waits deadlock_timeout 10 s, so the handler's (1 s) is the one
 * that finds the deadlock, and loses it; its lock waits end at
 * lock_timeout (inflight-wait, 5 s here) only after that. */
Test(tx, keyless_handler_ignoring_a_deadlock_commits_nothing, .timeout = 90)
{
	char release[400], *out;
	call a;
	pthread_t t;
	postgres own;
	FILE *fp;
	int i, waiting = 0;

	/* a server of its own, as on MySQL */
	cr_assert_eq(postgres_start(&own), 0);
	setenv("IDEMFCGI_TEST_FAULTS", "1", 1);
	cr_assert_eq(harness_start(&h, &(harness_opts){ .server = "threads = "
	    "8\nworkers = 1", .pg = &own, .rest = "pool-size = 8\n",
	    .idem = "required = false\ninflight-wait = 5s" }), 0);
	/* the rows it locks: filled here, never by an instance's deploy */
	free(postgres_sql(&own, "INSERT INTO testkit_locks SELECT g, 0 FROM "
	    "generate_series(1, 201) g ON CONFLICT DO NOTHING"));
	a = call_make(h.addr, "/testkit/tx/203?deadlock=1", NULL, NULL);
	cr_assert_eq(pthread_create(&t, NULL, call_thread, &a), 0);
	cr_assert(harness_await_started(&h, "/testkit/tx/203", "-", 1));
	cr_assert_eq(postgres_sql_background(&own, "BEGIN; SET LOCAL "
	    "deadlock_timeout = '10s'; UPDATE testkit_locks SET n = n + 1 "
	    "WHERE id >= 2; UPDATE testkit_locks SET n = n + 1 WHERE id = 1; "
	    "SELECT pg_sleep(1); ROLLBACK"), 0);
	for (i = 0; i < 200 && !waiting; i++) {
		out = postgres_sql(&own, "SELECT COUNT(*) FROM pg_stat_activity "
		    "WHERE wait_event_type = 'Lock' AND query LIKE '%id = 1%'");
		waiting = out != NULL && atoi(out) == 1;
		free(out);
		if (!waiting)
			call_sleep(50);
	}
	out = waiting ? NULL : postgres_sql(&own, "SELECT pid, state, "
	    "wait_event_type, query FROM pg_stat_activity WHERE xact_start IS "
	    "NOT NULL");
	/* the handler goes on either way: it holds row 1 till then */
	snprintf(release, sizeof(release), "%s.release", h.testkit_log);
	cr_assert_not_null(fp = fopen(release, "w"));
	fclose(fp);
	pthread_join(t, NULL);
	cr_assert(waiting, "the other transaction never waited for row 1; "
	    "open: %s", out != NULL ? out : "?");
	unlink(release);
	cr_expect_eq(a.status, 503, "%d %s", a.status, a.body_out);
	cr_expect_str_eq(a.code, "TRANSACTION_ROLLED_BACK");
	out = postgres_sql(&own, "SELECT COUNT(*) FROM testkit_effects WHERE "
	    "path = '/testkit/tx/203'");
	cr_assert_not_null(out);
	cr_expect_eq(atoi(out), 0, "the write after the deadlock committed");
	free(out);
	harness_stop(&h);
	postgres_destroy(&own);
}

/* Fencing on PostgreSQL: the server ends the session of a transaction
 * that holds its key (pg_terminate_backend, as it ends one idle past
 * inflight-ttl): its side effect never commits, the retry's does, and
 * the first is told nothing was done.  On a server of its own, so the
 * one session idle in a transaction there is the first request's. */
Test(tx, fenced_transaction_cannot_commit, .timeout = 120)
{
	const char *key = call_key("tx-fence");
	char sql[256], *out;
	call first, retry;
	pthread_t t;
	postgres own;

	cr_assert_eq(postgres_start(&own), 0);
	setenv("IDEMFCGI_TEST_FAULTS", "1", 1);
	cr_assert_eq(harness_start(&h, &(harness_opts){ .server = "threads = 8",
	    .pg = &own, .rest = "pool-size = 8\n" }), 0);
	first = call_make(h.addr, "/testkit/tx/201?ms=2000", key, NULL);
	pthread_create(&t, NULL, call_thread, &first);
	cr_assert(harness_await_started(&h, "/testkit/tx/201", key, 1));
	out = postgres_sql(&own, "SELECT pg_terminate_backend(pid) FROM "
	    "pg_stat_activity WHERE state = 'idle in transaction'");
	cr_assert(out != NULL && strncmp(out, "t", 1) == 0, "no session in a "
	    "transaction: %s", out != NULL ? out : "?");
	free(out);
	retry = call_make(h.addr, "/testkit/tx/201", key, NULL);
	send_until_settled(&retry);
	cr_expect_eq(retry.status, 201, "%d %s", retry.status, retry.body_out);
	pthread_join(t, NULL);
	cr_expect_eq(first.status, 503, "%d %s", first.status, first.body_out);
	cr_expect_str_eq(first.code, "TRANSACTION_ROLLED_BACK");
	snprintf(sql, sizeof(sql), "SELECT COUNT(*), COUNT(*) FILTER (WHERE "
	    "exec = '%s') FROM testkit_effects WHERE idem_key = '%s'",
	    retry.exec, key);
	out = postgres_sql(&own, sql);
	cr_expect(out != NULL && strncmp(out, "1\t1", 3) == 0,
	    "side effects (all, the retry's): %s", out != NULL ? out : "?");
	free(out);
	retry = call_one(h.addr, "/testkit/tx/201", key, NULL);
	cr_expect_str_eq(retry.replayed, "true");
	harness_stop(&h);
	postgres_destroy(&own);
}
#endif
