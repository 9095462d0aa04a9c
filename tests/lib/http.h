/*
 * http.h - real HTTP requests for the tests, made by the curl program.
 */
#ifndef HTTP_H
#define HTTP_H

#include <stddef.h>

typedef struct http_response {
	int status;          /* -1: curl failed */
	char *head;          /* status line and headers; caller frees */
	char *body;          /* caller frees */
	size_t body_len;
} http_response;

/*
 * Sends method url with the NULL-terminated "Name: value" headers (may be
 * NULL) and body (len bytes; NULL for none), waits up to 30 s.  Returns 0
 * with *out filled (free with http_response_free), -1 if curl did not run.
 */
int http_request(const char *method, const char *url,
    const char *const *headers, const char *body, size_t len,
    http_response *out);

/* A response header, case-insensitive; a thread-local copy or NULL. */
const char *http_header(const http_response *r, const char *name);

void http_response_free(http_response *r);

#endif
