-- idem core tables on MySQL 8.0 and MariaDB 10.6 or later. Times are milliseconds since the Unix
-- epoch, passed in by the application's clock.
--
-- Rules of every MySQL migration (DDL is not transactional there: each statement commits on its
-- own, so a migration that fails half-way has applied the statements before the failure):
-- - each statement can run again: CREATE TABLE IF NOT EXISTS with its indexes inside, never a
--   bare CREATE INDEX (MySQL 8.0 has no CREATE INDEX IF NOT EXISTS); idem's migrate() runs a
--   migration that an earlier run left unfinished again from its first statement;
-- - keys and ids are VARBINARY, compared byte for byte: the default collations are
--   case-insensitive and ignore trailing spaces, under which `evt_A` and `evt_a ` would share the
--   inbox row of `evt_a`; states are ASCII with a binary collation; free text is utf8mb4;
-- - ENGINE=InnoDB is written out: another engine (a server whose default is MyISAM or Aria)
--   would have neither transactions nor row locks.

-- Processed dedup keys, one row per (consumer, key): the claim is the INSERT of this row.
CREATE TABLE IF NOT EXISTS idem_inbox (
    consumer     VARBINARY(255) NOT NULL,
    dedup_key    VARBINARY(512) NOT NULL,
    processed_at BIGINT         NOT NULL,
    PRIMARY KEY (consumer, dedup_key),
    KEY idem_inbox_processed_at (processed_at)
) ENGINE=InnoDB;

-- Highest applied version per (consumer, entity). Never deleted by retention.
CREATE TABLE IF NOT EXISTS idem_versions (
    consumer          VARBINARY(255) NOT NULL,
    aggregate_type    VARBINARY(255) NOT NULL,
    aggregate_id      VARBINARY(255) NOT NULL,
    version_kind      VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    version           BIGINT         NOT NULL,
    version_secondary BIGINT,
    dedup_key         VARBINARY(512) NOT NULL,
    updated_at        BIGINT         NOT NULL,
    PRIMARY KEY (consumer, aggregate_type, aggregate_id),
    CONSTRAINT idem_versions_kind CHECK (version_kind IN ('sequence', 'timestamp'))
) ENGINE=InnoDB;

-- Fenced leases. A row is never deleted while running and live, so the token only grows.
-- `fingerprint` identifies the request the lease is for (for example a hash of an HTTP request):
-- the same key with another fingerprint is a mismatch, never a second run.
CREATE TABLE IF NOT EXISTS idem_leases (
    scope       VARBINARY(255) NOT NULL,
    lease_key   VARBINARY(255) NOT NULL,
    token       BIGINT         NOT NULL,
    state       VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    expires_at  BIGINT         NOT NULL,
    record      LONGBLOB,
    fingerprint MEDIUMBLOB     NOT NULL,
    takeover    BOOLEAN        NOT NULL,
    updated_at  BIGINT         NOT NULL,
    PRIMARY KEY (scope, lease_key),
    KEY idem_leases_updated_at (updated_at),
    CONSTRAINT idem_leases_state CHECK (state IN ('running', 'completed', 'released'))
) ENGINE=InnoDB;

-- Events held back by GapPolicy::Park, with the time the gap was first seen.
CREATE TABLE IF NOT EXISTS idem_parked (
    consumer   VARBINARY(255) NOT NULL,
    dedup_key  VARBINARY(512) NOT NULL,
    first_seen BIGINT         NOT NULL,
    PRIMARY KEY (consumer, dedup_key),
    KEY idem_parked_first_seen (first_seen)
) ENGINE=InnoDB;
