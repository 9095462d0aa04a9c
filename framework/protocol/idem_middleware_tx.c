/*
 * idem_middleware_tx.c - transactional routes (DESIGN.md 2.7): the key's
 * record and the handler's writes in one transaction on a connection of
 * the plugin's pool (a data source of the store's database,
 * idem_store_tx.h), from the reservation to COMMIT.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "idem_log.h"
#include "idem_request_log.h"
#include "idem_middleware_int.h"
#include "idem_router.h"
#include "idem_store_tx.h"

/* Times a transactional request whose transaction lost a race for its key
 * (a deadlock, a certification failure; at COMMIT or under the handler)
 * reserves again before answering 503 TRANSACTION_ROLLED_BACK. */
#define TX_RACES 3

/* write_fn of a transactional route: the record in the open transaction
 * of arg, its connection. */
static idem_err
write_record(idem_middleware *mw, void *arg, idem_store_req *rq,
    const idem_stored_response *sr)
{
	return idem_store_tx_record(mw->store, arg, rq, sr);
}

/* The IDEM_TX_FAULT_* bits req asks for. */
static unsigned
tx_faults(const idem_middleware *mw, const idem_request *req)
{
	return (idem_mw_fault(mw, req, "in-commit") ? IDEM_TX_FAULT_DIE_IN_COMMIT : 0) |
	    (idem_mw_fault(mw, req, "lose-before-commit") ?
	    IDEM_TX_FAULT_LOSE_BEFORE_COMMIT : 0) |
	    (idem_mw_fault(mw, req, "lose-in-commit") ? IDEM_TX_FAULT_LOSE_IN_COMMIT : 0);
}

/* A transaction that did not commit (or is not known to have, unknown
 * set) with err: the handler's answer in res is void; counted, logged
 * (with owner, the key's owner token; NULL: a request without a key), and
 * res made a 503 saying so. */
static void
not_committed(idem_middleware *mw, idem_request *req, idem_response *res,
    idem_err err, int unknown, const char *owner)
{
	int keyed = owner != NULL;

	if (err == IDEM_ERR_NOT_FOUND)
		idem_mw_count(mw, req, IDEM_OUTCOME_FENCED);
	else if (keyed)
		idem_mw_count(mw, req, unknown ? IDEM_OUTCOME_TX_UNKNOWN :
		    IDEM_OUTCOME_TX_ROLLED_BACK);
	idem_log_event(req, unknown ? IDEM_LOG_ERROR : IDEM_LOG_WARN, unknown ?
	    "tx_outcome_unknown" : "tx_rolled_back", owner, "%s (status %d "
	    "not sent): %s", unknown ? "the connection was lost during COMMIT "
	    "and its outcome could not be read" : "the transaction did not "
	    "commit", res->status, err == IDEM_ERR_NOT_FOUND ? "this request "
	    "no longer held its key" : idem_strerror(err));
	if (unknown)
		idem_response_refuse(res, 503, "TRANSACTION_OUTCOME_UNKNOWN", "the "
		    "connection to the database was lost while committing, and "
		    "whether the request took effect could not be learned; retry "
		    "with the same Idempotency-Key to get its answer", 1);
	else
		idem_response_refuse(res, 503, "TRANSACTION_ROLLED_BACK", keyed ?
		    "the request's transaction could not be committed and was "
		    "rolled back: none of its database writes took effect; retry "
		    "with the same Idempotency-Key" : "the request's transaction "
		    "could not be committed and was rolled back: none of its "
		    "database writes took effect; retry", 1);
}

/*
 * After the transaction of rq, whose handler could not tell whether its
 * side effect outside happened, did not commit, or its COMMIT's outcome
 * could not be learned: keeps the key of unknown outcome all the same,
 * so that a retry reconciles instead of running afresh.  The key is
 * reserved anew on the two-phase path: a record that is ours then
 * (acquired, or one this execution was taking over, resuming or
 * reconciling, back as it was before the transaction) is marked as the
 * two-phase path marks it (idem_mw_keep_unknown: deferred to the lease
 * thread while the store is away).  One of unknown outcome already (the
 * COMMIT that was lost kept the mark) is left so; one another request
 * holds or committed meanwhile is not touched.  res says so.
 */
static void
keep_unknown_outside(idem_middleware *mw, const idem_request *req,
    idem_store_req *rq, idem_response *res)
{
	idem_reserve_result rr;
	idem_reserve_outcome o;
	idem_err err;
	int runs;

	memset(&rr, 0, sizeof(rr));
	rq->unanswered = 0;
	err = idem_store_reserve(mw->store, rq, &rr);
	runs = idem_reserve_runs(err, &rr);
	o = rr.outcome;
	idem_reserve_result_clear(&rr);
	if (runs) {
		idem_mw_keep_unknown(mw, req, rq, res);
		return;
	}
	/* a reservation that may land after all is marked when it does */
	if (err != IDEM_OK && rq->unanswered)
		(void)idem_leases_add(mw->leases, IDEM_LEASE_UNKNOWN, req, rq,
		    NULL);
	idem_mw_count_contended(mw, req, rq);
	if (err == IDEM_OK && o == IDEM_RESERVE_UNKNOWN) {
		idem_mw_count(mw, req, IDEM_OUTCOME_OUTCOME_UNKNOWN);
		idem_log_event(req, IDEM_LOG_WARN, "outcome_unknown", rq->owner,
		    "the handler could not tell whether its side effect "
		    "happened: the record is of unknown outcome");
	} else if (err == IDEM_OK) {
		idem_mw_count(mw, req, IDEM_OUTCOME_FENCED);
		idem_log_event(req, IDEM_LOG_ERROR, "fenced", rq->owner, "an "
		    "unknown outcome not recorded: another request %s the key "
		    "meanwhile", o == IDEM_RESERVE_COMMITTED ? "committed" :
		    "holds");
	} else {
		idem_mw_count(mw, req, IDEM_OUTCOME_TX_ROLLED_BACK);
		idem_log_event(req, IDEM_LOG_ERROR, "unknown_failed", rq->owner,
		    "an unknown outcome not recorded: its transaction did not "
		    "keep it, and reserving the key again failed: %s; a retry "
		    "runs again", idem_strerror(err));
	}
	idem_mw_refuse_unknown(req, res);
}

/*
 * 8: marks rq's record of unknown outcome in c's transaction, with what
 * the handler wrote, and commits (lost: the server rolled the transaction
 * back already; it is ended here).  Returns IDEM_OK with res the 503 of
 * unknown outcome, counted and logged, or why nothing committed: the
 * caller keeps the mark outside the transaction.
 */
static idem_err
commit_unknown(idem_middleware *mw, const idem_request *req,
    idem_db_conn *c, idem_store_req *rq, int lost, idem_response *res)
{
	int unknown = 0;
	idem_err err = lost ? IDEM_ERR_BUSY :
	    idem_store_tx_mark_unknown(mw->store, c, rq);

	if (err == IDEM_OK)
		err = idem_store_tx_end(mw->store, c, rq, 1, &unknown);
	else if (lost)
		idem_store_tx_end(mw->store, c, rq, 0, &unknown);
	if (err != IDEM_OK)
		return err;
	idem_mw_count_contended(mw, req, rq);
	idem_mw_count(mw, req, IDEM_OUTCOME_OUTCOME_UNKNOWN);
	idem_log_event(req, IDEM_LOG_WARN, "outcome_unknown", rq->owner, "the "
	    "handler could not tell whether its side effect happened: the "
	    "record is kept of unknown outcome");
	idem_mw_refuse_unknown(req, res);
	return IDEM_OK;
}

/*
 * Writes res, a committable answer, into the record of ex's request in c's
 * transaction (its stand-in when it cannot be stored whole; keyed 0: no
 * record) and commits.  Returns IDEM_OK, counted as committed (and
 * reconciled when ex reconciles), or why not: the transaction is rolled
 * back, or *unknown says its COMMIT's outcome was lost.
 */
static idem_err
record_and_commit(idem_middleware *mw, idem_request *req, idem_response *res,
    idem_db_conn *c, const idem_exec *ex, int keyed, int *unknown)
{
	idem_store_req *rq = ex->rq;
	idem_err err = IDEM_OK;

	if (keyed) {
		idem_answer a;
		err = idem_mw_store_answer(mw, &a, res, rq, req, write_record,
		    c);
		idem_answer_clear(&a);
		/* the record not written (even as its stand-in), the open
		 * transaction goes back; other errors rolled it back already */
		if (err == IDEM_ERR_TOO_LARGE || err == IDEM_ERR_NOMEM)
			idem_store_tx_end(mw->store, c, rq, 0, unknown);
	}
	if (err == IDEM_OK) {
		idem_mw_fault_die(mw, req, "after-record");
		idem_store_tx_faults(c, tx_faults(mw, req));
		err = idem_store_tx_end(mw->store, c, rq, 1, unknown);
	}
	idem_mw_count_contended(mw, req, rq);
	if (err == IDEM_OK && keyed) {
		if (ex->reconcile)
			idem_mw_count(mw, req, IDEM_OUTCOME_RECONCILED);
		idem_mw_count(mw, req, IDEM_OUTCOME_COMMITTED);
	}
	return err;
}

/*
 * After a transactional route's handler ran in c's transaction: writes the
 * answer into rq's record (rq's key empty: no record) and commits, or
 * rolls back when the answer is not stored.  A committable answer the
 * store cannot hold is written as its stand-in.  When the transaction does
 * not commit, res becomes a 503 saying so (or that the outcome is
 * unknown), except when may_retry and the transaction lost a race for its
 * key, at COMMIT or
 * under the handler (lost: idem_db_tx_lost) (a deadlock; on Galera, a
 * certification failure against another node's transaction): then
 * nothing of it was done, res is left to the caller, and 1 is returned:
 * the caller reserves again, which replays the winner's answer, waits for
 * it, or runs once more.  Returns 0 otherwise.
 */
static int
tx_finish(idem_middleware *mw, idem_request *req, idem_db_conn *c,
    idem_exec *ex, idem_response *res, idem_err herr, int lost,
    int may_retry)
{
	idem_store_req *rq = ex->rq;
	int keyed = rq->key.key_len > 0, unknown = 0;
	const char *owner = keyed ? rq->owner : NULL;
	idem_err err = IDEM_OK;

	if (keyed && idem_mw_stays_unknown(ex, res, herr)) {
		/* 8: kept of unknown outcome with what the handler wrote, in
		 * its transaction.  Never run again here, even after a lost
		 * race: its call outside may have been made.  Should the
		 * transaction not commit (or its COMMIT's outcome not be
		 * learned), the mark is kept outside it (its writes gone; a
		 * retry reconciles) */
		if (commit_unknown(mw, req, c, rq, lost, res) != IDEM_OK)
			keep_unknown_outside(mw, req, rq, res);
		return 0;
	}
	/* the server rolled the transaction back under the handler (a
	 * deadlock; on Galera, another node's commit of this key won):
	 * whatever the handler answered, nothing of it was done, and what it
	 * wrote after (a new transaction) must not commit alone, keyed or
	 * not */
	if (lost) {
		idem_store_tx_end(mw->store, c, rq, 0, &unknown);
		idem_mw_count_contended(mw, req, rq);
		err = IDEM_ERR_BUSY;
		goto not_committed;
	}
	if (!idem_mw_committable(rq->policy, res, herr)) {
		idem_store_tx_end(mw->store, c, rq, 0, &unknown);
		if (keyed) {
			idem_mw_count(mw, req, IDEM_OUTCOME_RELEASED);
			idem_log_event(req, IDEM_LOG_INFO, "released", owner,
			    "rolled back (status %d%s); a retry runs again",
			    res->status, herr != IDEM_OK ? ", the handler failed" :
			    "");
		}
		return 0;
	}
	if ((err = record_and_commit(mw, req, res, c, ex, keyed, &unknown)) ==
	    IDEM_OK)
		return 0;
not_committed:
	if (err == IDEM_ERR_BUSY && keyed && may_retry) {
		idem_log_event(req, IDEM_LOG_INFO, "tx_lost_race", owner,
		    "the transaction lost a race for the key, at COMMIT or under "
		    "the handler (a deadlock, or a certification failure): "
		    "nothing was done; reserving again");
		return 1;
	}
	not_committed(mw, req, res, err, unknown, owner);
	return 0;
}

/* Logs a handler that ended its own transaction (COMMIT, ROLLBACK, DDL):
 * its writes no longer commit with the answer.  What follows then runs as
 * the two-phase path would: the answer's UPDATE commits when the
 * reservation was committed with the handler's writes, and finds no row
 * (503, not done) when it was rolled back.  A handler that commits and
 * then writes again is in a new transaction and goes unnoticed. */
static void
tx_check_open(const idem_request *req, idem_db_conn *c, const char *owner)
{
	/* the reservation opened it: open it must still be, autocommit off */
	if (!idem_db_broken(c) && !idem_db_tx_intact(c))
		idem_log_event(req, IDEM_LOG_ERROR, "tx_ended_by_handler", owner,
		    "the handler of %s %s ended its transaction itself (COMMIT, "
		    "ROLLBACK, DDL or LOCK TABLES): its writes are no longer "
		    "committed with its answer; fix the plugin", req->route->method,
		    req->route->tmpl);
}

/* Runs ex's handler in c's open transaction, req->tx while it runs.
 * *lost says whether the server rolled the transaction back under it (a
 * deadlock; on Galera, a certification failure).  Returns the handler's
 * result. */
static idem_err
run_in_tx(idem_middleware *mw, idem_request *req, idem_response *res,
    idem_next_fn next, idem_db_conn *c, idem_exec *ex, int *lost)
{
	idem_err err;

	/* what the reservation (or its opening) met is not the handler's:
	 * only a 1213 under the handler is a lost race */
	(void)idem_db_tx_lost(c);
	req->tx = c;
	err = idem_mw_exec_run(ex, req, res, next);
	req->tx = NULL;
	idem_mw_fault_die(mw, req, "after-handler");
	*lost = idem_db_tx_lost(c);
	if (!*lost)
		tx_check_open(req, c, ex->rq->owner);
	else
		/* for its side effect: a handler that turned autocommit back
		 * on leaves tx mode, so the next transaction turns it off
		 * again */
		(void)idem_db_tx_intact(c);
	return err;
}

/* Runs a transactional route's handler with no key to record, in a
 * transaction of its own. */
void
idem_mw_tx_plain(idem_middleware *mw, idem_request *req, idem_response *res,
    idem_next_fn next)
{
	idem_db *pool = req->route->tx_db;
	idem_db_conn *c = idem_db_take(pool);
	idem_key_policy pol;
	/* no key: the descriptor of a transaction with no record */
	idem_store_req rq = { .policy = &pol };
	idem_exec ex = { .mw = mw, .rq = &rq, .c = c };
	idem_reserve_result rr;
	idem_err err;

	idem_route_key_policy(mw->cfg, req->route, &pol);
	if (c == NULL || idem_store_tx_begin(mw->store, c, &rq, &rr) !=
	    IDEM_OK) {
		if (c != NULL)
			idem_db_return(c);
		idem_mw_count_contended(mw, req, &rq);
		idem_response_refuse(res, 503, "DATABASE_UNAVAILABLE", "the "
		    "database is unavailable; retry later", 1);
		return;
	}
	/* what opening it met is not the handler's */
	(void)idem_db_tx_lost(c);
	req->tx = c;
	err = next(req, res);
	req->tx = NULL;
	idem_mw_fault_die(mw, req, "after-handler");
	/* without a reservation the transaction opens with the handler's
	 * first statement, if any: a deadlock under it (told to the
	 * connection by the statement helper or idem_mysql_check, or its
	 * last statement's) is all there is to check */
	tx_finish(mw, req, c, &ex, res, err, idem_db_tx_lost(c), 0);
	idem_db_return(c);
	idem_mw_count_contended(mw, req, &rq);
}


void
idem_mw_tx_handle(idem_middleware *mw, idem_request *req, idem_response *res,
    idem_next_fn next, idem_store_req *rq)
{
	idem_db *pool = req->route->tx_db;
	idem_db_conn *c = idem_db_take(pool);
	idem_exec ex;
	idem_mw_wait w;
	int races = 0, lost, again;
	idem_err err;

	memset(&ex, 0, sizeof(ex));
	if (c == NULL) {
		idem_mw_store_failed(mw, req, IDEM_ERR_STORE);
		idem_mw_refuse_unavailable(res);
		return;
	}
	idem_mw_wait_init(rq, &w);
	/* the open transaction holds the key: no lease to renew */
	while (idem_mw_reserve(mw, req, res, rq, c, &w, &ex)) {
		err = run_in_tx(mw, req, res, next, c, &ex, &lost);
		again = tx_finish(mw, req, c, &ex, res, err, lost,
		    races < TX_RACES);
		idem_mw_exec_clear(&ex);
		if (!again)
			break;
		/* lost a race: as a retry of the client would */
		races++;
		idem_response_clear(res);
		idem_mw_new_owner(mw, rq->owner);
	}
	idem_db_return(c);
}

/*
 * One run of the handler of ex (protocol (a)) under rq's reservation,
 * committed before: its transaction on c opened over the record
 * (tx_adopt), the handler, then the answer written into the record and
 * COMMIT, as tx_finish does; the reservation is released when nothing
 * commits.  Returns 1 when the transaction lost a race (a deadlock, a
 * certification failure) and may_retry: nothing of it was done, res is
 * left to the caller, which runs the handler again under the same
 * reservation (the same downstream keys); else 0 with res the answer.
 */
static int
reserved_run(idem_middleware *mw, idem_request *req, idem_response *res,
    idem_next_fn next, idem_db_conn *c, idem_exec *ex, idem_lease *lease,
    int may_retry)
{
	idem_store_req *rq = ex->rq;
	int lost, unknown = 0;
	idem_err err, herr;

	err = idem_store_tx_adopt(mw->store, c, rq);
	idem_mw_count_contended(mw, req, rq);
	if (err == IDEM_ERR_NOT_FOUND) {
		not_committed(mw, req, res, err, 0, rq->owner);
		return 0;
	}
	if (err != IDEM_OK) {
		/* the handler did not run: the key goes back */
		idem_log_event(req, IDEM_LOG_ERROR, "tx_not_begun", rq->owner,
		    "the handler's transaction could not begin: %s; the "
		    "reservation is released", idem_strerror(err));
		(void)idem_mw_release_quiet(mw, req, rq);
		idem_response_refuse(res, 503, "DATABASE_UNAVAILABLE", "the "
		    "database is unavailable; retry later", 1);
		return 0;
	}
	herr = run_in_tx(mw, req, res, next, c, ex, &lost);
	/* a renewal refused from here on is the commit landing */
	idem_leases_finishing(mw->leases, lease);
	if (idem_mw_stays_unknown(ex, res, herr)) {
		/* 8: marked in its transaction, with what the handler wrote;
		 * else (its transaction lost) on its own: the reservation is
		 * still this request's */
		if (commit_unknown(mw, req, c, rq, lost, res) != IDEM_OK) {
			idem_mw_count_contended(mw, req, rq);
			idem_mw_keep_unknown(mw, req, rq, res);
		}
		return 0;
	}
	if (lost) {
		idem_store_tx_end(mw->store, c, rq, 0, &unknown);
		idem_mw_count_contended(mw, req, rq);
		err = IDEM_ERR_BUSY;
	} else if (!idem_mw_committable(rq->policy, res, herr)) {
		idem_store_tx_end(mw->store, c, rq, 0, &unknown);
		idem_mw_release(mw, req, rq, res->status, herr);
		return 0;
	} else if ((err = record_and_commit(mw, req, res, c, ex, 1,
	    &unknown)) == IDEM_OK)
		return 0;
	if (err == IDEM_ERR_BUSY && may_retry) {
		idem_log_event(req, IDEM_LOG_INFO, "tx_lost_race", rq->owner,
		    "the transaction lost a race, at COMMIT or under the handler "
		    "(a deadlock, or a certification failure): nothing was done; "
		    "running the handler again under its reservation");
		return 1;
	}
	not_committed(mw, req, res, err, unknown, rq->owner);
	/* not committed for sure, and the record still ours: a retry runs
	 * afresh (an unknown COMMIT's reservation lapses after inflight-ttl,
	 * or is the answer) */
	if (!unknown && err != IDEM_ERR_NOT_FOUND)
		(void)idem_mw_release_quiet(mw, req, rq);
	return 0;
}

void
idem_mw_tx_reserved(idem_middleware *mw, idem_request *req,
    idem_response *res, idem_next_fn next, idem_store_req *rq)
{
	idem_db_conn *c = idem_db_take(req->route->tx_db);
	idem_lease *lease;
	idem_exec ex;
	idem_mw_wait w;
	int races = 0;

	memset(&ex, 0, sizeof(ex));
	if (c == NULL) {
		idem_mw_store_failed(mw, req, IDEM_ERR_STORE);
		idem_mw_refuse_unavailable(res);
		return;
	}
	/* 4. the two-phase reserve: its commit is certified on every node
	 * before the handler runs, so of two requests of one key through
	 * two nodes only the one that won it runs */
	idem_mw_wait_init(rq, &w);
	if (!idem_mw_reserve(mw, req, res, rq, NULL, &w, &ex)) {
		idem_mw_exec_clear(&ex);
		idem_db_return(c);
		return;
	}
	/* renewed while the handler runs, as on the two-phase path: no row
	 * lock spans the nodes; its checkpoints (ex.c NULL) commit on their
	 * own, as the call outside they record happened whatever the
	 * transaction does */
	lease = idem_leases_add(mw->leases, IDEM_LEASE_RENEW, req, rq, NULL);
	while (reserved_run(mw, req, res, next, c, &ex, lease,
	    races < TX_RACES)) {
		races++;
		idem_response_clear(res);
	}
	idem_leases_remove(mw->leases, lease);
	idem_mw_exec_clear(&ex);
	idem_db_return(c);
}
