-- Issue 17 (the console). Per-minute counts per source and per destination of what is not
-- stored per event (duplicates, version ties, gaps) and of what the overview charts (accepted,
-- stale, delivered, retried, dead): written in the ingest commit and the outcome commit, so the
-- figures survive restarts and agree across gateway processes on one database. `minute` is the
-- start of the minute, in ms since the Unix epoch, from the gateway's clock. A count is spread
-- over a few `slot` rows, summed when read: concurrent commits (PostgreSQL keeps several in
-- flight) would otherwise queue on one hot row per source and minute, each waiting for the
-- other's commit, and lose the shared WAL flush that group commit is for.
CREATE TABLE idem_gateway_counts (
    minute INTEGER NOT NULL,
    scope  TEXT    NOT NULL CHECK (scope IN ('source', 'destination')),
    name   TEXT    NOT NULL,
    metric TEXT    NOT NULL
        CHECK (metric IN ('accepted', 'duplicate', 'stale', 'tie', 'gap', 'delivered', 'retried', 'dead')),
    slot   INTEGER NOT NULL,
    count  INTEGER NOT NULL,
    PRIMARY KEY (minute, scope, name, metric, slot)
);

-- Console sessions: the SHA-256 of the session cookie (never the cookie itself), the CSRF token
-- its forms carry, and when it ends. In the database, so a session survives a restart, works on
-- every gateway process of one database, and signing out ends it everywhere.
CREATE TABLE idem_gateway_console_sessions (
    cookie_hash TEXT    PRIMARY KEY,
    csrf        TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
);
