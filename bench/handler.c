/*
 * handler.c - the handler every benchmark configuration serves.
 *
 *   POST /bench/{x}        201 with a small JSON body, no other side
 *                          effect.  The same handler runs bare
 *                          (idempotency disabled) and under each store.
 *
 * With a store with a database (MySQL, PostgreSQL: the statement in its
 * dialect), two more routes whose side effect is one small write (+1 on
 * this worker thread's row of bench_writes), so first executions cost
 * the database what a real mutation does:
 *
 *   POST /bench-write/{x}  the write as one autocommit statement on a
 *                          connection of the plugin's pool, under the
 *                          two-phase path (reserve; write; commit the
 *                          record: three durable commits per first
 *                          execution)
 *   POST /bench-tx/{x}     a transactional route (idem_route_add_tx): the
 *                          write runs in the request's transaction,
 *                          between the reservation and the record of the
 *                          answer (one durable commit)
 *
 * and on PostgreSQL the bare transaction, for comparison:
 *
 *   POST /bench-txbare/{x} no key, no record (policy off): BEGIN, the
 *                          write, COMMIT on a connection of the plugin's
 *                          pool; what a transactional route costs
 *                          without its key
 *
 * All answer 201 like /bench/{x}.  Each worker thread writes its own row,
 * so no two requests wait on one row lock: what is measured is the
 * protocol, not contention on a hot row.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "idemfcgi_db.h"

enum { Q_WRITE, Q_BEGIN, Q_COMMIT, NQ };

/* By dialect; BEGIN and COMMIT for the bare transaction (PostgreSQL). */
static const char *const queries[][NQ] = {
	[IDEM_DB_MYSQL] = {
		[Q_WRITE] = "INSERT INTO bench_writes (id, n) VALUES (?, 1) "
		    "ON DUPLICATE KEY UPDATE n = n + 1",
		[Q_BEGIN] = "DO 0",
		[Q_COMMIT] = "DO 0",
	},
	[IDEM_DB_POSTGRES] = {
		[Q_WRITE] = "INSERT INTO bench_writes AS w (id, n) VALUES (?, 1) "
		    "ON CONFLICT (id) DO UPDATE SET n = w.n + 1",
		[Q_BEGIN] = "BEGIN",
		[Q_COMMIT] = "COMMIT",
	},
};

static const char *const create_table[] = {
	[IDEM_DB_MYSQL] = "CREATE TABLE IF NOT EXISTS bench_writes (id BIGINT "
	    "NOT NULL PRIMARY KEY, n BIGINT NOT NULL) ENGINE = InnoDB",
	[IDEM_DB_POSTGRES] = "CREATE TABLE IF NOT EXISTS bench_writes (id "
	    "BIGINT NOT NULL PRIMARY KEY, n BIGINT NOT NULL)",
};

static atomic_int next_slot;
static _Thread_local long long row = -1;

/* This thread's row: the process id and a number per thread, so threads
 * of several workers never share one. */
static long long
thread_row(void)
{
	if (row < 0)
		row = (long long)getpid() * 1024 +
		    (atomic_fetch_add(&next_slot, 1) % 1024);
	return row;
}

static idem_err
answer(const idem_request *req, idem_response *res, void *data)
{
	(void)data;
	return idem_response_json(res, 201, json_pack("{s:s, s:b}", "x",
	    idem_request_param(req, "x"), "ok", 1));
}

/* The write on c (in the request's transaction, or autocommit).  Returns
 * 0, or -1 (the helper logged the error and marked c lost when it was). */
static int
write_row(idem_db_conn *c)
{
	/* 1: inserted, 2: updated */
	return idem_db_run(c, Q_WRITE, "i", thread_row()) == IDEM_OK &&
	    idem_db_affected(c, Q_WRITE) >= 1 ? 0 : -1;
}

/* The answer after a failed write: 503, which is never stored (the
 * transactional route rolls back). */
static idem_err
unavailable(idem_response *res)
{
	idem_err err = idem_response_problem(res, 503, "BENCH_UNAVAILABLE",
	    "the bench write failed");

	return err != IDEM_OK ? err :
	    idem_response_header(res, "Retry-After", "1");
}

/* POST /bench-write/{x}: the write in autocommit, then the answer. */
static idem_err
answer_write(const idem_request *req, idem_response *res, void *data)
{
	idem_db *db = data;
	idem_db_conn *c = idem_db_get(db);
	int rc;

	if (c == NULL)
		return unavailable(res);
	rc = write_row(c);
	idem_db_put(db, c);
	return rc == 0 ? answer(req, res, NULL) : unavailable(res);
}

/* POST /bench-tx/{x}: the write in the request's transaction. */
static idem_err
answer_tx(const idem_request *req, idem_response *res, void *data)
{
	idem_db_conn *c = idem_request_db(req);

	(void)data;
	if (c == NULL || write_row(c) != 0)
		return unavailable(res);
	return answer(req, res, NULL);
}

/* POST /bench-txbare/{x}: BEGIN, the write, COMMIT, on a connection of
 * the pool: the transaction without its key. */
static idem_err
answer_txbare(const idem_request *req, idem_response *res, void *data)
{
	idem_db *db = data;
	idem_db_conn *c = idem_db_get(db);
	int rc;

	if (c == NULL)
		return unavailable(res);
	rc = idem_db_run(c, Q_BEGIN, "") == IDEM_OK && write_row(c) == 0 &&
	    idem_db_run(c, Q_COMMIT, "") == IDEM_OK ? 0 : -1;
	idem_db_put(db, c);
	return rc == 0 ? answer(req, res, NULL) : unavailable(res);
}

static idem_err
setup(idem_app *app, void **data)
{
	idem_db_dialect d = idem_app_db_dialect(app);
	idem_db *db;
	idem_err err;

	(void)data;
	if ((err = idem_route_add(app, "POST", "/bench/{x}",
	    IDEM_POLICY_DEFAULT, answer, NULL)) != IDEM_OK)
		return err;
	if (d == IDEM_DB_NONE)
		return IDEM_OK;
	if ((db = idem_app_db(app, queries[d], NQ)) == NULL)
		return IDEM_ERR_STORE;
	if ((err = idem_route_add(app, "POST", "/bench-write/{x}",
	    IDEM_POLICY_DEFAULT, answer_write, db)) != IDEM_OK)
		return err;
	if (d == IDEM_DB_POSTGRES && (err = idem_route_add(app, "POST",
	    "/bench-txbare/{x}", IDEM_POLICY_OFF, answer_txbare, db)) !=
	    IDEM_OK)
		return err;
	return idem_route_add_tx(app, "POST", "/bench-tx/{x}",
	    IDEM_POLICY_DEFAULT, answer_tx, NULL);
}

/* Creates the table of the write rows, once per start. */
static idem_err
deploy(idem_app *app, void *data)
{
	idem_db_dialect d = idem_app_db_dialect(app);

	(void)data;
	return d != IDEM_DB_NONE ? idem_app_db_exec(app, create_table[d]) :
	    IDEM_OK;
}

IDEM_PLUGIN("bench", setup, deploy, NULL)
