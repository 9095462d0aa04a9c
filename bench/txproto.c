/*
 * txproto.c - durable commits per first execution (issue 14).
 *
 *   txproto SOCKET USER PASSWORD DATABASE MODE THREADS SECONDS
 *
 * THREADS connections run first executions on fresh keys for SECONDS, each
 * with one side effect (+1 on the thread's bench_accounts row), as MODE:
 *   two-phase  autocommit reserve, side effect, owner-checked commit of
 *              the record: 3 commits (what the MySQL store does today)
 *   tx-a       autocommit reserve; then one transaction: side effect,
 *              owner-checked record UPDATE, COMMIT: 2 commits
 *   tx-b       one transaction: reserve, side effect, record UPDATE: 1 commit
 * Reserve and record UPDATE are the store's S_INSERT and S_COMMIT.  Prints
 *   MODE THREADS ops/s fsyncs/op binlog=ON|OFF flush=N fsyncs=COUNTER
 * (fsyncs/op: the change of the status COUNTER per operation; flush:
 * innodb_flush_log_at_trx_commit).
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mysql.h>

#define MAXT 256

enum { INS, ACC, COM, BEGIN, COMMIT, ROLLBACK, NST, END = -1 };

static const char *const sql[NST] = {
	[INS] = "INSERT IGNORE INTO idempotency_keys (scope_hash, idem_key, "
	    "fingerprint, state, owner, request_id, reserved_at, lease_at, "
	    "lease_ms, expires_at) VALUES (?, ?, ?, 'in_flight', ?, ?, "
	    "UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), 30000, UTC_TIMESTAMP(6) + "
	    "INTERVAL ? MICROSECOND)",
	[ACC] = "UPDATE bench_accounts SET balance = balance + 1 WHERE id = ?",
	[COM] = "UPDATE idempotency_keys SET state = 'committed', status = ?, "
	    "headers = ?, body = ?, expires_at = UTC_TIMESTAMP(6) + INTERVAL ? "
	    "MICROSECOND WHERE scope_hash = ? AND idem_key = ? AND state = "
	    "'in_flight' AND owner = ?",
	[BEGIN] = "START TRANSACTION",
	[COMMIT] = "COMMIT",
	[ROLLBACK] = "ROLLBACK",
};

/* the statements of one first execution, per mode */
static const char *const modes[] = { "two-phase", "tx-a", "tx-b" };
static const int plans[3][6] = {
	{ INS, ACC, COM, END },
	{ INS, BEGIN, ACC, COM, COMMIT, END },
	{ BEGIN, INS, ACC, COM, COMMIT, END },
};

static const char rid[] = "bench", hdr[] = "Content-Type: application/json"
    "\r\n", body[] = "{\"exec\":\"00000000-0000-0000-0000-000000000000\"}";
static const char *sock, *user, *pass, *db;
static int mode;
static long run_id;
static atomic_int stop;

typedef struct worker {
	int id, failed;
	unsigned long ops;
	MYSQL *m;
	MYSQL_STMT *st[NST];
	MYSQL_BIND bi[6], ba[1], bc[7];
	unsigned long len[7];
	unsigned char scope[32], fp[32];
	char key[64], owner[64];
	long long life, status, account;
} worker;

/* Prints what went wrong on m and exits. */
_Noreturn static void
die(MYSQL *m, const char *what)
{
	fprintf(stderr, "txproto: %s: %s\n", what,
	    m != NULL ? mysql_error(m) : "failed");
	exit(1);
}

/* Connects with the store's flags (an UPDATE reports the rows matched). */
static MYSQL *
connect_db(void)
{
	MYSQL *m = mysql_init(NULL);

	if (m == NULL || mysql_real_connect(m, NULL, user, pass, db, 0, sock,
	    CLIENT_FOUND_ROWS) == NULL)
		die(m, "connect");
	return m;
}

/* Fills b to pass the integer at v (len NULL) or n bytes at v. */
static void
param(MYSQL_BIND *b, const void *v, unsigned long *len, size_t n)
{
	memset(b, 0, sizeof(*b));
	b->buffer = (void *)v;
	b->buffer_type = len == NULL ? MYSQL_TYPE_LONGLONG : MYSQL_TYPE_BLOB;
	if (len != NULL) {
		*len = (unsigned long)n;
		b->buffer_length = *len;
		b->length = len;
	}
}

/* Connects w, prepares every statement and binds the parameters once:
 * only the key's bytes and length change between executions. */
static void
setup(worker *w)
{
	int i;

	w->m = connect_db();
	for (i = 0; i < NST; i++)
		if ((w->st[i] = mysql_stmt_init(w->m)) == NULL ||
		    mysql_stmt_prepare(w->st[i], sql[i], strlen(sql[i])) != 0)
			die(w->m, sql[i]);
	memset(w->scope, 0, sizeof(w->scope));
	memset(w->fp, 1, sizeof(w->fp));
	w->life = 86400000000LL;
	w->status = 201;
	w->account = w->id;
	snprintf(w->owner, sizeof(w->owner), "txproto%d.0123456789abcdef", w->id);
	param(&w->bi[0], w->scope, &w->len[0], sizeof(w->scope));
	param(&w->bi[1], w->key, &w->len[1], 0);
	param(&w->bi[2], w->fp, &w->len[2], sizeof(w->fp));
	param(&w->bi[3], w->owner, &w->len[3], strlen(w->owner));
	param(&w->bi[4], rid, &w->len[4], strlen(rid));
	param(&w->bi[5], &w->life, NULL, 0);
	param(&w->ba[0], &w->account, NULL, 0);
	param(&w->bc[0], &w->status, NULL, 0);
	param(&w->bc[1], hdr, &w->len[5], strlen(hdr));
	param(&w->bc[2], body, &w->len[6], strlen(body));
	param(&w->bc[3], &w->life, NULL, 0);
	w->bc[4] = w->bi[0];
	w->bc[5] = w->bi[1];
	w->bc[6] = w->bi[3];
	if (mysql_stmt_bind_param(w->st[INS], w->bi) != 0 ||
	    mysql_stmt_bind_param(w->st[ACC], w->ba) != 0 ||
	    mysql_stmt_bind_param(w->st[COM], w->bc) != 0)
		die(w->m, "bind");
}

/* One first execution on a fresh key: 0 when every write touched exactly
 * one row and the work committed, -1 (after a ROLLBACK) otherwise. */
static int
first_execution(worker *w)
{
	const int *p;
	int n = snprintf(w->key, sizeof(w->key), "txp-%s-%ld-%d-%lu",
	    modes[mode], run_id, w->id, w->ops);

	if (n < 1 || (size_t)n >= sizeof(w->key))
		return -1;
	w->len[1] = (unsigned long)n;
	for (p = plans[mode]; *p != END; p++) {
		if (mysql_stmt_execute(w->st[*p]) != 0) {
			fprintf(stderr, "txproto: %s\n", mysql_stmt_error(w->st[*p]));
			break;
		}
		/* INS, ACC and COM, the writes, must each touch one row */
		if (*p <= COM && mysql_stmt_affected_rows(w->st[*p]) != 1)
			break;
	}
	if (*p == END)
		return 0;
	mysql_stmt_execute(w->st[ROLLBACK]);
	return -1;
}

/* A worker thread: first executions until told to stop or one fails. */
static void *
run(void *arg)
{
	worker *w = arg;
	int i;

	while (!atomic_load(&stop) && !(w->failed = first_execution(w) != 0))
		w->ops++;
	for (i = 0; i < NST; i++)
		mysql_stmt_close(w->st[i]);
	mysql_close(w->m);
	return NULL;
}

/* Runs q and returns the last column of its first row as a number (also
 * copied to out[n]); -1 when there is no row. */
static double
fetch(MYSQL *m, const char *q, char *out, size_t n)
{
	MYSQL_RES *r;
	MYSQL_ROW row;
	const char *c;
	double v = -1;

	if (mysql_query(m, q) != 0 || (r = mysql_store_result(m)) == NULL)
		die(m, q);
	if ((row = mysql_fetch_row(r)) != NULL &&
	    (c = row[mysql_num_fields(r) - 1]) != NULL) {
		v = atof(c);
		snprintf(out, n, "%s", c);
	}
	mysql_free_result(r);
	return v;
}

/* The global status counter name; -1 when the server has none. */
static double
counter(MYSQL *m, const char *name)
{
	char q[96], v[32];

	snprintf(q, sizeof(q), "SHOW GLOBAL STATUS LIKE '%s'", name);
	return fetch(m, q, v, sizeof(v));
}

/* Parses the arguments, creates one account per thread, runs the workers
 * for SECONDS, checks the balances and prints the result line. */
int
main(int argc, char **argv)
{
	static pthread_t t[MAXT];
	static worker w[MAXT];
	static const char sum[] = "SELECT SUM(balance) FROM bench_accounts";
	const char *fsyncs = "Innodb_os_log_fsyncs";
	unsigned long total = 0;
	char server[64] = "", v[32];
	double f0, f1, s0, s1;
	int n, secs, i, failed = 0;
	MYSQL *m;

	for (mode = 0; argc == 8 && mode < 3 && strcmp(argv[5], modes[mode]);)
		mode++;
	n = argc == 8 ? atoi(argv[6]) : 0;
	secs = argc == 8 ? atoi(argv[7]) : 0;
	if (argc != 8 || mode == 3 || n < 1 || n > MAXT || secs < 1 ||
	    secs > 3600) {
		fprintf(stderr, "usage: txproto SOCKET USER PASSWORD DATABASE "
		    "two-phase|tx-a|tx-b THREADS(1-%d) SECONDS\n", MAXT);
		return 2;
	}
	sock = argv[1], user = argv[2], pass = argv[3], db = argv[4];
	run_id = (long)time(NULL) * 100000 + (long)getpid() % 100000;
	mysql_library_init(0, NULL, NULL);
	m = connect_db();
	/* accounts 0 to MAXT - 1, one per thread */
	if (mysql_query(m, "CREATE TABLE IF NOT EXISTS bench_accounts (id INT "
	    "PRIMARY KEY, balance BIGINT NOT NULL) ENGINE = InnoDB") != 0 ||
	    mysql_query(m, "INSERT IGNORE INTO bench_accounts WITH RECURSIVE "
	    "s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < 255) "
	    "SELECT i, 0 FROM s") != 0)
		die(m, "creating bench_accounts");
	fetch(m, "SELECT CONCAT('binlog=', IF(@@log_bin, 'ON', 'OFF'), "
	    "' flush=', @@innodb_flush_log_at_trx_commit)", server,
	    sizeof(server));
	for (i = 0; i < n; i++) {
		w[i].id = i;
		setup(&w[i]);
	}
	/* MariaDB 10.8+ has no Innodb_os_log_fsyncs; there Innodb_data_fsyncs
	 * counts every fsync InnoDB makes, the redo log's included */
	if (counter(m, fsyncs) < 0)
		fsyncs = "Innodb_data_fsyncs";
	s0 = fetch(m, sum, v, sizeof(v));
	f0 = counter(m, fsyncs);
	for (i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, run, &w[i]) != 0)
			die(NULL, "pthread_create");
	sleep((unsigned)secs);
	atomic_store(&stop, 1);
	for (i = 0; i < n; i++) {
		pthread_join(t[i], NULL);
		total += w[i].ops;
		failed += w[i].failed;
	}
	f1 = counter(m, fsyncs);
	s1 = fetch(m, sum, v, sizeof(v));
	/* every operation added 1 to a balance once, and nothing else did */
	if (failed > 0 || s1 - s0 != (double)total) {
		fprintf(stderr, "txproto: %d threads failed; balances moved by "
		    "%.0f for %lu operations\n", failed, s1 - s0, total);
		return 1;
	}
	printf("%s %d %.0f %.3f %s fsyncs=%s\n", modes[mode], n,
	    (double)total / secs, total > 0 ? (f1 - f0) / total : 0.0, server,
	    fsyncs);
	mysql_close(m);
	mysql_library_end();
	return 0;
}
