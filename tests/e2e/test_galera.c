/*
 * test_galera.c - the private 3-node Galera cluster of the tests
 * (tests/lib/galera-ctl, started once for the program by galera_hooks.c),
 * and what the MySQL store relies on there, through libmysqlclient: rows
 * replicate, causal reads see them, an INSERT IGNORE of one key on two
 * nodes at the same instant reserves it once, a killed node rejoins.
 *
 * What the races show: the loser of a certification conflict gets 1213
 * (deadlock) unless the server re-runs its statement, and the server
 * re-runs (wsrep_retry_autocommit, default 1) only statements sent as
 * text: a prepared statement, as the store sends its own, gets 1213
 * whatever that setting says.
 */
#include "config.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include <mysql.h>
#include <criterion/criterion.h>

#include "calls.h"
#include "idem_config.h"
#include "idem_mysql.h"
#include "idem_store_tx.h"
#include "idem_store.h"
#include "idem_store_mysql.h"
#include "../unit/store_suite.h"
#include "galera.h"
#include "harness.h"
#include "mysql_open.h"
#include "store_req.h"

/* the keys raced by two nodes, and how long a race may take */
#define RACE_KEYS 300
#define RACE_SECONDS 20

static galera g;

static double
now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000.0 + t.tv_nsec / 1e6;
}

/* Waits up to ms milliseconds until every node is Synced in a cluster of
 * three; returns 0, or -1 on timeout. */
static int
await_all_synced(int ms)
{
	char state[64];
	int i, waited;

	for (waited = 0; waited <= ms; waited += 100) {
		for (i = 1; i <= 3; i++)
			if (galera_size(&g, i) != 3 || strcmp(galera_state(&g, i,
			    state, sizeof(state)), "Synced") != 0)
				break;
		if (i > 3)
			return 0;
		usleep(100 * 1000);
	}
	return -1;
}

/*
 * The program's cluster, and a turn on it: the tests that need all three
 * nodes share it, the one that kills a node has it alone.  The lock goes
 * with the test's process.  A test starts on a whole cluster, whatever
 * the one before it did to a node.
 */
static void
take_turn(int how)
{
	char path[300];
	int fd;

	cr_assert_eq(galera_from_env(&g), 0, "no cluster in the environment");
	snprintf(path, sizeof(path), "%s/turn.lock", g.dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	cr_assert(fd >= 0 && flock(fd, how) == 0);
	cr_assert_eq(await_all_synced(60000), 0, "the cluster is not whole");
}

static void
shared_turn(void)
{
	take_turn(LOCK_SH);
}

static void
exclusive_turn(void)
{
	take_turn(LOCK_EX);
}

/* A connection as idem to node i over TCP, or NULL (the reason in err). */
static MYSQL *
node_connect(int i, char *err, size_t size)
{
	char path[300], *pw, *nl;
	unsigned timeout;
	MYSQL *c;

	snprintf(path, sizeof(path), "%s/password", g.dir);
	if ((pw = harness_slurp(path)) == NULL) {
		snprintf(err, size, "cannot read the password file");
		return NULL;
	}
	if ((nl = strchr(pw, '\n')) != NULL)
		*nl = '\0';
	if ((c = mysql_init(NULL)) == NULL) {
		free(pw);
		snprintf(err, size, "mysql_init failed");
		return NULL;
	}
	timeout = 5;
	mysql_options(c, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
	timeout = 20;
	mysql_options(c, MYSQL_OPT_READ_TIMEOUT, &timeout);
	mysql_options(c, MYSQL_OPT_WRITE_TIMEOUT, &timeout);
	if (mysql_real_connect(c, "127.0.0.1", "idem", pw, "idem",
	    (unsigned)g.port[i - 1], NULL, 0) == NULL) {
		snprintf(err, size, "node %d: %s", i, mysql_error(c));
		mysql_close(c);
		c = NULL;
	}
	free(pw);
	return c;
}

static MYSQL *
must_connect(int i)
{
	char err[256];
	MYSQL *c = node_connect(i, err, sizeof(err));

	cr_assert_not_null(c, "%s", err);
	return c;
}

static void
must_query(MYSQL *c, const char *sql)
{
	cr_assert_eq(mysql_query(c, sql), 0, "%s: %u %s", sql, mysql_errno(c),
	    mysql_error(c));
}

/* The first column of the first row of sql, as a number (-1: no row). */
static long long
query_int(MYSQL *c, const char *sql)
{
	MYSQL_RES *res;
	MYSQL_ROW row;
	long long v = -1;

	must_query(c, sql);
	cr_assert_not_null(res = mysql_store_result(c), "%s: no result", sql);
	if ((row = mysql_fetch_row(res)) != NULL && row[0] != NULL)
		v = atoll(row[0]);
	mysql_free_result(res);
	return v;
}

/* A reservation as the store makes one (state in_flight), as text. */
static void
reserve_sql(char *buf, size_t size, const char *key, const char *owner)
{
	snprintf(buf, size, "INSERT IGNORE INTO idempotency_keys (scope_hash, "
	    "idem_key, fingerprint, state, owner, request_id, reserved_at, "
	    "lease_at, expires_at) VALUES (REPEAT(0x00, 32), '%s', "
	    "REPEAT(0x66, 32), 'in_flight', '%s', '%s', UTC_TIMESTAMP(6), "
	    "UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 1 HOUR)", key, owner,
	    owner);
}

Test(galera, three_nodes_synced, .init = shared_turn, .timeout = 30)
{
	char state[64];
	int i;

	for (i = 1; i <= 3; i++) {
		cr_expect_eq(galera_size(&g, i), 3, "node %d: size %d", i,
		    galera_size(&g, i));
		cr_expect_str_eq(galera_state(&g, i, state, sizeof(state)),
		    "Synced", "node %d", i);
	}
	/* the schema is on every node, the user too */
	for (i = 1; i <= 3; i++) {
		MYSQL *c = must_connect(i);

		cr_expect_eq(query_int(c, "SELECT MAX(version) FROM "
		    "idemfcgi_schema"), 4, "node %d", i);
		mysql_close(c);
	}
}

/* With wsrep_sync_wait = 1, a read on node 3 right after a commit on node
 * 1 sees it: every time. */
Test(galera, causal_read_sees_the_commit, .init = shared_turn,
    .timeout = 30)
{
	MYSQL *c1 = must_connect(1), *c3 = must_connect(3);
	char sql[512], key[64];
	int i;

	must_query(c3, "SET SESSION wsrep_sync_wait = 1");
	for (i = 0; i < 50; i++) {
		snprintf(key, sizeof(key), "causal-%d", i);
		reserve_sql(sql, sizeof(sql), key, "node1");
		must_query(c1, sql);
		snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM "
		    "idempotency_keys WHERE idem_key = '%s'", key);
		cr_expect_eq(query_int(c3, sql), 1, "%s not seen on node 3",
		    key);
	}
	mysql_close(c1);
	mysql_close(c3);
}

/* One side of a race: INSERT IGNORE of each key on one node, both sides
 * released together by the barrier. */
typedef struct racer {
	int node;
	const char *owner;
	int retry;                /* wsrep_retry_autocommit */
	int text;                 /* the statement as text, not prepared */
	const char *prefix;
	pthread_barrier_t *start;
	atomic_int *stop;
	char err[256];            /* why it could not run */
	int done;                 /* keys run */
	int rows[RACE_KEYS];      /* affected rows, or -1 on an error */
	unsigned errs[RACE_KEYS]; /* the error */
	int again[RACE_KEYS];     /* after a 1213: the same once more */
} racer;

static int
run(const racer *r, MYSQL *c, MYSQL_STMT *st, const char *text)
{
	return r->text ? mysql_query(c, text) : mysql_stmt_execute(st);
}

static my_ulonglong
affected(const racer *r, MYSQL *c, MYSQL_STMT *st)
{
	return r->text ? mysql_affected_rows(c) : mysql_stmt_affected_rows(st);
}

static void *
race(void *arg)
{
	static const char sql[] = "INSERT IGNORE INTO idempotency_keys "
	    "(scope_hash, idem_key, fingerprint, state, owner, request_id, "
	    "reserved_at, lease_at, expires_at) VALUES (?, ?, ?, 'in_flight', "
	    "?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), "
	    "UTC_TIMESTAMP(6) + INTERVAL 1 HOUR)";
	racer *r = arg;
	unsigned char scope[32], fp[32];
	char key[64], set[64], text[512];
	unsigned long key_len, owner_len = strlen(r->owner);
	unsigned long scope_len = sizeof(scope), fp_len = sizeof(fp);
	MYSQL_STMT *st = NULL;
	MYSQL_BIND b[5];
	MYSQL *c;
	double t0 = now_ms();
	int k, ready;

	memset(scope, 0, sizeof(scope));
	memset(fp, 'f', sizeof(fp));
	memset(b, 0, sizeof(b));
	b[0].buffer_type = MYSQL_TYPE_BLOB;
	b[0].buffer = scope;
	b[0].length = &scope_len;
	b[1].buffer_type = MYSQL_TYPE_STRING;
	b[1].buffer = key;
	b[1].length = &key_len;
	b[2].buffer_type = MYSQL_TYPE_BLOB;
	b[2].buffer = fp;
	b[2].length = &fp_len;
	b[3].buffer_type = MYSQL_TYPE_STRING;
	b[3].buffer = (void *)r->owner;
	b[3].length = &owner_len;
	b[4] = b[3];

	snprintf(set, sizeof(set), "SET SESSION wsrep_retry_autocommit = %d",
	    r->retry);
	c = node_connect(r->node, r->err, sizeof(r->err));
	ready = c != NULL && mysql_query(c, set) == 0 &&
	    (st = mysql_stmt_init(c)) != NULL &&
	    mysql_stmt_prepare(st, sql, sizeof(sql) - 1) == 0 &&
	    mysql_stmt_bind_param(st, b) == 0;
	if (!ready && c != NULL)
		snprintf(r->err, sizeof(r->err), "node %d: %s", r->node,
		    st != NULL ? mysql_stmt_error(st) : mysql_error(c));
	/* both sides go through every barrier, ready or not; both read stop
	 * right after one, where the other side's write is seen */
	for (k = 0; k < RACE_KEYS; k++) {
		pthread_barrier_wait(r->start);
		if (atomic_load(r->stop))
			break;
		if (!ready) {
			atomic_store(r->stop, 1);
			continue;
		}
		key_len = (unsigned long)snprintf(key, sizeof(key), "%s-%d",
		    r->prefix, k);
		r->again[k] = -2;
		if (r->text)
			reserve_sql(text, sizeof(text), key, r->owner);
		if (run(r, c, st, text) == 0) {
			r->rows[k] = (int)affected(r, c, st);
		} else {
			r->rows[k] = -1;
			r->errs[k] = r->text ? mysql_errno(c) :
			    mysql_stmt_errno(st);
			/* lost certification: the row is the winner's now */
			if (r->errs[k] == 1213)
				r->again[k] = run(r, c, st, text) == 0 ?
				    (int)affected(r, c, st) : -1;
		}
		r->done = k + 1;
		if (now_ms() - t0 > RACE_SECONDS * 1000.0)
			atomic_store(r->stop, 1);
	}
	if (st != NULL)
		mysql_stmt_close(st);
	if (c != NULL)
		mysql_close(c);
	return NULL;
}

/* Races RACE_KEYS keys between nodes 1 and 2; checks every key was
 * reserved once, by the side that saw 1 row, on every node. */
static void
race_keys(int retry, int text)
{
	static racer a, b;
	pthread_barrier_t start;
	atomic_int stop = 0;
	char prefix[32], sql[256];
	int k, ties = 0, conflicts = 0, dups = 0, wins[2] = { 0, 0 };
	double t0;
	pthread_t ta, tb;
	MYSQL *c3;
	MYSQL_RES *res;
	MYSQL_ROW row;

	snprintf(prefix, sizeof(prefix), "race%d%d", retry, text);
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	pthread_barrier_init(&start, NULL, 2);
	a = (racer){ .node = 1, .owner = "owner-a", .retry = retry,
	    .text = text, .prefix = prefix, .start = &start, .stop = &stop };
	b = (racer){ .node = 2, .owner = "owner-b", .retry = retry,
	    .text = text, .prefix = prefix, .start = &start, .stop = &stop };
	t0 = now_ms();
	cr_assert_eq(pthread_create(&ta, NULL, race, &a), 0);
	cr_assert_eq(pthread_create(&tb, NULL, race, &b), 0);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	pthread_barrier_destroy(&start);
	cr_assert_str_empty(a.err, "%s", a.err);
	cr_assert_str_empty(b.err, "%s", b.err);
	cr_assert_eq(a.done, RACE_KEYS, "ran %d of %d keys within %d s",
	    a.done, RACE_KEYS, RACE_SECONDS);
	cr_assert_eq(b.done, RACE_KEYS);

	for (k = 0; k < RACE_KEYS; k++) {
		racer *side[2] = { &a, &b };
		int s, won = 0;

		for (s = 0; s < 2; s++) {
			racer *r = side[s];

			if (r->rows[k] == 1) {
				won++;
				wins[s]++;
			} else if (r->rows[k] == 0) {
				dups++;
			} else {
				/* only a lost certification, and only when
				 * the server does not retry it */
				cr_expect_eq(r->errs[k], 1213, "key %d: "
				    "error %u", k, r->errs[k]);
				cr_expect(retry == 0 || !text, "key %d: 1213 "
				    "with wsrep_retry_autocommit = %d", k,
				    retry);
				cr_expect_eq(r->again[k], 0, "key %d: after "
				    "1213, again: %d rows", k, r->again[k]);
				conflicts++;
			}
		}
		cr_expect_eq(won, 1, "key %d reserved %d times", k, won);
		if (won != 1)
			ties++;
	}
	fprintf(stderr, "galera race, %s, wsrep_retry_autocommit = %d: %d "
	    "keys in %.0f ms; won on node 1: %d, node 2: %d; losers: %d saw 0 "
	    "rows, %d got 1213\n", text ? "text" : "prepared", retry,
	    RACE_KEYS, now_ms() - t0, wins[0], wins[1], dups, conflicts);

	/* every node has each key once, the winner's */
	for (k = 1; k <= 3; k++) {
		int n = 0, i;

		c3 = must_connect(k);
		must_query(c3, "SET SESSION wsrep_sync_wait = 1");
		snprintf(sql, sizeof(sql), "SELECT idem_key, owner FROM "
		    "idempotency_keys WHERE idem_key LIKE '%s-%%'", prefix);
		must_query(c3, sql);
		cr_assert_not_null(res = mysql_store_result(c3));
		while ((row = mysql_fetch_row(res)) != NULL) {
			const char *dash = strrchr(row[0], '-');

			i = dash != NULL ? atoi(dash + 1) : -1;
			cr_assert(i >= 0 && i < RACE_KEYS, "%s", row[0]);
			cr_expect_str_eq(row[1], a.rows[i] == 1 ? a.owner :
			    b.owner, "node %d, key %d", k, i);
			n++;
		}
		mysql_free_result(res);
		cr_expect_eq(n, RACE_KEYS, "node %d has %d rows", k, n);
		mysql_close(c3);
	}
	cr_expect_eq(ties, 0);
	/* nearly every race is a conflict: some lose certification */
	if (retry == 0)
		cr_expect_gt(conflicts, 0, "no 1213 in %d races", RACE_KEYS);
}

/* The server retries a text autocommit INSERT IGNORE that lost
 * certification (wsrep_retry_autocommit = 1, the default): 0 rows. */
Test(galera, insert_ignore_race_text_retried, .init = shared_turn,
    .timeout = 50)
{
	race_keys(1, 1);
}

/* Not retried (wsrep_retry_autocommit = 0): 1213 for the loser. */
Test(galera, insert_ignore_race_text_not_retried, .init = shared_turn,
    .timeout = 50)
{
	race_keys(0, 1);
}

/* Not a prepared one (COM_STMT_EXECUTE, as the store runs it): the loser
 * gets 1213 whatever wsrep_retry_autocommit says, or 0 rows when it came
 * second.  The same statement again says 0 rows. */
Test(galera, insert_ignore_race_prepared, .init = shared_turn,
    .timeout = 50)
{
	race_keys(1, 0);
}

/* wsrep_retry_autocommit = 0: the same. */
Test(galera, insert_ignore_race_prepared_not_retried, .init = shared_turn,
    .timeout = 50)
{
	race_keys(0, 0);
}

/* A node killed with SIGKILL leaves the cluster, misses a write, comes
 * back with a full state transfer and has it. */
Test(galera, killed_node_rejoins, .init = exclusive_turn, .timeout = 50)
{
	char sql[512];
	double t0;
	MYSQL *c;

	cr_assert_eq(galera_size(&g, 1), 3);
	t0 = now_ms();
	cr_assert_eq(galera_kill_node(&g, 3), 0);
	cr_assert_eq(galera_await_size(&g, 1, 2, 15000), 0,
	    "node 3 still in the cluster after 15 s");
	fprintf(stderr, "galera: node 3 killed, size 2 after %.0f ms\n",
	    now_ms() - t0);
	cr_expect_eq(galera_size(&g, 3), -1);

	c = must_connect(1);
	reserve_sql(sql, sizeof(sql), "while-3-was-down", "node1");
	must_query(c, sql);
	mysql_close(c);

	t0 = now_ms();
	cr_assert_eq(galera_start_node(&g, 3), 0);
	fprintf(stderr, "galera: node 3 rejoined, Synced after %.0f ms\n",
	    now_ms() - t0);
	cr_expect_eq(galera_size(&g, 1), 3);
	cr_expect_eq(galera_size(&g, 3), 3);
	c = must_connect(3);
	cr_expect_eq(query_int(c, "SELECT COUNT(*) FROM idempotency_keys "
	    "WHERE idem_key = 'while-3-was-down'"), 1);
	mysql_close(c);
}

/* ------------------------------------- idemfcgi on the cluster (15) */

#define SCALE_KEYS 45           /* keys, each sent to all three at once */
#define SCALE_ROUND 9           /* keys sent together */

/* Sets wsrep_retry_autocommit on every node (a global: exclusive turn). */
static void
set_retry_autocommit(int n)
{
	char sql[80];
	int i;

	snprintf(sql, sizeof(sql), "SET GLOBAL wsrep_retry_autocommit = %d",
	    n);
	for (i = 1; i <= 3; i++)
		free(galera_sql(&g, i, sql));
}

/* Starts idemfcgi h on node i first (the others its fallbacks), counting
 * executions into the shared testkit log. */
/*
 * Writes into buf (size bytes) the [mysql] section of a store on the
 * cluster: its failover list is the nodes named by order ("312": node 3,
 * then 1, then 2), pool connections, then the lines of more (NULL: none).
 */
static void
mysql_section(char *buf, size_t size, const char *order, int pool,
    const char *more)
{
	size_t len = (size_t)snprintf(buf, size, "[mysql]\nhost =");

	for (; *order != '\0' && len < size; order++)
		len += (size_t)snprintf(buf + len, size - len, " 127.0.0.1:%d",
		    g.port[*order - '1']);
	if (len < size)
		snprintf(buf + len, size - len, "\nuser = idem\npassword-file = "
		    "%s/password\ndatabase = idem\npool-size = %d\n%s", g.dir,
		    pool, more != NULL ? more : "");
}

/* Starts idemfcgi h on node i, the other two nodes as its failover list,
 * with causal-reads as causal and the [mysql] lines extra (or NULL);
 * executions go to the shared testkit log. */
static void
start_on_node(harness *h, int i, const char *log, int causal,
    const char *extra)
{
	char rest[1024], more[192];
	/* node i first, then the two others in ring order (i is 1, 2 or 3) */
	const char order[4] = { (char)('0' + i), (char)('0' + i % 3 + 1),
	    (char)('0' + (i + 1) % 3 + 1), '\0' };

	cr_assert(i >= 1 && i <= 3);
	snprintf(more, sizeof(more), "connect-timeout = 2s\nread-timeout = "
	    "10s\nwrite-timeout = 10s\ncausal-reads = %s\n%s", causal ? "true" :
	    "false", extra != NULL ? extra : "");
	mysql_section(rest, sizeof(rest), order, 8, more);
	cr_assert_eq(harness_start(h, &(harness_opts){ .server = "threads = 8",
	    .idem = "store = mysql\ninflight-ttl = 30s", .rest = rest,
	    .testkit_log = log }), 0);
}

/*
 * Three idemfcgi instances, each on its own Galera node; every key sent to
 * all three at the same instant.  Each key runs exactly once (two-phase:
 * one line in the shared testkit log; transactional: one row of
 * testkit_effects, and every 201 carries the same execution), and each
 * duplicate gets the replay or 409 IN_FLIGHT: never CONFLICT, never 503.
 * The transactional run has causal-reads on.
 */
static void
scale_race(const char *path, int tx, int retry_autocommit)
{
	static call c[SCALE_KEYS][3];
	harness h[3];
	char log[128], keys[SCALE_KEYS][48], sql[256];
	int i, j, r, replays = 0, in_flight = 0;

	set_retry_autocommit(retry_autocommit);
	snprintf(log, sizeof(log), "/tmp/idemfcgi-galera-%d.log", (int)getpid());
	harness_log_reset(log);
	for (i = 0; i < 3; i++)
		start_on_node(&h[i], i + 1, log, tx, NULL);
	for (i = 0; i < SCALE_KEYS; i++)
		snprintf(keys[i], sizeof(keys[i]), "%s", call_key(tx ? "gtx" :
		    "g2p"));
	for (i = 0; i < SCALE_KEYS; i++)
		snprintf(keys[i] + strlen(keys[i]), sizeof(keys[i]) -
		    strlen(keys[i]), "-%d", i);
	for (r = 0; r < SCALE_KEYS / SCALE_ROUND; r++) {
		call round[SCALE_ROUND * 3];
		for (i = 0; i < SCALE_ROUND; i++)
			for (j = 0; j < 3; j++)
				round[i * 3 + j] = call_make(h[j].addr, path,
				    keys[r * SCALE_ROUND + i], NULL);
		call_all(round, SCALE_ROUND * 3);
		for (i = 0; i < SCALE_ROUND; i++)
			for (j = 0; j < 3; j++)
				c[r * SCALE_ROUND + i][j] = round[i * 3 + j];
	}
	for (i = 0; i < SCALE_KEYS; i++) {
		const char *exec = NULL;
		for (j = 0; j < 3; j++) {
			call *x = &c[i][j];
			int dup = x->status == 409 &&
			    strcmp(x->code, "IDEMPOTENCY_IN_FLIGHT") == 0;
			cr_expect(x->status == 201 || dup, "key %d on node %d: %d "
			    "%s %s", i, j + 1, x->status, x->code, x->body_out);
			in_flight += dup;
			replays += x->status == 201 &&
			    strcmp(x->replayed, "true") == 0;
			if (x->status != 201)
				continue;
			if (exec == NULL)
				exec = x->exec;
			cr_expect_str_eq(x->exec, exec, "key %d: two executions "
			    "answered", i);
		}
		if (tx) {
			char *rows;
			snprintf(sql, sizeof(sql), "SET SESSION wsrep_sync_wait = 1; "
			    "SELECT COUNT(*) FROM testkit_effects WHERE idem_key = "
			    "'%s'", keys[i]);
			rows = galera_sql(&g, 1 + i % 3, sql);
			cr_expect(rows != NULL && atoi(rows) == 1, "key %d: %s "
			    "effects", i, rows != NULL ? rows : "no");
			free(rows);
		} else {
			cr_expect_eq(harness_count_key(&h[0], path, keys[i]), 1,
			    "key %d ran %zu times", i, harness_count_key(&h[0],
			    path, keys[i]));
		}
	}
	cr_log_info("%s: %d replays, %d in flight", path, replays, in_flight);
	for (i = 0; i < 3; i++)
		cr_expect_eq(harness_stop(&h[i]), 0);
	harness_log_reset(log);
	set_retry_autocommit(1);
}

Test(scale, three_instances_three_nodes_once, .init = exclusive_turn,
    .timeout = 120)
{
	scale_race("/testkit/sleep/20", 0, 1);
}

Test(scale, three_instances_not_retried, .init = exclusive_turn,
    .timeout = 120)
{
	scale_race("/testkit/sleep/20", 0, 0);
}

Test(scale, transactional_three_nodes_once, .init = exclusive_turn,
    .timeout = 120)
{
	scale_race("/testkit/tx/201", 1, 0);
}

#define G7_KEYS 24            /* keys, each sent with two bodies */
#define G7_ROUND 6             /* keys sent together */

/*
 * Window G7 of reliability.md: a transactional route that calls outside
 * (testkit's tx route, declared calls-outside in the config file: its
 * line in the testkit log is its call to another service, made after its
 * writes, while its transaction is open) on two instances, each on its
 * own node.  Each key is sent to both at the same instant with two
 * bodies.  Its reservation is certified in a commit of its own before
 * either handler runs, so exactly one runs (one line in the log, one row
 * of testkit_effects); the other request gets 409 IDEMPOTENCY_CONFLICT
 * and calls nothing.  In one transaction both handlers ran, and the
 * loser's call stayed though its writes rolled back.
 */
Test(scale, calls_outside_other_body_runs_once, .init = exclusive_turn,
    .timeout = 120)
{
	static const char *const body[2] = { "{\"amount\": 1}",
	    "{\"amount\": 2}" };
	static const char path[] = "/testkit/tx/201?ms=300";
	harness h[2];
	char log[128], keys[G7_KEYS][48], sql[256];
	int i, j, r, twice = 0, conflicts = 0;

	snprintf(log, sizeof(log), "/tmp/idemfcgi-galera-g7-%d.log",
	    (int)getpid());
	harness_log_reset(log);
	for (i = 0; i < 2; i++)
		start_on_node(&h[i], i + 1, log, 1, "[route POST "
		    "/testkit/tx/{code}]\ncalls-outside = true\n");
	for (i = 0; i < G7_KEYS; i++)
		snprintf(keys[i], sizeof(keys[i]), "%s-%d", call_key("g7"), i);
	for (r = 0; r < G7_KEYS / G7_ROUND; r++) {
		call round[G7_ROUND * 2];
		for (i = 0; i < G7_ROUND; i++)
			for (j = 0; j < 2; j++)
				round[i * 2 + j] = call_make(h[j].addr, path,
				    keys[r * G7_ROUND + i], body[j]);
		call_all(round, G7_ROUND * 2);
		for (i = 0; i < G7_ROUND; i++) {
			const char *key = keys[r * G7_ROUND + i];
			size_t runs = harness_count_key(&h[0], "/testkit/tx/201",
			    key);
			int ok = 0, conflict = 0;
			char *rows;
			for (j = 0; j < 2; j++) {
				call *x = &round[i * 2 + j];
				ok += x->status == 201;
				conflict += x->status == 409 && strcmp(x->code,
				    "IDEMPOTENCY_CONFLICT") == 0;
				cr_expect(x->status == 201 || x->status == 409,
				    "key %s on node %d: %d %s %s", key, j + 1,
				    x->status, x->code, x->body_out);
			}
			cr_expect(ok == 1 && conflict == 1, "key %s: %d created, "
			    "%d conflicts", key, ok, conflict);
			cr_expect_eq(runs, 1, "key %s: its handler called outside "
			    "%zu times", key, runs);
			twice += runs > 1;
			conflicts += conflict;
			snprintf(sql, sizeof(sql), "SET SESSION wsrep_sync_wait = 1; "
			    "SELECT COUNT(*) FROM testkit_effects WHERE idem_key = "
			    "'%.47s'", key);
			rows = galera_sql(&g, 1, sql);
			cr_expect(rows != NULL && atoi(rows) == 1, "key %s: %s "
			    "effects", key, rows != NULL ? rows : "no");
			free(rows);
		}
	}
	cr_log_info("G7: %d of %d keys called outside twice; %d conflicts",
	    twice, G7_KEYS, conflicts);
	for (i = 0; i < 2; i++)
		cr_expect_eq(harness_stop(&h[i]), 0);
	harness_log_reset(log);
}

/* A stream of new keys, each sent at once through idemfcgi b (on node 3
 * first) and a (on node 1); arg is a failover_run. */
typedef struct failover_run {
	harness *a, *b;
	char keys[200][48];
	call c[200][2];
	int n;
	atomic_int stop;
} failover_run;

static void *
failover_stream(void *arg)
{
	failover_run *f = arg;

	while (!atomic_load(&f->stop) && f->n < 200) {
		int i = f->n;
		snprintf(f->keys[i], sizeof(f->keys[i]), "%s-%d",
		    call_key("gfo"), i);
		f->c[i][0] = call_make(f->b->addr, "/testkit/sleep/10",
		    f->keys[i], NULL);
		f->c[i][1] = call_make(f->a->addr, "/testkit/sleep/10",
		    f->keys[i], NULL);
		call_all(f->c[i], 2);
		f->n = i + 1;
		call_sleep(40);
	}
	return NULL;
}

/*
 * The answers of a failover run: each 201, 503 (the store unavailable,
 * within the timeouts) or 409 IN_FLIGHT, never CONFLICT; every key gets
 * its answer on a retry, ran once (the testkit log a shares with b), and
 * both its answers are of that one execution.
 */
static void
check_failover_run(failover_run *f, harness *a)
{
	int i, j;

	cr_assert_gt(f->n, 10, "too few keys sent: %d", f->n);
	for (i = 0; i < f->n; i++)
		for (j = 0; j < 2; j++) {
			call *x = &f->c[i][j];
			int tries;
			cr_expect(x->status == 201 || x->status == 503 ||
			    (x->status == 409 && strcmp(x->code,
			    "IDEMPOTENCY_IN_FLIGHT") == 0), "key %d via %s: %d %s",
			    i, j == 0 ? "b" : "a", x->status, x->code);
			cr_expect(x->status != 409 || strcmp(x->code,
			    "IDEMPOTENCY_CONFLICT") != 0);
			for (tries = 0; tries < 300 && x->status != 201; tries++) {
				call_sleep(20);
				call_send(x);
			}
			cr_expect_eq(x->status, 201, "key %d never answered: %d "
			    "%s", i, x->status, x->code);
		}
	for (i = 0; i < f->n; i++) {
		size_t runs = harness_count_key(a, "/testkit/sleep/10",
		    f->keys[i]);
		cr_expect_eq(runs, 1, "key %d ran %zu times", i, runs);
		cr_expect_str_eq(f->c[i][0].exec, f->c[i][1].exec,
		    "key %d: two answers", i);
	}
}

/* Starts f's stream of keys through b and a (in thread *t), and lets it
 * run half a second. */
static void
stream_begin(failover_run *f, harness *a, harness *b, pthread_t *t)
{
	memset(f, 0, sizeof(*f));
	f->a = a;
	f->b = b;
	pthread_create(t, NULL, failover_stream, f);
	call_sleep(500);
}

/* Stops f's stream (thread t) and checks its answers (check_failover_run,
 * the executions counted in a's log). */
static void
stream_end(failover_run *f, pthread_t t, harness *a)
{
	atomic_store(&f->stop, 1);
	pthread_join(t, NULL);
	check_failover_run(f, a);
}

/* Whether h serves a new key and has logged a switch to host n of its
 * list ("host N of the list"). */
static int
serves_on_host(harness *h, int n)
{
	static atomic_int seq;
	char want[32], key[64];
	call x;

	/* a new key every time: a replay may come from the replay cache,
	 * which uses no connection, and the pool fails back only as its
	 * connections are used */
	snprintf(key, sizeof(key), "gfo-on-%d-%d", (int)getpid(),
	    atomic_fetch_add(&seq, 1));
	x = call_one(h->addr, "/testkit/sleep/10", key, NULL);

	cr_expect_eq(x.status, 201, "%d %s", x.status, x.code);
	snprintf(want, sizeof(want), "host %d of the list", n);
	return harness_logged(h, want);
}

/*
 * A Galera node killed under load: the idemfcgi on it fails over to the
 * next host of its list and serves again without a restart; meanwhile its
 * requests get 503 (the store unavailable, within the timeouts) or their
 * answer, a duplicate on another node 409 or the replay; no key runs
 * twice, and every key gets its answer on a retry.  Then the node rejoins.
 */
Test(scale, node_killed_under_load, .init = exclusive_turn, .timeout = 120)
{
	static failover_run f;
	harness a, b;
	char log[128];
	pthread_t t;

	snprintf(log, sizeof(log), "/tmp/idemfcgi-galera-fo-%d.log",
	    (int)getpid());
	harness_log_reset(log);
	start_on_node(&a, 1, log, 0, NULL);
	start_on_node(&b, 3, log, 0, NULL);
	stream_begin(&f, &a, &b, &t);
	cr_assert_eq(galera_kill_node(&g, 3), 0);
	cr_assert_eq(galera_await_size(&g, 1, 2, 15000), 0);
	call_sleep(1000);
	stream_end(&f, t, &a);
	/* b serves through another node, without a restart */
	cr_expect(serves_on_host(&b, 2) || serves_on_host(&b, 3),
	    "no failover logged: %s", harness_log(&b));
	cr_assert_eq(galera_start_node(&g, 3), 0);
	cr_expect_eq(galera_size(&g, 1), 3);
	cr_expect_eq(harness_stop(&a), 0);
	cr_expect_eq(harness_stop(&b), 0);
	harness_log_reset(log);
}

/* How many connections user idem has open on node i. */
static int
idem_connections(int i)
{
	char *n = galera_sql(&g, i, "SELECT COUNT(*) FROM "
	    "information_schema.PROCESSLIST WHERE USER = 'idem'");
	int count = n != NULL ? atoi(n) : -1;

	free(n);
	return count;
}

/*
 * A node that leaves the primary component while it serves (cut off from
 * the others: gmcast.isolate) stays up but answers 1047 to every
 * statement.  The idemfcgi on it counts that as a lost connection and
 * opens again on the next host, which is synced; no key runs twice, the
 * gap gets 503 or answers.  When the node is back and synced, the pool
 * fails back to it (one connection per [mysql] failback).
 */
Test(scale, node_leaves_primary_component, .init = exclusive_turn,
    .timeout = 120)
{
	static failover_run f;
	harness a, b;
	char log[128], state[64], *text;
	pthread_t t;
	int i;

	snprintf(log, sizeof(log), "/tmp/idemfcgi-galera-np-%d.log",
	    (int)getpid());
	harness_log_reset(log);
	start_on_node(&a, 1, log, 0, "failback = 1s\n");
	start_on_node(&b, 3, log, 0, NULL);
	stream_begin(&f, &a, &b, &t);
	free(galera_sql(&g, 1, "SET GLOBAL wsrep_provider_options = "
	    "'gmcast.isolate=1'"));
	/* the others suspect it after evs.suspect_timeout (5 s) */
	for (i = 0; i < 150 && strcmp(galera_state(&g, 1, state,
	    sizeof(state)), "Synced") == 0; i++)
		call_sleep(100);
	cr_expect_neq(i, 150, "node 1 stayed in the primary component");
	call_sleep(1500);
	stream_end(&f, t, &a);
	cr_expect(serves_on_host(&a, 2), "a did not fail over: %s",
	    harness_log(&a));
	cr_expect_eq(idem_connections(1), 0, "connections left on node 1");

	free(galera_sql(&g, 1, "SET GLOBAL wsrep_provider_options = "
	    "'gmcast.isolate=0'"));
	cr_assert_eq(await_all_synced(60000), 0, "node 1 did not come back");
	/* fail-back: new keys through a until a connection is on node 1 */
	for (i = 0; i < 100 && idem_connections(1) < 1; i++) {
		cr_expect(serves_on_host(&a, 2));
		call_sleep(200);
	}
	cr_expect_gt(idem_connections(1), 0, "a never failed back to node 1");
	text = harness_log(&a);
	/* logged at the start, and again on the way back */
	cr_expect_geq(harness_occurrences(text != NULL ? text : "", "host 1 of "
	    "the list"), 2, "%s", text);
	free(text);
	cr_expect_eq(harness_stop(&a), 0);
	cr_expect_eq(harness_stop(&b), 0);
	harness_log_reset(log);
}

/* ------------------------------------------- the store suite (15) */

/* The store suite (tests/unit/store_suite.c) runs against the cluster: a
 * store whose connections open on node 1, with nodes 2 and 3 as its
 * failover list, taking a shared turn (no node is killed under it). */
idem_store *
suite_open(void)
{
	char text[1024] = "[idempotency]\nstore = mysql\n";
	idem_config *cfg;
	idem_store *s = NULL;
	size_t len = strlen(text);

	shared_turn();
	mysql_section(text + len, sizeof(text) - len, "123", 64,
	    "connect-timeout = 2s\nread-timeout = 10s\nwrite-timeout = 10s\n");
	cr_assert_eq(idem_config_load_string(text, "galera.conf", &cfg),
	    IDEM_OK);
	cr_assert_eq(test_mysql_store(cfg, 64, &s), IDEM_OK);
	idem_config_free(cfg);
	return s;
}

/*
 * The idemfcgi on node 1 killed whole (SIGKILL to master and workers)
 * while a handler runs: its reservation stays in flight, replicated to
 * every node.  A retry through the idemfcgi on node 2 gets 409 until
 * inflight-ttl has passed since the last renewal (measured by node 2's
 * clock against the lease node 1 wrote: one machine here), then takes the
 * key over and runs it, once.
 */
Test(scale, killed_instance_taken_over_once, .init = exclusive_turn,
    .timeout = 60)
{
	harness a, b;
	char log[128], rest[1024];
	const char *key = call_key("gkill");
	pthread_t t;
	call first, retry;
	int i, in_flight = 0;

	snprintf(log, sizeof(log), "/tmp/idemfcgi-galera-kill-%d.log",
	    (int)getpid());
	harness_log_reset(log);
	for (i = 0; i < 2; i++) {
		mysql_section(rest, sizeof(rest), i == 0 ? "1" : "2", 4, NULL);
		cr_assert_eq(harness_start(i == 0 ? &a : &b, &(harness_opts){
		    .idem = "store = mysql\ninflight-ttl = 2s", .rest = rest,
		    .testkit_log = log }), 0);
	}
	first = call_make(a.addr, "/testkit/sleep/3000", key, NULL);
	pthread_create(&t, NULL, call_thread, &first);
	cr_assert(harness_await_started(&a, "/testkit/sleep/3000", key, 1));
	harness_kill(&a);

	pthread_join(t, NULL);
	cr_expect_neq(first.status, 201);
	/* the retry: 409 while the lease is live, then the takeover */
	for (i = 0; i < 200; i++) {
		retry = call_one(b.addr, "/testkit/sleep/3000", key, NULL);
		if (retry.status != 409)
			break;
		in_flight++;
		call_sleep(50);
	}
	cr_expect_eq(retry.status, 201, "%d %s", retry.status, retry.code);
	cr_expect_gt(in_flight, 0, "the first reservation was not seen");
	cr_expect_eq(harness_count_key(&b, "/testkit/sleep/3000", key), 1);
	cr_expect(harness_logged(&b, "took over"), "%s", harness_log(&b));
	/* and its answer is what every later retry gets */
	retry = call_one(b.addr, "/testkit/sleep/3000", key, NULL);
	cr_expect_eq(retry.status, 201);
	cr_expect_str_eq(retry.replayed, "true");
	cr_expect_eq(harness_stop(&b), 0);
	harness_stop(&a);
	harness_log_reset(log);
}

/* Expects log to hold "127.0.0.1:PORT" followed by what. */
static void
expect_port_in(const char *log, int port, const char *what)
{
	char want[160];

	snprintf(want, sizeof(want), "127.0.0.1:%d%s", port, what);
	cr_expect_not_null(strstr(log, want), "no \"%s\" in: %s", want, log);
}

/*
 * A server that accepts the connection but cannot prepare the store's
 * statements (here node 1, where user idem may only read: the REVOKE runs
 * with wsrep_on off, so the other nodes keep their grants) is passed over
 * like one that refuses it: the pool opens on the next host and serves.
 */
Test(scale, unprepared_node_passed_over, .init = exclusive_turn,
    .timeout = 60)
{
	char text[1024], *log;
	idem_config *cfg;
	idem_store *s = NULL;
	idem_store_key k = { .key_len = 0 };
	idem_reserve_result r;
	unsigned char fp[32] = { 1 };
	harness_capture cap;

	snprintf(text, sizeof(text), "[idempotency]\nstore = mysql\n");
	mysql_section(text + strlen(text), sizeof(text) - strlen(text), "12",
	    1, NULL);
	cr_assert_eq(idem_config_load_string(text, "galera.conf", &cfg),
	    IDEM_OK);
	cr_assert_eq(harness_capture_level(&cap, IDEM_LOG_INFO), 0);
	/* from here to the GRANT nothing may end the test */
	free(galera_sql(&g, 1, "SET SESSION wsrep_on = OFF; REVOKE INSERT, "
	    "UPDATE, DELETE ON idem.* FROM 'idem'@'127.0.0.1'"));
	cr_expect_eq(test_mysql_store(cfg, 1, &s), IDEM_OK);
	if (s != NULL) {
		k.key_len = (size_t)snprintf(k.key, sizeof(k.key), "%s",
		    call_key("gprep"));
		cr_expect_eq(idem_store_reserve(s, TEST_REQ(&k, fp, "o.1",
		    "rid", 30000, 60000), &r), IDEM_OK);
		cr_expect_eq(r.outcome, IDEM_RESERVE_ACQUIRED);
		idem_reserve_result_clear(&r);
	}
	log = harness_capture_end(&cap);
	free(galera_sql(&g, 1, "SET SESSION wsrep_on = OFF; GRANT INSERT, "
	    "UPDATE, DELETE ON idem.* TO 'idem'@'127.0.0.1'"));
	cr_assert_not_null(log);
	expect_port_in(log, g.port[0], ": cannot prepare statement");
	expect_port_in(log, g.port[1], ", host 2 of the list");
	free(log);
	idem_store_close(s);
	idem_config_free(cfg);
}

/* A node that is up but not synced (here desynced by hand, as a donor
 * is) is passed over at connect: the store opens on the next host of its
 * list and says why. */
Test(scale, unsynced_node_passed_over, .init = exclusive_turn,
    .timeout = 60)
{
	char text[1024], *log, *state;
	idem_config *cfg;
	idem_store *s = NULL;
	harness_capture cap;

	free(galera_sql(&g, 3, "SET GLOBAL wsrep_desync = ON"));
	state = galera_sql(&g, 3, "SELECT VARIABLE_VALUE FROM "
	    "information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = "
	    "'wsrep_local_state_comment'");
	cr_expect(state != NULL && strncmp(state, "Synced", 6) != 0,
	    "node 3 is %s", state != NULL ? state : "unknown");
	free(state);
	snprintf(text, sizeof(text), "[idempotency]\nstore = mysql\n");
	mysql_section(text + strlen(text), sizeof(text) - strlen(text), "31",
	    1, NULL);
	cr_assert_eq(idem_config_load_string(text, "galera.conf", &cfg),
	    IDEM_OK);
	cr_assert_eq(harness_capture_level(&cap, IDEM_LOG_INFO), 0);
	cr_expect_eq(test_mysql_store(cfg, 1, &s), IDEM_OK);
	log = harness_capture_end(&cap);
	free(galera_sql(&g, 3, "SET GLOBAL wsrep_desync = OFF"));
	cr_assert_not_null(log);
	expect_port_in(log, g.port[2], " is a Galera node that cannot serve");
	expect_port_in(log, g.port[0], ", host 2 of the list");
	free(log);
	idem_store_close(s);
	idem_config_free(cfg);
	cr_expect_eq(galera_await_size(&g, 3, 3, 10000), 0);
}

/* ------------------------- owner checks on a lagging node (issue 23) */

#define LAG_KEYS 600
#define LOST_COMMITS 200
/* The lifetime of their records: none expires while the program runs
 * (the store suite's purge test counts the expired rows it finds) */
#define LAG_LIFETIME 3600000

/* A store (and its config, in *cfg: caller frees) on the nodes of order
 * ("21": node 2, then node 1), with pool connections. */
static idem_store *
store_on(const char *order, int pool, idem_config **cfg)
{
	char text[1024] = "[idempotency]\nstore = mysql\n";
	size_t len = strlen(text);
	idem_store *s = NULL;

	mysql_section(text + len, sizeof(text) - len, order, pool,
	    "connect-timeout = 2s\nread-timeout = 10s\nwrite-timeout = 10s\n");
	cr_assert_eq(idem_config_load_string(text, "galera.conf", cfg),
	    IDEM_OK);
	cr_assert_eq(test_mysql_store(*cfg, (unsigned)pool, &s), IDEM_OK);
	return s;
}

/* A writer on a node: reserves and commits fresh keys through its store
 * until told to stop, so the other nodes have write sets to apply. */
typedef struct lag_writer {
	idem_store *s;
	atomic_int *stop;
	int id;
} lag_writer;

static void *
lag_write(void *arg)
{
	lag_writer *w = arg;
	idem_stored_response resp = { .status = 201, .body = "x",
	    .body_len = 1 };
	unsigned char fp[32] = { 9 };
	idem_reserve_result r;
	idem_store_key k;
	char owner[32];
	int i;

	for (i = 0; !atomic_load(w->stop); i++) {
		memset(&k, 0, sizeof(k));
		k.key_len = (size_t)snprintf(k.key, sizeof(k.key), "glw-%d-%d-%d",
		    (int)getpid(), w->id, i);
		snprintf(owner, sizeof(owner), "w%d.%d", w->id, i);
		if (idem_store_reserve(w->s, TEST_REQ(&k, fp, owner, "rid",
		    30000, LAG_LIFETIME), &r) == IDEM_OK &&
		    r.outcome == IDEM_RESERVE_ACQUIRED)
			(void)idem_store_commit(w->s, TEST_OWNED(&k, owner,
			    LAG_LIFETIME), &resp);
		idem_reserve_result_clear(&r);
	}
	return NULL;
}

/* Two writers on a node, and what stops them. */
typedef struct lag {
	lag_writer w[2];
	pthread_t t[2];
	atomic_int stop;
} lag;

/* Starts two writers on store s. */
static void
lag_start(idem_store *s, lag *l)
{
	int i;

	atomic_store(&l->stop, 0);
	for (i = 0; i < 2; i++) {
		l->w[i] = (lag_writer){ s, &l->stop, i };
		cr_assert_eq(pthread_create(&l->t[i], NULL, lag_write, &l->w[i]),
		    0);
	}
}

/* Stops them and waits for them. */
static void
lag_stop(lag *l)
{
	atomic_store(&l->stop, 1);
	pthread_join(l->t[0], NULL);
	pthread_join(l->t[1], NULL);
}

/*
 * A pool that straddles two nodes: a reservation made through node 2
 * (under the load of two writers there), then at once its commit, renewal
 * or release through node 1, which may not have applied the reservation
 * yet.  The owner-checked statement matching no row there is not proof
 * that the row is another owner's: none is ever fenced, and none is left
 * in flight (a row left so would run its handler a second time after
 * inflight-ttl).
 */
Test(galera, owner_checks_on_a_lagging_node, .init = shared_turn,
    .timeout = 120)
{
	idem_config *ca, *cb, *cw;
	idem_store *a = store_on("2", 4, &ca), *b = store_on("1", 4, &cb),
	    *w = store_on("2", 4, &cw);
	idem_stored_response resp = { .status = 201, .body = "ok",
	    .body_len = 2 };
	unsigned char fp[32] = { 3 };
	int i, fenced[3] = { 0, 0, 0 }, other = 0;
	char owner[32], sql[256];
	idem_reserve_result r;
	idem_store_key k;
	lag load;
	MYSQL *n1;

	lag_start(w, &load);
	for (i = 0; i < LAG_KEYS; i++) {
		idem_err e1 = IDEM_OK, e2;
		memset(&k, 0, sizeof(k));
		k.key_len = (size_t)snprintf(k.key, sizeof(k.key), "glag-%d-%d",
		    (int)getpid(), i);
		snprintf(owner, sizeof(owner), "oa.%d", i);
		cr_assert_eq(idem_store_reserve(a, TEST_REQ(&k, fp, owner,
		    "rid", 30000, LAG_LIFETIME), &r), IDEM_OK);
		cr_assert_eq(r.outcome, IDEM_RESERVE_ACQUIRED);
		idem_reserve_result_clear(&r);
		switch (i % 3) {
		case 0:
			e2 = idem_store_commit(b, TEST_OWNED(&k, owner,
			    LAG_LIFETIME), &resp);
			break;
		case 1:
			e1 = idem_store_renew(b, TEST_OWNED(&k, owner, 0));
			e2 = idem_store_release(b, TEST_OWNED(&k, owner, 0));
			break;
		default:
			e2 = idem_store_release(b, TEST_OWNED(&k, owner, 0));
			break;
		}
		if (e1 == IDEM_ERR_NOT_FOUND || e2 == IDEM_ERR_NOT_FOUND)
			fenced[i % 3]++;
		else if (e1 != IDEM_OK || e2 != IDEM_OK)
			other++;
	}
	lag_stop(&load);
	cr_expect_eq(fenced[0] + fenced[1] + fenced[2], 0, "taken as fenced "
	    "though the row was ours: %d commits, %d renewals or releases "
	    "after them, %d releases of %d", fenced[0], fenced[1], fenced[2],
	    LAG_KEYS / 3);
	cr_expect_eq(other, 0, "%d other errors", other);
	n1 = must_connect(1);
	must_query(n1, "SET SESSION wsrep_sync_wait = 1");
	snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM idempotency_keys "
	    "WHERE idem_key LIKE 'glag-%d-%%' AND state = 'in_flight'",
	    (int)getpid());
	cr_expect_eq(query_int(n1, sql), 0, "left in flight");
	snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM idempotency_keys "
	    "WHERE idem_key LIKE 'glag-%d-%%' AND state = 'committed'",
	    (int)getpid());
	cr_expect_eq(query_int(n1, sql), (LAG_KEYS + 2) / 3, "committed");
	mysql_close(n1);
	idem_store_close(a);
	idem_store_close(b);
	idem_store_close(w);
	idem_config_free(ca);
	idem_config_free(cb);
	idem_config_free(cw);
}

/*
 * A transactional route's COMMIT lost on its way (the connection cut
 * right after it was sent) or before it (cut first), the transaction on
 * node 2 (under load there) and the store's own pool on node 1.  The outcome is read on the
 * transaction's own node, where a locking read waits for it: every
 * answer is the truth, checked on the cluster afterwards.  Node 1 alone
 * could not tell a COMMIT still on its way from none: from there only a
 * commit is an answer, anything else is "unknown".
 */
Test(galera, lost_commit_read_on_its_own_node, .init = shared_turn,
    .timeout = 120)
{
	idem_config *cs, *cw;
	idem_store *s = store_on("1", 4, &cs), *w = store_on("2", 4, &cw);
	idem_mysql_pool *p = NULL;
	idem_stored_response resp = { .status = 201, .body = "done",
	    .body_len = 4 };
	unsigned char fp[32] = { 4 };
	int i, said_ok = 0, said_not = 0, unknown_n = 0, lies = 0;
	static int said[LOST_COMMITS];
	long long committed;
	char owner[32], sql[300];
	idem_reserve_result r;
	idem_store_key k;
	lag load;
	MYSQL *n1;

	/* the plugin's pool: on node 2 (cw's list), with the store's
	 * transaction statements */
	cr_assert_eq(test_mysql_pool(cw, NULL, 0, 2, &p), IDEM_OK);
	cr_assert_eq(test_mysql_tx_prepare(cw, p), IDEM_OK);
	n1 = must_connect(1);
	must_query(n1, "SET SESSION wsrep_sync_wait = 1");
	lag_start(w, &load);
	for (i = 0; i < LOST_COMMITS; i++) {
		idem_mysql_conn *c = idem_mysql_take(p);
		int unknown = 0;
		idem_err err;

		cr_assert_not_null(c);
		memset(&k, 0, sizeof(k));
		k.key_len = (size_t)snprintf(k.key, sizeof(k.key), "glc-%d-%d",
		    (int)getpid(), i);
		snprintf(owner, sizeof(owner), "oc.%d", i);
		cr_assert_eq(idem_store_tx_begin(s, &c->db, TEST_REQ(&k, fp, owner,
		    "rid", 30000, LAG_LIFETIME), &r), IDEM_OK);
		cr_assert_eq(r.outcome, IDEM_RESERVE_ACQUIRED);
		idem_reserve_result_clear(&r);
		cr_assert_eq(idem_store_tx_record(s, &c->db, TEST_OWNED(&k, owner,
		    LAG_LIFETIME), &resp), IDEM_OK);
		/* half lost on their way (committed), half cut before they
		 * were sent (rolled back): both answers are asked for */
		idem_store_tx_faults(&c->db, i % 2 == 0 ?
		    IDEM_TX_FAULT_LOSE_IN_COMMIT :
		    IDEM_TX_FAULT_LOSE_BEFORE_COMMIT);
		err = idem_store_tx_end(s, &c->db, TEST_OWNED(&k, owner, 0), 1,
		    &unknown);
		idem_mysql_put(p, c);
		said[i] = err == IDEM_OK ? 1 : unknown ? -1 : 0;
	}
	lag_stop(&load);
	/* the truth, once the cluster has it all (a causal read) */
	call_sleep(1000);
	for (i = 0; i < LOST_COMMITS; i++) {
		snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM idempotency_keys "
		    "WHERE idem_key = 'glc-%d-%d' AND state = 'committed' AND "
		    "owner = 'oc.%d'", (int)getpid(), i, i);
		committed = query_int(n1, sql);
		if (said[i] == 1) {
			said_ok++;
			lies += committed != 1;
		} else if (said[i] == 0) {
			said_not++;
			lies += committed != 0;
		} else {
			unknown_n++;
		}
	}
	cr_log_info("lost COMMITs: %d said committed, %d said rolled back, %d "
	    "unknown", said_ok, said_not, unknown_n);
	cr_expect_eq(lies, 0, "%d answers were untrue (%d said committed, %d "
	    "said rolled back, %d unknown)", lies, said_ok, said_not,
	    unknown_n);
	/* an answer that is always "unknown" would be true, and useless */
	cr_expect_gt(said_ok, 0);
	cr_expect_gt(said_not, 0);
	mysql_close(n1);
	idem_mysql_pool_free(p);
	idem_store_close(s);
	idem_store_close(w);
	idem_config_free(cs);
	idem_config_free(cw);
}
