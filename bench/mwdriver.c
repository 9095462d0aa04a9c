/*
 * mwdriver.c - the middleware alone, for callgrind: COUNT requests through
 * idem_service_handle (parse, route, fingerprint, memory store, handler,
 * commit) with callgrind's instrumentation on only around them.
 *
 *   valgrind --tool=callgrind --instr-atstart=no mwdriver MODE COUNT
 *
 * first: every request a new key; replay: one key, stored first, then
 * replayed COUNT times; bare: idempotency disabled; metrics: first, with
 * [metrics] enabled (what counting costs).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <valgrind/callgrind.h>

#include "idem_config.h"
#include "idem_log.h"
#include "idem_service.h"

static ssize_t
body(void *ctx, char *buf, size_t len)
{
	const char **p = ctx;
	size_t n = strlen(*p) < len ? strlen(*p) : len;

	memcpy(buf, *p, n);
	*p += n;
	return (ssize_t)n;
}

static idem_err
answer(const idem_request *req, idem_response *res, void *data)
{
	(void)data;
	return idem_response_json(res, 201, json_pack("{s:s, s:b}", "x",
	    idem_request_param(req, "x"), "ok", 1));
}

/* One request with key (NULL: none). */
static void
one(idem_service *svc, const char *key)
{
	char k[128];
	char *env[] = { "REQUEST_METHOD=POST", "REQUEST_URI=/bench/a",
	    "CONTENT_LENGTH=12", "CONTENT_TYPE=application/json", k, NULL };
	const char *b = "{\"amount\":1}";
	idem_request req;
	idem_response res;

	snprintf(k, sizeof(k), "HTTP_IDEMPOTENCY_KEY=%s", key);
	if (key == NULL)
		env[4] = NULL;
	idem_response_init(&res);
	idem_service_handle(svc, env, body, &b, &req, &res);
	if (res.status != 201) {
		fprintf(stderr, "mwdriver: status %d\n", res.status);
		exit(1);
	}
	idem_response_clear(&res);
	idem_request_clear(&req);
}

int
main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "first";
	int metrics = strcmp(mode, "metrics") == 0;
	long count = argc > 2 ? atol(argv[2]) : 1000, i;
	idem_config *cfg;
	idem_service *svc;
	char key[64];

	idem_log_set_level(IDEM_LOG_ERROR);
	if (idem_config_load_string(strcmp(mode, "bare") == 0 ?
	    "[idempotency]\nenabled = false\n" :
	    metrics ? "[idempotency]\nmax-entries = 10000000\n[metrics]\n"
	    "enabled = true\n" : "[idempotency]\nmax-entries = 10000000\n",
	    "bench", &cfg) != IDEM_OK ||
	    idem_service_new(cfg, "/nowhere", &svc) != IDEM_OK ||
	    idem_router_add(svc->router, "POST", "/bench/{x}",
	    IDEM_POLICY_DEFAULT, answer, NULL, "bench") != IDEM_OK)
		return 1;
	/* counts the route added after the service was built, too */
	idem_service_set_metrics(svc, svc->metrics, 0);
	if (strcmp(mode, "replay") == 0)
		one(svc, "the-key");
	CALLGRIND_START_INSTRUMENTATION;
	for (i = 0; i < count; i++) {
		if (strcmp(mode, "first") == 0 || metrics) {
			snprintf(key, sizeof(key), "key-%ld", i);
			one(svc, key);
		} else {
			one(svc, strcmp(mode, "bare") == 0 ? NULL : "the-key");
		}
	}
	CALLGRIND_STOP_INSTRUMENTATION;
	idem_service_free(svc);
	return 0;
}
