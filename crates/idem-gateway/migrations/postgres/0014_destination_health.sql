-- Issue 31: destination health, the circuit breaker and alerts. Times in ms since the Unix
-- epoch, from the gateway's clock.

-- A pause the circuit breaker made (`auto`), with why (`reason`, `last_errors`: a JSON list of
-- the last failed attempts' status and excerpt), when the next probe is due (`probe_at`), the
-- cool-down that got it there (`cooldown_ms`, doubled by each failed probe up to the cap), and
-- the probe's claim: one process of the database at a time holds it (`probe_owner`) until
-- `probe_until`. An operator's pause has `auto` false, and an automatic resume deletes only a
-- row whose `auto` is still true.
ALTER TABLE idem_gateway_paused_destinations ADD COLUMN auto BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE idem_gateway_paused_destinations ADD COLUMN reason TEXT;
ALTER TABLE idem_gateway_paused_destinations ADD COLUMN last_errors TEXT;
ALTER TABLE idem_gateway_paused_destinations ADD COLUMN probe_at BIGINT;
ALTER TABLE idem_gateway_paused_destinations ADD COLUMN cooldown_ms BIGINT;
ALTER TABLE idem_gateway_paused_destinations ADD COLUMN probe_owner TEXT;
ALTER TABLE idem_gateway_paused_destinations ADD COLUMN probe_until BIGINT;

-- The health reads a destination's attempts of its window.
CREATE INDEX idem_gateway_attempts_started ON idem_gateway_attempts (started_at);

-- Requests refused per source, reason and second (bad signature, too large, malformed),
-- added by each process from its own counts every health_interval (so the sum is every
-- process's, and a window of a few seconds can be read). `at` is the start of the second.
CREATE TABLE idem_gateway_rejections (
    at     BIGINT NOT NULL,
    source TEXT    NOT NULL,
    reason TEXT    NOT NULL,
    count  BIGINT NOT NULL,
    PRIMARY KEY (at, source, reason)
);

-- Alert conditions firing now, one row per condition and subject for the whole database: the
-- INSERT that adds the row fires the alert, the DELETE that removes it clears it.
CREATE TABLE idem_gateway_alerts (
    condition TEXT    NOT NULL,
    subject   TEXT    NOT NULL,
    fired_at  BIGINT NOT NULL,
    detail    TEXT    NOT NULL,
    PRIMARY KEY (condition, subject)
);

-- Every firing and clearing, newest last (the console lists them), and each one's notification
-- to each `[[alert]]` sink: sent once (`sent_at`), retried on failure (`next_at`), claimed by
-- one process at a time (`claimed_until`).
CREATE TABLE idem_gateway_alert_log (
    id        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    condition TEXT    NOT NULL,
    subject   TEXT    NOT NULL,
    state     TEXT    NOT NULL CHECK (state IN ('fired', 'cleared')),
    at        BIGINT NOT NULL,
    detail    TEXT    NOT NULL
);
CREATE TABLE idem_gateway_alert_sends (
    alert         BIGINT NOT NULL REFERENCES idem_gateway_alert_log (id),
    sink          TEXT    NOT NULL,
    attempts      BIGINT NOT NULL,
    next_at       BIGINT NOT NULL,
    claimed_until BIGINT,
    sent_at       BIGINT,
    last_error    TEXT,
    PRIMARY KEY (alert, sink)
);
CREATE INDEX idem_gateway_alert_sends_due ON idem_gateway_alert_sends (next_at) WHERE sent_at IS NULL;

-- When each destination was last resumed (by an operator or the breaker): its health reads
-- only attempts made since, so the failures that paused it do not pause it again at once.
CREATE TABLE idem_gateway_destination_resumes (
    destination TEXT    PRIMARY KEY,
    resumed_at  BIGINT NOT NULL
);
