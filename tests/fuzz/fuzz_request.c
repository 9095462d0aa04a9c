/*
 * fuzz_request.c - libFuzzer harness for the request parser, the router and
 * the fingerprint (on one route with fingerprint-ignore and
 * fingerprint-headers too).  Input: NUL-separated "NAME=value" params, an empty
 * param ("\0\0"), then the body.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "idem_config_keys.h"
#include "idem_key.h"
#include "idem_log.h"
#include "idem_request.h"
#include "idem_router.h"

typedef struct reader {
	const char *data;
	size_t len, pos;
} reader;

static ssize_t
read_body(void *ctx, char *buf, size_t len)
{
	reader *r = ctx;
	size_t n = r->len - r->pos < len ? r->len - r->pos : len;

	memcpy(buf, r->data + r->pos, n);
	r->pos += n;
	return (ssize_t)n;
}

static idem_err
nop(const idem_request *req, idem_response *res, void *data)
{
	return IDEM_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static idem_router *router;
	static const idem_request_limits lim = { "/api", 20, 512, 4096, 0 };
	char *copy = malloc(size + 2), *p, *end, **env;
	size_t n = 0, i;
	idem_request req;
	idem_problem pb;
	reader r;
	char allow[64];
	unsigned char fp[32];

	if (router == NULL) {
		idem_log_set_level(IDEM_LOG_ERROR + 1);
		router = idem_router_new();
		idem_router_add(router, "POST", "/accounts/{id}/deposit",
		    IDEM_POLICY_DEFAULT, nop, NULL, "fuzz");
		idem_router_add(router, "GET", "/accounts/{id}", IDEM_POLICY_OFF,
		    nop, NULL, "fuzz");
		idem_router_add(router, "POST", "/a/{x}/b/{y}", IDEM_POLICY_OFF,
		    nop, NULL, "fuzz");
		/* a route whose fingerprint leaves members out and adds
		 * headers (fingerprint-ignore, fingerprint-headers) */
		if (idem_router_add(router, "POST", "/orders/{id}/cancel",
		    IDEM_POLICY_DEFAULT, nop, NULL, "fuzz") == IDEM_OK) {
			idem_route *rt = idem_router_at(router, 3);
			idem_route_key_set(&rt->conf, IDEM_RK_FP_IGNORE, "/nonce "
			    "/meta/ts /a~1b/0/c /~0", 0, allow, sizeof(allow));
			idem_route_key_set(&rt->conf, IDEM_RK_FP_HEADERS,
			    "X-Tenant Content-Type", 0, allow, sizeof(allow));
		}
	}
	memcpy(copy, data, size);
	copy[size] = copy[size + 1] = '\0';
	env = calloc(size + 1, sizeof(char *));
	end = copy + size;
	for (p = copy; p < end && *p != '\0'; p += strlen(p) + 1)
		env[n++] = p;
	env[n] = NULL;
	r.data = p < end ? p + 1 : end;
	r.len = (size_t)(end - r.data);
	r.pos = 0;
	if (idem_request_parse(&req, env, &lim, &pb) == IDEM_OK) {
		idem_request_header(&req, "Idempotency-Key");
		idem_request_header(&req, "Content-Type");
		if (idem_router_match(router, &req, allow, sizeof(allow)) ==
		    IDEM_OK) {
			for (i = 0; i < req.nparams; i++)
				idem_request_param(&req, req.params[i].name);
			if (idem_request_read_body(&req, 2048, read_body, &r, &pb)
			    == IDEM_OK)
				idem_fingerprint(&req, fp);
		} else {
			idem_request_drain_body(&req, 4096, read_body, &r);
		}
	}
	idem_request_clear(&req);
	free(env);
	free(copy);
	return 0;
}
