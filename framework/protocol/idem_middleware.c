/*
 * idem_middleware.c - reserve, run, commit or release, replay.  The leases
 * of the reservations and the jobs a store outage defers are idem_lease.c's.
 */
#include "config.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "idem_answer.h"
#include "idem_downstream.h"
#include "idem_key.h"
#include "idem_lease.h"
#include "idem_log.h"
#include "idem_request_log.h"
#include "idem_metrics.h"
#include "idem_middleware.h"
#include "idem_middleware_int.h"
#include "idem_router.h"
#include "idem_store_tx.h"
#include "idem_time.h"

#include <jansson.h>

/* Whether req asks for the fault named point (see FAULT_HEADER). */
int
idem_mw_fault(const idem_middleware *mw, const idem_request *req, const char *point)
{
	const char *v;

	if (!mw->faults)
		return 0;
	v = idem_request_header(req, FAULT_HEADER);
	return v != NULL && strcmp(v, point) == 0;
}

/* Dies at point when req asks for it: a worker killed there. */
void
idem_mw_fault_die(const idem_middleware *mw, const idem_request *req,
    const char *point)
{
	if (idem_mw_fault(mw, req, point))
		raise(SIGKILL);
}

/* Counts an outcome on a metrics row when mw has metrics. */
void
idem_mw_count_row(const idem_middleware *mw, unsigned row, idem_outcome o)
{
	if (mw->metrics != NULL)
		idem_metrics_outcome(mw->metrics, row, o, 1);
}

/* Counts an outcome of req's route when mw has metrics. */
void
idem_mw_count(const idem_middleware *mw, const idem_request *req, idem_outcome o)
{
	idem_mw_count_row(mw, req->route->metrics_row, o);
}

/* Counts the contention the store met for rq on req's route, and clears
 * it. */
void
idem_mw_count_contended(const idem_middleware *mw, const idem_request *req,
    idem_store_req *rq)
{
	if (rq->contended > 0 && mw->metrics != NULL)
		idem_metrics_outcome(mw->metrics, req->route->metrics_row,
		    IDEM_OUTCOME_CONTENDED, rq->contended);
	rq->contended = 0;
}

static idem_err commit_deferred(void *arg, idem_store_req *rq, unsigned row,
    const idem_stored_response *sr, const idem_log_ctx *ctx);

idem_err
idem_middleware_new(const idem_config *cfg, idem_store *store,
    uint64_t least_lease_ms, idem_middleware **out)
{
	idem_middleware *mw = calloc(1, sizeof(*mw));
	const char *faults;

	if (mw == NULL || idem_leases_new(store, least_lease_ms,
	    commit_deferred, mw, &mw->leases) != IDEM_OK) {
		free(mw);
		idem_store_close(store);
		return IDEM_ERR_NOMEM;
	}
	mw->cfg = cfg;
	mw->store = store;
	faults = getenv("IDEMFCGI_TEST_FAULTS");
	mw->faults = faults != NULL && strcmp(faults, "1") == 0;
	idem_random_id(mw->instance);
	idem_sha256_init();
	*out = mw;
	return IDEM_OK;
}

void
idem_middleware_set_instance(idem_middleware *mw, const char *id)
{
	snprintf(mw->instance, sizeof(mw->instance), "%s", id);
}

unsigned
idem_middleware_flush(idem_middleware *mw, uint64_t budget_ms)
{
	return idem_leases_flush(mw->leases, budget_ms);
}

void
idem_middleware_free(idem_middleware *mw)
{
	if (mw == NULL)
		return;
	idem_middleware_flush(mw, mw->cfg->server.shutdown_grace);
	idem_leases_free(mw->leases);
	idem_store_close(mw->store);
	free(mw);
}

idem_store *
idem_middleware_store(const idem_middleware *mw)
{
	return mw->store;
}

idem_store *
idem_middleware_swap_store(idem_middleware *mw, idem_store *store)
{
	idem_store *old = mw->store;

	mw->store = store;
	idem_leases_set_store(mw->leases, store);
	return old;
}

void
idem_middleware_set_metrics(idem_middleware *mw, struct idem_metrics *m)
{
	mw->metrics = m;
	idem_store_set_metrics(mw->store, m);
	idem_leases_set_metrics(mw->leases, m);
}

unsigned
idem_middleware_backlog(idem_middleware *mw)
{
	return idem_leases_backlog(mw->leases);
}

int
idem_middleware_store_down(const idem_middleware *mw)
{
	return atomic_load(&mw->store_down);
}

idem_policy
idem_middleware_policy(const idem_middleware *mw, const idem_request *req)
{
	return idem_route_policy(mw->cfg, req->route);
}

/* Replaces res with the 503 of a store that failed: the handler did not
 * run (fail closed). */
void
idem_mw_refuse_unavailable(idem_response *res)
{
	idem_response_refuse(res, 503, "IDEMPOTENCY_STORE_UNAVAILABLE", "the "
	    "idempotency store is unavailable; retry later", 1);
}

/* Whether this process has warned that scope = none ignores principals. */
static atomic_int unscoped_warned;

/* Under scope = none: logs once per process, at warn, that req carries a
 * principal (REMOTE_USER, Authorization) the key ignores, so clients that
 * send the same key and request share one answer. */
static void
warn_unscoped(const idem_request *req)
{
	const char *auth = idem_request_env(req, "HTTP_AUTHORIZATION");
	int was = 0;

	if (idem_request_remote_user(req) == NULL &&
	    (auth == NULL || *auth == '\0'))
		return;
	if (atomic_load_explicit(&unscoped_warned, memory_order_relaxed) ||
	    !atomic_compare_exchange_strong(&unscoped_warned, &was, 1))
		return;
	idem_log_event(req, IDEM_LOG_WARN, "unscoped_principal", NULL,
	    "[idempotency] scope = none, but requests carry a principal "
	    "(REMOTE_USER or Authorization) that idempotency keys ignore: "
	    "clients sending the same key and request get one answer; set "
	    "scope = remote-user or header:NAME (logged once per process)");
}

/* Fills sk's scope hash for req (sk's key is set).  Returns 0, or -1
 * after putting a 400 in res when the scope's principal is missing. */
static int
key_scope(const idem_middleware *mw, const idem_request *req,
    idem_store_key *sk, idem_response *res)
{
	const char *who = NULL;

	switch (mw->cfg->idem.scope) {
	case IDEM_SCOPE_NONE:
		warn_unscoped(req);
		return 0;
	case IDEM_SCOPE_REMOTE_USER:
		who = idem_request_remote_user(req);
		break;
	case IDEM_SCOPE_HEADER:
		who = idem_request_header(req, mw->cfg->idem.scope_header);
		break;
	}
	if (who == NULL || *who == '\0') {
		char detail[256];
		snprintf(detail, sizeof(detail), "idempotency keys are scoped by "
		    "%s%s, and this request has none", mw->cfg->idem.scope ==
		    IDEM_SCOPE_HEADER ? "the header " : "", mw->cfg->idem.scope ==
		    IDEM_SCOPE_HEADER ? mw->cfg->idem.scope_header :
		    "the authenticated user");
		idem_response_refuse(res, 400, "IDEMPOTENCY_SCOPE_MISSING", detail,
		    0);
		return -1;
	}
	if (idem_scope_hash(mw->cfg, who, sk->scope) != IDEM_OK) {
		idem_response_refuse(res, 500, "OUT_OF_MEMORY", "out of memory",
		    0);
		return -1;
	}
	return 0;
}

int
idem_middleware_scope(const idem_middleware *mw, const idem_request *req,
    idem_store_key *sk, idem_response *res)
{
	return key_scope(mw, req, sk, res);
}

/* The store failed on a request: logs the start of an outage once, and
 * counts the refusals it causes. */
void
idem_mw_store_failed(idem_middleware *mw, const idem_request *req, idem_err err)
{
	int was_up = 0;

	idem_mw_count(mw, req, IDEM_OUTCOME_STORE_UNAVAILABLE);
	atomic_fetch_add(&mw->refused_down, 1);
	/* a store set aside was logged once, by the master */
	if (!idem_store_is_aside(mw->store) &&
	    atomic_compare_exchange_strong(&mw->store_down, &was_up, 1)) {
		mw->down_since = idem_now_ms();
		idem_log_event(req, IDEM_LOG_ERROR, "store_unavailable", NULL,
		    "idempotency store unavailable (%s): requests get 503 and "
		    "their handlers do not run until it is back",
		    idem_strerror(err));
	} else {
		idem_log_event(req, IDEM_LOG_DEBUG, "store_unavailable", NULL,
		    "idempotency store still unavailable: %s; answered 503",
		    idem_strerror(err));
	}
}

/* The store answered: logs the end of an outage once. */
void
idem_mw_store_answered(idem_middleware *mw, const idem_request *req)
{
	int was_down = 1;

	if (atomic_load_explicit(&mw->store_down, memory_order_relaxed) &&
	    atomic_compare_exchange_strong(&mw->store_down, &was_down, 0))
		idem_log_event(req, IDEM_LOG_WARN, "store_recovered", NULL,
		    "idempotency store is back after %llu ms; %lu request(s) "
		    "got 503 meanwhile",
		    (unsigned long long)(idem_now_ms() - mw->down_since),
		    atomic_exchange(&mw->refused_down, 0));
}

/* Logs and counts (on metrics row row) an answer a stores as its
 * stand-in: a->why says why.  The line is about req when it is not NULL
 * (with owner), else about ctx (a deferred commit's). */
static void
not_stored(idem_middleware *mw, const idem_answer *a, unsigned row,
    const idem_request *req, const char *owner, const idem_log_ctx *ctx)
{
	static const char fmt[] = "answer of %zu bytes (status %d) not stored: "
	    "%s; retries get a notice that the request was executed";
	size_t size = a->whole.headers_len + a->whole.body_len;
	idem_log_ctx c;

	idem_mw_count_row(mw, row, IDEM_OUTCOME_ANSWER_NOT_STORED);
	if (req != NULL) {
		idem_log_event(req, IDEM_LOG_WARN, "answer_not_stored", owner, fmt,
		    size, a->whole.status, a->why);
		return;
	}
	c = *ctx;
	c.event = "answer_not_stored";
	idem_log_at(&c, IDEM_LOG_WARN, fmt, size, a->whole.status, a->why);
}

/* write_fn of the two-phase path. */
static idem_err
write_commit(idem_middleware *mw, void *arg, idem_store_req *rq,
    const idem_stored_response *sr)
{
	(void)arg;
	return idem_store_commit(mw->store, rq, sr);
}

/*
 * Writes the prepared answer a as rq's, through write with arg: a
 * committable answer is never released, so when it is not stored whole
 * (a->why set by idem_answer_prepare, or the store refuses it as too
 * large) its stand-in is, logged (about req, or ctx: see not_stored) and
 * counted as answer_not_stored on row.  Returns what the last write
 * returned.
 */
idem_err
idem_mw_write_answer(idem_middleware *mw, idem_answer *a, idem_store_req *rq,
    unsigned row, const idem_request *req, const idem_log_ctx *ctx,
    idem_mw_write_fn write, void *arg)
{
	idem_err err;

	if (a->why != NULL)
		not_stored(mw, a, row, req, rq->owner, ctx);
	err = write(mw, arg, rq, &a->sr);
	if (err != IDEM_ERR_TOO_LARGE)
		return err;
	/* TOO_LARGE again when the stand-in was refused already */
	err = idem_answer_stand_in(a, "the store refused it as too large");
	if (err == IDEM_OK || err == IDEM_ERR_NOMEM)
		not_stored(mw, a, row, req, rq->owner, ctx);
	if (err == IDEM_OK)
		err = write(mw, arg, rq, &a->sr);
	return err;
}

idem_err
idem_mw_store_answer(idem_middleware *mw, idem_answer *a,
    const idem_response *res, idem_store_req *rq, const idem_request *req,
    idem_mw_write_fn write, void *arg)
{
	unsigned row = req->route->metrics_row;
	idem_err err = idem_answer_prepare(a, mw->cfg,
	    idem_store_get_limits(mw->store), res);

	if (err == IDEM_OK)
		return idem_mw_write_answer(mw, a, rq, row, req, NULL, write,
		    arg);
	/* no room even for the stand-in: said, and counted, all the same */
	if (a->why != NULL)
		not_stored(mw, a, row, req, rq->owner, NULL);
	return err;
}

/*
 * The lease thread's writer of a deferred commit (idem_lease_commit_fn):
 * commits sr, or its stand-in when the store cannot hold it.  An answer
 * that was already too large waits as its stand-in, so only that is ever
 * written.  Returns what the commit returned.
 */
static idem_err
commit_deferred(void *arg, idem_store_req *rq, unsigned row,
    const idem_stored_response *sr, const idem_log_ctx *ctx)
{
	idem_middleware *mw = arg;
	idem_answer a;
	idem_err err;

	err = idem_answer_prepare_stored(&a, mw->cfg,
	    idem_store_get_limits(mw->store), sr);
	if (err == IDEM_OK)
		err = idem_mw_write_answer(mw, &a, rq, row, NULL, ctx,
		    write_commit, NULL);
	idem_answer_clear(&a);
	return err;
}

/*
 * Stores res as the answer of the key: a committable answer is never
 * released.  When the store cannot hold it (over max-response or the
 * store's limits, or refused as too large), a stand-in saying the request
 * was executed is stored instead; when the store is away or contended,
 * the commit is retried by the lease thread while the key stays reserved.
 */
static void
commit_answer(idem_middleware *mw, const idem_request *req,
    idem_store_req *rq, const idem_response *res)
{
	const char *owner = rq->owner;
	idem_answer a;
	idem_err err;

	err = idem_mw_store_answer(mw, &a, res, rq, req, write_commit, NULL);
	idem_mw_count_contended(mw, req, rq);
	if (err == IDEM_OK) {
		idem_mw_count(mw, req, IDEM_OUTCOME_COMMITTED);
	} else if (err == IDEM_ERR_NOT_FOUND) {
		idem_mw_count(mw, req, IDEM_OUTCOME_FENCED);
		idem_log_event(req, IDEM_LOG_WARN, "fenced", owner, "commit "
		    "refused: this request no longer holds its reservation (taken "
		    "over or released); its answer was not stored");
	} else if (idem_store_err_transient(err) && idem_leases_add(mw->leases,
	    IDEM_LEASE_COMMIT, req, rq, &a.sr) != NULL) {
		idem_log_event(req, err == IDEM_ERR_BUSY ? IDEM_LOG_WARN :
		    IDEM_LOG_ERROR, "commit_deferred", owner, "commit failed: "
		    "%s; it is retried in the background while the reservation "
		    "is held", idem_strerror(err));
	} else {
		idem_log_event(req, IDEM_LOG_ERROR, "commit_failed", owner,
		    "commit failed: %s; a retry after inflight-ttl runs again",
		    idem_strerror(err));
	}
	idem_answer_clear(&a);
}

/* Whether an answer is stored (and a transaction committed): the handler
 * succeeded with a status in pol's commit-statuses. */
int
idem_mw_committable(const idem_key_policy *pol, const idem_response *res,
    idem_err herr)
{
	return herr == IDEM_OK && res->status >= 100 && res->status <= 599 &&
	    pol->commit_status[res->status];
}

/*
 * Deletes the reservation of an answer that is not stored (status status,
 * the handler's result herr), so a retry runs again; when the store is
 * away or contended, the release is retried by the lease thread.
 */
idem_err
idem_mw_release_quiet(idem_middleware *mw, const idem_request *req,
    idem_store_req *rq)
{
	idem_err err = idem_store_release(mw->store, rq);

	idem_mw_count_contended(mw, req, rq);
	if (err == IDEM_OK || err == IDEM_ERR_NOT_FOUND)
		return err;
	if (idem_leases_add(mw->leases, IDEM_LEASE_RELEASE, req, rq, NULL) !=
	    NULL)
		idem_log_event(req, err == IDEM_ERR_BUSY ? IDEM_LOG_WARN :
		    IDEM_LOG_ERROR, "release_deferred", rq->owner, "release "
		    "failed: %s; it is retried in the background",
		    idem_strerror(err));
	else
		idem_log_event(req, IDEM_LOG_ERROR, "release_failed", rq->owner,
		    "release failed: %s; retries get 409 until inflight-ttl "
		    "passes", idem_strerror(err));
	return err;
}

void
idem_mw_release(idem_middleware *mw, const idem_request *req,
    idem_store_req *rq, int status, idem_err herr)
{
	const char *why = herr != IDEM_OK ? "the handler failed" :
	    "its status is not in commit-statuses";
	const char *owner = rq->owner;
	idem_err err = idem_mw_release_quiet(mw, req, rq);

	if (err == IDEM_OK) {
		idem_mw_count(mw, req, IDEM_OUTCOME_RELEASED);
		idem_log_event(req, IDEM_LOG_INFO, "released", owner, "released "
		    "(status %d: %s); %s", status, why, rq->has_progress ?
		    "kept with its progress: a retry of the same request goes on "
		    "from there" : "a retry runs again");
	} else if (err == IDEM_ERR_NOT_FOUND) {
		idem_mw_count(mw, req, IDEM_OUTCOME_FENCED);
		idem_log_event(req, IDEM_LOG_WARN, "fenced", owner, "release "
		    "refused: this request no longer holds its reservation");
	}
}

void
idem_middleware_plain(idem_middleware *mw, idem_request *req,
    idem_response *res, idem_next_fn next)
{
	if (req->route->tx_db != NULL)
		idem_mw_tx_plain(mw, req, res, next);
	else
		next(req, res);
}

/* Writes a fresh owner token into owner (IDEM_OWNER_MAX + 1 bytes):
 * "<instance>.<random>", so the master can release a dead worker's
 * reservations by the prefix. */
void
idem_mw_new_owner(const idem_middleware *mw, char *owner)
{
	/* the instance id is at most 16 bytes: 16 + 1 + 32 fit */
	size_t n = strlen(mw->instance);

	_Static_assert(sizeof(mw->instance) + 33 <= IDEM_OWNER_MAX + 1,
	    "an owner token holds the instance id and 32 hex digits");
	memcpy(owner, mw->instance, n);
	owner[n] = '.';
	idem_random_hex(owner + n + 1, 16);
}

/*
 * Step 1 of DESIGN.md 2: the key of req, parsed into sk.  Returns 0, or
 * -1 when res holds the answer: 400 missing on a required route, 400
 * invalid; or, with no key on an optional route, the handler's answer
 * without idempotency.
 */
static int
request_key(idem_middleware *mw, idem_request *req, idem_response *res,
    idem_next_fn next, idem_store_key *sk)
{
	static const char *const formats[] = { "1 to 255 visible ASCII "
	    "characters", "a UUID in its 36-character form", "a UUIDv7 "
	    "(RFC 9562) in its 36-character form" };
	/* idem_request_header(req, "Idempotency-Key"), its CGI name known */
	const char *key = idem_request_env(req, "HTTP_IDEMPOTENCY_KEY");
	char detail[200], why[160];

	if (key == NULL) {
		if (idem_middleware_policy(mw, req) == IDEM_POLICY_REQUIRED) {
			idem_mw_count(mw, req, IDEM_OUTCOME_KEY_MISSING);
			idem_response_refuse(res, 400, "IDEMPOTENCY_KEY_MISSING",
			    "this route needs an Idempotency-Key header", 0);
		} else {
			idem_middleware_plain(mw, req, res, next);
		}
		return -1;
	}
	idem_key_format fmt = idem_route_key_format(mw->cfg, req->route);

	if (idem_key_parse_why(fmt, key, sk->key, &sk->key_len, why,
	    sizeof(why)) != IDEM_OK) {
		idem_mw_count(mw, req, IDEM_OUTCOME_KEY_INVALID);
		if (why[0] != '\0')
			snprintf(detail, sizeof(detail), "malformed quoted "
			    "Idempotency-Key: %s", why);
		else
			snprintf(detail, sizeof(detail), "an Idempotency-Key "
			    "here is %s", formats[fmt]);
		idem_response_refuse(res, 400, "IDEMPOTENCY_KEY_INVALID", detail,
		    0);
		return -1;
	}
	return 0;
}

/* Step 4's answers that are not a run: replays the committed answer rr
 * holds of this request into res, counted.  Frees rr's answer. */
static void
answer_replay(idem_middleware *mw, const idem_request *req,
    idem_reserve_result *rr, idem_response *res)
{
	int cached = rr->cached;
	idem_err err = idem_answer_replay(mw->cfg, &rr->response, res);

	idem_reserve_result_clear(rr);
	if (err != IDEM_OK) {
		idem_response_refuse(res, 500, "REPLAY_FAILED", "the stored answer "
		    "could not be replayed", 0);
		return;
	}
	idem_mw_count(mw, req, IDEM_OUTCOME_REPLAYED);
	if (cached)
		idem_mw_count(mw, req, IDEM_OUTCOME_REPLAY_CACHED);
}

void
idem_mw_wait_init(const idem_store_req *rq, idem_mw_wait *w)
{
	w->deadline = idem_now_ms() + rq->policy->wait_ms;
	w->pause = 5;
}

/* Refuses, into res, a request whose key rr found expired (a live
 * tombstone): 422 IDEMPOTENCY_KEY_EXPIRED saying when the key was used
 * and its first status; counted and logged.  Frees rr's answer. */
static void
refuse_expired(idem_middleware *mw, idem_request *req,
    const idem_store_req *rq, idem_reserve_result *rr, idem_response *res)
{
	char used[32], first[64], detail[320];
	int same = memcmp(rr->fingerprint, rq->fp, 32) == 0;
	json_t *members;

	idem_utc_offset(-(int64_t)rr->used_age_ms, used, sizeof(used));
	/* a record of unknown outcome keeps a tombstone too: no status */
	if (rr->first_status > 0)
		snprintf(first, sizeof(first), "first answered %d",
		    rr->first_status);
	else
		snprintf(first, sizeof(first), "its outcome never known");
	snprintf(detail, sizeof(detail), "this Idempotency-Key was used at %s "
	    "(%s, %s) and its lifetime has ended: the request was not run "
	    "again; a new operation needs a new key", used, same ?
	    "for this same request" : "for a different request", first);
	idem_mw_count(mw, req, IDEM_OUTCOME_EXPIRED_REFUSED);
	idem_log_event(req, IDEM_LOG_WARN, "expired_refused", rq->owner,
	    "the key was used at %s (status %d, %s request) and is past its "
	    "lifetime: refused", used, rr->first_status, same ? "same" :
	    "another");
	members = json_pack("{s:s, s:o, s:b}", "used-at", used, "first-status",
	    rr->first_status > 0 ? json_integer(rr->first_status) :
	    json_null(), "same-request", same);
	idem_reserve_result_clear(rr);
	idem_response_clear(res);
	if (idem_response_problem_with(res, 422, "IDEMPOTENCY_KEY_EXPIRED",
	    detail, members) != IDEM_OK) {
		idem_response_clear(res);
		res->status = 500;
	}
}

/* Counts and logs how the reserve rr of rq (req's) made the record the
 * request's: acquired (over an abandoned reservation: logged), taken
 * over, resumed, or to reconcile. */
static void
count_run(idem_middleware *mw, idem_request *req, const idem_store_req *rq,
    const idem_reserve_result *rr)
{
	if (rr->outcome == IDEM_RESERVE_RESUMED) {
		idem_mw_count(mw, req, IDEM_OUTCOME_RESUMED);
		idem_log_event(req, IDEM_LOG_INFO, "resumed", rq->owner, "resumed "
		    "the record of request %s from its phase %s", rr->request_id,
		    rr->progress.phase);
	} else if (rr->outcome == IDEM_RESERVE_RECONCILE) {
		idem_mw_count(mw, req, IDEM_OUTCOME_ACQUIRED);
		idem_log_event(req, IDEM_LOG_INFO, "reconcile", rq->owner,
		    "reconciling the record of request %s, of unknown outcome "
		    "(phase %s)", rr->request_id, rr->progress.phase[0] != '\0' ?
		    rr->progress.phase : "none");
	} else if (rr->outcome == IDEM_RESERVE_TAKEN_OVER) {
		idem_mw_count(mw, req, IDEM_OUTCOME_TAKEN_OVER);
		idem_log_event(req, IDEM_LOG_WARN, "takeover", rq->owner,
		    "took over the reservation of request %s (owner %s), idle "
		    "for %llu ms (its lease %llu ms); running the handler",
		    rr->request_id, rr->owner, (unsigned long long)rr->lease_age_ms,
		    (unsigned long long)(rr->lease_ms > 0 ? rr->lease_ms :
		    rq->policy->lease_ms));
	} else {
		idem_mw_count(mw, req, IDEM_OUTCOME_ACQUIRED);
		if (rr->expired_run) {
			idem_mw_count(mw, req, IDEM_OUTCOME_EXPIRED_RUN);
			idem_log_event(req, IDEM_LOG_WARN, "expired_run",
			    rq->owner, "the key was used before and is past "
			    "its lifetime: running the handler again "
			    "(expired-keys = run)");
		}
		if (rr->owner[0] != '\0')
			idem_log_event(req, IDEM_LOG_WARN, "abandoned", rq->owner,
			    "the key's reservation by request %s (owner %s) "
			    "was past its lifetime and not renewed for "
			    "abandon-after: abandoned (its instance died, or "
			    "was cut off from the store, that long); this "
			    "request has the key now", rr->request_id,
			    rr->owner);
	}
}

/* The reserve of idem_mw_reserve, until it runs or answers: returns
 * what idem_mw_reserve returns. */
static int
reserve_until_answered(idem_middleware *mw, idem_request *req,
    idem_response *res, idem_store_req *rq, idem_db_conn *c,
    idem_mw_wait *w, idem_exec *ex)
{
	const idem_config *cfg = mw->cfg;
	idem_reserve_result rr;
	idem_err err;

	for (;;) {
		err = c != NULL ? idem_store_tx_begin(mw->store, c, rq, &rr) :
		    idem_store_reserve(mw->store, rq, &rr);
		idem_mw_count_contended(mw, req, rq);
		if (err != IDEM_OK && err != IDEM_ERR_BUSY) {
			idem_mw_store_failed(mw, req, err);
			idem_reserve_result_clear(&rr);
			/* it may have reached the store unanswered; a store
			 * set aside sent nothing */
			if (!idem_store_is_aside(mw->store))
				rq->unanswered = 1;
			idem_mw_refuse_unavailable(res);
			return 0;
		}
		idem_mw_store_answered(mw, req);
		/* BUSY: contention on this key, others are working on it */
		if (idem_reserve_runs(err, &rr))
			break;
		if (err == IDEM_OK && rr.outcome == IDEM_RESERVE_EXPIRED) {
			refuse_expired(mw, req, rq, &rr, res);
			return 0;
		}
		if (err == IDEM_OK && memcmp(rr.fingerprint, rq->fp, 32) != 0) {
			idem_reserve_result_clear(&rr);
			idem_mw_count(mw, req, IDEM_OUTCOME_CONFLICT);
			idem_response_refuse(res, (int)cfg->idem.conflict_status,
			    "IDEMPOTENCY_CONFLICT", "this Idempotency-Key was used "
			    "for a different request", 0);
			return 0;
		}
		if (err == IDEM_OK && rr.outcome == IDEM_RESERVE_COMMITTED) {
			answer_replay(mw, req, &rr, res);
			return 0;
		}
		if (err == IDEM_OK && rr.outcome == IDEM_RESERVE_UNKNOWN) {
			/* the first execution could not tell what became of its
			 * side effect, and the route cannot find out: never a
			 * second execution, never a conflict */
			idem_reserve_result_clear(&rr);
			idem_mw_count(mw, req, IDEM_OUTCOME_UNKNOWN_ANSWERED);
			idem_mw_refuse_unknown(req, res);
			return 0;
		}
		idem_reserve_result_clear(&rr);
		/* in flight, same request: wait for it (from the first
		 * attempt on: a transactional duplicate's attempt may itself
		 * have waited), or say so */
		if (idem_now_ms() >= w->deadline) {
			idem_mw_count(mw, req, IDEM_OUTCOME_IN_FLIGHT);
			idem_response_refuse(res, 409, "IDEMPOTENCY_IN_FLIGHT",
			    "a request with this Idempotency-Key is being "
			    "processed; retry later", 1);
			return 0;
		}
		idem_sleep_ms(w->pause);
		if (w->pause < 100)
			w->pause *= 2;
	}
	count_run(mw, req, rq, &rr);
	idem_mw_exec_clear(ex);
	ex->mw = mw;
	ex->rq = rq;
	ex->c = c;
	ex->may_adopt = idem_store_has_tx_adopt(mw->store);
	ex->reconcile = rr.outcome == IDEM_RESERVE_RECONCILE;
	ex->progress = rr.progress;
	memset(&rr.progress, 0, sizeof(rr.progress));
	idem_reserve_result_clear(&rr);
	return 1;
}

int
idem_mw_reserve(idem_middleware *mw, idem_request *req, idem_response *res,
    idem_store_req *rq, idem_db_conn *c, idem_mw_wait *w, idem_exec *ex)
{
	int runs;

	rq->unanswered = 0;
	runs = reserve_until_answered(mw, req, res, rq, c, w, ex);
	/* a reservation that reached the store unanswered (a store error,
	 * or a write whose connection was lost before BUSY, a conflict or
	 * a replay) must not hold the key until inflight-ttl when it lands
	 * (a transaction's dies with it) */
	if (!runs && c == NULL && rq->unanswered)
		idem_leases_add(mw->leases, IDEM_LEASE_FORGET, req, rq, NULL);
	return runs;
}

void
idem_mw_exec_clear(idem_exec *ex)
{
	idem_progress_clear(&ex->progress);
	memset(ex, 0, sizeof(*ex));
}

/* Runs the route's reconcile hook, timed as its handler. */
static idem_err
run_reconcile(idem_request *req, idem_response *res)
{
	const idem_route *rt = req->route;
	uint64_t t0 = rt->metrics != NULL ? idem_metrics_now_ns() : 0;
	idem_err err = rt->reconcile(req, res, rt->data);

	if (rt->metrics != NULL)
		idem_metrics_handler(rt->metrics, rt->metrics_row,
		    idem_metrics_now_ns() - t0);
	if (err != IDEM_OK && err != IDEM_ERR_OUTCOME_UNKNOWN)
		idem_log(req, IDEM_LOG_ERROR, "reconcile hook of %s %s (plugin "
		    "%s) failed: %s; the outcome stays unknown", rt->method,
		    rt->tmpl, rt->owner, idem_strerror(err));
	return err;
}

idem_err
idem_mw_exec_run(idem_exec *ex, idem_request *req, idem_response *res,
    idem_next_fn next)
{
	const idem_store_req *rq = ex->rq;
	idem_err err;

	if (ex->mw->cfg->idem.key_secret != NULL) {
		/* the same for every execution of this record (8) */
		idem_downstream_base(ex->mw->cfg->idem.key_secret, rq->key.scope,
		    rq->fp, rq->key.key, rq->key.key_len, ex->downstream);
		ex->has_downstream = 1;
	}
	req->exec = ex;
	err = ex->reconcile && req->route->reconcile != NULL ?
	    run_reconcile(req, res) : next(req, res);
	req->exec = NULL;
	return err;
}

int
idem_mw_stays_unknown(const idem_exec *ex, const idem_response *res,
    idem_err herr)
{
	return herr == IDEM_ERR_OUTCOME_UNKNOWN || (ex->reconcile &&
	    !idem_mw_committable(ex->rq->policy, res, herr));
}

void
idem_mw_refuse_unknown(const idem_request *req, idem_response *res)
{
	int hook = req->route->reconcile != NULL;

	idem_response_refuse(res, 503, "IDEMPOTENCY_OUTCOME_UNKNOWN", hook ?
	    "the outcome of the request with this Idempotency-Key is being "
	    "determined; retry later" : "the outcome of the request with this "
	    "Idempotency-Key is unknown and is being determined by the "
	    "service's operators; retry later", hook ? 5 : 60);
}

void
idem_mw_keep_unknown(idem_middleware *mw, const idem_request *req,
    idem_store_req *rq, idem_response *res)
{
	idem_err err = idem_store_mark_unknown(mw->store, rq);

	idem_mw_count_contended(mw, req, rq);
	if (err == IDEM_OK) {
		idem_mw_count(mw, req, IDEM_OUTCOME_OUTCOME_UNKNOWN);
		idem_log_event(req, IDEM_LOG_WARN, "outcome_unknown", rq->owner,
		    "the handler could not tell whether its side effect "
		    "happened: the record is kept of unknown outcome%s",
		    req->route->reconcile != NULL ? "; a retry reconciles it" :
		    ", for an operator (idemfcgi-admin unknown)");
	} else if (err == IDEM_ERR_NOT_FOUND) {
		idem_mw_count(mw, req, IDEM_OUTCOME_FENCED);
		idem_log_event(req, IDEM_LOG_ERROR, "fenced", rq->owner, "an "
		    "unknown outcome not recorded: this request no longer held "
		    "its reservation (taken over)");
	} else if (idem_leases_add(mw->leases, IDEM_LEASE_UNKNOWN, req, rq,
	    NULL) != NULL) {
		idem_log_event(req, IDEM_LOG_ERROR, "unknown_deferred", rq->owner,
		    "marking the outcome unknown failed: %s; it is retried in "
		    "the background while the reservation is held",
		    idem_strerror(err));
	} else {
		idem_log_event(req, IDEM_LOG_ERROR, "unknown_failed", rq->owner,
		    "marking the outcome unknown failed: %s; after inflight-ttl "
		    "a retry takes the record over and runs again",
		    idem_strerror(err));
	}
	idem_mw_refuse_unknown(req, res);
}

/* Step 5 on the two-phase path: runs the handler under a renewed lease,
 * then commits its answer or releases the reservation. */
static void
run_and_finish(idem_middleware *mw, idem_request *req, idem_response *res,
    idem_next_fn next, idem_exec *ex)
{
	idem_store_req *rq = ex->rq;
	idem_lease *lease = idem_leases_add(mw->leases, IDEM_LEASE_RENEW, req,
	    rq, NULL);
	idem_err err = idem_mw_exec_run(ex, req, res, next);

	idem_mw_fault_die(mw, req, "after-handler");
	/* renewed until the commit's or release's outcome is known, so a
	 * slow commit is never taken over */
	idem_leases_finishing(mw->leases, lease);
	if (idem_mw_stays_unknown(ex, res, err)) {
		idem_mw_keep_unknown(mw, req, rq, res);
	} else if (idem_mw_committable(rq->policy, res, err)) {
		if (ex->reconcile)
			idem_mw_count(mw, req, IDEM_OUTCOME_RECONCILED);
		commit_answer(mw, req, rq, res);
	} else {
		idem_mw_release(mw, req, rq, res->status, err);
	}
	idem_leases_remove(mw->leases, lease);
}

void
idem_middleware_handle(idem_middleware *mw, idem_request *req,
    idem_response *res, idem_next_fn next)
{
	idem_key_policy pol;
	idem_store_req rq;
	idem_exec ex;
	idem_mw_wait w;

	memset(&rq, 0, sizeof(rq));
	memset(&ex, 0, sizeof(ex));
	/* the route's own policy (DESIGN.md 2), [idempotency]'s where it
	 * sets nothing */
	idem_route_key_policy(mw->cfg, req->route, &pol);
	rq.policy = &pol;
	/* 1. the key */
	if (request_key(mw, req, res, next, &rq.key) < 0)
		return;
	/* 2. its scope */
	if (key_scope(mw, req, &rq.key, res) < 0) {
		idem_mw_count(mw, req, IDEM_OUTCOME_SCOPE_MISSING);
		return;
	}
	/* from here on, log lines about req carry the key's hash */
	idem_key_hash(rq.key.scope, rq.key.key, rq.key.key_len, rq.key_hash);
	memcpy(req->key_hash, rq.key_hash, sizeof(req->key_hash));
	/* 3. the fingerprint */
	if (idem_fingerprint(req, rq.fp) != IDEM_OK) {
		idem_response_refuse(res, 500, "OUT_OF_MEMORY", "out of memory",
		    0);
		return;
	}
	idem_mw_new_owner(mw, rq.owner);
	idem_copy_string(rq.request_id, sizeof(rq.request_id), req->request_id);
	if (req->route->tx_db != NULL && idem_store_has_tx_adopt(mw->store) &&
	    idem_route_calls_outside(req->route)) {
		/* 7. a transactional route that calls outside, on a store with
		 * writers on several nodes, reserves in a commit of its own
		 * first (protocol (a), idem_middleware_tx.c) */
		idem_mw_tx_reserved(mw, req, res, next, &rq);
	} else if (req->route->tx_db != NULL) {
		/* 7. a transactional route reserves inside its handler's
		 * transaction and finishes with it (idem_middleware_tx.c) */
		idem_mw_tx_handle(mw, req, res, next, &rq);
	} else {
		/* 4. reserve; 5. run, then commit or release (8: or keep it
		 * of unknown outcome) */
		idem_mw_wait_init(&rq, &w);
		if (idem_mw_reserve(mw, req, res, &rq, NULL, &w, &ex))
			run_and_finish(mw, req, res, next, &ex);
		idem_mw_exec_clear(&ex);
	}
	idem_mw_count_contended(mw, req, &rq);
}
