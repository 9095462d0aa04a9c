/*
 * idem_router.c - matching requests to routes.
 */
#include "config.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "idem_router.h"

struct idem_router {
	idem_route *routes;              /* owned */
	size_t nroutes;
	size_t cap;
};

idem_router *
idem_router_new(void)
{
	return calloc(1, sizeof(idem_router));
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
	}
	free(r->routes);
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
	return cfg->required ? IDEM_POLICY_REQUIRED : IDEM_POLICY_OPTIONAL;
}
