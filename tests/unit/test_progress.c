/*
 * test_progress.c - recovery points and unknown outcomes as a handler
 * meets them (idem_request_checkpoint, idem_request_phase,
 * idem_request_progress, IDEM_ERR_OUTCOME_UNKNOWN, idem_route_reconcile),
 * through the service on the memory store: what runs, how often, and what
 * each retry is told.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "idem_config.h"
#include "idem_log.h"
#include "idem_metrics.h"
#include "idem_router.h"
#include "idem_service.h"
#include "idem_time.h"

static idem_service *svc;
static atomic_int runs, reconciles;

/* A payment in two phases: "charged" is recorded before the answer; a
 * run that finds it answers from its state without charging again.  The
 * first run answers ?s=NNN after its checkpoint (503: released). */
static idem_err
pay(const idem_request *req, idem_response *res, void *data)
{
	const char *q = idem_request_query(req);
	const char *phase = idem_request_phase(req);
	int n = atomic_fetch_add(&runs, 1) + 1;
	json_t *state;
	idem_err err;

	(void)data;
	if (phase != NULL && strcmp(phase, "charged") == 0) {
		state = idem_request_progress(req);
		cr_assert_not_null(state);
		json_object_set_new(state, "resumed_by_run", json_integer(n));
		return idem_response_json(res, 201, state);
	}
	state = json_pack("{s:s, s:i}", "charge", "ch_1", "charged_by_run", n);
	err = idem_request_checkpoint(req, "charged", state);
	json_decref(state);
	if (err != IDEM_OK)
		return err;
	return idem_response_json(res, strncmp(q, "s=", 2) == 0 ? atoi(q + 2) :
	    201, json_pack("{s:i}", "run", n));
}

/* Cannot tell what became of its side effect, after a checkpoint. */
static idem_err
unsure(const idem_request *req, idem_response *res, void *data)
{
	(void)res;
	(void)data;
	atomic_fetch_add(&runs, 1);
	if (idem_request_checkpoint(req, "sent", NULL) != IDEM_OK)
		return IDEM_ERR_HANDLER;
	return IDEM_ERR_OUTCOME_UNKNOWN;
}

/* The reconcile hook of /reconciled: ?r=unknown keeps it unknown, else
 * the final answer, naming the phase it found. */
static idem_err
reconcile(const idem_request *req, idem_response *res, void *data)
{
	const char *q = idem_request_query(req);
	const char *phase = idem_request_phase(req);

	(void)data;
	atomic_fetch_add(&reconciles, 1);
	if (strstr(q, "r=unknown") != NULL)
		return IDEM_ERR_OUTCOME_UNKNOWN;
	return idem_response_json(res, 201, json_pack("{s:s}", "reconciled",
	    phase != NULL ? phase : "none"));
}

/* Tries the calls a handler without a record, or with bad arguments, may
 * make; answers 200 with what they returned. */
static idem_err
misuse(const idem_request *req, idem_response *res, void *data)
{
	json_t *big = json_object(), *arr = json_array();
	char phase[80];
	idem_err e1, e2, e3, e4;
	int i;

	(void)data;
	memset(phase, 'p', sizeof(phase) - 1);
	phase[sizeof(phase) - 1] = '\0';
	for (i = 0; i < 2000; i++)
		json_array_append_new(arr, json_string("0123456789"));
	json_object_set_new(big, "a", arr);
	e1 = idem_request_checkpoint(req, "ok", NULL);
	e2 = idem_request_checkpoint(req, "bad phase", NULL);
	e3 = idem_request_checkpoint(req, phase, NULL);
	e4 = idem_request_checkpoint(req, "big", big);
	json_decref(big);
	return idem_response_json(res, 200, json_pack("{s:s, s:s, s:s, s:s, "
	    "s:b}", "plain", idem_strerror(e1), "space", idem_strerror(e2),
	    "long", idem_strerror(e3), "big", idem_strerror(e4), "phase",
	    idem_request_phase(req) != NULL));
}

static void
setup(void)
{
	idem_config *cfg;
	idem_route *rt;

	idem_log_set_level(IDEM_LOG_ERROR + 1);
	cr_assert_eq(idem_config_load_string("[idempotency]\ninflight-ttl = "
	    "300ms\n[metrics]\nenabled = true\n", "p.conf", &cfg), IDEM_OK);
	cr_assert_eq(idem_service_new(cfg, "/nowhere", &svc), IDEM_OK);
	cr_assert_eq(idem_router_add(svc->router, "POST", "/pay",
	    IDEM_POLICY_REQUIRED, pay, NULL, "test"), IDEM_OK);
	cr_assert_eq(idem_router_add(svc->router, "POST", "/unsure",
	    IDEM_POLICY_REQUIRED, unsure, NULL, "test"), IDEM_OK);
	cr_assert_eq(idem_router_add(svc->router, "POST", "/reconciled",
	    IDEM_POLICY_REQUIRED, unsure, NULL, "test"), IDEM_OK);
	rt = idem_router_at(svc->router, idem_router_count(svc->router) - 1);
	rt->reconcile = reconcile;
	cr_assert_eq(idem_router_add(svc->router, "POST", "/misuse",
	    IDEM_POLICY_OPTIONAL, misuse, NULL, "test"), IDEM_OK);
	idem_service_set_metrics(svc, svc->metrics, 0);
	atomic_store(&runs, 0);
	atomic_store(&reconciles, 0);
}

static void
teardown(void)
{
	idem_service_free(svc);
	idem_log_set_level(IDEM_LOG_INFO);
}

typedef struct reply {
	int status;
	char body[2048];
	char code[64];
	char retry_after[16];
	char replayed[16];
} reply;

/* POSTs {} to uri with Idempotency-Key key (NULL: none). */
static reply
post(const char *uri, const char *key)
{
	char u[256], q[256], k[128];
	const char *qs = strchr(uri, '?');
	char *env[] = { "REQUEST_METHOD=POST", u, q, "CONTENT_LENGTH=2",
	    key != NULL ? k : NULL, NULL };
	harness_body b = { "{}", 2, 0, 0, 0 };
	idem_request req;
	idem_response res;
	const char *v;
	json_t *j;
	reply r;

	snprintf(u, sizeof(u), "REQUEST_URI=%s", uri);
	snprintf(q, sizeof(q), "QUERY_STRING=%s", qs != NULL ? qs + 1 : "");
	snprintf(k, sizeof(k), "HTTP_IDEMPOTENCY_KEY=%s", key != NULL ? key :
	    "");
	idem_response_init(&res);
	idem_service_handle(svc, env, harness_read_body, &b, &req, &res);
	memset(&r, 0, sizeof(r));
	r.status = res.status;
	snprintf(r.body, sizeof(r.body), "%.*s", (int)res.len,
	    res.body != NULL ? res.body : "");
	v = idem_response_get_header(&res, "Retry-After");
	snprintf(r.retry_after, sizeof(r.retry_after), "%s", v ? v : "");
	v = idem_response_get_header(&res, "Idempotent-Replayed");
	snprintf(r.replayed, sizeof(r.replayed), "%s", v ? v : "");
	if ((j = json_loads(r.body, 0, NULL)) != NULL) {
		v = json_string_value(json_object_get(j, "code"));
		snprintf(r.code, sizeof(r.code), "%s", v ? v : "");
		json_decref(j);
	}
	idem_response_clear(&res);
	idem_request_clear(&req);
	return r;
}

/* The outcome count of route in svc's metrics. */
static double
outcome(const char *route, const char *name)
{
	size_t len;
	char *text = idem_metrics_render(svc->metrics, NULL, &len);
	double v;

	cr_assert_not_null(text);
	v = harness_route_outcome(text, "POST", route, name);
	free(text);
	return v;
}

/* A run that recorded progress and then failed is not started over: the
 * retry resumes from the progress (the charge is not made twice), its
 * answer is stored and replayed. */
Test(progress, retry_resumes_from_the_checkpoint, .init = setup,
    .fini = teardown)
{
	reply r;

	r = post("/pay?s=503", "pay-1");
	cr_expect_eq(r.status, 503);
	r = post("/pay?s=503", "pay-1");
	cr_expect_eq(r.status, 201, "%s", r.body);
	cr_expect_not_null(strstr(r.body, "\"charged_by_run\":1"), "%s", r.body);
	cr_expect_not_null(strstr(r.body, "\"resumed_by_run\":2"), "%s", r.body);
	r = post("/pay?s=503", "pay-1");
	cr_expect_eq(r.status, 201);
	cr_expect_str_eq(r.replayed, "true");
	cr_expect_eq(atomic_load(&runs), 2, "charged once, resumed once");
	cr_expect_eq(outcome("/pay", "resumed"), 1);
	cr_expect_eq(outcome("/pay", "released"), 1);
	/* another request under the key is a conflict, not a resume */
	r = post("/pay?other", "pay-2");
	cr_expect_eq(r.status, 201);
	r = post("/pay?s=503&x", "pay-3");
	cr_expect_eq(r.status, 503);
	r = post("/pay?s=503&y", "pay-3");
	cr_expect_eq(r.status, 409);
	cr_expect_str_eq(r.code, "IDEMPOTENCY_CONFLICT");
}

/* A handler that cannot tell whether its side effect happened: the key is
 * neither released nor committed, no retry runs it again, each is told
 * the outcome is unknown (503, never a conflict). */
Test(progress, unknown_outcome_never_runs_again, .init = setup,
    .fini = teardown)
{
	reply r;
	int i;

	r = post("/unsure", "u-1");
	cr_expect_eq(r.status, 503);
	cr_expect_str_eq(r.code, "IDEMPOTENCY_OUTCOME_UNKNOWN");
	cr_expect_str_eq(r.retry_after, "60");
	for (i = 0; i < 3; i++) {
		r = post("/unsure", "u-1");
		cr_expect_eq(r.status, 503);
		cr_expect_str_eq(r.code, "IDEMPOTENCY_OUTCOME_UNKNOWN");
	}
	/* past inflight-ttl: still not taken over */
	idem_sleep_ms(500);
	r = post("/unsure", "u-1");
	cr_expect_str_eq(r.code, "IDEMPOTENCY_OUTCOME_UNKNOWN");
	cr_expect_eq(atomic_load(&runs), 1);
	cr_expect_eq(outcome("/unsure", "outcome_unknown"), 1);
	cr_expect_eq(outcome("/unsure", "unknown_answered"), 4);
}

/* With a reconcile hook, a retry reconciles the record, with its
 * progress: an answer that is not final keeps it unknown; a final one is
 * stored and replayed; the handler never runs again. */
Test(progress, reconcile_gives_the_final_answer, .init = setup,
    .fini = teardown)
{
	reply r;

	r = post("/reconciled", "rc-1");
	cr_expect_str_eq(r.code, "IDEMPOTENCY_OUTCOME_UNKNOWN");
	cr_expect_str_eq(r.retry_after, "5");
	r = post("/reconciled?r=unknown", "rc-1");
	cr_expect_eq(r.status, 409, "another request: %s", r.body);
	r = post("/reconciled", "rc-1");
	cr_expect_eq(r.status, 201, "%s", r.body);
	cr_expect_not_null(strstr(r.body, "\"reconciled\":\"sent\""), "%s",
	    r.body);
	r = post("/reconciled", "rc-1");
	cr_expect_eq(r.status, 201);
	cr_expect_str_eq(r.replayed, "true");
	cr_expect_eq(atomic_load(&runs), 1);
	cr_expect_eq(atomic_load(&reconciles), 1);
	cr_expect_eq(outcome("/reconciled", "reconciled"), 1);
	cr_expect_eq(outcome("/reconciled", "committed"), 1);
}

/* Checkpoints are checked, and need a record. */
Test(progress, checkpoint_arguments, .init = setup, .fini = teardown)
{
	reply r;

	r = post("/misuse", NULL);
	cr_expect_eq(r.status, 200);
	cr_expect_not_null(strstr(r.body, "\"plain\":\"not found\""), "%s",
	    r.body);
	r = post("/misuse", "m-1");
	cr_expect_not_null(strstr(r.body, "\"plain\":\"success\""), "%s",
	    r.body);
	cr_expect_not_null(strstr(r.body, "\"space\":\"invalid argument\""),
	    "%s", r.body);
	cr_expect_not_null(strstr(r.body, "\"long\":\"invalid argument\""),
	    "%s", r.body);
	cr_expect_not_null(strstr(r.body, "\"big\":\"limit exceeded\""), "%s",
	    r.body);
	cr_expect_not_null(strstr(r.body, "\"phase\":true"), "%s", r.body);
}
