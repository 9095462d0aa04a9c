/*
 * idem_pg.c - the PostgreSQL connection pool: non-blocking libpq, every
 * wait for the server a poll(2) bounded by the [postgres] timeouts.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <libpq-fe.h>

#include "idem_log.h"
#include "idem_secret.h"
#include "idem_parse.h"
#include "idem_pg.h"
#include "idem_time.h"

struct idem_pg_pool {
	idem_endpoint ends[IDEM_ENDPOINTS_MAX]; /* [postgres] host, in
	                             * failover order */
	size_t nends;
	atomic_int last_end;        /* the host the latest connection opened
	                             * on (-1: none yet): where the next one
	                             * starts, and each switch is logged */
	char *user, *password, *database, *options;
	const char *sslmode;        /* static */
	uint64_t connect_ms, read_ms, write_ms, wait_ms;
	const char *const *sql;
	size_t nsql;
	pthread_mutex_t lock;
	pthread_cond_t freed;
	idem_pg_conn *conns;        /* size of them */
	idem_pg_conn **idle;        /* a stack of free ones */
	unsigned size, nidle;
	atomic_llong last_log;      /* ms of the last error logged */
	int quiet;                  /* logs no error (idem_pg_pool_quiet) */
	atomic_ullong last_state;   /* the SQLSTATE of the latest failure,
	                             * its 5 bytes packed; 0: none */
	atomic_int opened;          /* a server ever accepted a connection */
};

/* Whether an error may be logged now (one every 5 s per pool). */
static int
may_log(idem_pg_pool *p)
{
	long long now = (long long)idem_now_ms(), last = atomic_load(&p->last_log);

	return !p->quiet && now - last >= 5000 &&
	    atomic_compare_exchange_strong(&p->last_log, &last, now);
}

/* Records state (5 characters, or "") as p's latest failure. */
static void
set_last_state(idem_pg_pool *p, const char *state)
{
	unsigned long long v = 0;
	size_t i;

	for (i = 0; i < 5 && state[i] != '\0'; i++)
		v |= (unsigned long long)(unsigned char)state[i] << (8 * i);
	atomic_store(&p->last_state, v);
}

void
idem_pg_pool_last_state(idem_pg_pool *p, char state[6])
{
	unsigned long long v = atomic_load(&p->last_state);
	size_t i;

	for (i = 0; i < 5; i++)
		state[i] = (char)((v >> (8 * i)) & 0xff);
	state[5] = '\0';
}

int
idem_pg_pool_opened(idem_pg_pool *p)
{
	return atomic_load(&p->opened);
}

/* Copies msg, its last newline cut, into c's error. */
static void
set_error(idem_pg_conn *c, const char *msg)
{
	size_t n;

	snprintf(c->error, sizeof(c->error), "%s", msg != NULL && *msg != '\0'
	    ? msg : "connection lost");
	n = strlen(c->error);
	while (n > 0 && (c->error[n - 1] == '\n' || c->error[n - 1] == ' '))
		c->error[--n] = '\0';
}

void
idem_pg_log_error(idem_pg_conn *c, const char *what)
{
	if (may_log(c->pool))
		idem_log(NULL, IDEM_LOG_ERROR, "postgres %s: %s%s%s%s", what,
		    c->error, c->state[0] != '\0' ? " (SQLSTATE " : "",
		    c->state, c->state[0] != '\0' ? ")" : "");
}

idem_err
idem_pg_error_code(const char *state)
{
	static const struct { const char *state; idem_err err; } map[] = {
		{ "40001", IDEM_ERR_BUSY },      /* serialization_failure */
		{ "40P01", IDEM_ERR_BUSY },      /* deadlock_detected */
		{ "55P03", IDEM_ERR_BUSY },      /* lock_not_available:
		                                  * lock_timeout */
		{ "23505", IDEM_ERR_EXISTS },    /* unique_violation */
		{ "22001", IDEM_ERR_TOO_LARGE }, /* string_data_right_
		                                  * truncation */
		{ "22003", IDEM_ERR_TOO_LARGE }, /* numeric_value_out_of_
		                                  * range */
		{ "54000", IDEM_ERR_TOO_LARGE }, /* program_limit_exceeded:
		                                  * a value over 1 GB */
		{ "53200", IDEM_ERR_STORE },     /* out_of_memory */
	};
	size_t i;

	if (state == NULL || state[0] == '\0')
		return IDEM_ERR_STORE;
	for (i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (strcmp(state, map[i].state) == 0)
			return map[i].err;
	return IDEM_ERR_STORE;
}

/* Whether SQLSTATE state means the session is no use any more: a
 * connection error (class 08), a server shutting down or starting
 * (57P01-57P03; 57P01 admin_shutdown is also what pg_terminate_backend
 * sends), a read-only server (25006: a standby, or a primary demoted
 * under us), or a session that lost its prepared statements (26000:
 * DISCARD ALL, a pooler in between): another connection, opened and
 * prepared anew, may be served, perhaps by another host. */
static int
session_lost(const char *state)
{
	return state[0] == '\0' || strncmp(state, "08", 2) == 0 ||
	    strcmp(state, "57P01") == 0 || strcmp(state, "57P02") == 0 ||
	    strcmp(state, "57P03") == 0 || strcmp(state, "25006") == 0 ||
	    strcmp(state, "26000") == 0;
}

static char *
dup_or_null(const char *s)
{
	return s != NULL ? strdup(s) : NULL;
}

idem_err
idem_pg_pool_new(const idem_config_postgres *pg, const char *file,
    const char *const *sql, size_t nsql, unsigned size, const char *options,
    idem_pg_pool **out)
{
	idem_pg_pool *p = calloc(1, sizeof(*p));
	idem_err err;
	unsigned i;

	if (p == NULL)
		return IDEM_ERR_NOMEM;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->freed, NULL);
	atomic_init(&p->last_end, -1);
	p->size = size > 0 ? size : 1;
	p->sql = sql;
	p->nsql = nsql;
	if (idem_parse_endpoints(pg->host != NULL ? pg->host : "127.0.0.1", 0,
	    pg->port > 0 ? pg->port : 5432, p->ends, &p->nends) != NULL) {
		/* the config checked it */
		idem_pg_pool_free(p);
		return IDEM_ERR_CONFIG;
	}
	/* a config made without the key table (tests) has 0 */
	p->connect_ms = pg->connect_timeout > 0 ? pg->connect_timeout : 2000;
	p->read_ms = pg->read_timeout > 0 ? pg->read_timeout : 5000;
	p->write_ms = pg->write_timeout > 0 ? pg->write_timeout : 5000;
	p->wait_ms = p->connect_ms + p->read_ms;
	p->sslmode = idem_pg_sslmode_names[pg->sslmode < IDEM_PG_SSL__MAX ?
	    pg->sslmode : IDEM_PG_SSL_PREFER];
	p->user = dup_or_null(pg->user);
	p->database = dup_or_null(pg->database);
	p->options = dup_or_null(options);
	p->conns = calloc(p->size, sizeof(*p->conns));
	p->idle = calloc(p->size, sizeof(*p->idle));
	if (p->conns == NULL || p->idle == NULL ||
	    (options != NULL && p->options == NULL)) {
		idem_pg_pool_free(p);
		return IDEM_ERR_NOMEM;
	}
	for (i = 0; i < p->size; i++) {
		p->conns[i].pool = p;
		p->idle[p->nidle++] = &p->conns[i];
	}
	if ((err = idem_password_read(pg->password_file,
	    "IDEMFCGI_POSTGRES_PASSWORD", "[postgres] password-file", file,
	    &p->password)) != IDEM_OK) {
		idem_pg_pool_free(p);
		return err;
	}
	*out = p;
	return IDEM_OK;
}

void
idem_pg_pool_quiet(idem_pg_pool *p)
{
	p->quiet = 1;
}

/* Closes c's connection. */
static void
disconnect(idem_pg_conn *c)
{
	if (c->pg != NULL)
		PQfinish(c->pg);
	c->pg = NULL;
	c->broken = 0;
}

/*
 * Waits until c's socket is ready for events (POLLIN, POLLOUT) or the
 * CLOCK_MONOTONIC deadline (ms) passes.  A deadline that passed while
 * this thread was busy (libpq's SCRAM, a machine short of CPU) still
 * gets one look at the socket: what the server sent in time counts, so
 * the timeouts measure the server, never the caller's own CPU.  Returns
 * the events that came (0: the deadline passed), or -1 when the socket
 * failed.
 */
static int
wait_io(PGconn *pg, short events, uint64_t deadline)
{
	struct pollfd fd;
	int rc, ms;

	fd.fd = PQsocket(pg);
	if (fd.fd < 0)
		return -1;
	fd.events = events;
	for (;;) {
		uint64_t now = idem_now_ms();

		ms = now >= deadline ? 0 : (int)(deadline - now < 60000 ?
		    deadline - now : 60000);
		fd.revents = 0;
		rc = poll(&fd, 1, ms);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0)
			return -1;
		if (rc == 0) {
			if (ms == 0)
				return 0;
			continue;
		}
		if (fd.revents & (POLLERR | POLLNVAL))
			return -1;
		/* a hang-up is read as such by libpq */
		return fd.revents & (events | POLLHUP);
	}
}

/* Marks c broken with msg as its error; returns IDEM_ERR_STORE. */
static idem_err
lost(idem_pg_conn *c, const char *msg)
{
	c->broken = 1;
	c->state[0] = '\0';
	set_error(c, msg);
	set_last_state(c->pool, "");
	return IDEM_ERR_STORE;
}

/* Sends what libpq holds for c's server, waiting for the socket until
 * deadline.  Returns IDEM_OK or IDEM_ERR_STORE (c broken). */
static idem_err
flush(idem_pg_conn *c, uint64_t deadline)
{
	int rc, ev;

	while ((rc = PQflush(c->pg)) == 1) {
		if ((ev = wait_io(c->pg, POLLOUT | POLLIN, deadline)) == 0) {
			c->timed_out = 1;
			return lost(c, "write timed out");
		}
		if (ev < 0)
			return lost(c, PQerrorMessage(c->pg));
		/* the server may answer (an error) before it reads it all */
		if ((ev & POLLIN) && !PQconsumeInput(c->pg))
			return lost(c, PQerrorMessage(c->pg));
	}
	return rc == 0 ? IDEM_OK : lost(c, PQerrorMessage(c->pg));
}

/* The next result of c's command, waiting for it until deadline, into
 * *res (NULL: none is left).  Returns IDEM_OK or IDEM_ERR_STORE (c
 * broken: timed out or lost). */
static idem_err
next_result(idem_pg_conn *c, uint64_t deadline, PGresult **res)
{
	int ev;

	*res = NULL;
	while (PQisBusy(c->pg)) {
		if ((ev = wait_io(c->pg, POLLIN, deadline)) == 0) {
			c->timed_out = 1;
			return lost(c, "read timed out");
		}
		if (ev < 0 || !PQconsumeInput(c->pg))
			return lost(c, PQerrorMessage(c->pg));
	}
	*res = PQgetResult(c->pg);
	return IDEM_OK;
}

/* Whether res is a failure. */
static int
failed(const PGresult *res)
{
	ExecStatusType st = PQresultStatus(res);

	return st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK;
}

/*
 * Waits for the results of the command just sent on c, until the write
 * deadline wdl (for what is left to send) and the read deadline rdl:
 * *res is the first failure among them, else the first result.  A
 * failure may come after a statement's rows or completion: the commit of
 * an autocommit statement follows them, and what fails there (a
 * serialization failure, a deferred constraint, the WAL's write) rolls
 * the statement back.  Returns IDEM_OK (*res a result, which may be a
 * failure) or IDEM_ERR_STORE (c broken, *res NULL).
 */
static idem_err
finish(idem_pg_conn *c, uint64_t wdl, uint64_t rdl, PGresult **res)
{
	PGresult *more;
	idem_err err;

	*res = NULL;
	if ((err = flush(c, wdl)) != IDEM_OK ||
	    (err = next_result(c, rdl, res)) != IDEM_OK)
		return err;
	if (*res == NULL)
		return lost(c, PQerrorMessage(c->pg));
	for (;;) {
		if ((err = next_result(c, rdl, &more)) != IDEM_OK) {
			PQclear(*res);
			*res = NULL;
			return err;
		}
		if (more == NULL)
			return IDEM_OK;
		if (failed(more) && !failed(*res)) {
			PQclear(*res);
			*res = more;
		} else
			PQclear(more);
	}
}

/*
 * What the result res of c's command says: IDEM_OK for rows or a
 * command's completion, else the error its SQLSTATE maps to (c's state
 * and error set; c broken when its session is lost).
 */
static idem_err
result_err(idem_pg_conn *c, const PGresult *res)
{
	const char *state;
	if (!failed(res))
		return IDEM_OK;
	state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	snprintf(c->state, sizeof(c->state), "%s", state != NULL ? state : "");
	set_error(c, PQresultErrorMessage(res));
	set_last_state(c->pool, c->state);
	if (session_lost(c->state) || PQstatus(c->pg) != CONNECTION_OK)
		c->broken = 1;
	return idem_pg_error_code(c->state);
}

/* Writes e as text ("host:port", or a socket directory) into buf. */
static const char *
endpoint_name(const idem_endpoint *e, char *buf, size_t size)
{
	snprintf(buf, size, e->host[0] == '/' ? "%s" : strchr(e->host, ':') !=
	    NULL ? "[%s]:%u" : "%s:%u", e->host, e->port);
	return buf;
}

/* Starts connecting c to e: libpq's parameters, the password never in a
 * connection string.  Returns the connection (NULL: no memory). */
static PGconn *
start_connect(idem_pg_pool *p, const idem_endpoint *e)
{
	const char *keys[12], *vals[12];
	char port[8];
	int n = 0;

	snprintf(port, sizeof(port), "%u", e->port);
	keys[n] = "host"; vals[n++] = e->host;
	keys[n] = "port"; vals[n++] = port;
	keys[n] = "user"; vals[n++] = p->user;
	keys[n] = "dbname"; vals[n++] = p->database;
	if (p->password != NULL) {
		keys[n] = "password";
		vals[n++] = p->password;
	}
	keys[n] = "sslmode"; vals[n++] = p->sslmode;
	keys[n] = "application_name"; vals[n++] = "idemfcgi";
	keys[n] = "client_encoding"; vals[n++] = "UTF8";
	/* a standby is refused (a promoted one is taken) */
	keys[n] = "target_session_attrs"; vals[n++] = "read-write";
	if (p->options != NULL) {
		keys[n] = "options";
		vals[n++] = p->options;
	}
	keys[n] = NULL;
	vals[n] = NULL;
	return PQconnectStartParams(keys, vals, 0);
}

/* Drives c's connection attempt to its end, waiting for the server at
 * most the connect timeout in all: the time libpq computes in between
 * (SCRAM's key derivation, long on a machine short of CPU) is the
 * caller's, not the server's, and is not counted.  Returns NULL, or why
 * not in why. */
static const char *
poll_connect(idem_pg_pool *p, idem_pg_conn *c, char *why, size_t size)
{
	PostgresPollingStatusType st = PGRES_POLLING_WRITING;
	uint64_t left = p->connect_ms, t0, spent;
	int ev;

	if (PQstatus(c->pg) == CONNECTION_BAD) {
		snprintf(why, size, "%s", PQerrorMessage(c->pg));
		return why;
	}
	for (;;) {
		if (st == PGRES_POLLING_OK)
			return NULL;
		if (st == PGRES_POLLING_FAILED) {
			snprintf(why, size, "%s", PQerrorMessage(c->pg));
			return why;
		}
		t0 = idem_now_ms();
		ev = wait_io(c->pg, st == PGRES_POLLING_READING ? POLLIN :
		    POLLOUT, t0 + left);
		spent = idem_now_ms() - t0;
		left = spent < left ? left - spent : 0;
		if (ev == 0) {
			snprintf(why, size, "no answer within connect-timeout "
			    "(%llu ms)", (unsigned long long)p->connect_ms);
			return why;
		}
		/* libpq reads the socket's error itself */
		st = PQconnectPoll(c->pg);
	}
}

/* Prepares p's statements on c, one after the other ("s0", "s1", ...).
 * Returns NULL, or why not in why. */
static const char *
prepare_all(idem_pg_pool *p, idem_pg_conn *c, const char *name, char *why,
    size_t size)
{
	char sname[24];
	PGresult *res;
	size_t i;

	for (i = 0; i < p->nsql; i++) {
		uint64_t now = idem_now_ms();
		idem_err err;

		snprintf(sname, sizeof(sname), "s%zu", i);
		if (!PQsendPrepare(c->pg, sname, p->sql[i], 0, NULL)) {
			lost(c, PQerrorMessage(c->pg));
			snprintf(why, size, "%s: cannot prepare statement %zu: %s",
			    name, i, c->error);
			return why;
		}
		if ((err = finish(c, now + p->write_ms, now + p->read_ms, &res))
		    == IDEM_OK)
			err = result_err(c, res);
		PQclear(res);
		if (err != IDEM_OK) {
			snprintf(why, size, "%s: cannot prepare statement %zu: "
			    "%s%s%s%s", name, i, c->error, c->state[0] ?
			    " (SQLSTATE " : "", c->state, c->state[0] ? ")" : "");
			return why;
		}
	}
	return NULL;
}

/* Connects c to the server e, called name, and prepares the statements.
 * Returns NULL, or why not in why. */
static const char *
open_one(idem_pg_pool *p, idem_pg_conn *c, const idem_endpoint *e,
    const char *name, char *why, size_t size)
{
	char buf[512];
	const char *err;

	c->state[0] = '\0';
	if ((c->pg = start_connect(p, e)) == NULL)
		return "out of memory";
	if ((err = poll_connect(p, c, buf, sizeof(buf))) != NULL) {
		set_last_state(p, "");
		set_error(c, err);
		snprintf(why, size, "cannot connect to %s as %s: %s", name,
		    p->user != NULL ? p->user : "?", c->error);
		return why;
	}
	/* a server answered: what fails from here is not an outage */
	atomic_store(&p->opened, 1);
	if (PQsetnonblocking(c->pg, 1) != 0) {
		snprintf(why, size, "%s: %s", name, PQerrorMessage(c->pg));
		return why;
	}
	return prepare_all(p, c, name, why, size);
}

/*
 * Opens c on one of p's servers that accepts it as read-write and
 * prepares the statements: from the host the latest connection opened
 * on, then the next ones in order, round to the start.  Returns 0 or -1
 * (each failure logged, rate-limited).
 */
static int
open_next(idem_pg_pool *p, idem_pg_conn *c)
{
	char name[IDEM_HOST_MAX + 16], buf[1024];
	const char *why;
	int start = atomic_load(&p->last_end);
	size_t k;

	if (start < 0 || (size_t)start >= p->nends)
		start = 0;
	for (k = 0; k < p->nends; k++) {
		size_t i = ((size_t)start + k) % p->nends;
		const idem_endpoint *e = &p->ends[i];

		endpoint_name(e, name, sizeof(name));
		if ((why = open_one(p, c, e, name, buf, sizeof(buf))) == NULL) {
			/* once per switch of host, not per connection */
			if (atomic_exchange(&p->last_end, (int)i) != (int)i &&
			    p->nends > 1)
				idem_log(NULL, IDEM_LOG_WARN, "postgres: connected "
				    "to %s, host %zu of the list", name, i + 1);
			return 0;
		}
		if (may_log(p))
			idem_log(NULL, IDEM_LOG_ERROR, "postgres: %s%s", why,
			    k + 1 < p->nends ? "; trying the next host" : "");
		disconnect(c);
	}
	return -1;
}

idem_pg_conn *
idem_pg_get(idem_pg_pool *p)
{
	idem_pg_conn *c = NULL;
	struct timespec deadline;

	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += (time_t)(p->wait_ms / 1000) + 1;
	pthread_mutex_lock(&p->lock);
	while (p->nidle == 0)
		if (pthread_cond_timedwait(&p->freed, &p->lock, &deadline) != 0)
			break;
	if (p->nidle > 0)
		c = p->idle[--p->nidle];
	pthread_mutex_unlock(&p->lock);
	if (c == NULL) {
		if (may_log(p))
			idem_log(NULL, IDEM_LOG_ERROR, "postgres: no free "
			    "connection (pool-size %u)", p->size);
		return NULL;
	}
	if (c->pg == NULL && open_next(p, c) < 0) {
		idem_pg_put(p, c);
		return NULL;
	}
	return c;
}

void
idem_pg_put(idem_pg_pool *p, idem_pg_conn *c)
{
	if (c == NULL)
		return;
	if (c->broken)
		disconnect(c);
	pthread_mutex_lock(&p->lock);
	p->idle[p->nidle++] = c;
	pthread_cond_signal(&p->freed);
	pthread_mutex_unlock(&p->lock);
}

unsigned
idem_pg_pool_warm(idem_pg_pool *p)
{
	idem_pg_conn **taken;
	unsigned i, n, open = 0;

	if ((taken = calloc(p->size, sizeof(*taken))) == NULL)
		return 0;
	pthread_mutex_lock(&p->lock);
	n = p->nidle;
	memcpy(taken, p->idle, n * sizeof(*taken));
	p->nidle = 0;
	pthread_mutex_unlock(&p->lock);
	for (i = 0; i < n; i++) {
		if (taken[i]->pg == NULL && open_next(p, taken[i]) < 0)
			disconnect(taken[i]);
		open += taken[i]->pg != NULL;
		idem_pg_put(p, taken[i]);
	}
	free(taken);
	return open;
}

void
idem_pg_p_init(idem_pg_params *p)
{
	p->n = 0;
}

void
idem_pg_p_bytes(idem_pg_params *p, const void *data, size_t len)
{
	if (p->n >= IDEM_PG_PARAMS_MAX)
		abort();
	p->values[p->n] = data != NULL ? data : "";
	p->lengths[p->n] = (int)len;
	p->formats[p->n] = 1;
	p->n++;
}

void
idem_pg_p_text(idem_pg_params *p, const char *s)
{
	if (p->n >= IDEM_PG_PARAMS_MAX)
		abort();
	p->values[p->n] = s;
	p->lengths[p->n] = 0;
	p->formats[p->n] = 0;
	p->n++;
}

void
idem_pg_p_ll(idem_pg_params *p, long long v)
{
	if (p->n >= IDEM_PG_PARAMS_MAX)
		abort();
	snprintf(p->nums[p->n], sizeof(p->nums[p->n]), "%lld", v);
	idem_pg_p_text(p, p->nums[p->n]);
}

void
idem_pg_p_null(idem_pg_params *p)
{
	idem_pg_p_text(p, NULL);
}

idem_err
idem_pg_exec_params(idem_pg_conn *c, size_t i, int n,
    const char *const *values, const int *lengths, const int *formats,
    int binary, uint64_t extra_ms, PGresult **res, char *sqlstate)
{
	idem_pg_pool *pool = c->pool;
	char name[24];
	uint64_t now;
	idem_err err;

	*res = NULL;
	c->state[0] = '\0';
	c->timed_out = 0;
	if (sqlstate != NULL)
		sqlstate[0] = '\0';
	if (c->pg == NULL || i >= pool->nsql)
		return lost(c, "not connected");
	snprintf(name, sizeof(name), "s%zu", i);
	if (!PQsendQueryPrepared(c->pg, name, n, values, lengths, formats,
	    binary))
		return lost(c, PQerrorMessage(c->pg));
	now = idem_now_ms();
	err = finish(c, now + pool->write_ms, now + pool->write_ms +
	    pool->read_ms + extra_ms, res);
	if (err == IDEM_OK && (err = result_err(c, *res)) != IDEM_OK) {
		PQclear(*res);
		*res = NULL;
	}
	if (sqlstate != NULL)
		memcpy(sqlstate, c->state, sizeof(c->state));
	return err;
}

idem_err
idem_pg_exec(idem_pg_conn *c, size_t i, const idem_pg_params *p,
    uint64_t extra_ms, PGresult **res, char *sqlstate)
{
	return idem_pg_exec_params(c, i, p->n, p->values, p->lengths,
	    p->formats, 1, extra_ms, res, sqlstate);
}

idem_err
idem_pg_send(idem_pg_conn *c, size_t i, const idem_pg_params *p)
{
	char name[24];

	if (c->pg == NULL || i >= c->pool->nsql)
		return lost(c, "not connected");
	snprintf(name, sizeof(name), "s%zu", i);
	if (!PQsendQueryPrepared(c->pg, name, p->n, p->values, p->lengths,
	    p->formats, 1))
		return lost(c, PQerrorMessage(c->pg));
	return flush(c, idem_now_ms() + c->pool->write_ms);
}

void
idem_pg_cut(idem_pg_conn *c)
{
	int fd = c->pg != NULL ? PQsocket(c->pg) : -1;

	c->broken = 1;
	if (fd >= 0)
		shutdown(fd, SHUT_RDWR);
}

int
idem_pg_reopen(idem_pg_conn *c)
{
	disconnect(c);
	return open_next(c->pool, c);
}

unsigned
idem_pg_conn_index(const idem_pg_conn *c)
{
	return (unsigned)(c - c->pool->conns);
}

unsigned
idem_pg_pool_size(const idem_pg_pool *p)
{
	return p->size;
}

long long
idem_pg_ll(const PGresult *r, int row, int col)
{
	const unsigned char *v;
	unsigned long long u = 0;
	int len, k;

	if (PQgetisnull(r, row, col))
		return 0;
	v = (const unsigned char *)PQgetvalue(r, row, col);
	len = PQgetlength(r, row, col);
	if (len != 1 && len != 2 && len != 4 && len != 8)
		return 0;
	/* network order; sign-extended from its width */
	for (k = 0; k < len; k++)
		u = u << 8 | v[k];
	if (len < 8 && len > 1 && (v[0] & 0x80))
		u |= ~0ULL << (8 * len);
	return (long long)u;
}

void
idem_pg_pool_free(idem_pg_pool *p)
{
	unsigned i;

	if (p == NULL)
		return;
	for (i = 0; p->conns != NULL && i < p->size; i++)
		disconnect(&p->conns[i]);
	free(p->conns);
	free(p->idle);
	free(p->user);
	if (p->password != NULL)
		explicit_bzero(p->password, strlen(p->password));
	free(p->password);
	free(p->database);
	free(p->options);
	pthread_cond_destroy(&p->freed);
	pthread_mutex_destroy(&p->lock);
	free(p);
}
