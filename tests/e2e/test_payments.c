/*
 * test_payments.c - handlers/payments against a provider that misbehaves
 * (tests/plugins/provider.c behind a real lighttpd): times out after
 * charging, answers 500 after charging, refuses before charging; and the
 * payments workers killed at random.  Every count is read from the
 * provider's own records (its log: one line per charge it made): each
 * client key is charged exactly once, every 2xx names that charge, and
 * the local payments match.  Without recovery points (recovery = false,
 * what a handler written without them does) the same faults charge twice.
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "calls.h"
#include "harness.h"
#include "mariadb.h"
#include "websrv.h"

#define PROVIDER_SO "@BUILDDIR@/tests/plugins/.libs/provider.so"
#define PAYMENTS_SO "@BUILDDIR@/.libs/payments.so"

static websrv prov;
static harness pay;
static char prov_log[128], secret[128];

/* Starts the provider with faults (KIND..., or ""), fail_first and rate
 * (percent), its timeouts answering after delay. */
static void
start_provider(const char *faults, int fail_first, int rate,
    const char *delay)
{
	char conf[512];
	int fd;

	snprintf(prov_log, sizeof(prov_log), "/tmp/idemfcgi-provider-%d-%s.log",
	    (int)getpid(), call_key("p"));
	fd = open(prov_log, O_WRONLY | O_CREAT | O_TRUNC, 0666);
	cr_assert_geq(fd, 0);
	close(fd);
	chmod(prov_log, 0666);
	snprintf(conf, sizeof(conf), "[provider]\nlog = %s\nfaults = %s\n"
	    "fail-first = %d\nfault-rate = %d\ndelay = %s\n", prov_log, faults,
	    fail_first, rate, delay);
	cr_assert_eq(websrv_start_plugins(&prov, WS_LIGHTTPD, conf,
	    PROVIDER_SO), 0);
}

/* Starts the payments service: on MySQL (transactional unless
 * two_phase) or in memory, with workers, and recovery points or not. */
static void
start_payments_as(int mysql, int workers, int recovery, int two_phase)
{
	char server[256], idem[256], rest[512];
	int fd;

	snprintf(secret, sizeof(secret), "/tmp/idemfcgi-pay-secret-%d",
	    (int)getpid());
	fd = open(secret, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "0123456789abcdef0123456789abcdef\n", 33), 33);
	close(fd);
	snprintf(server, sizeof(server), "    " PAYMENTS_SO "\nworkers = %d\n"
	    "threads = 8", workers);
	snprintf(idem, sizeof(idem), "key-secret-file = %s\ninflight-ttl = 3s",
	    secret);
	snprintf(rest, sizeof(rest), "%s[payments]\nprovider-url = "
	    "%s/charges\nprovider-timeout = 700ms\nrecovery = %s\n"
	    "transactional = %s\n", mysql ? "pool-size = 8\n" : "", prov.base,
	    recovery ? "true" : "false", two_phase ? "false" : "true");
	cr_assert_eq(harness_start(&pay, &(harness_opts){ .server = server,
	    .idem = idem, .rest = rest, .mysql = mysql }), 0);
}

static void
start_payments(int mysql, int workers, int recovery)
{
	start_payments_as(mysql, workers, recovery, 0);
}

static void
stop_all(void)
{
	harness_stop(&pay);
	websrv_stop(&prov);
	unlink(prov_log);
	unlink(secret);
}

/* The charges the provider made for account (its log), and the id of the
 * last of them into id (64 bytes; "" when none). */
static int
charges(const char *account, char *id)
{
	char *log = harness_slurp(prov_log), *line, *save = NULL;
	char cid[64], key[300], acc[80];
	long long amount;
	int n = 0;

	id[0] = '\0';
	cr_assert_not_null(log);
	for (line = strtok_r(log, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save))
		if (sscanf(line, "charge %63s %299s %79s %lld", cid, key, acc,
		    &amount) == 4 && strcmp(acc, account) == 0) {
			snprintf(id, 64, "%s", cid);
			n++;
		}
	free(log);
	return n;
}

/* The body of a payment of 500 to account. */
static const char *
body_of(const char *account)
{
	static __thread char buf[160];

	snprintf(buf, sizeof(buf), "{\"account\":\"%s\",\"amount\":500}",
	    account);
	return buf;
}

/* Retries key (paying account) until a final answer (201 or 422), as a
 * client does; *unknown counts the 503 answers on the way.  Returns the
 * final call (status -1: none within the tries). */
static call
until_final(const char *key, const char *account, int *unknown)
{
	call c;
	int i;

	*unknown = 0;
	for (i = 0; i < 200; i++) {
		c = call_one(pay.addr, "/payments", key, body_of(account));
		if (c.status == 201 || c.status == 422)
			return c;
		if (c.status == 503)
			(*unknown)++;
		call_sleep(30);
	}
	c.status = -1;
	return c;
}

/* The value of member name in the JSON text, into out. */
static void
member(const char *text, const char *name, char *out, size_t size)
{
	char pat[64];
	const char *p;
	size_t n = 0;

	snprintf(pat, sizeof(pat), "\"%s\":\"", name);
	out[0] = '\0';
	if ((p = strstr(text, pat)) == NULL)
		return;
	for (p += strlen(pat); *p != '\0' && *p != '"' && n + 1 < size; p++)
		out[n++] = *p;
	out[n] = '\0';
}

/* Every fault of the provider in turn on one key: timeout after charging,
 * 500 after charging, refused before charging; the client retries until
 * the answer is final.  One charge, named by the answer and by the
 * payment; a retry after that is a replay. */
static void
every_fault(int mysql)
{
	char account[64], charge[64], named[64], payment[64], path[128];
	call c;
	int unknown;

	start_provider("timeout-after-charge 500-after-charge "
	    "refuse-before-charge", 3, 0, "1500ms");
	start_payments(mysql, 1, 1);
	snprintf(account, sizeof(account), "%s", call_key("acct"));
	c = until_final(account, account, &unknown);
	cr_expect_eq(c.status, 201, "%s", c.body_out);
	cr_expect_geq(unknown, 3, "each fault left the outcome unknown");
	cr_expect_eq(charges(account, charge), 1, "charged once");
	member(c.body_out, "charge", named, sizeof(named));
	cr_expect_str_eq(named, charge, "the answer names the one charge");
	member(c.body_out, "payment", payment, sizeof(payment));
	snprintf(path, sizeof(path), "/payments/%s", payment);
	cr_expect_str_eq(c.location, path);
	c = call_one(pay.addr, "/payments", account, body_of(account));
	cr_expect_eq(c.status, 201);
	cr_expect_str_eq(c.replayed, "true");
	cr_expect_eq(charges(account, charge), 1);
	stop_all();
}

Test(payments, charged_once_through_every_fault_memory, .timeout = 120)
{
	every_fault(0);
}

Test(payments, charged_once_through_every_fault_mysql, .timeout = 120)
{
	every_fault(1);
}

/* A decline (a 4xx of the provider) is final: 422, stored, replayed,
 * nothing charged. */
Test(payments, decline_is_final, .timeout = 60)
{
	char account[64], charge[64];
	call c;

	start_provider("", 0, 0, "1s");
	start_payments(0, 1, 1);
	snprintf(account, sizeof(account), "declined-%s", call_key("d"));
	c = call_one(pay.addr, "/payments", account, body_of(account));
	cr_expect_eq(c.status, 422);
	cr_expect_str_eq(c.code, "PAYMENT_DECLINED");
	c = call_one(pay.addr, "/payments", account, body_of(account));
	cr_expect_eq(c.status, 422);
	cr_expect_str_eq(c.replayed, "true");
	cr_expect_eq(charges(account, charge), 0);
	stop_all();
}

/* What the framework's recovery points prevent: the same timeout after
 * charging, handled as a handler without them does (a fresh key on every
 * execution, no progress), charges the retry again. */
Test(payments, without_recovery_charges_twice, .timeout = 60)
{
	char account[64], charge[64], named[64];
	call c;
	int unknown;

	start_provider("timeout-after-charge", 1, 0, "1500ms");
	start_payments(0, 1, 0);
	snprintf(account, sizeof(account), "%s", call_key("naive"));
	c = call_one(pay.addr, "/payments", account, body_of(account));
	cr_expect_eq(c.status, 504, "%s", c.body_out);
	c = until_final(account, account, &unknown);
	cr_expect_eq(c.status, 201);
	cr_expect_eq(charges(account, charge), 2, "at least once: charged "
	    "twice");
	member(c.body_out, "charge", named, sizeof(named));
	cr_expect_str_eq(named, charge, "the answer names the second charge");
	stop_all();
}

/* --------------------------------------------------------------- chaos */

#define CHAOS_KEYS 48
#define MAX_KILLS 8

static volatile int running;

/* Kills a random payments worker every 200 ms, at most MAX_KILLS. */
static void *
killer(void *arg)
{
	unsigned seed = (unsigned)getpid();
	int *kills = arg;

	while (running && *kills < MAX_KILLS) {
		int pids[8], n;

		call_sleep(150);
		n = harness_workers(&pay, pids, 8);
		if (n > 0 && kill(pids[rand_r(&seed) % n], SIGKILL) == 0)
			(*kills)++;
	}
	return NULL;
}

typedef struct client {
	char account[64];
	call final;
	int unknown;
} client;

static void *
client_thread(void *arg)
{
	client *cl = arg;

	cl->final = until_final(cl->account, cl->account, &cl->unknown);
	return NULL;
}

/*
 * The MySQL store, three workers killed at random, the provider faulty on
 * a third of its requests: each client key retried until final.  In the
 * provider's records every key was charged exactly once; every 2xx names
 * that charge; the payments table has exactly that payment; no record of
 * these keys is left in flight or unknown.  On the transactional route the
 * payment commits with the answer; on the two-phase route (two_phase) it
 * is written before the answer is stored, and a worker killed between the
 * two leaves it for the retry to write again: under the same payment id
 * (a downstream key), so once all the same.
 */
static void
chaos(int two_phase)
{
	client cl[CHAOS_KEYS];
	pthread_t t[CHAOS_KEYS], k;
	char charge[64], named[64], sql[512], prefix[48], *out;
	int i, kills = 0, final = 0;
	mariadb m;

	cr_assert_eq(mariadb_from_env(&m), 0);
	start_provider("timeout-after-charge 500-after-charge "
	    "refuse-before-charge", 0, 33, "1s");
	start_payments_as(1, 3, 1, two_phase);
	running = 1;
	pthread_create(&k, NULL, killer, &kills);
	snprintf(prefix, sizeof(prefix), "%s", call_key("chaos"));
	for (i = 0; i < CHAOS_KEYS; i++) {
		snprintf(cl[i].account, sizeof(cl[i].account), "%s-%d", prefix,
		    i);
		pthread_create(&t[i], NULL, client_thread, &cl[i]);
	}
	for (i = 0; i < CHAOS_KEYS; i++)
		pthread_join(t[i], NULL);
	running = 0;
	pthread_join(k, NULL);
	for (i = 0; i < CHAOS_KEYS; i++) {
		cr_expect_eq(cl[i].final.status, 201, "key %d: %d %s", i,
		    cl[i].final.status, cl[i].final.body_out);
		if (cl[i].final.status != 201)
			continue;
		final++;
		cr_expect_eq(charges(cl[i].account, charge), 1, "key %d charged "
		    "%d times", i, charges(cl[i].account, charge));
		member(cl[i].final.body_out, "charge", named, sizeof(named));
		cr_expect_str_eq(named, charge, "key %d", i);
		snprintf(sql, sizeof(sql), "SELECT CONCAT(COUNT(*), ' ', "
		    "COALESCE(MAX(charge), '')) FROM payments WHERE account = '%s'",
		    cl[i].account);
		out = mariadb_sql(&m, sql);
		cr_assert_not_null(out);
		snprintf(sql, sizeof(sql), "1 %s\n", charge);
		cr_expect_str_eq(out, sql, "key %d: the payments table", i);
		free(out);
	}
	snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM idempotency_keys "
	    "WHERE state IN ('in_flight', 'unknown', 'paused') AND idem_key "
	    "LIKE '%s-%%'", prefix);
	out = mariadb_sql(&m, sql);
	cr_expect_str_eq(out, "0\n");
	free(out);
	cr_expect_eq(final, CHAOS_KEYS);
	cr_log_info("chaos (%s): %d keys, %d workers killed", two_phase ?
	    "two-phase" : "transactional", CHAOS_KEYS, kills);
	stop_all();
}

Test(payments, chaos_exactly_once, .timeout = 300)
{
	chaos(0);
}

Test(payments, chaos_exactly_once_two_phase, .timeout = 300)
{
	chaos(1);
}
