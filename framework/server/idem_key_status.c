/*
 * idem_key_status.c - GET policy-path/keys/{key}: a key's state in the
 * caller's scope (idem_key_status.h).
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "idem_key_status.h"
#include "idem_middleware.h"
#include "idem_store.h"
#include "idem_time.h"

char *
idem_key_status_path(const idem_config *cfg, char *buf, size_t size)
{
	if (cfg->server.policy_path == NULL || !cfg->idem.enabled ||
	    cfg->idem.key_status == IDEM_KEY_STATUS_OFF ||
	    (cfg->idem.key_status == IDEM_KEY_STATUS_AUTO &&
	    cfg->idem.scope == IDEM_SCOPE_NONE))
		return NULL;
	if ((size_t)snprintf(buf, size, "%s/keys/{key}",
	    cfg->server.policy_path) >= size)
		return NULL;
	return buf;
}

/* Whether k is a key a request may carry: 1 to IDEM_KEY_MAX bytes of
 * visible ASCII.  1 or 0. */
static int
key_ok(const char *k)
{
	size_t n = strlen(k), i;

	if (n == 0 || n > IDEM_KEY_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if (k[i] < 0x21 || k[i] > 0x7e)
			return 0;
	return 1;
}

/* Whether k is a UUID with capitals, which a route of key-format uuid or
 * uuidv7 stores lower-cased; then lower-cases it in place.  1 or 0. */
static int
lower_uuid(char *k, size_t len)
{
	size_t i;
	int upper = 0;

	if (len != 36)
		return 0;
	for (i = 0; i < len; i++) {
		int dash = i == 8 || i == 13 || i == 18 || i == 23;
		if (dash != (k[i] == '-') || (!dash && !(k[i] >= '0' &&
		    k[i] <= '9') && !(k[i] >= 'a' && k[i] <= 'f') &&
		    !(k[i] >= 'A' && k[i] <= 'F')))
			return 0;
		upper |= k[i] >= 'A' && k[i] <= 'F';
	}
	for (i = 0; upper && i < len; i++)
		if (k[i] >= 'A' && k[i] <= 'F')
			k[i] = (char)(k[i] - 'A' + 'a');
	return upper;
}

/* A time offset_ms from now as UTC text, into obj under name. */
static void
set_time(json_t *obj, const char *name, int64_t offset_ms)
{
	char t[32];

	json_object_set_new(obj, name, json_string(idem_utc_offset(offset_ms,
	    t, sizeof(t))));
}

/* The answer's object for the record r found (err IDEM_OK), or for err
 * IDEM_ERR_NOT_FOUND (absent) or IDEM_ERR_BUSY (held by an open
 * transaction): what a retry of the key would meet. */
static json_t *
state_of(idem_err err, const idem_store_record *r)
{
	json_t *o = json_object();
	const char *state = "absent";
	int64_t past = -r->expires_in_ms;

	if (o == NULL)
		return NULL;
	if (err == IDEM_ERR_BUSY)
		state = "in-flight";
	else if (err != IDEM_OK)
		;
	else if (r->state == IDEM_RECORD_IN_FLIGHT) {
		state = "in-flight";
		set_time(o, "reserved-at", -(int64_t)r->reserved_age_ms);
		json_object_set_new(o, "age-ms",
		    json_integer((json_int_t)r->reserved_age_ms));
		/* its holder stopped renewing: a retry of the same request
		 * takes it over and runs the handler */
		if (r->lease_ms > 0 && r->lease_age_ms > r->lease_ms)
			json_object_set_new(o, "lease-lapsed", json_true());
	} else if (r->state == IDEM_RECORD_COMMITTED && past < 0) {
		state = "committed";
		json_object_set_new(o, "status", json_integer(r->status));
		set_time(o, "committed-at", -(int64_t)r->lease_age_ms);
		set_time(o, "replays-until", r->expires_in_ms);
	} else if (idem_tombstone_live(r->state, past, r->tombstone_ms)) {
		state = "expired";
		/* none: it was of unknown outcome */
		json_object_set_new(o, "status", r->status > 0 ?
		    json_integer(r->status) : json_null());
		set_time(o, "committed-at", -(int64_t)r->lease_age_ms);
		set_time(o, "refused-until", r->state == IDEM_RECORD_EXPIRED ?
		    r->expires_in_ms : (int64_t)r->tombstone_ms - past);
	} else if (r->state == IDEM_RECORD_PAUSED && past < 0)
		state = "paused";
	else if (r->state == IDEM_RECORD_UNKNOWN && past < 0) {
		state = "unknown";
		set_time(o, "since", -(int64_t)r->lease_age_ms);
	}
	json_object_set_new(o, "state", json_string(state));
	return o;
}

idem_err
idem_key_status_handler(const idem_request *req, idem_response *res,
    void *data)
{
	const idem_service *svc = data;
	const char *key = idem_request_param(req, "key");
	idem_store_key sk;
	idem_store_record r;
	json_t *o;
	idem_err err;

	memset(&sk, 0, sizeof(sk));
	if (svc->mw == NULL || key == NULL || !key_ok(key)) {
		idem_response_refuse(res, 400, "IDEMPOTENCY_KEY_INVALID", "a key "
		    "is 1 to 255 bytes of visible ASCII, as the Idempotency-Key "
		    "header holds it (without the quotes of an sf-string)", 0);
		return IDEM_OK;
	}
	if (idem_middleware_scope(svc->mw, req, &sk, res) < 0)
		return IDEM_OK;
	sk.key_len = strlen(key);
	memcpy(sk.key, key, sk.key_len);
	err = idem_store_lookup(idem_middleware_store(svc->mw), &sk, &r);
	/* a uuid key's route stores it lower-cased */
	if (err == IDEM_ERR_NOT_FOUND && lower_uuid(sk.key, sk.key_len))
		err = idem_store_lookup(idem_middleware_store(svc->mw), &sk,
		    &r);
	if (err != IDEM_OK && err != IDEM_ERR_NOT_FOUND && err !=
	    IDEM_ERR_BUSY) {
		idem_response_refuse(res, 503, "IDEMPOTENCY_STORE_UNAVAILABLE",
		    "the idempotency store is unavailable: the key's state "
		    "cannot be read now", 1);
		return IDEM_OK;
	}
	if ((o = state_of(err, &r)) == NULL)
		return IDEM_ERR_NOMEM;
	if (json_object_set_new(o, "key", json_string(key)) != 0) {
		json_decref(o);
		return IDEM_ERR_NOMEM;
	}
	if ((err = idem_response_json(res, 200, o)) != IDEM_OK)
		return err;
	return idem_response_header(res, "Cache-Control", "no-store");
}

/* The route's OpenAPI operation, as JSON text (its key's maxLength is
 * IDEM_KEY_MAX, checked where the document is built). */
static const char openapi_text[] = "{\"get\": {"
    "\"operationId\": \"idemfcgi_key_status\","
    "\"summary\": \"What became of an Idempotency-Key\","
    "\"description\": \"The state of the key in the caller's own scope, as "
    "a retry with it would meet it: for a client that kept only the key. "
    "Never the stored answer, never another scope's key.\","
    "\"tags\": [\"idemfcgi\"],"
    "\"parameters\": [{\"name\": \"key\", \"in\": \"path\", \"required\": "
    "true, \"description\": \"the key as the Idempotency-Key header held "
    "it (without an sf-string's quotes)\", \"schema\": {\"type\": "
    "\"string\", \"minLength\": 1, \"maxLength\": 255}}],"
    "\"responses\": {"
    "\"200\": {\"description\": \"the key's state\", \"headers\": "
    "{\"Cache-Control\": {\"description\": \"no-store\", \"schema\": "
    "{\"type\": \"string\"}}}, \"content\": {\"application/json\": "
    "{\"schema\": {\"type\": \"object\", \"required\": [\"key\", "
    "\"state\"], \"properties\": {"
    "\"key\": {\"type\": \"string\"},"
    "\"state\": {\"type\": \"string\", \"enum\": [\"absent\", "
    "\"in-flight\", \"paused\", \"committed\", \"unknown\", \"expired\"], "
    "\"description\": \"absent: never seen or forgotten, a request with "
    "it runs; in-flight: being processed; paused: released with "
    "progress, a retry resumes it; committed: its answer is replayed; "
    "unknown: its outcome is being determined; expired: answered, and "
    "past its lifetime: a retry is refused (IDEMPOTENCY_KEY_EXPIRED) "
    "unless its route runs expired keys\"},"
    "\"status\": {\"type\": [\"integer\", \"null\"], \"description\": "
    "\"committed, expired: the first answer's status (null: its outcome "
    "was never known)\"},"
    "\"reserved-at\": {\"type\": \"string\", \"format\": \"date-time\"},"
    "\"age-ms\": {\"type\": \"integer\"},"
    "\"lease-lapsed\": {\"type\": \"boolean\", \"description\": \"in-flight: "
    "its holder stopped renewing it; a retry of the same request takes "
    "it over and runs\"},"
    "\"committed-at\": {\"type\": \"string\", \"format\": \"date-time\"},"
    "\"replays-until\": {\"type\": \"string\", \"format\": \"date-time\"},"
    "\"refused-until\": {\"type\": \"string\", \"format\": \"date-time\"},"
    "\"since\": {\"type\": \"string\", \"format\": \"date-time\"}"
    "}}}}},"
    "\"400\": {\"description\": \"a malformed key "
    "(IDEMPOTENCY_KEY_INVALID), or no principal where keys are scoped by "
    "one (IDEMPOTENCY_SCOPE_MISSING)\", \"content\": "
    "{\"application/problem+json\": {\"schema\": {\"$ref\": "
    "\"#/components/schemas/Problem\"}}}},"
    "\"503\": {\"description\": \"the store is unavailable "
    "(IDEMPOTENCY_STORE_UNAVAILABLE)\", \"headers\": {\"Retry-After\": "
    "{\"$ref\": \"#/components/headers/Retry-After\"}}, \"content\": "
    "{\"application/problem+json\": {\"schema\": {\"$ref\": "
    "\"#/components/schemas/Problem\"}}}}"
    "}}}";
_Static_assert(IDEM_KEY_MAX == 255, "openapi_text's maxLength");

json_t *
idem_key_status_openapi(void)
{
	return json_loads(openapi_text, 0, NULL);
}
