/*
 * mariadb_hooks.c - linked into a test program whose tests share one
 * private MariaDB: started before the first test, exported to the tests
 * (mariadb_from_env), stopped and removed after the last.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include <criterion/criterion.h>
#include <criterion/hooks.h>

#include "mariadb.h"

static mariadb program_db;

ReportHook(PRE_ALL)(struct criterion_test_set *set)
{
	if (mariadb_start(&program_db) != 0) {
		fprintf(stderr, "cannot start MariaDB\n");
		exit(1);
	}
	mariadb_to_env(&program_db);
}

ReportHook(POST_ALL)(struct criterion_global_stats *stats)
{
	mariadb_destroy(&program_db);
}
