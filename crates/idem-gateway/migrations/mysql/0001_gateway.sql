-- idem gateway tables on MySQL 8.0 and MariaDB 10.6 or later: the schema the SQLite and
-- PostgreSQL migrations 0001 to 0015 arrive at, in one migration (a MySQL database of the gateway
-- starts here). Times are milliseconds since the Unix epoch, from the gateway's clock. Keys live
-- in idem's own inbox (idem_inbox, consumer `idem-gateway`); these tables hold what the gateway
-- needs to forward each event. The comments of the PostgreSQL migrations say what each table and
-- column is for.
--
-- Rules of every MySQL migration (as idem-sql's, see its migrations/mysql/0001_idem_core.sql):
-- - DDL is not transactional: each statement commits on its own, so every statement can run
--   again (CREATE TABLE IF NOT EXISTS with its indexes inside); the gateway's migrate runs a
--   migration an earlier run left unfinished again from its first statement;
-- - names, ids and keys are VARBINARY, compared byte for byte (the default collations are
--   case-insensitive and ignore trailing spaces: `evt_A`, `evt_a` and `evt_a ` are three
--   events); states and other words of the gateway's own are ASCII with a binary collation;
--   free text (headers, excerpts, notes) is utf8mb4;
-- - ENGINE=InnoDB is written out: transactions and row locks.
-- MySQL has no partial indexes: the open-delivery indexes of PostgreSQL are full indexes here,
-- with the state as a key column where the queries filter on it.

CREATE TABLE IF NOT EXISTS idem_gateway_events (
    id                BIGINT         NOT NULL AUTO_INCREMENT PRIMARY KEY,
    source            VARBINARY(255) NOT NULL,
    event_id          VARBINARY(512) NOT NULL,
    event_type        VARBINARY(255),
    aggregate_type    VARBINARY(255),
    aggregate_id      VARBINARY(255),
    version           BIGINT,
    body              LONGBLOB,                                          -- NULL once body_retention dropped it
    headers           LONGTEXT CHARACTER SET utf8mb4 NOT NULL,           -- JSON object of the forwarded headers
    received_at       BIGINT         NOT NULL,
    dedup_key         VARBINARY(512) NOT NULL,
    version_secondary BIGINT,
    traceparent       TEXT CHARACTER SET utf8mb4,
    tracestate        TEXT CHARACTER SET utf8mb4,
    filtered_routes   TEXT CHARACTER SET utf8mb4,
    UNIQUE KEY idem_gateway_events_source_event (source, event_id),
    UNIQUE KEY idem_gateway_events_dedup_key (dedup_key),
    KEY idem_gateway_events_received_at (source, received_at)
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS idem_gateway_deliveries (
    id                BIGINT         NOT NULL AUTO_INCREMENT PRIMARY KEY,
    event             BIGINT         NOT NULL,
    route             VARBINARY(255) NOT NULL,
    destination       VARBINARY(255) NOT NULL,
    state             VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    entity            VARBINARY(512),
    version           BIGINT,
    tie               BOOLEAN        NOT NULL,
    note              TEXT CHARACTER SET utf8mb4,
    attempts          BIGINT         NOT NULL,
    failures          BIGINT         NOT NULL,
    next_attempt_at   BIGINT         NOT NULL,
    lease_token       BIGINT,
    created_at        BIGINT         NOT NULL,
    updated_at        BIGINT         NOT NULL,
    version_secondary BIGINT,
    rebuild           BOOLEAN        NOT NULL DEFAULT FALSE,
    UNIQUE KEY idem_gateway_deliveries_event_destination (event, destination),
    -- The due query, the next due time, dead letters: in (next_attempt_at, id) order per state.
    KEY idem_gateway_deliveries_due (destination, state, next_attempt_at, id),
    -- The entity-order check: an entity's open deliveries on a route, in version order.
    KEY idem_gateway_deliveries_open_by_route (route, entity, state, version, id),
    CONSTRAINT idem_gateway_deliveries_event FOREIGN KEY (event) REFERENCES idem_gateway_events (id),
    CONSTRAINT idem_gateway_deliveries_state
        CHECK (state IN ('pending', 'in_flight', 'delivered', 'stale', 'dead'))
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS idem_gateway_attempts (
    delivery    BIGINT NOT NULL,
    attempt     BIGINT NOT NULL,
    started_at  BIGINT NOT NULL,
    duration_ms BIGINT NOT NULL,
    status      BIGINT,
    outcome     VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    excerpt     TEXT CHARACTER SET utf8mb4 NOT NULL,
    PRIMARY KEY (delivery, attempt),
    KEY idem_gateway_attempts_started (started_at),
    CONSTRAINT idem_gateway_attempts_delivery FOREIGN KEY (delivery)
        REFERENCES idem_gateway_deliveries (id),
    CONSTRAINT idem_gateway_attempts_outcome CHECK (outcome IN ('delivered', 'retry', 'dead'))
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS idem_gateway_health (
    id         INT    NOT NULL PRIMARY KEY,
    checked_at BIGINT NOT NULL
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS idem_gateway_counts (
    minute BIGINT         NOT NULL,
    scope  VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    name   VARBINARY(255) NOT NULL,
    metric VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    slot   BIGINT         NOT NULL,
    count  BIGINT         NOT NULL,
    PRIMARY KEY (minute, scope, name, metric, slot),
    CONSTRAINT idem_gateway_counts_scope CHECK (scope IN ('source', 'destination')),
    CONSTRAINT idem_gateway_counts_metric
        CHECK (metric IN ('accepted', 'duplicate', 'stale', 'tie', 'gap', 'delivered', 'retried', 'dead'))
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS idem_gateway_console_sessions (
    cookie_hash VARBINARY(255) NOT NULL PRIMARY KEY,
    csrf        VARCHAR(255) CHARACTER SET utf8mb4 NOT NULL,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS idem_gateway_paused_destinations (
    destination VARBINARY(255) NOT NULL PRIMARY KEY,
    paused_at   BIGINT  NOT NULL,
    auto        BOOLEAN NOT NULL DEFAULT FALSE,
    reason      TEXT CHARACTER SET utf8mb4,
    last_errors TEXT CHARACTER SET utf8mb4,
    probe_at    BIGINT,
    cooldown_ms BIGINT,
    probe_owner VARBINARY(255),
    probe_until BIGINT
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS idem_gateway_rejections (
    at     BIGINT         NOT NULL,
    source VARBINARY(255) NOT NULL,
    reason VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    count  BIGINT         NOT NULL,
    PRIMARY KEY (at, source, reason)
) ENGINE=InnoDB;

-- `condition` is a reserved word of MySQL and MariaDB: quoted with backticks wherever it is used.
CREATE TABLE IF NOT EXISTS idem_gateway_alerts (
    `condition` VARBINARY(255) NOT NULL,
    subject     VARBINARY(512) NOT NULL,
    fired_at    BIGINT NOT NULL,
    detail      TEXT CHARACTER SET utf8mb4 NOT NULL,
    PRIMARY KEY (`condition`, subject)
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS idem_gateway_alert_log (
    id          BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    `condition` VARBINARY(255) NOT NULL,
    subject     VARBINARY(512) NOT NULL,
    state       VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    at          BIGINT NOT NULL,
    detail      TEXT CHARACTER SET utf8mb4 NOT NULL,
    CONSTRAINT idem_gateway_alert_log_state CHECK (state IN ('fired', 'cleared'))
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS idem_gateway_alert_sends (
    alert         BIGINT         NOT NULL,
    sink          VARBINARY(255) NOT NULL,
    attempts      BIGINT         NOT NULL,
    next_at       BIGINT         NOT NULL,
    claimed_until BIGINT,
    sent_at       BIGINT,
    last_error    TEXT CHARACTER SET utf8mb4,
    PRIMARY KEY (alert, sink),
    KEY idem_gateway_alert_sends_due (next_at),
    CONSTRAINT idem_gateway_alert_sends_alert FOREIGN KEY (alert)
        REFERENCES idem_gateway_alert_log (id)
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS idem_gateway_destination_resumes (
    destination VARBINARY(255) NOT NULL PRIMARY KEY,
    resumed_at  BIGINT NOT NULL
) ENGINE=InnoDB;
