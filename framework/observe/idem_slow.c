/*
 * idem_slow.c - the watch of slow handlers (idem_slow.h).
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <utlist.h>

#include "idem_log.h"
#include "idem_metrics.h"
#include "idem_router.h"
#include "idem_slow.h"
#include "idem_time.h"

struct idem_slow {
	uint64_t threshold;       /* ms */
	uint64_t period;          /* ms between looks */
	pthread_mutex_t lock;
	pthread_cond_t wake;      /* signalled at the stop */
	pthread_t thread;
	int stopping;
	struct idem_metrics *metrics; /* borrowed; NULL: not counted */
	unsigned slot;
	idem_slow_run *runs;      /* utlist, registered runs (lock) */
};

/* Logs and counts run r of w, over the threshold at now, once (the lock
 * held); running says whether its handler still runs. */
static void
report(idem_slow *w, idem_slow_run *r, uint64_t now, int running)
{
	idem_log_ctx ctx;

	if (r->reported || now - r->start_ms < w->threshold)
		return;
	r->reported = 1;
	memset(&ctx, 0, sizeof(ctx));
	ctx.request_id = r->request_id;
	ctx.method = r->method;
	ctx.route = r->route;
	ctx.key_hash = r->key_hash[0] != '\0' ? r->key_hash : NULL;
	ctx.event = "slow_request";
	idem_log_at(&ctx, IDEM_LOG_WARN, "slow request: the handler of %s %s "
	    "%s %llu ms ([server] slow-request = %llu ms)", r->method,
	    r->route, running ? "has run for" : "returned after",
	    (unsigned long long)(now - r->start_ms),
	    (unsigned long long)w->threshold);
	if (w->metrics != NULL)
		idem_metrics_slow(w->metrics, r->row, w->slot);
}

/* Reports each run of w over the threshold (the lock held). */
static void
look(idem_slow *w)
{
	uint64_t now = idem_now_ms();
	idem_slow_run *r;

	DL_FOREACH(w->runs, r)
		report(w, r, now, 1);
}

/* The watch's thread: looks every period until the stop. */
static void *
watcher(void *arg)
{
	idem_slow *w = arg;
	struct timespec next;

	pthread_mutex_lock(&w->lock);
	while (!w->stopping) {
		idem_deadline(&next, w->period);
		while (!w->stopping && pthread_cond_timedwait(&w->wake,
		    &w->lock, &next) == 0)
			;
		if (!w->stopping)
			look(w);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

idem_err
idem_slow_new(uint64_t threshold_ms, struct idem_metrics *metrics,
    unsigned slot, idem_slow **out)
{
	pthread_condattr_t ca;
	idem_slow *w = calloc(1, sizeof(*w));
	int rc;

	if (w == NULL)
		return IDEM_ERR_NOMEM;
	w->threshold = threshold_ms;
	w->period = threshold_ms / 10;
	if (w->period < 10)
		w->period = 10;
	if (w->period > 1000)
		w->period = 1000;
	w->metrics = metrics;
	w->slot = slot;
	pthread_mutex_init(&w->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->wake, &ca);
	pthread_condattr_destroy(&ca);
	if ((rc = pthread_create(&w->thread, NULL, watcher, w)) != 0) {
		idem_log(NULL, IDEM_LOG_ERROR, "cannot start the slow-request "
		    "thread: %s", strerror(rc));
		pthread_cond_destroy(&w->wake);
		pthread_mutex_destroy(&w->lock);
		free(w);
		return IDEM_ERR_IO;
	}
	*out = w;
	return IDEM_OK;
}

void
idem_slow_set_metrics(idem_slow *w, struct idem_metrics *metrics,
    unsigned slot)
{
	pthread_mutex_lock(&w->lock);
	w->metrics = metrics;
	w->slot = slot;
	pthread_mutex_unlock(&w->lock);
}

void
idem_slow_begin(idem_slow *w, idem_slow_run *run, const idem_request *req)
{
	const idem_route *rt = req->route;

	if (w == NULL)
		return;
	run->start_ms = idem_now_ms();
	run->reported = 0;
	run->row = rt->metrics_row;
	snprintf(run->request_id, sizeof(run->request_id), "%s",
	    req->request_id);
	snprintf(run->method, sizeof(run->method), "%s", rt->method);
	snprintf(run->route, sizeof(run->route), "%s", rt->tmpl);
	snprintf(run->key_hash, sizeof(run->key_hash), "%s", req->key_hash);
	pthread_mutex_lock(&w->lock);
	DL_APPEND(w->runs, run);
	pthread_mutex_unlock(&w->lock);
}

void
idem_slow_end(idem_slow *w, idem_slow_run *run)
{
	if (w == NULL)
		return;
	pthread_mutex_lock(&w->lock);
	/* one that ended between two looks is reported all the same */
	report(w, run, idem_now_ms(), 0);
	DL_DELETE(w->runs, run);
	pthread_mutex_unlock(&w->lock);
}

void
idem_slow_free(idem_slow *w)
{
	if (w == NULL)
		return;
	pthread_mutex_lock(&w->lock);
	w->stopping = 1;
	pthread_cond_signal(&w->wake);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->thread, NULL);
	pthread_cond_destroy(&w->wake);
	pthread_mutex_destroy(&w->lock);
	free(w);
}
