-- idem gateway tables on PostgreSQL. Times are milliseconds since the Unix epoch, from the gateway's
-- clock. Keys live in idem's own inbox (idem_inbox, consumer `idem-gateway`); these tables hold
-- what the gateway needs to forward each event.

-- One row per accepted event: what arrived, byte for byte.
CREATE TABLE idem_gateway_events (
    id             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source         TEXT    NOT NULL,
    event_id       TEXT    NOT NULL,
    event_type     TEXT,
    aggregate_type TEXT,
    aggregate_id   TEXT,
    version        BIGINT,
    body           BYTEA,            -- NULL once body_retention dropped it
    headers        TEXT    NOT NULL, -- JSON object of the headers forwarded with the body
    received_at    BIGINT  NOT NULL,
    UNIQUE (source, event_id)
);
CREATE INDEX idem_gateway_events_received_at ON idem_gateway_events (source, received_at);

-- One row per (event, destination): where the event stands on its way out.
CREATE TABLE idem_gateway_deliveries (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event           BIGINT  NOT NULL REFERENCES idem_gateway_events (id),
    route           TEXT    NOT NULL,
    destination     TEXT    NOT NULL,
    state           TEXT    NOT NULL
        CHECK (state IN ('pending', 'in_flight', 'delivered', 'stale', 'dead')),
    entity          TEXT,             -- `type:id` when the route keeps entity order, else NULL
    version         BIGINT,          -- set whenever entity is
    tie             BOOLEAN NOT NULL, -- same version as the entity's: sent with Idem-Version-Tie
    note            TEXT,             -- stale: the entity's newer version
    attempts        BIGINT  NOT NULL, -- attempts made, ever (Idem-Attempt numbers them)
    failures        BIGINT  NOT NULL, -- failed attempts since the last (re)drive: the schedule position
    next_attempt_at BIGINT  NOT NULL, -- pending: when due; in_flight: when its lease lapses
    lease_token     BIGINT,          -- the fencing token of the in-flight attempt
    created_at      BIGINT  NOT NULL,
    updated_at      BIGINT  NOT NULL,
    UNIQUE (event, destination)
);
CREATE INDEX idem_gateway_deliveries_due
    ON idem_gateway_deliveries (destination, state, next_attempt_at);
CREATE INDEX idem_gateway_deliveries_entity
    ON idem_gateway_deliveries (destination, entity, version) WHERE entity IS NOT NULL;

-- Every attempt of a delivery, kept for dead letters and `idem events show`.
CREATE TABLE idem_gateway_attempts (
    delivery    BIGINT  NOT NULL REFERENCES idem_gateway_deliveries (id),
    attempt     BIGINT  NOT NULL,
    started_at  BIGINT  NOT NULL,
    duration_ms BIGINT  NOT NULL,
    status      BIGINT,          -- the HTTP status; NULL for a timeout or refused connection
    outcome     TEXT    NOT NULL CHECK (outcome IN ('delivered', 'retry', 'dead')),
    excerpt     TEXT    NOT NULL, -- the start of the response body, or the transport error
    PRIMARY KEY (delivery, attempt)
);
