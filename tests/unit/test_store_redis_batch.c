/*
 * test_store_redis_batch.c - the batching suite (batch_suite.c) on the
 * Redis store, its group commit a pipeline per lane.  Linked into
 * test_store_redis (its private Redis).
 */
#include <stdio.h>

#include <criterion/criterion.h>

#include "batch_suite.h"
#include "idem_config.h"
#include "idem_store_redis.h"
#include "redis.h"

idem_store *
batch_open(unsigned pool, const char *extra)
{
	char text[1024];
	idem_store_opts o;
	idem_config *cfg;
	idem_store *s = NULL;
	redis r;

	cr_assert_eq(redis_from_env(&r), 0);
	snprintf(text, sizeof(text), "[idempotency]\nstore = redis\n[redis]\n"
	    "host = 127.0.0.1\nport = %d\npool-size = %u\n%s", r.port, pool,
	    extra);
	cr_assert_eq(idem_config_load_string(text, "t.conf", &cfg), IDEM_OK,
	    "%s", text);
	o = idem_store_opts_of(cfg, pool);
	cr_assert_eq(idem_store_redis_new(&cfg->redis, &o, &s), IDEM_OK);
	idem_config_free(cfg);
	return s;
}

int
batch_lose_answer(idem_store *s, const char *op)
{
	return idem_store_redis_lose_answer(s, op);
}
