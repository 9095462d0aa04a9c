/*
 * test_key.c - Idempotency-Key parsing and the parts of the fingerprint.
 */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "idem_key.h"

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
