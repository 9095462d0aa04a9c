/*
 * idem_store_tx.h - the store operations of transactional routes
 * (DESIGN.md 2.7): a reservation, a record and a COMMIT inside the
 * handler's transaction, on a connection of its plugin's pool (a data
 * source of the store's database, below).  Only a store with a database
 * a handler can share has them (idem_store.tx; NULL for the memory
 * store).  Neutral: a store's connection and pool begin with the structs
 * below, and nothing here names a database.
 */
#ifndef IDEM_STORE_TX_H
#define IDEM_STORE_TX_H

#include <stdarg.h>

#include "idemfcgi_db.h"
#include "idem_store.h"

/* A data source (idem_db) and its connections (idem_db_conn) are the
 * public types of idemfcgi_db.h; their insides are here. */

/* What a data source does, filled by its store (borrowed, static). */
typedef struct idem_db_ops {
	/* A connection for a transactional route's request (its own until
	 * put back), as the last user left it (tx_begin sets its mode), or
	 * NULL: none came free in time, or the database cannot be reached
	 * (logged). */
	idem_db_conn *(*take)(idem_db *db);
	/* The same for a plugin's own statements (idem_db_get): autocommit
	 * on, whatever its last user left. */
	idem_db_conn *(*get)(idem_db *db);
	/* Gives c back to db (a lost one is closed, and opened anew when
	 * next taken). */
	void (*put)(idem_db *db, idem_db_conn *c);
	/* Frees db and its connections (none may be taken). */
	void (*free)(idem_db *db);
	/* Whether the server rolled c's transaction back since this was last
	 * asked (a deadlock told to c; on Galera, an abort by another node's
	 * commit): 1 or 0; asking clears it. */
	int (*tx_lost)(idem_db_conn *c);
	/* Whether c's transaction is still open as the store left it (its
	 * handler did not end it): 1 or 0. */
	int (*tx_intact)(idem_db_conn *c);
	/* Whether c's connection is lost: 1 or 0. */
	int (*broken)(idem_db_conn *c);
	/* The statement helper of idemfcgi_db.h (idem_db_run, _fetch, _one,
	 * _affected, _insert_id), its variable arguments in *ap. */
	idem_err (*run)(idem_db_conn *c, size_t i, const char *in,
	    va_list *ap);
	idem_err (*fetch)(idem_db_conn *c, size_t i, const char *out,
	    va_list *ap);
	idem_err (*one)(idem_db_conn *c, size_t i, const char *in,
	    const char *out, va_list *ap);
	unsigned long long (*affected)(idem_db_conn *c, size_t i);
	unsigned long long (*insert_id)(idem_db_conn *c, size_t i);
} idem_db_ops;

/* A pool of the store's database: a plugin's (idem_app_db), where a
 * transactional route takes its connections.  A store's pool begins with
 * it (the MySQL store's idem_mysql_pool). */
struct idem_db {
	const idem_db_ops *ops;
	idem_db_dialect dialect;
};

/* A connection of a data source, shared by a transactional route's
 * handler and its key's record.  A store's connection begins with it
 * (the MySQL store's idem_mysql_conn, which plugins reach through
 * idemfcgi_mysql.h). */
struct idem_db_conn {
	idem_db *source;              /* borrowed: the pool it belongs to */
	int held;                     /* taken by idem_db_take for a
	                               * transactional route: only
	                               * idem_db_return gives it back */
	unsigned tx_faults;           /* tests: IDEM_TX_FAULT_* for the next
	                               * tx_end (idem_store_tx_faults) */
};

/* The operations of a data source and of its connections, as function
 * calls (besides idemfcgi_db.h's): idem_db_free takes NULL. */
/* idem_db_take: a connection for a transactional route's request (as the
 * last user left it), held by the framework until idem_db_return gives
 * it back (idem_db_put refuses it: it is the handler's only to use). */
idem_db_conn *idem_db_take(idem_db *db);
void idem_db_return(idem_db_conn *c);
void idem_db_free(idem_db *db);
int idem_db_tx_lost(idem_db_conn *c);
int idem_db_tx_intact(idem_db_conn *c);
int idem_db_broken(idem_db_conn *c);

/* Sets the variable of each "S" column of out to NULL, the arguments on
 * *ap after those of in (NULL: none); *ap itself is left as it is.  What
 * a store's fetch and one do first, so that a text is NULL after any
 * failure (idemfcgi_db.h).  Stops at an unknown conversion. */
void idem_db_null_texts(const char *in, const char *out, va_list *ap);

/* How the store factory (server/idem_store_open.c) makes a plugin's pool
 * of its store's database and runs a plugin's DDL there, for a store
 * whose database plugins may share; the plugin layer calls it without
 * knowing the store (static, borrowed). */
struct idem_config;
typedef struct idem_db_maker {
	/* A pool of cfg's store's database for a plugin: its pool-size
	 * connections, each preparing the nsql statements of sql (borrowed:
	 * static storage; '?' placeholders) and the store's statements of
	 * transactional routes.  Returns IDEM_OK with *out (free with
	 * idem_db_free), or the error (logged). */
	idem_err (*pool)(const struct idem_config *cfg, const char *const *sql,
	    size_t nsql, idem_db **out);
	/* Runs sql (one statement, DDL) on a connection of its own to cfg's
	 * store's database.  Returns IDEM_OK or the error (logged). */
	idem_err (*exec)(const struct idem_config *cfg, const char *sql);
} idem_db_maker;

struct idem_store_tx_ops {
	/*
	 * c is a connection of the plugin's pool (a data source of the
	 * store's database: idem_app_mysql_pool's for the MySQL store),
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
	idem_err (*tx_begin)(idem_store *s, idem_db_conn *c,
	    idem_store_req *rq, idem_reserve_result *out);
	/*
	 * Opens a transaction on c for rq's key, which rq's owner holds by
	 * a reservation committed on its own before (reserve: protocol (a)
	 * of DESIGN.md 2.7, for a route that calls outside): once c's node
	 * has applied what the cluster committed (a causal read, so that a
	 * reservation made through another node is seen), reads the record
	 * without locking it and checks that rq's owner holds it.  The
	 * transaction then stays open for the handler; the answer is
	 * written with tx_record and committed with tx_end, as after
	 * tx_begin.  Returns IDEM_OK; else the transaction is rolled back:
	 * IDEM_ERR_NOT_FOUND (not held by rq's owner), IDEM_ERR_BUSY or
	 * IDEM_ERR_STORE.  NULL for a store without writers on several
	 * nodes (PostgreSQL): its routes that call outside reserve in the
	 * handler's transaction like the others.
	 */
	idem_err (*tx_adopt)(idem_store *s, idem_db_conn *c,
	    idem_store_req *rq);
	/*
	 * Writes the answer into rq's record inside c's open transaction.
	 * Returns IDEM_OK; IDEM_ERR_TOO_LARGE (nothing written, the
	 * transaction still open for a smaller answer); else the transaction
	 * is rolled back: IDEM_ERR_NOT_FOUND (rq's owner does not hold
	 * the key),
	 * IDEM_ERR_BUSY (a deadlock) or IDEM_ERR_STORE.
	 */
	idem_err (*tx_record)(idem_store *s, idem_db_conn *c,
	    idem_store_req *rq, const idem_stored_response *resp);
	/*
	 * Records p (borrowed) as the progress of rq's record inside c's open
	 * transaction: kept when the transaction commits (an answer, or an
	 * unknown outcome), gone with it otherwise.  p is checked as for
	 * checkpoint: the wrapper refuses a bad one with IDEM_ERR_INVALID or
	 * IDEM_ERR_TOO_LARGE (nothing written, still open).  Returns IDEM_OK,
	 * else as tx_record.
	 */
	idem_err (*tx_checkpoint)(idem_store *s, idem_db_conn *c,
	    idem_store_req *rq, const idem_progress *p);
	/* Marks rq's record of unknown outcome inside c's open transaction
	 * (the COMMIT that follows keeps it so).  Returns as tx_record. */
	idem_err (*tx_mark_unknown)(idem_store *s, idem_db_conn *c,
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
	idem_err (*tx_end)(idem_store *s, idem_db_conn *c,
	    idem_store_req *rq, int commit, int *unknown);
};

/* Faults a test can inject into tx_end (X-Idemfcgi-Fault, DESIGN.md 4): */
#define IDEM_TX_FAULT_DIE_IN_COMMIT      1u  /* send COMMIT, then SIGKILL */
#define IDEM_TX_FAULT_LOSE_BEFORE_COMMIT 2u  /* cut the connection first */
#define IDEM_TX_FAULT_LOSE_IN_COMMIT     4u  /* cut it after sending COMMIT */

/* Makes the next tx_end on c inject faults (IDEM_TX_FAULT_*; tests only,
 * through IDEMFCGI_TEST_FAULTS). */
void idem_store_tx_faults(idem_db_conn *c, unsigned faults);

/* Transactional routes: IDEM_ERR_INVALID from tx_begin for a store
 * without them. */
idem_err idem_store_tx_begin(idem_store *s, idem_db_conn *c,
    idem_store_req *rq, idem_reserve_result *out);
/* Whether s has tx_adopt: 1 or 0. */
int idem_store_has_tx_adopt(const idem_store *s);
idem_err idem_store_tx_adopt(idem_store *s, idem_db_conn *c,
    idem_store_req *rq);
idem_err idem_store_tx_record(idem_store *s, idem_db_conn *c,
    idem_store_req *rq, const idem_stored_response *resp);
idem_err idem_store_tx_end(idem_store *s, idem_db_conn *c,
    idem_store_req *rq, int commit, int *unknown);
idem_err idem_store_tx_checkpoint(idem_store *s, idem_db_conn *c,
    idem_store_req *rq, const idem_progress *p);
idem_err idem_store_tx_mark_unknown(idem_store *s, idem_db_conn *c,
    idem_store_req *rq);
#endif
