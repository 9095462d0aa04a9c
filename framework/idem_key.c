/*
 * idem_key.c - key validation, scope and request fingerprints.
 */
#include "config.h"

#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/evp.h>
#include <uuid.h>

#include "idem_key.h"
#include "idem_router.h"

int
idem_key_valid(idem_key_format fmt, const char *key, size_t len)
{
	uuid_t u;
	size_t i;

	if (key == NULL || len == 0 || len > 255)
		return 0;
	for (i = 0; i < len; i++)
		if ((unsigned char)key[i] < 0x21 || (unsigned char)key[i] > 0x7e)
			return 0;
	if (fmt == IDEM_KEY_OPAQUE)
		return 1;
	/* canonical 8-4-4-4-12 form; uuid_parse checks the hex digits */
	if (len != 36 || strlen(key) != 36 || uuid_parse(key, u) != 0)
		return 0;
	if (fmt == IDEM_KEY_UUID)
		return 1;
	/* libuuid 2.38 has no uuid_get_version: octet 6 high nibble is the
	 * version, octet 8 top two bits the variant */
	return (u[6] >> 4) == 7 && (u[8] & 0xc0) == 0x80;
}

/* Whether c is optional white space (RFC 9110 OWS). */
static int
is_ows(char c)
{
	return c == ' ' || c == '\t';
}

/*
 * Decodes the RFC 8941 sf-string from p (its opening quote) to end into
 * out: printable ASCII, with \" and \\ escapes, and nothing after the
 * closing quote.  Returns the decoded length, or 0 when it is malformed,
 * empty or longer than IDEM_KEY_MAX.
 */
static size_t
sf_string(const char *p, const char *end, char out[IDEM_KEY_MAX + 1])
{
	size_t n = 0;

	for (p++; p < end && *p != '"'; p++) {
		if (*p == '\\' && (++p == end || (*p != '"' && *p != '\\')))
			return 0;
		if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e ||
		    n == IDEM_KEY_MAX)
			return 0;
		out[n++] = *p;
	}
	return p + 1 == end ? n : 0;
}

idem_err
idem_key_parse(idem_key_format fmt, const char *header,
    char out[IDEM_KEY_MAX + 1], size_t *len)
{
	const char *p = header, *end;
	size_t n;
	uuid_t u;

	*len = 0;
	out[0] = '\0';
	if (header == NULL)
		return IDEM_ERR_INVALID;
	while (is_ows(*p))
		p++;
	for (end = p + strlen(p); end > p && is_ows(end[-1]); end--)
		;
	if (*p != '"') {
		if ((n = (size_t)(end - p)) > IDEM_KEY_MAX)
			return IDEM_ERR_INVALID;
		memcpy(out, p, n);
	} else if ((n = sf_string(p, end, out)) == 0) {
		out[0] = '\0';
		return IDEM_ERR_INVALID;
	}
	out[n] = '\0';
	if (!idem_key_valid(fmt, out, n)) {
		out[0] = '\0';
		return IDEM_ERR_INVALID;
	}
	if (fmt != IDEM_KEY_OPAQUE && uuid_parse(out, u) == 0)
		uuid_unparse_lower(u, out);
	*len = n;
	return IDEM_OK;
}

idem_err
idem_sha256(const void *data, size_t len, unsigned char out[32])
{
	unsigned int n = 32;

	return EVP_Digest(data, len, out, &n, EVP_sha256(), NULL) == 1 ?
	    IDEM_OK : IDEM_ERR_NOMEM;
}

char *
idem_json_canonical(const char *text, size_t len)
{
	json_error_t err;
	json_t *j;
	char *out;
	size_t i;

	for (i = 0; i < len && isspace((unsigned char)text[i]); i++)
		;
	if (i == len || (text[i] != '{' && text[i] != '['))
		return NULL;
	if ((j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err)) == NULL)
		return NULL;
	out = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(j);
	return out;
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

char *
idem_query_canonical(const char *query)
{
	size_t n = 1, i, len = strlen(query), used = 0;
	char *copy = strdup(query), **pairs, *p, *out, *save = NULL;

	if (copy == NULL)
		return NULL;
	for (p = copy; *p != '\0'; p++)
		if (*p == '&')
			n++;
	pairs = calloc(n, sizeof(char *));
	out = malloc(len + 1);
	if (pairs == NULL || out == NULL) {
		free(copy);
		free(pairs);
		free(out);
		return NULL;
	}
	n = 0;
	for (p = strtok_r(copy, "&", &save); p != NULL;
	    p = strtok_r(NULL, "&", &save))
		pairs[n++] = p;
	qsort(pairs, n, sizeof(char *), cmp_str);
	out[0] = '\0';
	for (i = 0; i < n; i++) {
		size_t pl = strlen(pairs[i]);
		if (used > 0)
			out[used++] = '&';
		memcpy(out + used, pairs[i], pl);
		used += pl;
	}
	out[used] = '\0';
	free(pairs);
	free(copy);
	return out;
}

/* Feeds one length-prefixed field to the digest. */
static int
field(EVP_MD_CTX *ctx, const void *data, size_t len)
{
	unsigned char pre[8];
	uint64_t l = len;
	int i;

	for (i = 7; i >= 0; i--, l >>= 8)
		pre[i] = (unsigned char)l;
	return EVP_DigestUpdate(ctx, pre, 8) == 1 &&
	    (len == 0 || EVP_DigestUpdate(ctx, data, len) == 1);
}

idem_err
idem_fingerprint(const idem_request *req, unsigned char out[32])
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	const char *tmpl = req->route != NULL ? req->route->tmpl : "";
	char *query = idem_query_canonical(req->query);
	size_t blen;
	const char *body = idem_request_body(req, &blen);
	char *canon = idem_json_canonical(body, blen);
	unsigned int n = 32;
	int ok;

	ok = ctx != NULL && query != NULL &&
	    EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
	    field(ctx, req->method, strlen(req->method)) &&
	    field(ctx, tmpl, strlen(tmpl)) &&
	    field(ctx, req->path, strlen(req->path)) &&
	    field(ctx, query, strlen(query)) &&
	    /* a canonical JSON body is marked so it never equals raw bytes */
	    field(ctx, canon != NULL ? "J" : "B", 1) &&
	    field(ctx, canon != NULL ? canon : body,
	    canon != NULL ? strlen(canon) : blen) &&
	    EVP_DigestFinal_ex(ctx, out, &n) == 1;
	EVP_MD_CTX_free(ctx);
	free(query);
	free(canon);
	return ok ? IDEM_OK : IDEM_ERR_NOMEM;
}

void
idem_key_hash(const unsigned char scope[32], const char *key, size_t len,
    char out[17])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char buf[32 + 256], d[32];
	int i;

	if (len > 255)
		len = 255;
	memcpy(buf, scope, 32);
	memcpy(buf + 32, key, len);
	if (idem_sha256(buf, 32 + len, d) != IDEM_OK)
		memset(d, 0, sizeof(d));
	for (i = 0; i < 8; i++) {
		out[2 * i] = hex[d[i] >> 4];
		out[2 * i + 1] = hex[d[i] & 15];
	}
	out[16] = '\0';
}

idem_err
idem_scope_hash(const idem_config *cfg, const char *principal,
    unsigned char out[32])
{
	const char *kind = cfg->scope == IDEM_SCOPE_HEADER ? cfg->scope_header :
	    "remote-user";
	size_t klen = strlen(kind) + 1, plen = strlen(principal);
	char *buf;
	idem_err err;

	memset(out, 0, 32);
	if (cfg->scope == IDEM_SCOPE_NONE)
		return IDEM_OK;
	if ((buf = malloc(klen + plen)) == NULL)
		return IDEM_ERR_NOMEM;
	memcpy(buf, kind, klen);
	memcpy(buf + klen, principal, plen);
	err = idem_sha256(buf, klen + plen, out);
	free(buf);
	return err;
}
