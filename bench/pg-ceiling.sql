-- bench/pg-ceiling.sql: the PostgreSQL ceiling (pgbench -M prepared -f):
-- exactly the statements idemfcgi's PostgreSQL store sends for a first
-- execution (framework/store/postgres/idem_store_pg_sql.c: P_RESERVE, the
-- INSERT ... ON CONFLICT with the row it met, then P_COMMIT, the
-- owner-checked UPDATE with the bench handler's answer), on fresh keys,
-- one session per client, no web server.  Keep it in step with the store.
-- Each client's keys follow one another ('ceil-CLIENT-MICROSECONDS'), as
-- wrk's do in bench/unique.lua ('uTHREAD-...-COUNTER'): the index takes
-- them at a few hot places, not all over.  The reserve returns the key it
-- made (\gset), which the commit names.
-- (The answer's headers, "Content-Type: application/json" and CRLF, and
-- body, {"x":"x","ok":true}, are written in hex: pgbench reads a colon
-- as the start of a variable.)
WITH ins AS (INSERT INTO idempotency_keys (scope_hash, idem_key,
  fingerprint, state, owner, request_id, reserved_at, lease_at, lease_ms,
  expires_at) VALUES ('\x0000000000000000000000000000000000000000000000000000000000000000'::bytea,
  convert_to('ceil-' || :client_id::text || '-' ||
    (extract(epoch FROM clock_timestamp()) * 1000000)::int8::text, 'UTF8'),
  '\x7777777777777777777777777777777777777777777777777777777777777777'::bytea, 'in_flight',
  'ceil.' || :client_id::text, 'rid', clock_timestamp(), clock_timestamp(), 30000,
  clock_timestamp() + (86400000000::float8 * interval '1 microsecond'))
  ON CONFLICT DO NOTHING RETURNING idem_key)
SELECT (SELECT idem_key FROM ins) AS key, k.state, k.fingerprint, k.owner,
  k.request_id,
  (extract(epoch FROM clock_timestamp() - k.lease_at) * 1000000)::int8,
  (extract(epoch FROM k.expires_at - clock_timestamp()) * 1000000)::int8,
  k.status::int8, k.headers, k.body, k.phase, k.progress, k.lease_ms::int8
  FROM (SELECT 1) AS one LEFT JOIN idempotency_keys k ON
  k.scope_hash = '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea
  AND k.idem_key = (SELECT idem_key FROM ins) \gset
UPDATE idempotency_keys SET state = 'committed', status = 201,
  headers = '\x436f6e74656e742d547970653a206170706c69636174696f6e2f6a736f6e0d0a'::bytea,
  body = '\x7b2278223a2278222c226f6b223a747275657d'::bytea,
  expires_at = clock_timestamp() + (86400000000::float8 * interval '1 microsecond')
  WHERE scope_hash = '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea
  AND idem_key = :key::bytea
  AND state IN ('in_flight', 'unknown') AND owner = 'ceil.' || :client_id::text;
