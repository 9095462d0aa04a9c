/*
 * idem_store_postgres.h - the PostgreSQL store (idem_store_postgres.c and
 * idem_store_pg_*.c), which idem_store_open makes for store = postgres.
 */
#ifndef IDEM_STORE_POSTGRES_H
#define IDEM_STORE_POSTGRES_H

#include <stdint.h>

#include "idem_store.h"

struct idem_config_postgres;
struct idem_db;

/*
 * The PostgreSQL store over the database of the [postgres] section pg,
 * with o's pool_size connections (pg and o borrowed for the call).
 * Connects once to check that the schema (schema/postgres/) is there and
 * of the version this build needs.  Returns IDEM_OK with *out (a store
 * set aside when o allows it and no server answered),
 * IDEM_ERR_CONFIG (password file), IDEM_ERR_NOMEM or IDEM_ERR_STORE
 * (unreachable, or a missing or old schema), logged.
 */
idem_err idem_store_postgres_new(const struct idem_config_postgres *pg,
    const idem_store_opts *o, idem_store **out);

/*
 * The PostgreSQL store's settle_ms for o: each session's statement_timeout
 * (write-timeout, read-timeout and the lock wait, max(inflight-wait, 1 s)):
 * the server ends a statement its client gave up on by then, so a
 * reservation whose answer was lost lands within it; and two seconds
 * more.
 */
uint64_t idem_store_postgres_settle_ms(const struct idem_config_postgres *pg,
    const idem_store_opts *o);

/* Whether the database of the [postgres] section pg (of the config file
 * file) answers now: one connection tried quietly.  1 or 0. */
int idem_store_postgres_reachable(const struct idem_config_postgres *pg,
    const char *file);

/*
 * A pool of the database of the [postgres] section pg for a plugin (its
 * data source, idemfcgi_db.h): size connections, each preparing the nsql
 * statements of sql (borrowed: static storage; '?' placeholders) and the
 * store's statements of transactional routes, in sessions set as the
 * store's, whose transaction, left idle longer than o's inflight_ttl (a
 * hung worker), the server ends.  Returns IDEM_OK with *out (free with
 * idem_db_free), IDEM_ERR_INVALID (a statement's placeholders),
 * IDEM_ERR_CONFIG (password file) or IDEM_ERR_NOMEM, logged.
 */
idem_err idem_store_postgres_db_new(const struct idem_config_postgres *pg,
    const idem_store_opts *o, const char *const *sql, size_t nsql,
    unsigned size, struct idem_db **out);

/* Runs sql (one statement, DDL) on a connection of its own to the
 * database of the [postgres] section pg (of the config file file).
 * Returns IDEM_OK, IDEM_ERR_STORE (logged), IDEM_ERR_CONFIG or
 * IDEM_ERR_NOMEM. */
idem_err idem_store_postgres_db_exec(const struct idem_config_postgres *pg,
    const char *file, const char *sql);

/* Tests only: the next "insert" (a reservation), "takeover", "commit",
 * "release" or "renew" statement of the PostgreSQL store s is applied
 * and its answer lost, with its connection.  Returns 0, or -1 (not a
 * PostgreSQL store, no such statement). */
int idem_store_postgres_lose_answer(idem_store *s, const char *op);

/* Tests: the statements the PostgreSQL store s has sent
 * so far, each attempt counted (0 for another store). */
unsigned long long idem_store_postgres_statements(idem_store *s);

#endif
