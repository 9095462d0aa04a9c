/*
 * batch_suite.c - what a store's batching must do (batch_suite.h): a
 * statement that carries keys of every kind gives each request what its
 * own statement would have, and a batch whose answer is lost with its
 * connection loses nothing.  Batches are made certain with
 * idem_store_batch_gather and checked with idem_store_batch_counts:
 * counts, never times.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "batch_suite.h"
#include "idem_config.h"
#include "store_req.h"

idem_config *
batch_config(const char *store, const char *section, const char *db,
    unsigned pool, const char *extra)
{
	char text[1024];
	const char *at = strstr(section, "database = idem\n");
	idem_config *cfg;

	cr_assert_not_null(at, "%s", section);
	snprintf(text, sizeof(text), "[idempotency]\nstore = %s\n%.*s"
	    "database = %s\n%spool-size = %u\n%s", store, (int)(at - section),
	    section, db, at + strlen("database = idem\n"), pool, extra);
	cr_assert_eq(idem_config_load_string(text, "t.conf", &cfg), IDEM_OK,
	    "%s", text);
	return cfg;
}

idem_store_key
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
void
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

int
reserve1(idem_store *s, const char *key, const unsigned char *fp,
    const char *owner, uint64_t ttl_ms, idem_reserve_result *rr)
{
	idem_store_key k = key_of(key);

	memset(rr, 0, sizeof(*rr));
	cr_assert_eq(idem_store_reserve(s, TEST_REQ(&k, fp, owner, "rid",
	    ttl_ms, 60000), rr), IDEM_OK);
	return (int)rr->outcome;
}

job
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

job
commit_job(const job *of, const char *owner, const char *body)
{
	job j = *of;

	j.commit = 1;
	snprintf(j.owner, sizeof(j.owner), "%s", owner);
	snprintf(j.body, sizeof(j.body), "%s", body);
	return j;
}

/* Expects key's record in s to be committed with body. */
void
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
 * One INSERT carries new keys, a committed key, an in-flight key of
 * another fingerprint, a stale one to take over and the same new key
 * twice: each request gets what it would alone, and the duplicate pair
 * has one winner.  Then one commit batch carries every owner's answer,
 * an intruder's and a second commit of an answer already stored: each
 * answer lands on its own key, the intruder and the repeat are fenced.
 */
Test(batch, one_statement_for_every_kind_of_key, .timeout = 60)
{
	idem_store *s = batch_open(16, "");
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
 * A batch applied whose answer is lost with its connection: every
 * request it carried sends its own statement on a new connection and
 * recognises its row (reservations ACQUIRED, each under its own owner;
 * commits OK, each answer its own), and none runs twice.
 */
Test(batch, answer_lost_mid_batch, .timeout = 60)
{
	idem_store *s = batch_open(8, "");
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
	cr_assert_eq(batch_lose_answer(s, "insert"), 0);
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
	cr_assert_eq(batch_lose_answer(s, "commit"), 0);
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

/* batch = false: no lanes, every statement the request's own. */
Test(batch, off, .timeout = 30)
{
	idem_store *s = batch_open(4, "batch = false\n");
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
