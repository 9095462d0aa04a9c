/*
 * idem_redis.h - a Redis client over hiredis for the Redis store: pools
 * of blocking connections, one server (and its stand-ins, in failover
 * order) or a Redis Cluster (keys by slot, MOVED and ASK followed, the
 * slot map read again after a node's failover), and Lua scripts loaded
 * once per server and called by their SHA-1.
 *
 * hiredis 0.14 (Debian 12's) has no cluster support of its own; the
 * cluster's part here is the routing of the cluster specification (its
 * CRC16 key slots, CLUSTER SLOTS, the two redirections), nothing more.
 */
#ifndef IDEM_REDIS_H
#define IDEM_REDIS_H

#include <stddef.h>

#include <hiredis/hiredis.h>

#include "idemfcgi.h"

struct idem_config_redis;

/* The number of slots of a Redis Cluster. */
#define IDEM_REDIS_SLOTS 16384

typedef struct idem_redis idem_redis;

/*
 * A client of the [redis] section rc (borrowed for the call; the config
 * file's name file for messages) with pool_size connections per server
 * (0: rc's pool-size), and the nscripts Lua scripts of scripts (borrowed:
 * static storage), called by idem_redis_eval by their index.  Connects
 * to nothing yet.  Returns IDEM_OK with *out (free with idem_redis_free),
 * IDEM_ERR_CONFIG (the password file, logged) or IDEM_ERR_NOMEM.
 */
idem_err idem_redis_new(const struct idem_config_redis *rc, const char *file,
    unsigned pool_size, const char *const *scripts, size_t nscripts,
    idem_redis **out);
/* Closes every connection and frees r; NULL is fine. */
void idem_redis_free(idem_redis *r);
/* Logs no connection failure from now on (a probe).  */
void idem_redis_quiet(idem_redis *r);

/* The cluster slot of key (its hash tag's, when it has one). */
unsigned idem_redis_slot(const char *key, size_t len);

/*
 * Runs the command argv (argc arguments of lens bytes each) on the server
 * of slot (ignored outside a cluster): a server that is away or no longer
 * takes writes is left for the next one of the list, or the cluster's
 * map read again; a command whose answer was lost with its connection
 * (sent, maybe applied) is sent once more on a new one, and *retried set
 * (when not NULL).  Returns IDEM_OK with *reply (caller frees with
 * freeReplyObject; a Redis error reply too), IDEM_ERR_STORE (no server
 * answered: logged) or IDEM_ERR_NOMEM.
 */
idem_err idem_redis_run(idem_redis *r, unsigned slot, int argc,
    const char **argv, const size_t *lens, redisReply **reply,
    int *retried);

/*
 * Calls script i (of idem_redis_new's) with the nkeys keys and the nargs
 * arguments of argv and lens (keys first), on the server of the first
 * key's slot, by its SHA-1 (loaded first where the server does not know
 * it: a restarted or new server).  Returns as idem_redis_run; a Redis
 * error reply (the script's failure) is IDEM_ERR_STORE, logged.
 */
idem_err idem_redis_eval(idem_redis *r, size_t i, int nkeys, int nargs,
    const char **argv, const size_t *lens, redisReply **reply,
    int *retried);

/* What idem_redis_eval_durable waits for after its script. */
typedef enum idem_redis_wait {
	IDEM_REDIS_WAIT_NONE = 0,
	IDEM_REDIS_WAIT_REPLICAS,   /* WAIT replicas timeout */
	IDEM_REDIS_WAIT_AOF         /* WAITAOF 1 replicas timeout */
} idem_redis_wait;

/* Sets what idem_redis_eval_durable waits for: replicas replicas, at most
 * timeout_ms. */
void idem_redis_set_wait(idem_redis *r, idem_redis_wait w, unsigned replicas,
    unsigned timeout_ms);

/*
 * idem_redis_eval, and in the same round trip the wait set by
 * idem_redis_set_wait (none: as idem_redis_eval); *durable (not NULL)
 * says whether the wait was met (1 without one).  Returns as
 * idem_redis_eval.
 */
idem_err idem_redis_eval_durable(idem_redis *r, size_t i, int nkeys,
    int nargs, const char **argv, const size_t *lens, redisReply **reply,
    int *retried, int *durable);

/* One command of a pipeline: its arguments (borrowed), and what came
 * back. */
typedef struct idem_redis_call {
	int nkeys, nargs;           /* keys first, as idem_redis_eval's */
	const char **argv;
	const size_t *lens;
	redisReply *reply;          /* out (caller frees); NULL: none came */
	int sent;                   /* out: written, so maybe applied, when
	                             * reply is NULL */
} idem_redis_call;

/*
 * Script i for each of the n calls, pipelined: written to one connection
 * of the server at once (with the wait of idem_redis_set_wait after
 * them, one for all), then their replies read.  Outside a cluster only
 * (NULL slot map: the caller sends each alone in a cluster).  Follows no
 * redirection and loads no script: a call whose reply is an error (a
 * NOSCRIPT, a READONLY) or is missing is the caller's to send again
 * alone.  *durable (not NULL) says whether the wait was met.  lose
 * (tests): the replies are read and thrown away, the connection closed,
 * as if lost.  Returns IDEM_OK (each call's reply, or NULL with sent),
 * IDEM_ERR_INVALID (in a cluster) or IDEM_ERR_STORE (no connection:
 * nothing sent).
 */
idem_err idem_redis_eval_pipeline(idem_redis *r, size_t i,
    idem_redis_call *calls, size_t n, int *durable, int lose);

/* Whether r is a client of a Redis Cluster. */
int idem_redis_is_cluster(const idem_redis *r);

/* A slot of each master (one server: slot 0), at most max of them, into
 * slots; returns how many.  A cluster's map is read first when it has
 * none. */
size_t idem_redis_masters(idem_redis *r, unsigned *slots, size_t max);

/* The commands sent so far, each attempt and each redirection counted
 * (tests). */
unsigned long long idem_redis_sent(idem_redis *r);

/* Whether a server answers: a PING on a connection of the pool.  IDEM_OK
 * or IDEM_ERR_STORE. */
idem_err idem_redis_ping(idem_redis *r);

/*
 * The server's INFO section (e.g. "server", "persistence") as text
 * (caller frees), from the server of slot 0 (one server: it); NULL when
 * none answered.
 */
char *idem_redis_info(idem_redis *r, const char *section);

#endif
