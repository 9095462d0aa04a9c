/*
 * idem_request_log.c - the log lines about a request (idem_log,
 * idem_log_event): its request id, route and key hash as the context of a
 * line of idem_log.h.
 */
#include "config.h"

#include <stdarg.h>
#include <string.h>

#include "idem_log.h"
#include "idem_request_log.h"
#include "idem_request.h"
#include "idem_router.h"

void
idem_log_ctx_of(idem_log_ctx *ctx, const idem_request *req)
{
	memset(ctx, 0, sizeof(*ctx));
	if (req == NULL)
		return;
	ctx->request_id = req->request_id[0] != '\0' ? req->request_id : NULL;
	if (req->route != NULL) {
		ctx->method = req->route->method;
		ctx->route = req->route->tmpl;
	}
	if (req->key_hash[0] != '\0')
		ctx->key_hash = req->key_hash;
}

/* A line about req, with an event and an owner (both may be NULL). */
static void
logv_req(const idem_request *req, idem_log_level level, const char *event,
    const char *owner, const char *fmt, va_list ap)
{
	idem_log_ctx ctx;

	if (!idem_log_enabled(level))
		return;
	idem_log_ctx_of(&ctx, req);
	ctx.event = event;
	ctx.owner = owner;
	idem_logv_at(&ctx, level, fmt, ap);
}

void
idem_log_event(const idem_request *req, idem_log_level level,
    const char *event, const char *owner, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	logv_req(req, level, event, owner, fmt, ap);
	va_end(ap);
}

void
idem_log(const idem_request *req, idem_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	logv_req(req, level, NULL, NULL, fmt, ap);
	va_end(ap);
}
