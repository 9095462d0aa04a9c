/*
 * idemfcgi_mysql.h - the raw MySQL part of the idemfcgi API, for plugins
 * that want MySQL's own statement handles (MYSQL_STMT) on the database of
 * [mysql]: a pool of connections with prepared statements, DDL in the
 * deploy hook, and the connection of a transactional route (DESIGN.md
 * 2.7).  A plugin that needs no more than prepared statements and their
 * rows uses idemfcgi_db.h instead, which works on any store with a
 * database; idem_route_add_tx is declared there.
 *
 * Include it after (or instead of) idemfcgi.h; it includes <mysql.h>, so
 * build with the MySQL client's flags (pkg-config idemfcgi-mysql).
 * Ownership follows idemfcgi.h: "borrowed" pointers belong to the
 * framework.
 */
#ifndef IDEMFCGI_MYSQL_H
#define IDEMFCGI_MYSQL_H

#include <mysql.h>

#include "idemfcgi.h"
#include "idemfcgi_db.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A pool of connections, owned by the server. */
typedef struct idem_mysql_pool idem_mysql_pool;
/* One connection of a pool, with its prepared statements. */
typedef struct idem_mysql_conn idem_mysql_conn;

/* Whether idempotency records live in MySQL (enabled, store = mysql):
 * idem_app_db_dialect(app) == IDEM_DB_MYSQL. */
IDEM_API int idem_app_uses_mysql(const idem_app *app);

/*
 * Runs one statement (DDL such as CREATE TABLE IF NOT EXISTS) on the
 * [mysql] database, on a connection of its own; for a plugin's deploy
 * hook (refused in the configuration check, where nothing may change).
 * sql is borrowed for the call.  Returns IDEM_OK; IDEM_ERR_STORE (the
 * statement or the connection failed), IDEM_ERR_INVALID (called in the
 * check), IDEM_ERR_CONFIG (an unreadable password file) or IDEM_ERR_NOMEM;
 * each logged.
 */
IDEM_API IDEM_WUR idem_err
idem_app_mysql_exec(idem_app *app, const char *sql);

/*
 * Makes the plugin's pool: [mysql] pool-size connections, each preparing
 * the nsql statements of sql (borrowed: static storage) when it connects
 * (at its first use; a statement that does not prepare keeps the
 * connection from opening: idem_mysql_get returns NULL, logged).  The
 * server owns the pool and frees it after the plugin's teardown; one pool
 * per plugin (this or idem_app_db), made in setup.  Returns the pool, or
 * NULL (logged).
 */
IDEM_API idem_mysql_pool *
idem_app_mysql_pool(idem_app *app, const char *const *sql, size_t nsql);

/*
 * On a transactional route, the connection inside the request's open
 * transaction: run the handler's statements on it (idem_mysql_stmt).  The
 * handler never commits or rolls back, nor runs statements that do so
 * implicitly (DDL, LOCK TABLES, START TRANSACTION).  Borrowed until the
 * handler returns; NULL on other routes.
 */
IDEM_API idem_mysql_conn *idem_request_tx(const idem_request *req);

/*
 * Takes a connected connection of p, autocommit on, waiting for a free one
 * up to the connect plus read timeout.  Returns it (give it back with
 * idem_mysql_put), or NULL when the database cannot be reached within the
 * timeouts (logged, rate-limited): answer 503.
 */
IDEM_API idem_mysql_conn *idem_mysql_get(idem_mysql_pool *p);

/* Gives c (taken from idem_mysql_get) back to p; closes it when
 * idem_mysql_check saw it was lost, or to fail back to the head of the
 * [mysql] host list (at most one connection of p per failback period),
 * so the next taker reconnects.  Nothing may be left open on c. */
IDEM_API void idem_mysql_put(idem_mysql_pool *p, idem_mysql_conn *c);

/* Statement i of c (in the order given to idem_app_mysql_pool), prepared;
 * borrowed until idem_mysql_put (on a transactional route, until the
 * handler returns).  NULL when i is out of range. */
IDEM_API MYSQL_STMT *idem_mysql_stmt(idem_mysql_conn *c, size_t i);

/* After a failed call on c, with its mysql_stmt_errno: marks c lost if
 * the error means the connection is gone, so it is reopened; on a
 * transactional route a deadlock (1213) tells the framework the server
 * rolled the transaction back, so the request reserves again. */
IDEM_API void idem_mysql_check(idem_mysql_conn *c, unsigned err);

/*
 * The statement helper: statement i of c (idem_mysql_stmt) run with its
 * parameters bound by a format string, its rows fetched into C variables
 * by another.  A failure has been told to c (as idem_mysql_check does)
 * and is returned as
 *   IDEM_ERR_BUSY       contention: a deadlock (1213; on a transactional
 *                       route the server rolled the transaction back,
 *                       and the framework reserves again) or a lock wait
 *                       (1205); answer 503, nothing was changed;
 *   IDEM_ERR_EXISTS     a duplicate key (1062);
 *   IDEM_ERR_TOO_LARGE  a value that can never succeed (too long for its
 *                       column, out of range, over max_allowed_packet),
 *                       or, fetching, a column too long for its buffer;
 *   IDEM_ERR_INVALID    a format that does not fit the statement (an
 *                       unknown conversion, not as many as its
 *                       placeholders or columns, a NULL variable), no
 *                       such statement, or a NULL column fetched without
 *                       "?"; logged: a bug of the plugin;
 *   IDEM_ERR_STORE      anything else (logged, rate-limited).
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
 *                               frees; NULL after a failure); len may be
 *                               NULL
 *   b   void *buf, size_t size, size_t *len   bytes, at most size
 *
 *     if ((err = idem_mysql_one(c, Q_BALANCE, "s", "i", id, &balance))
 *         == IDEM_ERR_NOT_FOUND) ...
 */

/*
 * Runs statement i of c with the parameters of in (the arguments after
 * in).  Rows it returns are read into the client at once (other
 * statements may run on c meanwhile): fetch them with idem_mysql_fetch
 * until IDEM_ERR_NOT_FOUND, or the next run of the statement drops them.
 * Returns IDEM_OK or an error above.
 */
IDEM_API IDEM_WUR idem_err
idem_mysql_run(idem_mysql_conn *c, size_t i, const char *in, ...);

/*
 * Fetches the next row of statement i of c (after idem_mysql_run) into
 * the variables of out.  Returns IDEM_OK; IDEM_ERR_NOT_FOUND when there
 * is no more row; or an error above, after which the rest of the rows
 * is dropped.
 */
IDEM_API IDEM_WUR idem_err
idem_mysql_fetch(idem_mysql_conn *c, size_t i, const char *out, ...);

/*
 * Runs statement i of c with the parameters of in and fetches its first
 * row into the variables of out (the arguments: in's, then out's); any
 * further rows are dropped.  Returns IDEM_OK; IDEM_ERR_NOT_FOUND when it
 * returned no row; or an error above.
 */
IDEM_API IDEM_WUR idem_err
idem_mysql_one(idem_mysql_conn *c, size_t i, const char *in,
    const char *out, ...);

/* The rows the latest run of statement i of c changed (for a SELECT: the
 * rows it returned); 0 when there is no such statement. */
IDEM_API unsigned long long idem_mysql_affected(idem_mysql_conn *c, size_t i);

/* The AUTO_INCREMENT value (or LAST_INSERT_ID(expr)) of the latest run
 * of statement i of c; 0 when none. */
IDEM_API unsigned long long idem_mysql_insert_id(idem_mysql_conn *c,
    size_t i);

#ifdef __cplusplus
}
#endif
#endif /* IDEMFCGI_MYSQL_H */
