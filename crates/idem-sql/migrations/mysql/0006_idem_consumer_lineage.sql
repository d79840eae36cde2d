-- Consumer lineage: which earlier consumer version a consumer succeeds, and the scope its effect
-- keys are derived under (see the SQLite and PostgreSQL migration of the same number).
CREATE TABLE IF NOT EXISTS idem_consumer_lineage (
    consumer      VARBINARY(255) NOT NULL PRIMARY KEY,
    predecessor   VARBINARY(255),
    effects_scope VARBINARY(255) NOT NULL,
    declared_at   BIGINT         NOT NULL
);
