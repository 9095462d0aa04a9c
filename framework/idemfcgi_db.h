/*
 * idemfcgi_db.h - the store-neutral data API, for plugins that keep their
 * own data in the database of the idempotency store (whichever it is:
 * MySQL today): a pool of connections with prepared statements, a
 * format-string helper that runs them and fetches their rows, DDL in the
 * deploy hook, transactional routes whose handler's writes commit with
 * the answer (DESIGN.md 2.7), and the store's dialect for the statements
 * whose text must differ from one database to another.
 *
 * Statements are written with '?' placeholders, one per parameter, as
 * MySQL's prepared statements take them; a store whose database numbers
 * them ($1, $2, ...) translates them.  Nothing here needs a database
 * client's headers: a plugin that wants MySQL's own statement handles
 * includes idemfcgi_mysql.h as well.
 *
 * Ownership follows idemfcgi.h: "borrowed" pointers belong to the
 * framework.  libidemfcgi exports every function declared here (IDEM_API).
 */
#ifndef IDEMFCGI_DB_H
#define IDEMFCGI_DB_H

#include "idemfcgi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A pool of connections to the store's database, owned by the server. */
typedef struct idem_db idem_db;
/* One connection of a pool, with its prepared statements. */
typedef struct idem_db_conn idem_db_conn;

/* The database the idempotency records live in, which is where a
 * plugin's data can live too. */
typedef enum idem_db_dialect {
	IDEM_DB_NONE = 0,   /* none: the memory store, or idempotency off */
	IDEM_DB_MYSQL,      /* MySQL or MariaDB ([idempotency] store = mysql) */
	IDEM_DB_POSTGRES    /* PostgreSQL ([idempotency] store = postgres) */
} idem_db_dialect;

/* The dialect of the store's database, IDEM_DB_NONE when there is none:
 * a plugin then keeps its data elsewhere (in memory, say). */
IDEM_API idem_db_dialect idem_app_db_dialect(const idem_app *app);

/*
 * Runs one statement (DDL such as CREATE TABLE IF NOT EXISTS) on the
 * store's database, on a connection of its own; for a plugin's deploy
 * hook (refused in the configuration check, where nothing may change).
 * sql is borrowed for the call.  Returns IDEM_OK; IDEM_ERR_STORE (the
 * statement or the connection failed); IDEM_ERR_INVALID (called in the
 * check, or a store without a database); IDEM_ERR_CONFIG (an unreadable
 * password file) or IDEM_ERR_NOMEM; each logged.
 */
IDEM_API IDEM_WUR idem_err
idem_app_db_exec(idem_app *app, const char *sql);

/*
 * Makes the plugin's pool of the store's database: its pool-size
 * connections, each preparing the nsql statements of sql (borrowed:
 * static storage; '?' placeholders) when it connects (in the workers,
 * at their first use: after deploy made the tables).  A statement that
 * does not prepare keeps the connection from opening: idem_db_get
 * returns NULL, and the statement's index and the server's error are
 * logged.  The server owns
 * the pool and frees it after the plugin's teardown; one pool per plugin,
 * made in setup.  Returns the pool, or NULL (logged): a store without a
 * database (IDEM_DB_NONE), a call outside setup, a second pool.
 */
IDEM_API idem_db *
idem_app_db(idem_app *app, const char *const *sql, size_t nsql);

/*
 * Registers a transactional route (DESIGN.md 2.7): like idem_route_add,
 * but its handler runs inside a database transaction on a connection of
 * the plugin's pool (made first with idem_app_db, or idem_app_mysql_pool),
 * which idem_request_db hands it.  The record of the request's key is
 * reserved and written in the same transaction, which the framework
 * commits when the answer is stored (a status in commit-statuses) and
 * rolls back otherwise (a handler error, 5xx, 429, ...): the handler's
 * writes and its answer are committed together, exactly once, or not at
 * all.  Returns IDEM_OK; IDEM_ERR_CONFIG (logged with the route) without
 * idempotency, a store that has transactional routes, or a pool; else as
 * idem_route_add.
 */
IDEM_API IDEM_WUR idem_err
idem_route_add_tx(idem_app *app, const char *method, const char *tmpl,
    idem_policy policy, idem_handler_fn handler, void *data);

/*
 * On a transactional route, the connection inside the request's open
 * transaction: run the handler's statements on it.  The handler never
 * commits or rolls back, nor runs statements that do so implicitly (DDL,
 * LOCK TABLES, START TRANSACTION).  On PostgreSQL a statement that fails
 * aborts the whole transaction (MySQL undoes the statement alone): its
 * answer then cannot be stored, and the request answers 503
 * TRANSACTION_ROLLED_BACK; write expected outcomes so that they are no
 * error (ON CONFLICT, a WHERE that matches nothing).  Borrowed until the
 * handler returns; NULL on other routes.
 */
IDEM_API idem_db_conn *idem_request_db(const idem_request *req);

/*
 * Takes a connected connection of db, autocommit on, waiting for a free
 * one up to the store's connect plus read timeout.  Returns it (give it
 * back with idem_db_put), or NULL when the database cannot be reached
 * within the timeouts (logged, rate-limited): answer 503.
 */
IDEM_API idem_db_conn *idem_db_get(idem_db *db);

/* Gives c (from idem_db_get; NULL is ignored) back to db: a connection a
 * statement found lost is closed, and the next taker opens a new one.
 * Nothing may be left open on c. */
IDEM_API void idem_db_put(idem_db *db, idem_db_conn *c);

/*
 * The statement helper: statement i of c's pool run with its parameters
 * bound by a format string, its rows fetched into C variables by
 * another.  A failure is returned as
 *   IDEM_ERR_BUSY       contention, the statement changed nothing:
 *                       a deadlock or a serialization failure (the
 *                       server rolled the whole transaction back; on a
 *                       transactional route the framework reserves the
 *                       key again), or a lock wait that timed out (on
 *                       MySQL only the statement failed; on PostgreSQL
 *                       the transaction is aborted, as after a
 *                       deadlock); answer 503, and a transactional
 *                       route's transaction is rolled back;
 *   IDEM_ERR_EXISTS     a unique violation (a duplicate key);
 *   IDEM_ERR_TOO_LARGE  a value that can never succeed (too long for its
 *                       column, out of range, over the server's packet
 *                       limit), or, fetching, a column too long for its
 *                       buffer;
 *   IDEM_ERR_INVALID    a format that does not fit the statement (an
 *                       unknown conversion, not as many as its
 *                       placeholders or columns, a NULL variable), no
 *                       such statement, or a NULL column fetched without
 *                       "?"; logged: a bug of the plugin;
 *   IDEM_ERR_STORE      anything else, a lost connection among them
 *                       (logged, rate-limited; c is reopened when put
 *                       back).
 * The format and string arguments are borrowed for the call.
 *
 * Parameters (in), one character each, with its arguments:
 *   s   const char *            a string (NULL: SQL NULL)
 *   b   const void *, size_t    bytes and their count (NULL: SQL NULL)
 *   i   long long               a signed integer
 *   u   unsigned long long      an unsigned integer
 *   n   (none)                  SQL NULL
 *
 * Columns (out), one character each, after an optional "?" that takes an
 * int * first, set to whether the column is NULL (its variables are then
 * 0 or ""); without "?" a NULL column is IDEM_ERR_INVALID:
 *   i   long long *
 *   u   unsigned long long *
 *   s   char *buf, size_t size  NUL-terminated; a value of size bytes or
 *                               more is IDEM_ERR_TOO_LARGE, never cut
 *   S   char **out, size_t *len a new NUL-terminated buffer (caller
 *                               frees; NULL after any failure, or no
 *                               row); len may be NULL
 *   b   void *buf, size_t size, size_t *len   bytes, at most size
 *
 *     if ((err = idem_db_one(c, Q_BALANCE, "s", "i", id, &balance))
 *         == IDEM_ERR_NOT_FOUND) ...
 */

/*
 * Runs statement i on c with the parameters of in (the arguments after
 * in).  Rows it returns are read into the client at once (other
 * statements may run on c meanwhile): fetch them with idem_db_fetch
 * until IDEM_ERR_NOT_FOUND, or the next run of the statement drops them.
 * Returns IDEM_OK or an error above.
 */
IDEM_API IDEM_WUR idem_err
idem_db_run(idem_db_conn *c, size_t i, const char *in, ...);

/*
 * Fetches the next row of statement i on c (after idem_db_run) into the
 * variables of out.  Returns IDEM_OK; IDEM_ERR_NOT_FOUND when there is no
 * more row; or an error above, after which the rest of the rows is
 * dropped.
 */
IDEM_API IDEM_WUR idem_err
idem_db_fetch(idem_db_conn *c, size_t i, const char *out, ...);

/*
 * Runs statement i on c with the parameters of in and fetches its first
 * row into the variables of out (the arguments: in's, then out's); any
 * further rows are dropped.  Returns IDEM_OK; IDEM_ERR_NOT_FOUND when it
 * returned no row; or an error above.
 */
IDEM_API IDEM_WUR idem_err
idem_db_one(idem_db_conn *c, size_t i, const char *in, const char *out,
    ...);

/* The rows the latest run of statement i on c changed (for a SELECT: the
 * rows it returned); 0 when there is no such statement. */
IDEM_API unsigned long long idem_db_affected(idem_db_conn *c, size_t i);

/* MySQL's AUTO_INCREMENT value (or LAST_INSERT_ID(expr)) of the latest
 * run of statement i on c; 0 when none, and on a database without it
 * (PostgreSQL: a statement's RETURNING clause gives it as a row). */
IDEM_API unsigned long long idem_db_insert_id(idem_db_conn *c, size_t i);

#ifdef __cplusplus
}
#endif
#endif /* IDEMFCGI_DB_H */
