/*
 * idem_key_status.h - GET [server] policy-path/keys/{key}: what became of
 * a key, in the caller's own scope, for a client that kept only the key.
 *
 * The answer is 200 application/json, never cached, with "key" and
 * "state": "absent" (never seen, or forgotten: a request with it runs),
 * "in-flight" (reserved: "reserved-at", "age-ms"), "paused" (released
 * with progress: its retry resumes it), "committed" ("status",
 * "committed-at", "replays-until"), "unknown" (its outcome is being
 * determined: "since") or "expired" (a tombstone: "status",
 * "committed-at", "refused-until").  Never the stored answer, never a key
 * of another scope: the scope is the request's, as a keyed request's
 * would be.  On by [idempotency] key-status (auto: unless scope = none).
 */
#ifndef IDEM_KEY_STATUS_H
#define IDEM_KEY_STATUS_H

#include <jansson.h>

#include "idem_service.h"

/* The route's template under cfg's policy-path ("/idempotency/keys/{key}")
 * into buf.  Returns buf, or NULL when the route is off (no policy-path,
 * idempotency disabled, key-status off, or auto with scope = none). */
char *idem_key_status_path(const idem_config *cfg, char *buf, size_t size);

/* The route's handler; data is the idem_service. */
idem_err idem_key_status_handler(const idem_request *req, idem_response *res,
    void *data);

/* The route's OpenAPI path item (a new reference), or NULL when out of
 * memory. */
json_t *idem_key_status_openapi(void);

#endif
