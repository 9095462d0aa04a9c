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
#ifdef HAVE_POSTGRES
#include "idem_store_postgres.h"
#endif
#ifdef HAVE_REDIS
#include "idem_store_redis.h"
#endif

idem_err
idem_store_open(const idem_config *cfg, unsigned pool_size, idem_store **out)
{
	idem_store_opts o = idem_store_opts_of(cfg, pool_size);
	idem_err err = IDEM_ERR_CONFIG;

	(void)o;
	switch (cfg->idem.store) {
	case IDEM_STORE_MEMORY:
		err = idem_store_memory_new(cfg->idem.max_entries, out);
		break;
	case IDEM_STORE_MYSQL:
#ifdef HAVE_MYSQL
		err = idem_store_mysql_new(&cfg->mysql, &o, out);
#else
		/* the configuration check refuses it first */
		idem_log(NULL, IDEM_LOG_ERROR, "store = mysql: %s",
		    IDEM_WITHOUT_MYSQL);
#endif
		break;
	case IDEM_STORE_POSTGRES:
#ifdef HAVE_POSTGRES
		err = idem_store_postgres_new(&cfg->postgres, &o, out);
#else
		idem_log(NULL, IDEM_LOG_ERROR, "store = postgres: %s",
		    IDEM_WITHOUT_POSTGRES);
#endif
		break;
	case IDEM_STORE_REDIS:
#ifdef HAVE_REDIS
		err = idem_store_redis_new(&cfg->redis, &o, out);
#else
		idem_log(NULL, IDEM_LOG_ERROR, "store = redis: %s",
		    IDEM_WITHOUT_REDIS);
#endif
		break;
	}
	if (err == IDEM_OK)
		idem_store_set_abandon_ms(*out, cfg->idem.abandon_after);
	return err;
}

uint64_t
idem_store_settle_for(const idem_config *cfg)
{
	idem_store_opts o = idem_store_opts_of(cfg, 0);

	(void)o;
#ifdef HAVE_MYSQL
	if (cfg->idem.store == IDEM_STORE_MYSQL)
		return idem_store_mysql_settle_ms(&o);
#endif
#ifdef HAVE_POSTGRES
	if (cfg->idem.store == IDEM_STORE_POSTGRES)
		return idem_store_postgres_settle_ms(&cfg->postgres, &o);
#endif
#ifdef HAVE_REDIS
	if (cfg->idem.store == IDEM_STORE_REDIS)
		return idem_store_redis_settle_ms(&cfg->redis);
#endif
	return 0;
}

int
idem_store_reachable(const idem_config *cfg)
{
#ifdef HAVE_MYSQL
	if (cfg->idem.store == IDEM_STORE_MYSQL)
		return idem_store_mysql_reachable(&cfg->mysql, cfg->path);
#endif
#ifdef HAVE_POSTGRES
	if (cfg->idem.store == IDEM_STORE_POSTGRES)
		return idem_store_postgres_reachable(&cfg->postgres,
		    cfg->path);
#endif
#ifdef HAVE_REDIS
	if (cfg->idem.store == IDEM_STORE_REDIS)
		return idem_store_redis_reachable(&cfg->redis, cfg->path);
#endif
	return cfg->idem.store == IDEM_STORE_MEMORY;
}

#ifdef HAVE_POSTGRES
/* idem_db_maker.pool for PostgreSQL. */
static idem_err
postgres_pool(const idem_config *cfg, const char *const *sql, size_t nsql,
    idem_db **out)
{
	idem_store_opts o = idem_store_opts_of(cfg, 0);

	return idem_store_postgres_db_new(&cfg->postgres, &o, sql, nsql,
	    cfg->postgres.pool_size, out);
}

/* idem_db_maker.exec for PostgreSQL. */
static idem_err
postgres_exec(const idem_config *cfg, const char *sql)
{
	return idem_store_postgres_db_exec(&cfg->postgres, cfg->path, sql);
}

static const idem_db_maker postgres_maker = { postgres_pool, postgres_exec };
#endif

const idem_db_maker *
idem_store_db_maker(const idem_config *cfg)
{
#ifdef HAVE_POSTGRES
	if (cfg->idem.enabled && cfg->idem.store == IDEM_STORE_POSTGRES)
		return &postgres_maker;
#else
	(void)cfg;
#endif
	return NULL;
}
