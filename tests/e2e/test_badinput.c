/*
 * test_badinput.c - a table of hostile and broken requests through the real
 * binary over FastCGI, with the memory store and with MySQL: each gets its
 * documented error, nothing crashes, and no record is left in flight (the
 * same key then runs normally).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "fcgi_client.h"
#include "harness.h"
#include "mariadb.h"

typedef struct row {
	const char *what;
	const char *uri;
	const char *key;            /* NULL: none */
	const char *extra_name;     /* another param, or NULL */
	const char *extra_value;
	const char *body;
	long content_length;        /* -1: the body's length */
	int status;
	const char *code;
	int stored;                 /* the handler's own 4xx: committed */
} row;

static char long_key[300], huge_header[20000];

static const row rows[] = {
	{ "key too long", "/testkit/echo", long_key, NULL, NULL, "{}", -1, 400,
	    "IDEMPOTENCY_KEY_INVALID", 0 },
	{ "key with a control character", "/testkit/echo", "ab\001cd", NULL,
	    NULL, "{}", -1, 400, "IDEMPOTENCY_KEY_INVALID", 0 },
	{ "key with a newline", "/testkit/echo", "ab\ncd", NULL, NULL, "{}", -1,
	    400, "IDEMPOTENCY_KEY_INVALID", 0 },
	{ "key with SQL and spaces", "/testkit/echo",
	    "x'; DROP TABLE idempotency_keys; --", NULL, NULL, "{}", -1, 400,
	    "IDEMPOTENCY_KEY_INVALID", 0 },
	{ "key not UTF-8", "/testkit/echo", "k\xff\xfe", NULL, NULL, "{}", -1,
	    400, "IDEMPOTENCY_KEY_INVALID", 0 },
	{ "empty key", "/testkit/echo", "", NULL, NULL, "{}", -1, 400,
	    "IDEMPOTENCY_KEY_INVALID", 0 },
	{ "body shorter than its length", "/testkit/echo", "bad-len", NULL,
	    NULL, "{\"a\":1}", 500, 400, "BODY_INCOMPLETE", 0 },
	{ "length not a number", "/testkit/echo", "bad-len2", "CONTENT_LENGTH",
	    "12abc", "{}", -2, 400, "BAD_CONTENT_LENGTH", 0 },
	{ "body over max-body", "/testkit/echo", "big-body", NULL, NULL, NULL,
	    70000, 413, "BODY_TOO_LARGE", 0 },
	{ "a huge header", "/testkit/echo", "huge-hdr", "HTTP_X_HUGE",
	    huge_header, "{}", -1, 431, "HEADERS_TOO_LARGE", 0 },
	{ "invalid JSON to the ledger", "/accounts/a/deposit", "bad-json",
	    NULL, NULL, "{\"amount\": ", -1, 400, "MALFORMED_JSON", 1 },
	{ "a negative amount", "/accounts/a/deposit", "neg", NULL, NULL,
	    "{\"amount\": -5}", -1, 422, "INVALID_AMOUNT", 1 },
	{ "a NUL in the path", "/testkit/%00echo", "nul", NULL, NULL, "{}", -1,
	    400, "BAD_PATH", 0 },
	{ "a broken escape", "/testkit/ec%zho", "esc", NULL, NULL, "{}", -1,
	    400, "BAD_PATH", 0 },
};

/* Sends one row; returns the response. */
static fc_response
send_row(const harness *h, const row *r)
{
	const char *p[16];
	char cl[32];
	static char bigbody[70001];
	const char *body = r->body;
	size_t len;
	fc_response out;
	int n = 0;

	if (body == NULL) {
		memset(bigbody, 'x', sizeof(bigbody) - 1);
		body = bigbody;
	}
	len = strlen(body);
	p[n++] = "REQUEST_METHOD";
	p[n++] = "POST";
	p[n++] = "REQUEST_URI";
	p[n++] = r->uri;
	if (r->content_length != -2) {
		snprintf(cl, sizeof(cl), "%ld", r->content_length >= 0 ?
		    r->content_length : (long)len);
		p[n++] = "CONTENT_LENGTH";
		p[n++] = cl;
	}
	if (r->key != NULL) {
		p[n++] = "HTTP_IDEMPOTENCY_KEY";
		p[n++] = r->key;
	}
	if (r->extra_name != NULL) {
		p[n++] = r->extra_name;
		p[n++] = r->extra_value;
	}
	p[n] = NULL;
	cr_assert_eq(fc_request_raw(h->addr, p, body, len, &out), 0,
	    "%s: no answer", r->what);
	return out;
}

static void
table(int mysql)
{
	char want[96];
	harness h;
	size_t i;

	memset(long_key, 'k', 256);
	memset(huge_header, 'h', sizeof(huge_header) - 1);
	cr_assert_eq(harness_start(&h, &(harness_opts){
	    .server = "max-body = 64k", .mysql = mysql }), 0);
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const row *r = &rows[i];
		fc_response out = send_row(&h, r);

		cr_expect_eq(out.status, r->status, "%s: %d %s", r->what,
		    out.status, out.body);
		snprintf(want, sizeof(want), "\"code\":\"%s\"", r->code);
		cr_expect(strstr(out.body, want) != NULL, "%s: %s", r->what,
		    out.body);
		cr_expect_str_eq(fc_header(&out, "Content-Type"),
		    "application/problem+json", "%s", r->what);
		fc_response_free(&out);
	}
	/* nothing ran, nothing is held: each valid key runs now; a handler's
	 * own 4xx is final, stored and replayed */
	cr_expect_eq(harness_count(&h, "/testkit/echo"), 0);
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const char *hdr[3] = { NULL, "Content-Type: application/json",
		    NULL };
		char kh[300];
		fc_response out;

		if (rows[i].stored) {
			out = send_row(&h, &rows[i]);
			cr_expect_str_eq(fc_header(&out, "Idempotent-Replayed"),
			    "true", "%s: not replayed", rows[i].what);
			fc_response_free(&out);
			continue;
		}
		if (strcmp(rows[i].code, "IDEMPOTENCY_KEY_INVALID") == 0)
			continue;
		snprintf(kh, sizeof(kh), "Idempotency-Key: %s", rows[i].key);
		hdr[0] = kh;
		cr_assert_eq(fc_http(h.addr, "POST", "/testkit/echo", hdr, "{}",
		    &out), 0);
		cr_expect_eq(out.status, 201, "%s: the key was left held: %d",
		    rows[i].what, out.status);
		fc_response_free(&out);
	}
	if (mysql) {
		mariadb m;
		char *o;

		cr_assert_eq(mariadb_from_env(&m), 0);
		o = mariadb_sql(&m, "SELECT COUNT(*) FROM idempotency_keys "
		    "WHERE state = 'in_flight'");
		cr_expect(o != NULL && atoi(o) == 0, "left in flight: %s", o);
		free(o);
		o = mariadb_sql(&m, "SHOW TABLES LIKE 'idempotency_keys'");
		cr_expect(o != NULL && strstr(o, "idempotency_keys") != NULL);
		free(o);
	}
	cr_expect_eq(kill(h.pid, 0), 0, "idemfcgi died");
	cr_expect_eq(harness_stop(&h), 0);
}

Test(badinput, table_memory)
{
	table(0);
}

Test(badinput, table_mysql)
{
	table(1);
}

/* A key with SQL metacharacters but no space is a valid opaque key: it is
 * stored and replayed as data, never run as SQL. */
Test(badinput, sql_in_a_valid_key)
{
	const char *hdr[] = { "Idempotency-Key: ';DROP/**/TABLE/**/x;--\\\"",
	    NULL };
	fc_response a, b;
	harness h;

	cr_assert_eq(harness_start(&h, &(harness_opts){ .mysql = 1 }), 0);
	cr_assert_eq(fc_http(h.addr, "POST", "/testkit/echo", hdr, "{}", &a), 0);
	cr_assert_eq(fc_http(h.addr, "POST", "/testkit/echo", hdr, "{}", &b), 0);
	cr_expect_eq(a.status, 201);
	cr_expect_str_eq(fc_header(&b, "Idempotent-Replayed"), "true");
	cr_expect_str_eq(a.body, b.body);
	fc_response_free(&a);
	fc_response_free(&b);
	harness_stop(&h);
}
