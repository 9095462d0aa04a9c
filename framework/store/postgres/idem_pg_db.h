/*
 * idem_pg_db.h - a pool of the PostgreSQL store's database as a data
 * source of the data API (idemfcgi_db.h, idem_store_tx.h): a plugin's
 * statements, written with '?' placeholders and numbered here ($1, $2,
 * ...), run by the statement helper; the store's statements of
 * transactional routes prepared beside them.
 */
#ifndef IDEM_PG_DB_H
#define IDEM_PG_DB_H

#include <stddef.h>

#include "idem_config.h"
#include "idem_pg.h"
#include "idem_store_tx.h"

/*
 * A data source of size connections to the database of the [postgres]
 * section pg (of the config file file; both borrowed for the call), whose
 * sessions start with options (copied, or NULL) and wait lock_ms for a
 * row lock (their lock_timeout, which each statement's answer is given on
 * top of the timeouts: a lock wait ends as contention, never as a lost
 * connection).  Each connection
 * prepares the nsql statements of sql (borrowed: static storage; '?'
 * placeholders, numbered here), then the nextra of extra (borrowed:
 * static storage; $n placeholders as written), which idem_pg_db_extra
 * numbers.  Returns IDEM_OK with *out (free with idem_db_free),
 * IDEM_ERR_INVALID (a statement with both '?' and $n placeholders,
 * logged), IDEM_ERR_CONFIG (password file, logged) or IDEM_ERR_NOMEM.
 */
idem_err idem_pg_db_new(const idem_config_postgres *pg, const char *file,
    const char *const *sql, size_t nsql, const char *const *extra,
    size_t nextra, unsigned size, const char *options, uint64_t lock_ms,
    idem_db **out);

/* The pool's statement index of extra statement i of db. */
size_t idem_pg_db_extra(const idem_db *db, size_t i);

/* The PostgreSQL connection a neutral one of a PostgreSQL data source
 * is. */
static inline idem_pg_conn *
idem_pg_of(idem_db_conn *c)
{
	return (idem_pg_conn *)c;
}

/* What a transaction on a connection is, for a COMMIT whose answer is
 * lost (idem_store_pg_tx.c): its id and its server, as its last write
 * returned them ("": not known). */
typedef struct idem_pg_txid {
	char xid[24];
	char server[64];
} idem_pg_txid;

/* The transaction of c (borrowed: c's, kept until c's pool is freed). */
idem_pg_txid *idem_pg_db_txid(idem_db_conn *c);

/* Drops what the statement helper holds of c's statements' rows (after
 * its transaction ended: nothing of it is to be fetched). */
void idem_pg_db_drop_rows(idem_db_conn *c);

/* Runs sql (borrowed; one statement, DDL say, as written) on a
 * connection of its own to the database of the [postgres] section pg
 * (of the config file file), holding a session lock that every
 * instance's takes for it: PostgreSQL's CREATE ... IF NOT EXISTS run by
 * two sessions at once may fail.  Returns IDEM_OK, IDEM_ERR_STORE (the
 * statement or the connection failed: logged), IDEM_ERR_CONFIG or
 * IDEM_ERR_NOMEM. */
idem_err idem_pg_db_exec(const idem_config_postgres *pg, const char *file,
    const char *sql);

/*
 * Numbers the '?' placeholders of sql ($1, $2, ...), passing over string
 * literals ('...', E'...'), quoted names ("..."), dollar quotes ($tag$
 * ... $tag$) and comments.  *out gets the new text (caller frees), *n
 * its parameters (a statement without '?' keeps its own $n, the highest
 * counted).  Returns IDEM_OK, IDEM_ERR_INVALID (both kinds of
 * placeholders) or IDEM_ERR_NOMEM.
 */
idem_err idem_pg_number_params(const char *sql, char **out, int *n);

#endif
