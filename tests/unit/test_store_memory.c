/*
 * test_store_memory.c - the store suite on the memory store, and what only
 * the memory store does: its bound on entries.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "idem_store_memory.h"
#include "store_suite.h"
#include "store_req.h"

idem_store *
suite_open(void)
{
	idem_store *s = NULL;

	cr_assert_eq(idem_store_memory_new(100000, &s), IDEM_OK);
	return s;
}

static const unsigned char FP[32] = { 7 };

static idem_store_key
mkey(int i)
{
	idem_store_key k;

	memset(&k, 0, sizeof(k));
	k.key_len = (size_t)snprintf(k.key, sizeof(k.key), "k%d", i);
	return k;
}

/* Reserves and commits key i with lifetime ms; returns the reserve outcome. */
static idem_reserve_outcome
put(idem_store *s, int i, uint64_t lifetime)
{
	idem_store_key k = mkey(i);
	idem_stored_response a = { 200, "", 0, "b", 1 };
	idem_reserve_result rr;
	idem_reserve_outcome o;

	cr_assert_eq(idem_store_reserve(s, TEST_REQ(&k, FP, "o", "r", 30000,
	    lifetime), &rr), IDEM_OK);
	o = rr.outcome;
	idem_reserve_result_clear(&rr);
	if (o == IDEM_RESERVE_ACQUIRED)
		cr_assert_eq(idem_store_commit(s, TEST_OWNED(&k, "o", lifetime),
		    &a), IDEM_OK);
	return o;
}

Test(memory, evicts_oldest_committed)
{
	idem_store *s = NULL;
	idem_store_stats ss;

	cr_assert_eq(idem_store_memory_new(3, &s), IDEM_OK);
	cr_expect_eq(put(s, 1, 60000), IDEM_RESERVE_ACQUIRED);
	cr_expect_eq(put(s, 2, 60000), IDEM_RESERVE_ACQUIRED);
	cr_expect_eq(put(s, 3, 60000), IDEM_RESERVE_ACQUIRED);
	cr_expect_eq(put(s, 4, 60000), IDEM_RESERVE_ACQUIRED);
	idem_store_stats_get(s, &ss);
	cr_expect_eq(ss.entries, 3);
	cr_expect_eq(ss.evictions, 1);
	/* 1 was evicted (it runs again, evicting 2); 3 and 4 replay */
	cr_expect_eq(put(s, 3, 60000), IDEM_RESERVE_COMMITTED);
	cr_expect_eq(put(s, 4, 60000), IDEM_RESERVE_COMMITTED);
	cr_expect_eq(put(s, 1, 60000), IDEM_RESERVE_ACQUIRED);
	idem_store_stats_get(s, &ss);
	cr_expect_eq(ss.evictions, 2);
	idem_store_close(s);
}

/* Issue 40: tombstones count in max-entries; when the store is full the
 * tombstone closest to its end goes before any live answer, counted apart
 * from evictions. */
Test(memory, tombstones_evicted_before_live_answers)
{
	idem_store *s = NULL;
	idem_store_stats ss;
	idem_store_key t = mkey(1);
	idem_key_policy pol = { .lease_ms = 30000, .lifetime_ms = 100,
	    .tombstone_ms = 60000 };
	idem_store_req rq = { .policy = &pol };
	idem_stored_response a = { 201, "", 0, "b", 1 };
	idem_reserve_result rr;
	struct timespec ts = { 0, 200000000L };
	unsigned n = 0;

	cr_assert_eq(idem_store_memory_new(3, &s), IDEM_OK);
	test_req_fill(&rq, &t, FP, "o", "r");
	cr_assert_eq(idem_store_reserve(s, &rq, &rr), IDEM_OK);
	cr_assert_eq(idem_store_commit(s, &rq, &a), IDEM_OK);
	cr_expect_eq(put(s, 2, 60000), IDEM_RESERVE_ACQUIRED);
	nanosleep(&ts, NULL);
	cr_assert_eq(idem_store_purge(s, 10, &n), IDEM_OK);
	cr_expect_eq(n, 1);
	idem_store_stats_get(s, &ss);
	cr_expect_eq(ss.tombstones, 1);
	cr_expect_eq(ss.entries, 2);
	test_req_fill(&rq, &t, FP, "o2", "r2");
	cr_assert_eq(idem_store_reserve(s, &rq, &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_EXPIRED);
	cr_expect_eq(rr.first_status, 201);
	cr_expect_eq(put(s, 3, 60000), IDEM_RESERVE_ACQUIRED);
	cr_expect_eq(put(s, 4, 60000), IDEM_RESERVE_ACQUIRED);
	idem_store_stats_get(s, &ss);
	cr_expect_eq(ss.tombstone_evictions, 1);
	cr_expect_eq(ss.evictions, 0, "a live answer went first");
	cr_expect_eq(ss.tombstones, 0);
	cr_expect_eq(put(s, 2, 60000), IDEM_RESERVE_COMMITTED);
	/* the tombstone gone, the key is new */
	test_req_fill(&rq, &t, FP, "o3", "r3");
	cr_assert_eq(idem_store_reserve(s, &rq, &rr), IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_ACQUIRED);
	idem_store_close(s);
}

Test(memory, expired_go_first_and_are_not_evictions)
{
	idem_store *s = NULL;
	idem_store_stats ss;
	struct timespec ts = { 0, 400000000L };

	cr_assert_eq(idem_store_memory_new(2, &s), IDEM_OK);
	cr_expect_eq(put(s, 1, 100), IDEM_RESERVE_ACQUIRED);
	cr_expect_eq(put(s, 2, 60000), IDEM_RESERVE_ACQUIRED);
	nanosleep(&ts, NULL);
	cr_expect_eq(put(s, 3, 60000), IDEM_RESERVE_ACQUIRED);
	idem_store_stats_get(s, &ss);
	cr_expect_eq(ss.evictions, 0);
	cr_expect_eq(put(s, 2, 60000), IDEM_RESERVE_COMMITTED);
	idem_store_close(s);
}

Test(memory, never_evicts_in_flight)
{
	idem_store *s = NULL;
	idem_store_key a = mkey(1), b = mkey(2), c = mkey(3);
	idem_reserve_result rr;
	idem_store_stats ss;

	cr_assert_eq(idem_store_memory_new(2, &s), IDEM_OK);
	cr_assert_eq(idem_store_reserve(s, TEST_REQ(&a, FP, "o", "r", 30000,
	    60000), &rr),
	    IDEM_OK);
	cr_assert_eq(idem_store_reserve(s, TEST_REQ(&b, FP, "o", "r", 30000,
	    60000), &rr),
	    IDEM_OK);
	cr_expect_eq(idem_store_reserve(s, TEST_REQ(&c, FP, "o", "r", 30000,
	    60000), &rr),
	    IDEM_ERR_STORE);
	idem_store_stats_get(s, &ss);
	cr_expect_eq(ss.entries, 2);
	cr_expect_eq(ss.in_flight, 2);
	cr_expect_eq(ss.evictions, 0);
	/* both are still there */
	cr_assert_eq(idem_store_reserve(s, TEST_REQ(&a, FP, "x", "r", 30000,
	    60000), &rr),
	    IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_IN_FLIGHT);
	cr_assert_eq(idem_store_release(s, TEST_OWNED(&b, "o", 0)), IDEM_OK);
	cr_assert_eq(idem_store_reserve(s, TEST_REQ(&c, FP, "o", "r", 30000,
	    60000), &rr),
	    IDEM_OK);
	cr_expect_eq(rr.outcome, IDEM_RESERVE_ACQUIRED);
	idem_store_close(s);
}

/* Frequent evictions are logged as a warning, once a minute at most. */
Test(memory, frequent_evictions_warned_once)
{
	idem_store *s = NULL;
	harness_capture cap;
	char *log, *p;
	int i, warnings = 0;

	cr_assert_eq(harness_capture_begin(&cap), 0);
	cr_assert_eq(idem_store_memory_new(2, &s), IDEM_OK);
	for (i = 0; i < 50; i++)
		put(s, i, 60000);
	log = harness_capture_end(&cap);
	idem_store_close(s);
	for (p = log; (p = strstr(p, "memory store full")) != NULL; p++)
		warnings++;
	cr_expect_eq(warnings, 1, "%s", log);
	cr_expect(strstr(log, "raise max-entries (now 2)") != NULL, "%s", log);
	free(log);
}

/* Key i made of unknown outcome in s by owner "o". */
static void
put_unknown(idem_store *s, int i)
{
	idem_store_key k = mkey(i);
	idem_store_req *rq = TEST_REQ(&k, FP, "o", "r", 30000, 60000);
	idem_reserve_result rr;

	cr_assert_eq(idem_store_reserve(s, rq, &rr), IDEM_OK);
	cr_assert_eq(rr.outcome, IDEM_RESERVE_ACQUIRED);
	cr_assert_eq(idem_store_mark_unknown(s, rq), IDEM_OK);
}

/* The counts of records of unknown outcome follow an operator's answers
 * and releases, and a record resolved with an answer is committed like
 * any other: evicted to make room, where an unknown one never is. */
Test(memory, resolved_records_counted_and_evictable)
{
	idem_store *s = NULL;
	idem_store_key k1 = mkey(1), k2 = mkey(2), k3 = mkey(3);
	idem_stored_response a = { 202, "", 0, "x", 1 };
	idem_reserve_result rr;
	idem_store_stats ss;

	cr_assert_eq(idem_store_memory_new(2, &s), IDEM_OK);
	put_unknown(s, 1);
	put_unknown(s, 2);
	cr_expect_eq(idem_store_stats_get(s, &ss), IDEM_OK);
	cr_expect_eq(ss.unknown, 2);
	cr_expect_lt(ss.unknown_age_ms, 5000);
	/* full of unknown records: nothing is evicted for a new one */
	cr_expect_eq(idem_store_reserve(s, TEST_REQ(&k3, FP, "o", "r", 30000,
	    60000), &rr), IDEM_ERR_STORE);
	cr_expect_eq(idem_store_resolve(s, TEST_OWNED(&k1, "", 0), &a),
	    IDEM_OK);
	idem_store_stats_get(s, &ss);
	cr_expect_eq(ss.unknown, 1);
	cr_expect_eq(ss.in_flight, 0);
	/* now committed, 1 goes to make room */
	cr_expect_eq(put(s, 3, 60000), IDEM_RESERVE_ACQUIRED);
	idem_store_stats_get(s, &ss);
	cr_expect_eq(ss.evictions, 1);
	cr_expect_eq(ss.entries, 2);
	cr_expect_eq(idem_store_resolve(s, TEST_OWNED(&k2, "", 0), NULL),
	    IDEM_OK);
	idem_store_stats_get(s, &ss);
	cr_expect_eq(ss.unknown, 0);
	cr_expect_eq(ss.unknown_age_ms, 0);
	cr_expect_eq(ss.entries, 1);
	idem_store_close(s);
}

/* The reservation rule (idem_reserve_decide), one row per step: what every
 * store and the transactional path do with a record they found. */
Test(rule, reservation_steps)
{
	unsigned char mine[32] = { 1 }, other[32] = { 2 };
	const idem_record_state C = IDEM_RECORD_COMMITTED,
	    F = IDEM_RECORD_IN_FLIGHT, P = IDEM_RECORD_PAUSED,
	    U = IDEM_RECORD_UNKNOWN, X = IDEM_RECORD_EXPIRED;
	idem_found live = { C, 0, 0, mine, "o", 0, 0, 0 },
	    expired = { C, 1, 0, other, "o", 0, 0, 0 },
	    ours = { F, 0, 0, mine, "me", 5000000, 0, 0 },
	    stale = { F, 0, 0, mine, "old", 30000001, 0, 0 },
	    fresh = { F, 0, 0, mine, "old", 30000000, 0, 0 },
	    stale_other = { F, 0, 0, other, "old", 90000000, 0, 0 },
	    paused = { P, 0, 0, mine, "old", 0, 0, 0 },
	    paused_expired = { P, 1, 0, mine, "old", 0, 0, 0 },
	    unknown = { U, 0, 0, mine, "old", 90000000, 0, 0 },
	    reconciling = { U, 0, 0, mine, "live", 1000, 0, 0 },
	    unheld = { U, 0, 0, mine, "", 0, 0, 0 },
	    unknown_expired = { U, 1, 0, other, "old", 0, 0, 0 },
	    /* records that keep their holder's lease: 5 s */
	    kept_live = { F, 0, 0, mine, "old", 4000000, 5000000, 0 },
	    kept_stale = { F, 0, 0, mine, "old", 5000001, 5000000, 0 },
	    kept_reconciling = { U, 0, 0, mine, "live", 4000000, 5000000, 0 },
	    /* past its lifetime: abandoned once its lease lapsed and was not
	     * renewed for abandon-after */
	    abandoned = { F, 1, 0, mine, "old", 5000001, 5000000, 5000000 },
	    expired_live = { F, 1, 0, mine, "old", 4000000, 5000000, 1000 },
	    /* lapsed, but renewed within abandon-after (an outage) */
	    lapsed_recently = { F, 1, 0, mine, "old", 5000001, 5000000, 60000000 },
	    /* issue 40: past its lifetime, its tombstone live (committed, or
	     * made a tombstone by a purge), or ended */
	    tomb_due = { C, 1, 1, other, "", 0, 0, 0 },
	    tomb = { X, 0, 1, mine, "", 0, 0, 0 },
	    tomb_ended = { X, 1, 0, mine, "", 0, 0, 0 };
	const idem_key_policy plain = { 0 }, recon = { .reconcile = 1 },
	    run = { .run_expired = 1 };

	cr_expect_eq(idem_reserve_decide(&live, other, "me", 30000000, &plain),
	    IDEM_STEP_REPLAY, "a live answer, whatever the request");
	cr_expect_eq(idem_reserve_decide(&expired, mine, "me", 30000000, &plain),
	    IDEM_STEP_REUSE);
	cr_expect_eq(idem_reserve_decide(&ours, mine, "me", 1, &plain),
	    IDEM_STEP_OURS, "our own reservation is never taken over");
	cr_expect_eq(idem_reserve_decide(&stale, mine, "me", 30000000, &plain),
	    IDEM_STEP_TAKE_OVER);
	cr_expect_eq(idem_reserve_decide(&fresh, mine, "me", 30000000, &plain),
	    IDEM_STEP_IN_FLIGHT, "a lease exactly inflight-ttl old is live");
	cr_expect_eq(idem_reserve_decide(&stale_other, mine, "me", 30000000, &plain),
	    IDEM_STEP_IN_FLIGHT, "another request's reservation is never "
	    "taken over");
	cr_expect_eq(idem_reserve_decide(&paused, mine, "me", 30000000, &plain),
	    IDEM_STEP_RESUME, "a paused record goes on at once");
	cr_expect_eq(idem_reserve_decide(&paused, other, "me", 30000000, &recon),
	    IDEM_STEP_IN_FLIGHT, "kept for its own request only");
	cr_expect_eq(idem_reserve_decide(&paused_expired, mine, "me", 30000000, &plain), IDEM_STEP_REUSE);
	cr_expect_eq(idem_reserve_decide(&unknown, mine, "me", 30000000, &plain),
	    IDEM_STEP_UNKNOWN, "never run again without a reconcile hook, "
	    "however old its lease");
	cr_expect_eq(idem_reserve_decide(&unknown, mine, "me", 30000000, &recon),
	    IDEM_STEP_RECONCILE);
	cr_expect_eq(idem_reserve_decide(&reconciling, mine, "me", 30000000, &recon), IDEM_STEP_IN_FLIGHT, "being reconciled by a live execution");
	cr_expect_eq(idem_reserve_decide(&unheld, mine, "me", 30000000, &recon),
	    IDEM_STEP_RECONCILE, "held by nobody: at once");
	cr_expect_eq(idem_reserve_decide(&unknown, other, "me", 30000000, &recon),
	    IDEM_STEP_IN_FLIGHT, "another request never reconciles it");
	cr_expect_eq(idem_reserve_decide(&unknown_expired, mine, "me",
	    30000000, &recon), IDEM_STEP_REUSE);
	/* issue 35.1: the record's lease, not the taker's inflight-ttl */
	cr_expect_eq(idem_reserve_decide(&kept_live, mine, "me", 1000000, &plain),
	    IDEM_STEP_IN_FLIGHT, "a taker at 1 s cuts a 5 s lease short");
	cr_expect_eq(idem_reserve_decide(&kept_stale, mine, "me", 30000000, &plain),
	    IDEM_STEP_TAKE_OVER, "a taker at 30 s spares a lapsed 5 s lease");
	cr_expect_eq(idem_reserve_decide(&kept_reconciling, mine, "me",
	    1000000, &recon), IDEM_STEP_IN_FLIGHT, "a live reconciler taken");
	/* issue 35.2: an abandoned reservation is another body's to have */
	cr_expect_eq(idem_reserve_decide(&abandoned, other, "me", 1000000, &plain),
	    IDEM_STEP_REUSE, "blocked for ever");
	cr_expect_eq(idem_reserve_decide(&abandoned, mine, "me", 1000000, &plain),
	    IDEM_STEP_TAKE_OVER, "its own request goes on from its progress");
	cr_expect_eq(idem_reserve_decide(&expired_live, other, "me", 1000000, &plain), IDEM_STEP_IN_FLIGHT, "a live handler past its lifetime");
	cr_expect_eq(idem_reserve_decide(&lapsed_recently, other, "me",
	    1000000, &plain), IDEM_STEP_IN_FLIGHT, "a commit waiting out an outage");
	cr_expect_eq(idem_reserve_decide(&tomb_due, mine, "me", 1000000,
	    &plain), IDEM_STEP_EXPIRED, "a late retry runs again silently");
	cr_expect_eq(idem_reserve_decide(&tomb_due, mine, "me", 1000000,
	    &recon), IDEM_STEP_EXPIRED, "whatever the hook");
	cr_expect_eq(idem_reserve_decide(&tomb, other, "me", 1000000, &plain),
	    IDEM_STEP_EXPIRED, "refused for another request too");
	cr_expect_eq(idem_reserve_decide(&tomb, mine, "me", 1000000, &run),
	    IDEM_STEP_REUSE, "expired-keys = run");
	cr_expect_eq(idem_reserve_decide(&tomb_due, mine, "me", 1000000, &run),
	    IDEM_STEP_REUSE, "expired-keys = run");
	cr_expect_eq(idem_reserve_decide(&tomb_ended, mine, "me", 1000000,
	    &plain), IDEM_STEP_REUSE, "past the tombstone's end");
	cr_expect(idem_tombstone_live(C, 10, 20) && !idem_tombstone_live(C,
	    20, 20) && !idem_tombstone_live(C, -1, 20) &&
	    !idem_tombstone_live(C, 10, 0) && idem_tombstone_live(X, -1, 0) &&
	    !idem_tombstone_live(X, 0, 0) && !idem_tombstone_live(P, 10, 20),
	    "what a live tombstone is");
}
