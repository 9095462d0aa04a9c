/*
 * errfmt.c - a plugin with an error format of its own (idemfcgi.h:
 * idem_app_error_format), for test_plugin: its errors are written as
 * {"error": {"message", "type", "code"}}, the framework's among them.
 *   POST /fmt/keyed      optional UUIDv7 key: 201 {"ok": true}
 *   POST /fmt/fail       the handler fails (500 HANDLER_FAILED)
 *   POST /fmt/teapot     the handler answers idem_response_problem 418
 *   POST /fmt/own        a route with a format of its own ("own": true)
 *   POST /fmt/early      the same, set before the plugin's format
 *   GET  /fmt/lifetime   the lifetime of POST /fmt/keyed, in ms
 * [errfmt] broken = true: the plugin's renderer fails (the default
 * problem is written instead).
 */
#include <stdio.h>
#include <stdlib.h>

#include "idemfcgi.h"

static int broken;
static unsigned long long lifetime_ms;

/* Writes {"error": {...}}; own adds "own": true. */
static idem_err
render(idem_response *res, int status, const char *code, const char *detail,
    void *data)
{
	json_t *err;

	if (broken)
		return IDEM_ERR_HANDLER;
	err = json_pack("{s:{s:s, s:s, s:i}}", "error", "message",
	    detail != NULL ? detail : "", "type", code, "code", status);
	if (err != NULL && data != NULL)
		json_object_set_new(err, "own", json_true());
	return err != NULL ? idem_response_json(res, 418, err) :
	    IDEM_ERR_NOMEM;
}

static idem_err
keyed(const idem_request *req, idem_response *res, void *data)
{
	(void)req;
	(void)data;
	return idem_response_json(res, 201, json_pack("{s:b}", "ok", 1));
}

static idem_err
fail(const idem_request *req, idem_response *res, void *data)
{
	(void)req;
	(void)res;
	(void)data;
	return IDEM_ERR_HANDLER;
}

static idem_err
teapot(const idem_request *req, idem_response *res, void *data)
{
	(void)req;
	(void)data;
	return idem_response_problem(res, 418, "TEAPOT", "short and stout");
}

static idem_err
lifetime(const idem_request *req, idem_response *res, void *data)
{
	(void)req;
	(void)data;
	return idem_response_json(res, 200, json_pack("{s:I}", "lifetime_ms",
	    (json_int_t)lifetime_ms));
}

static idem_err
setup(idem_app *app, void **data)
{
	json_t *schema = json_pack("{s:s, s:[s], s:{s:{s:s}}}", "type",
	    "object", "required", "error", "properties", "error", "type",
	    "object");
	json_t *ref = json_pack("{s:s}", "$ref",
	    "#/components/schemas/FmtError");
	uint64_t ms = 0;
	idem_err err;

	*data = NULL;
	if (schema == NULL || ref == NULL) {
		json_decref(schema);
		json_decref(ref);
		return IDEM_ERR_NOMEM;
	}
	if ((err = idem_config_bool(app, "broken", 0, &broken)) != IDEM_OK ||
	    (err = idem_route_add(app, "POST", "/fmt/keyed",
	    IDEM_POLICY_OPTIONAL, keyed, NULL)) != IDEM_OK ||
	    (err = idem_route_set(app, "POST", "/fmt/keyed", "key-format",
	    "uuidv7")) != IDEM_OK ||
	    (err = idem_app_schema(app, "FmtError", schema)) != IDEM_OK ||
	    (err = idem_route_add(app, "POST", "/fmt/early", IDEM_POLICY_OFF,
	    teapot, NULL)) != IDEM_OK ||
	    (err = idem_route_error_format(app, "POST", "/fmt/early",
	    "application/json", schema, render, &broken)) != IDEM_OK ||
	    /* the format is given to routes added before and after */
	    (err = idem_app_error_format(app, "application/json", ref, render,
	    NULL)) != IDEM_OK ||
	    (err = idem_route_add(app, "POST", "/fmt/fail", IDEM_POLICY_OFF,
	    fail, NULL)) != IDEM_OK ||
	    (err = idem_route_add(app, "POST", "/fmt/teapot", IDEM_POLICY_OFF,
	    teapot, NULL)) != IDEM_OK ||
	    (err = idem_route_add(app, "POST", "/fmt/own", IDEM_POLICY_OFF,
	    teapot, NULL)) != IDEM_OK ||
	    (err = idem_route_error_format(app, "POST", "/fmt/own",
	    "application/json", schema, render, &broken)) != IDEM_OK ||
	    (err = idem_route_add(app, "GET", "/fmt/lifetime", IDEM_POLICY_OFF,
	    lifetime, NULL)) != IDEM_OK ||
	    ((err = idem_route_lifetime(app, "POST", "/fmt/keyed", &ms))
	    != IDEM_OK && err != IDEM_ERR_NOT_FOUND))
		ms = 0;
	else
		err = IDEM_OK;   /* NOT_FOUND: its policy is off, ms 0 */
	json_decref(schema);
	json_decref(ref);
	if (err != IDEM_OK)
		return err;
	lifetime_ms = ms;
	return IDEM_OK;
}

IDEM_PLUGIN("errfmt", setup, NULL, NULL)
