-- Each event keeps the dedup key it was claimed under in idem's inbox: the Idempotency-Key every
-- attempt, redrive and replay sends is that key, read back, not rebuilt. Events stored before
-- this migration were claimed as `{source}:{event id}` (idem_core::DedupKey::from_event).
ALTER TABLE idem_gateway_events ADD COLUMN dedup_key TEXT NOT NULL DEFAULT '';
UPDATE idem_gateway_events SET dedup_key = source || ':' || event_id;
