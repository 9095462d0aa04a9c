/*
 * idem_answer.c - the stored answer: never-stored headers, the stored form
 * and its replay, the limits, the stand-in.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "idem_answer.h"

/*
 * Response headers never stored for replay: those of one response only (a
 * client's cookie, the time, the request id), the hop-by-hop ones (RFC 9110
 * section 7.6.1), and the replay marker, which replay adds itself.
 */
static const struct {
	const char *name;
	size_t len;
} never_stored[] = {
#define NAME(s) { s, sizeof(s) - 1 }
	NAME("Set-Cookie"), NAME("Date"), NAME("X-Request-Id"),
	NAME("Connection"), NAME("Keep-Alive"), NAME("Proxy-Connection"),
	NAME("Transfer-Encoding"), NAME("Upgrade"), NAME("TE"),
	NAME("Trailer"), NAME(IDEM_REPLAYED_HEADER)
#undef NAME
};

int
idem_header_stored(const idem_config *cfg, const char *name)
{
	size_t i, len = strlen(name);

	/* names of another length cannot be equal */
	for (i = 0; i < sizeof(never_stored) / sizeof(never_stored[0]); i++)
		if (len == never_stored[i].len &&
		    strcasecmp(name, never_stored[i].name) == 0)
			return 0;
	for (i = 0; cfg != NULL && i < cfg->idem.nreplay_omit; i++)
		if (strcasecmp(name, cfg->idem.replay_omit[i]) == 0)
			return 0;
	return 1;
}

/* The bytes headers_write may need for res, its NUL included. */
static size_t
headers_size(const idem_response *res)
{
	size_t i, size = 1;

	for (i = 0; i < res->nheaders; i++)
		size += strlen(res->headers[i].name) +
		    strlen(res->headers[i].value) + 4;
	return size;
}

/* Writes the stored headers of res to out (headers_size(res) bytes):
 * "Name: value\r\n" each, and a NUL.  Returns the length written. */
static size_t
headers_write(const idem_config *cfg, const idem_response *res, char *out)
{
	size_t i, kept = 0, n;
	char *p = out;

	for (i = 0; i < res->nheaders && kept < IDEM_MAX_HEADERS; i++) {
		const idem_header *h = &res->headers[i];
		/* what replay would refuse is never stored */
		if (!idem_response_header_ok(h->name, h->value) ||
		    !idem_header_stored(cfg, h->name))
			continue;
		n = strlen(h->name);
		memcpy(p, h->name, n);
		p += n;
		*p++ = ':';
		*p++ = ' ';
		n = strlen(h->value);
		memcpy(p, h->value, n);
		p += n;
		*p++ = '\r';
		*p++ = '\n';
		kept++;
	}
	*p = '\0';
	return (size_t)(p - out);
}

char *
idem_headers_serialize(const idem_config *cfg, const idem_response *res,
    size_t *len)
{
	char *out = malloc(headers_size(res));

	if (out != NULL)
		*len = headers_write(cfg, res, out);
	return out;
}

idem_err
idem_answer_replay(const idem_config *cfg, const idem_stored_response *sr,
    idem_response *res)
{
	/* the usual few headers are cut up here, not in an allocation */
	char small[1024], *copy = small, *heap = NULL, *line, *save = NULL;
	idem_err err = IDEM_OK;

	idem_response_clear(res);
	if ((err = idem_response_status(res, sr->status)) != IDEM_OK)
		return err;
	if (sr->headers_len >= sizeof(small) &&
	    (copy = heap = malloc(sr->headers_len + 1)) == NULL)
		return IDEM_ERR_NOMEM;
	/* up to the first NUL, as a C string would be */
	copy[0] = '\0';
	if (sr->headers != NULL)
		strncat(copy, sr->headers, sr->headers_len);
	for (line = strtok_r(copy, "\r\n", &save); line != NULL && err == IDEM_OK;
	    line = strtok_r(NULL, "\r\n", &save)) {
		char *colon = strchr(line, ':');
		if (colon == NULL)
			continue;
		*colon = '\0';
		if (!idem_header_stored(cfg, line))
			continue;
		/* the one space idem_headers_serialize writes: a value's own
		 * leading blanks stay */
		err = idem_response_header(res, line,
		    colon[1] == ' ' ? colon + 2 : colon + 1);
	}
	free(heap);
	if (err == IDEM_OK)
		err = idem_response_framework_header(res, IDEM_REPLAYED_HEADER,
		    "true");
	if (err == IDEM_OK)
		err = idem_response_write(res, sr->body, sr->body_len);
	return err;
}

const char *
idem_answer_too_large(const idem_config *cfg, const idem_store_limits *lim,
    size_t headers_len, size_t body_len)
{
	uint64_t total = (uint64_t)headers_len + body_len;

	if (total > cfg->idem.max_response)
		return "it is over max-response";
	if (lim->headers > 0 && headers_len > lim->headers)
		return "its headers are over what the store can hold";
	if (lim->body > 0 && body_len > lim->body)
		return "its body is over what the store can hold";
	if (lim->total > 0 && total > lim->total)
		return "it is over what the store can take in one statement";
	return NULL;
}

/* Appends the "Name: value\r\n" line of name in headers (len bytes) to
 * out (size bytes, NUL-terminated) when it is there and fits. */
static void
keep_line(const char *headers, size_t len, const char *name, char *out,
    size_t size)
{
	size_t nlen = strlen(name), used = strlen(out);
	const char *p = headers, *end = headers + len;

	while (p != NULL && p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		size_t n = eol != NULL ? (size_t)(eol + 1 - p) : (size_t)(end - p);
		if (n > nlen && p[nlen] == ':' && strncasecmp(p, name, nlen) == 0) {
			if (used + n < size) {
				memcpy(out + used, p, n);
				out[used + n] = '\0';
			}
			return;
		}
		p = eol != NULL ? eol + 1 : NULL;
	}
}

/* Room for a stand-in answer (see stand_in). */
struct idem_stand_in {
	char headers[IDEM_STAND_IN_HEADERS];
	char body[IDEM_STAND_IN_BODY];
};
_Static_assert(IDEM_STAND_IN_HEADERS >= 2 * IDEM_MAX_HEADER_VALUE + 100,
    "a stand-in holds Location and Content-Location of any length");

/*
 * Fills *sub, in buf, with the stand-in for sr (a committable answer the
 * store cannot hold) that tells a retry the truth: sr's status, its
 * Location and Content-Location, and a problem+json body with the code
 * IDEMPOTENCY_ANSWER_NOT_STORED saying the request was executed.  Needs
 * no allocation, and is always small enough to store.
 */
static void
stand_in(const idem_stored_response *sr, struct idem_stand_in *buf,
    idem_stored_response *sub)
{
	static const char type[] = "Content-Type: application/problem+json\r\n";
	/* statuses that carry no body keep none */
	int n, nobody = sr->status < 200 || sr->status == 204 ||
	    sr->status == 304;

	snprintf(buf->headers, sizeof(buf->headers), "%s", nobody ? "" : type);
	keep_line(sr->headers, sr->headers_len, "Location", buf->headers,
	    sizeof(buf->headers));
	keep_line(sr->headers, sr->headers_len, "Content-Location",
	    buf->headers, sizeof(buf->headers));
	n = snprintf(buf->body, sizeof(buf->body), "{\"status\":%d,\"title\":"
	    "\"%s\",\"code\":\"IDEMPOTENCY_ANSWER_NOT_STORED\",\"detail\":"
	    "\"this request was executed and answered %d; its answer (%zu "
	    "bytes) was too large to store, so this notice is replayed in its "
	    "place\"}", sr->status, idem_status_reason(sr->status), sr->status,
	    sr->headers_len + sr->body_len);
	memset(sub, 0, sizeof(*sub));
	sub->status = sr->status;
	sub->headers = buf->headers;
	sub->headers_len = strlen(buf->headers);
	if (!nobody) {
		sub->body = buf->body;
		sub->body_len = n > 0 && (size_t)n < sizeof(buf->body) ?
		    (size_t)n : 0;
	}
}


/* Makes a->sr the stand-in for a->whole, a->why why.  Returns IDEM_OK or
 * IDEM_ERR_NOMEM. */
static idem_err
use_stand_in(idem_answer *a, const char *why)
{
	/* why is known even when there is no room for the stand-in */
	a->why = why;
	if (a->buf == NULL && (a->buf = malloc(sizeof(*a->buf))) == NULL)
		return IDEM_ERR_NOMEM;
	stand_in(&a->whole, a->buf, &a->sr);
	return IDEM_OK;
}

idem_err
idem_answer_prepare(idem_answer *a, const idem_config *cfg,
    const idem_store_limits *lim, const idem_response *res)
{
	size_t size = headers_size(res);
	const char *why;

	memset(&a->whole, 0, sizeof(a->whole));
	a->heap = NULL;
	a->buf = NULL;
	a->why = NULL;
	a->whole.status = res->status;
	a->whole.body = res->body;
	a->whole.body_len = res->len;
	a->whole.headers = size <= sizeof(a->small) ? a->small :
	    (a->heap = malloc(size));
	if (a->whole.headers != NULL)
		a->whole.headers_len = headers_write(cfg, res, a->whole.headers);
	why = a->whole.headers == NULL ? "out of memory" :
	    idem_answer_too_large(cfg, lim, a->whole.headers_len,
	    a->whole.body_len);
	a->sr = a->whole;
	return why != NULL ? use_stand_in(a, why) : IDEM_OK;
}

idem_err
idem_answer_prepare_stored(idem_answer *a, const idem_config *cfg,
    const idem_store_limits *lim, const idem_stored_response *sr)
{
	const char *why = idem_answer_too_large(cfg, lim, sr->headers_len,
	    sr->body_len);

	a->heap = NULL;
	a->buf = NULL;
	a->why = NULL;
	a->whole = *sr;
	a->sr = *sr;
	return why != NULL ? use_stand_in(a, why) : IDEM_OK;
}

idem_err
idem_answer_stand_in(idem_answer *a, const char *why)
{
	if (a->why != NULL)
		return a->buf != NULL ? IDEM_ERR_TOO_LARGE : IDEM_ERR_NOMEM;
	return use_stand_in(a, why);
}

void
idem_answer_clear(idem_answer *a)
{
	free(a->heap);
	free(a->buf);
	a->heap = NULL;
	a->buf = NULL;
}
