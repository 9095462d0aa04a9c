/*
 * idem_builtin.h - the routes idemfcgi answers itself, under the mount
 * like any plugin's:
 *
 *   GET [server] policy-path (default /idempotency): the advertised
 *       idempotency policy, for API clients.  Iceberg REST clients find
 *       "idempotency-key-lifetime" at the top level, as in GET /v1/config
 *       (CatalogConfig), and older readers under "defaults" (the shortest
 *       lifetime of the keyed routes); each route with its
 *       effective policy;
 *       it is absent when idempotency is disabled.
 *   GET policy-path/keys/{key} (with [idempotency] key-status): a key's
 *       state in the caller's scope (idem_key_status.h).
 *   GET [metrics] path (default /metrics, only with [metrics] enabled):
 *       the Prometheus text of the whole instance, for the addresses in
 *       [metrics] allow; anyone else gets 403.
 *   GET [metrics] status-path (none by default; only with [metrics]
 *       enabled): php-fpm's status fields that apply, as JSON.
 *   GET [server] openapi-path (none by default): the OpenAPI 3.1
 *       document of the plugins' routes (idem_openapi.h), for anyone.
 *   GET [server] ping-path (none by default): liveness, 200 without
 *       asking the store.
 *   GET [server] ready-path (none by default): readiness, 200 while the
 *       store answers (idem_health.h), else 503
 *       IDEMPOTENCY_STORE_UNAVAILABLE.
 * The last three answer the addresses in [metrics] allow too.
 *
 * All are registered before the plugins, so a plugin that claims the same
 * path fails at start-up with a message naming it.
 */
#ifndef IDEM_BUILTIN_H
#define IDEM_BUILTIN_H

#include "idem_service.h"

/* The owner name of built-in routes. */
#define IDEM_BUILTIN_OWNER "idemfcgi"

/* Registers the built-in routes of svc's config in svc->router.  Returns
 * IDEM_OK or the router's error (logged). */
idem_err idem_builtin_routes(idem_service *svc);

/*
 * After the plugins: refuses a built-in path that a plugin's template also
 * matches (policy-path = /accounts/7 beside /accounts/{id}), since the
 * literal path would silently win.  Returns IDEM_OK or IDEM_ERR_CONFIG
 * (logged).
 */
idem_err idem_builtin_check(const idem_service *svc);

#endif
