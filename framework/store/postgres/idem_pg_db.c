/*
 * idem_pg_db.c - a PostgreSQL pool as a data source of the data API
 * (idemfcgi_db.h): its operations (idem_db_ops) and the statement helper,
 * whose parameters go as text (bytes as binary) and whose rows come back
 * as text, read into the caller's variables whatever the column's type.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "idem_log.h"
#include "idem_pg_db.h"

/* Most parameters or columns one call binds (as the MySQL helper). */
#define QUERY_MAX 32
/* The type of a bytea column (pg_type.oid), whose text is escaped. */
#define BYTEA_OID 17

/* What the helper holds of one statement on one connection. */
typedef struct pg_rows {
	PGresult *res;               /* its latest rows; NULL: none */
	int next;                    /* the next row to fetch */
	unsigned long long affected; /* rows its latest run changed or
	                              * returned */
} pg_rows;

typedef struct pg_db {
	idem_db base;                /* first: what the data API sees */
	idem_pg_pool *pool;
	const char **sql;            /* the pool's statements: the plugin's
	                              * numbered (owned), then the extra ones
	                              * (borrowed) */
	int *nparams;                /* each plugin statement's parameters */
	size_t nsql, nextra;
	unsigned size;
	uint64_t lock_ms;            /* the sessions' lock_timeout */
	pg_rows *rows;               /* size * nsql: connection-major */
	int *lost;                   /* by connection: a deadlock or a
	                              * serialization failure rolled its
	                              * transaction back since last asked */
	idem_pg_txid *txid;          /* by connection: its transaction */
} pg_db;

static const idem_db_ops pg_db_ops;

/* ------------------------------------------------ numbering placeholders */

/* The length of the dollar quote's tag opening at s ("$tag$" or "$$"),
 * or 0 when s opens none. */
static size_t
dollar_tag(const char *s)
{
	size_t n = 1;

	if (s[0] != '$')
		return 0;
	if (s[1] >= '0' && s[1] <= '9')
		return 0;            /* a parameter, $1 */
	while (s[n] == '_' || (s[n] >= 'a' && s[n] <= 'z') ||
	    (s[n] >= 'A' && s[n] <= 'Z') || (s[n] >= '0' && s[n] <= '9') ||
	    (unsigned char)s[n] >= 0x80)
		n++;
	return s[n] == '$' ? n + 1 : 0;
}

/* Where the literal, name or comment opening at s ends (one past it), or
 * s itself when none opens there. */
static const char *
skip_quoted(const char *sql, const char *s)
{
	size_t tag;
	int depth;

	if (*s == '\'' || *s == '"') {
		char q = *s;
		/* E'...' takes backslash escapes */
		int esc = q == '\'' && s > sql && (s[-1] == 'E' || s[-1] == 'e');

		for (s++; *s != '\0'; s++) {
			if (esc && *s == '\\' && s[1] != '\0')
				s++;
			else if (*s == q && s[1] == q)
				s++;
			else if (*s == q)
				return s + 1;
		}
		return s;
	}
	if (s[0] == '-' && s[1] == '-') {
		s += strcspn(s, "\n");
		return s;
	}
	if (s[0] == '/' && s[1] == '*') {
		for (depth = 1, s += 2; *s != '\0' && depth > 0; s++) {
			if (s[0] == '/' && s[1] == '*')
				depth++, s++;
			else if (s[0] == '*' && s[1] == '/')
				depth--, s++;
		}
		return s;
	}
	if ((tag = dollar_tag(s)) > 0) {
		const char *end = s + tag;

		while ((end = strchr(end, '$')) != NULL &&
		    strncmp(end, s, tag) != 0)
			end++;
		return end != NULL ? end + tag : s + strlen(s);
	}
	return s;
}

idem_err
idem_pg_number_params(const char *sql, char **out, int *n)
{
	size_t len = strlen(sql), q = 0;
	const char *s, *end;
	int highest = 0;
	char *o, *w;

	for (s = sql; *s != '\0'; ) {
		if ((end = skip_quoted(sql, s)) != s) {
			s = end;
			continue;
		}
		if (*s == '?')
			q++;
		else if (*s == '$' && s[1] >= '1' && s[1] <= '9') {
			long v = strtol(s + 1, NULL, 10);
			highest = v > highest && v < 65536 ? (int)v : highest;
		}
		s++;
	}
	if (q > 0 && highest > 0)
		return IDEM_ERR_INVALID;
	/* each '?' becomes at most "$65535" */
	if ((o = malloc(len + q * 6 + 1)) == NULL)
		return IDEM_ERR_NOMEM;
	for (s = sql, w = o, q = 0; *s != '\0'; ) {
		if ((end = skip_quoted(sql, s)) != s) {
			memcpy(w, s, (size_t)(end - s));
			w += end - s;
			s = end;
			continue;
		}
		if (*s == '?') {
			w += sprintf(w, "$%zu", ++q);
			s++;
		} else
			*w++ = *s++;
	}
	*w = '\0';
	*out = o;
	*n = q > 0 ? (int)q : highest;
	return IDEM_OK;
}

/* ----------------------------------------------------------- the source */

static pg_db *
db_of(idem_db *db)
{
	return (pg_db *)db;
}

/* What the helper holds of statement i on c. */
static pg_rows *
rows_of(pg_db *d, idem_pg_conn *c, size_t i)
{
	return &d->rows[(size_t)idem_pg_conn_index(c) * d->nsql + i];
}

void
idem_pg_db_drop_rows(idem_db_conn *dc)
{
	pg_db *d = db_of(dc->source);
	idem_pg_conn *c = idem_pg_of(dc);
	size_t i;

	for (i = 0; i < d->nsql; i++) {
		pg_rows *r = rows_of(d, c, i);

		PQclear(r->res);
		r->res = NULL;
	}
}

/* A connection of d for a caller, as a neutral one (NULL: none). */
static idem_db_conn *
take_of(pg_db *d)
{
	idem_pg_conn *c = idem_pg_get(d->pool);

	if (c == NULL)
		return NULL;
	c->db.source = &d->base;
	d->lost[idem_pg_conn_index(c)] = 0;
	return &c->db;
}

static idem_db_conn *
pg_take(idem_db *db)
{
	return take_of(db_of(db));
}

static idem_db_conn *
pg_get(idem_db *db)
{
	idem_db_conn *dc = take_of(db_of(db));
	idem_pg_conn *c;

	if (dc == NULL)
		return NULL;
	/* nobody leaves a transaction open (put closes such a one) */
	c = idem_pg_of(dc);
	if (PQtransactionStatus(c->pg) != PQTRANS_IDLE &&
	    idem_pg_reopen(c) != 0) {
		idem_pg_put(c->pool, c);
		return NULL;
	}
	return dc;
}

static void
pg_put(idem_db *db, idem_db_conn *dc)
{
	idem_pg_conn *c = idem_pg_of(dc);

	idem_pg_db_drop_rows(dc);
	/* a transaction left open would be the next user's: closed with its
	 * connection, which the server rolls back */
	if (c->pg != NULL && !c->broken &&
	    PQtransactionStatus(c->pg) != PQTRANS_IDLE) {
		idem_log(NULL, IDEM_LOG_ERROR, "postgres: a connection was put "
		    "back inside a transaction: closed, which rolls it back");
		c->broken = 1;
	}
	idem_pg_put(db_of(db)->pool, c);
}

static void
pg_free(idem_db *db)
{
	pg_db *d = db_of(db);
	size_t i;

	if (d->pool != NULL)
		idem_pg_pool_free(d->pool);
	for (i = 0; d->sql != NULL && i < d->nsql; i++)
		free((char *)d->sql[i]);
	for (i = 0; d->rows != NULL && i < (size_t)d->size * d->nsql; i++)
		PQclear(d->rows[i].res);
	free(d->sql);
	free(d->nparams);
	free(d->rows);
	free(d->lost);
	free(d->txid);
	free(d);
}

static int
pg_tx_lost(idem_db_conn *dc)
{
	pg_db *d = db_of(dc->source);
	unsigned k = idem_pg_conn_index(idem_pg_of(dc));
	int lost = d->lost[k];

	d->lost[k] = 0;
	return lost;
}

static int
pg_tx_intact(idem_db_conn *dc)
{
	idem_pg_conn *c = idem_pg_of(dc);
	PGTransactionStatusType st;

	if (c->pg == NULL)
		return 0;
	/* aborted by a failed statement, it is still open: what ends it is
	 * the store's ROLLBACK */
	st = PQtransactionStatus(c->pg);
	return st == PQTRANS_INTRANS || st == PQTRANS_INERROR;
}

static int
pg_broken(idem_db_conn *dc)
{
	idem_pg_conn *c = idem_pg_of(dc);

	return c->broken || c->pg == NULL;
}

/* -------------------------------------------------- the statement helper */

/* Logs a format that does not fit statement i (a bug of the plugin's).
 * Returns IDEM_ERR_INVALID. */
static idem_err
bad_format(size_t i, const char *fmt, const char *why)
{
	idem_log(NULL, IDEM_LOG_ERROR, "postgres statement %zu, format \"%s\": "
	    "%s", i, fmt != NULL ? fmt : "(null)", why);
	return IDEM_ERR_INVALID;
}

/* Whether statement i is the plugin's, else logs.  1 or 0. */
static int
known(const pg_db *d, size_t i)
{
	if (i < d->nsql)
		return 1;
	idem_log(NULL, IDEM_LOG_ERROR, "postgres statement %zu: no such "
	    "statement", i);
	return 0;
}

/* The parameters' texts: numbers written into num. */
typedef struct pg_in {
	const char *values[QUERY_MAX];
	int lengths[QUERY_MAX], formats[QUERY_MAX];
	char num[QUERY_MAX][24];
} pg_in;

/* Binds the parameters of format in from ap into b.  Returns how many,
 * or -1 for a character that is no conversion, or more than QUERY_MAX. */
static int
bind_in(const char *in, va_list *ap, pg_in *b)
{
	int n = 0;

	for (; *in != '\0'; in++, n++) {
		if (n == QUERY_MAX || strchr("sbiun", *in) == NULL)
			return -1;
		b->lengths[n] = 0;
		b->formats[n] = 0;
		switch (*in) {
		case 's':
			b->values[n] = va_arg(*ap, const char *);
			break;
		case 'b':
			b->values[n] = va_arg(*ap, const char *);
			b->lengths[n] = (int)va_arg(*ap, size_t);
			b->formats[n] = 1;
			break;
		case 'i':
			snprintf(b->num[n], sizeof(b->num[n]), "%lld",
			    va_arg(*ap, long long));
			b->values[n] = b->num[n];
			break;
		case 'u':
			snprintf(b->num[n], sizeof(b->num[n]), "%llu",
			    va_arg(*ap, unsigned long long));
			b->values[n] = b->num[n];
			break;
		default: /* 'n' */
			b->values[n] = NULL;
		}
	}
	return n;
}

/* After statement i failed on c with err: tells the connection (a
 * transaction the server rolled back) and logs an outage.  Returns
 * err. */
static idem_err
failed(pg_db *d, idem_pg_conn *c, size_t i, idem_err err)
{
	char what[48];

	/* contention aborts the whole transaction, as MySQL's deadlock
	 * does: a deadlock, a serialization failure, and on PostgreSQL a
	 * lock wait too (every failure aborts it; these are the ones another
	 * attempt may not meet) */
	if (idem_pg_error_code(c->state) == IDEM_ERR_BUSY)
		d->lost[idem_pg_conn_index(c)] = 1;
	if (err == IDEM_ERR_STORE) {
		snprintf(what, sizeof(what), "statement %zu", i);
		idem_pg_log_error(c, what);
	}
	return err;
}

/* Runs statement i of c with the parameters of in from ap; its rows are
 * kept for fetch. */
static idem_err
run(pg_db *d, idem_pg_conn *c, size_t i, const char *in, va_list *ap)
{
	pg_rows *r = rows_of(d, c, i);
	const char *tuples;
	PGresult *res;
	idem_err err;
	pg_in b;
	int n;

	PQclear(r->res);
	r->res = NULL;
	r->next = 0;
	r->affected = 0;
	if (in == NULL || (n = bind_in(in, ap, &b)) < 0)
		return bad_format(i, in, "a parameter is one of s b i u n, "
		    "at most 32");
	if (n != d->nparams[i])
		return bad_format(i, in, "not as many parameters as the "
		    "statement's placeholders");
	if ((err = idem_pg_exec_params(c, i, n, b.values, b.lengths,
	    b.formats, 0, d->lock_ms, &res, NULL)) != IDEM_OK)
		return failed(d, c, i, err);
	tuples = PQcmdTuples(res);
	r->affected = tuples[0] != '\0' ? strtoull(tuples, NULL, 10) : 0;
	if (PQresultStatus(res) == PGRES_TUPLES_OK)
		r->res = res;
	else
		PQclear(res);
	return IDEM_OK;
}

/* One conversion of an out format, with the caller's variables. */
typedef struct out_slot {
	char conv;                 /* i u s S b */
	int *is_null;
	long long *ip;
	unsigned long long *up;
	void *buf;
	size_t size;
	size_t *lenp;
	char **sp;
} out_slot;

/* Reads the conversions of out from ap into s.  Returns how many, or -1
 * for a malformed format or a NULL variable (or a buffer of size 0). */
static int
parse_out(const char *out, va_list *ap, out_slot *s)
{
	int n = 0;

	for (; *out != '\0'; out++, n++) {
		if (n == QUERY_MAX)
			return -1;
		memset(&s[n], 0, sizeof(s[n]));
		if (*out == '?') {
			if ((s[n].is_null = va_arg(*ap, int *)) == NULL)
				return -1;
			if (*++out == '\0')
				return -1;
		}
		s[n].conv = *out;
		switch (*out) {
		case 'i':
			if ((s[n].ip = va_arg(*ap, long long *)) == NULL)
				return -1;
			break;
		case 'u':
			if ((s[n].up = va_arg(*ap, unsigned long long *)) == NULL)
				return -1;
			break;
		case 's':
			s[n].buf = va_arg(*ap, char *);
			s[n].size = va_arg(*ap, size_t);
			if (s[n].buf == NULL || s[n].size == 0)
				return -1;
			break;
		case 'S':
			s[n].sp = va_arg(*ap, char **);
			s[n].lenp = va_arg(*ap, size_t *);
			if (s[n].sp == NULL)
				return -1;
			break;
		case 'b':
			s[n].buf = va_arg(*ap, void *);
			s[n].size = va_arg(*ap, size_t);
			s[n].lenp = va_arg(*ap, size_t *);
			if (s[n].buf == NULL || s[n].lenp == NULL)
				return -1;
			break;
		default:
			return -1;
		}
	}
	return n;
}

/* Frees the S buffers of the n slots of s, and sets them to NULL. */
static void
drop_out(out_slot *s, int n)
{
	for (int k = 0; k < n; k++)
		if (s[k].conv == 'S' && *s[k].sp != NULL) {
			free(*s[k].sp);
			*s[k].sp = NULL;
		}
}

/* Reads the integer text v (a bool's "t" or "f" is 1 or 0) into *ll or
 * *ull (unsigned).  Returns IDEM_OK, IDEM_ERR_TOO_LARGE (out of range)
 * or IDEM_ERR_INVALID (not an integer: a fraction, a word). */
static idem_err
read_int(const char *v, int is_unsigned, long long *ll,
    unsigned long long *ull)
{
	char *end;

	if (strcmp(v, "t") == 0 || strcmp(v, "f") == 0) {
		*ll = v[0] == 't';
		*ull = (unsigned long long)*ll;
		return IDEM_OK;
	}
	errno = 0;
	if (is_unsigned) {
		if (v[0] == '-')
			return strspn(v + 1, "0") == strlen(v + 1) &&
			    v[1] != '\0' ? (*ull = 0, IDEM_OK) :
			    IDEM_ERR_TOO_LARGE;
		*ull = strtoull(v, &end, 10);
	} else
		*ll = strtoll(v, &end, 10);
	/* a numeric's whole value ("42.00") is an integer */
	if (*end == '.' && end > v && strspn(end + 1, "0") == strlen(end + 1))
		end += strlen(end);
	if (end == v || *end != '\0')
		return IDEM_ERR_INVALID;
	return errno == ERANGE ? IDEM_ERR_TOO_LARGE : IDEM_OK;
}

/* Reads column k of row row of res into slot s. */
static idem_err
read_column(size_t i, const PGresult *res, int row, int k, out_slot *s)
{
	int null = PQgetisnull(res, row, k);
	const char *v = PQgetvalue(res, row, k);
	size_t len = (size_t)PQgetlength(res, row, k);
	unsigned char *raw = NULL;
	unsigned long long u = 0;
	long long ll = 0;
	idem_err err;

	if (s->is_null != NULL)
		*s->is_null = null;
	if (null && s->is_null == NULL) {
		idem_log(NULL, IDEM_LOG_ERROR, "postgres statement %zu: column "
		    "%d is NULL, and its conversion has no ?", i, k + 1);
		return IDEM_ERR_INVALID;
	}
	if (null)
		v = "", len = 0;
	else if (PQftype(res, k) == BYTEA_OID && strchr("sSb", s->conv)) {
		if ((raw = PQunescapeBytea((const unsigned char *)v, &len)) ==
		    NULL)
			return IDEM_ERR_NOMEM;
		v = (const char *)raw;
	}
	err = IDEM_OK;
	switch (s->conv) {
	case 'i':
	case 'u':
		if (!null && (err = read_int(v, s->conv == 'u', &ll, &u)) ==
		    IDEM_ERR_INVALID)
			idem_log(NULL, IDEM_LOG_ERROR, "postgres statement %zu: "
			    "column %d (\"%.32s\") is no integer", i, k + 1, v);
		if (s->conv == 'i')
			*s->ip = err == IDEM_OK ? ll : 0;
		else
			*s->up = err == IDEM_OK ? u : 0;
		break;
	case 's':
		if (len > s->size - 1 || memchr(v, '\0', len) != NULL)
			err = IDEM_ERR_TOO_LARGE;
		else {
			memcpy(s->buf, v, len);
			((char *)s->buf)[len] = '\0';
		}
		break;
	case 'b':
		if (len > s->size)
			err = IDEM_ERR_TOO_LARGE;
		else {
			memcpy(s->buf, v, len);
			*s->lenp = len;
		}
		break;
	default: /* 'S' */
		if ((*s->sp = malloc(len + 1)) == NULL)
			err = IDEM_ERR_NOMEM;
		else {
			memcpy(*s->sp, v, len);
			(*s->sp)[len] = '\0';
			if (s->lenp != NULL)
				*s->lenp = len;
		}
	}
	PQfreemem(raw);
	return err;
}

/* Fetches the next row of statement i on c into the variables of out
 * from ap. */
static idem_err
fetch(pg_db *d, idem_pg_conn *c, size_t i, const char *out, va_list *ap)
{
	pg_rows *r = rows_of(d, c, i);
	out_slot s[QUERY_MAX];
	idem_err err = IDEM_OK;
	int n, k;

	if (r->res == NULL)
		return IDEM_ERR_NOT_FOUND;
	if (out == NULL || (n = parse_out(out, ap, s)) < 0)
		return bad_format(i, out, "a column is one of i u s S b, each "
		    "after an optional ?, with a buffer of at least a byte");
	if (n != PQnfields(r->res)) {
		PQclear(r->res);
		r->res = NULL;
		return bad_format(i, out, "not as many columns as the "
		    "statement's result");
	}
	if (r->next >= PQntuples(r->res)) {
		PQclear(r->res);
		r->res = NULL;
		return IDEM_ERR_NOT_FOUND;
	}
	for (k = 0; k < n && err == IDEM_OK; k++)
		err = read_column(i, r->res, r->next, k, &s[k]);
	r->next++;
	if (err != IDEM_OK) {
		drop_out(s, n);
		PQclear(r->res);
		r->res = NULL;
	}
	return err;
}

static idem_err
pg_run(idem_db_conn *dc, size_t i, const char *in, va_list *ap)
{
	pg_db *d = db_of(dc->source);

	return known(d, i) ? run(d, idem_pg_of(dc), i, in, ap) :
	    IDEM_ERR_INVALID;
}

static idem_err
pg_fetch(idem_db_conn *dc, size_t i, const char *out, va_list *ap)
{
	pg_db *d = db_of(dc->source);

	idem_db_null_texts(NULL, out, ap);
	return known(d, i) ? fetch(d, idem_pg_of(dc), i, out, ap) :
	    IDEM_ERR_INVALID;
}

static idem_err
pg_one(idem_db_conn *dc, size_t i, const char *in, const char *out,
    va_list *ap)
{
	pg_db *d = db_of(dc->source);
	idem_pg_conn *c = idem_pg_of(dc);
	idem_err err;

	idem_db_null_texts(in, out, ap);
	if (!known(d, i))
		return IDEM_ERR_INVALID;
	/* run takes the parameters off ap, fetch the variables after them */
	if ((err = run(d, c, i, in, ap)) == IDEM_OK) {
		if (rows_of(d, c, i)->res == NULL)
			err = bad_format(i, out, "the statement returns no rows");
		else
			err = fetch(d, c, i, out, ap);
	}
	PQclear(rows_of(d, c, i)->res);
	rows_of(d, c, i)->res = NULL;
	return err;
}

static unsigned long long
pg_affected(idem_db_conn *dc, size_t i)
{
	pg_db *d = db_of(dc->source);

	return i < d->nsql ? rows_of(d, idem_pg_of(dc), i)->affected : 0;
}

static const idem_db_ops pg_db_ops = {
	.take = pg_take,
	.get = pg_get,
	.put = pg_put,
	.free = pg_free,
	.tx_lost = pg_tx_lost,
	.tx_intact = pg_tx_intact,
	.broken = pg_broken,
	.run = pg_run,
	.fetch = pg_fetch,
	.one = pg_one,
	.affected = pg_affected,
	.insert_id = NULL,   /* PostgreSQL: RETURNING gives it as a row */
};

idem_err
idem_pg_db_new(const idem_config_postgres *pg, const char *file,
    const char *const *sql, size_t nsql, const char *const *extra,
    size_t nextra, unsigned size, const char *options, uint64_t lock_ms,
    idem_db **out)
{
	pg_db *d = calloc(1, sizeof(*d));
	idem_err err = IDEM_ERR_NOMEM;
	size_t i;

	*out = NULL;
	if (d == NULL)
		return IDEM_ERR_NOMEM;
	d->base.ops = &pg_db_ops;
	d->base.dialect = IDEM_DB_POSTGRES;
	d->size = size > 0 ? size : 1;
	d->lock_ms = lock_ms;
	d->sql = calloc(nsql + nextra + 1, sizeof(*d->sql));
	d->nparams = calloc(nsql + 1, sizeof(*d->nparams));
	d->rows = calloc((size_t)d->size * nsql + 1, sizeof(*d->rows));
	d->lost = calloc(d->size, sizeof(*d->lost));
	d->txid = calloc(d->size, sizeof(*d->txid));
	if (d->sql == NULL || d->nparams == NULL || d->rows == NULL ||
	    d->lost == NULL || d->txid == NULL)
		goto fail;
	for (i = 0; i < nsql; i++) {
		char *text;

		if ((err = idem_pg_number_params(sql[i], &text,
		    &d->nparams[i])) != IDEM_OK) {
			if (err == IDEM_ERR_INVALID)
				idem_log(NULL, IDEM_LOG_ERROR, "postgres statement "
				    "%zu: both ? and $n placeholders; write one "
				    "kind", i);
			goto fail;
		}
		d->sql[i] = text;
		d->nsql = i + 1;
	}
	for (i = 0; i < nextra; i++)
		d->sql[nsql + i] = extra[i];
	d->nextra = nextra;
	if ((err = idem_pg_pool_new(pg, file, d->sql, nsql + nextra, d->size,
	    options, &d->pool)) != IDEM_OK)
		goto fail;
	*out = &d->base;
	return IDEM_OK;
fail:
	pg_free(&d->base);
	return err;
}

idem_pg_txid *
idem_pg_db_txid(idem_db_conn *c)
{
	return &db_of(c->source)->txid[idem_pg_conn_index(idem_pg_of(c))];
}

size_t
idem_pg_db_extra(const idem_db *db, size_t i)
{
	return ((const pg_db *)db)->nsql + i;
}

/* The session lock every instance's DDL takes (an arbitrary number,
 * idemfcgi's own): PostgreSQL's CREATE ... IF NOT EXISTS run by two
 * sessions at once may fail on the catalog's unique index. */
#define DDL_LOCK "4954611037"
/* How long the lock and the DDL may take on top of the timeouts (ms):
 * another instance's deploy may run slow DDL (an index on a big table) */
#define DDL_WAIT_MS 120000

idem_err
idem_pg_db_exec(const idem_config_postgres *pg, const char *file,
    const char *sql)
{
	static const idem_pg_params none = { 0 };
	const char *steps[3] = { "SELECT pg_advisory_lock(" DDL_LOCK ")", sql,
	    "SELECT pg_advisory_unlock(" DDL_LOCK ")" };
	idem_pg_pool *p;
	idem_pg_conn *c;
	PGresult *res;
	idem_err err;
	size_t i;

	if ((err = idem_pg_pool_new(pg, file, steps, 3, 1, NULL, &p)) != IDEM_OK)
		return err;
	/* a statement that does not prepare is logged by the pool; the lock
	 * goes with the connection */
	if ((c = idem_pg_get(p)) == NULL)
		err = IDEM_ERR_STORE;
	for (i = 0; c != NULL && i < 3 && err == IDEM_OK; i++) {
		if ((err = idem_pg_exec(c, i, &none, DDL_WAIT_MS, &res, NULL)) !=
		    IDEM_OK)
			idem_pg_log_error(c, i != 1 ? "the lock of DDL" :
			    "statement");
		PQclear(res);
	}
	if (c != NULL)
		idem_pg_put(p, c);
	idem_pg_pool_free(p);
	return err;
}
