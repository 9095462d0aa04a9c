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
	idem_db_conn *c = db != NULL ? db->ops->take(db) : NULL;

	if (c != NULL)
		c->held = 1;
	return c;
}

void
idem_db_return(idem_db_conn *c)
{
	if (c == NULL)
		return;
	c->held = 0;
	c->source->ops->put(c->source, c);
}

idem_db_conn *
idem_db_get(idem_db *db)
{
	return db != NULL ? db->ops->get(db) : NULL;
}

void
idem_db_put(idem_db *db, idem_db_conn *c)
{
	if (c == NULL)
		return;
	/* a plugin's bug, which would hand one connection to two users: the
	 * request's own (idem_request_db), or a connection of another pool */
	if (c->held) {
		idem_log(NULL, IDEM_LOG_ERROR, "idem_db_put: the connection of "
		    "a transactional route's request belongs to the framework; "
		    "not put back");
		return;
	}
	if (c->source != db)
		idem_log(NULL, IDEM_LOG_ERROR, "idem_db_put: a connection of "
		    "another pool; put back into its own");
	c->source->ops->put(c->source, c);
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

/* Skips the arguments of one parameter of an in format (c) on *ap.
 * Returns 0, or -1 for an unknown conversion. */
static int
skip_in(char c, va_list *ap)
{
	switch (c) {
	case 's':
		(void)va_arg(*ap, const char *);
		return 0;
	case 'b':
		(void)va_arg(*ap, const void *);
		(void)va_arg(*ap, size_t);
		return 0;
	case 'i':
		(void)va_arg(*ap, long long);
		return 0;
	case 'u':
		(void)va_arg(*ap, unsigned long long);
		return 0;
	case 'n':
		return 0;
	default:
		return -1;
	}
}

/* Skips the arguments of one column of an out format (c, after its "?"
 * if any) on *ap, setting an S's variable to NULL.  Returns 0, or -1 for
 * an unknown conversion. */
static int
null_out(char c, va_list *ap)
{
	char **text;

	switch (c) {
	case 'i':
		(void)va_arg(*ap, long long *);
		return 0;
	case 'u':
		(void)va_arg(*ap, unsigned long long *);
		return 0;
	case 's':
		(void)va_arg(*ap, char *);
		(void)va_arg(*ap, size_t);
		return 0;
	case 'S':
		if ((text = va_arg(*ap, char **)) != NULL)
			*text = NULL;
		(void)va_arg(*ap, size_t *);
		return 0;
	case 'b':
		(void)va_arg(*ap, void *);
		(void)va_arg(*ap, size_t);
		(void)va_arg(*ap, size_t *);
		return 0;
	default:
		return -1;
	}
}

void
idem_db_null_texts(const char *in, const char *out, va_list *ap)
{
	va_list cp;

	va_copy(cp, *ap);
	for (; in != NULL && *in != '\0'; in++)
		if (skip_in(*in, &cp) != 0)
			goto done;
	for (; out != NULL && *out != '\0'; out++) {
		if (*out == '?') {
			(void)va_arg(cp, int *);
			if (*++out == '\0')
				break;
		}
		if (null_out(*out, &cp) != 0)
			break;
	}
done:
	va_end(cp);
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

	va_start(ap, out);
	if (!usable(c, "idem_db_fetch")) {
		idem_db_null_texts(NULL, out, &ap);
		va_end(ap);
		return IDEM_ERR_INVALID;
	}
	err = c->source->ops->fetch(c, i, out, &ap);
	va_end(ap);
	return err;
}

idem_err
idem_db_one(idem_db_conn *c, size_t i, const char *in, const char *out, ...)
{
	va_list ap;
	idem_err err;

	va_start(ap, out);
	if (!usable(c, "idem_db_one")) {
		idem_db_null_texts(in, out, &ap);
		va_end(ap);
		return IDEM_ERR_INVALID;
	}
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
