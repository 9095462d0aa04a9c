/*
 * idem_mysql.c - the connection pool.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <errmsg.h>
#include <mysql.h>
#include <ma_pvio.h>

#include "idem_log.h"
#include "idem_secret.h"
#include "idem_mysql.h"
#include "idem_request.h"
#include "idem_time.h"

struct idem_mysql_pool {
	idem_db db;          /* what the store-neutral layers see
	                             * (idem_store_tx.h): first */
	idem_endpoint ends[IDEM_ENDPOINTS_MAX]; /* [mysql] host or socket,
	                            * in failover order */
	size_t nends;
	atomic_int last_end;        /* the host the latest connection opened
	                             * on (-1: none yet), to log each switch */
	uint64_t failback_ms;       /* [mysql] failback */
	atomic_ullong next_failback; /* ms: when a connection on a later host
	                              * may next be closed to try the head */
	char *user, *password, *database;
	unsigned connect_timeout, read_timeout, write_timeout; /* seconds */
	uint64_t wait_ms;
	const char *const *sql;
	size_t nsql;
	char **extra;               /* owned: see idem_mysql_pool_extra */
	size_t nextra;
	char *init;                 /* owned: run on each new connection */
	pthread_mutex_t lock;
	pthread_cond_t freed;
	idem_mysql_conn *conns;     /* size of them */
	idem_mysql_conn **idle;     /* a stack of free ones */
	unsigned size, nidle;
	atomic_llong last_log;      /* ms of the last error logged */
	int quiet;                  /* logs no error (idem_mysql_pool_quiet) */
	atomic_uint last_errno;     /* of the latest failure */
	atomic_ullong max_packet;   /* the server's max_allowed_packet, as
	                             * the latest connection read it; 0:
	                             * not known yet */
};

/* Whether an error may be logged now (one every 5 s per pool). */
static int
may_log(idem_mysql_pool *p)
{
	long long now = (long long)idem_now_ms(), last = atomic_load(&p->last_log);

	return !p->quiet && now - last >= 5000 &&
	    atomic_compare_exchange_strong(&p->last_log, &last, now);
}

/* Whether err (a mysql_errno) means the connection is gone. */
static int
conn_error(unsigned err)
{
	return err == CR_SERVER_GONE_ERROR || err == CR_SERVER_LOST ||
	    err == CR_CONNECTION_ERROR || err == CR_CONN_HOST_ERROR ||
	    err == CR_SERVER_LOST_EXTENDED || err == CR_COMMANDS_OUT_OF_SYNC ||
	    err == CR_UNKNOWN_ERROR || err == 1927 /* ER_CONNECTION_KILLED */ ||
	    err == 1053 /* ER_SERVER_SHUTDOWN */ || err == 4031 ||
	    /* a Galera node out of the primary component: WSREP has not yet
	     * prepared node for application use; another host may serve */
	    err == 1047;
}

void
idem_mysql_check(idem_mysql_conn *c, unsigned err)
{
	if (conn_error(err))
		c->broken = 1;
	/* a deadlock rolls the whole transaction back (on Galera also a
	 * transaction aborted by another node's conflicting commit) */
	if (err == 1213)
		c->rolled_back = 1;
}

unsigned
idem_mysql_pool_last_errno(idem_mysql_pool *p)
{
	return atomic_load(&p->last_errno);
}

void
idem_mysql_log_error(idem_mysql_pool *p, const char *what, MYSQL_STMT *st)
{
	atomic_store(&p->last_errno, mysql_stmt_errno(st));
	if (may_log(p))
		idem_log(NULL, IDEM_LOG_ERROR, "mysql %s: %s (error %u)", what,
		    mysql_stmt_error(st), mysql_stmt_errno(st));
}

void
idem_mysql_log_conn_error(idem_mysql_pool *p, const char *what, MYSQL *m)
{
	atomic_store(&p->last_errno, mysql_errno(m));
	if (may_log(p))
		idem_log(NULL, IDEM_LOG_ERROR, "mysql %s: %s (error %u)", what,
		    mysql_error(m), mysql_errno(m));
}

static char *
dup_or_null(const char *s)
{
	return s != NULL ? strdup(s) : NULL;
}

/* Milliseconds to whole seconds for the C API, at least 1. */
static unsigned
secs(uint64_t ms)
{
	return ms < 1000 ? 1 : (unsigned)((ms + 999) / 1000);
}

/* The neutral data source's operations (idem_store_tx.h) of a pool. */
static idem_db_conn *
source_take(idem_db *src)
{
	idem_mysql_conn *c = idem_mysql_take((idem_mysql_pool *)src);

	return c != NULL ? &c->db : NULL;
}

static idem_db_conn *
source_get(idem_db *src)
{
	idem_mysql_conn *c = idem_mysql_get((idem_mysql_pool *)src);

	return c != NULL ? &c->db : NULL;
}

static void
source_put(idem_db *src, idem_db_conn *c)
{
	idem_mysql_put((idem_mysql_pool *)src, idem_mysql_of(c));
}

static int
source_tx_lost(idem_db_conn *c)
{
	return idem_mysql_tx_lost(idem_mysql_of(c));
}

static int
source_tx_intact(idem_db_conn *c)
{
	return idem_mysql_tx_intact(idem_mysql_of(c));
}

static int
source_broken(idem_db_conn *c)
{
	return idem_mysql_of(c)->broken;
}

static void
source_free(idem_db *src)
{
	idem_mysql_pool_free((idem_mysql_pool *)src);
}

static idem_err
source_run(idem_db_conn *c, size_t i, const char *in, va_list *ap)
{
	return idem_mysql_vrun(idem_mysql_of(c), i, in, ap);
}

static idem_err
source_fetch(idem_db_conn *c, size_t i, const char *out, va_list *ap)
{
	return idem_mysql_vfetch(idem_mysql_of(c), i, out, ap);
}

static idem_err
source_one(idem_db_conn *c, size_t i, const char *in, const char *out,
    va_list *ap)
{
	return idem_mysql_vone(idem_mysql_of(c), i, in, out, ap);
}

static unsigned long long
source_affected(idem_db_conn *c, size_t i)
{
	return idem_mysql_affected(idem_mysql_of(c), i);
}

static unsigned long long
source_insert_id(idem_db_conn *c, size_t i)
{
	return idem_mysql_insert_id(idem_mysql_of(c), i);
}

static const idem_db_ops source_ops = {
	.take = source_take,
	.get = source_get,
	.put = source_put,
	.free = source_free,
	.tx_lost = source_tx_lost,
	.tx_intact = source_tx_intact,
	.broken = source_broken,
	.run = source_run,
	.fetch = source_fetch,
	.one = source_one,
	.affected = source_affected,
	.insert_id = source_insert_id,
};

idem_db *
idem_mysql_pool_source(idem_mysql_pool *p)
{
	return &p->db;
}

idem_mysql_conn *
idem_request_tx(const idem_request *req)
{
	/* a MySQL pool's connection only: another store's is not one */
	if (req->tx == NULL || req->tx->source->ops != &source_ops)
		return NULL;
	return idem_mysql_of(req->tx);
}

idem_err
idem_mysql_pool_new(const idem_config_mysql *my, const char *file,
    const char *const *sql, size_t nsql, unsigned size, idem_mysql_pool **out)
{
	idem_mysql_pool *p = calloc(1, sizeof(*p));
	idem_err err;
	unsigned i;

	if (p == NULL)
		return IDEM_ERR_NOMEM;
	/* not thread-safe: done at start-up, before any worker exists */
	if (mysql_library_init(0, NULL, NULL) != 0) {
		free(p);
		return IDEM_ERR_STORE;
	}
	p->db.ops = &source_ops;
	p->db.dialect = IDEM_DB_MYSQL;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->freed, NULL);
	atomic_init(&p->last_end, -1);
	p->size = size;
	p->sql = sql;
	p->nsql = nsql;
	if (idem_parse_endpoints(my->socket != NULL ? my->socket :
	    my->host != NULL ? my->host : "127.0.0.1",
	    my->socket != NULL, my->port, p->ends, &p->nends) !=
	    NULL) {
		/* the config checked it */
		idem_mysql_pool_free(p);
		return IDEM_ERR_CONFIG;
	}
	p->connect_timeout = secs(my->connect_timeout);
	p->read_timeout = secs(my->read_timeout);
	p->write_timeout = secs(my->write_timeout);
	p->wait_ms = my->connect_timeout + my->read_timeout;
	/* a config made without the key table (tests) has 0 */
	p->failback_ms = my->failback > 0 ? my->failback : 30000;
	p->user = dup_or_null(my->user);
	p->database = dup_or_null(my->database);
	p->conns = calloc(size, sizeof(*p->conns));
	p->idle = calloc(size, sizeof(*p->idle));
	if (p->conns == NULL || p->idle == NULL) {
		idem_mysql_pool_free(p);
		return IDEM_ERR_NOMEM;
	}
	for (i = 0; i < size; i++) {
		/* room for the extra statements too: see idem_mysql_pool_extra */
		p->conns[i].stmts = calloc(nsql + IDEM_MYSQL_EXTRA_MAX + 1,
		    sizeof(MYSQL_STMT *));
		if (p->conns[i].stmts == NULL) {
			idem_mysql_pool_free(p);
			return IDEM_ERR_NOMEM;
		}
		p->conns[i].extra = p->conns[i].stmts + nsql;
		p->conns[i].pool = p;
		p->conns[i].db.source = &p->db;
		p->idle[p->nidle++] = &p->conns[i];
	}
	if ((err = idem_password_read(my->password_file,
	    "IDEMFCGI_MYSQL_PASSWORD", "[mysql] password-file", file,
	    &p->password)) != IDEM_OK) {
		idem_mysql_pool_free(p);
		return err;
	}
	*out = p;
	return IDEM_OK;
}

idem_err
idem_mysql_pool_init(idem_mysql_pool *p, const char *sql)
{
	free(p->init);
	p->init = strdup(sql);
	return p->init != NULL ? IDEM_OK : IDEM_ERR_NOMEM;
}

idem_err
idem_mysql_pool_extra(idem_mysql_pool *p, const char *const *extra,
    size_t nextra)
{
	size_t i;

	if (nextra > IDEM_MYSQL_EXTRA_MAX || p->extra != NULL)
		return IDEM_ERR_INVALID;
	if ((p->extra = calloc(nextra + 1, sizeof(*p->extra))) == NULL)
		return IDEM_ERR_NOMEM;
	for (i = 0; i < nextra; i++) {
		if (extra[i] == NULL)
			return IDEM_ERR_INVALID;
		if ((p->extra[i] = strdup(extra[i])) == NULL)
			return IDEM_ERR_NOMEM;
	}
	p->nextra = nextra;
	return IDEM_OK;
}

/* The text of statement i of every connection of p, its own then extra. */
static const char *
stmt_sql(const idem_mysql_pool *p, size_t i)
{
	return i < p->nsql ? p->sql[i] : p->extra[i - p->nsql];
}

/* Closes c's statements and connection. */
static void
disconnect(idem_mysql_pool *p, idem_mysql_conn *c)
{
	size_t i;

	for (i = 0; i < p->nsql + p->nextra; i++)
		if (c->stmts[i] != NULL) {
			mysql_stmt_close(c->stmts[i]);
			c->stmts[i] = NULL;
		}
	for (i = 0; i < IDEM_MYSQL_LAZY_MAX; i++)
		if (c->lazy[i] != NULL) {
			mysql_stmt_close(c->lazy[i]);
			c->lazy[i] = NULL;
		}
	if (c->m != NULL)
		mysql_close(c->m);
	c->m = NULL;
	c->broken = 0;
	c->tx_mode = 0;
	c->read_timeout = 0;
	c->snapshot_off = 0;
}

/* Reads the server's max_allowed_packet on c (it may change while we
 * run; a connection sees the value of when it connected), which server it
 * is (c->node), and whether it is a Galera node (wsrep_on; a server
 * without that variable is not).
 * Returns 1 when it is, 0 when not, -1 when the server did not answer. */
static int
read_server(idem_mysql_pool *p, idem_mysql_conn *c)
{
	MYSQL_RES *r;
	MYSQL_ROW row;
	int galera = 0;

	/* a server without wsrep_on (1193, unknown variable) is no Galera
	 * node; any other error is the server's, and decides nothing */
	if (mysql_query(c->m, "SELECT @@max_allowed_packet, "
	    "@@global.wsrep_on, @@hostname, @@port, @@server_id") != 0 &&
	    (mysql_errno(c->m) != 1193 || mysql_query(c->m, "SELECT "
	    "@@max_allowed_packet, 0, @@hostname, @@port, @@server_id") != 0))
		return -1;
	if ((r = mysql_store_result(c->m)) == NULL)
		return -1;
	c->node[0] = '\0';
	if ((row = mysql_fetch_row(r)) != NULL && row[0] != NULL) {
		atomic_store(&p->max_packet, strtoull(row[0], NULL, 10));
		galera = row[1] != NULL && strcmp(row[1], "1") == 0;
		/* which server this is (a Galera node's gcomm UUID replaces
		 * it: node_ready) */
		snprintf(c->node, sizeof(c->node), "%.40s:%s/%s", row[2] != NULL ?
		    row[2] : "", row[3] != NULL ? row[3] : "", row[4] != NULL ?
		    row[4] : "");
	}
	mysql_free_result(r);
	return galera;
}

/*
 * Whether the Galera node c is connected to may serve: in the primary
 * component and synced (wsrep_ready ON, wsrep_local_state_comment
 * Synced).  A node that is joining, a donor, or cut off from the others
 * would refuse statements (1047) or serve stale reads.  Writes why not
 * into why.
 */
static int
node_ready(idem_mysql_conn *c, char *why, size_t size)
{
	MYSQL_RES *r;
	MYSQL_ROW row;
	int ready = 0, synced = 0;

	snprintf(why, size, "its wsrep status cannot be read");
	if (mysql_query(c->m, "SHOW GLOBAL STATUS WHERE Variable_name IN "
	    "('wsrep_ready', 'wsrep_local_state_comment', "
	    "'wsrep_gcomm_uuid')") != 0 ||
	    (r = mysql_store_result(c->m)) == NULL)
		return 0;
	while ((row = mysql_fetch_row(r)) != NULL)
		if (row[0] != NULL && row[1] != NULL) {
			if (strcasecmp(row[0], "wsrep_ready") == 0)
				ready = strcmp(row[1], "ON") == 0;
			else if (strcasecmp(row[0], "wsrep_gcomm_uuid") == 0)
				snprintf(c->node, sizeof(c->node), "%s", row[1]);
			else if (!(synced = strcmp(row[1], "Synced") == 0))
				snprintf(why, size, "it is %.40s, not Synced",
				    row[1]);
		}
	mysql_free_result(r);
	if (synced && !ready)
		snprintf(why, size, "it is not ready (wsrep_ready OFF)");
	return ready && synced;
}

/* Writes e as text ("host:port" or the socket) into buf. */
static const char *
endpoint_name(const idem_endpoint *e, char *buf, size_t size)
{
	if (e->socket[0] != '\0')
		snprintf(buf, size, "%s", e->socket);
	else
		snprintf(buf, size, strchr(e->host, ':') != NULL ? "[%s]:%u" :
		    "%s:%u", e->host, e->port);
	return buf;
}

/* Runs the pool's init statement on c, open on the server called name,
 * and prepares its statements.  Returns NULL or why not, in why. */
static const char *
prepare_all(idem_mysql_pool *p, idem_mysql_conn *c, const char *name,
    char *why, size_t size)
{
	size_t i;

	if (p->init != NULL && mysql_query(c->m, p->init) != 0) {
		atomic_store(&p->last_errno, mysql_errno(c->m));
		snprintf(why, size, "%s: %.60s: %s", name, p->init,
		    mysql_error(c->m));
		return why;
	}
	for (i = 0; i < p->nsql + p->nextra; i++) {
		c->stmts[i] = mysql_stmt_init(c->m);
		if (c->stmts[i] == NULL || mysql_stmt_prepare(c->stmts[i],
		    stmt_sql(p, i), strlen(stmt_sql(p, i))) != 0) {
			atomic_store(&p->last_errno, c->stmts[i] != NULL ?
			    mysql_stmt_errno(c->stmts[i]) : 0);
			snprintf(why, size, "%s: cannot prepare statement %zu: %s",
			    name, i, c->stmts[i] != NULL ?
			    mysql_stmt_error(c->stmts[i]) : "out of memory");
			return why;
		}
	}
	return NULL;
}

/* Connects c to the server e, called name.  Returns NULL, or why not in
 * why. */
static const char *
open_one(idem_mysql_pool *p, idem_mysql_conn *c, const idem_endpoint *e,
    const char *name, char *why, size_t size)
{
	char state[80];

	my_bool off = 0;
	int galera;

	if ((c->m = mysql_init(NULL)) == NULL)
		return "out of memory";
	mysql_options(c->m, MYSQL_OPT_CONNECT_TIMEOUT, &p->connect_timeout);
	mysql_options(c->m, MYSQL_OPT_READ_TIMEOUT, &p->read_timeout);
	mysql_options(c->m, MYSQL_OPT_WRITE_TIMEOUT, &p->write_timeout);
	mysql_options(c->m, MYSQL_OPT_RECONNECT, &off);
	mysql_options(c->m, MYSQL_SET_CHARSET_NAME, "utf8mb4");
	/* CLIENT_FOUND_ROWS: an UPDATE reports the rows it matched, so an
	 * owner check never depends on whether a value changed */
	if (mysql_real_connect(c->m, e->socket[0] != '\0' ? NULL : e->host,
	    p->user, p->password, p->database, e->port, e->socket[0] != '\0' ?
	    e->socket : NULL, CLIENT_FOUND_ROWS) == NULL) {
		atomic_store(&p->last_errno, mysql_errno(c->m));
		snprintf(why, size, "cannot connect to %s as %s: %s", name,
		    p->user, mysql_error(c->m));
		return why;
	}
	if ((galera = read_server(p, c)) < 0) {
		snprintf(why, size, "%s did not answer: %s", name,
		    mysql_error(c->m));
		return why;
	}
	c->read_timeout = p->read_timeout;
	if (galera == 1 && !node_ready(c, state, sizeof(state))) {
		snprintf(why, size, "%s is a Galera node that cannot serve: %s",
		    name, state);
		return why;
	}
	return prepare_all(p, c, name, why, size);
}

/*
 * Opens c on the first of p's servers that accepts it, is synced if it
 * is a Galera node, and prepares the statements: the list is a failover
 * order, every connection starts from its head.  Returns 0 or -1 (each
 * failure logged, rate-limited).
 */
static int
open_first(idem_mysql_pool *p, idem_mysql_conn *c)
{
	char name[IDEM_HOST_MAX + 16], buf[1024];
	const char *why;
	size_t i;

	for (i = 0; i < p->nends; i++) {
		const idem_endpoint *e = &p->ends[i];

		endpoint_name(e, name, sizeof(name));
		if ((why = open_one(p, c, e, name, buf, sizeof(buf))) == NULL) {
			c->end = (int)i;
			c->opened_ms = idem_now_ms();
			/* once per switch of host, not per connection */
			if (atomic_exchange(&p->last_end, (int)i) != (int)i &&
			    (i > 0 || p->nends > 1))
				idem_log(NULL, i > 0 ? IDEM_LOG_WARN :
				    IDEM_LOG_INFO, "mysql: connected to %s, host "
				    "%zu of the list", name, i + 1);
			return 0;
		}
		if (may_log(p))
			idem_log(NULL, IDEM_LOG_ERROR, "mysql: %s%s", why,
			    i + 1 < p->nends ? "; trying the next host" : "");
		disconnect(p, c);
	}
	return -1;
}

void
idem_mysql_pool_quiet(idem_mysql_pool *p)
{
	p->quiet = 1;
}

uint64_t
idem_mysql_max_packet(idem_mysql_pool *p)
{
	return atomic_load(&p->max_packet);
}

idem_mysql_conn *
idem_mysql_get(idem_mysql_pool *p)
{
	idem_mysql_conn *c = idem_mysql_take(p);

	/* a connection a transactional route used last: back to autocommit
	 * for its plain user (nothing is open: its transaction ended) */
	if (c != NULL && c->tx_mode) {
		/* a connection that fails this is not worth keeping */
		if (mysql_autocommit(c->m, 1) != 0 && idem_mysql_reconnect(c) != 0) {
			idem_mysql_put(p, c);
			return NULL;
		}
		c->tx_mode = 0;
	}
	return c;
}

int
idem_mysql_reconnect(idem_mysql_conn *c)
{
	disconnect(c->pool, c);
	return open_first(c->pool, c);
}

int
idem_mysql_reopen_same(idem_mysql_conn *c)
{
	idem_mysql_pool *p = c->pool;
	char name[IDEM_HOST_MAX + 16], buf[1024], node[sizeof(c->node)];
	const char *why;
	int end = c->end;

	if (end < 0 || (size_t)end >= p->nends)
		return -1;
	memcpy(node, c->node, sizeof(node));
	disconnect(p, c);
	endpoint_name(&p->ends[end], name, sizeof(name));
	if ((why = open_one(p, c, &p->ends[end], name, buf, sizeof(buf)))
	    != NULL || strcmp(c->node, node) != 0) {
		if (why == NULL)
			why = "another node answers there now";
		if (may_log(p))
			idem_log(NULL, IDEM_LOG_ERROR, "mysql: cannot reopen on "
			    "%s: %s", name, why);
		disconnect(p, c);
		return -1;
	}
	c->end = end;
	c->opened_ms = idem_now_ms();
	return 0;
}

int
idem_mysql_tx_mode(idem_mysql_conn *c)
{
	if (c->tx_mode)
		return 0;
	if (mysql_autocommit(c->m, 0) != 0) {
		idem_mysql_check(c, mysql_errno(c->m));
		return -1;
	}
	c->tx_mode = 1;
	return 0;
}

uint64_t
idem_mysql_lock_margin_ms(uint64_t wait_ms)
{
	return 2000 + wait_ms / 4;
}

int
idem_mysql_expect_lock_wait(idem_mysql_conn *c, uint64_t wait_ms)
{
	unsigned want = c->pool->read_timeout, need;
	MARIADB_PVIO *pvio;

	if (c->m == NULL || (pvio = c->m->net.pvio) == NULL ||
	    pvio->methods == NULL || pvio->methods->set_timeout == NULL)
		return -1;
	if (wait_ms > 0 && (need = secs(wait_ms +
	    idem_mysql_lock_margin_ms(wait_ms))) > want)
		want = need;
	if (want == c->read_timeout)
		return 0;
	/* what mysql_options(MYSQL_OPT_READ_TIMEOUT) sets before connecting,
	 * on the open connection: Connector/C reads it at every wait for
	 * the server (ma_pvio.h, installed with its headers) */
	if (pvio->methods->set_timeout(pvio, PVIO_READ_TIMEOUT, (int)want))
		return -1;
	c->read_timeout = want;
	return 0;
}

idem_mysql_conn *
idem_mysql_take(idem_mysql_pool *p)
{
	idem_mysql_conn *c = NULL;
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
			idem_log(NULL, IDEM_LOG_ERROR, "mysql: no free connection "
			    "(pool-size %u)", p->size);
		return NULL;
	}
	if (c->m == NULL && open_first(p, c) < 0) {
		idem_mysql_put(p, c);
		return NULL;
	}
	c->rolled_back = 0;
	return c;
}

int
idem_mysql_tx_lost(idem_mysql_conn *c)
{
	int lost = c->rolled_back || (c->m != NULL && mysql_errno(c->m) == 1213);

	c->rolled_back = 0;
	return lost;
}

/*
 * Whether c, open on a host after the head of the list for at least
 * [mysql] failback, should be closed so that its next use tries the head
 * again: one connection of the pool per period, so a head that is still
 * down costs one failed connect per period, not one per connection.
 */
static int
fail_back(idem_mysql_pool *p, const idem_mysql_conn *c)
{
	unsigned long long now, next;

	if (c->m == NULL || c->end == 0)
		return 0;
	now = idem_now_ms();
	next = atomic_load(&p->next_failback);
	if (now < next || now - c->opened_ms < p->failback_ms)
		return 0;
	return atomic_compare_exchange_strong(&p->next_failback, &next,
	    now + p->failback_ms);
}

void
idem_mysql_put(idem_mysql_pool *p, idem_mysql_conn *c)
{
	if (c == NULL)
		return;
	if (c->db.held) {
		/* a plugin's bug: idem_request_tx's connection is the
		 * framework's to give back (idem_db_return) */
		idem_log(NULL, IDEM_LOG_ERROR, "idem_mysql_put: the connection "
		    "of a transactional route's request belongs to the "
		    "framework; not put back");
		return;
	}
	/* the server's own snapshot isolation again, for the next user */
	if (!c->broken && c->m != NULL && c->snapshot_off == 1) {
		if (mysql_query(c->m, "SET SESSION innodb_snapshot_isolation = "
		    "DEFAULT") != 0)
			c->broken = 1;
		c->snapshot_off = 0;
	}
	if (c->broken || fail_back(p, c))
		disconnect(p, c);
	else if (c->m != NULL && c->read_timeout != p->read_timeout)
		(void)idem_mysql_expect_lock_wait(c, 0);
	pthread_mutex_lock(&p->lock);
	p->idle[p->nidle++] = c;
	pthread_cond_signal(&p->freed);
	pthread_mutex_unlock(&p->lock);
}

int
idem_mysql_snapshot_off(idem_mysql_conn *c)
{
	if (c->snapshot_off != 0)
		return 0;
	if (mysql_query(c->m, "SET SESSION innodb_snapshot_isolation = OFF")
	    == 0) {
		c->snapshot_off = 1;
		return 0;
	}
	/* ER_UNKNOWN_SYSTEM_VARIABLE: a server before it, which never
	 * refuses such a write */
	if (mysql_errno(c->m) == 1193) {
		c->snapshot_off = -1;
		return 0;
	}
	idem_mysql_check(c, mysql_errno(c->m));
	return -1;
}

int
idem_mysql_tx_intact(idem_mysql_conn *c)
{
	unsigned int status = 0;

	if (c->m == NULL || c->broken ||
	    mariadb_get_infov(c->m, MARIADB_CONNECTION_SERVER_STATUS, &status))
		return 0;
	/* autocommit turned back on: tx mode must be set again */
	if (status & SERVER_STATUS_AUTOCOMMIT)
		c->tx_mode = 0;
	return (status & SERVER_STATUS_IN_TRANS) != 0 &&
	    !(status & SERVER_STATUS_AUTOCOMMIT);
}

MYSQL_STMT *
idem_mysql_stmt(idem_mysql_conn *c, size_t i)
{
	return i < c->pool->nsql ? c->stmts[i] : NULL;
}

MYSQL_STMT *
idem_mysql_lazy_stmt(idem_mysql_conn *c, size_t slot, const char *sql)
{
	MYSQL_STMT *st;

	if (slot >= IDEM_MYSQL_LAZY_MAX || c->m == NULL)
		return NULL;
	if (c->lazy[slot] != NULL)
		return c->lazy[slot];
	if ((st = mysql_stmt_init(c->m)) == NULL)
		return NULL;
	if (mysql_stmt_prepare(st, sql, strlen(sql)) != 0) {
		idem_mysql_check(c, mysql_stmt_errno(st));
		idem_mysql_log_error(c->pool, "prepare", st);
		mysql_stmt_close(st);
		return NULL;
	}
	return c->lazy[slot] = st;
}

idem_err
idem_mysql_exec(idem_mysql_pool *p, const char *sql)
{
	idem_mysql_conn *c = idem_mysql_get(p);
	idem_err err = IDEM_OK;

	if (c == NULL)
		return IDEM_ERR_STORE;
	if (mysql_query(c->m, sql) != 0) {
		idem_log(NULL, IDEM_LOG_ERROR, "mysql: %s (error %u)",
		    mysql_error(c->m), mysql_errno(c->m));
		idem_mysql_check(c, mysql_errno(c->m));
		err = IDEM_ERR_STORE;
	} else {
		MYSQL_RES *r = mysql_store_result(c->m);
		if (r != NULL)
			mysql_free_result(r);
	}
	idem_mysql_put(p, c);
	return err;
}

void
idem_mysql_pool_free(idem_mysql_pool *p)
{
	unsigned i;

	if (p == NULL)
		return;
	for (i = 0; p->conns != NULL && i < p->size; i++) {
		if (p->conns[i].stmts != NULL)
			disconnect(p, &p->conns[i]);
		free(p->conns[i].stmts);
	}
	free(p->conns);
	free(p->idle);
	for (i = 0; p->extra != NULL && p->extra[i] != NULL; i++)
		free(p->extra[i]);
	free(p->extra);
	free(p->init);
	free(p->user);
	if (p->password != NULL)
		explicit_bzero(p->password, strlen(p->password));
	free(p->password);
	free(p->database);
	pthread_cond_destroy(&p->freed);
	pthread_mutex_destroy(&p->lock);
	free(p);
}
