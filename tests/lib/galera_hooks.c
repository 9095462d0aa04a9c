/*
 * galera_hooks.c - linked into a test program whose tests share one
 * private 3-node Galera cluster: started before the first test (default
 * options: the tests set what they need per session), exported to the
 * tests (galera_from_env), stopped and removed after the last, whatever
 * the tests did.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include <criterion/criterion.h>
#include <criterion/hooks.h>

#include "galera.h"

static galera program_cluster;

ReportHook(PRE_ALL)(struct criterion_test_set *set)
{
	if (galera_start(&program_cluster, NULL) != 0) {
		fprintf(stderr, "cannot start the Galera cluster\n");
		exit(1);
	}
	galera_to_env(&program_cluster);
}

ReportHook(POST_ALL)(struct criterion_global_stats *stats)
{
	galera_destroy(&program_cluster);
}
