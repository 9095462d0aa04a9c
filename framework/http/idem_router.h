/*
 * idem_router.h - method plus path template to handler.
 *
 * Templates are split into segments; a segment "{name}" matches any one
 * non-empty path segment and binds it as a parameter.  When several routes
 * match a path, the one with a literal segment earliest wins
 * ("/a/new" before "/a/{id}").
 */
#ifndef IDEM_ROUTER_H
#define IDEM_ROUTER_H

#include <stdatomic.h>
#include <stddef.h>
#include "idemfcgi.h"
#include "idem_config.h"
#include "idem_request.h"
#include "idem_key_policy.h"

typedef struct idem_route {
	char *method;                    /* owned */
	char *tmpl;                      /* owned: the template as given */
	char *segbuf;                    /* owned: segments, NUL-separated */
	const char *segs[IDEM_MAX_SEGMENTS]; /* into segbuf; "{x}" -> "x" */
	unsigned char is_param[IDEM_MAX_SEGMENTS];
	size_t nsegs;
	idem_policy policy;
	idem_handler_fn handler;
	idem_handler_fn reconcile;       /* NULL: none (idem_route_reconcile) */
	void *data;                      /* borrowed from the plugin */
	const char *owner;               /* borrowed: the plugin's name */
	struct idem_db *tx_db; /* borrowed: a transactional
	                                  * route's pool of the store's
	                                  * database (idem_route_add_tx,
	                                  * idem_store_tx.h), else NULL */
	struct idem_metrics *metrics;    /* borrowed: where it is counted,
	                                  * NULL: nowhere */
	unsigned metrics_row;            /* its row there */
	struct idem_slow *slow;          /* borrowed: the watch of its
	                                  * handlers ([server] slow-request),
	                                  * NULL: none */
	idem_route_conf conf;            /* owned: the policy its plugin set
	                                  * in code (idem_route_set) */
	const idem_route_conf *section;  /* borrowed from the config: its
	                                  * [route METHOD PATH] section's,
	                                  * which wins; NULL: none */
	char *summary;                   /* owned: idem_route_describe's, or
	                                  * NULL */
	json_t *request_schema;          /* owned references, or NULL */
	json_t *response_schema;
	/* its error format (idem_route_error_format), or all NULL: RFC 9457
	 * problems */
	idem_error_fn error_fn;
	void *error_data;                /* borrowed from the plugin */
	char *error_type;                /* owned: its media type */
	json_t *error_schema;            /* owned reference */
	int error_own;                   /* set for the route alone
	                                  * (idem_route_error_format): the
	                                  * plugin's format leaves it */
	atomic_int asked_downstream;     /* its handler asked for a
	                                  * downstream key in this process:
	                                  * it calls outside (DESIGN.md 2.7) */
} idem_route;

typedef struct idem_router idem_router;

/* An empty router; caller frees with idem_router_free. */
idem_router *idem_router_new(void);
void idem_router_free(idem_router *r);

/* How many routes r holds. */
size_t idem_router_count(const idem_router *r);
/* Route i (< idem_router_count), in the order added; borrowed from r until
 * the next idem_router_add. */
idem_route *idem_router_at(const idem_router *r, size_t i);
/* The named schemas of r's OpenAPI document (idem_app_schema): an
 * object, borrowed from r. */
json_t *idem_router_schemas(const idem_router *r);

/*
 * Adds a route (method and tmpl are copied; data and owner are borrowed).
 * Returns IDEM_OK, IDEM_ERR_INVALID for a malformed method or template
 * (not starting with '/', an empty or half-braced segment, a parameter name
 * used twice) or IDEM_ERR_EXISTS when the method and template shape are
 * already taken.
 */
idem_err idem_router_add(idem_router *r, const char *method, const char *tmpl,
    idem_policy policy, idem_handler_fn handler, void *data,
    const char *owner);

/* Whether route a matches every request route b matches (same method,
 * and each of a's segments a parameter or b's literal). */
int idem_route_covers(const idem_route *a, const idem_route *b);

/*
 * Finds the route for req->method and req->segs and fills req->route and
 * req->params; a HEAD without a HEAD route of its own gets the GET route.
 * Returns IDEM_OK; IDEM_ERR_NOT_FOUND when no template matches the path
 * (404); IDEM_ERR_INVALID when templates match but not the method (405),
 * with the allowed methods written to allow ("GET, HEAD, POST": HEAD
 * wherever GET is).
 */
idem_err idem_router_match(const idem_router *r, idem_request *req,
    char *allow, size_t allowlen);

/*
 * The policy of rt under cfg: its own, or for IDEM_POLICY_DEFAULT off on
 * the safe methods (GET, HEAD, OPTIONS, TRACE) and on every other method
 * (POST, PUT, PATCH, DELETE, ...) required or optional as cfg's required
 * says.
 */
idem_policy idem_route_policy(const idem_config *cfg,
    const struct idem_route *rt);

/* The policy of rt that sets key k: its [route] section's, else the one
 * its plugin set in code; NULL when neither does (the [idempotency]
 * value holds).  Borrowed. */
const idem_route_conf *idem_route_conf_for(const idem_route *rt,
    idem_route_key k);

/* The key policy of rt under cfg into *out: each value its own (section,
 * then code), else [idempotency]'s; commit_status is borrowed from rt or
 * cfg, reconcile says whether rt has a hook. */
void idem_route_key_policy(const idem_config *cfg, const idem_route *rt,
    idem_key_policy *out);

/* Whether rt's handler calls other services (DESIGN.md 2.7): its
 * calls-outside, as its [route] section or its plugin's code sets it;
 * unset, whether its handler asked for a downstream key in this process
 * (idem_route_asked_downstream).  1 or 0. */
int idem_route_calls_outside(const idem_route *rt);

/* Notes that rt's handler asked for a downstream key.  Returns 1 the
 * first time in this process, else 0. */
int idem_route_asked_downstream(const idem_route *rt);

/* The key format of rt under cfg. */
idem_key_format idem_route_key_format(const idem_config *cfg,
    const idem_route *rt);

/*
 * After every plugin registered its routes: gives each [route METHOD
 * PATH] section of cfg (borrowed: it must outlive r) to the route of that
 * method and template, which takes its policy from it.  Refuses, with the
 * file and line: a section naming no route (with the closest one) when
 * judge is set (not when a plugin could not be loaded: its routes are
 * unknown), a built-in route (owner builtin), and inflight-ttl or
 * inflight-wait on a transactional route (its pool's, from
 * [idempotency]).  Returns IDEM_OK or IDEM_ERR_CONFIG.
 */
idem_err idem_router_apply_sections(idem_router *r, idem_config *cfg,
    const char *builtin, int judge);

/* The shortest inflight-ttl of r's routes that are not off under cfg, or
 * cfg's own when shorter or there is none: how often leases are
 * renewed. */
uint64_t idem_router_min_lease(const idem_router *r, const idem_config *cfg);

#endif
