/*
 * test_workers.c - the process model: worker crashes, restarts, reloads,
 * lease renewal through the database.  A private MariaDB for the program.
 */
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "calls.h"
#include "harness.h"
#include "mariadb.h"

/* Starts an instance; mysql selects the store. */
static void
start(harness *h, int mysql, const char *server, const char *idem)
{
	cr_assert_eq(harness_start(h, &(harness_opts){ .server = server,
	    .idem = idem, .mysql = mysql }), 0);
}

/* The workers of h once there are n of them (the master forks them after
 * its socket is up); returns how many there are after up to 5 s. */
static int
workers(harness *h, int *pids, int n)
{
	int i, got = 0;

	for (i = 0; i < 100; i++) {
		if ((got = harness_workers(h, pids, 8)) == n)
			break;
		call_sleep(50);
	}
	return got;
}

/* Retries c until it is not a 409 in flight, a 503 or a failed
 * connection, for up to 300 tries 20 ms apart. */
static void
until_final(call *c)
{
	int i;

	for (i = 0; i < 300; i++) {
		call_send(c);
		if (c->status != -1 && c->status != 503 && !(c->status == 409 &&
		    strcmp(c->code, "IDEMPOTENCY_IN_FLIGHT") == 0))
			return;
		call_sleep(20);
	}
}

/* A handler crashes its worker; the retry runs again, long before
 * inflight-ttl (60 s here) could free the key. */
static void
crash_then_retry(int mysql)
{
	harness h;
	call c;
	const char *key = call_key(mysql ? "crash-my" : "crash-mem");

	start(&h, mysql, mysql ? "workers = 2" : NULL, "inflight-ttl = 60s");
	c = call_one(h.addr, "/testkit/crash-once", key, NULL);
	cr_expect_eq(c.status, -1, "the worker should have died");
	c = call_make(h.addr, "/testkit/crash-once", key, NULL);
	until_final(&c);
	cr_expect_eq(c.status, 201, "%d %s", c.status, c.body_out);
	cr_expect_str_eq(c.replayed, "");
	cr_expect_eq(harness_count_key(&h, "/testkit/crash-once", key), 1);
	/* the master releases first and logs after: the retry may be faster */
	cr_expect(harness_await_log(&h, "died (killed by signal 6)"));
	if (mysql)
		cr_expect(harness_await_log(&h, "released 1 reservation(s) of "
		    "dead worker"));
	/* and the answer now stays */
	c = call_one(h.addr, "/testkit/crash-once", key, NULL);
	cr_expect_str_eq(c.replayed, "true");
	cr_expect_eq(harness_stop(&h), 0);
}

Test(workers, crash_then_retry_memory)
{
	crash_then_retry(0);
}

Test(workers, crash_then_retry_mysql)
{
	crash_then_retry(1);
}

/* kill -9 of a worker: the master starts another; service goes on. */
Test(workers, killed_worker_restarted)
{
	harness h;
	int before[8], after[8], nb, na, i, tries;
	call c;

	start(&h, 1, "workers = 2", NULL);
	nb = workers(&h, before, 2);
	cr_assert_eq(nb, 2);
	kill(before[0], SIGKILL);
	for (tries = 0; tries < 100; tries++) {
		na = harness_workers(&h, after, 8);
		if (na == 2 && after[0] != before[0] && after[1] != before[0])
			break;
		call_sleep(50);
	}
	cr_expect_lt(tries, 100, "no worker replaced the killed one");
	for (i = 0; i < 10; i++) {
		c = call_one(h.addr, "/testkit/echo", call_key("after-kill"), NULL);
		cr_expect(c.status == 201, "%d", c.status);
	}
	cr_expect(harness_await_log(&h, "killed by signal 9"));
	cr_expect_eq(harness_stop(&h), 0);
}

/* A reservation that reaches MariaDB after its worker died (the INSERT
 * was on its way): the master's later sweep releases it too. */
Test(workers, late_reservation_of_dead_worker_swept)
{
	char needle[64], instance[17], sql[700], *log, *p, *rows;
	const char *key = call_key("late-insert");
	harness h;
	mariadb m;
	int pids[8];

	cr_assert_eq(mariadb_from_env(&m), 0);
	start(&h, 1, NULL, NULL);
	cr_assert_eq(workers(&h, pids, 1), 1);
	/* the worker's instance, from the master's line about it */
	snprintf(needle, sizeof(needle), "worker %d started (instance ",
	    pids[0]);
	cr_assert(harness_await_log(&h, needle));
	log = harness_log(&h);
	cr_assert_not_null(p = strstr(log, needle));
	snprintf(instance, sizeof(instance), "%.16s", p + strlen(needle));
	free(log);
	kill(pids[0], SIGKILL);
	cr_assert(harness_await_log(&h, "released 0 reservation(s) of dead "
	    "worker"));
	/* its last INSERT lands now */
	snprintf(sql, sizeof(sql), "INSERT INTO idempotency_keys (scope_hash, "
	    "idem_key, fingerprint, state, owner, request_id, reserved_at, "
	    "lease_at, expires_at) VALUES (UNHEX(REPEAT('00', 32)), '%s', "
	    "UNHEX(REPEAT('00', 32)), 'in_flight', '%s.00000000000000000000000000"
	    "000000', 'late', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), "
	    "UTC_TIMESTAMP(6) + INTERVAL 1 DAY)", key, instance);
	free(mariadb_sql(&m, sql));
	cr_expect(harness_await_log(&h, "released 1 more reservation(s) of dead "
	    "worker"));
	snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM idempotency_keys "
	    "WHERE idem_key = '%s'", key);
	rows = mariadb_sql(&m, sql);
	cr_expect(rows != NULL && atoi(rows) == 0, "still there: %s", rows);
	free(rows);
	cr_expect_eq(harness_stop(&h), 0);
}

typedef struct stream {
	const char *addr;
	int id, n, ok, failed;
} stream;

/* Sends n requests one after another, each with its own key. */
static void *
stream_thread(void *arg)
{
	stream *s = arg;
	char key[64];
	int i;

	for (i = 0; i < s->n; i++) {
		call c;
		snprintf(key, sizeof(key), "hup-%ld-%d-%d", (long)getpid(), s->id,
		    i);
		c = call_one(s->addr, "/testkit/sleep/10", key, NULL);
		if (c.status == 201 && c.replayed[0] == '\0')
			s->ok++;
		else
			s->failed++;
	}
	return NULL;
}

/* SIGHUP replaces the workers without dropping a request, in flight or
 * arriving. */
static void
reload_drops_nothing(int mysql)
{
	harness h;
	stream s[3];
	pthread_t t[3];
	call slow;
	pthread_t ts;
	int i, before[8], after[8], nb, na;

	start(&h, mysql, mysql ? "workers = 2" : NULL, NULL);
	nb = workers(&h, before, mysql ? 2 : 1);
	cr_assert_eq(nb, mysql ? 2 : 1);
	slow = call_make(h.addr, "/testkit/sleep/800", call_key("hup-slow"), NULL);
	pthread_create(&ts, NULL, call_thread, &slow);
	for (i = 0; i < 3; i++) {
		s[i].addr = h.addr;
		s[i].id = i;
		s[i].n = 60;
		s[i].ok = s[i].failed = 0;
		pthread_create(&t[i], NULL, stream_thread, &s[i]);
	}
	call_sleep(200);
	kill(h.pid, SIGHUP);
	call_sleep(300);
	kill(h.pid, SIGHUP);
	for (i = 0; i < 3; i++) {
		pthread_join(t[i], NULL);
		cr_expect_eq(s[i].ok, 60, "stream %d: %d failed", i, s[i].failed);
	}
	pthread_join(ts, NULL);
	cr_expect_eq(slow.status, 201, "the request in flight: %d", slow.status);
	/* the old generation exits once it has drained */
	na = workers(&h, after, nb);
	cr_expect_eq(na, nb);
	for (i = 0; i < na; i++) {
		int j;
		for (j = 0; j < nb; j++)
			cr_expect_neq(after[i], before[j], "worker %d was not "
			    "replaced", before[j]);
	}
	cr_expect(harness_await_log(&h, "reloaded"));
	cr_expect_eq(harness_stop(&h), 0);
}

Test(workers, reload_drops_nothing_memory, .timeout = 60)
{
	reload_drops_nothing(0);
}

Test(workers, reload_drops_nothing_mysql, .timeout = 60)
{
	reload_drops_nothing(1);
}

/* A bad config on SIGHUP changes nothing. */
Test(workers, bad_reload_keeps_workers)
{
	harness h;
	int before[8], after[8];
	FILE *fp;
	call c;

	start(&h, 0, NULL, NULL);
	cr_assert_eq(workers(&h, before, 1), 1);
	fp = fopen(h.conf, "a");
	fputs("\n[server]\nthreads = many\n", fp);
	fclose(fp);
	kill(h.pid, SIGHUP);
	call_sleep(300);
	cr_expect(harness_await_log(&h, "not reloaded"));
	cr_assert_eq(harness_workers(&h, after, 8), 1);
	cr_expect_eq(after[0], before[0]);
	c = call_one(h.addr, "/testkit/echo", call_key("after-bad"), NULL);
	cr_expect_eq(c.status, 201);
	cr_expect_eq(harness_stop(&h), 0);
}

/* A live handler that runs 3 x inflight-ttl is not taken over: its lease
 * is renewed in the database. */
Test(workers, slow_handler_keeps_its_lease_in_mysql)
{
	harness h;
	call first, dup;
	pthread_t t;
	const char *key = call_key("slow-my");

	start(&h, 1, "workers = 2", "inflight-ttl = 1s");
	first = call_make(h.addr, "/testkit/sleep/3000", key, NULL);
	pthread_create(&t, NULL, call_thread, &first);
	cr_assert(harness_await_started(&h, "/testkit/sleep/3000", key, 1));
	call_sleep(1500);
	dup = call_one(h.addr, "/testkit/sleep/3000", key, NULL);
	cr_expect_eq(dup.status, 409);
	cr_expect_str_eq(dup.code, "IDEMPOTENCY_IN_FLIGHT");
	call_sleep(1000);
	dup = call_one(h.addr, "/testkit/sleep/3000", key, NULL);
	cr_expect_eq(dup.status, 409);
	pthread_join(t, NULL);
	cr_expect_eq(first.status, 201);
	cr_expect_eq(harness_count_key(&h, "/testkit/sleep/3000", key), 1);
	cr_expect(!harness_logged(&h, "took over"));
	cr_expect_eq(harness_stop(&h), 0);
}

/* ----------------------------------------------------------- lifecycle */

/* Stops h's master with SIGTERM and waits for it, keeping its directory.
 * Returns its exit status, or -1. */
static int
stop_keeping_files(harness *h)
{
	int status;

	kill(h->pid, SIGTERM);
	if (waitpid(h->pid, &status, 0) != h->pid || !WIFEXITED(status))
		return -1;
	h->pid = 0;
	return WEXITSTATUS(status);
}

/* How many lines of the testkit's lifecycle file of h are line (or, when
 * line ends with a space, start with it). */
static int
lifecycle_lines(const harness *h, const char *line)
{
	char path[400], *text, *p;
	size_t len = strlen(line);
	int n = 0;

	snprintf(path, sizeof(path), "%s.lifecycle", h->testkit_log);
	if ((text = harness_slurp(path)) == NULL)
		return -1;
	for (p = text; *p != '\0'; p = strchr(p, '\n') + 1) {
		n += strncmp(p, line, len) == 0 && (p[len] == '\n' ||
		    line[len - 1] == ' ');
		if (strchr(p, '\n') == NULL)
			break;
	}
	free(text);
	return n;
}

/* The lifecycle file of h as one string, for messages (caller frees). */
static char *
lifecycle_text(const harness *h)
{
	char path[400];

	snprintf(path, sizeof(path), "%s.lifecycle", h->testkit_log);
	return harness_slurp(path);
}

/*
 * Which process runs which hook, and how often (idemfcgi.h "Lifecycle"):
 * the master checks (setup as a check, deploy, teardown) at start-up and
 * at each SIGHUP; each worker sets up once, not as a check, and tears
 * down after its last request; --check sets up and tears down, and never
 * deploys.
 */
Test(lifecycle, hooks_per_process, .timeout = 60)
{
	harness h;
	int first[8], second[8], i, j;
	char line[64], cmd[1200], *all;
	long master;

	start(&h, 1, "workers = 2", NULL);
	master = (long)h.pid;
	cr_assert_eq(workers(&h, first, 2), 2);
	kill(h.pid, SIGHUP);
	cr_assert(harness_await_log(&h, "reloaded"));
	/* the first generation drains and exits */
	for (i = 0; i < 100; i++) {
		if (workers(&h, second, 2) == 2 && second[0] != first[0] &&
		    second[0] != first[1] && second[1] != first[0] &&
		    second[1] != first[1])
			break;
		call_sleep(50);
	}
	cr_assert_lt(i, 100, "the workers were not replaced");
	cr_assert_eq(stop_keeping_files(&h), 0);
	all = lifecycle_text(&h);
	snprintf(line, sizeof(line), "setup %ld check", master);
	cr_expect_eq(lifecycle_lines(&h, line), 2, "%s", all);
	snprintf(line, sizeof(line), "deploy %ld", master);
	cr_expect_eq(lifecycle_lines(&h, line), 2, "%s", all);
	snprintf(line, sizeof(line), "teardown %ld", master);
	cr_expect_eq(lifecycle_lines(&h, line), 2, "%s", all);
	for (j = 0; j < 2; j++) {
		int *gen = j == 0 ? first : second;
		for (i = 0; i < 2; i++) {
			snprintf(line, sizeof(line), "setup %d", gen[i]);
			cr_expect_eq(lifecycle_lines(&h, line), 1, "%s", all);
			snprintf(line, sizeof(line), "teardown %d", gen[i]);
			cr_expect_eq(lifecycle_lines(&h, line), 1, "%s", all);
		}
	}
	/* 3 lines for each of the master's two checks, 2 for each worker */
	for (i = 0, j = 0; all != NULL && all[i] != '\0'; i++)
		j += all[i] == '\n';
	cr_expect_eq(j, 6 + 4 * 2, "%s", all);
	free(all);

	/* --check on the same config: a setup as a check and its teardown */
	snprintf(cmd, sizeof(cmd), "'%s/idemfcgi' --check -c '%s' "
	    ">/dev/null 2>&1", harness_builddir(), h.conf);
	cr_assert_eq(system(cmd), 0);
	all = lifecycle_text(&h);
	cr_expect_eq(lifecycle_lines(&h, "deploy "), 2, "%s", all);
	for (i = 0, j = 0; all != NULL && all[i] != '\0'; i++)
		j += all[i] == '\n';
	cr_expect_eq(j, 6 + 4 * 2 + 2, "--check: %s", all);
	free(all);
	harness_stop(&h);
}

/* A worker whose shutdown-grace runs out with a handler still running
 * exits without teardown: the handler may still use the plugin's data. */
Test(lifecycle, no_teardown_under_a_running_handler, .timeout = 60)
{
	harness h;
	int pids[8];
	char line[64], *all;
	pthread_t t;
	call slow;

	char *conf, *at;
	FILE *fp;
	int old, i;

	/* the harness's shutdown-grace is 10 s: reloaded with 300 ms */
	start(&h, 0, NULL, NULL);
	cr_assert_eq(workers(&h, pids, 1), 1);
	old = pids[0];
	conf = harness_slurp(h.conf);
	cr_assert_not_null(at = strstr(conf, "shutdown-grace = 10s\n"));
	memcpy(at, "shutdown-grace = 1ms\n", 21);  /* as long as "10s" */
	cr_assert_not_null(fp = fopen(h.conf, "w"));
	fputs(conf, fp);
	fclose(fp);
	free(conf);
	kill(h.pid, SIGHUP);
	cr_assert(harness_await_log(&h, "reloaded"));
	for (i = 0; i < 100; i++) {
		if (workers(&h, pids, 1) == 1 && pids[0] != old)
			break;
		call_sleep(50);
	}
	cr_assert_lt(i, 100, "the worker was not replaced");
	slow = call_make(h.addr, "/testkit/sleep/5000", call_key("grace"),
	    NULL);
	pthread_create(&t, NULL, call_thread, &slow);
	cr_assert(harness_await_started(&h, "/testkit/sleep/5000",
	    call_key("grace"), 1));
	stop_keeping_files(&h);

	pthread_join(t, NULL);
	all = lifecycle_text(&h);
	snprintf(line, sizeof(line), "setup %d", pids[0]);
	cr_expect_eq(lifecycle_lines(&h, line), 1, "%s", all);
	snprintf(line, sizeof(line), "teardown %d", pids[0]);
	cr_expect_eq(lifecycle_lines(&h, line), 0, "%s", all);
	free(all);
	harness_stop(&h);
}
