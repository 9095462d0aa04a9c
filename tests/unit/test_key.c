/*
 * test_key.c - Idempotency-Key parsing and the parts of the fingerprint.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "idem_config_keys.h"
#include "idem_key.h"
#include "idem_request.h"
#include "idem_router.h"

/* Parses header under fmt; returns the key, or NULL when refused. */
static const char *
parse(idem_key_format fmt, const char *header)
{
	static char out[IDEM_KEY_MAX + 1];
	size_t len = 99;

	if (idem_key_parse(fmt, header, out, &len) != IDEM_OK) {
		cr_expect_eq(len, 0);
		cr_expect_str_eq(out, "");
		return NULL;
	}
	cr_expect_eq(len, strlen(out));
	return out;
}

Test(key, uuid_lower_cased)
{
	static const char *const fmts[] = { "uuid", "uuidv7" };
	idem_key_format f[] = { IDEM_KEY_UUID, IDEM_KEY_UUIDV7 };
	const char *want = "0190f2a4-8c3e-7d5a-9b7c-12345678abcd", *k;
	size_t i;

	for (i = 0; i < 2; i++) {
		k = parse(f[i], "0190F2A4-8C3E-7D5A-9B7C-12345678ABCD");
		cr_assert_not_null(k, "%s", fmts[i]);
		cr_expect_str_eq(k, want, "%s", fmts[i]);
		k = parse(f[i], "0190f2a4-8C3e-7d5A-9b7c-12345678aBcD");
		cr_expect_str_eq(k, want, "%s", fmts[i]);
	}
	/* opaque keys stay byte for byte */
	cr_expect_str_eq(parse(IDEM_KEY_OPAQUE,
	    "0190F2A4-8C3E-7D5A-9B7C-12345678ABCD"),
	    "0190F2A4-8C3E-7D5A-9B7C-12345678ABCD");
	cr_expect_str_eq(parse(IDEM_KEY_OPAQUE, "AbC"), "AbC");
	cr_expect_null(parse(IDEM_KEY_UUID,
	    "0190F2A4-8C3E-7D5A-9B7C-12345678ABCG"));
	cr_expect_null(parse(IDEM_KEY_UUIDV7,
	    "0190F2A4-8C3E-4D5A-9B7C-12345678ABCD"));
}

Test(key, bare_token)
{
	char k[300];

	cr_expect_str_eq(parse(IDEM_KEY_OPAQUE, "k-1"), "k-1");
	/* white space around the value is not part of it (RFC 9110) */
	cr_expect_str_eq(parse(IDEM_KEY_OPAQUE, " \tk-1\t "), "k-1");
	cr_expect_null(parse(IDEM_KEY_OPAQUE, ""));
	cr_expect_null(parse(IDEM_KEY_OPAQUE, "  "));
	cr_expect_null(parse(IDEM_KEY_OPAQUE, "a b"));
	cr_expect_null(parse(IDEM_KEY_OPAQUE, "a\x7f"));
	cr_expect_null(parse(IDEM_KEY_OPAQUE, "caf\xc3\xa9"));
	cr_expect_null(parse(IDEM_KEY_OPAQUE, NULL));
	memset(k, 'k', sizeof(k));
	k[256] = '\0';
	cr_expect_null(parse(IDEM_KEY_OPAQUE, k));
	k[255] = '\0';
	cr_expect_str_eq(parse(IDEM_KEY_OPAQUE, k), k);
}

/* The draft's syntax: an RFC 8941 sf-string, or a bare token. */
Test(key, sf_string)
{
	static const struct {
		const char *header, *key;   /* key NULL: refused */
	} cases[] = {
		{ "\"k-1\"", "k-1" },
		{ "  \"k-1\" \t", "k-1" },
		{ "\"a\\\"b\\\\c\"", "a\"b\\c" },
		{ "a\"b", "a\"b" },           /* a bare token may hold quotes */
		{ "\"", NULL },               /* unterminated */
		{ "\"abc", NULL },
		{ "\"abc\\\"", NULL },        /* the last quote is escaped */
		{ "\"a\\b\"", NULL },         /* only \" and \\ escape */
		{ "\"a\\", NULL },
		{ "\"abc\"d", NULL },         /* after the closing quote */
		{ "\"abc\" \"d\"", NULL },
		{ "\"abc\";x=1", NULL },
		{ "\"\"", NULL },             /* empty */
		{ "\"a b\"", NULL },          /* decoded: no space in opaque */
		{ "\"a\tb\"", NULL },         /* not printable ASCII */
		{ "\"caf\xc3\xa9\"", NULL },
		{ "\"a\x7f\"", NULL },
	};
	char k[300];
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *got = parse(IDEM_KEY_OPAQUE, cases[i].header);
		if (cases[i].key == NULL)
			cr_expect_null(got, "[%s] gave [%s]", cases[i].header,
			    got);
		else
			cr_expect(got != NULL && strcmp(got, cases[i].key) == 0,
			    "[%s] gave [%s]", cases[i].header, got);
	}
	cr_expect_str_eq(parse(IDEM_KEY_UUIDV7,
	    "\"0190F2A4-8C3E-7D5A-9B7C-123456789ABC\""),
	    "0190f2a4-8c3e-7d5a-9b7c-123456789abc");
	cr_expect_null(parse(IDEM_KEY_UUID,
	    "\"0190f2a4-8c3e-7d5a-9b7c-123456789abc"));
	/* 1 to 255 bytes once decoded: an escape counts once */
	k[0] = '"';
	memset(k + 1, 'k', 256);
	strcpy(k + 257, "\"");
	cr_expect_null(parse(IDEM_KEY_OPAQUE, k));
	strcpy(k + 256, "\"");
	cr_expect_eq(strlen(parse(IDEM_KEY_OPAQUE, k)), 255);
	memset(k + 1, 'k', 256);
	memcpy(k + 1, "\\\\", 2);
	strcpy(k + 257, "\"");
	cr_expect_eq(strlen(parse(IDEM_KEY_OPAQUE, k)), 255);
	cr_expect_eq(parse(IDEM_KEY_OPAQUE, k)[0], '\\');
}

Test(canonical, query_sorted_by_name_values_in_order)
{
	static const char *const cases[][2] = {
		{ "b=2&a=1&&c", "a=1&b=2&c" },
		{ "tag=y&tag=x", "tag=y&tag=x" },
		{ "tag=x&b=1&tag=y&a", "a&b=1&tag=x&tag=y" },
		{ "t=2&tag=1&t=1", "t=2&t=1&tag=1" },
		{ "a=&a&a=1", "a=&a&a=1" },
		/* one name however it is spelled: its values keep their order
		 * (a handler that decodes names reads tag=[x,y] in both) */
		{ "tag=x&t%61g=y", "tag=x&t%61g=y" },
		{ "t%61g=y&tag=x", "t%61g=y&tag=x" },
		{ "b=1&a+b=2&a%20b=3", "a+b=2&a%20b=3&b=1" },
		{ "z=1&%41=3&%zz=2", "%zz=2&%41=3&z=1" },
		{ "", "" },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *c = idem_query_canonical(cases[i][0]);
		cr_assert_not_null(c);
		cr_expect_str_eq(c, cases[i][1], "[%s]", cases[i][0]);
		free(c);
	}
}

Test(canonical, media_type)
{
	static const struct {
		const char *in, *out;
		int json;
	} cases[] = {
		{ NULL, "", 0 },
		{ "", "", 0 },
		{ "application/json", "application/json", 1 },
		{ " Application/JSON \t", "application/json", 1 },
		{ "application/json; charset=UTF-8",
		    "application/json;charset=utf-8", 1 },
		{ "application/json ;charset=UTF-8 ; x=1",
		    "application/json;charset=utf-8;x=1", 1 },
		/* parameter names and a charset are case-insensitive; empty
		 * parameters are nothing; other values are as sent */
		{ "Text/Plain; Charset=\"UTF-8\"; Level=A",
		    "text/plain;charset=\"utf-8\";level=A", 0 },
		{ "application/json;", "application/json", 1 },
		{ "application/json; ;x=1;", "application/json;x=1", 1 },
		{ "application/problem+json", "application/problem+json", 1 },
		{ "Application/Vnd.Api+JSON;v=2",
		    "application/vnd.api+json;v=2", 1 },
		{ "text/plain", "text/plain", 0 },
		{ "application/jsonx", "application/jsonx", 0 },
		{ "application/json-seq", "application/json-seq", 0 },
		{ "+json", "+json", 0 },
		{ "text/plain; x=\"a ; b\" ", "text/plain;x=\"a ; b\"", 0 },
		{ "text/plain; x=\"a\\\" ; b\"",
		    "text/plain;x=\"a\\\" ; b\"", 0 },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int json = -1;
		char *m = idem_media_type(cases[i].in, &json);
		cr_assert_not_null(m);
		cr_expect_str_eq(m, cases[i].out, "[%s]", cases[i].in);
		cr_expect_eq(json, cases[i].json, "[%s]", cases[i].in);
		free(m);
	}
}

/* Two JSON texts whose numbers differ in any digit never share a
 * canonical form: a number that would not come out as written leaves the
 * text without one. */
Test(canonical, json_numbers)
{
	static const char *const kept[] = { "[0]", "[-1]",
	    "[123456789012345678]", "[1234567890123456789]", "[0.1]", "[-0.5]",
	    "[1.25e-7]", "[1e300]", "[100.0]", "[1e15]", "[0.0001]", "[1e-5]",
	    "{\"a\":\"1.50\"}",
	    "{\"a\":\"\\\"\",\"b\":2.5}" };
	static const char *const refused[] = { "[-0]", "[1.50]", "[1e2]",
	    "[1e14]", "[1e-05]", "[1e+15]",
	    "[1E300]", "[0.1000000000000000000001]", "[9007199254740993.0]",
	    "[12345678901234567890]", "[1e400]", "[0.30000000000000004]",
	    "{\"a\":\"x\",\"b\":1.0e1}" };
	char *c;
	size_t i;

	for (i = 0; i < sizeof(kept) / sizeof(kept[0]); i++) {
		c = idem_json_canonical(kept[i], strlen(kept[i]));
		cr_expect_not_null(c, "%s", kept[i]);
		cr_expect(c == NULL || strcmp(c, kept[i]) == 0, "%s gave %s",
		    kept[i], c);
		free(c);
	}
	for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		c = idem_json_canonical(refused[i], strlen(refused[i]));
		cr_expect_null(c, "%s gave %s", refused[i], c);
		free(c);
	}
	c = idem_json_canonical("{\"b\": [0.1, 2], \"a\": -3}", 24);
	cr_expect_str_eq(c, "{\"a\":-3,\"b\":[0.1,2]}");
	free(c);
}

/* ------------------------------------------------ fingerprints, golden */

/* A handler for the routes of fingerprint_hex, never run. */
static idem_err
no_handler(const idem_request *req, idem_response *res, void *data)
{
	(void)req;
	(void)res;
	(void)data;
	return IDEM_ERR_HANDLER;
}

/*
 * The SHA-256 fingerprint (hex, into hex[65]) of method uri, with
 * Content-Type ctype (NULL: none) and body, routed on /f/{x},
 * /f/{x}/{y} and /g.
 */
static void
fingerprint_hex(const char *method, const char *uri, const char *ctype,
    const char *body, size_t blen, char hex[65])
{
	static const idem_request_limits lim = { "", 100, 8192, 65536, 0 };
	char m[64], u[256], q[256], c[256], l[64], allow[64];
	char *env[] = { m, u, q, l, c, NULL };
	const char *qs = strchr(uri, '?');
	idem_router *rt = idem_router_new();
	unsigned char fp[32];
	idem_request req;
	idem_problem pb;
	int i;

	snprintf(m, sizeof(m), "REQUEST_METHOD=%s", method);
	snprintf(u, sizeof(u), "REQUEST_URI=%s", uri);
	/* the web server sends the query apart too */
	snprintf(q, sizeof(q), "QUERY_STRING=%s", qs != NULL ? qs + 1 : "");
	snprintf(l, sizeof(l), "CONTENT_LENGTH=%zu", blen);
	snprintf(c, sizeof(c), "CONTENT_TYPE=%s", ctype != NULL ? ctype : "");
	if (ctype == NULL)
		env[4] = NULL;
	cr_assert_not_null(rt);
	cr_assert_eq(idem_router_add(rt, method, "/f/{x}", IDEM_POLICY_DEFAULT,
	    no_handler, NULL, "t"), IDEM_OK);
	cr_assert_eq(idem_router_add(rt, method, "/f/{x}/{y}",
	    IDEM_POLICY_DEFAULT, no_handler, NULL, "t"), IDEM_OK);
	cr_assert_eq(idem_router_add(rt, method, "/g", IDEM_POLICY_DEFAULT,
	    no_handler, NULL, "t"), IDEM_OK);
	cr_assert_eq(idem_request_parse(&req, env, &lim, &pb), IDEM_OK);
	cr_assert_eq(idem_router_match(rt, &req, allow, sizeof(allow)),
	    IDEM_OK, "%s", uri);
	cr_assert_not_null(req.body = malloc(blen + 1));
	memcpy(req.body, body, blen);
	req.body[blen] = '\0';
	req.body_len = blen;
	cr_assert_eq(idem_fingerprint(&req, fp), IDEM_OK);
	for (i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", fp[i]);
	idem_request_clear(&req);
	idem_router_free(rt);
}

/* One golden case: a request and the fingerprint it had when the
 * fingerprint's input was first laid down (stored fingerprints outlive
 * upgrades, so it never changes). */
typedef struct golden {
	const char *method, *uri, *ctype, *body, *fp;
} golden;

#define J "application/json"

static const golden goldens[] = {
	{ "POST", "/f/a", J, "{\"amount\":1}",
	    "8b1d58f3550dc1a5d48326cd02dbc703"
	    "2b7f184d13703dd5984d156f28b9ee55" },
	{ "POST", "/f/a", J, " { \"amount\" : 1 } ",
	    "8b1d58f3550dc1a5d48326cd02dbc703"
	    "2b7f184d13703dd5984d156f28b9ee55" },
	{ "POST", "/f/a", "Application/JSON; Charset=UTF-8", "{\"amount\":1}",
	    "467bd319ca2c6e405a2e6b02a62f85df"
	    "2635bec0e06ea98e230c847a9cf1353c" },
	{ "POST", "/f/a", "text/plain", "{\"amount\":1}",
	    "6f84b52dc37ad90332704fecb989604f"
	    "a4c85fe2f10382b78f2e6c93f155e373" },
	{ "POST", "/f/a", NULL, "{\"amount\":1}",
	    "1ac06ddc6c75ab2bff2c180a104c1cf0"
	    "47726743bd9f1241f3b8b47aea949873" },
	{ "POST", "/f/a", J, "",
	    "6ac29fff89e06dcacffcd9d6ae03a2cc"
	    "f2d6a0bcac229034d92ede4bb7acaaac" },
	{ "POST", "/f/a", J, "{}",
	    "281d8c1c1698de7053ce6380b3d8e47c"
	    "cf456969d0a524333ba1e8a4205c9c14" },
	{ "POST", "/f/a", J, "[]",
	    "491f1367e01c22a456f9c2e63cb7b1fd"
	    "c9d717e83613174e59b68a51a7916520" },
	{ "POST", "/f/a", J, "{\"b\":1,\"a\":2}",
	    "3e7128b2468196dcc2269bd6ff0eca55"
	    "e35fcd5043b93c5e4d6b3a07fadd5bd4" },
	{ "POST", "/f/a", J, "{\"a\":2,\"b\":1}",
	    "3e7128b2468196dcc2269bd6ff0eca55"
	    "e35fcd5043b93c5e4d6b3a07fadd5bd4" },
	{ "POST", "/f/a", J, "{\"a\":1,\"a\":1}",
	    "f84cf0ac9043164da04b0023987c3ce7"
	    "dd1155ae7094b9c245e7bc169448dffb" },
	{ "POST", "/f/a", J, "{\"a\":1.0}",
	    "2004a5181c89ed1c222f1e36237faf8b"
	    "0dedf6bc2f68eb2b99056e72ab855bc1" },
	{ "POST", "/f/a", J, "{\"a\":1e2}",
	    "6cbf0da8e1f901495295a60b263a0458"
	    "f1bd45212e216c8673bfe174c8f20ef4" },
	{ "POST", "/f/a", J, "{\"a\":-0}",
	    "b232c12cb4fd1f0b1d6acaa6eb067330"
	    "0eec671cfe5a5a55e0395a0f08ed134c" },
	{ "POST", "/f/a", J, "{\"a\":0.1,\"b\":-12}",
	    "69f807f3fd78f72f6f343aee0462483a"
	    "5fe6957e422aded8dd922fed3bacdfc0" },
	{ "POST", "/f/a", J, "{\"a\":\"\\u0041\"}",
	    "9ac5788d6c13eef757db3bd6409ef253"
	    "a282125cc99c333b0ee81848a699555e" },
	{ "POST", "/f/a", J, "{\"a\":\"A\"}",
	    "9ac5788d6c13eef757db3bd6409ef253"
	    "a282125cc99c333b0ee81848a699555e" },
	{ "POST", "/f/a", J, "{\"a\":\"caf\\u00e9\"}",
	    "1113b2c2aa0a2004b188f59248373c32"
	    "865b98838acedc479c7f0ff1a95d2c3b" },
	{ "POST", "/f/a", J, "{\"a\":\"caf\xc3\xa9\"}",
	    "1113b2c2aa0a2004b188f59248373c32"
	    "865b98838acedc479c7f0ff1a95d2c3b" },
	{ "POST", "/f/a", J, "{\"a\":\"\\/\\\"\\\\\\n\"}",
	    "172c53b3a06569df15628a354a15e204"
	    "c1d9f1c2d3ec3cc4c07dc79185849d24" },
	{ "POST", "/f/a", J, "{\"\\u0062\":1,\"a\":[true,false,null]}",
	    "91a057ea14df99fa417c84d9f9fa5aa7"
	    "5b0bc7c1ac56cd28a4f8a5d1d87c5f9b" },
	{ "POST", "/f/a", J, "[1,[2,[3,{\"x\":{}}]],\"s\"]",
	    "179938fcd4b920eaeb7a230f385a59cf"
	    "81cd285541093f5cfc9bc7cd870884c1" },
	{ "POST", "/f/a", J, "[123456789012345678,-123456789012345678]",
	    "23a817fabc41393b0b4e3cd200cea950"
	    "e64b6f8405012eea9bb0a8de32477520" },
	{ "POST", "/f/a", J, "[1234567890123456789]",
	    "c46029ff5e6978c7a73fc0ff2df633a9"
	    "3036a06dc513a07972bb0ec008538d88" },
	{ "POST", "/f/a", J, "5",
	    "08f1e1412a71880c21124c2e80d51f03"
	    "e3cf1461cbfb15c397c2d253fb2a7534" },
	{ "POST", "/f/a", J, "[-0,0,-1]",
	    "f772903b5bb6d6b20673cb916be67f75"
	    "e9501f49ab49a7d80af2f2079cf28991" },
	{ "POST", "/f/a", J, "{\"a\":\"\\u0000\"}",
	    "adee7ed477b265f843b47b86568c76a1"
	    "8d0a7b5b386a77730147efe0d3a44fd5" },
	{ "POST", "/f/a", J, "{\"a\":\"\x7f\"}",
	    "b5f91ac3e4beb1ec2853b7dd8df8b6cd"
	    "b6122759ac03731d447cdbf4b6762148" },
	{ "POST", "/f/a", J, "{\"a\":\"\t\"}",
	    "a544c289b3548a8ba6159d191967246e"
	    "c5bc7627a069485cb301f43652aab4e8" },
	{ "POST", "/f/a", J, "[1,]",
	    "469e6b0d2b80133613aba27d1d3b7202"
	    "71a74b141b868f63f2b7e57c13ddf51b" },
	{ "POST", "/f/a", J, "[01]",
	    "13c0c0b8623d7f7e3027670d416d53f5"
	    "51a8c1e4b0c1f2ae670d0e3ea40c73ae" },
	{ "POST", "/f/a", J, "{\"B\":1,\"a\":2,\"aa\":3,\"b\":4}",
	    "cbd44e0c00701ab5639b0ec3fffb8341"
	    "00b481907908b85c202dc7ab51f59dcd" },
	{ "POST", "/f/a", J, "{\"aa\":3,\"a\":2}",
	    "42b592f3edb43c4d5957fa3443f22057"
	    "26e4614ac7c5b756efb95e8513852110" },
	{ "POST", "/f/a", J, "{\"a\":1}x",
	    "d96884954588ecdbd647b84f0bd45a74"
	    "765a7005cb1e9e0b1e80bd055653a940" },
	{ "POST", "/f/a%2Fb/c", J, "{}",
	    "079e0ce8874d7e5ea35d01225c305cee"
	    "72f45a02608e0da0d3e83736a64fc029" },
	{ "POST", "/f/a/b%2Fc", J, "{}",
	    "90754dbed47ad428ab6af925c645af54"
	    "258fb686761fa1566498f71fb7af3ce5" },
	{ "POST", "/g?b=2&a=1&&c", J, "{}",
	    "3c49d9b77255906d6f04aaa1e76d0c7d"
	    "ec75dbe75b1038bef69c5858c063ea0c" },
	{ "POST", "/g?a=1&b=2&c", J, "{}",
	    "3c49d9b77255906d6f04aaa1e76d0c7d"
	    "ec75dbe75b1038bef69c5858c063ea0c" },
	{ "POST", "/g?only=1", J, "{}",
	    "2b35269ceb7af0878e948e4f5cd65467"
	    "3701b586b53ae25cd61f404de133fb2d" },
	{ "PUT", "/f/x?t%61g=y&tag=x", "application/merge-patch+json",
	    "{\"op\":\"x\"}",
	    "a51bdba3da5131fded5f6c471df07afc"
	    "1f6551ab487e50102189a0f869172a4a" },
	{ "POST", "/f/long", J, "{\"k\":\"" "0123456789012345678901234567890123"
	    "4567890123456789012345678901234567890123456789012345678901234567"
	    "8901234567890123456789012345678901234567890123456789012345678901"
	    "2345678901234567890123456789012345678901234567890123456789012345"
	    "6789012345678901234567890123456789012345678901234567890123456789"
	    "0123456789012345678901234567890123456789012345678901234567890123"
	    "4567890123456789012345678901234567890123456789012345678901234567"
	    "8901234567890123456789012345678901234567890123456789012345678901"
	    "\"}",
	    "36f55a1b46d9760372ec6c07704e5120"
	    "cb084820a9bd5d4fdc87c4d38ec8f0cb" },
};

/* Fingerprints never change: a stored record's fingerprint must match the
 * same request after an upgrade, or its retries get 409. */
Test(fingerprint, golden)
{
	char hex[65];
	size_t i;

	for (i = 0; i < sizeof(goldens) / sizeof(goldens[0]); i++) {
		const golden *g = &goldens[i];
		fingerprint_hex(g->method, g->uri, g->ctype, g->body,
		    strlen(g->body), hex);
		cr_expect_str_eq(hex, g->fp, "%s %s [%s] %s", g->method, g->uri,
		    g->ctype, g->body);
	}
}

/* --------------------------------------- fingerprints, selected parts */

/*
 * The fingerprint (hex, into hex[65]) of POST /o with Content-Type ctype
 * and body, and the "Name: value" headers hdrs (NULL-terminated, may be
 * NULL), on a route whose fingerprint-ignore is ignore and
 * fingerprint-headers headers (each NULL: not set).
 */
static void
fp_route(const char *ignore, const char *headers, const char *ctype,
    const char *body, const char *const *hdrs, char hex[65])
{
	static const idem_request_limits lim = { "", 100, 8192, 65536, 0 };
	char env_buf[8][300], allow[64], why[256];
	char *env[12];
	idem_router *rt = idem_router_new();
	idem_route *r;
	unsigned char fp[32];
	idem_request req;
	idem_problem pb;
	size_t blen = strlen(body), n = 0, i;

	snprintf(env_buf[n], 300, "REQUEST_METHOD=POST");
	env[n] = env_buf[n], n++;
	snprintf(env_buf[n], 300, "REQUEST_URI=/o");
	env[n] = env_buf[n], n++;
	snprintf(env_buf[n], 300, "CONTENT_LENGTH=%zu", blen);
	env[n] = env_buf[n], n++;
	snprintf(env_buf[n], 300, "CONTENT_TYPE=%s", ctype);
	env[n] = env_buf[n], n++;
	for (i = 0; hdrs != NULL && hdrs[i] != NULL; i++) {
		const char *colon = strchr(hdrs[i], ':');
		size_t j, k = 5;
		cr_assert_not_null(colon);
		memcpy(env_buf[n], "HTTP_", 5);
		for (j = 0; hdrs[i] + j < colon; j++)
			env_buf[n][k++] = hdrs[i][j] == '-' ? '_' :
			    (char)toupper((unsigned char)hdrs[i][j]);
		snprintf(env_buf[n] + k, 300 - k, "=%s", colon[1] == ' ' ?
		    colon + 2 : colon + 1);
		env[n] = env_buf[n], n++;
	}
	env[n] = NULL;
	cr_assert_not_null(rt);
	cr_assert_eq(idem_router_add(rt, "POST", "/o", IDEM_POLICY_DEFAULT,
	    no_handler, NULL, "t"), IDEM_OK);
	r = idem_router_at(rt, 0);
	if (ignore != NULL)
		cr_assert_null(idem_route_key_set(&r->conf, IDEM_RK_FP_IGNORE,
		    ignore, 0, why, sizeof(why)), "%s", ignore);
	if (headers != NULL)
		cr_assert_null(idem_route_key_set(&r->conf, IDEM_RK_FP_HEADERS,
		    headers, 0, why, sizeof(why)), "%s", headers);
	cr_assert_eq(idem_request_parse(&req, env, &lim, &pb), IDEM_OK);
	cr_assert_eq(idem_router_match(rt, &req, allow, sizeof(allow)), IDEM_OK);
	cr_assert_not_null(req.body = malloc(blen + 1));
	memcpy(req.body, body, blen + 1);
	req.body_len = blen;
	cr_assert_eq(idem_fingerprint(&req, fp), IDEM_OK);
	for (i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", fp[i]);
	idem_request_clear(&req);
	idem_router_free(rt);
}

/* fingerprint-ignore: bodies that differ only in the members it names
 * share a fingerprint, whatever their order; any other difference, nested
 * or not, does not; RFC 6901 escapes name "a/b" and "m~n". */
Test(fingerprint_select, ignore_members)
{
	const char *ign = "/client_ts /nonce /meta/seen /a~1b /m~0n";
	char a[65], b[65], c[65];

	fp_route(ign, NULL, "application/json", "{\"amount\":5,\"client_ts\":"
	    "1700000000,\"nonce\":\"x1\"}", NULL, a);
	fp_route(ign, NULL, "application/json", "{\"nonce\":\"y2\", "
	    "\"amount\":5, \"client_ts\":1700000099}", NULL, b);
	cr_expect_str_eq(a, b);
	fp_route(ign, NULL, "application/json", "{\"amount\":5}", NULL, b);
	cr_expect_str_eq(a, b, "absent members are left out alike");
	fp_route(ign, NULL, "application/json", "{\"amount\":6,\"client_ts\":"
	    "1700000000,\"nonce\":\"x1\"}", NULL, c);
	cr_expect_str_neq(a, c);
	/* nested, and escaped names */
	fp_route(ign, NULL, "application/json", "{\"amount\":5,\"meta\":"
	    "{\"seen\":1,\"by\":\"u\"},\"a/b\":1,\"m~n\":2}", NULL, a);
	fp_route(ign, NULL, "application/json", "{\"amount\":5,\"meta\":"
	    "{\"seen\":2,\"by\":\"u\"},\"a/b\":3,\"m~n\":4}", NULL, b);
	cr_expect_str_eq(a, b);
	fp_route(ign, NULL, "application/json", "{\"amount\":5,\"meta\":"
	    "{\"seen\":2,\"by\":\"v\"},\"a/b\":3,\"m~n\":4}", NULL, c);
	cr_expect_str_neq(a, c, "a member beside an ignored one counts");
	/* the same members under another name count */
	fp_route(ign, NULL, "application/json", "{\"amount\":5,\"ab\":1}",
	    NULL, a);
	fp_route(ign, NULL, "application/json", "{\"amount\":5,\"ab\":2}",
	    NULL, b);
	cr_expect_str_neq(a, b);
}

/* fingerprint-ignore applies to JSON bodies only, and to those whose
 * numbers all come out as written; any other body counts byte for
 * byte. */
Test(fingerprint_select, ignore_json_only)
{
	char a[65], b[65];

	fp_route("/nonce", NULL, "text/plain", "{\"a\":1,\"nonce\":1}", NULL,
	    a);
	fp_route("/nonce", NULL, "text/plain", "{\"a\":1,\"nonce\":2}", NULL,
	    b);
	cr_expect_str_neq(a, b);
	fp_route("/nonce", NULL, "application/json", "{\"a\":1.50,"
	    "\"nonce\":1}", NULL, a);
	fp_route("/nonce", NULL, "application/json", "{\"a\":1.50,"
	    "\"nonce\":2}", NULL, b);
	cr_expect_str_neq(a, b, "1.50 is not written back as sent: bytes");
	fp_route("/nonce", NULL, "application/merge-patch+json", "{\"a\":1,"
	    "\"nonce\":1}", NULL, a);
	fp_route("/nonce", NULL, "application/merge-patch+json", "{\"a\":1,"
	    "\"nonce\":2}", NULL, b);
	cr_expect_str_eq(a, b);
}

/* fingerprint-headers: the value as sent counts, the name in any case
 * names one header, an absent header is not an empty one, and a route
 * without the setting (or with an empty one) has today's fingerprint. */
Test(fingerprint_select, headers)
{
	static const char *const t1[] = { "X-Tenant: acme", NULL };
	static const char *const t1v[] = { "X-Tenant: acme", "X-Api-Version: 2",
	    NULL };
	static const char *const t2[] = { "X-Tenant: other", NULL };
	static const char *const empty[] = { "X-Tenant: ", NULL };
	char a[65], b[65], none[65];

	fp_route(NULL, "X-Tenant", "application/json", "{}", t1, a);
	fp_route(NULL, "x-TENANT", "application/json", "{}", t1v, b);
	cr_expect_str_eq(a, b, "a header not listed does not count");
	fp_route(NULL, "X-Tenant", "application/json", "{}", t2, b);
	cr_expect_str_neq(a, b);
	fp_route(NULL, "X-Tenant", "application/json", "{}", NULL, a);
	fp_route(NULL, "X-Tenant", "application/json", "{}", empty, b);
	cr_expect_str_neq(a, b, "absent and empty differ");
	fp_route(NULL, NULL, "application/json", "{}", t1, none);
	fp_route(NULL, NULL, "application/json", "{}", t2, b);
	cr_expect_str_eq(none, b, "without the setting no header counts");
	fp_route(NULL, "", "application/json", "{}", t1, b);
	cr_expect_str_eq(none, b, "an empty list is no list");
	fp_route("/nonce", NULL, "application/json", "{}", NULL, b);
	cr_expect_str_eq(none, b, "a pointer that names nothing changes "
	    "nothing");
	fp_route(NULL, "X-Tenant X-Api-Version", "application/json", "{}", t1v,
	    a);
	fp_route(NULL, "X-Tenant X-Api-Version", "application/json", "{}", t1,
	    b);
	cr_expect_str_neq(a, b);
}

/* ---------------------------------- the canonical JSON body's shortcut */

/* Checks the shortcut on text (len bytes): when idem_json_is_canonical
 * takes it as its own canonical form, idem_json_canonical must return it
 * byte for byte.  Returns whether the shortcut took it. */
static int
check_as_is(const char *text, size_t len)
{
	char *c;

	if (!idem_json_is_canonical(text, len))
		return 0;
	c = idem_json_canonical(text, len);
	cr_expect(c != NULL && strlen(c) == len && memcmp(c, text, len) == 0,
	    "[%.*s] taken as canonical, but its canonical form is [%s]",
	    (int)len, text, c);
	free(c);
	return 1;
}

Test(canonical, shortcut_cases)
{
	static const char *const taken[] = { "{\"amount\":1}", "{}", "[]",
	    "[1,[2,[3,{\"x\":{}}]],\"s\"]",
	    "{\"\":0,\"a\":true,\"aa\":false,\"b\":null}",
	    "{\"B\":1,\"a\":2}", "{\"a\":2,\"aa\":1}",
	    "[123456789012345678,-123456789012345678,0,-7]",
	    "{\"a/b\":\"x y~\",\"c\":[{},[]]}", "[\"\",\"'\",\"~!#$%&()*+\"]" };
	/* not taken, canonical or not: the slow path decides */
	static const char *const left[] = { " {}", "{} ", "[1, 2]",
	    "{\"a\" :1}", "{\"b\":1,\"a\":2}", "{\"aa\":1,\"a\":2}",
	    "{\"a\":1,\"a\":1}",
	    "{\"a\":1,\"a\":2}", "[1.0]", "[1e2]", "[1E2]", "[0.1]", "[-0]",
	    "[01]", "[-]", "[1234567890123456789]", "[\"\\u0041\"]",
	    "[\"\\/\"]", "[\"\\\"\"]", "[\"\\n\"]", "[\"caf\xc3\xa9\"]",
	    "[\"\t\"]", "[\"\x7f\"]", "[1,]", "[,1]", "[1]x", "[1][2]", "5",
	    "\"s\"", "true", "[tru]", "[nul]", "[", "{", "{\"a\"}",
	    "{\"a\":}", "{,}", "{\"a\":1,}", "[\"a]", "{\"a\":1]", "[1}", "" };
	char deep[2 * 3000 + 2];
	size_t i, n;

	for (i = 0; i < sizeof(taken) / sizeof(taken[0]); i++)
		cr_expect(check_as_is(taken[i], strlen(taken[i])), "%s",
		    taken[i]);
	for (i = 0; i < sizeof(left) / sizeof(left[0]); i++)
		cr_expect(!check_as_is(left[i], strlen(left[i])), "%s",
		    left[i]);
	/* a NUL inside is no shortcut */
	cr_expect(!check_as_is("[\"a\0\"]", 6));
	cr_expect(!check_as_is("[1]\0", 4));
	/* nesting: 32 deep is taken, deeper is left to jansson, which
	 * refuses past its own limit (the body then counts as bytes) */
	for (n = 1; n <= 3000; n = n < 40 ? n + 1 : n * 5) {
		char *c;
		memset(deep, '[', n);
		memset(deep + n, ']', n);
		cr_expect_eq(check_as_is(deep, 2 * n), n <= 32, "depth %zu", n);
		c = idem_json_canonical(deep, 2 * n);
		if (n <= 2000)
			cr_expect(c != NULL && strlen(c) == 2 * n, "depth %zu",
			    n);
		else
			cr_expect_null(c, "depth %zu", n);
		free(c);
	}
}

/* A pseudo-random number below n (a fixed sequence: the test is the same
 * on every run). */
static unsigned
rnd(unsigned n)
{
	static uint64_t state = 16;

	state = state * 6364136223846793005ULL + 1442695040888963407ULL;
	return (unsigned)((state >> 33) % n);
}

/* Appends text to the buffer at *p, up to end. */
static void
put(char **p, const char *end, const char *text)
{
	size_t n = strlen(text);

	if (n < (size_t)(end - *p)) {
		memcpy(*p, text, n);
		*p += n;
	}
}

/* Writes a random JSON-like value, depth deep (0: an object or array), at
 * *p: mostly canonical,
 * with now and then what a canonical form does not have (white space,
 * unsorted or duplicate keys, escapes, non-integer numbers, -0, bad
 * tokens). */
static void
random_json(char **p, const char *end, int depth)
{
	static const char *const sorted[] = { "\"\"", "\"B\"", "\"a\"",
	    "\"a/b\"", "\"aa\"", "\"ab\"", "\"b\"" };
	static const char *const keys[] = { "\"a\"", "\"b\"", "\"aa\"",
	    "\"B\"", "\"\"", "\"\\u0061\"", "\"\xc3\xa9\"", "\"a b\"" };
	static const char *const numbers[] = { "0", "-1", "7",
	    "123456789012345678", "-123456789012345678",
	    "1234567890123456789", "-0", "1.0", "1e2", "0.1", "01", "2.5",
	    "1E2", "-", "12a" };
	static const char *const strings[] = { "\"x\"", "\"\"", "\"a b\"",
	    "\"\\u0041\"", "\"\\\"\"", "\"\\/\"", "\"\xc3\xa9\"", "\"~\"",
	    "\"\\n\"", "\"\t\"" };
	static const char *const literals[] = { "true", "false", "null",
	    "tru" };
	unsigned kind = depth == 0 ? rnd(2) : depth < 4 ? rnd(7) : 2 + rnd(5),
	    i, n, k = 0;

	if (depth > 0 && rnd(40) == 0)
		put(p, end, rnd(2) ? " " : "\n");
	switch (kind) {
	case 0:
		n = rnd(4);
		put(p, end, "{");
		for (i = 0; i < n; i++) {
			if (i > 0)
				put(p, end, rnd(60) ? "," : " ,");
			if (rnd(3)) {
				/* ascending: mostly canonical */
				if (k >= sizeof(sorted) / sizeof(sorted[0]))
					break;
				k += rnd((unsigned)(sizeof(sorted) /
				    sizeof(sorted[0]) - k));
				put(p, end, sorted[k++]);
			} else {
				put(p, end, keys[rnd(sizeof(keys) /
				    sizeof(keys[0]))]);
			}
			put(p, end, rnd(60) ? ":" : ": ");
			random_json(p, end, depth + 1);
		}
		put(p, end, rnd(100) ? "}" : ",}");
		break;
	case 1:
		n = rnd(4);
		put(p, end, "[");
		for (i = 0; i < n; i++) {
			if (i > 0)
				put(p, end, ",");
			random_json(p, end, depth + 1);
		}
		put(p, end, "]");
		break;
	case 2:
	case 3:
		put(p, end, numbers[rnd(3) ? rnd(5) : rnd(sizeof(numbers) /
		    sizeof(numbers[0]))]);
		break;
	case 4:
	case 5:
		put(p, end, strings[rnd(2) ? rnd(3) : rnd(sizeof(strings) /
		    sizeof(strings[0]))]);
		break;
	default:
		put(p, end, literals[rnd(sizeof(literals) /
		    sizeof(literals[0]))]);
		break;
	}
}

/* Whatever the text, the shortcut never takes one whose canonical form
 * differs from it; and it does take many. */
Test(canonical, shortcut_random)
{
	char buf[8192], *p;
	unsigned i, taken = 0, tries = 30000;

	for (i = 0; i < tries; i++) {
		p = buf;
		random_json(&p, buf + sizeof(buf), 0);
		if (rnd(50) == 0)
			put(&p, buf + sizeof(buf), rnd(2) ? " " : "x");
		taken += (unsigned)check_as_is(buf, (size_t)(p - buf));
	}
	cr_expect_gt(taken, tries / 10, "only %u of %u taken", taken, tries);
}

/* The fingerprint of a body the shortcut takes is the one the slow path
 * gives: the same text with white space around it, which only the slow
 * path canonicalises. */
Test(fingerprint, shortcut_same_as_slow_path)
{
	static const char *const bodies[] = { "{\"amount\":1}", "{}", "[]",
	    "{\"\":0,\"a\":true,\"aa\":false,\"b\":null}",
	    "[123456789012345678,-1,0,[\"x y\",{\"B\":{},\"a\":[]}]]" };
	char fast[65], slow[65], padded[256];
	size_t i;

	for (i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		cr_assert(idem_json_is_canonical(bodies[i], strlen(bodies[i])));
		snprintf(padded, sizeof(padded), " \n%s\t ", bodies[i]);
		cr_assert(!idem_json_is_canonical(padded, strlen(padded)));
		fingerprint_hex("POST", "/f/a", J, bodies[i], strlen(bodies[i]),
		    fast);
		fingerprint_hex("POST", "/f/a", J, padded, strlen(padded),
		    slow);
		cr_expect_str_eq(fast, slow, "%s", bodies[i]);
	}
}

/* What a malformed sf-string is refused for, in the 400's detail. */
static const char *
why(const char *header)
{
	static char out[IDEM_KEY_MAX + 1], buf[160];
	size_t len = 99;

	cr_expect_eq(idem_key_parse_why(IDEM_KEY_OPAQUE, header, out, &len, buf,
	    sizeof(buf)), IDEM_ERR_INVALID, "accepted %s", header);
	cr_expect_eq(len, 0);
	return buf;
}

Test(key, sf_string_errors_named)
{
	char big[300], out[IDEM_KEY_MAX + 1], buf[160];
	size_t len;

	cr_expect_str_eq(why("\"abc"), "the quoted key has no closing quote");
	cr_expect_str_eq(why("\"abc\\"), "the quoted key ends in a backslash, "
	    "with no closing quote");
	cr_expect_str_eq(why("\"ab\\nc\""), "the quoted key has a backslash "
	    "at byte 4 before byte 0x6e: only \\\" and \\\\ are escapes");
	cr_expect_str_eq(why("  \"a\x01\""), "the quoted key has byte 0x01, "
	    "outside printable ASCII, at byte 5");
	cr_expect_str_eq(why("\"a\xc3\xa9\""), "the quoted key has byte 0xc3, "
	    "outside printable ASCII, at byte 3");
	cr_expect_str_eq(why("\"abc\"def"), "the quoted key has characters "
	    "after its closing quote, from byte 6");
	cr_expect_str_eq(why("\"\""), "the quoted key is empty");
	big[0] = '"';
	memset(big + 1, 'k', 256);
	big[257] = '"';
	big[258] = '\0';
	cr_expect_str_eq(why(big), "the quoted key is longer than 255 bytes");
	/* a well-formed string of the wrong format: no sf-string reason */
	cr_expect_str_eq(why("\"a b\""), "");
	cr_expect_str_eq(why("a b"), "");
	cr_expect_eq(idem_key_parse_why(IDEM_KEY_OPAQUE, "\"a\\\"b\"", out, &len,
	    buf, sizeof(buf)), IDEM_OK);
	cr_expect_str_eq(out, "a\"b");
	cr_expect_str_eq(buf, "");
}
