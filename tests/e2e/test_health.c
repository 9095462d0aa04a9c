/*
 * test_health.c - the routes a load balancer and an operator poll: ping
 * ([server] ping-path: liveness, without the store), ready ([server]
 * ready-path: the store answers, checked at most once a second per
 * worker), the status route ([metrics] status-path) and slow handlers
 * ([server] slow-request), through a real idemfcgi and, for readiness, a
 * private MariaDB that is stopped, frozen and started again; and the three
 * routes through real web servers and curl.
 */
#include <signal.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "calls.h"
#include "fcgi_client.h"
#include "harness.h"
#include "http.h"
#include "mariadb.h"
#include "websrv.h"

#define HEALTH_SERVER "ping-path = /ping\nready-path = /ready\n"

/* GET path from REMOTE_ADDR addr; returns the status and *body (caller
 * frees; may be NULL). */
static int
get_from(const harness *h, const char *addr, const char *path, char **body)
{
	const char *params[] = { "REQUEST_METHOD", "GET", "REQUEST_URI", path,
	    "SCRIPT_NAME", "", "REMOTE_ADDR", addr, NULL };
	fc_response r;
	int status;

	cr_assert_eq(fc_request_raw(h->addr, params, NULL, 0, &r), 0, "%s",
	    path);
	status = r.status;
	if (body != NULL)
		*body = strdup(r.body != NULL ? r.body : "");
	fc_response_free(&r);
	return status;
}

static int
get(const harness *h, const char *path, char **body)
{
	return get_from(h, "127.0.0.1", path, body);
}

/* GET path as JSON (status 200 expected; caller decrefs). */
static json_t *
get_json(const harness *h, const char *path)
{
	char *body;
	json_t *doc;

	cr_assert_eq(get(h, path, &body), 200, "%s", body);
	doc = json_loads(body, 0, NULL);
	cr_assert_not_null(doc, "%s", body);
	free(body);
	return doc;
}

static long long
field(const json_t *doc, const char *name)
{
	json_t *v = json_object_get(doc, name);

	cr_assert(json_is_integer(v), "%s is not a number", name);
	return (long long)json_integer_value(v);
}

/* Scrapes /metrics (caller frees). */
static char *
scrape(const harness *h)
{
	char *text;

	cr_assert_eq(get(h, "/metrics", &text), 200, "%s", text);
	return text;
}

/* Polls path until it answers want, at most n times 100 ms apart.
 * Returns the last status. */
static int
poll_until(const harness *h, const char *path, int want, int n)
{
	int status = -1, i;

	for (i = 0; i < n; i++) {
		if ((status = get(h, path, NULL)) == want)
			break;
		call_sleep(100);
	}
	return status;
}

/* One outage at a time across the test programs. */
static void
take_turn(void)
{
	cr_assert_eq(harness_outage_turn(), 0);
}

static uint64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------- ping */

Test(health, ping_and_ready_on_the_memory_store)
{
	harness h;
	json_t *doc;
	char *body;

	cr_assert_eq(harness_start(&h, &(harness_opts){ .server =
	    HEALTH_SERVER }), 0);
	doc = get_json(&h, "/ping");
	cr_expect_str_eq(json_string_value(json_object_get(doc, "status")),
	    "alive");
	json_decref(doc);
	doc = get_json(&h, "/ready");
	cr_expect_str_eq(json_string_value(json_object_get(doc, "status")),
	    "ready");
	cr_expect_str_eq(json_string_value(json_object_get(doc, "store")),
	    "memory");
	json_decref(doc);
	/* an address outside [metrics] allow is refused, and told why */
	cr_expect_eq(get_from(&h, "10.9.8.7", "/ping", &body), 403);
	cr_expect(strstr(body, "METRICS_FORBIDDEN") != NULL, "%s", body);
	free(body);
	cr_expect_eq(get_from(&h, "10.9.8.7", "/ready", NULL), 403);
	cr_expect(harness_logged(&h, "ping refused"));
	cr_expect(harness_logged(&h, "ready refused"));
	/* off unless set: no status route without status-path */
	cr_expect_eq(get(&h, "/status", NULL), 404);
	cr_expect_eq(harness_stop(&h), 0);
}

Test(health, routes_are_off_unless_set)
{
	harness h;

	cr_assert_eq(harness_start(&h, NULL), 0);
	cr_expect_eq(get(&h, "/ping", NULL), 404);
	cr_expect_eq(get(&h, "/ready", NULL), 404);
	cr_expect_eq(harness_stop(&h), 0);
}

Test(health, status_path_needs_metrics)
{
	char *out = NULL;

	cr_expect_neq(harness_run("--check", "[metrics]\nstatus-path = "
	    "/status\n", &out), 0);
	cr_expect(out != NULL && strstr(out, "[metrics] status-path") != NULL &&
	    strstr(out, "enabled = true") != NULL, "%s", out);
	free(out);
}

/* ------------------------------------------------------ readiness */

Test(health, ready_follows_the_database, .init = take_turn,
    .timeout = 120)
{
	double before, after;
	uint64_t t0, t1;
	mariadb db;
	harness h;
	char *text, *body;
	int i, ok = 0;

	cr_assert_eq(mariadb_start(&db), 0);
	cr_assert_eq(harness_start(&h, &(harness_opts){ .server =
	    HEALTH_SERVER "threads = 4", .mysql = 1, .db = &db,
	    .rest = "[metrics]\nenabled = true\n" }), 0);
	cr_expect_eq(poll_until(&h, "/ready", 200, 50), 200);

	/* the cache: many polls, at most one ping a second (one worker) */
	text = scrape(&h);
	before = harness_metric(text,
	    "idemfcgi_store_duration_seconds_count{op=\"ping\"}");
	free(text);
	t0 = mono_ms();
	for (i = 0; i < 200; i++)
		ok += get(&h, "/ready", NULL) == 200;
	t1 = mono_ms();
	text = scrape(&h);
	after = harness_metric(text,
	    "idemfcgi_store_duration_seconds_count{op=\"ping\"}");
	free(text);
	cr_expect_eq(ok, 200);
	cr_expect_geq(before, 1, "the first polls checked nothing");
	cr_expect_leq(after - before, (double)((t1 - t0) / 1000 + 2),
	    "%.0f pings for 200 polls in %llu ms", after - before,
	    (unsigned long long)(t1 - t0));

	/* the database stops: ready says 503, ping still 200 */
	mariadb_stop(&db);
	cr_expect_eq(poll_until(&h, "/ready", 503, 100), 503);
	cr_expect_eq(get(&h, "/ready", &body), 503);
	cr_expect(strstr(body, "IDEMPOTENCY_STORE_UNAVAILABLE") != NULL, "%s",
	    body);
	free(body);
	cr_expect_eq(get(&h, "/ping", NULL), 200);
	cr_expect(harness_logged(&h, "not ready: "));

	/* back: ready again, without a restart of idemfcgi */
	cr_assert_eq(mariadb_restart(&db), 0);
	cr_expect_eq(poll_until(&h, "/ready", 200, 100), 200);
	cr_expect_eq(get(&h, "/ping", NULL), 200);

	/* the database answers but the store cannot work (its schema gone,
	 * as a reservation would find it): not ready, where mysql_ping
	 * alone said ready */
	free(mariadb_sql(&db, "RENAME TABLE idemfcgi_schema TO "
	    "idemfcgi_schema_away"));
	cr_expect_eq(poll_until(&h, "/ready", 503, 100), 503);
	free(mariadb_sql(&db, "RENAME TABLE idemfcgi_schema_away TO "
	    "idemfcgi_schema"));
	cr_expect_eq(poll_until(&h, "/ready", 200, 100), 200);
	cr_expect_eq(harness_stop(&h), 0);
	mariadb_destroy(&db);
}

/* A daemon started before its database (the store set aside until the
 * master reaches it): ready says 503 while keyed routes do, and 200 once
 * the workers with the store serve; ping answers throughout. */

Test(health, ready_before_the_database, .init = take_turn,
    .timeout = 120)
{
	mariadb db;
	harness h;
	char *body;
	int i;

	cr_assert_eq(mariadb_start(&db), 0);
	mariadb_stop(&db);
	cr_assert_eq(harness_start(&h, &(harness_opts){ .server =
	    HEALTH_SERVER "threads = 4", .mysql = 1, .db = &db }), 0);
	cr_expect_eq(get(&h, "/ping", NULL), 200);
	cr_expect_eq(get(&h, "/ready", &body), 503);
	cr_expect(strstr(body, "IDEMPOTENCY_STORE_UNAVAILABLE") != NULL, "%s",
	    body);
	free(body);
	for (i = 0; i < 3; i++)
		cr_expect_eq(get(&h, "/ready", NULL), 503);
	cr_assert_eq(mariadb_restart(&db), 0);
	cr_expect(harness_await_log(&h, "the database answers"));

	cr_expect_eq(poll_until(&h, "/ready", 200, 100), 200);
	cr_expect_eq(call_one(h.addr, "/testkit/echo", "r-1", NULL).status,
	    201);
	cr_expect_eq(harness_stop(&h), 0);
	mariadb_destroy(&db);
}

/* MariaDB frozen (SIGSTOP)
: its ping hangs, yet ready answers 503 saying
 * the check has not ended (it does not wait for the ping), and ping 200;
 * after SIGCONT, ready again. */
Test(health, ready_when_the_database_hangs, .init = take_turn,
    .timeout = 120)
{
	char pidfile[300], *pidtext, *body = NULL;
	mariadb db;
	harness h;
	pid_t dbpid;
	int i, status = 0;

	cr_assert_eq(mariadb_start(&db), 0);
	cr_assert_eq(harness_start(&h, &(harness_opts){ .server =
	    HEALTH_SERVER "threads = 4", .mysql = 1, .db = &db }), 0);
	cr_expect_eq(poll_until(&h, "/ready", 200, 50), 200);
	snprintf(pidfile, sizeof(pidfile), "%s/pid", db.dir);
	pidtext = harness_slurp(pidfile);
	cr_assert_not_null(pidtext);
	dbpid = (pid_t)atol(pidtext);
	free(pidtext);
	cr_assert_gt(dbpid, 0);

	cr_assert_eq(kill(dbpid, SIGSTOP), 0);
	for (i = 0; i < 100; i++) {
		free(body);
		body = NULL;
		if ((status = get(&h, "/ready", &body)) == 503)
			break;
		call_sleep(100);
	}
	/* the first 503: a check under way, not waited for to its end */
	cr_expect_eq(status, 503);
	cr_expect(strstr(body, "did not answer a check within") != NULL ||
	    strstr(body, "has not answered a check for") != NULL,
	    "the ready route waited for the hung ping: %s", body);
	free(body);
	cr_expect_eq(get(&h, "/ping", NULL), 200);
	kill(dbpid, SIGCONT);
	cr_expect_eq(poll_until(&h, "/ready", 200, 200), 200);
	cr_expect_eq(harness_stop(&h), 0);
	mariadb_destroy(&db);
}

/* ---------------------------------------------------------- status */

Test(health, status_counts_requests_and_threads, .timeout = 60)
{
	json_t *doc, *workers, *w;
	char *text;
	harness h;
	pthread_t t;
	call slow, c;
	int i, pids[2];

	cr_assert_eq(harness_start(&h, &(harness_opts){ .server =
	    "threads = 4", .rest = "[metrics]\nenabled = true\n"
	    "status-path = /status\n" }), 0);
	for (i = 0; i < 5; i++) {
		char name[16];
		snprintf(name, sizeof(name), "st-%d", i);
		c = call_one(h.addr, "/testkit/echo", call_key(name), NULL);
		cr_expect_eq(c.status, 201);
	}
	/* five requests, and this one */
	doc = get_json(&h, "/status");
	cr_expect_eq(field(doc, "accepted-requests"), 6);
	cr_expect_eq(field(doc, "active-threads"), 1);
	cr_expect_eq(field(doc, "idle-threads"), 3);
	cr_expect_eq(field(doc, "total-threads"), 4);
	cr_expect_geq(field(doc, "max-active-threads"), 1);
	cr_expect_eq(field(doc, "slow-requests"), 0);
	cr_expect_geq(field(doc, "start-since"), 0);
	cr_expect(json_is_string(json_object_get(doc, "start-time")));
	/* the unix socket's queue, from sock_diag */
	cr_expect_eq(field(doc, "listen-queue"), 0);
	cr_expect_eq(field(doc, "listen-queue-max"), 1024);
	workers = json_object_get(doc, "workers");
	cr_assert_eq(json_array_size(workers), 1);
	w = json_array_get(workers, 0);
	cr_assert_eq(harness_workers(&h, pids, 2), 1);
	cr_expect_eq(field(w, "pid"), pids[0]);
	cr_expect_eq(field(w, "accepted-requests"), 6);
	cr_expect_eq(field(w, "threads"), 4);
	json_decref(doc);

	/* a handler running: two threads active, with this request */
	slow = call_make(h.addr, "/testkit/sleep/3000", call_key("st-slow"),
	    NULL);
	pthread_create(&t, NULL, call_thread, &slow);
	cr_assert(harness_await_started(&h, "/testkit/sleep/3000",
	    call_key("st-slow"), 1));
	doc = get_json(&h, "/status");
	cr_expect_eq(field(doc, "accepted-requests"), 8);
	cr_expect_eq(field(doc, "active-threads"), 2);
	cr_expect_eq(field(doc, "idle-threads"), 2);
	cr_expect_geq(field(doc, "max-active-threads"), 2);
	json_decref(doc);
	text = scrape(&h);
	cr_expect_eq(harness_metric(text, "idemfcgi_requests_in_flight"), 2);
	cr_expect_eq(harness_metric(text, "idemfcgi_threads"), 4, "%s", text);
	cr_expect_geq(harness_metric(text, "idemfcgi_requests_in_flight_max"),
	    2);
	cr_expect_eq(harness_metric(text, "idemfcgi_listen_queue_max"), 1024);
	cr_expect_gt(harness_metric(text, "idemfcgi_start_time_seconds"),
	    1.7e9);
	free(text);
	pthread_join(t, NULL);
	cr_expect_eq(slow.status, 201);
	cr_expect_eq(get_from(&h, "10.9.8.7", "/status", NULL), 403);
	cr_expect_eq(harness_stop(&h), 0);
}

Test(health, status_of_a_tcp_listener)
{
	char listen[64];
	harness h;
	json_t *doc;

	snprintf(listen, sizeof(listen), "127.0.0.1:%d", harness_free_port());
	cr_assert_eq(harness_start(&h, &(harness_opts){ .listen = listen,
	    .rest = "[metrics]\nenabled = true\nstatus-path = /status\n" }),
	    0);
	doc = get_json(&h, "/status");
	cr_expect_eq(field(doc, "listen-queue"), 0);
	cr_expect_eq(field(doc, "listen-queue-max"), 1024);
	json_decref(doc);
	cr_expect_eq(harness_stop(&h), 0);
}

/* ---------------------------------------------------- slow requests */

Test(health, slow_request_logged_once_and_counted, .timeout = 60)
{
	json_t *doc;
	char *text, *log, series[200];
	harness h;
	pthread_t t;
	call slow, c;

	cr_assert_eq(harness_start(&h, &(harness_opts){ .server =
	    "slow-request = 1s\n", .rest = "[metrics]\nenabled = true\n"
	    "status-path = /status\n" }), 0);
	/* under the threshold: nothing */
	c = call_one(h.addr, "/testkit/echo", call_key("quick"), NULL);
	cr_expect_eq(c.status, 201);
	/* over it: reported while the handler still runs ("has run for";
	 * at its end it would say "returned after") */
	slow = call_make(h.addr, "/testkit/sleep/4000", call_key("slow"), NULL);
	pthread_create(&t, NULL, call_thread, &slow);
	cr_assert(harness_await_started(&h, "/testkit/sleep/4000",
	    call_key("slow"), 1));
	cr_expect(harness_await_log(&h, "slow request: the handler of POST "
	    "/testkit/sleep/{ms} has run for"));
	doc = get_json(&h, "/status");
	cr_expect_eq(field(doc, "slow-requests"), 1);
	json_decref(doc);
	pthread_join(t, NULL);
	cr_expect_eq(slow.status, 201);
	c = call_one(h.addr, "/testkit/echo", call_key("quick-2"), NULL);
	cr_expect_eq(c.status, 201);

	/* once, at warn, with the request id, route and key hash */
	log = harness_log(&h);
	cr_assert_not_null(log);
	cr_expect_eq(harness_occurrences(log, "slow request:"), 1, "%s", log);
	{
		char *line = strstr(log, "slow request:");
		while (line != NULL && line > log && line[-1] != '\n')
			line--;
		cr_assert_not_null(line);
		cr_expect(strstr(line, "req=") != NULL &&
		    strstr(line, "key=") != NULL &&
		    strstr(line, "warn") != NULL, "%.400s", line);
	}
	free(log);
	text = scrape(&h);
	snprintf(series, sizeof(series), "idemfcgi_slow_requests_total{"
	    "method=\"POST\",route=\"/testkit/sleep/{ms}\"}");
	cr_expect_eq(harness_metric(text, series), 1, "%s", text);
	cr_expect_eq(harness_metric_sum(text, "idemfcgi_slow_requests_total",
	    ""), 1);
	free(text);
	doc = get_json(&h, "/status");
	cr_expect_eq(field(doc, "slow-requests"), 1);
	json_decref(doc);
	cr_expect_eq(harness_stop(&h), 0);
}

/* ----------------------------------------------- through web servers */

/* GET url with curl; returns the status and *body (caller frees). */
static int
http_get(const char *url, char **body)
{
	http_response r;
	int status;

	cr_assert_eq(http_request("GET", url, NULL, NULL, 0, &r), 0, "%s", url);
	status = r.status;
	*body = strdup(r.body != NULL ? r.body : "");
	http_response_free(&r);
	return status;
}

/* The three routes under the web server's mount, from curl on 127.0.0.1:
 * the address the web server passes is the one [metrics] allow checks. */
static void
routes_through(websrv_kind kind)
{
	static const char conf[] = "[server]\n" HEALTH_SERVER
	    "[metrics]\nenabled = true\nstatus-path = /status\n";
	char url[256], *body;
	json_t *doc;
	websrv w;

	cr_assert_eq(websrv_start(&w, kind, conf), 0, "%s did not start",
	    websrv_name(kind));
	snprintf(url, sizeof(url), "%s/ping", w.base);
	cr_expect_eq(http_get(url, &body), 200, "%s: %s", websrv_name(kind),
	    body);
	cr_expect(strstr(body, "alive") != NULL, "%s", body);
	free(body);
	snprintf(url, sizeof(url), "%s/ready", w.base);
	cr_expect_eq(http_get(url, &body), 200, "%s: %s", websrv_name(kind),
	    body);
	free(body);
	snprintf(url, sizeof(url), "%s/status", w.base);
	cr_expect_eq(http_get(url, &body), 200, "%s: %s", websrv_name(kind),
	    body);
	doc = json_loads(body, 0, NULL);
	cr_expect_not_null(doc, "%s", body);
	if (doc != NULL)
		cr_expect_geq(field(doc, "accepted-requests"), 3);
	json_decref(doc);
	free(body);
	websrv_stop(&w);
}

Test(health, routes_through_lighttpd, .timeout = 60)
{
	routes_through(WS_LIGHTTPD);
}

Test(health, routes_through_apache, .timeout = 60)
{
	routes_through(WS_APACHE_TCP);
}

Test(health, routes_through_nginx, .timeout = 60)
{
	routes_through(WS_NGINX);
}
