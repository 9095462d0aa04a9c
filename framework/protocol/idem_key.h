/*
 * idem_key.h - what identifies a request to the idempotency layer: the
 * Idempotency-Key (validated per key-format), the scope hash and the
 * request fingerprint (SHA-256, libcrypto EVP).
 */
#ifndef IDEM_KEY_H
#define IDEM_KEY_H

#include <stddef.h>

#include "idem_config.h"
#include "idem_request.h"
#include "idem_store.h"

/*
 * Whether key (len bytes, NUL-terminated) is valid for fmt: opaque is
 * 1..255 visible ASCII (0x21-0x7e); uuid the 36-char canonical form in
 * either case; uuidv7 that form with version 7 and variant 10 (RFC 9562).
 * Returns 1 or 0.
 */
int idem_key_valid(idem_key_format fmt, const char *key, size_t len);

/*
 * The key of an Idempotency-Key header value under fmt, into out
 * (NUL-terminated) and *len.  Surrounding spaces and tabs are dropped; the
 * value is an RFC 8941 sf-string ("...", printable ASCII, \" and \\
 * escapes, nothing after the closing quote), decoded, or else a bare token
 * taken as is.  The result must pass idem_key_valid, so an opaque key has
 * no space even when quoted.  A uuid or uuidv7 key is lower-cased; an
 * opaque key is kept byte for byte.  Returns IDEM_OK, or IDEM_ERR_INVALID
 * (out empty, *len 0).
 */
idem_err idem_key_parse(idem_key_format fmt, const char *header,
    char out[IDEM_KEY_MAX + 1], size_t *len);

/* The same, with why (size bytes) saying what is wrong with a malformed
 * sf-string (no closing quote, a bad escape or byte and its position in
 * header from 1, characters after the closing quote, empty, too long);
 * why is "" on success and when the key is only not of the format. */
idem_err idem_key_parse_why(idem_key_format fmt, const char *header,
    char out[IDEM_KEY_MAX + 1], size_t *len, char *why, size_t size);

/* Makes OpenSSL ready for idem_sha256 and fingerprints (its one-time
 * initialisation), so that no request pays for it.  Idempotent. */
void idem_sha256_init(void);

/* SHA-256 of len bytes into out.  Returns IDEM_OK or IDEM_ERR_NOMEM. */
idem_err idem_sha256(const void *data, size_t len, unsigned char out[32]);

/*
 * The fingerprint of req (routed, body read): SHA-256 over the method, the
 * route template, each decoded path segment, the canonical query, the
 * media type (idem_media_type) and the body, each length-prefixed.  With a
 * JSON media type, a body that idem_json_canonical accepts counts in its
 * canonical form, so key order and white space do not change it; any other
 * body counts byte for byte (marked apart from a canonical one).  The
 * route's fingerprint-ignore leaves members out of a canonical body
 * (idem_json_canonical_without), and its fingerprint-headers are added
 * after the body (DESIGN.md 2.3); without them nothing changes.  Returns
 * IDEM_OK or IDEM_ERR_NOMEM.
 */
idem_err idem_fingerprint(const idem_request *req, unsigned char out[32]);

/*
 * The canonical form of a JSON object or array text (len bytes): sorted
 * keys, no white space.  Returns a string the caller frees, or NULL when
 * the text is not a JSON object or array, has duplicate keys, or has a
 * number that the canonical form would not write exactly as written (0.10,
 * 1e2, more than 15 significant digits, -0): texts whose numbers differ in
 * any digit never share a canonical form.
 */
char *idem_json_canonical(const char *text, size_t len);

/*
 * The same with the object members named by the n JSON Pointers (RFC
 * 6901, borrowed) removed from the parsed text before it is written:
 * a pointer that names nothing, or an array element, changes nothing.
 * Every number of the text, in a removed member or not, must come out as
 * written, else NULL (the body then counts byte for byte).  Returns a
 * string the caller frees, or NULL.  (idem_json.c, as the two around.)
 */
char *idem_json_canonical_without(const char *text, size_t len,
    char *const *pointers, size_t n);

/*
 * Whether a JSON text (len bytes) is its own canonical form: whether
 * idem_json_canonical would return exactly these bytes.  Answers only for
 * what it can tell without parsing into a tree (an object or array of
 * ASCII strings without escapes, plain integers, literals, sorted keys,
 * no white space, at most 32 deep); 0 otherwise, which means "not known",
 * not "not canonical".
 */
int idem_json_is_canonical(const char *text, size_t len);

/*
 * The query with its '&'-separated pairs sorted by name (the part before
 * '='), pairs of one name kept in their order, and empty ones dropped.
 * Returns a string the caller frees, or NULL when out of memory.
 */
char *idem_query_canonical(const char *query);

/*
 * The media type of a Content-Type value (NULL: none): type/subtype
 * lower-cased, parameters kept as sent, white space around each ';'
 * (outside quoted strings) and at the ends dropped.  *json is set when the
 * type is application/json or has a +json suffix, whatever the case and
 * parameters.  Returns a string the caller frees ("" for none), or NULL
 * when out of memory.
 */
char *idem_media_type(const char *ctype, int *json);

/*
 * The stored scope of a principal (the REMOTE_USER, or the value of the
 * scope header) under cfg's scope: SHA-256 of "remote-user" or the header
 * name as configured, a NUL, and the principal, so a user and a header
 * value never collide.  All zero for scope = none.  Returns IDEM_OK or
 * IDEM_ERR_NOMEM.
 */
idem_err idem_scope_hash(const idem_config *cfg, const char *principal,
    unsigned char out[32]);

/* The first 16 hex digits of SHA-256(scope || key): how logs name a key
 * without showing it.  out gets 17 bytes. */
void idem_key_hash(const unsigned char scope[32], const char *key,
    size_t len, char out[17]);

#endif
