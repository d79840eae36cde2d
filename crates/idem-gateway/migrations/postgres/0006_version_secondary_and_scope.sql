-- Issue 15. The secondary version a source's `version_secondary` reads (idem-core's
-- Version::secondary): kept with the event and with each ordered delivery, so that redrive and
-- replay judge "older than what was delivered" by the same tie rule as the version guard (equal
-- versions are told apart by their secondary values when both have one).
ALTER TABLE idem_gateway_events ADD COLUMN version_secondary BIGINT;
ALTER TABLE idem_gateway_deliveries ADD COLUMN version_secondary BIGINT;
-- One event per dedup key, whatever path it came by: sources sharing a `dedup_scope` claim one
-- key for one event, and an event kept after its inbox key was collected (a dead letter) is still
-- a duplicate when it comes again on another path of its scope. Keys were `{source}:{event id}`
-- until now, unique with (source, event_id).
CREATE UNIQUE INDEX idem_gateway_events_dedup_key ON idem_gateway_events (dedup_key);
