/*
 * ice_meta.h - Iceberg table metadata (the JSON of metadata.json, format
 * versions 1 and 2 of the Iceberg table spec) built and changed as the
 * REST catalog's requests ask: CreateTableRequest, TableRequirement,
 * TableUpdate (CommitTableRequest).
 *
 * Ownership (kcgi style): every json_t argument is borrowed and never
 * changed; every json_t returned is a new reference the caller owns and
 * must json_decref().  String arguments are borrowed and copied where kept.
 * ice_err.type points to a static string; message is inline.  Nothing here
 * keeps state between calls, so the functions are thread-safe.
 *
 * Where the spec is silent this follows Java's TableMetadata.Builder and
 * CatalogHandlers:
 *  - Output always has format-version, table-uuid, location, last-updated-ms,
 *    last-column-id, schemas, current-schema-id, partition-specs,
 *    default-spec-id, last-partition-id, sort-orders, default-sort-order-id,
 *    properties, current-snapshot-id (-1 when none, as Java writes for v1/v2),
 *    refs, snapshots, statistics, partition-statistics, snapshot-log,
 *    metadata-log; v2 adds last-sequence-number; v1 adds the deprecated
 *    schema and partition-spec (current schema, default spec's fields).
 *  - Create reassigns fresh column ids (1.., breadth first per struct, as
 *    Java's assignFreshIds) and maps partition/sort source ids to them;
 *    partition field ids are 1000.., spec-id 0; an unpartitioned table has
 *    last-partition-id 999; write-order with fields gets order-id 1, else
 *    the unsorted order 0.  Reserved properties (format-version, uuid, ...)
 *    are not stored; "format-version" must be "1" or "2".
 *  - Ids in add-schema/add-spec/add-sort-order are ignored: an identical
 *    existing schema/spec/order is reused, else the next id is taken.
 *    -1 in set-current-schema/set-default-spec/set-default-sort-order means
 *    the one the last add-* of this commit resolved to (new or reused).
 *  - add-spec keeps given partition field ids; a missing one reuses the id of
 *    an equivalent field (same source-id and transform) or takes
 *    last-partition-id + 1; v1 specs must use 1000, 1001, ...
 *  - add-snapshot: a duplicate snapshot-id is 400; in v2 a sequence-number
 *    not above last-sequence-number is 409 CommitFailedException (stale
 *    client, retryable, as Java's RetryableValidationException).
 *  - set-snapshot-ref "main" sets current-snapshot-id and logs the change
 *    (the snapshot's timestamp-ms if added in this commit, else now_ms);
 *    removing main (or its snapshot) makes current-snapshot-id -1.
 *  - assign-uuid with a different uuid than the table's is 400
 *    ValidationException (the REST spec calls it unsafe; Java allows it).
 *  - Also supported: remove-schemas, remove-partition-specs,
 *    set-/remove-statistics, set-/remove-partition-statistics.
 *    Format version 3 features (upgrade to v3, encryption keys, v3-only
 *    types, initial-default values) are 400 ValidationException.
 * Errors: 400 BadRequestException for malformed input (unknown action or
 * requirement type, missing field, wrong JSON type, out-of-range integer),
 * 400 ValidationException for a well-formed update that cannot apply,
 * 409 CommitFailedException for a requirement that does not hold.
 */
#ifndef ICE_META_H
#define ICE_META_H

#include <stdint.h>

#include <jansson.h>

/* An error: HTTP status (400 or 409), Iceberg error type and a message
 * naming what failed (e.g. "updates[2] (add-snapshot): ..."). */
typedef struct ice_err {
	int		 status;
	const char	*type;
	char		 message[512];
} ice_err;

/*
 * New metadata for the CreateTableRequest req (name, location?, schema,
 * partition-spec?, write-order?, stage-create?, properties?): format-version
 * 2 unless properties "format-version" is "1".  location is the table's
 * location chosen by the caller (NULL: req's "location", which must then
 * be there); table_uuid is a 36-character UUID; now_ms becomes
 * last-updated-ms.  Returns a new reference, or NULL with *e (400).
 */
json_t	*ice_meta_create(const json_t *req, const char *location,
	    const char *table_uuid, int64_t now_ms, ice_err *e);

/*
 * Checks requirements (a CommitTableRequest's array; NULL or [] is fine)
 * against meta (NULL: no table).  All are parsed before any is evaluated
 * (a malformed one is 400 even after one that fails).  One that does not
 * hold is 409 CommitFailedException: assert-create on a table; on no
 * table, every other one but assert-last-assigned-field-id/-partition-id
 * (which hold there, as in Java).  A commit to a missing table without
 * assert-create is 404 NoSuchTableException in the REST spec: the caller
 * answers it before calling.  Returns 0, or -1 with *e.
 */
int	 ice_meta_check(const json_t *meta, const json_t *requirements,
	    ice_err *e);

/*
 * Applies updates (array of TableUpdate) to a copy of meta.  meta NULL
 * starts a create transaction from empty metadata (format version of the
 * first upgrade-format-version, else 2): the updates must assign-uuid,
 * add a schema and set-location; a missing spec or sort order becomes
 * the unpartitioned spec 0 / unsorted order 0.  prev_location (the file
 * meta was read from; NULL for none) is appended to metadata-log with
 * meta's last-updated-ms, trimmed to the property
 * write.metadata.previous-versions-max (default 100); last-updated-ms
 * becomes now_ms.  When the updates change nothing, the result is
 * json_equal to meta (no log entry, same last-updated-ms), so the caller
 * can skip writing a file as Java does.  The result is checked with
 * ice_meta_validate.  Returns a new reference, or NULL with *e (400; 409
 * for a stale sequence-number).
 */
json_t	*ice_meta_apply(const json_t *meta, const json_t *updates,
	    const char *prev_location, int64_t now_ms, ice_err *e);

/*
 * Checks metadata read from a file (register-table): format-version 1 or
 * 2, table-uuid (also v1), location, the ids and their defaults, string
 * properties, unique snapshot ids, refs and current-snapshot-id naming
 * snapshots (main a branch at it), well-formed logs.  Legacy v1 shapes
 * (only "schema"/"partition-spec", no sort-orders or refs) are accepted
 * as Java reads them.  Returns 0, or -1 with *e (400).
 */
int	 ice_meta_validate(const json_t *meta, ice_err *e);

#endif /* !ICE_META_H */
