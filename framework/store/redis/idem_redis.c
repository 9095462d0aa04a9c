/*
 * idem_redis.c - the Redis store's client (idem_redis.h).
 *
 * A server is a node: its address and a pool of connections.  Outside a
 * cluster the nodes are the [redis] host list and one of them is the
 * current one (a master: a server that answers ROLE "master"); a
 * connection lost or a READONLY answer moves to the next.  In a cluster
 * a slot map (CLUSTER SLOTS) names each slot's master; MOVED updates it,
 * ASK is followed once with ASKING, and a node that cannot be reached
 * has the map read again from any other.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <openssl/evp.h>

#include "idem_config.h"
#include "idem_log.h"
#include "idem_parse.h"
#include "idem_redis.h"
#include "idem_secret.h"
#include "idem_time.h"

/* the most servers a cluster's map may name */
#define NODES_MAX 128
/* the most attempts of one command on a server that failed, and the
 * most redirections (MOVED, ASK) and script loads it goes through */
#define ATTEMPTS 6
#define REDIRECTS 16

typedef struct rnode {
	char host[IDEM_HOST_MAX];
	unsigned port;
	pthread_mutex_t lock;
	pthread_cond_t freed;
	redisContext **idle;        /* nidle connections ready */
	unsigned nidle, nopen;      /* nopen: idle and in use */
	atomic_int down;            /* its last connect failed (logged once
	                             * until one succeeds) */
} rnode;

struct idem_redis {
	char *user, *password;
	unsigned database, pool_size, connect_ms, read_ms, write_ms;
	int cluster;
	atomic_int quiet;
	const char *file;
	const char *const *scripts;
	size_t nscripts;
	char (*sha)[41];            /* each script's SHA-1, hex */
	idem_redis_wait wait;
	unsigned wait_replicas, wait_ms;

	pthread_rwlock_t map_lock;  /* nodes, nnodes, slots, current */
	rnode *nodes[NODES_MAX];
	size_t nnodes, nseeds;      /* the first nseeds are the host list */
	unsigned short slots[IDEM_REDIS_SLOTS]; /* node index + 1; 0: none */
	size_t current;             /* outside a cluster: the master */
	atomic_ullong sent;
};

/* ---------------------------------------------------------------- slots */

/* CRC16/XMODEM, the cluster specification's key hash. */
static unsigned
crc16(const unsigned char *p, size_t len)
{
	unsigned crc = 0;
	size_t i;
	int b;

	for (i = 0; i < len; i++) {
		crc ^= (unsigned)p[i] << 8;
		for (b = 0; b < 8; b++)
			crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
	}
	return crc & 0xffff;
}

unsigned
idem_redis_slot(const char *key, size_t len)
{
	const char *open = memchr(key, '{', len), *close;

	/* the hash tag: between the first '{' and the next '}', not empty */
	if (open != NULL && (close = memchr(open + 1, '}', len - (size_t)(open -
	    key) - 1)) != NULL && close > open + 1)
		return crc16((const unsigned char *)open + 1,
		    (size_t)(close - open - 1)) % IDEM_REDIS_SLOTS;
	return crc16((const unsigned char *)key, len) % IDEM_REDIS_SLOTS;
}

/* ---------------------------------------------------------------- nodes */

/* A new node of host and port; NULL when out of memory. */
static rnode *
node_new(const idem_redis *r, const char *host, unsigned port)
{
	rnode *n = calloc(1, sizeof(*n));

	if (n == NULL)
		return NULL;
	if ((n->idle = calloc(r->pool_size, sizeof(*n->idle))) == NULL) {
		free(n);
		return NULL;
	}
	snprintf(n->host, sizeof(n->host), "%s", host);
	n->port = port;
	pthread_mutex_init(&n->lock, NULL);
	pthread_cond_init(&n->freed, NULL);
	return n;
}

static void
node_free(rnode *n)
{
	unsigned i;

	if (n == NULL)
		return;
	for (i = 0; i < n->nidle; i++)
		redisFree(n->idle[i]);
	pthread_mutex_destroy(&n->lock);
	pthread_cond_destroy(&n->freed);
	free(n->idle);
	free(n);
}

/* The index of the node of host and port, added when new (map_lock held
 * for writing); -1 when the map is full or out of memory. */
static int
node_index(idem_redis *r, const char *host, unsigned port)
{
	size_t i;

	for (i = 0; i < r->nnodes; i++)
		if (r->nodes[i]->port == port && strcmp(r->nodes[i]->host,
		    host) == 0)
			return (int)i;
	if (r->nnodes == NODES_MAX ||
	    (r->nodes[r->nnodes] = node_new(r, host, port)) == NULL)
		return -1;
	return (int)r->nnodes++;
}

/* ---------------------------------------------------------- connections */

/* Logs a connection's failure unless r is quiet; a server's failures to
 * connect once until it is reached again. */
static void
conn_fail(idem_redis *r, rnode *n, const char *what, const char *why)
{
	if (strcmp(what, "connect") == 0 && atomic_exchange(&n->down, 1))
		return;
	if (!atomic_load(&r->quiet))
		idem_log(NULL, IDEM_LOG_WARN, "redis store: %s:%u: %s: %s",
		    n->host, n->port, what, why);
}

/* Runs one command of format on c and says whether its reply is not an
 * error (the reply freed). */
static int
conn_cmd_ok(redisContext *c, char *why, size_t size, const char *fmt, ...)
{
	redisReply *rep;
	va_list ap;
	int ok;

	va_start(ap, fmt);
	rep = redisvCommand(c, fmt, ap);
	va_end(ap);
	if (rep == NULL) {
		snprintf(why, size, "%s", c->errstr);
		return 0;
	}
	ok = rep->type != REDIS_REPLY_ERROR;
	if (!ok)
		snprintf(why, size, "%.*s", (int)rep->len, rep->str);
	freeReplyObject(rep);
	return ok;
}

/* Whether the server of c is a master (ROLE's first element). */
static int
conn_is_master(redisContext *c, char *why, size_t size)
{
	redisReply *rep = redisCommand(c, "ROLE");
	int master;

	if (rep == NULL) {
		snprintf(why, size, "%s", c->errstr);
		return 0;
	}
	master = rep->type == REDIS_REPLY_ARRAY && rep->elements > 0 &&
	    rep->element[0]->type == REDIS_REPLY_STRING &&
	    strcmp(rep->element[0]->str, "master") == 0;
	if (!master)
		snprintf(why, size, "not a master (a replica, or loading)");
	freeReplyObject(rep);
	return master;
}

/* A new connection to n: its timeouts, AUTH and SELECT; outside a cluster
 * with stand-ins, a master only.  NULL when it cannot be had (logged). */
static redisContext *
conn_open(idem_redis *r, rnode *n)
{
	struct timeval ct = { r->connect_ms / 1000,
	    (r->connect_ms % 1000) * 1000 }, rt = { r->read_ms / 1000,
	    (r->read_ms % 1000) * 1000 }, wt = { r->write_ms / 1000,
	    (r->write_ms % 1000) * 1000 };
	redisContext *c = redisConnectWithTimeout(n->host, (int)n->port, ct);
	char why[256];

	if (c == NULL) {
		conn_fail(r, n, "connect", "out of memory");
		return NULL;
	}
	if (c->err != 0) {
		conn_fail(r, n, "connect", c->errstr);
		redisFree(c);
		return NULL;
	}
	if (redisSetTimeout(c, rt) != REDIS_OK ||
	    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &wt, sizeof(wt)) != 0) {
		conn_fail(r, n, "timeouts", strerror(errno));
		redisFree(c);
		return NULL;
	}
	if (r->password != NULL && !(r->user != NULL ?
	    conn_cmd_ok(c, why, sizeof(why), "AUTH %s %s", r->user,
	    r->password) : conn_cmd_ok(c, why, sizeof(why), "AUTH %s",
	    r->password))) {
		conn_fail(r, n, "AUTH", why);
		redisFree(c);
		return NULL;
	}
	if (r->database != 0 && !conn_cmd_ok(c, why, sizeof(why),
	    "SELECT %u", r->database)) {
		conn_fail(r, n, "SELECT", why);
		redisFree(c);
		return NULL;
	}
	if (!r->cluster && r->nseeds > 1 && !conn_is_master(c, why,
	    sizeof(why))) {
		conn_fail(r, n, "ROLE", why);
		redisFree(c);
		return NULL;
	}
	if (atomic_exchange(&n->down, 0) && !atomic_load(&r->quiet))
		idem_log(NULL, IDEM_LOG_INFO, "redis store: %s:%u: reached "
		    "again", n->host, n->port);
	return c;
}

/* A connection of n: an idle one, a new one while the pool has room, or
 * the next one freed.  NULL when a new one failed (logged). */
static redisContext *
conn_get(idem_redis *r, rnode *n)
{
	redisContext *c;

	pthread_mutex_lock(&n->lock);
	while (n->nidle == 0 && n->nopen >= r->pool_size)
		pthread_cond_wait(&n->freed, &n->lock);
	if (n->nidle > 0) {
		c = n->idle[--n->nidle];
		pthread_mutex_unlock(&n->lock);
		return c;
	}
	n->nopen++;
	pthread_mutex_unlock(&n->lock);
	if ((c = conn_open(r, n)) == NULL) {
		pthread_mutex_lock(&n->lock);
		n->nopen--;
		pthread_cond_signal(&n->freed);
		pthread_mutex_unlock(&n->lock);
	}
	return c;
}

/* Gives c back to n's pool, or closes it (bad: its state is unknown). */
static void
conn_put(rnode *n, redisContext *c, int bad)
{
	pthread_mutex_lock(&n->lock);
	if (bad || c->err != 0) {
		redisFree(c);
		n->nopen--;
	} else
		n->idle[n->nidle++] = c;
	pthread_cond_signal(&n->freed);
	pthread_mutex_unlock(&n->lock);
}

/* Closes n's idle connections: its server went away, or is no longer
 * the one to use. */
static void
node_drain(rnode *n)
{
	pthread_mutex_lock(&n->lock);
	while (n->nidle > 0) {
		redisFree(n->idle[--n->nidle]);
		n->nopen--;
	}
	pthread_mutex_unlock(&n->lock);
}

/* ------------------------------------------------------------ the map */

/* Reads the cluster's slot map from node n: CLUSTER SLOTS, on a
 * connection of its own (never the pool's, whose users may be waiting
 * for the map's lock).  Returns 0, or -1 when n did not give one
 * (map_lock held for writing). */
static int
map_read_from(idem_redis *r, rnode *n)
{
	redisContext *c = conn_open(r, n);
	redisReply *rep;
	size_t i;
	int ok = -1;

	if (c == NULL)
		return -1;
	rep = redisCommand(c, "CLUSTER SLOTS");
	if (rep != NULL && rep->type == REDIS_REPLY_ARRAY) {
		memset(r->slots, 0, sizeof(r->slots));
		for (i = 0; i < rep->elements; i++) {
			const redisReply *e = rep->element[i], *m;
			long long lo, hi, s;
			int ni;
			if (e->type != REDIS_REPLY_ARRAY || e->elements < 3)
				continue;
			m = e->element[2];
			if (m->type != REDIS_REPLY_ARRAY || m->elements < 2 ||
			    m->element[0]->type != REDIS_REPLY_STRING ||
			    m->element[1]->type != REDIS_REPLY_INTEGER)
				continue;
			lo = e->element[0]->integer;
			hi = e->element[1]->integer;
			/* an empty host is the node we asked */
			ni = node_index(r, m->element[0]->len > 0 ?
			    m->element[0]->str : n->host,
			    (unsigned)m->element[1]->integer);
			if (ni < 0 || lo < 0 || hi >= IDEM_REDIS_SLOTS)
				continue;
			for (s = lo; s <= hi; s++)
				r->slots[s] = (unsigned short)(ni + 1);
		}
		ok = 0;
	} else if (rep != NULL && rep->type == REDIS_REPLY_ERROR)
		conn_fail(r, n, "CLUSTER SLOTS", rep->str);
	redisFree(c);
	if (rep != NULL)
		freeReplyObject(rep);
	return ok;
}

/* Reads the slot map again from any node that gives it, the one that
 * failed (failed, or NULL) last.  Returns 0 or -1. */
static int
map_refresh(idem_redis *r, const rnode *failed)
{
	size_t i, n;
	int ok = -1;

	pthread_rwlock_wrlock(&r->map_lock);
	n = r->nnodes;
	for (i = 0; i < n && ok != 0; i++)
		if (r->nodes[i] != failed)
			ok = map_read_from(r, r->nodes[i]);
	if (ok != 0 && failed != NULL)
		for (i = 0; i < n && ok != 0; i++)
			if (r->nodes[i] == failed)
				ok = map_read_from(r, r->nodes[i]);
	pthread_rwlock_unlock(&r->map_lock);
	return ok;
}

/* The node to send a command of slot to; NULL when none is known. */
static rnode *
node_for(idem_redis *r, unsigned slot)
{
	rnode *n = NULL;

	pthread_rwlock_rdlock(&r->map_lock);
	if (!r->cluster)
		n = r->nodes[r->current];
	else if (r->slots[slot % IDEM_REDIS_SLOTS] != 0)
		n = r->nodes[r->slots[slot % IDEM_REDIS_SLOTS] - 1];
	pthread_rwlock_unlock(&r->map_lock);
	return n;
}

/* n failed (unreachable, or no longer a master): outside a cluster the
 * next host of the list is tried from now on; in one, the map is read
 * again. */
static void
node_failed(idem_redis *r, rnode *n)
{
	node_drain(n);
	if (r->cluster) {
		(void)map_refresh(r, n);
		return;
	}
	pthread_rwlock_wrlock(&r->map_lock);
	if (r->nodes[r->current] == n)
		r->current = (r->current + 1) % r->nseeds;
	pthread_rwlock_unlock(&r->map_lock);
}

/* A MOVED answer's "SLOT HOST:PORT" (after "MOVED "): the slot's node from
 * now on.  Returns the node, or NULL when the text is not one. */
static rnode *
moved(idem_redis *r, const char *text, int update)
{
	char host[IDEM_HOST_MAX];
	unsigned long slot, port;
	const char *sp, *colon;
	rnode *n = NULL;
	int ni;

	slot = strtoul(text, NULL, 10);
	if ((sp = strchr(text, ' ')) == NULL || (colon = strrchr(sp,
	    ':')) == NULL || (size_t)(colon - sp - 1) >= sizeof(host) ||
	    slot >= IDEM_REDIS_SLOTS)
		return NULL;
	memcpy(host, sp + 1, (size_t)(colon - sp - 1));
	host[colon - sp - 1] = '\0';
	port = strtoul(colon + 1, NULL, 10);
	if (port == 0 || port > 65535)
		return NULL;
	pthread_rwlock_wrlock(&r->map_lock);
	if ((ni = node_index(r, host, (unsigned)port)) >= 0) {
		n = r->nodes[ni];
		if (update)
			r->slots[slot] = (unsigned short)(ni + 1);
	}
	pthread_rwlock_unlock(&r->map_lock);
	return n;
}

/* --------------------------------------------------------- the client */

static int wait_words(const idem_redis *r, const char *wv[4], char reps[16],
    char ms[16]);
static int wait_met(const idem_redis *r, const redisReply *w);

idem_err
idem_redis_new(const idem_config_redis *rc, const char *file,
    unsigned pool_size, const char *const *scripts, size_t nscripts,
    idem_redis **out)
{
	idem_endpoint ends[IDEM_ENDPOINTS_MAX];
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen, b;
	idem_redis *r;
	idem_err err;
	size_t i, n;

	if ((r = calloc(1, sizeof(*r))) == NULL)
		return IDEM_ERR_NOMEM;
	r->database = rc->database;
	r->pool_size = pool_size > 0 ? pool_size : rc->pool_size > 0 ?
	    rc->pool_size : 8;
	r->connect_ms = rc->connect_timeout > 0 ? (unsigned)rc->connect_timeout
	    : 2000;
	r->read_ms = rc->read_timeout > 0 ? (unsigned)rc->read_timeout : 5000;
	r->write_ms = rc->write_timeout > 0 ? (unsigned)rc->write_timeout :
	    5000;
	r->cluster = rc->cluster;
	r->file = file;
	r->scripts = scripts;
	r->nscripts = nscripts;
	pthread_rwlock_init(&r->map_lock, NULL);
	if ((r->sha = calloc(nscripts > 0 ? nscripts : 1, sizeof(*r->sha))) ==
	    NULL || (rc->user != NULL && rc->user[0] != '\0' && (r->user =
	    strdup(rc->user)) == NULL)) {
		idem_redis_free(r);
		return IDEM_ERR_NOMEM;
	}
	for (i = 0; i < nscripts; i++) {
		if (EVP_Digest(scripts[i], strlen(scripts[i]), md, &mdlen,
		    EVP_sha1(), NULL) != 1) {
			idem_redis_free(r);
			return IDEM_ERR_NOMEM;
		}
		for (b = 0; b < mdlen && b < 20; b++)
			snprintf(r->sha[i] + 2 * b, 3, "%02x", md[b]);
	}
	/* the config's check parsed it; a default when there is none */
	if (idem_parse_endpoints(rc->host != NULL ? rc->host : "127.0.0.1", 0,
	    rc->port > 0 ? rc->port : 6379, ends, &n) != NULL || n == 0) {
		ends[0] = (idem_endpoint){ .host = "127.0.0.1", .port = 6379 };
		n = 1;
	}
	for (i = 0; i < n; i++)
		if (node_index(r, ends[i].host, ends[i].port) < 0) {
			idem_redis_free(r);
			return IDEM_ERR_NOMEM;
		}
	r->nseeds = r->nnodes;
	if ((err = idem_password_read(rc->password_file,
	    "IDEMFCGI_REDIS_PASSWORD", "[redis] password-file", file,
	    &r->password)) != IDEM_OK) {
		idem_redis_free(r);
		return err;
	}
	*out = r;
	return IDEM_OK;
}

void
idem_redis_free(idem_redis *r)
{
	size_t i;

	if (r == NULL)
		return;
	for (i = 0; i < r->nnodes; i++)
		node_free(r->nodes[i]);
	if (r->password != NULL)
		explicit_bzero(r->password, strlen(r->password));
	free(r->password);
	free(r->user);
	free(r->sha);
	pthread_rwlock_destroy(&r->map_lock);
	free(r);
}

void
idem_redis_quiet(idem_redis *r)
{
	atomic_store(&r->quiet, 1);
}

void
idem_redis_set_wait(idem_redis *r, idem_redis_wait w, unsigned replicas,
    unsigned timeout_ms)
{
	r->wait = w;
	r->wait_replicas = replicas;
	r->wait_ms = timeout_ms;
}

unsigned long long
idem_redis_sent(idem_redis *r)
{
	return r != NULL ? atomic_load(&r->sent) : 0;
}

/* Whether an error reply starts with word (then a blank or its end). */
static int
err_is(const redisReply *rep, const char *word)
{
	size_t len = strlen(word);

	return rep->type == REDIS_REPLY_ERROR && rep->len >= len &&
	    strncmp(rep->str, word, len) == 0 && (rep->len == len ||
	    rep->str[len] == ' ');
}

/* An error that says the server is not the one to write to now, or not
 * ready: another (or the same, later) will be. */
static int
err_elsewhere(const redisReply *rep)
{
	return err_is(rep, "READONLY") || err_is(rep, "LOADING") ||
	    err_is(rep, "MASTERDOWN") || err_is(rep, "CLUSTERDOWN") ||
	    err_is(rep, "TRYAGAIN");
}

/* One command and its extra (a WAIT: nextra 1) on node n's connection c,
 * after ASKING when ask: the replies into rep[0] (and rep[1]).  Returns 0,
 * or -1 when the connection failed (*sent: the command may have been
 * applied). */
static int
send_cmd(redisContext *c, int ask, int argc, const char **argv,
    const size_t *lens, int nextra, int eargc, const char **eargv,
    redisReply **rep, int *sent)
{
	redisReply *asking = NULL;
	void *p;

	rep[0] = rep[1] = NULL;
	*sent = 0;
	if ((ask && redisAppendCommand(c, "ASKING") != REDIS_OK) ||
	    redisAppendCommandArgv(c, argc, argv, lens) != REDIS_OK ||
	    (nextra > 0 && redisAppendCommandArgv(c, eargc, eargv, NULL) !=
	    REDIS_OK))
		return -1;
	*sent = 1;
	if (ask) {
		if (redisGetReply(c, &p) != REDIS_OK)
			return -1;
		asking = p;
		freeReplyObject(asking);
	}
	if (redisGetReply(c, &p) != REDIS_OK)
		return -1;
	rep[0] = p;
	if (nextra > 0) {
		if (redisGetReply(c, &p) != REDIS_OK) {
			freeReplyObject(rep[0]);
			rep[0] = NULL;
			return -1;
		}
		rep[1] = p;
	}
	return 0;
}

/* Loads script i on c's server (its SHA-1 unknown there).  Returns 0 or
 * -1 (the connection's failure, or the server's refusal: logged). */
static int
script_load(idem_redis *r, rnode *n, redisContext *c, size_t i)
{
	redisReply *rep = redisCommand(c, "SCRIPT LOAD %s", r->scripts[i]);
	int ok;

	if (rep == NULL)
		return -1;
	ok = rep->type == REDIS_REPLY_STRING && strcmp(rep->str, r->sha[i]) ==
	    0;
	if (!ok)
		idem_log(NULL, IDEM_LOG_ERROR, "redis store: %s:%u: SCRIPT "
		    "LOAD of script %zu: %.*s", n->host, n->port, i,
		    rep->type == REDIS_REPLY_ERROR ? (int)rep->len : 0,
		    rep->type == REDIS_REPLY_ERROR ? rep->str : "");
	freeReplyObject(rep);
	return ok ? 0 : -1;
}

/*
 * The engine of idem_redis_run and the evals: the command (and its
 * extra, a WAIT, whose reply goes into *extra) on slot's server, after
 * the redirections, failovers and one lost answer; script (not -1) names
 * the script a NOSCRIPT answer loads.
 */
static idem_err
run(idem_redis *r, unsigned slot, int argc, const char **argv,
    const size_t *lens, int eargc, const char **eargv, long script,
    redisReply **reply, redisReply **extra, int *retried)
{
	rnode *n, *ask = NULL;
	redisContext *c;
	redisReply *rep[2];
	int attempt, sent, lost = 0, redirects = 0;

	*reply = NULL;
	if (extra != NULL)
		*extra = NULL;
	if (eargc > 0 && extra == NULL)
		return IDEM_ERR_INVALID;
	for (attempt = 0; attempt < ATTEMPTS; attempt++) {
		if (attempt > 1)
			idem_sleep_ms(attempt * 50L);
		if ((n = ask != NULL ? ask : node_for(r, slot)) == NULL) {
			(void)map_refresh(r, NULL);
			continue;
		}
		if ((c = conn_get(r, n)) == NULL) {
			node_failed(r, n);
			ask = NULL;
			continue;
		}
		atomic_fetch_add(&r->sent, 1);
		if (send_cmd(c, ask != NULL, argc, argv, lens, eargc > 0,
		    eargc, eargv, rep, &sent) != 0) {
			conn_fail(r, n, "command", c->errstr);
			conn_put(n, c, 1);
			ask = NULL;
			/* sent and unanswered: maybe applied; once more, on
			 * the same server (a slow answer is no failover: only
			 * a server that cannot be reached, or says READONLY,
			 * moves the client on) */
			if (sent) {
				if (lost++ > 0)
					break;
				if (retried != NULL)
					*retried = 1;
				node_drain(n);
			} else
				node_failed(r, n);
			continue;
		}
		ask = NULL;
		if (err_is(rep[0], "MOVED") || err_is(rep[0], "ASK")) {
			int is_ask = err_is(rep[0], "ASK");
			size_t skip = is_ask ? 4 : 6;
			char where[IDEM_HOST_MAX + 32] = "";
			rnode *to;

			if (rep[0]->len > skip)
				snprintf(where, sizeof(where), "%.*s",
				    (int)(rep[0]->len - skip), rep[0]->str + skip);
			/* the connection back first: moved() takes the map's
			 * lock, under which a refresh may wait for a connection
			 * of this very pool */
			conn_put(n, c, 0);
			freeReplyObject(rep[0]);
			if (rep[1] != NULL)
				freeReplyObject(rep[1]);
			to = where[0] != '\0' ? moved(r, where, !is_ask) : NULL;
			if (is_ask)
				ask = to;
			/* not an attempt: a WAIT's reply after it is about
			 * nothing, and the command goes where it is sent */
			if (to != NULL && redirects++ < REDIRECTS)
				attempt--;
			continue;
		}
		if (script >= 0 && err_is(rep[0], "NOSCRIPT")) {
			freeReplyObject(rep[0]);
			if (rep[1] != NULL)
				freeReplyObject(rep[1]);
			if (script_load(r, n, c, (size_t)script) != 0) {
				conn_put(n, c, 1);
				continue;
			}
			conn_put(n, c, 0);
			/* not an attempt, but bounded as the redirections:
			 * a server whose scripts keep going away */
			if (redirects++ < REDIRECTS)
				attempt--;
			continue;
		}
		if (err_elsewhere(rep[0])) {
			conn_fail(r, n, "command", rep[0]->str);
			freeReplyObject(rep[0]);
			if (rep[1] != NULL)
				freeReplyObject(rep[1]);
			conn_put(n, c, 1);
			node_failed(r, n);
			continue;
		}
		conn_put(n, c, 0);
		*reply = rep[0];
		if (extra != NULL)
			*extra = rep[1];
		else if (rep[1] != NULL)
			freeReplyObject(rep[1]);
		return IDEM_OK;
	}
	if (!atomic_load(&r->quiet))
		idem_log(NULL, IDEM_LOG_ERROR, "redis store: no server answered "
		    "%.*s (see the warnings above)", (int)lens[0], argv[0]);
	return IDEM_ERR_STORE;
}

idem_err
idem_redis_run(idem_redis *r, unsigned slot, int argc, const char **argv,
    const size_t *lens, redisReply **reply, int *retried)
{
	return run(r, slot, argc, argv, lens, 0, NULL, -1, reply, NULL,
	    retried);
}

/* EVALSHA of script i: its arguments made in front of argv's. */
static idem_err
eval(idem_redis *r, size_t i, int nkeys, int nargs, const char **argv,
    const size_t *lens, int eargc, const char **eargv, redisReply **reply,
    redisReply **extra, int *retried)
{
	const char *av[64];
	size_t al[64];
	char nk[16];
	idem_err err;
	int k;

	if (i >= r->nscripts || nkeys < 1 || nkeys + nargs + 3 > 64)
		return IDEM_ERR_INVALID;
	av[0] = "EVALSHA";
	al[0] = 7;
	av[1] = r->sha[i];
	al[1] = 40;
	al[2] = (size_t)snprintf(nk, sizeof(nk), "%d", nkeys);
	av[2] = nk;
	for (k = 0; k < nkeys + nargs; k++) {
		av[3 + k] = argv[k];
		al[3 + k] = lens[k];
	}
	err = run(r, idem_redis_slot(argv[0], lens[0]), 3 + nkeys + nargs, av,
	    al, eargc, eargv, (long)i, reply, extra, retried);
	if (err == IDEM_OK && (*reply)->type == REDIS_REPLY_ERROR) {
		idem_log(NULL, IDEM_LOG_ERROR, "redis store: script %zu: %.*s", i,
		    (int)(*reply)->len, (*reply)->str);
		freeReplyObject(*reply);
		*reply = NULL;
		if (extra != NULL && *extra != NULL) {
			freeReplyObject(*extra);
			*extra = NULL;
		}
		return IDEM_ERR_STORE;
	}
	return err;
}

idem_err
idem_redis_eval(idem_redis *r, size_t i, int nkeys, int nargs,
    const char **argv, const size_t *lens, redisReply **reply, int *retried)
{
	return eval(r, i, nkeys, nargs, argv, lens, 0, NULL, reply, NULL,
	    retried);
}

idem_err
idem_redis_eval_durable(idem_redis *r, size_t i, int nkeys, int nargs,
    const char **argv, const size_t *lens, redisReply **reply, int *retried,
    int *durable)
{
	char reps[16], ms[16];
	const char *wv[4];
	redisReply *w = NULL;
	idem_err err;
	int nw;

	if (durable != NULL)
		*durable = 1;
	if ((nw = wait_words(r, wv, reps, ms)) == 0)
		return eval(r, i, nkeys, nargs, argv, lens, 0, NULL, reply,
		    NULL, retried);
	err = eval(r, i, nkeys, nargs, argv, lens, nw, wv, reply, &w, retried);
	if (err != IDEM_OK)
		return err;
	if (durable != NULL)
		*durable = wait_met(r, w);
	if (w != NULL)
		freeReplyObject(w);
	return IDEM_OK;
}

int
idem_redis_is_cluster(const idem_redis *r)
{
	return r->cluster;
}

/* The wait command of r into wv (4 words at most); returns its words, 0
 * without one. */
static int
wait_words(const idem_redis *r, const char *wv[4], char reps[16],
    char ms[16])
{
	if (r->wait == IDEM_REDIS_WAIT_NONE)
		return 0;
	snprintf(reps, 16, "%u", r->wait_replicas);
	snprintf(ms, 16, "%u", r->wait_ms);
	if (r->wait == IDEM_REDIS_WAIT_REPLICAS) {
		wv[0] = "WAIT";
		wv[1] = reps;
		wv[2] = ms;
		return 3;
	}
	wv[0] = "WAITAOF";
	wv[1] = "1";
	wv[2] = reps;
	wv[3] = ms;
	return 4;
}

/* Whether the reply w of a wait says it was met. */
static int
wait_met(const idem_redis *r, const redisReply *w)
{
	if (w == NULL)
		return 0;
	if (w->type == REDIS_REPLY_INTEGER)
		return w->integer >= (long long)r->wait_replicas;
	if (w->type == REDIS_REPLY_ARRAY && w->elements == 2 &&
	    w->element[0]->type == REDIS_REPLY_INTEGER &&
	    w->element[1]->type == REDIS_REPLY_INTEGER)
		return w->element[0]->integer >= 1 &&
		    w->element[1]->integer >= (long long)r->wait_replicas;
	if (w->type == REDIS_REPLY_ERROR)
		idem_log(NULL, IDEM_LOG_ERROR, "redis store: %s: %.*s",
		    r->wait == IDEM_REDIS_WAIT_AOF ? "WAITAOF" : "WAIT",
		    (int)w->len, w->str);
	return 0;
}

idem_err
idem_redis_eval_pipeline(idem_redis *r, size_t i, idem_redis_call *calls,
    size_t n, int *durable, int lose)
{
	char nk[16], reps[16], ms[16];
	const char *av[64], *wv[4];
	size_t al[64], k;
	int a, nw, failed = 0;
	redisContext *c;
	rnode *node;
	void *p;

	if (durable != NULL)
		*durable = 0;
	for (k = 0; k < n; k++) {
		calls[k].reply = NULL;
		calls[k].sent = 0;
	}
	if (r->cluster || i >= r->nscripts)
		return IDEM_ERR_INVALID;
	if ((node = node_for(r, 0)) == NULL || (c = conn_get(r, node)) ==
	    NULL) {
		if (node != NULL)
			node_failed(r, node);
		return IDEM_ERR_STORE;
	}
	nw = wait_words(r, wv, reps, ms);
	for (k = 0; k < n && !failed; k++) {
		if (calls[k].nkeys + calls[k].nargs + 3 > 64) {
			failed = 1;
			break;
		}
		av[0] = "EVALSHA";
		al[0] = 7;
		av[1] = r->sha[i];
		al[1] = 40;
		al[2] = (size_t)snprintf(nk, sizeof(nk), "%d", calls[k].nkeys);
		av[2] = nk;
		for (a = 0; a < calls[k].nkeys + calls[k].nargs; a++) {
			av[3 + a] = calls[k].argv[a];
			al[3 + a] = calls[k].lens[a];
		}
		failed = redisAppendCommandArgv(c, 3 + calls[k].nkeys +
		    calls[k].nargs, av, al) != REDIS_OK;
	}
	if (!failed && nw > 0)
		failed = redisAppendCommandArgv(c, nw, wv, NULL) != REDIS_OK;
	if (failed) {
		/* only appended to hiredis's buffer: nothing written */
		conn_put(node, c, 1);
		return IDEM_ERR_STORE;
	}
	atomic_fetch_add(&r->sent, n);
	for (k = 0; k < n; k++)
		calls[k].sent = 1;
	for (k = 0; k < n; k++) {
		if (redisGetReply(c, &p) != REDIS_OK) {
			conn_fail(r, node, "command", c->errstr);
			conn_put(node, c, 1);
			node_failed(r, node);
			return IDEM_OK;
		}
		calls[k].reply = p;
	}
	if (nw > 0) {
		if (redisGetReply(c, &p) != REDIS_OK) {
			conn_fail(r, node, "command", c->errstr);
			conn_put(node, c, 1);
			node_failed(r, node);
			return IDEM_OK;
		}
		if (durable != NULL)
			*durable = wait_met(r, p);
		freeReplyObject(p);
	} else if (durable != NULL)
		*durable = 1;
	if (lose) {
		for (k = 0; k < n; k++) {
			freeReplyObject(calls[k].reply);
			calls[k].reply = NULL;
		}
	}
	conn_put(node, c, lose);
	return IDEM_OK;
}

idem_err
idem_redis_ping(idem_redis *r)
{
	const char *argv[1] = { "PING" };
	size_t lens[1] = { 4 };
	redisReply *rep;
	idem_err err;

	if ((err = idem_redis_run(r, 0, 1, argv, lens, &rep, NULL)) != IDEM_OK)
		return err;
	err = rep->type == REDIS_REPLY_STATUS || rep->type ==
	    REDIS_REPLY_STRING ? IDEM_OK : IDEM_ERR_STORE;
	freeReplyObject(rep);
	return err;
}

char *
idem_redis_info(idem_redis *r, const char *section)
{
	const char *argv[2] = { "INFO", section };
	size_t lens[2] = { 4, strlen(section) };
	redisReply *rep;
	char *text = NULL;

	if (idem_redis_run(r, 0, 2, argv, lens, &rep, NULL) != IDEM_OK)
		return NULL;
	if (rep->type == REDIS_REPLY_STRING)
		text = strndup(rep->str, rep->len);
	freeReplyObject(rep);
	return text;
}

/* Each master of r (one server: the current one) into nodes (at most
 * max); returns how many.  A cluster's map is read first when it has
 * none. */
size_t
idem_redis_masters(idem_redis *r, unsigned *slots, size_t max)
{
	size_t n = 0, s, k;
	int seen;

	if (!r->cluster) {
		if (max > 0)
			slots[n++] = 0;
		return n;
	}
	if (node_for(r, 0) == NULL)
		(void)map_refresh(r, NULL);
	pthread_rwlock_rdlock(&r->map_lock);
	for (s = 0; s < IDEM_REDIS_SLOTS && n < max; s++) {
		if (r->slots[s] == 0)
			continue;
		for (seen = 0, k = 0; k < n && !seen; k++)
			seen = r->slots[slots[k]] == r->slots[s];
		if (!seen)
			slots[n++] = (unsigned)s;
	}
	pthread_rwlock_unlock(&r->map_lock);
	return n;
}
