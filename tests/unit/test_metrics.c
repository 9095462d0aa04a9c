/*
 * test_metrics.c - the shared metrics region: counts seen across fork, the
 * exposition text (cumulative buckets, escaped labels), the row limit,
 * outcomes by route.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "idem_metrics.h"

static char *
render(idem_metrics *m, const idem_metrics_store_info *info)
{
	size_t len;
	char *text = idem_metrics_render(m, info, &len);

	cr_assert_not_null(text);
	cr_assert_eq(strlen(text), len);
	return text;
}

/* What a forked worker adds is what the parent reports. */
Test(metrics, shared_across_fork)
{
	idem_metrics *m;
	unsigned row;
	pid_t pid;
	int status, i;
	char *text;

	cr_assert_eq(idem_metrics_new(&m), IDEM_OK);
	row = idem_metrics_route(m, "POST", "/a/{id}", 1);
	cr_assert_eq(row, 1);
	for (i = 0; i < 2; i++) {
		if ((pid = fork()) == 0) {
			int j;
			/* a worker registers the same route: the same row */
			unsigned r = idem_metrics_route(m, "POST", "/a/{id}", 1);
			for (j = 0; j < 1000; j++) {
				idem_metrics_request(m, r, 201);
				idem_metrics_outcome(m, r, IDEM_OUTCOME_ACQUIRED, 1);
			}
			idem_metrics_in_flight(m, (unsigned)i + 1, 1);
			_exit(r == row ? 0 : 1);
		}
		cr_assert_gt(pid, 0);
		cr_assert_eq(waitpid(pid, &status, 0), pid);
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	idem_metrics_in_flight(m, 0, 1);
	text = render(m, NULL);
	cr_expect_eq(harness_metric(text, "idemfcgi_requests_total{method=\"POST\","
	    "route=\"/a/{id}\",status=\"201\"}"), 2000, "%s", text);
	cr_expect_eq(harness_metric(text, "idemfcgi_idempotency_outcomes_total"
	    "{method=\"POST\",route=\"/a/{id}\",outcome=\"acquired\"}"), 2000);
	cr_expect_eq(harness_metric(text, "idemfcgi_requests_in_flight"), 3);
	free(text);
	/* a dead worker's requests are no longer in flight */
	idem_metrics_slot_reset(m, 2);
	text = render(m, NULL);
	cr_expect_eq(harness_metric(text, "idemfcgi_requests_in_flight"), 2);
	free(text);
	idem_metrics_free(m);
}

/* Buckets are cumulative, the sum in seconds, the count the last bucket. */
Test(metrics, histograms)
{
	idem_metrics *m;
	char *text;

	cr_assert_eq(idem_metrics_new(&m), IDEM_OK);
	idem_metrics_store(m, IDEM_STORE_OP_COMMIT, 50000, 0);      /* 50 us */
	idem_metrics_store(m, IDEM_STORE_OP_COMMIT, 3000000, 0);    /* 3 ms */
	idem_metrics_store(m, IDEM_STORE_OP_COMMIT, 20000000000ULL, 1); /* 20 s */
	text = render(m, NULL);
	cr_expect_eq(harness_metric(text, "idemfcgi_store_duration_seconds_bucket"
	    "{op=\"commit\",le=\"0.0001\"}"), 1, "%s", text);
	cr_expect_eq(harness_metric(text, "idemfcgi_store_duration_seconds_bucket"
	    "{op=\"commit\",le=\"0.0025\"}"), 1);
	cr_expect_eq(harness_metric(text, "idemfcgi_store_duration_seconds_bucket"
	    "{op=\"commit\",le=\"0.005\"}"), 2);
	cr_expect_eq(harness_metric(text, "idemfcgi_store_duration_seconds_bucket"
	    "{op=\"commit\",le=\"10\"}"), 2);
	cr_expect_eq(harness_metric(text, "idemfcgi_store_duration_seconds_bucket"
	    "{op=\"commit\",le=\"+Inf\"}"), 3);
	cr_expect_eq(harness_metric(text, "idemfcgi_store_duration_seconds_count"
	    "{op=\"commit\"}"), 3);
	cr_expect_float_eq(harness_metric(text, "idemfcgi_store_duration_seconds_sum"
	    "{op=\"commit\"}"), 20.00305, 1e-9);
	cr_expect_eq(harness_metric(text, "idemfcgi_store_errors_total{op=\"commit\"}"),
	    1);
	cr_expect_eq(harness_metric(text, "idemfcgi_store_duration_seconds_count"
	    "{op=\"reserve\"}"), 0);
	free(text);
	idem_metrics_free(m);
}

/* Label values are escaped; the memory store's series come with it only,
 * those of unknown outcomes when counted; a status out of range counts as
 * 500. */
Test(metrics, text_format)
{
	idem_metrics_store_info mem = { .name = "memory", .memory = 1,
	    .entries = 7, .in_flight = 2, .evictions = 3, .has_unknown = 1,
	    .unknown = 4, .unknown_age_ms = 1250005 },
	    mysql = { .name = "mysql" };
	idem_metrics *m;
	unsigned row;
	char *text;

	cr_assert_eq(idem_metrics_new(&m), IDEM_OK);
	row = idem_metrics_route(m, "GET", "/q\"uote\\d\nx", 0);
	idem_metrics_request(m, row, 200);
	idem_metrics_request(m, 0, 404);
	idem_metrics_request(m, row, 42);
	text = render(m, &mem);
	cr_expect_eq(harness_metric(text, "idemfcgi_requests_total{method=\"GET\","
	    "route=\"/q\\\"uote\\\\d\\nx\",status=\"200\"}"), 1, "%s", text);
	cr_expect_eq(harness_metric(text, "idemfcgi_requests_total{method=\"GET\","
	    "route=\"/q\\\"uote\\\\d\\nx\",status=\"500\"}"), 1);
	cr_expect_eq(harness_metric(text, "idemfcgi_requests_total{method=\"\","
	    "route=\"unmatched\",status=\"404\"}"), 1);
	cr_expect_eq(harness_metric(text, "idemfcgi_memory_store_entries"), 7);
	cr_expect_eq(harness_metric(text, "idemfcgi_memory_store_in_flight"), 2);
	cr_expect_eq(harness_metric(text, "idemfcgi_memory_store_evictions_total"), 3);
	cr_expect_eq(harness_metric(text,
	    "idemfcgi_idempotency_unknown_records"), 4);
	cr_expect_float_eq(harness_metric(text,
	    "idemfcgi_idempotency_unknown_oldest_seconds"), 1250.005, 1e-9);
	cr_expect(strstr(text, "# TYPE idemfcgi_idempotency_unknown_records "
	    "gauge\n") != NULL, "%s", text);
	cr_expect(strstr(text, "# TYPE "
	    "idemfcgi_idempotency_unknown_oldest_seconds gauge\n") != NULL,
	    "%s", text);
	cr_expect(strstr(text, "idemfcgi_build_info{version=\"" PACKAGE_VERSION
	    "\",store=\"memory\"} 1\n") != NULL, "%s", text);
	/* every line is a comment or "series value" */
	{
		char *line, *save = NULL;
		for (line = strtok_r(text, "\n", &save); line != NULL;
		    line = strtok_r(NULL, "\n", &save))
			cr_expect(line[0] == '#' || strrchr(line, ' ') != NULL,
			    "%s", line);
	}
	free(text);
	text = render(m, NULL);
	cr_expect_eq(harness_metric(text, "idemfcgi_memory_store_entries"), -1);
	cr_expect_eq(harness_metric(text,
	    "idemfcgi_idempotency_unknown_records"), -1);
	free(text);
	/* a store that could not count them: no gauges, rather than zeros */
	text = render(m, &mysql);
	cr_expect_eq(harness_metric(text,
	    "idemfcgi_idempotency_unknown_records"), -1);
	cr_expect_eq(harness_metric(text,
	    "idemfcgi_idempotency_unknown_oldest_seconds"), -1);
	free(text);
	mysql.has_unknown = 1;
	text = render(m, &mysql);
	cr_expect_eq(harness_metric(text,
	    "idemfcgi_idempotency_unknown_records"), 0);
	cr_expect_eq(harness_metric(text,
	    "idemfcgi_idempotency_unknown_oldest_seconds"), 0);
	cr_expect_eq(harness_metric(text, "idemfcgi_memory_store_entries"), -1);
	free(text);
	idem_metrics_free(m);
}

/* Past the last row, routes are counted as unmatched. */
Test(metrics, row_limit)
{
	idem_metrics *m;
	char tmpl[32];
	unsigned i, row = 0;

	cr_assert_eq(idem_metrics_new(&m), IDEM_OK);
	for (i = 1; i < IDEM_METRICS_ROUTES; i++) {
		snprintf(tmpl, sizeof(tmpl), "/r%u", i);
		row = idem_metrics_route(m, "GET", tmpl, 0);
		cr_expect_eq(row, i);
	}
	cr_expect_eq(idem_metrics_route(m, "GET", "/one-too-many", 0), 0);
	cr_expect_eq(idem_metrics_route(m, "GET", "/r7", 0), 7);
	idem_metrics_free(m);
}

/*
 * Outcomes are counted per route: two routes' apart, each labelled as its
 * requests are; a keyed route's at zero too, before any; an unkeyed
 * route's only once counted; outside any request with method="" and
 * route="" (dead_worker_released and contended at zero too); a row past
 * the no-route row as unmatched.
 */
Test(metrics, outcomes_by_route)
{
	idem_metrics *m;
	unsigned a, b, plain;
	char *text;

	cr_assert_eq(idem_metrics_new(&m), IDEM_OK);
	a = idem_metrics_route(m, "POST", "/a/{id}", 1);
	b = idem_metrics_route(m, "PUT", "/b", 1);
	plain = idem_metrics_route(m, "GET", "/read", 0);
	idem_metrics_outcome(m, a, IDEM_OUTCOME_ACQUIRED, 3);
	idem_metrics_outcome(m, a, IDEM_OUTCOME_COMMITTED, 3);
	idem_metrics_outcome(m, b, IDEM_OUTCOME_ACQUIRED, 1);
	idem_metrics_outcome(m, b, IDEM_OUTCOME_REPLAYED, 2);
	idem_metrics_outcome(m, IDEM_METRICS_NO_ROUTE,
	    IDEM_OUTCOME_DEAD_WORKER_RELEASED, 4);
	text = render(m, NULL);
	cr_expect_eq(harness_metric(text, "idemfcgi_idempotency_outcomes_total"
	    "{method=\"POST\",route=\"/a/{id}\",outcome=\"acquired\"}"), 3,
	    "%s", text);
	cr_expect_eq(harness_metric(text, "idemfcgi_idempotency_outcomes_total"
	    "{method=\"PUT\",route=\"/b\",outcome=\"acquired\"}"), 1);
	cr_expect_eq(harness_metric(text, "idemfcgi_idempotency_outcomes_total"
	    "{method=\"PUT\",route=\"/b\",outcome=\"replayed\"}"), 2);
	cr_expect_eq(harness_metric(text, "idemfcgi_idempotency_outcomes_total"
	    "{method=\"POST\",route=\"/a/{id}\",outcome=\"replayed\"}"), 0);
	cr_expect_eq(harness_metric(text, "idemfcgi_idempotency_outcomes_total"
	    "{method=\"PUT\",route=\"/b\",outcome=\"taken_over\"}"), 0);
	cr_expect_eq(harness_metric_sum(text,
	    "idemfcgi_idempotency_outcomes_total", "outcome=\"acquired\""), 4);
	cr_expect_eq(harness_metric_sum(text,
	    "idemfcgi_idempotency_outcomes_total", "route=\"/a/{id}\""), 6);
	cr_expect_eq(harness_metric(text, "idemfcgi_idempotency_outcomes_total"
	    "{method=\"\",route=\"\",outcome=\"dead_worker_released\"}"), 4);
	cr_expect_eq(harness_metric(text, "idemfcgi_idempotency_outcomes_total"
	    "{method=\"\",route=\"\",outcome=\"contended\"}"), 0);
	cr_expect_eq(harness_metric(text, "idemfcgi_idempotency_outcomes_total"
	    "{method=\"\",route=\"\",outcome=\"acquired\"}"), -1);
	cr_expect(strstr(text, "route=\"/read\",outcome=") == NULL,
	    "an unkeyed route has no outcome yet: %s", text);
	cr_expect(strstr(text, "route=\"unmatched\",outcome=") == NULL);
	free(text);

	/* counted once, an unkeyed route's outcome shows; a row too far is
	 * unmatched; a route keyed later stays keyed */
	idem_metrics_outcome(m, plain, IDEM_OUTCOME_CONTENDED, 1);
	idem_metrics_outcome(m, IDEM_METRICS_NO_ROUTE + 1,
	    IDEM_OUTCOME_CONFLICT, 1);
	idem_metrics_outcome(m, a, IDEM_OUTCOME_COUNT, 1);
	cr_expect_eq(idem_metrics_route(m, "GET", "/read", 1), plain);
	cr_expect_eq(idem_metrics_route(m, "GET", "/read", 0), plain);
	text = render(m, NULL);
	cr_expect_eq(harness_metric(text, "idemfcgi_idempotency_outcomes_total"
	    "{method=\"GET\",route=\"/read\",outcome=\"contended\"}"), 1,
	    "%s", text);
	cr_expect_eq(harness_metric(text, "idemfcgi_idempotency_outcomes_total"
	    "{method=\"GET\",route=\"/read\",outcome=\"acquired\"}"), 0);
	cr_expect_eq(harness_metric(text, "idemfcgi_idempotency_outcomes_total"
	    "{method=\"\",route=\"unmatched\",outcome=\"conflict\"}"), 1);
	cr_expect_eq(harness_metric_sum(text,
	    "idemfcgi_idempotency_outcomes_total", ""), 15);
	free(text);
	idem_metrics_free(m);
}

/* The status route's numbers: accepted and active per worker slot and for
 * the instance, the most active at once, slow handlers; a dead worker's
 * row goes, its accepted requests stay in the instance's count. */
Test(metrics, status_counts)
{
	idem_metrics_status *st = malloc(sizeof(*st));
	idem_metrics *m;
	unsigned row;
	char *text;

	cr_assert_not_null(st);
	cr_assert_eq(idem_metrics_new(&m), IDEM_OK);
	row = idem_metrics_route(m, "POST", "/s/{ms}", 0);
	idem_metrics_worker_start(m, 0, 100, 4);
	idem_metrics_worker_start(m, 3, 103, 2);
	idem_metrics_in_flight(m, 0, 1);
	idem_metrics_in_flight(m, 0, 1);
	idem_metrics_in_flight(m, 3, 1);
	idem_metrics_in_flight(m, 0, -1);
	idem_metrics_slow(m, row, 3);
	idem_metrics_status_get(m, st);
	cr_expect_eq(st->accepted, 3);
	cr_expect_eq(st->active, 2);
	cr_expect_eq(st->max_active, 3);
	cr_expect_eq(st->slow, 1);
	cr_assert_eq(st->nworkers, 2);
	cr_expect_eq(st->workers[0].pid, 100);
	cr_expect_eq(st->workers[0].accepted, 2);
	cr_expect_eq(st->workers[0].active, 1);
	cr_expect_eq(st->workers[0].max_active, 2);
	cr_expect_eq(st->workers[0].threads, 4);
	cr_expect_eq(st->workers[1].slot, 3);
	cr_expect_eq(st->workers[1].slow, 1);
	text = render(m, NULL);
	cr_expect(strstr(text, "idemfcgi_threads 6\n") != NULL, "%s", text);
	cr_expect(strstr(text, "idemfcgi_requests_in_flight_max 3\n") != NULL);
	cr_expect(strstr(text, "idemfcgi_slow_requests_total{method=\"POST\","
	    "route=\"/s/{ms}\"} 1\n") != NULL, "%s", text);
	cr_expect(strstr(text, "idemfcgi_listen_queue") == NULL,
	    "no queue unless the kernel told it");
	free(text);
	/* worker 3 dies with its request in flight */
	idem_metrics_slot_reset(m, 3);
	idem_metrics_status_get(m, st);
	cr_expect_eq(st->accepted, 3);
	cr_expect_eq(st->active, 1);
	cr_assert_eq(st->nworkers, 1);
	cr_expect_eq(st->workers[0].pid, 100);
	idem_metrics_free(m);
	free(st);
}
