/*
 * test_lease.c - the lease module (idem_lease.h) against a fake store
 * that holds a few records, records every call, and can be told to be
 * down (IDEM_ERR_STORE) or contended (IDEM_ERR_BUSY) per operation, or
 * to have a record taken over by another owner (fencing).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "calls.h"
#include "harness.h"
#include "idem_lease.h"
#include "idem_log.h"
#include "idem_metrics.h"
#include "idem_router.h"
#include "idem_time.h"
#include "store_req.h"

/* ------------------------------------------------------ the fake store */

#define FAKE_RECORDS 8

typedef struct fake_record {
	char key[32];             /* "": free */
	char owner[IDEM_OWNER_MAX + 1];
	int committed, status;
} fake_record;

typedef struct fake {
	idem_store base;
	pthread_mutex_t lock;
	fake_record rec[FAKE_RECORDS];
	/* IDEM_OK: the operation works; else what it returns */
	idem_err commit_err, release_err, renew_err;
	long commit_delay_ms;     /* a slow commit (a store that times out) */
	int commits, releases, renews;   /* calls */
	int busy;                 /* answers IDEM_ERR_BUSY, each reported as
	                           * one contention, as a store reports a
	                           * deadlock */
} fake;

/* Reports err's contention in rq as a store does, counted in f->busy.
 * Under f->lock.  Returns err. */
static idem_err
contended(fake *f, idem_store_req *rq, idem_err err)
{
	if (err == IDEM_ERR_BUSY) {
		rq->contended++;
		f->busy++;
	}
	return err;
}

/* The record of k, or NULL.  Under f->lock. */
static fake_record *
find(fake *f, const idem_store_key *k)
{
	size_t i;

	for (i = 0; i < FAKE_RECORDS; i++)
		if (f->rec[i].key[0] != '\0' && strcmp(f->rec[i].key, k->key) == 0)
			return &f->rec[i];
	return NULL;
}

/* The in-flight record of k held by owner, or NULL.  Under f->lock. */
static fake_record *
owned(fake *f, const idem_store_key *k, const char *owner)
{
	fake_record *r = find(f, k);

	return r != NULL && !r->committed && strcmp(r->owner, owner) == 0 ?
	    r : NULL;
}

static idem_err
fake_commit(idem_store *s, idem_store_req *rq, const idem_stored_response *resp)
{
	fake *f = (fake *)s;
	fake_record *r;
	idem_err err;
	long delay;

	pthread_mutex_lock(&f->lock);
	f->commits++;
	delay = f->commit_delay_ms;
	pthread_mutex_unlock(&f->lock);
	if (delay > 0)
		call_sleep(delay);
	pthread_mutex_lock(&f->lock);
	if ((err = f->commit_err) == IDEM_OK) {
		if ((r = owned(f, &rq->key, rq->owner)) == NULL) {
			err = IDEM_ERR_NOT_FOUND;
		} else {
			r->committed = 1;
			r->status = resp->status;
		}
	}
	err = contended(f, rq, err);
	pthread_mutex_unlock(&f->lock);
	return err;
}

static idem_err
fake_release(idem_store *s, idem_store_req *rq)
{
	fake *f = (fake *)s;
	fake_record *r;
	idem_err err;

	pthread_mutex_lock(&f->lock);
	f->releases++;
	if ((err = f->release_err) == IDEM_OK) {
		if ((r = owned(f, &rq->key, rq->owner)) == NULL)
			err = IDEM_ERR_NOT_FOUND;
		else
			memset(r, 0, sizeof(*r));
	}
	pthread_mutex_unlock(&f->lock);
	return err;
}

static idem_err
fake_renew(idem_store *s, idem_store_req *rq)
{
	fake *f = (fake *)s;
	idem_err err;

	pthread_mutex_lock(&f->lock);
	f->renews++;
	if ((err = f->renew_err) == IDEM_OK &&
	    owned(f, &rq->key, rq->owner) == NULL)
		err = IDEM_ERR_NOT_FOUND;
	pthread_mutex_unlock(&f->lock);
	return err;
}

static void
fake_close(idem_store *s)
{
	pthread_mutex_destroy(&((fake *)s)->lock);
	free(s);
}

static const idem_store_ops fake_ops = { .name = "fake",
    .commit = fake_commit, .release = fake_release, .renew = fake_renew,
    .close = fake_close };

/* Makes the operation *op of f return err (IDEM_OK: work again). */
static void
fake_fail(fake *f, idem_err *op, idem_err err)
{
	pthread_mutex_lock(&f->lock);
	*op = err;
	pthread_mutex_unlock(&f->lock);
}

/* Makes every operation of f return err (IDEM_OK: work again). */
static void
fake_mode(fake *f, idem_err err)
{
	pthread_mutex_lock(&f->lock);
	f->commit_err = f->release_err = f->renew_err = err;
	pthread_mutex_unlock(&f->lock);
}

/* Puts an in-flight record of key held by owner, as a reserve would, or
 * hands an existing one to owner, as a takeover would. */
static void
fake_hold(fake *f, const char *key, const char *owner)
{
	idem_store_key k;
	fake_record *r;
	size_t i;

	memset(&k, 0, sizeof(k));
	snprintf(k.key, sizeof(k.key), "%s", key);
	pthread_mutex_lock(&f->lock);
	if ((r = find(f, &k)) == NULL)
		for (i = 0; i < FAKE_RECORDS && r == NULL; i++)
			if (f->rec[i].key[0] == '\0')
				r = &f->rec[i];
	cr_assert_not_null(r);
	memset(r, 0, sizeof(*r));
	snprintf(r->key, sizeof(r->key), "%s", key);
	snprintf(r->owner, sizeof(r->owner), "%s", owner);
	pthread_mutex_unlock(&f->lock);
}

/* What f knows of key: -1 no record, 0 in flight, else the committed
 * status. */
static int
fake_state(fake *f, const char *key)
{
	idem_store_key k;
	fake_record *r;
	int state;

	memset(&k, 0, sizeof(k));
	snprintf(k.key, sizeof(k.key), "%s", key);
	pthread_mutex_lock(&f->lock);
	r = find(f, &k);
	state = r == NULL ? -1 : r->committed ? r->status : 0;
	pthread_mutex_unlock(&f->lock);
	return state;
}

/* A call counter of f, read under its lock. */
static int
fake_count(fake *f, const int *counter)
{
	int n;

	pthread_mutex_lock(&f->lock);
	n = *counter;
	pthread_mutex_unlock(&f->lock);
	return n;
}

static unsigned route_row;      /* the keys' route: POST /lease */

/* The lease module's writer of deferred commits: a plain commit. */
static idem_err
plain_commit(void *arg, idem_store_req *rq, unsigned row,
    const idem_stored_response *answer, const idem_log_ctx *ctx)
{
	cr_assert_not_null(ctx);
	cr_assert_not_null(ctx->key_hash);
	cr_assert_eq(row, route_row);
	return idem_store_commit(arg, rq, answer);
}

/* ------------------------------------------------------------ fixture */

static fake *fs;
static idem_leases *ls;
static idem_metrics *metrics;
static idem_route route;        /* its route, that req matched */
static idem_request req;

/* Leases over a fresh fake store, renewed every ttl_ms / 3. */
static void
start(uint64_t ttl_ms)
{
	fs = calloc(1, sizeof(*fs));
	cr_assert_not_null(fs);
	fs->base.ops = &fake_ops;
	pthread_mutex_init(&fs->lock, NULL);
	cr_assert_eq(idem_metrics_new(&metrics), IDEM_OK);
	route_row = idem_metrics_route(metrics, "POST", "/lease", 1);
	cr_assert_eq(idem_leases_new(&fs->base, ttl_ms, plain_commit, fs, &ls),
	    IDEM_OK);
	idem_leases_set_metrics(ls, metrics);
	memset(&req, 0, sizeof(req));
	snprintf(req.request_id, sizeof(req.request_id), "rid-lease");
	memset(&route, 0, sizeof(route));
	route.method = "POST";
	route.tmpl = "/lease";
	route.metrics_row = route_row;
	req.route = &route;
	idem_log_set_level(IDEM_LOG_ERROR + 1);
}

/* Rounds every 20 ms. */
static void
start_fast(void)
{
	start(60);
}

/* Rounds every 10 s: nothing runs in the background during a test. */
static void
start_idle(void)
{
	start(30000);
}

static void
stop(void)
{
	idem_leases_free(ls);
	ls = NULL;
	fake_close(&fs->base);
	idem_metrics_free(metrics);
	idem_log_set_level(IDEM_LOG_INFO);
}

/* The store key of key. */
static idem_store_key
skey(const char *key)
{
	idem_store_key k;

	memset(&k, 0, sizeof(k));
	snprintf(k.key, sizeof(k.key), "%s", key);
	k.key_len = strlen(k.key);
	return k;
}

/* Registers job for key by owner; a COMMIT carries a 201 answer. */
static idem_lease *
add(idem_lease_job job, const char *key, const char *owner)
{
	static char headers[] = "Content-Type: application/json\r\n";
	static char body[] = "{\"ok\":true}";
	idem_stored_response answer = { 201, headers, sizeof(headers) - 1,
	    body, sizeof(body) - 1 };
	idem_store_key k = skey(key);

	/* as the request of req, on the route POST /lease */
	return idem_leases_add(ls, job, &req, TEST_REQ(&k, NULL, owner,
	    req.request_id, 30000, 60000), job == IDEM_LEASE_COMMIT ? &answer :
	    NULL);
}

/* The count of outcome in the metrics, on the keys' route. */
static double
outcome(const char *name)
{
	char *text;
	size_t len;
	double v;

	text = idem_metrics_render(metrics, NULL, &len);
	cr_assert_not_null(text);
	v = harness_route_outcome(text, "POST", "/lease", name);
	free(text);
	return v;
}

/* Waits up to 5 s (the thread is slow under valgrind) for a call counter
 * of fs to reach n.  Returns whether it did. */
static int
reaches(const int *counter, int n)
{
	uint64_t end = idem_now_ms() + 5000;

	while (fake_count(fs, counter) < n) {
		if (idem_now_ms() >= end)
			return 0;
		call_sleep(10);
	}
	return 1;
}

/* Waits up to ms for the backlog to empty.  Returns whether it did. */
static int
backlog_drains(long ms)
{
	uint64_t end = idem_now_ms() + (uint64_t)ms;

	while (idem_leases_backlog(ls) > 0) {
		if (idem_now_ms() >= end)
			return 0;
		call_sleep(10);
	}
	return 1;
}

static harness_capture capture;

/* ------------------------------------------------------------- renewal */

/* A live handler's lease is renewed every round until it is removed;
 * then it leaves the renewal set. */
Test(lease, live_leases_renewed_until_removed, .init = start_fast,
    .fini = stop)
{
	idem_lease *a, *b;
	int n;

	fake_hold(fs, "ka", "oa");
	fake_hold(fs, "kb", "ob");
	a = add(IDEM_LEASE_RENEW, "ka", "oa");
	b = add(IDEM_LEASE_RENEW, "kb", "ob");
	cr_assert_not_null(a);
	cr_assert_not_null(b);
	cr_expect(reaches(&fs->renews, 6), "two leases, several rounds");
	cr_expect_eq(idem_leases_backlog(ls), 0, "a renewal is not a job");
	cr_expect_eq(idem_leases_remove(ls, a), 0, "not lost");
	cr_expect_eq(idem_leases_remove(ls, b), 0, "not lost");
	/* a round under way may still renew its copy */
	call_sleep(200);
	n = fake_count(fs, &fs->renews);
	call_sleep(100);
	cr_expect_eq(fake_count(fs, &fs->renews), n, "removed: no renewal");
	cr_expect_eq(fake_count(fs, &fs->commits), 0);
	cr_expect_eq(fake_count(fs, &fs->releases), 0);
}

/* A renewal the store refuses (the reservation was taken over) marks the
 * lease lost and logs it once; the lease stays until its handler
 * removes it, which learns it was lost. */
Test(lease, taken_over_lease_is_lost, .init = start_fast, .fini = stop)
{
	char log[4096];
	idem_lease *l;

	fake_hold(fs, "kl", "mine");
	l = add(IDEM_LEASE_RENEW, "kl", "mine");
	cr_assert_not_null(l);
	cr_assert_eq(harness_capture_level(&capture, IDEM_LOG_WARN), 0);
	fake_hold(fs, "kl", "theirs");
	/* a round refused, and the next one began after it was recorded */
	cr_expect(reaches(&fs->renews, fake_count(fs, &fs->renews) + 2));
	harness_capture_into(&capture, log, sizeof(log));
	cr_expect_eq(harness_occurrences(log, "event=lease_lost"), 1, "%s", log);
	cr_expect(strstr(log, "req=rid-lease") != NULL, "%s", log);
	cr_expect(strstr(log, "kl") == NULL, "never the key itself: %s", log);
	cr_expect_eq(idem_leases_remove(ls, l), 1, "lost");
	cr_expect_eq(fake_state(fs, "kl"), 0, "the new owner's record stays");
}

/* A handler that returned and is committing: a refused renewal is its
 * commit landing, not a takeover, so nothing is logged. */
Test(lease, finishing_lease_not_logged_lost, .init = start_fast,
    .fini = stop)
{
	char log[4096];
	idem_lease *l;

	fake_hold(fs, "kf", "mine");
	l = add(IDEM_LEASE_RENEW, "kf", "mine");
	idem_leases_finishing(ls, l);
	cr_assert_eq(harness_capture_level(&capture, IDEM_LOG_WARN), 0);
	fake_hold(fs, "kf", "theirs");
	cr_expect(reaches(&fs->renews, fake_count(fs, &fs->renews) + 2));
	harness_capture_into(&capture, log, sizeof(log));
	cr_expect_eq(harness_occurrences(log, "lease_lost"), 0, "%s", log);
	cr_expect_eq(idem_leases_remove(ls, l), 1, "still marked lost");
}

/* ----------------------------------------------------- deferred commits */

/* A commit that met an outage is retried every round, its lease renewed
 * meanwhile, until the store is back; then it is stored once, counted,
 * and leaves the backlog. */
Test(lease, deferred_commit_retried_until_store_back, .init = start_fast,
    .fini = stop)
{
	char log[4096];
	int n;

	fake_hold(fs, "kc", "oc");
	fake_mode(fs, IDEM_ERR_STORE);
	cr_assert_not_null(add(IDEM_LEASE_COMMIT, "kc", "oc"));
	cr_expect_eq(idem_leases_backlog(ls), 1);
	cr_expect(reaches(&fs->commits, 3), "retried every round");
	cr_expect(reaches(&fs->renews, 3), "and its lease renewed");
	cr_expect_eq(fake_state(fs, "kc"), 0, "not stored yet");
	cr_expect_eq(idem_leases_backlog(ls), 1, "still waiting");
	cr_expect_eq(outcome("committed"), 0);
	cr_assert_eq(harness_capture_level(&capture, IDEM_LOG_INFO), 0);
	fake_mode(fs, IDEM_OK);
	cr_expect(backlog_drains(5000), "the commit lands");
	harness_capture_into(&capture, log, sizeof(log));
	cr_expect_eq(fake_state(fs, "kc"), 201, "stored with its status");
	cr_expect_eq(outcome("committed"), 1);
	cr_expect_eq(outcome("fenced"), 0);
	cr_expect(strstr(log, "event=committed") != NULL, "%s", log);
	n = fake_count(fs, &fs->commits);
	call_sleep(100);
	cr_expect_eq(fake_count(fs, &fs->commits), n, "done: never again");
}

/* Contention (IDEM_ERR_BUSY) is retried like an outage. */
Test(lease, contended_commit_retried, .init = start_fast, .fini = stop)
{
	fake_hold(fs, "kb", "ob");
	fake_fail(fs, &fs->commit_err, IDEM_ERR_BUSY);
	cr_assert_not_null(add(IDEM_LEASE_COMMIT, "kb", "ob"));
	cr_expect(reaches(&fs->commits, 2));
	cr_expect_eq(idem_leases_backlog(ls), 1);
	fake_mode(fs, IDEM_OK);
	cr_expect(backlog_drains(5000));
	cr_expect_eq(fake_state(fs, "kb"), 201);
	/* the contention the store reported, counted on the job's route */
	cr_expect_gt(fake_count(fs, &fs->busy), 0);
	cr_expect_eq(outcome("contended"), fake_count(fs, &fs->busy));
}

/* A commit that fails for good (not an outage, not fencing) is logged
 * and given up, not retried forever. */
Test(lease, failed_commit_given_up, .init = start_fast, .fini = stop)
{
	char log[4096];

	fake_hold(fs, "kg", "og");
	fake_fail(fs, &fs->commit_err, IDEM_ERR_NOMEM);
	cr_assert_eq(harness_capture_level(&capture, IDEM_LOG_ERROR), 0);
	cr_assert_not_null(add(IDEM_LEASE_COMMIT, "kg", "og"));
	cr_expect(backlog_drains(5000));
	call_sleep(100);
	harness_capture_into(&capture, log, sizeof(log));
	cr_expect_eq(fake_count(fs, &fs->commits), 1, "tried once");
	cr_expect(strstr(log, "event=commit_failed") != NULL, "%s", log);
	cr_expect_eq(outcome("committed"), 0);
}

/* ---------------------------------------------------- deferred releases */

/* A release that met an outage is retried until the store is back, with
 * no renewal (its handler is done); then the record is gone. */
Test(lease, deferred_release_retried, .init = start_fast, .fini = stop)
{
	fake_hold(fs, "kr", "or");
	fake_mode(fs, IDEM_ERR_STORE);
	cr_assert_not_null(add(IDEM_LEASE_RELEASE, "kr", "or"));
	cr_expect(reaches(&fs->releases, 3), "retried every round");
	cr_expect_eq(fake_count(fs, &fs->renews), 0, "never renewed");
	cr_expect_eq(fake_state(fs, "kr"), 0);
	cr_expect_eq(idem_leases_backlog(ls), 1);
	fake_mode(fs, IDEM_OK);
	cr_expect(backlog_drains(5000));
	cr_expect_eq(fake_state(fs, "kr"), -1, "released");
	cr_expect_eq(outcome("released"), 1);
}

/* The record of a reserve that got no answer is deleted once the store
 * answers, and nothing is counted (it was never acquired). */
Test(lease, forget_deletes_once_back, .init = start_fast, .fini = stop)
{
	fake_hold(fs, "kx", "ox");
	fake_mode(fs, IDEM_ERR_STORE);
	cr_assert_not_null(add(IDEM_LEASE_FORGET, "kx", "ox"));
	cr_expect(reaches(&fs->releases, 2), "retried");
	cr_expect_eq(fake_state(fs, "kx"), 0);
	fake_mode(fs, IDEM_OK);
	cr_expect(backlog_drains(5000));
	cr_expect_eq(fake_state(fs, "kx"), -1);
	cr_expect_eq(outcome("released"), 0);
	cr_expect_eq(fake_count(fs, &fs->renews), 0);
}

/* A reservation that comes into being after its FORGET found nothing (an
 * INSERT the database ran late, after a lock wait its client gave up on)
 * is deleted by a later round, while the store's settle_ms lasts; after
 * that the job is done. */
Test(lease, forget_looks_again_until_settled, .init = start_fast,
    .fini = stop)
{
	int before;

	fs->base.settle_ms = 3000;
	cr_assert_not_null(add(IDEM_LEASE_FORGET, "kf", "of"));
	cr_expect(reaches(&fs->releases, 2), "looked for more than once");
	cr_expect_eq(idem_leases_backlog(ls), 1, "kept until settled");
	/* the late INSERT lands */
	fake_hold(fs, "kf", "of");
	cr_expect(backlog_drains(10000));
	cr_expect_eq(fake_state(fs, "kf"), -1, "the late reservation deleted");
	before = fake_count(fs, &fs->releases);
	call_sleep(200);
	cr_expect_eq(fake_count(fs, &fs->releases), before, "done once settled");
	cr_expect_eq(outcome("released"), 0);
}

/* A FORGET still waiting to settle when the worker stops: looked for a
 * round at most every 100 ms until the budget ends (never a spin), then
 * logged as unsettled, not as a store that is away. */
Test(lease, flush_of_an_unsettled_forget, .init = start_idle, .fini = stop)
{
	char log[4096];
	int n;

	fs->base.settle_ms = 20000;
	cr_assert_not_null(add(IDEM_LEASE_FORGET, "kuf", "ouf"));
	cr_assert_eq(harness_capture_level(&capture, IDEM_LOG_WARN), 0);
	cr_expect_eq(idem_leases_flush(ls, 300), 1);
	n = fake_count(fs, &fs->releases);
	cr_expect(n >= 1 && n <= 5, "a round every 100 ms: %d tries", n);
	harness_capture_into(&capture, log, sizeof(log));
	cr_expect(strstr(log, "settled") != NULL, "%s", log);
	cr_expect(strstr(log, "the store is away") == NULL, "%s", log);
}

/* -------------------------------------------------------------- fencing */

/* Another owner took the key over: the deferred commit is refused, counted
 * as fenced, logged, and not retried; the new owner's record is kept. */
Test(lease, fenced_commit_counted_and_dropped, .init = start_fast,
    .fini = stop)
{
	char log[4096];

	fake_hold(fs, "kt", "theirs");
	cr_assert_eq(harness_capture_level(&capture, IDEM_LOG_WARN), 0);
	cr_assert_not_null(add(IDEM_LEASE_COMMIT, "kt", "mine"));
	cr_expect(backlog_drains(5000));
	call_sleep(100);
	harness_capture_into(&capture, log, sizeof(log));
	cr_expect_eq(fake_count(fs, &fs->commits), 1, "not retried");
	cr_expect_eq(outcome("fenced"), 1);
	cr_expect_eq(outcome("committed"), 0);
	cr_expect_eq(harness_occurrences(log, "event=fenced"), 1, "%s", log);
	cr_expect_eq(fake_state(fs, "kt"), 0, "theirs, still in flight");
}

/* Fenced while the store is contended: the commit keeps failing, but the
 * renewal says the key is another's, so the job goes (counted once) instead
 * of being retried forever. */
Test(lease, commit_lost_while_contended_dropped, .init = start_fast,
    .fini = stop)
{
	char log[4096];
	int n;

	fake_hold(fs, "kw", "mine");
	fake_fail(fs, &fs->commit_err, IDEM_ERR_BUSY);
	cr_assert_not_null(add(IDEM_LEASE_COMMIT, "kw", "mine"));
	cr_expect(reaches(&fs->commits, 1));
	cr_assert_eq(harness_capture_level(&capture, IDEM_LOG_WARN), 0);
	fake_hold(fs, "kw", "theirs");
	cr_expect(backlog_drains(5000));
	n = fake_count(fs, &fs->commits);
	call_sleep(100);
	harness_capture_into(&capture, log, sizeof(log));
	cr_expect_eq(fake_count(fs, &fs->commits), n, "not retried");
	cr_expect_eq(outcome("fenced"), 1);
	cr_expect(strstr(log, "taken over while the store was away") != NULL,
	    "%s", log);
}

/* A deferred release of a key taken over meanwhile is fenced too. */
Test(lease, fenced_release_counted_and_dropped, .init = start_fast,
    .fini = stop)
{
	fake_hold(fs, "ky", "theirs");
	cr_assert_not_null(add(IDEM_LEASE_RELEASE, "ky", "mine"));
	cr_expect(backlog_drains(5000));
	call_sleep(100);
	cr_expect_eq(fake_count(fs, &fs->releases), 1, "not retried");
	cr_expect_eq(outcome("fenced"), 1);
	cr_expect_eq(outcome("released"), 0);
	cr_expect_eq(fake_state(fs, "ky"), 0, "theirs is kept");
}

/* --------------------------------------------------------- the last flush */

/* The store came back before the stop: the last attempt writes every job
 * and leaves nothing. */
Test(lease, flush_writes_what_waits, .init = start_idle, .fini = stop)
{
	fake_hold(fs, "f1", "o1");
	fake_hold(fs, "f2", "o2");
	cr_assert_not_null(add(IDEM_LEASE_COMMIT, "f1", "o1"));
	cr_assert_not_null(add(IDEM_LEASE_RELEASE, "f2", "o2"));
	cr_expect_eq(idem_leases_backlog(ls), 2);
	cr_expect_eq(fake_count(fs, &fs->commits), 0, "no round ran yet");
	cr_expect_eq(idem_leases_flush(ls, 2000), 0);
	cr_expect_eq(fake_state(fs, "f1"), 201);
	cr_expect_eq(fake_state(fs, "f2"), -1);
	cr_expect_eq(idem_leases_backlog(ls), 0);
	cr_expect_eq(idem_leases_flush(ls, 2000), 0, "once is enough");
}

/* A store still away: the last attempt stays within its budget, trying
 * the store once a round (not once per job), and logs each job it drops
 * by key hash; jobs added after it are dropped and logged at once. */
Test(lease, flush_within_deadline, .init = start_idle, .fini = stop)
{
	char key[16], log[8192];
	uint64_t t0, spent;
	int i, n;

	for (i = 0; i < 5; i++) {
		snprintf(key, sizeof(key), "drop-%d", i);
		fake_hold(fs, key, "od");
		cr_assert_not_null(add(IDEM_LEASE_COMMIT, key, "od"));
	}
	fake_mode(fs, IDEM_ERR_STORE);
	pthread_mutex_lock(&fs->lock);
	fs->commit_delay_ms = 60;
	pthread_mutex_unlock(&fs->lock);
	cr_assert_eq(harness_capture_level(&capture, IDEM_LOG_ERROR), 0);
	t0 = idem_now_ms();
	cr_expect_eq(idem_leases_flush(ls, 250), 5, "all five left");
	spent = idem_now_ms() - t0;
	/* a round: one try of 60 ms, then 100 ms apart; once per job would
	 * be 5 tries within the 250 ms */
	n = fake_count(fs, &fs->commits);
	cr_expect(n >= 1 && n <= 3, "once a round: %d tries", n);
	/* loose: valgrind slows every step */
	cr_expect_lt(spent, 2000, "near the budget: %llu ms",
	    (unsigned long long)spent);
	cr_expect_eq(add(IDEM_LEASE_RELEASE, "drop-0", "od"), NULL,
	    "too late");
	harness_capture_into(&capture, log, sizeof(log));
	cr_expect_eq(harness_occurrences(log, "event=dropped_at_exit"), 6, "%s", log);
	cr_expect(strstr(log, "key=") != NULL, "%s", log);
	cr_expect(strstr(log, "drop-") == NULL, "never the key itself: %s",
	    log);
	cr_expect_eq(idem_leases_backlog(ls), 0);
}

/* Freed without a flush: every job is logged as dropped, none tried. */
Test(lease, free_drops_and_logs, .init = start_idle)
{
	char log[4096];

	cr_assert_not_null(add(IDEM_LEASE_COMMIT, "g1", "o1"));
	cr_assert_not_null(add(IDEM_LEASE_RENEW, "g2", "o2"));
	cr_assert_eq(harness_capture_level(&capture, IDEM_LOG_ERROR), 0);
	idem_leases_free(ls);
	harness_capture_into(&capture, log, sizeof(log));
	cr_expect_eq(harness_occurrences(log, "event=dropped_at_exit"), 1, "%s", log);
	cr_expect_eq(fake_count(fs, &fs->commits), 0);
	fake_close(&fs->base);
	idem_metrics_free(metrics);
}

/* ------------------------------------------------------------- backlog */

/* At most IDEM_LEASE_MAX_BACKLOG jobs wait; renewals are not counted. */
Test(lease, backlog_bounded, .init = start_idle, .fini = stop)
{
	int i;

	for (i = 0; i < IDEM_LEASE_MAX_BACKLOG; i++)
		cr_assert_not_null(add(IDEM_LEASE_FORGET, "kz", "oz"));
	cr_expect_eq(idem_leases_backlog(ls), IDEM_LEASE_MAX_BACKLOG);
	cr_expect_null(add(IDEM_LEASE_RELEASE, "kz", "oz"), "over the cap");
	cr_expect_not_null(add(IDEM_LEASE_RENEW, "kz", "oz"), "a renewal fits");
	cr_expect_eq(idem_leases_backlog(ls), IDEM_LEASE_MAX_BACKLOG);
}
