/*
 * idem_openapi.c - the OpenAPI 3.1 document of the loaded routes, built
 * with jansson.
 */
#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "idem_builtin.h"
#include "idem_key_status.h"
#include "idem_config_keys.h"
#include "idem_config_value.h"
#include "idem_openapi.h"
#include "idem_parse.h"

/* When an answer of the framework applies to a route. */
enum {
	ON_ANY = 0,       /* every route */
	ON_KEYED,         /* a route whose policy is not off */
	ON_REQUIRED,      /* a route whose key is required */
	ON_SCOPED,        /* a keyed route under a scope with a principal */
	ON_TX             /* a transactional route */
};

/* The problem answers of the framework (DESIGN.md 2 and 5): status (0:
 * conflict-status), code, Retry-After, and where they can be given. */
static const struct {
	int status;
	const char *code;
	int retry_after;
	int on;
	const char *why;
} answers[] = {
	{ 400, "IDEMPOTENCY_KEY_MISSING", 0, ON_REQUIRED,
	    "the route needs an Idempotency-Key" },
	{ 400, "IDEMPOTENCY_KEY_INVALID", 0, ON_KEYED,
	    "the key is not of the route's key format, or a malformed quoted "
	    "key" },
	{ 400, "IDEMPOTENCY_SCOPE_MISSING", 0, ON_SCOPED,
	    "keys are scoped by a principal the request does not carry" },
	{ 0, "IDEMPOTENCY_CONFLICT", 0, ON_KEYED,
	    "the key was used for a different request: do not retry" },
	{ 422, "IDEMPOTENCY_KEY_EXPIRED", 0, ON_KEYED,
	    "the key was used before and its lifetime has ended (its "
	    "tombstone is kept): the request was not run again; a new "
	    "operation needs a new key (not on a route with expired-keys = "
	    "run)" },
	{ 409, "IDEMPOTENCY_IN_FLIGHT", 1, ON_KEYED,
	    "a request with this key is being processed: retry after "
	    "Retry-After with the same key" },
	{ 413, "BODY_TOO_LARGE", 0, ON_ANY,
	    "the body is over the server's max-body; the handler did not run" },
	{ 500, "HANDLER_FAILED", 0, ON_ANY,
	    "the handler failed; the request may be retried with the same key" },
	{ 503, "IDEMPOTENCY_STORE_UNAVAILABLE", 1, ON_KEYED,
	    "the idempotency store is unavailable; the handler did not run: "
	    "retry with the same key" },
	{ 503, "IDEMPOTENCY_OUTCOME_UNKNOWN", 5, ON_KEYED,
	    "the outcome of the first execution is being determined: retry "
	    "with the same key" },
	{ 503, "TRANSACTION_ROLLED_BACK", 1, ON_TX,
	    "none of the handler's database writes took effect: retry with the "
	    "same key" },
	{ 503, "TRANSACTION_OUTCOME_UNKNOWN", 1, ON_TX,
	    "whether the transaction committed is unknown: retry with the same "
	    "key to learn it" },
	{ 503, "DATABASE_UNAVAILABLE", 1, ON_TX,
	    "no database connection for the handler's transaction" },
};
#define NANSWERS (sizeof(answers) / sizeof(answers[0]))

/* The patterns of the key formats, by idem_key_format. */
static const char *const key_patterns[IDEM_KEY__MAX] = {
	[IDEM_KEY_OPAQUE] = "^[!-~]{1,255}$",
	[IDEM_KEY_UUID] = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
	    "[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$",
	[IDEM_KEY_UUIDV7] = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-7[0-9a-fA-F]{3}-"
	    "[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}$",
};

/* The methods an OpenAPI path item has. */
static const char *const methods[] = { "GET", "PUT", "POST", "DELETE",
    "OPTIONS", "HEAD", "PATCH", "TRACE" };

/* Whether answer a applies to rt (keyed: its policy is not off). */
static int
applies(const idem_config *cfg, const idem_route *rt, size_t a, int keyed)
{
	switch (answers[a].on) {
	case ON_ANY:
		return 1;
	case ON_KEYED:
		return keyed;
	case ON_REQUIRED:
		return keyed && idem_route_policy(cfg, rt) == IDEM_POLICY_REQUIRED;
	case ON_SCOPED:
		return keyed && cfg->idem.scope != IDEM_SCOPE_NONE;
	case ON_TX:
		return rt->tx_db != NULL;
	}
	return 0;
}

/* The status of answer a under cfg. */
static int
status_of(const idem_config *cfg, size_t a)
{
	return answers[a].status != 0 ? answers[a].status :
	    (int)cfg->idem.conflict_status;
}

/* The problem answers of one status for rt: a response object whose
 * description and code enumeration list them, or NULL when none applies
 * (or out of memory). */
static json_t *
problem_response(const idem_config *cfg, const idem_route *rt, int keyed,
    int status)
{
	json_t *codes = json_array(), *headers = json_object();
	char desc[1024];
	size_t a, len = 0;
	int retry = 0;

	desc[0] = '\0';
	for (a = 0; codes != NULL && a < NANSWERS; a++) {
		if (status_of(cfg, a) != status || !applies(cfg, rt, a, keyed))
			continue;
		json_array_append_new(codes, json_string(answers[a].code));
		len += (size_t)snprintf(desc + len, len < sizeof(desc) ?
		    sizeof(desc) - len : 0, "%s%s: %s", len > 0 ? "; " : "",
		    answers[a].code, answers[a].why);
		retry |= answers[a].retry_after;
	}
	if (codes == NULL || headers == NULL || json_array_size(codes) == 0) {
		json_decref(codes);
		json_decref(headers);
		return NULL;
	}
	if (retry)
		json_object_set_new(headers, "Retry-After", json_pack("{s:s}",
		    "$ref", "#/components/headers/Retry-After"));
	if (rt->error_fn != NULL) {
		/* the route's own format: the codes are named in the
		 * description only */
		json_decref(codes);
		return json_pack("{s:s, s:o, s:{s:{s:O}}}", "description", desc,
		    "headers", headers, "content", rt->error_type, "schema",
		    rt->error_schema);
	}
	return json_pack("{s:s, s:o, s:{s:{s:{s:[{s:s}, {s:{s:{s:o}}}]}}}}",
	    "description", desc, "headers", headers, "content",
	    "application/problem+json", "schema", "allOf", "$ref",
	    "#/components/schemas/Problem", "properties", "code", "enum",
	    codes);
}

/* The Idempotency-Key header parameter of a keyed route. */
static json_t *
key_parameter(const idem_config *cfg, const idem_route *rt)
{
	idem_key_format fmt = idem_route_key_format(cfg, rt);
	idem_key_policy kp;
	char life[40], desc[512];

	idem_route_key_policy(cfg, rt, &kp);
	idem_format_iso_duration(kp.lifetime_ms, life, sizeof(life));
	snprintf(desc, sizeof(desc), "A key of the client's, one per operation "
	    "and the same on every retry of it (%s keys; a quoted sf-string "
	    "is the same key). The first answer is stored for %s and replayed "
	    "to every retry with the same key and request, with "
	    "Idempotent-Replayed: true.", idem_key_format_names[fmt], life);
	return json_pack("{s:s, s:s, s:b, s:s, s:{s:s, s:s, s:i, s:i}, s:s}",
	    "name", "Idempotency-Key", "in", "header", "required",
	    idem_route_policy(cfg, rt) == IDEM_POLICY_REQUIRED, "description",
	    desc, "schema", "type", "string", "pattern", key_patterns[fmt],
	    "minLength", fmt == IDEM_KEY_OPAQUE ? 1 : 36, "maxLength",
	    fmt == IDEM_KEY_OPAQUE ? 255 : 36, "x-idempotency-key-lifetime",
	    life);
}

/* The parameters of rt: its path parameters, and its key's. */
static json_t *
parameters(const idem_config *cfg, const idem_route *rt, int keyed)
{
	json_t *ps = json_array();
	size_t i;

	for (i = 0; ps != NULL && i < rt->nsegs; i++)
		if (rt->is_param[i])
			json_array_append_new(ps, json_pack("{s:s, s:s, s:b, "
			    "s:{s:s}}", "name", rt->segs[i], "in", "path",
			    "required", 1, "schema", "type", "string"));
	if (ps != NULL && keyed)
		json_array_append_new(ps, key_parameter(cfg, rt));
	return ps;
}

/* The answers of rt: the handler's (2XX, with the replay header), and the
 * framework's problems. */
static json_t *
responses(const idem_config *cfg, const idem_route *rt, int keyed)
{
	static const int statuses[] = { 400, 409, 413, 422, 500, 503 };
	json_t *res = json_object(), *ok, *p;
	size_t i;

	ok = json_pack("{s:s}", "description", keyed ? "The handler's answer; "
	    "a replay of the stored first answer carries Idempotent-Replayed: "
	    "true" : "The handler's answer");
	if (res == NULL || ok == NULL) {
		json_decref(res);
		json_decref(ok);
		return NULL;
	}
	if (keyed)
		json_object_set_new(ok, "headers", json_pack("{s:{s:s}}",
		    "Idempotent-Replayed", "$ref",
		    "#/components/headers/Idempotent-Replayed"));
	if (rt->response_schema != NULL)
		json_object_set_new(ok, "content", json_pack("{s:{s:O}}",
		    "application/json", "schema", rt->response_schema));
	json_object_set_new(res, "2XX", ok);
	for (i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++) {
		char code[8];
		int st = statuses[i];

		if (st == 409 && (int)cfg->idem.conflict_status != 409 &&
		    (p = problem_response(cfg, rt, keyed, 409)) != NULL)
			json_object_set_new(res, "409", p);
		if (st == 409)
			st = (int)cfg->idem.conflict_status;
		if ((p = problem_response(cfg, rt, keyed, st)) == NULL)
			continue;
		snprintf(code, sizeof(code), "%d", st);
		json_object_set_new(res, code, p);
	}
	return res;
}

/* The x-idempotency extension of a keyed route: its effective policy. */
static json_t *
policy_extension(const idem_config *cfg, const idem_route *rt)
{
	idem_key_policy kp;
	char life[40], ttl[40], statuses[2048];

	idem_route_key_policy(cfg, rt, &kp);
	idem_format_iso_duration(kp.lifetime_ms, life, sizeof(life));
	idem_format_iso_duration(kp.lease_ms, ttl, sizeof(ttl));
	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:b}", "policy",
	    idem_policy_names[idem_route_policy(cfg, rt)], "key-format",
	    idem_key_format_names[idem_route_key_format(cfg, rt)], "lifetime",
	    life, "inflight-ttl", ttl, "commit-statuses",
	    idem_statuses_text(kp.commit_status, statuses, sizeof(statuses)),
	    "transactional", rt->tx_db != NULL);
}

/* A unique operationId for rt into id (size bytes): its method and
 * template in letters, digits and '_', with a number when taken (ids
 * holds those used). */
static void
operation_id(const idem_route *rt, json_t *ids, char *id, size_t size)
{
	size_t i, n;
	int k;

	n = (size_t)snprintf(id, size, "%s", rt->method);
	for (i = 0; rt->tmpl[i] != '\0' && n + 1 < size; i++)
		if (isalnum((unsigned char)rt->tmpl[i]))
			id[n++] = rt->tmpl[i];
		else if (id[n - 1] != '_')
			id[n++] = '_';
	while (n > 1 && id[n - 1] == '_')
		n--;
	id[n] = '\0';
	for (k = 2; json_object_get(ids, id) != NULL && k < 1000; k++)
		snprintf(id + n, size - n, "_%d", k);
	json_object_set_new(ids, id, json_true());
}

/* The operation object of rt. */
static json_t *
operation(const idem_config *cfg, const idem_route *rt, int idempotent,
    json_t *ids)
{
	int keyed = idempotent && idem_route_policy(cfg, rt) != IDEM_POLICY_OFF;
	char id[160], summary[300];
	json_t *op;

	operation_id(rt, ids, id, sizeof(id));
	snprintf(summary, sizeof(summary), "%s %s", rt->method, rt->tmpl);
	op = json_pack("{s:s, s:s, s:[s], s:o, s:o}", "operationId", id,
	    "summary", rt->summary != NULL ? rt->summary : summary, "tags",
	    rt->owner, "parameters", parameters(cfg, rt, keyed), "responses",
	    responses(cfg, rt, keyed));
	if (op == NULL)
		return NULL;
	if (keyed)
		json_object_set_new(op, "x-idempotency", policy_extension(cfg,
		    rt));
	if (rt->request_schema != NULL)
		json_object_set_new(op, "requestBody", json_pack("{s:b, "
		    "s:{s:{s:O}}}", "required", 1, "content", "application/json",
		    "schema", rt->request_schema));
	return op;
}

/* The components every operation refers to. */
static json_t *
components(void)
{
	return json_pack("{s:{s:{s:s, s:s, s:[s, s], s:{s:{s:s}, s:{s:s}, "
	    "s:{s:s}, s:{s:s}}}}, s:{s:{s:s, s:{s:s, s:[s]}}, s:{s:s, "
	    "s:{s:s, s:i}}}}",
	    "schemas", "Problem", "type", "object", "description", "An RFC "
	    "9457 problem (application/problem+json)", "required", "status",
	    "title", "properties", "status", "type", "integer", "title", "type",
	    "string", "code", "type", "string", "detail", "type", "string",
	    "headers", "Idempotent-Replayed", "description", "true on an answer "
	    "replayed from the store: the handler did not run again", "schema",
	    "type", "string", "enum", "true",
	    "Retry-After", "description", "Seconds to wait before retrying "
	    "with the same Idempotency-Key", "schema", "type", "integer",
	    "minimum", 0);
}

/* Adds rt's operation to paths.  Returns 0, or -1 when out of memory. */
static int
add_route(const idem_config *cfg, const idem_route *rt, int idempotent,
    json_t *paths, json_t *ids, json_t *tags)
{
	json_t *item = json_object_get(paths, rt->tmpl), *op;
	char method[16];
	size_t i;

	for (i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
		if (strcmp(methods[i], rt->method) == 0)
			break;
	if (i == sizeof(methods) / sizeof(methods[0]))
		return 0; /* a method OpenAPI has no place for */
	for (i = 0; rt->method[i] != '\0' && i + 1 < sizeof(method); i++)
		method[i] = (char)tolower((unsigned char)rt->method[i]);
	method[i] = '\0';
	if (item == NULL && json_object_set_new(paths, rt->tmpl,
	    item = json_object()) != 0)
		return -1;
	if ((op = operation(cfg, rt, idempotent, ids)) == NULL ||
	    json_object_set_new(item, method, op) != 0)
		return -1;
	if (json_object_get(tags, rt->owner) == NULL)
		json_object_set_new(tags, rt->owner, json_true());
	return 0;
}

json_t *
idem_openapi_document(const idem_config *cfg, const idem_router *r,
    int idempotent)
{
	json_t *doc, *paths = json_object(), *ids = json_object(),
	    *tags = json_object(), *tag_list = json_array(), *v;
	const char *name;
	char keys[1024];
	size_t i;
	int ok = paths != NULL && ids != NULL && tags != NULL &&
	    tag_list != NULL;

	for (i = 0; ok && i < idem_router_count(r); i++) {
		const idem_route *rt = idem_router_at(r, i);
		if (strcmp(rt->owner, IDEM_BUILTIN_OWNER) != 0)
			ok = add_route(cfg, rt, idempotent, paths, ids, tags) == 0;
	}
	/* the one built-in route a client of the routes uses */
	if (ok && idempotent && idem_key_status_path(cfg, keys, sizeof(keys))
	    != NULL) {
		ok = json_object_set_new(paths, keys, idem_key_status_openapi())
		    == 0 && json_object_get(paths, keys) != NULL;
		json_object_set_new(tags, IDEM_BUILTIN_OWNER, json_true());
	}
	json_object_foreach(tags, name, v) {
		char desc[128];
		snprintf(desc, sizeof(desc), "The routes of plugin %s", name);
		if (ok && json_array_append_new(tag_list, json_pack("{s:s, s:s}",
		    "name", name, "description", desc)) != 0)
			ok = 0;
	}
	json_decref(ids);
	json_decref(tags);
	if (!ok) {
		json_decref(paths);
		json_decref(tag_list);
		return NULL;
	}
	doc = json_pack("{s:s, s:{s:s, s:s, s:s}, s:[{s:s}], s:[], s:o, s:o, "
	    "s:o}", "openapi", "3.1.0", "info", "title", "idemfcgi", "version",
	    PACKAGE_VERSION, "description", "The routes served by idemfcgi. "
	    "Mutations are safe to retry with an Idempotency-Key: one key per "
	    "operation, the same on every retry; the first answer is replayed.",
	    "servers", "url", cfg->server.mount[0] != '\0' ? cfg->server.mount : "/",
	    "security", "tags", tag_list, "paths", paths, "components",
	    components());
	if (doc != NULL)
		json_object_update_missing(json_object_get(json_object_get(doc,
		    "components"), "schemas"), idem_router_schemas(r));
	return doc;
}
