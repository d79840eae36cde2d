-- idem core tables on PostgreSQL. Times are milliseconds since the Unix epoch, passed in by the
-- application's clock.

-- Processed dedup keys, one row per (consumer, key): the claim is the INSERT of this row.
CREATE TABLE idem_inbox (
    consumer     TEXT    NOT NULL,
    dedup_key    TEXT    NOT NULL,
    processed_at BIGINT  NOT NULL,
    PRIMARY KEY (consumer, dedup_key)
);
CREATE INDEX idem_inbox_processed_at ON idem_inbox (processed_at);

-- Highest applied version per (consumer, entity). Never deleted by retention.
CREATE TABLE idem_versions (
    consumer          TEXT    NOT NULL,
    aggregate_type    TEXT    NOT NULL,
    aggregate_id      TEXT    NOT NULL,
    version_kind      TEXT    NOT NULL CHECK (version_kind IN ('sequence', 'timestamp')),
    version           BIGINT  NOT NULL,
    version_secondary BIGINT,
    dedup_key         TEXT    NOT NULL,
    updated_at        BIGINT  NOT NULL,
    PRIMARY KEY (consumer, aggregate_type, aggregate_id)
);

-- Fenced leases. A row is never deleted while running and live, so the token only grows.
-- `fingerprint` identifies the request the lease is for (for example a hash of an HTTP request):
-- the same key with another fingerprint is a mismatch, never a second run.
CREATE TABLE idem_leases (
    scope      TEXT    NOT NULL,
    lease_key  TEXT    NOT NULL,
    token      BIGINT  NOT NULL,
    state      TEXT    NOT NULL CHECK (state IN ('running', 'completed', 'released')),
    expires_at BIGINT  NOT NULL,
    record     BYTEA,
    fingerprint BYTEA NOT NULL,
    takeover   BOOLEAN NOT NULL,
    updated_at BIGINT  NOT NULL,
    PRIMARY KEY (scope, lease_key)
);
CREATE INDEX idem_leases_updated_at ON idem_leases (updated_at);

-- Events held back by GapPolicy::Park, with the time the gap was first seen.
CREATE TABLE idem_parked (
    consumer   TEXT    NOT NULL,
    dedup_key  TEXT    NOT NULL,
    first_seen BIGINT  NOT NULL,
    PRIMARY KEY (consumer, dedup_key)
);
CREATE INDEX idem_parked_first_seen ON idem_parked (first_seen);
