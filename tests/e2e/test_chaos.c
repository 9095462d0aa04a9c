/*
 * test_chaos.c - two idemfcgi instances of two workers each on one MariaDB;
 * 1,000 requests over 200 keys, every key sent five times at once, while
 * workers are killed with SIGKILL at random.  Afterwards:
 *   - every key gets its final answer on retry, the same for all its calls;
 *   - a key ran exactly once, unless a killed worker was running it (the
 *     masters name those keys when they release them);
 *   - nothing is left in flight.
 * Bounded: 10 rounds of 100 calls, at most 8 kills.
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
#include "mariadb.h"

#define KEYS 200
#define SENDS 5
#define ROUND_KEYS 20
#define MAX_KILLS 8

static harness node[2];
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
	char keys[KEYS][32], rest[1500], my[600], log[128];
	char *logs[2];
	pthread_t kt;
	int i, j, r, twice = 0, freed = 0;
	mariadb m;

	cr_assert_eq(mariadb_from_env(&m), 0);
	mariadb_conf(&m, my, sizeof(my));
	snprintf(rest, sizeof(rest), "[idempotency]\nstore = mysql\n"
	    "inflight-ttl = 60s\n%spool-size = 16\n", my);
	snprintf(log, sizeof(log), "/tmp/idemfcgi-chaos-%d.log", (int)getpid());
	unlink(log);
	for (i = 0; i < 2; i++)
		cr_assert_eq(harness_start_log(&node[i], "workers = 2\n"
		    "threads = 16", rest, log), 0);
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

	logs[0] = harness_slurp(node[0].stderr_log);
	logs[1] = harness_slurp(node[1].stderr_log);
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
	{
		char *out = mariadb_sql(&m, "SELECT COUNT(*) FROM idempotency_keys "
		    "WHERE state = 'in_flight'");
		cr_expect(out != NULL && atoi(out) == 0, "left in flight: %s",
		    out != NULL ? out : "?");
		free(out);
	}
	cr_expect_gt(kills, 0);
	for (i = 0; i < 2; i++)
		harness_stop(&node[i]);
	unlink(log);
}
