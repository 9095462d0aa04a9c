/*
 * test_middleware.c - the protocol of DESIGN.md section 2 through
 * idem_service_handle, with the memory store, a counting handler and a
 * store decorator that injects failures.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "calls.h"
#include "harness.h"
#include "idem_key.h"
#include "idem_log.h"
#include "idem_metrics.h"
#include "idem_service.h"
#include "store_req.h"

static const idem_request_limits test_limits = { "", 100, 8192, 65536, 0 };

/* ------------------------------------------------- the counting handler */

static atomic_int calls;

/* Answers the status in ?s=NNN (default 201) with a body that counts. */
static idem_err
counting(const idem_request *req, idem_response *res, void *data)
{
	const char *q = idem_request_query(req);
	int n = atomic_fetch_add(&calls, 1) + 1, status = 201;
	char body[64];

	if (strncmp(q, "s=", 2) == 0)
		status = atoi(q + 2);
	if (status == 999)
		return IDEM_ERR_HANDLER;
	if (strncmp(q, "big", 3) == 0 || strncmp(q, "mid", 3) == 0) {
		size_t len = q[0] == 'b' ? 5000 : 1000;
		char *big = malloc(len);
		idem_err err;

		memset(big, 'b', len);
		err = idem_response_write(res, big, len);
		free(big);
		return err != IDEM_OK ? err : idem_response_status(res, 200);
	}
	snprintf(body, sizeof(body), "{\"call\":%d}", n);
	if (idem_response_header(res, "X-Custom", "kept") != IDEM_OK ||
	    idem_response_status(res, status) != IDEM_OK ||
	    idem_response_header(res, "Content-Type", "application/json") !=
	    IDEM_OK)
		return IDEM_ERR_HANDLER;
	return idem_response_write(res, body, strlen(body));
}

/* Answers 201 with ?n=N headers in all (at most 64), among them values
 * with leading blanks, a TAB, UTF-8 and nothing, which a replay must give
 * back as they were. */
static idem_err
many_headers(const idem_request *req, idem_response *res, void *data)
{
	static const char *const odd[][2] = { { "X-Pad", "  two blanks" },
	    { "X-Empty", "" }, { "X-Tab", "a\tb" },
	    { "X-Utf8", "caf\xc3\xa9" } };
	const char *q = idem_request_query(req);
	int n = strncmp(q, "n=", 2) == 0 ? atoi(q + 2) : 8, i;
	char name[32], value[32];
	idem_err err;

	atomic_fetch_add(&calls, 1);
	err = idem_response_json(res, 201, json_pack("{s:b}", "many", 1));
	for (i = 0; err == IDEM_OK && i < 4 && res->nheaders < (size_t)n; i++)
		err = idem_response_header(res, odd[i][0], odd[i][1]);
	for (i = 1; err == IDEM_OK && res->nheaders < (size_t)n; i++) {
		snprintf(name, sizeof(name), "X-H-%d", i);
		snprintf(value, sizeof(value), "value %d", i);
		err = idem_response_header(res, name, value);
	}
	return err;
}

/* Answers 201 with the headers of one response, those an answer is made
 * of, and the handler's own. */
static idem_err
per_response(const idem_request *req, idem_response *res, void *data)
{
	static const char *const h[][2] = {
		{ "Set-Cookie", "session=first-client; HttpOnly" },
		{ "Location", "/things/1" },
		{ "Date", "Sun, 29 Nov 2026 07:25:05 GMT" },
		{ "ETag", "\"v1\"" },
		{ "Connection", "close" },
		{ "Keep-Alive", "timeout=5" },
		{ "Content-Location", "/things/1" },
		{ "Proxy-Connection", "close" },
		{ "Transfer-Encoding", "chunked" },
		{ "Cache-Control", "private" },
		{ "Upgrade", "h2c" },
		{ "te", "trailers" },
		{ "Trailer", "X-Sum" },
		{ "idempotent-replayed", "false" },
		{ "X-Trace", "t-1" },
		{ "X-Own", "mine" },
	};
	idem_err err;
	size_t i;

	atomic_fetch_add(&calls, 1);
	err = idem_response_json(res, 201, json_pack("{s:i}", "id", 1));
	for (i = 0; err == IDEM_OK && i < sizeof(h) / sizeof(h[0]); i++)
		err = idem_response_header(res, h[i][0], h[i][1]);
	return err;
}

/* -------------------------------------------------- the faulty store */

typedef struct faulty {
	idem_store base;
	idem_store *inner;
	int fail_reserve, fail_commit, fail_release;
	idem_err reserve_err;    /* what a failing reserve returns */
	int landed_then_busy;    /* the next reserve's write lost its answer
	                          * and landed (the record is the request's),
	                          * and its retry met a lock wait: BUSY */
	size_t too_large;        /* > 0: commits of more bytes are refused */
	long commit_delay_ms;    /* a slow commit */
	int commits, releases;
} faulty;

/* Commits that reached the inner store, across a service's life. */
static atomic_int stored;

static idem_err
f_reserve(idem_store *s, idem_store_req *rq, idem_reserve_result *out)
{
	faulty *f = (faulty *)s;

	if (f->fail_reserve && f->reserve_err == IDEM_ERR_BUSY)
		/* as a store reports the deadlock it gave up on */
		rq->contended++;
	if (f->fail_reserve)
		return f->reserve_err != IDEM_OK ? f->reserve_err : IDEM_ERR_STORE;
	if (f->landed_then_busy) {
		f->landed_then_busy = 0;
		cr_assert_eq(idem_store_reserve(f->inner, rq, out), IDEM_OK);
		cr_assert_eq(out->outcome, IDEM_RESERVE_ACQUIRED);
		idem_reserve_result_clear(out);
		rq->unanswered = 1;
		rq->contended++;
		return IDEM_ERR_BUSY;
	}
	return idem_store_reserve(f->inner, rq, out);
}

static idem_err
f_commit(idem_store *s, idem_store_req *rq, const idem_stored_response *r)
{
	faulty *f = (faulty *)s;

	idem_err err;

	f->commits++;
	if (f->commit_delay_ms > 0)
		call_sleep(f->commit_delay_ms);
	if (f->fail_commit)
		return IDEM_ERR_STORE;
	if (f->too_large > 0 && r->headers_len + r->body_len > f->too_large)
		return IDEM_ERR_TOO_LARGE;
	err = idem_store_commit(f->inner, rq, r);
	if (err == IDEM_OK)
		atomic_fetch_add(&stored, 1);
	return err;
}

static idem_err
f_release(idem_store *s, idem_store_req *rq)
{
	faulty *f = (faulty *)s;

	f->releases++;
	if (f->fail_release)
		return IDEM_ERR_STORE;
	return idem_store_release(f->inner, rq);
}

static idem_err
f_renew(idem_store *s, idem_store_req *rq)
{
	return idem_store_renew(((faulty *)s)->inner, rq);
}

static idem_err
f_purge(idem_store *s, unsigned max, unsigned *n)
{
	return idem_store_purge(((faulty *)s)->inner, max, n);
}

static void
f_close(idem_store *s)
{
	idem_store_close(((faulty *)s)->inner);
	free(s);
}

static const idem_store_ops faulty_ops = { .name = "faulty",
    .reserve = f_reserve, .commit = f_commit, .release = f_release,
    .renew = f_renew, .purge = f_purge, .close = f_close };

/* ------------------------------------------------------------ fixture */

static idem_service *svc;
static faulty *fs;

/* A service with the counting handler on POST /c, /c/{x} and /two/{a}/{b}
 * (default policy), POST /opt (optional) and /off, many_headers on POST
 * /many and per_response on POST /per-response, over a faulty memory
 * store. */
static void
setup_with(const char *idem_conf)
{
	char text[1024];
	idem_config *cfg;

	/* a short grace: a store left failing must not hold up teardown */
	snprintf(text, sizeof(text), "[server]\nshutdown-grace = 300ms\n"
	    "[idempotency]\nmax-response = 4k\n%s\n", idem_conf);
	cr_assert_eq(idem_config_load_string(text, "mw.conf", &cfg), IDEM_OK);
	cr_assert_eq(idem_service_new(cfg, "/nowhere", &svc), IDEM_OK);
	cr_assert_eq(idem_router_add(svc->router, "POST", "/c", 
	    IDEM_POLICY_DEFAULT, counting, NULL, "test"), IDEM_OK);
	cr_assert_eq(idem_router_add(svc->router, "POST", "/c/{x}",
	    IDEM_POLICY_DEFAULT, counting, NULL, "test"), IDEM_OK);
	cr_assert_eq(idem_router_add(svc->router, "POST", "/opt",
	    IDEM_POLICY_OPTIONAL, counting, NULL, "test"), IDEM_OK);
	cr_assert_eq(idem_router_add(svc->router, "POST", "/off",
	    IDEM_POLICY_OFF, counting, NULL, "test"), IDEM_OK);
	cr_assert_eq(idem_router_add(svc->router, "POST", "/two/{a}/{b}",
	    IDEM_POLICY_DEFAULT, counting, NULL, "test"), IDEM_OK);
	cr_assert_eq(idem_router_add(svc->router, "POST", "/many",
	    IDEM_POLICY_DEFAULT, many_headers, NULL, "test"), IDEM_OK);
	cr_assert_eq(idem_router_add(svc->router, "POST", "/per-response",
	    IDEM_POLICY_DEFAULT, per_response, NULL, "test"), IDEM_OK);
	/* wrap the store the service opened */
	fs = calloc(1, sizeof(*fs));
	fs->base.ops = &faulty_ops;
	fs->inner = idem_middleware_swap_store(svc->mw, &fs->base);
	/* the routes added here get their metrics rows ([metrics] on) */
	idem_service_set_metrics(svc, svc->metrics, 0);
	atomic_store(&calls, 0);
	atomic_store(&stored, 0);
	idem_log_set_level(IDEM_LOG_ERROR + 1);
}

static void
setup_default(void)
{
	setup_with("");
}

static void
teardown(void)
{
	idem_service_free(svc);
}

typedef struct reply {
	int status;
	char body[8192];
	char ctype[64];
	char replayed[16];
	char custom[16];
	char retry_after[16];
	size_t nheaders;
	char heads[12288];      /* "Name=[value]\n" for each header */
} reply;

static void
header_copy(char *dst, size_t size, const idem_response *res,
    const char *name)
{
	const char *v = idem_response_get_header(res, name);

	snprintf(dst, size, "%s", v != NULL ? v : "");
}

/* Sends method uri with body and extra params ("HTTP_IDEMPOTENCY_KEY=...",
 * NULL for none). */
static reply
request(const char *method, const char *uri, const char *body,
    const char *p1, const char *p2)
{
	char m[64], u[512], cl[64], q[512];
	const char *qs = strchr(uri, '?');
	char *env[] = { m, u, q, cl, (char *)p1, (char *)p2, NULL };
	size_t i, used = 0;
	harness_body r = { body, strlen(body), 0, 0, 0 };
	idem_request req;
	idem_response res;
	reply out;

	snprintf(m, sizeof(m), "REQUEST_METHOD=%s", method);
	snprintf(u, sizeof(u), "REQUEST_URI=%s", uri);
	snprintf(q, sizeof(q), "QUERY_STRING=%s", qs != NULL ? qs + 1 : "");
	snprintf(cl, sizeof(cl), "CONTENT_LENGTH=%zu", r.len);
	if (p1 == NULL)
		env[4] = NULL;
	idem_response_init(&res);
	idem_service_handle(svc, env, harness_read_body, &r, &req, &res);
	memset(&out, 0, sizeof(out));
	out.status = res.status;
	snprintf(out.body, sizeof(out.body), "%.*s", (int)res.len,
	    res.body != NULL ? res.body : "");
	header_copy(out.ctype, sizeof(out.ctype), &res, "Content-Type");
	header_copy(out.replayed, sizeof(out.replayed), &res,
	    "Idempotent-Replayed");
	header_copy(out.custom, sizeof(out.custom), &res, "X-Custom");
	header_copy(out.retry_after, sizeof(out.retry_after), &res,
	    "Retry-After");
	out.nheaders = res.nheaders;
	for (i = 0; i < res.nheaders && used < sizeof(out.heads); i++)
		used += (size_t)snprintf(out.heads + used, sizeof(out.heads) -
		    used, "%s=[%s]\n", res.headers[i].name,
		    res.headers[i].value);
	idem_response_clear(&res);
	idem_request_clear(&req);
	return out;
}

/* POSTs body to uri with extra params. */
static reply
post(const char *uri, const char *body, const char *p1, const char *p2)
{
	return request("POST", uri, body, p1, p2);
}

#define KEY(k) "HTTP_IDEMPOTENCY_KEY=" k
#define CTYPE(t) "CONTENT_TYPE=" t
#define JSON CTYPE("application/json")

static void
expect_problem(const reply *r, int status, const char *code)
{
	char want[96];

	cr_expect_eq(r->status, status, "status %d: %s", r->status, r->body);
	snprintf(want, sizeof(want), "\"code\":\"%s\"", code);
	cr_expect(strstr(r->body, want) != NULL, "%s lacks %s", r->body, code);
	cr_expect_str_eq(r->ctype, "application/problem+json");
}

/* ------------------------------------------------------------- tests */

Test(mw, replay_does_not_call_handler, .init = setup_default,
    .fini = teardown)
{
	reply a = post("/c", "{\"n\":1}", KEY("k1"), NULL), b;
	int i;

	cr_expect_eq(a.status, 201);
	cr_expect_str_eq(a.body, "{\"call\":1}");
	cr_expect_str_eq(a.replayed, "");
	for (i = 0; i < 5; i++) {
		b = post("/c", "{\"n\":1}", KEY("k1"), NULL);
		cr_expect_eq(b.status, 201);
		cr_expect_str_eq(b.body, a.body);
		cr_expect_str_eq(b.replayed, "true");
		cr_expect_str_eq(b.ctype, "application/json");
		cr_expect_str_eq(b.custom, "kept");
	}
	cr_expect_eq(atomic_load(&calls), 1);
	cr_expect_eq(fs->commits, 1);
}

/* A stored answer comes back as it was, header for header, with
 * Idempotent-Replayed besides: also one with all the 64 headers a handler
 * may set. */
Test(mw, stored_answer_round_trips, .init = setup_default,
    .fini = teardown)
{
	static const int sizes[] = { 8, 63, 64 };
	char uri[32], key[32], want[sizeof(((reply *)0)->heads) + 32];
	reply a, b;
	size_t i;

	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		snprintf(uri, sizeof(uri), "/many?n=%d", sizes[i]);
		snprintf(key, sizeof(key), KEY("rt%d"), sizes[i]);
		a = post(uri, "{}", key, NULL);
		cr_expect_eq(a.status, 201);
		cr_expect_eq(a.nheaders, (size_t)sizes[i]);
		cr_expect_str_eq(a.replayed, "");
		b = post(uri, "{}", key, NULL);
		cr_expect_eq(b.status, 201, "%d headers: %d %s", sizes[i],
		    b.status, b.body);
		cr_expect_str_eq(b.body, a.body);
		snprintf(want, sizeof(want), "%sIdempotent-Replayed=[true]\n",
		    a.heads);
		cr_expect_str_eq(b.heads, want);
	}
	cr_expect_eq(atomic_load(&calls), 3);
	cr_expect_eq(fs->commits, 3);
}

/* What replay would refuse is never stored, so a stored answer can always
 * be replayed. */
Test(serialize, keeps_only_what_replay_takes)
{
	idem_response res;
	idem_header *h;
	size_t len;
	char *s;

	idem_response_init(&res);
	cr_assert_eq(idem_response_header(&res, "X-A", " a"), IDEM_OK);
	/* the framework's own names, slipped past idem_response_header */
	cr_assert_eq(idem_response_header(&res, "X-B", "b"), IDEM_OK);
	cr_assert_eq(idem_response_header(&res, "X-C", "c"), IDEM_OK);
	h = &res.headers[1];
	free(h->name);
	h->name = strdup("Content-Length");
	h = &res.headers[2];
	free(h->value);
	h->value = strdup("two\r\nlines");
	s = idem_headers_serialize(NULL, &res, &len);
	cr_assert_not_null(s);
	cr_expect_str_eq(s, "X-A:  a\r\n");
	cr_expect_eq(len, strlen(s));
	free(s);
	idem_response_clear(&res);
}

/* The framework's own header fits beside all a handler may set. */
Test(serialize, replay_header_beyond_the_limit)
{
	idem_response res;
	char name[16];
	size_t i;

	idem_response_init(&res);
	for (i = 0; i < IDEM_MAX_HEADERS; i++) {
		snprintf(name, sizeof(name), "X-%zu", i);
		cr_assert_eq(idem_response_header(&res, name, "v"), IDEM_OK);
	}
	cr_expect_eq(idem_response_header(&res, "X-More", "v"),
	    IDEM_ERR_TOO_LARGE);
	cr_expect_eq(idem_response_framework_header(&res,
	    "Idempotent-Replayed", "true"), IDEM_OK);
	idem_response_clear(&res);
}

/* The replay header policy: what belongs to one response (a cookie, the
 * date, hop-by-hop headers) and what the config omits is never stored, so
 * another client retrying the key never gets the first one's cookie; a 201
 * replays with its Location and the handler's own headers.  The first
 * answer is not filtered. */
Test(mw, replay_header_policy)
{
	reply a, b;

	setup_with("replay-omit-headers = x-trace");
	a = post("/per-response", "{}", KEY("hp"), "REMOTE_USER=alice");
	cr_expect_eq(a.status, 201);
	cr_expect_eq(a.nheaders, 17, "%s", a.heads);
	cr_expect(strstr(a.heads, "Set-Cookie=[session=first-client; "
	    "HttpOnly]\n") != NULL, "%s", a.heads);
	cr_expect(strstr(a.heads, "X-Trace=[t-1]\n") != NULL, "%s", a.heads);
	b = post("/per-response", "{}", KEY("hp"), "REMOTE_USER=bob");
	cr_expect_eq(b.status, 201);
	cr_expect_str_eq(b.body, a.body);
	cr_expect_str_eq(b.heads,
	    "Content-Type=[application/json]\n"
	    "Location=[/things/1]\n"
	    "ETag=[\"v1\"]\n"
	    "Content-Location=[/things/1]\n"
	    "Cache-Control=[private]\n"
	    "X-Own=[mine]\n"
	    "Idempotent-Replayed=[true]\n");
	cr_expect_eq(atomic_load(&calls), 1);
	teardown();
}

Test(mw, key_missing_and_optional, .init = setup_default, .fini = teardown)
{
	reply r = post("/c", "{}", NULL, NULL);

	expect_problem(&r, 400, "IDEMPOTENCY_KEY_MISSING");
	cr_expect_eq(atomic_load(&calls), 0);
	r = post("/opt", "{}", NULL, NULL);
	cr_expect_eq(r.status, 201);
	r = post("/opt", "{}", NULL, NULL);
	cr_expect_eq(r.status, 201);
	cr_expect_eq(atomic_load(&calls), 2);
	/* off: a key changes nothing */
	r = post("/off", "{}", KEY("k"), NULL);
	r = post("/off", "{}", KEY("k"), NULL);
	cr_expect_str_eq(r.replayed, "");
	cr_expect_eq(atomic_load(&calls), 4);
}

/* The default policy is for mutations: a read (GET) registered with it is
 * off, so it needs no key and its answer is never stored, while POST,
 * PUT, PATCH and DELETE need one; an explicit policy still applies. */
Test(mw, default_policy_leaves_reads_off, .init = setup_default,
    .fini = teardown)
{
	static const char *const mutating[] = { "PUT", "PATCH", "DELETE" };
	reply r;
	size_t i;

	cr_assert_eq(idem_router_add(svc->router, "GET", "/g",
	    IDEM_POLICY_DEFAULT, counting, NULL, "test"), IDEM_OK);
	cr_assert_eq(idem_router_add(svc->router, "GET", "/g/required",
	    IDEM_POLICY_REQUIRED, counting, NULL, "test"), IDEM_OK);
	for (i = 0; i < sizeof(mutating) / sizeof(mutating[0]); i++)
		cr_assert_eq(idem_router_add(svc->router, mutating[i], "/g",
		    IDEM_POLICY_DEFAULT, counting, NULL, "test"), IDEM_OK);
	r = request("GET", "/g", "", NULL, NULL);
	cr_expect_eq(r.status, 201, "%s", r.body);
	r = request("GET", "/g", "", KEY("g1"), NULL);
	r = request("GET", "/g", "", KEY("g1"), NULL);
	cr_expect_eq(r.status, 201, "%s", r.body);
	cr_expect_str_eq(r.replayed, "");
	cr_expect_str_eq(r.body, "{\"call\":3}");
	r = request("HEAD", "/g", "", NULL, NULL);
	cr_expect_eq(r.status, 201, "%s", r.body);
	cr_expect_eq(atomic_load(&calls), 4);
	cr_expect_eq(fs->commits, 0);
	r = request("GET", "/g/required", "", NULL, NULL);
	expect_problem(&r, 400, "IDEMPOTENCY_KEY_MISSING");
	for (i = 0; i < sizeof(mutating) / sizeof(mutating[0]); i++) {
		r = request(mutating[i], "/g", "", NULL, NULL);
		expect_problem(&r, 400, "IDEMPOTENCY_KEY_MISSING");
	}
	cr_expect_eq(atomic_load(&calls), 4);
}

Test(mw, default_policy_follows_required)
{
	reply r;

	setup_with("required = false");
	r = post("/c", "{}", NULL, NULL);
	cr_expect_eq(r.status, 201);
	r = post("/c", "{}", NULL, NULL);
	cr_expect_eq(atomic_load(&calls), 2);
	teardown();
}

Test(mw, invalid_opaque_keys, .init = setup_default, .fini = teardown)
{
	static const char *const bad[] = { KEY(""), KEY("has space"),
	    KEY("tab\there"), KEY("caf\xc3\xa9"), KEY("a\x7f") };
	char longkey[300];
	reply r;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		r = post("/c", "{}", bad[i], NULL);
		expect_problem(&r, 400, "IDEMPOTENCY_KEY_INVALID");
	}
	memset(longkey, 'k', sizeof(longkey));
	memcpy(longkey, KEY(""), strlen(KEY("")));
	longkey[strlen(KEY("")) + 256] = '\0';
	r = post("/c", "{}", longkey, NULL);
	expect_problem(&r, 400, "IDEMPOTENCY_KEY_INVALID");
	longkey[strlen(KEY("")) + 255] = '\0';
	r = post("/c", "{}", longkey, NULL);
	cr_expect_eq(r.status, 201);
	r = post("/c", "{}", KEY("'; DROP TABLE idempotency_keys; --"), NULL);
	expect_problem(&r, 400, "IDEMPOTENCY_KEY_INVALID");
	r = post("/c", "{}", KEY("';DROP-TABLE-idempotency_keys;--"), NULL);
	cr_expect_eq(r.status, 201);
	cr_expect_eq(atomic_load(&calls), 2);
}

Test(mw, uuidv7_keys)
{
	static const char *const bad[] = {
		KEY("0190f2a4-8c3e-4d5a-9b7c-123456789abc"),  /* v4 */
		KEY("0190f2a4-8c3e-7d5a-cb7c-123456789abc"),  /* variant 11 */
		KEY("0190f2a4-8c3e-7d5a-0b7c-123456789abc"),  /* variant 0 */
		KEY("0190f2a48c3e7d5a9b7c123456789abc"),      /* no dashes */
		KEY("{0190f2a4-8c3e-7d5a-9b7c-123456789abc}"),
		KEY("0190f2a4-8c3e-7d5a-9b7c-123456789abz"),
		KEY("0190f2a4-8c3e-7d5a-9b7c-123456789abcd"),
	};
	reply r;
	size_t i;

	setup_with("key-format = uuidv7");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		r = post("/c", "{}", bad[i], NULL);
		expect_problem(&r, 400, "IDEMPOTENCY_KEY_INVALID");
		cr_expect(strstr(r.body, "UUIDv7") != NULL, "%s", r.body);
	}
	r = post("/c", "{}", KEY("0190f2a4-8c3e-7d5a-9b7c-123456789abc"), NULL);
	cr_expect_eq(r.status, 201);
	r = post("/c", "{}", KEY("0190F2A4-8C3E-7D5A-AB7C-123456789ABC"), NULL);
	cr_expect_eq(r.status, 201);
	cr_expect_eq(atomic_load(&calls), 2);
	teardown();
}

Test(mw, uuid_keys)
{
	reply r;

	setup_with("key-format = uuid");
	r = post("/c", "{}", KEY("not-a-uuid"), NULL);
	expect_problem(&r, 400, "IDEMPOTENCY_KEY_INVALID");
	r = post("/c", "{}", KEY("0190f2a4-8c3e-4d5a-9b7c-123456789abc"), NULL);
	cr_expect_eq(r.status, 201);
	teardown();
}

/* A UUID key names one operation in either case; an opaque key is
 * byte-exact. */
Test(mw, uuid_keys_ignore_case)
{
	static const char *const conf[] = { "key-format = uuid",
	    "key-format = uuidv7", "" };
	const char *lower = KEY("0190f2a4-8c3e-7d5a-9b7c-123456789abc");
	const char *upper = KEY("0190F2A4-8C3E-7D5A-9B7C-123456789ABC");
	reply r;
	size_t i;

	for (i = 0; i < 3; i++) {
		setup_with(conf[i]);
		r = post("/c", "{}", lower, NULL);
		cr_expect_eq(r.status, 201, "%s: %s", conf[i], r.body);
		r = post("/c", "{}", upper, NULL);
		cr_expect_eq(r.status, 201, "%s: %s", conf[i], r.body);
		cr_expect_str_eq(r.replayed, i < 2 ? "true" : "", "%s",
		    conf[i]);
		cr_expect_eq(atomic_load(&calls), i < 2 ? 1 : 2, "%s: ran %d "
		    "times", conf[i], atomic_load(&calls));
		teardown();
	}
}

/* The draft's sf-string and the bare token are one key; a malformed
 * sf-string is refused. */
Test(mw, quoted_keys)
{
	static const char *const bad[] = { KEY("\"k"), KEY("\"k\\x\""),
	    KEY("\"k\"x"), KEY("\"\""), KEY("\"a b\"") };
	reply r;
	size_t i;

	setup_with("");
	r = post("/c", "{}", KEY("\"k-9\""), NULL);
	cr_expect_eq(r.status, 201, "%s", r.body);
	r = post("/c", "{}", KEY("k-9"), NULL);
	cr_expect_str_eq(r.replayed, "true");
	r = post("/c", "{}", KEY("\"a\\\"b\""), NULL);
	cr_expect_eq(r.status, 201, "%s", r.body);
	r = post("/c", "{}", KEY("a\"b"), NULL);
	cr_expect_str_eq(r.replayed, "true");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		r = post("/c", "{}", bad[i], NULL);
		expect_problem(&r, 400, "IDEMPOTENCY_KEY_INVALID");
	}
	cr_expect_eq(atomic_load(&calls), 2);
	teardown();
	setup_with("key-format = uuid");
	r = post("/c", "{}",
	    KEY("\"0190F2A4-8C3E-7D5A-9B7C-123456789ABC\""), NULL);
	cr_expect_eq(r.status, 201, "%s", r.body);
	r = post("/c", "{}", KEY("0190f2a4-8c3e-7d5a-9b7c-123456789abc"),
	    NULL);
	cr_expect_str_eq(r.replayed, "true");
	cr_expect_eq(atomic_load(&calls), 1);
	teardown();
}

Test(mw, conflict_on_other_request, .init = setup_default, .fini = teardown)
{
	reply r = post("/c", "{\"amount\":5}", KEY("k2"), JSON);

	cr_expect_eq(r.status, 201);
	r = post("/c", "{\"amount\":6}", KEY("k2"), JSON);
	expect_problem(&r, 409, "IDEMPOTENCY_CONFLICT");
	r = post("/c/other", "{\"amount\":5}", KEY("k2"), JSON);
	expect_problem(&r, 409, "IDEMPOTENCY_CONFLICT");
	r = post("/c?x=1", "{\"amount\":5}", KEY("k2"), JSON);
	expect_problem(&r, 409, "IDEMPOTENCY_CONFLICT");
	/* same JSON, other key order and white space: a replay */
	r = post("/c", " { \"amount\" :\n5 } ", KEY("k2"), JSON);
	cr_expect_eq(r.status, 201);
	cr_expect_str_eq(r.replayed, "true");
	cr_expect_eq(atomic_load(&calls), 1);
}

/* Requests that differ only where the fingerprint used to be blind: each
 * second request is another operation, never the first one's replay. */
Test(mw, encoded_slash_is_another_request, .init = setup_default,
    .fini = teardown)
{
	reply r = post("/two/a%2Fb/c", "{}", KEY("s1"), NULL);

	cr_expect_eq(r.status, 201, "%s", r.body);
	r = post("/two/a/b%2Fc", "{}", KEY("s1"), NULL);
	expect_problem(&r, 409, "IDEMPOTENCY_CONFLICT");
	r = post("/two/a%2Fb/c", "{}", KEY("s1"), NULL);
	cr_expect_str_eq(r.replayed, "true");
	cr_expect_eq(atomic_load(&calls), 1);
}

Test(mw, repeated_query_values_keep_order, .init = setup_default,
    .fini = teardown)
{
	reply r = post("/c?tag=x&b=1&tag=y", "{}", KEY("q1"), NULL);

	cr_expect_eq(r.status, 201, "%s", r.body);
	/* names sort: the order of different names does not matter */
	r = post("/c?b=1&tag=x&tag=y", "{}", KEY("q1"), NULL);
	cr_expect_str_eq(r.replayed, "true");
	/* the order of one name's values does */
	r = post("/c?tag=y&b=1&tag=x", "{}", KEY("q1"), NULL);
	expect_problem(&r, 409, "IDEMPOTENCY_CONFLICT");
	cr_expect_eq(atomic_load(&calls), 1);
}

Test(mw, content_type_counts, .init = setup_default, .fini = teardown)
{
	reply r = post("/c", "{\"a\":1,\"b\":2}", KEY("t1"),
	    JSON);

	cr_expect_eq(r.status, 201, "%s", r.body);
	/* the same bytes as another media type are another request */
	r = post("/c", "{\"a\":1,\"b\":2}", KEY("t1"), CTYPE("text/plain"));
	expect_problem(&r, 409, "IDEMPOTENCY_CONFLICT");
	r = post("/c", "{\"a\":1,\"b\":2}", KEY("t1"), NULL);
	expect_problem(&r, 409, "IDEMPOTENCY_CONFLICT");
	/* JSON media types are canonicalised; type and subtype in any case */
	r = post("/c", "{\"b\":2, \"a\":1}", KEY("t1"),
	    CTYPE(" Application/JSON "));
	cr_expect_str_eq(r.replayed, "true", "%d %s", r.status, r.body);
	/* parameters count, the white space around ';' does not */
	r = post("/c", "{}", KEY("t2"),
	    CTYPE("application/json; charset=utf-8"));
	cr_expect_eq(r.status, 201, "%s", r.body);
	r = post("/c", "{}", KEY("t2"),
	    CTYPE("application/json ;charset=utf-8"));
	cr_expect_str_eq(r.replayed, "true", "%d %s", r.status, r.body);
	r = post("/c", "{}", KEY("t2"), JSON);
	expect_problem(&r, 409, "IDEMPOTENCY_CONFLICT");
	/* any other type counts byte for byte, even when it parses as JSON */
	r = post("/c", "{\"a\":1,\"b\":2}", KEY("t3"), CTYPE("text/plain"));
	cr_expect_eq(r.status, 201, "%s", r.body);
	r = post("/c", "{\"b\":2,\"a\":1}", KEY("t3"), CTYPE("text/plain"));
	expect_problem(&r, 409, "IDEMPOTENCY_CONFLICT");
	/* a +json suffix is JSON */
	r = post("/c", "{\"a\":1,\"b\":2}", KEY("t4"),
	    CTYPE("application/merge-patch+json"));
	cr_expect_eq(r.status, 201, "%s", r.body);
	r = post("/c", "{\"b\":2,\"a\":1}", KEY("t4"),
	    CTYPE("application/merge-patch+json"));
	cr_expect_str_eq(r.replayed, "true", "%d %s", r.status, r.body);
	cr_expect_eq(atomic_load(&calls), 4);
}

Test(mw, json_numbers_exact, .init = setup_default, .fini = teardown)
{
	static const char *const pairs[][2] = {
		{ "{\"x\":0.1}", "{\"x\":0.1000000000000000000001}" },
		{ "{\"x\":9007199254740993.0}", "{\"x\":9007199254740992.0}" },
		{ "[1e2]", "[100.0]" },
		{ "[1.50]", "[1.5]" },
		{ "[-0]", "[0]" },
		{ "[123456789012345678901]", "[123456789012345678902]" },
		{ "[1e400]", "[2e400]" },
	};
	char key[32];
	reply r;
	size_t i;

	for (i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		snprintf(key, sizeof(key), KEY("n%zu"), i);
		r = post("/c", pairs[i][0], key, JSON);
		cr_expect_eq(r.status, 201, "%s: %s", pairs[i][0], r.body);
		r = post("/c", pairs[i][1], key, JSON);
		expect_problem(&r, 409, "IDEMPOTENCY_CONFLICT");
		cr_expect_str_eq(r.replayed, "", "%s got the answer of %s",
		    pairs[i][1], pairs[i][0]);
	}
	/* numbers written as they are read back keep the canonical form */
	r = post("/c", "{\"a\":[-12,0.5,1.25e-7],\"b\":0.1}", KEY("n-ok"),
	    JSON);
	cr_expect_eq(r.status, 201, "%s", r.body);
	r = post("/c", "{\"b\":0.1, \"a\":[-12,0.5,1.25e-7]}", KEY("n-ok"),
	    JSON);
	cr_expect_str_eq(r.replayed, "true", "%d %s", r.status, r.body);
	cr_expect_eq(atomic_load(&calls), 8);
}

Test(mw, conflict_status_configurable)
{
	reply r;

	setup_with("conflict-status = 422");
	post("/c", "a", KEY("k"), NULL);
	r = post("/c", "b", KEY("k"), NULL);
	expect_problem(&r, 422, "IDEMPOTENCY_CONFLICT");
	teardown();
}

Test(mw, store_failure_fails_closed, .init = setup_default,
    .fini = teardown)
{
	reply r;

	fs->fail_reserve = 1;
	r = post("/c", "{}", KEY("k3"), NULL);
	expect_problem(&r, 503, "IDEMPOTENCY_STORE_UNAVAILABLE");
	cr_expect_str_eq(r.retry_after, "1");
	cr_expect_eq(atomic_load(&calls), 0);
	fs->fail_reserve = 0;
	r = post("/c", "{}", KEY("k3"), NULL);
	cr_expect_eq(r.status, 201);
	cr_expect_eq(atomic_load(&calls), 1);
}

static void
setup_metrics(void)
{
	setup_with("inflight-ttl = 300ms\n[metrics]\nenabled = true\n");
}

/* An outage: logged when it starts and when it ends, not per request;
 * the reservations whose reserve got no answer are cleaned up without
 * being counted as fencing. */
Test(mw, store_outage_logged_once_and_counted, .init = setup_metrics,
    .fini = teardown)
{
	harness_capture cap;
	char *log, *text;
	size_t n;
	reply r;

	cr_assert_eq(harness_capture_begin(&cap), 0);
	idem_log_set_level(IDEM_LOG_WARN);
	fs->fail_reserve = 1;
	r = post("/c", "{}", KEY("out1"), NULL);
	expect_problem(&r, 503, "IDEMPOTENCY_STORE_UNAVAILABLE");
	r = post("/c", "{}", KEY("out2"), NULL);
	expect_problem(&r, 503, "IDEMPOTENCY_STORE_UNAVAILABLE");
	fs->fail_reserve = 0;
	r = post("/c", "{}", KEY("out3"), NULL);
	cr_expect_eq(r.status, 201);
	/* the lease thread (every 100 ms here) deletes what may have landed */
	usleep(400000);
	log = harness_capture_end(&cap);
	idem_log_set_level(IDEM_LOG_ERROR + 1);
	cr_expect_eq(strstr(log, "store_unavailable") != NULL &&
	    strstr(strstr(log, "store_unavailable") + 1, "store_unavailable")
	    == NULL, 1, "one line for the outage: %s", log);
	cr_expect(strstr(log, "event=store_recovered") != NULL, "%s", log);
	cr_expect(strstr(log, "2 request(s) got 503") != NULL, "%s", log);
	free(log);
	text = idem_metrics_render(svc->metrics, NULL, &n);
	cr_assert_not_null(text);
	cr_expect_eq(harness_metric(text, "idemfcgi_idempotency_outcomes_total"
	    "{method=\"POST\",route=\"/c\",outcome=\"store_unavailable\"}"), 2,
	    "%s", text);
	cr_expect_eq(harness_metric_sum(text,
	    "idemfcgi_idempotency_outcomes_total", "outcome=\"fenced\""), 0);
	cr_expect_eq(harness_metric(text, "idemfcgi_idempotency_outcomes_total"
	    "{method=\"POST\",route=\"/c\",outcome=\"acquired\"}"), 1);
	cr_expect_eq(harness_metric(text, "idemfcgi_idempotency_outcomes_total"
	    "{method=\"POST\",route=\"/c\",outcome=\"committed\"}"), 1);
	free(text);
	cr_expect_eq(idem_middleware_backlog(svc->mw), 0, "the jobs are done");
}

/* The outcome count of method route in svc's metrics (-1: no series). */
static double
route_outcome(const char *method, const char *route, const char *outcome)
{
	char series[256], *text;
	size_t n;
	double v;

	snprintf(series, sizeof(series), "idemfcgi_idempotency_outcomes_total"
	    "{method=\"%s\",route=\"%s\",outcome=\"%s\"}", method, route,
	    outcome);
	text = idem_metrics_render(svc->metrics, NULL, &n);
	cr_assert_not_null(text);
	v = harness_metric(text, series);
	free(text);
	return v;
}

/*
 * Two routes' outcomes are counted apart, under the labels of their
 * requests: POST /c's first executions, commits (the lease thread's
 * deferred one too), replay and 409 in flight; POST /c/{x}'s executions,
 * commit, releases, conflict and missing key; a keyed route that saw
 * nothing has its series at zero, a route with the policy off none.
 */
Test(mw, outcomes_counted_by_route, .init = setup_metrics,
    .fini = teardown)
{
	reply r;

	cr_expect_eq(post("/c", "{}", KEY("r1"), NULL).status, 201);
	cr_expect_str_eq(post("/c", "{}", KEY("r1"), NULL).replayed, "true");
	cr_expect_eq(post("/c/x", "{}", KEY("r2"), NULL).status, 201);
	cr_expect_eq(post("/c/x?s=500", "{}", KEY("r3"), NULL).status, 500);
	cr_expect_eq(post("/c/x?s=503", "{}", KEY("r4"), NULL).status, 503);
	r = post("/c/x", "{\"other\":1}", KEY("r2"), NULL);
	expect_problem(&r, 409, "IDEMPOTENCY_CONFLICT");
	r = post("/c/x", "{}", NULL, NULL);
	expect_problem(&r, 400, "IDEMPOTENCY_KEY_MISSING");
	cr_expect_eq(post("/off", "{}", NULL, NULL).status, 201);
	/* a commit that meets an outage is the lease thread's: counted on
	 * its key's route all the same */
	fs->fail_commit = 1;
	cr_expect_eq(post("/c", "{}", KEY("r5"), NULL).status, 201);
	r = post("/c", "{}", KEY("r5"), NULL);
	expect_problem(&r, 409, "IDEMPOTENCY_IN_FLIGHT");
	fs->fail_commit = 0;
	usleep(400000);

	cr_expect_eq(route_outcome("POST", "/c", "acquired"), 2);
	cr_expect_eq(route_outcome("POST", "/c", "committed"), 2);
	cr_expect_eq(route_outcome("POST", "/c", "replayed"), 1);
	cr_expect_eq(route_outcome("POST", "/c", "in_flight"), 1);
	cr_expect_eq(route_outcome("POST", "/c", "conflict"), 0);
	cr_expect_eq(route_outcome("POST", "/c", "released"), 0);
	cr_expect_eq(route_outcome("POST", "/c/{x}", "acquired"), 3);
	cr_expect_eq(route_outcome("POST", "/c/{x}", "committed"), 1);
	cr_expect_eq(route_outcome("POST", "/c/{x}", "released"), 2);
	cr_expect_eq(route_outcome("POST", "/c/{x}", "conflict"), 1);
	cr_expect_eq(route_outcome("POST", "/c/{x}", "key_missing"), 1);
	cr_expect_eq(route_outcome("POST", "/c/{x}", "replayed"), 0);
	cr_expect_eq(route_outcome("POST", "/c/{x}", "in_flight"), 0);
	cr_expect_eq(route_outcome("POST", "/opt", "acquired"), 0);
	cr_expect_eq(route_outcome("POST", "/off", "acquired"), -1);
	cr_expect_eq(route_outcome("", "", "dead_worker_released"), 0);
}

static harness_capture capture;

/* With scope = none the key ignores the principal the web server passes:
 * one warning per process when a keyed request carries one (REMOTE_USER
 * or Authorization); none while requests carry none, and none under a
 * scope. */
Test(mw, unscoped_principal_warned_once)
{
	char log[8192];
	reply r;

	setup_with("scope = header:X-Api-Key");
	cr_assert_eq(harness_capture_level(&capture, IDEM_LOG_WARN), 0);
	r = post("/c", "{}", KEY("s1"), "HTTP_X_API_KEY=k");
	cr_expect_eq(r.status, 201);
	r = post("/c", "{}", KEY("s2"), "REMOTE_USER=alice");
	expect_problem(&r, 400, "IDEMPOTENCY_SCOPE_MISSING");
	harness_capture_into(&capture, log, sizeof(log));
	cr_expect_eq(harness_occurrences(log, "unscoped_principal"), 0, "%s", log);
	teardown();

	setup_default();
	cr_assert_eq(harness_capture_level(&capture, IDEM_LOG_WARN), 0);
	r = post("/c", "{}", KEY("u0"), NULL);
	r = post("/opt", "{}", NULL, "REMOTE_USER=alice");
	cr_expect_eq(r.status, 201);
	harness_capture_into(&capture, log, sizeof(log));
	cr_expect_eq(harness_occurrences(log, "unscoped_principal"), 0,
	    "no principal, or no key: %s", log);
	cr_assert_eq(harness_capture_level(&capture, IDEM_LOG_WARN), 0);
	r = post("/c", "{}", KEY("u1"), "REMOTE_USER=alice");
	cr_expect_eq(r.status, 201);
	r = post("/c", "{}", KEY("u1"), "REMOTE_USER=bob");
	cr_expect_str_eq(r.replayed, "true");
	r = post("/c", "{}", KEY("u2"), "HTTP_AUTHORIZATION=Bearer x");
	r = post("/opt", "{}", KEY("u3"), "HTTP_AUTHORIZATION=Bearer y");
	harness_capture_into(&capture, log, sizeof(log));
	cr_expect_eq(harness_occurrences(log, "unscoped_principal"), 1, "%s", log);
	cr_expect(strstr(log, " warn ") != NULL, "%s", log);
	cr_expect(strstr(log, "scope = none") != NULL, "%s", log);
	teardown();
}

Test(mw, commit_failure_still_answers, .init = setup_default,
    .fini = teardown)
{
	reply r;

	fs->fail_commit = 1;
	r = post("/c", "{}", KEY("k4"), NULL);
	cr_expect_eq(r.status, 201);
	cr_expect_eq(fs->commits, 1);
}

/* Issue 12.4: stopping makes a last attempt at a deferred commit, so the
 * key is answered, not taken over and run again after a restart. */
Test(mw, stop_flushes_deferred_commit, .init = setup_default,
    .fini = teardown)
{
	idem_store_key sk;
	idem_store_record rec;
	reply r;

	fs->fail_commit = 1;
	r = post("/c", "{}", KEY("k4f"), NULL);
	cr_expect_eq(r.status, 201);
	cr_expect_eq(idem_middleware_backlog(svc->mw), 1, "the commit waits for the store");
	fs->fail_commit = 0;
	cr_expect_eq(idem_middleware_flush(svc->mw, 2000), 0);
	cr_expect_eq(atomic_load(&stored), 1);
	memset(&sk, 0, sizeof(sk));
	strcpy(sk.key, "k4f");
	sk.key_len = 3;
	cr_assert_eq(idem_store_lookup(fs->inner, &sk, &rec), IDEM_OK);
	cr_expect(rec.state == IDEM_RECORD_COMMITTED);
	cr_expect_eq(rec.status, 201);
}

/* Issue 12.4: what the last attempt cannot write is logged per key. */
Test(mw, stop_logs_what_it_drops, .init = setup_default, .fini = teardown)
{
	char log[4096];

	fs->fail_commit = 1;
	post("/c", "{}", KEY("k4g"), NULL);
	cr_assert_eq(harness_capture_level(&capture, IDEM_LOG_ERROR), 0);
	cr_expect_eq(idem_middleware_flush(svc->mw, 300), 1);
	harness_capture_into(&capture, log, sizeof(log));
	cr_expect(strstr(log, "event=dropped_at_exit") != NULL, "%s", log);
	cr_expect(strstr(log, "key=") != NULL, "%s", log);
	cr_expect(strstr(log, "k4g") == NULL, "never the key itself: %s", log);
}

/* Issue 12.4: a store that is still away costs the last attempt one try
 * a round, not one per job (each try may cost the store's timeouts), so a
 * stop stays within shutdown-grace. */
Test(mw, stop_tries_an_absent_store_once_a_round, .init = setup_default,
    .fini = teardown)
{
	char key[64];
	int i;

	fs->fail_commit = 1;
	for (i = 0; i < 5; i++) {
		snprintf(key, sizeof(key), KEY("k4r%d"), i);
		post("/c", "{}", key, NULL);
	}
	cr_assert_eq(fs->commits, 5);
	fs->commit_delay_ms = 200;
	cr_expect_eq(idem_middleware_flush(svc->mw, 100), 5);
	cr_expect_eq(fs->commits, 6, "one try, then the deadline");
}

/* A POST for a thread. */
static void *
post_thread(void *arg)
{
	reply *r = arg;

	*r = post("/c", "{}", KEY("k5s"), NULL);
	return NULL;
}

/* Issue 12.5: a commit slower than inflight-ttl keeps its lease, so a
 * retry meanwhile is told the request is in flight, not run again. */
Test(mw, slow_commit_keeps_its_lease)
{
	pthread_t t;
	reply first, r;

	setup_with("inflight-ttl = 300ms");
	fs->commit_delay_ms = 1200;
	pthread_create(&t, NULL, post_thread, &first);
	call_sleep(800);
	r = post("/c", "{}", KEY("k5s"), NULL);
	expect_problem(&r, 409, "IDEMPOTENCY_IN_FLIGHT");
	pthread_join(t, NULL);
	cr_expect_eq(first.status, 201);
	fs->commit_delay_ms = 0;
	r = post("/c", "{}", KEY("k5s"), NULL);
	cr_expect_str_eq(r.replayed, "true");
	cr_expect_eq(atomic_load(&calls), 1);
	teardown();
}

/* Issue 12.6: contention the store could not settle is "in flight" (409
 * with Retry-After), never a 503 or a conflict. */
Test(mw, contention_is_in_flight, .init = setup_default, .fini = teardown)
{
	reply r;

	fs->fail_reserve = 1;
	fs->reserve_err = IDEM_ERR_BUSY;
	r = post("/c", "{}", KEY("k5b"), NULL);
	expect_problem(&r, 409, "IDEMPOTENCY_IN_FLIGHT");
	cr_expect_str_eq(r.retry_after, "1");
	cr_expect_eq(atomic_load(&calls), 0);
	cr_expect_eq(idem_middleware_store_down(svc->mw), 0, "not an outage");
}

/* Issue 35.4: a reserve whose write lost its answer (a read timeout while
 * the server still ran it) and whose retry met BUSY answers 409; the
 * write lands under the request's owner, and nobody runs under it: the
 * request leaves a job that deletes it (FORGET), so the key is not held
 * until inflight-ttl. */
Test(mw, busy_after_an_unanswered_write_forgets_it)
{
	idem_store_key k;
	idem_store_record rec;
	reply r;
	int i;

	setup_with("inflight-ttl = 600ms");
	fs->landed_then_busy = 1;
	r = post("/c", "{}", KEY("k5u"), NULL);
	expect_problem(&r, 409, "IDEMPOTENCY_IN_FLIGHT");
	cr_expect_eq(atomic_load(&calls), 0);
	memset(&k, 0, sizeof(k));
	k.key_len = (size_t)snprintf(k.key, sizeof(k.key), "k5u");
	cr_expect_eq(idem_middleware_backlog(svc->mw), 1, "no FORGET queued");
	/* the lease thread's round (every 200 ms) deletes it */
	for (i = 0; i < 100 && idem_middleware_backlog(svc->mw) > 0; i++)
		call_sleep(20);
	cr_expect_eq(idem_store_lookup(fs->inner, &k, &rec), IDEM_ERR_NOT_FOUND,
	    "the landed reservation holds the key (%s, owner %s)",
	    idem_record_state_names[rec.state], rec.owner);
	teardown();
}

/* The contention a store reports in the request's descriptor is counted
 * on the request's route, once per report. */
Test(mw, contention_counted_on_the_route, .init = setup_metrics,
    .fini = teardown)
{
	reply r;

	fs->fail_reserve = 1;
	fs->reserve_err = IDEM_ERR_BUSY;
	r = post("/c", "{}", KEY("k5c"), NULL);
	expect_problem(&r, 409, "IDEMPOTENCY_IN_FLIGHT");
	cr_expect_eq(route_outcome("POST", "/c", "contended"), 1);
	cr_expect_eq(route_outcome("POST", "/c/{x}", "contended"), 0);
	cr_expect_eq(route_outcome("", "", "contended"), 0);
	cr_expect_eq(atomic_load(&calls), 0);
}

Test(mw, transient_statuses_released, .init = setup_default,
    .fini = teardown)
{
	static const int transient[] = { 500, 502, 503, 429, 401, 403, 302 };
	char uri[32];
	reply r;
	size_t i;

	for (i = 0; i < sizeof(transient) / sizeof(transient[0]); i++) {
		atomic_store(&calls, 0);
		snprintf(uri, sizeof(uri), "/c?s=%d", transient[i]);
		r = post(uri, "{}", KEY("t"), NULL);
		cr_expect_eq(r.status, transient[i]);
		r = post(uri, "{}", KEY("t"), NULL);
		cr_expect_eq(r.status, transient[i]);
		cr_expect_str_eq(r.replayed, "", "%d was replayed", transient[i]);
		cr_expect_eq(atomic_load(&calls), 2, "%d: %d calls", transient[i],
		    atomic_load(&calls));
	}
	cr_expect_eq(fs->commits, 0);
}

Test(mw, deterministic_statuses_committed, .init = setup_default,
    .fini = teardown)
{
	static const int final[] = { 200, 201, 204, 400, 404, 409, 422 };
	char uri[32], key[32];
	reply a, b;
	size_t i;

	for (i = 0; i < sizeof(final) / sizeof(final[0]); i++) {
		snprintf(uri, sizeof(uri), "/c?s=%d", final[i]);
		snprintf(key, sizeof(key), KEY("f%d"), final[i]);
		a = post(uri, "{}", key, NULL);
		b = post(uri, "{}", key, NULL);
		cr_expect_eq(b.status, final[i]);
		cr_expect_str_eq(b.replayed, "true", "%d not replayed", final[i]);
		cr_expect_str_eq(a.body, b.body);
	}
	cr_expect_eq(atomic_load(&calls), 7);
}

Test(mw, handler_error_released, .init = setup_default, .fini = teardown)
{
	reply r = post("/c?s=999", "{}", KEY("k5"), NULL);

	expect_problem(&r, 500, "HANDLER_FAILED");
	r = post("/c?s=999", "{}", KEY("k5"), NULL);
	expect_problem(&r, 500, "HANDLER_FAILED");
	cr_expect_eq(atomic_load(&calls), 2);
	cr_expect_eq(fs->releases, 2);
}

/* The notice replayed in place of an answer too large to store. */
static void
expect_notice(const reply *r, int status)
{
	cr_expect_eq(r->status, status, "status %d: %s", r->status, r->body);
	cr_expect_str_eq(r->replayed, "true");
	cr_expect_str_eq(r->ctype, "application/problem+json");
	cr_expect(strstr(r->body, "\"code\":\"IDEMPOTENCY_ANSWER_NOT_STORED\"")
	    != NULL, "%s", r->body);
	cr_expect(strstr(r->body, "was executed") != NULL, "%s", r->body);
}

/* Issue 12.1: an answer over max-response is never released. */
Test(mw, over_max_response_replayed_as_notice, .init = setup_default,
    .fini = teardown)
{
	reply r = post("/c?big", "{}", KEY("k6"), NULL);

	cr_expect_eq(r.status, 200);
	cr_expect_eq(strlen(r.body), 5000, "the first answer is whole");
	r = post("/c?big", "{}", KEY("k6"), NULL);
	expect_notice(&r, 200);
	r = post("/c?big", "{}", KEY("k6"), NULL);
	expect_notice(&r, 200);
	cr_expect_eq(atomic_load(&calls), 1);
	cr_expect_eq(fs->releases, 0);
}

/* Issue 12.1: an answer over the store's own limits (a column) is not
 * sent to the store, and the notice keeps the status and Location. */
Test(mw, over_store_limits_replayed_as_notice, .init = setup_default,
    .fini = teardown)
{
	reply r;

	fs->base.limits.headers = 20;
	r = post("/c", "{}", KEY("k6b"), NULL);
	cr_expect_eq(r.status, 201);
	cr_expect_str_eq(r.custom, "kept");
	r = post("/c", "{}", KEY("k6b"), NULL);
	expect_notice(&r, 201);
	cr_expect_str_eq(r.custom, "", "only safe headers are kept");
	cr_expect_eq(atomic_load(&calls), 1);
	cr_expect_eq(fs->commits, 1, "the answer itself was never sent");
}

/* Issue 12.2: a store that refuses an answer as too large (a permanent
 * SQL error) gets the notice instead: no retry loop, no 409 forever. */
Test(mw, store_refusal_replayed_as_notice, .init = setup_default,
    .fini = teardown)
{
	reply r;

	fs->too_large = 600;
	r = post("/c?mid", "{}", KEY("k6c"), NULL);
	cr_expect_eq(r.status, 200);
	cr_expect_eq(strlen(r.body), 1000);
	r = post("/c?mid", "{}", KEY("k6c"), NULL);
	expect_notice(&r, 200);
	/* an answer the store takes is stored as it is */
	r = post("/c", "{}", KEY("k6d"), NULL);
	r = post("/c", "{}", KEY("k6d"), NULL);
	cr_expect_str_eq(r.body, "{\"call\":2}");
	cr_expect_str_eq(r.replayed, "true");
	cr_expect_eq(atomic_load(&calls), 2);
	cr_expect_eq(fs->releases, 0);
	cr_expect_eq(idem_middleware_backlog(svc->mw), 0, "nothing left to retry");
}

Test(mw, in_flight_duplicate)
{
	reply r;
	idem_store_key sk;
	idem_reserve_result rr;
	unsigned char fp[32];
	idem_request req;
	idem_problem pb;
	char *env[] = { "REQUEST_METHOD=POST", "REQUEST_URI=/c",
	    "CONTENT_LENGTH=2", NULL };

	setup_with("");
	/* hold the key as another request with the same fingerprint would */
	cr_assert_eq(idem_request_parse(&req, env, &test_limits, &pb), IDEM_OK);
	req.body = strdup("{}");
	req.body_len = 2;
	cr_assert_eq(idem_router_match(svc->router, &req, pb.detail,
	    sizeof(pb.detail)), IDEM_OK);
	cr_assert_eq(idem_fingerprint(&req, fp), IDEM_OK);
	memset(&sk, 0, sizeof(sk));
	strcpy(sk.key, "k7");
	sk.key_len = 2;
	cr_assert_eq(idem_store_reserve(idem_middleware_store(svc->mw),
	    TEST_REQ(&sk, fp, "other", "first-request", 30000,
	    60000), &rr), IDEM_OK);
	cr_assert_eq(rr.outcome, IDEM_RESERVE_ACQUIRED);
	r = post("/c", "{}", KEY("k7"), NULL);
	expect_problem(&r, 409, "IDEMPOTENCY_IN_FLIGHT");
	cr_expect_str_eq(r.retry_after, "1");
	/* a different request with the key is a conflict, not in flight */
	r = post("/c", "{\"x\":1}", KEY("k7"), NULL);
	expect_problem(&r, 409, "IDEMPOTENCY_CONFLICT");
	cr_expect_eq(atomic_load(&calls), 0);
	idem_request_clear(&req);
	teardown();
}

Test(mw, header_scope)
{
	reply r;

	setup_with("scope = header:X-Api-Key");
	r = post("/c", "{}", KEY("same"), "HTTP_X_API_KEY=alice");
	cr_expect_str_eq(r.body, "{\"call\":1}");
	r = post("/c", "{}", KEY("same"), "HTTP_X_API_KEY=bob");
	cr_expect_str_eq(r.body, "{\"call\":2}", "bob got alice's answer");
	r = post("/c", "{}", KEY("same"), "HTTP_X_API_KEY=alice");
	cr_expect_str_eq(r.body, "{\"call\":1}");
	cr_expect_str_eq(r.replayed, "true");
	r = post("/c", "{}", KEY("same"), NULL);
	expect_problem(&r, 400, "IDEMPOTENCY_SCOPE_MISSING");
	cr_expect_eq(atomic_load(&calls), 2);
	teardown();
}

Test(mw, remote_user_scope)
{
	reply r;

	setup_with("scope = remote-user");
	r = post("/c", "{}", KEY("same"), "REMOTE_USER=alice");
	r = post("/c", "{}", KEY("same"), "REMOTE_USER=bob");
	cr_expect_str_eq(r.body, "{\"call\":2}");
	r = post("/c", "{}", KEY("same"), "HTTP_X_API_KEY=alice");
	expect_problem(&r, 400, "IDEMPOTENCY_SCOPE_MISSING");
	cr_expect_eq(atomic_load(&calls), 2);
	teardown();
}

Test(mw, disabled)
{
	idem_config *cfg;
	reply r;

	/* with idempotency off there is no store: keys change nothing */
	cr_assert_eq(idem_config_load_string("[idempotency]\nenabled = false\n",
	    "x", &cfg), IDEM_OK);
	cr_assert_eq(idem_service_new(cfg, "/nowhere", &svc), IDEM_OK);
	cr_expect_null(svc->mw);
	cr_assert_eq(idem_router_add(svc->router, "POST", "/c",
	    IDEM_POLICY_REQUIRED, counting, NULL, "t"), IDEM_OK);
	r = post("/c", "{}", NULL, NULL);
	cr_expect_eq(r.status, 201);
	r = post("/c", "{}", KEY("k"), NULL);
	r = post("/c", "{}", KEY("k"), NULL);
	cr_expect_str_eq(r.replayed, "");
	cr_expect_eq(atomic_load(&calls), 3);
	idem_service_free(svc);
}

/* ------------------------------------------------------- fingerprints */

Test(fingerprint, canonical_json_and_query)
{
	char *c = idem_json_canonical(" {\"b\": [1, {\"z\":1,\"a\":2}], "
	    "\"a\": null}\n", 38);

	cr_assert_not_null(c);
	cr_expect_str_eq(c, "{\"a\":null,\"b\":[1,{\"a\":2,\"z\":1}]}");
	free(c);
	cr_expect_null(idem_json_canonical("5", 1));
	cr_expect_null(idem_json_canonical("{\"a\":1,\"a\":2}", 13));
	cr_expect_null(idem_json_canonical("{bad", 4));
	c = idem_query_canonical("b=2&a=1&&c");
	cr_expect_str_eq(c, "a=1&b=2&c");
	free(c);
	c = idem_query_canonical("");
	cr_expect_str_eq(c, "");
	free(c);
}

Test(fingerprint, sha256_known_answer)
{
	unsigned char d[32];
	char hex[65];
	int i;

	cr_assert_eq(idem_sha256("abc", 3, d), IDEM_OK);
	for (i = 0; i < 32; i++)
		sprintf(hex + 2 * i, "%02x", d[i]);
	cr_expect_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223"
	    "b00361a396177a9cb410ff61f20015ad");
}

/* Issue 12.4: stopping makes a last attempt at a deferred release too, so
 * the key is free for its retry at once, not answered 409 until
 * inflight-ttl. */
Test(mw, stop_flushes_deferred_release, .init = setup_default,
    .fini = teardown)
{
	idem_store_key sk;
	idem_store_record rec;
	reply r;

	fs->fail_release = 1;
	r = post("/c?s=500", "{}", KEY("k4h"), NULL);
	cr_expect_eq(r.status, 500);
	cr_expect_eq(fs->releases, 1);
	cr_expect_eq(idem_middleware_backlog(svc->mw), 1,
	    "the release waits for the store");
	fs->fail_release = 0;
	cr_expect_eq(idem_middleware_flush(svc->mw, 2000), 0);
	cr_expect_eq(fs->releases, 2, "the last attempt");
	memset(&sk, 0, sizeof(sk));
	strcpy(sk.key, "k4h");
	sk.key_len = 3;
	cr_expect_eq(idem_store_lookup(fs->inner, &sk, &rec),
	    IDEM_ERR_NOT_FOUND, "the reservation is gone");
}
