/*
 * fcgi_client.c - the FastCGI client of the tests (records of the FastCGI
 * 1.0 specification, responder role).
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "fcgi_client.h"
#include "harness.h"

enum { BEGIN_REQUEST = 1, END_REQUEST = 3, PARAMS = 4, STDIN = 5,
    STDOUT = 6, STDERR = 7 };

/* Binds fd (of family) to the IP address source, any port.  Returns 0 or
 * -1. */
static int
bind_source(int fd, int family, const char *source)
{
	struct sockaddr_storage ss;
	socklen_t len;

	memset(&ss, 0, sizeof(ss));
	if (family == AF_INET) {
		struct sockaddr_in *sa = (struct sockaddr_in *)&ss;
		sa->sin_family = AF_INET;
		if (inet_pton(AF_INET, source, &sa->sin_addr) != 1)
			return -1;
		len = sizeof(*sa);
	} else {
		struct sockaddr_in6 *sa = (struct sockaddr_in6 *)&ss;
		sa->sin6_family = AF_INET6;
		if (inet_pton(AF_INET6, source, &sa->sin6_addr) != 1)
			return -1;
		len = sizeof(*sa);
	}
	return bind(fd, (struct sockaddr *)&ss, len);
}

/* Connects to "unix:/path" or "HOST:PORT", from the IP address source
 * when it is not NULL (TCP only); returns the fd or -1. */
static int
connect_from(const char *addr, const char *source)
{
	int fd;

	if (strncmp(addr, "unix:", 5) == 0) {
		struct sockaddr_un sa;
		memset(&sa, 0, sizeof(sa));
		sa.sun_family = AF_UNIX;
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", addr + 5);
		if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
			return -1;
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			close(fd);
			return -1;
		}
		return fd;
	} else {
		struct addrinfo hints, *res, *ai;
		char host[256];
		const char *colon = strrchr(addr, ':');
		if (colon == NULL || (size_t)(colon - addr) >= sizeof(host))
			return -1;
		memcpy(host, addr, (size_t)(colon - addr));
		host[colon - addr] = '\0';
		memset(&hints, 0, sizeof(hints));
		hints.ai_socktype = SOCK_STREAM;
		if (getaddrinfo(host, colon + 1, &hints, &res) != 0)
			return -1;
		fd = -1;
		for (ai = res; ai != NULL && fd < 0; ai = ai->ai_next) {
			fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
			    ai->ai_protocol);
			if (fd >= 0 && source != NULL && bind_source(fd,
			    ai->ai_family, source) < 0) {
				close(fd);
				fd = -1;
				continue;
			}
			if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
				close(fd);
				fd = -1;
			}
		}
		freeaddrinfo(res);
		return fd;
	}
}

/* Connects to addr from no particular source; returns the fd or -1. */
static int
connect_to(const char *addr)
{
	return connect_from(addr, NULL);
}

/* Writes all of buf to fd.  Returns 0 or -1. */
static int
write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Reads exactly len bytes.  Returns 0, or -1 at end of file, an error or
 * the socket's receive timeout. */
static int
read_all(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len > 0) {
		ssize_t n = read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Sends one record (content up to 65535 bytes). */
static int
put_record(int fd, int type, const void *content, size_t len)
{
	unsigned char h[8] = { 1, (unsigned char)type, 0, 1,
	    (unsigned char)(len >> 8), (unsigned char)len, 0, 0 };

	if (write_all(fd, h, 8) < 0)
		return -1;
	return len > 0 ? write_all(fd, content, len) : 0;
}

/* Appends a FastCGI name-value length. */
static size_t
put_len(unsigned char *p, size_t len)
{
	if (len < 128) {
		p[0] = (unsigned char)len;
		return 1;
	}
	p[0] = (unsigned char)((len >> 24) | 0x80);
	p[1] = (unsigned char)(len >> 16);
	p[2] = (unsigned char)(len >> 8);
	p[3] = (unsigned char)len;
	return 4;
}

/* Sends BEGIN_REQUEST (with FCGI_KEEP_CONN when keep), PARAMS and
 * STDIN, ended by its empty record unless unended. */
static int
send_request_as(int fd, int keep, int unended, const char *const *params,
    const void *body, size_t len)
{
	const unsigned char begin[8] = { 0, 1, keep ? 1 : 0, 0, 0, 0, 0, 0 };
	unsigned char *buf;
	size_t used = 0, cap = 65536, i;
	const char *p = body;
	int rc = -1;

	if (put_record(fd, BEGIN_REQUEST, begin, 8) < 0)
		return -1;
	if ((buf = malloc(cap)) == NULL)
		return -1;
	for (i = 0; params != NULL && params[i] != NULL && params[i + 1] != NULL;
	    i += 2) {
		size_t nl = strlen(params[i]), vl = strlen(params[i + 1]);
		if (nl + vl + 8 > 65535)
			goto out;
		if (used + nl + vl + 8 > 65535) {
			if (put_record(fd, PARAMS, buf, used) < 0)
				goto out;
			used = 0;
		}
		used += put_len(buf + used, nl);
		used += put_len(buf + used, vl);
		memcpy(buf + used, params[i], nl);
		used += nl;
		memcpy(buf + used, params[i + 1], vl);
		used += vl;
	}
	if ((used > 0 && put_record(fd, PARAMS, buf, used) < 0) ||
	    put_record(fd, PARAMS, NULL, 0) < 0)
		goto out;
	while (len > 0) {
		size_t n = len > 65535 ? 65535 : len;
		if (put_record(fd, STDIN, p, n) < 0)
			goto out;
		p += n;
		len -= n;
	}
	rc = unended ? 0 : put_record(fd, STDIN, NULL, 0);
out:
	free(buf);
	return rc;
}

/* send_request_as with the stream ended. */
static int
send_request_keep(int fd, int keep, const char *const *params,
    const void *body, size_t len)
{
	return send_request_as(fd, keep, 0, params, body, len);
}

/* Sends a request that asks the server to close the connection after. */
static int
send_request(int fd, const char *const *params, const void *body, size_t len)
{
	return send_request_keep(fd, 0, params, body, len);
}

/* Appends len bytes to a growing buffer. */
static int
append(char **buf, size_t *len, const void *data, size_t n)
{
	char *grown = realloc(*buf, *len + n + 1);

	if (grown == NULL)
		return -1;
	memcpy(grown + *len, data, n);
	*len += n;
	grown[*len] = '\0';
	*buf = grown;
	return 0;
}

/* Splits the CGI output into head and body and reads Status. */
static void
split_output(fc_response *out, char *all, size_t len)
{
	char *sep = strstr(all, "\r\n\r\n");
	const char *st;
	size_t hlen = sep != NULL ? (size_t)(sep - all) + 2 : len;
	size_t skip = sep != NULL ? hlen + 2 : len;

	out->head = strndup(all, hlen);
	out->body_len = len - skip;
	out->body = malloc(out->body_len + 1);
	if (out->body != NULL) {
		memcpy(out->body, all + skip, out->body_len);
		out->body[out->body_len] = '\0';
	}
	st = fc_header(out, "Status");
	out->status = st != NULL ? atoi(st) : 200;
}

/* Reads records from fd up to FCGI_END_REQUEST into *out (zeroed
 * first).  Returns 0, or -1 when the connection closed or timed out
 * before it. */
static int
read_response(int fd, fc_response *out)
{
	char *all = NULL;
	size_t alen = 0;

	memset(out, 0, sizeof(*out));
	for (;;) {
		unsigned char h[8], content[65536 + 256];
		size_t clen, plen;

		if (read_all(fd, h, 8) < 0)
			break;
		clen = (size_t)h[4] << 8 | h[5];
		plen = h[6];
		if (read_all(fd, content, clen + plen) < 0)
			break;
		if (h[1] == STDOUT && append(&all, &alen, content, clen) < 0)
			break;
		if (h[1] == END_REQUEST && clen >= 8) {
			out->app_status = (int)((uint32_t)content[0] << 24 |
			    (uint32_t)content[1] << 16 | (uint32_t)content[2] << 8 |
			    content[3]);
			out->ended = 1;
			break;
		}
	}
	if (!out->ended) {
		free(all);
		return -1;
	}
	split_output(out, all != NULL ? all : "", alen);
	free(all);
	return 0;
}

int
fc_request_raw(const char *addr, const char *const *params, const void *body,
    size_t len, fc_response *out)
{
	int fd, rc;

	memset(out, 0, sizeof(*out));
	if ((fd = connect_to(addr)) < 0)
		return -1;
	if (send_request(fd, params, body, len) < 0) {
		/* the server may answer early (413) and close: read it */
	}
	rc = read_response(fd, out);
	close(fd);
	return rc;
}

/* Builds the params of fc_http into a NULL-terminated array (caller frees
 * the array and every second-level string it allocated via *owned). */
static const char **
build_params(const char *method, const char *uri, const char *const *headers,
    size_t body_len, char ***owned, size_t *nowned)
{
	size_t n = 0, i, cap = 24;
	const char **p;
	const char *q = strchr(uri, '?');
	char cl[32];

	for (i = 0; headers != NULL && headers[i] != NULL; i++)
		cap += 2;
	p = calloc(cap, sizeof(*p));
	*owned = calloc(cap, sizeof(char *));
	*nowned = 0;
	if (p == NULL || *owned == NULL)
		return p;
#define OWN(s) ((*owned)[(*nowned)++] = (s))
	p[n++] = "REQUEST_METHOD";
	p[n++] = method;
	p[n++] = "REQUEST_URI";
	p[n++] = uri;
	p[n++] = "SCRIPT_NAME";
	p[n++] = "";
	p[n++] = "SERVER_PROTOCOL";
	p[n++] = "HTTP/1.1";
	p[n++] = "REMOTE_ADDR";         /* as every web server sends */
	p[n++] = "127.0.0.1";
	p[n++] = "QUERY_STRING";
	p[n++] = q != NULL ? q + 1 : "";
	snprintf(cl, sizeof(cl), "%zu", body_len);
	p[n++] = "CONTENT_LENGTH";
	p[n++] = OWN(strdup(cl));
	for (i = 0; headers != NULL && headers[i] != NULL; i++) {
		const char *colon = strchr(headers[i], ':');
		char *name, *w;
		const char *v;
		if (colon == NULL)
			continue;
		name = malloc((size_t)(colon - headers[i]) + 6);
		if (name == NULL)
			continue;
		if (strncasecmp(headers[i], "Content-Type:", 13) == 0)
			w = name;
		else
			w = name + sprintf(name, "HTTP_");
		for (v = headers[i]; v < colon; v++)
			*w++ = *v == '-' ? '_' : (char)toupper((unsigned char)*v);
		*w = '\0';
		for (v = colon + 1; *v == ' '; v++)
			;
		p[n++] = OWN(name);
		p[n++] = v;
	}
#undef OWN
	p[n] = NULL;
	return p;
}

/* Sends the request of fc_http on fd (keeping the connection open after
 * when keep) and reads its answer.  Returns 0 or -1. */
static int
http_on(int fd, int keep, int unended, const char *method, const char *uri,
    const char *const *headers, const char *body, fc_response *out)
{
	size_t len = body != NULL ? strlen(body) : 0, nowned, i;
	char **owned;
	const char **params = build_params(method, uri, headers, len, &owned,
	    &nowned);
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if (params != NULL && owned != NULL &&
	    send_request_as(fd, keep, unended, params, body, len) == 0)
		rc = read_response(fd, out);
	for (i = 0; owned != NULL && i < nowned; i++)
		free(owned[i]);
	free(owned);
	free(params);
	return rc;
}

int
fc_http(const char *addr, const char *method, const char *uri,
    const char *const *headers, const char *body, fc_response *out)
{
	int fd, rc;

	memset(out, 0, sizeof(*out));
	if ((fd = connect_to(addr)) < 0)
		return -1;
	rc = http_on(fd, 0, 0, method, uri, headers, body, out);
	close(fd);
	return rc;
}

int
fc_connect(const char *addr, const char *source, int timeout_ms)
{
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	int fd = connect_from(addr, source);

	if (fd >= 0 && timeout_ms > 0 &&
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

int
fc_http_on(int fd, const char *method, const char *uri,
    const char *const *headers, const char *body, fc_response *out)
{
	return http_on(fd, 1, 0, method, uri, headers, body, out);
}

int
fc_http_on_unended(int fd, const char *method, const char *uri,
    const char *const *headers, const char *body, fc_response *out)
{
	return http_on(fd, 1, 1, method, uri, headers, body, out);
}

int
fc_closed_by_peer(int fd, int timeout_ms)
{
	struct pollfd pf = { fd, POLLIN, 0 };
	char b;

	if (poll(&pf, 1, timeout_ms) <= 0)
		return 0;
	return recv(fd, &b, 1, MSG_DONTWAIT) <= 0;
}

int
fc_hangup(const char *addr, const char *method, const char *uri)
{
	const char *params[] = { "REQUEST_METHOD", method, "REQUEST_URI", uri,
	    "CONTENT_LENGTH", "0", NULL };
	int fd = connect_to(addr);

	if (fd < 0)
		return -1;
	send_request(fd, params, NULL, 0);
	close(fd);
	return 0;
}

const char *
fc_header(const fc_response *r, const char *name)
{
	return harness_head_find(r->head, name);
}

void
fc_response_free(fc_response *r)
{
	free(r->head);
	free(r->body);
	memset(r, 0, sizeof(*r));
}
