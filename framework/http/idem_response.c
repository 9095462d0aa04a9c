/*
 * idem_response.c - building a response and writing its CGI head.
 */
#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem_log.h"
#include "idem_request.h"

void
idem_response_init(idem_response *res)
{
	memset(res, 0, sizeof(*res));
	res->status = 200;
}

void
idem_response_clear(idem_response *res)
{
	idem_error_fn fn = res->error_fn;
	void *data = res->error_data;
	int rendering = res->rendering;
	size_t i;

	for (i = 0; i < res->nheaders; i++) {
		free(res->headers[i].name);
		free(res->headers[i].value);
	}
	free(res->headers);
	free(res->body);
	idem_response_init(res);
	res->error_fn = fn;
	res->error_data = data;
	res->rendering = rendering;
}

const char *
idem_status_reason(int status)
{
	switch (status) {
	case 100: return "Continue";
	case 200: return "OK";
	case 201: return "Created";
	case 202: return "Accepted";
	case 204: return "No Content";
	case 301: return "Moved Permanently";
	case 302: return "Found";
	case 304: return "Not Modified";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 402: return "Payment Required";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 409: return "Conflict";
	case 410: return "Gone";
	case 411: return "Length Required";
	case 412: return "Precondition Failed";
	case 413: return "Content Too Large";
	case 414: return "URI Too Long";
	case 415: return "Unsupported Media Type";
	case 422: return "Unprocessable Content";
	case 425: return "Too Early";
	case 428: return "Precondition Required";
	case 429: return "Too Many Requests";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	default: return "Unknown";
	}
}

idem_err
idem_response_status(idem_response *res, int status)
{
	if (status < 100 || status > 599)
		return IDEM_ERR_INVALID;
	res->status = status;
	return IDEM_OK;
}

int
idem_response_get_status(const idem_response *res)
{
	return res->status;
}

/* An HTTP token (RFC 9110 section 5.6.2) of at most 128 bytes. */
static int
header_name_ok(const char *s)
{
	size_t n;

	for (n = 0; s[n] != '\0'; n++)
		if (n >= 128 || (!isalnum((unsigned char)s[n]) &&
		    strchr("!#$%&'*+-.^_`|~", s[n]) == NULL))
			return 0;
	return n > 0;
}

/* No CR, LF, NUL or other control byte but TAB. */
static int
header_value_ok(const char *s)
{
	size_t n;

	for (n = 0; s[n] != '\0'; n++)
		if (n >= IDEM_MAX_HEADER_VALUE ||
		    ((unsigned char)s[n] < 0x20 && s[n] != '\t') || s[n] == 0x7f)
			return 0;
	return 1;
}

int
idem_response_header_ok(const char *name, const char *value)
{
	return name != NULL && value != NULL && header_name_ok(name) &&
	    header_value_ok(value) && strcasecmp(name, "Status") != 0 &&
	    strcasecmp(name, "Content-Length") != 0 &&
	    strcasecmp(name, "X-Request-Id") != 0;
}

/* Adds a header when res has fewer than max.  Returns IDEM_OK,
 * IDEM_ERR_INVALID, IDEM_ERR_TOO_LARGE or IDEM_ERR_NOMEM. */
static idem_err
add_header(idem_response *res, const char *name, const char *value,
    size_t max)
{
	idem_header *h;

	if (!idem_response_header_ok(name, value))
		return IDEM_ERR_INVALID;
	if (res->nheaders >= max)
		return IDEM_ERR_TOO_LARGE;
	if (res->nheaders == res->capheaders) {
		size_t cap = res->capheaders ? res->capheaders * 2 : 4;
		h = realloc(res->headers, cap * sizeof(*h));
		if (h == NULL)
			return IDEM_ERR_NOMEM;
		res->headers = h;
		res->capheaders = cap;
	}
	h = &res->headers[res->nheaders];
	h->name = strdup(name);
	h->value = strdup(value);
	if (h->name == NULL || h->value == NULL) {
		free(h->name);
		free(h->value);
		return IDEM_ERR_NOMEM;
	}
	res->nheaders++;
	return IDEM_OK;
}

idem_err
idem_response_header(idem_response *res, const char *name, const char *value)
{
	return add_header(res, name, value, IDEM_MAX_HEADERS);
}

idem_err
idem_response_framework_header(idem_response *res, const char *name,
    const char *value)
{
	return add_header(res, name, value,
	    IDEM_MAX_HEADERS + IDEM_FRAMEWORK_HEADERS);
}

const char *
idem_response_get_header(const idem_response *res, const char *name)
{
	size_t i;

	for (i = 0; i < res->nheaders; i++)
		if (strcasecmp(res->headers[i].name, name) == 0)
			return res->headers[i].value;
	return NULL;
}

idem_err
idem_response_write(idem_response *res, const void *data, size_t len)
{
	if (len == 0)
		return IDEM_OK;
	if (len > SIZE_MAX / 2 - res->len)
		return IDEM_ERR_TOO_LARGE;
	if (res->len + len > res->cap) {
		size_t cap = res->cap ? res->cap : 256;
		char *body;
		while (cap < res->len + len)
			cap *= 2;
		if ((body = realloc(res->body, cap)) == NULL)
			return IDEM_ERR_NOMEM;
		res->body = body;
		res->cap = cap;
	}
	memcpy(res->body + res->len, data, len);
	res->len += len;
	return IDEM_OK;
}

/* Replaces (or adds) a header the framework manages. */
static idem_err
replace_header(idem_response *res, const char *name, const char *value)
{
	size_t i;
	char *copy;

	for (i = 0; i < res->nheaders; i++)
		if (strcasecmp(res->headers[i].name, name) == 0) {
			if ((copy = strdup(value)) == NULL)
				return IDEM_ERR_NOMEM;
			free(res->headers[i].value);
			res->headers[i].value = copy;
			return IDEM_OK;
		}
	return idem_response_header(res, name, value);
}

idem_err
idem_response_json(idem_response *res, int status, json_t *json)
{
	char *text;
	idem_err err;

	if (json == NULL)
		return IDEM_ERR_INVALID;
	text = json_dumps(json, JSON_COMPACT | JSON_ENCODE_ANY);
	json_decref(json);
	if (text == NULL)
		return IDEM_ERR_NOMEM;
	res->len = 0;
	if ((err = idem_response_status(res, status)) == IDEM_OK &&
	    (err = replace_header(res, "Content-Type", "application/json"))
	    == IDEM_OK)
		err = idem_response_write(res, text, strlen(text));
	free(text);
	return err;
}

/* Writes the error through res's error format; one that fails leaves res
 * without a body.  Returns IDEM_OK, or IDEM_ERR_INVALID when the format failed (the
 * caller writes the default problem). */
static idem_err
render_error(idem_response *res, int status, const char *code,
    const char *detail)
{
	idem_err err;

	res->len = 0;
	res->rendering = 1;
	err = res->error_fn(res, status, code != NULL ? code : "ERROR", detail,
	    res->error_data);
	res->rendering = 0;
	if (err == IDEM_OK) {
		res->status = status;
		return IDEM_OK;
	}
	idem_log(NULL, IDEM_LOG_ERROR, "an error format failed (%s) for %d "
	    "%s: answered as a problem", idem_strerror(err), status,
	    code != NULL ? code : "");
	res->len = 0;
	return IDEM_ERR_INVALID;
}

idem_err
idem_response_problem(idem_response *res, int status, const char *code,
    const char *detail)
{
	return idem_response_problem_with(res, status, code, detail, NULL);
}

idem_err
idem_response_problem_with(idem_response *res, int status, const char *code,
    const char *detail, json_t *members)
{
	json_t *obj;
	idem_err err;

	if (status < 100 || status > 599) {
		json_decref(members);
		return IDEM_ERR_INVALID;
	}
	if (res->error_fn != NULL && !res->rendering &&
	    (err = render_error(res, status, code, detail)) != IDEM_ERR_INVALID) {
		json_decref(members);
		return err;
	}
	obj = members != NULL ? members : json_object();
	if (obj == NULL)
		return IDEM_ERR_NOMEM;
	json_object_set_new(obj, "status", json_integer(status));
	json_object_set_new(obj, "title",
	    json_string(idem_status_reason(status)));
	if (code != NULL)
		json_object_set_new(obj, "code", json_string(code));
	if (detail != NULL)
		json_object_set_new(obj, "detail", json_string(detail));
	if ((err = idem_response_json(res, status, obj)) != IDEM_OK)
		return err;
	return replace_header(res, "Content-Type", "application/problem+json");
}

char *
idem_response_head(const idem_response *res, const char *request_id,
    size_t *len)
{
	size_t i, size = 256 + (request_id != NULL ? strlen(request_id) : 0);
	char *head, *p;
	int has_type = idem_response_get_header(res, "Content-Type") != NULL;

	for (i = 0; i < res->nheaders; i++)
		size += strlen(res->headers[i].name) +
		    strlen(res->headers[i].value) + 4;
	if ((head = malloc(size)) == NULL)
		return NULL;
	p = head;
	p += sprintf(p, "Status: %d %s\r\n", res->status,
	    idem_status_reason(res->status));
	for (i = 0; i < res->nheaders; i++)
		p += sprintf(p, "%s: %s\r\n", res->headers[i].name,
		    res->headers[i].value);
	if (!has_type && res->len > 0)
		p += sprintf(p, "Content-Type: application/octet-stream\r\n");
	if (request_id != NULL)
		p += sprintf(p, "X-Request-Id: %s\r\n", request_id);
	p += sprintf(p, "Content-Length: %zu\r\n\r\n", res->len);
	*len = (size_t)(p - head);
	return head;
}

void
idem_response_refuse(idem_response *res, int status, const char *code,
    const char *detail, int retry_after)
{
	char ra[16];

	idem_response_clear(res);
	if (idem_response_problem(res, status, code, detail) != IDEM_OK) {
		idem_response_clear(res);
		res->status = 500;
		return;
	}
	if (retry_after > 0) {
		snprintf(ra, sizeof(ra), "%d", retry_after);
		if (idem_response_header(res, "Retry-After", ra) != IDEM_OK)
			res->status = 500;
	}
}
