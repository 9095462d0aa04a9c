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
	idem_err err = IDEM_ERR_CONFIG;

	switch (cfg->store) {
	case IDEM_STORE_MEMORY:
		err = idem_store_memory_new(cfg->max_entries, out);
		break;
	case IDEM_STORE_MYSQL:
		err = idem_store_mysql_new(cfg, pool_size > 0 ? pool_size :
		    cfg->mysql_pool_size, out);
		break;
	}
	if (err == IDEM_OK)
		idem_store_set_abandon_ms(*out, cfg->abandon_after);
	return err;
}
