/*
 * idem_request.h - a request as the web server passed it over FastCGI, and
 * the response a handler builds.
 *
 * idem_request_parse() reads the params (method, path, query, headers,
 * request id, Content-Length) without touching the body; the dispatcher
 * checks the length against max-body and only then calls
 * idem_request_read_body(), so an oversized body is never read into memory.
 * A body without CONTENT_LENGTH is read to its end, at most max-body.
 */
#ifndef IDEM_REQUEST_H
#define IDEM_REQUEST_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "idemfcgi.h"

#define IDEM_MAX_SEGMENTS 32     /* path segments */
#define IDEM_MAX_PATH 4096       /* bytes of the routed path */
#define IDEM_REQUEST_ID_MAX 64   /* bytes of a request id */
#define IDEM_MAX_HEADERS 64      /* response headers a handler sets */
#define IDEM_FRAMEWORK_HEADERS 4 /* and those idemfcgi adds beyond them
                                  * (Idempotent-Replayed) */
#define IDEM_MAX_HEADER_VALUE 8192

struct idem_route;

typedef struct idem_param {
	const char *name;    /* borrowed from the route */
	const char *value;   /* borrowed from the request's segments */
} idem_param;

struct idem_request {
	char *const *envp;        /* borrowed "NAME=value" params */
	const char *method;       /* borrowed from envp */
	const char *query;        /* borrowed from envp, or "" */
	const char *remote_user;  /* borrowed from envp, or NULL */
	char *path;               /* owned: the decoded routed path */
	char *script_name;        /* owned: the prefix before the routed
	                           * path, as a URI path (idem_request.c);
	                           * NULL: "" */
	char *segbuf;             /* owned: decoded segments, NUL-separated */
	const char *segs[IDEM_MAX_SEGMENTS];
	size_t nsegs;
	uint64_t content_length;
	int has_length;           /* CONTENT_LENGTH was sent, not empty */
	char *body;               /* owned, NUL-terminated; NULL before read */
	size_t body_len;
	char request_id[IDEM_REQUEST_ID_MAX + 1];
	const struct idem_route *route;  /* set by the router */
	/* what log lines name the request's key by: its hash
	 * (idem_key_hash), set by the idempotency middleware once the key
	 * is valid; "" before */
	char key_hash[17];
	idem_param params[IDEM_MAX_SEGMENTS];
	size_t nparams;
	/* a transactional route's connection while its handler runs, inside
	 * the open transaction (borrowed from the route's pool) */
	struct idem_db_conn *tx;
	/* the idempotency protocol's state of the request, owned by
	 * protocol/ (idem_middleware_int.h): while a handler (or reconcile
	 * hook) runs with a record, its execution (the record, its
	 * progress, its downstream keys' base), for the handler's calls on
	 * its request (idem_request_checkpoint, _downstream_key, ...); NULL
	 * otherwise */
	struct idem_exec *exec;
};

/* Why a request was refused before it reached a handler. */
typedef struct idem_problem {
	int status;
	const char *code;        /* static, "BODY_TOO_LARGE" */
	char detail[256];
} idem_problem;

/* Reads up to len bytes of the body: returns the count, 0 at the end, -1 on
 * error.  Wraps FCGX_GetStr in the server, a buffer in the tests. */
typedef ssize_t (*idem_read_fn)(void *ctx, char *buf, size_t len);

/* Bounds on what the web server passes, besides the body. */
typedef struct idem_request_limits {
	const char *mount;          /* prefix stripped from REQUEST_URI */
	unsigned max_headers;       /* HTTP_* params */
	uint64_t max_header_size;   /* bytes of one HTTP_* value */
	uint64_t max_params_size;   /* bytes of all names and values */
	int path_from_uri;          /* route on REQUEST_URI even when
	                             * PATH_INFO is set ([server]
	                             * path-source = request-uri) */
} idem_request_limits;

/*
 * Fills req from envp (borrowed until idem_request_clear) within lim.
 * Returns IDEM_OK, or IDEM_ERR_PROTOCOL with *pb describing a 400, 404,
 * 414 or 431.  The request id is set even on error.
 */
idem_err idem_request_parse(idem_request *req, char *const *envp,
    const idem_request_limits *lim, idem_problem *pb);

/*
 * Reads the body with rd into req->body: exactly CONTENT_LENGTH bytes, or,
 * when CONTENT_LENGTH is absent or empty, everything until rd returns 0
 * (the end of FCGI_STDIN).  Returns IDEM_OK; IDEM_ERR_TOO_LARGE (413 in
 * *pb) when the body is over max_body (a CONTENT_LENGTH over it is refused
 * before reading; a body of unknown length after max_body + 1 bytes), in
 * which case nothing is kept (see idem_request_drain_body);
 * IDEM_ERR_PROTOCOL (400) when the body ends before CONTENT_LENGTH or a
 * read fails; IDEM_ERR_NOMEM (500).
 */
idem_err idem_request_read_body(idem_request *req, uint64_t max_body,
    idem_read_fn rd, void *ctx, idem_problem *pb);

/* Reads and discards up to limit bytes of an unread body (of a body
 * without CONTENT_LENGTH, up to limit bytes or its end). */
void idem_request_drain_body(idem_request *req, uint64_t limit,
    idem_read_fn rd, void *ctx);

/* A param by its CGI name ("HTTP_IDEMPOTENCY_KEY"); NULL when absent. */
const char *idem_request_env(const idem_request *req, const char *name);

/* Frees what req owns and zeroes it. */
void idem_request_clear(idem_request *req);

/* The value of a hex digit (either case), or -1: for %XX escapes. */
int idem_hex_digit(char c);

/* Sets *pb. */
void idem_problem_set(idem_problem *pb, int status, const char *code,
    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* -------------------------------------------------------------- response */

typedef struct idem_header {
	char *name;
	char *value;
} idem_header;

struct idem_response {
	int status;
	idem_header *headers;     /* owned */
	size_t nheaders;
	size_t capheaders;
	char *body;               /* owned */
	size_t len;
	size_t cap;
	/* the route's error format (idem_error_fn), kept by
	 * idem_response_clear; NULL: RFC 9457 problems */
	idem_error_fn error_fn;
	void *error_data;
	int rendering;            /* error_fn is running */
};

/* An empty 200 response. */
void idem_response_init(idem_response *res);
/* Frees what res owns and re-initialises it. */
void idem_response_clear(idem_response *res);

/*
 * Replaces res with a problem+json answer (RFC 9457) of status, code and
 * detail (both borrowed for the call); retry_after > 0 adds that
 * Retry-After.  When the answer cannot be built, res is a bare 500.
 */
void idem_response_refuse(idem_response *res, int status, const char *code,
    const char *detail, int retry_after);
struct json_t;
/* idem_response_problem with members (a JSON object, stolen; NULL: none)
 * added to the problem's (an error format that renders it leaves them
 * out).  Returns as idem_response_problem. */
idem_err idem_response_problem_with(idem_response *res, int status,
    const char *code, const char *detail, struct json_t *members);
/*
 * Whether idem_response_header would take name and value (their count
 * aside): an HTTP token of at most 128 bytes, a value without control
 * bytes but TAB, and none of the names the framework sets itself.
 */
int idem_response_header_ok(const char *name, const char *value);
/* Adds a header the framework sets itself: as idem_response_header, but
 * up to IDEM_FRAMEWORK_HEADERS beyond a handler's IDEM_MAX_HEADERS. */
idem_err idem_response_framework_header(idem_response *res,
    const char *name, const char *value);
/* The value of a header set by the handler; NULL when absent. */
const char *idem_response_get_header(const idem_response *res,
    const char *name);
/*
 * The CGI response head: "Status: ...\r\n", the headers, Content-Length,
 * X-Request-Id (when request_id is not NULL) and the blank line.  Returns
 * a string the caller frees, or NULL when out of memory.
 */
char *idem_response_head(const idem_response *res, const char *request_id,
    size_t *len);
/* The reason phrase of a status ("Not Found"); "Unknown" if unlisted. */
const char *idem_status_reason(int status);

#endif
