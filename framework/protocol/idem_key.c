/*
 * idem_key.c - key validation, scope and request fingerprints.
 */
#include "config.h"

#include <ctype.h>
#include <pthread.h>
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
 * closing quote.  start is the header value, for the positions of why.
 * Returns the decoded length, or 0 when it is malformed, empty or longer
 * than IDEM_KEY_MAX, with what is wrong in why (size bytes).
 */
static size_t
sf_string(const char *start, const char *p, const char *end,
    char out[IDEM_KEY_MAX + 1], char *why, size_t size)
{
	size_t n = 0;

	for (p++; p < end && *p != '"'; p++) {
		if (*p == '\\') {
			if (++p == end) {
				snprintf(why, size, "the quoted key ends in a "
				    "backslash, with no closing quote");
				return 0;
			}
			if (*p != '"' && *p != '\\') {
				snprintf(why, size, "the quoted key has a backslash "
				    "at byte %zu before byte 0x%02x: only \\\" and "
				    "\\\\ are escapes", (size_t)(p - start),
				    (unsigned char)*p);
				return 0;
			}
		}
		if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e) {
			snprintf(why, size, "the quoted key has byte 0x%02x, "
			    "outside printable ASCII, at byte %zu",
			    (unsigned char)*p, (size_t)(p - start) + 1);
			return 0;
		}
		if (n == IDEM_KEY_MAX) {
			snprintf(why, size, "the quoted key is longer than %d "
			    "bytes", IDEM_KEY_MAX);
			return 0;
		}
		out[n++] = *p;
	}
	if (p == end)
		snprintf(why, size, "the quoted key has no closing quote");
	else if (p + 1 != end)
		snprintf(why, size, "the quoted key has characters after its "
		    "closing quote, from byte %zu", (size_t)(p - start) + 2);
	else if (n == 0)
		snprintf(why, size, "the quoted key is empty");
	else
		return n;
	return 0;
}

idem_err
idem_key_parse(idem_key_format fmt, const char *header,
    char out[IDEM_KEY_MAX + 1], size_t *len)
{
	char why[160];

	return idem_key_parse_why(fmt, header, out, len, why, sizeof(why));
}

idem_err
idem_key_parse_why(idem_key_format fmt, const char *header,
    char out[IDEM_KEY_MAX + 1], size_t *len, char *why, size_t size)
{
	const char *p = header, *end;
	size_t n;
	uuid_t u;

	*len = 0;
	out[0] = '\0';
	why[0] = '\0';
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
	} else if ((n = sf_string(header, p, end, out, why, size)) == 0) {
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

/* SHA-256, fetched once from the default provider (never freed: it
 * lives as long as the process, as EVP_sha256()'s does). */
static EVP_MD *sha256_md;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;

/* Fetches sha256_md (pthread_once). */
static void
sha256_fetch(void)
{
	sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
}

/* The SHA-256 to digest with.  EVP_sha256() would make OpenSSL 3 fetch
 * the implementation again on every digest, a third of a fingerprint's
 * instructions; this one is fetched once.  Returns it, or EVP_sha256()
 * should the fetch have failed. */
static const EVP_MD *
sha256(void)
{
	pthread_once(&sha256_once, sha256_fetch);
	return sha256_md != NULL ? sha256_md : EVP_sha256();
}

void
idem_sha256_init(void)
{
	(void)sha256();
}

idem_err
idem_sha256(const void *data, size_t len, unsigned char out[32])
{
	unsigned int n = 32;

	return EVP_Digest(data, len, out, &n, sha256(), NULL) == 1 ?
	    IDEM_OK : IDEM_ERR_NOMEM;
}

/* A query pair: its text, the length of its name, its place. */
typedef struct qpair {
	const char *s;
	size_t name;
	size_t idx;
} qpair;

/* The byte of a query name (len bytes) at *i, as a handler reads it:
 * "+" is a space and a valid %XX its byte; advances *i past it. */
static int
name_byte(const char *s, size_t len, size_t *i)
{
	int hi, lo;

	if (s[*i] == '%' && *i + 2 < len &&
	    (hi = idem_hex_digit(s[*i + 1])) >= 0 &&
	    (lo = idem_hex_digit(s[*i + 2])) >= 0) {
		*i += 3;
		return hi * 16 + lo;
	}
	(*i)++;
	return s[*i - 1] == '+' ? ' ' : (unsigned char)s[*i - 1];
}

/* Orders pairs by name as a handler decodes it (so "tag" and "t%61g" are
 * one name and keep their order), and pairs of one name by their place.
 * The text that is hashed stays as sent. */
static int
cmp_pair(const void *a, const void *b)
{
	const qpair *x = a, *y = b;
	size_t i = 0, j = 0;

	while (i < x->name && j < y->name) {
		int c = name_byte(x->s, x->name, &i) - name_byte(y->s, y->name,
		    &j);
		if (c != 0)
			return c;
	}
	if (i < x->name || j < y->name)
		return i < x->name ? 1 : -1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

char *
idem_query_canonical(const char *query)
{
	size_t n = 1, i, len = strlen(query), used = 0;
	char *copy = strdup(query), *p, *out, *save = NULL;
	qpair *pairs;

	if (copy == NULL)
		return NULL;
	for (p = copy; *p != '\0'; p++)
		if (*p == '&')
			n++;
	pairs = calloc(n, sizeof(*pairs));
	out = malloc(len + 1);
	if (pairs == NULL || out == NULL) {
		free(copy);
		free(pairs);
		free(out);
		return NULL;
	}
	n = 0;
	for (p = strtok_r(copy, "&", &save); p != NULL;
	    p = strtok_r(NULL, "&", &save)) {
		pairs[n].s = p;
		pairs[n].name = strcspn(p, "=");
		pairs[n].idx = n;
		n++;
	}
	qsort(pairs, n, sizeof(*pairs), cmp_pair);
	out[0] = '\0';
	for (i = 0; i < n; i++) {
		size_t pl = strlen(pairs[i].s);
		if (used > 0)
			out[used++] = '&';
		memcpy(out + used, pairs[i].s, pl);
		used += pl;
	}
	out[used] = '\0';
	free(pairs);
	free(copy);
	return out;
}

/* Writes the media type of the Content-Type value p to out (room for
 * strlen(p) + 1 bytes) and sets *json: idem_media_type without the
 * allocation. */
static void
media_type_into(const char *p, char *out, int *json)
{
	size_t n = 0, type_len;
	int quoted = 0;

	while (is_ows(*p))
		p++;
	for (; *p != '\0' && *p != ';'; p++)
		out[n++] = (char)tolower((unsigned char)*p);
	while (n > 0 && is_ows(out[n - 1]))
		n--;
	type_len = n;
	/* the parameters: names, and a charset's value, lower-cased (RFC
	 * 9110 makes them case-insensitive); white space around ';' and
	 * empty parameters dropped; other values as sent */
	while (*p == ';') {
		size_t start = n;
		int charset;
		for (p++; is_ows(*p); p++)
			;
		if (*p == ';' || *p == '\0')
			continue;
		out[n++] = ';';
		for (; *p != '\0' && *p != ';' && *p != '='; p++)
			out[n++] = (char)tolower((unsigned char)*p);
		charset = n - start == 8 && memcmp(out + start, ";charset", 8) == 0;
		for (; *p != '\0' && (quoted || *p != ';'); p++) {
			if (quoted && *p == '\\' && p[1] != '\0') {
				out[n++] = *p++;
				out[n++] = *p;
				continue;
			}
			if (*p == '"')
				quoted = !quoted;
			out[n++] = charset ? (char)tolower((unsigned char)*p) : *p;
		}
		while (!quoted && n > start && is_ows(out[n - 1]))
			n--;
	}
	out[n] = '\0';
	*json = (type_len == 16 && memcmp(out, "application/json", 16) == 0) ||
	    (type_len > 5 && memchr(out, '/', type_len - 5) != NULL &&
	    memcmp(out + type_len - 5, "+json", 5) == 0);
}

char *
idem_media_type(const char *ctype, int *json)
{
	const char *p = ctype != NULL ? ctype : "";
	char *out;

	*json = 0;
	if ((out = malloc(strlen(p) + 1)) != NULL)
		media_type_into(p, out, json);
	return out;
}

/* The fingerprint's input on its way to the digest: gathered in buf and
 * handed over when it is full, so a small request is one update. */
typedef struct fp_input {
	EVP_MD_CTX *ctx;
	int ok;                   /* 0 once an update failed */
	size_t used;
	unsigned char buf[512];
} fp_input;

/* Hands what in has gathered to the digest. */
static void
fp_flush(fp_input *in)
{
	if (in->used > 0 && EVP_DigestUpdate(in->ctx, in->buf, in->used) != 1)
		in->ok = 0;
	in->used = 0;
}

/* Appends len bytes to the input; a piece larger than buf goes to the
 * digest directly (the digest of the whole is the same either way). */
static void
fp_put(fp_input *in, const void *data, size_t len)
{
	if (len > sizeof(in->buf) - in->used) {
		fp_flush(in);
		if (len >= sizeof(in->buf)) {
			if (EVP_DigestUpdate(in->ctx, data, len) != 1)
				in->ok = 0;
			return;
		}
	}
	if (len > 0)
		memcpy(in->buf + in->used, data, len);
	in->used += len;
}

/* Writes n as a LEB128 varint to b (10 bytes at most): self-delimiting,
 * and one byte below 128, so a small request stays within two SHA-256
 * blocks.  Returns the bytes written. */
static size_t
leb128(unsigned char *b, uint64_t n)
{
	size_t i = 0;

	do {
		b[i] = (unsigned char)(n & 0x7f);
		n >>= 7;
		if (n != 0)
			b[i] |= 0x80;
		i++;
	} while (n != 0);
	return i;
}

/* Feeds n to the digest as a LEB128 varint. */
static void
put_len(fp_input *in, uint64_t n)
{
	unsigned char b[10];

	fp_put(in, b, leb128(b, n));
}

/* Feeds one length-prefixed field to the digest. */
static void
field(fp_input *in, const void *data, size_t len)
{
	/* the usual small field straight into the buffer (room for its
	 * length, at most 10 bytes, and itself) */
	if (in->used + 10 <= sizeof(in->buf) &&
	    len <= sizeof(in->buf) - 10 - in->used) {
		in->used += leb128(in->buf + in->used, len);
		if (len > 0)
			memcpy(in->buf + in->used, data, len);
		in->used += len;
		return;
	}
	put_len(in, len);
	fp_put(in, data, len);
}

/* The key of each thread's digest context, made once. */
static pthread_key_t ctx_key;
static pthread_once_t ctx_once = PTHREAD_ONCE_INIT;
static int ctx_key_ok;

/* Frees a thread's digest context when the thread ends. */
static void
ctx_free(void *ctx)
{
	EVP_MD_CTX_free(ctx);
}

/* Makes ctx_key (pthread_once). */
static void
ctx_key_make(void)
{
	ctx_key_ok = pthread_key_create(&ctx_key, ctx_free) == 0;
}

/* The calling thread's digest context, made on its first use and kept
 * for the next fingerprint (a context costs an allocation, and its
 * setup for SHA-256 more), or NULL when out of memory. */
static EVP_MD_CTX *
thread_ctx(void)
{
	EVP_MD_CTX *ctx;

	pthread_once(&ctx_once, ctx_key_make);
	if (!ctx_key_ok)
		return NULL;
	if ((ctx = pthread_getspecific(ctx_key)) == NULL &&
	    (ctx = EVP_MD_CTX_new()) != NULL &&
	    pthread_setspecific(ctx_key, ctx) != 0) {
		EVP_MD_CTX_free(ctx);
		ctx = NULL;
	}
	return ctx;
}

/* Feeds the route's fingerprint-headers of req, when it has any: "H",
 * their count, then per header its name lower-cased, "1" and its value as
 * the web server passed it, or "0" and nothing when absent (so an absent
 * header is not an empty one).  Nothing at all without them, so that the
 * fingerprints of routes without them do not change. */
static void
fp_headers(fp_input *in, const idem_request *req)
{
	const idem_route_conf *hc = req->route != NULL ?
	    idem_route_conf_for(req->route, IDEM_RK_FP_HEADERS) : NULL;
	char name[129];
	size_t i, j;

	if (hc == NULL || hc->nfp_headers == 0)
		return;
	field(in, "H", 1);
	put_len(in, hc->nfp_headers);
	for (i = 0; i < hc->nfp_headers; i++) {
		const char *v = idem_request_header(req, hc->fp_headers[i]);

		/* names are HTTP tokens of at most 128 bytes (config) */
		for (j = 0; j < sizeof(name) - 1 && hc->fp_headers[i][j] != '\0';
		    j++)
			name[j] = (char)tolower((unsigned char)hc->fp_headers[i][j]);
		name[j] = '\0';
		field(in, name, j);
		field(in, v != NULL ? "1" : "0", 1);
		field(in, v != NULL ? v : "", v != NULL ? strlen(v) : 0);
	}
}

idem_err
idem_fingerprint(const idem_request *req, unsigned char out[32])
{
	fp_input in;
	const char *tmpl = req->route != NULL ? req->route->tmpl : "";
	const char *query = req->query;
	char *sorted = NULL;
	size_t blen, i;
	const char *body = idem_request_body(req, &blen);
	int json;
	/* idem_request_header(req, "Content-Type"), its CGI name known */
	const char *ctype = idem_request_env(req, "CONTENT_TYPE");
	/* the usual short media type is written here, not allocated */
	char small[128], *heap = NULL, *media = small;
	const char *jbody;
	char *canon = NULL;
	unsigned int n = 32;
	int ok, as_is;

	if (ctype == NULL)
		ctype = "";
	if (strlen(ctype) < sizeof(small))
		media_type_into(ctype, small, &json);
	else if ((media = heap = idem_media_type(ctype, &json)) == NULL)
		json = 0;
	/* the route's fingerprint-ignore: members left out of a JSON
	 * body */
	const idem_route_conf *ign = req->route != NULL ?
	    idem_route_conf_for(req->route, IDEM_RK_FP_IGNORE) : NULL;
	int prune = json && ign != NULL && ign->nfp_ignore > 0;

	/* a body already in its canonical form need not be parsed and
	 * written again: the same bytes either way */
	as_is = json && !prune && idem_json_is_canonical(body, blen);
	if (json && !as_is)
		canon = prune ? idem_json_canonical_without(body, blen,
		    ign->fp_ignore, ign->nfp_ignore) :
		    idem_json_canonical(body, blen);
	jbody = as_is ? body : canon;
	/* a query of one pair, or none, is its own canonical form */
	if (strchr(query, '&') != NULL)
		query = sorted = idem_query_canonical(req->query);
	in.ctx = thread_ctx();
	in.ok = 1;
	in.used = 0;
	ok = in.ctx != NULL && query != NULL && media != NULL &&
	    EVP_DigestInit_ex(in.ctx, sha256(), NULL) == 1;
	if (ok) {
		field(&in, req->method, strlen(req->method));
		field(&in, tmpl, strlen(tmpl));
		/* each decoded segment apart: "a%2Fb/c" is not "a/b%2Fc" */
		put_len(&in, req->nsegs);
		for (i = 0; i < req->nsegs; i++)
			field(&in, req->segs[i], strlen(req->segs[i]));
		field(&in, query, strlen(query));
		field(&in, media, strlen(media));
		/* a canonical JSON body is marked so it never equals raw
		 * bytes */
		field(&in, jbody != NULL ? "J" : "B", 1);
		field(&in, jbody != NULL ? jbody : body, as_is ? blen :
		    canon != NULL ? strlen(canon) : blen);
		fp_headers(&in, req);
		fp_flush(&in);
		ok = in.ok && EVP_DigestFinal_ex(in.ctx, out, &n) == 1;
	}
	free(sorted);
	free(heap);
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
	const char *kind = cfg->idem.scope == IDEM_SCOPE_HEADER ? cfg->idem.scope_header :
	    "remote-user";
	size_t klen = strlen(kind) + 1, plen = strlen(principal);
	char *buf;
	idem_err err;

	memset(out, 0, 32);
	if (cfg->idem.scope == IDEM_SCOPE_NONE)
		return IDEM_OK;
	if ((buf = malloc(klen + plen)) == NULL)
		return IDEM_ERR_NOMEM;
	memcpy(buf, kind, klen);
	memcpy(buf + klen, principal, plen);
	err = idem_sha256(buf, klen + plen, out);
	free(buf);
	return err;
}
