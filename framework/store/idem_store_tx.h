/*
 * idem_store_tx.h - the store operations of transactional routes
 * (DESIGN.md 2.7): a reservation, a record and a COMMIT inside the
 * handler's transaction, on a connection of its plugin's pool.  Only the
 * MySQL store has them (idem_store.tx; NULL for the memory store, which
 * cannot share a transaction with a handler).
 */
#ifndef IDEM_STORE_TX_H
#define IDEM_STORE_TX_H

#include "idem_store.h"

/* The connection of idemfcgi_mysql.h, named without <mysql.h> (C11
 * allows the same typedef twice). */
typedef struct idem_mysql_conn idem_mysql_conn;

struct idem_store_tx_ops {
	/*
	 * c is a connection of the plugin's pool (idem_app_mysql_pool),
	 * borrowed.
	 *
	 * rq is the descriptor of the request that holds c (idem_store.h,
	 * borrowed for the call); its key is empty (key_len 0) for a request
	 * without one, whose transaction holds no record.  The transaction's
	 * contention is added to rq->contended.
	 *
	 * tx_begin opens a transaction on c and, when rq has a key, reserves
	 * it inside, as reserve does.  On ACQUIRED and TAKEN_OVER the
	 * transaction stays open and holds the key (its row is seen by nobody
	 * else until it commits: no lease, no takeover); on any other outcome
	 * or error it is rolled back.  Returns like reserve.
	 */
	idem_err (*tx_begin)(idem_store *s, idem_mysql_conn *c,
	    idem_store_req *rq, idem_reserve_result *out);
	/*
	 * Writes the answer into rq's record inside c's open transaction.
	 * Returns IDEM_OK; IDEM_ERR_TOO_LARGE (nothing written, the
	 * transaction still open for a smaller answer); else the transaction
	 * is rolled back: IDEM_ERR_NOT_FOUND (rq's owner does not hold
	 * the key),
	 * IDEM_ERR_BUSY (a deadlock) or IDEM_ERR_STORE.
	 */
	idem_err (*tx_record)(idem_store *s, idem_mysql_conn *c,
	    idem_store_req *rq, const idem_stored_response *resp);
	/*
	 * Records p (borrowed) as the progress of rq's record inside c's open
	 * transaction: kept when the transaction commits (an answer, or an
	 * unknown outcome), gone with it otherwise.  p is checked as for
	 * checkpoint: the wrapper refuses a bad one with IDEM_ERR_INVALID or
	 * IDEM_ERR_TOO_LARGE (nothing written, still open).  Returns IDEM_OK,
	 * else as tx_record.
	 */
	idem_err (*tx_checkpoint)(idem_store *s, idem_mysql_conn *c,
	    idem_store_req *rq, const idem_progress *p);
	/* Marks rq's record of unknown outcome inside c's open transaction
	 * (the COMMIT that follows keeps it so).  Returns as tx_record. */
	idem_err (*tx_mark_unknown)(idem_store *s, idem_mysql_conn *c,
	    idem_store_req *rq);
	/*
	 * Ends c's transaction: rolls it back (commit 0; returns IDEM_OK), or
	 * commits it.  A commit returns IDEM_OK when it committed; else it
	 * did not, except with *unknown set: the connection was lost during
	 * COMMIT and (no key, or the record unreadable) the outcome could
	 * not be learned.  With a key, a lost COMMIT is resolved by reading
	 * its record, waiting for the transaction to end: committed with
	 * rq's owner means it committed.  Faults a test asked for on c
	 * (idem_store_tx_faults) are injected, and cleared.
	 */
	idem_err (*tx_end)(idem_store *s, idem_mysql_conn *c,
	    idem_store_req *rq, int commit, int *unknown);
};

/* Faults a test can inject into tx_end (X-Idemfcgi-Fault, DESIGN.md 4): */
#define IDEM_TX_FAULT_DIE_IN_COMMIT      1u  /* send COMMIT, then SIGKILL */
#define IDEM_TX_FAULT_LOSE_BEFORE_COMMIT 2u  /* cut the connection first */
#define IDEM_TX_FAULT_LOSE_IN_COMMIT     4u  /* cut it after sending COMMIT */

/* Makes the next tx_end on c inject faults (IDEM_TX_FAULT_*; tests only,
 * through IDEMFCGI_TEST_FAULTS). */
void idem_store_tx_faults(idem_mysql_conn *c, unsigned faults);

/* Transactional routes: IDEM_ERR_INVALID from tx_begin for a store
 * without them. */
idem_err idem_store_tx_begin(idem_store *s, idem_mysql_conn *c,
    idem_store_req *rq, idem_reserve_result *out);
idem_err idem_store_tx_record(idem_store *s, idem_mysql_conn *c,
    idem_store_req *rq, const idem_stored_response *resp);
idem_err idem_store_tx_end(idem_store *s, idem_mysql_conn *c,
    idem_store_req *rq, int commit, int *unknown);
idem_err idem_store_tx_checkpoint(idem_store *s, idem_mysql_conn *c,
    idem_store_req *rq, const idem_progress *p);
idem_err idem_store_tx_mark_unknown(idem_store *s, idem_mysql_conn *c,
    idem_store_req *rq);
struct idem_config;
struct idem_mysql_pool;
/*
 * Makes pool (a plugin's, idem_app_mysql_pool) prepare the statements
 * the MySQL store runs inside a transactional route's transaction, with
 * cfg's inflight-wait as the lock wait of a duplicate.  Returns IDEM_OK or
 * IDEM_ERR_NOMEM.
 */
idem_err idem_store_mysql_tx_prepare(const struct idem_config *cfg,
    struct idem_mysql_pool *pool);

#endif
