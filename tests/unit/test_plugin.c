/*
 * test_plugin.c - loading plugins (and refusing bad ones), and the whole
 * middleware chain of idem_service_handle with the real plugins.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "idem_service.h"

/* Builds a service from config text; returns the error and the log. */
static idem_err
service(const char *text, idem_service **svc, char **log)
{
	char *conf = harness_subst(text);
	harness_capture cap;
	idem_config *cfg;
	idem_err err;

	harness_capture_begin(&cap);
	*svc = NULL;
	err = idem_config_load_string(conf, "unit.conf", &cfg);
	if (err == IDEM_OK)
		err = idem_service_new(cfg, "/nonexistent-plugin-dir", svc);
	*log = harness_capture_end(&cap);
	free(conf);
	return err;
}

/* Expects config text to be refused with err and a log containing want. */
static void
refused(const char *text, idem_err want_err, const char *want)
{
	idem_service *svc;
	char *log;
	idem_err err = service(text, &svc, &log);

	cr_expect_eq(err, want_err, "got %s: %s", idem_strerror(err), log);
	cr_expect_null(svc);
	cr_expect(strstr(log, want) != NULL, "log lacks \"%s\": %s", want, log);
	free(log);
}

Test(plugin, missing_file)
{
	refused("[server]\nplugins = /nonexistent/x.so\n", IDEM_ERR_PLUGIN,
	    "plugin /nonexistent/x.so: cannot load");
	refused("[server]\nplugins = bare.so\n", IDEM_ERR_PLUGIN,
	    "plugin /nonexistent-plugin-dir/bare.so: cannot load");
	refused("[server]\nplugins = rel/x.so\n", IDEM_ERR_PLUGIN,
	    "plugin ./rel/x.so: cannot load");
}

Test(plugin, not_a_plugin)
{
	refused("[server]\nplugins = "
	    "@BUILDDIR@/tests/plugins/.libs/no_symbol.so\n", IDEM_ERR_PLUGIN,
	    "no_symbol.so: no symbol idem_plugin_init");
}

Test(plugin, wrong_abi_refused_by_name)
{
	refused("[server]\nplugins = "
	    "@BUILDDIR@/tests/plugins/.libs/bad_abi.so\n", IDEM_ERR_PLUGIN,
	    "bad_abi.so: built for plugin ABI version 42, "
	    "this idemfcgi has version 2");
}

/* The ABI grows at the end of idem_plugin without a version bump: a plugin
 * built against a later header loads while it sets no hook this server
 * lacks. */
Test(plugin, later_header_accepted_without_new_hooks)
{
	idem_service *svc;
	char *log;
	idem_err err = service("[server]\nplugins = "
	    "@BUILDDIR@/tests/plugins/.libs/grown.so\n", &svc, &log);

	cr_expect_eq(err, IDEM_OK, "%s", log);
	idem_service_free(svc);
	free(log);
}

Test(plugin, later_hooks_refused)
{
	setenv("GROWN", "hook", 1);
	refused("[server]\nplugins = "
	    "@BUILDDIR@/tests/plugins/.libs/grown.so\n",
	    IDEM_ERR_PLUGIN, "grown.so: it sets hooks of a later idemfcgi");
}

Test(plugin, struct_size_checked)
{
	setenv("GROWN", "small", 1);
	refused("[server]\nplugins = "
	    "@BUILDDIR@/tests/plugins/.libs/grown.so\n",
	    IDEM_ERR_PLUGIN, "grown.so: struct_size 4 is not the size of an "
	    "idem_plugin");
}

Test(plugin, failing_setup)
{
	refused("[server]\nplugins = "
	    "@BUILDDIR@/tests/plugins/.libs/bad_setup.so\n", IDEM_ERR_PLUGIN,
	    "bad_setup.so: route POST no-leading-slash/{x: malformed");
}

/* A core section's name ([server], [idempotency], [metrics], [mysql]) is
 * no plugin's: the config keeps those sections for itself. */
Test(plugin, reserved_names)
{
	static const char *const names[] = { "server", "idempotency",
	    "metrics", "mysql" };
	static const char conf[] = "[server]\nplugins = "
	    "@BUILDDIR@/tests/plugins/.libs/named.so\n";
	idem_service *s;
	char want[64], *log;
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		cr_assert_eq(setenv("IDEM_TEST_PLUGIN_NAME", names[i], 1), 0);
		snprintf(want, sizeof(want), "the name \"%s\" is reserved",
		    names[i]);
		refused(conf, IDEM_ERR_PLUGIN, want);
	}
	/* the same plugin under a name of its own loads */
	cr_assert_eq(setenv("IDEM_TEST_PLUGIN_NAME", "metrics2", 1), 0);
	cr_expect_eq(service(conf, &s, &log), IDEM_OK, "%s", log);
	free(log);
	idem_service_free(s);
	unsetenv("IDEM_TEST_PLUGIN_NAME");
}

Test(plugin, same_name_twice)
{
	refused("[server]\nplugins = @BUILDDIR@/.libs/ledger.so "
	    "@BUILDDIR@/.libs/ledger.so\n", IDEM_ERR_PLUGIN,
	    "the name \"ledger\" is taken");
}

Test(plugin, its_config_section)
{
	refused("[server]\nplugins = @BUILDDIR@/.libs/ledger.so\n[ledger]\n"
	    "max-acounts = 5\n", IDEM_ERR_CONFIG,
	    "unit.conf:4: [ledger] max-acounts: unknown key");
	refused("[server]\nplugins = @BUILDDIR@/.libs/ledger.so\n[ledger]\n"
	    "max-accounts = many\n", IDEM_ERR_CONFIG,
	    "unit.conf:4: [ledger] max-accounts: bad value \"many\"");
	refused("[server]\nplugins = @BUILDDIR@/.libs/ledger.so\n[legder]\n"
	    "x = 1\n", IDEM_ERR_CONFIG,
	    "unit.conf:4: [legder]: unknown section");
	refused("[server]\nplugins = "
	    "@BUILDDIR@/tests/testkit/.libs/testkit.so\n", IDEM_ERR_CONFIG,
	    "[testkit] log = FILE is required");
}

/* ------------------------------------------------ the middleware chain */

static idem_service *svc;
static char logpath[] = "/tmp/idemfcgi-unit-XXXXXX";

static void
start(void)
{
	char text[1024], *log;
	int fd = mkstemp(logpath);

	cr_assert(fd >= 0);
	close(fd);
	snprintf(text, sizeof(text), "[server]\nmax-body = 64\nplugins = "
	    "@BUILDDIR@/.libs/ledger.so "
	    "@BUILDDIR@/tests/testkit/.libs/testkit.so\n"
	    "[idempotency]\nrequired = false\n[testkit]\nlog = %s\n", logpath);
	cr_assert_eq(service(text, &svc, &log), IDEM_OK, "%s", log);
	free(log);
}

static void
stop(void)
{
	idem_service_free(svc);
	unlink(logpath);
}

/* Runs one request through the service, with one more CGI param (NULL:
 * none); returns the status and fills *body with the response body
 * (caller frees) and *ctype. */
static int
call_with(const char *param, const char *method, const char *uri,
    const char *body, char **out, char *ctype, size_t ctlen)
{
	char m[64], u[512], cl[64];
	char *env[] = { m, u, cl, (char *)param, NULL };
	harness_body r = { body, body != NULL ? strlen(body) : 0, 0, 0, 0 };
	idem_request req;
	idem_response res;
	const char *t;
	int status;

	snprintf(m, sizeof(m), "REQUEST_METHOD=%s", method);
	snprintf(u, sizeof(u), "REQUEST_URI=%s", uri);
	snprintf(cl, sizeof(cl), "CONTENT_LENGTH=%zu", r.len);
	idem_response_init(&res);
	idem_service_handle(svc, env, harness_read_body, &r, &req, &res);
	status = res.status;
	*out = strndup(res.body != NULL ? res.body : "", res.len);
	t = idem_response_get_header(&res, "Content-Type");
	snprintf(ctype, ctlen, "%s", t != NULL ? t : "");
	idem_response_clear(&res);
	idem_request_clear(&req);
	return status;
}

/* call_with() without a param. */
static int
call(const char *method, const char *uri, const char *body,
    char **out, char *ctype, size_t ctlen)
{
	return call_with(NULL, method, uri, body, out, ctype, ctlen);
}

Test(chain, ledger, .init = start, .fini = stop)
{
	char *b, ct[64];

	cr_expect_eq(call("POST", "/accounts/a/deposit", "{\"amount\":5}", &b,
	    ct, sizeof(ct)), 201);
	cr_expect_str_eq(b, "{\"account\":\"a\",\"balance\":5}");
	cr_expect_str_eq(ct, "application/json");
	free(b);
	cr_expect_eq(call("POST", "/accounts/a/withdraw", "{\"amount\":2}", &b,
	    ct, sizeof(ct)), 201);
	cr_expect_str_eq(b, "{\"account\":\"a\",\"balance\":3}");
	free(b);
	cr_expect_eq(call("POST", "/accounts/a/withdraw", "{\"amount\":4}", &b,
	    ct, sizeof(ct)), 409);
	cr_expect(strstr(b, "INSUFFICIENT_FUNDS") != NULL, "%s", b);
	cr_expect_str_eq(ct, "application/problem+json");
	free(b);
	cr_expect_eq(call("GET", "/accounts/a", NULL, &b, ct, sizeof(ct)), 200);
	cr_expect_str_eq(b, "{\"account\":\"a\",\"balance\":3}");
	free(b);
	cr_expect_eq(call("GET", "/accounts/zz", NULL, &b, ct, sizeof(ct)), 404);
	cr_expect(strstr(b, "ACCOUNT_NOT_FOUND") != NULL, "%s", b);
	free(b);
	cr_expect_eq(call("POST", "/accounts/zz/withdraw", "{\"amount\":1}", &b,
	    ct, sizeof(ct)), 404);
	free(b);
}

Test(chain, ledger_bad_input, .init = start, .fini = stop)
{
	static const struct { const char *uri, *body; int status;
	    const char *code; } cases[] = {
		{ "/accounts/a/deposit", "{\"amount\":", 400, "MALFORMED_JSON" },
		{ "/accounts/a/deposit", "", 400, "MALFORMED_JSON" },
		{ "/accounts/a/deposit", "{\"amount\":0}", 422, "INVALID_AMOUNT" },
		{ "/accounts/a/deposit", "{\"amount\":-3}", 422, "INVALID_AMOUNT" },
		{ "/accounts/a/deposit", "{\"amount\":1.5}", 422,
		    "INVALID_AMOUNT" },
		{ "/accounts/a/deposit", "{\"amount\":\"5\"}", 422,
		    "INVALID_AMOUNT" },
		{ "/accounts/a/deposit", "{\"amt\":5}", 422, "INVALID_AMOUNT" },
		{ "/accounts/a/deposit", "[5]", 422, "INVALID_AMOUNT" },
		{ "/accounts/a/deposit", "{\"amount\":1,\"amount\":2}", 400,
		    "MALFORMED_JSON" },
		{ "/accounts/a/deposit", "{\"amount\":10000000000001}", 422,
		    "INVALID_AMOUNT" },
		{ "/accounts/a%3Bb/deposit", "{\"amount\":1}", 400,
		    "INVALID_ACCOUNT_ID" },
	};
	size_t i;
	char *b, ct[64];

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cr_expect_eq(call("POST", cases[i].uri, cases[i].body, &b, ct,
		    sizeof(ct)), cases[i].status, "case %zu: %s", i, b);
		cr_expect(strstr(b, cases[i].code) != NULL, "case %zu: %s", i, b);
		free(b);
	}
	cr_expect_eq(call("GET", "/accounts/a", NULL, &b, ct, sizeof(ct)), 404,
	    "a refused deposit created the account: %s", b);
	free(b);
}

Test(chain, framework_errors, .init = start, .fini = stop)
{
	char *b, ct[64], big[100];

	cr_expect_eq(call("POST", "/nowhere", NULL, &b, ct, sizeof(ct)), 404);
	cr_expect(strstr(b, "\"code\":\"ROUTE_NOT_FOUND\"") != NULL, "%s", b);
	cr_expect_str_eq(ct, "application/problem+json");
	free(b);
	cr_expect_eq(call("PATCH", "/accounts/a", NULL, &b, ct, sizeof(ct)),
	    405);
	cr_expect(strstr(b, "METHOD_NOT_ALLOWED") != NULL, "%s", b);
	free(b);
	memset(big, 'x', 99);
	big[99] = '\0';
	cr_expect_eq(call("POST", "/testkit/echo", big, &b, ct, sizeof(ct)),
	    413);
	cr_expect(strstr(b, "BODY_TOO_LARGE") != NULL, "%s", b);
	free(b);
	cr_expect_eq(call("POST", "/testkit/fail", NULL, &b, ct, sizeof(ct)),
	    500);
	cr_expect(strstr(b, "HANDLER_FAILED") != NULL, "%s", b);
	free(b);
}

/* ------------------------------------------------------- error formats */

#define ERRFMT "[server]\nplugins = @BUILDDIR@/tests/plugins/.libs/errfmt.so\n" \
	"[idempotency]\nrequired = false\n"
#define V7 "HTTP_IDEMPOTENCY_KEY=0190a5b2-7c3d-7e4f-8a5b-6c7d8e9fa0b1"


/* Expects an error of the plugin's format: status, type and "own". */
static void
expect_fmt(int got, char *b, const char *ct, int status, const char *type,
    int own)
{
	char want[128];

	cr_expect_eq(got, status, "%s", b);
	cr_expect_str_eq(ct, "application/json");
	snprintf(want, sizeof(want), "\"type\":\"%s\"", type);
	cr_expect(strncmp(b, "{\"error\":{", 10) == 0 &&
	    strstr(b, want) != NULL, "want %s in %s", want, b);
	snprintf(want, sizeof(want), "\"code\":%d", status);
	cr_expect(strstr(b, want) != NULL, "want %s in %s", want, b);
	cr_expect_eq(strstr(b, "\"own\":true") != NULL, own, "%s", b);
	free(b);
}

/* The framework's own refusals on a plugin's routes, a failed handler
 * and a handler's problem are written by the plugin's format, with the
 * framework's status; a route keeps a format of its own; a request that
 * matches no route still gets a problem. */
Test(errfmt, every_error_of_its_routes)
{
	char *b, ct[64], *log;
	int st;

	cr_assert_eq(service(ERRFMT, &svc, &log), IDEM_OK, "%s", log);
	free(log);
	st = call_with("HTTP_IDEMPOTENCY_KEY=1234", "POST", "/fmt/keyed",
	    "{}", &b, ct, sizeof(ct));
	expect_fmt(st, b, ct, 400, "IDEMPOTENCY_KEY_INVALID", 0);
	cr_expect_eq(call_with(V7, "POST", "/fmt/keyed", "{}", &b, ct,
	    sizeof(ct)), 201, "%s", b);
	free(b);
	st = call_with(V7, "POST", "/fmt/keyed", "{\"x\":1}", &b, ct,
	    sizeof(ct));
	expect_fmt(st, b, ct, 409, "IDEMPOTENCY_CONFLICT", 0);
	st = call_with(NULL, "POST", "/fmt/fail", NULL, &b, ct,
	    sizeof(ct));
	expect_fmt(st, b, ct, 500, "HANDLER_FAILED", 0);
	st = call_with(NULL, "POST", "/fmt/teapot", NULL, &b, ct,
	    sizeof(ct));
	expect_fmt(st, b, ct, 418, "TEAPOT", 0);
	st = call_with(NULL, "POST", "/fmt/own", NULL, &b, ct,
	    sizeof(ct));
	expect_fmt(st, b, ct, 418, "TEAPOT", 1);
	/* a route's own format wins over the plugin's set after it */
	st = call_with(NULL, "POST", "/fmt/early", NULL, &b, ct,
	    sizeof(ct));
	expect_fmt(st, b, ct, 418, "TEAPOT", 1);
	cr_expect_eq(call_with(NULL, "POST", "/fmt", NULL, &b, ct, sizeof(ct)),
	    404);
	cr_expect_str_eq(ct, "application/problem+json");
	free(b);
	idem_service_free(svc);
}

/* A renderer that fails leaves the default problem. */
Test(errfmt, failing_renderer_gives_a_problem)
{
	char *b, ct[64], *log;

	cr_assert_eq(service(ERRFMT "[errfmt]\nbroken = true\n", &svc, &log),
	    IDEM_OK, "%s", log);
	free(log);
	cr_expect_eq(call_with(NULL, "POST", "/fmt/fail", NULL, &b, ct,
	    sizeof(ct)), 500);
	cr_expect_str_eq(ct, "application/problem+json");
	cr_expect(strstr(b, "\"code\":\"HANDLER_FAILED\"") != NULL, "%s", b);
	free(b);
	idem_service_free(svc);
}

/* idem_route_lifetime: [idempotency]'s, idem_route_set's, and a [route]
 * section's over both. */
Test(errfmt, route_lifetime)
{
	static const struct { const char *conf, *want; } cases[] = {
		{ "", "{\"lifetime_ms\":86400000}" },
		{ "lifetime = 1h\n", "{\"lifetime_ms\":3600000}" },
		{ "lifetime = 1h\n[route POST /fmt/keyed]\nlifetime = 2h\n",
		    "{\"lifetime_ms\":7200000}" },
		{ "[route POST /fmt/keyed]\npolicy = off\n",
		    "{\"lifetime_ms\":0}" },
	};
	char text[512], *b, ct[64], *log;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(text, sizeof(text), ERRFMT "%s", cases[i].conf);
		cr_assert_eq(service(text, &svc, &log), IDEM_OK, "%s", log);
		free(log);
		cr_expect_eq(call_with(NULL, "GET", "/fmt/lifetime", NULL, &b,
		    ct, sizeof(ct)), 200);
		cr_expect_str_eq(b, cases[i].want, "case %zu", i);
		free(b);
		idem_service_free(svc);
	}
}

/* ------------------------------------------ the data API without a database */

#define DBAPI "[server]\nplugins = @BUILDDIR@/tests/plugins/.libs/dbapi.so\n"

/* On the memory store a plugin learns there is no database (IDEM_DB_NONE,
 * no connection on its routes); a pool, DDL or a transactional route is
 * refused at setup with the reason, and a NULL statement is named. */
Test(dbapi, memory_store_has_no_database)
{
	char *b, ct[64], *log;

	cr_assert_eq(service(DBAPI "[dbapi]\nstep = dialect\n", &svc, &log),
	    IDEM_OK, "%s", log);
	free(log);
	cr_expect_eq(call("GET", "/dbapi", NULL, &b, ct, sizeof(ct)), 200);
	cr_expect_str_eq(b, "{\"dialect\":0,\"connection\":false}");
	free(b);
	idem_service_free(svc);
	svc = NULL;
	refused(DBAPI "[dbapi]\nstep = pool\n", IDEM_ERR_PLUGIN,
	    "idem_app_db: the store has no database");
	refused(DBAPI "[dbapi]\nstep = null-sql\n", IDEM_ERR_PLUGIN,
	    "idem_app_db: statement 0 of 1 is NULL");
	refused(DBAPI "[dbapi]\nstep = exec\n", IDEM_ERR_PLUGIN,
	    "idem_app_db_exec: the store has no database");
	refused(DBAPI "[dbapi]\nstep = tx\n", IDEM_ERR_CONFIG,
	    "route POST /dbapi is transactional, but the store has no database");
	refused(DBAPI "[idempotency]\nenabled = false\n[dbapi]\nstep = tx\n",
	    IDEM_ERR_CONFIG, "is transactional, but idempotency is disabled");
}
