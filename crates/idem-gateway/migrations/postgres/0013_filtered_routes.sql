-- The routes whose `filter` did not take an event (a JSON list of route names; NULL when none
-- did): recorded at ingest in the event's own row, shown by `idem events show` and the console.
ALTER TABLE idem_gateway_events ADD COLUMN filtered_routes TEXT;
