/*
 * idem_downstream.h - downstream keys (DESIGN.md 2.8): the key a handler
 * sends to another service's Idempotency-Key, derived from the request's
 * record with the deployment's secret ([idempotency] key-secret-file), so
 * that every execution of one record sends the same key and the other
 * service learns nothing of the client's key or scope.
 *
 *   base = HMAC-SHA256(secret, "idemfcgi downstream v1" NUL scope-hash
 *                      fingerprint key-length key)   once per
 *                      execution (none for a replay)
 *   key  = HMAC-SHA256(base, purpose), its first 16 bytes as a UUID of
 *          version 8 (RFC 9562), in lower case
 */
#ifndef IDEM_DOWNSTREAM_H
#define IDEM_DOWNSTREAM_H

#include <stddef.h>

#include "idemfcgi.h"
#include "idem_secret.h"

#define IDEM_PURPOSE_MAX 64       /* bytes of a downstream key's purpose */

/* The base of the downstream keys of the record of (scope, key of len
 * bytes) and the request's fingerprint fp under secret, into out: a key
 * used again after its record expired, for another request, gets other
 * downstream keys. */
void idem_downstream_base(const idem_secret *secret,
    const unsigned char scope[32], const unsigned char fp[32],
    const char *key, size_t len, unsigned char out[32]);

/* The downstream key of purpose (plen bytes) from base, into out (a
 * UUID and its NUL). */
void idem_downstream_key(const unsigned char base[32], const char *purpose,
    size_t plen, char out[IDEM_DOWNSTREAM_KEY_SIZE]);

#endif
