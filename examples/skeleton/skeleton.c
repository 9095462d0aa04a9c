/*
 * skeleton.c - the template of an idemfcgi plugin: copy this directory,
 * rename "skeleton" and "things", and replace the handlers (docs/plugins.md,
 * "From the skeleton to a served, replayed 201").
 *
 *   POST /things        {"name": "..."}  -> 201 {"id": n, "name": "..."}
 *                                           Location <mount>/things/n
 *   GET  /things/{id}                    -> 200 {"id": n, "name": "..."}, 404
 *
 * POST keeps the server's default policy (a key, as [idempotency]
 * required says): a retry with the same Idempotency-Key gets the first
 * answer, Location and all, and makes no second thing.
 *
 * On a store with a database (MySQL, PostgreSQL) the things live in the
 * table skeleton_things of its database, in statements of its dialect,
 * and POST is a transactional route: its INSERT commits with the stored
 * answer, once per key, across crashes.  On the memory store
 * they live in this process, under a mutex.
 *
 *   [skeleton]
 *   max-name = 64        # bytes of a name
 *   max-things = 1000    # things kept in memory (memory store only)
 */
#define _POSIX_C_SOURCE 200809L    /* strdup */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <idemfcgi_db.h>

typedef struct skeleton {
	long long max_name, max_things;
	idem_db *db;                 /* the server's; NULL in memory */
	idem_db_dialect dialect;     /* the store's database's */
	pthread_mutex_t lock;        /* memory: handlers run on many threads */
	char **names;                /* memory: names[i] is thing i + 1 */
	long long count;
} skeleton;

/* ------------------------------------------- the store's database */

/* Made by deploy, once per start: DDL never runs in a handler.  By
 * dialect (idem_app_db_dialect). */
static const char *const create_table[] = {
	[IDEM_DB_MYSQL] = "CREATE TABLE IF NOT EXISTS skeleton_things (id "
	    "BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, name VARCHAR(255) "
	    "CHARACTER SET utf8mb4 NOT NULL) ENGINE = InnoDB",
	[IDEM_DB_POSTGRES] = "CREATE TABLE IF NOT EXISTS skeleton_things (id "
	    "BIGSERIAL PRIMARY KEY, name VARCHAR(255) NOT NULL)",
};

/* Prepared on each connection of the pool; run by index (static: the
 * pool keeps them).  PostgreSQL returns the new id as a row. */
enum { Q_INSERT, Q_SELECT, NQ };
static const char *const queries[][NQ] = {
	[IDEM_DB_MYSQL] = {
		[Q_INSERT] = "INSERT INTO skeleton_things (name) VALUES (?)",
		[Q_SELECT] = "SELECT name FROM skeleton_things WHERE id = ?",
	},
	[IDEM_DB_POSTGRES] = {
		[Q_INSERT] = "INSERT INTO skeleton_things (name) VALUES (?) "
		    "RETURNING id",
		[Q_SELECT] = "SELECT name FROM skeleton_things WHERE id = ?",
	},
};

/* ---------------------------------------------------------- handlers */

/* A 503: never stored, so the client's retry runs the handler again. */
static idem_err
unavailable(idem_response *res)
{
	idem_err err = idem_response_problem(res, 503, "THINGS_UNAVAILABLE",
	    "the things cannot be reached; retry later");

	return err != IDEM_OK ? err :
	    idem_response_header(res, "Retry-After", "1");
}

/* Makes a thing named name: in the request's transaction in the store's
 * database (the framework commits it with the answer), else in memory.
 * Returns IDEM_OK with *id, IDEM_ERR_TOO_LARGE (memory full) or another
 * error. */
static idem_err
make_thing(skeleton *sk, const idem_request *req, const char *name,
    long long *id)
{
	idem_db_conn *tx = idem_request_db(req);
	char *copy;
	idem_err err;

	if (tx != NULL && sk->dialect == IDEM_DB_POSTGRES)
		/* a failure (logged, told to the connection) rolls back */
		return idem_db_one(tx, Q_INSERT, "s", "i", name, id) == IDEM_OK ?
		    IDEM_OK : IDEM_ERR_STORE;
	if (tx != NULL) {
		if (idem_db_run(tx, Q_INSERT, "s", name) != IDEM_OK)
			return IDEM_ERR_STORE;
		*id = (long long)idem_db_insert_id(tx, Q_INSERT);
		return IDEM_OK;
	}
	if ((copy = strdup(name)) == NULL)
		return IDEM_ERR_NOMEM;
	pthread_mutex_lock(&sk->lock);
	if (sk->count == sk->max_things) {
		free(copy);
		err = IDEM_ERR_TOO_LARGE;
	} else {
		sk->names[sk->count] = copy;
		*id = ++sk->count;
		err = IDEM_OK;
	}
	pthread_mutex_unlock(&sk->lock);
	return err;
}

/* POST /things */
static idem_err
create(const idem_request *req, idem_response *res, void *data)
{
	skeleton *sk = data;
	json_t *body = idem_request_json(req, NULL);      /* ours to decref */
	const char *name = json_string_value(json_object_get(body, "name"));
	const char *mount = idem_request_script_name(req); /* "/api", "" */
	char *where = NULL;
	long long id = 0;
	idem_err err;

	if (name == NULL || *name == '\0' || strlen(name) > (size_t)sk->max_name) {
		/* a 422 is stored: the same request always gets it */
		json_decref(body);
		return idem_response_problem(res, 422, "INVALID_THING",
		    "expected {\"name\": \"...\"} of 1 to max-name bytes");
	}
	err = make_thing(sk, req, name, &id);
	if (err == IDEM_ERR_TOO_LARGE)
		err = idem_response_problem(res, 507, "THINGS_FULL",
		    "max-things things are kept already");
	else if (err != IDEM_OK)
		err = unavailable(res);
	else if ((where = malloc(strlen(mount) + 32)) == NULL)
		err = IDEM_ERR_NOMEM;
	else {
		sprintf(where, "%s/things/%lld", mount, id);
		if ((err = idem_response_header(res, "Location", where)) ==
		    IDEM_OK)
			err = idem_response_json(res, 201, json_pack("{s:I, s:s}",
			    "id", (json_int_t)id, "name", name));
	}
	free(where);
	json_decref(body);
	return err;
}

/* GET /things/{id}: a read, policy off (no key, never stored). */
static idem_err
show(const idem_request *req, idem_response *res, void *data)
{
	skeleton *sk = data;
	const char *param = idem_request_param(req, "id");
	char *end, *name = NULL;
	long long id = strtoll(param, &end, 10);
	idem_db_conn *c;
	idem_err err = IDEM_ERR_NOT_FOUND;

	if (*end != '\0' || id < 1)
		;
	else if (sk->db != NULL) {
		if ((c = idem_db_get(sk->db)) == NULL)
			return unavailable(res);
		err = idem_db_one(c, Q_SELECT, "i", "S", id, &name, NULL);
		idem_db_put(sk->db, c);
	} else {
		pthread_mutex_lock(&sk->lock);
		if (id <= sk->count)
			err = (name = strdup(sk->names[id - 1])) != NULL ?
			    IDEM_OK : IDEM_ERR_NOMEM;
		pthread_mutex_unlock(&sk->lock);
	}
	if (err == IDEM_ERR_NOT_FOUND)
		return idem_response_problem(res, 404, "THING_NOT_FOUND", NULL);
	if (err != IDEM_OK)
		return unavailable(res);
	err = idem_response_json(res, 200, json_pack("{s:I, s:s}", "id",
	    (json_int_t)id, "name", name));
	free(name);
	return err;
}

/* ------------------------------------------------------------ set-up */

static void
teardown(void *data)
{
	skeleton *sk = data;
	long long i;

	for (i = 0; i < sk->count; i++)
		free(sk->names[i]);
	free(sk->names);
	pthread_mutex_destroy(&sk->lock);
	free(sk);                    /* the pool is the server's */
}

/* Reads [skeleton] and registers the routes; in the master's check and
 * again in every worker (idemfcgi.h, "Lifecycle"). */
static idem_err
setup(idem_app *app, void **data)
{
	skeleton *sk = calloc(1, sizeof(*sk));
	idem_err err;

	if (sk == NULL)
		return IDEM_ERR_NOMEM;
	pthread_mutex_init(&sk->lock, NULL);
	/* every key the plugin accepts is read here, even at its default */
	if ((err = idem_config_int(app, "max-name", 64, 1, 255,
	    &sk->max_name)) != IDEM_OK || (err = idem_config_int(app,
	    "max-things", 1000, 1, 1000000, &sk->max_things)) != IDEM_OK)
		goto fail;
	sk->dialect = idem_app_db_dialect(app);
	if (sk->dialect != IDEM_DB_NONE) {
		if ((sk->db = idem_app_db(app, queries[sk->dialect], NQ)) ==
		    NULL) {
			err = IDEM_ERR_STORE;
			goto fail;
		}
		err = idem_route_add_tx(app, "POST", "/things",
		    IDEM_POLICY_DEFAULT, create, sk);
	} else if ((sk->names = calloc((size_t)sk->max_things,
	    sizeof(char *))) == NULL) {
		err = IDEM_ERR_NOMEM;
	} else {
		err = idem_route_add(app, "POST", "/things", IDEM_POLICY_DEFAULT,
		    create, sk);
	}
	if (err != IDEM_OK || (err = idem_route_add(app, "GET", "/things/{id}",
	    IDEM_POLICY_OFF, show, sk)) != IDEM_OK)
		goto fail;
	*data = sk;
	return IDEM_OK;
fail:
	teardown(sk);
	return err;
}

/* Creates the table, once per start and per reload (never for --check). */
static idem_err
deploy(idem_app *app, void *data)
{
	idem_db_dialect d = idem_app_db_dialect(app);

	(void)data;
	return d != IDEM_DB_NONE ? idem_app_db_exec(app, create_table[d]) :
	    IDEM_OK;
}

IDEM_PLUGIN("skeleton", setup, deploy, teardown)
