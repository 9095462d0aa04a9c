/*
 * idem_lease.h - the leases and deferred jobs of one process's
 * reservations (reliability.md, at-least-once case 3).
 *
 * A background thread wakes every third of inflight-ttl and, for every
 * reservation registered here:
 *   RENEW    renews its lease while its handler runs, so a live handler is
 *            never taken over; a renewal the store refuses marks the lease
 *            lost (the reservation was taken over: its commit will be
 *            fenced);
 *   COMMIT   retries a commit that met a store outage or contention,
 *            renewing the lease meanwhile;
 *   RELEASE  retries a release that met one;
 *   UNKNOWN  retries marking a record of unknown outcome (a handler's
 *            IDEM_ERR_OUTCOME_UNKNOWN) that met one, renewing the lease
 *            meanwhile: until it is marked, no takeover may run it again;
 *   FORGET   deletes the reservation of a reserve that got no answer (it
 *            may or may not exist, and may yet come into being: it is
 *            looked for each round until the store's settle_ms passed).
 * A job the store refuses because another owner holds the key (fencing)
 * is counted as fenced, logged, and dropped, never retried.  At most
 * IDEM_LEASE_MAX_BACKLOG jobs other than RENEW wait at once.  A stopping
 * worker makes a last attempt at the jobs left (idem_leases_flush).
 *
 * Ownership: idem_leases borrows its store and metrics (they must outlive
 * it, or be replaced first); keys, owners, requests and answers passed in
 * are borrowed for the call and copied.  An idem_lease handle belongs to
 * the idem_leases that returned it; a RENEW handle is given back with
 * idem_leases_remove, the other jobs are freed by the module.
 */
#ifndef IDEM_LEASE_H
#define IDEM_LEASE_H

#include <stdint.h>

#include "idem_log.h"
#include "idem_request.h"
#include "idem_store.h"

/* Most RELEASE, COMMIT and FORGET jobs kept for a store that is away. */
#define IDEM_LEASE_MAX_BACKLOG 10000

/* What the background thread does for a reservation of this process. */
typedef enum idem_lease_job {
	IDEM_LEASE_RENEW = 0,     /* a handler runs under it: keep it alive */
	IDEM_LEASE_RELEASE,       /* a release met a store outage: release it
	                           * when possible */
	IDEM_LEASE_COMMIT,        /* a commit met a store outage: commit the
	                           * answer when possible, renewing meanwhile */
	IDEM_LEASE_FORGET,        /* a reserve got no answer, so the record may
	                           * or may not exist: delete it if it does */
	IDEM_LEASE_UNKNOWN        /* marking a record of unknown outcome met a
	                           * store outage: mark it when possible,
	                           * renewing meanwhile */
} idem_lease_job;

typedef struct idem_leases idem_leases;
typedef struct idem_lease idem_lease;

struct idem_metrics;

/*
 * Writes a deferred answer (borrowed for the call) as the commit of rq
 * (the job's descriptor, borrowed for the call: its contention is counted
 * after); row is the metrics row of its route, and ctx (borrowed for the
 * call) the log context of the job, for what the writer counts and logs.
 * Returns the store's result: IDEM_OK, IDEM_ERR_NOT_FOUND (fenced),
 * IDEM_ERR_STORE or IDEM_ERR_BUSY (tried again next round), or another
 * error (given up, logged).
 */
typedef idem_err (*idem_lease_commit_fn)(void *arg, idem_store_req *rq,
    unsigned row, const idem_stored_response *answer,
    const idem_log_ctx *ctx);

/*
 * Leases over store (borrowed), renewed every inflight_ttl_ms / 3 (at
 * least 10 ms); deferred commits are written through commit with arg
 * (borrowed).  Starts the background thread (when it cannot, logs a
 * warning and renews nothing).  Returns IDEM_OK with *out (free with
 * idem_leases_free) or IDEM_ERR_NOMEM.
 */
idem_err idem_leases_new(idem_store *store, uint64_t inflight_ttl_ms,
    idem_lease_commit_fn commit, void *arg, idem_leases **out);

/* Counts outcomes (committed, released, fenced, contended) into m, each
 * on the metrics row of the route of the request that added the job
 * (borrowed; NULL: not counted). */
void idem_leases_set_metrics(idem_leases *ls, struct idem_metrics *m);

/* Talks to store (borrowed) from now on.  Only while no job is queued and
 * no handler runs (tests that wrap a store). */
void idem_leases_set_store(idem_leases *ls, idem_store *store);

/*
 * Registers the reservation of rq (its descriptor, copied with its
 * policy), made by req (its route names the log lines and counts the
 * outcomes), for job; a COMMIT's answer is copied.
 * Returns the lease (owned by ls), or NULL when out of memory or, for the
 * jobs other than RENEW, over IDEM_LEASE_MAX_BACKLOG or after
 * idem_leases_flush (the job is then logged as dropped): the key then
 * frees after inflight-ttl.
 */
idem_lease *idem_leases_add(idem_leases *ls, idem_lease_job job,
    const idem_request *req, const idem_store_req *rq,
    const idem_stored_response *answer);

/* Marks a RENEW lease's handler as returned, so a renewal refused from now
 * on is its commit landing, not a takeover.  NULL is fine. */
void idem_leases_finishing(idem_leases *ls, idem_lease *l);

/* Unregisters and frees a RENEW lease (l is invalid afterwards).  Returns
 * whether its lease was lost to a takeover.  NULL is fine (returns 0). */
int idem_leases_remove(idem_leases *ls, idem_lease *l);

/* How many jobs other than RENEW wait for the store. */
unsigned idem_leases_backlog(idem_leases *ls);

/*
 * Stops the thread and makes a last attempt, for up to budget_ms, at every
 * job left; a store still away is tried once a round, not once per job.
 * What is not written is logged per key hash at error level
 * (dropped_at_exit), and jobs added later are dropped so.  Once is enough:
 * later calls return 0.  Returns how many jobs were left undone.
 */
unsigned idem_leases_flush(idem_leases *ls, uint64_t budget_ms);

/* Flushes with no time left when idem_leases_flush has not run (every job
 * logged as dropped), then frees ls and every lease.  NULL is fine. */
void idem_leases_free(idem_leases *ls);

#endif
