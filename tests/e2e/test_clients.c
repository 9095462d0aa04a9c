/*
 * test_clients.c - the API clients of examples/clients (curl.sh, POSIX sh
 * with curl; client.py, Python's standard library) against a real
 * idemfcgi behind a real lighttpd: a handler that fails twice (503, then
 * 429, each with Retry-After) and then succeeds runs to its end once;
 * a key still in flight is waited for and its answer replayed; a
 * conflict and any other 4xx stop at once; an unreachable server is
 * given up after the attempts allowed.  Executions are counted in the
 * testkit's log, never timed.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "harness.h"
#include "http.h"
#include "websrv.h"

/* Arrays, not pointers: Criterion's workers are new processes (their
 * addresses differ), and get a copy of the parameter's bytes. */
typedef struct client {
	char name[16];
	char interp[16];        /* runs examples/clients/<name> */
} client;

static struct criterion_test_params
clients(void)
{
	static client c[] = {
		{ "curl.sh", "sh" },
		{ "client.py", "python3" },
	};

	return cr_make_param_array(client, c, 2);
}

static websrv w;

/* What a run of a client said. */
typedef struct run {
	int status;             /* its exit status */
	char *out, *err;        /* stdout, stderr (caller frees) */
	char key[300];          /* from "idempotency key: K" */
} run;

/* The shell command that runs c with args, its output in dir. */
static void
command(const client *c, const char *args, const char *tag, char *buf,
    size_t size)
{
	snprintf(buf, size, "%s '%s/examples/clients/%s' %s >'%s/%s.out' "
	    "2>'%s/%s.err'", c->interp, getenv("IDEM_SRCDIR"), c->name, args,
	    w.dir, tag, w.dir, tag);
}

/* Reads what the run tagged tag wrote into r, with exit status st. */
static void
collect(run *r, const char *tag, int st)
{
	char path[400];
	const char *k;

	r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	snprintf(path, sizeof(path), "%s/%s.out", w.dir, tag);
	r->out = harness_slurp(path);
	snprintf(path, sizeof(path), "%s/%s.err", w.dir, tag);
	r->err = harness_slurp(path);
	cr_assert(r->out != NULL && r->err != NULL);
	r->key[0] = '\0';
	if ((k = strstr(r->err, "idempotency key: ")) != NULL)
		sscanf(k + 17, "%299s", r->key);
}

/* Runs c with args and waits for it. */
static run
run_client(const client *c, const char *args)
{
	char cmd[1500];
	run r;

	command(c, args, "client", cmd, sizeof(cmd));
	collect(&r, "client", system(cmd));
	return r;
}

static void
run_free(run *r)
{
	free(r->out);
	free(r->err);
}

/* The lines of the testkit's <log>.flaky that are key. */
static int
flaky_failures(const char *key)
{
	char path[400], *text, *line, *save = NULL;
	int n = 0;

	snprintf(path, sizeof(path), "%s.flaky", w.testkit_log);
	if ((text = harness_slurp(path)) == NULL)
		return 0;
	for (line = strtok_r(text, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save))
		n += strcmp(line, key) == 0;
	free(text);
	return n;
}

static void
start(void)
{
	cr_assert_eq(websrv_start(&w, WS_LIGHTTPD, ""), 0);
}

ParameterizedTestParameters(clients, fails_twice_then_succeeds)
{
	return clients();
}

/* 503 with Retry-After: 1, then 429 with Retry-After: 1, then 201: the
 * client's fresh key is reused on each attempt, it waits what the server
 * says, and the handler runs to its end once. */
ParameterizedTest(client *c, clients, fails_twice_then_succeeds,
    .timeout = 60)
{
	char args[300];
	run r;

	start();
	snprintf(args, sizeof(args), "-n 5 -t 30 '%s/testkit/flaky/2' "
	    "'{\"order\":1}'", w.base);
	r = run_client(c, args);
	cr_expect_eq(r.status, 0, "%s: %s", c->name, r.err);
	cr_expect(strstr(r.out, "\"order\":1") != NULL, "%s", r.out);
	cr_assert_neq(r.key[0], '\0', "%s printed no key: %s", c->name, r.err);
	cr_expect_eq(flaky_failures(r.key), 2, "%s", r.err);
	cr_expect_eq(websrv_count(&w, "/testkit/flaky/2", r.key), 1,
	    "one execution: %s", r.err);
	cr_expect_eq(harness_occurrences(r.err, "attempt "), 3, "%s", r.err);
	cr_expect(strstr(r.err, "attempt 1: 503") != NULL, "%s", r.err);
	cr_expect(strstr(r.err, "attempt 2: 429") != NULL, "%s", r.err);
	/* Retry-After: 1 both times, not the client's own back-off (1 s,
	 * then 2 s) */
	cr_expect_eq(harness_occurrences(r.err, "retrying in 1s"), 2, "%s",
	    r.err);
	run_free(&r);
	websrv_stop(&w);
}

typedef struct holder {
	char url[300];
	char key[64];
	http_response r;
} holder;

static void *
hold_thread(void *arg)
{
	holder *h = arg;
	char hdr[100];
	const char *hs[] = { hdr, "Content-Type: application/json", NULL };

	snprintf(hdr, sizeof(hdr), "Idempotency-Key: %s", h->key);
	if (http_request("POST", h->url, hs, "{}", 2, &h->r) != 0)
		h->r.status = -1;
	return NULL;
}

/* Whether the file at path contains text, waiting up to 60 s for it. */
static int
await_text(const char *path, const char *text)
{
	struct timespec ts = { 0, 20000000L };
	int i;

	for (i = 0; i < 3000; i++) {
		char *s = harness_slurp(path);
		int found = s != NULL && strstr(s, text) != NULL;
		free(s);
		if (found)
			return 1;
		nanosleep(&ts, NULL);
	}
	return 0;
}

ParameterizedTestParameters(clients, waits_for_in_flight)
{
	return clients();
}

/* The client's key is reserved by a request still running: 409
 * IDEMPOTENCY_IN_FLIGHT with Retry-After, which it waits for and
 * retries, until the first finishes and its answer is replayed. */
ParameterizedTest(client *c, clients, waits_for_in_flight, .timeout = 90)
{
	holder h;
	harness kit;
	char args[400], cmd[1500], path[400];
	pthread_t t;
	pid_t pid;
	int st;
	run r;

	start();
	memset(&h, 0, sizeof(h));
	snprintf(h.url, sizeof(h.url), "%s/testkit/hold", w.base);
	snprintf(h.key, sizeof(h.key), "hold-%s-%d", c->name, (int)getpid());
	cr_assert_eq(pthread_create(&t, NULL, hold_thread, &h), 0);
	memset(&kit, 0, sizeof(kit));
	snprintf(kit.testkit_log, sizeof(kit.testkit_log), "%s", w.testkit_log);
	cr_assert(harness_await_started(&kit, "/testkit/hold", h.key, 1));
	snprintf(args, sizeof(args), "-k '%s' -n 60 -t 60 '%s' '{}'", h.key,
	    h.url);
	command(c, args, "client", cmd, sizeof(cmd));
	if ((pid = fork()) == 0) {
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	cr_assert_gt(pid, 0);
	/* the client met the first request in flight: now let it finish */
	snprintf(path, sizeof(path), "%s/client.err", w.dir);
	cr_expect(await_text(path, "409 IDEMPOTENCY_IN_FLIGHT"));
	snprintf(path, sizeof(path), "%s.release", w.testkit_log);
	close(open(path, O_WRONLY | O_CREAT, 0644));
	pthread_join(t, NULL);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	collect(&r, "client", st);
	cr_expect_eq(h.r.status, 201);
	cr_expect_eq(r.status, 0, "%s: %s", c->name, r.err);
	cr_expect(strstr(r.err, "retrying in 1s") != NULL, "%s", r.err);
	/* the replay of the first request's answer: the same execution */
	cr_expect(h.r.body != NULL && strstr(h.r.body, "\"exec\"") != NULL);
	if (h.r.body != NULL) {
		const char *e = strstr(h.r.body, "\"exec\":\"");
		char exec[64] = "";
		if (e != NULL)
			sscanf(e + 8, "%36s", exec);
		cr_expect(exec[0] != '\0' && strstr(r.out, exec) != NULL,
		    "%s / %s", h.r.body, r.out);
	}
	cr_expect_eq(websrv_count(&w, "/testkit/hold", h.key), 1);
	http_response_free(&h.r);
	run_free(&r);
	websrv_stop(&w);
}

ParameterizedTestParameters(clients, stops_at_conflict)
{
	return clients();
}

/* A key used for another request: 409 IDEMPOTENCY_CONFLICT, final at
 * the first attempt (exit 1), nothing run again. */
ParameterizedTest(client *c, clients, stops_at_conflict, .timeout = 60)
{
	const char *hs[] = { NULL, "Content-Type: application/json", NULL };
	char url[300], hdr[100], key[64], args[400];
	http_response first;
	run r;

	start();
	snprintf(key, sizeof(key), "conflict-%s-%d", c->name, (int)getpid());
	snprintf(hdr, sizeof(hdr), "Idempotency-Key: %s", key);
	hs[0] = hdr;
	snprintf(url, sizeof(url), "%s/testkit/echo", w.base);
	cr_assert_eq(http_request("POST", url, hs, "{\"a\":1}", 7, &first), 0);
	cr_assert_eq(first.status, 201);
	http_response_free(&first);
	snprintf(args, sizeof(args), "-k '%s' '%s' '{\"a\":2}'", key, url);
	r = run_client(c, args);
	cr_expect_eq(r.status, 1, "%s: %s", c->name, r.err);
	cr_expect(strstr(r.out, "IDEMPOTENCY_CONFLICT") != NULL, "%s", r.out);
	cr_expect_eq(harness_occurrences(r.err, "attempt "), 1, "%s", r.err);
	cr_expect_eq(websrv_count(&w, "/testkit/echo", key), 1);
	run_free(&r);
	websrv_stop(&w);
}

ParameterizedTestParameters(clients, stops_at_other_4xx)
{
	return clients();
}

/* A 422 is the answer: one attempt, exit 1, its body printed. */
ParameterizedTest(client *c, clients, stops_at_other_4xx, .timeout = 60)
{
	char args[300];
	run r;

	start();
	snprintf(args, sizeof(args), "'%s/testkit/status/422'", w.base);
	r = run_client(c, args);
	cr_expect_eq(r.status, 1, "%s: %s", c->name, r.err);
	cr_expect(strstr(r.out, "\"status\":422") != NULL, "%s", r.out);
	cr_expect_eq(harness_occurrences(r.err, "attempt "), 1, "%s", r.err);
	cr_expect_eq(websrv_count(&w, "/testkit/status/422", r.key), 1);
	run_free(&r);
	websrv_stop(&w);
}

ParameterizedTestParameters(clients, gives_up_when_unreachable)
{
	return clients();
}

/* Nothing listens: each attempt fails to connect; after the attempts
 * allowed (two) the client gives up with exit 2 and names its key. */
ParameterizedTest(client *c, clients, gives_up_when_unreachable,
    .timeout = 60)
{
	char args[300];
	run r;

	/* a directory for the output, and nothing on the port */
	snprintf(w.dir, sizeof(w.dir), "/tmp/idemfcgi-clients.XXXXXX");
	cr_assert_not_null(mkdtemp(w.dir));
	snprintf(args, sizeof(args), "-n 2 -t 30 "
	    "'http://127.0.0.1:%d/api/testkit/echo'", harness_free_port());
	r = run_client(c, args);
	cr_expect_eq(r.status, 2, "%s: %s", c->name, r.err);
	cr_expect_eq(harness_occurrences(r.err, "no answer"), 2, "%s", r.err);
	cr_expect(r.key[0] != '\0' && strstr(r.err, "giving up") != NULL &&
	    strstr(strstr(r.err, "giving up"), r.key) != NULL, "%s", r.err);
	run_free(&r);
	snprintf(args, sizeof(args), "rm -rf '%s'", w.dir);
	cr_expect_eq(system(args), 0);
}

ParameterizedTestParameters(clients, asks_what_became_of_the_key)
{
	return clients();
}

/* Issue 40.2: a client that kept only the key asks first (-s): never
 * seen, the request is sent and runs; committed, it is sent again and
 * replayed; past its lifetime (expired), it is not sent at all. */
ParameterizedTest(client *c, clients, asks_what_became_of_the_key,
    .timeout = 60)
{
	char args[600], key[64], path[64];
	run r;

	cr_assert_eq(websrv_start(&w, WS_LIGHTTPD, "[idempotency]\n"
	    "key-status = on\nlifetime = 1s\ntombstone-lifetime = 1h\n"), 0);
	snprintf(key, sizeof(key), "ask-%s-%ld", c->name, (long)getpid());
	snprintf(path, sizeof(path), "%s", "/testkit/echo");
	snprintf(args, sizeof(args), "-k '%s' -s '%s/idempotency/keys' -n 3 "
	    "-t 20 '%s%s' '{\"order\":7}'", key, w.base, w.base, path);
	r = run_client(c, args);
	cr_expect_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.err, "state of the key: absent") != NULL, "%s",
	    r.err);
	run_free(&r);
	r = run_client(c, args);
	cr_expect_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.err, "state of the key: committed") != NULL, "%s",
	    r.err);
	run_free(&r);
	usleep(1500 * 1000);
	r = run_client(c, args);
	cr_expect_eq(r.status, 1, "%s", r.err);
	cr_expect(strstr(r.err, "state of the key: expired") != NULL, "%s",
	    r.err);
	cr_expect(strstr(r.out, "\"expired\"") != NULL, "%s", r.out);
	cr_expect(strstr(r.err, "attempt") == NULL, "sent again: %s", r.err);
	run_free(&r);
	cr_expect_eq(websrv_count(&w, path, key), 1);
	websrv_stop(&w);
}
