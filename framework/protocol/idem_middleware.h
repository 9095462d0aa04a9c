/*
 * idem_middleware.h - the idempotency protocol of DESIGN.md section 2,
 * wrapped around every route whose policy is not off.
 *
 * Per request: validate the key, hash the scope, fingerprint the request,
 * reserve (key, scope) in the store, and then run the handler (acquired or
 * taken over), replay the stored answer (committed, same fingerprint), or
 * refuse (conflict, in flight, store unavailable).  After the handler:
 * commit the answer when its status is in commit-statuses (a stand-in
 * saying it was executed when the answer is too large to store), else
 * release the reservation so a retry runs again.  Leases and the jobs a
 * store outage defers are idem_lease.h's, which the middleware drives.
 */
#ifndef IDEM_MIDDLEWARE_H
#define IDEM_MIDDLEWARE_H

#include "idem_answer.h"
#include "idem_config.h"
#include "idem_request.h"
#include "idem_store.h"

/* The protocol's state: config, store, leases (idem_lease.h), the outage
 * log.  Opaque: use the functions below. */
typedef struct idem_middleware idem_middleware;

struct idem_metrics;

/* Runs the route's handler on req into res; returns its result. */
typedef idem_err (*idem_next_fn)(idem_request *req, idem_response *res);

/*
 * A middleware over store (taken over, even on failure) with cfg's
 * [idempotency] settings (borrowed; must outlive it), each request under
 * its route's policy (idem_route_key_policy); leases are renewed every
 * third of least_lease_ms, the shortest inflight-ttl of any route
 * (idem_router_min_lease).  Returns IDEM_OK with *out (free with
 * idem_middleware_free) or IDEM_ERR_NOMEM.
 */
idem_err idem_middleware_new(const idem_config *cfg, idem_store *store,
    uint64_t least_lease_ms, idem_middleware **out);

/* Sets the instance id (up to 16 of [0-9a-f]) owner tokens begin with, so
 * the master can release a dead worker's reservations by prefix. */
void idem_middleware_set_instance(idem_middleware *mw, const char *id);

/*
 * Stops the lease thread and makes a last attempt, for up to budget_ms, at
 * every commit and release still waiting for the store; what cannot be
 * written is logged per key hash at error level.  For a stopping worker,
 * after its requests drained; once is enough (idem_middleware_free calls
 * it with shutdown-grace when it has not run).  Returns how many jobs were
 * left undone.
 */
unsigned idem_middleware_flush(idem_middleware *mw, uint64_t budget_ms);

/* Flushes (see above), closes the store and frees mw.  NULL is fine. */
void idem_middleware_free(idem_middleware *mw);

/* The store mw talks to (owned by mw; borrowed by the caller for mw's
 * life), for the purge, the metrics route and tests. */
idem_store *idem_middleware_store(const idem_middleware *mw);

/*
 * Makes mw talk to store (taken over) instead, and returns the store it
 * had (now the caller's), for tests that wrap a store.  Only while no
 * request runs and no job waits.
 */
idem_store *idem_middleware_swap_store(idem_middleware *mw,
    idem_store *store);

/* Counts mw's outcomes and times its store's operations into m
 * (borrowed; must outlive mw or be replaced first; NULL: not counted). */
void idem_middleware_set_metrics(idem_middleware *mw,
    struct idem_metrics *m);

/* How many commits, releases and deletions wait for the store to come
 * back (idem_leases_backlog). */
unsigned idem_middleware_backlog(idem_middleware *mw);

/* Whether mw counts the store as down: its last request met an outage
 * (contention is not one). */
int idem_middleware_store_down(const idem_middleware *mw);

/* Fills sk's scope hash for req's principal, as a keyed request of req's
 * would be scoped ([idempotency] scope).  Returns 0, or -1 after putting
 * a 400 IDEMPOTENCY_SCOPE_MISSING in res when req has no principal. */
int idem_middleware_scope(const idem_middleware *mw, const idem_request *req,
    idem_store_key *sk, idem_response *res);

/* The policy of req's route (idem_route_policy). */
idem_policy idem_middleware_policy(const idem_middleware *mw,
    const idem_request *req);

/*
 * Answers req (routed, body read) under the protocol; next runs the
 * handler and is called at most once.  Always leaves a complete response.
 */
void idem_middleware_handle(idem_middleware *mw, idem_request *req,
    idem_response *res, idem_next_fn next);

/*
 * Answers req without a key to record: runs next, and on a transactional
 * route runs it inside a transaction of its own, committed when the answer
 * would be stored (a status in commit-statuses) and else rolled back.
 */
void idem_middleware_plain(idem_middleware *mw, idem_request *req,
    idem_response *res, idem_next_fn next);

#endif
