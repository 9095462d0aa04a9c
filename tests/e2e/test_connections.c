/*
 * test_connections.c - FastCGI connections of the real binary: kept
 * connections (FCGI_KEEP_CONN) never hold a thread, max-connections closes
 * idle kept connections first, and allow-clients closes a TCP peer it does
 * not list before reading anything (DESIGN.md section 3).
 *
 * Every read of the client has a bounded timeout (fc_connect), so a server
 * that never answers fails the test instead of hanging it; nothing here
 * asserts a duration.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "fcgi_client.h"
#include "harness.h"

#define TIMEOUT_MS 15000        /* failure detection only */

static harness h;

static void
msleep(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* One keyed POST /testkit/echo on the kept connection fd.  Returns its
 * status, or -1 when no answer came. */
static int
echo_on(int fd, const char *key)
{
	char kh[160];
	const char *headers[] = { kh, "Content-Type: application/json", NULL };
	fc_response r;
	int status;

	snprintf(kh, sizeof(kh), "Idempotency-Key: %s", key);
	if (fc_http_on(fd, "POST", "/testkit/echo", headers, "{}", &r) != 0)
		return -1;
	status = r.status;
	fc_response_free(&r);
	return status;
}

/* The value of a metric scraped over the kept connection fd, or -1. */
static double
metric_on(int fd, const char *series)
{
	fc_response r;
	double v;

	if (fc_http_on(fd, "GET", "/metrics", NULL, NULL, &r) != 0)
		return -1;
	v = r.status == 200 ? harness_metric(r.body, series) : -1;
	fc_response_free(&r);
	return v;
}

/* More idle kept connections than threads: each thread served one and
 * would, before the dispatcher, have stayed polling it; a new connection
 * and every kept one are still answered. */
Test(kept, idle_connections_do_not_hold_threads, .timeout = 120)
{
	int fd[8], nfd = 8, i, extra;
	char k[64];

	cr_assert_eq(harness_start(&h, &(harness_opts){
	    .server = "threads = 2" }), 0);
	for (i = 0; i < nfd; i++) {
		fd[i] = fc_connect(h.addr, NULL, TIMEOUT_MS);
		cr_assert_geq(fd[i], 0);
		snprintf(k, sizeof(k), "kept-%d", i);
		cr_assert_eq(echo_on(fd[i], k), 201, "kept connection %d: no "
		    "answer while %d others are open and idle", i, i);
	}
	/* a new connection, while 8 kept ones idle on 2 threads */
	extra = fc_connect(h.addr, NULL, TIMEOUT_MS);
	cr_assert_geq(extra, 0);
	cr_expect_eq(echo_on(extra, "new-one"), 201, "a new connection was "
	    "not served while kept connections sat idle");
	/* every kept connection serves its next request, last first */
	for (i = nfd - 1; i >= 0; i--) {
		snprintf(k, sizeof(k), "kept-again-%d", i);
		cr_expect_eq(echo_on(fd[i], k), 201, "kept connection %d", i);
	}
	/* and a retry on another kept connection is replayed */
	cr_expect_eq(echo_on(fd[3], "kept-0"), 201);
	close(extra);
	for (i = 0; i < nfd; i++)
		close(fd[i]);
	cr_expect_eq(harness_count(&h, "/testkit/echo"), 2 * nfd + 1,
	    "one execution per key");
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", "kept-0"), 1);
	harness_stop(&h);
}

/* At max-connections, a new connection closes the idle connection parked
 * longest, and only that one; the others keep serving.  One thread: it
 * parks each connection again before it reads the next request, or
 * accepts d, so the order of the idle list is the order of the requests
 * (with two, a's thread may still be finishing a when d comes, and the
 * oldest idle connection is then b). */
Test(kept, max_connections_closes_the_oldest_idle, .timeout = 120)
{
	int a, b, c, d;

	cr_assert_eq(harness_start(&h, &(harness_opts){
	    .server = "threads = 1\nmax-connections = 3",
	    .rest = "[metrics]\nenabled = true\n" }), 0);
	a = fc_connect(h.addr, NULL, TIMEOUT_MS);
	b = fc_connect(h.addr, NULL, TIMEOUT_MS);
	c = fc_connect(h.addr, NULL, TIMEOUT_MS);
	cr_assert(a >= 0 && b >= 0 && c >= 0);
	/* parked in this order: a is the oldest idle */
	cr_assert_eq(echo_on(a, "lru-a"), 201);
	cr_assert_eq(echo_on(b, "lru-b"), 201);
	cr_assert_eq(echo_on(c, "lru-c"), 201);
	d = fc_connect(h.addr, NULL, TIMEOUT_MS);
	cr_assert_geq(d, 0);
	cr_expect_eq(echo_on(d, "lru-d"), 201, "the fourth connection was "
	    "not admitted");
	cr_expect(fc_closed_by_peer(a, TIMEOUT_MS), "the oldest idle "
	    "connection is still open");
	cr_expect(!fc_closed_by_peer(b, 0) && !fc_closed_by_peer(c, 0),
	    "a newer idle connection was closed");
	cr_expect_eq(echo_on(b, "lru-b2"), 201);
	cr_expect_eq(echo_on(c, "lru-c2"), 201);
	cr_expect_eq(metric_on(d, "idemfcgi_connections_evicted_total"), 1);
	close(a);
	close(b);
	close(c);
	close(d);
	harness_stop(&h);
}

/* A new connection whose first request has not come yet is not closed to
 * admit another, however long it has waited (a web server opens one to
 * send a request; on a busy machine the request may come late): the kept
 * connection idle between requests goes instead.  One thread, so that b
 * is parked again before c is accepted (see the test above). */
Test(kept, new_connection_kept_until_its_first_request, .timeout = 120)
{
	int a, b, c;

	cr_assert_eq(harness_start(&h, &(harness_opts){
	    .server = "threads = 1\nmax-connections = 2",
	    .rest = "[metrics]\nenabled = true\n" }), 0);
	a = fc_connect(h.addr, NULL, TIMEOUT_MS);
	cr_assert_geq(a, 0);
	/* parked before b, and never served */
	msleep(100);
	b = fc_connect(h.addr, NULL, TIMEOUT_MS);
	cr_assert_geq(b, 0);
	cr_assert_eq(echo_on(b, "first-b"), 201);
	c = fc_connect(h.addr, NULL, TIMEOUT_MS);
	cr_assert_geq(c, 0);
	cr_expect_eq(echo_on(c, "first-c"), 201, "the third connection was "
	    "not admitted");
	cr_expect(fc_closed_by_peer(b, TIMEOUT_MS), "the kept idle connection "
	    "is still open");
	cr_expect(!fc_closed_by_peer(a, 0), "the new connection was closed "
	    "before its first request");
	cr_expect_eq(echo_on(a, "first-a"), 201, "the new connection's first "
	    "request was not answered");
	cr_expect_eq(metric_on(c, "idemfcgi_connections_evicted_total"), 1);
	close(a);
	close(b);
	close(c);
	harness_stop(&h);
}

/* A kept request whose FCGI_STDIN end the web server has not sent (its
 * body whole, as from a web server still streaming): the answer is not
 * held for the rest; the connection, whose stream did not end, is closed
 * after the answer, and the request ran once. */
Test(kept, answer_not_held_by_an_unended_stdin, .timeout = 60)
{
	const char *headers[] = { "Idempotency-Key: unended-1",
	    "Content-Type: application/json", NULL };
	fc_response r;
	int fd;

	cr_assert_eq(harness_start(&h, &(harness_opts){
	    .server = "threads = 2" }), 0);
	fd = fc_connect(h.addr, NULL, TIMEOUT_MS);
	cr_assert_geq(fd, 0);
	cr_assert_eq(fc_http_on_unended(fd, "POST", "/testkit/echo", headers,
	    "{}", &r), 0, "no answer while the request's stdin was open");
	cr_expect_eq(r.status, 201);
	fc_response_free(&r);
	cr_expect(fc_closed_by_peer(fd, TIMEOUT_MS), "a connection whose "
	    "request stream never ended was kept");
	close(fd);
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", "unended-1"), 1);
	harness_stop(&h);
}

typedef struct slow {
	int fd;
	int status;
	char key[32];
} slow;

/* Sends a slow request on its own kept connection. */
static void *
slow_thread(void *arg)
{
	slow *s = arg;
	char kh[64];
	const char *headers[] = { kh, NULL };
	fc_response r;

	snprintf(kh, sizeof(kh), "Idempotency-Key: %s", s->key);
	s->status = fc_http_on(s->fd, "POST", "/testkit/sleep/1500", headers,
	    "{}", &r) == 0 ? r.status : -1;
	if (s->status > 0)
		fc_response_free(&r);
	return NULL;
}

/* At max-connections with every connection busy, nothing is closed: the
 * new connection waits (in the backlog) and is served once one is idle. */
Test(kept, busy_connections_are_never_closed, .timeout = 120)
{
	slow s[2];
	pthread_t t[2];
	int i, extra;

	cr_assert_eq(harness_start(&h, &(harness_opts){
	    .server = "threads = 2\nmax-connections = 2" }), 0);
	for (i = 0; i < 2; i++) {
		s[i].fd = fc_connect(h.addr, NULL, TIMEOUT_MS);
		cr_assert_geq(s[i].fd, 0);
		snprintf(s[i].key, sizeof(s[i].key), "busy-%d", i);
		pthread_create(&t[i], NULL, slow_thread, &s[i]);
	}
	/* let both requests reach their handler (which sleeps 1.5 s) before
	 * the third connection comes; were they not there yet, the test
	 * would only be weaker */
	msleep(300);
	extra = fc_connect(h.addr, NULL, TIMEOUT_MS);
	cr_assert_geq(extra, 0);
	cr_expect_eq(echo_on(extra, "busy-new"), 201);
	for (i = 0; i < 2; i++) {
		pthread_join(t[i], NULL);
		cr_expect_eq(s[i].status, 201, "busy connection %d lost its "
		    "answer", i);
		close(s[i].fd);
	}
	close(extra);
	harness_stop(&h);
}

/* The number in "N more refused" of each refusal line of log, summed,
 * plus the lines: every refusal is either logged or counted in the next
 * line. */
static long
refusals_logged(const char *log, long *lines)
{
	const char *p = log;
	long sum = 0;

	*lines = 0;
	while ((p = strstr(p, "refused a FastCGI connection from ")) != NULL) {
		const char *more = strstr(p, "; ");
		(*lines)++;
		if (more != NULL)
			sum += strtol(more + 2, NULL, 10);
		p++;
	}
	return sum + *lines;
}

/* allow-clients on a TCP listen: a peer it does not list is closed before
 * anything is read (no answer, the handler never runs), counted and
 * logged with its address; a listed one is served. */
Test(allow, refused_peer_closed_unread, .timeout = 120)
{
	char listen[64];
	double before, after;
	long lines, logged;
	int fd, i, ok;
	char *log;

	snprintf(listen, sizeof(listen), "127.0.0.1:%d", harness_free_port());
	cr_assert_eq(harness_start(&h, &(harness_opts){ .listen = listen,
	    .server = "threads = 2\nallow-clients = 127.0.0.1 127.0.0.2/32",
	    .rest = "[metrics]\nenabled = true\n" }), 0);
	ok = fc_connect(h.addr, "127.0.0.2", TIMEOUT_MS);
	cr_assert_geq(ok, 0);
	before = metric_on(ok, "idemfcgi_connections_refused_total");
	cr_assert_geq(before, 0);
	for (i = 0; i < 20; i++) {
		fd = fc_connect(h.addr, "127.0.0.3", TIMEOUT_MS);
		cr_assert_geq(fd, 0, "the kernel accepts the TCP connection");
		cr_expect_eq(echo_on(fd, "from-127.0.0.3"), -1, "a peer outside "
		    "allow-clients was answered");
		close(fd);
	}
	cr_expect_eq(harness_count(&h, "/testkit/echo"), 0, "the handler "
	    "ran for a refused peer");
	after = metric_on(ok, "idemfcgi_connections_refused_total");
	cr_expect_eq(after - before, 20, "refusals counted: %g",
	    after - before);
	/* a refusal more than a second after the burst is logged, with how
	 * many went unlogged */
	msleep(1100);
	fd = fc_connect(h.addr, "127.0.0.4", TIMEOUT_MS);
	cr_assert_geq(fd, 0);
	cr_expect_eq(echo_on(fd, "from-127.0.0.4"), -1);
	close(fd);
	cr_expect(harness_await_log(&h, "refused a FastCGI connection from "
	    "127.0.0.4:"), "the refusal was not logged with its peer");
	log = harness_log(&h);
	cr_assert_not_null(log);
	cr_expect(strstr(log, "refused a FastCGI connection from 127.0.0.3:")
	    != NULL, "%s", log);
	logged = refusals_logged(log, &lines);
	cr_expect_eq(logged, (long)before + 21, "refusals logged or counted "
	    "in a later line: %ld of %ld (%ld lines)", logged, (long)before + 21,
	    lines);
	cr_expect_lt(lines, logged, "every refusal of the burst had a line "
	    "of its own: not rate-limited");
	free(log);
	/* the allowed peers are served: over the kept connection, and anew */
	cr_expect_eq(echo_on(ok, "from-127.0.0.2"), 201);
	close(ok);
	fd = fc_connect(h.addr, "127.0.0.1", TIMEOUT_MS);
	cr_assert_geq(fd, 0);
	cr_expect_eq(echo_on(fd, "from-127.0.0.1"), 201);
	close(fd);
	cr_expect_eq(harness_count(&h, "/testkit/echo"), 2);
	harness_stop(&h);
}

/* A refused peer closes no idle connection of an allowed one, even at
 * max-connections: only an allowed peer may make room. */
Test(allow, refused_peer_evicts_nothing, .timeout = 60)
{
	char listen[64];
	int a, b, r;

	snprintf(listen, sizeof(listen), "127.0.0.1:%d", harness_free_port());
	cr_assert_eq(harness_start(&h, &(harness_opts){ .listen = listen,
	    .server = "threads = 2\nmax-connections = 2\n"
	    "allow-clients = 127.0.0.2" }), 0);
	a = fc_connect(h.addr, "127.0.0.2", TIMEOUT_MS);
	b = fc_connect(h.addr, "127.0.0.2", TIMEOUT_MS);
	cr_assert(a >= 0 && b >= 0);
	cr_assert_eq(echo_on(a, "room-a"), 201);
	cr_assert_eq(echo_on(b, "room-b"), 201);
	r = fc_connect(h.addr, "127.0.0.3", TIMEOUT_MS);
	cr_assert_geq(r, 0);
	cr_expect_eq(echo_on(r, "room-refused"), -1);
	close(r);
	cr_expect(!fc_closed_by_peer(a, 300) && !fc_closed_by_peer(b, 0),
	    "a refused peer closed an allowed peer's idle connection");
	cr_expect_eq(echo_on(a, "room-a2"), 201);
	cr_expect_eq(echo_on(b, "room-b2"), 201);
	close(a);
	close(b);
	harness_stop(&h);
}

/* The default: loopback only, and on a dual-stack socket an IPv4 peer
 * (::ffff:127.0.0.1) matches as its IPv4 form. */
Test(allow, dual_stack_peer_as_ipv4, .timeout = 60)
{
	char listen[64];
	int fd;

	snprintf(listen, sizeof(listen), "[::]:%d", harness_free_port());
	cr_assert_eq(harness_start(&h, &(harness_opts){ .listen = listen,
	    .server = "threads = 2\nallow-clients = 127.0.0.1" }), 0);
	snprintf(listen, sizeof(listen), "127.0.0.1:%s",
	    strrchr(h.addr, ':') + 1);
	fd = fc_connect(listen, "127.0.0.1", TIMEOUT_MS);
	cr_assert_geq(fd, 0);
	cr_expect_eq(echo_on(fd, "mapped-ok"), 201, "::ffff:127.0.0.1 was "
	    "not matched as 127.0.0.1");
	close(fd);
	fd = fc_connect(listen, "127.0.0.3", TIMEOUT_MS);
	cr_assert_geq(fd, 0);
	cr_expect_eq(echo_on(fd, "mapped-no"), -1);
	close(fd);
	cr_expect(harness_await_log(&h, "refused a FastCGI connection from "
	    "[::ffff:127.0.0.3]:"));
	cr_expect_eq(harness_count(&h, "/testkit/echo"), 1);
	harness_stop(&h);
}

/* A unix socket is governed by its mode and owner: allow-clients, even
 * one that lists no loopback address, does not apply to it. */
Test(allow, unix_socket_not_governed, .timeout = 60)
{
	int fd;

	cr_assert_eq(harness_start(&h, &(harness_opts){
	    .server = "threads = 2\nallow-clients = 192.0.2.1" }), 0);
	fd = fc_connect(h.addr, NULL, TIMEOUT_MS);
	cr_assert_geq(fd, 0);
	cr_expect_eq(echo_on(fd, "unix-peer"), 201);
	close(fd);
	harness_stop(&h);
}
