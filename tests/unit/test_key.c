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
