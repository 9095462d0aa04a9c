/*
 * test_mysql_outage.c - the database goes away under a running idemfcgi and
 * comes back: 503 and no execution while it is away, normal service after,
 * without restarting idemfcgi.  Each test has a MariaDB of its own, since
 * it stops, kills or freezes it, and they take turns (one at a time).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include <criterion/criterion.h>
#include <unistd.h>

#include "calls.h"
#include "harness.h"
#include "idem_key.h"
#include "mariadb.h"
#include "notify.h"

/* One outage at a time across the test programs. */
static void
take_turn(void)
{
	cr_assert_eq(harness_outage_turn(), 0);
}

Test(mysql_outage, stopped_then_started, .init = take_turn)
{
	mariadb db;
	harness h;
	call c;
	int i;

	cr_assert_eq(mariadb_start(&db), 0);
	cr_assert_eq(harness_start(&h, &(harness_opts){ .server = "threads = 4",
	    .mysql = 1, .db = &db }), 0);
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

/* The database is not up yet when idemfcgi starts: it serves anyway,
 * keyed routes answer 503 and run nothing until the database comes, then
 * once per key; --check warns (exit 0) or, with --strict, fails. */
Test(mysql_outage, started_before_the_database, .init = take_turn,
    .timeout = 120)
{
	char *conf, *out = NULL, *log;
#ifdef HAVE_SYSTEMD
	char msg[1024];
#endif
	const char *env[2];
	notify_sock n;
	mariadb db;
	harness h;
	call c;
	int i, rc;

	cr_assert_eq(mariadb_start(&db), 0);
	mariadb_stop(&db);
	cr_assert_eq(notify_open(&n), 0);
	env[0] = n.env;
	env[1] = NULL;
	cr_assert_eq(harness_start(&h, &(harness_opts){ .mysql = 1, .db = &db,
	    .env = env }), 0, "idemfcgi did not start without its database");
#ifdef HAVE_SYSTEMD
	/* ready, with the store set aside */
	cr_expect(notify_next(&n, msg, sizeof(msg), NOTIFY_EVENT_MS) > 0 &&
	    notify_has_line(msg, "READY=1") && strstr(msg, "the database is "
	    "not up") != NULL, "%s", msg);
#endif
	for (i = 0; i < 3; i++) {
		c = call_one(h.addr, "/testkit/echo", "early", NULL);
		cr_expect_eq(c.status, 503);
		cr_expect_str_eq(c.code, "IDEMPOTENCY_STORE_UNAVAILABLE");
	}
	cr_expect_eq(harness_count(&h, "/testkit/echo"), 0);

	conf = harness_slurp(h.conf);
	cr_assert_not_null(conf);
	rc = harness_run("--check", conf, &out);
	cr_expect_eq(rc, 0, "--check: %d %s", rc, out);
	cr_expect(out != NULL && strstr(out, "warning: the MySQL database "
	    "cannot be reached") != NULL, "%s", out);
	free(out);
	rc = harness_run("--check --strict", conf, &out);
	cr_expect_eq(rc, 1, "--check --strict: %d %s", rc, out);
	cr_expect(out != NULL && strstr(out, "cannot be reached (--strict)") !=
	    NULL, "%s", out);
	free(out);
	free(conf);

	cr_assert_eq(mariadb_restart(&db), 0);
#ifdef HAVE_SYSTEMD
	cr_expect(notify_await(&n, "RELOADING=1", NULL, NULL));
	cr_expect(notify_next(&n, msg, sizeof(msg), NOTIFY_EVENT_MS) > 0 &&
	    notify_has_line(msg, "READY=1") && strstr(msg, "serving") != NULL,
	    "%s", msg);
#endif
	cr_expect(harness_await_log(&h, "the database answers"));
	/* the waiting workers give way to ones with the store: until then
	 * a keyed request may still meet a waiting one (503) */
	for (i = 0; i < 600; i++) {
		c = call_one(h.addr, "/testkit/echo", "early", NULL);
		if (c.status != 503)
			break;
		cr_expect_str_eq(c.code, "IDEMPOTENCY_STORE_UNAVAILABLE");
		cr_expect_eq(harness_count(&h, "/testkit/echo"), 0);
		call_sleep(50);
	}
	cr_expect_eq(c.status, 201, "after the database came: %d %s",
	    c.status, c.body_out);
	c = call_one(h.addr, "/testkit/echo", "early", NULL);
	cr_expect_str_eq(c.replayed, "true");
	c = call_one(h.addr, "/testkit/echo", "later", NULL);
	cr_expect_eq(c.status, 201);
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", "early"), 1);
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", "later"), 1);
	/* the ledger's deploy ran once the database answered */
	c = call_one(h.addr, "/accounts/w/deposit", "dep-1", "{\"amount\":5}");
	cr_expect_eq(c.status, 201, "%d %s", c.status, c.body_out);
	log = harness_log(&h);
	cr_assert_not_null(log);
	cr_expect_eq(harness_occurrences(log, "store unavailable"), 1, "%s",
	    log);
	/* the 503s while set aside sent nothing: no forget job for the
	 * waiting workers to drain (review of issue 26) */
	cr_expect_eq(harness_occurrences(log, "got no answer"), 0, "%s", log);
	free(log);

	cr_expect_eq(harness_stop(&h), 0);
	notify_close(&n);
	mariadb_destroy(&db);
}

/* Review of issue 26: a worker started again during an outage (its
 * predecessor died) must not set its store aside on its own, where no
 * probe would ever bring it back: it fails its start and is retried, as
 * before, and serves keyed routes once the database is back, without a
 * reload. */
Test(mysql_outage, worker_restarted_in_an_outage_comes_back,
    .init = take_turn, .timeout = 120)
{
	mariadb db;
	harness h;
	call c;
	char *log;
	int pids[4], i;

	cr_assert_eq(mariadb_start(&db), 0);
	cr_assert_eq(harness_start(&h, &(harness_opts){ .mysql = 1, .db = &db,
	    .server = "workers = 1" }), 0);
	c = call_one(h.addr, "/testkit/echo", "before", NULL);
	cr_assert_eq(c.status, 201, "%d %s", c.status, c.body_out);
	cr_assert_eq(mariadb_stop(&db), 0);
	cr_assert_eq(harness_workers(&h, pids, 4), 1);
	kill(pids[0], SIGKILL);
	/* its successor tries the database and fails its start */
	cr_assert(harness_await_log(&h, "at start-up"));
	cr_assert_eq(mariadb_restart(&db), 0);
	for (i = 0; i < 300; i++) {
		c = call_one(h.addr, "/testkit/echo", "after", NULL);
		if (c.status == 201)
			break;
		call_sleep(100);
	}
	cr_expect_eq(c.status, 201, "after the outage: %d %s", c.status,
	    c.body_out);
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", "after"), 1);
	log = harness_log(&h);
	cr_assert_not_null(log);
	cr_expect_eq(harness_occurrences(log, "serving anyway"), 0, "%s", log);
	free(log);
	cr_expect_eq(harness_stop(&h), 0);
	mariadb_destroy(&db);
}

typedef struct load {

	const char *addr;
	int id;
	call c[40];
} load;

/* 40 requests one after another, each with its own key. */
static void *
load_thread(void *arg)
{
	load *l = arg;
	char key[64];
	int i;

	for (i = 0; i < 40; i++) {
		snprintf(key, sizeof(key), "load-%d-%d", l->id, i);
		l->c[i] = call_make(l->addr, "/testkit/sleep/10", strdup(key),
		    NULL);
		snprintf(l->c[i].key_header, sizeof(l->c[i].key_header),
		    "Idempotency-Key: %s", key);
		call_send(&l->c[i]);
		call_sleep(5);
	}
	return NULL;
}

/* MariaDB is killed and restarted while requests flow: requests meanwhile
 * get 503; afterwards every key gets its final answer, and a key runs
 * twice only when its commit met the outage. */
Test(mysql_outage, killed_under_load, .init = take_turn, .timeout = 120)
{
	mariadb db;
	harness h;
	char key[64], hash[17];
	unsigned char zero[32] = { 0 };
	load l[4];
	pthread_t t[4];
	char *log;
	int i, j, tries;

	cr_assert_eq(mariadb_start(&db), 0);
	cr_assert_eq(harness_start(&h, &(harness_opts){
	    .server = "workers = 2\nthreads = 8", .mysql = 1, .db = &db,
	    .idem = "inflight-ttl = 3s", .rest = "pool-size = 8\n" }), 0);
	for (i = 0; i < 4; i++) {
		l[i].addr = h.addr;
		l[i].id = i;
		pthread_create(&t[i], NULL, load_thread, &l[i]);
	}
	call_sleep(150);
	mariadb_kill(&db);
	call_sleep(400);
	cr_assert_eq(mariadb_restart(&db), 0);
	for (i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	for (i = 0; i < 4; i++)
		for (j = 0; j < 40; j++) {
			call *c = &l[i].c[j];
			cr_expect(c->status == 201 || c->status == 503 ||
			    c->status == 409, "%d %s", c->status, c->body_out);
			for (tries = 0; tries < 400 && c->status != 201; tries++) {
				call_sleep(25);
				call_send(c);
			}
			cr_expect_eq(c->status, 201, "never answered: %d %s",
			    c->status, c->body_out);
		}
	log = harness_log(&h);
	for (i = 0; i < 4; i++)
		for (j = 0; j < 40; j++) {
			size_t runs;
			snprintf(key, sizeof(key), "load-%d-%d", i, j);
			runs = harness_count_key(&h, "/testkit/sleep/10", key);
			idem_key_hash(zero, key, strlen(key), hash);
			cr_expect_geq(runs, 1);
			if (runs > 1)
				cr_expect(log != NULL && strstr(log, hash) != NULL,
				    "key %s ran %zu times with nothing logged", key,
				    runs);
		}
	free(log);
	cr_expect_eq(kill(h.pid, 0), 0, "idemfcgi died");
	cr_expect_eq(harness_stop(&h), 0);
	mariadb_destroy(&db);
}

/* MariaDB frozen (SIGSTOP): a request gets 503 once the timeouts run out,
 * never hangs; after SIGCONT the same idemfcgi serves again, and the key
 * whose reserve went unanswered comes free. */
Test(mysql_outage, frozen_database, .init = take_turn, .timeout = 120)
{
	mariadb db;
	harness h;
	char pidfile[300], *pidtext;
	struct timespec t0, t1;
	double took;
	call c;
	pid_t dbpid;
	int tries;

	cr_assert_eq(mariadb_start(&db), 0);
	cr_assert_eq(harness_start(&h, &(harness_opts){ .server = "threads = 4",
	    .mysql = 1, .db = &db, .idem = "inflight-ttl = 3s" }), 0);
	c = call_one(h.addr, "/testkit/echo", "warm", NULL);
	cr_assert_eq(c.status, 201);
	snprintf(pidfile, sizeof(pidfile), "%s/pid", db.dir);
	pidtext = harness_slurp(pidfile);
	cr_assert_not_null(pidtext);
	dbpid = (pid_t)atol(pidtext);
	free(pidtext);

	cr_assert_gt(dbpid, 0);
	cr_assert_eq(kill(dbpid, SIGSTOP), 0);
	{
		char cmd[128];
		snprintf(cmd, sizeof(cmd), "ps -o pid,stat,args -p %ld >&2",
		    (long)dbpid);
		if (system(cmd) != 0)
			cr_log_warn("ps failed");
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	c = call_one(h.addr, "/testkit/echo", "frozen", NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	took = (double)(t1.tv_sec - t0.tv_sec) +
	    (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	cr_log_info("503 after %.1f s (read-timeout 2s, connect-timeout 2s)",
	    took);
	cr_expect_eq(c.status, 503, "%d %s", c.status, c.body_out);
	cr_expect_str_eq(c.code, "IDEMPOTENCY_STORE_UNAVAILABLE");
	/* bounded by the timeouts (a read, a reconnect), not hung */
	cr_expect_lt(took, 20.0);
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", "frozen"), 0);
	kill(dbpid, SIGCONT);

	c = call_make(h.addr, "/testkit/echo", "frozen", NULL);
	for (tries = 0; tries < 400; tries++) {
		call_send(&c);
		if (c.status == 201)
			break;
		call_sleep(25);
	}
	cr_expect_eq(c.status, 201, "after SIGCONT: %d %s", c.status,
	    c.body_out);
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", "frozen"), 1);
	c = call_one(h.addr, "/testkit/echo", "after", NULL);
	cr_expect_eq(c.status, 201);
	cr_expect_eq(harness_stop(&h), 0);
	mariadb_destroy(&db);
}

/* A POST for a thread. */
static void *
post_thread(void *arg)
{
	call_send(arg);
	return NULL;
}

/*
 * Issue 12.4: the database stops between a handler's end and its commit,
 * so the commit waits in the lease thread; it comes back and idemfcgi is
 * told to stop before the thread's next round.  The last attempt of the
 * stop stores the answer: after a restart the retry is replayed, not left
 * in flight until inflight-ttl and then run again.  (A frozen database
 * would not do: it runs the commit it had queued once it thaws.)
 */
Test(mysql_outage, stop_writes_a_deferred_commit, .init = take_turn,
    .timeout = 120)
{
	mariadb db;
	harness h, h2;
	char log[320];
	harness_opts o = { .server = "threads = 2", .mysql = 1, .db = &db,
	    .idem = "inflight-ttl = 60s", .testkit_log = log };
	pthread_t t;
	call first, c;

	cr_assert_eq(mariadb_start(&db), 0);
	/* timeouts of 2 s (mariadb_conf), a grace of 10 s (the harness) */
	/* one testkit log for both instances, outliving the first */
	snprintf(log, sizeof(log), "/tmp/idemfcgi-deferred-%ld.log",
	    (long)getpid());
	harness_log_reset(log);
	cr_assert_eq(harness_start(&h, &o), 0);

	first = call_make(h.addr, "/testkit/sleep/3000", "deferred", NULL);
	pthread_create(&t, NULL, post_thread, &first);
	cr_assert(harness_await_started(&h, "/testkit/sleep/3000", "deferred",
	    1));
	cr_assert_eq(mariadb_stop(&db), 0);

	pthread_join(t, NULL);
	cr_expect_eq(first.status, 201, "the client has its answer");
	cr_expect(harness_await_log(&h, "commit_deferred"), "the commit waits");
	cr_assert_eq(mariadb_restart(&db), 0);
	cr_expect_eq(harness_stop(&h), 0);

	/* a new instance on the same database and testkit log */
	cr_assert_eq(harness_start(&h2, &o), 0);
	c = call_one(h2.addr, "/testkit/sleep/3000", "deferred", NULL);
	cr_expect_eq(c.status, 201, "%d %s", c.status, c.body_out);
	cr_expect_str_eq(c.replayed, "true");
	cr_expect_str_eq(c.exec, first.exec);
	cr_expect_eq(harness_count_key(&h2, "/testkit/sleep/3000", "deferred"),
	    1);
	harness_stop(&h2);
	harness_log_reset(log);
	mariadb_destroy(&db);
}
