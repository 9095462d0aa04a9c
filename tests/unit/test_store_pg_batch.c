/*
 * test_store_pg_batch.c - the batching suite (batch_suite.c) on the
 * PostgreSQL store, and what is PostgreSQL's own: a batch slower than the
 * read timeout (a trigger that sleeps), a row held by a transaction.
 * Linked into test_store_postgres (its private PostgreSQL).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <libpq-fe.h>

#include "batch_suite.h"
#include "idem_config.h"
#include "idem_store_postgres.h"
#include "postgres.h"
#include "store_req.h"

/* A PostgreSQL store on database db of the tests' server, pool
 * connections, extra appended to its [postgres] section. */
static idem_store *
open_batching_in(const char *db, unsigned pool, const char *extra)
{
	char section[600];
	idem_store_opts o;
	idem_config *cfg;
	idem_store *s = NULL;
	postgres pg;

	cr_assert_eq(postgres_from_env(&pg), 0);
	postgres_conf(&pg, section, sizeof(section));
	cfg = batch_config("postgres", section, db, pool, extra);
	o = idem_store_opts_of(cfg, pool);
	cr_assert_eq(idem_store_postgres_new(&cfg->postgres, &o, &s), IDEM_OK);
	idem_config_free(cfg);
	return s;
}

idem_store *
batch_open(unsigned pool, const char *extra)
{
	return open_batching_in("idem", pool, extra);
}

int
batch_lose_answer(idem_store *s, const char *op)
{
	return idem_store_postgres_lose_answer(s, op);
}

/*
 * A commit batch still running on the server when its connection times
 * out (write- and read-timeout 1 s: 2 s; a trigger makes the UPDATE of
 * late-a's row sleep 2.5 s): the server answered nothing in time, so each
 * request is told the store is away (a statement of its own would wait
 * as long again), and the middleware would commit again from the lease
 * thread.  That retry, after the batch, finds the row committed by the
 * batch with its very answer (read back: stored, not fenced), or stores
 * it itself when the server ended the batch whose client was gone.
 */
Test(batch, a_batch_slower_than_the_read_timeout, .timeout = 60)
{
	static const char *const bodies[] = { "mine-a", "mine-b" };
	unsigned char fp7[32] = { 7 };
	idem_batch_counts c0, c1;
	idem_reserve_result rr;
	char key[32], owner[32];
	job r[2], cm[2];
	idem_store *s;
	postgres pg;
	unsigned i;

	cr_assert_eq(postgres_from_env(&pg), 0);
	cr_assert_eq(postgres_new_database(&pg, "batch_late"), 0);
	free(postgres_sql_on(&pg, "batch_late", "CREATE FUNCTION slowed() "
	    "RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF OLD.owner = "
	    "'late.a' AND NEW.state = 'committed' THEN PERFORM "
	    "pg_sleep(2.5); END IF; RETURN NEW; END $$"));
	free(postgres_sql_on(&pg, "batch_late", "CREATE TRIGGER slowed BEFORE "
	    "UPDATE ON idempotency_keys FOR EACH ROW EXECUTE FUNCTION "
	    "slowed()"));
	s = open_batching_in("batch_late", 8, "read-timeout = 1s\n"
	    "write-timeout = 1s\n");
	for (i = 0; i < 2; i++) {
		snprintf(key, sizeof(key), "late-%c", 'a' + i);
		snprintf(owner, sizeof(owner), "late.%c", 'a' + i);
		r[i] = reserve_job(key, 7, owner, 30000);
		cr_assert_eq(reserve1(s, r[i].key, fp7, r[i].owner, 30000, &rr),
		    IDEM_RESERVE_ACQUIRED);
		cm[i] = commit_job(&r[i], r[i].owner, bodies[i]);
	}
	cr_assert_eq(idem_store_batch_counts(s, &c0), 0);
	run_batch(s, cm, 2);
	cr_assert_eq(idem_store_batch_counts(s, &c1), 0);
	cr_expect_eq(c1.commit_statements, c0.commit_statements,
	    "the slowed batch came back in time: nothing was tested");
	for (i = 0; i < 2; i++) {
		idem_stored_response a = { .status = 201, .body =
		    (char *)bodies[i], .body_len = strlen(bodies[i]) };
		idem_store_key k = key_of(r[i].key);
		idem_err err;
		int tries = 0;

		cr_expect_eq(cm[i].err, IDEM_ERR_STORE, "%s: the store said %d",
		    r[i].key, (int)cm[i].err);
		/* the lease thread's retries, until one is answered */
		while ((err = idem_store_commit(s, TEST_OWNED(&k, r[i].owner,
		    60000), &a)) != IDEM_OK && err != IDEM_ERR_NOT_FOUND &&
		    ++tries < 20)
			;
		cr_expect_eq(err, IDEM_OK, "%s: its answer is stored, the "
		    "retry said %d", r[i].key, (int)err);
		expect_stored(s, r[i].key, bodies[i]);
	}
	idem_store_close(s);
}

/* A session of its own on pg's server (user idem over TCP) that holds
 * key's row (scope zero) in an open transaction: a transactional route's
 * reservation.  Returns it (PQfinish: rolled back). */
static PGconn *
hold_row(const postgres *pg, const char *key)
{
	char path[300], pw[128] = "", conninfo[512], sql[512];
	PGresult *res;
	PGconn *db;
	FILE *fp;

	snprintf(path, sizeof(path), "%s/password", pg->dir);
	cr_assert_not_null(fp = fopen(path, "r"));
	cr_assert_not_null(fgets(pw, sizeof(pw), fp));
	fclose(fp);
	pw[strcspn(pw, "\n")] = '\0';
	snprintf(conninfo, sizeof(conninfo), "host=127.0.0.1 port=%d user=idem "
	    "password=%s dbname=idem", pg->port, pw);
	db = PQconnectdb(conninfo);
	cr_assert_eq(PQstatus(db), CONNECTION_OK, "%s", PQerrorMessage(db));
	snprintf(sql, sizeof(sql), "BEGIN; INSERT INTO idempotency_keys "
	    "(scope_hash, idem_key, fingerprint, state, owner, request_id, "
	    "reserved_at, lease_at, lease_ms, expires_at) VALUES "
	    "(decode(repeat('00', 32), 'hex'), convert_to('%s', 'UTF8'), "
	    "decode(repeat('07', 32), 'hex'), 'in_flight', 'tx.1', 'r', now(), "
	    "now(), 30000, now() + interval '1 hour')", key);
	res = PQexec(db, sql);
	cr_assert_eq(PQresultStatus(res), PGRES_COMMAND_OK, "%s",
	    PQerrorMessage(db));
	PQclear(res);
	return db;
}

/*
 * A row held by another session's open transaction: the batch's INSERT
 * waits a millisecond for it and fails; every request sends its own
 * statement: the others are reserved, the held key is not reserved for
 * anyone.
 */
Test(batch, a_locked_row_does_not_hold_the_batch, .timeout = 60)
{
	idem_store *s = batch_open(8, "");
	idem_batch_counts c0, c1;
	char name[32], owner[32];
	postgres pg;
	PGconn *held;
	job r[4];
	unsigned i;

	cr_assert_eq(postgres_from_env(&pg), 0);
	for (i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "locked-%u", i);
		snprintf(owner, sizeof(owner), "l.%u", i);
		r[i] = reserve_job(name, 7, owner, 30000);
	}
	held = hold_row(&pg, r[0].key);
	cr_assert_eq(idem_store_batch_counts(s, &c0), 0);
	run_batch(s, r, 4);
	cr_assert_eq(idem_store_batch_counts(s, &c1), 0);
	cr_expect(r[0].err != IDEM_OK || r[0].outcome !=
	    IDEM_RESERVE_ACQUIRED, "a key held elsewhere was reserved");
	for (i = 1; i < 4; i++) {
		cr_expect_eq(r[i].err, IDEM_OK, "job %u: %d", i, (int)r[i].err);
		cr_expect_eq(r[i].outcome, IDEM_RESERVE_ACQUIRED, "job %u: %d",
		    i, r[i].outcome);
	}
	/* the batch was tried, and did not land */
	cr_expect_eq(c1.insert_statements, c0.insert_statements,
	    "a batch that waited for the held row was counted as sent");
	PQfinish(held);
	idem_store_close(s);
}

/* A reservation run in a thread of its own, which says when it ended. */
typedef struct lone {
	job j;
	atomic_int ended;
} lone;

static void *
run_lone(void *arg)
{
	lone *l = arg;
	idem_store_key k = key_of(l->j.key);
	idem_reserve_result rr;

	memset(&rr, 0, sizeof(rr));
	l->j.err = idem_store_reserve(l->j.s, TEST_REQ(&k, l->j.fp, l->j.owner,
	    "rid", 30000, 60000), &rr);
	l->j.outcome = (int)rr.outcome;
	idem_reserve_result_clear(&rr);
	atomic_store(&l->ended, 1);
	return NULL;
}

/*
 * A lone reservation whose key's row another transaction holds waits for
 * it (its lock wait, a second at least) out of the lane: a reservation
 * of another key sent meanwhile is not queued behind it, and comes back
 * first.  (Had the lone request's own statement held the lane, every
 * reservation of the process would wait for that row.)
 */
Test(batch, a_lone_request_waiting_for_a_lock_holds_no_lane, .timeout = 60)
{
	idem_store *s = batch_open(8, "");
	unsigned char fp7[32] = { 7 };
	idem_reserve_result rr;
	pthread_t t;
	postgres pg;
	PGconn *held;
	char other[64];
	lone l;

	cr_assert_eq(postgres_from_env(&pg), 0);
	memset(&l, 0, sizeof(l));
	l.j = reserve_job("lone-held", 7, "lone.1", 30000);
	l.j.s = s;
	atomic_init(&l.ended, 0);
	snprintf(other, sizeof(other), "lone-free-%d", (int)getpid());
	held = hold_row(&pg, l.j.key);
	cr_assert_eq(pthread_create(&t, NULL, run_lone, &l), 0);
	/* (it waits a second for the row: this only lets it start first) */
	usleep(200 * 1000);
	cr_expect_eq(reserve1(s, other, fp7, "lone.2", 30000, &rr),
	    IDEM_RESERVE_ACQUIRED);
	idem_reserve_result_clear(&rr);
	cr_expect_eq(atomic_load(&l.ended), 0, "the reservation of another key "
	    "came back only after the one waiting for a held row");
	pthread_join(t, NULL);
	cr_expect(l.j.err != IDEM_OK || l.j.outcome != IDEM_RESERVE_ACQUIRED,
	    "a key held elsewhere was reserved");
	PQfinish(held);
	idem_store_close(s);
}

/*
 * A commit that matches no row reads it: its very answer stored under
 * its owner (by a batch that landed after its client gave up, the lease
 * thread's retry after BUSY) is OK, not fenced; another answer, or
 * another owner, is fenced and changes nothing.
 */
Test(batch, a_commit_matching_no_row_reads_it_back, .timeout = 30)
{
	idem_store *s = batch_open(4, "batch = false\n");
	unsigned char fp7[32] = { 7 };
	idem_reserve_result rr;
	job r = reserve_job("again", 7, "again.1", 30000);
	idem_store_key k = key_of(r.key);
	idem_stored_response a = { .status = 201, .body = "first",
	    .body_len = 5 }, b = { .status = 201, .body = "other",
	    .body_len = 5 };

	cr_assert_eq(reserve1(s, r.key, fp7, r.owner, 30000, &rr),
	    IDEM_RESERVE_ACQUIRED);
	cr_assert_eq(idem_store_commit(s, TEST_OWNED(&k, r.owner, 60000), &a),
	    IDEM_OK);
	cr_expect_eq(idem_store_commit(s, TEST_OWNED(&k, r.owner, 60000), &a),
	    IDEM_OK, "the very answer, stored under its owner: not fenced");
	cr_expect_eq(idem_store_commit(s, TEST_OWNED(&k, r.owner, 60000), &b),
	    IDEM_ERR_NOT_FOUND, "another answer was said stored");
	cr_expect_eq(idem_store_commit(s, TEST_OWNED(&k, "again.2", 60000),
	    &a), IDEM_ERR_NOT_FOUND, "another owner was said to have stored");
	expect_stored(s, r.key, "first");
	idem_store_close(s);
}
