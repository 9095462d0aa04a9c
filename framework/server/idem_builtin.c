/*
 * idem_builtin.c - the policy, metrics, status, ping and ready routes.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "idem_builtin.h"
#include "idem_cidr.h"
#include "idem_config_value.h"
#include "idem_health.h"
#include "idem_key_status.h"
#include "idem_log.h"
#include "idem_metrics.h"
#include "idem_openapi.h"
#include "idem_sockq.h"
#include "idem_time.h"

/* A list of strings as a JSON array, or NULL when out of memory. */
static json_t *
strings_json(char *const *list, size_t n)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; a != NULL && i < n; i++)
		if (json_array_append_new(a, json_string(list[i])) != 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

/* One route of the policy route: its method, template and effective
 * policy, and for a route that is not off its key policy (each value the
 * route's own or [idempotency]'s) and fingerprint selection.  Returns a
 * new object, or NULL when out of memory. */
static json_t *
route_json(const idem_config *cfg, const idem_route *rt)
{
	idem_policy pol = idem_route_policy(cfg, rt);
	const idem_route_conf *ign = idem_route_conf_for(rt, IDEM_RK_FP_IGNORE);
	const idem_route_conf *hdr = idem_route_conf_for(rt, IDEM_RK_FP_HEADERS);
	char life[40], ttl[40], wait[40], statuses[2048];
	idem_key_policy kp;

	if (pol == IDEM_POLICY_OFF || !cfg->idem.enabled)
		return json_pack("{s:s, s:s, s:s}", "method", rt->method, "path",
		    rt->tmpl, "policy", idem_policy_names[IDEM_POLICY_OFF]);
	idem_route_key_policy(cfg, rt, &kp);
	idem_format_iso_duration(kp.lifetime_ms, life, sizeof(life));
	idem_format_iso_duration(kp.lease_ms, ttl, sizeof(ttl));
	idem_format_iso_duration(kp.wait_ms, wait, sizeof(wait));
	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:b, s:b, "
	    "s:o, s:o}", "method", rt->method, "path", rt->tmpl, "policy",
	    idem_policy_names[pol], "key-format",
	    idem_key_format_names[idem_route_key_format(cfg, rt)],
	    "lifetime", life, "inflight-ttl", ttl, "inflight-wait", wait,
	    "commit-statuses", idem_statuses_text(kp.commit_status, statuses,
	    sizeof(statuses)), "transactional", rt->tx_db != NULL,
	    "calls-outside", idem_route_calls_outside(rt),
	    "fingerprint-ignore", ign != NULL ? strings_json(ign->fp_ignore,
	    ign->nfp_ignore) : json_array(),
	    "fingerprint-headers", hdr != NULL ? strings_json(hdr->fp_headers,
	    hdr->nfp_headers) : json_array());
}

/* The shortest lifetime of any keyed route of svc (the [idempotency] one
 * when none is shorter) as an ISO-8601 duration into buf: the time for
 * which no key of the service is forgotten.  Returns buf. */
static char *
least_lifetime(const idem_service *svc, char *buf, size_t size)
{
	uint64_t least = svc->cfg->idem.lifetime;
	idem_key_policy kp;
	size_t i;

	for (i = 0; i < idem_router_count(svc->router); i++) {
		const idem_route *rt = idem_router_at(svc->router, i);
		if (idem_route_policy(svc->cfg, rt) == IDEM_POLICY_OFF)
			continue;
		idem_route_key_policy(svc->cfg, rt, &kp);
		if (kp.lifetime_ms < least)
			least = kp.lifetime_ms;
	}
	return idem_format_iso_duration(least, buf, size);
}

/* GET policy-path: what a client needs to know to send keys right. */
static idem_err
policy_handler(const idem_request *req, idem_response *res, void *data)
{
	const idem_service *svc = data;
	const idem_config *cfg = svc->cfg;
	json_t *doc, *defaults, *idem, *routes;
	char lifetime[40], least[40];
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
	idem_format_iso_duration(cfg->idem.lifetime, lifetime, sizeof(lifetime));
	idem = json_pack("{s:s, s:s, s:b, s:s, s:s, s:s, s:i}",
	    "header", "Idempotency-Key",
	    "key-format", idem_key_format_names[cfg->idem.key_format],
	    "required", cfg->idem.required,
	    "lifetime", lifetime,
	    "scope", idem_scope_names[cfg->idem.scope],
	    "replayed-header", IDEM_REPLAYED_HEADER,
	    "conflict-status", (int)cfg->idem.conflict_status);
	/* each *_set_new takes its value, even when it fails: after the
	 * first one only doc is ours to free */
	if (idem == NULL ||
	    json_object_set_new(doc, "idempotency", idem) != 0 ||
	    json_object_set_new(doc, "idempotency-key-lifetime",
	    json_string(least_lifetime(svc, least, sizeof(least)))) != 0 ||
	    json_object_set_new(defaults, "idempotency-key-lifetime",
	    json_string(least)) != 0 ||
	    json_object_set_new(idem, "routes", routes = json_array()) != 0 ||
	    (cfg->idem.scope == IDEM_SCOPE_HEADER &&
	    json_object_set_new(idem, "scope-header",
	    json_string(cfg->idem.scope_header)) != 0)) {
		json_decref(doc);
		return IDEM_ERR_NOMEM;
	}
	for (i = 0; i < idem_router_count(svc->router); i++) {
		const idem_route *rt = idem_router_at(svc->router, i);
		if (strcmp(rt->owner, IDEM_BUILTIN_OWNER) == 0)
			continue;
		if (json_array_append_new(routes, route_json(cfg, rt)) != 0) {
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
	int memory = svc->cfg->idem.store == IDEM_STORE_MEMORY;
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
		info->tombstone_evictions = svc->counts.tombstone_evictions;
	}
	if (svc->counts_ok) {
		info->has_unknown = 1;
		info->unknown = svc->counts.unknown;
		info->tombstones = svc->counts.tombstones;
		info->unknown_age_ms = svc->counts.unknown == 0 ? 0 :
		    svc->counts.unknown_age_ms + (now - svc->counts_at);
	}
	pthread_mutex_unlock(&svc->counts_lock);
}

/*
 * Whether the client of req may ask the built-in route what: its address
 * is in [metrics] allow.  When not, res holds the 403 problem (logged) and
 * *err its result.  Returns 1 or 0.
 */
static int
allowed(const idem_service *svc, const idem_request *req, idem_response *res,
    const char *what, idem_err *err)
{
	const char *addr = idem_request_env(req, "REMOTE_ADDR");
	char detail[160];

	if (idem_cidr_match(svc->cfg->metrics.allow, svc->cfg->metrics.nallow,
	    addr))
		return 1;
	snprintf(detail, sizeof(detail), "the client address %.64s is not in "
	    "[metrics] allow", addr != NULL ? addr : "(none)");
	idem_log(req, IDEM_LOG_WARN, "%s refused: %s", what, detail);
	*err = idem_response_problem(res, 403, "METRICS_FORBIDDEN", detail);
	return 0;
}

/* The listening socket's accept queue into info, when the kernel tells
 * it. */
static void
listen_queue(const idem_service *svc, idem_metrics_store_info *info)
{
	info->has_listen_queue = idem_sockq_get(svc->listen_fd,
	    &info->listen_queue, &info->listen_backlog) == IDEM_OK;
}

/* GET [metrics] path: the exposition text, for allowed addresses only. */
static idem_err
metrics_handler(const idem_request *req, idem_response *res, void *data)
{
	idem_service *svc = data;
	idem_metrics_store_info info;
	char *text;
	size_t len;
	idem_err err;

	if (!allowed(svc, req, res, "metrics", &err))
		return err;
	memset(&info, 0, sizeof(info));
	if (svc->mw != NULL)
		store_counts(svc, &info);
	listen_queue(svc, &info);
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

/* Answers doc (taken) with status, not to be cached. */
static idem_err
answer(idem_response *res, int status, json_t *doc)
{
	idem_err err;

	if (doc == NULL)
		return IDEM_ERR_NOMEM;
	err = idem_response_header(res, "Cache-Control", "no-store");
	if (err != IDEM_OK) {
		json_decref(doc);
		return err;
	}
	return idem_response_json(res, status, doc);
}

/* GET [server] ping-path: 200 while the worker answers at all; the store
 * is not asked. */
static idem_err
ping_handler(const idem_request *req, idem_response *res, void *data)
{
	idem_err err;

	if (!allowed(data, req, res, "ping", &err))
		return err;
	return answer(res, 200, json_pack("{s:s}", "status", "alive"));
}

/* GET [server] ready-path: 200 while the store answers (the cached check
 * of idem_health.h), else a 503 problem. */
static idem_err
ready_handler(const idem_request *req, idem_response *res, void *data)
{
	const idem_service *svc = data;
	char why[200];
	idem_err err;

	if (!allowed(svc, req, res, "ready", &err))
		return err;
	if (svc->health != NULL &&
	    idem_health_ready(svc->health, why, sizeof(why)) != IDEM_OK) {
		idem_log(req, IDEM_LOG_INFO, "not ready: %s", why);
		err = idem_response_header(res, "Cache-Control", "no-store");
		if (err == IDEM_OK)
			err = idem_response_header(res, "Retry-After", "1");
		return err != IDEM_OK ? err : idem_response_problem(res, 503,
		    "IDEMPOTENCY_STORE_UNAVAILABLE", why);
	}
	return answer(res, 200, json_pack("{s:s, s:s}", "status", "ready",
	    "store", svc->mw != NULL ?
	    idem_store_name(idem_middleware_store(svc->mw)) : "none"));
}

/* One worker of st as the status route shows it, or NULL when out of
 * memory. */
static json_t *
worker_json(const idem_metrics_worker *w)
{
	char started[40];

	idem_mono_to_utc(w->started_ms, started, sizeof(started));
	return json_pack("{s:I, s:I, s:s, s:I, s:I, s:I, s:I, s:I, s:I}",
	    "slot", (json_int_t)w->slot, "pid", (json_int_t)w->pid,
	    "start-time", started, "threads", (json_int_t)w->threads,
	    "active-threads", (json_int_t)w->active,
	    "idle-threads", (json_int_t)(w->threads > w->active ?
	    w->threads - w->active : 0),
	    "accepted-requests", (json_int_t)w->accepted,
	    "max-active-threads", (json_int_t)w->max_active,
	    "slow-requests", (json_int_t)w->slow);
}

/* GET [metrics] status-path: php-fpm's status fields that apply, as
 * JSON, for allowed addresses only. */
static idem_err
status_handler(const idem_request *req, idem_response *res, void *data)
{
	idem_service *svc = data;
	idem_metrics_store_info info;
	idem_metrics_status *st;
	json_t *doc, *workers;
	uint64_t threads = 0;
	char started[40];
	idem_err err;
	unsigned i;

	if (!allowed(svc, req, res, "status", &err))
		return err;
	if ((st = malloc(sizeof(*st))) == NULL)
		return IDEM_ERR_NOMEM;
	idem_metrics_status_get(svc->metrics, st);
	memset(&info, 0, sizeof(info));
	listen_queue(svc, &info);
	idem_mono_to_utc(st->start_ms, started, sizeof(started));
	for (i = 0; i < st->nworkers; i++)
		threads += st->workers[i].threads;
	doc = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:o, "
	    "s:o}",
	    "start-time", started,
	    "start-since", (json_int_t)((idem_now_ms() - st->start_ms) / 1000),
	    "accepted-requests", (json_int_t)st->accepted,
	    "active-threads", (json_int_t)st->active,
	    "idle-threads", (json_int_t)(threads > st->active ?
	    threads - st->active : 0),
	    "total-threads", (json_int_t)threads,
	    "max-active-threads", (json_int_t)st->max_active,
	    "slow-requests", (json_int_t)st->slow,
	    "listen-queue", info.has_listen_queue ?
	    json_integer((json_int_t)info.listen_queue) : json_null(),
	    "listen-queue-max", info.has_listen_queue ?
	    json_integer((json_int_t)info.listen_backlog) : json_null(),
	    "workers", workers = json_array());
	for (i = 0; doc != NULL && i < st->nworkers; i++)
		if (json_array_append_new(workers, worker_json(&st->workers[i]))
		    != 0) {
			json_decref(doc);
			doc = NULL;
		}
	free(st);
	return answer(res, 200, doc);
}

/* GET [server] openapi-path: the OpenAPI document of the routes, as
 * idemfcgi --openapi writes it. */
static idem_err
openapi_handler(const idem_request *req, idem_response *res, void *data)
{
	const idem_service *svc = data;
	json_t *doc = idem_openapi_document(svc->cfg, svc->router,
	    svc->mw != NULL);

	(void)req;
	if (doc == NULL)
		return IDEM_ERR_NOMEM;
	return idem_response_json(res, 200, doc);
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
			    "move it with [server] policy-path, ping-path, "
			    "ready-path, openapi-path, or [metrics] path, "
			    "status-path",
			    svc->cfg->path, b->tmpl, p->method, p->tmpl,
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

	char keys[1024];

	if (svc->cfg->server.policy_path != NULL)
		err = add(svc, svc->cfg->server.policy_path, "[server] policy-path",
		    policy_handler);
	if (err == IDEM_OK && idem_key_status_path(svc->cfg, keys,
	    sizeof(keys)) != NULL)
		err = add(svc, keys, "[server] policy-path",
		    idem_key_status_handler);
	if (err == IDEM_OK && svc->cfg->metrics.enabled)
		err = add(svc, svc->cfg->metrics.path, "[metrics] path",
		    metrics_handler);
	if (err == IDEM_OK && svc->cfg->metrics.enabled &&
	    svc->cfg->metrics.status_path != NULL)
		err = add(svc, svc->cfg->metrics.status_path, "[metrics] status-path",
		    status_handler);
	if (err == IDEM_OK && svc->cfg->server.ping_path != NULL)
		err = add(svc, svc->cfg->server.ping_path, "[server] ping-path",
		    ping_handler);
	if (err == IDEM_OK && svc->cfg->server.openapi_path != NULL)
		err = add(svc, svc->cfg->server.openapi_path, "[server] openapi-path",
		    openapi_handler);
	if (err == IDEM_OK && svc->cfg->server.ready_path != NULL)
		err = add(svc, svc->cfg->server.ready_path, "[server] ready-path",
		    ready_handler);
	return err;
}
