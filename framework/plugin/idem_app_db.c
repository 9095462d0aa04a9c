/*
 * idem_app_db.c - the setup side of the data API (idemfcgi_db.h, and
 * idemfcgi_mysql.h's older calls): the dialect of the store's database, a
 * plugin's pool of it, DDL for its deploy hook, transactional routes.
 * The one file of plugin/ that knows a store with a database: MySQL's, for
 * its raw API (idemfcgi_mysql.h); the others' pools the store factory's
 * maker makes (idem_store_db_maker).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "idemfcgi_db.h"
#include "idem_log.h"
#include "idem_plugin.h"
#include "idem_router.h"
#include "idem_store.h"
#include "idem_store_tx.h"
#ifdef HAVE_MYSQL
#include "idemfcgi_mysql.h"
#include "idem_mysql.h"
#include "idem_store_mysql.h"
#endif


idem_db_dialect
idem_app_db_dialect(const idem_app *app)
{
	if (!app->cfg->idem.enabled)
		return IDEM_DB_NONE;
	switch (app->cfg->idem.store) {
	case IDEM_STORE_MYSQL:
		return IDEM_DB_MYSQL;
	case IDEM_STORE_POSTGRES:
		return IDEM_DB_POSTGRES;
	default:
		return IDEM_DB_NONE;
	}
}

/* Refuses a change in the configuration check (what names the call).
 * Returns 0 when allowed, else -1 (logged). */
static int
not_in_check(const idem_app *app, const char *what)
{
	if (!app->check)
		return 0;
	idem_log(NULL, IDEM_LOG_ERROR, "plugin %s: %s in the configuration "
	    "check: a check changes nothing; run DDL in the deploy hook",
	    app->path, what);
	return -1;
}

/* Whether app's plugin may make its pool now (what names the call): in
 * setup, and the first time.  Returns 0 when it may, else -1 (logged). */
static int
pool_allowed(const idem_app *app, const char *what)
{
	if (idem_app_setup_only(app, what) != 0)
		return -1;
	if (app->self->db == NULL)
		return 0;
	idem_log(NULL, IDEM_LOG_ERROR, "plugin %s: %s: one pool per plugin",
	    app->path, what);
	return -1;
}

#ifdef HAVE_MYSQL
/* ---------------------------------------------- MySQL's (and the raw API) */

int
idem_app_uses_mysql(const idem_app *app)
{
	return idem_app_db_dialect(app) == IDEM_DB_MYSQL;
}

/* Runs sql on a connection of [mysql]'s database of its own.  Returns as
 * idem_app_db_exec. */
static idem_err
mysql_exec(idem_app *app, const char *sql)
{
	idem_mysql_pool *p;
	idem_err err;

	if ((err = idem_mysql_pool_new(&app->cfg->mysql, app->cfg->path, NULL,
	    0, 1, &p)) != IDEM_OK)
		return err;
	err = idem_mysql_exec(p, sql);
	idem_mysql_pool_free(p);
	if (err != IDEM_OK)
		idem_log(NULL, IDEM_LOG_ERROR, "plugin %s: a statement of "
		    "its %s failed", app->path, app->deploying ? "deploy" :
		    "setup");
	return err;
}

idem_err
idem_app_mysql_exec(idem_app *app, const char *sql)
{
	if (not_in_check(app, "idem_app_mysql_exec") != 0)
		return IDEM_ERR_INVALID;
	return mysql_exec(app, sql);
}

/* A pool of [mysql]'s database for app's plugin, preparing sql; with the
 * store's statements of transactional routes when the store is MySQL.
 * Returns it, kept as the plugin's, or NULL (logged). */
static idem_mysql_pool *
mysql_pool(idem_app *app, const char *const *sql, size_t nsql)
{
	idem_mysql_pool *p = NULL;

	idem_store_opts o = idem_store_opts_of(app->cfg, 0);

	if (idem_mysql_pool_new(&app->cfg->mysql, app->cfg->path, sql, nsql,
	    app->cfg->mysql.pool_size, &p) != IDEM_OK ||
	    (idem_app_uses_mysql(app) &&
	    idem_store_mysql_tx_prepare(&app->cfg->mysql, &o, p) != IDEM_OK)) {
		if (p != NULL)
			idem_mysql_pool_free(p);
		idem_log(NULL, IDEM_LOG_ERROR, "plugin %s: its MySQL pool could "
		    "not be made", app->path);
		return NULL;
	}
	app->self->db = idem_mysql_pool_source(p);
	return p;
}

idem_mysql_pool *
idem_app_mysql_pool(idem_app *app, const char *const *sql, size_t nsql)
{
	if (pool_allowed(app, "idem_app_mysql_pool") != 0)
		return NULL;
	return mysql_pool(app, sql, nsql);
}

#endif /* HAVE_MYSQL */

/* ----------------------------------------- the others' (the factory's) */

/* Runs sql on a connection of the store's database of its own, through
 * the factory's maker.  Returns as idem_app_db_exec. */
static idem_err
maker_exec(idem_app *app, const char *sql)
{
	idem_err err = app->maker->exec(app->cfg, sql);

	if (err != IDEM_OK)
		idem_log(NULL, IDEM_LOG_ERROR, "plugin %s: a statement of "
		    "its %s failed", app->path, app->deploying ? "deploy" :
		    "setup");
	return err;
}

/* A pool of the store's database for app's plugin, through the factory's
 * maker: sql and the store's statements of transactional routes.
 * Returns it, kept as the plugin's, or NULL (logged). */
static idem_db *
maker_pool(idem_app *app, const char *const *sql, size_t nsql)
{
	idem_db *db = NULL;

	if (app->maker->pool(app->cfg, sql, nsql, &db) != IDEM_OK) {
		idem_log(NULL, IDEM_LOG_ERROR, "plugin %s: its pool of the "
		    "store's database could not be made", app->path);
		return NULL;
	}
	app->self->db = db;
	return db;
}


/* ------------------------------------------------------- the neutral API */

idem_err
idem_app_db_exec(idem_app *app, const char *sql)
{
	if (not_in_check(app, "idem_app_db_exec") != 0)
		return IDEM_ERR_INVALID;
	if (sql == NULL) {
		idem_log(NULL, IDEM_LOG_ERROR, "plugin %s: idem_app_db_exec: "
		    "no statement (NULL)", app->path);
		return IDEM_ERR_INVALID;
	}
	switch (idem_app_db_dialect(app)) {
#ifdef HAVE_MYSQL
	case IDEM_DB_MYSQL:
		return mysql_exec(app, sql);
#endif
	default:
		if (app->maker != NULL)
			return maker_exec(app, sql);
		idem_log(NULL, IDEM_LOG_ERROR, "plugin %s: idem_app_db_exec: "
		    "the store has no database (idem_app_db_dialect is "
		    "IDEM_DB_NONE)", app->path);
		return IDEM_ERR_INVALID;
	}
}

idem_db *
idem_app_db(idem_app *app, const char *const *sql, size_t nsql)
{
	if (pool_allowed(app, "idem_app_db") != 0)
		return NULL;
	for (size_t i = 0; i < nsql; i++)
		if (sql == NULL || sql[i] == NULL) {
			idem_log(NULL, IDEM_LOG_ERROR, "plugin %s: idem_app_db: "
			    "statement %zu of %zu is NULL", app->path, i, nsql);
			return NULL;
		}
	switch (idem_app_db_dialect(app)) {
#ifdef HAVE_MYSQL
	case IDEM_DB_MYSQL:
		return mysql_pool(app, sql, nsql) != NULL ? app->self->db :
		    NULL;
#endif
	default:
		if (app->maker != NULL)
			return maker_pool(app, sql, nsql);
		idem_log(NULL, IDEM_LOG_ERROR, "plugin %s: idem_app_db: the "
		    "store has no database (idem_app_db_dialect is "
		    "IDEM_DB_NONE): keep the data elsewhere", app->path);
		return NULL;
	}
}

idem_err
idem_route_add_tx(idem_app *app, const char *method, const char *tmpl,
    idem_policy policy, idem_handler_fn handler, void *data)
{
	const char *why = NULL;
	idem_err err;

	if (!app->cfg->idem.enabled)
		why = "idempotency is disabled ([idempotency] enabled = false)";
	else if (app->cfg->idem.store == IDEM_STORE_REDIS)
		why = "store = redis keeps the idempotency records only: a "
		    "transactional route commits the handler's writes with its "
		    "answer in one database, which needs store = mysql or "
		    "store = postgres (or declare the route with idem_route_add "
		    "and the two-phase path)";
	else if (idem_app_db_dialect(app) == IDEM_DB_NONE)
		why = "the store has no database: only a store with a "
		    "database can commit the handler's writes with the answer";
	else if (app->self->db == NULL)
		why = "the plugin has no pool: call idem_app_db before "
		    "idem_route_add_tx";
	else if (app->self->db->dialect != idem_app_db_dialect(app))
		why = "the plugin's pool is not of the store's database";
	if (why != NULL) {
		idem_log(NULL, IDEM_LOG_ERROR, "%s: plugin %s: route %s %s is "
		    "transactional, but %s", app->cfg->path, app->path,
		    method != NULL ? method : "(null)",
		    tmpl != NULL ? tmpl : "(null)", why);
		return IDEM_ERR_CONFIG;
	}
	if ((err = idem_route_add(app, method, tmpl, policy, handler, data))
	    != IDEM_OK)
		return err;
	idem_router_at(app->router, idem_router_count(app->router) - 1)->tx_db =
	    app->self->db;
	return IDEM_OK;
}

