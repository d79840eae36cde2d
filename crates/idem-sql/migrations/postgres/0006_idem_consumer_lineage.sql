-- Consumer lineage: which earlier consumer version a consumer succeeds, and the scope its effect
-- keys are derived under. A new consumer version (billing_v2) has a name of its own, so its inbox
-- and version guard start empty and it reads history again; its effect keys must not change with
-- it, or every replayed event would run its external effects again under keys the provider has
-- never seen (docs/design.md C6). Written once, when a runner that declares a lineage first runs;
-- never changed or deleted by idem.
CREATE TABLE idem_consumer_lineage (
    consumer      TEXT   NOT NULL PRIMARY KEY,
    -- The consumer it succeeds; NULL when it only names its scope.
    predecessor   TEXT,
    -- The name EffectKey::derive takes in place of the consumer's own.
    effects_scope TEXT   NOT NULL,
    declared_at   BIGINT NOT NULL
);
