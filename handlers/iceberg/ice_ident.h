/*
 * ice_ident.h - the names of the Iceberg catalog as requests carry them:
 * namespaces in a path segment (parts split by 0x1F) and in JSON arrays,
 * table names, query parameters, page tokens, ISO-8601 durations.
 * Strings out are new (caller frees) unless said otherwise.
 */
#ifndef ICE_IDENT_H
#define ICE_IDENT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* Whether s (len bytes) is a good part of a namespace or a table name:
 * 1 to ICE_NAME_MAX bytes of UTF-8 without control characters, not "."
 * or ".." (which URLs cannot carry: clients normalise them away). */
int ice_name_ok(const char *s, size_t len);

/* Cuts the last segment of dir (an absolute path) in place, leaving its
 * parent.  Returns 0, or -1 when the parent would be no longer than
 * rootlen bytes (the warehouse or above it). */
int ice_dir_up(char *dir, size_t rootlen);

/* The namespace key of a path segment (already percent-decoded: parts
 * split by 0x1F), or NULL when a part is not a good name or the key is
 * longer than ICE_NS_MAX. */
char *ice_ns_from_param(const char *param);
/* The key of a JSON array of parts, or NULL (not such an array, a bad
 * part; empty: allow_empty says whether [] (the root) is good, as ""). */
char *ice_ns_from_json(const json_t *parts, int allow_empty);
/* The JSON array of the parts of key (new reference), or NULL. */
json_t *ice_ns_to_json(const char *key);
/* The parent of key (all its parts but the last; "" for a top one). */
char *ice_ns_parent(const char *key);

/* The value of query parameter name in query (form-decoded: '+' is a
 * space), or NULL when absent or malformed (*bad set then: 1). */
char *ice_query(const char *query, const char *name, int *bad);

/* A page token for name (hex), and back (NULL: malformed). */
char *ice_token_encode(const char *name);
char *ice_token_decode(const char *token);

/* Writes ms as an ISO-8601 duration ("PT30M", "PT24H", "PT1.5S") into
 * out (size bytes). */
void ice_iso_duration(uint64_t ms, char *out, size_t size);

#endif /* ICE_IDENT_H */
