-- idemfcgi MySQL/MariaDB schema, version 4: tombstones (docs/DESIGN.md
-- 2.4, "An expired key").
-- Apply once, after 003, to a database of version 3 in place (the records
-- stay; on MariaDB 10.3 and later both changes are instant):
--   mariadb idem < schema/mysql/004_tombstones.sql
-- idemfcgi refuses to start with store = mysql until this version is applied.

ALTER TABLE idempotency_keys
  -- expired: a tombstone, a committed record past its lifetime whose
  -- answer purge dropped; its fingerprint, status and lease_at (when it
  -- was committed) stay until expires_at, the tombstone's end, and a
  -- request with its key is refused (expired-keys)
  MODIFY COLUMN state ENUM('in_flight', 'committed', 'paused', 'unknown',
    'expired') NOT NULL,
  -- set by a commit: how long, in seconds, the record's tombstone is kept
  -- past its expiry (the route's tombstone-lifetime); NULL or 0: none
  ADD COLUMN IF NOT EXISTS tombstone_s INT UNSIGNED NULL;

INSERT IGNORE INTO idemfcgi_schema (version, applied_at)
  VALUES (4, UTC_TIMESTAMP(6));
