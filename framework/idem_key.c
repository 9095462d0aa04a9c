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

/* Dumps of canonical JSON: compact, and reals with 15 significant digits,
 * so that a number like 0.1 comes out as written. */
#define DUMP_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(15))

/*
 * The next number token of the JSON text s (len bytes) at or after *pos,
 * outside strings: sets *tok, *toklen and *pos past it.  Returns 1, or 0
 * at the end.
 */
static int
next_number(const char *s, size_t len, size_t *pos, const char **tok,
    size_t *toklen)
{
	size_t i = *pos, start;

	while (i < len && s[i] != '-' && (s[i] < '0' || s[i] > '9')) {
		if (s[i++] != '"')
			continue;
		for (; i < len && s[i] != '"'; i++)
			if (s[i] == '\\')
				i++;
		i++;
	}
	if (i >= len) {
		*pos = len;
		return 0;
	}
	for (start = i; i < len && (s[i] == '-' || s[i] == '+' ||
	    s[i] == '.' || s[i] == 'e' || s[i] == 'E' ||
	    (s[i] >= '0' && s[i] <= '9')); i++)
		;
	*tok = s + start;
	*toklen = i - start;
	*pos = i;
	return 1;
}

/* Whether a number token is an integer that jansson reads and writes back
 * unchanged: 0, or -?[1-9][0-9]{0,17}. */
static int
plain_integer(const char *tok, size_t len)
{
	size_t i = tok[0] == '-';

	if (len == 1 && tok[0] == '0')
		return 1;
	if (len <= i || len - i > 18 || tok[i] == '0')
		return 0;
	for (; i < len; i++)
		if (tok[i] < '0' || tok[i] > '9')
			return 0;
	return 1;
}

/*
 * Whether every number token of text (len bytes, parsed into j) comes out
 * of the canonical dump as written, so that two texts whose numbers differ
 * in any digit never share a canonical form.  Plain integers always do;
 * otherwise the tokens are compared with those of an unsorted dump, whose
 * numbers are in document order.  Returns 1, 0, or -1 when out of memory.
 */
static int
numbers_exact(const char *text, size_t len, const json_t *j)
{
	const char *a, *b;
	size_t pa = 0, pb = 0, la, lb, dlen;
	char *dump;
	int more, same = 1, plain = 1;

	while (plain && next_number(text, len, &pa, &a, &la))
		plain = plain_integer(a, la);
	if (plain)
		return 1;
	if ((dump = json_dumps(j, DUMP_FLAGS)) == NULL)
		return -1;
	dlen = strlen(dump);
	pa = 0;
	do {
		more = next_number(text, len, &pa, &a, &la);
		if (more != next_number(dump, dlen, &pb, &b, &lb) ||
		    (more && (la != lb || memcmp(a, b, la) != 0)))
			same = 0;
	} while (more && same);
	free(dump);
	return same;
}

char *
idem_json_canonical(const char *text, size_t len)
{
	json_error_t err;
	json_t *j;
	char *out = NULL;
	size_t i;

	for (i = 0; i < len && isspace((unsigned char)text[i]); i++)
		;
	if (i == len || (text[i] != '{' && text[i] != '['))
		return NULL;
	if ((j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err)) == NULL)
		return NULL;
	if (numbers_exact(text, len, j) == 1)
		out = json_dumps(j, DUMP_FLAGS | JSON_SORT_KEYS);
	json_decref(j);
	return out;
}

/* The depth of nesting up to which idem_json_is_canonical looks; a
 * deeper text is left to idem_json_canonical. */
#define AS_IS_DEPTH 32

/* A JSON string at s[*i] (its opening quote) of printable ASCII with no
 * escape, which a dump writes back as it is: sets *str and *n to its
 * content and *i past it.  Returns 1, or 0 for any other string. */
static int
as_is_string(const char *s, size_t len, size_t *i, const char **str,
    size_t *n)
{
	size_t j;

	for (j = *i + 1; j < len && s[j] != '"'; j++)
		if ((unsigned char)s[j] < 0x20 || (unsigned char)s[j] > 0x7e ||
		    s[j] == '\\')
			return 0;
	if (j >= len)
		return 0;
	*str = s + *i + 1;
	*n = j - *i - 1;
	*i = j + 1;
	return 1;
}

/* Whether s[*i] starts the literal lit (true, false, null); advances *i
 * past it. */
static int
as_is_literal(const char *s, size_t len, size_t *i, const char *lit)
{
	size_t n = strlen(lit);

	if (len - *i < n || memcmp(s + *i, lit, n) != 0)
		return 0;
	*i += n;
	return 1;
}

/*
 * Whether the JSON value at s[*i] is written as its canonical dump writes
 * it (see idem_json_is_canonical), depth the containers around it;
 * advances *i past it.  Returns 1, or 0 when it is not, or may not be.
 */
static int
as_is_value(const char *s, size_t len, size_t *i, int depth)
{
	const char *key, *prev = NULL;
	size_t klen, plen = 0, start = *i;
	int c;

	if (*i >= len)
		return 0;
	switch (s[*i]) {
	case '"':
		return as_is_string(s, len, i, &key, &klen);
	case 't':
		return as_is_literal(s, len, i, "true");
	case 'f':
		return as_is_literal(s, len, i, "false");
	case 'n':
		return as_is_literal(s, len, i, "null");
	case '[':
		if (depth >= AS_IS_DEPTH)
			return 0;
		if (++(*i) < len && s[*i] == ']') {
			(*i)++;
			return 1;
		}
		for (;;) {
			if (!as_is_value(s, len, i, depth + 1) || *i >= len)
				return 0;
			if (s[(*i)++] == ']')
				return 1;
			if (s[*i - 1] != ',')
				return 0;
		}
	case '{':
		if (depth >= AS_IS_DEPTH)
			return 0;
		if (++(*i) < len && s[*i] == '}') {
			(*i)++;
			return 1;
		}
		for (;;) {
			if (*i >= len || s[*i] != '"' ||
			    !as_is_string(s, len, i, &key, &klen))
				return 0;
			/* keys strictly ascending, as a sorted dump writes
			 * them (bytewise, a prefix first): no duplicate */
			c = prev == NULL ? -1 :
			    memcmp(prev, key, plen < klen ? plen : klen);
			if (c > 0 || (c == 0 && plen >= klen))
				return 0;
			prev = key;
			plen = klen;
			if (*i >= len || s[(*i)++] != ':' ||
			    !as_is_value(s, len, i, depth + 1) || *i >= len)
				return 0;
			if (s[(*i)++] == '}')
				return 1;
			if (s[*i - 1] != ',')
				return 0;
		}
	default:
		/* a plain integer only (see plain_integer), not followed by
		 * a fraction or an exponent */
		if (s[*i] == '-')
			(*i)++;
		while (*i < len && s[*i] >= '0' && s[*i] <= '9')
			(*i)++;
		if (*i < len && (s[*i] == '.' || s[*i] == 'e' || s[*i] == 'E'))
			return 0;
		return *i > start && plain_integer(s + start, *i - start);
	}
}

int
idem_json_is_canonical(const char *text, size_t len)
{
	size_t i = 0;

	if (len == 0 || (text[0] != '{' && text[0] != '['))
		return 0;
	return as_is_value(text, len, &i, 0) && i == len;
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
	/* a body already in its canonical form need not be parsed and
	 * written again: the same bytes either way */
	as_is = json && idem_json_is_canonical(body, blen);
	if (json && !as_is)
		canon = idem_json_canonical(body, blen);
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
