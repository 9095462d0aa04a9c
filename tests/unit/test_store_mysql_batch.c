/*
 * test_store_mysql_batch.c - the batching suite (batch_suite.c) on the
 * MySQL store, and what is MySQL's own: a commit batch that updates fewer
 * rows than it names, batches slower than the timeouts (a trigger that
 * sleeps), a row held by a transaction.  Linked into test_store_mysql
 * (its private MariaDB).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <mysql.h>

#include "batch_suite.h"
#include "idem_config.h"
#include "idem_store_mysql.h"
#include "mariadb.h"
#include "mysql_open.h"
#include "store_req.h"

/* A MySQL store on database db of the tests' server, pool connections,
 * extra appended to its [mysql] section. */
static idem_store *
open_batching_in(const char *db, unsigned pool, const char *extra)
{
	char section[600];
	idem_config *cfg;
	idem_store *s = NULL;
	mariadb m;

	cr_assert_eq(mariadb_from_env(&m), 0);
	mariadb_conf(&m, section, sizeof(section));
	cfg = batch_config("mysql", section, db, pool, extra);
	cr_assert_eq(test_mysql_store(cfg, pool, &s), IDEM_OK);
	idem_config_free(cfg);
	return s;
}

/* The same on the database the tests share. */
idem_store *
batch_open(unsigned pool, const char *extra)
{
	return open_batching_in("idem", pool, extra);
}

int
batch_lose_answer(idem_store *s, const char *op)
{
	return idem_store_mysql_lose_answer(s, op);
}

/*
 * A commit batch that updates fewer rows than it names leaves each
 * request to its row: an answer now stored under its owner is done (the
 * one this batch stored, and a repeat of the very answer stored before),
 * a repeat with another answer is fenced and changes nothing.
 */
Test(batch, a_short_update_told_row_by_row, .timeout = 60)
{
	idem_store *s = batch_open(16, "");
	static const char *const bodies[] = { "mine", "done", "new" };
	idem_batch_counts c0, c1;
	idem_reserve_result rr;
	unsigned char fp7[32] = { 7 };
	job r[3], cm[3];
	unsigned i;

	r[0] = reserve_job("short-new", 7, "a", 30000);
	r[1] = reserve_job("short-same", 7, "b", 30000);
	r[2] = reserve_job("short-other", 7, "c", 30000);
	for (i = 0; i < 3; i++)
		cr_assert_eq(reserve1(s, r[i].key, fp7, r[i].owner, 30000, &rr),
		    IDEM_RESERVE_ACQUIRED);
	/* b's and c's answers are stored before the batch */
	for (i = 1; i < 3; i++) {
		idem_store_key k = key_of(r[i].key);
		idem_stored_response a = { .status = 201,
		    .body = i == 1 ? "done" : "old", .body_len = i == 1 ? 4 : 3 };

		cr_assert_eq(idem_store_commit(s, TEST_OWNED(&k, r[i].owner,
		    60000), &a), IDEM_OK);
	}
	for (i = 0; i < 3; i++)
		cm[i] = commit_job(&r[i], r[i].owner, bodies[i]);
	cr_assert_eq(idem_store_batch_counts(s, &c0), 0);
	run_batch(s, cm, 3);
	cr_assert_eq(idem_store_batch_counts(s, &c1), 0);
	cr_expect_eq(c1.commit_statements - c0.commit_statements, 1);
	cr_expect_eq(c1.commit_rows - c0.commit_rows, 3);
	cr_expect_eq(cm[0].err, IDEM_OK, "the new answer: %d", (int)cm[0].err);
	cr_expect_eq(cm[1].err, IDEM_OK, "the same answer again: %d",
	    (int)cm[1].err);
	cr_expect_eq(cm[2].err, IDEM_ERR_NOT_FOUND, "another answer: %d",
	    (int)cm[2].err);
	for (i = 0; i < 3; i++) {
		const char *want = i == 2 ? "old" : bodies[i];

		cr_assert_eq(reserve1(s, r[i].key, fp7, "reader", 30000, &rr),
		    IDEM_RESERVE_COMMITTED);
		cr_expect(rr.response.body_len == strlen(want) &&
		    memcmp(rr.response.body, want, strlen(want)) == 0,
		    "key %s holds %.*s, not %s", r[i].key,
		    (int)rr.response.body_len, rr.response.body, want);
		idem_reserve_result_clear(&rr);
	}
	idem_store_close(s);
}

/*
 * In a database of its own (a trigger's DDL waits for every open
 * transaction on its table, and every other test's statements on that
 * table would wait behind it): reserves <name>-a and <name>-b as owners
 * <name>.a and <name>.b, makes the UPDATE that commits <name>.a's row
 * sleep secs (a trigger, <db>.slowed, dropped by the caller), and sends
 * both commits, bodies[0] and bodies[1], in one batch.  Fills r and cm;
 * returns the store (the caller closes it).
 */
static idem_store *
commit_batch_slowed(const mariadb *m, const char *name, const char *secs,
    const char *const bodies[2], job r[2], job cm[2])
{
	unsigned char fp7[32] = { 7 };
	char db[32], key[32], owner[32], sql[512];
	idem_reserve_result rr;
	idem_store *s;
	unsigned i;

	snprintf(db, sizeof(db), "batch_%s", name);
	cr_assert_eq(mariadb_new_database(m, db), 0);
	s = open_batching_in(db, 8, "");
	for (i = 0; i < 2; i++) {
		snprintf(key, sizeof(key), "%s-%c", name, 'a' + i);
		snprintf(owner, sizeof(owner), "%s.%c", name, 'a' + i);
		r[i] = reserve_job(key, 7, owner, 30000);
		cr_assert_eq(reserve1(s, r[i].key, fp7, r[i].owner, 30000, &rr),
		    IDEM_RESERVE_ACQUIRED);
	}
	snprintf(sql, sizeof(sql), "CREATE TRIGGER %s.slowed BEFORE UPDATE ON "
	    "%s.idempotency_keys FOR EACH ROW SET @d = IF(OLD.owner = '%s.a' "
	    "AND NEW.state = 'committed', SLEEP(%s), 0)", db, db, name, secs);
	free(mariadb_sql(m, sql));
	for (i = 0; i < 2; i++)
		cm[i] = commit_job(&r[i], r[i].owner, bodies[i]);
	run_batch(s, cm, 2);
	return s;
}

/* Drops commit_batch_slowed's trigger of database batch_<name>. */
static void
drop_slowed(const mariadb *m, const char *name)
{
	char sql[128];

	snprintf(sql, sizeof(sql), "DROP TRIGGER batch_%s.slowed", name);
	free(mariadb_sql(m, sql));
}

/*
 * A commit batch still running on the server when its connection times
 * out: each request reads its row before the batch is applied (still in
 * flight), then commits alone; that commit waits for the batch's row lock
 * and finds the row committed by the batch, with this very answer.  The
 * request is told its answer is stored, not that it was fenced.
 */
Test(batch, a_batch_applied_after_its_connection_timed_out, .timeout = 60)
{
	static const char *const bodies[] = { "mine-a", "mine-b" };
	job r[2], cm[2];
	idem_store *s;
	mariadb m;
	unsigned i;

	cr_assert_eq(mariadb_from_env(&m), 0);
	/* the batch's UPDATE of late-a outlasts the read timeout (2 s) */
	s = commit_batch_slowed(&m, "late", "2.5", bodies, r, cm);
	drop_slowed(&m, "late");
	for (i = 0; i < 2; i++) {
		cr_expect_eq(cm[i].err, IDEM_OK, "%s: its answer is stored, the "
		    "store said %d", r[i].key, (int)cm[i].err);
		expect_stored(s, r[i].key, bodies[i]);
	}
	idem_store_close(s);
}

/*
 * A batch that outlasts the read timeout and then the lock wait of the
 * request's own commit: that commit is told BUSY (its statement waited
 * for the batch's lock), and the batch then stores every answer.  The
 * retry (the lease thread's, which lost no connection) matches no row and
 * must read the row before it says fenced: its answer is stored, OK.
 */
Test(batch, a_retry_after_a_batch_slower_than_the_lock_wait, .timeout = 60)
{
	static const char *const bodies[] = { "slow-a", "slow-b" };
	job r[2], cm[2];
	idem_store *s;
	mariadb m;
	unsigned i;

	cr_assert_eq(mariadb_from_env(&m), 0);
	/* read timeout 2 s, then each commit's own lock wait of 1 s */
	s = commit_batch_slowed(&m, "slow", "5", bodies, r, cm);
	/* slow-b's row, updated by the batch before or after slow-a's: its
	 * own commit found it free, or waited for the batch's lock */
	cr_assert_eq(cm[0].err, IDEM_ERR_BUSY, "the store said %d",
	    (int)cm[0].err);
	cr_expect(cm[1].err == IDEM_OK || cm[1].err == IDEM_ERR_BUSY,
	    "the store said %d", (int)cm[1].err);
	/* the batch ends and commits; the retries come after it */
	for (i = 0; i < 100; i++) {
		char *n = mariadb_sql(&m, "SELECT COUNT(*) FROM "
		    "batch_slow.idempotency_keys WHERE state = 'committed'");
		int done = n != NULL && atoi(n) == 2;
		free(n);
		if (done)
			break;
		usleep(100000);
	}
	drop_slowed(&m, "slow");
	for (i = 0; i < 2; i++) {
		idem_stored_response a = { .status = 201, .body =
		    (char *)bodies[i], .body_len = strlen(bodies[i]) };
		idem_store_key k = key_of(r[i].key);

		cr_expect_eq(idem_store_commit(s, TEST_OWNED(&k, r[i].owner,
		    60000), &a), IDEM_OK, "%s: stored by the batch, not fenced",
		    r[i].key);
		expect_stored(s, r[i].key, bodies[i]);
	}
	idem_store_close(s);
}

/* A session of its own on m's server (user idem over TCP) that holds
 * key's row (scope zero) in an open transaction: a transactional route's
 * reservation.  Returns it (close with mysql_close: rolled back). */
static MYSQL *
hold_row(const mariadb *m, const char *key)
{
	char path[300], pw[128] = "", sql[512];
	MYSQL *db = mysql_init(NULL);
	FILE *fp;

	snprintf(path, sizeof(path), "%s/password", m->dir);
	cr_assert_not_null(fp = fopen(path, "r"));
	cr_assert_not_null(fgets(pw, sizeof(pw), fp));
	fclose(fp);
	pw[strcspn(pw, "\n")] = '\0';
	cr_assert_not_null(db);
	cr_assert_not_null(mysql_real_connect(db, "127.0.0.1", "idem", pw,
	    "idem", (unsigned)m->port, NULL, 0), "%s", mysql_error(db));
	snprintf(sql, sizeof(sql), "INSERT INTO idempotency_keys (scope_hash, "
	    "idem_key, fingerprint, state, owner, request_id, reserved_at, "
	    "lease_at, expires_at) VALUES (REPEAT(X'00', 32), '%s', "
	    "REPEAT(X'07', 32), 'in_flight', 'tx.1', 'r', NOW(), NOW(), NOW() + "
	    "INTERVAL 1 HOUR)", key);
	cr_assert_eq(mysql_query(db, "BEGIN"), 0, "%s", mysql_error(db));
	cr_assert_eq(mysql_query(db, sql), 0, "%s", mysql_error(db));
	return db;
}

/*
 * A row held by another session's open transaction: the batch's INSERT
 * waits for no lock, and either skips that row (INSERT IGNORE) or fails;
 * either way the others of the batch are reserved, by it or by their own
 * statements, and the held key is not reserved for anyone.
 */
Test(batch, a_locked_row_does_not_hold_the_batch, .timeout = 60)
{
	idem_store *s = batch_open(8, "");
	job r[4];
	char name[32], owner[32];
	unsigned i;
	mariadb m;
	MYSQL *held;

	cr_assert_eq(mariadb_from_env(&m), 0);
	for (i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "locked-%u", i);
		snprintf(owner, sizeof(owner), "l.%u", i);
		r[i] = reserve_job(name, 7, owner, 30000);
	}
	held = hold_row(&m, r[0].key);
	run_batch(s, r, 4);
	cr_expect(r[0].err != IDEM_OK || r[0].outcome !=
	    IDEM_RESERVE_ACQUIRED, "a key held elsewhere was reserved");
	for (i = 1; i < 4; i++) {
		cr_expect_eq(r[i].err, IDEM_OK, "job %u: %d", i, (int)r[i].err);
		cr_expect_eq(r[i].outcome, IDEM_RESERVE_ACQUIRED, "job %u: %d",
		    i, r[i].outcome);
	}
	mysql_close(held);
	idem_store_close(s);
}
