/*
 * test_postgres.c - idemfcgi with the PostgreSQL store, end to end: one
 * private PostgreSQL for the program, one or two real idemfcgi instances
 * sharing it (directly over FastCGI, and behind a real lighttpd and nginx
 * driven by curl), executions counted in one shared testkit log; a
 * failover to a promoted standby on servers of its own.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <jansson.h>

#include "calls.h"
#include "harness.h"
#include "http.h"
#include "postgres.h"
#include "websrv.h"

/* Starts an instance on pg (NULL: the program's) with server lines under
 * [server], idem under [idempotency]; log NULL: its own testkit log.  The
 * pool-size follows the threads of server. */
static void
start_on(harness *h, const postgres *pg, const char *server,
    const char *idem, const char *log)
{
	char pool[32];
	const char *threads = server != NULL ? strstr(server, "threads = ") :
	    NULL;
	postgres env;

	if (pg == NULL) {
		cr_assert_eq(postgres_from_env(&env), 0);
		pg = &env;
	}
	snprintf(pool, sizeof(pool), "pool-size = %d\n",
	    threads != NULL ? atoi(threads + 10) : 8);
	cr_assert_eq(harness_start(h, &(harness_opts){ .server = server,
	    .idem = idem, .pg = pg, .rest = pool, .testkit_log = log }), 0);
}

static void
start_node(harness *h, const char *server, const char *idem, const char *log)
{
	start_on(h, NULL, server, idem, log);
}

/* A [postgres] section for pg's password with host (NULL: pg's own),
 * database db (NULL: idem) and extra lines, into buf. */
static void
section_of(const postgres *pg, const char *host, const char *db,
    const char *extra, char *buf, size_t size)
{
	char own[64];

	snprintf(own, sizeof(own), "127.0.0.1:%d", pg->port);
	snprintf(buf, size, "[postgres]\nhost = %s\nuser = idem\n"
	    "password-file = %s/password\ndatabase = %s\n%s",
	    host != NULL ? host : own, pg->dir, db != NULL ? db : "idem",
	    extra != NULL ? extra : "");
}

/* A unique key prefix per test run (the database outlives one test). */
static const char *
run_id(void)
{
	static char id[32];

	if (id[0] == '\0')
		snprintf(id, sizeof(id), "%lx", (unsigned long)getpid());
	return id;
}

Test(postgres_e2e, replay_and_conflict)
{
	harness h;
	call a, b;
	char key[64];

	start_node(&h, NULL, NULL, NULL);
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
	b = call_one(h.addr, "/testkit/status/503", key, NULL);
	cr_expect_eq(b.status, 409, "another route with the key: %s",
	    b.body_out);
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", key), 1);
	/* released answers run again */
	snprintf(key, sizeof(key), "rel-%s", run_id());
	call_one(h.addr, "/testkit/status/502", key, NULL);
	call_one(h.addr, "/testkit/status/502", key, NULL);
	cr_expect_eq(harness_count_key(&h, "/testkit/status/502", key), 2);
	harness_stop(&h);
}

/* Two instances, 200 concurrent requests over 50 keys spread across both:
 * exactly one execution per key, one answer per key. */
Test(postgres_e2e, two_nodes_one_execution_per_key, .timeout = 120)
{
	harness n1, n2;
	call c[200];
	char keys[50][48], log[128];
	int i, k, final;

	snprintf(log, sizeof(log), "/tmp/idemfcgi-pgshared-%d.log",
	    (int)getpid());
	harness_log_reset(log);
	start_node(&n1, "threads = 24", NULL, log);
	start_node(&n2, "threads = 24", NULL, log);
	for (k = 0; k < 50; k++)
		snprintf(keys[k], sizeof(keys[k]), "two-%s-%d", run_id(), k);
	for (i = 0; i < 200; i++) {
		k = i % 50;
		c[i] = call_make(i % 2 ? n1.addr : n2.addr, "/testkit/sleep/50",
		    keys[k], NULL);
	}
	call_all(c, 200);
	for (i = 0; i < 200; i++)
		cr_expect(c[i].status == 201 || (c[i].status == 409 &&
		    strcmp(c[i].code, "IDEMPOTENCY_IN_FLIGHT") == 0),
		    "request %d: %d %s", i, c[i].status, c[i].body_out);
	/* retry whatever was in flight until every key has its answer */
	for (final = 0; final < 50; final++)
		for (i = 0; i < 200; i++)
			if (c[i].status == 409) {
				call_sleep(20);
				call_send(&c[i]);
			}
	for (k = 0; k < 50; k++) {
		const char *exec = NULL;
		cr_expect_eq(harness_count_key(&n1, "/testkit/sleep/50", keys[k]),
		    1, "key %d ran %zu times", k,
		    harness_count_key(&n1, "/testkit/sleep/50", keys[k]));
		for (i = k; i < 200; i += 50) {
			cr_expect_eq(c[i].status, 201);
			if (exec == NULL)
				exec = c[i].exec;
			cr_expect_str_eq(c[i].exec, exec, "key %d: two answers", k);
		}
	}
	harness_stop(&n1);
	harness_stop(&n2);
	harness_log_reset(log);
}

/* A whole node dies (master and workers) holding a reservation: nobody is
 * left to release it.  After inflight-ttl two live nodes race for it:
 * exactly one takes it over and runs the handler. */
Test(postgres_e2e, dead_node_reservation_taken_over_once, .timeout = 60)
{
	harness dead, n1, n2;
	call doomed, c[20];
	char key[64], log[128];
	int i, ok = 0;
	pthread_t t;

	snprintf(log, sizeof(log), "/tmp/idemfcgi-pgrace-%d.log", (int)getpid());
	harness_log_reset(log);
	snprintf(key, sizeof(key), "dead-%s", run_id());
	start_node(&dead, NULL, "inflight-ttl = 1s", log);
	start_node(&n1, NULL, "inflight-ttl = 1s", log);
	start_node(&n2, NULL, "inflight-ttl = 1s", log);
	doomed = call_make(dead.addr, "/testkit/sleep/1500", key, NULL);
	pthread_create(&t, NULL, call_thread, &doomed);
	cr_assert(harness_await_started(&dead, "/testkit/sleep/1500", key, 1));
	harness_kill(&dead);
	pthread_join(t, NULL);
	cr_expect_eq(doomed.status, -1, "the node should have died");
	/* still held by the dead node */
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

/* A worker dies holding a key: its master releases the key at once (the
 * dead worker's owner prefix), so the retry runs without waiting for
 * inflight-ttl. */
Test(postgres_e2e, dead_worker_keys_released, .timeout = 60)
{
	harness h;
	call doomed, c;
	char key[64];
	pthread_t t;
	int pid;

	start_node(&h, "workers = 1", "inflight-ttl = 60s", NULL);
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

/* Expired rows go in batches from the purge thread; live rows stay. */
Test(postgres_e2e, purge_thread)
{
	harness h;
	postgres pg;
	char sql[1024], *out;
	int i;

	cr_assert_eq(postgres_from_env(&pg), 0);
	snprintf(sql, sizeof(sql), "INSERT INTO idempotency_keys SELECT "
	    "sha256('purge-%s'), convert_to('old-' || n, 'UTF8'), "
	    "sha256('x'), 'committed', 'o', 'r', clock_timestamp(), "
	    "clock_timestamp(), 1000, clock_timestamp() - interval '1 second', "
	    "200, '', '' FROM generate_series(1, 2500) n", run_id());
	out = postgres_sql(&pg, sql);
	cr_assert_not_null(out);
	free(out);
	snprintf(sql, sizeof(sql), "INSERT INTO idempotency_keys SELECT "
	    "sha256('purge-%s'), convert_to('live-' || n, 'UTF8'), "
	    "sha256('x'), 'committed', 'o', 'r', clock_timestamp(), "
	    "clock_timestamp(), 1000, clock_timestamp() + interval '1 hour', "
	    "200, '', '' FROM generate_series(1, 30) n", run_id());
	free(postgres_sql(&pg, sql));
	start_node(&h, NULL, "cleanup-interval = 1s", NULL);
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM idempotency_keys "
	    "WHERE scope_hash = sha256('purge-%s')", run_id());
	for (i = 0; i < 100; i++) {
		out = postgres_sql(&pg, sql);
		if (out != NULL && atoi(out) == 30) {
			free(out);
			break;
		}
		free(out);
		call_sleep(100);
	}
	cr_expect_lt(i, 100, "expired rows were not purged");
	harness_stop(&h);
}

/* --check reaches the database and checks its schema. */
Test(postgres_e2e, check_reaches_the_database)
{
	char text[2048], section[700], *out = NULL;
	postgres pg;
	int rc;

	cr_assert_eq(postgres_from_env(&pg), 0);
	postgres_conf(&pg, section, sizeof(section));
	snprintf(text, sizeof(text), "[idempotency]\nstore = postgres\n%s",
	    section);
	rc = harness_run("--check", text, &out);
	cr_expect_eq(rc, 0, "%s", out);
	cr_expect(out != NULL && strstr(out, "configuration OK") != NULL &&
	    strstr(out, "warning") == NULL, "%s", out);
	free(out);
	cr_assert_eq(postgres_new_database(&pg, "check_old"), 0);
	free(postgres_sql_on(&pg, "check_old", "DELETE FROM idemfcgi_schema; "
	    "INSERT INTO idemfcgi_schema VALUES (0, now())"));
	section_of(&pg, NULL, "check_old", NULL, section, sizeof(section));
	snprintf(text, sizeof(text), "[idempotency]\nstore = postgres\n%s",
	    section);
	rc = harness_run("--check", text, &out);
	cr_expect_eq(rc, 1, "%s", out);
	cr_expect(out != NULL && strstr(out, "database check_old has schema "
	    "version 0, this idemfcgi needs 2") != NULL, "%s", out);
	free(out);
}

/* ------------------------------------------------ behind a web server */

typedef struct setup {
	websrv_kind kind;
} setup;

ParameterizedTestParameters(postgres_web, two_nodes_behind_a_web_server)
{
	static setup s[] = { { WS_LIGHTTPD }, { WS_NGINX } };

	return cr_make_param_array(setup, s, sizeof(s) / sizeof(s[0]));
}

typedef struct web_call {
	char url[300];
	char key[160];
	int status;
	char exec[40];
	char code[64];
} web_call;

/* POSTs c's url with its key through curl; fills status, exec, code. */
static void
web_send(web_call *c)
{
	const char *h[3] = { "Content-Type: application/json", c->key, NULL };
	http_response r;
	json_t *j;

	c->exec[0] = c->code[0] = '\0';
	if (http_request("POST", c->url, h, "{}", 2, &r) != 0) {
		c->status = -1;
		return;
	}
	c->status = r.status;
	if (r.body != NULL && (j = json_loads(r.body, 0, NULL)) != NULL) {
		if (json_is_string(json_object_get(j, "exec")))
			snprintf(c->exec, sizeof(c->exec), "%s",
			    json_string_value(json_object_get(j, "exec")));
		if (json_is_string(json_object_get(j, "code")))
			snprintf(c->code, sizeof(c->code), "%s",
			    json_string_value(json_object_get(j, "code")));
		json_decref(j);
	}
	http_response_free(&r);
}

static void *
web_thread(void *arg)
{
	web_send(arg);
	return NULL;
}

/*
 * lighttpd or nginx in front of one idemfcgi, a second idemfcgi on the
 * same PostgreSQL reached directly: 20 keys, each sent 3 times through
 * the web server and 3 times to the second node, all at once; every key
 * runs once, and every answer of a key is that execution's.
 */
ParameterizedTest(setup *s, postgres_web, two_nodes_behind_a_web_server,
    .timeout = 120)
{
	enum { KEYS = 20, WEB = 3, DIRECT = 3 };
	web_call wc[KEYS * WEB];
	call dc[KEYS * DIRECT];
	pthread_t t[KEYS * WEB];
	char conf[1500], section[700], keys[KEYS][64];
	postgres pg;
	websrv w;
	harness n2;
	int i, k, tries;

	cr_assert_eq(postgres_from_env(&pg), 0);
	postgres_conf(&pg, section, sizeof(section));
	snprintf(conf, sizeof(conf), "[idempotency]\nstore = postgres\n%s",
	    section);
	cr_assert_eq(websrv_start(&w, s->kind, conf), 0, "%s did not start",
	    websrv_name(s->kind));
	start_on(&n2, &pg, "threads = 8", NULL, w.testkit_log);
	for (k = 0; k < KEYS; k++)
		snprintf(keys[k], sizeof(keys[k]), "web-%d-%s-%d", (int)s->kind,
		    run_id(), k);
	for (i = 0; i < KEYS * WEB; i++) {
		memset(&wc[i], 0, sizeof(wc[i]));
		snprintf(wc[i].url, sizeof(wc[i].url), "%s/testkit/sleep/100",
		    w.base);
		snprintf(wc[i].key, sizeof(wc[i].key), "Idempotency-Key: %s",
		    keys[i % KEYS]);
		pthread_create(&t[i], NULL, web_thread, &wc[i]);
	}
	for (i = 0; i < KEYS * DIRECT; i++)
		dc[i] = call_make(n2.addr, "/testkit/sleep/100", keys[i % KEYS],
		    NULL);
	call_all(dc, KEYS * DIRECT);
	for (i = 0; i < KEYS * WEB; i++)
		pthread_join(t[i], NULL);
	/* what was in flight is retried until it has its answer */
	for (tries = 0; tries < 100; tries++) {
		int pending = 0;
		for (i = 0; i < KEYS * WEB; i++)
			if (wc[i].status == 409 &&
			    strcmp(wc[i].code, "IDEMPOTENCY_IN_FLIGHT") == 0) {
				web_send(&wc[i]);
				pending++;
			}
		for (i = 0; i < KEYS * DIRECT; i++)
			if (dc[i].status == 409 &&
			    strcmp(dc[i].code, "IDEMPOTENCY_IN_FLIGHT") == 0) {
				call_send(&dc[i]);
				pending++;
			}
		if (pending == 0)
			break;
		call_sleep(50);
	}
	for (k = 0; k < KEYS; k++) {
		const char *exec = NULL;
		cr_expect_eq(websrv_count(&w, "/testkit/sleep/100", keys[k]), 1,
		    "%s: key %d ran %zu times", websrv_name(s->kind), k,
		    websrv_count(&w, "/testkit/sleep/100", keys[k]));
		for (i = k; i < KEYS * WEB; i += KEYS) {
			cr_expect_eq(wc[i].status, 201, "%s: %d %s",
			    websrv_name(s->kind), wc[i].status, wc[i].code);
			if (exec == NULL)
				exec = wc[i].exec;
			cr_expect_str_eq(wc[i].exec, exec, "key %d: two answers",
			    k);
		}
		for (i = k; i < KEYS * DIRECT; i += KEYS) {
			cr_expect_eq(dc[i].status, 201, "%d %s", dc[i].status,
			    dc[i].body_out);
			cr_expect_str_eq(dc[i].exec, exec, "key %d: two answers",
			    k);
		}
	}
	harness_stop(&n2);
	websrv_stop(&w);
}

/* ---------------------------------------------------------- failover */

/*
 * host lists a primary and its streaming standby.  The primary dies
 * holding nothing in flight; the standby is promoted (pg_ctl promote):
 * idemfcgi finds it (target_session_attrs=read-write passes over it while
 * it is a standby), answers 503 meanwhile, and every key runs once, its
 * answers from before the failover replayed from the new primary.
 */
Test(postgres_failover, promoted_standby_takes_over, .timeout = 180)
{
	postgres primary, standby;
	char hosts[64], extra[900];
	harness h;
	call c;
	char before[64], after[64];
	int i;

	cr_assert_eq(harness_outage_turn(), 0);
	cr_assert_eq(postgres_start(&primary), 0);
	cr_assert_eq(postgres_standby(&standby, &primary), 0);
	/* both hosts, the primary first */
	snprintf(hosts, sizeof(hosts), "127.0.0.1:%d 127.0.0.1:%d",
	    primary.port, standby.port);
	section_of(&primary, hosts, NULL, "connect-timeout = 1s\n"
	    "read-timeout = 2s\nwrite-timeout = 2s\n", extra, sizeof(extra));
	cr_assert_eq(harness_start(&h, &(harness_opts){ .server = "threads = 4",
	    .idem = "store = postgres", .rest = extra }), 0);
	snprintf(before, sizeof(before), "fo-before-%s", run_id());
	snprintf(after, sizeof(after), "fo-after-%s", run_id());
	c = call_one(h.addr, "/testkit/echo", before, NULL);
	cr_expect_eq(c.status, 201, "%d %s", c.status, c.body_out);
	/* the standby has it before the primary dies (streamed) */
	for (i = 0; i < 100; i++) {
		char *n = postgres_sql(&standby, "SELECT count(*) FROM "
		    "idempotency_keys");
		int got = n != NULL ? atoi(n) : 0;
		free(n);
		if (got >= 1)
			break;
		call_sleep(50);
	}
	cr_assert_lt(i, 100, "the standby never received the record");
	cr_assert_eq(postgres_kill(&primary), 0);
	c = call_one(h.addr, "/testkit/echo", after, NULL);
	cr_expect_eq(c.status, 503, "%d %s", c.status, c.body_out);
	cr_expect_str_eq(c.code, "IDEMPOTENCY_STORE_UNAVAILABLE");
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", after), 0);
	cr_assert_eq(postgres_promote(&standby), 0);
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
	cr_expect(harness_logged(&h, "host 2 of the list"));
	cr_expect_eq(harness_stop(&h), 0);
	postgres_destroy(&standby);
	postgres_destroy(&primary);
}

/* ------------------------------------------------------------ outages */

/* The database stops (and is killed) under a running idemfcgi: 503 and
 * no execution while it is away, then service again without a restart;
 * the answers from before are replayed. */
Test(postgres_outage, stopped_then_started, .timeout = 120)
{
	postgres db;
	harness h;
	call c;
	int i;

	cr_assert_eq(harness_outage_turn(), 0);
	cr_assert_eq(postgres_start(&db), 0);
	start_on(&h, &db, "threads = 4", NULL, NULL);
	c = call_one(h.addr, "/testkit/echo", "before", NULL);
	cr_expect_eq(c.status, 201);

	cr_assert_eq(postgres_stop(&db), 0);
	for (i = 0; i < 3; i++) {
		c = call_one(h.addr, "/testkit/echo", "during", NULL);
		cr_expect_eq(c.status, 503);
		cr_expect_str_eq(c.code, "IDEMPOTENCY_STORE_UNAVAILABLE");
	}
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", "during"), 0);
	cr_assert_eq(postgres_restart(&db), 0);
	c = call_one(h.addr, "/testkit/echo", "during", NULL);
	cr_expect_eq(c.status, 201, "after the restart: %d %s", c.status,
	    c.body_out);
	c = call_one(h.addr, "/testkit/echo", "before", NULL);
	cr_expect_str_eq(c.replayed, "true");
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", "during"), 1);
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", "before"), 1);

	/* killed, not stopped: the same */
	cr_assert_eq(postgres_kill(&db), 0);
	c = call_one(h.addr, "/testkit/echo", "killed", NULL);
	cr_expect_eq(c.status, 503);
	cr_assert_eq(postgres_restart(&db), 0);
	c = call_one(h.addr, "/testkit/echo", "killed", NULL);
	cr_expect_eq(c.status, 201, "%d %s", c.status, c.body_out);
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", "killed"), 1);
	cr_expect_eq(kill(h.pid, 0), 0, "idemfcgi died");
	cr_expect_eq(harness_stop(&h), 0);
	postgres_destroy(&db);
}

/* The database is not up yet when idemfcgi starts: it serves anyway,
 * keyed routes answer 503 and run nothing until the database comes, then
 * once per key; --check warns (exit 0) or, with --strict, fails. */
Test(postgres_outage, started_before_the_database, .timeout = 120)
{
	char *conf, *out = NULL;
	postgres db;
	harness h;
	call c;
	int i, rc;

	cr_assert_eq(harness_outage_turn(), 0);
	cr_assert_eq(postgres_start(&db), 0);
	cr_assert_eq(postgres_stop(&db), 0);
	start_on(&h, &db, NULL, NULL, NULL);
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
	cr_expect(out != NULL && strstr(out, "warning: the PostgreSQL database "
	    "cannot be reached") != NULL, "%s", out);
	free(out);
	rc = harness_run("--check --strict", conf, &out);
	cr_expect_eq(rc, 1, "--check --strict: %d %s", rc, out);
	cr_expect(out != NULL && strstr(out, "the PostgreSQL database cannot "
	    "be reached (--strict)") != NULL, "%s", out);
	free(out);
	free(conf);

	cr_assert_eq(postgres_restart(&db), 0);
	cr_expect(harness_await_log(&h, "postgres store: the database answers"));
	for (i = 0; i < 600; i++) {
		c = call_one(h.addr, "/testkit/echo", "early", NULL);
		if (c.status != 503)
			break;
		cr_expect_eq(harness_count(&h, "/testkit/echo"), 0);
		call_sleep(50);
	}
	cr_expect_eq(c.status, 201, "after the database came: %d %s",
	    c.status, c.body_out);
	c = call_one(h.addr, "/testkit/echo", "early", NULL);
	cr_expect_str_eq(c.replayed, "true");
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", "early"), 1);
	cr_expect_eq(harness_stop(&h), 0);
	postgres_destroy(&db);
}

/* PostgreSQL frozen (SIGSTOP, every process): a request gets 503 once the
 * timeouts run out, never hangs, and runs nothing; after SIGCONT the same
 * idemfcgi serves again, and the key whose reserve went unanswered runs
 * once. */
Test(postgres_outage, frozen_database, .timeout = 120)
{
	char extra[900];
	postgres db;
	harness h;
	call c;
	int tries;

	cr_assert_eq(harness_outage_turn(), 0);
	cr_assert_eq(postgres_start(&db), 0);
	section_of(&db, NULL, NULL, "pool-size = 4\nconnect-timeout = 1s\n"
	    "read-timeout = 1s\nwrite-timeout = 1s\n", extra, sizeof(extra));
	cr_assert_eq(harness_start(&h, &(harness_opts){ .server = "threads = 4",
	    .idem = "store = postgres\ninflight-ttl = 3s", .rest = extra }), 0);
	c = call_one(h.addr, "/testkit/echo", "warm", NULL);
	cr_assert_eq(c.status, 201);
	cr_assert_eq(postgres_freeze(&db), 0);
	c = call_one(h.addr, "/testkit/echo", "frozen", NULL);
	cr_expect_eq(c.status, 503, "%d %s", c.status, c.body_out);
	cr_expect_str_eq(c.code, "IDEMPOTENCY_STORE_UNAVAILABLE");
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", "frozen"), 0);
	cr_assert_eq(postgres_thaw(&db), 0);
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
	c = call_one(h.addr, "/testkit/echo", "after", NULL);
	cr_expect_eq(c.status, 201);
	cr_expect_eq(harness_stop(&h), 0);
	postgres_destroy(&db);
}
