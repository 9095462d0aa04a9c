/*
 * idem_app.c - the API a plugin's hooks call (idemfcgi.h): registering
 * routes, reading the plugin's config section.  The data API's part is
 * idem_app_db.c.  The loader (idem_plugin.c) makes the idem_app each
 * hook gets.
 */
#include "config.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "idemfcgi.h"
#include "idem_config_keys.h"
#include "idem_config_value.h"
#include "idem_log.h"
#include "idem_plugin.h"

int
idem_app_setup_only(const idem_app *app, const char *what)
{
	if (!app->deploying)
		return 0;
	idem_log(NULL, IDEM_LOG_ERROR, "plugin %s: %s in deploy: only setup "
	    "may do that", app->path, what);
	return -1;
}

int
idem_app_is_check(const idem_app *app)
{
	return app->check;
}

int
idem_app_has_key_secret(const idem_app *app)
{
	return app->cfg->idem.key_secret != NULL;
}

/* Gives rt the error format of the other arguments (media_type copied, a
 * reference to schema taken).  Returns IDEM_OK or IDEM_ERR_NOMEM. */
static idem_err
set_error_format(idem_route *rt, const char *media_type, json_t *schema,
    idem_error_fn render, void *data)
{
	char *copy = strdup(media_type);

	if (copy == NULL)
		return IDEM_ERR_NOMEM;
	free(rt->error_type);
	rt->error_type = copy;
	json_decref(rt->error_schema);
	rt->error_schema = json_incref(schema);
	rt->error_fn = render;
	rt->error_data = data;
	return IDEM_OK;
}

idem_err
idem_route_add(idem_app *app, const char *method, const char *tmpl,
    idem_policy policy, idem_handler_fn handler, void *data)
{
	idem_err err;

	if (idem_app_setup_only(app, "idem_route_add") != 0)
		return IDEM_ERR_INVALID;
	err = idem_router_add(app->router, method, tmpl, policy, handler, data,
	    app->name);
	if (err == IDEM_OK && app->self->error_fn != NULL)
		err = set_error_format(idem_router_at(app->router,
		    idem_router_count(app->router) - 1), app->self->error_type,
		    app->self->error_schema, app->self->error_fn,
		    app->self->error_data);

	if (err != IDEM_OK)
		idem_log(NULL, IDEM_LOG_ERROR, "plugin %s: route %s %s: %s",
		    app->path, method != NULL ? method : "(null)",
		    tmpl != NULL ? tmpl : "(null)",
		    err == IDEM_ERR_EXISTS ? "already registered (by a plugin, "
		    "or by idemfcgi itself: see [server] policy-path and "
		    "[metrics] path)" :
		    err == IDEM_ERR_INVALID ? "malformed method or template" :
		    idem_strerror(err));
	return err;
}

/* The route method tmpl of app's plugin, or NULL. */
static idem_route *
own_route(idem_app *app, const char *method, const char *tmpl)
{
	size_t i;

	for (i = 0; i < idem_router_count(app->router); i++) {
		idem_route *r = idem_router_at(app->router, i);
		if (strcmp(r->method, method) == 0 && strcmp(r->tmpl, tmpl) == 0 &&
		    strcmp(r->owner, app->name) == 0)
			return r;
	}
	return NULL;
}

idem_err
idem_route_set(idem_app *app, const char *method, const char *tmpl,
    const char *key, const char *value)
{
	idem_route_conf tmp;
	idem_route *rt;
	const char *bad = NULL;
	char why[256];
	int k;

	if (idem_app_setup_only(app, "idem_route_set") != 0 || method == NULL ||
	    tmpl == NULL || key == NULL || value == NULL)
		return IDEM_ERR_INVALID;
	if ((rt = own_route(app, method, tmpl)) == NULL) {
		idem_log(NULL, IDEM_LOG_ERROR, "plugin %s: idem_route_set %s %s: "
		    "no such route of this plugin (idem_route_add it first)",
		    app->path, method, tmpl);
		return IDEM_ERR_NOT_FOUND;
	}
	k = idem_route_key_index(key);
	if (k < 0)
		bad = "not a key of a route's policy";
	else if (rt->tx_db != NULL && (k == IDEM_RK_INFLIGHT_TTL ||
	    k == IDEM_RK_INFLIGHT_WAIT))
		bad = "a transactional route takes it from [idempotency]";
	else if (k == IDEM_RK_POLICY) {
		memset(&tmp, 0, sizeof(tmp));
		if ((bad = idem_route_key_set(&tmp, k, value, 0, why,
		    sizeof(why))) == NULL)
			rt->policy = (idem_policy)tmp.policy;
	} else {
		bad = idem_route_key_set(&rt->conf, k, value, 0, why,
		    sizeof(why));
	}
	if (bad == NULL)
		return IDEM_OK;
	idem_log(NULL, IDEM_LOG_ERROR, "plugin %s: route %s %s: %s = %s: %s",
	    app->path, method, tmpl, key, value, bad);
	return bad == idem_key_oom ? IDEM_ERR_NOMEM : IDEM_ERR_INVALID;
}

idem_err
idem_route_describe(idem_app *app, const char *method, const char *tmpl,
    const char *summary, json_t *request_schema, json_t *response_schema)
{
	idem_route *rt;
	char *copy = NULL;

	if (idem_app_setup_only(app, "idem_route_describe") != 0 || method == NULL ||
	    tmpl == NULL || (request_schema != NULL &&
	    !json_is_object(request_schema)) || (response_schema != NULL &&
	    !json_is_object(response_schema)))
		return IDEM_ERR_INVALID;
	if ((rt = own_route(app, method, tmpl)) == NULL) {
		idem_log(NULL, IDEM_LOG_ERROR, "plugin %s: idem_route_describe %s "
		    "%s: no such route of this plugin", app->path, method, tmpl);
		return IDEM_ERR_NOT_FOUND;
	}
	if (summary != NULL && (copy = strdup(summary)) == NULL)
		return IDEM_ERR_NOMEM;
	free(rt->summary);
	rt->summary = copy;
	json_decref(rt->request_schema);
	rt->request_schema = json_incref(request_schema);
	json_decref(rt->response_schema);
	rt->response_schema = json_incref(response_schema);
	return IDEM_OK;
}

idem_err
idem_route_reconcile(idem_app *app, const char *method, const char *tmpl,
    idem_handler_fn reconcile)
{
	idem_route *rt = NULL;

	if (idem_app_setup_only(app, "idem_route_reconcile") != 0 || reconcile == NULL ||
	    method == NULL || tmpl == NULL)
		return IDEM_ERR_INVALID;
	rt = own_route(app, method, tmpl);
	if (rt == NULL || rt->reconcile != NULL) {
		idem_log(NULL, IDEM_LOG_ERROR, "plugin %s: reconcile hook of %s "
		    "%s: %s", app->path, method, tmpl, rt == NULL ? "no such "
		    "route of this plugin (idem_route_add it first)" : "it has "
		    "one already");
		return rt == NULL ? IDEM_ERR_NOT_FOUND : IDEM_ERR_EXISTS;
	}
	rt->reconcile = reconcile;
	return IDEM_OK;
}

idem_err
idem_app_schema(idem_app *app, const char *name, json_t *schema)
{
	json_t *all;
	size_t n;

	if (idem_app_setup_only(app, "idem_app_schema") != 0 || name == NULL ||
	    !json_is_object(schema))
		return IDEM_ERR_INVALID;
	for (n = 0; name[n] != '\0'; n++)
		if (n >= 64 || !(isalnum((unsigned char)name[n]) ||
		    strchr("._-", name[n]) != NULL))
			break;
	if (n == 0 || name[n] != '\0') {
		idem_log(NULL, IDEM_LOG_ERROR, "plugin %s: schema name \"%s\": 1 "
		    "to 64 letters, digits, '.', '_' or '-'", app->path, name);
		return IDEM_ERR_INVALID;
	}
	all = idem_router_schemas(app->router);
	if (json_object_get(all, name) != NULL ||
	    strcmp(name, "Problem") == 0) {
		idem_log(NULL, IDEM_LOG_ERROR, "plugin %s: schema %s is named "
		    "already", app->path, name);
		return IDEM_ERR_EXISTS;
	}
	return json_object_set(all, name, schema) == 0 ? IDEM_OK :
	    IDEM_ERR_NOMEM;
}

/* Whether the arguments of an error format are good (logged when not). */
static int
error_format_ok(idem_app *app, const char *media_type, json_t *schema,
    idem_error_fn render)
{
	if (idem_app_setup_only(app, "an error format") != 0)
		return 0;
	if (render != NULL && media_type != NULL && json_is_object(schema))
		return 1;
	idem_log(NULL, IDEM_LOG_ERROR, "plugin %s: an error format needs a "
	    "renderer, a media type and a schema object", app->path);
	return 0;
}

idem_err
idem_app_error_format(idem_app *app, const char *media_type, json_t *schema,
    idem_error_fn render, void *data)
{
	idem_loaded_plugin *lp = app->self;
	char *copy;
	size_t i;
	idem_err err;

	if (!error_format_ok(app, media_type, schema, render))
		return IDEM_ERR_INVALID;
	if ((copy = strdup(media_type)) == NULL)
		return IDEM_ERR_NOMEM;
	free(lp->error_type);
	lp->error_type = copy;
	json_decref(lp->error_schema);
	lp->error_schema = json_incref(schema);
	lp->error_fn = render;
	lp->error_data = data;
	for (i = 0; i < idem_router_count(app->router); i++) {
		idem_route *rt = idem_router_at(app->router, i);
		if (strcmp(rt->owner, app->name) == 0 && !rt->error_own &&
		    (err = set_error_format(rt, media_type, schema, render,
		    data)) != IDEM_OK)
			return err;
	}
	return IDEM_OK;
}

idem_err
idem_route_error_format(idem_app *app, const char *method, const char *tmpl,
    const char *media_type, json_t *schema, idem_error_fn render,
    void *data)
{
	idem_route *rt;

	if (!error_format_ok(app, media_type, schema, render) ||
	    method == NULL || tmpl == NULL)
		return IDEM_ERR_INVALID;
	if ((rt = own_route(app, method, tmpl)) == NULL) {
		idem_log(NULL, IDEM_LOG_ERROR, "plugin %s: error format of %s "
		    "%s: no such route of this plugin", app->path, method, tmpl);
		return IDEM_ERR_NOT_FOUND;
	}
	rt->error_own = 1;
	return set_error_format(rt, media_type, schema, render, data);
}

idem_err
idem_route_lifetime(idem_app *app, const char *method, const char *tmpl,
    uint64_t *ms)
{
	idem_key_policy kp;
	idem_route *rt, with;
	size_t i;

	if (idem_app_setup_only(app, "idem_route_lifetime") != 0 ||
	    method == NULL || tmpl == NULL || ms == NULL)
		return IDEM_ERR_INVALID;
	if ((rt = own_route(app, method, tmpl)) == NULL)
		return IDEM_ERR_NOT_FOUND;
	/* the route as it will be once its section is applied
	 * (idem_router_apply_sections) */
	with = *rt;
	for (i = 0; i < app->cfg->nroutes; i++) {
		const idem_route_section *rs = &app->cfg->routes[i];
		if (strcmp(rs->method, method) != 0 || strcmp(rs->tmpl, tmpl) != 0)
			continue;
		with.section = &rs->conf;
		if (rs->conf.set & (1u << IDEM_RK_POLICY))
			with.policy = (idem_policy)rs->conf.policy;
	}
	if (!app->cfg->idem.enabled ||
	    idem_route_policy(app->cfg, &with) == IDEM_POLICY_OFF)
		return IDEM_ERR_NOT_FOUND;
	idem_route_key_policy(app->cfg, &with, &kp);
	*ms = kp.lifetime_ms;
	return IDEM_OK;
}

idem_err
idem_config_string(idem_app *app, const char *key, const char *def,
    const char **out)
{
	idem_config_entry *e = idem_config_find(app->cfg, app->name, key);

	*out = e != NULL ? e->value : def;
	return IDEM_OK;
}

/* Logs the bad value of e, key of app's section, and what was expected.
 * Returns IDEM_ERR_CONFIG. */
static idem_err
bad_value(idem_app *app, const idem_config_entry *e, const char *key,
    const char *want)
{
	idem_config_error(app->cfg, e->line, app->name, key,
	    "bad value \"%s\": %s", e->value, want);
	return IDEM_ERR_CONFIG;
}

idem_err
idem_config_int(idem_app *app, const char *key, long long def,
    long long min, long long max, long long *out)
{
	idem_config_entry *e = idem_config_find(app->cfg, app->name, key);
	char want[96];

	*out = def;
	if (e != NULL && idem_parse_int(e->value, min, max, out) != IDEM_OK)
		return bad_value(app, e, key, idem_parse_int_want(min, max, want,
		    sizeof(want)));
	return IDEM_OK;
}

idem_err
idem_config_bool(idem_app *app, const char *key, int def, int *out)
{
	idem_config_entry *e = idem_config_find(app->cfg, app->name, key);

	*out = def;
	if (e != NULL && idem_parse_bool(e->value, out) != IDEM_OK)
		return bad_value(app, e, key, IDEM_PARSE_BOOL_WANT);
	return IDEM_OK;
}

idem_err
idem_config_size(idem_app *app, const char *key, uint64_t def, uint64_t *out)
{
	idem_config_entry *e = idem_config_find(app->cfg, app->name, key);

	*out = def;
	if (e != NULL && idem_parse_size(e->value, out) != IDEM_OK)
		return bad_value(app, e, key, IDEM_PARSE_SIZE_WANT);
	return IDEM_OK;
}

idem_err
idem_config_duration(idem_app *app, const char *key, uint64_t def,
    uint64_t *out)
{
	idem_config_entry *e = idem_config_find(app->cfg, app->name, key);

	*out = def;
	if (e != NULL && idem_parse_duration(e->value, out) != IDEM_OK)
		return bad_value(app, e, key, IDEM_PARSE_DURATION_WANT);
	return IDEM_OK;
}
