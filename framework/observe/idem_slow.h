/*
 * idem_slow.h - [server] slow-request: handlers that run longer, noticed
 * while they still run (php-fpm's request_slowlog_timeout).
 *
 * Each run of a handler is registered (idem_slow_begin, with a copy of
 * what its log lines name: request id, route, key hash) and unregistered
 * when it returns (idem_slow_end).  A thread of the watch wakes every
 * tenth of the threshold (10 ms to 1 s) and, once per run, logs at warn
 * each run older than the threshold with how long it has run so far, and
 * counts it (idem_metrics_slow); a run that went over between two looks
 * is reported when it ends.  A handler that never returns is reported
 * too.
 *
 * Ownership: a watch borrows its metrics (NULL: logged, not counted);
 * a run is the caller's (on its stack), linked into the watch between
 * begin and end.
 */
#ifndef IDEM_SLOW_H
#define IDEM_SLOW_H

#include <stdint.h>

#include "idem_request.h"

typedef struct idem_slow idem_slow;

/* One handler's run, as the watch knows it (the caller's storage). */
typedef struct idem_slow_run {
	uint64_t start_ms;          /* idem_now_ms */
	int reported;
	unsigned row;               /* its route's metrics row */
	char request_id[IDEM_REQUEST_ID_MAX + 1];
	char method[16];
	char route[240];
	char key_hash[17];
	struct idem_slow_run *prev, *next;
} idem_slow_run;

/*
 * A watch of handlers over threshold_ms (more than 0), counted into
 * metrics (borrowed; NULL: not counted) as worker slot.  Starts its
 * thread.  Returns IDEM_OK with *out (free with idem_slow_free),
 * IDEM_ERR_NOMEM, or IDEM_ERR_IO when the thread cannot start
 * (logged).
 */
idem_err idem_slow_new(uint64_t threshold_ms, struct idem_metrics *metrics,
    unsigned slot, idem_slow **out);

/* Counts into metrics (borrowed) as slot from now on. */
void idem_slow_set_metrics(idem_slow *w, struct idem_metrics *metrics,
    unsigned slot);

/* The handler of req (its route set) begins: registers run.  w NULL is
 * fine (nothing is watched). */
void idem_slow_begin(idem_slow *w, idem_slow_run *run,
    const idem_request *req);

/* The handler of run returned: unregisters it. */
void idem_slow_end(idem_slow *w, idem_slow_run *run);

/* Stops the thread and frees w (no run may be registered).  NULL is
 * fine. */
void idem_slow_free(idem_slow *w);

#endif
