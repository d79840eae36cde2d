-- Issue 33 (rebuild replay). A delivery made due by `idem replay --rebuild` (`POST /admin/replay`
-- with "rebuild": true): its attempts carry `Idem-Replay: rebuild`, so the application can tell a
-- rebuild of a new consumer version from live traffic. Set by the rebuild only (live deliveries
-- take the default: no extra statement per live delivery); kept by a redrive of the rebuild's
-- dead letters, cleared by an ordinary replay or resend of the delivery.
ALTER TABLE idem_gateway_deliveries ADD COLUMN rebuild BOOLEAN NOT NULL DEFAULT FALSE;
