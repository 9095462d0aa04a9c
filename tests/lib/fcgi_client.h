/*
 * fcgi_client.h - a small FastCGI client for the tests: it speaks to
 * idemfcgi exactly as a web server would: one request per connection, or
 * several on a connection kept open (FCGI_KEEP_CONN), as nginx with
 * fastcgi_keep_conn does.
 */
#ifndef FCGI_CLIENT_H
#define FCGI_CLIENT_H

#include <stddef.h>

typedef struct fc_response {
	int status;          /* from the Status: line; 200 when absent */
	char *head;          /* the CGI head, NUL-terminated; caller frees */
	char *body;          /* NUL-terminated; caller frees */
	size_t body_len;
	int app_status;      /* from FCGI_END_REQUEST */
	int ended;           /* FCGI_END_REQUEST was received */
} fc_response;

/*
 * Sends one request to addr ("unix:/path" or "HOST:PORT"): params is a
 * NULL-terminated list of name, value, name, value...; body goes out as
 * FCGI_STDIN (whatever CONTENT_LENGTH says).  Returns 0 with *out filled
 * (free with fc_response_free), -1 when the connection failed or closed
 * before FCGI_END_REQUEST.
 */
int fc_request_raw(const char *addr, const char *const *params,
    const void *body, size_t len, fc_response *out);

/*
 * The usual request: REQUEST_METHOD, REQUEST_URI (and QUERY_STRING from
 * it), CONTENT_LENGTH, SCRIPT_NAME "", REMOTE_ADDR 127.0.0.1 and one
 * HTTP_* param per "Name: value"
 * of the NULL-terminated headers (may be NULL).
 */
int fc_http(const char *addr, const char *method, const char *uri,
    const char *const *headers, const char *body, fc_response *out);

/*
 * Opens a connection to addr ("unix:/path" or "HOST:PORT") for
 * fc_http_on, from the IP address source when it is not NULL (TCP: bound
 * before connecting, so a test can come from 127.0.0.2); a read waits at
 * most timeout_ms (0: forever), so a server that never answers fails the
 * call instead of hanging the test.  Returns the fd (caller closes) or -1.
 */
int fc_connect(const char *addr, const char *source, int timeout_ms);

/*
 * fc_http on the open connection fd, with FCGI_KEEP_CONN: the server keeps
 * the connection open after its answer for the next request.  Returns 0
 * with *out, or -1 when the connection closed or timed out first.
 */
int fc_http_on(int fd, const char *method, const char *uri,
    const char *const *headers, const char *body, fc_response *out);

/* Whether the server closed fd (end of file or reset) within timeout_ms;
 * 0 also when it sent something instead. */
int fc_closed_by_peer(int fd, int timeout_ms);

/* fc_http_on with the FCGI_STDIN stream left open after the whole body
 * (its empty end record never sent, as from a web server still sending):
 * the server must answer all the same.  0 or -1. */
int fc_http_on_unended(int fd, const char *method, const char *uri,
    const char *const *headers, const char *body, fc_response *out);

/* Connects, sends the request and hangs up without reading.  Returns 0. */
int fc_hangup(const char *addr, const char *method, const char *uri);

/* A header of the CGI head, case-insensitive; a static copy or NULL. */
const char *fc_header(const fc_response *r, const char *name);

void fc_response_free(fc_response *r);

#endif
