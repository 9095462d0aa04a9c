/*
 * test_router.c - path templates, 404 and 405.
 */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "idem_router.h"

static const idem_request_limits test_limits = { "", 100, 8192, 65536, 0 };

static idem_err
h1(const idem_request *req, idem_response *res, void *data)
{
	return IDEM_OK;
}

/* Parses a request for method and uri with the real parser. */
static void
make_request(idem_request *req, char **env, const char *method,
    const char *uri)
{
	idem_problem pb;

	env[0] = malloc(strlen(method) + 16);
	sprintf(env[0], "REQUEST_METHOD=%s", method);
	env[1] = malloc(strlen(uri) + 16);
	sprintf(env[1], "REQUEST_URI=%s", uri);
	env[2] = NULL;
	cr_assert_eq(idem_request_parse(req, env, &test_limits, &pb), IDEM_OK, "%s",
	    pb.detail);
}

static void
free_request(idem_request *req, char **env)
{
	idem_request_clear(req);
	free(env[0]);
	free(env[1]);
}

static idem_router *
sample(void)
{
	idem_router *r = idem_router_new();

	cr_assert_not_null(r);
	cr_assert_eq(idem_router_add(r, "POST", "/accounts/{id}/deposit",
	    IDEM_POLICY_DEFAULT, h1, NULL, "t"), IDEM_OK);
	cr_assert_eq(idem_router_add(r, "GET", "/accounts/{id}",
	    IDEM_POLICY_OFF, h1, NULL, "t"), IDEM_OK);
	cr_assert_eq(idem_router_add(r, "PUT", "/accounts/{id}",
	    IDEM_POLICY_REQUIRED, h1, NULL, "t"), IDEM_OK);
	cr_assert_eq(idem_router_add(r, "GET", "/accounts/special",
	    IDEM_POLICY_OFF, h1, (void *)1, "t"), IDEM_OK);
	cr_assert_eq(idem_router_add(r, "GET", "/",
	    IDEM_POLICY_OFF, h1, (void *)2, "t"), IDEM_OK);
	cr_assert_eq(idem_router_add(r, "POST", "/a/{x}/b/{y}",
	    IDEM_POLICY_OFF, h1, NULL, "t"), IDEM_OK);
	return r;
}

Test(router, match_and_params)
{
	idem_router *r = sample();
	idem_request req;
	char *env[3], allow[64];

	make_request(&req, env, "POST", "/accounts/a%20b/deposit?x=1");
	cr_assert_eq(idem_router_match(r, &req, allow, sizeof(allow)), IDEM_OK);
	cr_expect_str_eq(req.route->tmpl, "/accounts/{id}/deposit");
	cr_expect_str_eq(idem_request_param(&req, "id"), "a b");
	cr_expect_null(idem_request_param(&req, "nope"));
	free_request(&req, env);

	make_request(&req, env, "POST", "/a/1/b/2");
	cr_assert_eq(idem_router_match(r, &req, allow, sizeof(allow)), IDEM_OK);
	cr_expect_str_eq(idem_request_param(&req, "x"), "1");
	cr_expect_str_eq(idem_request_param(&req, "y"), "2");
	free_request(&req, env);

	make_request(&req, env, "GET", "/");
	cr_assert_eq(idem_router_match(r, &req, allow, sizeof(allow)), IDEM_OK);
	cr_expect_eq(req.route->data, (void *)2);
	free_request(&req, env);
	idem_router_free(r);
}

Test(router, literal_beats_param)
{
	idem_router *r = sample();
	idem_request req;
	char *env[3], allow[64];

	make_request(&req, env, "GET", "/accounts/special");
	cr_assert_eq(idem_router_match(r, &req, allow, sizeof(allow)), IDEM_OK);
	cr_expect_eq(req.route->data, (void *)1);
	free_request(&req, env);
	idem_router_free(r);
}

Test(router, not_found)
{
	static const char *const paths[] = { "/nope", "/accounts",
	    "/accounts/a/deposit/x", "/accounts//deposit", "/accounts/a/",
	    "/accounts/a/withdraw", "/ACCOUNTS/a" };
	idem_router *r = sample();
	idem_request req;
	char *env[3], allow[64];
	size_t i;

	for (i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		make_request(&req, env, "POST", paths[i]);
		cr_expect_eq(idem_router_match(r, &req, allow, sizeof(allow)),
		    IDEM_ERR_NOT_FOUND, "%s matched", paths[i]);
		free_request(&req, env);
	}
	idem_router_free(r);
}

Test(router, method_not_allowed)
{
	idem_router *r = sample();
	idem_request req;
	char *env[3], allow[64];

	make_request(&req, env, "DELETE", "/accounts/a");
	cr_assert_eq(idem_router_match(r, &req, allow, sizeof(allow)),
	    IDEM_ERR_INVALID);
	cr_expect_str_eq(allow, "GET, HEAD, PUT");
	free_request(&req, env);

	make_request(&req, env, "GET", "/accounts/a/deposit");
	cr_assert_eq(idem_router_match(r, &req, allow, sizeof(allow)),
	    IDEM_ERR_INVALID);
	cr_expect_str_eq(allow, "POST");
	free_request(&req, env);
	idem_router_free(r);
}

/* A HEAD is answered by the GET route of its path, unless a HEAD route
 * matches; Allow lists HEAD wherever GET is allowed, once. */
Test(router, head_answered_by_get)
{
	idem_router *r = sample();
	idem_request req;
	char *env[3], allow[64];

	make_request(&req, env, "HEAD", "/accounts/a");
	cr_assert_eq(idem_router_match(r, &req, allow, sizeof(allow)), IDEM_OK);
	cr_expect_str_eq(req.route->method, "GET");
	cr_expect_str_eq(req.route->tmpl, "/accounts/{id}");
	cr_expect_str_eq(idem_request_param(&req, "id"), "a");
	free_request(&req, env);

	make_request(&req, env, "HEAD", "/accounts/special");
	cr_assert_eq(idem_router_match(r, &req, allow, sizeof(allow)), IDEM_OK);
	cr_expect_eq(req.route->data, (void *)1);
	free_request(&req, env);

	make_request(&req, env, "HEAD", "/accounts/a/deposit");
	cr_assert_eq(idem_router_match(r, &req, allow, sizeof(allow)),
	    IDEM_ERR_INVALID);
	cr_expect_str_eq(allow, "POST");
	free_request(&req, env);

	cr_assert_eq(idem_router_add(r, "HEAD", "/accounts/{id}",
	    IDEM_POLICY_OFF, h1, (void *)3, "t"), IDEM_OK);
	make_request(&req, env, "HEAD", "/accounts/a");
	cr_assert_eq(idem_router_match(r, &req, allow, sizeof(allow)), IDEM_OK);
	cr_expect_eq(req.route->data, (void *)3);
	free_request(&req, env);
	make_request(&req, env, "POST", "/accounts/a");
	cr_assert_eq(idem_router_match(r, &req, allow, sizeof(allow)),
	    IDEM_ERR_INVALID);
	cr_expect_str_eq(allow, "GET, HEAD, PUT");
	free_request(&req, env);
	idem_router_free(r);
}

/* A GET route its plugin made keyed is not run by HEAD (issue 12, 13). */
Test(router, head_not_by_a_keyed_get)
{
	idem_router *r = idem_router_new();
	idem_request req;
	char *env[3], allow[64];

	cr_assert_eq(idem_router_add(r, "GET", "/g/required",
	    IDEM_POLICY_REQUIRED, h1, NULL, "t"), IDEM_OK);
	cr_assert_eq(idem_router_add(r, "GET", "/g/plain",
	    IDEM_POLICY_DEFAULT, h1, NULL, "t"), IDEM_OK);
	make_request(&req, env, "HEAD", "/g/required");
	cr_expect_eq(idem_router_match(r, &req, allow, sizeof(allow)),
	    IDEM_ERR_INVALID);
	cr_expect_str_eq(allow, "GET");
	free_request(&req, env);
	make_request(&req, env, "HEAD", "/g/plain");
	cr_expect_eq(idem_router_match(r, &req, allow, sizeof(allow)), IDEM_OK);
	free_request(&req, env);
	idem_router_free(r);
}

Test(router, bad_templates)
{
	static const char *const bad[] = { "", "x", "no/slash", "/a//b", "/a/",
	    "/{", "/{}", "/{x", "/x}", "/a{x}", "/{x}/{x}", "/{a-b}" };
	idem_router *r = idem_router_new();
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(idem_router_add(r, "GET", bad[i], IDEM_POLICY_OFF,
		    h1, NULL, "t"), IDEM_ERR_INVALID, "accepted \"%s\"", bad[i]);
	cr_expect_eq(idem_router_add(r, "get", "/x", IDEM_POLICY_OFF, h1, NULL,
	    "t"), IDEM_ERR_INVALID);
	cr_expect_eq(idem_router_add(r, "", "/x", IDEM_POLICY_OFF, h1, NULL,
	    "t"), IDEM_ERR_INVALID);
	cr_expect_eq(idem_router_add(r, "GET", "/x", IDEM_POLICY_OFF, NULL,
	    NULL, "t"), IDEM_ERR_INVALID);
	cr_expect_eq(idem_router_add(r, "GET", "/x", (idem_policy)99, h1,
	    NULL, "t"), IDEM_ERR_INVALID);
	cr_expect_eq(idem_router_count(r), 0);
	idem_router_free(r);
}

Test(router, duplicates)
{
	idem_router *r = sample();

	cr_expect_eq(idem_router_add(r, "GET", "/accounts/{other}",
	    IDEM_POLICY_OFF, h1, NULL, "u"), IDEM_ERR_EXISTS);
	cr_expect_eq(idem_router_add(r, "POST", "/accounts/{id}",
	    IDEM_POLICY_OFF, h1, NULL, "u"), IDEM_OK);
	idem_router_free(r);
}
