/*
 * redis_hooks.c - linked into a test program whose tests share one
 * private Redis: started before the first test, exported to the tests
 * (redis_from_env), stopped and removed after the last.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include <criterion/criterion.h>
#include <criterion/hooks.h>

#include "redis.h"

static redis program_redis;

/* Before the first test: start the program's server and export it. */
ReportHook(PRE_ALL)(struct criterion_test_set *set)
{
	if (redis_start(&program_redis, NULL) != 0) {
		fprintf(stderr, "cannot start Redis\n");
		redis_destroy(&program_redis);
		exit(1);
	}
	redis_to_env(&program_redis);
}

/* After the last: stop it and remove it. */
ReportHook(POST_ALL)(struct criterion_global_stats *stats)
{
	redis_destroy(&program_redis);
}
