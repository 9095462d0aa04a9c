/*
 * mysql_open.h - the MySQL store and pools of a test's configuration,
 * opened as idemfcgi opens them (the store factory, a plugin's pool):
 * each constructor is given its [mysql] section and the store options of
 * the rest (idem_store_opts_of).  For the tests of the MySQL store only.
 */
#ifndef TEST_MYSQL_OPEN_H
#define TEST_MYSQL_OPEN_H

#include "idem_config.h"
#include "idem_mysql.h"
#include "idem_store.h"
#include "idem_store_mysql.h"

/* The MySQL store of cfg with pool_size connections. */
static inline idem_err
test_mysql_store(const idem_config *cfg, unsigned pool_size, idem_store **out)
{
	idem_store_opts o = idem_store_opts_of(cfg, pool_size);

	return idem_store_mysql_new(&cfg->mysql, &o, out);
}

/* A pool of size connections on cfg's [mysql] database, preparing sql. */
static inline idem_err
test_mysql_pool(const idem_config *cfg, const char *const *sql, size_t nsql,
    unsigned size, idem_mysql_pool **out)
{
	return idem_mysql_pool_new(&cfg->mysql, cfg->path, sql, nsql, size,
	    out);
}

/* Makes p a pool a transactional route of cfg can run on. */
static inline idem_err
test_mysql_tx_prepare(const idem_config *cfg, idem_mysql_pool *p)
{
	idem_store_opts o = idem_store_opts_of(cfg, 0);

	return idem_store_mysql_tx_prepare(&cfg->mysql, &o, p);
}
#endif
