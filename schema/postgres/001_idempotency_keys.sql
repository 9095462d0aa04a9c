-- idemfcgi PostgreSQL schema, version 1.
-- Apply once per database, in file order:
--   psql -v ON_ERROR_STOP=1 -d idem -f schema/postgres/001_idempotency_keys.sql
-- idemfcgi refuses to start with store = postgres until this version is
-- applied.  (The MySQL schema reached its version 3 in three files; this
-- one starts where it stands, so its version 1 is MySQL's 3.)

CREATE TABLE IF NOT EXISTS idempotency_keys (
  -- SHA-256 of the scope (the principal), all zero bytes for scope = none
  scope_hash   bytea     NOT NULL CHECK (octet_length(scope_hash) = 32),
  -- the Idempotency-Key as idemfcgi reads it (1 to 255 bytes of visible
  -- ASCII): an sf-string without its quotes and escapes ("k" and k are
  -- one key), a uuid or uuidv7 key lower-cased; see docs/protocol.md,
  -- "The key"
  idem_key     bytea     NOT NULL
    CHECK (octet_length(idem_key) BETWEEN 1 AND 255),
  -- SHA-256 of the method, the route template, each percent-decoded path
  -- segment, the query (sorted by name), the media type of Content-Type
  -- and the body; see docs/protocol.md, "What counts as the same request"
  fingerprint  bytea     NOT NULL CHECK (octet_length(fingerprint) = 32),
  -- in_flight: an execution holds it (its owner); committed: its answer
  -- is final; paused: released with progress, held for the same request,
  -- which resumes it; unknown: its handler could not tell whether its
  -- side effect happened
  state        text      NOT NULL
    CHECK (state IN ('in_flight', 'committed', 'paused', 'unknown')),
  -- who holds an in_flight record; a commit or release must name it.
  -- COLLATE "C": crash recovery finds a dead worker's records by owner
  -- prefix, as the range prefix <= owner < prefix || DEL, which the
  -- index below then serves
  owner        text      COLLATE "C" NOT NULL
    CHECK (octet_length(owner) <= 64),
  -- the request id of the owner, to follow a request across nodes
  request_id   text      NOT NULL CHECK (octet_length(request_id) <= 64),
  -- all times from the database's clock (clock_timestamp(), not now(),
  -- which is the transaction's start)
  reserved_at  timestamptz NOT NULL,
  lease_at     timestamptz NOT NULL,
  -- the inflight-ttl of whoever holds the record, in ms, set at every
  -- reservation, takeover and renewal: the lease ends lease_ms after
  -- lease_at, whoever reads it, so a taker whose own inflight-ttl is
  -- shorter (a reload, a node with another config) never takes over a
  -- holder that renews in time
  lease_ms     integer   NOT NULL CHECK (lease_ms > 0),
  expires_at   timestamptz NOT NULL,
  -- the stored answer, once committed
  status       smallint  NULL,
  headers      bytea     NULL,
  body         bytea     NULL,
  -- the last checkpoint of the record's executions: a phase name (1 to 64
  -- bytes) and a JSON state (at most 16 KiB)
  phase        text      NULL CHECK (octet_length(phase) BETWEEN 1 AND 64),
  progress     bytea     NULL,
  PRIMARY KEY (scope_hash, idem_key)
);
CREATE INDEX IF NOT EXISTS idempotency_keys_expires
  ON idempotency_keys (expires_at);
CREATE INDEX IF NOT EXISTS idempotency_keys_owner
  ON idempotency_keys (owner);

CREATE TABLE IF NOT EXISTS idemfcgi_schema (
  version     integer     NOT NULL PRIMARY KEY,
  applied_at  timestamptz NOT NULL
);

INSERT INTO idemfcgi_schema (version, applied_at)
  VALUES (1, clock_timestamp()) ON CONFLICT DO NOTHING;
