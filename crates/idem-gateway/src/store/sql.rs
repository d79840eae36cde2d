//! The gateway's SQL, the same text on SQLite and PostgreSQL: `$N` parameters (which sqlx binds
//! by number on both), `RETURNING`, `ON CONFLICT`. Times are milliseconds from the gateway's
//! clock, passed as parameters.

/// New events, one `VALUES` row each, followed by [`INSERT_EVENTS_END`].
pub(crate) const INSERT_EVENTS: &str = "INSERT INTO idem_gateway_events \
     (source, event_id, event_type, aggregate_type, aggregate_id, version, body, headers, received_at, \
      dedup_key, version_secondary, traceparent, tracestate, filtered_routes) ";

/// Nothing is inserted for an event one of whose source and event id, or dedup key, is stored
/// (an event kept after its inbox key was collected, from any source of its scope); the others'
/// ids come back with their keys (a multi-row `RETURNING` has no promised order).
pub(crate) const INSERT_EVENTS_END: &str = " ON CONFLICT DO NOTHING RETURNING id, dedup_key";

/// New deliveries, one `VALUES` row each, followed by [`INSERT_DELIVERIES_END`]: no attempt
/// made, due at once (`pending`) or never (`stale`), no claim; or claimed as they are stored
/// (`in_flight`, attempt 1, fencing token 1, until the claim's end), to be sent by the process
/// that stored them without a claim of their own.
pub(crate) const INSERT_DELIVERIES: &str = "INSERT INTO idem_gateway_deliveries \
     (event, route, destination, state, entity, version, tie, note, attempts, failures, \
      next_attempt_at, created_at, updated_at, version_secondary, lease_token) ";

/// Each row's id comes back with its (event, destination), which is unique (a multi-row
/// `RETURNING` has no promised order).
pub(crate) const INSERT_DELIVERIES_END: &str = " RETURNING id, event, destination";

/// Which of the (destination, route, entity) in the `VALUES` list after it have a delivery still
/// pending or in flight: one probe of `idem_gateway_deliveries_open_by_route` per key (a route
/// has one destination), as a subquery per row that no plan can turn into a scan of every open
/// delivery (a hash join over them, chosen with stale statistics, took 5 ms per batch on
/// average and up to 500 ms with a backlog, measured with `pg_stat_statements` during the
/// bench). Followed by [`OPEN_ENTITIES_END`].
pub(crate) const OPEN_ENTITIES: &str = "SELECT k.column1, k.column2, k.column3 FROM (";

pub(crate) const OPEN_ENTITIES_END: &str = ") AS k WHERE (SELECT 1 FROM idem_gateway_deliveries p \
     WHERE p.route = k.column2 AND p.entity = k.column3 \
       AND p.state IN ('pending', 'in_flight') AND p.entity IS NOT NULL LIMIT 1) IS NOT NULL";

/// The entity-order check of [`DUE`] for candidate `d`: an earlier delivery of the same entity
/// on the same route (lower version, or same version and older row) still pending or in
/// flight. Order and staleness are per (route, entity): two routes may carry different kinds of
/// version for one `type:id`. Dead letters and stale deliveries do not hold their entity. Read
/// through the partial index `idem_gateway_deliveries_open_by_route`, keyed by route alone (a
/// route has one destination), so that no other index can serve it.
macro_rules! older_open {
    () => {
        "SELECT 1 FROM idem_gateway_deliveries p \
         WHERE p.route = d.route AND p.entity = d.entity \
           AND p.state IN ('pending', 'in_flight') AND p.entity IS NOT NULL \
           AND (p.version < d.version OR (p.version = d.version AND p.id < d.id))"
    };
}

/// One scan of [`DUE`]: destination $1's deliveries in state `$state` due at $2, at most $3,
/// in the due index's own `(next_attempt_at, id)` order, so the scan stops after $3 rows pass
/// the entity check instead of checking every due row and sorting them (which made each claim
/// cost time in proportion to the backlog).
macro_rules! due_in_state {
    ($state:literal) => {
        concat!(
            "SELECT * FROM (SELECT d.id, d.failures, d.tie, d.rebuild, d.route, d.entity, \
             d.next_attempt_at AS due_at, e.source, e.event_id, e.dedup_key, e.event_type, e.body, e.headers, \
             e.traceparent, e.tracestate \
             FROM idem_gateway_deliveries d JOIN idem_gateway_events e ON e.id = d.event \
             WHERE d.destination = $1 AND d.state = '",
            $state,
            "' AND d.next_attempt_at <= $2 AND (d.entity IS NULL OR NOT EXISTS (",
            older_open!(),
            ")) ORDER BY d.next_attempt_at, d.id LIMIT $3) ",
            $state
        )
    };
}

/// Due deliveries of destination $1 at time $2, at most $3, oldest first: pending ones whose
/// time has come and in-flight ones whose claim lapsed (their holder died), each held back while
/// an earlier one of its entity is open ([`older_open!`]): one in flight per entity, in version
/// order.
pub(crate) const DUE: &str = concat!(
    "SELECT * FROM (",
    due_in_state!("pending"),
    " UNION ALL ",
    due_in_state!("in_flight"),
    ") due ORDER BY due_at, id LIMIT $3"
);

/// The next delivery of each (route, entity) in the `VALUES` list after it, when it is pending
/// and due at the time bound after [`DUE_SUCCESSORS_DUE`]: the entity's oldest open delivery
/// (pending or in flight, in version order) and nothing else, so that one whose predecessor is
/// still open, or that waits for a retry, is left out. One probe of
/// `idem_gateway_deliveries_open_by_route` per key (its first entry), as a subquery per row, so
/// that no plan reads every pending delivery (one did, with stale statistics: 117 ms a call).
/// Followed by the list, [`DUE_SUCCESSORS_DUE`], the time and [`DUE_SUCCESSORS_END`].
pub(crate) const DUE_SUCCESSORS: &str = "SELECT d.id, d.failures, d.tie, d.rebuild, d.route, d.entity, \
     e.source, e.event_id, e.dedup_key, e.event_type, e.body, e.headers, e.traceparent, e.tracestate \
     FROM (SELECT (SELECT p.id FROM idem_gateway_deliveries p \
       WHERE p.route = k.column1 AND p.entity = k.column2 \
         AND p.state IN ('pending', 'in_flight') AND p.entity IS NOT NULL \
       ORDER BY p.version, p.id LIMIT 1) AS id FROM (";

pub(crate) const DUE_SUCCESSORS_DUE: &str = ") AS k) AS head \
     JOIN idem_gateway_deliveries d ON d.id = head.id JOIN idem_gateway_events e ON e.id = d.event \
     WHERE d.state = 'pending' AND d.next_attempt_at <= ";

pub(crate) const DUE_SUCCESSORS_END: &str = " ORDER BY d.id";

/// When the next delivery of destination $1 falls due (or its lease lapses) after $2, the time
/// of the due query just run: deliveries already due then but held back by their entity's
/// order are left out, or they would make every wake-up the poll interval.
pub(crate) const NEXT_DUE: &str = "SELECT MIN(next_attempt_at) FROM idem_gateway_deliveries \
     WHERE destination = $1 AND state IN ('pending', 'in_flight') AND next_attempt_at > $2";

/// The start of the claim of a batch of due deliveries (completed in `start_attempts` with the
/// lease's end, now, and the ids): each still due is marked in flight until the lease's end and
/// gets the attempt's number, which is also the holder's fencing token: it grows by one each
/// time the delivery is taken, and the row's lock makes the take atomic, so of two processes
/// that read the same due row only one gets it (the other's `WHERE` no longer matches once the
/// first committed). The right side of `SET` reads the row as it was.
pub(crate) const START_ATTEMPTS: &str = "UPDATE idem_gateway_deliveries \
     SET state = 'in_flight', lease_token = attempts + 1, next_attempt_at = ";

/// The outcomes of a batch of attempts, one `VALUES` row each (delivery, state, failures,
/// next_attempt_at, now, token), followed by [`FINISH_ATTEMPTS_WHERE`]. `VALUES` columns are
/// named `column1`… on both SQLite and PostgreSQL.
pub(crate) const FINISH_ATTEMPTS: &str = "UPDATE idem_gateway_deliveries AS d \
     SET state = v.column2, failures = v.column3, next_attempt_at = v.column4, \
         lease_token = NULL, updated_at = v.column5 \
     FROM (";

/// Fenced by each holder's token: a holder whose claim lapsed and was taken over changes
/// nothing.
pub(crate) const FINISH_ATTEMPTS_WHERE: &str = ") AS v \
     WHERE d.id = v.column1 AND d.lease_token = v.column6 AND d.state = 'in_flight' \
     RETURNING id";

pub(crate) const INSERT_ATTEMPTS: &str = "INSERT INTO idem_gateway_attempts \
     (delivery, attempt, started_at, duration_ms, status, outcome, excerpt) ";

/// Deliveries per (destination, state), for reports.
pub(crate) const COUNT_BY_STATE: &str = "SELECT destination, state, COUNT(*) AS count \
     FROM idem_gateway_deliveries GROUP BY destination, state";

/// The same for the states that stay few (waiting, in flight, dead), read through the due
/// index: what every `/metrics` scrape needs, without counting every delivered row.
pub(crate) const COUNT_OPEN_BY_STATE: &str = "SELECT destination, state, COUNT(*) AS count \
     FROM idem_gateway_deliveries WHERE state IN ('pending', 'in_flight', 'dead') \
     GROUP BY destination, state";

/// The oldest event not yet delivered anywhere (pending or in flight), by received time.
pub(crate) const OLDEST_UNDELIVERED: &str = "SELECT MIN(e.received_at) \
     FROM idem_gateway_deliveries d JOIN idem_gateway_events e ON e.id = d.event \
     WHERE d.state IN ('pending', 'in_flight')";

/// Attempts that failed (outcome retry or dead), for the demo's "retried" column.
pub(crate) const COUNT_FAILED_ATTEMPTS: &str =
    "SELECT COUNT(*) FROM idem_gateway_attempts WHERE outcome <> 'delivered'";

/// The newest $2 events (of source $1, or of every source when it is '') before the page cursor
/// ($3, $4) = (received_at, id) in newest-first order (`i64::MAX` twice for the first page), with
/// `$where` added to the filter.
macro_rules! list_events {
    ($where:literal) => {
        concat!(
            "SELECT id, source, event_id, event_type, aggregate_type, aggregate_id, version, \
             received_at, body IS NOT NULL AS body_kept, filtered_routes \
             FROM idem_gateway_events e WHERE ($1 = '' OR source = $1) \
             AND (received_at < $3 OR (received_at = $3 AND id < $4))",
            $where,
            " ORDER BY received_at DESC, id DESC LIMIT $2"
        )
    };
}

pub(crate) const LIST_EVENTS: &str = list_events!("");

/// Source $1's events received in [$2, $3), in arrival order, for a backfill.
pub(crate) const BACKFILL_CANDIDATES: &str = "SELECT id, dedup_key, event_type, body, headers, \
     received_at FROM idem_gateway_events WHERE source = $1 AND received_at >= $2 AND received_at < $3 \
     ORDER BY received_at, id";

/// (event, route) of the deliveries of source $1's events received in [$2, $3).
pub(crate) const DELIVERED_ROUTES: &str = "SELECT d.event, d.route FROM idem_gateway_deliveries d \
     JOIN idem_gateway_events e ON e.id = d.event \
     WHERE e.source = $1 AND e.received_at >= $2 AND e.received_at < $3";

/// The same, of events with no delivery: stored, sent nowhere.
pub(crate) const LIST_UNROUTED: &str =
    list_events!(" AND NOT EXISTS (SELECT 1 FROM idem_gateway_deliveries d WHERE d.event = e.id)");

pub(crate) const FIND_EVENT: &str = "SELECT id, source, event_id, event_type, aggregate_type, \
     aggregate_id, version, received_at, body IS NOT NULL AS body_kept, filtered_routes \
     FROM idem_gateway_events WHERE source = $1 AND event_id = $2";

pub(crate) const DELIVERIES_OF: &str = "SELECT d.id, d.route, d.destination, d.state, d.tie, \
     d.note, d.attempts, d.next_attempt_at, d.updated_at, e.source, e.event_id, e.event_type \
     FROM idem_gateway_deliveries d JOIN idem_gateway_events e ON e.id = d.event \
     WHERE d.event = $1 ORDER BY d.id";

pub(crate) const ATTEMPTS_OF: &str = "SELECT attempt, started_at, duration_ms, status, outcome, \
     excerpt FROM idem_gateway_attempts WHERE delivery = $1 ORDER BY attempt";

/// Dead letters, oldest first; `$1` = destination or '' for all, `$2` = at most, after the
/// page cursor ($3, $4) = (updated_at, id) (`i64::MIN` twice for the first page).
pub(crate) const DEAD_LETTERS: &str = "SELECT d.id, d.route, d.destination, d.state, d.tie, \
     d.note, d.attempts, d.next_attempt_at, d.updated_at, e.source, e.event_id, e.event_type \
     FROM idem_gateway_deliveries d JOIN idem_gateway_events e ON e.id = d.event \
     WHERE d.state = 'dead' AND ($1 = '' OR d.destination = $1) \
       AND (d.updated_at > $3 OR (d.updated_at = $3 AND d.id > $4)) \
     ORDER BY d.updated_at, d.id LIMIT $2";

/// What a redrive or a replay must know of a delivery it may make due again: the route,
/// whether the body is still kept, the newest version of the delivery's entity on its route
/// that was delivered or is being sent (NULL without an entity, or when none was): the version
/// the destination may already hold; the highest secondary value among those delivered or
/// being sent with the delivery's own version, for the tie rule; and the version of the route's
/// version-guard row of the entity (`guarded`) unless the event that set it still waits or is a
/// dead letter on the route: the guard's rows outlive the deliveries `idem gc` collects, so an
/// entity's newest delivered version is known after its rows are gone (and after a rename
/// carried the rows over).
macro_rules! candidates {
    ($where:literal) => {
        concat!(
            "SELECT d.id, d.event, d.route, d.state, d.version, d.version_secondary, \
             e.event_type, e.body IS NOT NULL AS body_kept, \
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

/// The dead letters a redrive takes, completed in `redrive_candidates` with the destination and
/// ids it is given and [`REDRIVE_ORDER`].
pub(crate) const REDRIVE_CANDIDATES: &str = candidates!("WHERE d.state = 'dead'");

/// Oldest dead letter first.
pub(crate) const REDRIVE_ORDER: &str = " ORDER BY d.updated_at, d.id";

/// The deliveries of source $1's events received in [$2, $3), for a replay.
pub(crate) const REPLAY_CANDIDATES: &str = candidates!(
    "WHERE e.source = $1 AND e.received_at >= $2 AND e.received_at < $3 \
     ORDER BY e.received_at, d.id"
);

/// The body and stored headers of event $1, for a route's filter; no row once the body was
/// dropped.
pub(crate) const FILTER_INPUT: &str =
    "SELECT body, headers FROM idem_gateway_events WHERE id = $1 AND body IS NOT NULL";

/// The deliveries of source $1's event $2, for a resend.
pub(crate) const RESEND_CANDIDATES: &str =
    candidates!("WHERE e.source = $1 AND e.event_id = $2 ORDER BY d.id");

/// Makes a finished delivery ($1) due again at $2 with a fresh schedule: a new attempt of the
/// same event, under the same Idempotency-Key (redrive and replay alike). A rebuild's delivery
/// stays one when $3 is true (a redrive of its dead letter) and becomes an ordinary one
/// otherwise (a replay or resend: no `Idem-Replay` header).
pub(crate) const REQUEUE: &str = "UPDATE idem_gateway_deliveries \
     SET state = 'pending', failures = 0, next_attempt_at = $2, updated_at = $2, \
         rebuild = (rebuild AND $3) \
     WHERE id = $1 AND state IN ('delivered', 'stale', 'dead')";

/// Up to $2 events received before $1 whose deliveries are all finished (delivered or stale):
/// never an event still to be sent or a dead letter (C9).
pub(crate) const COLLECTABLE_EVENTS: &str = "SELECT e.id FROM idem_gateway_events e \
     WHERE e.received_at < $1 AND NOT EXISTS (SELECT 1 FROM idem_gateway_deliveries d \
       WHERE d.event = e.id AND d.state IN ('pending', 'in_flight', 'dead')) \
     LIMIT $2";

/// Drops the raw bodies of up to $2 finished events received before $1; their keys and rows
/// stay.
pub(crate) const DROP_BODIES: &str = "UPDATE idem_gateway_events SET body = NULL \
     WHERE id IN (SELECT e.id FROM idem_gateway_events e \
       WHERE e.received_at < $1 AND e.body IS NOT NULL AND NOT EXISTS ( \
         SELECT 1 FROM idem_gateway_deliveries d \
         WHERE d.event = e.id AND d.state IN ('pending', 'in_flight', 'dead')) \
       LIMIT $2)";

/// `/readyz`'s probe write at $1: proves the store takes writes (used while ingest is failing).
pub(crate) const PROBE_WRITE: &str = "INSERT INTO idem_gateway_health (id, checked_at) \
     VALUES (1, $1) ON CONFLICT (id) DO UPDATE SET checked_at = excluded.checked_at";
