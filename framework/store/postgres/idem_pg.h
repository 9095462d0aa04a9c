/*
 * idem_pg.h - a small pool of PostgreSQL connections (libpq), each with
 * the pool's statements prepared, for the PostgreSQL store.
 *
 * A thread takes a connection for one operation and gives it back.  Every
 * call on a connection is non-blocking libpq waited on with poll(2), so a
 * server that hangs (SIGSTOPped, cut off) costs a caller at most the
 * [postgres] connect, write and read timeouts, never a hung worker;
 * libpq's own blocking calls would wait for ever.  A connection that
 * timed out or failed with a connection error is closed when given back
 * and opened again by its next taker, so a database that went away and
 * came back is used again without a restart.
 *
 * The host list is tried in order from the host the latest connection
 * opened on, each host with target_session_attrs=read-write: a standby
 * is passed over, and once it is promoted it is the one found.
 */
#ifndef IDEM_PG_H
#define IDEM_PG_H

#include <stddef.h>
#include <stdint.h>

#include <libpq-fe.h>

#include "idemfcgi.h"
#include "idem_config.h"
#include "idem_store_tx.h"

/* The most parameters a statement binds. */
#define IDEM_PG_PARAMS_MAX 12

typedef struct idem_pg_pool idem_pg_pool;

typedef struct idem_pg_conn {
	idem_db_conn db;         /* what the store-neutral layers see when
	                          * the pool is a data source (idem_pg_db.c,
	                          * idem_store_tx.h): first */
	PGconn *pg;              /* NULL until connected */
	int broken;              /* close when given back */
	int timed_out;           /* its latest statement waited for the
	                          * server all it may (then broken too) */
	char state[6];           /* the SQLSTATE of its latest failure; "":
	                          * none, or a lost connection */
	char error[256];         /* the message of its latest failure */
	idem_pg_pool *pool;      /* borrowed: the pool it belongs to */
} idem_pg_conn;

/* A statement's parameters: strings as text, bytes as binary, integers
 * as their decimal text; all borrowed until the statement has run but
 * the integers, which are copied. */
typedef struct idem_pg_params {
	int n;
	const char *values[IDEM_PG_PARAMS_MAX];
	int lengths[IDEM_PG_PARAMS_MAX];
	int formats[IDEM_PG_PARAMS_MAX];
	char nums[IDEM_PG_PARAMS_MAX][24];
} idem_pg_params;

/* Empties p for a new statement. */
void idem_pg_p_init(idem_pg_params *p);
/* len bytes of data, a bytea (binary). */
void idem_pg_p_bytes(idem_pg_params *p, const void *data, size_t len);
/* A NUL-terminated string; NULL binds SQL NULL. */
void idem_pg_p_text(idem_pg_params *p, const char *s);
/* An integer, as its decimal text (copied into p). */
void idem_pg_p_ll(idem_pg_params *p, long long v);
/* SQL NULL. */
void idem_pg_p_null(idem_pg_params *p);

/*
 * A pool of size connections to the database of the [postgres] section
 * pg (of the config file file, named in messages; both borrowed for the
 * call); each prepares the nsql statements of sql (borrowed: static
 * storage; $1 placeholders) when it connects, and starts its session
 * with the settings of options (copied; libpq's "options": "-c
 * name=value ...", or NULL).  The password comes from password-file,
 * else the environment variable IDEMFCGI_POSTGRES_PASSWORD, else libpq's
 * own (~/.pgpass); it is never logged.  Connects nothing yet.  Returns
 * IDEM_OK with *out (free with idem_pg_pool_free), IDEM_ERR_CONFIG after
 * logging (an unreadable password file) or IDEM_ERR_NOMEM.
 */
idem_err idem_pg_pool_new(const idem_config_postgres *pg, const char *file,
    const char *const *sql, size_t nsql, unsigned size, const char *options,
    idem_pg_pool **out);
/* Closes every connection of p and frees it; NULL is fine. */
void idem_pg_pool_free(idem_pg_pool *p);
/* Makes p log no connection or statement error: for a probe that tries
 * the database until it answers, once the first failure was said. */
void idem_pg_pool_quiet(idem_pg_pool *p);

/*
 * Takes a connected connection of p, waiting for a free one up to the
 * connect plus read timeout, and opening it when it is not.  Returns it
 * (give it back with idem_pg_put), or NULL when the database cannot be
 * reached within the timeouts (logged, rate-limited).
 */
idem_pg_conn *idem_pg_get(idem_pg_pool *p);
/* Gives c back to p (NULL is ignored); a broken one is closed. */
void idem_pg_put(idem_pg_pool *p, idem_pg_conn *c);
/* Opens every free connection of p that is not open yet, one after the
 * other, so that a request never waits for a connection's handshake
 * (SCRAM's key derivation costs milliseconds); one that fails stays
 * closed, to be opened by its first taker.  Returns how many are open. */
unsigned idem_pg_pool_warm(idem_pg_pool *p);

/*
 * Runs statement i of c's pool with p's parameters, its rows in binary,
 * waiting for the server up to the write and read timeouts plus
 * extra_ms (the time a statement may wait for a row lock).  On IDEM_OK
 * *res holds the result (caller PQclears).  A failure is IDEM_ERR_BUSY
 * (contention: a serialization failure or deadlock, whose transaction the
 * server rolled back, or a lock wait), IDEM_ERR_EXISTS (a unique
 * violation), IDEM_ERR_TOO_LARGE (a value that can never succeed) or
 * IDEM_ERR_STORE (anything else; c is marked broken when its connection
 * is lost or timed out); sqlstate (6 bytes, or NULL) gets the server's
 * SQLSTATE, "" when there is none (a lost connection).  Nothing is
 * logged: idem_pg_log_error does.
 */
idem_err idem_pg_exec(idem_pg_conn *c, size_t i, const idem_pg_params *p,
    uint64_t extra_ms, PGresult **res, char *sqlstate);

/*
 * idem_pg_exec with the parameters as libpq takes them (n values, their
 * lengths and formats: borrowed for the call) and the rows in text
 * (binary 0) or binary (1): for the data API, whose statements take any
 * number of parameters and whose columns are read whatever their type.
 */
idem_err idem_pg_exec_params(idem_pg_conn *c, size_t i, int n,
    const char *const *values, const int *lengths, const int *formats,
    int binary, uint64_t extra_ms, PGresult **res, char *sqlstate);

/* Sends statement i of c's pool with p's parameters and returns at once,
 * without waiting for its answer (tests: a COMMIT that reaches the
 * server while its connection is cut, or its process killed).  Returns
 * IDEM_OK or IDEM_ERR_STORE (c broken). */
idem_err idem_pg_send(idem_pg_conn *c, size_t i, const idem_pg_params *p);

/* Cuts c's socket (the server sees the connection end, and rolls back
 * what it has not committed) and marks c broken. */
void idem_pg_cut(idem_pg_conn *c);

/* Closes c and opens it again, on the first host of the list that takes
 * it: for a connection found lost before its first statement.  Returns 0,
 * or -1 (logged, c left unconnected). */
int idem_pg_reopen(idem_pg_conn *c);

/* The position of c in its pool, from 0 to the pool's size - 1: where a
 * user of the pool keeps what it holds for each connection. */
unsigned idem_pg_conn_index(const idem_pg_conn *c);

/* The pool's size (its connections). */
unsigned idem_pg_pool_size(const idem_pg_pool *p);

/* What a failure of SQLSTATE state means, as idem_pg_exec returns it. */
idem_err idem_pg_error_code(const char *state);

/* Logs the latest error of c (with what, the statement's index or name),
 * rate-limited per pool. */
void idem_pg_log_error(idem_pg_conn *c, const char *what);

/* The SQLSTATE of the latest failure of p's statements, prepares or
 * connections ("" when none, or the connection failed without one). */
void idem_pg_pool_last_state(idem_pg_pool *p, char state[6]);
/* Whether a server ever accepted a connection of p (its statements
 * prepared or not): a failure since is not the database being away. */
int idem_pg_pool_opened(idem_pg_pool *p);

/* Integer column col of row r of a binary result (int2, int4, int8 or
 * bool); 0 when NULL. */
long long idem_pg_ll(const PGresult *r, int row, int col);

#endif
