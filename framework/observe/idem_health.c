/*
 * idem_health.c - the cached readiness of the store (idem_health.h).
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "idem_health.h"
#include "idem_log.h"
#include "idem_time.h"

struct idem_health {
	idem_store *store;        /* borrowed; NULL: always ready */
	pthread_mutex_t lock;
	pthread_cond_t wake;      /* to the thread: a check is wanted */
	pthread_cond_t done;      /* from the thread: a check ended */
	pthread_t thread;
	int started;              /* the thread was started */
	int failed;               /* it could not be: checks run inline */
	int stopping;
	int want;                 /* a check is wanted */
	int checking;             /* the thread is in one */
	uint64_t check_at;        /* idem_now_ms when it began */
	uint64_t result_at;       /* idem_now_ms of the last result; 0: none */
	idem_err result;
	uint64_t results;         /* results so far */
};

/* The check thread: pings the store whenever one is wanted. */
static void *
checker(void *arg)
{
	idem_health *h = arg;
	idem_err err;

	pthread_mutex_lock(&h->lock);
	for (;;) {
		while (!h->want && !h->stopping)
			pthread_cond_wait(&h->wake, &h->lock);
		if (h->stopping)
			break;
		h->want = 0;
		h->checking = 1;
		h->check_at = idem_now_ms();
		pthread_mutex_unlock(&h->lock);
		err = idem_store_ping(h->store);
		pthread_mutex_lock(&h->lock);
		h->checking = 0;
		h->result = err;
		h->result_at = idem_now_ms();
		h->results++;
		pthread_cond_broadcast(&h->done);
	}
	pthread_mutex_unlock(&h->lock);
	return NULL;
}

idem_err
idem_health_new(idem_store *store, idem_health **out)
{
	pthread_condattr_t ca;
	idem_health *h = calloc(1, sizeof(*h));

	if (h == NULL)
		return IDEM_ERR_NOMEM;
	h->store = store;
	pthread_mutex_init(&h->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&h->wake, &ca);
	pthread_cond_init(&h->done, &ca);
	pthread_condattr_destroy(&ca);
	*out = h;
	return IDEM_OK;
}

idem_err
idem_health_ready(idem_health *h, char *why, size_t size)
{
	struct timespec deadline;
	uint64_t now, seen;
	idem_err err;
	int rc = 0;

	if (h->store == NULL)
		return IDEM_OK;
	pthread_mutex_lock(&h->lock);
	if (!h->started && !h->failed) {
		if ((rc = pthread_create(&h->thread, NULL, checker, h)) == 0)
			h->started = 1;
		else {
			h->failed = 1;
			idem_log(NULL, IDEM_LOG_WARN, "no readiness thread (%s): "
			    "the ready route pings the store itself",
			    strerror(rc));
		}
	}
	now = idem_now_ms();
	if (h->result_at != 0 && now - h->result_at < IDEM_HEALTH_HOLD_MS)
		goto answer;
	if (h->failed) {
		pthread_mutex_unlock(&h->lock);
		err = idem_store_ping(h->store);
		pthread_mutex_lock(&h->lock);
		h->result = err;
		h->result_at = idem_now_ms();
		goto answer;
	}
	/* a check that has run for the whole wait already is not waited
	 * for again: the store is not answering */
	if (h->checking && now - h->check_at >= IDEM_HEALTH_WAIT_MS) {
		uint64_t ms = now - h->check_at;
		pthread_mutex_unlock(&h->lock);
		snprintf(why, size, "the store has not answered a check for "
		    "%llu ms", (unsigned long long)ms);
		return IDEM_ERR_STORE;
	}
	if (!h->checking && !h->want) {
		h->want = 1;
		pthread_cond_signal(&h->wake);
	}
	seen = h->results;
	idem_deadline(&deadline, IDEM_HEALTH_WAIT_MS);
	while (h->results == seen && rc == 0)
		rc = pthread_cond_timedwait(&h->done, &h->lock, &deadline);
	if (h->results == seen) {
		pthread_mutex_unlock(&h->lock);
		snprintf(why, size, "the store did not answer a check within "
		    "%d ms", IDEM_HEALTH_WAIT_MS);
		return IDEM_ERR_STORE;
	}
answer:
	err = h->result;
	pthread_mutex_unlock(&h->lock);
	if (err != IDEM_OK)
		snprintf(why, size, "the store did not answer its last check: "
		    "%s", idem_strerror(err));
	return err;
}

void
idem_health_free(idem_health *h)
{
	if (h == NULL)
		return;
	pthread_mutex_lock(&h->lock);
	h->stopping = 1;
	pthread_cond_signal(&h->wake);
	pthread_mutex_unlock(&h->lock);
	if (h->started)
		pthread_join(h->thread, NULL);
	pthread_cond_destroy(&h->wake);
	pthread_cond_destroy(&h->done);
	pthread_mutex_destroy(&h->lock);
	free(h);
}
