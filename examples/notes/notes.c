/*
 * notes.c - a third-party idemfcgi plugin, built outside the idemfcgi tree
 * against the installed header and library only (see Makefile).
 *
 *   POST /notes        {"text": "..."}  -> 201 {"id": n, "text": "..."}
 *                                          Location <mount>/notes/n
 *   GET  /notes/{id}                    -> 200 {"id": n, "text": "..."}
 *
 * Creating a note is a side effect a retry must not repeat, so POST keeps
 * the server's default idempotency policy: with a key, a retried POST gets
 * the first answer (the same id) instead of a second note.
 *
 * Where the notes live follows [idempotency] store:
 *  - memory: in the worker's memory, under a mutex; POST is a plain route.
 *  - mysql, postgres: in the table "notes" of the store's database,
 *    through the data API (idemfcgi_db.h), each statement written in the
 *    store's dialect (idem_app_db_dialect); POST is a
 *    transactional route (idem_route_add_tx): its INSERT runs in the
 *    transaction in which the framework reserves the key and stores the
 *    answer, so the note and its answer commit together, once per key,
 *    even when a worker dies at any instant.  Ids have gaps: a rolled-back
 *    INSERT uses up its id.
 *
 *   [notes]
 *   max-notes = 1000     # how many notes are kept (memory store only)
 *   max-length = 280     # bytes of text
 *
 * Which process runs what, and how often (idemfcgi.h, "Lifecycle"):
 *  - idem_plugin_init and setup run each time a process loads the plugin:
 *    in the master to check the configuration (at start-up, for
 *    idemfcgi --check and at each reload: idem_app_is_check is true,
 *    teardown follows at once, and nothing outside may change); then in
 *    each worker process, once, as it starts (also one that replaces a
 *    dead worker).
 *  - deploy runs in the master once per start and per reload, after the
 *    check, before the workers start; never for --check: the table is
 *    created there (IF NOT EXISTS: a reload runs it again).
 *  - handlers run in the worker processes, on any of their threads, many
 *    at once: once per request that executes (never for a replay).
 *    Memory is per worker process; with the memory store there is one.
 *  - teardown runs after each setup that succeeded, in the same process;
 *    in a worker, after its last request.
 */
#define _POSIX_C_SOURCE 200809L    /* strdup */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <idemfcgi_db.h>

typedef struct notes {
	long long max_notes, max_length;
	/* a store with a database (MySQL, PostgreSQL) */
	idem_db *db;               /* owned by the server; NULL in memory */
	idem_db_dialect dialect;   /* its statements' */
	/* memory store */
	pthread_mutex_t lock;      /* handlers run on many threads */
	char **text;               /* text[i] is note i + 1 */
	long long count;
} notes;

/* ------------------------------------------- the store's database */

/* Run by deploy (see above), through idem_app_db_exec, in the store's
 * dialect.  DDL commits implicitly: it belongs there, never in a
 * transactional handler. */
static const char *const create_table[] = {
	[IDEM_DB_MYSQL] = "CREATE TABLE IF NOT EXISTS notes (id BIGINT NOT "
	    "NULL AUTO_INCREMENT PRIMARY KEY, text MEDIUMTEXT CHARACTER SET "
	    "utf8mb4 NOT NULL) ENGINE = InnoDB",
	[IDEM_DB_POSTGRES] = "CREATE TABLE IF NOT EXISTS notes (id BIGSERIAL "
	    "PRIMARY KEY, text TEXT NOT NULL)",
};

/* Prepared once on each connection of the plugin's pool, when it
 * connects; the statement helper (idem_db_run, idem_db_one) runs
 * them by their index.  The new note's id: MySQL's AUTO_INCREMENT comes
 * with the statement's result (idem_db_insert_id), PostgreSQL's as a row
 * (RETURNING). */
enum { Q_INSERT, Q_SELECT, NQ };
static const char *const queries[][NQ] = {
	[IDEM_DB_MYSQL] = {
		[Q_INSERT] = "INSERT INTO notes (text) VALUES (?)",
		[Q_SELECT] = "SELECT text FROM notes WHERE id = ?",
	},
	[IDEM_DB_POSTGRES] = {
		[Q_INSERT] = "INSERT INTO notes (text) VALUES (?) RETURNING id",
		[Q_SELECT] = "SELECT text FROM notes WHERE id = ?",
	},
};

/*
 * Inserts text on c, the connection of the request's transaction: the
 * framework commits it with the answer, or rolls it back when the answer
 * is not stored (5xx, 429, a handler error; see commit-statuses).  So a
 * transactional handler
 *  - never runs COMMIT, ROLLBACK or a statement that commits implicitly
 *    (DDL such as CREATE TABLE, LOCK TABLES, START TRANSACTION, SET
 *    autocommit);
 *  - never writes through another connection (idem_db_get): that
 *    commits on its own, and may wait for this transaction's locks;
 *  - expects nothing done outside this transaction to roll back with it
 *    (a call to another system: HTTP, mail, a queue, another database;
 *    a file; the process's memory): the framework may still roll back
 *    after the handler returned;
 *  - after a statement fails, runs no other one and answers 503: a
 *    deadlock has already rolled the whole transaction back (the key's
 *    reservation too), and on PostgreSQL any failure aborts it; an
 *    outcome it expects (a duplicate key) is better written as no error
 *    (ON CONFLICT, INSERT IGNORE);
 *  - answers a 4xx of commit-statuses (400, 404, 409, 422 by default)
 *    only when its writes so far may commit: it is stored, and commits;
 *  - is quick: the key's record and the rows it wrote stay locked until
 *    the transaction ends.
 * Statements go through the helper of idemfcgi_db.h: parameters bound
 * by a format string ("s": a string), columns fetched into variables,
 * errors as idem_err (logged, and told to the connection: a deadlock
 * makes the framework reserve the key again).
 * Returns 201 with *id set, or 503 (the transaction is rolled back).
 */
static int
db_insert(const notes *n, idem_db_conn *c, const char *text, long long *id)
{
	if (n->dialect == IDEM_DB_POSTGRES)
		return idem_db_one(c, Q_INSERT, "s", "i", text, id) == IDEM_OK ?
		    201 : 503;
	if (idem_db_run(c, Q_INSERT, "s", text) != IDEM_OK)
		return 503;
	*id = (long long)idem_db_insert_id(c, Q_INSERT);
	return 201;
}

/* Reads note id on a connection of its own (autocommit: a read needs no
 * transaction).  Returns 200 with *text set (caller frees), 404 or 503. */
static int
db_select(notes *n, long long id, char **text)
{
	idem_db_conn *c = idem_db_get(n->db);
	idem_err err;

	if (c == NULL)
		return 503;
	/* "S": the text into a buffer of its size, which we free */
	err = idem_db_one(c, Q_SELECT, "i", "S", id, text, NULL);
	idem_db_put(n->db, c);
	return err == IDEM_OK ? 200 : err == IDEM_ERR_NOT_FOUND ? 404 : 503;
}

/* ------------------------------------------------------------ memory */

/* Returns 201 with *id set, 409 when max-notes are kept, or 503. */
static int
mem_insert(notes *n, const char *text, long long *id)
{
	char *copy = strdup(text);
	int status = 201;

	if (copy == NULL)
		return 503;
	pthread_mutex_lock(&n->lock);
	if (n->count == n->max_notes) {
		status = 409;
		free(copy);
	} else {
		n->text[n->count] = copy;
		*id = ++n->count;
	}
	pthread_mutex_unlock(&n->lock);
	return status;
}

/* Returns 200 with *text set (caller frees), 404 or 503. */
static int
mem_select(notes *n, long long id, char **text)
{
	int status = 404;

	pthread_mutex_lock(&n->lock);
	if (id >= 1 && id <= n->count)
		status = (*text = strdup(n->text[id - 1])) != NULL ? 200 : 503;
	pthread_mutex_unlock(&n->lock);
	return status;
}

/* ---------------------------------------------------------- handlers */

/* A 503: not stored, so a retry runs the handler again. */
static idem_err
unavailable(idem_response *res)
{
	idem_err err = idem_response_problem(res, 503, "NOTES_UNAVAILABLE",
	    "the notes cannot be reached; retry later");

	return err != IDEM_OK ? err :
	    idem_response_header(res, "Retry-After", "1");
}

/* Answers 201 with note id, whose URL under any mount (the web server's
 * SCRIPT_NAME, or [server] mount) is the Location. */
static idem_err
created(const idem_request *req, idem_response *res, long long id,
    const char *text)
{
	const char *mount = idem_request_script_name(req);
	char *where = malloc(strlen(mount) + 32);
	idem_err err;

	if (where == NULL)
		return IDEM_ERR_NOMEM;
	sprintf(where, "%s/notes/%lld", mount, id);
	err = idem_response_header(res, "Location", where);
	free(where);
	if (err != IDEM_OK)
		return err;
	return idem_response_json(res, 201, json_pack("{s:I, s:s}", "id",
	    (json_int_t)id, "text", text));
}

/* POST /notes.  On a store with a database a transactional route: idem_request_db is the
 * connection inside the request's transaction (NULL in memory). */
static idem_err
create(const idem_request *req, idem_response *res, void *data)
{
	notes *n = data;
	idem_db_conn *tx = idem_request_db(req);
	json_t *body = idem_request_json(req, NULL);   /* ours to decref */
	const char *text = json_string_value(json_object_get(body, "text"));
	long long id = 0;
	idem_err err;
	int status;

	if (text == NULL || strlen(text) > (size_t)n->max_length) {
		/* a 422 is stored and commits: fine, nothing was written */
		json_decref(body);
		return idem_response_problem(res, 422, "INVALID_NOTE",
		    "expected {\"text\": \"...\"} within max-length");
	}
	status = tx != NULL ? db_insert(n, tx, text, &id) :
	    mem_insert(n, text, &id);
	if (status == 201) {
		idem_log(req, IDEM_LOG_INFO, "notes: created note %lld", id);
		err = created(req, res, id, text);
	} else if (status == 409) {
		err = idem_response_problem(res, 409, "NOTES_FULL",
		    "max-notes notes are kept already");
	} else {
		err = unavailable(res);
	}
	json_decref(body);
	return err;
}

/* GET /notes/{id} */
static idem_err
show(const idem_request *req, idem_response *res, void *data)
{
	notes *n = data;
	long long id = atoll(idem_request_param(req, "id"));
	char *text = NULL;
	idem_err err;
	int status;

	status = n->db != NULL ? db_select(n, id, &text) :
	    mem_select(n, id, &text);
	if (status == 404)
		return idem_response_problem(res, 404, "NOTE_NOT_FOUND", NULL);
	if (status != 200)
		return unavailable(res);
	err = idem_response_json(res, 200, json_pack("{s:I, s:s}", "id",
	    (json_int_t)id, "text", text));
	free(text);
	return err;
}

/* ------------------------------------------------------------- set-up */

static void
teardown(void *data)
{
	notes *n = data;
	long long i;

	/* n->db belongs to the server, which frees it after teardown */
	for (i = 0; i < n->count; i++)
		free(n->text[i]);
	free(n->text);
	pthread_mutex_destroy(&n->lock);
	free(n);
}

static idem_err
setup(idem_app *app, void **data)
{
	notes *n = calloc(1, sizeof(*n));
	idem_err err;

	if (n == NULL)
		return IDEM_ERR_NOMEM;
	pthread_mutex_init(&n->lock, NULL);
	if ((err = idem_config_int(app, "max-notes", 1000, 1, 1000000,
	    &n->max_notes)) != IDEM_OK ||
	    (err = idem_config_int(app, "max-length", 280, 1, 65536,
	    &n->max_length)) != IDEM_OK)
		goto fail;
	n->dialect = idem_app_db_dialect(app);
	if (n->dialect != IDEM_DB_NONE) {
		/* the pool, which idem_route_add_tx needs; its connections
		 * prepare statements naming the table when they connect, in
		 * the workers, after deploy made it */
		if ((n->db = idem_app_db(app, queries[n->dialect], NQ)) ==
		    NULL) {
			err = IDEM_ERR_STORE;
			goto fail;
		}
		err = idem_route_add_tx(app, "POST", "/notes",
		    IDEM_POLICY_DEFAULT, create, n);
	} else if ((n->text = calloc((size_t)n->max_notes,
	    sizeof(char *))) == NULL) {
		err = IDEM_ERR_NOMEM;
	} else {
		err = idem_route_add(app, "POST", "/notes", IDEM_POLICY_DEFAULT,
		    create, n);
	}
	if (err != IDEM_OK ||
	    (err = idem_route_add(app, "GET", "/notes/{id}", IDEM_POLICY_OFF,
	    show, n)) != IDEM_OK)
		goto fail;
	*data = n;
	return IDEM_OK;
fail:
	teardown(n);
	return err;
}

/* Creates the table, once per start (and per reload). */
static idem_err
deploy(idem_app *app, void *data)
{
	idem_db_dialect d = idem_app_db_dialect(app);

	(void)data;
	return d != IDEM_DB_NONE ? idem_app_db_exec(app, create_table[d]) :
	    IDEM_OK;
}

IDEM_PLUGIN("notes", setup, deploy, teardown)
