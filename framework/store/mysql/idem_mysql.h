/*
 * idem_mysql.h - a small pool of MySQL/MariaDB connections, each with its
 * prepared statements, for the MySQL store (and plugins that keep data in
 * the same database).
 *
 * A thread takes a connection for one operation and gives it back.  A
 * connection that failed with a connection error is closed when given back
 * and reopened by the next taker, so a database that went away and came
 * back is used again without a restart.  Connect, read and write timeouts
 * come from [mysql]: a hung database costs a request at most those, never
 * a hung worker.
 */
#ifndef IDEM_MYSQL_H
#define IDEM_MYSQL_H

#include <mysql.h>

#include "idemfcgi.h"
#include "idemfcgi_mysql.h"
#include "idem_config.h"
#include "idem_store_tx.h"

/* Most extra statements a pool takes (idem_mysql_pool_extra). */
#define IDEM_MYSQL_EXTRA_MAX 16
/* Slots of statements a connection prepares when first asked
 * (idem_mysql_lazy_stmt). */
#define IDEM_MYSQL_LAZY_MAX 192

struct idem_mysql_conn {
	idem_db_conn db;         /* what the store-neutral layers see
	                          * (idem_store_tx.h): first */
	MYSQL *m;                /* NULL until connected */
	MYSQL_STMT **stmts;      /* prepared, in the order given to the pool */
	MYSQL_STMT **extra;      /* the pool's extra statements, after them */
	MYSQL_STMT *lazy[IDEM_MYSQL_LAZY_MAX]; /* idem_mysql_lazy_stmt's */
	int broken;              /* close when given back */
	int tx_mode;             /* autocommit is off (idem_mysql_tx_mode) */
	int rolled_back;         /* a statement met a deadlock (1213): the
	                          * server rolled the transaction back */
	int end;                 /* the host it is open on: an index into
	                          * the pool's failover list */
	uint64_t opened_ms;      /* when it was opened (idem_now_ms) */
	struct idem_mysql_pool *pool;  /* borrowed: the pool it belongs to */
	unsigned read_timeout;   /* s: the read timeout set on m now (see
	                          * idem_mysql_expect_lock_wait) */
	int snapshot_off;        /* 1: its session has innodb_snapshot_
	                          * isolation OFF (idem_mysql_snapshot_off),
	                          * restored when it goes back to its pool;
	                          * -1: the server has no such variable */
	char node[64];           /* which server m is open on: a Galera
	                          * node's wsrep_gcomm_uuid, else the server's
	                          * "hostname:port/server_id" */
};

/* The MySQL connection a neutral one is (c of a MySQL data source), and
 * back. */
static inline idem_mysql_conn *
idem_mysql_of(idem_db_conn *c)
{
	return (idem_mysql_conn *)c;
}

/* The neutral data source a pool is (idem_store_tx.h: what a
 * transactional route takes its connections from). */
idem_db *idem_mysql_pool_source(idem_mysql_pool *p);

/*
 * A pool of size connections to the database of the [mysql] section my
 * (of the config file file, named in messages; both borrowed for the
 * call); each prepares the nsql statements of sql (borrowed: static
 * storage).
 * idem_mysql_pool_extra adds more, which connections reach as c->extra.
 * The password comes from password-file, else the environment variable
 * IDEMFCGI_MYSQL_PASSWORD; it is never logged.  Connects nothing yet.
 * Returns IDEM_OK with *out (free with idem_mysql_pool_free) or
 * IDEM_ERR_CONFIG after logging (an unreadable password file).
 */
idem_err idem_mysql_pool_new(const idem_config_mysql *my, const char *file,
    const char *const *sql, size_t nsql, unsigned size,
    idem_mysql_pool **out);

void idem_mysql_pool_free(idem_mysql_pool *p);

/* Makes p log no connection or statement error: for a probe that tries
 * the database until it answers, once the first failure was said. */
void idem_mysql_pool_quiet(idem_mysql_pool *p);

/*
 * Makes every connection of p also prepare the nextra statements of extra
 * (copied), reached as c->extra[i]: the MySQL store's statements of a
 * transactional route, on the pool of the plugin whose handler shares the
 * transaction.  Before the first idem_mysql_get.  Returns IDEM_OK or
 * IDEM_ERR_NOMEM.
 */
idem_err idem_mysql_pool_extra(idem_mysql_pool *p, const char *const *extra,
    size_t nextra);

/* idem_mysql_get, idem_mysql_put, idem_mysql_stmt and idem_mysql_check
 * are in idemfcgi_mysql.h: plugins use them too.  idem_mysql_get waits for a
 * free connection up to the connect plus read timeout and logs failures at
 * most once every few seconds. */

/*
 * What a failed statement's error (a mysql_errno) means, for the store and
 * the statement helper alike: IDEM_ERR_BUSY for contention (a deadlock,
 * 1213, or a lock wait, 1205: others work on the same rows); IDEM_ERR_TOO_LARGE
 * for values that can never succeed (too long for a column, a packet over
 * max_allowed_packet, out of range, truncated); IDEM_ERR_EXISTS for a
 * duplicate key (1062); IDEM_ERR_STORE for anything else; IDEM_OK for 0.
 */
idem_err idem_mysql_error_code(unsigned err);

/* idem_mysql_run, _fetch and _one (idemfcgi_mysql.h) with their variable
 * arguments in *ap: the statement helper of the neutral data API. */
idem_err idem_mysql_vrun(idem_mysql_conn *c, size_t i, const char *in,
    va_list *ap);
idem_err idem_mysql_vfetch(idem_mysql_conn *c, size_t i, const char *out,
    va_list *ap);
idem_err idem_mysql_vone(idem_mysql_conn *c, size_t i, const char *in,
    const char *out, va_list *ap);

/* Runs one plain statement on a connection of p.  IDEM_OK or
 * IDEM_ERR_STORE (logged). */
idem_err idem_mysql_exec(idem_mysql_pool *p, const char *sql);

/* The server's max_allowed_packet as the latest connection read it (each
 * connection reads it when it connects); 0 before the first. */
uint64_t idem_mysql_max_packet(idem_mysql_pool *p);

/* Logs a statement error (with the statement's index), rate-limited. */
/* The error number of the latest statement, prepare or connection of p
 * that failed (a mysql_errno), 0 when none has. */
unsigned idem_mysql_pool_last_errno(idem_mysql_pool *p);

void idem_mysql_log_error(idem_mysql_pool *p, const char *what,
    MYSQL_STMT *st);

/* Runs sql (copied; a SET of session variables) on each connection of p
 * when it connects.  Before the first idem_mysql_get.  IDEM_OK or
 * IDEM_ERR_NOMEM. */
idem_err idem_mysql_pool_init(idem_mysql_pool *p, const char *sql);

/*
 * Takes a connection like idem_mysql_get, but leaves it in the mode its
 * last user left it: for the framework's transactional path, which puts
 * it in tx mode anyway.
 */
idem_mysql_conn *idem_mysql_take(idem_mysql_pool *p);

/*
 * Puts c in tx mode: autocommit off, so every statement belongs to a
 * transaction that only COMMIT or ROLLBACK ends, and a transaction the
 * server rolls back (a deadlock) is followed by a new one, never by
 * statements that commit on their own.  A round trip the first time
 * only; idem_mysql_get turns autocommit back on for plain use.  Returns
 * 0, or -1 (c marked broken when the connection is lost).
 */
int idem_mysql_tx_mode(idem_mysql_conn *c);

/*
 * Statement slot (below IDEM_MYSQL_LAZY_MAX) of c, prepared from sql
 * (borrowed; the same text for a slot every time) the first time it is
 * asked for on this connection and closed with it: for statements a pool
 * needs in many shapes and uses few of (the store's batches, one per
 * number of rows).  Returns it, or NULL after logging the prepare's error
 * (c marked broken when that lost the connection).
 */
MYSQL_STMT *idem_mysql_lazy_stmt(idem_mysql_conn *c, size_t slot,
    const char *sql);

/* Closes c and connects it again (statements prepared, autocommit on).
 * Returns 0, or -1 (logged, c left unconnected). */
int idem_mysql_reconnect(idem_mysql_conn *c);

/* Closes c and connects it again to the server it was open on (its host
 * of the list, and the same server there: c->node), and to no other: for a read that must see what c's own transaction did.  Returns
 * 0, or -1 (logged, c left unconnected). */
int idem_mysql_reopen_same(idem_mysql_conn *c);

/* Turns innodb_snapshot_isolation OFF for c's session (MariaDB 11.6 and
 * later default to ON) until c goes back to its pool: a transaction
 * whose own record is renewed and checkpointed meanwhile by other
 * sessions then writes it as InnoDB's REPEATABLE READ always did,
 * instead of being refused (1020) for a row changed since its snapshot.
 * A server without the variable is left as it is.  Returns 0, or -1
 * (a server error: c is marked broken when it is a lost connection). */
int idem_mysql_snapshot_off(idem_mysql_conn *c);

/* Whether c is inside a transaction with autocommit off (the server's own
 * flags, no round trip): after a transactional handler, whether it left
 * its transaction open as it must.  A connection found with autocommit
 * back on leaves tx mode, so the next transaction sets it off again. */
int idem_mysql_tx_intact(idem_mysql_conn *c);

/* Whether the server rolled c's transaction back under its user: a
 * statement met a deadlock (1213; on Galera, also another node's commit
 * that won), as idem_mysql_check was told or the connection's last error
 * says.  Clears what it read, for the next transaction. */
int idem_mysql_tx_lost(idem_mysql_conn *c);

/*
 * The time a statement that may wait wait_ms for a row lock gets on top
 * of that wait for its answer to arrive: 2 s and a quarter of the wait.
 */
uint64_t idem_mysql_lock_margin_ms(uint64_t wait_ms);

/*
 * Gives the next statements on c time to wait wait_ms for a row lock: the
 * connection's read timeout becomes at least wait_ms plus
 * idem_mysql_lock_margin_ms(wait_ms), so the server's own lock wait
 * timeout (1205: contention) always comes before the client gives up on
 * the connection (2013: an outage).  0 goes back to [mysql]
 * read-timeout.  No round trip; a system call only when the timeout
 * changes.  Returns 0, or -1 when c is not connected.
 */
int idem_mysql_expect_lock_wait(idem_mysql_conn *c, uint64_t wait_ms);

/* Logs a connection's last error, rate-limited like the above. */
void idem_mysql_log_conn_error(idem_mysql_pool *p, const char *what,
    MYSQL *m);

#endif
