/*
 * postgres_hooks.c - linked into a test program whose tests share one
 * private PostgreSQL: started before the first test, exported to the
 * tests (postgres_from_env), stopped and removed after the last.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include <criterion/criterion.h>
#include <criterion/hooks.h>

#include "postgres.h"

static postgres program_db;

/* Before the first test: start the program's server and export it. */
ReportHook(PRE_ALL)(struct criterion_test_set *set)
{
	if (postgres_start(&program_db) != 0) {
		fprintf(stderr, "cannot start PostgreSQL\n");
		postgres_destroy(&program_db);
		exit(1);
	}
	postgres_to_env(&program_db);
}

/* After the last: stop it and remove it. */
ReportHook(POST_ALL)(struct criterion_global_stats *stats)
{
	postgres_destroy(&program_db);
}
