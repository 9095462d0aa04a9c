/*
 * idem_store_open.c - the store factory (idem_store_open.h).
 */
#include "config.h"

#include "idem_store_memory.h"
#include "idem_store_mysql.h"
#include "idem_store_open.h"

idem_err
idem_store_open(const idem_config *cfg, unsigned pool_size, idem_store **out)
{
	switch (cfg->store) {
	case IDEM_STORE_MEMORY:
		return idem_store_memory_new(cfg->max_entries, out);
	case IDEM_STORE_MYSQL:
		return idem_store_mysql_new(cfg, pool_size > 0 ? pool_size :
		    cfg->mysql_pool_size, out);
	}
	return IDEM_ERR_CONFIG;
}
