/*
 * test_db_query.c - the statement helper of the data API (idemfcgi_db.h:
 * idem_db_run, _fetch, _one, _affected, _insert_id) on a pool of the
 * MySQL store's database (a private MariaDB): every conversion both
 * ways, NULLs, truncation refused, bad formats refused with
 * IDEM_ERR_INVALID, and the server's errors as idem_err (a deadlock and
 * a lock wait as IDEM_ERR_BUSY); and idemfcgi_mysql.h's raw calls, the
 * same helper.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "idem_config.h"
#include "idem_log.h"
#include "idemfcgi_db.h"
#include "idem_mysql.h"
#include "harness.h"
#include "mariadb.h"
#include "mysql_open.h"

enum { Q_PUT, Q_GET, Q_ALL, Q_NAME, Q_OVER, Q_BUMP, Q_CHILD, NQ };
static const char *const sql[NQ] = {
	[Q_PUT] = "INSERT INTO q_values (s, b, i, u, n) VALUES (?, ?, ?, ?, ?)",
	[Q_GET] = "SELECT s, b, i, u, n FROM q_values WHERE id = ?",
	[Q_ALL] = "SELECT id, s FROM q_values WHERE s LIKE ? ORDER BY id",
	[Q_NAME] = "INSERT INTO q_names (name) VALUES (?)",
	[Q_OVER] = "SELECT i + ? FROM q_values WHERE id = ?",
	[Q_BUMP] = "UPDATE q_rows SET v = v + 1 WHERE id = ?",
	[Q_CHILD] = "INSERT INTO q_child (parent) VALUES (?)",
};

static mariadb server;
static idem_mysql_pool *pool;
static idem_db *db;           /* pool, as the data API sees it */

/* A pool of n connections on the program's MariaDB, each running init
 * (NULL: nothing) when it connects. */
static idem_mysql_pool *
pool_of(unsigned n, const char *init)
{
	char text[1024], section[600];
	idem_config *cfg;
	idem_mysql_pool *p = NULL;

	mariadb_conf(&server, section, sizeof(section));
	snprintf(text, sizeof(text), "[idempotency]\nstore = mysql\n%s",
	    section);
	cr_assert_eq(idem_config_load_string(text, "t.conf", &cfg), IDEM_OK);
	cr_assert_eq(test_mysql_pool(cfg, sql, NQ, n, &p), IDEM_OK);
	if (init != NULL)
		cr_assert_eq(idem_mysql_pool_init(p, init), IDEM_OK);
	idem_config_free(cfg);
	return p;
}

static void
setup(void)
{
	char *out;

	idem_log_set_level(IDEM_LOG_ERROR + 1);
	cr_assert_eq(mariadb_from_env(&server), 0);
	out = mariadb_sql(&server, "CREATE TABLE IF NOT EXISTS q_values (id BIGINT "
	    "NOT NULL AUTO_INCREMENT PRIMARY KEY, s VARCHAR(16), b VARBINARY(16), "
	    "i BIGINT, u BIGINT UNSIGNED, n VARCHAR(4)) ENGINE = InnoDB; "
	    "CREATE TABLE IF NOT EXISTS q_names (name VARCHAR(4) NOT NULL "
	    "PRIMARY KEY) ENGINE = InnoDB; "
	    "CREATE TABLE IF NOT EXISTS q_rows (id INT NOT NULL PRIMARY KEY, "
	    "v INT NOT NULL) ENGINE = InnoDB; "
	    "INSERT IGNORE INTO q_rows VALUES (1, 0), (2, 0), (3, 0), (4, 0), "
	    "(5, 0), (6, 0); "
	    "CREATE TABLE IF NOT EXISTS q_child (parent INT NOT NULL, FOREIGN "
	    "KEY (parent) REFERENCES q_rows (id)) ENGINE = InnoDB");
	cr_assert_not_null(out);
	free(out);
	pool = pool_of(2, NULL);
	db = idem_mysql_pool_source(pool);
}

static void
teardown(void)
{
	idem_mysql_pool_free(pool);
}

TestSuite(query, .init = setup, .fini = teardown, .timeout = 60);

/* Every conversion in, and back out: strings, bytes with a NUL, the
 * integers' extremes, NULL; insert id and affected rows. */
Test(query, round_trip)
{
	idem_db_conn *c = idem_db_get(db);
	const char bytes[5] = { 'a', '\0', 'b', '\xff', 'c' };
	char s[17], b[16];
	size_t blen = 0;
	long long i = 0, id;
	unsigned long long u = 0;
	char *n = (char *)"x";
	int n_null = 0;

	cr_assert_not_null(c);
	cr_assert_eq(idem_db_run(c, Q_PUT, "sbiun", "héllo", bytes,
	    sizeof(bytes), -9223372036854775807LL - 1,
	    18446744073709551615ULL), IDEM_OK);
	cr_expect_eq(idem_db_affected(c, Q_PUT), 1);
	id = (long long)idem_db_insert_id(c, Q_PUT);
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
	/* no row: NOT_FOUND, and the variables are left alone */
	i = 7;
	cr_expect_eq(idem_db_one(c, Q_GET, "i", "sbiu?S", id + 1000000, s,
	    sizeof(s), b, sizeof(b), &blen, &i, &u, &n_null, &n, NULL),
	    IDEM_ERR_NOT_FOUND);
	cr_expect_null(n);
	idem_db_put(db, c);
}

/* NULL in (s, b with a NULL pointer, n) and out: with "?" told, without
 * it refused. */
Test(query, nulls)
{
	idem_db_conn *c = idem_db_get(db);
	char s[8] = "junk", nbuf[8], *bs = NULL;
	long long id, i = 5;
	unsigned long long u = 5;
	int sn = 0, bn = 0, in = 0, un = 0, nn = 0;

	cr_assert_not_null(c);
	cr_assert_eq(idem_db_run(c, Q_PUT, "sbnns", NULL, NULL, (size_t)0,
	    "abc"), IDEM_OK);
	id = (long long)idem_db_insert_id(c, Q_PUT);
	cr_assert_eq(idem_db_one(c, Q_GET, "i", "?sbi?i?u?s", id, &sn, s,
	    sizeof(s), NULL, (size_t)0, NULL, &in, &i, &un, &u, &nn, nbuf,
	    sizeof(nbuf)), IDEM_ERR_INVALID, "b without a buffer");
	cr_assert_eq(idem_db_run(c, Q_GET, "i", id), IDEM_OK);
	cr_expect_eq(idem_db_fetch(c, Q_GET, "?s?S?i?u?s", &sn, s,
	    sizeof(s), &bn, &bs, NULL, &in, &i, &un, &u, &nn, nbuf,
	    sizeof(nbuf)), IDEM_OK);
	cr_expect_eq(bn, 1);
	cr_expect_str_eq(bs, "");
	free(bs);
	cr_expect_eq(sn, 1);
	cr_expect_str_eq(s, "");
	cr_expect_eq(in, 1);
	cr_expect_eq(i, 0);
	cr_expect_eq(un, 1);
	cr_expect_eq(u, 0);
	cr_expect_eq(nn, 0);
	cr_expect_str_eq(nbuf, "abc");
	/* a NULL column without "?": refused, never a silent 0 */
	cr_expect_eq(idem_db_one(c, Q_OVER, "ii", "i", 1LL, id, &i),
	    IDEM_ERR_INVALID);
	idem_db_put(db, c);
}

/* A value longer than its buffer is refused, not cut; one that fits
 * exactly is read whole. */
Test(query, truncation_refused)
{
	idem_db_conn *c = idem_db_get(db);
	char s4[4], s5[5], b3[3];
	char *all = NULL;
	size_t blen = 0, alen = 0;
	long long id;
	int null;

	cr_assert_not_null(c);
	cr_assert_eq(idem_db_run(c, Q_PUT, "sbiin", "abcd", "xyzw",
	    (size_t)4, 1LL, 1LL), IDEM_OK);
	id = (long long)idem_db_insert_id(c, Q_PUT);
	memcpy(s4, "old", 4);
	cr_expect_eq(idem_db_one(c, Q_GET, "i", "sbii?s", id, s4,
	    sizeof(s4), b3, sizeof(b3), &blen, &(long long){ 0 },
	    &(long long){ 0 }, &null, s5, sizeof(s5)), IDEM_ERR_TOO_LARGE);
	cr_expect_eq(idem_db_one(c, Q_GET, "i", "sbii?s", id, s5,
	    sizeof(s5), b3, sizeof(b3), &blen, &(long long){ 0 },
	    &(long long){ 0 }, &null, s4, sizeof(s4)), IDEM_ERR_TOO_LARGE,
	    "4 bytes into b3");
	cr_expect_eq(idem_db_one(c, Q_GET, "i", "sSii?s", id, s5,
	    sizeof(s5), &all, &alen, &(long long){ 0 }, &(long long){ 0 },
	    &null, s4, sizeof(s4)), IDEM_OK);
	cr_expect_str_eq(s5, "abcd");
	cr_expect_str_eq(all, "xyzw");
	cr_expect_eq(alen, 4);
	free(all);
	idem_db_put(db, c);
}

/* Rows one by one, to IDEM_ERR_NOT_FOUND; other statements may run on
 * the connection before they are all fetched. */
Test(query, rows)
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
	/* another statement in the middle */
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
Test(query, bad_formats_refused)
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
	cr_expect_eq(idem_db_run(NULL, Q_BUMP, "i", 1LL), IDEM_ERR_INVALID);
	cr_expect_eq(idem_db_one(c, Q_ALL, "s", "is?", "%", &i, s,
	    sizeof(s)), IDEM_ERR_INVALID, "a ? alone");
	cr_expect_eq(idem_db_one(c, Q_ALL, "s", "i", "%", &i),
	    IDEM_ERR_INVALID, "one column of two");
	cr_expect_eq(idem_db_one(c, Q_ALL, "s", "iz", "%", &i, s),
	    IDEM_ERR_INVALID);
	cr_expect_eq(idem_db_one(c, Q_ALL, "s", "is", "%", &i, s,
	    (size_t)0), IDEM_ERR_INVALID, "a buffer of 0 bytes");
	cr_expect_eq(idem_db_one(c, Q_BUMP, "i", "i", 1LL, &i),
	    IDEM_ERR_INVALID, "an UPDATE has no row");
	cr_expect_eq(idem_db_one(c, Q_ALL, "s", "", "%"),
	    IDEM_ERR_INVALID);
	cr_expect_eq(idem_db_run(c, Q_BUMP, "i", 5LL), IDEM_OK);
	cr_expect_eq(idem_db_affected(c, Q_BUMP), 1);
	idem_db_put(db, c);
}

/* The server's refusals as idem_err: a duplicate key, a value too long
 * for its column, a result out of range, a foreign key. */
Test(query, server_errors)
{
	idem_db_conn *c = idem_db_get(db);
	char name[8];
	long long id, i;

	cr_assert_not_null(c);
	snprintf(name, sizeof(name), "%04d", (int)(getpid() % 10000));
	cr_assert_eq(idem_db_run(c, Q_NAME, "s", name), IDEM_OK);
	cr_expect_eq(idem_db_run(c, Q_NAME, "s", name), IDEM_ERR_EXISTS);
	cr_expect_eq(idem_db_run(c, Q_NAME, "s", "12345"),
	    IDEM_ERR_TOO_LARGE);
	cr_assert_eq(idem_db_run(c, Q_PUT, "nniin",
	    9223372036854775807LL, 0LL), IDEM_OK);
	id = (long long)idem_db_insert_id(c, Q_PUT);
	cr_expect_eq(idem_db_one(c, Q_OVER, "ii", "i", 1LL, id, &i),
	    IDEM_ERR_TOO_LARGE, "BIGINT overflow (1690)");
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
 * rolls one back (1213), which the helper says as IDEM_ERR_BUSY and
 * tells the connection (its transaction is lost); the other goes on. */
Test(query, deadlock_is_busy)
{
	idem_mysql_conn *a = idem_mysql_get(pool), *b = idem_mysql_get(pool);
	bump second = { NULL, 2, IDEM_OK };
	pthread_t t;
	idem_err err;

	cr_assert(a != NULL && b != NULL);
	cr_assert_eq(idem_mysql_tx_mode(a), 0);
	cr_assert_eq(idem_mysql_tx_mode(b), 0);
	/* the server's deadlock check answers, not the client's timeout */
	cr_assert_eq(idem_mysql_expect_lock_wait(a, 50000), 0);
	cr_assert_eq(idem_mysql_expect_lock_wait(b, 50000), 0);
	cr_assert_eq(idem_db_run(&a->db, Q_BUMP, "i", 1LL), IDEM_OK);
	cr_assert_eq(idem_db_run(&b->db, Q_BUMP, "i", 2LL), IDEM_OK);
	/* whichever of the two waits first, the other closes the cycle */
	second.c = &a->db;
	cr_assert_eq(pthread_create(&t, NULL, bump_thread, &second), 0);
	err = idem_db_run(&b->db, Q_BUMP, "i", 1LL);
	pthread_join(t, NULL);
	cr_expect((err == IDEM_ERR_BUSY) != (second.err == IDEM_ERR_BUSY),
	    "one victim: %s, %s", idem_strerror(err),
	    idem_strerror(second.err));
	cr_expect(err == IDEM_OK || second.err == IDEM_OK);
	cr_expect_eq(idem_mysql_tx_lost(err == IDEM_ERR_BUSY ? b : a), 1);
	cr_expect_eq(idem_mysql_tx_lost(err == IDEM_ERR_BUSY ? a : b), 0);
	cr_expect_eq(mysql_query(a->m, "ROLLBACK"), 0);
	cr_expect_eq(mysql_query(b->m, "ROLLBACK"), 0);
	idem_mysql_put(pool, a);
	idem_mysql_put(pool, b);
}

/* A row another transaction holds past innodb_lock_wait_timeout: 1205,
 * IDEM_ERR_BUSY, the waiting transaction not rolled back. */
Test(query, lock_wait_is_busy)
{
	idem_mysql_pool *p = pool_of(2,
	    "SET SESSION innodb_lock_wait_timeout = 1");
	idem_mysql_conn *a = idem_mysql_get(p), *b = idem_mysql_get(p);

	cr_assert(a != NULL && b != NULL);
	cr_assert_eq(idem_mysql_tx_mode(a), 0);
	cr_assert_eq(idem_mysql_tx_mode(b), 0);
	cr_assert_eq(idem_mysql_expect_lock_wait(b, 1000), 0);
	cr_assert_eq(idem_db_run(&a->db, Q_BUMP, "i", 3LL), IDEM_OK);
	cr_expect_eq(idem_db_run(&b->db, Q_BUMP, "i", 3LL), IDEM_ERR_BUSY);
	cr_expect_eq(idem_mysql_tx_lost(b), 0);
	cr_expect_eq(mysql_query(a->m, "ROLLBACK"), 0);
	cr_expect_eq(mysql_query(b->m, "ROLLBACK"), 0);
	idem_mysql_put(p, a);
	idem_mysql_put(p, b);
	idem_mysql_pool_free(p);
}

/* idemfcgi_mysql.h's calls are the same helper on a raw connection, and
 * its statements are MySQL's own handles. */
Test(query, raw_api)
{
	idem_mysql_conn *c = idem_mysql_get(pool);
	char s[17];
	long long id;

	cr_assert_not_null(c);
	cr_assert_not_null(idem_mysql_stmt(c, Q_PUT));
	cr_expect_null(idem_mysql_stmt(c, NQ));
	cr_assert_eq(idem_mysql_run(c, Q_PUT, "snnnn", "raw"), IDEM_OK);
	cr_expect_eq(idem_mysql_affected(c, Q_PUT), 1);
	id = (long long)idem_mysql_insert_id(c, Q_PUT);
	cr_assert_eq(idem_mysql_one(c, Q_GET, "i", "s?b?i?u?s", id, s,
	    sizeof(s), &(int){ 0 }, NULL, (size_t)0, NULL, &(int){ 0 },
	    &(long long){ 0 }, &(int){ 0 }, &(unsigned long long){ 0 },
	    &(int){ 0 }, s, sizeof(s)), IDEM_ERR_INVALID, "b without a buffer");
	cr_assert_eq(idem_mysql_run(c, Q_ALL, "s", "raw"), IDEM_OK);
	cr_expect_eq(idem_mysql_fetch(c, Q_ALL, "is", &id, s, sizeof(s)),
	    IDEM_OK);
	cr_expect_str_eq(s, "raw");
	idem_mysql_put(pool, c);
}

/* The data API's own refusals: no connection, a NULL pool. */
Test(query, no_connection)
{
	long long i;

	cr_expect_eq(idem_db_run(NULL, Q_BUMP, "i", 1LL), IDEM_ERR_INVALID);
	cr_expect_eq(idem_db_one(NULL, Q_OVER, "ii", "i", 1LL, 1LL, &i),
	    IDEM_ERR_INVALID);
	cr_expect_eq(idem_db_fetch(NULL, Q_ALL, "i", &i), IDEM_ERR_INVALID);
	cr_expect_eq(idem_db_affected(NULL, Q_BUMP), 0);
	cr_expect_null(idem_db_get(NULL));
	idem_db_put(NULL, NULL);
	cr_expect_eq(db->dialect, IDEM_DB_MYSQL);
}

/* A connection a transactional route used last (autocommit off) comes
 * back from idem_db_get with autocommit on: a plugin's own write commits
 * by itself, never with a later request's transaction. */
Test(query, get_gives_autocommit)
{
	idem_mysql_pool *p = pool_of(1, NULL);
	idem_db *one = idem_mysql_pool_source(p);
	idem_mysql_conn *c = idem_mysql_get(p);
	idem_db_conn *dc;
	MYSQL_RES *r;
	MYSQL_ROW row;

	cr_assert_not_null(c);
	cr_assert_eq(idem_mysql_tx_mode(c), 0);
	cr_assert_eq(mysql_query(c->m, "ROLLBACK"), 0);
	idem_mysql_put(p, c);
	dc = idem_db_get(one);
	cr_assert_not_null(dc);
	cr_assert_eq(idem_mysql_of(dc), c, "a pool of one connection");
	cr_assert_eq(mysql_query(c->m, "SELECT @@autocommit"), 0);
	cr_assert_not_null(r = mysql_store_result(c->m));
	cr_assert_not_null(row = mysql_fetch_row(r));
	cr_expect_str_eq(row[0], "1");
	mysql_free_result(r);
	idem_db_put(one, dc);
	idem_mysql_pool_free(p);
}

/* An "S" text is NULL after any failure, even one before a row was
 * fetched (a bad format, no such statement, no connection), and when
 * there is no row; never left as it was. */
Test(query, texts_null_after_a_failure)
{
	idem_db_conn *c = idem_db_get(db);
	char *t = (char *)"junk", *u = (char *)"junk";
	long long i = 0;

	cr_assert_not_null(c);
	cr_expect_eq(idem_db_one(c, Q_GET, "ii", "S", 1LL, 2LL, &t, NULL),
	    IDEM_ERR_INVALID, "two parameters for one placeholder");
	cr_expect_null(t);
	t = (char *)"junk";
	cr_expect_eq(idem_db_one(c, NQ, "i", "?iS", 1LL, &(int){ 0 }, &i, &t,
	    NULL), IDEM_ERR_INVALID, "no such statement");
	cr_expect_null(t);
	t = (char *)"junk";
	cr_expect_eq(idem_db_one(c, Q_ALL, "s", "iS", "no-such-%", &i, &t,
	    NULL), IDEM_ERR_NOT_FOUND);
	cr_expect_null(t);
	t = (char *)"junk";
	cr_expect_eq(idem_db_one(NULL, Q_ALL, "s", "SS", "%", &t, NULL, &u,
	    NULL), IDEM_ERR_INVALID);
	cr_expect_null(t);
	cr_expect_null(u);
	t = (char *)"junk";
	cr_expect_eq(idem_db_fetch(c, NQ, "S", &t, NULL), IDEM_ERR_INVALID);
	cr_expect_null(t);
	idem_db_put(db, c);
}

/* A connection the framework holds for a transactional route is never
 * put back by a plugin (two users would share it); one put into the
 * wrong pool goes back to its own. */
Test(query, put_refuses_a_held_connection)
{
	idem_mysql_pool *p2 = pool_of(1, NULL);
	idem_db *other = idem_mysql_pool_source(p2);
	idem_db_conn *c = idem_db_take(db), *d;

	cr_assert_not_null(c);
	idem_db_put(db, c);
	idem_mysql_put(pool, idem_mysql_of(c));
	/* still out: the pool's other connection, then none */
	cr_assert_not_null(d = idem_db_get(db));
	cr_expect_neq(d, c);
	idem_db_return(c);
	idem_db_put(other, d);
	/* both back in db's pool, none in the other's */
	c = idem_db_get(db);
	d = idem_db_get(db);
	cr_expect(c != NULL && d != NULL);
	idem_db_put(db, c);
	idem_db_put(db, d);
	idem_mysql_pool_free(p2);
}
