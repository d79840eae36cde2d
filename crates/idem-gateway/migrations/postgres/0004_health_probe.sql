-- One row that `/readyz` writes while ingest is failing: a write that succeeds says the store
-- takes writes again (a full disk freed, a database back), so readiness returns only once
-- ingest works.
CREATE TABLE idem_gateway_health (
    id         INTEGER PRIMARY KEY,
    checked_at BIGINT  NOT NULL
);
