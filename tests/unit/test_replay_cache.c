/*
 * test_replay_cache.c - the replay cache (idem_replay_cache.h): what it
 * gives back is what was put, never at or past its expiry, and it stays
 * within its bytes, least recently used out first.
 */
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "idem_replay_cache.h"
#include "idem_time.h"

static idem_store_key
key_of(const char *name, unsigned char scope)
{
	idem_store_key k;

	memset(&k, 0, sizeof(k));
	k.scope[0] = scope;
	k.key_len = (size_t)snprintf(k.key, sizeof(k.key), "%s", name);
	return k;
}

/* An answer with a body of n bytes of c, a NUL among them. */
static idem_stored_response
answer(char *buf, size_t n, char c)
{
	idem_stored_response r = { .status = 201 };

	memset(buf, c, n);
	if (n > 2)
		buf[n / 2] = '\0';
	r.headers = "Location: /a/1\r\nContent-Type: text/plain\r\n";
	r.headers_len = strlen(r.headers);
	r.body = buf;
	r.body_len = n;
	return r;
}

Test(replay_cache, gives_back_what_was_put)
{
	idem_replay_cache *c;
	idem_store_key k = key_of("k1", 0), other = key_of("k1", 1);
	unsigned char fp[32] = { 9, 8, 7 }, got_fp[32];
	char body[300];
	idem_stored_response a = answer(body, sizeof(body), 'x'), got;

	cr_assert_eq(idem_replay_cache_new(1 << 20, &c), IDEM_OK);
	cr_assert_not_null(c);
	idem_replay_cache_put(c, &k, fp, &a, 1000);
	cr_assert_eq(idem_replay_cache_get(c, &k, 999, got_fp, &got), 1);
	cr_expect_eq(got.status, 201);
	cr_expect_eq(got.headers_len, a.headers_len);
	cr_expect_eq(memcmp(got.headers, a.headers, a.headers_len), 0);
	cr_expect_eq(got.body_len, sizeof(body));
	cr_expect_eq(memcmp(got.body, body, sizeof(body)), 0);
	cr_expect_eq(memcmp(got_fp, fp, 32), 0);
	idem_stored_response_clear(&got);
	/* the same key in another scope is another record */
	cr_expect_eq(idem_replay_cache_get(c, &other, 0, got_fp, &got), 0);
	idem_replay_cache_free(c);
}

Test(replay_cache, never_at_or_past_expiry)
{
	idem_replay_cache *c;
	idem_store_key k = key_of("k2", 0);
	unsigned char fp[32] = { 1 }, got_fp[32];
	char body[10];
	idem_stored_response a = answer(body, sizeof(body), 'y'), got;
	uint64_t n, bytes;

	cr_assert_eq(idem_replay_cache_new(1 << 20, &c), IDEM_OK);
	idem_replay_cache_put(c, &k, fp, &a, 5000);
	cr_expect_eq(idem_replay_cache_get(c, &k, 5000, got_fp, &got), 0);
	/* and the expired entry is gone */
	idem_replay_cache_size(c, &n, &bytes);
	cr_expect_eq(n, 0);
	cr_expect_eq(bytes, 0);
	cr_expect_eq(idem_replay_cache_get(c, &k, 10, got_fp, &got), 0);
	idem_replay_cache_free(c);
}

Test(replay_cache, replaced_not_doubled)
{
	idem_replay_cache *c;
	idem_store_key k = key_of("k3", 0);
	unsigned char fp[32] = { 1 }, got_fp[32];
	char b1[10], b2[20];
	idem_stored_response a1 = answer(b1, sizeof(b1), 'a');
	idem_stored_response a2 = answer(b2, sizeof(b2), 'b'), got;
	uint64_t n, bytes;

	cr_assert_eq(idem_replay_cache_new(1 << 20, &c), IDEM_OK);
	idem_replay_cache_put(c, &k, fp, &a1, 100);
	idem_replay_cache_put(c, &k, fp, &a2, 100);
	idem_replay_cache_size(c, &n, &bytes);
	cr_expect_eq(n, 1);
	cr_assert_eq(idem_replay_cache_get(c, &k, 0, got_fp, &got), 1);
	cr_expect_eq(got.body_len, sizeof(b2));
	idem_stored_response_clear(&got);
	idem_replay_cache_free(c);
}

/* Within max_bytes: the least recently used go first; a get counts as a
 * use; an answer over an eighth of the cache is not kept. */
Test(replay_cache, bounded_least_recently_used_out)
{
	idem_replay_cache *c;
	unsigned char fp[32] = { 1 }, got_fp[32];
	char body[1000], big[2000], name[16];
	idem_stored_response a = answer(body, sizeof(body), 'z'), got;
	idem_stored_response huge = answer(big, sizeof(big), 'h');
	idem_store_key k;
	uint64_t n, bytes;
	int i;

	cr_assert_eq(idem_replay_cache_new(16000, &c), IDEM_OK);
	for (i = 0; i < 30; i++) {
		snprintf(name, sizeof(name), "e%d", i);
		k = key_of(name, 0);
		idem_replay_cache_put(c, &k, fp, &a, 1000);
		/* e0 is used after every put: it stays */
		k = key_of("e0", 0);
		if (idem_replay_cache_get(c, &k, 0, got_fp, &got) == 1)
			idem_stored_response_clear(&got);
		idem_replay_cache_size(c, &n, &bytes);
		cr_assert_leq(bytes, 16000);
	}
	cr_expect_gt(n, 5);
	cr_expect_lt(n, 16);
	k = key_of("e0", 0);
	cr_expect_eq(idem_replay_cache_get(c, &k, 0, got_fp, &got), 1);
	idem_stored_response_clear(&got);
	k = key_of("e1", 0);
	cr_expect_eq(idem_replay_cache_get(c, &k, 0, got_fp, &got), 0);
	k = key_of("e29", 0);
	cr_expect_eq(idem_replay_cache_get(c, &k, 0, got_fp, &got), 1);
	idem_stored_response_clear(&got);
	k = key_of("huge", 0);
	idem_replay_cache_put(c, &k, fp, &huge, 1000);
	cr_expect_eq(idem_replay_cache_get(c, &k, 0, got_fp, &got), 0);
	idem_replay_cache_free(c);
}

/* Size 0 is no cache; every call takes it. */
Test(replay_cache, size_zero_is_none)
{
	idem_replay_cache *c = (idem_replay_cache *)1;
	idem_store_key k = key_of("k", 0);
	unsigned char fp[32] = { 0 };
	char body[4];
	idem_stored_response a = answer(body, sizeof(body), 'q'), got;
	uint64_t n, bytes;

	cr_assert_eq(idem_replay_cache_new(0, &c), IDEM_OK);
	cr_assert_null(c);
	idem_replay_cache_put(c, &k, fp, &a, 100);
	cr_expect_eq(idem_replay_cache_get(c, &k, 0, fp, &got), 0);
	idem_replay_cache_size(c, &n, &bytes);
	cr_expect_eq(n, 0);
	idem_replay_cache_free(c);
}

/* What a store keeps of an answer it read: until the time the database
 * gave it left, counted from before the read, and at most a minute;
 * nothing when no time is left. */
Test(replay_cache, keep_holds_for_the_time_left_at_most_a_minute)
{
	idem_replay_cache *c;
	idem_store_key k = key_of("kept", 0), brief = key_of("brief", 0),
	    gone = key_of("gone", 0);
	unsigned char fp[32] = { 1 }, got_fp[32];
	char body[10];
	idem_stored_response a = answer(body, sizeof(body), 'k'), got;

	cr_assert_eq(idem_replay_cache_new(1 << 20, &c), IDEM_OK);
	/* an hour left: held for the minute only */
	idem_replay_cache_keep(c, &k, fp, &a, 5000, 3600LL * 1000 * 1000);
	cr_expect_eq(idem_replay_cache_get(c, &k, 5000 +
	    IDEM_REPLAY_CACHE_HOLD_MS - 1, got_fp, &got), 1);
	idem_stored_response_clear(&got);
	cr_expect_eq(idem_replay_cache_get(c, &k, 5000 +
	    IDEM_REPLAY_CACHE_HOLD_MS, got_fp, &got), 0);
	/* 2 s left: held 2 s from the read */
	idem_replay_cache_keep(c, &brief, fp, &a, 5000, 2000 * 1000);
	cr_expect_eq(idem_replay_cache_get(c, &brief, 6999, got_fp, &got), 1);
	idem_stored_response_clear(&got);
	cr_expect_eq(idem_replay_cache_get(c, &brief, 7000, got_fp, &got), 0);
	/* nothing left, or less than a millisecond: not kept */
	idem_replay_cache_keep(c, &gone, fp, &a, 5000, 0);
	idem_replay_cache_keep(c, &gone, fp, &a, 5000, -1000);
	idem_replay_cache_keep(c, &gone, fp, &a, 5000, 999);
	cr_expect_eq(idem_replay_cache_get(c, &gone, 5000, got_fp, &got), 0);
	idem_replay_cache_free(c);
}

/* A reserve answered from the cache: COMMITTED, marked cached, with the
 * record's fingerprint and a copy of its answer; nothing for another key
 * or for no cache. */
Test(replay_cache, reserve_answers_from_the_cache)
{
	idem_replay_cache *c;
	idem_store_key k = key_of("served", 0), other = key_of("other", 0);
	unsigned char fp[32] = { 4, 2 };
	char body[20];
	idem_stored_response a = answer(body, sizeof(body), 's');
	idem_reserve_result r;

	cr_assert_eq(idem_replay_cache_new(1 << 20, &c), IDEM_OK);
	/* its clock is CLOCK_BOOTTIME: now, and a minute on */
	idem_replay_cache_keep(c, &k, fp, &a, idem_boot_ms(), 60LL * 1000 * 1000);
	memset(&r, 0, sizeof(r));
	cr_assert_eq(idem_replay_cache_reserve(c, &k, &r), 1);
	cr_expect_eq(r.outcome, IDEM_RESERVE_COMMITTED);
	cr_expect_eq(r.cached, 1);
	cr_expect_eq(memcmp(r.fingerprint, fp, 32), 0);
	cr_expect_eq(r.response.status, 201);
	cr_expect_eq(r.response.body_len, sizeof(body));
	idem_reserve_result_clear(&r);
	cr_expect_eq(idem_replay_cache_reserve(c, &other, &r), 0);
	cr_expect_eq(idem_replay_cache_reserve(NULL, &k, &r), 0);
	idem_replay_cache_free(c);
}
