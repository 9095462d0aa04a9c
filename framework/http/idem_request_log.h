/*
 * idem_request_log.h - log lines about a request: its request id, route
 * and key hash as a line's context (idem_log.h); idem_log itself is the
 * public API's (idemfcgi.h).
 */
#ifndef IDEM_REQUEST_LOG_H
#define IDEM_REQUEST_LOG_H

#include "idem_log.h"

/* Fills ctx from req (NULL: an empty ctx), borrowing from req: with the
 * key's hash once the middleware has set it. */
void idem_log_ctx_of(idem_log_ctx *ctx, const idem_request *req);

/* idem_log with an event name and an owner token (may be NULL). */
void idem_log_event(const idem_request *req, idem_log_level level,
    const char *event, const char *owner, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#endif
