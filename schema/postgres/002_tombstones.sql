-- idemfcgi PostgreSQL schema, version 2: tombstones (docs/DESIGN.md 2.4,
-- "An expired key").
-- Apply once, after 001, to a database of version 1 in place (the records
-- stay):
--   psql -v ON_ERROR_STOP=1 -d idem -f schema/postgres/002_tombstones.sql
-- idemfcgi refuses to start with store = postgres until this version is
-- applied.

-- expired: a tombstone, a committed record past its lifetime whose answer
-- purge dropped; its fingerprint, status and lease_at (when it was
-- committed) stay until expires_at, the tombstone's end, and a request
-- with its key is refused (expired-keys)
ALTER TABLE idempotency_keys DROP CONSTRAINT IF EXISTS
  idempotency_keys_state_check;
-- (NOT VALID, then VALIDATE: the table is checked without holding off
-- the requests that write it)
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_state_check
  CHECK (state IN ('in_flight', 'committed', 'paused', 'unknown',
    'expired')) NOT VALID;
ALTER TABLE idempotency_keys VALIDATE CONSTRAINT
  idempotency_keys_state_check;
-- set by a commit: how long, in seconds, the record's tombstone is kept
-- past its expiry (the route's tombstone-lifetime); NULL or 0: none
ALTER TABLE idempotency_keys ADD COLUMN IF NOT EXISTS tombstone_s integer
  NULL CHECK (tombstone_s >= 0);

INSERT INTO idemfcgi_schema (version, applied_at)
  VALUES (2, clock_timestamp()) ON CONFLICT DO NOTHING;
