/*
 * test_monitoring.c - what the operators' tools see.  promtool (Debian
 * package prometheus, installed by scripts/deps; missing, the tests fail)
 * checks the /metrics text of instances that served every kind of request,
 * on the memory store and on the MySQL store, lint included.  A private
 * MariaDB for the MySQL store.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "calls.h"
#include "fcgi_client.h"
#include "harness.h"

/* ------------------------------------------------------- promtool */

/* "promtool check metrics" on text: its exit status (127: promtool is not
 * installed) and what it printed, into out (size bytes). */
static int
promtool_check(const char *text, char *out, size_t size)
{
	char path[] = "/tmp/idemfcgi-metrics.XXXXXX", cmd[128];
	size_t len = strlen(text), got;
	FILE *fp;
	int fd = mkstemp(path), st;

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, text, len), (ssize_t)len);
	close(fd);
	snprintf(cmd, sizeof(cmd), "promtool check metrics < %s 2>&1", path);
	fp = popen(cmd, "r");
	cr_assert_not_null(fp);
	got = fread(out, 1, size - 1, fp);
	out[got] = '\0';
	st = pclose(fp);
	unlink(path);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* promtool accepts text: no error, no lint problem (nothing printed);
 * fails when promtool is not installed. */
static void
promtool_accepts(const char *text, const char *what)
{
	char out[4096];
	int st = promtool_check(text, out, sizeof(out));

	cr_assert_neq(st, 127, "promtool is not installed: scripts/deps "
	    "installs it (Debian package prometheus): %s", out);
	cr_expect(st == 0 && out[0] == '\0', "promtool check metrics, %s: "
	    "status %d: %s\n%s", what, st, out, text);
}

/* ------------------------------------------------------- instances */

static void
start(harness *h, const harness_opts *o)
{
	cr_assert_eq(harness_start(h, o), 0);
}

/* Scrapes h's metrics: the text (caller frees). */
static char *
scrape(const harness *h)
{
	fc_response r;
	char *text;

	cr_assert_eq(fc_http(h->addr, "GET", "/metrics", NULL, NULL, &r), 0);
	cr_assert_eq(r.status, 200, "%s", r.body);
	text = strdup(r.body);
	fc_response_free(&r);
	return text;
}

/* The outcome counter of a scrape. */
static double
outcome(const char *text, const char *name)
{
	char series[128];

	snprintf(series, sizeof(series),
	    "idemfcgi_idempotency_outcomes_total{outcome=\"%s\"}", name);
	return harness_metric(text, series);
}

/* A POST with a key (NULL: none) and, with api, the scope header. */
static call
post(const harness *h, const char *path, const char *key, const char *body,
    int api)
{
	call c = call_make(h->addr, path, key, body);

	if (api)
		snprintf(c.extra, sizeof(c.extra), "X-Api-Key: ops");
	call_send(&c);
	return c;
}

/* A GET of path: its status. */
static int
get_status(const harness *h, const char *path)
{
	fc_response r;
	int status;

	cr_assert_eq(fc_http(h->addr, "GET", path, NULL, NULL, &r), 0);
	status = r.status;
	fc_response_free(&r);
	return status;
}

/* Scrapes h until the restart of its worker shows; the text. */
static char *
await_restart(const harness *h)
{
	char *text = NULL;
	int i;

	for (i = 0; i < 50; i++) {
		free(text);
		text = scrape(h);
		if (harness_metric(text, "idemfcgi_worker_restarts_total") >= 1 &&
		    harness_metric(text, "idemfcgi_workers") >= 1)
			break;
		call_sleep(100);
	}
	cr_expect_geq(harness_metric(text, "idemfcgi_worker_restarts_total"), 1,
	    "%s", text);
	return text;
}

/*
 * One worker on the memory store, keys scoped by X-Api-Key, 4 records at
 * most, answers of 4 KiB at most: a worker crash and restart, first
 * executions, evictions, replays, a conflict, a request in flight, a
 * missing, an invalid and an unscoped key, released 500 and 503, an
 * answer too large to store, unkeyed, unmatched and refused requests.
 * Returns the scrape after all that (caller frees).
 */
static char *
memory_instance_served_everything(harness *h)
{
	const char *bad[] = { "REQUEST_METHOD", "GET", "REQUEST_URI", "/metrics",
	    "SCRIPT_NAME", "", "REMOTE_ADDR", "10.9.8.7", NULL };
	char longkey[300], name[16], *text;
	call c, slow, dup;
	fc_response r;
	pthread_t t;
	int i;

	start(h, &(harness_opts){ .idem = "scope = header:X-Api-Key\n"
	    "max-entries = 4\nmax-response = 4k",
	    .rest = "[metrics]\nenabled = true\n" });
	c = post(h, "/testkit/crash-once", call_key("mon-crash"), NULL, 1);
	cr_expect_eq(c.status, -1);
	free(await_restart(h));
	for (i = 0; i < 6; i++) {
		snprintf(name, sizeof(name), "mon-%d", i);
		cr_expect_eq(post(h, "/testkit/echo", call_key(name), "{\"n\":1}",
		    1).status, 201);
	}
	for (i = 0; i < 2; i++)
		cr_expect_str_eq(post(h, "/testkit/echo", call_key("mon-5"),
		    "{\"n\":1}", 1).replayed, "true");
	cr_expect_str_eq(post(h, "/testkit/echo", call_key("mon-5"),
	    "{\"n\":2}", 1).code, "IDEMPOTENCY_CONFLICT");
	cr_expect_str_eq(post(h, "/testkit/echo", NULL, NULL, 1).code,
	    "IDEMPOTENCY_KEY_MISSING");
	memset(longkey, 'a', 256);
	longkey[256] = '\0';
	cr_expect_str_eq(post(h, "/testkit/echo", longkey, NULL, 1).code,
	    "IDEMPOTENCY_KEY_INVALID");
	cr_expect_str_eq(post(h, "/testkit/echo", call_key("mon-unscoped"),
	    NULL, 0).code, "IDEMPOTENCY_SCOPE_MISSING");
	cr_expect_eq(post(h, "/testkit/fail", call_key("mon-fail"), NULL,
	    1).status, 500);
	cr_expect_eq(post(h, "/testkit/status/503", call_key("mon-503"), NULL,
	    1).status, 503);
	cr_expect_eq(post(h, "/testkit/fat-headers/1", call_key("mon-fat"),
	    NULL, 1).status, 201);
	slow = call_make(h->addr, "/testkit/sleep/800", call_key("mon-slow"),
	    NULL);
	snprintf(slow.extra, sizeof(slow.extra), "X-Api-Key: ops");
	pthread_create(&t, NULL, call_thread, &slow);
	call_sleep(300);
	dup = post(h, "/testkit/sleep/800", call_key("mon-slow"), NULL, 1);
	cr_expect_str_eq(dup.code, "IDEMPOTENCY_IN_FLIGHT");
	pthread_join(t, NULL);
	cr_expect_eq(slow.status, 201);
	cr_expect_eq(get_status(h, "/testkit/read"), 200);
	cr_expect_eq(get_status(h, "/nowhere"), 404);
	cr_expect_eq(post(h, "/idempotency", NULL, NULL, 1).status, 405);
	cr_assert_eq(fc_request_raw(h->addr, bad, NULL, 0, &r), 0);
	cr_expect_eq(r.status, 403);
	fc_response_free(&r);

	text = scrape(h);
	cr_expect_geq(outcome(text, "acquired"), 10, "%s", text);
	cr_expect_geq(outcome(text, "replayed"), 2);
	cr_expect_geq(outcome(text, "conflict"), 1);
	cr_expect_geq(outcome(text, "in_flight"), 1);
	cr_expect_geq(outcome(text, "released"), 2);
	cr_expect_geq(outcome(text, "key_missing"), 1);
	cr_expect_geq(outcome(text, "key_invalid"), 1);
	cr_expect_geq(outcome(text, "scope_missing"), 1);
	cr_expect_geq(outcome(text, "answer_not_stored"), 1);
	cr_expect_geq(harness_metric(text,
	    "idemfcgi_memory_store_evictions_total"), 1);
	cr_expect_eq(harness_metric(text, "idemfcgi_worker_restarts_total"), 1);
	return text;
}

/* ------------------------------------------------------------ tests */

/* promtool_accepts would see a problem: a lint problem is reported (exit
 * status 3), and so is a parse error (1). */
Test(monitoring, promtool_reports_problems)
{
	char out[4096];
	int st;

	st = promtool_check("# HELP x_ms X.\n# TYPE x_ms counter\nx_ms 1\n",
	    out, sizeof(out));
	cr_assert_neq(st, 127, "promtool is not installed: scripts/deps "
	    "installs it (Debian package prometheus)");
	cr_expect_eq(st, 3, "%s", out);
	cr_expect(strstr(out, "counter metrics should have \"_total\" suffix")
	    != NULL, "%s", out);
	st = promtool_check("x{\n", out, sizeof(out));
	cr_expect_eq(st, 1, "%s", out);
	cr_expect(strstr(out, "parsing error") != NULL, "%s", out);
	st = promtool_check("# HELP x_total X.\n# TYPE x_total counter\n"
	    "x_total 1\n", out, sizeof(out));
	cr_expect_eq(st, 0, "%s", out);
	cr_expect_str_eq(out, "");
}

/* The memory store: promtool accepts the metrics of an instance that
 * served every kind of request. */
Test(monitoring, memory_store, .timeout = 60)
{
	harness h;
	char *text = memory_instance_served_everything(&h);

	promtool_accepts(text, "memory store");
	free(text);
	cr_expect_eq(harness_stop(&h), 0);
}

/*
 * The MySQL store: two instances on one database, inflight-ttl 1 s.  On
 * a: first executions, replays (from the replay cache too), a conflict, a
 * missing key, transactional routes (committed, replayed, rolled back on
 * 503), released 500 and 503, a worker that dies holding a key (released
 * by the master, restarted); then a slow request whose worker stops: b
 * answers a duplicate 409 in flight, then takes the key over, and a's
 * commit, once its worker runs again, is fenced.  promtool accepts both
 * instances' metrics.
 */
Test(monitoring, mysql_store, .timeout = 90)
{
	const char *slow_key = call_key("mon-my-slow");
	harness a, b;
	char *ta, *tb;
	call slow, c;
	pthread_t t;
	int pids[4], i;

	start(&a, &(harness_opts){ .mysql = 1, .server = "workers = 1\n"
	    "threads = 4", .idem = "inflight-ttl = 1s",
	    .rest = "[metrics]\nenabled = true\n" });
	start(&b, &(harness_opts){ .mysql = 1, .idem = "inflight-ttl = 1s",
	    .rest = "[metrics]\nenabled = true\n" });
	cr_expect_eq(post(&a, "/testkit/echo", call_key("mon-my-1"), NULL,
	    0).status, 201);
	for (i = 0; i < 3; i++)
		cr_expect_str_eq(post(&a, "/testkit/echo", call_key("mon-my-1"),
		    NULL, 0).replayed, "true");
	cr_expect_str_eq(post(&a, "/testkit/echo", call_key("mon-my-1"),
	    "{\"n\":2}", 0).code, "IDEMPOTENCY_CONFLICT");
	cr_expect_str_eq(post(&a, "/testkit/echo", NULL, NULL, 0).code,
	    "IDEMPOTENCY_KEY_MISSING");
	cr_expect_eq(post(&a, "/testkit/tx/201", call_key("mon-my-tx"), NULL,
	    0).status, 201);
	cr_expect_str_eq(post(&a, "/testkit/tx/201", call_key("mon-my-tx"),
	    NULL, 0).replayed, "true");
	cr_expect_eq(post(&a, "/testkit/tx/503", call_key("mon-my-tx503"),
	    NULL, 0).status, 503);
	cr_expect_eq(post(&a, "/testkit/fail", call_key("mon-my-fail"), NULL,
	    0).status, 500);
	cr_expect_eq(post(&a, "/testkit/status/503", call_key("mon-my-503"),
	    NULL, 0).status, 503);
	c = post(&a, "/testkit/crash-once", call_key("mon-my-crash"), NULL, 0);
	cr_expect_eq(c.status, -1);
	cr_expect(harness_await_log(&a, "released 1 reservation(s) of dead"));
	free(await_restart(&a));

	slow = call_make(a.addr, "/testkit/sleep/1500", slow_key, NULL);
	pthread_create(&t, NULL, call_thread, &slow);
	call_sleep(300);
	cr_expect_str_eq(post(&b, "/testkit/sleep/1500", slow_key, NULL,
	    0).code, "IDEMPOTENCY_IN_FLIGHT");
	cr_assert_eq(harness_workers(&a, pids, 4), 1);
	kill(pids[0], SIGSTOP);
	call_sleep(1300);
	c = post(&b, "/testkit/sleep/1500", slow_key, NULL, 0);
	kill(pids[0], SIGCONT);
	cr_expect_eq(c.status, 201, "%d %s", c.status, c.body_out);
	pthread_join(t, NULL);

	ta = NULL;
	for (i = 0; i < 30; i++) {
		free(ta);
		ta = scrape(&a);
		if (outcome(ta, "fenced") >= 1)
			break;
		call_sleep(100);
	}
	tb = scrape(&b);
	cr_expect_geq(outcome(ta, "acquired"), 5, "%s", ta);
	cr_expect_geq(outcome(ta, "replayed"), 4);
	cr_expect_geq(outcome(ta, "replay_cached"), 1);
	cr_expect_geq(outcome(ta, "conflict"), 1);
	cr_expect_geq(outcome(ta, "released"), 2);
	cr_expect_geq(outcome(ta, "key_missing"), 1);
	cr_expect_eq(outcome(ta, "dead_worker_released"), 1);
	cr_expect_eq(outcome(ta, "fenced"), 1);
	cr_expect_eq(outcome(tb, "in_flight"), 1, "%s", tb);
	cr_expect_eq(outcome(tb, "taken_over"), 1);
	cr_expect_eq(harness_metric(ta, "idemfcgi_memory_store_entries"), -1);

	promtool_accepts(ta, "MySQL store, the instance that was fenced");
	promtool_accepts(tb, "MySQL store, the instance that took over");
	free(ta);
	free(tb);
	harness_stop(&b);
	harness_stop(&a);
}
