/*
 * idem_openapi.h - the OpenAPI 3.1 document of the loaded routes
 * (idemfcgi --openapi): per route its Idempotency-Key header parameter
 * (required or not, its format as a pattern, its lifetime), the
 * Idempotent-Replayed header of replays, and the problem answers the
 * framework itself can give, with their codes; a plugin's summary and
 * schemas (idem_route_describe).
 */
#ifndef IDEM_OPENAPI_H
#define IDEM_OPENAPI_H

#include <jansson.h>

#include "idem_config.h"
#include "idem_router.h"

/*
 * The document of the plugins' routes of r under cfg (both borrowed),
 * each under its effective policy; idempotent says whether idempotency is
 * on (a middleware exists).  The built-in routes are not in it.  Returns a
 * new reference (caller calls json_decref), or NULL when out of memory.
 */
json_t *idem_openapi_document(const idem_config *cfg, const idem_router *r,
    int idempotent);

#endif
