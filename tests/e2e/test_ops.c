/*
 * test_ops.c - what an operator sees: the metrics route (counts after a
 * scripted sequence, one worker and two), the advertised policy route, and
 * JSON log lines.  A private MariaDB for the program.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "calls.h"
#include "fcgi_client.h"
#include "harness.h"

/* Starts an instance; mysql selects the store. */
static void
start(harness *h, int mysql, const char *server, const char *rest)
{
	cr_assert_eq(harness_start(h, &(harness_opts){ .server = server,
	    .mysql = mysql, .rest = rest }), 0);
}

/* GET path; returns the status, *body (caller frees) and the request id
 * of the answer into rid (may be NULL). */
static int
get(const harness *h, const char *path, char **body, char rid[80])
{
	fc_response r;
	const char *id;
	int status;

	cr_assert_eq(fc_http(h->addr, "GET", path, NULL, NULL, &r), 0);
	status = r.status;
	*body = strdup(r.body != NULL ? r.body : "");
	if (rid != NULL) {
		id = fc_header(&r, "X-Request-Id");
		snprintf(rid, 80, "%s", id != NULL ? id : "");
	}
	fc_response_free(&r);
	return status;
}

/* The request counter of a route and status. */
static double
requests(const char *text, const char *method, const char *route,
    int status)
{
	char series[256];

	snprintf(series, sizeof(series), "idemfcgi_requests_total{method=\"%s\","
	    "route=\"%s\",status=\"%d\"}", method, route, status);
	return harness_metric(text, series);
}

/* Scrapes h's metrics; the text (caller frees). */
static char *
scrape(const harness *h, char rid[80])
{
	char *text;

	cr_assert_eq(get(h, "/metrics", &text, rid), 200, "%s", text);
	return text;
}

/* ----------------------------------------------------------- metrics */

/* One worker, memory store: every counter after a known sequence. */
Test(ops, metrics_count_a_scripted_sequence)
{
	const char *bad[] = { "REQUEST_METHOD", "GET", "REQUEST_URI", "/metrics",
	    "SCRIPT_NAME", "", "REMOTE_ADDR", "10.9.8.7", NULL };
	char longkey[300], *text, *missing;
	call c, slow, dup;
	fc_response r;
	pthread_t t;
	harness h;
	int i;

	start(&h, 0, NULL, "[metrics]\nenabled = true\n");
	for (i = 0; i < 3; i++) {
		c = call_one(h.addr, "/testkit/echo", call_key(i == 0 ? "m0" : i == 1 ?
		    "m1" : "m2"), "{\"n\":1}");
		cr_expect_eq(c.status, 201);
	}
	for (i = 0; i < 2; i++) {
		c = call_one(h.addr, "/testkit/echo", call_key("m0"), "{\"n\":1}");
		cr_expect_str_eq(c.replayed, "true");
	}
	c = call_one(h.addr, "/testkit/echo", call_key("m0"), "{\"n\":2}");
	cr_expect_str_eq(c.code, "IDEMPOTENCY_CONFLICT");
	c = call_one(h.addr, "/testkit/echo", NULL, NULL);
	cr_expect_str_eq(c.code, "IDEMPOTENCY_KEY_MISSING");
	memset(longkey, 'a', 256);
	longkey[256] = '\0';
	c = call_one(h.addr, "/testkit/echo", longkey, NULL);
	cr_expect_str_eq(c.code, "IDEMPOTENCY_KEY_INVALID");
	c = call_one(h.addr, "/testkit/fail", call_key("f"), NULL);
	cr_expect_eq(c.status, 500);
	c = call_one(h.addr, "/testkit/status/503", call_key("s"), NULL);
	cr_expect_eq(c.status, 503);
	slow = call_make(h.addr, "/testkit/sleep/800", call_key("slow"), NULL);
	pthread_create(&t, NULL, call_thread, &slow);
	cr_assert(harness_await_started(&h, "/testkit/sleep/800",
	    call_key("slow"), 1));
	dup = call_one(h.addr, "/testkit/sleep/800", call_key("slow"), NULL);
	cr_expect_str_eq(dup.code, "IDEMPOTENCY_IN_FLIGHT");
	/* while the slow one runs, it and the scrape are in flight */
	text = scrape(&h, NULL);
	cr_expect_eq(harness_metric(text, "idemfcgi_requests_in_flight"), 2, "%s", text);
	free(text);
	pthread_join(t, NULL);
	cr_expect_eq(slow.status, 201);
	cr_expect_eq(get(&h, "/nowhere", &missing, NULL), 404);
	free(missing);

	text = scrape(&h, NULL);
	/* requests by route and status (replays are 201 too) */
	cr_expect_eq(requests(text, "POST", "/testkit/echo", 201), 5, "%s", text);
	cr_expect_eq(requests(text, "POST", "/testkit/echo", 409), 1);
	cr_expect_eq(requests(text, "POST", "/testkit/echo", 400), 2);
	cr_expect_eq(requests(text, "POST", "/testkit/fail", 500), 1);
	cr_expect_eq(requests(text, "POST", "/testkit/status/{code}", 503), 1);
	cr_expect_eq(requests(text, "POST", "/testkit/sleep/{ms}", 201), 1);
	cr_expect_eq(requests(text, "POST", "/testkit/sleep/{ms}", 409), 1);
	cr_expect_eq(requests(text, "", "unmatched", 404), 1);
	cr_expect_eq(requests(text, "GET", "/metrics", 200), 1);
	/* what the idempotency layer did */
	cr_expect_eq(harness_outcome(text, "acquired"), 6);
	cr_expect_eq(harness_outcome(text, "committed"), 4);
	cr_expect_eq(harness_outcome(text, "released"), 2);
	cr_expect_eq(harness_outcome(text, "replayed"), 2);
	cr_expect_eq(harness_outcome(text, "conflict"), 1);
	cr_expect_eq(harness_outcome(text, "in_flight"), 1);
	cr_expect_eq(harness_outcome(text, "key_missing"), 1);
	cr_expect_eq(harness_outcome(text, "key_invalid"), 1);
	cr_expect_eq(harness_outcome(text, "taken_over"), 0);
	cr_expect_eq(harness_outcome(text, "fenced"), 0);
	cr_expect_eq(harness_outcome(text, "store_unavailable"), 0);
	/* the memory store holds the four committed answers */
	cr_expect_eq(harness_metric(text, "idemfcgi_memory_store_entries"), 4);
	cr_expect_eq(harness_metric(text, "idemfcgi_memory_store_evictions_total"), 0);
	/* histograms: one reserve per keyed request, one handler run per
	 * acquisition, the slow one over 0.5 s */
	cr_expect_eq(harness_metric(text, "idemfcgi_store_duration_seconds_count"
	    "{op=\"reserve\"}"), 10);
	cr_expect_eq(harness_metric(text, "idemfcgi_store_duration_seconds_count"
	    "{op=\"commit\"}"), 4);
	cr_expect_eq(harness_metric(text, "idemfcgi_handler_duration_seconds_count"
	    "{method=\"POST\",route=\"/testkit/echo\"}"), 3);
	cr_expect_eq(harness_metric(text, "idemfcgi_handler_duration_seconds_bucket"
	    "{method=\"POST\",route=\"/testkit/sleep/{ms}\",le=\"0.5\"}"), 0);
	cr_expect_eq(harness_metric(text, "idemfcgi_handler_duration_seconds_bucket"
	    "{method=\"POST\",route=\"/testkit/sleep/{ms}\",le=\"1\"}"), 1);
	cr_expect_eq(harness_metric(text, "idemfcgi_requests_in_flight"), 1);
	cr_expect_eq(harness_metric(text, "idemfcgi_workers"), 1);
	cr_expect(strstr(text, "# TYPE idemfcgi_requests_total counter\n")
	    != NULL);
	free(text);

	/* an address outside [metrics] allow gets 403, and no numbers */
	cr_assert_eq(fc_request_raw(h.addr, bad, NULL, 0, &r), 0);
	cr_expect_eq(r.status, 403);
	cr_expect(strstr(r.body, "METRICS_FORBIDDEN") != NULL, "%s", r.body);
	fc_response_free(&r);
	cr_expect(harness_logged(&h, "metrics refused"));
	cr_expect_eq(harness_stop(&h), 0);
}

/* The pid of the worker that logged the request line of request id rid
 * ("... idemfcgi[PID] info req=RID ... -> 200"), or -1. */
static long
served_by(const harness *h, const char *rid)
{
	char *log = harness_log(h), needle[120], *p;
	long pid = -1;

	snprintf(needle, sizeof(needle), "req=%s ", rid);
	for (p = log; p != NULL && (p = strstr(p, needle)) != NULL; p++) {
		char *bol = p, *eol = strchr(p, '\n'), *br;
		while (bol > log && bol[-1] != '\n')
			bol--;
		if (eol != NULL && (br = strstr(bol, "idemfcgi[")) != NULL &&
		    br < p && memmem(p, (size_t)(eol - p), " -> ", 4) != NULL) {
			pid = atol(br + 9);
			break;
		}
	}
	free(log);
	return pid;
}

/* A transactional route's store operations are counted once each: the
 * reservation inside the transaction a reserve, the record's UPDATE with
 * its COMMIT one commit, a ROLLBACK one release. */
Test(ops, transactional_operations_counted_once)
{
	harness h;
	char *text;
	const char *key = call_key("ops-tx"), *k503 = call_key("ops-tx-503");

	start(&h, 1, "threads = 2", "[metrics]\nenabled = true\n");
	cr_expect_eq(call_one(h.addr, "/testkit/tx/201", key, NULL).status, 201);
	cr_expect_eq(call_one(h.addr, "/testkit/tx/201", key, NULL).status, 201);
	cr_expect_eq(call_one(h.addr, "/testkit/tx/503", k503, NULL).status, 503);
	text = scrape(&h, NULL);
	cr_expect_eq(harness_metric(text, "idemfcgi_store_duration_seconds_count"
	    "{op=\"reserve\"}"), 3, "%s", text);
	cr_expect_eq(harness_metric(text, "idemfcgi_store_duration_seconds_count"
	    "{op=\"commit\"}"), 1, "%s", text);
	cr_expect_eq(harness_metric(text, "idemfcgi_store_duration_seconds_count"
	    "{op=\"release\"}"), 1, "%s", text);
	cr_expect_eq(harness_outcome(text, "committed"), 1);
	cr_expect_eq(harness_outcome(text, "replayed"), 1);
	cr_expect_eq(harness_outcome(text, "released"), 1);
	free(text);
	harness_stop(&h);
}

/* Two workers over MySQL: a scrape answered by one worker counts what
 * the other did, and the master's restarts and releases. */
Test(ops, metrics_cover_every_worker)
{
	char *text, rid_slow[80], rid_scrape[80], *again;
	call slow, c;
	pthread_t t;
	harness h;
	int i, pids[4];

	start(&h, 1, "workers = 2\nthreads = 1", "[metrics]\nenabled = true\n");
	for (i = 0; i < 50 && harness_workers(&h, pids, 4) < 2; i++)
		call_sleep(50);
	/* a slow request holds one worker's only thread ... */
	slow = call_make(h.addr, "/testkit/sleep/1500", call_key("two-slow"), NULL);
	pthread_create(&t, NULL, call_thread, &slow);
	cr_assert(harness_await_started(&h, "/testkit/sleep/1500",
	    call_key("two-slow"), 1));
	/* ... so these and the scrape go to the other */
	for (i = 0; i < 4; i++) {
		char name[16];
		snprintf(name, sizeof(name), "two-%d", i);
		c = call_one(h.addr, "/testkit/echo", call_key(name), NULL);
		cr_expect_eq(c.status, 201);
	}
	text = scrape(&h, rid_scrape);
	cr_expect_eq(harness_metric(text, "idemfcgi_requests_in_flight"), 2, "%s", text);
	cr_expect_eq(harness_metric(text, "idemfcgi_workers"), 2);
	cr_expect_eq(harness_outcome(text, "acquired"), 5);
	cr_expect_eq(harness_outcome(text, "committed"), 4);
	free(text);
	pthread_join(t, NULL);
	cr_expect_eq(slow.status, 201);

	/* every scrape, from either worker, has the same numbers */
	text = scrape(&h, NULL);
	cr_expect_eq(harness_outcome(text, "committed"), 5, "%s", text);
	cr_expect_eq(requests(text, "POST", "/testkit/echo", 201), 4);
	cr_expect_eq(requests(text, "POST", "/testkit/sleep/{ms}", 201), 1);
	for (i = 0; i < 4; i++) {
		again = scrape(&h, NULL);
		cr_expect_eq(harness_outcome(again, "committed"), 5);
		cr_expect_eq(requests(again, "POST", "/testkit/echo", 201), 4);
		free(again);
	}
	free(text);
	/* the slow request and the first scrape were two workers' work */
	snprintf(rid_slow, sizeof(rid_slow), "%s", "");
	{
		char *log = harness_log(&h), *p;
		/* the slow request's line names its route and 201 */
		p = log != NULL ? strstr(log, "POST /testkit/sleep/1500 -> 201") :
		    NULL;
		if (p != NULL) {
			char *q = p;
			while (q > log && q[-1] != '\n')
				q--;
			q = strstr(q, "req=");
			if (q != NULL && q < p)
				sscanf(q + 4, "%79s", rid_slow);
		}
		free(log);
	}
	cr_expect_neq(served_by(&h, rid_slow), -1);
	cr_expect_neq(served_by(&h, rid_slow), served_by(&h, rid_scrape),
	    "one worker answered both");

	/* a worker dies holding a key: the master restarts it and releases
	 * the key, and the numbers survive */
	c = call_one(h.addr, "/testkit/crash-once", call_key("two-crash"), NULL);
	cr_expect_eq(c.status, -1);
	cr_expect(harness_await_log(&h, "released 1 reservation(s) of dead"));
	text = NULL;
	for (i = 0; i < 50; i++) {
		free(text);
		text = scrape(&h, NULL);
		if (harness_metric(text, "idemfcgi_workers") == 2)
			break;
		call_sleep(100);
	}
	cr_expect_eq(harness_metric(text, "idemfcgi_worker_restarts_total"), 1, "%s",
	    text);
	cr_expect_eq(harness_outcome(text, "dead_worker_released"), 1);
	cr_expect_eq(harness_outcome(text, "committed"), 5);
	cr_expect_eq(harness_metric(text, "idemfcgi_requests_in_flight"), 1);
	cr_expect_eq(harness_metric(text, "idemfcgi_memory_store_entries"), -1,
	    "only the memory store has these");
	free(text);
	cr_expect_eq(harness_stop(&h), 0);
}

/* ------------------------------------------------------------ policy */

/* GET the policy route into a JSON document (caller decrefs). */
static json_t *
policy(const harness *h, const char *path)
{
	char *body;
	json_t *doc;
	int status = get(h, path, &body, NULL);

	cr_assert_eq(status, 200, "%s", body);
	doc = json_loads(body, 0, NULL);
	cr_assert_not_null(doc, "%s", body);
	free(body);
	return doc;
}

Test(ops, policy_route_reflects_the_config)
{
	harness h;
	json_t *doc, *routes, *rt;
	char *body;
	size_t i;
	int found = 0;

	start(&h, 0, NULL, "[idempotency]\nkey-format = uuidv7\n"
	    "required = false\nlifetime = 30m\nscope = header:X-Api-Key\n");
	doc = policy(&h, "/idempotency");
	cr_expect_str_eq(json_string_value(json_object_get(json_object_get(doc,
	    "defaults"), "idempotency-key-lifetime")), "PT30M");
	cr_expect_str_eq(json_string_value(json_object_get(json_object_get(doc,
	    "idempotency"), "key-format")), "uuidv7");
	cr_expect(json_is_false(json_object_get(json_object_get(doc,
	    "idempotency"), "required")));
	cr_expect_str_eq(json_string_value(json_object_get(json_object_get(doc,
	    "idempotency"), "scope-header")), "X-Api-Key");
	routes = json_object_get(json_object_get(doc, "idempotency"), "routes");
	json_array_foreach(routes, i, rt) {
		const char *path = json_string_value(json_object_get(rt, "path"));
		if (path != NULL && strcmp(path, "/testkit/echo") == 0) {
			cr_expect_str_eq(json_string_value(json_object_get(rt,
			    "policy")), "optional");
			found = 1;
		}
		cr_expect(path == NULL || strcmp(path, "/idempotency") != 0,
		    "built-in routes are not listed");
	}
	cr_expect(found);
	json_decref(doc);
	/* it is a GET; a POST gets 405 */
	{
		call c = call_one(h.addr, "/idempotency", NULL, NULL);
		cr_expect_eq(c.status, 405);
	}
	cr_expect_eq(harness_stop(&h), 0);

	/* another path, and a lifetime in days: hours, as Iceberg writes it */
	start(&h, 0, "policy-path = /v1/config", "[idempotency]\nlifetime = 2d\n");
	doc = policy(&h, "/v1/config");
	cr_expect_str_eq(json_string_value(json_object_get(json_object_get(doc,
	    "defaults"), "idempotency-key-lifetime")), "PT48H");
	cr_expect(json_is_true(json_object_get(json_object_get(doc,
	    "idempotency"), "required")));
	json_decref(doc);
	cr_expect_eq(get(&h, "/idempotency", &body, NULL), 404);
	free(body);
	cr_expect_eq(harness_stop(&h), 0);

	/* disabled: no lifetime advertised, so clients assume no support */
	start(&h, 0, NULL, "[idempotency]\nenabled = false\n");
	doc = policy(&h, "/idempotency");
	cr_expect_not_null(json_object_get(doc, "defaults"));
	cr_expect_null(json_object_get(json_object_get(doc, "defaults"),
	    "idempotency-key-lifetime"));
	cr_expect_null(json_object_get(doc, "idempotency-key-lifetime"));
	cr_expect_null(json_object_get(doc, "idempotency"));
	json_decref(doc);
	cr_expect_eq(harness_stop(&h), 0);

	/* off: no route */
	start(&h, 0, "policy-path = off", NULL);
	cr_expect_eq(get(&h, "/idempotency", &body, NULL), 404);
	free(body);
	cr_expect_eq(harness_stop(&h), 0);
}

/* The two built-in paths cannot be the same; a bad one is refused. */
Test(ops, builtin_paths_checked)
{
	char *out;
	int rc = harness_run("--check", "[server]\nlisten = 127.0.0.1:1\n"
	    "policy-path = /ops\n[metrics]\nenabled = true\npath = /ops\n"
	    "allow = 10.0.0.0/8 bogus\n", &out);

	cr_expect_eq(rc, 1, "%s", out);
	cr_expect(strstr(out, ":6: [metrics] path: the same path as [server] "
	    "policy-path") != NULL, "%s", out);
	cr_expect(strstr(out, ":7: [metrics] allow: bad value") != NULL, "%s",
	    out);
	free(out);

	/* a literal built-in path would hide a plugin's template there */
	rc = harness_run("--check", "[server]\nlisten = 127.0.0.1:1\n"
	    "policy-path = /accounts/7\nplugins = @BUILDDIR@/.libs/ledger.so\n",
	    &out);
	cr_expect_eq(rc, 1, "%s", out);
	cr_expect(strstr(out, "GET /accounts/7 would hide GET /accounts/{id} "
	    "of plugin ledger") != NULL, "%s", out);
	free(out);
	/* another method is no conflict */
	rc = harness_run("--check", "[server]\nlisten = 127.0.0.1:1\n"
	    "policy-path = /accounts/7/deposit\n"
	    "plugins = @BUILDDIR@/.libs/ledger.so\n", &out);
	cr_expect_eq(rc, 0, "%s", out);
	free(out);
}

/* -------------------------------------------------------------- logs */

/* Every line of a JSON log parses; request lines carry request id, route
 * and key hash; the raw key never appears; a takeover is one line with
 * the old owner, across two nodes. */
Test(ops, json_log_lines)
{
	harness dead, h;
	call c, doomed;
	const char *key = call_key("json-secret-key"), *lost = call_key("json-lost-key"),
	    *failing = call_key("json-failing-key");
	char *log, *line, *save = NULL;
	int lines = 0, request_lines = 0, released = 0, takeover = 0;
	pthread_t t;

	start(&dead, 1, NULL, "[idempotency]\ninflight-ttl = 1s\n"
	    "scope = header:X-Api-Key\n");
	start(&h, 1, "log-format = json", "[idempotency]\ninflight-ttl = 1s\n"
	    "scope = header:X-Api-Key\n");
	c = call_make(h.addr, "/testkit/echo", key, NULL);
	snprintf(c.extra, sizeof(c.extra), "X-Api-Key: s3cr3t-api-key");
	call_send(&c);
	cr_expect_eq(c.status, 201);
	call_send(&c);
	cr_expect_str_eq(c.replayed, "true");
	c = call_make(h.addr, "/testkit/fail", failing, NULL);
	snprintf(c.extra, sizeof(c.extra), "X-Api-Key: s3cr3t-api-key");
	call_send(&c);
	cr_expect_eq(c.status, 500);
	/* a node dies holding a key; after inflight-ttl the JSON node takes
	 * it over */
	doomed = call_make(dead.addr, "/testkit/sleep/1500", lost, NULL);
	snprintf(doomed.extra, sizeof(doomed.extra), "X-Api-Key: s3cr3t-api-key");
	pthread_create(&t, NULL, call_thread, &doomed);
	cr_assert(harness_await_started(&dead, "/testkit/sleep/1500", lost, 1));
	harness_kill(&dead);

	pthread_join(t, NULL);
	cr_expect_eq(doomed.status, -1);
	call_sleep(1200);
	c = call_make(h.addr, "/testkit/sleep/1500", lost, NULL);
	snprintf(c.extra, sizeof(c.extra), "X-Api-Key: s3cr3t-api-key");
	call_send(&c);
	cr_expect_eq(c.status, 201, "%d %s", c.status, c.body_out);
	harness_stop(&dead);
	log = harness_log(&h);
	cr_expect_eq(harness_stop(&h), 0);
	cr_assert_not_null(log);
	cr_expect(strstr(log, "-key-") == NULL, "a raw key logged");
	cr_expect(strstr(log, "s3cr3t") == NULL, "scope header logged");
	for (line = strtok_r(log, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		json_error_t e;
		json_t *o = json_loads(line, 0, &e);
		const char *msg, *ev;
		cr_expect_not_null(o, "not JSON: %s (%s)", line, e.text);
		if (o == NULL)
			continue;
		lines++;
		cr_expect(json_is_string(json_object_get(o, "time")));
		cr_expect(json_is_string(json_object_get(o, "level")));
		cr_expect(json_is_integer(json_object_get(o, "pid")));
		cr_expect(json_is_string(json_object_get(o, "host")));
		msg = json_string_value(json_object_get(o, "msg"));
		cr_expect_not_null(msg);
		ev = json_string_value(json_object_get(o, "event"));
		if (msg != NULL && strstr(msg, "POST /testkit/") == msg) {
			request_lines++;
			cr_expect(json_is_string(json_object_get(o, "request_id")),
			    "%s", line);
			cr_expect(json_is_string(json_object_get(o, "route")),
			    "%s", line);
			cr_expect_eq(strlen(json_string_value(json_object_get(o,
			    "key_hash")) ? json_string_value(json_object_get(o,
			    "key_hash")) : ""), 16, "%s", line);
		}
		if (ev != NULL && strcmp(ev, "released") == 0) {
			released++;
			cr_expect_str_eq(json_string_value(json_object_get(o,
			    "route")), "POST /testkit/fail");
			cr_expect(json_is_string(json_object_get(o, "owner")));
		}
		if (ev != NULL && strcmp(ev, "takeover") == 0) {
			takeover++;
			cr_expect(json_is_string(json_object_get(o, "owner")));
			cr_expect(json_is_string(json_object_get(o, "key_hash")));
			cr_expect(json_is_string(json_object_get(o, "request_id")));
			cr_expect_str_eq(json_string_value(json_object_get(o,
			    "route")), "POST /testkit/sleep/{ms}");
		}
		json_decref(o);
	}
	cr_expect_geq(lines, 5);
	cr_expect_eq(request_lines, 4, "%s", log);
	cr_expect_eq(released, 1);
	cr_expect_eq(takeover, 1);
	free(log);
}
