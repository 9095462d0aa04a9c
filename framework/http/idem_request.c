/*
 * idem_request.c - parsing the FastCGI params and body of a request.
 */
#include "config.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#include "idem_request.h"
#include "idem_router.h"
#include "idem_time.h"

void
idem_problem_set(idem_problem *pb, int status, const char *code,
    const char *fmt, ...)
{
	va_list ap;

	pb->status = status;
	pb->code = code;
	va_start(ap, fmt);
	vsnprintf(pb->detail, sizeof(pb->detail), fmt, ap);
	va_end(ap);
}

const char *
idem_request_env(const idem_request *req, const char *name)
{
	size_t len = strlen(name);
	char *const *p;

	if (req->envp == NULL)
		return NULL;
	/* the first byte before the call: most variables differ there */
	for (p = req->envp; *p != NULL; p++)
		if ((len == 0 || (*p)[0] == name[0]) &&
		    strncmp(*p, name, len) == 0 && (*p)[len] == '=')
			return *p + len + 1;
	return NULL;
}

/* A request id we accept from X-Request-Id: 1..64 of [A-Za-z0-9._:+/=-]. */
static int
sane_request_id(const char *s)
{
	size_t n = 0;

	for (; s[n] != '\0'; n++)
		if (n >= IDEM_REQUEST_ID_MAX ||
		    (!isalnum((unsigned char)s[n]) &&
		    strchr("._:+/=-", s[n]) == NULL))
			return 0;
	return n > 0;
}

int
idem_hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)tolower((unsigned char)c);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/*
 * Splits path (which starts with '/') into req->segs, percent-decoding each
 * segment when decode is set, so that "%2F" stays inside its segment.  Also
 * builds req->path.  Returns IDEM_OK or IDEM_ERR_PROTOCOL with *pb set.
 */
static idem_err
split_path(idem_request *req, const char *path, size_t len, int decode,
    idem_problem *pb)
{
	char *out, *p;
	size_t i;

	if (len > IDEM_MAX_PATH) {
		idem_problem_set(pb, 414, "URI_TOO_LONG",
		    "the path is longer than %d bytes", IDEM_MAX_PATH);
		return IDEM_ERR_PROTOCOL;
	}
	/* segbuf holds the segments, path the joined form */
	if ((req->segbuf = malloc(len + 1)) == NULL ||
	    (req->path = malloc(len + 2)) == NULL) {
		idem_problem_set(pb, 500, "OUT_OF_MEMORY", "out of memory");
		return IDEM_ERR_NOMEM;
	}
	/* a refused path is logged as given so far, never unterminated */
	req->path[0] = '\0';
	out = req->segbuf;
	req->nsegs = 0;
	i = 1; /* skip the leading '/' */
	if (len == 1)
		i = len + 1; /* "/" has no segments */
	while (i <= len) {
		if (req->nsegs == IDEM_MAX_SEGMENTS) {
			idem_problem_set(pb, 404, "ROUTE_NOT_FOUND",
			    "the path has more than %d segments",
			    IDEM_MAX_SEGMENTS);
			return IDEM_ERR_PROTOCOL;
		}
		req->segs[req->nsegs++] = out;
		for (; i < len && path[i] != '/'; i++) {
			char c = path[i];
			if (decode && c == '%') {
				int hi = i + 2 < len ?
				    idem_hex_digit(path[i + 1]) : -1;
				int lo = i + 2 < len ?
				    idem_hex_digit(path[i + 2]) : -1;
				if (hi < 0 || lo < 0) {
					idem_problem_set(pb, 400, "BAD_PATH",
					    "malformed percent-escape in the path");
					return IDEM_ERR_PROTOCOL;
				}
				c = (char)(hi * 16 + lo);
				i += 2;
			}
			if (c == '\0') {
				idem_problem_set(pb, 400, "BAD_PATH",
				    "the path contains a NUL byte");
				return IDEM_ERR_PROTOCOL;
			}
			*out++ = c;
		}
		*out++ = '\0';
		i++; /* past the '/' (or the end) */
	}
	p = req->path;
	*p = '/';
	p[1] = '\0';
	for (i = 0; i < req->nsegs; i++) {
		size_t n = strlen(req->segs[i]);
		*p++ = '/';
		memcpy(p, req->segs[i], n);
		p += n;
		*p = '\0';
	}
	if (req->nsegs == 0)
		req->path[1] = '\0';
	return IDEM_OK;
}

/* Checks the params against lim.  Returns 0, or -1 with a 431 in *pb. */
static int
check_params(char *const *envp, const idem_request_limits *lim,
    idem_problem *pb)
{
	uint64_t total = 0;
	unsigned headers = 0;
	char *const *p;

	for (p = envp; p != NULL && *p != NULL; p++) {
		size_t len = strlen(*p);
		total += len;
		if (strncmp(*p, "HTTP_", 5) == 0) {
			const char *eq = strchr(*p, '=');
			headers++;
			if (eq != NULL && len - (size_t)(eq + 1 - *p) >
			    lim->max_header_size) {
				idem_problem_set(pb, 431, "HEADERS_TOO_LARGE",
				    "a header is longer than %llu bytes",
				    (unsigned long long)lim->max_header_size);
				return -1;
			}
		}
	}
	if (headers > lim->max_headers) {
		idem_problem_set(pb, 431, "HEADERS_TOO_LARGE", "more than %u "
		    "headers", lim->max_headers);
		return -1;
	}
	if (total > lim->max_params_size) {
		idem_problem_set(pb, 431, "HEADERS_TOO_LARGE", "the request "
		    "head is larger than %llu bytes",
		    (unsigned long long)lim->max_params_size);
		return -1;
	}
	return 0;
}

/*
 * Sets req->script_name to the len bytes of prefix (SCRIPT_NAME, or the
 * mount stripped from REQUEST_URI) as a URI path: runs of '/' made one,
 * no trailing '/', and bytes a path cannot hold (controls, space,
 * non-ASCII, "<>\"^`{|}?#[]\\") percent-encoded; '%' is kept, since a
 * prefix taken from REQUEST_URI is encoded already.  So it never starts
 * with "//" (a Location naming another host).  Returns IDEM_OK, or an
 * error with *pb set (414 over IDEM_MAX_PATH, 500 out of memory).
 */
static idem_err
set_script_name(idem_request *req, const char *prefix, size_t len,
    idem_problem *pb)
{
	static const char hex[] = "0123456789ABCDEF";
	static const char keep[] = "-._~!$&'()*+,;=:@%/";
	size_t i, n = 0;
	char *out;

	if (len > IDEM_MAX_PATH) {
		idem_problem_set(pb, 414, "URI_TOO_LONG",
		    "SCRIPT_NAME is longer than %d bytes", IDEM_MAX_PATH);
		return IDEM_ERR_PROTOCOL;
	}
	if ((out = malloc(3 * len + 1)) == NULL) {
		idem_problem_set(pb, 500, "OUT_OF_MEMORY", "out of memory");
		return IDEM_ERR_NOMEM;
	}
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)prefix[i];
		if (c == '/' && n > 0 && out[n - 1] == '/')
			continue;
		if (isalnum(c) && c < 0x80) {
			out[n++] = (char)c;
		} else if (c != '\0' && strchr(keep, c) != NULL) {
			out[n++] = (char)c;
		} else {
			out[n++] = '%';
			out[n++] = hex[c >> 4];
			out[n++] = hex[c & 15];
		}
	}
	while (n > 0 && out[n - 1] == '/')
		n--;
	out[n] = '\0';
	req->script_name = out;
	return IDEM_OK;
}

idem_err
idem_request_parse(idem_request *req, char *const *envp,
    const idem_request_limits *lim, idem_problem *pb)
{
	const char *id, *cl, *pi, *uri, *mount = lim->mount;
	size_t mlen = mount != NULL ? strlen(mount) : 0;
	uint64_t n = 0;
	size_t len, i;

	memset(req, 0, sizeof(*req));
	req->envp = envp;

	id = idem_request_env(req, "HTTP_X_REQUEST_ID");
	if (id != NULL && sane_request_id(id)) {
		strcpy(req->request_id, id);
	} else {
		idem_uuid4(req->request_id);
	}
	if (check_params(envp, lim, pb) < 0)
		return IDEM_ERR_PROTOCOL;

	req->method = idem_request_env(req, "REQUEST_METHOD");
	if (req->method == NULL || *req->method == '\0') {
		idem_problem_set(pb, 400, "BAD_REQUEST",
		    "the web server sent no REQUEST_METHOD");
		return IDEM_ERR_PROTOCOL;
	}
	for (i = 0; req->method[i] != '\0'; i++)
		if (i >= 32 || !isupper((unsigned char)req->method[i])) {
			idem_problem_set(pb, 400, "BAD_REQUEST",
			    "malformed request method");
			return IDEM_ERR_PROTOCOL;
		}
	req->query = idem_request_env(req, "QUERY_STRING");
	if (req->query == NULL)
		req->query = "";
	req->remote_user = idem_request_env(req, "REMOTE_USER");
	if (req->remote_user != NULL && *req->remote_user == '\0')
		req->remote_user = NULL;

	cl = idem_request_env(req, "CONTENT_LENGTH");
	if (cl != NULL && *cl != '\0') {
		req->has_length = 1;
		for (i = 0; cl[i] != '\0'; i++) {
			if (!isdigit((unsigned char)cl[i]) || i >= 19) {
				idem_problem_set(pb, 400, "BAD_CONTENT_LENGTH",
				    "CONTENT_LENGTH is not a number");
				return IDEM_ERR_PROTOCOL;
			}
			n = n * 10 + (uint64_t)(cl[i] - '0');
		}
	}
	req->content_length = n;

	/* Route on PATH_INFO when set, else on REQUEST_URI minus the mount;
	 * on REQUEST_URI always when so configured (web servers decode
	 * PATH_INFO whole, and some replace control bytes in it) */
	pi = idem_request_env(req, "PATH_INFO");
	if (lim->path_from_uri && idem_request_env(req, "REQUEST_URI") != NULL)
		pi = NULL;
	if (pi != NULL && *pi != '\0') {
		const char *sn = idem_request_env(req, "SCRIPT_NAME");
		idem_err err;
		if (*pi != '/' || (sn != NULL && *sn != '\0' && *sn != '/')) {
			idem_problem_set(pb, 400, "BAD_PATH", "%s does not "
			    "start with '/'", *pi != '/' ? "PATH_INFO" :
			    "SCRIPT_NAME");
			return IDEM_ERR_PROTOCOL;
		}
		if (sn != NULL && (err = set_script_name(req, sn, strlen(sn),
		    pb)) != IDEM_OK)
			return err;
		return split_path(req, pi, strlen(pi), 0, pb);
	}
	uri = idem_request_env(req, "REQUEST_URI");
	if (uri == NULL || *uri != '/') {
		idem_problem_set(pb, 400, "BAD_REQUEST",
		    "the web server sent neither PATH_INFO nor a REQUEST_URI "
		    "starting with '/'");
		return IDEM_ERR_PROTOCOL;
	}
	len = strcspn(uri, "?#");
	if (mlen > 0 && len >= mlen && strncmp(uri, mount, mlen) == 0 &&
	    (len == mlen || uri[mlen] == '/')) {
		idem_err err = set_script_name(req, mount, mlen, pb);
		if (err != IDEM_OK)
			return err;
		uri += mlen;
		len -= mlen;
		if (len == 0) {
			uri = "/";
			len = 1;
		}
	}
	return split_path(req, uri, len, 1, pb);
}

/*
 * Reads a body of unknown length (no CONTENT_LENGTH) until rd reports its
 * end, into req->body, growing the buffer up to one byte over max_body.
 * Returns as idem_request_read_body does.
 */
static idem_err
read_to_end(idem_request *req, uint64_t max_body, idem_read_fn rd,
    void *ctx, idem_problem *pb)
{
	size_t limit = max_body < SIZE_MAX - 1 ? (size_t)max_body + 1 :
	    SIZE_MAX - 1;
	size_t got = 0, cap = 0;
	char *buf = NULL, *grown;
	ssize_t r;

	while (got < limit) {
		if (got == cap) {
			size_t ncap = cap == 0 ? 4096 : cap * 2;
			if (cap > limit / 2 || ncap > limit)
				ncap = limit;
			if ((grown = realloc(buf, ncap + 1)) == NULL) {
				free(buf);
				idem_problem_set(pb, 500, "OUT_OF_MEMORY",
				    "out of memory");
				return IDEM_ERR_NOMEM;
			}
			buf = grown;
			cap = ncap;
		}
		if ((r = rd(ctx, buf + got, cap - got)) == 0)
			break;
		if (r < 0) {
			free(buf);
			idem_problem_set(pb, 400, "BODY_INCOMPLETE",
			    "reading the body failed after %zu bytes", got);
			return IDEM_ERR_PROTOCOL;
		}
		got += (size_t)r;
	}
	if (got > max_body) {
		free(buf);
		idem_problem_set(pb, 413, "BODY_TOO_LARGE", "the body is "
		    "longer than the limit of %llu bytes",
		    (unsigned long long)max_body);
		return IDEM_ERR_TOO_LARGE;
	}
	buf[got] = '\0';
	req->body = buf;
	req->body_len = got;
	return IDEM_OK;
}

idem_err
idem_request_read_body(idem_request *req, uint64_t max_body, idem_read_fn rd,
    void *ctx, idem_problem *pb)
{
	size_t got = 0, want;

	if (!req->has_length)
		return read_to_end(req, max_body, rd, ctx, pb);
	if (req->content_length > max_body) {
		idem_problem_set(pb, 413, "BODY_TOO_LARGE",
		    "the body has %llu bytes; the limit is %llu",
		    (unsigned long long)req->content_length,
		    (unsigned long long)max_body);
		return IDEM_ERR_TOO_LARGE;
	}
	want = (size_t)req->content_length;
	if ((req->body = malloc(want + 1)) == NULL) {
		idem_problem_set(pb, 500, "OUT_OF_MEMORY", "out of memory");
		return IDEM_ERR_NOMEM;
	}
	while (got < want) {
		ssize_t r = rd(ctx, req->body + got, want - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	req->body[got] = '\0';
	req->body_len = got;
	if (got < want) {
		idem_problem_set(pb, 400, "BODY_INCOMPLETE",
		    "the body ended after %zu of %zu bytes (CONTENT_LENGTH)",
		    got, want);
		return IDEM_ERR_PROTOCOL;
	}
	return IDEM_OK;
}

void
idem_request_drain_body(idem_request *req, uint64_t limit, idem_read_fn rd,
    void *ctx)
{
	char buf[16384];
	uint64_t left = req->has_length && req->content_length < limit ?
	    req->content_length : limit;

	while (left > 0) {
		ssize_t r = rd(ctx, buf, left < sizeof(buf) ? (size_t)left :
		    sizeof(buf));
		if (r <= 0)
			break;
		left -= (uint64_t)r;
	}
}

void
idem_request_clear(idem_request *req)
{
	free(req->path);
	free(req->script_name);
	free(req->segbuf);
	free(req->body);
	memset(req, 0, sizeof(*req));
}

/* ------------------------------------------------------ public accessors */

const char *
idem_request_method(const idem_request *req)
{
	return req->method;
}

const char *
idem_request_path(const idem_request *req)
{
	return req->path;
}

const char *
idem_request_script_name(const idem_request *req)
{
	return req->script_name != NULL ? req->script_name : "";
}

const char *
idem_request_query(const idem_request *req)
{
	return req->query;
}

const char *
idem_request_header(const idem_request *req, const char *name)
{
	char cgi[128];
	size_t i, off = 5;

	if (strcasecmp(name, "Content-Type") == 0 ||
	    strcasecmp(name, "Content-Length") == 0)
		off = 0;
	else
		memcpy(cgi, "HTTP_", 5);
	for (i = 0; name[i] != '\0'; i++) {
		if (off + i >= sizeof(cgi) - 1)
			return NULL;
		cgi[off + i] = name[i] == '-' ? '_' :
		    (char)toupper((unsigned char)name[i]);
	}
	cgi[off + i] = '\0';
	return idem_request_env(req, cgi);
}

const char *
idem_request_param(const idem_request *req, const char *name)
{
	size_t i;

	for (i = 0; i < req->nparams; i++)
		if (strcmp(req->params[i].name, name) == 0)
			return req->params[i].value;
	return NULL;
}

const char *
idem_request_body(const idem_request *req, size_t *len)
{
	if (len != NULL)
		*len = req->body_len;
	return req->body != NULL ? req->body : "";
}

const char *
idem_request_remote_user(const idem_request *req)
{
	return req->remote_user;
}

const char *
idem_request_id(const idem_request *req)
{
	return req->request_id;
}

const char *
idem_request_route(const idem_request *req)
{
	return req->route != NULL ? req->route->tmpl : NULL;
}

json_t *
idem_request_json(const idem_request *req, json_error_t *error)
{
	json_error_t local;

	return json_loadb(req->body != NULL ? req->body : "", req->body_len,
	    JSON_REJECT_DUPLICATES, error != NULL ? error : &local);
}
