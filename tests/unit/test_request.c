/*
 * test_request.c - FastCGI params and bodies into requests; responses.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "idem_request.h"

/* Bodies come 7 bytes a read: short reads must be handled. */
#define read_str harness_read_body

static idem_err
parse(idem_request *req, char *const *env, const char *mount,
    idem_problem *pb)
{
	idem_request_limits lim = { mount, 5, 100, 8192, 0 };

	memset(pb, 0, sizeof(*pb));
	return idem_request_parse(req, env, &lim, pb);
}

Test(request, basics)
{
	char *env[] = { "REQUEST_METHOD=POST",
	    "REQUEST_URI=/api/accounts/a/deposit?x=1",
	    "QUERY_STRING=x=1", "CONTENT_LENGTH=12",
	    "CONTENT_TYPE=application/json",
	    "HTTP_IDEMPOTENCY_KEY=k-1", "REMOTE_USER=alice",
	    "HTTP_X_REQUEST_ID=abc-123", NULL };
	idem_request req;
	idem_problem pb;

	cr_assert_eq(parse(&req, env, "/api", &pb), IDEM_OK, "%s", pb.detail);
	cr_expect_str_eq(idem_request_method(&req), "POST");
	cr_expect_str_eq(idem_request_path(&req), "/accounts/a/deposit");
	cr_expect_str_eq(idem_request_query(&req), "x=1");
	cr_expect_str_eq(idem_request_header(&req, "idempotency-key"), "k-1");
	cr_expect_str_eq(idem_request_header(&req, "Content-Type"),
	    "application/json");
	cr_expect_str_eq(idem_request_header(&req, "content-length"), "12");
	cr_expect_null(idem_request_header(&req, "X-Missing"));
	cr_expect_str_eq(idem_request_remote_user(&req), "alice");
	cr_expect_str_eq(idem_request_id(&req), "abc-123");
	cr_expect_eq(req.content_length, 12);
	cr_expect_eq(req.nsegs, 3);
	idem_request_clear(&req);
}

Test(request, mount_prefix)
{
	static const struct { const char *uri, *path; } cases[] = {
		{ "REQUEST_URI=/api/x", "/x" },
		{ "REQUEST_URI=/api", "/" },
		{ "REQUEST_URI=/api/", "/" },
		{ "REQUEST_URI=/api?q", "/" },
		{ "REQUEST_URI=/apix/y", "/apix/y" },
		{ "REQUEST_URI=/other", "/other" },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *env[] = { "REQUEST_METHOD=GET", (char *)cases[i].uri, NULL };
		idem_request req;
		idem_problem pb;
		cr_assert_eq(parse(&req, env, "/api", &pb), IDEM_OK);
		cr_expect_str_eq(req.path, cases[i].path, "%s gave %s",
		    cases[i].uri, req.path);
		idem_request_clear(&req);
	}
}

Test(request, path_info_wins)
{
	char *env[] = { "REQUEST_METHOD=GET", "REQUEST_URI=/app/a%20b",
	    "SCRIPT_NAME=/app", "PATH_INFO=/a b", NULL };
	idem_request req;
	idem_problem pb;

	cr_assert_eq(parse(&req, env, "", &pb), IDEM_OK);
	cr_expect_str_eq(req.path, "/a b");
	cr_expect_str_eq(req.segs[0], "a b");
	idem_request_clear(&req);
}

/* [server] path-source = request-uri: the route is REQUEST_URI less the
 * mount, decoded segment by segment, even with PATH_INFO set (lighttpd
 * turns %1F into '_' there, and every server %2F into '/'). */
Test(request, path_from_request_uri)
{
	char *env[] = { "REQUEST_METHOD=GET",
	    "REQUEST_URI=/cat/v1/namespaces/a%1Fb%2Fc?x=1",
	    "SCRIPT_NAME=/cat", "PATH_INFO=/v1/namespaces/a_b/c", NULL };
	idem_request_limits lim = { "/cat", 5, 100, 8192, 1 };
	idem_request req;
	idem_problem pb;

	cr_assert_eq(idem_request_parse(&req, env, &lim, &pb), IDEM_OK, "%s",
	    pb.detail);
	cr_expect_eq(req.nsegs, 3);
	cr_expect_str_eq(req.segs[2], "a\x1f" "b/c");
	cr_expect_str_eq(idem_request_script_name(&req), "/cat");
	idem_request_clear(&req);
}

/* nginx's "fastcgi_param PATH_INFO $fastcgi_path_info" without a
 * fastcgi_split_path_info sends PATH_INFO empty and SCRIPT_NAME the whole
 * path: an empty PATH_INFO is absent, the route is REQUEST_URI less the
 * mount. */
/* What each web server passes (PLATFORM.md, conf/), and the prefix a
 * handler puts before its own path to build a Location. */
Test(request, script_name)
{
	static const struct {
		const char *sn, *pi, *uri, *mount, *want, *path;
	} cases[] = {
		/* lighttpd, Apache with ProxyFCGISetEnvIf, mod_fcgid */
		{ "/api", "/notes", "/api/notes", NULL, "/api", "/notes" },
		{ "/fcgid", "/a b", "/fcgid/a%20b", "/api", "/fcgid", "/a b" },
		/* nginx with fastcgi_split_path_info, no mount */
		{ "/svc/v1", "/notes", "/svc/v1/notes", NULL, "/svc/v1",
		    "/notes" },
		/* nginx without a split: SCRIPT_NAME is the whole path */
		{ "/api/notes", "", "/api/notes", "/api", "/api", "/notes" },
		/* Apache mod_proxy_fcgi alone: no PATH_INFO */
		{ "/api/notes", NULL, "/api/notes?x", "/api", "/api",
		    "/notes" },
		{ "/api", NULL, "/api", "/api", "/api", "/" },
		/* the mount not matched, or none: at the root */
		{ "/other/x", NULL, "/other/x", "/api", "", "/other/x" },
		{ NULL, NULL, "/notes", NULL, "", "/notes" },
		{ NULL, "/notes", "/notes", NULL, "", "/notes" },
		{ "", "/notes", "/notes", NULL, "", "/notes" },
		/* made a URI path: one '/', none at the end, bytes encoded
		 * ('%' as sent) */
		{ "/", "/notes", "/notes", NULL, "", "/notes" },
		{ "//evil.example//x/", "/n", "//evil.example//x//n", NULL,
		    "/evil.example/x", "/n" },
		{ "/my app/\xc3\xa9\"<x>", "/n", "/x", NULL,
		    "/my%20app/%C3%A9%22%3Cx%3E", "/n" },
		{ "/a%20b/c;v=1/@:~", "/n", "/x", NULL, "/a%20b/c;v=1/@:~",
		    "/n" },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char sn[128], pi[128], uri[128];
		char *env[5] = { "REQUEST_METHOD=GET", uri, NULL, NULL, NULL };
		int n = 2;
		idem_request req;
		idem_problem pb;

		snprintf(uri, sizeof(uri), "REQUEST_URI=%s", cases[i].uri);
		if (cases[i].sn != NULL) {
			snprintf(sn, sizeof(sn), "SCRIPT_NAME=%s", cases[i].sn);
			env[n++] = sn;
		}
		if (cases[i].pi != NULL) {
			snprintf(pi, sizeof(pi), "PATH_INFO=%s", cases[i].pi);
			env[n++] = pi;
		}
		cr_assert_eq(parse(&req, env, cases[i].mount, &pb), IDEM_OK,
		    "case %zu: %s", i, pb.detail);
		cr_expect_str_eq(idem_request_script_name(&req), cases[i].want,
		    "case %zu: %s", i, idem_request_script_name(&req));
		cr_expect_str_eq(idem_request_path(&req), cases[i].path,
		    "case %zu", i);
		idem_request_clear(&req);
	}
}

/* A SCRIPT_NAME that is not a path (RFC 3875: "" or "/..."), beside
 * PATH_INFO, cannot be a prefix of the URL: 400, not a Location made up. */
Test(request, script_name_not_a_path)
{
	char *env[] = { "REQUEST_METHOD=POST", "REQUEST_URI=/api/notes",
	    "SCRIPT_NAME=api", "PATH_INFO=/notes", NULL };
	idem_request req;
	idem_problem pb;

	cr_assert_eq(parse(&req, env, NULL, &pb), IDEM_ERR_PROTOCOL);
	cr_expect_eq(pb.status, 400);
	cr_expect_str_eq(pb.code, "BAD_PATH");
	cr_expect(strstr(pb.detail, "SCRIPT_NAME") != NULL, "%s", pb.detail);
	idem_request_clear(&req);
}

Test(request, empty_path_info_is_absent)
{
	char *env[] = { "REQUEST_METHOD=POST",
	    "REQUEST_URI=/api/accounts/a%2Db/deposit?x=1",
	    "SCRIPT_NAME=/api/accounts/a-b/deposit", "PATH_INFO=", NULL };
	idem_request req;
	idem_problem pb;

	cr_assert_eq(parse(&req, env, "/api", &pb), IDEM_OK);
	cr_expect_str_eq(req.path, "/accounts/a-b/deposit");
	idem_request_clear(&req);
}

Test(request, escaped_slash_stays_in_segment)
{
	char *env[] = { "REQUEST_METHOD=GET", "REQUEST_URI=/x/a%2Fb/%41", NULL };
	idem_request req;
	idem_problem pb;

	cr_assert_eq(parse(&req, env, "", &pb), IDEM_OK);
	cr_assert_eq(req.nsegs, 3);
	cr_expect_str_eq(req.segs[1], "a/b");
	cr_expect_str_eq(req.segs[2], "A");
	idem_request_clear(&req);
}

Test(request, refused)
{
	static const struct {
		const char *a, *b, *c;
		int status;
		const char *code;
	} cases[] = {
		{ "REQUEST_URI=/x", NULL, NULL, 400, "BAD_REQUEST" },
		{ "REQUEST_METHOD=", "REQUEST_URI=/x", NULL, 400, "BAD_REQUEST" },
		{ "REQUEST_METHOD=get", "REQUEST_URI=/x", NULL, 400, "BAD_REQUEST" },
		{ "REQUEST_METHOD=GET", NULL, NULL, 400, "BAD_REQUEST" },
		{ "REQUEST_METHOD=GET", "REQUEST_URI=x", NULL, 400, "BAD_REQUEST" },
		{ "REQUEST_METHOD=GET", "REQUEST_URI=/%zz", NULL, 400, "BAD_PATH" },
		{ "REQUEST_METHOD=GET", "REQUEST_URI=/a%4", NULL, 400, "BAD_PATH" },
		{ "REQUEST_METHOD=GET", "REQUEST_URI=/a%", NULL, 400, "BAD_PATH" },
		{ "REQUEST_METHOD=GET", "REQUEST_URI=/a%00b", NULL, 400, "BAD_PATH" },
		{ "REQUEST_METHOD=GET", "PATH_INFO=x", NULL, 400, "BAD_PATH" },
		{ "REQUEST_METHOD=POST", "REQUEST_URI=/x", "CONTENT_LENGTH=12a",
		    400, "BAD_CONTENT_LENGTH" },
		{ "REQUEST_METHOD=POST", "REQUEST_URI=/x", "CONTENT_LENGTH=-1",
		    400, "BAD_CONTENT_LENGTH" },
		{ "REQUEST_METHOD=POST", "REQUEST_URI=/x",
		    "CONTENT_LENGTH=99999999999999999999999", 400,
		    "BAD_CONTENT_LENGTH" },
		{ "REQUEST_METHOD=GET",
		    "REQUEST_URI=/1/2/3/4/5/6/7/8/9/10/11/12/13/14/15/16/17/18/19/"
		    "20/21/22/23/24/25/26/27/28/29/30/31/32/33", NULL, 404,
		    "ROUTE_NOT_FOUND" },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *env[] = { (char *)cases[i].a, (char *)cases[i].b,
		    (char *)cases[i].c, NULL };
		idem_request req;
		idem_problem pb;
		if (env[1] == NULL)
			env[1] = env[2];
		cr_expect_eq(parse(&req, env, "", &pb), IDEM_ERR_PROTOCOL,
		    "case %zu accepted", i);
		cr_expect_eq(pb.status, cases[i].status, "case %zu: %d", i,
		    pb.status);
		cr_expect_str_eq(pb.code, cases[i].code, "case %zu", i);
		cr_expect_neq(req.request_id[0], '\0');
		idem_request_clear(&req);
	}
}

Test(request, long_path)
{
	char *uri = malloc(IDEM_MAX_PATH + 32);
	char *env[] = { "REQUEST_METHOD=GET", uri, NULL };
	idem_request req;
	idem_problem pb;

	strcpy(uri, "REQUEST_URI=/");
	memset(uri + 13, 'a', IDEM_MAX_PATH + 1);
	uri[13 + IDEM_MAX_PATH + 1] = '\0';
	cr_expect_eq(parse(&req, env, "", &pb), IDEM_ERR_PROTOCOL);
	cr_expect_eq(pb.status, 414);
	idem_request_clear(&req);
	free(uri);
}

Test(request, request_id)
{
	char *good[] = { "REQUEST_METHOD=GET", "REQUEST_URI=/",
	    "HTTP_X_REQUEST_ID=Root=1-5f84c7a9;x", NULL };
	char *longid[] = { "REQUEST_METHOD=GET", "REQUEST_URI=/",
	    "HTTP_X_REQUEST_ID=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	    "aaaaaaaaaaaaaaaaa", NULL };
	char *ctl[] = { "REQUEST_METHOD=GET", "REQUEST_URI=/",
	    "HTTP_X_REQUEST_ID=a\nb", NULL };
	idem_request req;
	idem_problem pb;

	/* ';' is not allowed: a fresh UUID replaces it */
	cr_assert_eq(parse(&req, good, "", &pb), IDEM_OK);
	cr_expect_eq(strlen(req.request_id), 36);
	idem_request_clear(&req);
	cr_assert_eq(parse(&req, longid, "", &pb), IDEM_OK);
	cr_expect_eq(strlen(req.request_id), 36);
	idem_request_clear(&req);
	cr_assert_eq(parse(&req, ctl, "", &pb), IDEM_OK);
	cr_expect_eq(strlen(req.request_id), 36);
	cr_expect_null(strchr(req.request_id, '\n'));
	idem_request_clear(&req);
}

Test(body, exact_length)
{
	char *env[] = { "REQUEST_METHOD=POST", "REQUEST_URI=/",
	    "CONTENT_LENGTH=20", NULL };
	harness_body r = { "0123456789abcdefghijEXTRA", 25, 0, 7, 0 };
	idem_request req;
	idem_problem pb;
	size_t len;

	cr_assert_eq(parse(&req, env, "", &pb), IDEM_OK);
	cr_assert_eq(idem_request_read_body(&req, 1024, read_str, &r, &pb),
	    IDEM_OK);
	cr_expect_str_eq(idem_request_body(&req, &len), "0123456789abcdefghij");
	cr_expect_eq(len, 20);
	cr_expect_eq(r.pos, 20, "read past CONTENT_LENGTH");
	idem_request_clear(&req);
}

Test(body, content_length_lies)
{
	char *env[] = { "REQUEST_METHOD=POST", "REQUEST_URI=/",
	    "CONTENT_LENGTH=100", NULL };
	harness_body r = { "short", 5, 0, 7, 0 };
	idem_request req;
	idem_problem pb;

	cr_assert_eq(parse(&req, env, "", &pb), IDEM_OK);
	cr_expect_eq(idem_request_read_body(&req, 1024, read_str, &r, &pb),
	    IDEM_ERR_PROTOCOL);
	cr_expect_eq(pb.status, 400);
	cr_expect_str_eq(pb.code, "BODY_INCOMPLETE");
	idem_request_clear(&req);
}

Test(body, too_large_is_not_read)
{
	char *env[] = { "REQUEST_METHOD=POST", "REQUEST_URI=/",
	    "CONTENT_LENGTH=1025", NULL };
	harness_body r = { "x", 1, 0, 7, 0 };
	idem_request req;
	idem_problem pb;

	cr_assert_eq(parse(&req, env, "", &pb), IDEM_OK);
	cr_expect_eq(idem_request_read_body(&req, 1024, read_str, &r, &pb),
	    IDEM_ERR_TOO_LARGE);
	cr_expect_eq(pb.status, 413);
	cr_expect_str_eq(pb.code, "BODY_TOO_LARGE");
	cr_expect_eq(r.calls, 0);
	cr_expect_null(req.body);
	idem_request_clear(&req);
}

Test(body, none)
{
	char *env[] = { "REQUEST_METHOD=POST", "REQUEST_URI=/", NULL };
	harness_body r = { "", 0, 0, 7, 0 };
	idem_request req;
	idem_problem pb;
	size_t len = 9;

	cr_assert_eq(parse(&req, env, "", &pb), IDEM_OK);
	cr_assert_eq(idem_request_read_body(&req, 1024, read_str, &r, &pb),
	    IDEM_OK);
	cr_expect_str_eq(idem_request_body(&req, &len), "");
	cr_expect_eq(len, 0);
	idem_request_clear(&req);
}

/* An idem_read_fn that fails after the data of a harness_body. */
static ssize_t
read_then_fail(void *ctx, char *buf, size_t len)
{
	harness_body *b = ctx;

	return b->pos < b->len ? harness_read_body(ctx, buf, len) : -1;
}

/* Without CONTENT_LENGTH (or with an empty one) the body is read to its
 * end, never taken as empty. */
Test(body, no_content_length_read_to_end)
{
	char *absent[] = { "REQUEST_METHOD=POST", "REQUEST_URI=/", NULL };
	char *empty[] = { "REQUEST_METHOD=POST", "REQUEST_URI=/",
	    "CONTENT_LENGTH=", NULL };
	char *const *envs[] = { absent, empty };
	char *big = malloc(100000);
	idem_request req;
	idem_problem pb;
	size_t len, i;

	memset(big, 'b', 100000);
	for (i = 0; i < 2; i++) {
		harness_body r = { "0123456789abcdefghij", 20, 0, 7, 0 };
		harness_body rb = { big, 100000, 0, 0, 0 };
		cr_assert_eq(parse(&req, envs[i], "", &pb), IDEM_OK);
		cr_assert_eq(idem_request_read_body(&req, 1024, read_str, &r,
		    &pb), IDEM_OK, "%s", pb.detail);
		cr_expect_str_eq(idem_request_body(&req, &len),
		    "0123456789abcdefghij");
		cr_expect_eq(len, 20);
		idem_request_clear(&req);
		/* exactly max-body bytes, in reads of any size */
		cr_assert_eq(parse(&req, envs[i], "", &pb), IDEM_OK);
		cr_assert_eq(idem_request_read_body(&req, 100000, read_str, &rb,
		    &pb), IDEM_OK, "%s", pb.detail);
		cr_expect_eq(req.body_len, 100000);
		cr_expect_eq(memcmp(req.body, big, 100000), 0);
		cr_expect_eq(req.body[100000], '\0');
		idem_request_clear(&req);
	}
	free(big);
}

Test(body, no_content_length_over_max_body)
{
	char *env[] = { "REQUEST_METHOD=POST", "REQUEST_URI=/", NULL };
	char *big = malloc(5000);
	harness_body r = { big, 5000, 0, 7, 0 };
	idem_request req;
	idem_problem pb;

	memset(big, 'x', 5000);
	cr_assert_eq(parse(&req, env, "", &pb), IDEM_OK);
	cr_expect_eq(idem_request_read_body(&req, 1024, read_str, &r, &pb),
	    IDEM_ERR_TOO_LARGE);
	cr_expect_eq(pb.status, 413);
	cr_expect_str_eq(pb.code, "BODY_TOO_LARGE");
	cr_expect_null(req.body);
	cr_expect_leq(r.pos, 1025 + 7, "read %zu bytes past max-body", r.pos);
	/* the rest is drained, as with a CONTENT_LENGTH over max-body */
	idem_request_drain_body(&req, 1 << 20, read_str, &r);
	cr_expect_eq(r.pos, 5000);
	idem_request_clear(&req);
	free(big);
}

Test(body, no_content_length_read_error)
{
	char *env[] = { "REQUEST_METHOD=POST", "REQUEST_URI=/", NULL };
	harness_body r = { "partial", 7, 0, 3, 0 };
	idem_request req;
	idem_problem pb;

	cr_assert_eq(parse(&req, env, "", &pb), IDEM_OK);
	cr_expect_eq(idem_request_read_body(&req, 1024, read_then_fail, &r,
	    &pb), IDEM_ERR_PROTOCOL);
	cr_expect_eq(pb.status, 400);
	cr_expect_str_eq(pb.code, "BODY_INCOMPLETE");
	idem_request_clear(&req);
}

Test(response, head_and_body)
{
	idem_response res;
	char *head;
	size_t len;

	idem_response_init(&res);
	cr_assert_eq(idem_response_json(&res, 201, json_pack("{s:i}", "a", 1)),
	    IDEM_OK);
	cr_assert_eq(idem_response_header(&res, "X-Thing", "v 1"), IDEM_OK);
	head = idem_response_head(&res, "rid", &len);
	cr_assert_not_null(head);
	cr_expect_str_eq(head, "Status: 201 Created\r\n"
	    "Content-Type: application/json\r\nX-Thing: v 1\r\n"
	    "X-Request-Id: rid\r\nContent-Length: 7\r\n\r\n");
	cr_expect_eq(len, strlen(head));
	cr_expect_eq(res.len, 7);
	cr_expect_eq(memcmp(res.body, "{\"a\":1}", 7), 0);
	free(head);
	idem_response_clear(&res);
	cr_expect_eq(res.status, 200);
	cr_expect_eq(res.nheaders, 0);
}

Test(response, header_injection_refused)
{
	idem_response res;

	idem_response_init(&res);
	cr_expect_eq(idem_response_header(&res, "X-A", "a\r\nSet-Cookie: x"),
	    IDEM_ERR_INVALID);
	cr_expect_eq(idem_response_header(&res, "X-A", "a\nb"),
	    IDEM_ERR_INVALID);
	cr_expect_eq(idem_response_header(&res, "X A", "a"), IDEM_ERR_INVALID);
	cr_expect_eq(idem_response_header(&res, "", "a"), IDEM_ERR_INVALID);
	cr_expect_eq(idem_response_header(&res, "X:A", "a"), IDEM_ERR_INVALID);
	cr_expect_eq(idem_response_header(&res, "Status", "200"),
	    IDEM_ERR_INVALID);
	cr_expect_eq(idem_response_header(&res, "content-length", "2"),
	    IDEM_ERR_INVALID);
	cr_expect_eq(idem_response_status(&res, 99), IDEM_ERR_INVALID);
	cr_expect_eq(idem_response_status(&res, 600), IDEM_ERR_INVALID);
	cr_expect_eq(res.nheaders, 0);
	idem_response_clear(&res);
}

Test(response, header_limit)
{
	idem_response res;
	int i;

	idem_response_init(&res);
	for (i = 0; i < IDEM_MAX_HEADERS; i++)
		cr_assert_eq(idem_response_header(&res, "X-N", "v"), IDEM_OK);
	cr_expect_eq(idem_response_header(&res, "X-N", "v"),
	    IDEM_ERR_TOO_LARGE);
	idem_response_clear(&res);
}

Test(response, problem)
{
	idem_response res;
	json_t *j;
	json_error_t e;

	idem_response_init(&res);
	cr_assert_eq(idem_response_problem(&res, 409, "INSUFFICIENT_FUNDS",
	    "d \"q\""), IDEM_OK);
	cr_expect_eq(res.status, 409);
	cr_expect_str_eq(idem_response_get_header(&res, "content-type"),
	    "application/problem+json");
	j = json_loadb(res.body, res.len, 0, &e);
	cr_assert_not_null(j);
	cr_expect_eq(json_integer_value(json_object_get(j, "status")), 409);
	cr_expect_str_eq(json_string_value(json_object_get(j, "title")),
	    "Conflict");
	cr_expect_str_eq(json_string_value(json_object_get(j, "code")),
	    "INSUFFICIENT_FUNDS");
	cr_expect_str_eq(json_string_value(json_object_get(j, "detail")),
	    "d \"q\"");
	json_decref(j);
	idem_response_clear(&res);
}

Test(request, header_limits)
{
	char big[200], huge[9300];
	char *many[] = { "REQUEST_METHOD=GET", "REQUEST_URI=/", "HTTP_A=1",
	    "HTTP_B=1", "HTTP_C=1", "HTTP_D=1", "HTTP_E=1", "HTTP_F=1", NULL };
	char *five[] = { "REQUEST_METHOD=GET", "REQUEST_URI=/", "HTTP_A=1",
	    "HTTP_B=1", "HTTP_C=1", "HTTP_D=1", "HTTP_E=1", NULL };
	char *one_big[] = { "REQUEST_METHOD=GET", "REQUEST_URI=/", big, NULL };
	char *all_big[] = { "REQUEST_METHOD=GET", "REQUEST_URI=/", huge, NULL };
	idem_request req;
	idem_problem pb;

	snprintf(big, sizeof(big), "HTTP_X_BIG=%0150d", 1);
	snprintf(huge, sizeof(huge), "SERVER_THING=%09000d", 1);
	cr_expect_eq(parse(&req, many, "", &pb), IDEM_ERR_PROTOCOL);
	cr_expect_eq(pb.status, 431);
	cr_expect_str_eq(pb.code, "HEADERS_TOO_LARGE");
	idem_request_clear(&req);
	cr_expect_eq(parse(&req, five, "", &pb), IDEM_OK);
	idem_request_clear(&req);
	cr_expect_eq(parse(&req, one_big, "", &pb), IDEM_ERR_PROTOCOL);
	cr_expect_eq(pb.status, 431);
	idem_request_clear(&req);
	cr_expect_eq(parse(&req, all_big, "", &pb), IDEM_ERR_PROTOCOL);
	cr_expect_eq(pb.status, 431);
	idem_request_clear(&req);
}

/* A path refused halfway is still a string (the access log prints it). */
Test(request, refused_path_is_terminated)
{
	char *env[] = { "REQUEST_METHOD=GET", "REQUEST_URI=/abc/de%00f", NULL };
	idem_request req;
	idem_problem pb;

	cr_expect_eq(parse(&req, env, "", &pb), IDEM_ERR_PROTOCOL);
	cr_assert_not_null(req.path);
	cr_expect_lt(strlen(req.path), 20);
	idem_request_clear(&req);
}
