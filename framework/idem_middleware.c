/*
 * idem_middleware.c - reserve, run, commit or release, replay.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <utlist.h>

#include "idem_key.h"
#include "idem_log.h"
#include "idem_metrics.h"
#include "idem_middleware.h"
#include "idem_router.h"
#include "idem_time.h"

/* Most RELEASE, COMMIT and FORGET jobs kept for a store that is away. */
#define MAX_BACKLOG 10000

/* The key's hash for a log line (never the key itself), computed into buf
 * the first time a line needs it. */
static const char *
key_hash(const idem_store_key *sk, char buf[17])
{
	if (buf[0] == '\0')
		idem_key_hash(sk->scope, sk->key, sk->key_len, buf);
	return buf;
}

/* Counts an outcome when mw has metrics. */
static void
count(const idem_middleware *mw, idem_outcome o)
{
	if (mw->metrics != NULL)
		idem_metrics_outcome(mw->metrics, o, 1);
}

/* The log context of a lease: its request, route, key hash, owner. */
static const idem_log_ctx *
lease_ctx(idem_lease *l, idem_log_ctx *ctx, const char *event)
{
	memset(ctx, 0, sizeof(*ctx));
	ctx->request_id = l->request_id[0] != '\0' ? l->request_id : NULL;
	ctx->method = l->method;
	ctx->route = l->route;
	ctx->key_hash = key_hash(&l->key, l->keyhash);
	ctx->event = event;
	ctx->owner = l->owner;
	return ctx;
}

/* Runs one job of l (a copy taken under the lock).  Returns 1 when the job
 * is finished and l can go, 0 to keep it for the next round. */
static int
run_job(idem_middleware *mw, idem_lease *l)
{
	idem_log_ctx ctx;
	idem_err err;

	switch (l->job) {
	case IDEM_LEASE_RELEASE:
		err = idem_store_release(mw->store, &l->key, l->owner);
		if (err == IDEM_OK) {
			count(mw, IDEM_OUTCOME_RELEASED);
			idem_log_at(lease_ctx(l, &ctx, "released"), IDEM_LOG_INFO,
			    "released after the store came back");
		} else if (err == IDEM_ERR_NOT_FOUND) {
			count(mw, IDEM_OUTCOME_FENCED);
			idem_log_at(lease_ctx(l, &ctx, "fenced"), IDEM_LOG_WARN,
			    "release refused after the store came back: the "
			    "reservation was taken over meanwhile");
		}
		/* no renewal: the handler is done; a retry may take it over */
		return err != IDEM_ERR_STORE;
	case IDEM_LEASE_FORGET:
		/* no renewal: nothing runs under it, and it may not exist */
		err = idem_store_release(mw->store, &l->key, l->owner);
		if (err == IDEM_OK)
			idem_log_at(lease_ctx(l, &ctx, NULL), IDEM_LOG_DEBUG,
			    "deleted the reservation of a reserve that got no "
			    "answer");
		return err != IDEM_ERR_STORE;
	case IDEM_LEASE_COMMIT:
		err = idem_store_commit(mw->store, &l->key, l->owner, &l->answer,
		    mw->cfg->lifetime);
		if (err == IDEM_OK) {
			count(mw, IDEM_OUTCOME_COMMITTED);
			idem_log_at(lease_ctx(l, &ctx, "committed"), IDEM_LOG_INFO,
			    "answer stored after the store came back");
		} else if (err == IDEM_ERR_NOT_FOUND) {
			count(mw, IDEM_OUTCOME_FENCED);
			idem_log_at(lease_ctx(l, &ctx, "fenced"), IDEM_LOG_WARN,
			    "answer never stored: the reservation was taken over "
			    "while the store was away; a retry ran again");
		}
		if (err != IDEM_ERR_STORE)
			return 1;
		break;
	case IDEM_LEASE_RENEW:
		break;
	}
	err = idem_store_renew(mw->store, &l->key, l->owner);
	if (err == IDEM_ERR_NOT_FOUND)
		l->lost = 1;
	else if (err != IDEM_OK)
		idem_log_at(lease_ctx(l, &ctx, NULL), IDEM_LOG_WARN,
		    "lease renewal: %s", idem_strerror(err));
	return 0;
}

/* Frees a lease and what it owns. */
static void
lease_free(idem_lease *l)
{
	idem_stored_response_clear(&l->answer);
	free(l);
}

/*
 * The lease thread: every inflight-ttl/3, renews the lease of every
 * reservation a handler of this process holds, so a live handler is never
 * taken over; and retries the commits and releases that met a store
 * outage, so the keys they hold come free (or get their answer) soon after
 * the store is back instead of after inflight-ttl.  A renewal the store
 * refuses means the reservation was taken over (this process stalled for
 * longer than inflight-ttl): the lease is marked lost, and the handler's
 * commit will be refused (fencing).
 */
static void *
renewer(void *arg)
{
	idem_middleware *mw = arg;
	uint64_t period = mw->cfg->inflight_ttl / 3;
	struct timespec next;

	if (period < 10)
		period = 10;
	pthread_mutex_lock(&mw->lock);
	clock_gettime(CLOCK_MONOTONIC, &next);
	while (!mw->stopping) {
		idem_lease *l, *copy = NULL, **orig = NULL;
		unsigned char *done = NULL;
		size_t n = 0, i;

		idem_timespec_add(&next, period);
		while (!mw->stopping &&
		    pthread_cond_timedwait(&mw->wake, &mw->lock, &next) == 0)
			;
		if (mw->stopping)
			break;
		DL_COUNT(mw->leases, l, n);
		if (n == 0 || (copy = calloc(n, sizeof(*copy))) == NULL ||
		    (orig = calloc(n, sizeof(*orig))) == NULL ||
		    (done = calloc(n, 1)) == NULL) {
			free(copy);
			free(orig);
			continue;
		}
		/* shallow copies: the answers stay with the list, which only
		 * this thread shortens for the jobs other than RENEW */
		i = 0;
		DL_FOREACH(mw->leases, l) {
			orig[i] = l;
			copy[i++] = *l;
		}
		pthread_mutex_unlock(&mw->lock);
		for (i = 0; i < n; i++)
			done[i] = (unsigned char)run_job(mw, &copy[i]);
		pthread_mutex_lock(&mw->lock);
		for (i = 0; i < n; i++) {
			if (copy[i].job != IDEM_LEASE_RENEW &&
			    (done[i] || copy[i].lost)) {
				/* only this thread removes these: orig[i] is live */
				if (!done[i]) {
					idem_log_ctx ctx;
					count(mw, IDEM_OUTCOME_FENCED);
					idem_log_at(lease_ctx(&copy[i], &ctx, "fenced"),
					    IDEM_LOG_WARN, "the reservation was taken "
					    "over while the store was away; its answer "
					    "is not stored");
				}
				DL_DELETE(mw->leases, orig[i]);
				mw->backlog--;
				lease_free(orig[i]);
				continue;
			}
			if (!copy[i].lost)
				continue;
			/* a handler may have removed its lease meanwhile (and
			 * its memory be reused): match pointer and owner */
			DL_FOREACH(mw->leases, l)
				if (l == orig[i] && !l->lost &&
				    strcmp(l->owner, copy[i].owner) == 0) {
					idem_log_ctx ctx;
					l->lost = 1;
					idem_log_at(lease_ctx(l, &ctx, "lease_lost"),
					    IDEM_LOG_WARN, "lease lost: the reservation "
					    "was taken over; this handler's answer will "
					    "not be stored");
					break;
				}
		}
		free(copy);
		free(orig);
		free(done);
	}
	pthread_mutex_unlock(&mw->lock);
	return NULL;
}

idem_err
idem_middleware_new(const idem_config *cfg, idem_store *store,
    idem_middleware **out)
{
	idem_middleware *mw = calloc(1, sizeof(*mw));
	pthread_condattr_t ca;

	if (mw == NULL) {
		idem_store_close(store);
		return IDEM_ERR_NOMEM;
	}
	mw->cfg = cfg;
	mw->store = store;
	idem_random_id(mw->instance);
	pthread_mutex_init(&mw->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&mw->wake, &ca);
	pthread_condattr_destroy(&ca);
	mw->renewing = pthread_create(&mw->renewer, NULL, renewer, mw) == 0;
	if (!mw->renewing)
		idem_log(NULL, IDEM_LOG_WARN, "no lease renewal thread: slow "
		    "handlers may be taken over after inflight-ttl");
	*out = mw;
	return IDEM_OK;
}

void
idem_middleware_set_instance(idem_middleware *mw, const char *id)
{
	snprintf(mw->instance, sizeof(mw->instance), "%s", id);
}

void
idem_middleware_free(idem_middleware *mw)
{
	idem_lease *l, *tmp;

	if (mw == NULL)
		return;
	if (mw->renewing) {
		pthread_mutex_lock(&mw->lock);
		mw->stopping = 1;
		pthread_cond_signal(&mw->wake);
		pthread_mutex_unlock(&mw->lock);
		pthread_join(mw->renewer, NULL);
	}
	if (mw->backlog > 0)
		idem_log(NULL, IDEM_LOG_WARN, "%u commit(s) or release(s) still "
		    "waiting for the store are dropped: their keys free after "
		    "inflight-ttl", mw->backlog);
	DL_FOREACH_SAFE(mw->leases, l, tmp) {
		DL_DELETE(mw->leases, l);
		lease_free(l);
	}
	pthread_cond_destroy(&mw->wake);
	pthread_mutex_destroy(&mw->lock);
	idem_store_close(mw->store);
	free(mw);
}

/* Registers a reservation with the lease thread: to renew while its
 * handler runs, or to release or commit (answer copied) once the store is
 * back.  Returns the lease (NULL when out of memory or, for the store
 * outage jobs, over MAX_BACKLOG: then the key frees after inflight-ttl). */
static idem_lease *
lease_add(idem_middleware *mw, idem_lease_job job, const idem_request *req,
    const idem_store_key *sk, const char *owner,
    const idem_stored_response *ans)
{
	idem_lease *l = calloc(1, sizeof(*l));

	if (l == NULL)
		return NULL;
	l->job = job;
	l->key = *sk;
	snprintf(l->owner, sizeof(l->owner), "%s", owner);
	snprintf(l->request_id, sizeof(l->request_id), "%s", req->request_id);
	if (req->route != NULL) {
		l->method = req->route->method;
		l->route = req->route->tmpl;
	}
	if (ans != NULL && idem_stored_response_copy(&l->answer, ans) != IDEM_OK) {
		free(l);
		return NULL;
	}
	pthread_mutex_lock(&mw->lock);
	if (job != IDEM_LEASE_RENEW) {
		if (mw->backlog >= MAX_BACKLOG) {
			pthread_mutex_unlock(&mw->lock);
			lease_free(l);
			return NULL;
		}
		mw->backlog++;
	}
	DL_APPEND(mw->leases, l);
	pthread_mutex_unlock(&mw->lock);
	return l;
}

/* Unregisters l; returns whether its lease was lost. */
static int
lease_remove(idem_middleware *mw, idem_lease *l)
{
	int lost;

	if (l == NULL)
		return 0;
	pthread_mutex_lock(&mw->lock);
	DL_DELETE(mw->leases, l);
	lost = l->lost;
	pthread_mutex_unlock(&mw->lock);
	lease_free(l);
	return lost;
}

/* Methods that change nothing (RFC 9110 section 9.2.1): the default policy
 * leaves their routes off. */
static const char *const safe_methods[] = { "GET", "HEAD", "OPTIONS",
    "TRACE" };

idem_policy
idem_route_policy(const idem_config *cfg, const idem_route *rt)
{
	size_t i;

	if (rt->policy != IDEM_POLICY_DEFAULT)
		return rt->policy;
	for (i = 0; i < sizeof(safe_methods) / sizeof(safe_methods[0]); i++)
		if (strcmp(rt->method, safe_methods[i]) == 0)
			return IDEM_POLICY_OFF;
	return cfg->required ? IDEM_POLICY_REQUIRED : IDEM_POLICY_OPTIONAL;
}

idem_policy
idem_middleware_policy(const idem_middleware *mw, const idem_request *req)
{
	return idem_route_policy(mw->cfg, req->route);
}

/* Replaces res with a problem; retry_after > 0 adds Retry-After. */
static void
refuse(idem_response *res, int status, const char *code, const char *detail,
    int retry_after)
{
	char ra[16];

	idem_response_clear(res);
	if (idem_response_problem(res, status, code, detail) != IDEM_OK) {
		idem_response_clear(res);
		res->status = 500;
		return;
	}
	if (retry_after > 0) {
		snprintf(ra, sizeof(ra), "%d", retry_after);
		if (idem_response_header(res, "Retry-After", ra) != IDEM_OK)
			res->status = 500;
	}
}

/*
 * Response headers never stored for replay: those of one response only (a
 * client's cookie, the time, the request id), the hop-by-hop ones (RFC 9110
 * section 7.6.1), and the replay marker, which replay adds itself.
 */
static const char *const never_stored[] = { "Set-Cookie", "Date",
    "X-Request-Id", "Connection", "Keep-Alive", "Proxy-Connection",
    "Transfer-Encoding", "Upgrade", "TE", "Trailer", IDEM_REPLAYED_HEADER };

int
idem_header_stored(const idem_config *cfg, const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(never_stored) / sizeof(never_stored[0]); i++)
		if (strcasecmp(name, never_stored[i]) == 0)
			return 0;
	for (i = 0; cfg != NULL && i < cfg->nreplay_omit; i++)
		if (strcasecmp(name, cfg->replay_omit[i]) == 0)
			return 0;
	return 1;
}

char *
idem_headers_serialize(const idem_config *cfg, const idem_response *res,
    size_t *len)
{
	size_t i, kept = 0, size = 1;
	char *out, *p;

	for (i = 0; i < res->nheaders; i++)
		size += strlen(res->headers[i].name) +
		    strlen(res->headers[i].value) + 4;
	if ((out = malloc(size)) == NULL)
		return NULL;
	p = out;
	for (i = 0; i < res->nheaders && kept < IDEM_MAX_HEADERS; i++) {
		const idem_header *h = &res->headers[i];
		/* what replay would refuse is never stored */
		if (!idem_response_header_ok(h->name, h->value) ||
		    !idem_header_stored(cfg, h->name))
			continue;
		p += sprintf(p, "%s: %s\r\n", h->name, h->value);
		kept++;
	}
	*p = '\0';
	*len = (size_t)(p - out);
	return out;
}

/* Fills res from a stored answer plus Idempotent-Replayed, which does not
 * count against the handler's IDEM_MAX_HEADERS.  The fixed never-stored
 * headers are dropped here too, should an answer stored by an older
 * version carry them.  Returns IDEM_OK or an error (res then holds
 * whatever was built). */
static idem_err
replay(const idem_stored_response *sr, idem_response *res)
{
	char *copy, *line, *save = NULL;
	idem_err err = IDEM_OK;

	idem_response_clear(res);
	if ((err = idem_response_status(res, sr->status)) != IDEM_OK)
		return err;
	if ((copy = strndup(sr->headers != NULL ? sr->headers : "",
	    sr->headers_len)) == NULL)
		return IDEM_ERR_NOMEM;
	for (line = strtok_r(copy, "\r\n", &save); line != NULL && err == IDEM_OK;
	    line = strtok_r(NULL, "\r\n", &save)) {
		char *colon = strchr(line, ':');
		if (colon == NULL)
			continue;
		*colon = '\0';
		if (!idem_header_stored(NULL, line))
			continue;
		/* the one space idem_headers_serialize writes: a value's own
		 * leading blanks stay */
		err = idem_response_header(res, line,
		    colon[1] == ' ' ? colon + 2 : colon + 1);
	}
	free(copy);
	if (err == IDEM_OK)
		err = idem_response_framework_header(res, IDEM_REPLAYED_HEADER,
		    "true");
	if (err == IDEM_OK)
		err = idem_response_write(res, sr->body, sr->body_len);
	return err;
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

/* Fills *sk: the key and the scope hash.  Returns 0, or -1 after putting
 * a 400 in res when the scope's principal is missing. */
static int
store_key(const idem_middleware *mw, const idem_request *req, const char *key,
    idem_store_key *sk, idem_response *res)
{
	const char *who = NULL;

	memset(sk, 0, sizeof(*sk));
	sk->key_len = strlen(key);
	memcpy(sk->key, key, sk->key_len);
	switch (mw->cfg->scope) {
	case IDEM_SCOPE_NONE:
		warn_unscoped(req);
		return 0;
	case IDEM_SCOPE_REMOTE_USER:
		who = idem_request_remote_user(req);
		break;
	case IDEM_SCOPE_HEADER:
		who = idem_request_header(req, mw->cfg->scope_header);
		break;
	}
	if (who == NULL || *who == '\0') {
		char detail[256];
		snprintf(detail, sizeof(detail), "idempotency keys are scoped by "
		    "%s%s, and this request has none", mw->cfg->scope ==
		    IDEM_SCOPE_HEADER ? "the header " : "", mw->cfg->scope ==
		    IDEM_SCOPE_HEADER ? mw->cfg->scope_header :
		    "the authenticated user");
		refuse(res, 400, "IDEMPOTENCY_SCOPE_MISSING", detail, 0);
		return -1;
	}
	if (idem_scope_hash(mw->cfg, who, sk->scope) != IDEM_OK) {
		refuse(res, 500, "OUT_OF_MEMORY", "out of memory", 0);
		return -1;
	}
	return 0;
}

/* Sleeps ms milliseconds. */
static void
nap(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* The store failed on a request: logs the start of an outage once, and
 * counts the refusals it causes. */
static void
store_failed(idem_middleware *mw, const idem_request *req, idem_err err)
{
	int was_up = 0;

	count(mw, IDEM_OUTCOME_STORE_UNAVAILABLE);
	atomic_fetch_add(&mw->refused_down, 1);
	if (atomic_compare_exchange_strong(&mw->store_down, &was_up, 1)) {
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
static void
store_answered(idem_middleware *mw, const idem_request *req)
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

/* After the handler: commit the answer or release the reservation. */
static void
finish(idem_middleware *mw, const idem_request *req, const idem_store_key *sk,
    const char *owner, idem_response *res, idem_err herr)
{
	const idem_config *cfg = mw->cfg;
	idem_stored_response sr;
	const char *why = NULL;
	idem_err err;

	if (herr != IDEM_OK)
		why = "the handler failed";
	else if (res->status < 100 || res->status > 599 ||
	    !cfg->commit_status[res->status])
		why = "its status is not in commit-statuses";
	if (why == NULL) {
		memset(&sr, 0, sizeof(sr));
		sr.status = res->status;
		sr.body = res->body;
		sr.body_len = res->len;
		if ((sr.headers = idem_headers_serialize(cfg, res,
		    &sr.headers_len)) == NULL) {
			why = "out of memory";
		} else if (sr.headers_len + sr.body_len > cfg->max_response) {
			idem_log(req, IDEM_LOG_WARN, "answer of %zu bytes is over "
			    "max-response (%llu): not stored; a retry runs again",
			    sr.headers_len + sr.body_len,
			    (unsigned long long)cfg->max_response);
			why = "it is over max-response";
		} else {
			err = idem_store_commit(mw->store, sk, owner, &sr,
			    cfg->lifetime);
			if (err == IDEM_OK) {
				count(mw, IDEM_OUTCOME_COMMITTED);
			} else if (err == IDEM_ERR_NOT_FOUND) {
				count(mw, IDEM_OUTCOME_FENCED);
				idem_log_event(req, IDEM_LOG_WARN, "fenced", owner,
				    "commit refused: this request no longer holds "
				    "its reservation (taken over or released); its "
				    "answer was not stored");
			} else if (lease_add(mw, IDEM_LEASE_COMMIT, req, sk, owner,
			    &sr) != NULL) {
				idem_log_event(req, IDEM_LOG_ERROR, "commit_deferred",
				    owner, "commit failed: %s; it is retried in the "
				    "background while the reservation is held",
				    idem_strerror(err));
			} else {
				idem_log_event(req, IDEM_LOG_ERROR, "commit_failed",
				    owner, "commit failed: %s; a retry after "
				    "inflight-ttl runs again", idem_strerror(err));
			}
		}
		free(sr.headers);
		if (why == NULL)
			return;
	}
	err = idem_store_release(mw->store, sk, owner);
	if (err == IDEM_OK) {
		count(mw, IDEM_OUTCOME_RELEASED);
		idem_log_event(req, IDEM_LOG_INFO, "released", owner, "released "
		    "(status %d: %s); a retry runs again", res->status, why);
	} else if (err == IDEM_ERR_NOT_FOUND) {
		count(mw, IDEM_OUTCOME_FENCED);
		idem_log_event(req, IDEM_LOG_WARN, "fenced", owner, "release "
		    "refused: this request no longer holds its reservation");
	} else if (lease_add(mw, IDEM_LEASE_RELEASE, req, sk, owner, NULL)
	    != NULL) {
		idem_log_event(req, IDEM_LOG_ERROR, "release_deferred", owner,
		    "release failed: %s; it is retried in the background",
		    idem_strerror(err));
	} else {
		idem_log_event(req, IDEM_LOG_ERROR, "release_failed", owner,
		    "release failed: %s; retries get 409 until inflight-ttl "
		    "passes", idem_strerror(err));
	}
}

void
idem_middleware_handle(idem_middleware *mw, idem_request *req,
    idem_response *res, idem_next_fn next)
{
	const idem_config *cfg = mw->cfg;
	const char *key = idem_request_header(req, "Idempotency-Key");
	static const char *const formats[] = { "1 to 255 visible ASCII "
	    "characters", "a UUID in its 36-character form", "a UUIDv7 "
	    "(RFC 9562) in its 36-character form" };
	unsigned char fp[32];
	char owner[IDEM_OWNER_MAX + 1], detail[200], rnd[33];
	idem_lease *lease;
	idem_store_key sk;
	idem_reserve_result rr;
	uint64_t deadline = 0;
	long pause = 5;
	idem_err err;

	if (key == NULL) {
		if (idem_middleware_policy(mw, req) == IDEM_POLICY_REQUIRED) {
			count(mw, IDEM_OUTCOME_KEY_MISSING);
			refuse(res, 400, "IDEMPOTENCY_KEY_MISSING", "this route "
			    "needs an Idempotency-Key header", 0);
		} else {
			next(req, res);
		}
		return;
	}
	if (!idem_key_valid(cfg->key_format, key, strlen(key))) {
		count(mw, IDEM_OUTCOME_KEY_INVALID);
		snprintf(detail, sizeof(detail), "an Idempotency-Key here is %s",
		    formats[cfg->key_format]);
		refuse(res, 400, "IDEMPOTENCY_KEY_INVALID", detail, 0);
		return;
	}
	if (store_key(mw, req, key, &sk, res) < 0) {
		count(mw, IDEM_OUTCOME_SCOPE_MISSING);
		return;
	}
	/* from here on, log lines about req carry the key's hash */
	req->idem_key = key;
	req->idem_key_len = sk.key_len;
	memcpy(req->idem_scope, sk.scope, sizeof(sk.scope));
	if (idem_fingerprint(req, fp) != IDEM_OK) {
		refuse(res, 500, "OUT_OF_MEMORY", "out of memory", 0);
		return;
	}
	/* "<instance>.<random>": the master releases a dead worker's
	 * reservations by the prefix */
	idem_random_id(rnd);
	idem_random_id(rnd + 16);
	snprintf(owner, sizeof(owner), "%s.%s", mw->instance, rnd);

	for (;;) {
		err = idem_store_reserve(mw->store, &sk, fp, owner,
		    req->request_id, cfg->inflight_ttl, cfg->lifetime, &rr);
		if (err != IDEM_OK) {
			store_failed(mw, req, err);
			idem_reserve_result_clear(&rr);
			/* a reservation that reached the store unanswered must
			 * not hold the key until inflight-ttl */
			lease_add(mw, IDEM_LEASE_FORGET, req, &sk, owner, NULL);
			refuse(res, 503, "IDEMPOTENCY_STORE_UNAVAILABLE", "the "
			    "idempotency store is unavailable; retry later", 1);
			return;
		}
		store_answered(mw, req);
		if (rr.outcome == IDEM_RESERVE_ACQUIRED ||
		    rr.outcome == IDEM_RESERVE_TAKEN_OVER)
			break;
		if (memcmp(rr.fingerprint, fp, 32) != 0) {
			idem_reserve_result_clear(&rr);
			count(mw, IDEM_OUTCOME_CONFLICT);
			refuse(res, (int)cfg->conflict_status,
			    "IDEMPOTENCY_CONFLICT", "this Idempotency-Key was used "
			    "for a different request", 0);
			return;
		}
		if (rr.outcome == IDEM_RESERVE_COMMITTED) {
			err = replay(&rr.response, res);
			idem_reserve_result_clear(&rr);
			if (err != IDEM_OK)
				refuse(res, 500, "REPLAY_FAILED", "the stored answer "
				    "could not be replayed", 0);
			else
				count(mw, IDEM_OUTCOME_REPLAYED);
			return;
		}
		/* in flight, same request: wait for it, or say so */
		if (deadline == 0)
			deadline = idem_now_ms() + cfg->inflight_wait;
		idem_reserve_result_clear(&rr);
		if (idem_now_ms() >= deadline) {
			count(mw, IDEM_OUTCOME_IN_FLIGHT);
			refuse(res, 409, "IDEMPOTENCY_IN_FLIGHT", "a request with "
			    "this Idempotency-Key is being processed; retry "
			    "later", 1);
			return;
		}
		nap(pause);
		if (pause < 100)
			pause *= 2;
	}
	if (rr.outcome == IDEM_RESERVE_TAKEN_OVER) {
		count(mw, IDEM_OUTCOME_TAKEN_OVER);
		idem_log_event(req, IDEM_LOG_WARN, "takeover", owner, "took over "
		    "the reservation of request %s (owner %s), idle for %llu ms "
		    "(inflight-ttl %llu ms); running the handler", rr.request_id,
		    rr.owner, (unsigned long long)rr.lease_age_ms,
		    (unsigned long long)cfg->inflight_ttl);
	} else {
		count(mw, IDEM_OUTCOME_ACQUIRED);
	}
	idem_reserve_result_clear(&rr);
	lease = lease_add(mw, IDEM_LEASE_RENEW, req, &sk, owner, NULL);
	err = next(req, res);
	lease_remove(mw, lease);
	finish(mw, req, &sk, owner, res, err);
}
