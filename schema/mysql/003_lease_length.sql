-- idemfcgi MySQL/MariaDB schema, version 3: the lease's length kept with
-- the record (docs/DESIGN.md 2.4).
-- Apply once, after 002, to a database of version 2 in place (the records
-- stay; on MariaDB 10.3 and later the change is instant):
--   mariadb idem < schema/mysql/003_lease_length.sql
-- idemfcgi refuses to start with store = mysql until this version is applied.

ALTER TABLE idempotency_keys
  -- the inflight-ttl of whoever holds the record, in ms, set at every
  -- reservation, takeover and renewal: the lease ends lease_ms after
  -- lease_at, whoever reads it, so a taker whose own inflight-ttl is
  -- shorter (a reload, a node with another config) never takes over a
  -- holder that renews in time.  NULL (a record made before version 3):
  -- the reader's inflight-ttl
  ADD COLUMN IF NOT EXISTS lease_ms INT UNSIGNED NULL;

INSERT IGNORE INTO idemfcgi_schema (version, applied_at)
  VALUES (3, UTC_TIMESTAMP(6));
