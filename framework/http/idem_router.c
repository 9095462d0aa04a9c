/*
 * idem_router.c - matching requests to routes.
 */
#include "config.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "idem_config_keys.h"
#include "idem_log.h"
#include "idem_router.h"

struct idem_router {
	idem_route *routes;              /* owned */
	size_t nroutes;
	size_t cap;
	json_t *schemas;                 /* owned: the OpenAPI document's
	                                  * named schemas */
};

idem_router *
idem_router_new(void)
{
	idem_router *r = calloc(1, sizeof(idem_router));

	if (r != NULL && (r->schemas = json_object()) == NULL) {
		free(r);
		return NULL;
	}
	return r;
}

size_t
idem_router_count(const idem_router *r)
{
	return r->nroutes;
}

idem_route *
idem_router_at(const idem_router *r, size_t i)
{
	return &r->routes[i];
}

json_t *
idem_router_schemas(const idem_router *r)
{
	return r->schemas;
}

void
idem_router_free(idem_router *r)
{
	size_t i;

	if (r == NULL)
		return;
	for (i = 0; i < r->nroutes; i++) {
		free(r->routes[i].method);
		free(r->routes[i].tmpl);
		free(r->routes[i].segbuf);
		free(r->routes[i].summary);
		json_decref(r->routes[i].request_schema);
		json_decref(r->routes[i].response_schema);
		free(r->routes[i].error_type);
		json_decref(r->routes[i].error_schema);
		idem_route_conf_clear(&r->routes[i].conf);
	}
	free(r->routes);
	json_decref(r->schemas);
	free(r);
}

/* Splits tmpl into rt's segments.  Returns IDEM_OK or IDEM_ERR_INVALID. */
static idem_err
parse_template(idem_route *rt, const char *tmpl)
{
	char *p, *seg;
	size_t i, j;

	if (tmpl[0] != '/' || strlen(tmpl) > IDEM_MAX_PATH)
		return IDEM_ERR_INVALID;
	if ((rt->segbuf = strdup(tmpl + 1)) == NULL)
		return IDEM_ERR_NOMEM;
	rt->nsegs = 0;
	if (tmpl[1] == '\0')
		return IDEM_OK; /* "/" */
	for (p = rt->segbuf; p != NULL; ) {
		size_t len;

		seg = p;
		if ((p = strchr(p, '/')) != NULL)
			*p++ = '\0';
		len = strlen(seg);
		if (len == 0 || rt->nsegs == IDEM_MAX_SEGMENTS)
			return IDEM_ERR_INVALID;
		if (seg[0] == '{') {
			if (len < 3 || seg[len - 1] != '}')
				return IDEM_ERR_INVALID;
			seg[len - 1] = '\0';
			seg++;
			for (j = 0; seg[j] != '\0'; j++)
				if (!isalnum((unsigned char)seg[j]) && seg[j] != '_')
					return IDEM_ERR_INVALID;
			for (i = 0; i < rt->nsegs; i++)
				if (rt->is_param[i] && strcmp(rt->segs[i], seg) == 0)
					return IDEM_ERR_INVALID;
			rt->is_param[rt->nsegs] = 1;
		} else if (strpbrk(seg, "{}") != NULL) {
			return IDEM_ERR_INVALID;
		}
		rt->segs[rt->nsegs++] = seg;
	}
	return IDEM_OK;
}

/* Same method and the same literals in the same places. */
static int
same_shape(const idem_route *a, const idem_route *b)
{
	size_t i;

	if (strcmp(a->method, b->method) != 0 || a->nsegs != b->nsegs)
		return 0;
	for (i = 0; i < a->nsegs; i++) {
		if (a->is_param[i] != b->is_param[i])
			return 0;
		if (!a->is_param[i] && strcmp(a->segs[i], b->segs[i]) != 0)
			return 0;
	}
	return 1;
}

int
idem_route_covers(const idem_route *a, const idem_route *b)
{
	size_t i;

	if (strcmp(a->method, b->method) != 0 || a->nsegs != b->nsegs)
		return 0;
	for (i = 0; i < a->nsegs; i++)
		if (!a->is_param[i] && (b->is_param[i] ||
		    strcmp(a->segs[i], b->segs[i]) != 0))
			return 0;
	return 1;
}

idem_err
idem_router_add(idem_router *r, const char *method, const char *tmpl,
    idem_policy policy, idem_handler_fn handler, void *data,
    const char *owner)
{
	idem_route rt;
	idem_err err;
	size_t i;

	if (method == NULL || tmpl == NULL || handler == NULL ||
	    policy < IDEM_POLICY_DEFAULT || policy > IDEM_POLICY_REQUIRED)
		return IDEM_ERR_INVALID;
	for (i = 0; method[i] != '\0'; i++)
		if (i >= 32 || !isupper((unsigned char)method[i]))
			return IDEM_ERR_INVALID;
	if (i == 0)
		return IDEM_ERR_INVALID;
	memset(&rt, 0, sizeof(rt));
	if ((err = parse_template(&rt, tmpl)) != IDEM_OK) {
		free(rt.segbuf);
		return err;
	}
	if ((rt.method = strdup(method)) == NULL ||
	    (rt.tmpl = strdup(tmpl)) == NULL) {
		err = IDEM_ERR_NOMEM;
		goto fail;
	}
	for (i = 0; i < r->nroutes; i++)
		if (same_shape(&r->routes[i], &rt)) {
			err = IDEM_ERR_EXISTS;
			goto fail;
		}
	if (r->nroutes == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 16;
		idem_route *grown = realloc(r->routes, cap * sizeof(*grown));
		if (grown == NULL) {
			err = IDEM_ERR_NOMEM;
			goto fail;
		}
		r->routes = grown;
		r->cap = cap;
	}
	rt.policy = policy;
	rt.handler = handler;
	rt.data = data;
	rt.owner = owner;
	r->routes[r->nroutes++] = rt;
	return IDEM_OK;
fail:
	free(rt.method);
	free(rt.tmpl);
	free(rt.segbuf);
	return err;
}

/*
 * Whether rt matches the request's segments.  Returns a score (higher is
 * more specific: literal segments earlier) or -1.
 */
static long
match_score(const idem_route *rt, const idem_request *req)
{
	long score = 0;
	size_t i;

	if (rt->nsegs != req->nsegs)
		return -1;
	for (i = 0; i < rt->nsegs; i++) {
		score <<= 1;
		if (rt->is_param[i]) {
			if (req->segs[i][0] == '\0')
				return -1;
		} else if (strcmp(rt->segs[i], req->segs[i]) != 0) {
			return -1;
		} else {
			score |= 1;
		}
	}
	return score;
}

/* Whether a HEAD may run rt, a GET route, and drop the body: only when
 * rt is a plain read (its policy off, or the default, which is off for
 * GET).  A GET route its plugin made keyed may have effects: a HEAD must
 * not run it unkeyed, nor store its answer under a GET's key. */
static int
head_by_get(const idem_route *rt)
{
	return strcmp(rt->method, "GET") == 0 &&
	    (rt->policy == IDEM_POLICY_DEFAULT || rt->policy == IDEM_POLICY_OFF);
}

/* Appends method to the Allow list of used bytes unless it is there. */
static void
allow_add(char *allow, size_t allowlen, size_t *used, const char *method)
{
	size_t len = strlen(method);
	const char *p;

	if (allowlen == 0)
		return;
	for (p = allow; (p = strstr(p, method)) != NULL; p += len)
		if ((p == allow || p[-1] == ' ') &&
		    (p[len] == ',' || p[len] == '\0'))
			return;
	if (*used + len + 3 < allowlen) {
		if (*used > 0) {
			memcpy(allow + *used, ", ", 2);
			*used += 2;
		}
		memcpy(allow + *used, method, len + 1);
		*used += len;
	}
}

idem_err
idem_router_match(const idem_router *r, idem_request *req, char *allow,
    size_t allowlen)
{
	const idem_route *best = NULL, *get = NULL;
	long best_score = -1, get_score = -1;
	int path_matched = 0, head = strcmp(req->method, "HEAD") == 0;
	size_t i, used = 0;

	if (allowlen > 0)
		allow[0] = '\0';
	for (i = 0; i < r->nroutes; i++) {
		const idem_route *rt = &r->routes[i];
		long score = match_score(rt, req);

		if (score < 0)
			continue;
		path_matched = 1;
		if (strcmp(rt->method, req->method) == 0) {
			if (score > best_score) {
				best = rt;
				best_score = score;
			}
		} else if (head && head_by_get(rt) && score > get_score) {
			get = rt;
			get_score = score;
		}
		allow_add(allow, allowlen, &used, rt->method);
		if (head_by_get(rt))
			allow_add(allow, allowlen, &used, "HEAD");
	}
	/* HEAD is answered by the GET route unless one of its own matches */
	if (best == NULL)
		best = get;
	if (best != NULL) {
		req->route = best;
		req->nparams = 0;
		for (i = 0; i < best->nsegs; i++)
			if (best->is_param[i]) {
				req->params[req->nparams].name = best->segs[i];
				req->params[req->nparams++].value = req->segs[i];
			}
		return IDEM_OK;
	}
	return path_matched ? IDEM_ERR_INVALID : IDEM_ERR_NOT_FOUND;
}

/* Methods that change nothing (RFC 9110 section 9.2.1): the default policy
 * leaves their routes off. */
static const char *const safe_methods[] = { "GET", "HEAD", "OPTIONS",
    "TRACE" };

idem_policy
idem_route_policy(const idem_config *cfg, const idem_route *rt)
{
	size_t i;

	if (rt->policy != IDEM_POLICY_DEFAULT)
		return rt->policy;
	for (i = 0; i < sizeof(safe_methods) / sizeof(safe_methods[0]); i++)
		if (strcmp(rt->method, safe_methods[i]) == 0)
			return IDEM_POLICY_OFF;
	return cfg->idem.required ? IDEM_POLICY_REQUIRED : IDEM_POLICY_OPTIONAL;
}

const idem_route_conf *
idem_route_conf_for(const idem_route *rt, idem_route_key k)
{
	if (rt->section != NULL && (rt->section->set & (1u << k)))
		return rt->section;
	if (rt->conf.set & (1u << k))
		return &rt->conf;
	return NULL;
}

void
idem_route_key_policy(const idem_config *cfg, const idem_route *rt,
    idem_key_policy *out)
{
	const idem_route_conf *c;

	c = idem_route_conf_for(rt, IDEM_RK_LIFETIME);
	out->lifetime_ms = c != NULL ? c->lifetime : cfg->idem.lifetime;
	c = idem_route_conf_for(rt, IDEM_RK_INFLIGHT_TTL);
	out->lease_ms = c != NULL ? c->inflight_ttl : cfg->idem.inflight_ttl;
	c = idem_route_conf_for(rt, IDEM_RK_INFLIGHT_WAIT);
	out->wait_ms = c != NULL ? c->inflight_wait : cfg->idem.inflight_wait;
	c = idem_route_conf_for(rt, IDEM_RK_COMMIT_STATUSES);
	out->commit_status = c != NULL ? c->commit_status : cfg->idem.commit_status;
	out->reconcile = rt->reconcile != NULL;
	c = idem_route_conf_for(rt, IDEM_RK_TOMBSTONE_LIFETIME);
	out->tombstone_ms = c != NULL ? c->tombstone_lifetime :
	    cfg->idem.tombstone_lifetime;
	c = idem_route_conf_for(rt, IDEM_RK_EXPIRED_KEYS);
	out->run_expired = c != NULL ? c->run_expired : cfg->idem.run_expired;
}

int
idem_route_calls_outside(const idem_route *rt)
{
	const idem_route_conf *c = idem_route_conf_for(rt, IDEM_RK_CALLS_OUTSIDE);

	if (c != NULL)
		return c->calls_outside;
	return atomic_load_explicit(&rt->asked_downstream,
	    memory_order_relaxed);
}

int
idem_route_asked_downstream(const idem_route *rt)
{
	/* the flag is the route's only field written while it serves */
	atomic_int *f = (atomic_int *)&rt->asked_downstream;
	int was = 0;

	if (atomic_load_explicit(f, memory_order_relaxed))
		return 0;
	return atomic_compare_exchange_strong(f, &was, 1);
}

idem_key_format
idem_route_key_format(const idem_config *cfg, const idem_route *rt)
{
	const idem_route_conf *c = idem_route_conf_for(rt, IDEM_RK_KEY_FORMAT);

	return c != NULL ? (idem_key_format)c->key_format : cfg->idem.key_format;
}

/* The route of r with method and tmpl, not of owner skip; NULL: none. */
static idem_route *
find_route(const idem_router *r, const char *method, const char *tmpl,
    const char *skip, int *builtin)
{
	size_t i;

	*builtin = 0;
	for (i = 0; i < r->nroutes; i++) {
		idem_route *rt = &r->routes[i];
		if (strcmp(rt->method, method) != 0 || strcmp(rt->tmpl, tmpl) != 0)
			continue;
		if (skip != NULL && strcmp(rt->owner, skip) == 0)
			*builtin = 1;
		else
			return rt;
	}
	return NULL;
}

/* Logs a section that names no route of a plugin, with the closest
 * "METHOD TEMPLATE" of one. */
static void
no_such_route(const idem_router *r, idem_config *cfg,
    const idem_route_section *rs, const char *skip)
{
	const char **names = calloc(r->nroutes + 1, sizeof(*names));
	char **texts = calloc(r->nroutes + 1, sizeof(*texts));
	char want[300];
	const char *near = NULL;
	size_t i, n = 0;

	snprintf(want, sizeof(want), "%s %s", rs->method, rs->tmpl);
	for (i = 0; names != NULL && texts != NULL && i < r->nroutes; i++) {
		const idem_route *rt = &r->routes[i];
		size_t len = strlen(rt->method) + strlen(rt->tmpl) + 2;
		if ((skip != NULL && strcmp(rt->owner, skip) == 0) ||
		    (texts[n] = malloc(len)) == NULL)
			continue;
		snprintf(texts[n], len, "%s %s", rt->method, rt->tmpl);
		names[n] = texts[n];
		n++;
	}
	if (names != NULL)
		near = idem_config_closest(want, names, n);
	if (near != NULL)
		idem_config_error(cfg, rs->line, rs->name, NULL, "no plugin "
		    "registered the route %s (PATH is the template as the "
		    "plugin registers it, under mount); did you mean [route "
		    "%s]?", want, near);
	else
		idem_config_error(cfg, rs->line, rs->name, NULL, "no plugin "
		    "registered the route %s (PATH is the template as the "
		    "plugin registers it, under mount)", want);
	for (i = 0; texts != NULL && i < n; i++)
		free(texts[i]);
	free(texts);
	free(names);
}

idem_err
idem_router_apply_sections(idem_router *r, idem_config *cfg,
    const char *builtin, int judge)
{
	static const idem_route_key pool_keys[] = { IDEM_RK_INFLIGHT_TTL,
	    IDEM_RK_INFLIGHT_WAIT };
	unsigned before = cfg->errors;
	size_t i, j;
	int is_builtin;

	for (i = 0; i < cfg->nroutes; i++) {
		idem_route_section *rs = &cfg->routes[i];
		idem_route *rt = find_route(r, rs->method, rs->tmpl, builtin,
		    &is_builtin);

		if (rt == NULL && is_builtin) {
			idem_config_error(cfg, rs->line, rs->name, NULL, "a "
			    "built-in route: its policy is off, and not set by "
			    "a section");
			continue;
		}
		if (rt == NULL) {
			if (judge)
				no_such_route(r, cfg, rs, builtin);
			continue;
		}
		for (j = 0; j < sizeof(pool_keys) / sizeof(pool_keys[0]); j++)
			if (rt->tx_db != NULL &&
			    (rs->conf.set & (1u << pool_keys[j])))
				idem_config_error(cfg, rs->lines[pool_keys[j]],
				    rs->name, idem_route_key_name(pool_keys[j]),
				    "a transactional route takes it from "
				    "[idempotency] (its plugin's pool holds it "
				    "for every transaction)");
		rt->section = &rs->conf;
		if (rs->conf.set & (1u << IDEM_RK_POLICY))
			rt->policy = (idem_policy)rs->conf.policy;
	}
	return cfg->errors > before ? IDEM_ERR_CONFIG : IDEM_OK;
}

uint64_t
idem_router_min_lease(const idem_router *r, const idem_config *cfg)
{
	uint64_t least = cfg->idem.inflight_ttl;
	idem_key_policy pol;
	size_t i;

	for (i = 0; i < r->nroutes; i++) {
		if (idem_route_policy(cfg, &r->routes[i]) == IDEM_POLICY_OFF)
			continue;
		idem_route_key_policy(cfg, &r->routes[i], &pol);
		if (pol.lease_ms < least)
			least = pol.lease_ms;
	}
	return least;
}
