/*
 * idem_downstream.c - downstream keys (see idem_downstream.h).
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <openssl/hmac.h>

#include "idem_downstream.h"
#include "idem_middleware_int.h"
#include "idem_log.h"
#include "idem_request.h"
#include "idem_router.h"

/* What separates downstream keys from every other use of the secret. */
static const char label[] = "idemfcgi downstream v1";

void
idem_downstream_base(const idem_secret *secret, const unsigned char scope[32],
    const unsigned char fp[32], const char *key, size_t len,
    unsigned char out[32])
{
	unsigned char msg[sizeof(label) + 64 + 1 + 255];
	unsigned int outlen = 32;

	if (len > 255)
		len = 255;
	memcpy(msg, label, sizeof(label));      /* with its NUL */
	memcpy(msg + sizeof(label), scope, 32);
	memcpy(msg + sizeof(label) + 32, fp, 32);
	msg[sizeof(label) + 64] = (unsigned char)len;
	memcpy(msg + sizeof(label) + 65, key, len);
	if (HMAC(EVP_sha256(), secret->bytes, (int)secret->len, msg,
	    sizeof(label) + 65 + len, out, &outlen) == NULL)
		/* cannot happen with SHA-256; never a guessable key */
		abort();
}

void
idem_downstream_key(const unsigned char base[32], const char *purpose,
    size_t plen, char out[IDEM_DOWNSTREAM_KEY_SIZE])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char d[32];
	unsigned int dlen = 32;
	size_t i, o = 0;

	if (HMAC(EVP_sha256(), base, 32, (const unsigned char *)purpose, plen,
	    d, &dlen) == NULL)
		abort();
	d[6] = (unsigned char)((d[6] & 0x0f) | 0x80);   /* version 8 */
	d[8] = (unsigned char)((d[8] & 0x3f) | 0x80);   /* variant 10 */
	for (i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[o++] = '-';
		out[o++] = hex[d[i] >> 4];
		out[o++] = hex[d[i] & 15];
	}
	out[o] = '\0';
}

/* A transactional route whose handler asks for a downstream key calls
 * outside (DESIGN.md 2.7): on a store with writers on several nodes,
 * unless its calls-outside says otherwise, its later requests in this
 * process reserve in a commit of their own first.
 * Logged once per route and process. */
static void
note_calls_outside(const idem_request *req)
{
	const idem_route *rt = req->route;

	if (rt == NULL || rt->tx_db == NULL ||
	    !req->exec->may_adopt ||
	    idem_route_conf_for(rt, IDEM_RK_CALLS_OUTSIDE) != NULL ||
	    !idem_route_asked_downstream(rt))
		return;
	idem_log(req, IDEM_LOG_WARN, "the transactional route %s %s (plugin "
	    "%s) asks for downstream keys: it calls outside, and its requests "
	    "reserve their keys in a commit of their own from now on; set "
	    "calls-outside = true on it to cover its first request too",
	    rt->method, rt->tmpl, rt->owner);
}

idem_err
idem_request_downstream_key(const idem_request *req, const char *purpose,
    char out[IDEM_DOWNSTREAM_KEY_SIZE])
{
	size_t plen;

	if (req == NULL || purpose == NULL || out == NULL)
		return IDEM_ERR_INVALID;
	plen = strlen(purpose);
	if (plen == 0 || plen > IDEM_PURPOSE_MAX)
		return IDEM_ERR_INVALID;
	if (req->exec == NULL)
		return IDEM_ERR_NOT_FOUND;
	if (!req->exec->has_downstream)
		return IDEM_ERR_CONFIG;
	note_calls_outside(req);
	idem_downstream_key(req->exec->downstream, purpose, plen, out);
	return IDEM_OK;
}
