/*
 * iceberg.c - an Apache Iceberg REST catalog on idemfcgi: namespaces and
 * tables as the spec's OpenAPI document defines them
 * (open-api/rest-catalog-open-api.yaml of apache/iceberg), every mutation
 * safe to retry with the spec's Idempotency-Key (UUIDv7, optional).
 *
 *   GET /v1/config   the catalog's configuration: idempotency-key-lifetime
 *                    (as long as the store keeps a key), the endpoints, and
 *                    the prefix of the warehouse asked for
 *
 * The routes of ice_ns.c and ice_table.c are served with and without a
 * prefix (/v1/namespaces, /v1/{prefix}/namespaces): each prefix is a
 * catalog of its own.  On a store with a database (MySQL, PostgreSQL) the
 * catalog lives in it and every mutation is a transactional route: the
 * change and the key's answer commit together.  On the memory store it
 * lives in the worker's memory.  Errors, the framework's own among them,
 * are written in the Iceberg error model: {"error": {"message", "type",
 * "code"}}.
 *
 * [iceberg]
 * warehouse = DIR           where table metadata is written (required)
 * prefix = NAME             the prefix GET /v1/config hands out ("": the
 *                           warehouse asked for, or none)
 * page-size = 100           a page of a list when the client asks none
 * purge-interval = 5s       how often dropped tables' files are deleted
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "iceberg.h"
#include "ice_ident.h"

/* ------------------------------------------------------------- helpers */

/* Cuts an incomplete UTF-8 sequence off the end of s (a message cut at a
 * byte count), so that it stays a JSON string. */
static void
utf8_trim(char *s)
{
	size_t n = strlen(s), i = n, need;
	unsigned char lead;

	while (i > 0 && n - i < 4 && ((unsigned char)s[i - 1] & 0xC0) == 0x80)
		i--;
	if (i == 0 || ((unsigned char)s[i - 1] & 0x80) == 0)
		return;
	lead = (unsigned char)s[i - 1];
	need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
	if (n - (i - 1) < need)
		s[i - 1] = '\0';
}

idem_err
ice_fail(idem_response *res, int status, const char *type, const char *fmt,
    ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	utf8_trim(msg);
	return idem_response_problem(res, status, type, msg);
}

idem_err
ice_unavailable(idem_response *res, idem_err err)
{
	idem_err e;

	if (err == IDEM_ERR_NOMEM)
		return err;
	e = ice_fail(res, 503, "ServiceUnavailableException", "the catalog's "
	    "storage is unavailable (%s); nothing was changed: retry with the "
	    "same Idempotency-Key", idem_strerror(err));
	return e != IDEM_OK ? e : idem_response_header(res, "Retry-After", "1");
}

idem_err
ice_no_namespace(idem_response *res, const char *key)
{
	json_t *parts = ice_ns_to_json(key);
	char *text = parts != NULL ? json_dumps(parts, JSON_COMPACT) : NULL;
	idem_err err = ice_fail(res, 404, "NoSuchNamespaceException",
	    "Namespace does not exist: %s", text != NULL ? text : "?");

	json_decref(parts);
	free(text);
	return err;
}

int
ice_need_ns(iceberg *ib, ice_tx *tx, idem_response *res, const char *prefix,
    const char *key, ice_lock lock, idem_err *err)
{
	char *props = NULL;

	*err = ib->cat->ops->ns_get(tx, prefix, key, lock, &props);
	free(props);
	if (*err == IDEM_OK)
		return 0;
	*err = *err == IDEM_ERR_NOT_FOUND ? ice_no_namespace(res, key) :
	    ice_unavailable(res, *err);
	return -1;
}

/* Whether p is a good prefix: 1 to ICE_PREFIX_MAX of letters, digits and
 * "._-", not a word of the spec's paths. */
static int
prefix_ok(const char *p)
{
	static const char *const words[] = { "namespaces", "tables",
	    "transactions", "config", "oauth", "views" };
	size_t i, n;

	for (n = 0; p[n] != '\0'; n++)
		if (n >= ICE_PREFIX_MAX || !(isalnum((unsigned char)p[n]) ||
		    strchr("._-", p[n]) != NULL))
			return 0;
	for (i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (strcmp(p, words[i]) == 0)
			return 0;
	return n > 0 && strcmp(p, ".") != 0 && strcmp(p, "..") != 0;
}

const char *
ice_prefix(const idem_request *req, idem_response *res, idem_err *err)
{
	const char *p = idem_request_param(req, "prefix");

	if (p == NULL)
		return "";
	if (prefix_ok(p))
		return p;
	*err = ice_fail(res, 400, "BadRequestException", "a prefix is 1 to %d "
	    "letters, digits, '.', '_' or '-'", ICE_PREFIX_MAX);
	return NULL;
}

json_t *
ice_body(const idem_request *req, idem_response *res, idem_err *err)
{
	json_error_t jerr;
	json_t *body = idem_request_json(req, &jerr);

	if (json_is_object(body))
		return body;
	json_decref(body);
	*err = ice_fail(res, 400, "BadRequestException", "Malformed request: "
	    "%s", body == NULL ? jerr.text : "the body is not a JSON object");
	return NULL;
}

char *
ice_ns_param(const idem_request *req, idem_response *res, idem_err *err)
{
	const char *p = idem_request_param(req, "namespace");
	char *key = p != NULL ? ice_ns_from_param(p) : NULL;

	if (key == NULL)
		*err = ice_fail(res, 400, "BadRequestException", "a namespace "
		    "is 1 or more names split by 0x1F (%%1F), each 1 to %d "
		    "bytes without control characters", ICE_NAME_MAX);
	return key;
}

int
ice_paging(const iceberg *ib, const idem_request *req, idem_response *res,
    idem_err *err, char **after, size_t *limit)
{
	const char *q = idem_request_query(req);
	char *token, *size;
	int bad_t, bad_s;
	long long n = 0;

	*after = NULL;
	token = ice_query(q, "pageToken", &bad_t);
	size = ice_query(q, "pageSize", &bad_s);
	if (size != NULL) {
		char *end;
		n = strtoll(size, &end, 10);
		bad_s |= *size == '\0' || *end != '\0' || n < 1;
	}
	if (!bad_t && token != NULL && *token != '\0')
		bad_t = (*after = ice_token_decode(token)) == NULL;
	if (bad_t || bad_s) {
		free(token);
		free(size);
		free(*after);
		*after = NULL;
		*err = ice_fail(res, 400, "BadRequestException", "%s", bad_t ?
		    "malformed pageToken" : "pageSize: a whole number from 1");
		return -1;
	}
	/* no token: the whole list (the spec's rule for a paging server);
	 * a token, even empty: a page */
	if (size != NULL)
		*limit = n > ICE_PAGE_MAX ? ICE_PAGE_MAX : (size_t)n;
	else
		*limit = token != NULL ? (size_t)ib->page_size : ICE_LIST_ALL;
	free(token);
	free(size);
	if (*after == NULL && (*after = strdup("")) == NULL) {
		*err = IDEM_ERR_NOMEM;
		return -1;
	}
	return 0;
}

void
ice_next_token(json_t *doc, const ice_list *l, int paged)
{
	char *t;

	if (l->more && l->n > 0 && (t = ice_token_encode(l->names[l->n - 1]))
	    != NULL) {
		json_object_set_new(doc, "next-page-token", json_string(t));
		free(t);
	} else if (paged) {
		json_object_set_new(doc, "next-page-token", json_null());
	}
}

int64_t
ice_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------- error format */

/* The Iceberg type of one of the framework's codes (DESIGN.md 5). */
static const char *
framework_type(int status, const char *code)
{
	static const struct { const char *code, *type; } types[] = {
		{ "IDEMPOTENCY_IN_FLIGHT", "IdempotencyKeyInFlightException" },
		{ "IDEMPOTENCY_CONFLICT", "IdempotencyKeyReusedException" },
		{ "IDEMPOTENCY_KEY_EXPIRED", "IdempotencyKeyExpiredException" },
		{ "IDEMPOTENCY_OUTCOME_UNKNOWN", "ServiceUnavailableException" },
		{ "IDEMPOTENCY_STORE_UNAVAILABLE",
		    "ServiceUnavailableException" },
		{ "TRANSACTION_ROLLED_BACK", "ServiceUnavailableException" },
		{ "TRANSACTION_OUTCOME_UNKNOWN", "ServiceUnavailableException" },
		{ "DATABASE_UNAVAILABLE", "ServiceUnavailableException" },
	};
	size_t i;

	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (strcmp(code, types[i].code) == 0)
			return types[i].type;
	if (status == 503)
		return "ServiceUnavailableException";
	return status >= 500 ? "InternalServerError" : "BadRequestException";
}

/* Writes an error as the Iceberg error model.  A catalog error's code is
 * its Iceberg type ("NoSuchTableException": it has lower-case letters);
 * the framework's codes are mapped, and named in the message. */
static idem_err
render(idem_response *res, int status, const char *code, const char *detail,
    void *data)
{
	const char *p, *type = code;
	char msg[1200];
	int iceberg_type = 0;

	(void)data;
	for (p = code; *p != '\0'; p++)
		iceberg_type |= islower((unsigned char)*p);
	if (!iceberg_type) {
		type = framework_type(status, code);
		snprintf(msg, sizeof(msg), "%s: %s", code, detail != NULL ?
		    detail : "");
		utf8_trim(msg);
		detail = msg;
	}
	return idem_response_json(res, status, json_pack("{s:{s:s, s:s, s:i}}",
	    "error", "message", detail != NULL ? detail : "", "type", type,
	    "code", status));
}

/* -------------------------------------------------------------- config */

/* The routes: method, path under /v1/{prefix} (or /v1), handler, and
 * whether it changes the catalog (a transactional route with the spec's
 * key policy) or not (a read, or metrics: no key). */
static const struct route {
	const char *method, *path;
	idem_handler_fn fn;
	int mutation;
} routes[] = {
	{ "GET", "/namespaces", ice_ns_list, 0 },
	{ "POST", "/namespaces", ice_ns_create, 1 },
	{ "GET", "/namespaces/{namespace}", ice_ns_load, 0 },
	{ "HEAD", "/namespaces/{namespace}", ice_ns_exists, 0 },
	{ "DELETE", "/namespaces/{namespace}", ice_ns_drop, 1 },
	{ "POST", "/namespaces/{namespace}/properties", ice_ns_props, 1 },
	{ "GET", "/namespaces/{namespace}/tables", ice_tbl_list, 0 },
	{ "POST", "/namespaces/{namespace}/tables", ice_tbl_create, 1 },
	{ "GET", "/namespaces/{namespace}/tables/{table}", ice_tbl_load, 0 },
	{ "HEAD", "/namespaces/{namespace}/tables/{table}", ice_tbl_exists, 0 },
	{ "POST", "/namespaces/{namespace}/tables/{table}", ice_tbl_commit, 1 },
	{ "DELETE", "/namespaces/{namespace}/tables/{table}", ice_tbl_drop, 1 },
	{ "POST", "/namespaces/{namespace}/register", ice_tbl_register, 1 },
	{ "POST", "/namespaces/{namespace}/tables/{table}/metrics",
	    ice_tbl_metrics, 0 },
	{ "POST", "/tables/rename", ice_tbl_rename, 1 },
	{ "POST", "/transactions/commit", ice_tx_commit, 1 },
};
#define NROUTES (sizeof(routes) / sizeof(routes[0]))

/* GET /v1/config[?warehouse=W] */
static idem_err
config(const idem_request *req, idem_response *res, void *data)
{
	iceberg *ib = data;
	char *wh, line[128];
	json_t *doc, *endpoints;
	const char *prefix = ib->prefix;
	size_t i;
	int bad;

	wh = ice_query(idem_request_query(req), "warehouse", &bad);
	if (bad || (wh != NULL && *wh != '\0' && *prefix == '\0' &&
	    !prefix_ok(wh))) {
		free(wh);
		return ice_fail(res, 400, "BadRequestException", "warehouse: "
		    "1 to %d letters, digits, '.', '_' or '-' (it is the "
		    "catalog's prefix)", ICE_PREFIX_MAX);
	}
	if (*prefix == '\0' && wh != NULL)
		prefix = wh;
	doc = json_pack("{s:{}, s:{}, s:[]}", "defaults", "overrides",
	    "endpoints");
	if (doc == NULL) {
		free(wh);
		return IDEM_ERR_NOMEM;
	}
	if (*prefix != '\0')
		json_object_set_new(json_object_get(doc, "overrides"), "prefix",
		    json_string(prefix));
	free(wh);
	if (ib->lifetime[0] != '\0') {
		json_object_set_new(doc, "idempotency-key-lifetime",
		    json_string(ib->lifetime));
		json_object_set_new(json_object_get(doc, "defaults"),
		    "idempotency-key-lifetime", json_string(ib->lifetime));
	}
	endpoints = json_object_get(doc, "endpoints");
	for (i = 0; i < NROUTES; i++) {
		snprintf(line, sizeof(line), "%s /v1/{prefix}%s",
		    routes[i].method, routes[i].path);
		json_array_append_new(endpoints, json_string(line));
	}
	return idem_response_json(res, 200, doc);
}

/* -------------------------------------------------------------- purger */

/* One round: deletes the files of up to 16 committed drops, unless a
 * table uses their directory (registered from the dropped table's
 * metadata, say), then forgets them.  While a drop waits here no table
 * is made at its directory (ice_table.c not_purging).  Returns how many
 * it forgot. */
static size_t
purge_round(iceberg *ib)
{
	ice_list l = { 0 };
	ice_tx *tx = ib->cat->begin(ib->cat, NULL);
	size_t i, done = 0;
	int used;

	if (tx == NULL)
		return 0;
	if (ib->cat->ops->purge_next(tx, 16, &l) != IDEM_OK) {
		ib->cat->end(tx);
		return 0;
	}
	ib->cat->end(tx);
	for (i = 0; i < l.n; i++) {
		if ((tx = ib->cat->begin(ib->cat, NULL)) == NULL)
			break;
		used = 1;
		if (ib->cat->ops->dir_used(tx, l.names[i], 0,
		    ice_wh_root(ib->wh), &used) != IDEM_OK) {
			ib->cat->end(tx);
			continue;
		}
		ib->cat->end(tx);
		if (used)
			idem_log(NULL, IDEM_LOG_INFO, "iceberg: %s is a dropped "
			    "table's, but another table uses it: its files are "
			    "kept", l.names[i]);
		else if (ice_wh_purge(ib->wh, l.names[i]) != IDEM_OK)
			continue;
		if ((tx = ib->cat->begin(ib->cat, NULL)) == NULL)
			break;
		if (ib->cat->ops->purge_done(tx, l.names[i]) == IDEM_OK)
			done++;
		ib->cat->end(tx);
	}
	ice_list_clear(&l);
	return done;
}

/* The purger's thread: a round every purge-interval until stopped. */
static void *
purger(void *arg)
{
	iceberg *ib = arg;
	struct timespec until;

	pthread_mutex_lock(&ib->purge_lock);
	while (!ib->stopping) {
		pthread_mutex_unlock(&ib->purge_lock);
		purge_round(ib);
		pthread_mutex_lock(&ib->purge_lock);
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += (time_t)(ib->purge_interval / 1000);
		until.tv_nsec += (long)(ib->purge_interval % 1000) * 1000000;
		if (until.tv_nsec >= 1000000000) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
		if (!ib->stopping)
			pthread_cond_timedwait(&ib->purge_wake, &ib->purge_lock,
			    &until);
	}
	pthread_mutex_unlock(&ib->purge_lock);
	return NULL;
}

/* ----------------------------------------------------------- lifecycle */

static void
teardown(void *data)
{
	iceberg *ib = data;

	if (ib == NULL)
		return;
	if (ib->purger_running) {
		pthread_mutex_lock(&ib->purge_lock);
		ib->stopping = 1;
		pthread_cond_signal(&ib->purge_wake);
		pthread_mutex_unlock(&ib->purge_lock);
		pthread_join(ib->purger, NULL);
	}
	pthread_cond_destroy(&ib->purge_wake);
	pthread_mutex_destroy(&ib->purge_lock);
	if (ib->cat != NULL)
		ib->cat->free(ib->cat);
	ice_wh_free(ib->wh);
	free(ib);
}

/* Registers route r under base ("/v1" or "/v1/{prefix}"). */
static idem_err
add_route(idem_app *app, iceberg *ib, const char *base, const struct route *r,
    int tx)
{
	char path[160];
	idem_err err;

	snprintf(path, sizeof(path), "%s%s", base, r->path);
	if (!r->mutation)
		return idem_route_add(app, r->method, path, IDEM_POLICY_OFF,
		    r->fn, ib);
	err = tx ? idem_route_add_tx(app, r->method, path,
	    IDEM_POLICY_OPTIONAL, r->fn, ib) : idem_route_add(app, r->method,
	    path, IDEM_POLICY_OPTIONAL, r->fn, ib);
	/* the spec's key: optional, a UUIDv7 when present */
	if (err == IDEM_OK)
		err = idem_route_set(app, r->method, path, "key-format",
		    "uuidv7");
	/* a retry sent while the first attempt runs waits for its answer
	 * rather than a 409 a client may read as a failed commit (on a
	 * transactional route it waits on the record's row lock) */
	if (err == IDEM_OK && !tx)
		err = idem_route_set(app, r->method, path, "inflight-wait",
		    "10s");
	return err;
}

/* The shortest lifetime of the mutation routes into ib->lifetime ("" when
 * keys are ignored).  Returns IDEM_OK or an error of idem_route_lifetime. */
static idem_err
advertise(idem_app *app, iceberg *ib)
{
	uint64_t least = UINT64_MAX, ms;
	char path[160];
	size_t i;
	idem_err err;

	for (i = 0; i < NROUTES; i++) {
		if (!routes[i].mutation)
			continue;
		snprintf(path, sizeof(path), "/v1%s", routes[i].path);
		err = idem_route_lifetime(app, routes[i].method, path, &ms);
		if (err == IDEM_ERR_NOT_FOUND)
			continue;
		if (err != IDEM_OK)
			return err;
		if (ms < least)
			least = ms;
		snprintf(path, sizeof(path), "/v1/{prefix}%s", routes[i].path);
		if (idem_route_lifetime(app, routes[i].method, path, &ms) ==
		    IDEM_OK && ms < least)
			least = ms;
	}
	ib->lifetime[0] = '\0';
	if (least != UINT64_MAX)
		ice_iso_duration(least, ib->lifetime, sizeof(ib->lifetime));
	return IDEM_OK;
}

static idem_err
setup(idem_app *app, void **data)
{
	iceberg *ib = calloc(1, sizeof(*ib));
	idem_db_dialect dialect = idem_app_db_dialect(app);
	json_t *model = NULL, *ref = NULL;
	const char *warehouse;
	idem_err err;
	size_t i;

	*data = NULL;
	if (ib == NULL)
		return IDEM_ERR_NOMEM;
	pthread_mutex_init(&ib->purge_lock, NULL);
	pthread_cond_init(&ib->purge_wake, NULL);
	if ((err = idem_config_string(app, "warehouse", NULL, &warehouse))
	    != IDEM_OK || (err = idem_config_string(app, "prefix", "",
	    &ib->prefix)) != IDEM_OK || (err = idem_config_int(app,
	    "page-size", 100, 1, ICE_PAGE_MAX, &ib->page_size)) != IDEM_OK ||
	    (err = idem_config_duration(app, "purge-interval", 5000,
	    &ib->purge_interval)) != IDEM_OK)
		goto fail;
	err = IDEM_ERR_CONFIG;
	if (warehouse == NULL) {
		idem_log(NULL, IDEM_LOG_ERROR, "[iceberg] warehouse = DIR is "
		    "required: the directory table metadata is written to");
		goto fail;
	}
	if (*ib->prefix != '\0' && !prefix_ok(ib->prefix)) {
		idem_log(NULL, IDEM_LOG_ERROR, "[iceberg] prefix = %s: 1 to %d "
		    "letters, digits, '.', '_' or '-', not a word of the "
		    "spec's paths", ib->prefix, ICE_PREFIX_MAX);
		goto fail;
	}
	if (ib->purge_interval < 100) {
		idem_log(NULL, IDEM_LOG_ERROR, "[iceberg] purge-interval: at "
		    "least 100ms");
		goto fail;
	}
	if ((ib->wh = ice_wh_new(warehouse)) == NULL)
		goto fail;
	ib->cat = dialect == IDEM_DB_NONE ? ice_cat_mem_new() :
	    ice_cat_sql_new(app, dialect);
	if (ib->cat == NULL) {
		err = IDEM_ERR_PLUGIN;
		goto fail;
	}
	for (i = 0; i < NROUTES; i++)
		if ((err = add_route(app, ib, "/v1", &routes[i],
		    dialect != IDEM_DB_NONE)) != IDEM_OK ||
		    (err = add_route(app, ib, "/v1/{prefix}", &routes[i],
		    dialect != IDEM_DB_NONE)) != IDEM_OK)
			goto fail;
	if ((err = idem_route_add(app, "GET", "/v1/config", IDEM_POLICY_OFF,
	    config, ib)) != IDEM_OK)
		goto fail;
	model = json_pack("{s:s, s:[s, s, s], s:{s:{s:s}, s:{s:s}, s:{s:s, "
	    "s:i, s:i}}}", "type", "object", "required", "message", "type",
	    "code", "properties", "message", "type", "string", "type", "type",
	    "string", "code", "type", "integer", "minimum", 400, "maximum", 600);
	ref = json_pack("{s:s, s:[s], s:b, s:{s:{s:s}}}", "type", "object",
	    "required", "error", "additionalProperties", 0, "properties",
	    "error", "$ref", "#/components/schemas/ErrorModel");
	if (model == NULL || ref == NULL)
		err = IDEM_ERR_NOMEM;
	else if ((err = idem_app_schema(app, "ErrorModel", model)) == IDEM_OK &&
	    (err = idem_app_schema(app, "IcebergErrorResponse", ref))
	    == IDEM_OK) {
		json_decref(ref);
		ref = json_pack("{s:s}", "$ref",
		    "#/components/schemas/IcebergErrorResponse");
		err = ref == NULL ? IDEM_ERR_NOMEM : idem_app_error_format(app,
		    "application/json", ref, render, NULL);
	}
	json_decref(model);
	json_decref(ref);
	if (err != IDEM_OK || (err = advertise(app, ib)) != IDEM_OK ||
	    (err = ice_openapi_describe(app)) != IDEM_OK)
		goto fail;
	if (dialect == IDEM_DB_NONE && ib->lifetime[0] == '\0') {
		/* with idempotency disabled there is no store: each worker
		 * would keep a catalog of its own */
		idem_log(NULL, IDEM_LOG_ERROR, "[iceberg] needs idempotency "
		    "enabled, on its mutations: the catalog lives in the "
		    "store's database, or with the memory store's keys in its "
		    "one worker");
		err = IDEM_ERR_CONFIG;
		goto fail;
	}
	if (!idem_app_is_check(app)) {
		if (pthread_create(&ib->purger, NULL, purger, ib) != 0) {
			err = IDEM_ERR_IO;
			goto fail;
		}
		ib->purger_running = 1;
	}
	*data = ib;
	return IDEM_OK;
fail:
	teardown(ib);
	return err;
}

/* Makes the warehouse directory and, on a store with a database, the
 * catalog's tables. */
static idem_err
deploy(idem_app *app, void *data)
{
	iceberg *ib = data;
	idem_db_dialect dialect = idem_app_db_dialect(app);
	const char *const *ddl;
	size_t i, n;
	idem_err err;

	if ((err = ice_wh_make(ib->wh)) != IDEM_OK)
		return err;
	if (dialect == IDEM_DB_NONE)
		return IDEM_OK;
	ddl = ice_cat_sql_ddl(dialect, &n);
	for (i = 0; i < n; i++)
		if ((err = idem_app_db_exec(app, ddl[i])) != IDEM_OK)
			return err;
	return IDEM_OK;
}

IDEM_PLUGIN("iceberg", setup, deploy, teardown)
