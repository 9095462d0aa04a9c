/*
 * dbapi.c - a plugin for the tests of the data API's setup side
 * (idemfcgi_db.h) on a store without a database: what [dbapi] step names
 * is tried in setup, which fails with its error when it is refused.
 *
 *   step = dialect    registers GET /dbapi: {"dialect": idem_app_db_dialect,
 *                     "connection": whether idem_request_db is non-NULL}
 *   step = pool       idem_app_db with one statement
 *   step = null-sql   idem_app_db with a NULL statement
 *   step = exec       idem_app_db_exec of one statement
 *   step = tx         idem_route_add_tx POST /dbapi
 */
#include <string.h>

#include "idemfcgi_db.h"

static const char *const one_sql[] = { "SELECT 1" };
static const char *const null_sql[] = { NULL };
static idem_db_dialect dialect;   /* as setup learnt it */

/* GET /dbapi */
static idem_err
show(const idem_request *req, idem_response *res, void *data)
{
	(void)data;
	return idem_response_json(res, 200, json_pack("{s:i, s:b}", "dialect",
	    (int)dialect, "connection", idem_request_db(req) != NULL));
}

static idem_err
setup(idem_app *app, void **data)
{
	const char *step;
	idem_err err;

	*data = NULL;
	dialect = idem_app_db_dialect(app);
	if ((err = idem_config_string(app, "step", "dialect", &step)) !=
	    IDEM_OK)
		return err;
	if (strcmp(step, "dialect") == 0)
		return idem_route_add(app, "GET", "/dbapi", IDEM_POLICY_OFF,
		    show, NULL);
	if (strcmp(step, "pool") == 0)
		return idem_app_db(app, one_sql, 1) != NULL ? IDEM_OK :
		    IDEM_ERR_STORE;
	if (strcmp(step, "null-sql") == 0)
		return idem_app_db(app, null_sql, 1) != NULL ? IDEM_OK :
		    IDEM_ERR_STORE;
	if (strcmp(step, "exec") == 0)
		return idem_app_db_exec(app, "SELECT 1");
	if (strcmp(step, "tx") == 0)
		return idem_route_add_tx(app, "POST", "/dbapi",
		    IDEM_POLICY_DEFAULT, show, NULL);
	return IDEM_ERR_INVALID;
}

IDEM_PLUGIN("dbapi", setup, NULL, NULL)
