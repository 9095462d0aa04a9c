-- idemfcgi MySQL/MariaDB schema, version 2: recovery points and records of
-- unknown outcome (docs/DESIGN.md 2.8).
-- Apply once, after 001, to a database of version 1 in place (the records
-- stay; on MariaDB 10.3 and later both changes are instant):
--   mariadb idem < schema/mysql/002_recovery_points.sql
-- idemfcgi refuses to start with store = mysql until this version is applied.

ALTER TABLE idempotency_keys
  -- paused: released with progress, held for the same request, which
  -- resumes it; unknown: its handler could not tell whether its side
  -- effect happened
  MODIFY COLUMN state ENUM('in_flight', 'committed', 'paused', 'unknown')
    NOT NULL,
  -- the last checkpoint of the record's executions: a phase name (1 to 64
  -- bytes) and a JSON state (at most 16 KiB)
  ADD COLUMN IF NOT EXISTS phase VARCHAR(64) CHARACTER SET ascii
    COLLATE ascii_bin NULL,
  ADD COLUMN IF NOT EXISTS progress BLOB NULL;

INSERT IGNORE INTO idemfcgi_schema (version, applied_at)
  VALUES (2, UTC_TIMESTAMP(6));
