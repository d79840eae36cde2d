-- Issue 16 (traces). The W3C trace context of each event (W3C Trace Context Level 1): the
-- `traceparent` of its `ingest` span (or, with traces off, a trusted sender's), and the
-- `tracestate` that goes with it. Each attempt's `dispatch` span is its child, so the attempts
-- after a restart or a retry days later are in the event's trace, and each sends its own
-- context to the destination. NULL: none (an event stored before this migration, a broker
-- message, an untrusted sender's with traces off).
ALTER TABLE idem_gateway_events ADD COLUMN traceparent TEXT, ADD COLUMN tracestate TEXT;
