//! The gateway's core statements on MySQL and MariaDB, the MySQL text of `store::sql`: `?`
//! parameters bound in the order they appear (a value used twice is bound twice), no
//! `RETURNING` or `ON CONFLICT`, no `VALUES` lists as tables (a `UNION ALL` of `SELECT`s
//! instead), and key columns (`VARBINARY`, compared byte for byte) read back with
//! `CONVERT(… USING utf8mb4)`, as text.

/// `CONVERT(col USING utf8mb4) AS name`: a `VARBINARY` key column read back as text.
macro_rules! text {
    ($col:literal, $name:literal) => {
        concat!("CONVERT(", $col, " USING utf8mb4) AS ", $name)
    };
}
pub(super) use text;

/// New events, one `VALUES` row each; the ids come back from [`EVENT_IDS`].
pub(super) const INSERT_EVENTS: &str = "INSERT INTO idem_gateway_events \
     (source, event_id, event_type, aggregate_type, aggregate_id, version, body, headers, received_at, \
      dedup_key, version_secondary, traceparent, tracestate, filtered_routes) ";

/// Of the dedup keys in the list after it (closed with `)`), those stored: (id, key).
pub(super) const EVENT_IDS: &str = concat!(
    "SELECT id, ",
    text!("dedup_key", "dedup_key"),
    " FROM idem_gateway_events WHERE dedup_key IN ("
);

/// Of the (source, event id) pairs and dedup keys in the lists after it, those stored: the
/// events `insert_events` leaves out (already there, by either key).
pub(super) const STORED_KEYS: &str = concat!(
    "SELECT ",
    text!("source", "source"),
    ", ",
    text!("event_id", "event_id"),
    ", ",
    text!("dedup_key", "dedup_key"),
    " FROM idem_gateway_events WHERE dedup_key IN ("
);

/// New deliveries, one `VALUES` row each; the ids come back from [`DELIVERY_IDS`].
pub(super) const INSERT_DELIVERIES: &str = "INSERT INTO idem_gateway_deliveries \
     (event, route, destination, state, entity, version, tie, note, attempts, failures, \
      next_attempt_at, created_at, updated_at, version_secondary, lease_token) ";

/// The deliveries of the events in the list after it: (id, event, destination), which is
/// unique.
pub(super) const DELIVERY_IDS: &str = concat!(
    "SELECT id, event, ",
    text!("destination", "destination"),
    " FROM idem_gateway_deliveries WHERE event IN ("
);

/// The entity-order check of [`DUE`] for candidate `d`, as PostgreSQL's, read through
/// `idem_gateway_deliveries_open_by_route` (route, entity, state, version, id).
macro_rules! older_open {
    () => {
        "SELECT 1 FROM idem_gateway_deliveries p \
         WHERE p.route = d.route AND p.entity = d.entity \
           AND p.state IN ('pending', 'in_flight') \
           AND (p.version < d.version OR (p.version = d.version AND p.id < d.id))"
    };
}

/// One scan of [`DUE`]: the destination's deliveries in `$state` due at the time, at most the
/// limit (3 parameters: destination, now, limit), in the due index's order.
macro_rules! due_in_state {
    ($state:literal) => {
        concat!(
            "(SELECT d.id, d.failures, d.tie, d.rebuild, ",
            text!("d.route", "route"),
            ", ",
            text!("d.entity", "entity"),
            ", d.next_attempt_at AS due_at, ",
            text!("e.source", "source"),
            ", ",
            text!("e.event_id", "event_id"),
            ", ",
            text!("e.dedup_key", "dedup_key"),
            ", ",
            text!("e.event_type", "event_type"),
            ", e.body, e.headers, e.traceparent, e.tracestate \
             FROM idem_gateway_deliveries d JOIN idem_gateway_events e ON e.id = d.event \
             WHERE d.destination = ? AND d.state = '",
            $state,
            "' AND d.next_attempt_at <= ? AND (d.entity IS NULL OR NOT EXISTS (",
            older_open!(),
            ")) ORDER BY d.next_attempt_at, d.id LIMIT ?)"
        )
    };
}

/// Due deliveries (as `store::sql::DUE`): destination, now, limit, then the same three again,
/// then the limit.
pub(super) const DUE: &str = concat!(
    "SELECT * FROM (",
    due_in_state!("pending"),
    " UNION ALL ",
    due_in_state!("in_flight"),
    ") due ORDER BY due_at, id LIMIT ?"
);

/// Which of the (destination, route, entity) of the derived table after it (`k`, columns `c1`,
/// `c2`, `c3`) have a delivery pending or in flight.
pub(super) const OPEN_ENTITIES: &str = "SELECT k.c1, k.c2, k.c3 FROM (";

pub(super) const OPEN_ENTITIES_END: &str = ") AS k WHERE EXISTS (SELECT 1 FROM idem_gateway_deliveries p \
     WHERE p.route = k.c2 AND p.entity = k.c3 AND p.state IN ('pending', 'in_flight'))";

/// The next delivery of each (route, entity) of the derived table after it (`k`: `c1`, `c2`)
/// when it is pending and due at the time after [`DUE_SUCCESSORS_DUE`] (as
/// `store::sql::DUE_SUCCESSORS`): the entity's open delivery with no older open one. Written
/// as a join of the keys with their open deliveries, not as PostgreSQL's subquery per key:
/// MariaDB 10.11 fails a prepared statement whose subquery in a derived table's select list
/// reads a sibling derived table (1054, "Unknown column 'k.c1'", from its second execution).
pub(super) const DUE_SUCCESSORS: &str = concat!(
    "SELECT d.id, d.failures, d.tie, d.rebuild, ",
    text!("d.route", "route"),
    ", ",
    text!("d.entity", "entity"),
    ", ",
    text!("e.source", "source"),
    ", ",
    text!("e.event_id", "event_id"),
    ", ",
    text!("e.dedup_key", "dedup_key"),
    ", ",
    text!("e.event_type", "event_type"),
    ", e.body, e.headers, e.traceparent, e.tracestate FROM ("
);

pub(super) const DUE_SUCCESSORS_DUE: &str = concat!(
    ") AS k JOIN idem_gateway_deliveries d ON d.route = k.c1 AND d.entity = k.c2 \
     JOIN idem_gateway_events e ON e.id = d.event \
     WHERE d.state = 'pending' AND NOT EXISTS (",
    older_open!(),
    ") AND d.next_attempt_at <= "
);

pub(super) const DUE_SUCCESSORS_END: &str = " ORDER BY d.id";

/// destination, now.
pub(super) const NEXT_DUE: &str = "SELECT MIN(next_attempt_at) FROM idem_gateway_deliveries \
     WHERE destination = ? AND state IN ('pending', 'in_flight') AND next_attempt_at > ?";

/// The claim's lock (ids after it, closed with [`LOCK_FOR_CLAIM_END`]): the rows still due are
/// read and locked in id order; a row another transaction holds (a concurrent claim or outcome)
/// is skipped, as taken.
pub(super) const LOCK_FOR_CLAIM: &str = "SELECT id, attempts, state, next_attempt_at \
     FROM idem_gateway_deliveries WHERE id IN (";

pub(super) const LOCK_FOR_CLAIM_END: &str = ") ORDER BY id FOR UPDATE SKIP LOCKED";

/// The claim of the rows locked and found due (as `store::sql::START_ATTEMPTS`), completed in
/// `start_attempts` with the lease's end, now and the ids. `lease_token` is assigned before
/// `attempts` (MySQL assigns left to right, each reading the row as the ones before left it).
pub(super) const START_ATTEMPTS: &str = "UPDATE idem_gateway_deliveries \
     SET state = 'in_flight', lease_token = attempts + 1, attempts = attempts + 1, \
         next_attempt_at = ";

/// The holders' tokens of the deliveries in the list after it, locked in id order.
pub(super) const LOCK_FOR_OUTCOME: &str = "SELECT id, lease_token, state FROM idem_gateway_deliveries \
     WHERE id IN (";

pub(super) const LOCK_FOR_OUTCOME_END: &str = ") ORDER BY id FOR UPDATE";

pub(super) const INSERT_ATTEMPTS: &str = "INSERT INTO idem_gateway_attempts \
     (delivery, attempt, started_at, duration_ms, status, outcome, excerpt) ";

pub(super) const COUNT_BY_STATE: &str = concat!(
    "SELECT ",
    text!("destination", "destination"),
    ", state, COUNT(*) AS count FROM idem_gateway_deliveries GROUP BY destination, state"
);

pub(super) const COUNT_OPEN_BY_STATE: &str = concat!(
    "SELECT ",
    text!("destination", "destination"),
    ", state, COUNT(*) AS count FROM idem_gateway_deliveries \
     WHERE state IN ('pending', 'in_flight', 'dead') GROUP BY destination, state"
);

pub(super) const OLDEST_UNDELIVERED: &str = "SELECT MIN(e.received_at) \
     FROM idem_gateway_deliveries d JOIN idem_gateway_events e ON e.id = d.event \
     WHERE d.state IN ('pending', 'in_flight')";

pub(super) const COUNT_FAILED_ATTEMPTS: &str =
    "SELECT COUNT(*) FROM idem_gateway_attempts WHERE outcome <> 'delivered'";

/// An event row as listed (`StoredEvent`), of `e`.
macro_rules! event_columns {
    () => {
        concat!(
            "SELECT e.id, ",
            text!("e.source", "source"),
            ", ",
            text!("e.event_id", "event_id"),
            ", ",
            text!("e.event_type", "event_type"),
            ", ",
            text!("e.aggregate_type", "aggregate_type"),
            ", ",
            text!("e.aggregate_id", "aggregate_id"),
            ", e.version, e.received_at, e.body IS NOT NULL AS body_kept, e.filtered_routes \
             FROM idem_gateway_events e "
        )
    };
}
pub(super) use event_columns;

/// source, source, cursor time, cursor time, cursor id, then `$where`, then the limit.
macro_rules! list_events {
    ($where:literal) => {
        concat!(
            event_columns!(),
            "WHERE (? = '' OR e.source = ?) \
             AND (e.received_at < ? OR (e.received_at = ? AND e.id < ?))",
            $where,
            " ORDER BY e.received_at DESC, e.id DESC LIMIT ?"
        )
    };
}

pub(super) const LIST_EVENTS: &str = list_events!("");

pub(super) const LIST_UNROUTED: &str =
    list_events!(" AND NOT EXISTS (SELECT 1 FROM idem_gateway_deliveries d WHERE d.event = e.id)");

/// source, since, until.
pub(super) const BACKFILL_CANDIDATES: &str = concat!(
    "SELECT id, ",
    text!("dedup_key", "dedup_key"),
    ", ",
    text!("event_type", "event_type"),
    ", body, headers, received_at FROM idem_gateway_events \
     WHERE source = ? AND received_at >= ? AND received_at < ? ORDER BY received_at, id"
);

/// source, since, until.
pub(super) const DELIVERED_ROUTES: &str = concat!(
    "SELECT d.event, ",
    text!("d.route", "route"),
    " FROM idem_gateway_deliveries d JOIN idem_gateway_events e ON e.id = d.event \
     WHERE e.source = ? AND e.received_at >= ? AND e.received_at < ?"
);

/// source, event id.
pub(super) const FIND_EVENT: &str =
    concat!(event_columns!(), "WHERE e.source = ? AND e.event_id = ?");

/// A delivery row as listed (`StoredDelivery`), of `d` and `e`.
macro_rules! delivery_columns {
    () => {
        concat!(
            "SELECT d.id, ",
            text!("d.route", "route"),
            ", ",
            text!("d.destination", "destination"),
            ", d.state, d.tie, d.note, d.attempts, d.next_attempt_at, d.updated_at, ",
            text!("e.source", "source"),
            ", ",
            text!("e.event_id", "event_id"),
            ", ",
            text!("e.event_type", "event_type"),
            " FROM idem_gateway_deliveries d JOIN idem_gateway_events e ON e.id = d.event "
        )
    };
}

/// event.
pub(super) const DELIVERIES_OF: &str =
    concat!(delivery_columns!(), "WHERE d.event = ? ORDER BY d.id");

/// delivery.
pub(super) const ATTEMPTS_OF: &str = "SELECT attempt, started_at, duration_ms, status, outcome, \
     excerpt FROM idem_gateway_attempts WHERE delivery = ? ORDER BY attempt";

/// destination, destination, cursor time, cursor time, cursor id, limit.
pub(super) const DEAD_LETTERS: &str = concat!(
    delivery_columns!(),
    "WHERE d.state = 'dead' AND (? = '' OR d.destination = ?) \
       AND (d.updated_at > ? OR (d.updated_at = ? AND d.id > ?)) \
     ORDER BY d.updated_at, d.id LIMIT ?"
);

/// As `store::sql::candidates!`.
macro_rules! candidates {
    ($where:literal) => {
        concat!(
            "SELECT d.id, d.event, ",
            text!("d.route", "route"),
            ", d.state, d.version, d.version_secondary, ",
            text!("e.event_type", "event_type"),
            ", e.body IS NOT NULL AS body_kept, \
             (SELECT MAX(h.version) FROM idem_gateway_deliveries h \
              WHERE h.destination = d.destination AND h.route = d.route AND h.entity = d.entity \
                AND h.state IN ('delivered', 'in_flight')) AS highest, \
             (SELECT MAX(h.version_secondary) FROM idem_gateway_deliveries h \
              WHERE h.destination = d.destination AND h.route = d.route AND h.entity = d.entity \
                AND h.version = d.version AND h.state IN ('delivered', 'in_flight')) \
               AS tie_secondary, \
             (SELECT v.version FROM idem_versions v \
              WHERE d.entity IS NOT NULL AND v.consumer = d.route \
                AND v.aggregate_type = e.aggregate_type AND v.aggregate_id = e.aggregate_id \
                AND NOT EXISTS (SELECT 1 FROM idem_gateway_events ge \
                  JOIN idem_gateway_deliveries g ON g.event = ge.id \
                  WHERE ge.dedup_key = v.dedup_key AND g.route = d.route \
                    AND g.state IN ('pending', 'dead'))) AS guarded \
             FROM idem_gateway_deliveries d JOIN idem_gateway_events e ON e.id = d.event ",
            $where
        )
    };
}

pub(super) const REDRIVE_CANDIDATES: &str = candidates!("WHERE d.state = 'dead'");

pub(super) const REDRIVE_ORDER: &str = " ORDER BY d.updated_at, d.id";

/// source, since, until.
pub(super) const REPLAY_CANDIDATES: &str = candidates!(
    "WHERE e.source = ? AND e.received_at >= ? AND e.received_at < ? \
     ORDER BY e.received_at, d.id"
);

/// event.
pub(super) const FILTER_INPUT: &str =
    "SELECT body, headers FROM idem_gateway_events WHERE id = ? AND body IS NOT NULL";

/// source, event id.
pub(super) const RESEND_CANDIDATES: &str =
    candidates!("WHERE e.source = ? AND e.event_id = ? ORDER BY d.id");

/// now, now, keep_rebuild, delivery (as `store::sql::REQUEUE`).
pub(super) const REQUEUE: &str = "UPDATE idem_gateway_deliveries \
     SET state = 'pending', failures = 0, next_attempt_at = ?, updated_at = ?, \
         rebuild = (rebuild AND ?) \
     WHERE id = ? AND state IN ('delivered', 'stale', 'dead')";

/// cutoff, limit.
pub(super) const COLLECTABLE_EVENTS: &str = "SELECT e.id FROM idem_gateway_events e \
     WHERE e.received_at < ? AND NOT EXISTS (SELECT 1 FROM idem_gateway_deliveries d \
       WHERE d.event = e.id AND d.state IN ('pending', 'in_flight', 'dead')) \
     LIMIT ?";

/// cutoff, limit: the events whose bodies [`DROP_BODIES`] drops (MySQL cannot read the table
/// it updates in a subquery, nor take `LIMIT` in an `IN` subquery).
pub(super) const DROPPABLE_BODIES: &str = "SELECT e.id FROM idem_gateway_events e \
     WHERE e.received_at < ? AND e.body IS NOT NULL AND NOT EXISTS ( \
       SELECT 1 FROM idem_gateway_deliveries d \
       WHERE d.event = e.id AND d.state IN ('pending', 'in_flight', 'dead')) \
     LIMIT ?";

/// The ids after it, closed with `)`.
pub(super) const DROP_BODIES: &str = "UPDATE idem_gateway_events SET body = NULL WHERE id IN (";

/// now, now.
pub(super) const PROBE_WRITE: &str = "INSERT INTO idem_gateway_health (id, checked_at) \
     VALUES (1, ?) ON DUPLICATE KEY UPDATE checked_at = ?";
