-- idemfcgi MySQL/MariaDB schema, version 1.
-- Apply once per database:  mariadb idem < schema/mysql/001_idempotency_keys.sql
-- idemfcgi refuses to start with store = mysql until this version is applied.

CREATE TABLE IF NOT EXISTS idempotency_keys (
  -- SHA-256 of the scope (the principal), all zero bytes for scope = none
  scope_hash   BINARY(32)      NOT NULL,
  -- the Idempotency-Key as idemfcgi reads it (1 to 255 bytes of visible
  -- ASCII): an sf-string without its quotes and escapes ("k" and k are
  -- one key), a uuid or uuidv7 key lower-cased; see docs/protocol.md,
  -- "The key"
  idem_key     VARBINARY(255)  NOT NULL,
  -- SHA-256 of the method, the route template, each percent-decoded path
  -- segment, the query (sorted by name), the media type of Content-Type
  -- and the body (canonical only for a JSON media type, else the bytes);
  -- see docs/protocol.md, "What counts as the same request"
  fingerprint  BINARY(32)      NOT NULL,
  state        ENUM('in_flight', 'committed') NOT NULL,
  -- who holds an in_flight record; a commit or release must name it
  owner        VARCHAR(64)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  -- the request id of the owner, to follow a request across nodes
  request_id   VARCHAR(64)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  -- all times are UTC from the database clock (UTC_TIMESTAMP(6))
  reserved_at  DATETIME(6)     NOT NULL,
  lease_at     DATETIME(6)     NOT NULL,
  expires_at   DATETIME(6)     NOT NULL,
  -- the stored answer, once committed
  status       SMALLINT UNSIGNED NULL,
  headers      BLOB            NULL,
  body         MEDIUMBLOB      NULL,
  PRIMARY KEY (scope_hash, idem_key),
  KEY idempotency_keys_expires (expires_at),
  -- crash recovery releases a dead worker's records by owner prefix
  KEY idempotency_keys_owner (owner)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS idemfcgi_schema (
  version     INT UNSIGNED NOT NULL PRIMARY KEY,
  applied_at  DATETIME(6)  NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

INSERT IGNORE INTO idemfcgi_schema (version, applied_at)
  VALUES (1, UTC_TIMESTAMP(6));
