/*
 * test_policy.c - a route's own policy (DESIGN.md 2 and 3): [route METHOD
 * PATH] sections checked against the registered routes, the effective
 * policy on the policy route, fingerprint-ignore and fingerprint-headers,
 * a route's lifetime, on both stores, and through lighttpd.  A private
 * MariaDB for the program.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "calls.h"
#include "fcgi_client.h"
#include "harness.h"
#include "http.h"
#include "mariadb.h"
#include "websrv.h"

/* Starts an instance with rest (sections) on the memory store, or on the
 * program's MariaDB with mysql. */
static void
start(harness *h, int mysql, const char *rest)
{
	mariadb m;

	if (mysql)
		cr_assert_eq(mariadb_from_env(&m), 0);
	cr_assert_eq(harness_start(h, &(harness_opts){ .mysql = mysql,
	    .db = mysql ? &m : NULL, .rest = rest }), 0);
}

/* ------------------------------------------------------- the config */

/* A section naming no registered route is refused with the file and line,
 * naming the closest route; so is one naming a built-in route; --check
 * reports them with the rest. */
Test(sections, unknown_route_refused_with_file_line)
{
	char *out;
	int rc = harness_run("--check", "[server]\nlisten = 127.0.0.1:1\n"
	    "plugins = @BUILDDIR@/tests/testkit/.libs/testkit.so\n"
	    "[testkit]\nlog = /dev/null\n"
	    "[route POST /testkit/eho]\nlifetime = 1h\n"
	    "[route GET /idempotency]\npolicy = required\n"
	    "[route POST /testkit/echo]\nlifetime = 2h\n", &out);

	cr_expect_eq(rc, 1, "%s", out);
	cr_expect(strstr(out, "test.conf:6: [route POST /testkit/eho]: no "
	    "plugin registered the route POST /testkit/eho") != NULL, "%s", out);
	cr_expect(strstr(out, "did you mean [route POST /testkit/echo]?") !=
	    NULL, "%s", out);
	cr_expect(strstr(out, "test.conf:8: [route GET /idempotency]: a "
	    "built-in route") != NULL, "%s", out);
	cr_expect(strstr(out, "test.conf:10") == NULL, "%s", out);
	cr_expect(strstr(out, "check failed") != NULL, "%s", out);
	free(out);
}

/* A value is checked as the [idempotency] key of the same name is, and
 * --check says so with the file and line; good sections pass. */
Test(sections, bad_value_refused_like_idempotency)
{
	char *out;
	int rc = harness_run("--check", "[server]\nlisten = 127.0.0.1:1\n"
	    "plugins = @BUILDDIR@/tests/testkit/.libs/testkit.so\n"
	    "[testkit]\nlog = /dev/null\n"
	    "[route POST /testkit/echo]\nlifetime = 1 day\n"
	    "commit-statuses = 2xx 503\n", &out);

	cr_expect_eq(rc, 1, "%s", out);
	cr_expect(strstr(out, "test.conf:7: [route POST /testkit/echo] "
	    "lifetime: bad value \"1 day\": expected a duration") != NULL, "%s",
	    out);
	cr_expect(strstr(out, "test.conf:8: [route POST /testkit/echo] "
	    "commit-statuses: bad value \"2xx 503\": 429 and 5xx are transient")
	    != NULL, "%s", out);
	free(out);
	rc = harness_run("--check", "[server]\nlisten = 127.0.0.1:1\n"
	    "plugins = @BUILDDIR@/tests/testkit/.libs/testkit.so\n"
	    "[testkit]\nlog = /dev/null\n"
	    "[route POST /testkit/echo]\nlifetime = 7d\n"
	    "fingerprint-ignore = /nonce\n"
	    "[route POST /testkit/status/{code}]\npolicy = optional\n", &out);
	cr_expect_eq(rc, 0, "%s", out);
	free(out);
}

/* The route of the policy route's list by method and path, or NULL. */
static json_t *
route_of(json_t *doc, const char *method, const char *path)
{
	json_t *routes = json_object_get(json_object_get(doc, "idempotency"),
	    "routes"), *rt;
	size_t i;

	json_array_foreach(routes, i, rt)
		if (strcmp(json_string_value(json_object_get(rt, "method")),
		    method) == 0 &&
		    strcmp(json_string_value(json_object_get(rt, "path")), path)
		    == 0)
			return rt;
	return NULL;
}

/* The value of key of a route as a string, "" when absent. */
static const char *
field(json_t *rt, const char *key)
{
	const char *v = json_string_value(json_object_get(rt, key));

	return v != NULL ? v : "";
}

/* /idempotency shows each route's effective policy: the section's values
 * where it sets them, [idempotency]'s elsewhere. */
Test(sections, overrides_on_the_policy_route)
{
	harness h;
	fc_response r;
	json_t *doc, *echo, *status, *ign;

	start(&h, 0, "[idempotency]\nlifetime = 2h\n"
	    "[route POST /testkit/echo]\nlifetime = 7d\n"
	    "commit-statuses = 2xx 400 404 409 410 422\n"
	    "fingerprint-ignore = /client_ts /nonce\n"
	    "fingerprint-headers = X-Tenant\nkey-format = uuid\n"
	    "[route POST /testkit/fail]\npolicy = off\n");
	cr_assert_eq(fc_http(h.addr, "GET", "/idempotency", NULL, NULL, &r), 0);
	cr_assert_eq(r.status, 200);
	cr_assert_not_null(doc = json_loads(r.body, 0, NULL), "%s", r.body);
	cr_assert_not_null(echo = route_of(doc, "POST", "/testkit/echo"));
	cr_expect_str_eq(field(echo, "policy"), "required");
	cr_expect_str_eq(field(echo, "lifetime"), "PT168H");
	cr_expect_str_eq(field(echo, "key-format"), "uuid");
	cr_expect_str_eq(field(echo, "commit-statuses"),
	    "2xx 400 404 409 410 422");
	ign = json_object_get(echo, "fingerprint-ignore");
	cr_expect_eq(json_array_size(ign), 2);
	cr_expect_str_eq(json_string_value(json_array_get(ign, 1)), "/nonce");
	cr_expect_str_eq(json_string_value(json_array_get(json_object_get(echo,
	    "fingerprint-headers"), 0)), "X-Tenant");
	cr_assert_not_null(status = route_of(doc, "POST",
	    "/testkit/status/{code}"));
	cr_expect_str_eq(field(status, "lifetime"), "PT2H");
	cr_expect_str_eq(field(status, "key-format"), "opaque");
	cr_expect_str_eq(field(status, "commit-statuses"), "2xx 400 404 409 422");
	cr_expect_eq(json_array_size(json_object_get(status,
	    "fingerprint-ignore")), 0);
	cr_expect_str_eq(field(route_of(doc, "POST", "/testkit/fail"), "policy"),
	    "off");
	json_decref(doc);
	fc_response_free(&r);
	/* and they are in force: a key that is not a UUID is refused on echo
	 * only, fail runs without a key */
	cr_expect_eq(call_one(h.addr, "/testkit/echo", "not-a-uuid", NULL).status,
	    400);
	cr_expect_eq(call_one(h.addr, "/testkit/status/201", "not-a-uuid",
	    NULL).status, 201);
	cr_expect_eq(call_one(h.addr, "/testkit/fail", NULL, NULL).status, 500);
	cr_expect_eq(harness_stop(&h), 0);
}

/* A policy set in code (testkit's echo-lifetime: idem_route_set) is in
 * force and shown; a [route] section wins over it; a bad value set in
 * code fails the plugin's setup, naming the route. */
Test(sections, code_policy_and_section_over_it)
{
	harness h;
	fc_response r;
	json_t *doc;
	char *out;
	int rc;

	start(&h, 0, "[testkit]\necho-lifetime = 90m\n");
	cr_assert_eq(fc_http(h.addr, "GET", "/idempotency", NULL, NULL, &r), 0);
	cr_assert_not_null(doc = json_loads(r.body, 0, NULL), "%s", r.body);
	cr_expect_str_eq(field(route_of(doc, "POST", "/testkit/echo"),
	    "lifetime"), "PT1H30M");
	cr_expect_str_eq(field(route_of(doc, "POST", "/testkit/fail"),
	    "lifetime"), "PT24H");
	/* no key is forgotten sooner than the shortest route's lifetime */
	cr_expect_str_eq(json_string_value(json_object_get(json_object_get(doc,
	    "defaults"), "idempotency-key-lifetime")), "PT1H30M");
	/* and where the Iceberg spec's CatalogConfig has it */
	cr_expect_str_eq(json_string_value(json_object_get(doc,
	    "idempotency-key-lifetime")), "PT1H30M");
	json_decref(doc);
	fc_response_free(&r);
	cr_expect_eq(harness_stop(&h), 0);

	start(&h, 0, "[testkit]\necho-lifetime = 90m\n"
	    "[route POST /testkit/echo]\nlifetime = 3h\n");
	cr_assert_eq(fc_http(h.addr, "GET", "/idempotency", NULL, NULL, &r), 0);
	cr_assert_not_null(doc = json_loads(r.body, 0, NULL), "%s", r.body);
	cr_expect_str_eq(field(route_of(doc, "POST", "/testkit/echo"),
	    "lifetime"), "PT3H");
	json_decref(doc);
	fc_response_free(&r);
	cr_expect_eq(harness_stop(&h), 0);

	rc = harness_run("--check", "[server]\nlisten = 127.0.0.1:1\n"
	    "plugins = @BUILDDIR@/tests/testkit/.libs/testkit.so\n"
	    "[testkit]\nlog = /dev/null\necho-lifetime = 10ms\n", &out);
	cr_expect_eq(rc, 1, "%s", out);
	cr_expect(strstr(out, "route POST /testkit/echo: lifetime = 10ms: must "
	    "be from 1000ms") != NULL, "%s", out);
	free(out);
}

/* ------------------------------------------------------ fingerprints */

/* fingerprint-ignore on store: bodies that differ only in the ignored
 * members replay the first answer, any other difference conflicts; one
 * execution.  fingerprint-headers: the tenant counts. */
static void
fingerprint_selection(int mysql)
{
	const char *key = call_key(mysql ? "fpi-my" : "fpi-mem");
	const char *hkey = call_key(mysql ? "fph-my" : "fph-mem");
	harness h;
	call a, b, c, d;

	start(&h, mysql, "[route POST /testkit/echo]\n"
	    "fingerprint-ignore = /client_ts /meta/nonce\n"
	    "[route POST /testkit/status/{code}]\n"
	    "fingerprint-headers = X-Tenant\n");
	a = call_one(h.addr, "/testkit/echo", key, "{\"amount\":5,"
	    "\"client_ts\":1700000000,\"meta\":{\"nonce\":\"n1\",\"src\":\"web\"}}");
	cr_assert_eq(a.status, 201, "%s", a.body_out);
	b = call_one(h.addr, "/testkit/echo", key, "{\"meta\":{\"src\":\"web\","
	    "\"nonce\":\"n2\"},\"client_ts\":1700000042,\"amount\":5}");
	cr_expect_eq(b.status, 201);
	cr_expect_str_eq(b.replayed, "true");
	cr_expect_str_eq(b.exec, a.exec);
	c = call_one(h.addr, "/testkit/echo", key, "{\"amount\":6,"
	    "\"client_ts\":1700000000,\"meta\":{\"nonce\":\"n1\",\"src\":\"web\"}}");
	cr_expect_eq(c.status, 409);
	cr_expect_str_eq(c.code, "IDEMPOTENCY_CONFLICT");
	c = call_one(h.addr, "/testkit/echo", key, "{\"amount\":5,"
	    "\"client_ts\":1700000000,\"meta\":{\"nonce\":\"n1\",\"src\":\"app\"}}");
	cr_expect_eq(c.status, 409);
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", key), 1);

	a = call_make(h.addr, "/testkit/status/201", hkey, NULL);
	snprintf(a.extra, sizeof(a.extra), "X-Tenant: acme");
	call_send(&a);
	cr_assert_eq(a.status, 201);
	b = a;
	call_send(&b);
	cr_expect_str_eq(b.replayed, "true");
	c = a;
	snprintf(c.extra, sizeof(c.extra), "X-Tenant: other");
	call_send(&c);
	cr_expect_eq(c.status, 409);
	cr_expect_str_eq(c.code, "IDEMPOTENCY_CONFLICT");
	d = call_one(h.addr, "/testkit/status/201", hkey, NULL);
	cr_expect_eq(d.status, 409, "an absent tenant is another request");
	cr_expect_eq(harness_count_key(&h, "/testkit/status/201", hkey), 1);
	cr_expect_eq(harness_stop(&h), 0);
}

Test(fingerprint, selection_memory)
{
	fingerprint_selection(0);
}

Test(fingerprint, selection_mysql)
{
	fingerprint_selection(1);
}

/* ----------------------------------------------------------- lifetime */

/*
 * A record expires by the route it was made on: echo's records live 2 s,
 * status/{code}'s the default day.  Retries of echo's key are sent until
 * one runs again (a bounded wait for the clock, not a guessed delay);
 * then status's key, made before, still replays.
 */
static void
lifetime_per_route(int mysql)
{
	const char *ka = call_key(mysql ? "life-a-my" : "life-a-mem");
	const char *kb = call_key(mysql ? "life-b-my" : "life-b-mem");
	harness h;
	call a, b, r;
	int i;

	start(&h, mysql, "[route POST /testkit/echo]\nlifetime = 2s\n");
	a = call_one(h.addr, "/testkit/echo", ka, NULL);
	cr_assert_eq(a.status, 201);
	b = call_one(h.addr, "/testkit/status/201", kb, NULL);
	cr_assert_eq(b.status, 201);
	if (mysql) {
		mariadb m;
		char sql[256], *out;

		cr_assert_eq(mariadb_from_env(&m), 0);
		/* committed at lease_at, to expire a lifetime later */
		snprintf(sql, sizeof(sql), "SELECT CONCAT(idem_key, '=', ROUND("
		    "TIMESTAMPDIFF(MICROSECOND, lease_at, expires_at) / 1000000)) "
		    "FROM idempotency_keys WHERE idem_key IN ('%s', '%s')", ka, kb);
		out = mariadb_sql(&m, sql);
		cr_assert_not_null(out);
		snprintf(sql, sizeof(sql), "%s=2\n", ka);
		cr_expect(strstr(out, sql) != NULL, "%s", out);
		snprintf(sql, sizeof(sql), "%s=86400\n", kb);
		cr_expect(strstr(out, sql) != NULL, "%s", out);
		free(out);
	}
	/* replayed until its lifetime ends, then refused (issue 40) */
	for (i = 0; i < 300; i++) {
		r = call_one(h.addr, "/testkit/echo", ka, NULL);
		if (r.status == 422)
			break;
		cr_assert_eq(r.status, 201);
		cr_assert_str_eq(r.exec, a.exec);
		call_sleep(50);
	}
	cr_assert_neq(i, 300, "echo's record never expired");
	cr_expect_str_eq(r.code, "IDEMPOTENCY_KEY_EXPIRED");
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", ka), 1);
	r = call_one(h.addr, "/testkit/status/201", kb, NULL);
	cr_expect_str_eq(r.replayed, "true");
	cr_expect_str_eq(r.exec, b.exec);
	cr_expect_eq(harness_count_key(&h, "/testkit/status/201", kb), 1);
	cr_expect_eq(harness_stop(&h), 0);
}

Test(lifetime, per_route_memory)
{
	lifetime_per_route(0);
}

Test(lifetime, per_route_mysql)
{
	lifetime_per_route(1);
}

/* ---------------------------------------------------- through lighttpd */

/* An override in force through a real web server and real HTTP: retries
 * whose bodies differ only in an ignored member are replayed, one
 * execution; a different amount conflicts. */
Test(websrv, fingerprint_ignore_through_lighttpd)
{
	static const char *const hdrs[] = { "Idempotency-Key: lt-fpi-1",
	    "Content-Type: application/json", NULL };
	static const char *const bodies[] = { "{\"amount\":3,\"nonce\":\"a\"}",
	    "{\"nonce\":\"b\",\"amount\":3}", "{\"amount\":4,\"nonce\":\"a\"}" };
	http_response r[3];
	char url[256];
	websrv w;
	int i;

	cr_assert_eq(websrv_start(&w, WS_LIGHTTPD, "[route POST /testkit/echo]\n"
	    "fingerprint-ignore = /nonce\n"), 0);
	snprintf(url, sizeof(url), "%s/testkit/echo", w.base);
	for (i = 0; i < 3; i++)
		cr_assert_eq(http_request("POST", url, hdrs, bodies[i],
		    strlen(bodies[i]), &r[i]), 0);
	cr_expect_eq(r[0].status, 201, "%s", r[0].body);
	cr_expect_eq(r[1].status, 201);
	cr_expect_str_eq(http_header(&r[1], "Idempotent-Replayed") != NULL ?
	    http_header(&r[1], "Idempotent-Replayed") : "", "true");
	cr_expect_str_eq(r[1].body, r[0].body);
	cr_expect_eq(r[2].status, 409, "%s", r[2].body);
	cr_expect_eq(websrv_count(&w, "/testkit/echo", "lt-fpi-1"), 1);
	for (i = 0; i < 3; i++)
		http_response_free(&r[i]);
	websrv_stop(&w);
}

/* ------------------------------------------------------------- leases */

/* A route whose inflight-ttl is shorter than [idempotency]'s (30 s): its
 * leases are renewed within it (every third of the shortest route's), so
 * a handler that runs three times as long is never taken over: every
 * duplicate sent while it runs is in flight, one execution. */
Test(lease, short_route_ttl_renewed_in_time)
{
	const char *key = call_key("lease-short");
	harness h;
	call first, dup;
	pthread_t t;
	int n = 0, in_flight = 0;

	start(&h, 0, "[route POST /testkit/sleep/{ms}]\ninflight-ttl = 1s\n");
	first = call_make(h.addr, "/testkit/sleep/3000", key, NULL);
	cr_assert_eq(pthread_create(&t, NULL, call_thread, &first), 0);
	cr_assert(harness_await_started(&h, "/testkit/sleep/3000", key, 1));
	for (;;) {
		dup = call_one(h.addr, "/testkit/sleep/3000", key, NULL);
		n++;
		if (dup.status != 409)
			break;
		cr_assert_str_eq(dup.code, "IDEMPOTENCY_IN_FLIGHT");
		in_flight++;
		call_sleep(100);
	}
	pthread_join(t, NULL);
	cr_expect_eq(first.status, 201);
	cr_expect_eq(dup.status, 201);
	cr_expect_str_eq(dup.replayed, "true", "a duplicate ran: taken over");
	cr_expect_str_eq(dup.exec, first.exec);
	cr_expect_gt(in_flight, 0);
	cr_expect_eq(harness_count_key(&h, "/testkit/sleep/3000", key), 1);
	cr_expect_eq(harness_logged(&h, "took over"), 0);
	cr_expect_eq(harness_stop(&h), 0);
}

/*
 * Issue 35.1: inflight-ttl lowered under a running handler.  The route's
 * lease is 6 s (renewed every 2 s); the handler runs 7 s; the operator
 * lowers the route's inflight-ttl to 1 s and reloads.  The old worker
 * drains with its 2 s rhythm; the duplicates reach the new one, which
 * sees a lease up to 2 s old under its 1 s.  The record keeps its
 * holder's 6 s lease, so every duplicate is in flight until the first
 * answer replays: one execution, no takeover.
 */
Test(lease, lowered_ttl_at_a_reload_spares_the_running_handler,
    .timeout = 90)
{
	const char *key = call_key("lease-reload");
	char *conf, *at;
	harness h;
	call first, dup;
	pthread_t t;
	int in_flight = 0;

	start(&h, 1, "[route POST /testkit/sleep/{ms}]\ninflight-ttl = 6s\n");
	first = call_make(h.addr, "/testkit/sleep/7000", key, NULL);
	cr_assert_eq(pthread_create(&t, NULL, call_thread, &first), 0);
	cr_assert(harness_await_started(&h, "/testkit/sleep/7000", key, 1));
	cr_assert_not_null(conf = harness_slurp(h.conf));
	cr_assert_not_null(at = strstr(conf, "inflight-ttl = 6s"));
	at[strlen("inflight-ttl = ")] = '1';
	cr_assert_eq(harness_write_conf(h.conf, conf), 0);
	free(conf);
	kill(h.pid, SIGHUP);
	cr_assert(harness_await_log(&h, "reloaded"));
	for (;;) {
		dup = call_one(h.addr, "/testkit/sleep/7000", key, NULL);
		if (dup.status != 409)
			break;
		cr_assert_str_eq(dup.code, "IDEMPOTENCY_IN_FLIGHT");
		in_flight++;
		call_sleep(150);
	}
	pthread_join(t, NULL);
	cr_expect_eq(first.status, 201);
	cr_expect_eq(dup.status, 201);
	cr_expect_str_eq(dup.replayed, "true", "a duplicate ran: taken over "
	    "by the new worker's inflight-ttl");
	cr_expect_str_eq(dup.exec, first.exec);
	cr_expect_gt(in_flight, 0);
	cr_expect_eq(harness_count_key(&h, "/testkit/sleep/7000", key), 1);
	cr_expect_eq(harness_logged(&h, "took over"), 0);
	cr_expect_eq(harness_stop(&h), 0);
}

/* ------------------------------------------------- transactional routes */

/* On a transactional route a section may set its lifetime (its records
 * expire by it) but not inflight-ttl or inflight-wait, which its pool
 * holds: refused with the file and line. */
Test(tx, route_section_on_a_transactional_route)
{
	const char *key = call_key("tx-life");
	char my[600], text[2000], sql[256], *out, *res;
	harness h;
	mariadb m;
	call c;
	int rc;

	cr_assert_eq(mariadb_from_env(&m), 0);
	mariadb_conf(&m, my, sizeof(my));
	snprintf(text, sizeof(text), "[server]\nlisten = 127.0.0.1:1\n"
	    "plugins = @BUILDDIR@/tests/testkit/.libs/testkit.so\n"
	    "[idempotency]\nstore = mysql\n%s[testkit]\nlog = /dev/null\n"
	    "[route POST /testkit/tx/{code}]\nlifetime = 1h\n"
	    "inflight-ttl = 5s\ninflight-wait = 2s\n", my);
	rc = harness_run("--check", text, &out);
	cr_expect_eq(rc, 1, "%s", out);
	cr_expect(strstr(out, "[route POST /testkit/tx/{code}] inflight-ttl: a "
	    "transactional route takes it from [idempotency]") != NULL, "%s",
	    out);
	cr_expect(strstr(out, "[route POST /testkit/tx/{code}] inflight-wait:")
	    != NULL, "%s", out);
	free(out);

	start(&h, 1, "[route POST /testkit/tx/{code}]\nlifetime = 1h\n");
	c = call_one(h.addr, "/testkit/tx/201", key, NULL);
	cr_assert_eq(c.status, 201, "%s", c.body_out);
	snprintf(sql, sizeof(sql), "SELECT ROUND(TIMESTAMPDIFF(MICROSECOND, "
	    "lease_at, expires_at) / 1000000) FROM idempotency_keys WHERE "
	    "idem_key = '%s'", key);
	res = mariadb_sql(&m, sql);
	cr_expect(res != NULL && strcmp(res, "3600\n") == 0, "%s", res);
	free(res);
	cr_expect_str_eq(call_one(h.addr, "/testkit/tx/201", key, NULL).replayed,
	    "true");
	cr_expect_eq(harness_stop(&h), 0);
}

/* ------------------------------------------------------ openapi-path */

/* [server] openapi-path serves the document of --openapi: the routes,
 * each keyed one with its Idempotency-Key parameter under its policy. */
Test(openapi, served_by_openapi_path)
{
	harness h;
	fc_response r;
	json_t *doc, *ps, *p;
	size_t i;
	int found = 0;

	cr_assert_eq(harness_start(&h, &(harness_opts){ .server =
	    "openapi-path = /openapi.json\n", .rest =
	    "[route POST /testkit/echo]\nlifetime = 7d\n" }), 0);
	cr_assert_eq(fc_http(h.addr, "GET", "/openapi.json", NULL, NULL, &r), 0);
	cr_assert_eq(r.status, 200, "%s", r.body);
	cr_assert_not_null(doc = json_loads(r.body, 0, NULL), "%s", r.body);
	cr_expect_str_eq(json_string_value(json_object_get(doc, "openapi")),
	    "3.1.0");
	ps = json_object_get(json_object_get(json_object_get(json_object_get(doc,
	    "paths"), "/testkit/echo"), "post"), "parameters");
	json_array_foreach(ps, i, p)
		if (strcmp(json_string_value(json_object_get(p, "name")),
		    "Idempotency-Key") == 0) {
			found = 1;
			cr_expect(json_is_true(json_object_get(p, "required")));
			cr_expect_str_eq(json_string_value(json_object_get(p,
			    "x-idempotency-key-lifetime")), "PT168H");
		}
	cr_expect(found, "%s", r.body);
	cr_expect_null(json_object_get(json_object_get(doc, "paths"),
	    "/openapi.json"), "built-in routes are not in it");
	json_decref(doc);
	fc_response_free(&r);
	cr_expect_eq(harness_stop(&h), 0);
}
