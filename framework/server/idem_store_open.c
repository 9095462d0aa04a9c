/*
 * idem_store_open.c - the store factory (idem_store_open.h).
 */
#include "config.h"

#include "idem_log.h"
#include "idem_store_memory.h"
#ifdef HAVE_MYSQL
#include "idem_store_mysql.h"
#endif
#include "idem_store_open.h"

idem_err
idem_store_open(const idem_config *cfg, unsigned pool_size, idem_store **out)
{
	idem_err err = IDEM_ERR_CONFIG;

	switch (cfg->store) {
	case IDEM_STORE_MEMORY:
		err = idem_store_memory_new(cfg->max_entries, out);
		break;
	case IDEM_STORE_MYSQL:
#ifdef HAVE_MYSQL
		err = idem_store_mysql_new(cfg, pool_size > 0 ? pool_size :
		    cfg->mysql_pool_size, out);
#else
		/* the configuration check refuses it first */
		idem_log(NULL, IDEM_LOG_ERROR, "store = mysql: %s",
		    IDEM_WITHOUT_MYSQL);
#endif
		break;
	}
	if (err == IDEM_OK)
		idem_store_set_abandon_ms(*out, cfg->abandon_after);
	return err;
}

uint64_t
idem_store_settle_for(const idem_config *cfg)
{
#ifdef HAVE_MYSQL
	if (cfg->store == IDEM_STORE_MYSQL)
		return idem_store_mysql_settle_ms(cfg);
#endif
	(void)cfg;
	return 0;
}

int
idem_store_reachable(const idem_config *cfg)
{
#ifdef HAVE_MYSQL
	if (cfg->store == IDEM_STORE_MYSQL)
		return idem_store_mysql_reachable(cfg);
#endif
	return cfg->store != IDEM_STORE_MYSQL;
}
