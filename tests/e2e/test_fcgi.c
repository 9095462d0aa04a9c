/*
 * test_fcgi.c - the real idemfcgi binary, spoken to over real FastCGI.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "fcgi_client.h"
#include "harness.h"

static harness h;

static void
start_default(void)
{
	cr_assert_eq(harness_start(&h, &(harness_opts){
	    .server = "max-body = 1k\nthreads = 4", .idem = "required = false" }),
	    0);
}

static void
stop_default(void)
{
	harness_stop(&h);
}

static void
msleep(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* The JSON body of r; caller decrefs. */
static json_t *
body_json(const fc_response *r)
{
	json_error_t e;
	json_t *j = json_loads(r->body, 0, &e);

	cr_assert_not_null(j, "not JSON: %s", r->body);
	return j;
}

Test(fcgi, echo, .init = start_default, .fini = stop_default)
{
	const char *hdr[] = { "Content-Type: application/json",
	    "X-Request-Id: trace-42", NULL };
	fc_response r;
	json_t *j;

	cr_assert_eq(fc_http(h.addr, "POST", "/testkit/echo", hdr,
	    "{\"b\": 2, \"a\": [1]}", &r), 0);
	cr_expect_eq(r.status, 201);
	cr_expect_eq(r.app_status, 0);
	cr_expect_str_eq(fc_header(&r, "Content-Type"), "application/json");
	cr_expect_str_eq(fc_header(&r, "X-Request-Id"), "trace-42");
	j = body_json(&r);
	cr_expect_eq(json_integer_value(json_object_get(json_object_get(j,
	    "echo"), "b")), 2);
	cr_expect_eq(strlen(json_string_value(json_object_get(j, "exec"))), 36);
	json_decref(j);
	fc_response_free(&r);
	cr_expect_eq(harness_count(&h, "/testkit/echo"), 1);
}

Test(fcgi, fresh_exec_and_request_id, .init = start_default,
    .fini = stop_default)
{
	fc_response a, b;
	char ida[64];

	cr_assert_eq(fc_http(h.addr, "POST", "/testkit/echo", NULL, "x", &a), 0);
	cr_assert_eq(fc_http(h.addr, "POST", "/testkit/echo", NULL, "x", &b), 0);
	snprintf(ida, sizeof(ida), "%s", fc_header(&a, "X-Request-Id"));
	cr_expect_eq(strlen(ida), 36);
	cr_expect_str_neq(ida, fc_header(&b, "X-Request-Id"));
	cr_expect_str_neq(a.body, b.body, "the exec ids must differ");
	fc_response_free(&a);
	fc_response_free(&b);
	cr_expect_eq(harness_count(&h, "/testkit/echo"), 2);
}

Test(fcgi, ledger_demo, .init = start_default, .fini = stop_default)
{
	fc_response r;

	cr_assert_eq(fc_http(h.addr, "POST", "/accounts/a/deposit", NULL,
	    "{\"amount\":5}", &r), 0);
	cr_expect_eq(r.status, 201);
	cr_expect_str_eq(r.body, "{\"account\":\"a\",\"balance\":5}");
	fc_response_free(&r);
	cr_assert_eq(fc_http(h.addr, "GET", "/accounts/a?verbose=1", NULL, NULL,
	    &r), 0);
	cr_expect_eq(r.status, 200);
	cr_expect_str_eq(r.body, "{\"account\":\"a\",\"balance\":5}");
	fc_response_free(&r);
}

Test(fcgi, escaped_path, .init = start_default, .fini = stop_default)
{
	fc_response r;

	cr_assert_eq(fc_http(h.addr, "POST", "/accounts/a%2Db/deposit", NULL,
	    "{\"amount\":7}", &r), 0);
	cr_expect_eq(r.status, 201);
	cr_expect_str_eq(r.body, "{\"account\":\"a-b\",\"balance\":7}");
	fc_response_free(&r);
}

Test(fcgi, unknown_route_and_method, .init = start_default,
    .fini = stop_default)
{
	fc_response r;

	cr_assert_eq(fc_http(h.addr, "POST", "/nope", NULL, "{}", &r), 0);
	cr_expect_eq(r.status, 404);
	cr_expect_str_eq(fc_header(&r, "Content-Type"),
	    "application/problem+json");
	cr_expect(strstr(r.body, "ROUTE_NOT_FOUND") != NULL, "%s", r.body);
	fc_response_free(&r);
	cr_assert_eq(fc_http(h.addr, "DELETE", "/accounts/a", NULL, NULL, &r), 0);
	cr_expect_eq(r.status, 405);
	cr_expect_str_eq(fc_header(&r, "Allow"), "GET, HEAD");
	fc_response_free(&r);
}

Test(fcgi, oversized_body, .init = start_default, .fini = stop_default)
{
	char *big = malloc(300000);
	fc_response r;

	memset(big, 'x', 299999);
	big[299999] = '\0';
	cr_assert_eq(fc_http(h.addr, "POST", "/testkit/echo", NULL, big, &r), 0);
	cr_expect_eq(r.status, 413);
	cr_expect(strstr(r.body, "BODY_TOO_LARGE") != NULL, "%s", r.body);
	fc_response_free(&r);
	free(big);
	/* the handler never ran, and the server is fine */
	cr_expect_eq(harness_count(&h, "/testkit/echo"), 0);
	cr_assert_eq(fc_http(h.addr, "POST", "/testkit/echo", NULL, "ok", &r), 0);
	cr_expect_eq(r.status, 201);
	fc_response_free(&r);
}

Test(fcgi, content_length_lies, .init = start_default, .fini = stop_default)
{
	const char *shorter[] = { "REQUEST_METHOD", "POST", "REQUEST_URI",
	    "/testkit/echo", "CONTENT_LENGTH", "100", NULL };
	const char *longer[] = { "REQUEST_METHOD", "POST", "REQUEST_URI",
	    "/testkit/echo", "CONTENT_LENGTH", "2", NULL };
	const char *garbage[] = { "REQUEST_METHOD", "POST", "REQUEST_URI",
	    "/testkit/echo", "CONTENT_LENGTH", "5x", NULL };
	fc_response r;
	json_t *j;

	cr_assert_eq(fc_request_raw(h.addr, shorter, "short", 5, &r), 0);
	cr_expect_eq(r.status, 400);
	cr_expect(strstr(r.body, "BODY_INCOMPLETE") != NULL, "%s", r.body);
	fc_response_free(&r);
	cr_expect_eq(harness_count(&h, "/testkit/echo"), 0);

	cr_assert_eq(fc_request_raw(h.addr, longer, "\"abcdef\"", 8, &r), 0);
	cr_expect_eq(r.status, 201);
	j = body_json(&r);
	/* exactly CONTENT_LENGTH bytes were read: "\"a" is not JSON */
	cr_expect_str_eq(json_string_value(json_object_get(j, "echo")), "\"a");
	json_decref(j);
	fc_response_free(&r);

	cr_assert_eq(fc_request_raw(h.addr, garbage, "hello", 5, &r), 0);
	cr_expect_eq(r.status, 400);
	cr_expect(strstr(r.body, "BAD_CONTENT_LENGTH") != NULL, "%s", r.body);
	fc_response_free(&r);
}

/* A body sent without CONTENT_LENGTH (as some web servers forward a
 * chunked request) is read to the end of FCGI_STDIN: a different body with
 * the same key is a conflict, not the first one's replay. */
Test(fcgi, body_without_content_length, .init = start_default,
    .fini = stop_default)
{
	const char *params[] = { "REQUEST_METHOD", "POST", "REQUEST_URI",
	    "/testkit/echo", "CONTENT_TYPE", "application/json",
	    "HTTP_IDEMPOTENCY_KEY", "no-cl", NULL };
	char *big = malloc(3000);
	fc_response r;
	char exec[64];
	json_t *j;

	cr_assert_eq(fc_request_raw(h.addr, params, "{\"amount\":1}", 12, &r),
	    0);
	cr_expect_eq(r.status, 201, "%s", r.body);
	j = body_json(&r);
	cr_expect_eq(json_integer_value(json_object_get(json_object_get(j,
	    "echo"), "amount")), 1, "%s", r.body);
	snprintf(exec, sizeof(exec), "%s",
	    json_string_value(json_object_get(j, "exec")));
	json_decref(j);
	fc_response_free(&r);
	cr_assert_eq(fc_request_raw(h.addr, params, "{\"amount\":2}", 12, &r),
	    0);
	cr_expect_eq(r.status, 409, "%s", r.body);
	cr_expect(strstr(r.body, "IDEMPOTENCY_CONFLICT") != NULL, "%s", r.body);
	cr_expect_null(strstr(r.body, exec), "got the first one's answer");
	fc_response_free(&r);
	cr_assert_eq(fc_request_raw(h.addr, params, "{ \"amount\": 1 }", 15,
	    &r), 0);
	cr_expect_str_eq(fc_header(&r, "Idempotent-Replayed"), "true");
	fc_response_free(&r);
	cr_expect_eq(harness_count(&h, "/testkit/echo"), 1);

	/* over max-body (1k): 413, the rest drained, the server fine */
	memset(big, 'x', 3000);
	params[7] = "no-cl-big";
	cr_assert_eq(fc_request_raw(h.addr, params, big, 3000, &r), 0);
	cr_expect_eq(r.status, 413, "%s", r.body);
	cr_expect(strstr(r.body, "BODY_TOO_LARGE") != NULL, "%s", r.body);
	fc_response_free(&r);
	free(big);
	cr_assert_eq(fc_http(h.addr, "POST", "/testkit/echo", NULL, "ok", &r),
	    0);
	cr_expect_eq(r.status, 201);
	fc_response_free(&r);
	cr_expect_eq(harness_count(&h, "/testkit/echo"), 2);
}

Test(fcgi, missing_params, .init = start_default, .fini = stop_default)
{
	const char *no_method[] = { "REQUEST_URI", "/testkit/echo", NULL };
	const char *no_path[] = { "REQUEST_METHOD", "POST", NULL };
	const char *nothing[] = { NULL };
	fc_response r;

	cr_assert_eq(fc_request_raw(h.addr, no_method, NULL, 0, &r), 0);
	cr_expect_eq(r.status, 400);
	cr_expect(strstr(r.body, "REQUEST_METHOD") != NULL, "%s", r.body);
	fc_response_free(&r);
	cr_assert_eq(fc_request_raw(h.addr, no_path, NULL, 0, &r), 0);
	cr_expect_eq(r.status, 400);
	fc_response_free(&r);
	cr_assert_eq(fc_request_raw(h.addr, nothing, NULL, 0, &r), 0);
	cr_expect_eq(r.status, 400);
	fc_response_free(&r);
	cr_expect_eq(harness_count(&h, "/testkit/echo"), 0);
}

Test(fcgi, mount_and_path_info, .fini = stop_default)
{
	const char *pi[] = { "REQUEST_METHOD", "POST", "REQUEST_URI",
	    "/app/accounts/x%20y/deposit", "SCRIPT_NAME", "/app", "PATH_INFO",
	    "/accounts/x y/deposit", "CONTENT_LENGTH", "12", NULL };
	fc_response r;

	cr_assert_eq(harness_start(&h, &(harness_opts){ .server = "mount = /api",
	    .idem = "required = false" }), 0);
	cr_assert_eq(fc_http(h.addr, "POST", "/api/accounts/m/deposit", NULL,
	    "{\"amount\":1}", &r), 0);
	cr_expect_eq(r.status, 201, "%s", r.body);
	fc_response_free(&r);
	cr_assert_eq(fc_request_raw(h.addr, pi, "{\"amount\":2}", 12, &r), 0);
	cr_expect_eq(r.status, 400, "the id has a space: %s", r.body);
	cr_expect(strstr(r.body, "INVALID_ACCOUNT_ID") != NULL, "%s", r.body);
	fc_response_free(&r);
}

/* ------------------------------------------------------- concurrency */

typedef struct job {
	int status;
} job;

static void *
post_echo(void *arg)
{
	job *jb = arg;
	fc_response r;

	jb->status = -1;
	if (fc_http(h.addr, "POST", "/testkit/sleep/50", NULL, NULL, &r) == 0) {
		jb->status = r.status;
		fc_response_free(&r);
	}
	return NULL;
}

Test(fcgi, concurrent_requests, .init = start_default, .fini = stop_default)
{
	pthread_t t[32];
	job jobs[32];
	int i;

	for (i = 0; i < 32; i++)
		pthread_create(&t[i], NULL, post_echo, &jobs[i]);
	for (i = 0; i < 32; i++) {
		pthread_join(t[i], NULL);
		cr_expect_eq(jobs[i].status, 201, "request %d: %d", i,
		    jobs[i].status);
	}
	cr_expect_eq(harness_count(&h, "/testkit/sleep/50"), 32);
}

Test(fcgi, client_hangs_up, .init = start_default, .fini = stop_default)
{
	fc_response r;
	int i;

	for (i = 0; i < 5; i++)
		cr_assert_eq(fc_hangup(h.addr, "POST", "/testkit/sleep/100"), 0);
	/* the abandoned requests run to their end: wait for them (at most
	 * 10 s), then count them below */
	for (i = 0; i < 100 &&
	    harness_count(&h, "/testkit/sleep/100") < 5; i++)
		msleep(100);
	cr_assert_eq(kill(h.pid, 0), 0, "idemfcgi died when clients hung up");
	cr_assert_eq(fc_http(h.addr, "POST", "/testkit/echo", NULL, "x", &r), 0);
	cr_expect_eq(r.status, 201);
	fc_response_free(&r);
	cr_expect_eq(harness_count(&h, "/testkit/sleep/100"), 5);
}

/* --------------------------------------------------------- shutdown */

static void *
slow_request(void *arg)
{
	job *jb = arg;
	fc_response r;

	jb->status = -1;
	if (fc_http(h.addr, "POST", "/testkit/sleep/500", NULL, NULL, &r) == 0) {
		jb->status = r.status;
		fc_response_free(&r);
	}
	return NULL;
}

/* SIGTERM while a handler runs (it has begun its sleep, so the request
 * is in flight, not waiting in the listen queue): its answer is whole,
 * and nothing new is accepted once the stop is logged. */
Test(shutdown, sigterm_drains_in_flight)
{
	pthread_t t;
	job jb;
	fc_response r;

	cr_assert_eq(harness_start(&h, &(harness_opts){
	    .idem = "required = false" }), 0);
	pthread_create(&t, NULL, slow_request, &jb);
	cr_assert(harness_await_started(&h, "/testkit/sleep/500", NULL, 1));
	cr_assert_eq(kill(h.pid, SIGTERM), 0);
	cr_assert(harness_await_log(&h, "no longer accepting"));
	pthread_join(t, NULL);
	cr_expect_eq(jb.status, 201, "the request in flight was cut: %d",
	    jb.status);
	/* no new connections once stopping */
	cr_expect_neq(fc_http(h.addr, "POST", "/testkit/echo", NULL, NULL, &r),
	    0);
	cr_expect_eq(harness_stop(&h), 0, "exit status");
}

Test(shutdown, sigint_when_idle)
{
	int status = -1, i;

	cr_assert_eq(harness_start(&h, NULL), 0);
	kill(h.pid, SIGINT);
	for (i = 0; i < 500 && waitpid(h.pid, &status, WNOHANG) != h.pid; i++)
		msleep(10);
	cr_assert_lt(i, 500, "did not stop within 5 s");
	cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	h.pid = 0;
	harness_stop(&h);
}

Test(shutdown, sighup_is_harmless, .init = start_default,
    .fini = stop_default)
{
	fc_response r;

	kill(h.pid, SIGHUP);
	kill(h.pid, SIGUSR1);
	kill(h.pid, SIGPIPE);
	msleep(100);
	cr_assert_eq(fc_http(h.addr, "POST", "/testkit/echo", NULL, "x", &r), 0);
	cr_expect_eq(r.status, 201);
	fc_response_free(&r);
}

/* ------------------------------------------------- sockets: TCP, fd 0 */

Test(sockets, tcp)
{
	char conf[256], text[256], addr[64], bin[512], *argv[4];
	fc_response r;
	pid_t pid;
	int port = harness_free_port(), i, status;

	snprintf(conf, sizeof(conf), "/tmp/idemfcgi-tcp-%d.conf", (int)getpid());
	snprintf(text, sizeof(text), "[server]\nlisten = 127.0.0.1:%d\nplugins = "
	    "@BUILDDIR@/.libs/ledger.so\n[idempotency]\nrequired = false\n",
	    port);
	harness_write_conf(conf, text);
	snprintf(bin, sizeof(bin), "%s/idemfcgi", harness_builddir());
	argv[0] = bin;
	argv[1] = "-c";
	argv[2] = conf;
	argv[3] = NULL;
	if ((pid = fork()) == 0) {
		execv(bin, argv);
		_exit(127);
	}
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
	for (i = 0; i < 200; i++) {
		if (fc_http(addr, "POST", "/accounts/t/deposit", NULL,
		    "{\"amount\":3}", &r) == 0)
			break;
		msleep(25);
	}
	cr_assert_lt(i, 200, "no answer on %s", addr);
	cr_expect_eq(r.status, 201);
	fc_response_free(&r);
	kill(pid, SIGTERM);
	waitpid(pid, &status, 0);
	cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	unlink(conf);
}

Test(sockets, fd0_from_the_web_server)
{
	char dir[] = "/tmp/idemfcgi-fd0.XXXXXX", conf[128], sock[128],
	    addr[160], bin[512], *argv[4];
	struct sockaddr_un sa;
	fc_response r;
	pid_t pid;
	int fd, status;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(conf, sizeof(conf), "%s/c.conf", dir);
	snprintf(sock, sizeof(sock), "%s/s.sock", dir);
	harness_write_conf(conf,
	    "[server]\nplugins = @BUILDDIR@/.libs/ledger.so\n"
	    "[idempotency]\nrequired = false\n");
	/* what spawn-fcgi and lighttpd's bin-path do */
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	cr_assert_lt(strlen(sock), sizeof(sa.sun_path));
	memcpy(sa.sun_path, sock, strlen(sock) + 1);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(fd, 16), 0);
	snprintf(bin, sizeof(bin), "%s/idemfcgi", harness_builddir());
	argv[0] = bin;
	argv[1] = "-c";
	argv[2] = conf;
	argv[3] = NULL;
	if ((pid = fork()) == 0) {
		dup2(fd, 0);
		execv(bin, argv);
		_exit(127);
	}
	close(fd);
	snprintf(addr, sizeof(addr), "unix:%s", sock);
	cr_assert_eq(fc_http(addr, "POST", "/accounts/f/deposit", NULL,
	    "{\"amount\":4}", &r), 0);
	cr_expect_eq(r.status, 201);
	cr_expect_str_eq(r.body, "{\"account\":\"f\",\"balance\":4}");
	fc_response_free(&r);
	kill(pid, SIGTERM);
	waitpid(pid, &status, 0);
	cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	unlink(sock);
	unlink(conf);
	rmdir(dir);
}

Test(sockets, no_listen_and_no_socket)
{
	char *out;
	int rc = harness_run("",
	    "[server]\nplugins = @BUILDDIR@/.libs/ledger.so\n", &out);

	cr_expect_eq(rc, 1);
	cr_expect(strstr(out, "fd 0 is not a listening socket") != NULL, "%s",
	    out);
	free(out);
}

/* ------------------------------------------------------ command line */

Test(cli, check_good)
{
	char *out;
	int rc = harness_run("--check", "[server]\nlisten = 127.0.0.1:1\n"
	    "plugins = @BUILDDIR@/.libs/ledger.so\n[ledger]\nmax-accounts = 10\n",
	    &out);

	cr_expect_eq(rc, 0, "%s", out);
	cr_expect(strstr(out, "configuration OK (3 route(s) of plugins, 1 "
	    "built in)") != NULL, "%s", out);
	free(out);
}

Test(cli, check_bad)
{
	char *out;
	int rc = harness_run("--check", "[server]\nthreads = 4\nlisten = nope\n"
	    "[idempotency]\nlifetime = 1 day\n", &out);

	cr_expect_eq(rc, 1);
	cr_expect(strstr(out, "test.conf:3: [server] listen: bad value") != NULL,
	    "%s", out);
	cr_expect(strstr(out, "test.conf:5: [idempotency] lifetime: bad value")
	    != NULL, "%s", out);
	free(out);
}

/* One run of --check reports problems of every stage: a core key, a
 * plugin's key (after its setup), a plugin whose setup fails, and an
 * unknown section, each with a suggestion where one is close. */
Test(cli, check_reports_every_stage)
{
	char *out;
	int rc = harness_run("--check", "[server]\nlisten = 127.0.0.1:1\n"
	    "worksers = 2\nplugins = @BUILDDIR@/.libs/ledger.so\n"
	    "  @BUILDDIR@/tests/plugins/.libs/bad_setup.so\n"
	    "  @BUILDDIR@/tests/testkit/.libs/testkit.so\n"
	    "[testkit]\nlog = /dev/null\nlgo = x\n"
	    "[ledgr]\nmax-accounts = 10\n", &out);

	cr_expect_eq(rc, 1, "%s", out);
	cr_expect(strstr(out, "test.conf:3: [server] worksers: unknown key; "
	    "did you mean workers?") != NULL, "%s", out);
	cr_expect(strstr(out, "bad_setup.so: setup failed") != NULL, "%s", out);
	cr_expect(strstr(out, "test.conf:9: [testkit] lgo: unknown key; did "
	    "you mean log?") != NULL, "%s", out);
	cr_expect(strstr(out, "test.conf:11: [ledgr]: unknown section (no "
	    "loaded plugin is named \"ledgr\"); did you mean [ledger]?") != NULL,
	    "%s", out);
	cr_expect(strstr(out, "check failed: every problem found is above")
	    != NULL, "%s", out);
	cr_expect(strstr(out, "configuration OK") == NULL, "%s", out);
	free(out);
}

/* A plugin that cannot be opened: the others are still checked, and no
 * section is called unknown (the missing plugin's name is not known). */
Test(cli, check_goes_on_past_a_missing_plugin)
{
	char *out;
	int rc = harness_run("--check", "[server]\nlisten = 127.0.0.1:1\n"
	    "plugins = /nonexistent/gone.so\n"
	    "  @BUILDDIR@/tests/testkit/.libs/testkit.so\n"
	    "[testkit]\nlog = /dev/null\ntx-route = true\n[gone]\nx = 1\n",
	    &out);

	cr_expect_eq(rc, 1, "%s", out);
	cr_expect(strstr(out, "/nonexistent/gone.so") != NULL, "%s", out);
	cr_expect(strstr(out, "route POST /testkit/tx/{code} is transactional, "
	    "but the store has no database") != NULL, "%s", out);
	cr_expect(strstr(out, "unknown section") == NULL, "%s", out);
	cr_expect(strstr(out, "the keys of plugin sections are not checked: "
	    "a plugin did not load") != NULL, "%s", out);
	free(out);
}

#ifdef HAVE_MYSQL
/* The store stage runs after problems elsewhere (here a [server] key: the
 * connection to a closed port is tried and reported), not after problems
 * of [idempotency] or [mysql], where it would check the wrong store. */
Test(cli, check_store_stage)
{
	char *out;
	int rc = harness_run("--check", "[server]\nlisten = 127.0.0.1:1\n"
	    "worksers = 2\n[idempotency]\nstore = mysql\n[mysql]\n"
	    "host = 127.0.0.1\nport = 1\nuser = idem\ndatabase = idem\n"
	    "connect-timeout = 1s\n", &out);

	cr_expect_eq(rc, 1, "%s", out);
	cr_expect(strstr(out, "worksers: unknown key; did you mean workers?")
	    != NULL, "%s", out);
	cr_expect(strstr(out, "cannot connect to 127.0.0.1:1") != NULL, "%s",
	    out);
	free(out);
	rc = harness_run("--check", "[server]\nlisten = 127.0.0.1:1\n"
	    "[idempotency]\nstore = mysql\nlifetim = 1h\n[mysql]\n"
	    "host = 127.0.0.1\nport = 1\nuser = idem\ndatabase = idem\n", &out);
	cr_expect_eq(rc, 1, "%s", out);
	cr_expect(strstr(out, "[idempotency] lifetim: unknown key; did you "
	    "mean lifetime?") != NULL, "%s", out);
	cr_expect(strstr(out, "the store is not checked: fix the problems of "
	    "[idempotency] and [mysql] above first") != NULL, "%s", out);
	cr_expect(strstr(out, "cannot connect") == NULL, "%s", out);
	free(out);
}
#endif

/* A transactional route needs a database store: refused at setup with
 * the route named, on the memory store and with idempotency disabled. */
Test(cli, transactional_route_needs_mysql)
{
	char *out;
	int rc = harness_run("--check", "[server]\nplugins = "
	    "@BUILDDIR@/tests/testkit/.libs/testkit.so\n[testkit]\n"
	    "log = /dev/null\ntx-route = true\n", &out);

	cr_expect_eq(rc, 1);
	cr_expect(strstr(out, "route POST /testkit/tx/{code} is transactional, "
	    "but the store has no database") != NULL, "%s", out);
	free(out);
	rc = harness_run("--check", "[server]\nplugins = "
	    "@BUILDDIR@/tests/testkit/.libs/testkit.so\n[testkit]\n"
	    "log = /dev/null\ntx-route = true\n[idempotency]\nenabled = false\n",
	    &out);
	cr_expect_eq(rc, 1);
	cr_expect(strstr(out, "route POST /testkit/tx/{code} is transactional, "
	    "but idempotency is disabled") != NULL, "%s", out);
	free(out);
}

Test(cli, wrong_abi_plugin)
{
	char *out;
	int rc = harness_run("--check", "[server]\nplugins = "
	    "@BUILDDIR@/tests/plugins/.libs/bad_abi.so\n", &out);

	cr_expect_eq(rc, 1);
	cr_expect(strstr(out, "bad_abi.so: built for plugin ABI version 42")
	    != NULL, "%s", out);
	free(out);
}

Test(cli, missing_config_file)
{
	char *out;
	int rc = harness_run("--check -c /nonexistent.conf", NULL, &out);

	cr_expect_eq(rc, 1);
	cr_expect(strstr(out, "/nonexistent.conf: cannot read") != NULL, "%s",
	    out);
	free(out);
}

Test(cli, help_and_version)
{
	char *out;
	int rc = harness_run("--help", "", &out);

	cr_expect_eq(rc, 0);
	cr_expect(strstr(out, "usage: idemfcgi") != NULL, "%s", out);
	free(out);
	rc = harness_run("--version", "", &out);
	cr_expect_eq(rc, 0);
	cr_expect(strstr(out, "idemfcgi " PACKAGE_VERSION " (plugin ABI 2)") != NULL, "%s",
	    out);
	free(out);
	rc = harness_run("--bogus", "", &out);
	cr_expect_eq(rc, 2);
	free(out);
}

/* The spawn-fcgi command line of docs/deploy.md: spawn-fcgi makes the
 * socket and execs idemfcgi with it on fd 0. */
Test(sockets, spawn_fcgi)
{
	char dir[] = "/tmp/idemfcgi-spawn.XXXXXX", conf[128], sock[128],
	    addr[160], bin[512];
	fc_response r;
	pid_t pid;
	int status, i;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(conf, sizeof(conf), "%s/c.conf", dir);
	snprintf(sock, sizeof(sock), "%s/s.sock", dir);
	snprintf(addr, sizeof(addr), "unix:%s", sock);
	snprintf(bin, sizeof(bin), "%s/idemfcgi", harness_builddir());
	harness_write_conf(conf,
	    "[server]\nplugins = @BUILDDIR@/.libs/ledger.so\n");
	if ((pid = fork()) == 0) {
		execlp("spawn-fcgi", "spawn-fcgi", "-n", "-s", sock, "-M", "0660",
		    "--", bin, "-c", conf, (char *)NULL);
		_exit(127);
	}
	for (i = 0; i < 200 && access(sock, F_OK) != 0; i++)
		msleep(25);
	cr_assert_eq(fc_http(addr, "POST", "/accounts/s/deposit",
	    (const char *[]){ "Idempotency-Key: sf-1", NULL }, "{\"amount\":2}",
	    &r), 0);
	cr_expect_eq(r.status, 201, "%s", r.body);
	fc_response_free(&r);
	kill(pid, SIGTERM);
	waitpid(pid, &status, 0);
	cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	unlink(sock);
	unlink(conf);
	rmdir(dir);
}
