/*
 * idem_store_mysql.h - the MySQL store (idem_store_mysql*.c), which
 * idem_store_open makes for store = mysql.  Its operations of
 * transactional routes are idem_store_tx.h's.
 */
#ifndef IDEM_STORE_MYSQL_H
#define IDEM_STORE_MYSQL_H

#include <stdint.h>

#include "idem_store.h"

struct idem_config_mysql;

/*
 * The MySQL store over the database of the [mysql] section my, with
 * o's pool_size connections (my and o borrowed for the call).  Connects once to check that the
 * schema (schema/mysql/) is there and of the version this build needs.
 * Reads the server's max_allowed_packet and sets the store's limits from
 * it and the schema's columns (a commit over the packet limit of the
 * moment is refused as IDEM_ERR_TOO_LARGE).  Returns IDEM_OK with *out,
 * IDEM_ERR_CONFIG (password file) or IDEM_ERR_STORE (unreachable, or a
 * missing or old schema), logged.
 */
idem_err idem_store_mysql_new(const struct idem_config_mysql *my,
    const idem_store_opts *o, idem_store **out);

/*
 * The MySQL store's settle_ms for o: a reservation's INSERT waits up to
 * inflight-wait (at least 1 s) for a row lock, and the server runs it to
 * its end even when its client is gone (a killed worker; one that gave
 * up), so its row may land that long, and the margin of
 * idem_mysql_lock_margin_ms, after it was sent; and a second more.
 */
uint64_t idem_store_mysql_settle_ms(const idem_store_opts *o);

struct idem_mysql_pool;
/*
 * Makes pool (a plugin's, idem_app_mysql_pool) prepare the statements
 * the MySQL store runs inside a transactional route's transaction, with
 * o's inflight-wait as the lock wait of a duplicate.  Returns IDEM_OK or
 * IDEM_ERR_NOMEM.
 */
idem_err idem_store_mysql_tx_prepare(const struct idem_config_mysql *my,
    const idem_store_opts *o, struct idem_mysql_pool *pool);

/* Whether the database of the [mysql] section my (of the config file
 * file) answers now: one connection tried quietly (its failure not
 * logged: a database that is not up yet is tried again and again).  1 or
 * 0. */
int idem_store_mysql_reachable(const struct idem_config_mysql *my,
    const char *file);

/* Tests only: the next "insert", "takeover", "commit", "release" or
 * "renew" statement of the MySQL store s is applied and its answer lost,
 * with its connection, as when the server goes away just after it.
 * Returns 0, or -1 (not a MySQL store, no such statement). */
int idem_store_mysql_lose_answer(idem_store *s, const char *op);

#endif
