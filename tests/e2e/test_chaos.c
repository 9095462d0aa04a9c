/*
 * test_chaos.c - two idemfcgi instances of two workers each on one MariaDB
 * (test_chaos), or one PostgreSQL (test_chaos_postgres, CHAOS_POSTGRES:
 * the ledger's tests, issue 38).
 *
 * kill_workers_under_load (the testkit, two-phase):
 * 1,000 requests over 200 keys, every key sent five times at once, while
 * workers are killed with SIGKILL at random.  Afterwards:
 *   - every key gets its final answer on retry, the same for all its calls;
 *   - a key ran exactly once, unless a killed worker was running it (the
 *     masters name those keys when they release them);
 *   - nothing is left in flight.
 * Bounded: 10 rounds of 100 calls, at most 8 kills.
 *
 * ledger_exactly_once (the ledger's transactional deposits, issue 14):
 * 240 keys sent three times each, workers killed at random and at fixed
 * points between the deposit and the commit, one instance killed whole:
 * the balances hold every key's amount exactly once.
 * ledger_two_phase_is_at_least_once: the same faults on the two-phase path
 * deposit again, as docs/reliability.md says they do.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "calls.h"
#include "harness.h"
#include "idem_key.h"
#ifdef CHAOS_POSTGRES
#include "postgres.h"
#else
#include "mariadb.h"
#endif

#define KEYS 200
#define SENDS 5
#define ROUND_KEYS 20
#define MAX_KILLS 8

static harness node[2];

#ifdef CHAOS_POSTGRES
typedef postgres db_server;

/* The program's database server (its runner's), into *m. */
static void
db_env(db_server *m)
{
	cr_assert_eq(postgres_from_env(m), 0);
}

/* Runs sql on m; its rows (caller frees) or NULL. */
static char *
db_sql(const db_server *m, const char *sql)
{
	return postgres_sql(m, sql);
}

/* o, on m. */
static harness_opts
on_db(harness_opts o, const db_server *m)
{
	o.pg = m;
	return o;
}

/* The columns naming a record left in flight: its key, owner, request,
 * ms since reserved and since its lease. */
#define IN_FLIGHT_COLS "idem_key, owner, request_id, (extract(epoch FROM " \
	"clock_timestamp() - reserved_at) * 1000)::int8, (extract(epoch " \
	"FROM clock_timestamp() - lease_at) * 1000)::int8"
#else
typedef mariadb db_server;

static void
db_env(db_server *m)
{
	cr_assert_eq(mariadb_from_env(m), 0);
}

static char *
db_sql(const db_server *m, const char *sql)
{
	return mariadb_sql(m, sql);
}

static harness_opts
on_db(harness_opts o, const db_server *m)
{
	o.mysql = 1;
	o.db = m;
	return o;
}

#define IN_FLIGHT_COLS "idem_key, owner, request_id, " \
	"TIMESTAMPDIFF(MICROSECOND, reserved_at, UTC_TIMESTAMP(6)) DIV 1000, " \
	"TIMESTAMPDIFF(MICROSECOND, lease_at, UTC_TIMESTAMP(6)) DIV 1000"
#endif
static volatile int running;
static int kills;

/* Kills a random worker of a random node every 120 ms. */
static void *
killer(void *arg)
{
	unsigned seed = (unsigned)getpid();

	while (running && kills < MAX_KILLS) {
		int pids[8], n;
		harness *h = &node[rand_r(&seed) % 2];

		call_sleep(120);
		n = harness_workers(h, pids, 8);
		if (n > 0 && kill(pids[rand_r(&seed) % n], SIGKILL) == 0)
			kills++;
	}
	return NULL;
}

/*
 * Expects no record of this test's keys (those starting with prefix) left
 * in flight, and names each one found: its key, owner, request and age.
 * The tests of this program share one MariaDB and run at once, so a
 * count over the whole table would see the others' keys in flight.
 */
static void
expect_none_in_flight(const db_server *m, const char *prefix)
{
	char sql[512], *out;

	snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM idempotency_keys "
	    "WHERE state = 'in_flight' AND idem_key LIKE '%s%%'", prefix);
	out = db_sql(m, sql);
	cr_assert_not_null(out);
	if (atoi(out) != 0) {
		char *rows;
		snprintf(sql, sizeof(sql), "SELECT " IN_FLIGHT_COLS " FROM "
		    "idempotency_keys WHERE state = 'in_flight' AND idem_key "
		    "LIKE '%s%%'", prefix);
		rows = db_sql(m, sql);
		cr_expect_fail("left in flight: %s (key, owner, request, ms since "
		    "reserved, ms since its lease):\n%s", out, rows != NULL ?
		    rows : "?");
		free(rows);
	}
	free(out);
}

#ifndef CHAOS_POSTGRES
/* Whether a master's "released ... of dead worker ..." line of log names
 * the key hash (every request line names its key too). */
static int
released_by_master(const char *log, const char *hash)
{
	const char *p = log;

	while (p != NULL && (p = strstr(p, hash)) != NULL) {
		const char *bol = p, *eol = strchr(p, '\n');
		while (bol > log && bol[-1] != '\n')
			bol--;
		if (memmem(bol, (size_t)(p - bol), "of dead worker", 14) != NULL)
			return 1;
		p = eol;
	}
	return 0;
}

Test(chaos, kill_workers_under_load, .timeout = 240)
{
	static call c[KEYS][SENDS];
	char keys[KEYS][32], log[128];
	char *logs[2];
	pthread_t kt;
	int i, j, r, twice = 0, freed = 0;
	mariadb m;

	cr_assert_eq(mariadb_from_env(&m), 0);
	snprintf(log, sizeof(log), "/tmp/idemfcgi-chaos-%d.log", (int)getpid());
	harness_log_reset(log);
	for (i = 0; i < 2; i++)
		cr_assert_eq(harness_start(&node[i], &(harness_opts){
		    .server = "workers = 2\nthreads = 16", .mysql = 1, .db = &m,
		    .idem = "inflight-ttl = 60s", .rest = "pool-size = 16\n",
		    .testkit_log = log }), 0);
	for (i = 0; i < KEYS; i++)
		snprintf(keys[i], sizeof(keys[i]), "chaos-%d", i);

	running = 1;
	pthread_create(&kt, NULL, killer, NULL);
	for (r = 0; r < KEYS / ROUND_KEYS; r++) {
		call round[ROUND_KEYS * SENDS];
		for (i = 0; i < ROUND_KEYS; i++)
			for (j = 0; j < SENDS; j++)
				round[i * SENDS + j] = call_make(node[j % 2].addr,
				    "/testkit/sleep/50", keys[r * ROUND_KEYS + i],
				    NULL);
		call_all(round, ROUND_KEYS * SENDS);
		for (i = 0; i < ROUND_KEYS; i++)
			for (j = 0; j < SENDS; j++)
				c[r * ROUND_KEYS + i][j] = round[i * SENDS + j];
	}
	running = 0;
	pthread_join(kt, NULL);
	cr_log_info("%d workers killed", kills);

	/* every call that got no final answer is retried until it does */
	for (i = 0; i < KEYS; i++)
		for (j = 0; j < SENDS; j++) {
			int tries;
			for (tries = 0; tries < 500 && (c[i][j].status != 201);
			    tries++) {
				call_sleep(20);
				call_send(&c[i][j]);
			}
			cr_expect_eq(c[i][j].status, 201, "key %d: %d %s", i,
			    c[i][j].status, c[i][j].body_out);
		}

	logs[0] = harness_log(&node[0]);
	logs[1] = harness_log(&node[1]);
	for (i = 0; i < KEYS; i++) {
		unsigned char zero[32] = { 0 };
		char hash[17];
		size_t runs = harness_count_key(&node[0], "/testkit/sleep/50",
		    keys[i]);
		int released;

		idem_key_hash(zero, keys[i], strlen(keys[i]), hash);
		released = released_by_master(logs[0], hash) ||
		    released_by_master(logs[1], hash);
		freed += released;
		cr_expect_geq(runs, 1, "key %d never ran", i);
		twice += runs > 1;
		if (!released)
			cr_expect_eq(runs, 1, "key %d ran %zu times, and no killed "
			    "worker held it", i, runs);
		for (j = 1; j < SENDS; j++)
			cr_expect_str_eq(c[i][j].exec, c[i][0].exec,
			    "key %d got two answers", i);
	}
	free(logs[0]);
	free(logs[1]);
	cr_log_info("%d key(s) released from killed workers, %d of them had "
	    "run to their end and ran again", freed, twice);
	expect_none_in_flight(&m, "chaos-");
	cr_expect_gt(kills, 0);
	for (i = 0; i < 2; i++)
		harness_stop(&node[i]);
	harness_log_reset(log);
}

#endif

/* ------------------------------------------- the ledger, exactly once */

#define LKEYS 240
#define LSENDS 3
#define LROUND 30
#define ACCOUNTS 10

/* The amount key i deposits. */
static int
amount_of(int i)
{
	return i % 97 + 1;
}

/* The sum of the balances of this run's accounts, from the database. */
static long long
ledger_sum(const db_server *m, const char *run)
{
	char sql[256], *out;
	long long sum;

	snprintf(sql, sizeof(sql), "SELECT COALESCE(SUM(balance), 0) FROM "
	    "ledger_accounts WHERE id LIKE '%s-%%'", run);
	out = db_sql(m, sql);
	cr_assert_not_null(out);
	sum = atoll(out);
	free(out);
	return sum;
}

/* Starts the two nodes of the ledger test, transactional or not. */
static void
start_ledger_nodes(const db_server *m, int tx, const char *log)
{
	int i;

	setenv("IDEMFCGI_TEST_FAULTS", "1", 1);
	for (i = 0; i < 2; i++) {
		harness_opts o = on_db((harness_opts){
		    .server = "workers = 2\nthreads = 16",
		    .idem = "inflight-ttl = 60s", .rest = tx ?
		    "pool-size = 16\n[ledger]\ntransactional = true\n" :
		    "pool-size = 16\n[ledger]\ntransactional = false\n",
		    .testkit_log = log }, m);
		cr_assert_eq(harness_start(&node[i], &o), 0);
	}
}

/* The fault a send carries: every 8th key's first send is killed at a
 * point between the handler's writes and the commit of its answer. */
static const char *
fault_of(int key, int send)
{
	static const char *const points[] = {
		"X-Idemfcgi-Fault: after-handler",
		"X-Idemfcgi-Fault: after-record",
		"X-Idemfcgi-Fault: in-commit",
	};

	if (send != 0 || key % 8 != 0)
		return "";
	return points[(key / 8) % 3];
}

/* Round r of the ledger test: LROUND keys, each sent LSENDS times at once
 * over both nodes. */
typedef struct lround {
	call *calls;
	int n;
} lround;

static void *
send_round(void *arg)
{
	lround *lr = arg;

	call_all(lr->calls, lr->n);
	return NULL;
}

/*
 * Issue 14: on transactional routes the ledger is exactly once under
 * kill -9 at any instant: two instances of two workers, LKEYS deposits
 * sent LSENDS times each, workers killed at random and at fixed points
 * between the writes and the commit, one whole instance killed mid-round
 * and started again.  At the end every key has its 201, the same for all
 * its sends, and the balances hold each key's amount exactly once.
 */
Test(chaos, ledger_exactly_once, .timeout = 300)
{
	static call c[LKEYS][LSENDS];
	char run[32], path[LKEYS][96], log[128];
	const char *bodies[97];
	static char bodybuf[97][32];
	long long expected = 0, got;
	pthread_t kt, rt;
	int i, j, r;
	db_server m;

	db_env(&m);
	snprintf(run, sizeof(run), "%s", call_key("lx"));
	snprintf(log, sizeof(log), "/tmp/idemfcgi-lchaos-%d.log", (int)getpid());
	harness_log_reset(log);
	start_ledger_nodes(&m, 1, log);
	for (i = 0; i < 97; i++) {
		snprintf(bodybuf[i], sizeof(bodybuf[i]), "{\"amount\":%d}", i + 1);
		bodies[i] = bodybuf[i];
	}
	for (i = 0; i < LKEYS; i++) {
		snprintf(path[i], sizeof(path[i]), "/accounts/%s-%d/deposit", run,
		    i % ACCOUNTS);
		expected += amount_of(i);
	}
	kills = 0;
	running = 1;
	pthread_create(&kt, NULL, killer, NULL);
	for (r = 0; r < LKEYS / LROUND; r++) {
		call round[LROUND * LSENDS];
		lround lr = { round, LROUND * LSENDS };
		for (i = 0; i < LROUND; i++) {
			int k = r * LROUND + i;
			char key[48];
			snprintf(key, sizeof(key), "%s-k%d", run, k);
			for (j = 0; j < LSENDS; j++) {
				round[i * LSENDS + j] = call_make(node[j % 2].addr,
				    path[k], key, bodies[amount_of(k) - 1]);
				snprintf(round[i * LSENDS + j].extra,
				    sizeof(round[i * LSENDS + j].extra), "%s",
				    fault_of(k, j));
			}
		}
		pthread_create(&rt, NULL, send_round, &lr);
		if (r == LKEYS / LROUND / 2) {
			/* a whole instance dies mid-round */
			call_sleep(30);
			harness_kill(&node[1]);
		}
		pthread_join(rt, NULL);
		if (r == LKEYS / LROUND / 2) {
			harness_opts o = on_db((harness_opts){
			    .server = "workers = 2\nthreads = 16",
			    .idem = "inflight-ttl = 60s",
			    .rest = "pool-size = 16\n[ledger]\ntransactional = "
			    "true\n", .testkit_log = log }, &m);
			cr_assert_eq(harness_start(&node[1], &o), 0);
		}
		for (i = 0; i < LROUND; i++)
			for (j = 0; j < LSENDS; j++)
				c[r * LROUND + i][j] = round[i * LSENDS + j];
	}
	running = 0;
	pthread_join(kt, NULL);
	cr_log_info("ledger: %d workers killed at random, one instance killed",
	    kills);

	/* every send without its final answer is retried until it has one */
	for (i = 0; i < LKEYS; i++)
		for (j = 0; j < LSENDS; j++) {
			int tries;
			c[i][j].addr = node[j % 2].addr;
			c[i][j].extra[0] = '\0';
			for (tries = 0; tries < 500 && c[i][j].status != 201;
			    tries++) {
				if (c[i][j].status != -1)
					call_sleep(20);
				call_send(&c[i][j]);
			}
			cr_expect_eq(c[i][j].status, 201, "key %d: %d %s", i,
			    c[i][j].status, c[i][j].body_out);
		}
	got = ledger_sum(&m, run);
	cr_expect_eq(got, expected, "balances hold %lld, the keys deposited "
	    "%lld: a deposit ran %s", got, expected, got > expected ? "twice" :
	    "not at all");
	expect_none_in_flight(&m, run);
	for (i = 0; i < 2; i++)
		harness_stop(&node[i]);
	harness_log_reset(log);
}

/*
 * The same faults on the two-phase path (transactional = false): a worker
 * killed between the deposit and the commit of its answer is released,
 * and the retry deposits again (at least once, docs/reliability.md).  The
 * test above tells the difference.
 */
Test(chaos, ledger_two_phase_is_at_least_once, .timeout = 120)
{
	char run[32], path[96], key[48], log[128];
	long long expected = 0, got;
	int i, faulted = 0;
	db_server m;

	db_env(&m);
	snprintf(run, sizeof(run), "%s", call_key("l2"));
	snprintf(log, sizeof(log), "/tmp/idemfcgi-l2chaos-%d.log", (int)getpid());
	harness_log_reset(log);
	start_ledger_nodes(&m, 0, log);
	snprintf(path, sizeof(path), "/accounts/%s-0/deposit", run);
	for (i = 0; i < 12; i++) {
		call a;
		int tries;
		snprintf(key, sizeof(key), "%s-k%d", run, i);
		a = call_make(node[i % 2].addr, path, key, "{\"amount\":1}");
		if (i % 3 == 0) {
			snprintf(a.extra, sizeof(a.extra),
			    "X-Idemfcgi-Fault: after-handler");
			faulted++;
		}
		call_send(&a);
		a.extra[0] = '\0';
		for (tries = 0; tries < 500 && a.status != 201; tries++) {
			call_sleep(20);
			call_send(&a);
		}
		cr_expect_eq(a.status, 201, "key %d: %d %s", i, a.status,
		    a.body_out);
		expected += 1;
	}
	got = ledger_sum(&m, run);
	cr_log_info("two-phase ledger: %lld deposited for %lld keys (%d killed "
	    "after the deposit)", got, expected, faulted);
	cr_expect_eq(got, expected + faulted, "each key killed after its "
	    "deposit deposits again on retry");
	for (i = 0; i < 2; i++)
		harness_stop(&node[i]);
	harness_log_reset(log);
}
