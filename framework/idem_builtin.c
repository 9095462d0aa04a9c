/*
 * idem_builtin.c - the policy and metrics routes.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "idem_builtin.h"
#include "idem_cidr.h"
#include "idem_log.h"
#include "idem_metrics.h"
#include "idem_time.h"

static const char *const policy_names[] = { "default", "off", "optional",
    "required" };

/* GET policy-path: what a client needs to know to send keys right. */
static idem_err
policy_handler(const idem_request *req, idem_response *res, void *data)
{
	const idem_service *svc = data;
	const idem_config *cfg = svc->cfg;
	json_t *doc, *defaults, *idem, *routes;
	char lifetime[40];
	size_t i;

	(void)req;
	if ((doc = json_object()) == NULL ||
	    json_object_set_new(doc, "defaults", defaults = json_object())
	    != 0) {
		json_decref(doc);
		return IDEM_ERR_NOMEM;
	}
	if (svc->mw == NULL)
		return idem_response_json(res, 200, doc);
	idem_format_iso_duration(cfg->lifetime, lifetime, sizeof(lifetime));
	idem = json_pack("{s:s, s:s, s:b, s:s, s:s, s:s, s:i}",
	    "header", "Idempotency-Key",
	    "key-format", idem_key_format_names[cfg->key_format],
	    "required", cfg->required,
	    "lifetime", lifetime,
	    "scope", idem_scope_names[cfg->scope],
	    "replayed-header", IDEM_REPLAYED_HEADER,
	    "conflict-status", (int)cfg->conflict_status);
	/* each *_set_new takes its value, even when it fails: after the
	 * first one only doc is ours to free */
	if (idem == NULL ||
	    json_object_set_new(doc, "idempotency", idem) != 0 ||
	    json_object_set_new(defaults, "idempotency-key-lifetime",
	    json_string(lifetime)) != 0 ||
	    json_object_set_new(idem, "routes", routes = json_array()) != 0 ||
	    (cfg->scope == IDEM_SCOPE_HEADER &&
	    json_object_set_new(idem, "scope-header",
	    json_string(cfg->scope_header)) != 0)) {
		json_decref(doc);
		return IDEM_ERR_NOMEM;
	}
	for (i = 0; i < idem_router_count(svc->router); i++) {
		const idem_route *rt = idem_router_at(svc->router, i);
		if (strcmp(rt->owner, IDEM_BUILTIN_OWNER) == 0)
			continue;
		if (json_array_append_new(routes, json_pack("{s:s, s:s, s:s}",
		    "method", rt->method, "path", rt->tmpl, "policy",
		    policy_names[idem_route_policy(cfg, rt)])) != 0) {
			json_decref(doc);
			return IDEM_ERR_NOMEM;
		}
	}
	return idem_response_json(res, 200, doc);
}

/*
 * Fills the store's part of *info: the memory store's counts (this
 * worker's own, read on every scrape), and the records of unknown outcome
 * of either store.  The MySQL store's are the whole table's, which every
 * instance shares: a scan, read again only when the last read is
 * IDEM_STORE_COUNTS_HOLD_MS old (the age of the oldest then grows with
 * the time since).  A failed read leaves the gauges out.
 */
static void
store_counts(idem_service *svc, idem_metrics_store_info *info)
{
	idem_store *store = idem_middleware_store(svc->mw);
	int memory = svc->cfg->store == IDEM_STORE_MEMORY;
	uint64_t now;

	info->name = idem_store_name(store);
	pthread_mutex_lock(&svc->counts_lock);
	now = idem_now_ms();
	if (memory || svc->counts_at == 0 ||
	    now - svc->counts_at >= IDEM_STORE_COUNTS_HOLD_MS) {
		svc->counts_ok = idem_store_stats_get(store, &svc->counts) ==
		    IDEM_OK;
		/* after the read: a slow one is not read again at once */
		svc->counts_at = idem_now_ms();
		now = svc->counts_at;
	}
	if (memory && svc->counts_ok) {
		info->memory = 1;
		info->entries = svc->counts.entries;
		info->in_flight = svc->counts.in_flight;
		info->evictions = svc->counts.evictions;
	}
	if (svc->counts_ok) {
		info->has_unknown = 1;
		info->unknown = svc->counts.unknown;
		info->unknown_age_ms = svc->counts.unknown == 0 ? 0 :
		    svc->counts.unknown_age_ms + (now - svc->counts_at);
	}
	pthread_mutex_unlock(&svc->counts_lock);
}

/* GET [metrics] path: the exposition text, for allowed addresses only. */
static idem_err
metrics_handler(const idem_request *req, idem_response *res, void *data)
{
	idem_service *svc = data;
	const char *addr = idem_request_env(req, "REMOTE_ADDR");
	idem_metrics_store_info info;
	char *text, detail[160];
	size_t len;
	idem_err err;

	if (!idem_cidr_match(svc->cfg->metrics_allow,
	    svc->cfg->nmetrics_allow, addr)) {
		snprintf(detail, sizeof(detail), "the client address %.64s is "
		    "not in [metrics] allow", addr != NULL ? addr : "(none)");
		idem_log(req, IDEM_LOG_WARN, "metrics refused: %s", detail);
		return idem_response_problem(res, 403, "METRICS_FORBIDDEN",
		    detail);
	}
	memset(&info, 0, sizeof(info));
	if (svc->mw != NULL)
		store_counts(svc, &info);
	if ((text = idem_metrics_render(svc->metrics, &info, &len)) == NULL)
		return IDEM_ERR_NOMEM;
	err = idem_response_header(res, "Content-Type",
	    "text/plain; version=0.0.4; charset=utf-8");
	if (err == IDEM_OK)
		err = idem_response_header(res, "Cache-Control", "no-store");
	if (err == IDEM_OK)
		err = idem_response_write(res, text, len);
	free(text);
	return err;
}

/* Adds one built-in route, naming the config key when a path is taken. */
static idem_err
add(idem_service *svc, const char *path, const char *key,
    idem_handler_fn fn)
{
	idem_err err = idem_router_add(svc->router, "GET", path,
	    IDEM_POLICY_OFF, fn, svc, IDEM_BUILTIN_OWNER);

	if (err != IDEM_OK)
		idem_log(NULL, IDEM_LOG_ERROR, "%s: %s = %s: %s",
		    svc->cfg->path, key, path, idem_strerror(err));
	return err;
}

idem_err
idem_builtin_check(const idem_service *svc)
{
	const idem_router *r = svc->router;
	idem_err err = IDEM_OK;
	size_t i, j;

	for (i = 0; i < idem_router_count(r); i++) {
		const idem_route *b = idem_router_at(r, i);
		if (strcmp(b->owner, IDEM_BUILTIN_OWNER) != 0)
			continue;
		for (j = 0; j < idem_router_count(r); j++) {
			const idem_route *p = idem_router_at(r, j);
			if (strcmp(p->owner, IDEM_BUILTIN_OWNER) == 0 ||
			    !idem_route_covers(p, b))
				continue;
			idem_log(NULL, IDEM_LOG_ERROR, "%s: the built-in route GET "
			    "%s would hide %s %s of plugin %s for that path: "
			    "move it with [server] policy-path or [metrics] "
			    "path", svc->cfg->path, b->tmpl, p->method, p->tmpl,
			    p->owner);
			err = IDEM_ERR_CONFIG;
		}
	}
	return err;
}

idem_err
idem_builtin_routes(idem_service *svc)
{
	idem_err err = IDEM_OK;

	if (svc->cfg->policy_path != NULL)
		err = add(svc, svc->cfg->policy_path, "[server] policy-path",
		    policy_handler);
	if (err == IDEM_OK && svc->cfg->metrics_enabled)
		err = add(svc, svc->cfg->metrics_path, "[metrics] path",
		    metrics_handler);
	return err;
}
