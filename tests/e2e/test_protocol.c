/*
 * test_protocol.c - the idempotency protocol end to end: the real idemfcgi
 * binary with the memory store, real FastCGI, and the testkit plugin whose
 * log counts every execution (the handler's side effect).
 */
#include <pthread.h>
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

static harness h;

static void
start(const char *idem)
{
	cr_assert_eq(harness_start(&h, &(harness_opts){ .server = "threads = 40",
	    .idem = idem }), 0);
}

static void
start_default(void)
{
	start("");
}

static void
stop(void)
{
	harness_stop(&h);
}

/* Shorthands over calls.h for this file's one instance. */
static call
mk(const char *path, const char *key, const char *body)
{
	return call_make(h.addr, path, key, body);
}

static call
one(const char *path, const char *key, const char *body)
{
	return call_one(h.addr, path, key, body);
}

/* Sends method path with key and one more "Name: value" header (each
 * NULL for none) into *r (caller frees with fc_response_free). */
static void
send_raw(const char *method, const char *path, const char *key,
    const char *extra, fc_response *r)
{
	char kh[300];
	const char *hdr[3] = { NULL, NULL, NULL };
	int n = 0;

	if (key != NULL) {
		snprintf(kh, sizeof(kh), "Idempotency-Key: %s", key);
		hdr[n++] = kh;
	}
	if (extra != NULL)
		hdr[n++] = extra;
	if (fc_http(h.addr, method, path, hdr, strcmp(method, "POST") == 0 ?
	    "{}" : NULL, r) != 0) {
		memset(r, 0, sizeof(*r));
		r->status = -1;
		r->head = strdup("");
		r->body = strdup("");
	}
}

/* A header of r, "" when absent; a copy that lasts until the next call
 * in this thread. */
static const char *
hdr(const fc_response *r, const char *name)
{
	const char *v = fc_header(r, name);

	return v != NULL ? v : "";
}

/* A header of r into buf, "" when absent. */
static const char *
hdr_copy(const fc_response *r, const char *name, char *buf, size_t size)
{
	snprintf(buf, size, "%s", hdr(r, name));
	return buf;
}

/* 1. */
Test(protocol, concurrent_duplicates_run_once, .init = start_default,
    .fini = stop)
{
	call c[32], done;
	int i, ran = 0, in_flight = 0, replays = 0;

	for (i = 0; i < 32; i++)
		c[i] = mk("/testkit/sleep/300", "dup-1", "{\"a\":1}");
	call_all(c, 32);
	for (i = 0; i < 32; i++) {
		if (c[i].status == 201 && c[i].replayed[0] == '\0')
			ran++;
		else if (c[i].status == 409 &&
		    strcmp(c[i].code, "IDEMPOTENCY_IN_FLIGHT") == 0)
			in_flight++;
		else if (c[i].status == 201 && strcmp(c[i].replayed, "true") == 0)
			replays++;
		else
			cr_expect_fail("unexpected answer %d %s", c[i].status,
			    c[i].body_out);
	}
	cr_expect_eq(ran, 1);
	cr_expect_eq(ran + in_flight + replays, 32);
	cr_expect_eq(harness_count_key(&h, "/testkit/sleep/300", "dup-1"), 1);
	/* afterwards: the identical answer */
	done = one("/testkit/sleep/300", "dup-1", "{\"a\":1}");
	cr_expect_eq(done.status, 201);
	cr_expect_str_eq(done.replayed, "true");
	for (i = 0; i < 32; i++)
		if (c[i].status == 201)
			cr_expect_str_eq(c[i].exec, done.exec);
	cr_expect_eq(harness_count_key(&h, "/testkit/sleep/300", "dup-1"), 1);
}

/* 2. and 7. */
Test(protocol, transient_status_not_stored, .init = start_default,
    .fini = stop)
{
	call a = one("/testkit/status/502", "t-502", NULL), b;

	cr_expect_eq(a.status, 502);
	b = one("/testkit/status/502", "t-502", NULL);
	cr_expect_eq(b.status, 502);
	cr_expect_str_eq(b.replayed, "");
	cr_expect_str_neq(a.exec, b.exec);
	cr_expect_eq(harness_count_key(&h, "/testkit/status/502", "t-502"), 2);

	a = one("/testkit/status/429", "t-429", NULL);
	b = one("/testkit/status/429", "t-429", NULL);
	cr_expect_eq(b.status, 429);
	cr_expect_str_eq(b.replayed, "");
	cr_expect_eq(harness_count_key(&h, "/testkit/status/429", "t-429"), 2);
}

/* 3. */
Test(protocol, handler_error_released, .init = start_default, .fini = stop)
{
	call a = one("/testkit/fail", "t-fail", NULL), b;

	cr_expect_eq(a.status, 500);
	cr_expect_str_eq(a.code, "HANDLER_FAILED");
	b = one("/testkit/fail", "t-fail", NULL);
	cr_expect_eq(b.status, 500);
	cr_expect_eq(harness_count_key(&h, "/testkit/fail", "t-fail"), 2);
}

/* 4. */
Test(protocol, deterministic_409_replayed, .init = start_default,
    .fini = stop)
{
	call a = one("/testkit/status/409", "t-409", NULL), b;

	cr_expect_eq(a.status, 409);
	b = one("/testkit/status/409", "t-409", NULL);
	cr_expect_eq(b.status, 409);
	cr_expect_str_eq(b.replayed, "true");
	cr_expect_str_eq(b.body_out, a.body_out);
	cr_expect_eq(harness_count_key(&h, "/testkit/status/409", "t-409"), 1);
}

/* 5. A live handler that runs for three times inflight-ttl keeps its
 * reservation: its lease is renewed, duplicates get 409, nothing is taken
 * over.  (Takeover of a dead owner's reservation: test_mysql.c and the
 * store suite.) */
Test(protocol, slow_live_handler_not_taken_over)
{
	call first = mk("/testkit/sleep/1500", "t-slow", NULL), dup, after;
	pthread_t t;

	start("inflight-ttl = 500ms");
	pthread_create(&t, NULL, call_thread, &first);
	cr_assert(harness_await_started(&h, "/testkit/sleep/1500", "t-slow", 1));
	call_sleep(700);
	dup = one("/testkit/sleep/1500", "t-slow", NULL);
	cr_expect_eq(dup.status, 409);
	cr_expect_str_eq(dup.code, "IDEMPOTENCY_IN_FLIGHT");
	call_sleep(500);
	dup = one("/testkit/sleep/1500", "t-slow", NULL);
	cr_expect_eq(dup.status, 409);
	cr_expect_str_eq(dup.code, "IDEMPOTENCY_IN_FLIGHT");
	pthread_join(t, NULL);
	cr_expect_eq(first.status, 201);
	cr_expect_str_eq(first.replayed, "");
	after = one("/testkit/sleep/1500", "t-slow", NULL);
	cr_expect_str_eq(after.replayed, "true");
	cr_expect_str_eq(after.exec, first.exec);
	cr_expect_eq(harness_count_key(&h, "/testkit/sleep/1500", "t-slow"), 1);
	cr_expect(!harness_logged(&h, "took over"));
	stop();
}

/* 6. The store fails (every entry in flight): 503, the handler not run. */
Test(protocol, store_failure_503)
{
	call hold = mk("/testkit/sleep/800", "hold", NULL), refused;
	pthread_t t;

	start("max-entries = 1");
	pthread_create(&t, NULL, call_thread, &hold);
	cr_assert(harness_await_started(&h, "/testkit/sleep/800", "hold", 1));
	refused = one("/testkit/echo", "other", NULL);
	pthread_join(t, NULL);
	cr_expect_eq(refused.status, 503);
	cr_expect_str_eq(refused.code, "IDEMPOTENCY_STORE_UNAVAILABLE");
	cr_expect_eq(harness_count(&h, "/testkit/echo"), 0);
	cr_expect_eq(hold.status, 201);
	/* once there is room, the same request runs */
	refused = one("/testkit/echo", "other", NULL);
	cr_expect_eq(refused.status, 201);
	cr_expect_eq(harness_count(&h, "/testkit/echo"), 1);
	stop();
}

/* 8. */
Test(protocol, committed_then_concurrent_replays, .init = start_default,
    .fini = stop)
{
	call first = one("/testkit/echo", "t-8", "{\"v\":8}"), c[16];
	int i;

	cr_expect_eq(first.status, 201);
	for (i = 0; i < 16; i++)
		c[i] = mk("/testkit/echo", "t-8", "{\"v\":8}");
	call_all(c, 16);
	for (i = 0; i < 16; i++) {
		cr_expect_eq(c[i].status, 201);
		cr_expect_str_eq(c[i].replayed, "true");
		cr_expect_str_eq(c[i].exec, first.exec);
		cr_expect_str_eq(c[i].body_out, first.body_out);
	}
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", "t-8"), 1);

	first = one("/testkit/status/200", "t-8b", NULL);
	for (i = 0; i < 16; i++)
		c[i] = mk("/testkit/status/200", "t-8b", NULL);
	call_all(c, 16);
	for (i = 0; i < 16; i++)
		cr_expect_str_eq(c[i].exec, first.exec);
	cr_expect_eq(harness_count_key(&h, "/testkit/status/200", "t-8b"), 1);
}

/* 9. */
Test(protocol, conflict_and_canonical_json, .init = start_default,
    .fini = stop)
{
	call a = one("/testkit/echo", "t-9", "{\"amount\": 5, \"to\": \"b\"}"), b;

	cr_expect_eq(a.status, 201);
	b = one("/testkit/echo", "t-9", "{\"amount\": 6, \"to\": \"b\"}");
	cr_expect_eq(b.status, 409);
	cr_expect_str_eq(b.code, "IDEMPOTENCY_CONFLICT");
	b = one("/testkit/echo", "t-9", "\n{ \"to\":\"b\",\n  \"amount\":5 }");
	cr_expect_eq(b.status, 201);
	cr_expect_str_eq(b.replayed, "true");
	cr_expect_str_eq(b.exec, a.exec);
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", "t-9"), 1);
}

/* 10. */
Test(protocol, key_validation_and_policy)
{
	call c;
	int i;

	start("key-format = uuidv7");
	c = one("/testkit/echo", "not-a-uuid", NULL);
	cr_expect_eq(c.status, 400);
	cr_expect_str_eq(c.code, "IDEMPOTENCY_KEY_INVALID");
	cr_expect(strstr(c.body_out, "an Idempotency-Key here is a UUIDv7")
	    != NULL, "%s", c.body_out);
	c = one("/testkit/echo", "0190f2a4-8c3e-4d5a-9b7c-123456789abc", NULL);
	cr_expect_eq(c.status, 400);
	/* a malformed sf-string: the detail says what is wrong, where */
	c = one("/testkit/echo", "\"0190f2a4-8c3e-7d5a-9b7c-123456789abc", NULL);
	cr_expect_eq(c.status, 400);
	cr_expect_str_eq(c.code, "IDEMPOTENCY_KEY_INVALID");
	cr_expect(strstr(c.body_out, "malformed quoted Idempotency-Key: the "
	    "quoted key has no closing quote") != NULL, "%s", c.body_out);
	c = one("/testkit/echo", "\"0190f2a4\\x\"", NULL);
	cr_expect_eq(c.status, 400);
	cr_expect(strstr(c.body_out, "a backslash at byte 10 before byte "
	    "0x78") != NULL, "%s", c.body_out);
	c = one("/testkit/echo", NULL, NULL);
	cr_expect_eq(c.status, 400);
	cr_expect_str_eq(c.code, "IDEMPOTENCY_KEY_MISSING");
	cr_expect_eq(harness_count(&h, "/testkit/echo"), 0);
	c = one("/testkit/echo", "0190f2a4-8c3e-7d5a-9b7c-123456789abc", NULL);
	cr_expect_eq(c.status, 201);
	stop();

	start("required = false");
	for (i = 0; i < 3; i++) {
		c = one("/testkit/echo", NULL, NULL);
		cr_expect_eq(c.status, 201);
	}
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", "-"), 3);
	stop();
}

/* 11. */
Test(protocol, scopes_never_cross)
{
	call c;

	start("scope = header:X-Api-Key");
	c = mk("/testkit/echo", "same-key", NULL);
	strcpy(c.extra, "X-Api-Key: alice-secret");
	call_send(&c);
	cr_expect_eq(c.status, 201);
	strcpy(c.extra, "X-Api-Key: bob-secret");
	call_send(&c);
	cr_expect_eq(c.status, 201);
	cr_expect_str_eq(c.replayed, "", "bob got alice's answer");
	strcpy(c.extra, "X-Api-Key: bob-secret");
	call_send(&c);
	cr_expect_str_eq(c.replayed, "true");
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", "same-key"), 2);
	stop();
}

/* 12.  With expired-keys = run a key past its lifetime is new (the
 * default refuses it: test_policy.c, test_webservers.c). */
Test(protocol, lifetime_and_eviction)
{
	call a, b;

	start("lifetime = 1s\nmax-entries = 2\nexpired-keys = run");
	a = one("/testkit/echo", "life", NULL);
	b = one("/testkit/echo", "life", NULL);
	cr_expect_str_eq(b.replayed, "true");
	call_sleep(1200);
	b = one("/testkit/echo", "life", NULL);
	cr_expect_str_eq(b.replayed, "");
	cr_expect_str_neq(b.exec, a.exec);
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", "life"), 2);
	/* two more keys push the oldest committed one out */
	one("/testkit/echo", "e1", NULL);
	one("/testkit/echo", "e2", NULL);
	b = one("/testkit/echo", "life", NULL);
	cr_expect_str_eq(b.replayed, "", "the oldest record was not evicted");
	b = one("/testkit/echo", "e2", NULL);
	cr_expect_str_eq(b.replayed, "true");
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", "life"), 3);
	stop();
}

/* inflight-wait: a duplicate waits for the first and gets its answer. */
Test(protocol, inflight_wait_replays)
{
	call first = mk("/testkit/sleep/1000", "wait", NULL), second;
	pthread_t t;

	start("inflight-wait = 5s");
	pthread_create(&t, NULL, call_thread, &first);
	cr_assert(harness_await_started(&h, "/testkit/sleep/1000", "wait", 1));
	second = one(
"/testkit/sleep/1000", "wait", NULL);
	pthread_join(t, NULL);
	cr_expect_eq(second.status, 201);
	cr_expect_str_eq(second.replayed, "true");
	cr_expect_str_eq(second.exec, first.exec);
	cr_expect_eq(harness_count_key(&h, "/testkit/sleep/1000", "wait"), 1);
	stop();
}

/* A crash releases nothing, but with the memory store the process and its
 * reservations go together: after a restart the key runs again. */
Test(protocol, crash_once_then_retry)
{
	call c;

	start("");
	c = one("/testkit/crash-once", "boom", NULL);
	cr_expect_eq(c.status, -1, "the connection should have died");
	cr_expect_eq(harness_count_key(&h, "/testkit/crash-once", "boom"), 0);
	stop();
}

/* A handler may set 64 headers; its stored answer is replayed with all of
 * them and Idempotent-Replayed besides (it was 500 REPLAY_FAILED for the
 * whole lifetime of the key). */
Test(protocol, replay_of_64_headers, .init = start_default, .fini = stop)
{
	fc_response a, b;
	char name[32], loc[128];
	int i;

	send_raw("POST", "/testkit/headers/64", "h-64", NULL, &a);
	cr_expect_eq(a.status, 201, "%s", a.body);
	send_raw("POST", "/testkit/headers/64", "h-64", NULL, &b);
	cr_expect_eq(b.status, 201, "%s", b.body);
	cr_expect_str_eq(hdr(&b, "Idempotent-Replayed"), "true");
	cr_expect_str_eq(b.body, a.body);
	cr_expect_str_eq(hdr(&b, "Location"), hdr_copy(&a, "Location", loc,
	    sizeof(loc)));
	for (i = 1; i <= 61; i++) {
		snprintf(name, sizeof(name), "X-Testkit-%d", i);
		cr_expect_eq(atoi(hdr(&b, name)), i, "%s", name);
	}
	cr_expect_eq(harness_count_key(&h, "/testkit/headers/64", "h-64"), 1);
	fc_response_free(&a);
	fc_response_free(&b);
}

/* With scope = none another client retrying the key gets the stored 201
 * with its Location, but never the first client's cookie. */
Test(protocol, set_cookie_never_replayed, .init = start_default,
    .fini = stop)
{
	fc_response a, b;
	char loc[128];

	send_raw("POST", "/testkit/headers/5", "cookie", "X-Client: alice",
	    &a);
	cr_expect_eq(a.status, 201, "%s", a.body);
	cr_expect(strncmp(hdr(&a, "Set-Cookie"), "exec=", 5) == 0, "%s",
	    a.head);
	send_raw("POST", "/testkit/headers/5", "cookie", "X-Client: bob", &b);
	cr_expect_eq(b.status, 201, "%s", b.body);
	cr_expect_str_eq(hdr(&b, "Idempotent-Replayed"), "true");
	cr_expect_str_eq(hdr(&b, "Set-Cookie"), "", "bob got alice's cookie");
	cr_expect_str_eq(hdr(&b, "Location"), hdr_copy(&a, "Location", loc,
	    sizeof(loc)));
	cr_expect(strncmp(loc, "/testkit/things/", 16) == 0, "%s", loc);
	cr_expect_str_eq(hdr(&b, "X-Testkit-2"), "2");
	cr_expect_str_eq(b.body, a.body);
	cr_expect_eq(harness_count_key(&h, "/testkit/headers/5", "cookie"), 1);
	fc_response_free(&a);
	fc_response_free(&b);
}

/* A read registered with the default policy is off: no key needed, a key
 * changes nothing, its answer is never replayed.  HEAD runs it and gets
 * the GET answer's head, Content-Length included, without the body; a
 * 405 lists HEAD beside GET.  The policy route says "off". */
Test(protocol, reads_off_and_head_under_default_policy,
    .init = start_default, .fini = stop)
{
	fc_response a, b, c;
	char len[32];
	json_t *doc, *rt;
	size_t i;
	int seen = 0;

	send_raw("GET", "/testkit/read", NULL, NULL, &a);
	cr_expect_eq(a.status, 200, "%s", a.body);
	fc_response_free(&a);
	send_raw("GET", "/testkit/read", "read-1", NULL, &a);
	send_raw("GET", "/testkit/read", "read-1", NULL, &b);
	cr_expect_eq(b.status, 200, "%s", b.body);
	cr_expect_str_eq(hdr(&b, "Idempotent-Replayed"), "");
	cr_expect_str_neq(b.body, a.body);
	cr_expect_eq(harness_count(&h, "/testkit/read"), 3);
	fc_response_free(&b);

	send_raw("HEAD", "/testkit/read", NULL, NULL, &b);
	cr_expect_eq(b.status, 200, "%s", b.head);
	cr_expect_eq(b.body_len, 0, "%s", b.body);
	snprintf(len, sizeof(len), "%zu", a.body_len);
	cr_expect_str_eq(hdr(&b, "Content-Length"), len);
	cr_expect_str_eq(hdr(&b, "Content-Type"), "application/json");
	cr_expect_eq(harness_count(&h, "/testkit/read"), 4);
	fc_response_free(&a);
	fc_response_free(&b);

	send_raw("POST", "/testkit/read", NULL, NULL, &a);
	cr_expect_eq(a.status, 405);
	cr_expect_str_eq(hdr(&a, "Allow"), "GET, HEAD");
	send_raw("HEAD", "/testkit/echo", NULL, NULL, &b);
	cr_expect_eq(b.status, 405);
	cr_expect_str_eq(hdr(&b, "Allow"), "POST");
	cr_expect_eq(b.body_len, 0);
	fc_response_free(&a);
	fc_response_free(&b);

	send_raw("GET", "/idempotency", NULL, NULL, &c);
	cr_assert_eq(c.status, 200, "%s", c.body);
	doc = json_loads(c.body, 0, NULL);
	cr_assert_not_null(doc, "%s", c.body);
	json_array_foreach(json_object_get(json_object_get(doc, "idempotency"),
	    "routes"), i, rt) {
		const char *m = json_string_value(json_object_get(rt,
		    "method"));
		const char *p = json_string_value(json_object_get(rt, "path"));
		const char *pol = json_string_value(json_object_get(rt,
		    "policy"));
		if (m == NULL || p == NULL || pol == NULL)
			continue;
		if (strcmp(p, "/testkit/read") == 0) {
			cr_expect_str_eq(m, "GET");
			cr_expect_str_eq(pol, "off");
			seen |= 1;
		} else if (strcmp(p, "/testkit/echo") == 0) {
			cr_expect_str_eq(pol, "required");
			seen |= 2;
		}
	}
	cr_expect_eq(seen, 3, "%s", c.body);
	json_decref(doc);
	fc_response_free(&c);
}

/* GET /idempotency/keys/{key} with the scope header of who (NULL: none);
 * its status into *status, its body parsed (caller frees; NULL: none). */
static json_t *
key_state(const char *key, const char *who, int *status)
{
	char uri[400], hdr[100];
	const char *hdrs[2] = { NULL, NULL };
	fc_response r;
	json_t *j;

	snprintf(uri, sizeof(uri), "/idempotency/keys/%s", key);
	if (who != NULL) {
		snprintf(hdr, sizeof(hdr), "X-Api-Key: %s", who);
		hdrs[0] = hdr;
	}
	cr_assert_eq(fc_http(h.addr, "GET", uri, hdrs, NULL, &r), 0);
	*status = r.status;
	j = r.body != NULL ? json_loads(r.body, 0, NULL) : NULL;
	if (r.status == 200)
		cr_expect_str_eq(fc_header(&r, "Cache-Control"), "no-store");
	fc_response_free(&r);
	return j;
}

/* The "state" of j ("" when none). */
static const char *
state_in(const json_t *j)
{
	const char *s = json_string_value(json_object_get(j, "state"));

	return s != NULL ? s : "";
}

/* Issue 40.2: a key's outcome can be asked, by a client that kept only
 * the key: never seen, in flight, committed (its first status and until
 * when it replays), expired; only in the caller's own scope, never the
 * stored body. */
Test(protocol, key_state_in_its_own_scope)
{
	call first;
	pthread_t t;
	json_t *j;
	int st;

	start("scope = header:X-Api-Key\nlifetime = 2s\n"
	    "tombstone-lifetime = 1h\ncleanup-interval = 1s");
	j = key_state("ks-1", "alice-secret", &st);
	cr_expect_eq(st, 200);
	cr_expect_str_eq(state_in(j), "absent");
	json_decref(j);
	first = mk("/testkit/sleep/1500", "ks-1", NULL);
	strcpy(first.extra, "X-Api-Key: alice-secret");
	pthread_create(&t, NULL, call_thread, &first);
	cr_assert(harness_await_started(&h, "/testkit/sleep/1500", "ks-1", 1));
	j = key_state("ks-1", "alice-secret", &st);
	cr_expect_str_eq(state_in(j), "in-flight");
	cr_expect(json_is_integer(json_object_get(j, "age-ms")));
	json_decref(j);
	/* another scope never sees it */
	j = key_state("ks-1", "bob-secret", &st);
	cr_expect_str_eq(state_in(j), "absent");
	json_decref(j);
	pthread_join(t, NULL);
	cr_assert_eq(first.status, 201);
	j = key_state("ks-1", "alice-secret", &st);
	cr_expect_str_eq(state_in(j), "committed");
	cr_expect_eq(json_integer_value(json_object_get(j, "status")), 201);
	cr_expect(json_is_string(json_object_get(j, "replays-until")));
	cr_expect(json_is_string(json_object_get(j, "committed-at")));
	cr_expect_null(json_object_get(j, "body"));
	json_decref(j);
	call_sleep(3500);   /* past its lifetime, and a purge */
	j = key_state("ks-1", "alice-secret", &st);
	cr_expect_str_eq(state_in(j), "expired");
	cr_expect_eq(json_integer_value(json_object_get(j, "status")), 201);
	cr_expect(json_is_string(json_object_get(j, "refused-until")));
	json_decref(j);
	/* no principal, or no key a request could carry: 400 */
	j = key_state("ks-1", NULL, &st);
	cr_expect_eq(st, 400);
	cr_expect_str_eq(json_string_value(json_object_get(j, "code")),
	    "IDEMPOTENCY_SCOPE_MISSING");
	json_decref(j);
	j = key_state("a%20b", "alice-secret", &st);
	cr_expect_eq(st, 400);
	cr_expect_str_eq(json_string_value(json_object_get(j, "code")),
	    "IDEMPOTENCY_KEY_INVALID");
	json_decref(j);
	cr_expect_eq(harness_count_key(&h, "/testkit/sleep/1500", "ks-1"), 1);
	stop();
}

/* With scope = none keys are global: the route is off unless
 * key-status = on. */
Test(protocol, key_state_off_when_keys_are_global)
{
	json_t *j;
	int st;

	start("");
	j = key_state("ks-2", NULL, &st);
	cr_expect_eq(st, 404);
	json_decref(j);
	stop();
	start("key-status = on");
	j = key_state("ks-2", NULL, &st);
	cr_expect_eq(st, 200);
	cr_expect_str_eq(state_in(j), "absent");
	json_decref(j);
	stop();
}
