/*
 * idem_middleware_int.h - what the two halves of the middleware share:
 * idem_middleware.c (DESIGN.md 2, steps 1 to 6: the two-phase path) and
 * idem_middleware_tx.c (2.7: transactional routes, on a data source of
 * the store's database, idem_store_tx.h).  Not for other modules.
 */
#ifndef IDEM_MIDDLEWARE_INT_H
#define IDEM_MIDDLEWARE_INT_H

#include <stdatomic.h>

#include "idem_answer.h"
#include "idem_lease.h"
#include "idem_metrics.h"
#include "idem_middleware.h"
#include "idem_store_tx.h"

/* The request header that injects a fault (DESIGN.md 4), read
 * only when the environment has IDEMFCGI_TEST_FAULTS=1. */
#define FAULT_HEADER "X-Idemfcgi-Fault"

struct idem_middleware {
	const idem_config *cfg;   /* borrowed */
	idem_store *store;        /* owned */
	struct idem_metrics *metrics; /* borrowed; NULL: not counted */
	char instance[17];        /* owner tokens start with it and '.' */
	/* the leases of this process's reservations, renewed while their
	 * handlers run, and the commits and releases that met an outage */
	idem_leases *leases;      /* owned */
	/* a store outage is logged when it begins and when it ends, not on
	 * every request it refuses */
	atomic_int store_down;
	_Atomic uint64_t down_since;   /* ms */
	atomic_ulong refused_down;     /* 503s since */
	int faults;               /* IDEMFCGI_TEST_FAULTS=1: requests may
	                           * inject faults (DESIGN.md 4) */
};

/* Whether req asks for the fault named point (FAULT_HEADER; only with
 * IDEMFCGI_TEST_FAULTS=1), and: dies there when it does. */
int idem_mw_fault(const idem_middleware *mw, const idem_request *req,
    const char *point);
void idem_mw_fault_die(const idem_middleware *mw, const idem_request *req,
    const char *point);

/* Counts an outcome on a metrics row, or on req's route's, when mw has
 * metrics. */
void idem_mw_count_row(const idem_middleware *mw, unsigned row,
    idem_outcome o);
void idem_mw_count(const idem_middleware *mw, const idem_request *req,
    idem_outcome o);

/* The store failed on req: counts the refusal, logs an outage's start
 * once.  The store answered: logs an outage's end once. */
void idem_mw_store_failed(idem_middleware *mw, const idem_request *req,
    idem_err err);
void idem_mw_store_answered(idem_middleware *mw, const idem_request *req);

/*
 * One execution of a record: set in req->exec while its handler (or the
 * route's reconcile hook) runs, for the handler's calls on its request
 * (idem_request_checkpoint, idem_request_phase; idem_progress.c).  Made by
 * the middleware on its stack; progress is owned.
 */
typedef struct idem_exec {
	idem_middleware *mw;
	idem_store_req *rq;
	idem_db_conn *c;       /* a transactional route's: its connection
	                           * in the open transaction; else NULL */
	idem_progress progress;   /* the record's last checkpoint: read at
	                           * reserve, or written by this execution */
	int reconcile;            /* the record's outcome was unknown: the
	                           * reconcile hook runs, not the handler */
	unsigned char downstream[32]; /* the base of its downstream keys
	                           * (idem_downstream.h), with a key secret */
	int has_downstream;
	int may_adopt;            /* its store can reserve a transactional
	                           * route's key first (tx_adopt: DESIGN.md
	                           * 2.7, a route that calls outside) */
} idem_exec;

/* Frees what ex owns. */
void idem_mw_exec_clear(idem_exec *ex);

/* Runs ex's handler, or its reconcile hook (next's route's), with
 * req->exec set (and ex's downstream base, with a key secret).  Returns
 * what it returned. */
idem_err idem_mw_exec_run(idem_exec *ex, idem_request *req,
    idem_response *res, idem_next_fn next);

/*
 * A handler (or reconcile hook) said it cannot tell what became of its
 * side effect (herr IDEM_ERR_OUTCOME_UNKNOWN; or a reconcile hook gave no
 * final answer): replaces res with the 503 that says so.
 */
void idem_mw_refuse_unknown(const idem_request *req, idem_response *res);

/* The handler could not tell what became of its side effect: rq's record,
 * held by rq's owner, is kept so (a store away: retried by the lease
 * thread, renewing the lease meanwhile, so that no takeover runs it
 * again), counted and logged, and res says so. */
void idem_mw_keep_unknown(idem_middleware *mw, const idem_request *req,
    idem_store_req *rq, idem_response *res);

/* Whether ex's record is to be kept of unknown outcome after its run
 * returned herr with res. */
int idem_mw_stays_unknown(const idem_exec *ex, const idem_response *res,
    idem_err herr);

/* Replaces res with the 503 of a store that failed (fail closed). */
void idem_mw_refuse_unavailable(idem_response *res);

/* Whether an answer is stored (and a transaction committed): the handler
 * succeeded with a status in pol's commit-statuses. */
int idem_mw_committable(const idem_key_policy *pol, const idem_response *res,
    idem_err herr);

/* Counts the contention the store met for rq on req's route, and clears
 * it. */
void idem_mw_count_contended(const idem_middleware *mw,
    const idem_request *req, idem_store_req *rq);

/* Writes a fresh owner token into owner (IDEM_OWNER_MAX + 1 bytes). */
void idem_mw_new_owner(const idem_middleware *mw, char *owner);

/* How an answer is written: the store's commit, or a transactional
 * route's record inside its transaction (arg: the connection). */
typedef idem_err (*idem_mw_write_fn)(idem_middleware *mw, void *arg,
    idem_store_req *rq, const idem_stored_response *sr);

/*
 * Writes the prepared answer a as rq's, through write with arg: a
 * committable answer is never released, so when it is not stored whole
 * (a->why set by idem_answer_prepare, or the store refuses it as too
 * large) its stand-in is, logged (about req; or, with req NULL, about
 * ctx) and counted as answer_not_stored on row.  Returns what the last
 * write returned.
 */
idem_err idem_mw_write_answer(idem_middleware *mw, idem_answer *a,
    idem_store_req *rq, unsigned row, const idem_request *req,
    const idem_log_ctx *ctx, idem_mw_write_fn write, void *arg);

/* Prepares res (idem_answer_prepare) into a and writes it as
 * idem_mw_write_answer does for req; an answer that needed its stand-in
 * and got no memory for it is logged and counted as not stored all the
 * same.  Returns what the last write returned, or IDEM_ERR_NOMEM.  Clear
 * a after. */
idem_err idem_mw_store_answer(idem_middleware *mw, idem_answer *a,
    const idem_response *res, idem_store_req *rq, const idem_request *req,
    idem_mw_write_fn write, void *arg);

/* How long a request may still wait while its key is in flight or
 * contended (inflight-wait from its first attempt), and the next pause. */
typedef struct idem_mw_wait {
	uint64_t deadline;    /* idem_now_ms */
	long pause;           /* ms */
} idem_mw_wait;

/* Starts w at the inflight-wait of rq's policy from now. */
void idem_mw_wait_init(const idem_store_req *rq, idem_mw_wait *w);

/*
 * Step 4 of DESIGN.md 2: reserves rq's key for req through the store, or
 * inside c's transaction when c is not NULL, waiting within w while it is
 * in flight or contended.  Returns 1 when the handler is to run (acquired,
 * taken over, resumed, or to reconcile: counted, logged) with ex filled
 * (progress, reconcile), 0 when res holds the answer (the replay, a
 * conflict, in flight, unknown, store unavailable).
 */
int idem_mw_reserve(idem_middleware *mw, idem_request *req,
    idem_response *res, idem_store_req *rq, idem_db_conn *c,
    idem_mw_wait *w, idem_exec *ex);

/* Step 7 (idem_middleware_tx.c): a keyed request to a transactional route,
 * from its reservation inside the handler's transaction to its COMMIT;
 * rq is its descriptor (its owner changes when it reserves again). */
void idem_mw_tx_handle(idem_middleware *mw, idem_request *req,
    idem_response *res, idem_next_fn next, idem_store_req *rq);

/* Step 7, protocol (a) (idem_middleware_tx.c): a keyed request to a
 * transactional route that calls outside, on a store with tx_adopt: its
 * key reserved in a commit of its own, then its handler's writes and
 * answer in one transaction. */
void idem_mw_tx_reserved(idem_middleware *mw, idem_request *req,
    idem_response *res, idem_next_fn next, idem_store_req *rq);

/* Releases rq's reservation after its handler answered status (its
 * result herr) with an answer that is not stored, so a retry runs again
 * (the lease thread retries a release the store could not make); counted
 * and logged. */
void idem_mw_release(idem_middleware *mw, const idem_request *req,
    idem_store_req *rq, int status, idem_err herr);
/* Deletes rq's reservation (paused when it has progress), its contention
 * counted; a release the store could not make is left to the lease thread
 * (logged).  Counts no outcome.  Returns the store's answer: IDEM_OK,
 * IDEM_ERR_NOT_FOUND (no longer rq's), or the error deferred. */
idem_err idem_mw_release_quiet(idem_middleware *mw, const idem_request *req,
    idem_store_req *rq);

/* A request to a transactional route with no key to record: the handler
 * in a transaction of its own. */
void idem_mw_tx_plain(idem_middleware *mw, idem_request *req,
    idem_response *res, idem_next_fn next);

#endif
