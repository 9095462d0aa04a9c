/*
 * test_redis.c - idemfcgi with the Redis store, end to end: one private
 * Redis for the program, one or two real idemfcgi instances sharing it
 * (directly over FastCGI, and behind a real lighttpd and nginx driven by
 * curl), executions counted in one shared testkit log; a replica promoted
 * after its master dies, outages, and a Redis Cluster of three masters
 * with a replica each whose master fails over, on servers of their own.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <jansson.h>

#include "calls.h"
#include "harness.h"
#include "http.h"
#include "redis.h"
#include "websrv.h"

/* Starts an instance on r (NULL: the program's) with server lines under
 * [server], idem under [idempotency], extra lines under [redis]; log
 * NULL: its own testkit log. */
static void
start_on(harness *h, const redis *r, const char *server, const char *idem,
    const char *extra, const char *log)
{
	redis env;

	if (r == NULL) {
		cr_assert_eq(redis_from_env(&env), 0);
		r = &env;
	}
	cr_assert_eq(harness_start(h, &(harness_opts){ .server = server,
	    .idem = idem, .redis = r, .rest = extra, .testkit_log = log }), 0);
}

/* A unique key prefix per test run (the server outlives one test). */
static const char *
run_id(void)
{
	static char id[32];

	if (id[0] == '\0')
		snprintf(id, sizeof(id), "%lx", (unsigned long)getpid());
	return id;
}

Test(redis_e2e, replay_and_conflict)
{
	harness h;
	call a, b;
	char key[64];

	start_on(&h, NULL, NULL, NULL, NULL, NULL);
	snprintf(key, sizeof(key), "rc-%s", run_id());
	a = call_one(h.addr, "/testkit/echo", key, "{\"a\": 1, \"b\": 2}");
	cr_expect_eq(a.status, 201);
	b = call_one(h.addr, "/testkit/echo", key, "{\"b\":2,\"a\":1}");
	cr_expect_eq(b.status, 201);
	cr_expect_str_eq(b.replayed, "true");
	cr_expect_str_eq(b.exec, a.exec);
	cr_expect_str_eq(b.body_out, a.body_out);
	b = call_one(h.addr, "/testkit/echo", key, "{\"a\": 2}");
	cr_expect_eq(b.status, 409);
	cr_expect_str_eq(b.code, "IDEMPOTENCY_CONFLICT");
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", key), 1);
	/* released answers run again */
	snprintf(key, sizeof(key), "rel-%s", run_id());
	call_one(h.addr, "/testkit/status/502", key, NULL);
	call_one(h.addr, "/testkit/status/502", key, NULL);
	cr_expect_eq(harness_count_key(&h, "/testkit/status/502", key), 2);
	harness_stop(&h);
}

/* Sends the 409s of c (n calls) again until each key has its answer. */
static void
settle(call *c, int n)
{
	int tries, i, pending;

	for (tries = 0; tries < 200; tries++) {
		for (pending = 0, i = 0; i < n; i++)
			if (c[i].status == 409 && strcmp(c[i].code,
			    "IDEMPOTENCY_IN_FLIGHT") == 0) {
				call_send(&c[i]);
				pending++;
			}
		if (pending == 0)
			return;
		call_sleep(20);
	}
}

/* n keys sent 4 times each over the instances of addr (naddr), all at
 * once, on route: each key runs once (counted in h's shared log), and
 * every answer of a key is that execution's. */
static void
each_key_once(const harness *h, const char *const *addr, int naddr,
    const char *route, const char *tag)
{
	enum { KEYS = 50, SENDS = 4 };
	call c[KEYS * SENDS];
	char keys[KEYS][64];
	int i, k;

	for (k = 0; k < KEYS; k++)
		snprintf(keys[k], sizeof(keys[k]), "%s-%s-%d", tag, run_id(), k);
	for (i = 0; i < KEYS * SENDS; i++)
		c[i] = call_make(addr[i % naddr], route, keys[i % KEYS], NULL);
	call_all(c, KEYS * SENDS);
	settle(c, KEYS * SENDS);
	for (k = 0; k < KEYS; k++) {
		const char *exec = NULL;
		cr_expect_eq(harness_count_key(h, route, keys[k]), 1,
		    "key %d ran %zu times", k, harness_count_key(h, route,
		    keys[k]));
		for (i = k; i < KEYS * SENDS; i += KEYS) {
			cr_expect_eq(c[i].status, 201, "%d %s", c[i].status,
			    c[i].body_out);
			if (exec == NULL)
				exec = c[i].exec;
			cr_expect_str_eq(c[i].exec, exec, "key %d: two answers",
			    k);
		}
	}
}

/* Two instances on one Redis, 200 concurrent requests over 50 keys spread
 * across both: exactly one execution per key, one answer per key. */
Test(redis_e2e, two_nodes_one_execution_per_key, .timeout = 120)
{
	harness n1, n2;
	char log[128];
	const char *addr[2];

	snprintf(log, sizeof(log), "/tmp/idemfcgi-rdshared-%d.log",
	    (int)getpid());
	harness_log_reset(log);
	start_on(&n1, NULL, "threads = 24", NULL, "pool-size = 24\n", log);
	start_on(&n2, NULL, "threads = 24", NULL, "pool-size = 24\n", log);
	addr[0] = n1.addr;
	addr[1] = n2.addr;
	each_key_once(&n1, addr, 2, "/testkit/sleep/50", "two");
	harness_stop(&n1);
	harness_stop(&n2);
	harness_log_reset(log);
}

/* A whole node dies holding a reservation: after inflight-ttl two live
 * nodes race for it, and exactly one takes it over and runs it. */
Test(redis_e2e, dead_node_reservation_taken_over_once, .timeout = 60)
{
	harness dead, n1, n2;
	call doomed, c[20];
	char key[64], log[128];
	int i, ok = 0;
	pthread_t t;

	snprintf(log, sizeof(log), "/tmp/idemfcgi-rdrace-%d.log", (int)getpid());
	harness_log_reset(log);
	snprintf(key, sizeof(key), "dead-%s", run_id());
	start_on(&dead, NULL, NULL, "inflight-ttl = 1s", NULL, log);
	start_on(&n1, NULL, NULL, "inflight-ttl = 1s", NULL, log);
	start_on(&n2, NULL, NULL, "inflight-ttl = 1s", NULL, log);
	doomed = call_make(dead.addr, "/testkit/sleep/1500", key, NULL);
	pthread_create(&t, NULL, call_thread, &doomed);
	cr_assert(harness_await_started(&dead, "/testkit/sleep/1500", key, 1));
	harness_kill(&dead);
	pthread_join(t, NULL);
	cr_expect_eq(doomed.status, -1, "the node should have died");
	c[0] = call_one(n1.addr, "/testkit/sleep/1500", key, NULL);
	cr_expect_eq(c[0].status, 409);
	cr_expect_str_eq(c[0].code, "IDEMPOTENCY_IN_FLIGHT");
	call_sleep(1200);
	for (i = 0; i < 20; i++)
		c[i] = call_make(i % 2 ? n1.addr : n2.addr, "/testkit/sleep/1500",
		    key, NULL);
	call_all(c, 20);
	for (i = 0; i < 20; i++)
		if (c[i].status == 201)
			ok++;
	cr_expect_geq(ok, 1);
	cr_expect_eq(harness_count_key(&n1, "/testkit/sleep/1500", key), 1);
	cr_expect_eq(harness_logged(&n1, "took over the reservation") +
	    harness_logged(&n2, "took over the reservation"), 1);
	harness_stop(&dead);
	harness_stop(&n1);
	harness_stop(&n2);
	harness_log_reset(log);
}

/* A worker dies holding a key: its master releases the key at once, so
 * the retry runs without waiting for inflight-ttl. */
Test(redis_e2e, dead_worker_keys_released, .timeout = 60)
{
	harness h;
	call doomed, c;
	char key[64];
	pthread_t t;
	int pid;

	start_on(&h, NULL, "workers = 1", "inflight-ttl = 60s", NULL, NULL);
	snprintf(key, sizeof(key), "dw-%s", run_id());
	doomed = call_make(h.addr, "/testkit/sleep/5000", key, NULL);
	pthread_create(&t, NULL, call_thread, &doomed);
	cr_assert(harness_await_started(&h, "/testkit/sleep/5000", key, 1));
	cr_assert_eq(harness_workers(&h, &pid, 1), 1);
	cr_assert_eq(kill((pid_t)pid, SIGKILL), 0);
	pthread_join(t, NULL);
	cr_assert(harness_await_log(&h, "released 1 reservation(s) of dead "
	    "worker"));
	c = call_one(h.addr, "/testkit/sleep/10", key, NULL);
	cr_expect_eq(c.status, 201, "%d %s", c.status, c.body_out);
	cr_expect_eq(harness_count_key(&h, "/testkit/sleep/10", key), 1);
	harness_stop(&h);
}

/* The number of keys of server r whose names start with prefix. */
static int
keys_of(const redis *r, const char *prefix)
{
	char pattern[128], *out;
	const char *args[6];
	int n = 0;
	char *line, *save = NULL;

	snprintf(pattern, sizeof(pattern), "%s*", prefix);
	args[0] = "--scan";
	args[1] = "--pattern";
	args[2] = pattern;
	if ((out = redis_cli(r, args, 3)) == NULL)
		return -1;
	for (line = strtok_r(out, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save))
		n++;
	free(out);
	return n;
}

/* Records past their lifetime (with no tombstone) go from the purge
 * thread, every bucket's index with them; live ones stay. */
Test(redis_e2e, purge_thread, .timeout = 60)
{
	char prefix[64], extra[128], key[64];
	harness h;
	redis r;
	call c;
	int i, n;

	cr_assert_eq(redis_from_env(&r), 0);
	snprintf(prefix, sizeof(prefix), "purge%s:", run_id());
	snprintf(extra, sizeof(extra), "key-prefix = %s\n", prefix);
	start_on(&h, NULL, NULL, "lifetime = 1s\ntombstone-lifetime = 0\n"
	    "cleanup-interval = 1s", extra, NULL);
	for (i = 0; i < 20; i++) {
		snprintf(key, sizeof(key), "p-%d", i);
		c = call_one(h.addr, "/testkit/echo", key, NULL);
		cr_assert_eq(c.status, 201);
	}
	/* twenty records and their buckets' indexes */
	n = keys_of(&r, prefix);
	cr_expect_gt(n, 20, "%d", n);
	for (i = 0; i < 100 && (n = keys_of(&r, prefix)) != 0; i++)
		call_sleep(100);
	cr_expect_eq(n, 0, "%d keys left after the purge", n);
	harness_stop(&h);
}

/* --check reaches the server; a transactional route is refused, naming
 * why. */
Test(redis_e2e, check_reaches_the_server_and_refuses_tx_routes)
{
	char text[2048], section[256], *out = NULL;
	redis r;
	int rc;

	cr_assert_eq(redis_from_env(&r), 0);
	redis_conf(&r, section, sizeof(section));
	snprintf(text, sizeof(text), "[idempotency]\nstore = redis\n%s",
	    section);
	rc = harness_run("--check", text, &out);
	cr_expect_eq(rc, 0, "%s", out);
	cr_expect(out != NULL && strstr(out, "configuration OK") != NULL &&
	    strstr(out, "warning") == NULL, "%s", out);
	free(out);
	snprintf(text, sizeof(text), "[server]\nplugins = "
	    "@BUILDDIR@/tests/testkit/.libs/testkit.so\n[idempotency]\nstore = "
	    "redis\n%s[testkit]\nlog = /tmp/idemfcgi-rdcheck-%d.log\n"
	    "tx-route = true\n", section, (int)getpid());
	rc = harness_run("--check", text, &out);
	cr_expect_eq(rc, 1, "%s", out);
	cr_expect(out != NULL && strstr(out, "route POST /testkit/tx/{code} is "
	    "transactional, but store = redis keeps the idempotency records "
	    "only") != NULL, "%s", out);
	free(out);
}

/* ------------------------------------------------ behind a web server */

typedef struct setup {
	websrv_kind kind;
} setup;

ParameterizedTestParameters(redis_web, two_nodes_behind_a_web_server)
{
	static setup s[] = { { WS_LIGHTTPD }, { WS_NGINX } };

	return cr_make_param_array(setup, s, sizeof(s) / sizeof(s[0]));
}

/*
 * lighttpd or nginx in front of one idemfcgi, a second idemfcgi on the
 * same Redis reached directly: 20 keys, each sent 3 times through the web
 * server (curl) and 3 times to the second node, all at once; every key
 * runs once, and every answer of a key is that execution's.
 */
ParameterizedTest(setup *s, redis_web, two_nodes_behind_a_web_server,
    .timeout = 120)
{
	enum { KEYS = 20, WEB = 3, DIRECT = 3 };
	const char *hdr[KEYS * WEB][3];
	char conf[1024], section[256], keys[KEYS][64], kh[KEYS][96];
	char url[300];
	http_response r[KEYS * WEB];
	call dc[KEYS * DIRECT];
	redis rd;
	websrv w;
	harness n2;
	int i, k;

	cr_assert_eq(redis_from_env(&rd), 0);
	redis_conf(&rd, section, sizeof(section));
	snprintf(conf, sizeof(conf), "[idempotency]\nstore = redis\n%s",
	    section);
	cr_assert_eq(websrv_start(&w, s->kind, conf), 0, "%s did not start",
	    websrv_name(s->kind));
	start_on(&n2, &rd, "threads = 8", NULL, NULL, w.testkit_log);
	snprintf(url, sizeof(url), "%s/testkit/sleep/100", w.base);
	for (k = 0; k < KEYS; k++) {
		snprintf(keys[k], sizeof(keys[k]), "web-%d-%s-%d", (int)s->kind,
		    run_id(), k);
		snprintf(kh[k], sizeof(kh[k]), "Idempotency-Key: %s", keys[k]);
	}
	for (i = 0; i < KEYS * WEB; i++) {
		hdr[i][0] = "Content-Type: application/json";
		hdr[i][1] = kh[i % KEYS];
		hdr[i][2] = NULL;
	}
	for (i = 0; i < KEYS * DIRECT; i++)
		dc[i] = call_make(n2.addr, "/testkit/sleep/100", keys[i % KEYS],
		    NULL);
	call_all(dc, KEYS * DIRECT);
	/* through the web server, each until it has its answer */
	for (i = 0; i < KEYS * WEB; i++) {
		int tries;
		for (tries = 0; tries < 200; tries++) {
			cr_assert_eq(http_request("POST", url, hdr[i], "{}", 2,
			    &r[i]), 0);
			if (r[i].status != 409)
				break;
			http_response_free(&r[i]);
			call_sleep(20);
		}
		cr_expect_eq(r[i].status, 201, "%s: %d", websrv_name(s->kind),
		    r[i].status);
		http_response_free(&r[i]);
	}
	settle(dc, KEYS * DIRECT);
	for (k = 0; k < KEYS; k++) {
		cr_expect_eq(websrv_count(&w, "/testkit/sleep/100", keys[k]), 1,
		    "%s: key %d ran %zu times", websrv_name(s->kind), k,
		    websrv_count(&w, "/testkit/sleep/100", keys[k]));
		for (i = k; i < KEYS * DIRECT; i += KEYS)
			cr_expect_eq(dc[i].status, 201, "%d %s", dc[i].status,
			    dc[i].body_out);
	}
	harness_stop(&n2);
	websrv_stop(&w);
}

/* ---------------------------------------------------------- failover */

/*
 * host lists a master and its replica.  The master dies; the replica is
 * promoted (REPLICAOF NO ONE, as Sentinel or an operator does): idemfcgi
 * answers 503 meanwhile, finds the new master (ROLE passes over it while
 * it is a replica), and every key runs once, its answers from before the
 * failover replayed from the new master.
 */
Test(redis_failover, promoted_replica_takes_over, .timeout = 180)
{
	redis master, replica;
	char extra[256];
	harness h;
	call c;
	char before[64], after[64];
	int i;

	cr_assert_eq(harness_outage_turn(), 0);
	cr_assert_eq(redis_start(&master, NULL), 0);
	cr_assert_eq(redis_replica(&replica, &master), 0);
	snprintf(extra, sizeof(extra), "[redis]\nhost = 127.0.0.1:%d "
	    "127.0.0.1:%d\nconnect-timeout = 1s\nread-timeout = 1s\n"
	    "write-timeout = 1s\n", master.port, replica.port);
	cr_assert_eq(harness_start(&h, &(harness_opts){ .server = "threads = 4",
	    .idem = "store = redis", .rest = extra }), 0);
	snprintf(before, sizeof(before), "fo-before-%s", run_id());
	snprintf(after, sizeof(after), "fo-after-%s", run_id());
	c = call_one(h.addr, "/testkit/echo", before, NULL);
	cr_expect_eq(c.status, 201, "%d %s", c.status, c.body_out);
	/* the replica has it before the master dies */
	cr_assert_eq(redis_replicated(&master), 0, "the replica never had it");
	cr_assert_eq(redis_kill(&master), 0);
	c = call_one(h.addr, "/testkit/echo", after, NULL);
	cr_expect_eq(c.status, 503, "%d %s", c.status, c.body_out);
	cr_expect_str_eq(c.code, "IDEMPOTENCY_STORE_UNAVAILABLE");
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", after), 0);
	cr_assert_eq(redis_promote(&replica), 0);
	for (i = 0; i < 200; i++) {
		c = call_one(h.addr, "/testkit/echo", after, NULL);
		if (c.status != 503)
			break;
		call_sleep(50);
	}
	cr_expect_eq(c.status, 201, "after the promotion: %d %s", c.status,
	    c.body_out);
	c = call_one(h.addr, "/testkit/echo", after, NULL);
	cr_expect_str_eq(c.replayed, "true");
	c = call_one(h.addr, "/testkit/echo", before, NULL);
	cr_expect_eq(c.status, 201);
	cr_expect_str_eq(c.replayed, "true", "the answer from before the "
	    "failover: %s", c.body_out);
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", before), 1);
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", after), 1);
	cr_expect_eq(harness_stop(&h), 0);
	redis_destroy(&replica);
	redis_destroy(&master);
}

/* ------------------------------------------------------------ outages */

/* Redis stops (and is killed) under a running idemfcgi: 503 and no
 * execution while it is away, then service again without a restart; the
 * answers from before (in its AOF) are replayed. */
Test(redis_outage, stopped_then_started, .timeout = 120)
{
	redis db;
	harness h;
	call c;
	int i;

	cr_assert_eq(harness_outage_turn(), 0);
	cr_assert_eq(redis_start(&db, NULL), 0);
	start_on(&h, &db, "threads = 4", NULL, "connect-timeout = 1s\n", NULL);
	c = call_one(h.addr, "/testkit/echo", "before", NULL);
	cr_expect_eq(c.status, 201);
	cr_assert_eq(redis_stop(&db), 0);
	for (i = 0; i < 3; i++) {
		c = call_one(h.addr, "/testkit/echo", "during", NULL);
		cr_expect_eq(c.status, 503);
		cr_expect_str_eq(c.code, "IDEMPOTENCY_STORE_UNAVAILABLE");
	}
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", "during"), 0);
	cr_assert_eq(redis_restart(&db), 0);
	c = call_one(h.addr, "/testkit/echo", "during", NULL);
	cr_expect_eq(c.status, 201, "after the restart: %d %s", c.status,
	    c.body_out);
	c = call_one(h.addr, "/testkit/echo", "before", NULL);
	cr_expect_str_eq(c.replayed, "true");
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", "during"), 1);
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", "before"), 1);
	cr_expect_eq(kill(h.pid, 0), 0, "idemfcgi died");
	cr_expect_eq(harness_stop(&h), 0);
	redis_destroy(&db);
}

/* Redis is not up yet when idemfcgi starts: it serves anyway, keyed
 * routes answer 503 and run nothing until Redis comes, then once per key;
 * --check warns, or with --strict fails. */
Test(redis_outage, started_before_the_server, .timeout = 120)
{
	char *conf, *out = NULL;
	redis db;
	harness h;
	call c;
	int i, rc;

	cr_assert_eq(harness_outage_turn(), 0);
	cr_assert_eq(redis_start(&db, NULL), 0);
	cr_assert_eq(redis_stop(&db), 0);
	start_on(&h, &db, NULL, NULL, "connect-timeout = 1s\n", NULL);
	for (i = 0; i < 3; i++) {
		c = call_one(h.addr, "/testkit/echo", "early", NULL);
		cr_expect_eq(c.status, 503);
		cr_expect_str_eq(c.code, "IDEMPOTENCY_STORE_UNAVAILABLE");
	}
	cr_expect_eq(harness_count(&h, "/testkit/echo"), 0);
	conf = harness_slurp(h.conf);
	cr_assert_not_null(conf);
	rc = harness_run("--check", conf, &out);
	cr_expect_eq(rc, 0, "--check: %d %s", rc, out);
	cr_expect(out != NULL && strstr(out, "warning: the Redis database "
	    "cannot be reached") != NULL, "%s", out);
	free(out);
	rc = harness_run("--check --strict", conf, &out);
	cr_expect_eq(rc, 1, "--check --strict: %d %s", rc, out);
	free(out);
	free(conf);
	cr_assert_eq(redis_restart(&db), 0);
	for (i = 0; i < 600; i++) {
		c = call_one(h.addr, "/testkit/echo", "early", NULL);
		if (c.status != 503)
			break;
		cr_expect_eq(harness_count(&h, "/testkit/echo"), 0);
		call_sleep(50);
	}
	cr_expect_eq(c.status, 201, "after Redis came: %d %s", c.status,
	    c.body_out);
	c = call_one(h.addr, "/testkit/echo", "early", NULL);
	cr_expect_str_eq(c.replayed, "true");
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", "early"), 1);
	cr_expect_eq(harness_stop(&h), 0);
	redis_destroy(&db);
}

/* Redis frozen (SIGSTOP): a request gets 503 once the timeouts run out,
 * never hangs, and runs nothing; after SIGCONT the same idemfcgi serves
 * again, and the key whose reserve went unanswered runs once. */
Test(redis_outage, frozen_server, .timeout = 120)
{
	redis db;
	harness h;
	call c;
	int tries;

	cr_assert_eq(harness_outage_turn(), 0);
	cr_assert_eq(redis_start(&db, NULL), 0);
	start_on(&h, &db, "threads = 4", "inflight-ttl = 3s", "pool-size = 4\n"
	    "connect-timeout = 1s\nread-timeout = 1s\nwrite-timeout = 1s\n",
	    NULL);
	c = call_one(h.addr, "/testkit/echo", "warm", NULL);
	cr_assert_eq(c.status, 201);
	cr_assert_eq(redis_freeze(&db), 0);
	c = call_one(h.addr, "/testkit/echo", "frozen", NULL);
	cr_expect_eq(c.status, 503, "%d %s", c.status, c.body_out);
	cr_expect_str_eq(c.code, "IDEMPOTENCY_STORE_UNAVAILABLE");
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", "frozen"), 0);
	cr_assert_eq(redis_thaw(&db), 0);
	c = call_make(h.addr, "/testkit/echo", "frozen", NULL);
	for (tries = 0; tries < 400; tries++) {
		call_send(&c);
		if (c.status == 201)
			break;
		call_sleep(25);
	}
	cr_expect_eq(c.status, 201, "after SIGCONT: %d %s", c.status,
	    c.body_out);
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", "frozen"), 1);
	cr_expect_eq(harness_stop(&h), 0);
	redis_destroy(&db);
}

/* ----------------------------------------------------------- cluster */

/* The [redis] lines of cluster m: every master's node listed. */
static void
cluster_section(const redis *m, char *buf, size_t size)
{
	snprintf(buf, size, "[redis]\nhost = 127.0.0.1:%d 127.0.0.1:%d "
	    "127.0.0.1:%d\ncluster = true\nconnect-timeout = 1s\n"
	    "read-timeout = 2s\nwrite-timeout = 2s\npool-size = 16\n",
	    m->port, m->port + 1, m->port + 2);
}

/*
 * A Redis Cluster of three masters, a replica each: two instances send 50
 * keys 4 times each, all at once (every key's bucket on its own slot, the
 * keys spread over the masters), and each key runs once.  Then master 0
 * is killed: the cluster promotes its replica (cluster-node-timeout 2 s),
 * idemfcgi answers 503 for that master's slots meanwhile and finds the
 * new master by itself; every key runs once across the failover, and
 * the answers from before are replayed.
 */
Test(redis_cluster, one_execution_per_key_across_a_failover, .timeout = 240)
{
	char extra[256], log[128];
	const char *addr[2];
	harness n1, n2;
	redis cl, m0;
	call c[50];
	char keys[50][64];
	int i, k, ok;

	cr_assert_eq(harness_outage_turn(), 0);
	cr_assert_eq(redis_cluster(&cl, 3, 1), 0);
	cluster_section(&cl, extra, sizeof(extra));
	snprintf(log, sizeof(log), "/tmp/idemfcgi-rdcluster-%d.log",
	    (int)getpid());
	harness_log_reset(log);
	cr_assert_eq(harness_start(&n1, &(harness_opts){ .server =
	    "threads = 16", .idem = "store = redis", .rest = extra,
	    .testkit_log = log }), 0);
	cr_assert_eq(harness_start(&n2, &(harness_opts){ .server =
	    "threads = 16", .idem = "store = redis", .rest = extra,
	    .testkit_log = log }), 0);
	addr[0] = n1.addr;
	addr[1] = n2.addr;
	each_key_once(&n1, addr, 2, "/testkit/sleep/20", "cl");
	/* the answers of before the failover on the replicas */
	for (i = 0; i < 3; i++) {
		redis_cluster_node(&cl, i, &m0);
		cr_assert_eq(redis_replicated(&m0), 0, "master %d's replica "
		    "never had its writes", i);
	}
	redis_cluster_node(&cl, 0, &m0);
	cr_assert_eq(redis_kill(&m0), 0);
	/* 50 new keys until each has run: 503 while the slot has no master,
	 * never two executions */
	for (k = 0; k < 50; k++) {
		snprintf(keys[k], sizeof(keys[k]), "clfo-%s-%d", run_id(), k);
		c[k] = call_make(addr[k % 2], "/testkit/echo", keys[k], NULL);
	}
	for (i = 0, ok = 0; i < 400 && ok < 50; i++) {
		for (ok = 0, k = 0; k < 50; k++) {
			if (c[k].status != 201)
				call_send(&c[k]);
			if (c[k].status == 201)
				ok++;
			else
				cr_expect_eq(c[k].status, 503, "%d %s",
				    c[k].status, c[k].body_out);
		}
		if (ok < 50)
			call_sleep(50);
	}
	cr_expect_eq(ok, 50, "keys without an answer after the failover");
	for (k = 0; k < 50; k++)
		cr_expect_eq(harness_count_key(&n1, "/testkit/echo", keys[k]), 1,
		    "key %d ran %zu times", k, harness_count_key(&n1,
		    "/testkit/echo", keys[k]));
	/* and those of before are replayed, wherever their slot is now */
	for (k = 0; k < 50; k++) {
		char key[64];
		call r;
		snprintf(key, sizeof(key), "cl-%s-%d", run_id(), k);
		r = call_one(addr[k % 2], "/testkit/sleep/20", key, NULL);
		cr_expect_eq(r.status, 201, "%d %s", r.status, r.body_out);
		cr_expect_str_eq(r.replayed, "true", "key %d ran again", k);
		cr_expect_eq(harness_count_key(&n1, "/testkit/sleep/20", key), 1);
	}
	harness_stop(&n1);
	harness_stop(&n2);
	harness_log_reset(log);
	redis_destroy(&cl);
}

/* ------------------------------------------------------- the operator */

/* Runs idemfcgi-admin -c conf ARGS; its stdout and stderr into *out
 * (caller frees).  Returns the exit status. */
static int
admin(const char *conf, const char *args, char **out)
{
	char cmd[1500];
	FILE *p;
	size_t n = 0;
	int st;

	snprintf(cmd, sizeof(cmd), "'%s/idemfcgi-admin' -c '%s' %s 2>&1 "
	    "</dev/null", harness_builddir(), conf, args);
	cr_assert_not_null(p = popen(cmd, "r"));
	cr_assert_not_null(*out = calloc(1, 16384));
	n = fread(*out, 1, 16383, p);
	(*out)[n] = '\0';
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/*
 * idemfcgi-admin on the Redis store: a committed record shown, a dead
 * node's stuck reservation counted as stale, shown, and released, so the
 * retry runs at once (not after inflight-ttl), once; a purge.
 */
Test(redis_e2e, admin_shows_and_releases, .timeout = 60)
{
	harness h, dead;
	char key[64], stuck[64], args[200], *out;
	call c, doomed;
	pthread_t t;

	snprintf(key, sizeof(key), "adm-%s", run_id());
	snprintf(stuck, sizeof(stuck), "adm-stuck-%s", run_id());
	start_on(&h, NULL, NULL, "inflight-ttl = 1s", NULL, NULL);
	start_on(&dead, NULL, NULL, "inflight-ttl = 1s", NULL, h.testkit_log);
	c = call_one(h.addr, "/testkit/echo", key, NULL);
	cr_assert_eq(c.status, 201);
	snprintf(args, sizeof(args), "show %s", key);
	cr_expect_eq(admin(h.conf, args, &out), 0, "%s", out);
	cr_expect(strstr(out, "state:        committed\n") != NULL, "%s", out);
	cr_expect(strstr(out, "status:       201") != NULL, "%s", out);
	free(out);
	doomed = call_make(dead.addr, "/testkit/sleep/60000", stuck, NULL);
	pthread_create(&t, NULL, call_thread, &doomed);
	cr_assert(harness_await_started(&dead, "/testkit/sleep/60000", stuck,
	    1));
	harness_kill(&dead);
	pthread_join(t, NULL);
	call_sleep(1100);
	cr_expect_eq(admin(h.conf, "--json stats", &out), 0, "%s", out);
	cr_expect(strstr(out, "\"stale\": 0") == NULL && strstr(out,
	    "\"stale\"") != NULL, "%s", out);
	free(out);
	snprintf(args, sizeof(args), "show %s", stuck);
	cr_expect_eq(admin(h.conf, args, &out), 0, "%s", out);
	cr_expect(strstr(out, "state:        in_flight\n") != NULL, "%s", out);
	free(out);
	snprintf(args, sizeof(args), "release %s --yes", stuck);
	cr_expect_eq(admin(h.conf, args, &out), 0, "%s", out);
	free(out);
	c = call_one(h.addr, "/testkit/sleep/10", stuck, NULL);
	cr_expect_eq(c.status, 201, "%d %s", c.status, c.body_out);
	cr_expect_eq(harness_count_key(&h, "/testkit/sleep/10", stuck), 1);
	cr_expect_eq(admin(h.conf, "purge", &out), 0, "%s", out);
	free(out);
	harness_stop(&dead);
	harness_stop(&h);
}
