/*
 * idem_service.h - everything that answers a request, without the sockets:
 * the config, the router with the plugins' routes, and the steps every
 * request takes, in this order (idem_service_handle): its params parsed
 * within the limits (and its request id), its route matched, its body
 * read within max-body, then the idempotency middleware (a route with a
 * policy) or the plain path around the route's handler.
 *
 * idem_server (the FastCGI side) owns one service and calls
 * idem_service_handle from its worker threads; the tests call it directly.
 */
#ifndef IDEM_SERVICE_H
#define IDEM_SERVICE_H

#include <pthread.h>
#include <stdint.h>

#include "idem_config.h"
#include "idem_middleware.h"
#include "idem_plugin.h"
#include "idem_request.h"
#include "idem_router.h"

typedef struct idem_service {
	idem_config *cfg;        /* owned */
	idem_router *router;     /* owned */
	idem_plugins *plugins;   /* owned */
	idem_middleware *mw;     /* owned; NULL when idempotency is off */
	struct idem_metrics *metrics; /* NULL when [metrics] is off; shared
	                          * with the other workers (see
	                          * idem_service_set_metrics), else owned */
	int own_metrics;
	unsigned slot;           /* this worker's in-flight gauge slot */
	/* the store's counts as the metrics route last read them
	 * (idem_builtin.c): a shared store's are a scan of its table, read
	 * at most every IDEM_STORE_COUNTS_HOLD_MS */
	pthread_mutex_t counts_lock;
	uint64_t counts_at;      /* idem_now_ms of that read; 0: none yet */
	int counts_ok;           /* it succeeded */
	idem_store_stats counts;
	struct idem_health *health; /* owned; NULL without [server]
	                          * ready-path, and in the master's check */
	struct idem_slow *slow;  /* owned; NULL without [server]
	                          * slow-request, and in the master's check */
	int listen_fd;           /* the listening socket while it serves
	                          * (idem_server_run, for the status
	                          * route's listen queue); -1: none */
} idem_service;

/* How long the MySQL store's counts serve the metrics route before a
 * scrape reads them again, in ms. */
#define IDEM_STORE_COUNTS_HOLD_MS 30000

/*
 * Builds a service that serves requests (a worker's, or a test's) from
 * cfg (taken over, even on failure): loads the plugins and checks that
 * every config key was used.  plugin_dir is where bare plugin names are
 * looked up.  Returns IDEM_OK with *out (caller frees with
 * idem_service_free) or the error, already logged.
 */
idem_err idem_service_new(idem_config *cfg, const char *plugin_dir,
    idem_service **out);

/*
 * Builds the master's check of cfg, as idem_service_new but with
 * idem_app_is_check true in the plugins' setup; then, when deploy, runs
 * their deploy hooks (a start or a reload, not --check).  The service
 * never serves a request: the master frees it, keeping the config.  With
 * cfg->store_may_wait, a MySQL database that cannot be reached sets the
 * store aside: then cfg->store_aside is set and no deploy hook runs.
 */
idem_err idem_service_check(idem_config *cfg, const char *plugin_dir,
    int deploy, idem_service **out);

/*
 * --check: as idem_service_check without deploy, but cfg may have
 * problems already (cfg->errors, from idem_config_load_all), and every
 * stage that can run does, reporting its problems: the plugins (each
 * one, and the keys of their sections), the built-in routes, the store
 * (unless [idempotency] or [mysql] had problems).  Returns IDEM_OK with
 * *out, or the first error with every problem logged.
 */
idem_err idem_service_check_all(idem_config *cfg, const char *plugin_dir,
    idem_service **out);

/*
 * Deletes expired idempotency records in batches until a batch comes back
 * short.  Returns how many were deleted; logs a store error.
 */
unsigned long idem_service_purge(idem_service *svc);

/* Takes the config back out of svc (caller frees it; svc must then only be
 * freed), with store_may_wait cleared.  The master checks a config by
 * building a service, then keeps the config for its workers. */
idem_config *idem_service_release_config(idem_service *svc);

/*
 * Counts into m (borrowed: the master's region, shared by every worker;
 * must outlive svc) instead of the service's own, as worker slot, and
 * gives every route its row there (keyed when its policy is not off).
 * Does nothing when [metrics] is off.
 */
void idem_service_set_metrics(idem_service *svc, struct idem_metrics *m,
    unsigned slot);

/* Tears the plugins down and frees everything.  NULL is fine. */
void idem_service_free(idem_service *svc);

/*
 * Answers one request: parses envp (borrowed for the call), reads the body
 * with rd, routes and runs the handler.  Always leaves a complete response
 * in res (initialised by the caller); req is filled for the caller's log
 * and cleared by the caller with idem_request_clear.
 */
void idem_service_handle(idem_service *svc, char *const *envp,
    idem_read_fn rd, void *rdctx, idem_request *req, idem_response *res);

#endif
