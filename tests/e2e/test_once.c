/*
 * test_once.c - paths to a second execution, or to an untrue answer, that
 * need no crash (issue 12), end to end on both stores: the real idemfcgi,
 * real FastCGI, a private MariaDB, executions counted in the testkit log.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <criterion/criterion.h>

#include "calls.h"
#include "fcgi_client.h"
#include "harness.h"

/* Starts h on the memory store or on MySQL with threads worker threads
 * (and as many connections), max-body 2m, and idem under [idempotency]. */
static void
start(harness *h, int mysql, int threads, const char *idem)
{
	char server[64], pool[32];

	snprintf(server, sizeof(server), "threads = %d\nmax-body = 2m",
	    threads);
	snprintf(pool, sizeof(pool), "pool-size = %d\n", threads);
	cr_assert_eq(harness_start(h, &(harness_opts){ .server = server,
	    .idem = idem, .mysql = mysql, .rest = mysql ? pool : NULL }), 0);
}

/* What one client saw, by kind of answer. */
typedef struct tally {
	const char *addr, *path, *key, *body;
	long run_ms;
	int fresh, replayed, in_flight, handler_5xx, wrong;
	char last_wrong[200];
} tally;

static long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* Sends the same request for run_ms and counts every answer by kind. */
static void *
hammer(void *arg)
{
	tally *t = arg;
	long end = now_ms() + t->run_ms;

	while (now_ms() < end) {
		call c = call_one(t->addr, t->path, t->key, t->body);
		if (c.status == 409 && strcmp(c.code, "IDEMPOTENCY_IN_FLIGHT") == 0)
			t->in_flight++;
		else if (c.status >= 500 && c.status < 600 && c.exec[0] != '\0' &&
		    c.replayed[0] == '\0')
			t->handler_5xx++;
		else if (c.status == 201 && strcmp(c.replayed, "true") == 0)
			t->replayed++;
		else if (c.status == 201 && c.replayed[0] == '\0')
			t->fresh++;
		else {
			t->wrong++;
			snprintf(t->last_wrong, sizeof(t->last_wrong), "%d %s %s",
			    c.status, c.code, c.replayed);
		}
	}
	return NULL;
}

/* Runs n clients at once for ms on one key; sums their tallies. */
static tally
crowd(const harness *h, const char *path, const char *key, int n, long ms)
{
	pthread_t th[16];
	tally t[16], sum;
	int i;

	memset(&sum, 0, sizeof(sum));
	for (i = 0; i < n; i++) {
		memset(&t[i], 0, sizeof(t[i]));
		t[i].addr = h->addr;
		t[i].path = path;
		t[i].key = key;
		t[i].body = "{\"same\":true}";
		t[i].run_ms = ms;
		pthread_create(&th[i], NULL, hammer, &t[i]);
	}
	for (i = 0; i < n; i++) {
		pthread_join(th[i], NULL);
		sum.fresh += t[i].fresh;
		sum.replayed += t[i].replayed;
		sum.in_flight += t[i].in_flight;
		sum.handler_5xx += t[i].handler_5xx;
		sum.wrong += t[i].wrong;
		if (t[i].wrong > 0)
			snprintf(sum.last_wrong, sizeof(sum.last_wrong), "%s",
			    t[i].last_wrong);
	}
	return sum;
}

/*
 * Issue 12.6: twelve clients hammer one key.  A handler that answers 500
 * is released every time: the only answers are its 500 and 409 in flight
 * (never IDEMPOTENCY_CONFLICT, never 503).  Then a handler that answers
 * 201: it runs once, and every other answer is its replay or 409.
 */
static void
one_key_contention(int mysql)
{
	harness h;
	const char *k500 = call_key("crowd500"), *k201 = call_key("crowd201");
	tally t;

	start(&h, mysql, 16, NULL);
	t = crowd(&h, "/testkit/status/500", k500, 12, 3000);
	cr_expect_eq(t.wrong, 0, "%d false answers, e.g. %s (%d ran, %d in "
	    "flight)", t.wrong, t.last_wrong, t.handler_5xx, t.in_flight);
	cr_expect_gt(t.handler_5xx, 12, "the handler ran: %d", t.handler_5xx);
	cr_expect_eq(harness_count_key(&h, "/testkit/status/500", k500),
	    (size_t)t.handler_5xx, "every execution was answered");
	t = crowd(&h, "/testkit/echo", k201, 12, 2000);
	cr_expect_eq(t.wrong, 0, "%d false answers, e.g. %s", t.wrong,
	    t.last_wrong);
	cr_expect_eq(t.fresh, 1);
	cr_expect_gt(t.replayed, 0);
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", k201), 1);
	harness_stop(&h);
}

Test(once, one_key_contention_memory, .timeout = 60)
{
	one_key_contention(0);
}

Test(once, one_key_contention_mysql, .timeout = 60)
{
	one_key_contention(1);
}

/* The outcome counter name of the series with labels too ("": all),
 * summed, scraped from h ([metrics] enabled). */
static double
outcome_of(const harness *h, const char *labels, const char *name)
{
	char want[256];
	fc_response r;
	double v;

	snprintf(want, sizeof(want), "%s%soutcome=\"%s\"", labels,
	    *labels != '\0' ? "," : "", name);
	cr_assert_eq(fc_http(h->addr, "GET", "/metrics", NULL, NULL, &r), 0);
	cr_assert_eq(r.status, 200, "%s", r.body);
	v = harness_metric_sum(r.body, "idemfcgi_idempotency_outcomes_total",
	    want);
	fc_response_free(&r);
	return v;
}

/* The outcome counter name over every route, scraped from h. */
static double
outcome(const harness *h, const char *name)
{
	return outcome_of(h, "", name);
}

/*
 * Issue 12.1: a 201 too large to store (a 1.1 MB body over max-response;
 * on MySQL also headers over the 64 KiB column) is answered whole once,
 * never released: retries get its status, Location and Content-Location
 * with a notice that it was executed, and the handler runs once.  Each
 * such answer is counted as answer_not_stored and logged (12.2).
 */
static void
oversized_answer(int mysql)
{
	harness h;
	const char *kb = call_key("bigbody"), *kh = call_key("bigheads"),
	    *kx = call_key("hugeheads");
	size_t n = 1100 * 1024;
	char *body = malloc(n + 3);
	call c;

	cr_assert_not_null(body);
	body[0] = '"';
	memset(body + 1, 'x', n);
	body[n + 1] = '"';
	body[n + 2] = '\0';
	start(&h, mysql, 4, "max-response = 256k\n[metrics]\nenabled = true");
	c = call_one(h.addr, "/testkit/echo", kb, body);
	cr_expect_eq(c.status, 201);
	cr_expect_neq(c.exec[0], '\0', "the first answer is whole");
	c = call_one(h.addr, "/testkit/echo", kb, body);
	cr_expect_eq(c.status, 201, "%s", c.body_out);
	cr_expect_str_eq(c.replayed, "true");
	cr_expect_str_eq(c.code, "IDEMPOTENCY_ANSWER_NOT_STORED");
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", kb), 1);
	c = call_one(h.addr, "/testkit/fat-headers/9", kh, NULL);
	cr_expect_eq(c.status, 201);
	cr_expect_str_eq(c.location, "/testkit/made/1");
	cr_expect_str_eq(c.content_location, "/testkit/made/1/answer");
	c = call_one(h.addr, "/testkit/fat-headers/9", kh, NULL);
	cr_expect_eq(c.status, 201, "%s", c.body_out);
	cr_expect_str_eq(c.replayed, "true");
	/* 72 kB of headers, under max-response: whole in memory, too large
	 * for MySQL's column */
	cr_expect_str_eq(c.code, mysql ? "IDEMPOTENCY_ANSWER_NOT_STORED" : "");
	cr_expect_str_eq(c.location, "/testkit/made/1");
	cr_expect_str_eq(c.content_location, "/testkit/made/1/answer");
	cr_expect_eq(harness_count_key(&h, "/testkit/fat-headers/9", kh), 1);
	/* 320 kB of headers, over max-response: a stand-in on both stores,
	 * which keeps Location and Content-Location */
	c = call_one(h.addr, "/testkit/fat-headers/40", kx, NULL);
	cr_expect_eq(c.status, 201);
	c = call_one(h.addr, "/testkit/fat-headers/40", kx, NULL);
	cr_expect_eq(c.status, 201, "%s", c.body_out);
	cr_expect_str_eq(c.replayed, "true");
	cr_expect_str_eq(c.code, "IDEMPOTENCY_ANSWER_NOT_STORED");
	cr_expect_str_eq(c.location, "/testkit/made/1");
	cr_expect_str_eq(c.content_location, "/testkit/made/1/answer");
	cr_expect_eq(harness_count_key(&h, "/testkit/fat-headers/40", kx), 1);
	cr_expect_eq(outcome(&h, "answer_not_stored"), mysql ? 3 : 2);
	cr_expect(harness_logged(&h, "answer_not_stored"), "logged");
	cr_expect(!harness_logged(&h, "commit_deferred"), "no retry loop");
	harness_stop(&h);
	free(body);
}

Test(once, oversized_answer_memory, .timeout = 60)
{
	oversized_answer(0);
}

Test(once, oversized_answer_mysql, .timeout = 60)
{
	oversized_answer(1);
}

/* A POST for a thread. */
static void *
post_thread(void *arg)
{
	call_send(arg);
	return NULL;
}

/*
 * Issue 12.3: a handler that outlives the lifetime keeps its record: the
 * purge (every second here) removes only committed records, so a retry
 * meanwhile is told 409 in flight instead of running the handler again.
 */
static void
purge_spares_running_handler(int mysql)
{
	harness h;
	const char *k = call_key("purgeslow");
	pthread_t t;
	call first, mid;

	start(&h, mysql, 4, "lifetime = 1s\ncleanup-interval = 1s");
	first = call_make(h.addr, "/testkit/sleep/4000", k, NULL);
	pthread_create(&t, NULL, post_thread, &first);
	call_sleep(2500);
	mid = call_one(h.addr, "/testkit/sleep/4000", k, NULL);
	cr_expect_eq(mid.status, 409, "%s", mid.body_out);
	cr_expect_str_eq(mid.code, "IDEMPOTENCY_IN_FLIGHT");
	pthread_join(t, NULL);
	cr_expect_eq(first.status, 201);
	cr_expect_eq(harness_count_key(&h, "/testkit/sleep/4000", k), 1);
	harness_stop(&h);
}

Test(once, purge_spares_running_handler_memory, .timeout = 60)
{
	purge_spares_running_handler(0);
}

Test(once, purge_spares_running_handler_mysql, .timeout = 60)
{
	purge_spares_running_handler(1);
}

/*
 * Issue 12.6: contention is counted.  A transactional handler holds its
 * key's row lock while it runs; a duplicate's reservation waits for it (a
 * lock wait, 1205, not retried), is answered 409 in flight, never 503,
 * and is counted as contended, on its route.
 */
Test(once, contention_counted_mysql, .timeout = 60)
{
	harness h;
	const char *key = call_key("contended");
	call first, dup;
	pthread_t t;

	start(&h, 1, 4, "[metrics]\nenabled = true");
	cr_expect_eq(outcome(&h, "contended"), 0);
	first = call_make(h.addr, "/testkit/tx/201?ms=3000", key, NULL);
	pthread_create(&t, NULL, call_thread, &first);
	cr_assert(harness_await_started(&h, "/testkit/tx/201", key, 1));
	dup = call_one(h.addr, "/testkit/tx/201?ms=3000", key, NULL);

	cr_expect_eq(dup.status, 409, "%d %s", dup.status, dup.body_out);
	cr_expect_str_eq(dup.code, "IDEMPOTENCY_IN_FLIGHT");
	pthread_join(t, NULL);
	cr_expect_eq(first.status, 201, "%d %s", first.status, first.body_out);
	cr_expect_geq(outcome(&h, "contended"), 1);
	/* on the route whose request met it */
	cr_expect_eq(outcome_of(&h, "method=\"POST\","
	    "route=\"/testkit/tx/{code}\"", "contended"),
	    outcome(&h, "contended"));
	cr_expect_eq(harness_count_key(&h, "/testkit/tx/201", key), 1);
	harness_stop(&h);
}
