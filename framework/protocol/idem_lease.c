/*
 * idem_lease.c - lease renewal and the deferred jobs of a store outage.
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <utlist.h>

#include "idem_key.h"
#include "idem_lease.h"
#include "idem_log.h"
#include "idem_metrics.h"
#include "idem_router.h"
#include "idem_time.h"

struct idem_lease {
	idem_lease_job job;
	/* the request's descriptor; its policy is the copy below (set again
	 * on every copy of the lease: see with_policy) */
	idem_store_req rq;
	idem_key_policy policy;
	unsigned metrics_row;     /* its route's (idem_metrics.h) */
	/* for the log lines of the lease thread: the route that reserved */
	const char *method, *route;   /* borrowed from the router */
	int lost;                 /* renewal found it taken over */
	int finishing;            /* RENEW: its handler returned and its
	                           * commit or release is under way */
	idem_stored_response answer;  /* IDEM_LEASE_COMMIT: owned */
	uint64_t settle_at;       /* IDEM_LEASE_FORGET: idem_now_ms when the
	                           * reservation can no longer come into being
	                           * (the store's settle_ms after the add) */
	int answered;             /* IDEM_LEASE_FORGET: the store has answered
	                           * its deletion (it waits only to settle) */
	struct idem_lease *prev, *next;
};

struct idem_leases {
	idem_store *store;        /* borrowed */
	struct idem_metrics *metrics; /* borrowed; NULL: not counted */
	uint64_t period;          /* ms between rounds */
	idem_lease_commit_fn commit;
	void *commit_arg;         /* borrowed */
	pthread_mutex_t lock;
	pthread_cond_t wake;
	pthread_t thread;
	int running;              /* the thread runs */
	atomic_int stopping;      /* read between jobs without the lock */
	int flushed;              /* idem_leases_flush has run: jobs queued
	                           * later are dropped (logged) */
	idem_lease *leases;       /* utlist */
	unsigned backlog;         /* jobs other than RENEW queued */
};

/* Counts an outcome of l's key, on its route's metrics row, when ls has
 * metrics. */
static void
count(const idem_leases *ls, const idem_lease *l, idem_outcome o)
{
	if (ls->metrics != NULL)
		idem_metrics_outcome(ls->metrics, l->metrics_row, o, 1);
}

/* l's descriptor for a store operation, pointing at l's own copy of its
 * policy (l may be a shallow copy of a lease). */
static idem_store_req *
with_policy(idem_lease *l)
{
	l->rq.policy = &l->policy;
	l->rq.contended = 0;
	return &l->rq;
}

/* Counts the contention l's last store operation met. */
static void
count_contended(const idem_leases *ls, const idem_lease *l)
{
	if (l->rq.contended > 0 && ls->metrics != NULL)
		idem_metrics_outcome(ls->metrics, l->metrics_row,
		    IDEM_OUTCOME_CONTENDED, l->rq.contended);
}

/* The log context of a lease: its request, route, key hash, owner. */
static const idem_log_ctx *
lease_ctx(idem_lease *l, idem_log_ctx *ctx, const char *event)
{
	memset(ctx, 0, sizeof(*ctx));
	ctx->request_id = l->rq.request_id[0] != '\0' ? l->rq.request_id :
	    NULL;
	ctx->method = l->method;
	ctx->route = l->route;
	if (l->rq.key_hash[0] == '\0')
		idem_key_hash(l->rq.key.scope, l->rq.key.key, l->rq.key.key_len,
		    l->rq.key_hash);
	ctx->key_hash = l->rq.key_hash;
	ctx->event = event;
	ctx->owner = l->rq.owner;
	return ctx;
}

/* Retries a deferred release.  Returns the store's result. */
static idem_err
job_release(idem_leases *ls, idem_lease *l)
{
	idem_log_ctx ctx;
	idem_err err = idem_store_release(ls->store, with_policy(l));

	count_contended(ls, l);
	if (err == IDEM_OK) {
		count(ls, l, IDEM_OUTCOME_RELEASED);
		idem_log_at(lease_ctx(l, &ctx, "released"), IDEM_LOG_INFO,
		    "released after the store came back");
	} else if (err == IDEM_ERR_NOT_FOUND) {
		count(ls, l, IDEM_OUTCOME_FENCED);
		idem_log_at(lease_ctx(l, &ctx, "fenced"), IDEM_LOG_WARN,
		    "release refused after the store came back: the "
		    "reservation was taken over meanwhile");
	}
	return err;
}

/* Deletes the reservation of a reserve that got no answer, if it exists.
 * Returns the store's result. */
static idem_err
job_forget(idem_leases *ls, idem_lease *l)
{
	idem_log_ctx ctx;
	idem_err err = idem_store_release(ls->store, with_policy(l));

	count_contended(ls, l);
	if (err == IDEM_OK)
		idem_log_at(lease_ctx(l, &ctx, NULL), IDEM_LOG_DEBUG,
		    "deleted the reservation of a reserve that got no answer");
	return err;
}

/* Retries a deferred commit through ls's writer.  Returns its result. */
static idem_err
job_commit(idem_leases *ls, idem_lease *l)
{
	idem_log_ctx ctx;
	idem_err err;

	err = ls->commit(ls->commit_arg, with_policy(l), l->metrics_row,
	    &l->answer, lease_ctx(l, &ctx, NULL));
	count_contended(ls, l);
	if (err == IDEM_OK) {
		count(ls, l, IDEM_OUTCOME_COMMITTED);
		idem_log_at(lease_ctx(l, &ctx, "committed"), IDEM_LOG_INFO,
		    "answer stored after the store came back");
	} else if (err == IDEM_ERR_NOT_FOUND) {
		count(ls, l, IDEM_OUTCOME_FENCED);
		idem_log_at(lease_ctx(l, &ctx, "fenced"), IDEM_LOG_WARN,
		    "answer never stored: the reservation was taken over "
		    "or released while the store was away; a retry runs the "
		    "handler again");
	} else if (!idem_store_err_transient(err)) {
		idem_log_at(lease_ctx(l, &ctx, "commit_failed"),
		    IDEM_LOG_ERROR, "answer never stored: %s; the key frees "
		    "after inflight-ttl", idem_strerror(err));
	}
	return err;
}

/* Retries marking a record of unknown outcome.  Returns the store's
 * result. */
static idem_err
job_unknown(idem_leases *ls, idem_lease *l)
{
	idem_log_ctx ctx;
	idem_err err = idem_store_mark_unknown(ls->store, with_policy(l));

	count_contended(ls, l);
	if (err == IDEM_OK) {
		count(ls, l, IDEM_OUTCOME_OUTCOME_UNKNOWN);
		idem_log_at(lease_ctx(l, &ctx, "outcome_unknown"), IDEM_LOG_WARN,
		    "marked of unknown outcome after the store came back");
	} else if (err == IDEM_ERR_NOT_FOUND) {
		count(ls, l, IDEM_OUTCOME_FENCED);
		idem_log_at(lease_ctx(l, &ctx, "fenced"), IDEM_LOG_ERROR,
		    "a record of unknown outcome was taken over while the store "
		    "was away: its request may have run again");
	}
	return err;
}

/* Renews l's lease; a refusal marks it lost. */
static void
renew(idem_leases *ls, idem_lease *l)
{
	idem_log_ctx ctx;
	idem_err err = idem_store_renew(ls->store, with_policy(l));

	count_contended(ls, l);
	if (err == IDEM_ERR_NOT_FOUND)
		l->lost = 1;
	else if (err != IDEM_OK)
		idem_log_at(lease_ctx(l, &ctx, NULL), IDEM_LOG_WARN,
		    "lease renewal: %s", idem_strerror(err));
}

/* Runs one job of l (a copy taken under the lock), then, when renew_too
 * is set and l stays, renews its lease (a RENEW, or a COMMIT still
 * waiting: its key must stay ours).  Returns 1 when the job is finished
 * and l can go, 0 to keep it for the next round; *err_out (when not NULL)
 * gets the job's store result. */
static int
run_job(idem_leases *ls, idem_lease *l, int renew_too, idem_err *err_out)
{
	idem_err err = IDEM_OK;

	switch (l->job) {
	case IDEM_LEASE_RELEASE:
		/* no renewal: the handler is done; a retry may take it over */
		err = job_release(ls, l);
		break;
	case IDEM_LEASE_FORGET:
		/* no renewal: nothing runs under it, and it may not exist;
		 * until it has settled, the database may still run the INSERT
		 * that got no answer: look again next round */
		err = job_forget(ls, l);
		if (!idem_store_err_transient(err))
			l->answered = 1;
		if (!idem_store_err_transient(err) &&
		    idem_now_ms() < l->settle_at) {
			if (err_out != NULL)
				*err_out = err;
			return 0;
		}
		break;
	case IDEM_LEASE_COMMIT:
	case IDEM_LEASE_UNKNOWN:
		err = l->job == IDEM_LEASE_COMMIT ? job_commit(ls, l) :
		    job_unknown(ls, l);
		if (!idem_store_err_transient(err))
			break;
		if (renew_too)
			renew(ls, l);
		break;
	case IDEM_LEASE_RENEW:
		renew(ls, l);
		return 0;
	}
	if (err_out != NULL)
		*err_out = err;
	return !idem_store_err_transient(err);
}

/* Frees a lease and what it owns. */
static void
lease_free(idem_lease *l)
{
	idem_stored_response_clear(&l->answer);
	free(l);
}

/* After a round, under the lock: drops the jobs that finished or were
 * fenced (their lease lost), and marks the RENEW leases whose renewal was
 * refused as lost.  orig[i] was the lease copy[i] was taken from. */
static void
round_done(idem_leases *ls, idem_lease *copy, idem_lease **orig,
    const unsigned char *done, size_t n)
{
	idem_log_ctx ctx;
	idem_lease *l;
	size_t i;

	for (i = 0; i < n; i++) {
		if (copy[i].job != IDEM_LEASE_RENEW &&
		    (done[i] || copy[i].lost)) {
			/* only this thread removes these: orig[i] is live */
			if (!done[i]) {
				count(ls, &copy[i], IDEM_OUTCOME_FENCED);
				idem_log_at(lease_ctx(&copy[i], &ctx, "fenced"),
				    IDEM_LOG_WARN, "the reservation was taken over "
				    "while the store was away; its answer is not "
				    "stored");
			}
			DL_DELETE(ls->leases, orig[i]);
			ls->backlog--;
			lease_free(orig[i]);
			continue;
		}
		if (!copy[i].lost)
			continue;
		/* a handler may have removed its lease meanwhile (and its
		 * memory be reused): match pointer and owner */
		DL_FOREACH(ls->leases, l)
			if (l == orig[i] && !l->lost &&
			    strcmp(l->rq.owner, copy[i].rq.owner) == 0) {
				l->lost = 1;
				/* a commit that just landed; a refused one is
				 * logged by the commit */
				if (l->finishing)
					break;
				idem_log_at(lease_ctx(l, &ctx, "lease_lost"),
				    IDEM_LOG_WARN, "lease lost: the reservation was "
				    "taken over; this handler's answer will not be "
				    "stored");
				break;
			}
	}
}

/*
 * The lease thread: every period, renews the lease of every reservation a
 * handler of this process holds, so a live handler is never taken over;
 * and retries the commits and releases that met a store outage, so the
 * keys they hold come free (or get their answer) soon after the store is
 * back instead of after inflight-ttl.  A renewal the store refuses means
 * the reservation was taken over (this process stalled for longer than
 * inflight-ttl): the lease is marked lost, and the handler's commit will
 * be refused (fencing).  The store is called without the lock, on shallow
 * copies of the leases.
 */
static void *
lease_thread(void *arg)
{
	idem_leases *ls = arg;
	struct timespec next;

	pthread_mutex_lock(&ls->lock);
	clock_gettime(CLOCK_MONOTONIC, &next);
	while (!ls->stopping) {
		idem_lease *l, *copy = NULL, **orig = NULL;
		unsigned char *done = NULL;
		size_t n = 0, i;

		idem_timespec_add(&next, ls->period);
		while (!ls->stopping &&
		    pthread_cond_timedwait(&ls->wake, &ls->lock, &next) == 0)
			;
		if (ls->stopping)
			break;
		DL_COUNT(ls->leases, l, n);
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
		DL_FOREACH(ls->leases, l) {
			orig[i] = l;
			copy[i++] = *l;
		}
		pthread_mutex_unlock(&ls->lock);
		/* the renewals of running handlers first: the other jobs may
		 * each wait for a lock or a timeout while the store is away,
		 * and a renewal behind them could come after its lease ends;
		 * a stop does not wait for a whole round */
		for (i = 0; i < n && !atomic_load(&ls->stopping); i++)
			if (copy[i].job == IDEM_LEASE_RENEW)
				done[i] = (unsigned char)run_job(ls, &copy[i],
				    1, NULL);
		for (i = 0; i < n && !atomic_load(&ls->stopping); i++)
			if (copy[i].job != IDEM_LEASE_RENEW)
				done[i] = (unsigned char)run_job(ls, &copy[i],
				    1, NULL);
		pthread_mutex_lock(&ls->lock);
		round_done(ls, copy, orig, done, n);
		free(copy);
		free(orig);
		free(done);
	}
	pthread_mutex_unlock(&ls->lock);
	return NULL;
}

idem_err
idem_leases_new(idem_store *store, uint64_t inflight_ttl_ms,
    idem_lease_commit_fn commit, void *arg, idem_leases **out)
{
	idem_leases *ls = calloc(1, sizeof(*ls));
	pthread_condattr_t ca;

	if (ls == NULL)
		return IDEM_ERR_NOMEM;
	ls->store = store;
	ls->period = inflight_ttl_ms / 3;
	if (ls->period < 10)
		ls->period = 10;
	ls->commit = commit;
	ls->commit_arg = arg;
	pthread_mutex_init(&ls->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&ls->wake, &ca);
	pthread_condattr_destroy(&ca);
	ls->running = pthread_create(&ls->thread, NULL, lease_thread, ls) == 0;
	if (!ls->running)
		idem_log(NULL, IDEM_LOG_WARN, "no lease renewal thread: slow "
		    "handlers may be taken over after inflight-ttl");
	*out = ls;
	return IDEM_OK;
}

void
idem_leases_set_metrics(idem_leases *ls, struct idem_metrics *m)
{
	ls->metrics = m;
}

void
idem_leases_set_store(idem_leases *ls, idem_store *store)
{
	ls->store = store;
}

/* Logs a job that exits unwritten, at error level with its key hash. */
static void
log_dropped(idem_lease *l)
{
	static const char *const what[] = {
		[IDEM_LEASE_RELEASE] = "its release was not written: retries "
		    "get 409 until inflight-ttl passes, then run the handler",
		[IDEM_LEASE_COMMIT] = "its answer was not stored: a retry "
		    "takes the key over after inflight-ttl (at once when the "
		    "master releases the keys of a worker that did not stop "
		    "cleanly) and runs the handler again",
		[IDEM_LEASE_FORGET] = "a reservation that got no answer may "
		    "remain: retries get 409 until inflight-ttl passes",
		[IDEM_LEASE_UNKNOWN] = "a record of unknown outcome was not "
		    "marked so: after inflight-ttl a retry takes it over and "
		    "runs its handler again, from its progress",
	};
	idem_log_ctx ctx;

	if (l->job == IDEM_LEASE_FORGET && l->answered) {
		/* the store is there; the INSERT may not have ended yet */
		idem_log_at(lease_ctx(l, &ctx, "dropped_at_exit"), IDEM_LOG_WARN,
		    "stopping before a reservation that got no answer settled: "
		    "should the database still run its INSERT, retries get 409 "
		    "until inflight-ttl passes");
		return;
	}
	idem_log_at(lease_ctx(l, &ctx, "dropped_at_exit"), IDEM_LOG_ERROR,
	    "stopping while the store is away: %s", what[l->job]);
}

idem_lease *
idem_leases_add(idem_leases *ls, idem_lease_job job, const idem_request *req,
    const idem_store_req *rq, const idem_stored_response *answer)
{
	idem_lease *l = calloc(1, sizeof(*l));

	if (l == NULL)
		return NULL;
	l->job = job;
	l->rq = *rq;
	l->rq.contended = 0;
	if (rq->policy != NULL)
		l->policy = *rq->policy;
	l->rq.policy = &l->policy;
	if (job == IDEM_LEASE_FORGET)
		l->settle_at = idem_now_ms() + ls->store->settle_ms;
	l->metrics_row = IDEM_METRICS_NO_ROUTE;
	if (req->route != NULL) {
		l->method = req->route->method;
		l->route = req->route->tmpl;
		l->metrics_row = req->route->metrics_row;
	}
	if (answer != NULL &&
	    idem_stored_response_copy(&l->answer, answer) != IDEM_OK) {
		free(l);
		return NULL;
	}
	pthread_mutex_lock(&ls->lock);
	if (job != IDEM_LEASE_RENEW) {
		if (ls->flushed) {
			/* a handler that outlived shutdown-grace: nothing
			 * will run this job any more */
			pthread_mutex_unlock(&ls->lock);
			log_dropped(l);
			lease_free(l);
			return NULL;
		}
		if (ls->backlog >= IDEM_LEASE_MAX_BACKLOG) {
			pthread_mutex_unlock(&ls->lock);
			lease_free(l);
			return NULL;
		}
		ls->backlog++;
	}
	DL_APPEND(ls->leases, l);
	pthread_mutex_unlock(&ls->lock);
	return l;
}

void
idem_leases_finishing(idem_leases *ls, idem_lease *l)
{
	if (l == NULL)
		return;
	pthread_mutex_lock(&ls->lock);
	l->finishing = 1;
	pthread_mutex_unlock(&ls->lock);
}

int
idem_leases_remove(idem_leases *ls, idem_lease *l)
{
	int lost;

	if (l == NULL)
		return 0;
	pthread_mutex_lock(&ls->lock);
	DL_DELETE(ls->leases, l);
	lost = l->lost;
	pthread_mutex_unlock(&ls->lock);
	lease_free(l);
	return lost;
}

unsigned
idem_leases_backlog(idem_leases *ls)
{
	unsigned n;

	pthread_mutex_lock(&ls->lock);
	n = ls->backlog;
	pthread_mutex_unlock(&ls->lock);
	return n;
}

/* Stops the lease thread (when it runs) and waits for it. */
static void
stop_thread(idem_leases *ls)
{
	if (!ls->running)
		return;
	pthread_mutex_lock(&ls->lock);
	ls->stopping = 1;
	pthread_cond_signal(&ls->wake);
	pthread_mutex_unlock(&ls->lock);
	pthread_join(ls->thread, NULL);
	ls->running = 0;
}

unsigned
idem_leases_flush(idem_leases *ls, uint64_t budget_ms)
{
	uint64_t deadline = idem_now_ms() + budget_ms;
	idem_lease *jobs = NULL, *l, *tmp;
	unsigned left = 0;

	pthread_mutex_lock(&ls->lock);
	if (ls->flushed) {
		pthread_mutex_unlock(&ls->lock);
		return 0;
	}
	ls->flushed = 1;
	pthread_mutex_unlock(&ls->lock);
	stop_thread(ls);
	/* handlers still running after shutdown-grace may touch the list:
	 * take the jobs out of it */
	pthread_mutex_lock(&ls->lock);
	DL_FOREACH_SAFE(ls->leases, l, tmp)
		if (l->job != IDEM_LEASE_RENEW) {
			DL_DELETE(ls->leases, l);
			DL_APPEND(jobs, l);
			ls->backlog--;
		}
	pthread_mutex_unlock(&ls->lock);
	while (jobs != NULL && idem_now_ms() < deadline) {
		DL_FOREACH_SAFE(jobs, l, tmp) {
			idem_err err = IDEM_OK;
			if (idem_now_ms() >= deadline)
				break;
			if (run_job(ls, l, 0, &err)) {
				DL_DELETE(jobs, l);
				lease_free(l);
			} else if (err == IDEM_ERR_STORE) {
				/* still away: each try costs its timeouts, so
				 * the others wait for the next round */
				break;
			}
		}
		/* a round at most every 100 ms, up to the deadline: a job
		 * waiting to settle does not spin */
		if (jobs != NULL) {
			uint64_t now = idem_now_ms();
			if (now < deadline)
				idem_sleep_ms(deadline - now < 100 ?
				    (long)(deadline - now) : 100);
		}
	}
	DL_FOREACH_SAFE(jobs, l, tmp) {
		log_dropped(l);
		DL_DELETE(jobs, l);
		lease_free(l);
		left++;
	}
	return left;
}

void
idem_leases_free(idem_leases *ls)
{
	idem_lease *l, *tmp;

	if (ls == NULL)
		return;
	idem_leases_flush(ls, 0);
	DL_FOREACH_SAFE(ls->leases, l, tmp) {
		DL_DELETE(ls->leases, l);
		lease_free(l);
	}
	pthread_cond_destroy(&ls->wake);
	pthread_mutex_destroy(&ls->lock);
	free(ls);
}
