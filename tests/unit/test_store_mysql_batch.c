/*
 * test_store_mysql_batch.c - the MySQL store's batching (group commit of
 * concurrent reservations and commits): a statement that carries keys of
 * every kind gives each request what its own statement would have, and a
 * batch whose answer is lost with its connection loses nothing.  Batches
 * are made certain with idem_store_batch_gather and checked with
 * idem_store_batch_counts: counts, never times.  Linked into
 * test_store_mysql (its private MariaDB).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <mysql.h>

#include "idem_batch.h"
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
	char text[1024], section[600], *at;
	idem_config *cfg;
	idem_store *s = NULL;
	mariadb m;

	cr_assert_eq(mariadb_from_env(&m), 0);
	mariadb_conf(&m, section, sizeof(section));
	/* the section names database idem: cut there, name db instead */
	cr_assert_not_null(at = strstr(section, "database = idem\n"));
	*at = '\0';
	snprintf(text, sizeof(text), "[idempotency]\nstore = mysql\n%s"
	    "database = %s\n%spool-size = %u\n%s", section, db,
	    at + strlen("database = idem\n"), pool, extra);
	cr_assert_eq(idem_config_load_string(text, "t.conf", &cfg), IDEM_OK);
	cr_assert_eq(test_mysql_store(cfg, pool, &s), IDEM_OK);
	idem_config_free(cfg);
	return s;
}

/* The same on the database the tests share. */
static idem_store *
open_batching(unsigned pool, const char *extra)
{
	return open_batching_in("idem", pool, extra);
}

/* One request of a batch: its key, fingerprint, owner and lease; what
 * the store answered. */
typedef struct job {
	idem_store *s;
	char key[64];
	unsigned char fp[32];
	char owner[32];
	uint64_t ttl_ms;
	int commit;                /* commit instead of reserve */
	char body[32];
	idem_err err;
	int outcome;
	char found_owner[IDEM_OWNER_MAX + 1];
} job;

static idem_store_key
key_of(const char *key)
{
	idem_store_key k;

	memset(&k, 0, sizeof(k));
	k.key_len = (size_t)snprintf(k.key, sizeof(k.key), "%s", key);
	return k;
}

static void *
run_job(void *arg)
{
	job *j = arg;
	idem_store_key k = key_of(j->key);
	idem_reserve_result rr;

	if (j->commit) {
		idem_stored_response a = { .status = 201, .body = j->body,
		    .body_len = strlen(j->body) };

		j->err = idem_store_commit(j->s, TEST_OWNED(&k, j->owner, 60000),
		    &a);
		return NULL;
	}
	memset(&rr, 0, sizeof(rr));
	j->err = idem_store_reserve(j->s, TEST_REQ(&k, j->fp, j->owner, "rid",
	    j->ttl_ms, 60000), &rr);
	j->outcome = (int)rr.outcome;
	snprintf(j->found_owner, sizeof(j->found_owner), "%s", rr.owner);
	idem_reserve_result_clear(&rr);
	return NULL;
}

/* Runs the n jobs at once, after asking the store to send them in one
 * statement per lane. */
static void
run_batch(idem_store *s, job *jobs, unsigned n)
{
	pthread_t t[32];
	unsigned i;

	cr_assert_leq(n, 32);
	cr_assert_eq(idem_store_batch_gather(s, jobs[0].commit ?
	    "commit" : "insert", n), 0);
	for (i = 0; i < n; i++) {
		jobs[i].s = s;
		cr_assert_eq(pthread_create(&t[i], NULL, run_job, &jobs[i]), 0);
	}
	for (i = 0; i < n; i++)
		pthread_join(t[i], NULL);
}

static int
reserve1(idem_store *s, const char *key, const unsigned char *fp,
    const char *owner, uint64_t ttl_ms, idem_reserve_result *rr)
{
	idem_store_key k = key_of(key);

	memset(rr, 0, sizeof(*rr));
	cr_assert_eq(idem_store_reserve(s, TEST_REQ(&k, fp, owner, "rid",
	    ttl_ms, 60000), rr), IDEM_OK);
	return (int)rr->outcome;
}

static job
reserve_job(const char *key, unsigned char fp, const char *owner,
    uint64_t ttl_ms)
{
	job j;

	memset(&j, 0, sizeof(j));
	snprintf(j.key, sizeof(j.key), "%s-%d", key, (int)getpid());
	j.fp[0] = fp;
	snprintf(j.owner, sizeof(j.owner), "%s", owner);
	j.ttl_ms = ttl_ms;
	return j;
}

static job
commit_job(const job *of, const char *owner, const char *body)
{
	job j = *of;

	j.commit = 1;
	snprintf(j.owner, sizeof(j.owner), "%s", owner);
	snprintf(j.body, sizeof(j.body), "%s", body);
	return j;
}

/*
 * One INSERT carries new keys, a committed key, an in-flight key of
 * another fingerprint, a stale one to take over and the same new key
 * twice: each request gets what it would alone, and the duplicate pair
 * has one winner.  Then one commit batch carries every owner's answer,
 * an intruder's and a second commit of an answer already stored: each
 * answer lands on its own key, the intruder and the repeat are fenced.
 */
Test(batch, one_statement_for_every_kind_of_key, .timeout = 60)
{
	idem_store *s = open_batching(16, "");
	idem_batch_counts c0, c1, c2;
	idem_reserve_result rr;
	job r[8], cm[7];
	unsigned char fp7[32] = { 7 }, fp9[32] = { 9 };
	unsigned i, won;
	char body[32];

	r[0] = reserve_job("new-a", 7, "n.a", 30000);
	r[1] = reserve_job("new-b", 7, "n.b", 30000);
	r[2] = reserve_job("new-c", 7, "n.c", 30000);
	r[3] = reserve_job("committed", 7, "c.2", 30000);
	r[4] = reserve_job("other-fp", 7, "x.2", 30000);
	r[5] = reserve_job("stale", 7, "s.2", 1);
	r[6] = reserve_job("twice", 7, "t.1", 30000);
	r[7] = reserve_job("twice", 7, "t.2", 30000);
	/* what is there before the batch, sent alone */
	cr_assert_eq(reserve1(s, r[3].key, fp7, "c.1", 30000, &rr),
	    IDEM_RESERVE_ACQUIRED);
	{
		idem_store_key k = key_of(r[3].key);
		idem_stored_response a = { .status = 201, .body = "first",
		    .body_len = 5 };

		cr_assert_eq(idem_store_commit(s, TEST_OWNED(&k, "c.1", 60000),
		    &a), IDEM_OK);
	}
	cr_assert_eq(reserve1(s, r[4].key, fp9, "x.1", 30000, &rr),
	    IDEM_RESERVE_ACQUIRED);
	cr_assert_eq(reserve1(s, r[5].key, fp7, "s.1", 1, &rr),
	    IDEM_RESERVE_ACQUIRED);
	usleep(20 * 1000);    /* s.1's lease is older than r[5]'s 1 ms */

	cr_assert_eq(idem_store_batch_counts(s, &c0), 0);
	run_batch(s, r, 8);
	cr_assert_eq(idem_store_batch_counts(s, &c1), 0);
	cr_expect_eq(c1.insert_statements - c0.insert_statements, 1,
	    "the 8 reservations went in %llu statements",
	    c1.insert_statements - c0.insert_statements);
	cr_expect_eq(c1.insert_rows - c0.insert_rows, 8);
	for (i = 0; i < 8; i++)
		cr_expect_eq(r[i].err, IDEM_OK, "job %u: %d", i, (int)r[i].err);
	for (i = 0; i < 3; i++)
		cr_expect_eq(r[i].outcome, IDEM_RESERVE_ACQUIRED, "job %u: %d", i,
		    r[i].outcome);
	cr_expect_eq(r[3].outcome, IDEM_RESERVE_COMMITTED);
	cr_expect_eq(r[4].outcome, IDEM_RESERVE_IN_FLIGHT);
	cr_expect_str_eq(r[4].found_owner, "x.1");
	cr_expect_eq(r[5].outcome, IDEM_RESERVE_TAKEN_OVER, "stale: %d",
	    r[5].outcome);
	won = (r[6].outcome == IDEM_RESERVE_ACQUIRED) +
	    (r[7].outcome == IDEM_RESERVE_ACQUIRED);
	cr_expect_eq(won, 1, "the same key twice in one batch: %u winners",
	    won);
	cr_expect(r[6].outcome == IDEM_RESERVE_IN_FLIGHT ||
	    r[7].outcome == IDEM_RESERVE_IN_FLIGHT);

	/* the commits: each owner its own body; an intruder on new-a; the
	 * loser of "twice"; c.1 again on the answer it stored */
	for (i = 0; i < 3; i++) {
		snprintf(body, sizeof(body), "body-%u", i);
		cm[i] = commit_job(&r[i], r[i].owner, body);
	}
	cm[3] = commit_job(&r[5], "s.2", "taken");
	cm[4] = commit_job(&r[0], "intruder", "evil");
	cm[5] = commit_job(&r[6], r[6].outcome == IDEM_RESERVE_ACQUIRED ?
	    "t.2" : "t.1", "loser");
	cm[6] = commit_job(&r[3], "c.1", "again");
	run_batch(s, cm, 7);
	cr_assert_eq(idem_store_batch_counts(s, &c2), 0);
	cr_expect_eq(c2.commit_statements - c1.commit_statements, 1,
	    "the commits went in %llu statements",
	    c2.commit_statements - c1.commit_statements);
	cr_expect_eq(c2.commit_rows - c1.commit_rows, 7,
	    "the commit statement named %llu rows",
	    c2.commit_rows - c1.commit_rows);
	for (i = 0; i < 4; i++)
		cr_expect_eq(cm[i].err, IDEM_OK, "commit %u: %d", i,
		    (int)cm[i].err);
	for (i = 4; i < 7; i++)
		cr_expect_eq(cm[i].err, IDEM_ERR_NOT_FOUND, "commit %u: %d", i,
		    (int)cm[i].err);
	/* every key holds its own owner's answer */
	for (i = 0; i < 4; i++) {
		const job *of = i < 3 ? &r[i] : &r[5];

		cr_assert_eq(reserve1(s, of->key, fp7, "reader", 30000, &rr),
		    IDEM_RESERVE_COMMITTED, "key %s", of->key);
		cr_expect_eq(rr.response.body_len, strlen(cm[i].body));
		cr_expect(rr.response.body_len == strlen(cm[i].body) &&
		    memcmp(rr.response.body, cm[i].body,
		    rr.response.body_len) == 0, "key %s holds %.*s, not %s",
		    of->key, (int)rr.response.body_len, rr.response.body,
		    cm[i].body);
		idem_reserve_result_clear(&rr);
	}
	cr_assert_eq(reserve1(s, r[3].key, fp7, "reader", 30000, &rr),
	    IDEM_RESERVE_COMMITTED);
	cr_expect(rr.response.body_len == 5 &&
	    memcmp(rr.response.body, "first", 5) == 0);
	idem_reserve_result_clear(&rr);
	idem_store_close(s);
}

/*
 * A commit batch that updates fewer rows than it names leaves each
 * request to its row: an answer now stored under its owner is done (the
 * one this batch stored, and a repeat of the very answer stored before),
 * a repeat with another answer is fenced and changes nothing.
 */
Test(batch, a_short_update_told_row_by_row, .timeout = 60)
{
	idem_store *s = open_batching(16, "");
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

/* Expects key's record in s to be committed with body. */
static void
expect_stored(idem_store *s, const char *key, const char *body)
{
	unsigned char fp7[32] = { 7 };
	idem_reserve_result rr;

	cr_assert_eq(reserve1(s, key, fp7, "reader", 30000, &rr),
	    IDEM_RESERVE_COMMITTED);
	cr_expect(rr.response.body_len == strlen(body) &&
	    memcmp(rr.response.body, body, strlen(body)) == 0,
	    "key %s holds %.*s", key, (int)rr.response.body_len,
	    rr.response.body);
	idem_reserve_result_clear(&rr);
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

/*
 * A batch applied whose answer is lost with its connection: every
 * request it carried sends its own statement on a new connection and
 * recognises its row (reservations ACQUIRED, each under its own owner;
 * commits OK, each answer its own), and none runs twice.
 */
Test(batch, answer_lost_mid_batch, .timeout = 60)
{
	idem_store *s = open_batching(8, "");
	idem_batch_counts c0, c1;
	idem_reserve_result rr;
	unsigned char fp7[32] = { 7 };
	job r[6], cm[6];
	char name[32], body[32];
	unsigned i;

	for (i = 0; i < 6; i++) {
		snprintf(name, sizeof(name), "lost-%u", i);
		snprintf(body, sizeof(body), "o.%u", i);
		r[i] = reserve_job(name, 7, body, 30000);
	}
	cr_assert_eq(idem_store_batch_counts(s, &c0), 0);
	cr_assert_eq(idem_store_mysql_lose_answer(s, "insert"), 0);
	run_batch(s, r, 6);
	cr_assert_eq(idem_store_batch_counts(s, &c1), 0);
	cr_expect_eq(c1.insert_statements - c0.insert_statements, 1);
	for (i = 0; i < 6; i++) {
		cr_expect_eq(r[i].err, IDEM_OK);
		cr_expect_eq(r[i].outcome, IDEM_RESERVE_ACQUIRED,
		    "lost batch, job %u: %d", i, r[i].outcome);
		cr_assert_eq(reserve1(s, r[i].key, fp7, "other", 30000, &rr),
		    IDEM_RESERVE_IN_FLIGHT);
		cr_expect_str_eq(rr.owner, r[i].owner);
		idem_reserve_result_clear(&rr);
	}
	for (i = 0; i < 6; i++) {
		snprintf(body, sizeof(body), "answer-%u", i);
		cm[i] = commit_job(&r[i], r[i].owner, body);
	}
	cr_assert_eq(idem_store_mysql_lose_answer(s, "commit"), 0);
	run_batch(s, cm, 6);
	for (i = 0; i < 6; i++) {
		cr_expect_eq(cm[i].err, IDEM_OK, "lost commit %u: %d", i,
		    (int)cm[i].err);
		cr_assert_eq(reserve1(s, r[i].key, fp7, "other", 30000, &rr),
		    IDEM_RESERVE_COMMITTED);
		cr_expect(rr.response.body_len == strlen(cm[i].body) &&
		    memcmp(rr.response.body, cm[i].body,
		    rr.response.body_len) == 0);
		idem_reserve_result_clear(&rr);
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
	idem_store *s = open_batching(8, "");
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

/* batch = false: no lanes, every statement the request's own. */
Test(batch, off, .timeout = 30)
{
	idem_store *s = open_batching(4, "batch = false\n");
	idem_batch_counts c;
	unsigned char fp7[32] = { 7 };
	idem_reserve_result rr;
	char key[64];

	snprintf(key, sizeof(key), "off-%d", (int)getpid());
	cr_expect_eq(idem_store_batch_gather(s, "insert", 2), -1);
	cr_expect_eq(idem_store_batch_counts(s, &c), -1);
	cr_expect_eq(reserve1(s, key, fp7, "o.1", 30000, &rr),
	    IDEM_RESERVE_ACQUIRED);
	idem_store_close(s);
}
