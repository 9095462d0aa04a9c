/*
 * idem_db.c - the store-neutral data API (idemfcgi_db.h) and the data
 * source calls of idem_store_tx.h: each a call of the store's operations
 * (idem_db_ops) on the pool or connection it is given.
 */
#include "config.h"

#include <stdarg.h>

#include "idemfcgi_db.h"
#include "idem_log.h"
#include "idem_request.h"
#include "idem_store_tx.h"

idem_db_conn *
idem_db_take(idem_db *db)
{
	return db != NULL ? db->ops->take(db) : NULL;
}

idem_db_conn *
idem_db_get(idem_db *db)
{
	return db != NULL ? db->ops->get(db) : NULL;
}

void
idem_db_put(idem_db *db, idem_db_conn *c)
{
	if (db != NULL && c != NULL)
		db->ops->put(db, c);
}

void
idem_db_free(idem_db *db)
{
	if (db != NULL)
		db->ops->free(db);
}

int
idem_db_tx_lost(idem_db_conn *c)
{
	return c->source->ops->tx_lost(c);
}

int
idem_db_tx_intact(idem_db_conn *c)
{
	return c->source->ops->tx_intact(c);
}

int
idem_db_broken(idem_db_conn *c)
{
	return c->source->ops->broken(c);
}

idem_db_conn *
idem_request_db(const idem_request *req)
{
	return req != NULL ? req->tx : NULL;
}

/* Refuses a NULL connection (a plugin's bug: logged).  Returns 1 when c
 * may be used. */
static int
usable(const idem_db_conn *c, const char *what)
{
	if (c != NULL)
		return 1;
	idem_log(NULL, IDEM_LOG_ERROR, "%s: no connection (NULL)", what);
	return 0;
}

idem_err
idem_db_run(idem_db_conn *c, size_t i, const char *in, ...)
{
	va_list ap;
	idem_err err;

	if (!usable(c, "idem_db_run"))
		return IDEM_ERR_INVALID;
	va_start(ap, in);
	err = c->source->ops->run(c, i, in, &ap);
	va_end(ap);
	return err;
}

idem_err
idem_db_fetch(idem_db_conn *c, size_t i, const char *out, ...)
{
	va_list ap;
	idem_err err;

	if (!usable(c, "idem_db_fetch"))
		return IDEM_ERR_INVALID;
	va_start(ap, out);
	err = c->source->ops->fetch(c, i, out, &ap);
	va_end(ap);
	return err;
}

idem_err
idem_db_one(idem_db_conn *c, size_t i, const char *in, const char *out, ...)
{
	va_list ap;
	idem_err err;

	if (!usable(c, "idem_db_one"))
		return IDEM_ERR_INVALID;
	va_start(ap, out);
	err = c->source->ops->one(c, i, in, out, &ap);
	va_end(ap);
	return err;
}

unsigned long long
idem_db_affected(idem_db_conn *c, size_t i)
{
	return c != NULL ? c->source->ops->affected(c, i) : 0;
}

unsigned long long
idem_db_insert_id(idem_db_conn *c, size_t i)
{
	return c != NULL && c->source->ops->insert_id != NULL ?
	    c->source->ops->insert_id(c, i) : 0;
}
