/*
 * store_suite.c - what every store must do, tested against the interface.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "store_suite.h"
#include "store_req.h"

static idem_store *st;
static const unsigned char FP1[32] = { 1 }, FP2[32] = { 2 };

static void
open_store(void)
{
	st = suite_open();
	cr_assert_not_null(st);
}

static void
close_store(void)
{
	idem_store_close(st);
}

static void
msleep(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* A key unique to this test run (shared stores keep other runs' rows). */
static idem_store_key
key(const char *name, unsigned char scope)
{
	static unsigned long run;
	idem_store_key k;

	if (run == 0)
		run = (unsigned long)time(NULL) ^ ((unsigned long)getpid() << 16);
	memset(&k, 0, sizeof(k));
	k.scope[0] = scope;
	k.key_len = (size_t)snprintf(k.key, sizeof(k.key), "%s-%lx", name, run);
	return k;
}

static idem_stored_response
answer(int status, const char *body)
{
	idem_stored_response r;

	r.status = status;
	r.headers = "Content-Type: application/json\r\nX-A: b\r\n";
	r.headers_len = strlen(r.headers);
	r.body = (char *)body;
	r.body_len = strlen(body);
	return r;
}

static idem_reserve_outcome
reserve(const idem_store_key *k, const unsigned char *fp, const char *owner,
    uint64_t ttl, idem_reserve_result *rr)
{
	cr_assert_eq(idem_store_reserve(st, TEST_REQ(k, fp, owner,
	    "rid-of-owner", ttl, 60000), rr), IDEM_OK);
	return rr->outcome;
}

Test(store, acquire_commit_replay, .init = open_store, .fini = close_store)
{
	idem_store_key k = key("acr", 0);
	idem_stored_response a = answer(201, "{\"x\":1}");
	idem_reserve_result rr;

	cr_expect_eq(reserve(&k, FP1, "o1", 30000, &rr), IDEM_RESERVE_ACQUIRED);
	idem_reserve_result_clear(&rr);
	cr_assert_eq(idem_store_commit(st, TEST_OWNED(&k, "o1", 60000), &a),
	    IDEM_OK);
	cr_expect_eq(reserve(&k, FP1, "o2", 30000, &rr),
	    IDEM_RESERVE_COMMITTED);
	cr_expect_eq(memcmp(rr.fingerprint, FP1, 32), 0);
	cr_expect_eq(rr.response.status, 201);
	cr_expect_eq(rr.response.body_len, 7);
	cr_expect_eq(memcmp(rr.response.body, "{\"x\":1}", 7), 0);
	cr_expect_eq(rr.response.headers_len, a.headers_len);
	cr_expect_eq(memcmp(rr.response.headers, a.headers, a.headers_len), 0);
	idem_reserve_result_clear(&rr);
	/* a different fingerprint still finds the record (the caller
	 * answers conflict) and never replaces it */
	cr_expect_eq(reserve(&k, FP2, "o3", 30000, &rr),
	    IDEM_RESERVE_COMMITTED);
	cr_expect_eq(memcmp(rr.fingerprint, FP1, 32), 0);
	idem_reserve_result_clear(&rr);
}

Test(store, in_flight_seen_by_others, .init = open_store, .fini = close_store)
{
	idem_store_key k = key("inf", 0);
	idem_reserve_result rr;

	cr_expect_eq(reserve(&k, FP1, "o1", 30000, &rr), IDEM_RESERVE_ACQUIRED);
	cr_expect_eq(reserve(&k, FP1, "o2", 30000, &rr), IDEM_RESERVE_IN_FLIGHT);
	cr_expect_str_eq(rr.owner, "o1");
	cr_expect_str_eq(rr.request_id, "rid-of-owner");
	cr_expect_lt(rr.lease_age_ms, 5000);
	cr_expect_eq(memcmp(rr.fingerprint, FP1, 32), 0);
	cr_expect_eq(reserve(&k, FP2, "o3", 30000, &rr), IDEM_RESERVE_IN_FLIGHT);
	cr_expect_eq(memcmp(rr.fingerprint, FP1, 32), 0);
}

Test(store, owner_checks, .init = open_store, .fini = close_store)
{
	idem_store_key k = key("own", 0);
	idem_stored_response a = answer(200, "ok"), b = answer(200, "other");
	idem_reserve_result rr;
	idem_err err;

	cr_expect_eq(reserve(&k, FP1, "o1", 30000, &rr), IDEM_RESERVE_ACQUIRED);
	cr_expect_eq(idem_store_commit(st, TEST_OWNED(&k, "intruder", 60000),
	    &a),
	    IDEM_ERR_NOT_FOUND);
	cr_expect_eq(idem_store_release(st, TEST_OWNED(&k, "intruder", 0)),
	    IDEM_ERR_NOT_FOUND);
	cr_expect_eq(idem_store_renew(st, TEST_OWNED(&k, "intruder", 0)),
	    IDEM_ERR_NOT_FOUND);
	/* untouched: still in flight for o1 */
	cr_expect_eq(reserve(&k, FP1, "o2", 30000, &rr), IDEM_RESERVE_IN_FLIGHT);
	cr_expect_str_eq(rr.owner, "o1");
	cr_expect_eq(idem_store_renew(st, TEST_OWNED(&k, "o1", 0)), IDEM_OK);
	cr_expect_eq(idem_store_release(st, TEST_OWNED(&k, "o1", 0)), IDEM_OK);
	cr_expect_eq(idem_store_release(st, TEST_OWNED(&k, "o1", 0)),
	    IDEM_ERR_NOT_FOUND);
	cr_expect_eq(idem_store_commit(st, TEST_OWNED(&k, "o1", 60000), &a),
	    IDEM_ERR_NOT_FOUND);
	cr_expect_eq(reserve(&k, FP2, "o2", 30000, &rr), IDEM_RESERVE_ACQUIRED);
	/* a committed record cannot be committed or released again (a store
	 * may say OK to the very answer it holds under that owner: true) */
	cr_expect_eq(idem_store_commit(st, TEST_OWNED(&k, "o2", 60000), &a),
	    IDEM_OK);
	err = idem_store_commit(st, TEST_OWNED(&k, "o2", 60000), &a);
	cr_expect(err == IDEM_ERR_NOT_FOUND || err == IDEM_OK, "again: %d",
	    (int)err);
	cr_expect_eq(idem_store_commit(st, TEST_OWNED(&k, "o2", 60000), &b),
	    IDEM_ERR_NOT_FOUND);
	cr_expect_eq(idem_store_release(st, TEST_OWNED(&k, "o2", 0)),
	    IDEM_ERR_NOT_FOUND);
	cr_expect_eq(reserve(&k, FP2, "o3", 30000, &rr), IDEM_RESERVE_COMMITTED);
	idem_reserve_result_clear(&rr);
}

Test(store, stale_takeover_fences_old_owner, .init = open_store,
    .fini = close_store)
{
	idem_store_key k = key("stale", 0);
	idem_stored_response a = answer(201, "new");
	idem_reserve_result rr;

	cr_expect_eq(reserve(&k, FP1, "old", 100, &rr), IDEM_RESERVE_ACQUIRED);
	msleep(250);
	/* another fingerprint never takes over */
	cr_expect_eq(reserve(&k, FP2, "other", 100, &rr),
	    IDEM_RESERVE_IN_FLIGHT);
	/* judged by old's 100 ms lease; new holds it for 5 s */
	cr_expect_eq(reserve(&k, FP1, "new", 5000, &rr),
	    IDEM_RESERVE_TAKEN_OVER);
	cr_expect_str_eq(rr.owner, "old");
	cr_expect_geq(rr.lease_age_ms, 100);
	/* the old owner is fenced off */
	cr_expect_eq(idem_store_commit(st, TEST_OWNED(&k, "old", 60000), &a),
	    IDEM_ERR_NOT_FOUND);
	cr_expect_eq(idem_store_release(st, TEST_OWNED(&k, "old", 0)),
	    IDEM_ERR_NOT_FOUND);
	cr_expect_eq(idem_store_renew(st, TEST_OWNED(&k, "old", 0)),
	    IDEM_ERR_NOT_FOUND);
	/* the new owner's lease is fresh (well under its 5 s), whatever the
	 * taker's own: 100 ms, long past on a slow machine */
	cr_expect_eq(reserve(&k, FP1, "third", 100, &rr),
	    IDEM_RESERVE_IN_FLIGHT);
	cr_expect_str_eq(rr.owner, "new");
	cr_expect_eq(idem_store_commit(st, TEST_OWNED(&k, "new", 60000), &a),
	    IDEM_OK);
	cr_assert_eq(reserve(&k, FP1, "fourth", 100, &rr),
	    IDEM_RESERVE_COMMITTED);
	cr_expect_eq(memcmp(rr.response.body, "new", 3), 0);
	idem_reserve_result_clear(&rr);
}

Test(store, renewal_keeps_lease, .init = open_store, .fini = close_store)
{
	idem_store_key k = key("renew", 0);
	idem_reserve_result rr;
	int i;

	/* an inflight-ttl of 1 s, renewed every 250 ms for 2 s: the margin
	 * between a renewal and the next look stays wide on a loaded machine */
	cr_expect_eq(reserve(&k, FP1, "slow", 1000, &rr),
	    IDEM_RESERVE_ACQUIRED);
	for (i = 0; i < 8; i++) {
		msleep(250);
		cr_assert_eq(idem_store_renew(st, TEST_OWNED(&k, "slow", 0)),
		    IDEM_OK);
	}
	/* 2 s after the reservation, but renewed just now */
	cr_expect_eq(reserve(&k, FP1, "taker", 1000, &rr),
	    IDEM_RESERVE_IN_FLIGHT);
	cr_expect_str_eq(rr.owner, "slow");
}

/*
 * Issue 35.1: a lease is judged by the length its holder took (its
 * inflight-ttl, kept in the record), never by the taker's: an owner at
 * 5 s whose lease is up to 0.9 s old is not taken over by a taker at
 * 0.1 s (a reload that lowered inflight-ttl, a node with another config),
 * however often it looks.  A taker at 30 s still takes over a holder at
 * 0.3 s once that has lapsed.
 */
Test(store, lease_judged_by_its_holder_not_the_taker, .init = open_store,
    .fini = close_store)
{
	idem_store_key k = key("holderlease", 0), k2 = key("shortlease", 0);
	idem_store_record rec;
	idem_reserve_result rr;
	int i;

	cr_expect_eq(reserve(&k, FP1, "long", 5000, &rr),
	    IDEM_RESERVE_ACQUIRED);
	for (i = 0; i < 6; i++) {
		msleep(300);
		/* the lease 0.3 to 0.9 s old, renewed once: each look is
		 * past the taker's 0.1 s */
		if (i % 4 == 3)
			cr_assert_eq(idem_store_renew(st, TEST_REQ(&k, NULL,
			    "long", NULL, 5000, 0)), IDEM_OK);
		cr_assert_eq(reserve(&k, FP1, "short", 100, &rr),
		    IDEM_RESERVE_IN_FLIGHT, "look %d: taken over by the "
		    "taker's inflight-ttl", i);
		cr_expect_str_eq(rr.owner, "long");
		cr_expect_eq(rr.lease_ms, 5000);
	}
	if (idem_store_lookup(st, &k, &rec) == IDEM_OK) {
		cr_expect_eq(rec.lease_ms, 5000);
		cr_expect_str_eq(rec.owner, "long");
	}
	/* a renewal without a length of its own keeps the record's */
	cr_assert_eq(idem_store_renew(st, TEST_OWNED(&k, "long", 0)), IDEM_OK);
	msleep(300);
	cr_expect_eq(reserve(&k, FP1, "short", 100, &rr),
	    IDEM_RESERVE_IN_FLIGHT);
	/* a taker's longer inflight-ttl does not spare a lapsed short lease */
	cr_expect_eq(reserve(&k2, FP1, "brief", 300, &rr),
	    IDEM_RESERVE_ACQUIRED);
	msleep(600);
	cr_expect_eq(reserve(&k2, FP1, "patient", 30000, &rr),
	    IDEM_RESERVE_TAKEN_OVER);
	cr_expect_str_eq(rr.owner, "brief");
	cr_expect_eq(rr.lease_ms, 300);
	/* and the taker's lease is its own 30 s now */
	cr_expect_eq(reserve(&k2, FP1, "third", 100, &rr),
	    IDEM_RESERVE_IN_FLIGHT);
	cr_expect_str_eq(rr.owner, "patient");
	cr_expect_eq(rr.lease_ms, 30000);
}

Test(store, expiry, .init = open_store, .fini = close_store)
{
	idem_store_key k = key("exp", 0);
	idem_stored_response a = answer(200, "old");
	idem_reserve_result rr;

	cr_expect_eq(reserve(&k, FP1, "o1", 30000, &rr), IDEM_RESERVE_ACQUIRED);
	cr_assert_eq(idem_store_commit(st, TEST_OWNED(&k, "o1", 300), &a),
	    IDEM_OK);
	cr_expect_eq(reserve(&k, FP1, "o2", 30000, &rr), IDEM_RESERVE_COMMITTED);
	idem_reserve_result_clear(&rr);
	msleep(1100);
	/* past its lifetime: as if absent, whatever the fingerprint */
	cr_expect_eq(reserve(&k, FP2, "o3", 30000, &rr), IDEM_RESERVE_ACQUIRED);
}

/* Issue 40: a committed record past its lifetime is a tombstone for its
 * tombstone-lifetime: a late retry, of this request or another, is
 * refused (its first status and when it was used told), before and after
 * a purge drops the answer, unless the policy runs expired keys; after
 * the tombstone's end, or without one, the key is new. */
Test(store, expired_key_refused_until_its_tombstone_ends, .init = open_store,
    .fini = close_store)
{
	idem_store_key k = key("tomb", 0), k2 = key("tomb-ends", 0),
	    k3 = key("tomb-none", 0);
	idem_key_policy pol = { .lease_ms = 30000, .lifetime_ms = 300,
	    .tombstone_ms = 1000 }, run = pol, none = pol;
	idem_store_req rq = { .policy = &pol }, rq2 = rq, rq3 = { .policy =
	    &none }, rrun = { .policy = &run };
	idem_stored_response a = answer(201, "made");
	idem_reserve_result rr;
	idem_store_record rec;
	unsigned long purged = 0;

	run.run_expired = 1;
	none.tombstone_ms = 0;
	test_req_fill(&rq, &k, FP1, "o1", "r1");
	test_req_fill(&rq2, &k2, FP1, "o2", "r2");
	test_req_fill(&rq3, &k3, FP1, "o3", "r3");
	cr_assert_eq(idem_store_reserve(st, &rq, &rr), IDEM_OK);
	cr_assert_eq(idem_store_commit(st, &rq, &a), IDEM_OK);
	cr_assert_eq(idem_store_reserve(st, &rq2, &rr), IDEM_OK);
	cr_assert_eq(idem_store_commit(st, &rq2, &a), IDEM_OK);
	cr_assert_eq(idem_store_reserve(st, &rq3, &rr), IDEM_OK);
	cr_assert_eq(idem_store_commit(st, &rq3, &a), IDEM_OK);
	msleep(500);
	/* past its lifetime, its tombstone live */
	test_req_fill(&rq, &k, FP1, "o4", "r4");
	cr_assert_eq(idem_store_reserve(st, &rq, &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_EXPIRED, "a late retry ran");
	cr_expect_eq(rr.first_status, 201);
	cr_expect(rr.used_age_ms >= 300 && rr.used_age_ms < 60000, "%llu",
	    (unsigned long long)rr.used_age_ms);
	cr_expect(memcmp(rr.fingerprint, FP1, 32) == 0);
	idem_reserve_result_clear(&rr);
	test_req_fill(&rq, &k, FP2, "o5", "r5");
	cr_assert_eq(idem_store_reserve(st, &rq, &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_EXPIRED, "another request ran");
	idem_reserve_result_clear(&rr);
	/* without a tombstone: new */
	test_req_fill(&rq3, &k3, FP2, "o6", "r6");
	cr_assert_eq(idem_store_reserve(st, &rq3, &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_ACQUIRED);
	cr_expect_eq(rr.expired_run, 0);
	idem_reserve_result_clear(&rr);
	/* a purge drops the answer and keeps the tombstone */
	cr_assert_eq(idem_store_purge_all(st, 100, &purged), IDEM_OK);
	cr_assert_eq(idem_store_lookup(st, &k, &rec), IDEM_OK);
	cr_expect_eq(rec.state, IDEM_RECORD_EXPIRED);
	cr_expect_eq(rec.status, 201);
	cr_expect_eq(rec.body_len, 0);
	cr_expect(rec.expires_in_ms > 0, "%lld", (long long)rec.expires_in_ms);
	test_req_fill(&rq, &k, FP1, "o7", "r7");
	cr_assert_eq(idem_store_reserve(st, &rq, &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_EXPIRED, "a purged key ran");
	cr_expect_eq(rr.first_status, 201);
	idem_reserve_result_clear(&rr);
	/* expired-keys = run: the key is this request's, and said so */
	test_req_fill(&rrun, &k, FP1, "o8", "r8");
	cr_assert_eq(idem_store_reserve(st, &rrun, &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_ACQUIRED);
	cr_expect_eq(rr.expired_run, 1);
	idem_reserve_result_clear(&rr);
	/* past the tombstone's end (a second, MySQL's unit), purged or not */
	msleep(1600);
	test_req_fill(&rq2, &k2, FP1, "o9", "r9");
	cr_assert_eq(idem_store_reserve(st, &rq2, &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_ACQUIRED);
	cr_expect_eq(rr.expired_run, 0);
	idem_reserve_result_clear(&rr);
}

/* A purge in small batches makes every due tombstone and deletes every
 * expired record, however the two are mixed: a batch is full (more may
 * be left) whenever it did its most (the review of issue 40: a batch
 * that made max tombstones and deleted a few reported more than max, and
 * the loop stopped with answers kept past their lifetime). */
Test(store, purge_all_entombs_and_deletes_everything_due, .init = open_store,
    .fini = close_store)
{
	idem_key_policy tomb = { .lease_ms = 30000, .lifetime_ms = 300,
	    .tombstone_ms = 3600000 }, none = tomb;
	idem_stored_response a = answer(201, "made");
	idem_reserve_result rr;
	idem_store_record rec;
	idem_store_key k[8];
	unsigned long purged = 0;
	char name[32];
	int i;

	none.tombstone_ms = 0;
	for (i = 0; i < 8; i++) {
		idem_store_req rq = { .policy = i < 5 ? &tomb : &none };
		snprintf(name, sizeof(name), "mixed-purge-%d", i);
		k[i] = key(name, 0);
		test_req_fill(&rq, &k[i], FP1, "o", "r");
		cr_assert_eq(idem_store_reserve(st, &rq, &rr), IDEM_OK);
		cr_assert_eq(idem_store_commit(st, &rq, &a), IDEM_OK);
	}
	msleep(500);
	cr_assert_eq(idem_store_purge_all(st, 2, &purged), IDEM_OK);
	cr_expect_geq(purged, 8);
	for (i = 0; i < 8; i++) {
		idem_err err = idem_store_lookup(st, &k[i], &rec);
		if (i < 5) {
			cr_expect_eq(err, IDEM_OK);
			cr_expect_eq(rec.state, IDEM_RECORD_EXPIRED, "key %d left "
			    "%s", i, idem_record_state_names[rec.state]);
			cr_expect_eq(rec.body_len, 0);
		} else
			cr_expect_eq(err, IDEM_ERR_NOT_FOUND, "key %d kept", i);
	}
}

/* A record of unknown outcome keeps a tombstone too: past its lifetime
 * its side effect may still have happened, so a late retry is refused
 * (no first status), whatever the reconcile hook, never run again
 * silently (the review of issue 40). */
Test(store, unknown_outcome_keeps_a_tombstone, .init = open_store,
    .fini = close_store)
{
	idem_store_key k = key("tomb-unknown", 0);
	idem_key_policy pol = { .lease_ms = 30000, .lifetime_ms = 300,
	    .tombstone_ms = 3600000, .reconcile = 1 };
	idem_store_req rq = { .policy = &pol };
	idem_reserve_result rr;
	idem_store_record rec;
	unsigned long purged = 0;

	test_req_fill(&rq, &k, FP1, "o1", "r1");
	cr_assert_eq(idem_store_reserve(st, &rq, &rr), IDEM_OK);
	cr_assert_eq(idem_store_mark_unknown(st, &rq), IDEM_OK);
	msleep(500);
	test_req_fill(&rq, &k, FP1, "o2", "r2");
	cr_assert_eq(idem_store_reserve(st, &rq, &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_EXPIRED, "ran again: %d",
	    rr.outcome);
	cr_expect_eq(rr.first_status, 0);
	idem_reserve_result_clear(&rr);
	cr_assert_eq(idem_store_purge_all(st, 100, &purged), IDEM_OK);
	cr_assert_eq(idem_store_lookup(st, &k, &rec), IDEM_OK);
	cr_expect_eq(rec.state, IDEM_RECORD_EXPIRED);
	cr_expect_str_eq(rec.phase, "");
	test_req_fill(&rq, &k, FP2, "o3", "r3");
	cr_assert_eq(idem_store_reserve(st, &rq, &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_EXPIRED);
	idem_reserve_result_clear(&rr);
}

Test(store, purge_in_batches, .init = open_store, .fini = close_store)
{
	idem_stored_response a = answer(200, "p");
	idem_reserve_result rr;
	char name[32];
	unsigned n, total = 0;
	int i;

	for (i = 0; i < 7; i++) {
		idem_store_key k;
		snprintf(name, sizeof(name), "purge%d", i);
		k = key(name, 9);
		cr_assert_eq(reserve(&k, FP1, "o", 30000, &rr),
		    IDEM_RESERVE_ACQUIRED);
		cr_assert_eq(idem_store_commit(st, TEST_OWNED(&k, "o",
		    i < 5 ? 300 : 600000), &a), IDEM_OK);
	}
	msleep(1100);
	/* Criterion runs tests in parallel processes, and in a shared store
	 * another test may purge these rows first: each batch is bounded,
	 * the loop ends, and afterwards the expired rows are gone and the
	 * live ones are kept, whoever purged them. */
	do {
		cr_assert_eq(idem_store_purge(st, 2, &n), IDEM_OK);
		cr_expect_leq(n, 2);
		total += n;
	} while (n == 2 && total < 1000);
	cr_expect_lt(total, 1000);
	for (i = 0; i < 7; i++) {
		idem_store_key k;
		idem_store_record r;
		snprintf(name, sizeof(name), "purge%d", i);
		k = key(name, 9);
		cr_expect_eq(idem_store_lookup(st, &k, &r),
		    i < 5 ? IDEM_ERR_NOT_FOUND : IDEM_OK, "key %d", i);
		cr_expect_eq(reserve(&k, FP1, "o2", 30000, &rr),
		    i < 5 ? IDEM_RESERVE_ACQUIRED : IDEM_RESERVE_COMMITTED,
		    "key %d", i);
		idem_reserve_result_clear(&rr);
	}
}

Test(store, scopes_are_separate, .init = open_store, .fini = close_store)
{
	idem_store_key a = key("scoped", 1), b = key("scoped", 2);
	idem_reserve_result rr;

	cr_expect_eq(reserve(&a, FP1, "o1", 30000, &rr), IDEM_RESERVE_ACQUIRED);
	cr_expect_eq(reserve(&b, FP1, "o2", 30000, &rr), IDEM_RESERVE_ACQUIRED);
}

Test(store, binary_body_and_long_key, .init = open_store, .fini = close_store)
{
	idem_store_key k;
	idem_stored_response a = answer(200, "");
	idem_reserve_result rr;
	static const char bin[] = { 'a', 0, 'b', '\n', (char)0xff, 0 };

	memset(&k, 0, sizeof(k));
	memset(k.key, '~', IDEM_KEY_MAX);
	k.key_len = IDEM_KEY_MAX;
	snprintf(k.key, 20, "%lx", (unsigned long)time(NULL) ^
	    (unsigned long)getpid());
	k.key[strlen(k.key)] = '~';
	a.body = (char *)bin;
	a.body_len = sizeof(bin);
	a.headers = "";
	a.headers_len = 0;
	cr_expect_eq(reserve(&k, FP1, "o", 30000, &rr), IDEM_RESERVE_ACQUIRED);
	cr_assert_eq(idem_store_commit(st, TEST_OWNED(&k, "o", 60000), &a),
	    IDEM_OK);
	cr_expect_eq(reserve(&k, FP1, "o2", 30000, &rr), IDEM_RESERVE_COMMITTED);
	cr_assert_eq(rr.response.body_len, sizeof(bin));
	cr_expect_eq(memcmp(rr.response.body, bin, sizeof(bin)), 0);
	cr_expect_eq(rr.response.headers_len, 0);
	idem_reserve_result_clear(&rr);
}

/* ------------------------------------------------------------- races */

typedef struct racer {
	idem_store_key k;
	char owner[16];
	uint64_t ttl;
	pthread_barrier_t *start;
	idem_err err;
	idem_reserve_outcome outcome;
} racer;

static void *
race(void *arg)
{
	racer *r = arg;
	idem_reserve_result rr;

	pthread_barrier_wait(r->start);
	r->err = idem_store_reserve(st, TEST_REQ(&r->k, FP1, r->owner, "rid",
	    r->ttl, 60000), &rr);
	r->outcome = rr.outcome;
	idem_reserve_result_clear(&rr);
	return NULL;
}

/* Runs n threads reserving k at once; returns how many got want. */
static int
run_race(const idem_store_key *k, int n, uint64_t ttl,
    idem_reserve_outcome want)
{
	pthread_t t[64];
	racer r[64];
	pthread_barrier_t start;
	int i, got = 0;

	pthread_barrier_init(&start, NULL, (unsigned)n);
	for (i = 0; i < n; i++) {
		r[i].k = *k;
		snprintf(r[i].owner, sizeof(r[i].owner), "racer%d", i);
		r[i].ttl = ttl;
		r[i].start = &start;
		pthread_create(&t[i], NULL, race, &r[i]);
	}
	for (i = 0; i < n; i++) {
		pthread_join(t[i], NULL);
		/* contention the store gave up on is "someone else has it" */
		cr_expect(r[i].err == IDEM_OK || r[i].err == IDEM_ERR_BUSY,
		    "racer %d: %s", i, idem_strerror(r[i].err));
		if (r[i].err == IDEM_OK && r[i].outcome == want)
			got++;
		else if (r[i].err == IDEM_OK)
			cr_expect_eq(r[i].outcome, IDEM_RESERVE_IN_FLIGHT);
	}
	pthread_barrier_destroy(&start);
	return got;
}

Test(store, sixty_four_threads_one_winner, .init = open_store,
    .fini = close_store)
{
	idem_store_key k = key("race64", 0);

	cr_expect_eq(run_race(&k, 64, 30000, IDEM_RESERVE_ACQUIRED), 1);
}

Test(store, racing_takeover_one_winner, .init = open_store,
    .fini = close_store)
{
	idem_store_key k = key("racetake", 0);
	idem_reserve_result rr;

	/* the winner's fresh lease must outlive the race, however loaded the
	 * machine: with a 100 ms ttl a slow racer saw it stale again */
	cr_assert_eq(reserve(&k, FP1, "dead", 1000, &rr), IDEM_RESERVE_ACQUIRED);
	msleep(1200);
	cr_expect_eq(run_race(&k, 16, 1000, IDEM_RESERVE_TAKEN_OVER), 1);
}

Test(store, release_prefix_frees_a_dead_workers_keys, .init = open_store,
    .fini = close_store)
{
	idem_store_key a = key("dead-a", 3), b = key("dead-b", 3),
	    c = key("alive", 3);
	idem_stored_response ans = answer(201, "done");
	idem_reserve_result rr;
	idem_store_key *gone = NULL;
	char dead[40], dead_a[48], dead_b[48], alive[48];
	size_t n = 0;

	snprintf(dead, sizeof(dead), "%08lx.", (unsigned long)getpid() ^ 0xdead);
	snprintf(dead_a, sizeof(dead_a), "%sa", dead);
	snprintf(dead_b, sizeof(dead_b), "%sb", dead);
	snprintf(alive, sizeof(alive), "%08lx.c", (unsigned long)getpid());
	cr_assert_eq(reserve(&a, FP1, dead_a, 30000, &rr), IDEM_RESERVE_ACQUIRED);
	cr_assert_eq(reserve(&b, FP1, dead_b, 30000, &rr), IDEM_RESERVE_ACQUIRED);
	cr_assert_eq(idem_store_commit(st, TEST_OWNED(&b, dead_b, 60000), &ans),
	    IDEM_OK);
	cr_assert_eq(reserve(&c, FP1, alive, 30000, &rr), IDEM_RESERVE_ACQUIRED);
	cr_assert_eq(idem_store_release_prefix(st, dead, &gone, &n), IDEM_OK);
	cr_assert_eq(n, 1);
	cr_expect_eq(gone[0].key_len, a.key_len);
	cr_expect_eq(memcmp(gone[0].key, a.key, a.key_len), 0);
	free(gone);
	/* the dead worker's in-flight key runs again at once; its committed
	 * answer and the live worker's reservation stay */
	cr_expect_eq(reserve(&a, FP1, "retry", 30000, &rr), IDEM_RESERVE_ACQUIRED);
	cr_expect_eq(reserve(&b, FP1, "retry", 30000, &rr),
	    IDEM_RESERVE_COMMITTED);
	idem_reserve_result_clear(&rr);
	cr_expect_eq(reserve(&c, FP1, "retry", 30000, &rr),
	    IDEM_RESERVE_IN_FLIGHT);
	cr_expect_eq(idem_store_release_prefix(st, "50%_", &gone, &n),
	    st->ops->release_prefix == NULL ? IDEM_OK : strcmp(st->ops->name,
	    "mysql") == 0 ? IDEM_ERR_INVALID : IDEM_OK);
	free(gone);
}

/* What idemfcgi-admin shows of a record, in flight and committed. */
Test(store, lookup_shows_a_record, .init = open_store, .fini = close_store)
{
	idem_store_key k = key("look", 0);
	idem_stored_response a = answer(201, "{\"looked\":true}");
	idem_store_record r;
	idem_reserve_result rr;

	cr_expect_eq(idem_store_lookup(st, &k, &r), IDEM_ERR_NOT_FOUND);
	cr_assert_eq(reserve(&k, FP1, "own-look", 30000, &rr),
	    IDEM_RESERVE_ACQUIRED);
	cr_assert_eq(idem_store_lookup(st, &k, &r), IDEM_OK);
	cr_expect_eq(r.state, IDEM_RECORD_IN_FLIGHT);
	cr_expect_str_eq(r.owner, "own-look");
	cr_expect_str_eq(r.request_id, "rid-of-owner");
	cr_expect_arr_eq(r.fingerprint, FP1, 32);
	cr_expect_eq(strlen(r.reserved_at), 27, "%s", r.reserved_at);
	cr_expect_eq(r.reserved_at[26], 'Z');
	cr_expect_lt(r.lease_age_ms, 5000);
	cr_expect_gt(r.expires_in_ms, 50000);
	cr_expect_leq(r.expires_in_ms, 60000);
	cr_assert_eq(idem_store_commit(st, TEST_OWNED(&k, "own-look", 120000),
	    &a), IDEM_OK);
	cr_assert_eq(idem_store_lookup(st, &k, &r), IDEM_OK);
	cr_expect_eq(r.state, IDEM_RECORD_COMMITTED);
	cr_expect_eq(r.status, 201);
	cr_expect_eq(r.body_len, strlen("{\"looked\":true}"));
	cr_expect_eq(r.headers_len, strlen(a.headers));
	cr_expect_gt(r.expires_in_ms, 110000);
	/* another scope is another record */
	k.scope[0] = 9;
	cr_expect_eq(idem_store_lookup(st, &k, &r), IDEM_ERR_NOT_FOUND);
}

/* Records by state; exact on a private store, at least on a shared one. */
Test(store, census_counts_by_state, .init = open_store, .fini = close_store)
{
	idem_store_key fly = key("cen-fly", 0), live = key("cen-live", 0),
	    old = key("cen-old", 0);
	idem_stored_response a = answer(200, "x");
	idem_reserve_result rr;
	idem_store_census c;
	int exact = strcmp(st->ops->name, "memory") == 0;

	/* a lease of 10 ms: stale by the time of the census */
	cr_assert_eq(reserve(&fly, FP1, "own-fly", 10, &rr),
	    IDEM_RESERVE_ACQUIRED);
	cr_assert_eq(reserve(&live, FP1, "own-live", 30000, &rr),
	    IDEM_RESERVE_ACQUIRED);
	cr_assert_eq(idem_store_commit(st, TEST_OWNED(&live, "own-live", 60000),
	    &a),
	    IDEM_OK);
	cr_assert_eq(reserve(&old, FP1, "own-old", 30000, &rr),
	    IDEM_RESERVE_ACQUIRED);
	cr_assert_eq(idem_store_commit(st, TEST_OWNED(&old, "own-old", 1), &a),
	    IDEM_OK);
	msleep(30);
	cr_assert_eq(idem_store_census_get(st, 10, &c), IDEM_OK);
	cr_expect_geq(c.in_flight, 1);
	cr_expect_geq(c.stale, 1);
	cr_expect_geq(c.committed, 1);
	cr_expect_geq(c.expired, 1);
	cr_expect_eq(c.has_oldest, 1);
	cr_expect_geq(c.oldest_age_ms, 30);
	if (exact) {
		cr_expect_eq(c.in_flight, 1);
		cr_expect_eq(c.stale, 1);
		cr_expect_eq(c.committed, 1);
		cr_expect_eq(c.expired, 1);
		cr_expect_eq(c.oldest_key.key_len, fly.key_len);
		cr_expect_arr_eq(c.oldest_key.key, fly.key, fly.key_len);
		cr_expect_str_eq(c.oldest_owner, "own-fly");
		cr_expect_str_eq(c.oldest_request_id, "rid-of-owner");
	}
	/* a fresh lease is not stale (renewed for 10 s) */
	cr_assert_eq(idem_store_renew(st, TEST_REQ(&fly, NULL, "own-fly", NULL,
	    10000, 0)), IDEM_OK);
	cr_assert_eq(idem_store_census_get(st, 10000, &c), IDEM_OK);
	if (exact)
		cr_expect_eq(c.stale, 0);
	cr_assert_eq(idem_store_release(st, TEST_OWNED(&fly, "own-fly", 0)),
	    IDEM_OK);
}

/* Issue 12.3: purge never removes an in-flight record whose lease is
 * live, however old: its handler may still be running.  Issue 35.2: nor
 * one within its lifetime whose lease lapsed (its retry takes it over),
 * nor one past it whose lease lapsed less than abandon-after ago (a
 * commit waiting out an outage); but one past its lifetime not renewed
 * for abandon-after is abandoned (its instance died whole, nobody renews
 * or releases it): purged, and until then a request of another body may
 * have the key. */
Test(store, purge_spares_live_in_flight_removes_abandoned, .init = open_store,
    .fini = close_store)
{
	idem_store_key live = key("purgelive", 0), young = key("purgeyoung", 0),
	    gone = key("purgegone", 0), reused = key("purgereused", 0);
	idem_stored_response a = answer(201, "late");
	idem_reserve_result rr;
	unsigned n;

	/* lease 30 s, lifetime 300 ms: past its lifetime, renewed */
	cr_assert_eq(idem_store_reserve(st, TEST_REQ(&live, FP1, "slow", "rid",
	    30000, 300), &rr), IDEM_OK);
	cr_assert_eq(rr.outcome, IDEM_RESERVE_ACQUIRED);
	/* lease 100 ms, lifetime 60 s: lapsed within its lifetime */
	cr_assert_eq(idem_store_reserve(st, TEST_REQ(&young, FP1, "young",
	    "rid", 100, 60000), &rr), IDEM_OK);
	/* lease 100 ms, lifetime 300 ms: abandoned */
	cr_assert_eq(idem_store_reserve(st, TEST_REQ(&gone, FP1, "dead", "rid",
	    100, 300), &rr), IDEM_OK);
	cr_assert_eq(idem_store_reserve(st, TEST_REQ(&reused, FP1, "dead2",
	    "rid-dead2", 100, 300), &rr), IDEM_OK);
	msleep(600);
	cr_assert_eq(idem_store_renew(st, TEST_OWNED(&live, "slow", 0)),
	    IDEM_OK);
	/* abandon-after 24 h (the default): lapsed, but not abandoned */
	cr_expect_eq(reserve(&reused, FP2, "too-soon", 30000, &rr),
	    IDEM_RESERVE_IN_FLIGHT, "a lease that lapsed 0.5 s ago abandoned");
	do
		cr_assert_eq(idem_store_purge(st, 100, &n), IDEM_OK);
	while (n == 100);
	cr_expect_eq(reserve(&gone, FP2, "too-soon", 30000, &rr),
	    IDEM_RESERVE_IN_FLIGHT, "purged 0.5 s after its lease lapsed");
	cr_expect_str_eq(rr.owner, "dead");
	/* abandon-after 200 ms: both are abandoned now */
	idem_store_set_abandon_ms(st, 200);
	/* before any purge: another body has the abandoned key, and is told
	 * whose reservation it replaced */
	cr_expect_eq(reserve(&reused, FP2, "new-body", 30000, &rr),
	    IDEM_RESERVE_ACQUIRED, "an abandoned reservation holds its key");
	cr_expect_str_eq(rr.owner, "dead2");
	cr_expect_str_eq(rr.request_id, "rid-dead2");
	cr_expect_eq(idem_store_commit(st, TEST_OWNED(&reused, "dead2", 60000),
	    &a), IDEM_ERR_NOT_FOUND, "the abandoned owner is fenced");
	/* a live or young one is no other body's */
	cr_expect_eq(reserve(&live, FP2, "other", 100, &rr),
	    IDEM_RESERVE_IN_FLIGHT);
	cr_expect_eq(reserve(&young, FP2, "other", 100, &rr),
	    IDEM_RESERVE_IN_FLIGHT);
	do
		cr_assert_eq(idem_store_purge(st, 100, &n), IDEM_OK);
	while (n == 100);
	cr_expect_eq(idem_store_renew(st, TEST_OWNED(&live, "slow", 0)), IDEM_OK,
	    "the live in-flight record was purged");
	cr_expect_eq(reserve(&live, FP1, "retry", 30000, &rr),
	    IDEM_RESERVE_IN_FLIGHT, "a retry would run the handler again");
	cr_expect_eq(idem_store_commit(st, TEST_OWNED(&live, "slow", 60000),
	    &a), IDEM_OK);
	cr_expect_eq(reserve(&live, FP1, "retry", 30000, &rr),
	    IDEM_RESERVE_COMMITTED);
	idem_reserve_result_clear(&rr);
	cr_expect_eq(idem_store_renew(st, TEST_OWNED(&young, "young", 0)),
	    IDEM_OK, "a record within its lifetime was purged");
	cr_expect_eq(idem_store_renew(st, TEST_OWNED(&gone, "dead", 0)),
	    IDEM_ERR_NOT_FOUND, "the abandoned record was not purged");
	cr_expect_eq(reserve(&gone, FP2, "after", 30000, &rr),
	    IDEM_RESERVE_ACQUIRED);
	cr_expect_str_eq(rr.owner, "", "purged: nothing replaced");
	cr_expect_eq(idem_store_renew(st, TEST_OWNED(&reused, "new-body", 0)),
	    IDEM_OK, "the reused record was purged");
}

/* Issue 12.1/12.2: an answer over the store's declared limits is refused
 * as IDEM_ERR_TOO_LARGE (never a store failure, which would be retried
 * forever) and leaves the record in flight for a smaller answer; a store
 * without limits keeps it whole. */
Test(store, answer_over_limits, .init = open_store, .fini = close_store)
{
	idem_store_key k = key("toolarge", 0);
	idem_stored_response big = answer(201, "b"), small = answer(201, "s");
	idem_reserve_result rr;
	size_t len = st->limits.headers > 0 ? (size_t)st->limits.headers + 10 :
	    70000, i;
	char *h = malloc(len + 1);

	cr_assert_not_null(h);
	memcpy(h, "X-Fill: ", 8);
	for (i = 8; i < len - 2; i++)
		h[i] = 'f';
	memcpy(h + len - 2, "\r\n", 3);
	big.headers = h;
	big.headers_len = len;
	cr_assert_eq(reserve(&k, FP1, "o", 30000, &rr), IDEM_RESERVE_ACQUIRED);
	if (st->limits.headers > 0) {
		cr_expect_eq(idem_store_commit(st, TEST_OWNED(&k, "o", 60000),
		    &big),
		    IDEM_ERR_TOO_LARGE);
		cr_expect_eq(idem_store_renew(st, TEST_OWNED(&k, "o", 0)),
		    IDEM_OK);
		cr_expect_eq(idem_store_commit(st, TEST_OWNED(&k, "o", 60000),
		    &small),
		    IDEM_OK);
	} else {
		cr_expect_eq(idem_store_commit(st, TEST_OWNED(&k, "o", 60000),
		    &big), IDEM_OK);
	}
	cr_expect_eq(reserve(&k, FP1, "o2", 30000, &rr),
	    IDEM_RESERVE_COMMITTED);
	cr_expect_eq(rr.response.headers_len, st->limits.headers > 0 ?
	    small.headers_len : len);
	idem_reserve_result_clear(&rr);
	free(h);
}

typedef struct churner {
	idem_store_key k;
	char owner[32];
	volatile int *stop;
	int acquired, in_flight, busy, wrong;
	char why[128];
} churner;

/* Reserves k over and over, releasing at once what it gets, like clients
 * hammering a route that answers 500. */
static void *
churn(void *arg)
{
	churner *c = arg;
	idem_reserve_result rr;

	while (!*c->stop) {
		idem_err err = idem_store_reserve(st, TEST_REQ(&c->k, FP1,
		    c->owner, "rid", 30000, 60000), &rr);
		if (err == IDEM_ERR_BUSY) {
			c->busy++;
		} else if (err != IDEM_OK) {
			c->wrong++;
			snprintf(c->why, sizeof(c->why), "%s", idem_strerror(err));
		} else if (rr.outcome == IDEM_RESERVE_ACQUIRED) {
			c->acquired++;
			if (idem_store_release(st, TEST_OWNED(&c->k, c->owner,
			    0)) != IDEM_OK) {
				c->wrong++;
				snprintf(c->why, sizeof(c->why), "release failed");
			}
		} else if (rr.outcome == IDEM_RESERVE_IN_FLIGHT &&
		    memcmp(rr.fingerprint, FP1, 32) == 0) {
			c->in_flight++;
		} else {
			c->wrong++;
			snprintf(c->why, sizeof(c->why), "outcome %d, fingerprint "
			    "%s", rr.outcome, memcmp(rr.fingerprint, FP1, 32) == 0 ?
			    "same" : "other (a false conflict)");
		}
		idem_reserve_result_clear(&rr);
	}
	return NULL;
}

/* Issue 12.6: many clients on one key that is reserved and released all
 * the time get "acquired" or "in flight with this fingerprint" (or busy),
 * never an error or another fingerprint. */
Test(store, one_key_churn_no_false_answers, .init = open_store,
    .fini = close_store, .timeout = 60)
{
	enum { N = 12 };
	pthread_t t[N];
	churner c[N];
	volatile int stop = 0;
	int i, acquired = 0, wrong = 0;

	for (i = 0; i < N; i++) {
		memset(&c[i], 0, sizeof(c[i]));
		c[i].k = key("churn", 0);
		snprintf(c[i].owner, sizeof(c[i].owner), "churner%d", i);
		c[i].stop = &stop;
		pthread_create(&t[i], NULL, churn, &c[i]);
	}
	msleep(3000);
	stop = 1;
	for (i = 0; i < N; i++) {
		pthread_join(t[i], NULL);
		acquired += c[i].acquired;
		wrong += c[i].wrong;
		cr_expect_eq(c[i].wrong, 0, "churner %d: %d wrong, last: %s", i,
		    c[i].wrong, c[i].why);
	}
	cr_expect_gt(acquired, N, "the key was reserved and released");
	cr_expect_eq(wrong, 0);
}

/* ------------------------------------------ progress and unknown outcome */

/* The progress of phase and state (borrowed). */
static idem_progress
progress(const char *phase, const char *state)
{
	idem_progress p;

	memset(&p, 0, sizeof(p));
	snprintf(p.phase, sizeof(p.phase), "%s", phase);
	p.state = (char *)state;
	p.state_len = state != NULL ? strlen(state) : 0;
	return p;
}

/* A descriptor of k, fp and owner under a 30 s lease and a 60 s lifetime
 * (reconcile: the route has a reconcile hook), filled into rq with pol. */
static idem_store_req *
req_of(idem_store_req *rq, idem_key_policy *pol, const idem_store_key *k,
    const unsigned char *fp, const char *owner, int reconcile)
{
	memset(pol, 0, sizeof(*pol));
	pol->lease_ms = 30000;
	pol->lifetime_ms = 60000;
	pol->reconcile = reconcile;
	rq->policy = pol;
	return test_req_fill(rq, k, fp, owner, "rid-of-owner");
}

/* A record with progress is not deleted by a release: it is kept for the
 * same request only, which resumes it from that progress. */
Test(store, release_with_progress_pauses, .init = open_store,
    .fini = close_store)
{
	idem_store_key k = key("pause", 0);
	idem_stored_response a = answer(201, "{\"paid\":1}");
	idem_progress p = progress("charged", "{\"charge\":\"ch_1\"}");
	idem_key_policy pol;
	idem_store_req rq;
	idem_reserve_result rr;
	idem_store_record rec;

	cr_expect_eq(idem_store_reserve(st, req_of(&rq, &pol, &k, FP1, "o1", 0),
	    &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_ACQUIRED);
	idem_reserve_result_clear(&rr);
	cr_expect_eq(idem_store_checkpoint(st, &rq, &p), IDEM_OK);
	cr_expect(rq.has_progress);
	cr_expect_eq(idem_store_release(st, &rq), IDEM_OK);
	/* released, but kept: another request is refused (the caller's
	 * conflict), not run */
	cr_expect_eq(reserve(&k, FP2, "o2", 30000, &rr), IDEM_RESERVE_IN_FLIGHT);
	cr_expect_eq(memcmp(rr.fingerprint, FP1, 32), 0);
	idem_reserve_result_clear(&rr);
	if (idem_store_lookup(st, &k, &rec) == IDEM_OK) {
		cr_expect_eq(rec.state, IDEM_RECORD_PAUSED);
		cr_expect_str_eq(rec.phase, "charged");
	}
	/* the same request resumes it at once, with its progress */
	cr_expect_eq(idem_store_reserve(st, req_of(&rq, &pol, &k, FP1, "o3", 0),
	    &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_RESUMED);
	cr_expect_str_eq(rr.progress.phase, "charged");
	cr_assert_not_null(rr.progress.state);
	cr_expect_str_eq(rr.progress.state, "{\"charge\":\"ch_1\"}");
	cr_expect(rq.has_progress);
	idem_reserve_result_clear(&rr);
	/* the old owner holds nothing */
	cr_expect_eq(idem_store_checkpoint(st, TEST_OWNED(&k, "o1", 60000), &p),
	    IDEM_ERR_NOT_FOUND);
	cr_expect_eq(idem_store_commit(st, &rq, &a), IDEM_OK);
	cr_expect_eq(reserve(&k, FP1, "o4", 30000, &rr), IDEM_RESERVE_COMMITTED);
	cr_expect_eq(rr.response.status, 201);
	idem_reserve_result_clear(&rr);
}

/* Only the owner records progress or an unknown outcome; a checkpoint
 * renews the lease, and replaces the progress before it. */
Test(store, progress_owner_checked, .init = open_store, .fini = close_store)
{
	idem_store_key k = key("progress-owner", 0);
	idem_progress p1 = progress("one", "{\"n\":1}"),
	    p2 = progress("two", NULL), empty = progress("", NULL);
	idem_key_policy pol;
	idem_store_req rq;
	idem_reserve_result rr;

	req_of(&rq, &pol, &k, FP1, "o1", 0);
	pol.lease_ms = 200;
	cr_expect_eq(idem_store_reserve(st, &rq, &rr), IDEM_OK);
	cr_expect_eq(idem_store_checkpoint(st, TEST_OWNED(&k, "intruder",
	    60000), &p1), IDEM_ERR_NOT_FOUND);
	cr_expect_eq(idem_store_mark_unknown(st, TEST_OWNED(&k, "intruder",
	    60000)), IDEM_ERR_NOT_FOUND);
	cr_expect_eq(idem_store_checkpoint(st, &rq, &empty), IDEM_ERR_INVALID);
	cr_expect_eq(idem_store_checkpoint(st, &rq, &p1), IDEM_OK);
	cr_expect_eq(idem_store_checkpoint(st, &rq, &p2), IDEM_OK);
	/* the owner dies: a takeover after inflight-ttl goes on from "two" */
	msleep(300);
	cr_expect_eq(idem_store_reserve(st, TEST_REQ(&k, FP1, "o2", "r2", 200,
	    60000), &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_TAKEN_OVER);
	cr_expect_str_eq(rr.progress.phase, "two");
	idem_reserve_result_clear(&rr);
}

/* A record of unknown outcome is neither run again nor released: without
 * a reconcile hook a retry learns it is unknown; with one, exactly one
 * retry takes it, with its progress, to reconcile it. */
Test(store, unknown_outcome_held, .init = open_store, .fini = close_store)
{
	idem_store_key k = key("unknown", 0);
	idem_stored_response a = answer(201, "{\"paid\":1}");
	idem_progress p = progress("charging", "{\"attempt\":1}");
	idem_key_policy pol, pol2;
	idem_store_req rq, rq2;
	idem_reserve_result rr;
	idem_store_stats stats;

	cr_expect_eq(idem_store_reserve(st, req_of(&rq, &pol, &k, FP1, "o1", 0),
	    &rr), IDEM_OK);
	cr_expect_eq(idem_store_checkpoint(st, &rq, &p), IDEM_OK);
	cr_expect_eq(idem_store_mark_unknown(st, &rq), IDEM_OK);
	/* no longer the owner's to commit or release */
	cr_expect_eq(idem_store_commit(st, &rq, &a), IDEM_ERR_NOT_FOUND);
	cr_expect_eq(idem_store_release(st, &rq), IDEM_ERR_NOT_FOUND);
	memset(&stats, 0, sizeof(stats));
	idem_store_stats_get(st, &stats);
	cr_expect_geq(stats.unknown, 1);
	cr_expect_eq(reserve(&k, FP1, "o2", 30000, &rr), IDEM_RESERVE_UNKNOWN);
	idem_reserve_result_clear(&rr);
	cr_expect_eq(reserve(&k, FP2, "o2", 30000, &rr), IDEM_RESERVE_IN_FLIGHT);
	cr_expect_eq(memcmp(rr.fingerprint, FP1, 32), 0);
	idem_reserve_result_clear(&rr);
	/* with a reconcile hook: taken, once */
	cr_expect_eq(idem_store_reserve(st, req_of(&rq, &pol, &k, FP1, "r1", 1),
	    &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_RECONCILE);
	cr_expect_str_eq(rr.progress.phase, "charging");
	idem_reserve_result_clear(&rr);
	cr_expect_eq(idem_store_reserve(st, req_of(&rq2, &pol2, &k, FP1, "r2",
	    1), &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_IN_FLIGHT);
	cr_expect_str_eq(rr.owner, "r1");
	idem_reserve_result_clear(&rr);
	cr_expect_eq(idem_store_commit(st, &rq, &a), IDEM_OK);
	cr_expect_eq(reserve(&k, FP1, "o5", 30000, &rr), IDEM_RESERVE_COMMITTED);
	idem_reserve_result_clear(&rr);
}

/* Of many requests that find one paused record, exactly one resumes it. */
Test(store, racing_resumers_one_winner, .init = open_store,
    .fini = close_store)
{
	idem_store_key k = key("race-resume", 0);
	idem_progress p = progress("half", NULL);
	idem_key_policy pol;
	idem_store_req rq;
	idem_reserve_result rr;
	char owner[16];
	int i, won = 0;

	cr_expect_eq(idem_store_reserve(st, req_of(&rq, &pol, &k, FP1, "o1", 0),
	    &rr), IDEM_OK);
	cr_expect_eq(idem_store_checkpoint(st, &rq, &p), IDEM_OK);
	cr_expect_eq(idem_store_release(st, &rq), IDEM_OK);
	for (i = 0; i < 8; i++) {
		snprintf(owner, sizeof(owner), "r%d", i);
		cr_expect_eq(idem_store_reserve(st, req_of(&rq, &pol, &k, FP1,
		    owner, 0), &rr), IDEM_OK);
		won += rr.outcome == IDEM_RESERVE_RESUMED;
		idem_reserve_result_clear(&rr);
	}
	cr_expect_eq(won, 1);
}

/* A paused record past its lifetime is purged; found before the purge,
 * it is made anew, without its progress. */
Test(store, paused_expires, .init = open_store, .fini = close_store)
{
	idem_store_key k = key("pause-expiry", 0), k2 = key("pause-expiry2", 0);
	idem_progress p = progress("half", NULL);
	idem_key_policy pol = { .lease_ms = 30000, .lifetime_ms = 300 };
	idem_store_req rq = { .policy = &pol }, rq2 = rq;
	idem_reserve_result rr;
	idem_store_record rec;
	unsigned long purged = 0;

	test_req_fill(&rq, &k, FP1, "o1", "r1");
	test_req_fill(&rq2, &k2, FP1, "o2", "r2");
	cr_expect_eq(idem_store_reserve(st, &rq, &rr), IDEM_OK);
	cr_expect_eq(idem_store_reserve(st, &rq2, &rr), IDEM_OK);
	cr_expect_eq(idem_store_checkpoint(st, &rq, &p), IDEM_OK);
	cr_expect_eq(idem_store_checkpoint(st, &rq2, &p), IDEM_OK);
	cr_expect_eq(idem_store_release(st, &rq), IDEM_OK);
	cr_expect_eq(idem_store_release(st, &rq2), IDEM_OK);
	msleep(600);
	cr_expect_eq(reserve(&k, FP1, "o3", 30000, &rr), IDEM_RESERVE_ACQUIRED);
	cr_expect_str_eq(rr.progress.phase, "");
	idem_reserve_result_clear(&rr);
	cr_expect_eq(idem_store_purge_all(st, 100, &purged), IDEM_OK);
	cr_expect_geq(purged, 1);
	cr_expect_eq(idem_store_lookup(st, &k2, &rec), IDEM_ERR_NOT_FOUND);
}

/* Crash recovery releases a dead worker's record as release does: one
 * with progress is paused, for its request to resume. */
Test(store, dead_owner_with_progress_paused, .init = open_store,
    .fini = close_store)
{
	idem_store_key k = key("dead-progress", 0), *keys = NULL;
	idem_progress p = progress("charged", NULL);
	idem_key_policy pol;
	idem_store_req rq;
	idem_reserve_result rr;
	size_t n = 0;
	idem_err err;

	cr_expect_eq(idem_store_reserve(st, req_of(&rq, &pol, &k, FP1,
	    "deadbeef.1", 0), &rr), IDEM_OK);
	cr_expect_eq(idem_store_checkpoint(st, &rq, &p), IDEM_OK);
	err = idem_store_release_prefix(st, "deadbeef.", &keys, &n);
	free(keys);
	cr_expect_eq(err, IDEM_OK);
	cr_expect_eq(n, 1);
	cr_expect_eq(reserve(&k, FP1, "o2", 30000, &rr), IDEM_RESERVE_RESUMED);
	cr_expect_str_eq(rr.progress.phase, "charged");
	idem_reserve_result_clear(&rr);
}

/* A record held to reconcile stays of unknown outcome: a release, a dead
 * worker's sweep or its holder's death never turns it into a record the
 * handler runs again; a stale holder's place is taken to reconcile again,
 * and the stale holder is fenced. */
Test(store, reconciling_record_stays_unknown, .init = open_store,
    .fini = close_store)
{
	idem_store_key k = key("reconciling", 0), *keys = NULL;
	idem_stored_response a = answer(201, "{\"paid\":1}");
	idem_key_policy pol = { .lease_ms = 200, .lifetime_ms = 60000,
	    .reconcile = 1 }, plain = pol;
	idem_store_req rq = { .policy = &pol }, r1 = rq, r2 = rq, r3 = rq;
	idem_reserve_result rr;
	idem_store_record rec;
	size_t n = 0;

	plain.reconcile = 0;
	test_req_fill(&rq, &k, FP1, "dead1.o1", "r0");
	cr_assert_eq(idem_store_reserve(st, &rq, &rr), IDEM_OK);
	cr_assert_eq(idem_store_mark_unknown(st, &rq), IDEM_OK);
	test_req_fill(&r1, &k, FP1, "dead2.r1", "r1");
	cr_assert_eq(idem_store_reserve(st, &r1, &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_RECONCILE);
	idem_reserve_result_clear(&rr);
	/* a release (a reserve that got no answer) and a sweep of its
	 * worker leave it unknown */
	cr_expect_eq(idem_store_release(st, &r1), IDEM_ERR_NOT_FOUND);
	cr_expect_eq(idem_store_release_prefix(st, "dead2.", &keys, &n),
	    IDEM_OK);
	free(keys);
	cr_expect_eq(n, 0);
	if (idem_store_lookup(st, &k, &rec) == IDEM_OK)
		cr_expect_eq(rec.state, IDEM_RECORD_UNKNOWN);
	/* while r1's lease is live, another retry waits for it */
	test_req_fill(&r2, &k, FP1, "r2", "r2");
	cr_assert_eq(idem_store_reserve(st, &r2, &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_IN_FLIGHT);
	idem_reserve_result_clear(&rr);
	/* r1 dies: its place is taken to reconcile, never to run */
	msleep(400);
	r3.policy = &plain;
	test_req_fill(&r3, &k, FP1, "r3", "r3");
	cr_assert_eq(idem_store_reserve(st, &r3, &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_UNKNOWN, "without a hook");
	idem_reserve_result_clear(&rr);
	cr_assert_eq(idem_store_reserve(st, &r2, &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_RECONCILE);
	idem_reserve_result_clear(&rr);
	cr_expect_eq(idem_store_commit(st, &r1, &a), IDEM_ERR_NOT_FOUND,
	    "the stale holder is fenced");
	cr_expect_eq(idem_store_commit(st, &r2, &a), IDEM_OK);
	cr_expect_eq(reserve(&k, FP1, "o9", 30000, &rr), IDEM_RESERVE_COMMITTED);
	idem_reserve_result_clear(&rr);
}

/* ------------------------------------- an operator and unknown outcomes */

/* Makes k's record one of unknown outcome (marked by owner, then held
 * by nobody: owner "") (fingerprint FP1,
 * lifetime life_ms), with the progress of phase (NULL: none). */
static void
make_unknown(const idem_store_key *k, const char *owner, const char *phase,
    uint64_t life_ms)
{
	idem_key_policy pol = { .lease_ms = 30000, .lifetime_ms = life_ms };
	idem_store_req rq = { .policy = &pol };
	idem_progress p = progress(phase != NULL ? phase : "", "{\"n\":1}");
	idem_reserve_result rr;

	test_req_fill(&rq, k, FP1, owner, "rid-of-owner");
	cr_assert_eq(idem_store_reserve(st, &rq, &rr), IDEM_OK);
	cr_assert_eq(rr.outcome, IDEM_RESERVE_ACQUIRED);
	idem_reserve_result_clear(&rr);
	if (phase != NULL)
		cr_assert_eq(idem_store_checkpoint(st, &rq, &p), IDEM_OK);
	cr_assert_eq(idem_store_mark_unknown(st, &rq), IDEM_OK);
}

/* The index of k in keys (n of them), or -1. */
static long
index_of(const idem_store_key *keys, size_t n, const idem_store_key *k)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (keys[i].key_len == k->key_len &&
		    memcmp(keys[i].key, k->key, k->key_len) == 0 &&
		    memcmp(keys[i].scope, k->scope, 32) == 0)
			return (long)i;
	return -1;
}

/* The records of unknown outcome are listed, the one marked longest ago
 * first, bounded, with what an operator needs; no other record is. */
Test(store, unknown_records_listed_oldest_first, .init = open_store,
    .fini = close_store)
{
	idem_store_key k1 = key("list-unknown1", 3), k2 = key("list-unknown2",
	    0), done = key("list-done", 0), busy = key("list-busy", 0), *keys;
	idem_stored_response a = answer(201, "{}");
	idem_store_record *recs;
	idem_reserve_result rr;
	long i1, i2;
	size_t n;
	int more;

	make_unknown(&k1, "o1", "charging", 60000);
	msleep(20);
	make_unknown(&k2, "o2", NULL, 60000);
	cr_expect_eq(reserve(&done, FP1, "o3", 30000, &rr),
	    IDEM_RESERVE_ACQUIRED);
	cr_assert_eq(idem_store_commit(st, TEST_OWNED(&done, "o3", 60000), &a),
	    IDEM_OK);
	cr_expect_eq(reserve(&busy, FP1, "o4", 30000, &rr),
	    IDEM_RESERVE_ACQUIRED);
	cr_assert_eq(idem_store_list_unknown(st, 1000000, &keys, &recs, &n,
	    &more), IDEM_OK);
	cr_expect_eq(more, 0);
	i1 = index_of(keys, n, &k1);
	i2 = index_of(keys, n, &k2);
	cr_assert_geq(i1, 0);
	cr_assert_geq(i2, 0);
	cr_expect_lt(i1, i2, "the one marked first comes first");
	cr_expect_lt(index_of(keys, n, &done), 0);
	cr_expect_lt(index_of(keys, n, &busy), 0);
	cr_expect_eq(recs[i1].state, IDEM_RECORD_UNKNOWN);
	cr_expect_str_eq(recs[i1].owner, "", "held by nobody once marked");
	cr_expect_str_eq(recs[i1].request_id, "rid-of-owner");
	cr_expect_str_eq(recs[i1].phase, "charging");
	cr_expect_str_eq(recs[i2].phase, "");
	cr_expect_eq(memcmp(recs[i1].fingerprint, FP1, 32), 0);
	cr_expect_eq(keys[i1].scope[0], 3);
	cr_expect_geq(recs[i1].lease_age_ms, recs[i2].lease_age_ms);
	cr_expect_lt(recs[i1].lease_age_ms, 30000);
	cr_expect_gt(recs[i1].expires_in_ms, 0);
	cr_expect_leq(recs[i1].expires_in_ms, 60000);
	cr_expect_eq(strlen(recs[i1].lease_at), 27, "%s", recs[i1].lease_at);
	cr_expect_eq(strlen(recs[i1].expires_at), 27);
	free(keys);
	free(recs);
	/* bounded: one, and more to come */
	cr_assert_eq(idem_store_list_unknown(st, 1, &keys, &recs, &n, &more),
	    IDEM_OK);
	cr_expect_eq(n, 1);
	cr_expect_eq(more, 1);
	free(keys);
	free(recs);
	cr_expect_eq(idem_store_list_unknown(st, 0, &keys, &recs, &n, &more),
	    IDEM_ERR_INVALID);
}

/* An operator's answer for a record of unknown outcome is stored and
 * replayed, with the record's expiry; a release deletes it, so the next
 * retry runs; each only for a record still unknown and of the owner named:
 * never a committed or in-flight record, nor another owner's, nor a
 * commit of one past its expiry. */
Test(store, resolve_commits_or_releases_unknown_only, .init = open_store,
    .fini = close_store)
{
	idem_store_key kc = key("resolve-commit", 0),
	    kr = key("resolve-release", 0), kx = key("resolve-expired", 0),
	    done = key("resolve-done", 0), busy = key("resolve-busy", 0);
	idem_stored_response a = answer(202, "{\"resolved\":true}"),
	    first = answer(201, "{}");
	idem_reserve_result rr;
	idem_store_record rec;
	int64_t expiry;

	make_unknown(&kc, "o1", "charging", 60000);
	make_unknown(&kr, "o2", NULL, 60000);
	make_unknown(&kx, "o3", NULL, 300);
	cr_expect_eq(reserve(&done, FP1, "o4", 30000, &rr),
	    IDEM_RESERVE_ACQUIRED);
	cr_assert_eq(idem_store_commit(st, TEST_OWNED(&done, "o4", 60000),
	    &first), IDEM_OK);
	cr_expect_eq(reserve(&busy, FP1, "o5", 30000, &rr),
	    IDEM_RESERVE_ACQUIRED);
	/* not unknown, or not the owner's: nothing changes */
	cr_expect_eq(idem_store_resolve(st, TEST_OWNED(&done, "o4", 0), &a),
	    IDEM_ERR_NOT_FOUND);
	cr_expect_eq(idem_store_resolve(st, TEST_OWNED(&busy, "o5", 0), NULL),
	    IDEM_ERR_NOT_FOUND);
	cr_expect_eq(idem_store_resolve(st, TEST_OWNED(&kc, "intruder", 0),
	    &a), IDEM_ERR_NOT_FOUND);
	cr_expect_eq(idem_store_resolve(st, TEST_OWNED(&kr, "intruder", 0),
	    NULL), IDEM_ERR_NOT_FOUND);
	cr_expect_eq(reserve(&done, FP1, "o6", 30000, &rr),
	    IDEM_RESERVE_COMMITTED);
	cr_expect_eq(rr.response.status, 201);
	idem_reserve_result_clear(&rr);
	cr_expect_eq(reserve(&busy, FP1, "o6", 30000, &rr),
	    IDEM_RESERVE_IN_FLIGHT);
	idem_reserve_result_clear(&rr);
	cr_expect_eq(reserve(&kc, FP1, "o6", 30000, &rr), IDEM_RESERVE_UNKNOWN);
	idem_reserve_result_clear(&rr);

	/* committed: every retry of the request gets it, until the record's
	 * own expiry */
	cr_assert_eq(idem_store_lookup(st, &kc, &rec), IDEM_OK);
	expiry = rec.expires_in_ms;
	cr_expect_eq(idem_store_resolve(st, TEST_OWNED(&kc, "", 0), &a),
	    IDEM_OK);
	cr_expect_eq(reserve(&kc, FP1, "o7", 30000, &rr),
	    IDEM_RESERVE_COMMITTED);
	cr_expect_eq(rr.response.status, 202);
	cr_expect_eq(rr.response.body_len, a.body_len);
	cr_expect_eq(memcmp(rr.response.body, a.body, a.body_len), 0);
	cr_expect_eq(rr.response.headers_len, a.headers_len);
	idem_reserve_result_clear(&rr);
	cr_assert_eq(idem_store_lookup(st, &kc, &rec), IDEM_OK);
	cr_expect_eq(rec.state, IDEM_RECORD_COMMITTED);
	cr_expect_leq(rec.expires_in_ms, expiry, "its expiry is kept");
	cr_expect_eq(rec.status, 202);
	/* once: it is no longer unknown */
	cr_expect_eq(idem_store_resolve(st, TEST_OWNED(&kc, "", 0), &a),
	    IDEM_ERR_NOT_FOUND);
	cr_expect_eq(idem_store_resolve(st, TEST_OWNED(&kc, "", 0), NULL),
	    IDEM_ERR_NOT_FOUND);

	/* released: gone, and the next retry runs the handler */
	cr_expect_eq(idem_store_resolve(st, TEST_OWNED(&kr, "", 0), NULL),
	    IDEM_OK);
	cr_expect_eq(idem_store_lookup(st, &kr, &rec), IDEM_ERR_NOT_FOUND);
	cr_expect_eq(reserve(&kr, FP1, "o8", 30000, &rr),
	    IDEM_RESERVE_ACQUIRED);
	idem_reserve_result_clear(&rr);

	/* past its expiry there is nothing to commit; it may go */
	msleep(500);
	cr_expect_eq(idem_store_resolve(st, TEST_OWNED(&kx, "", 0), &a),
	    IDEM_ERR_NOT_FOUND);
	cr_expect_eq(idem_store_resolve(st, TEST_OWNED(&kx, "", 0), NULL),
	    IDEM_OK);
	cr_expect_eq(idem_store_lookup(st, &kx, &rec), IDEM_ERR_NOT_FOUND);
}

typedef struct resolve_racer {
	idem_store_key k;
	pthread_barrier_t *start;
	int reconcile;              /* else resolve */
	idem_err err;
	idem_reserve_outcome outcome;
} resolve_racer;

/* One side of a race for a record of unknown outcome: the retry that takes
 * it to reconcile, or the operator's answer. */
static void *
resolve_race(void *arg)
{
	resolve_racer *r = arg;
	idem_stored_response a = answer(202, "{\"by\":\"operator\"}");
	idem_key_policy pol;
	idem_store_req rq;
	idem_reserve_result rr;

	pthread_barrier_wait(r->start);
	if (!r->reconcile) {
		r->err = idem_store_resolve(st, TEST_OWNED(&r->k, "", 0),
		    &a);
		return NULL;
	}
	r->err = idem_store_reserve(st, req_of(&rq, &pol, &r->k, FP1,
	    "reconciler", 1), &rr);
	r->outcome = rr.outcome;
	idem_reserve_result_clear(&rr);
	return NULL;
}

/* An operator's answer racing a retry that reconciles the record: exactly
 * one of them gets it, and the other sees what it did. */
Test(store, resolve_racing_reconcile_one_winner, .init = open_store,
    .fini = close_store)
{
	char name[32];
	int i, resolved = 0, reconciled = 0;

	for (i = 0; i < 12; i++) {
		pthread_barrier_t start;
		resolve_racer r[2];
		pthread_t t[2];
		int j;

		snprintf(name, sizeof(name), "resolve-race%d", i);
		memset(r, 0, sizeof(r));
		r[0].k = key(name, 0);
		make_unknown(&r[0].k, "marker", "sent", 60000);
		r[1] = r[0];
		r[0].reconcile = 1;
		pthread_barrier_init(&start, NULL, 2);
		for (j = 0; j < 2; j++) {
			r[j].start = &start;
			pthread_create(&t[j], NULL, resolve_race, &r[j]);
		}
		for (j = 0; j < 2; j++)
			pthread_join(t[j], NULL);
		pthread_barrier_destroy(&start);
		cr_assert_eq(r[0].err, IDEM_OK, "%s", idem_strerror(r[0].err));
		cr_assert(r[1].err == IDEM_OK || r[1].err == IDEM_ERR_NOT_FOUND,
		    "%s", idem_strerror(r[1].err));
		if (r[1].err == IDEM_OK) {
			/* the answer came first: the retry replays it */
			resolved++;
			cr_expect_eq(r[0].outcome, IDEM_RESERVE_COMMITTED,
			    "round %d", i);
		} else {
			reconciled++;
			cr_expect_eq(r[0].outcome, IDEM_RESERVE_RECONCILE,
			    "round %d", i);
		}
	}
	cr_expect_eq(resolved + reconciled, 12);
}
