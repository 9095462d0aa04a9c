/*
 * idem_store_redis.h - the Redis store (idem_store_redis.c and
 * idem_store_redis_*.c over the client of idem_redis.c), which
 * idem_store_open makes for store = redis.
 */
#ifndef IDEM_STORE_REDIS_H
#define IDEM_STORE_REDIS_H

#include <stdint.h>

#include "idem_store.h"

struct idem_config_redis;

/*
 * The Redis store over the server (or cluster) of the [redis] section rc,
 * with o's pool_size connections per server (rc and o borrowed for the
 * call).  Asks the server once that it answers, and, for durability =
 * aof, whether it can.  Returns IDEM_OK with *out (a store set aside when
 * o allows it and no server answered), IDEM_ERR_CONFIG (the password
 * file, the key prefix, a durability the server cannot give),
 * IDEM_ERR_NOMEM or IDEM_ERR_STORE (unreachable), logged.
 */
idem_err idem_store_redis_new(const struct idem_config_redis *rc,
    const idem_store_opts *o, idem_store **out);

/* The Redis store's settle_ms: its write and read timeouts (a command
 * the server read before its client gave up runs at once) and two
 * seconds more. */
uint64_t idem_store_redis_settle_ms(const struct idem_config_redis *rc);

/* Whether a server of the [redis] section rc (of the config file file)
 * answers now: one PING, quietly.  1 or 0. */
int idem_store_redis_reachable(const struct idem_config_redis *rc,
    const char *file);

/* Tests only: the next pipeline of the lane op ("insert": reservations,
 * "commit") of the Redis store s is applied and its replies lost, with
 * its connection.  Returns 0, or -1 (not a Redis store that batches, no
 * such lane). */
int idem_store_redis_lose_answer(idem_store *s, const char *op);

/* Tests: the commands the Redis store s has sent so far, each attempt
 * and redirection counted (0 for another store). */
unsigned long long idem_store_redis_commands(idem_store *s);

#endif
