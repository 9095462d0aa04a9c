/*
 * idem_mysql_query.c - the statement helper of idemfcgi_mysql.h: a
 * connection's prepared statement run with its parameters bound by a
 * format string, and its rows fetched into C variables by another, with
 * errors as idem_err.
 */
#include "config.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <errmsg.h>
#include <mysql.h>

#include "idem_log.h"
#include "idem_mysql.h"

/* Most parameters or columns one call binds. */
#define QUERY_MAX 32

/* One output conversion of a fetch format, with the caller's variables. */
typedef struct out_slot {
	char conv;                 /* i u s S b */
	int *is_null;              /* "?": set to whether the column is NULL */
	long long *ip;
	unsigned long long *up;
	void *buf;                 /* s, b */
	size_t size;               /* s, b: bytes of buf */
	size_t *lenp;              /* S, b: the length (S: may be NULL) */
	char **sp;                 /* S: a new buffer, caller frees */
} out_slot;

idem_err
idem_mysql_error_code(unsigned err)
{
	switch (err) {
	case 0:
		return IDEM_OK;
	case 1213: /* ER_LOCK_DEADLOCK (on Galera also a certification
	            * failure, or an abort by another node's commit) */
	case 1205: /* ER_LOCK_WAIT_TIMEOUT */
		return IDEM_ERR_BUSY;
	case 1406: /* ER_DATA_TOO_LONG */
	case 1153: /* ER_NET_PACKET_TOO_LARGE */
	case CR_NET_PACKET_TOO_LARGE:
	case 1301: /* ER_WARN_ALLOWED_PACKET_OVERFLOWED */
	case 1265: /* WARN_DATA_TRUNCATED */
	case 1292: /* ER_TRUNCATED_WRONG_VALUE */
	case 1366: /* ER_TRUNCATED_WRONG_VALUE_FOR_FIELD */
	case 1264: /* ER_WARN_DATA_OUT_OF_RANGE */
	case 1690: /* ER_DATA_OUT_OF_RANGE: an expression's result */
	case 1118: /* ER_TOO_BIG_ROWSIZE */
		return IDEM_ERR_TOO_LARGE;
	case 1062: /* ER_DUP_ENTRY */
		return IDEM_ERR_EXISTS;
	default:
		return IDEM_ERR_STORE;
	}
}

/* Logs a format that does not fit statement i (a programming error of
 * the plugin's).  Returns IDEM_ERR_INVALID. */
static idem_err
bad_format(size_t i, const char *fmt, const char *why)
{
	idem_log(NULL, IDEM_LOG_ERROR, "mysql statement %zu, format \"%s\": %s",
	    i, fmt != NULL ? fmt : "(null)", why);
	return IDEM_ERR_INVALID;
}

/* Maps the failure of st on c to an idem_err, telling c (a lost
 * connection, a rolled-back transaction) and logging an outage. */
static idem_err
failed(idem_mysql_conn *c, size_t i, MYSQL_STMT *st)
{
	unsigned no = mysql_stmt_errno(st);
	idem_err err = idem_mysql_error_code(no);
	char what[48];

	idem_mysql_check(c, no);
	if (err == IDEM_ERR_STORE) {
		snprintf(what, sizeof(what), "statement %zu", i);
		idem_mysql_log_error(c->pool, what, st);
	}
	return err;
}

/*
 * Binds the parameters of format in from ap into b (vals keeps the
 * numbers, len the lengths).  Returns how many, or -1 for a character
 * that is no conversion or more than QUERY_MAX of them.
 */
static int
bind_in(const char *in, va_list *ap, MYSQL_BIND *b, long long *vals,
    unsigned long *len)
{
	int n = 0;

	for (; *in != '\0'; in++, n++) {
		const void *p;
		if (n == QUERY_MAX || strchr("sbiun", *in) == NULL)
			return -1;
		memset(&b[n], 0, sizeof(b[n]));
		switch (*in) {
		case 's':
		case 'b':
			p = va_arg(*ap, const void *);
			len[n] = *in == 's' ? (p != NULL ? strlen(p) : 0) :
			    (unsigned long)va_arg(*ap, size_t);
			b[n].buffer_type = p == NULL ? MYSQL_TYPE_NULL : *in ==
			    's' ? MYSQL_TYPE_STRING : MYSQL_TYPE_BLOB;
			b[n].buffer = (void *)p;
			b[n].buffer_length = len[n];
			b[n].length = &len[n];
			break;
		case 'i':
		case 'u':
			vals[n] = *in == 'i' ? va_arg(*ap, long long) :
			    (long long)va_arg(*ap, unsigned long long);
			b[n].buffer_type = MYSQL_TYPE_LONGLONG;
			b[n].buffer = &vals[n];
			b[n].is_unsigned = *in == 'u';
			break;
		default: /* 'n' */
			b[n].buffer_type = MYSQL_TYPE_NULL;
		}
	}
	return n;
}

/* Runs st (statement i of c) with the parameters of in from ap. */
static idem_err
run(idem_mysql_conn *c, size_t i, MYSQL_STMT *st, const char *in,
    va_list *ap)
{
	MYSQL_BIND b[QUERY_MAX];
	long long vals[QUERY_MAX];
	unsigned long len[QUERY_MAX];
	int n;

	if (in == NULL || (n = bind_in(in, ap, b, vals, len)) < 0)
		return bad_format(i, in, "a parameter is one of s b i u n, "
		    "at most 32");
	if ((unsigned long)n != mysql_stmt_param_count(st))
		return bad_format(i, in, "not as many parameters as the "
		    "statement's placeholders");
	if ((n > 0 && mysql_stmt_bind_param(st, b) != 0) ||
	    mysql_stmt_execute(st) != 0)
		return failed(c, i, st);
	/* rows are read into the client at once, so that other statements
	 * may run on c before (or without) fetching them */
	if (mysql_stmt_field_count(st) > 0 && mysql_stmt_store_result(st) != 0)
		return failed(c, i, st);
	return IDEM_OK;
}

/* Statement i of c, or NULL after logging. */
static MYSQL_STMT *
stmt_of(idem_mysql_conn *c, size_t i)
{
	MYSQL_STMT *st = c != NULL ? idem_mysql_stmt(c, i) : NULL;

	if (st == NULL)
		idem_log(NULL, IDEM_LOG_ERROR, "mysql statement %zu: no such "
		    "statement%s", i, c == NULL ? " (no connection)" : "");
	return st;
}

idem_err
idem_mysql_vrun(idem_mysql_conn *c, size_t i, const char *in, va_list *ap)
{
	MYSQL_STMT *st = stmt_of(c, i);

	return st != NULL ? run(c, i, st, in, ap) : IDEM_ERR_INVALID;
}

idem_err
idem_mysql_run(idem_mysql_conn *c, size_t i, const char *in, ...)
{
	va_list ap;
	idem_err err;

	va_start(ap, in);
	err = idem_mysql_vrun(c, i, in, &ap);
	va_end(ap);
	return err;
}

/* Reads the conversions of out from ap into s.  Returns how many, or -1
 * for a malformed format (an unknown character, a "?" alone, more than
 * QUERY_MAX) or a NULL variable or buffer of size 0. */
static int
parse_out(const char *out, va_list *ap, out_slot *s)
{
	int n = 0;

	for (; *out != '\0'; out++, n++) {
		if (n == QUERY_MAX)
			return -1;
		memset(&s[n], 0, sizeof(s[n]));
		if (*out == '?') {
			s[n].is_null = va_arg(*ap, int *);
			out++;
		}
		if (*out == '\0' || strchr("iusSb", *out) == NULL)
			return -1;
		s[n].conv = *out;
		switch (*out) {
		case 'i':
			if ((s[n].ip = va_arg(*ap, long long *)) == NULL)
				return -1;
			break;
		case 'u':
			if ((s[n].up = va_arg(*ap, unsigned long long *)) ==
			    NULL)
				return -1;
			break;
		case 's':
		case 'b':
			s[n].buf = va_arg(*ap, void *);
			s[n].size = va_arg(*ap, size_t);
			if (*out == 'b' && (s[n].lenp = va_arg(*ap,
			    size_t *)) == NULL)
				return -1;
			if (s[n].buf == NULL || s[n].size == 0)
				return -1;
			break;
		default: /* 'S' */
			s[n].sp = va_arg(*ap, char **);
			s[n].lenp = va_arg(*ap, size_t *);
			if (s[n].sp == NULL)
				return -1;
			*s[n].sp = NULL;
		}
	}
	return n;
}

/* Binds the result columns of slots s to b. */
static void
bind_out(out_slot *s, int n, MYSQL_BIND *b, unsigned long *len,
    my_bool *null, my_bool *error)
{
	int k;

	memset(b, 0, sizeof(*b) * (size_t)n);
	for (k = 0; k < n; k++) {
		b[k].length = &len[k];
		b[k].is_null = &null[k];
		b[k].error = &error[k];
		switch (s[k].conv) {
		case 'i':
		case 'u':
			b[k].buffer_type = MYSQL_TYPE_LONGLONG;
			b[k].buffer = s[k].conv == 'i' ? (void *)s[k].ip :
			    (void *)s[k].up;
			b[k].is_unsigned = s[k].conv == 'u';
			break;
		case 's':
			b[k].buffer_type = MYSQL_TYPE_STRING;
			b[k].buffer = s[k].buf;
			b[k].buffer_length = s[k].size - 1;  /* and the NUL */
			break;
		case 'b':
			b[k].buffer_type = MYSQL_TYPE_BLOB;
			b[k].buffer = s[k].buf;
			b[k].buffer_length = s[k].size;
			break;
		default: /* 'S': the length first, then fetch_column */
			b[k].buffer_type = MYSQL_TYPE_STRING;
		}
	}
}

/* Frees what the S conversions of s allocated (after a failure). */
static void
drop_out(out_slot *s, int n)
{
	int k;

	for (k = 0; k < n; k++)
		if (s[k].conv == 'S') {
			free(*s[k].sp);
			*s[k].sp = NULL;
		}
}

/*
 * Completes the row just fetched from st into s: NULLs, the NULs of
 * strings, the S buffers; a value that did not fit is IDEM_ERR_TOO_LARGE,
 * a NULL without "?" IDEM_ERR_INVALID.
 */
static idem_err
finish_row(size_t i, MYSQL_STMT *st, out_slot *s, int n, MYSQL_BIND *b,
    unsigned long *len, my_bool *null, my_bool *error)
{
	MYSQL_BIND one;
	int k;

	for (k = 0; k < n; k++) {
		if (s[k].is_null != NULL)
			*s[k].is_null = null[k] != 0;
		if (null[k] && s[k].is_null == NULL) {
			idem_log(NULL, IDEM_LOG_ERROR, "mysql statement %zu: "
			    "column %d is NULL, and its conversion has no ?",
			    i, k + 1);
			return IDEM_ERR_INVALID;
		}
		switch (s[k].conv) {
		case 'i':
		case 'u':
			if (null[k])
				memset(b[k].buffer, 0, sizeof(long long));
			else if (error[k])
				return IDEM_ERR_TOO_LARGE;
			break;
		case 's':
			if (!null[k] && len[k] > s[k].size - 1)
				return IDEM_ERR_TOO_LARGE;
			((char *)s[k].buf)[null[k] ? 0 : len[k]] = '\0';
			break;
		case 'b':
			if (!null[k] && len[k] > s[k].size)
				return IDEM_ERR_TOO_LARGE;
			*s[k].lenp = null[k] ? 0 : len[k];
			break;
		default: /* 'S' */
			if ((*s[k].sp = malloc(null[k] ? 1 : len[k] + 1)) == NULL)
				return IDEM_ERR_NOMEM;
			memset(&one, 0, sizeof(one));
			one.buffer_type = MYSQL_TYPE_STRING;
			one.buffer = *s[k].sp;
			one.buffer_length = len[k] + 1;
			if (!null[k] && len[k] > 0 && mysql_stmt_fetch_column(st,
			    &one, (unsigned)k, 0) != 0)
				return IDEM_ERR_STORE;
			(*s[k].sp)[null[k] ? 0 : len[k]] = '\0';
			if (s[k].lenp != NULL)
				*s[k].lenp = null[k] ? 0 : len[k];
		}
	}
	return IDEM_OK;
}

/* Fetches the next row of st into the variables of out from ap. */
static idem_err
fetch(idem_mysql_conn *c, size_t i, MYSQL_STMT *st, const char *out,
    va_list *ap)
{
	out_slot s[QUERY_MAX];
	MYSQL_BIND b[QUERY_MAX];
	unsigned long len[QUERY_MAX];
	my_bool null[QUERY_MAX], error[QUERY_MAX];
	idem_err err;
	int n, rc;

	memset(len, 0, sizeof(len));
	memset(null, 0, sizeof(null));
	memset(error, 0, sizeof(error));
	if (mysql_stmt_field_count(st) == 0)
		return bad_format(i, out, "the statement returns no rows");
	if (out == NULL || (n = parse_out(out, ap, s)) < 0)
		return bad_format(i, out, "a column is one of i u s S b, each "
		    "after an optional ?, with a buffer of at least a byte");
	if ((unsigned)n != mysql_stmt_field_count(st)) {
		mysql_stmt_free_result(st);
		return bad_format(i, out, "not as many columns as the "
		    "statement's result");
	}
	bind_out(s, n, b, len, null, error);
	if (n > 0 && mysql_stmt_bind_result(st, b) != 0) {
		mysql_stmt_free_result(st);
		return failed(c, i, st);
	}
	rc = mysql_stmt_fetch(st);
	if (rc == MYSQL_NO_DATA) {
		mysql_stmt_free_result(st);
		return IDEM_ERR_NOT_FOUND;
	}
	if (rc == 1) {
		err = failed(c, i, st);
		mysql_stmt_free_result(st);
		return err;
	}
	/* MYSQL_DATA_TRUNCATED: finish_row tells which column, if any (an
	 * S column's is expected: it is read next) */
	if ((err = finish_row(i, st, s, n, b, len, null, error)) != IDEM_OK) {
		drop_out(s, n);
		mysql_stmt_free_result(st);
	}
	return err;
}

idem_err
idem_mysql_vfetch(idem_mysql_conn *c, size_t i, const char *out, va_list *ap)
{
	MYSQL_STMT *st = stmt_of(c, i);

	idem_db_null_texts(NULL, out, ap);
	return st != NULL ? fetch(c, i, st, out, ap) : IDEM_ERR_INVALID;
}

idem_err
idem_mysql_fetch(idem_mysql_conn *c, size_t i, const char *out, ...)
{
	va_list ap;
	idem_err err;

	va_start(ap, out);
	err = idem_mysql_vfetch(c, i, out, &ap);
	va_end(ap);
	return err;
}

idem_err
idem_mysql_vone(idem_mysql_conn *c, size_t i, const char *in, const char *out,
    va_list *ap)
{
	MYSQL_STMT *st = stmt_of(c, i);
	idem_err err;

	idem_db_null_texts(in, out, ap);
	if (st == NULL)
		return IDEM_ERR_INVALID;
	/* run takes the parameters off ap, fetch the variables after them */
	if ((err = run(c, i, st, in, ap)) == IDEM_OK)
		err = fetch(c, i, st, out, ap);
	mysql_stmt_free_result(st);
	return err;
}

idem_err
idem_mysql_one(idem_mysql_conn *c, size_t i, const char *in, const char *out,
    ...)
{
	va_list ap;
	idem_err err;

	va_start(ap, out);
	err = idem_mysql_vone(c, i, in, out, &ap);
	va_end(ap);
	return err;
}

unsigned long long
idem_mysql_affected(idem_mysql_conn *c, size_t i)
{
	MYSQL_STMT *st = c != NULL ? idem_mysql_stmt(c, i) : NULL;

	return st != NULL ? (unsigned long long)mysql_stmt_affected_rows(st) : 0;
}

unsigned long long
idem_mysql_insert_id(idem_mysql_conn *c, size_t i)
{
	MYSQL_STMT *st = c != NULL ? idem_mysql_stmt(c, i) : NULL;

	return st != NULL ? (unsigned long long)mysql_stmt_insert_id(st) : 0;
}
