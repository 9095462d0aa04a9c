/*
 * idem_service.c - one request through the service: its request id, its
 * body's limit, its route, the idempotency protocol (or none), its
 * handler; and what serves them (the store, the plugins, the built-in
 * routes).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <unistd.h>

#include "idem_builtin.h"
#include "idem_health.h"
#include "idem_log.h"
#include "idem_store_open.h"
#include "idem_metrics.h"
#include "idem_service.h"
#include "idem_slow.h"

/* The most of an unwanted body that is read and thrown away, so the web
 * server sees the request consumed; beyond it the connection is closed. */
#define DRAIN_LIMIT (64ULL << 20)

/* Records deleted per purge statement. */
#define PURGE_BATCH 1000

/* Refuses a max-response that the store cannot hold (its body column, or
 * what one statement can carry), so that a committable answer under
 * max-response is always stored whole.  Returns IDEM_OK or
 * IDEM_ERR_CONFIG (logged). */
static idem_err
check_limits(const idem_config *cfg, const idem_store *store)
{
	const idem_store_limits *lim = idem_store_get_limits(store);
	uint64_t most = lim->body;

	if (lim->total > 0 && (most == 0 || lim->total < most))
		most = lim->total;
	if (most == 0 || cfg->idem.max_response <= most)
		return IDEM_OK;
	idem_log(NULL, IDEM_LOG_ERROR, "%s: [idempotency] max-response = %llu "
	    "is more than the %s store can hold in one answer (%llu bytes: %s"
	    "): lower it%s", cfg->path, (unsigned long long)cfg->idem.max_response,
	    idem_store_name(store), (unsigned long long)most,
	    lim->total == most ?
	    "what one statement can carry, the server's max_allowed_packet "
	    "less 4 KiB" : "the size of its body column", lim->total == most ?
	    ", or raise max_allowed_packet" : "");
	return IDEM_ERR_CONFIG;
}

/* Opens the configured store and the middleware over it. */
static idem_err
open_middleware(idem_service *svc)
{
	idem_store *store = NULL;
	idem_err err;

	if ((err = idem_store_open(svc->cfg, 0, &store)) != IDEM_OK)
		return err;
	if ((err = check_limits(svc->cfg, store)) != IDEM_OK) {
		idem_store_close(store);
		return err;
	}
	/* the workers open it set aside too, without trying */
	if (idem_store_is_aside(store))
		svc->cfg->store_aside = 1;
	return idem_middleware_new(svc->cfg, store,
	    idem_router_min_lease(svc->router, svc->cfg), &svc->mw);
}

/* A serving service's watches: readiness and slow handlers, each when
 * configured. */
static idem_err
open_watches(idem_service *svc)
{
	idem_err err = IDEM_OK;
	size_t i;

	if (svc->cfg->server.ready_path != NULL)
		err = idem_health_new(svc->mw != NULL ?
		    idem_middleware_store(svc->mw) : NULL, &svc->health);
	if (err == IDEM_OK && svc->cfg->server.slow_request > 0)
		err = idem_slow_new(svc->cfg->server.slow_request, svc->metrics,
		    svc->slot, &svc->slow);
	for (i = 0; err == IDEM_OK && i < idem_router_count(svc->router); i++)
		idem_router_at(svc->router, i)->slow = svc->slow;
	return err;
}

/* Gives the [route METHOD PATH] sections to the routes the plugins
 * registered (their names are judged only when every plugin loaded).
 * Returns IDEM_OK or IDEM_ERR_CONFIG (logged). */
static idem_err
apply_sections(idem_service *svc)
{
	int judge = svc->plugins != NULL && !svc->plugins->incomplete;

	if (!judge && svc->cfg->nroutes > 0)
		idem_log(NULL, IDEM_LOG_WARN, "%s: [route ...] sections are not "
		    "matched to routes: a plugin did not load", svc->cfg->path);
	return idem_router_apply_sections(svc->router, svc->cfg,
	    IDEM_BUILTIN_OWNER, judge);
}

/* Keeps the first error: *err unless it is IDEM_OK, else e. */
static void
keep(idem_err *err, idem_err e)
{
	if (*err == IDEM_OK)
		*err = e;
}

/* Builds a service as idem_service_new, or as the master's check when
 * check (and then deploys when deploy); all: --check, every stage run
 * that can run, even after a failed one. */
static idem_err
build(idem_config *cfg, const char *plugin_dir, int check, int deploy,
    int all, idem_service **out)
{
	idem_service *svc = calloc(1, sizeof(*svc));
	idem_err err;

	if (svc == NULL) {
		idem_config_free(cfg);
		return IDEM_ERR_NOMEM;
	}
	svc->cfg = cfg;
	svc->listen_fd = -1;
	pthread_mutex_init(&svc->counts_lock, NULL);
	if ((svc->router = idem_router_new()) == NULL) {
		idem_service_free(svc);
		return IDEM_ERR_NOMEM;
	}
	err = idem_builtin_routes(svc);
	if (err == IDEM_OK && cfg->metrics.enabled) {
		err = idem_metrics_new(&svc->metrics);
		svc->own_metrics = 1;
	}
	if (all && err == IDEM_OK) {
		/* --check: every stage that can run does, each problem
		 * logged; the first error is the answer */
		err = cfg->errors > 0 ? IDEM_ERR_CONFIG : IDEM_OK;
		keep(&err, idem_plugins_load(cfg, svc->router, plugin_dir,
		    idem_store_db_maker(cfg), 1, 1,
		    &svc->plugins));
		keep(&err, apply_sections(svc));
		keep(&err, idem_builtin_check(svc));
		if (cfg->idem.enabled && cfg->store_errors == 0)
			keep(&err, open_middleware(svc));
		else if (cfg->idem.enabled)
			/* the section of the store chosen, which has one */
			idem_log(NULL, IDEM_LOG_WARN, "%s: the store is not "
			    "checked: fix the problems of [idempotency]%s%s%s "
			    "above first", cfg->path, cfg->idem.store !=
			    IDEM_STORE_MEMORY ? " and [" : "", cfg->idem.store
			    != IDEM_STORE_MEMORY ? idem_store_names[
			    cfg->idem.store] : "", cfg->idem.store !=
			    IDEM_STORE_MEMORY ? "]" : "");
		if (err != IDEM_OK) {
			idem_service_free(svc);
			return err;
		}
	}
	if (err == IDEM_OK && !all)
		err = idem_plugins_load(cfg, svc->router, plugin_dir,
		    idem_store_db_maker(cfg), check, 0, &svc->plugins);
	if (err == IDEM_OK && !all)
		err = apply_sections(svc);
	if (err == IDEM_OK && !all)
		err = idem_builtin_check(svc);
	if (err == IDEM_OK && !all && cfg->idem.enabled)
		err = open_middleware(svc);
	/* a deploy needs the database: it runs when the master, waiting
	 * for it, checks again */
	if (err == IDEM_OK && deploy && !cfg->store_aside)
		err = idem_plugins_deploy(svc->plugins, svc->cfg, svc->router);
	if (err == IDEM_OK && !check)
		err = open_watches(svc);
	if (err != IDEM_OK) {
		idem_service_free(svc);
		return err;
	}
	idem_service_set_metrics(svc, svc->metrics, 0);
	*out = svc;
	return IDEM_OK;
}

idem_err
idem_service_new(idem_config *cfg, const char *plugin_dir, idem_service **out)
{
	return build(cfg, plugin_dir, 0, 0, 0, out);
}

idem_err
idem_service_check(idem_config *cfg, const char *plugin_dir, int deploy,
    idem_service **out)
{
	return build(cfg, plugin_dir, 1, deploy, 0, out);
}

idem_err
idem_service_check_all(idem_config *cfg, const char *plugin_dir,
    idem_service **out)
{
	return build(cfg, plugin_dir, 1, 0, 1, out);
}

void
idem_service_set_metrics(idem_service *svc, idem_metrics *m, unsigned slot)
{
	size_t i;

	if (svc->metrics == NULL || m == NULL)
		return;
	if (svc->own_metrics && m != svc->metrics) {
		idem_metrics_free(svc->metrics);
		svc->own_metrics = 0;
	}
	svc->metrics = m;
	svc->slot = slot;
	idem_metrics_worker_start(m, slot, (long)getpid(), svc->cfg->server.threads);
	if (svc->slow != NULL)
		idem_slow_set_metrics(svc->slow, m, slot);
	for (i = 0; i < idem_router_count(svc->router); i++) {
		idem_route *rt = idem_router_at(svc->router, i);
		rt->metrics = m;
		rt->metrics_row = idem_metrics_route(m, rt->method, rt->tmpl,
		    svc->mw != NULL &&
		    idem_route_policy(svc->cfg, rt) != IDEM_POLICY_OFF);
		if (rt->metrics_row == 0)
			idem_log(NULL, IDEM_LOG_WARN, "metrics: more than %d routes; "
			    "%s %s is counted as route=\"unmatched\"",
			    IDEM_METRICS_ROUTES - 1, rt->method, rt->tmpl);
	}
	if (svc->mw != NULL)
		idem_middleware_set_metrics(svc->mw, m);
}

unsigned long
idem_service_purge(idem_service *svc)
{
	unsigned long total = 0;
	idem_err err;

	if (svc->mw == NULL || idem_store_is_aside(idem_middleware_store(svc->mw)))
		return 0;
	err = idem_store_purge_all(idem_middleware_store(svc->mw), PURGE_BATCH,
	    &total);
	if (err != IDEM_OK)
		idem_log(NULL, IDEM_LOG_ERROR, "purging expired records: %s",
		    idem_strerror(err));
	if (total > 0)
		idem_log(NULL, IDEM_LOG_DEBUG, "purged %lu expired record(s)",
		    total);
	return total;
}

idem_config *
idem_service_release_config(idem_service *svc)
{
	idem_config *cfg = svc->cfg;

	/* the middleware and plugins borrow it: stop them first */
	idem_health_free(svc->health);
	svc->health = NULL;
	idem_slow_free(svc->slow);
	svc->slow = NULL;
	idem_middleware_free(svc->mw);
	svc->mw = NULL;
	idem_plugins_free(svc->plugins);
	svc->plugins = NULL;
	svc->cfg = NULL;
	/* only the master's own check may set the store aside; a worker
	 * follows store_aside, and one that cannot reach the database then
	 * fails its start as before */
	cfg->store_may_wait = 0;
	return cfg;
}

void
idem_service_free(idem_service *svc)
{
	if (svc == NULL)
		return;
	idem_health_free(svc->health);
	idem_slow_free(svc->slow);
	idem_middleware_free(svc->mw);
	idem_plugins_free(svc->plugins);
	idem_router_free(svc->router);
	idem_config_free(svc->cfg);
	if (svc->own_metrics)
		idem_metrics_free(svc->metrics);
	pthread_mutex_destroy(&svc->counts_lock);
	free(svc);
}

/* Runs the route's handler; a failure becomes a 500 problem.  Returns the
 * handler's result. */
static idem_err
run_handler(idem_request *req, idem_response *res)
{
	const idem_route *rt = req->route;
	uint64_t t0 = rt->metrics != NULL ? idem_metrics_now_ns() : 0;
	idem_slow_run run;
	idem_err err;

	idem_slow_begin(rt->slow, &run, req);
	err = rt->handler(req, res, rt->data);
	idem_slow_end(rt->slow, &run);
	if (rt->metrics != NULL)
		idem_metrics_handler(rt->metrics, rt->metrics_row,
		    idem_metrics_now_ns() - t0);
	if (err == IDEM_ERR_OUTCOME_UNKNOWN && req->exec != NULL)
		/* the middleware keeps the record so, and answers */
		return err;
	if (err == IDEM_ERR_OUTCOME_UNKNOWN) {
		idem_log(req, IDEM_LOG_ERROR, "handler %s %s (plugin %s) could "
		    "not tell whether its side effect happened, and the request "
		    "has no Idempotency-Key to learn it later", rt->method,
		    rt->tmpl, rt->owner);
		idem_response_refuse(res, 500, "OUTCOME_UNKNOWN", "whether the "
		    "request took effect is unknown; send an Idempotency-Key to "
		    "retry it safely", 0);
		return err;
	}
	if (err != IDEM_OK) {
		idem_log(req, IDEM_LOG_ERROR, "handler %s %s (plugin %s) failed: "
		    "%s", rt->method, rt->tmpl, rt->owner, idem_strerror(err));
		idem_response_refuse(res, 500, "HANDLER_FAILED", "the handler "
		    "failed; the request may be retried", 0);
	}
	return err;
}

/* A param for a log line, "-" when absent. */
static const char *
env_or_dash(const idem_request *req, const char *name)
{
	const char *v = idem_request_env(req, name);

	return v != NULL ? v : "-";
}

/* idem_service_handle without the counting. */
static void
handle(idem_service *svc, char *const *envp, idem_read_fn rd, void *rdctx,
    idem_request *req, idem_response *res)
{
	idem_problem pb;
	char allow[256];
	idem_err err;

	idem_request_limits lim = { svc->cfg->server.mount, svc->cfg->server.max_headers,
	    svc->cfg->server.max_header_size, svc->cfg->server.max_params_size,
	    svc->cfg->server.path_from_uri };

	err = idem_request_parse(req, envp, &lim, &pb);
	if (svc->cfg->server.log_level == IDEM_LOG_DEBUG)
		idem_log(req, IDEM_LOG_DEBUG, "SCRIPT_NAME=%s PATH_INFO=%s "
		    "REQUEST_URI=%s -> path %s", env_or_dash(req, "SCRIPT_NAME"),
		    env_or_dash(req, "PATH_INFO"), env_or_dash(req, "REQUEST_URI"),
		    req->path != NULL ? req->path : "-");
	if (err != IDEM_OK) {
		idem_log(req, IDEM_LOG_WARN, "refused: %s", pb.detail);
		idem_response_refuse(res, pb.status, pb.code, pb.detail,
		    0);
		goto drain;
	}
	err = idem_router_match(svc->router, req, allow, sizeof(allow));
	if (err == IDEM_ERR_NOT_FOUND) {
		idem_problem_set(&pb, 404, "ROUTE_NOT_FOUND",
		    "no route for %s", req->path);
		idem_response_refuse(res, pb.status, pb.code, pb.detail,
		    0);
		goto drain;
	}
	if (err != IDEM_OK) {
		idem_problem_set(&pb, 405, "METHOD_NOT_ALLOWED",
		    "%s is not allowed on %s", req->method, req->path);
		idem_response_refuse(res, pb.status, pb.code, pb.detail,
		    0);
		if (idem_response_header(res, "Allow", allow) != IDEM_OK)
			res->status = 500;
		goto drain;
	}
	res->error_fn = req->route->error_fn;
	res->error_data = req->route->error_data;
	err = idem_request_read_body(req, svc->cfg->server.max_body, rd, rdctx, &pb);
	if (err != IDEM_OK) {
		idem_log(req, IDEM_LOG_WARN, "refused: %s", pb.detail);
		idem_response_refuse(res, pb.status, pb.code, pb.detail,
		    0);
		goto drain;
	}
	if (svc->mw != NULL &&
	    idem_middleware_policy(svc->mw, req) != IDEM_POLICY_OFF)
		idem_middleware_handle(svc->mw, req, res, run_handler);
	else if (svc->mw != NULL)
		idem_middleware_plain(svc->mw, req, res, run_handler);
	else
		run_handler(req, res);
	return;
drain:
	if (req->body == NULL)
		idem_request_drain_body(req, DRAIN_LIMIT, rd, rdctx);
}

void
idem_service_handle(idem_service *svc, char *const *envp, idem_read_fn rd,
    void *rdctx, idem_request *req, idem_response *res)
{
	if (svc->metrics == NULL) {
		handle(svc, envp, rd, rdctx, req, res);
		return;
	}
	idem_metrics_in_flight(svc->metrics, svc->slot, 1);
	handle(svc, envp, rd, rdctx, req, res);
	idem_metrics_request(svc->metrics, req->route != NULL ?
	    req->route->metrics_row : 0, res->status);
	idem_metrics_in_flight(svc->metrics, svc->slot, -1);
}
