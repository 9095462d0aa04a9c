/*
 * test_db_query_pg.c - the statement helper of the data API
 * (idemfcgi_db.h) on a pool of the PostgreSQL store's database (a private
 * PostgreSQL): '?' numbered as $n past literals and comments, every
 * conversion both ways, NULLs, truncation refused, bad formats refused
 * with IDEM_ERR_INVALID, the server's errors as idem_err (a deadlock as
 * IDEM_ERR_BUSY that tells the connection its transaction is lost), and
 * columns of any type read as text (numeric, bool, bytea).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "idem_config.h"
#include "idem_log.h"
#include "idem_pg_db.h"
#include "idem_store.h"
#include "idem_store_postgres.h"
#include "idemfcgi_db.h"
#include "postgres.h"

enum { Q_PUT, Q_GET, Q_ALL, Q_NAME, Q_OVER, Q_BUMP, Q_CHILD, Q_TYPES,
    Q_BEGIN, Q_ROLLBACK, NQ };
static const char *const sql[NQ] = {
	[Q_PUT] = "INSERT INTO q_values (s, b, i, u, n) VALUES (?, ?, ?, ?, ?) "
	    "RETURNING id",
	[Q_GET] = "SELECT s, b, i, u, n FROM q_values WHERE id = ?",
	[Q_ALL] = "SELECT id, s FROM q_values WHERE s LIKE ? ORDER BY id",
	[Q_NAME] = "INSERT INTO q_names (name) VALUES (?)",
	[Q_OVER] = "SELECT i + ? FROM q_values WHERE id = ?",
	[Q_BUMP] = "UPDATE q_rows SET v = v + 1 WHERE id = ?",
	[Q_CHILD] = "INSERT INTO q_child (parent) VALUES (?)",
	/* '?' in a literal, a name, comments and a dollar quote stay */
	[Q_TYPES] = "SELECT 12.00::numeric + ?, true, '\\x00ff'::bytea, "
	    "'why?' /* a? */, $q$?$q$ AS \"?\" -- ?\n",
	[Q_BEGIN] = "BEGIN",
	[Q_ROLLBACK] = "ROLLBACK",
};

/* The tables, made by the superuser for the store's role. */
#define DDL "CREATE TABLE IF NOT EXISTS q_values (id " \
    "BIGSERIAL PRIMARY KEY, s VARCHAR(16), b BYTEA, i BIGINT, u " \
    "NUMERIC(20), n VARCHAR(4)); " \
    "CREATE TABLE IF NOT EXISTS q_names (name VARCHAR(4) NOT NULL " \
    "PRIMARY KEY); " \
    "CREATE TABLE IF NOT EXISTS q_rows (id INT NOT NULL PRIMARY KEY, " \
    "v INT NOT NULL); " \
    "INSERT INTO q_rows VALUES (1, 0), (2, 0), (3, 0), (4, 0), (5, 0), " \
    "(6, 0) ON CONFLICT DO NOTHING; " \
    "CREATE TABLE IF NOT EXISTS q_child (parent INT NOT NULL " \
    "REFERENCES q_rows (id)); " \
    "GRANT ALL ON ALL TABLES IN SCHEMA public TO idem; " \
    "GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO idem"

static postgres server;
static idem_db *db;

static void
setup(void)
{
	char text[1024], section[600], *out;
	idem_store_opts o;
	idem_config *cfg;

	idem_log_set_level(IDEM_LOG_ERROR + 1);
	cr_assert_eq(postgres_from_env(&server), 0);
	/* the tests run side by side, and CREATE TABLE IF NOT EXISTS may
	 * meet another's at the same time (a duplicate type): again */
	for (int k = 0; k < 20 && (out = postgres_sql(&server, DDL)) == NULL;
	    k++)
		usleep(100000);
	cr_assert_not_null(out);
	free(out);
	postgres_conf(&server, section, sizeof(section));
	snprintf(text, sizeof(text), "[idempotency]\nstore = postgres\n%s",
	    section);
	cr_assert_eq(idem_config_load_string(text, "t.conf", &cfg), IDEM_OK);
	o = idem_store_opts_of(cfg, 0);
	cr_assert_eq(idem_store_postgres_db_new(&cfg->postgres, &o, sql, NQ, 2,
	    &db), IDEM_OK);
	idem_config_free(cfg);
}

static void
teardown(void)
{
	idem_db_free(db);
}

TestSuite(query_pg, .init = setup, .fini = teardown, .timeout = 60);

/* '?' numbered outside literals, names, comments and dollar quotes; a
 * statement of $n kept; both kinds refused. */
Test(query_pg, placeholders_numbered)
{
	char *out;
	int n;

	cr_assert_eq(idem_pg_number_params("SELECT ?, '?''?', \"a?\", E'\\'?',"
	    " ? -- ?\n + ? /* ? /* ? */ ? */, $x$ ? $x$", &out, &n), IDEM_OK);
	cr_expect_str_eq(out, "SELECT $1, '?''?', \"a?\", E'\\'?', $2 -- ?\n "
	    "+ $3 /* ? /* ? */ ? */, $x$ ? $x$");
	cr_expect_eq(n, 3);
	free(out);
	cr_assert_eq(idem_pg_number_params("SELECT $2, $1", &out, &n), IDEM_OK);
	cr_expect_str_eq(out, "SELECT $2, $1");
	cr_expect_eq(n, 2);
	free(out);
	cr_expect_eq(idem_pg_number_params("SELECT ?, $1", &out, &n),
	    IDEM_ERR_INVALID);
}

/* Every conversion in, and back out: strings, bytes with a NUL, the
 * integers' extremes, NULL; the id by RETURNING, affected rows. */
Test(query_pg, round_trip)
{
	idem_db_conn *c = idem_db_get(db);
	const char bytes[5] = { 'a', '\0', 'b', '\xff', 'c' };
	char s[17], b[16];
	size_t blen = 0;
	long long i = 0, id = 0;
	unsigned long long u = 0;
	char *n = (char *)"x";
	int n_null = 0;

	cr_assert_not_null(c);
	cr_assert_eq(idem_db_one(c, Q_PUT, "sbiun", "i", "héllo", bytes,
	    sizeof(bytes), -9223372036854775807LL - 1,
	    18446744073709551615ULL, &id), IDEM_OK);
	cr_expect_eq(idem_db_affected(c, Q_PUT), 1);
	cr_expect_eq(idem_db_insert_id(c, Q_PUT), 0);
	cr_assert_gt(id, 0);
	cr_assert_eq(idem_db_one(c, Q_GET, "i", "sbiu?S", id, s, sizeof(s),
	    b, sizeof(b), &blen, &i, &u, &n_null, &n, NULL), IDEM_OK);
	cr_expect_str_eq(s, "héllo");
	cr_expect_eq(blen, sizeof(bytes));
	cr_expect_eq(memcmp(b, bytes, sizeof(bytes)), 0);
	cr_expect_eq(i, -9223372036854775807LL - 1);
	cr_expect_eq(u, 18446744073709551615ULL);
	cr_expect_eq(n_null, 1);
	cr_expect_str_eq(n, "");
	free(n);
	i = 7;
	cr_expect_eq(idem_db_one(c, Q_GET, "i", "sbiu?S", id + 1000000, s,
	    sizeof(s), b, sizeof(b), &blen, &i, &u, &n_null, &n, NULL),
	    IDEM_ERR_NOT_FOUND);
	cr_expect_null(n);
	idem_db_put(db, c);
}

/* Columns read as their text: a whole numeric, a bool, a bytea; a
 * fraction is no integer; a value longer than its buffer is refused. */
Test(query_pg, columns_of_any_type)
{
	idem_db_conn *c = idem_db_get(db);
	long long num = 0, yes = 0;
	char raw[4], word[8], q[2], tiny[4];
	size_t rlen = 0;

	cr_assert_not_null(c);
	cr_assert_eq(idem_db_one(c, Q_TYPES, "i", "iibss", 30LL, &num, &yes,
	    raw, sizeof(raw), &rlen, word, sizeof(word), q, sizeof(q)),
	    IDEM_OK);
	cr_expect_eq(num, 42);
	cr_expect_eq(yes, 1);
	cr_expect_eq(rlen, 2);
	cr_expect_eq((unsigned char)raw[1], 0xff);
	cr_expect_str_eq(word, "why?");
	cr_expect_str_eq(q, "?");
	cr_expect_eq(idem_db_one(c, Q_TYPES, "s", "iibss", "0.5", &num, &yes,
	    raw, sizeof(raw), &rlen, word, sizeof(word), q, sizeof(q)),
	    IDEM_ERR_INVALID, "12.50 is no integer");
	cr_expect_eq(idem_db_one(c, Q_TYPES, "i", "iibss", 0LL, &num, &yes,
	    raw, sizeof(raw), &rlen, tiny, sizeof(tiny), q, sizeof(q)),
	    IDEM_ERR_TOO_LARGE);
	idem_db_put(db, c);
}

/* Rows fetched one by one while another statement runs in between. */
Test(query_pg, rows)
{
	idem_db_conn *c = idem_db_get(db);
	char tag[16], s[40], want[40];
	long long id, prev = 0;
	int k, n = 0;
	idem_err err;

	cr_assert_not_null(c);
	snprintf(tag, sizeof(tag), "r%d-", (int)getpid());
	for (k = 0; k < 3; k++) {
		snprintf(s, sizeof(s), "%s%d", tag, k);
		cr_assert_eq(idem_db_run(c, Q_PUT, "snnnn", s), IDEM_OK);
	}
	snprintf(s, sizeof(s), "%s%%", tag);
	cr_assert_eq(idem_db_run(c, Q_ALL, "s", s), IDEM_OK);
	cr_expect_eq(idem_db_affected(c, Q_ALL), 3);
	cr_assert_eq(idem_db_run(c, Q_BUMP, "i", 4LL), IDEM_OK);
	while ((err = idem_db_fetch(c, Q_ALL, "is", &id, s, sizeof(s))) ==
	    IDEM_OK) {
		snprintf(want, sizeof(want), "%s%d", tag, n);
		cr_expect_str_eq(s, want);
		cr_expect_gt(id, prev);
		prev = id;
		n++;
	}
	cr_expect_eq(err, IDEM_ERR_NOT_FOUND);
	cr_expect_eq(n, 3);
	idem_db_put(db, c);
}

/* Formats that do not fit the statement: IDEM_ERR_INVALID, nothing run,
 * and the connection still serves. */
Test(query_pg, bad_formats_refused)
{
	idem_db_conn *c = idem_db_get(db);
	char s[8];
	long long i;

	cr_assert_not_null(c);
	cr_expect_eq(idem_db_run(c, Q_BUMP, "x", 1LL), IDEM_ERR_INVALID);
	cr_expect_eq(idem_db_run(c, Q_BUMP, "", 1LL), IDEM_ERR_INVALID);
	cr_expect_eq(idem_db_run(c, Q_BUMP, "ii", 1LL, 2LL),
	    IDEM_ERR_INVALID);
	cr_expect_eq(idem_db_run(c, Q_BUMP, NULL), IDEM_ERR_INVALID);
	cr_expect_eq(idem_db_run(c, NQ, "i", 1LL), IDEM_ERR_INVALID);
	cr_expect_eq(idem_db_one(c, Q_ALL, "s", "is?", "%", &i, s,
	    sizeof(s)), IDEM_ERR_INVALID, "a ? alone");
	cr_expect_eq(idem_db_one(c, Q_ALL, "s", "i", "%", &i),
	    IDEM_ERR_INVALID, "one column of two");
	cr_expect_eq(idem_db_one(c, Q_ALL, "s", "is", "%", &i, s,
	    (size_t)0), IDEM_ERR_INVALID, "a buffer of 0 bytes");
	cr_expect_eq(idem_db_one(c, Q_BUMP, "i", "i", 1LL, &i),
	    IDEM_ERR_INVALID, "an UPDATE has no row");
	cr_expect_eq(idem_db_run(c, Q_BUMP, "i", 5LL), IDEM_OK);
	cr_expect_eq(idem_db_affected(c, Q_BUMP), 1);
	idem_db_put(db, c);
}

/* The server's refusals as idem_err: a duplicate key, a value too long
 * for its column, a result out of range, a foreign key. */
Test(query_pg, server_errors)
{
	idem_db_conn *c = idem_db_get(db);
	char name[8];
	long long id = 0, i;

	cr_assert_not_null(c);
	snprintf(name, sizeof(name), "%04d", (int)(getpid() % 10000));
	cr_assert_eq(idem_db_run(c, Q_NAME, "s", name), IDEM_OK);
	cr_expect_eq(idem_db_run(c, Q_NAME, "s", name), IDEM_ERR_EXISTS);
	cr_expect_eq(idem_db_run(c, Q_NAME, "s", "12345"),
	    IDEM_ERR_TOO_LARGE);
	cr_assert_eq(idem_db_one(c, Q_PUT, "nniin", "i",
	    9223372036854775807LL, 0LL, &id), IDEM_OK);
	cr_expect_eq(idem_db_one(c, Q_OVER, "ii", "i", 1LL, id, &i),
	    IDEM_ERR_TOO_LARGE, "bigint out of range (22003)");
	cr_expect_eq(idem_db_run(c, Q_CHILD, "i", 99LL), IDEM_ERR_STORE);
	cr_expect_eq(idem_db_run(c, Q_CHILD, "i", 6LL), IDEM_OK);
	idem_db_put(db, c);
}

typedef struct bump {
	idem_db_conn *c;
	long long row;
	idem_err err;
} bump;

static void *
bump_thread(void *arg)
{
	bump *b = arg;

	b->err = idem_db_run(b->c, Q_BUMP, "i", b->row);
	return NULL;
}

/* Two transactions that lock rows 1 and 2 in opposite orders: the server
 * rolls one back (40P01, or 55P03 when lock_timeout comes first), which
 * the helper says as IDEM_ERR_BUSY and tells the connection (its
 * transaction is lost); the other goes on. */
Test(query_pg, deadlock_is_busy)
{
	idem_db_conn *a = idem_db_get(db), *b = idem_db_get(db);
	bump second = { NULL, 1, IDEM_OK };
	pthread_t t;
	idem_err err;

	cr_assert(a != NULL && b != NULL);
	second.c = b;
	cr_assert_eq(idem_db_run(a, Q_BEGIN, ""), IDEM_OK);
	cr_assert_eq(idem_db_run(b, Q_BEGIN, ""), IDEM_OK);
	cr_assert_eq(idem_db_run(a, Q_BUMP, "i", 1LL), IDEM_OK);
	cr_assert_eq(idem_db_run(b, Q_BUMP, "i", 2LL), IDEM_OK);
	pthread_create(&t, NULL, bump_thread, &second);
	usleep(200000);
	err = idem_db_run(a, Q_BUMP, "i", 2LL);
	pthread_join(t, NULL);
	cr_expect((err == IDEM_ERR_BUSY) != (second.err == IDEM_ERR_BUSY),
	    "one of the two loses: %d %d", err, second.err);
	cr_expect_eq(idem_db_tx_lost(err == IDEM_ERR_BUSY ? a : b), 1);
	cr_expect_eq(idem_db_tx_lost(err == IDEM_ERR_BUSY ? a : b), 0,
	    "asking clears it");
	cr_expect_eq(idem_db_tx_lost(err == IDEM_ERR_BUSY ? b : a), 0);
	cr_expect_eq(idem_db_tx_intact(a), 1);
	cr_expect_eq(idem_db_run(a, Q_ROLLBACK, ""), IDEM_OK);
	cr_expect_eq(idem_db_run(b, Q_ROLLBACK, ""), IDEM_OK);
	cr_expect_eq(idem_db_tx_intact(a), 0);
	idem_db_put(db, a);
	idem_db_put(db, b);
}

/* A connection put back inside a transaction is closed (its transaction
 * rolled back), never handed to the next user so. */
Test(query_pg, put_back_in_a_transaction_is_rolled_back)
{
	idem_db_conn *c = idem_db_get(db), *d;
	long long v0 = -1, v1 = -1;
	char *out;

	cr_assert_not_null(c);
	out = postgres_sql(&server, "SELECT v FROM q_rows WHERE id = 3");
	cr_assert_not_null(out);
	v0 = atoll(out);
	free(out);
	cr_assert_eq(idem_db_run(c, Q_BEGIN, ""), IDEM_OK);
	cr_assert_eq(idem_db_run(c, Q_BUMP, "i", 3LL), IDEM_OK);
	idem_db_put(db, c);
	d = idem_db_get(db);
	cr_assert_not_null(d);
	cr_expect_eq(idem_db_tx_intact(d), 0);
	idem_db_put(db, d);
	out = postgres_sql(&server, "SELECT v FROM q_rows WHERE id = 3");
	cr_assert_not_null(out);
	v1 = atoll(out);
	free(out);
	cr_expect_eq(v1, v0);
}

/* Tables made at once by ddl_at_once_all_succeed. */
#define TABLES 10

typedef struct ddl_run {
	idem_config *cfg;
	const char *sql;
	idem_err err;
} ddl_run;

static void *
ddl_thread(void *arg)
{
	ddl_run *r = arg;

	r->err = idem_store_postgres_db_exec(&r->cfg->postgres, "t.conf",
	    r->sql);
	return NULL;
}

/* The same CREATE TABLE IF NOT EXISTS from many instances at once (each
 * one's deploy): every one succeeds.  Two sessions running it together
 * fail on the catalog's unique index unless they take turns.  Ten
 * tables, each made by eight at once; under valgrind (make
 * check-valgrind sets IDEM_UNDER_VALGRIND), whose SCRAM handshakes take
 * seconds each, two by two: the memory of the same path. */
Test(query_pg, ddl_at_once_all_succeed, .timeout = 300)
{
	char text[1024], section[600], ddl[TABLES][160];
	ddl_run runs[TABLES][8];
	pthread_t t[TABLES][8];
	int slow = getenv("IDEM_UNDER_VALGRIND") != NULL;
	int tables = slow ? 2 : TABLES, each = slow ? 2 : 8;
	idem_config *cfg;
	int i, k;

	postgres_conf(&server, section, sizeof(section));
	snprintf(text, sizeof(text), "[idempotency]\nstore = postgres\n%s",
	    section);
	cr_assert_eq(idem_config_load_string(text, "t.conf", &cfg), IDEM_OK);
	for (k = 0; k < tables; k++) {
		snprintf(ddl[k], sizeof(ddl[k]), "CREATE TABLE IF NOT EXISTS "
		    "q_ddl_%d_%d (id BIGSERIAL PRIMARY KEY, v TEXT)",
		    (int)getpid(), k);
		for (i = 0; i < each; i++) {
			runs[k][i] = (ddl_run){ cfg, ddl[k], IDEM_ERR_STORE };
			pthread_create(&t[k][i], NULL, ddl_thread, &runs[k][i]);
		}
	}
	for (k = 0; k < tables; k++)
		for (i = 0; i < each; i++) {
			pthread_join(t[k][i], NULL);
			cr_expect_eq(runs[k][i].err, IDEM_OK, "table %d, "
			    "instance %d: %s", k, i,
			    idem_strerror(runs[k][i].err));
		}
	idem_config_free(cfg);
}
