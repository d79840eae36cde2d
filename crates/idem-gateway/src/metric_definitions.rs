//! Every metric the gateway records, named once and described here. idem's own metrics (claims,
//! stale events, ties, lease takeovers) come from `idem_sql::metric_definitions`.

use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};

/// Webhook requests and broker messages by outcome; labels `source`, `status` = `accepted` |
/// `duplicate` | `rejected` | `unavailable` (for a broker message: retried later).
pub const INGEST_TOTAL: &str = "idem_ingest_total";
/// Time from a request's (or broker message's) arrival to its answer (ack), in seconds; label
/// `source`.
pub const INGEST_DURATION_SECONDS: &str = "idem_ingest_duration_seconds";
/// Requests committed per group-commit transaction.
pub const INGEST_BATCH_SIZE: &str = "idem_ingest_batch_size";
/// Delivery outcomes; labels `destination`, `outcome` = `delivered` | `stale` | `retry` | `dead`.
pub const DISPATCH_TOTAL: &str = "idem_dispatch_total";
/// Deliveries claimed for an attempt, by how; labels `destination`, `path` = `handoff` (claimed
/// by ingest as it stored the event, sent at once) | `due` (claimed by the dispatcher's due
/// query: retries, a backlog, a delivery behind an earlier one of its entity).
pub const DISPATCH_CLAIMS_TOTAL: &str = "idem_dispatch_claims_total";
/// Times a destination's dispatcher claimed fewer deliveries than its free permits allowed, or
/// none, for want of a token of its `rate_limit`; label `destination`.
pub const DISPATCH_RATE_LIMITED_TOTAL: &str = "idem_dispatch_rate_limited_total";
/// 1 while a destination is paused (as this process last read it from the database), else 0;
/// label `destination`.
pub const DESTINATION_PAUSED: &str = "idem_destination_paused";
/// Time of one delivery attempt (request to response or failure), in seconds; label
/// `destination`.
pub const DISPATCH_DURATION_SECONDS: &str = "idem_dispatch_duration_seconds";
/// Deliveries waiting or in flight; label `destination`.
pub const BACKLOG: &str = "idem_backlog";
/// Dead-lettered deliveries kept for redrive; label `destination`.
pub const DEAD_LETTERS: &str = "idem_dead_letters";
/// Age of the oldest event not yet delivered, in seconds (0 when none waits).
pub const OLDEST_UNDELIVERED_AGE_SECONDS: &str = "idem_oldest_undelivered_age_seconds";

/// Admin API requests refused for a wrong or missing bearer token (401, or 429 once the
/// client sent too many).
pub const ADMIN_UNAUTHORIZED_TOTAL: &str = "idem_admin_unauthorized_total";
/// Operator actions done (redrive, replay, backfill, rebuild, resend, gc, pause, resume, reload,
/// reset-consumer), from the admin API, the console or the `idem` command; label `action`.
pub const ADMIN_ACTIONS_TOTAL: &str = "idem_admin_actions_total";
/// Configuration reloads (`SIGHUP`, `POST /admin/reload`); label `result`: `applied` or
/// `refused` (the running configuration stayed).
pub const CONFIG_RELOADS_TOTAL: &str = "idem_config_reloads_total";
/// Events stored that no route took (no route leaves the source, none matches the event's
/// type, or every matching route's filter said no): sent nowhere; label `source`.
pub const INGEST_UNROUTED_TOTAL: &str = "idem_ingest_unrouted_total";
/// Events a route's `filter` did not take (stored, no delivery for that route); label `route`.
pub const ROUTE_FILTERED_TOTAL: &str = "idem_route_filtered_total";
/// Evaluations of a route's `filter` that failed on an event (a missing field, mismatched
/// types), each counted as no match; label `route`.
pub const ROUTE_FILTER_ERRORS_TOTAL: &str = "idem_route_filter_errors_total";

/// Broker messages that can never be an event (no message id, a body that is not JSON where a
/// field is read from it, an oversize body), terminated (NATS) or rejected without requeue
/// (RabbitMQ: its dead-letter exchange gets it, if the queue has one) after a WARN log line;
/// labels `source`, `reason` = `no-event-id` | `malformed-json` | `bad-event-field` |
/// `body-too-large`.
pub const BROKER_REJECTED_TOTAL: &str = "idem_broker_rejected_total";

/// Outbox rows handled by the relays `idem serve` runs: idem-broker's
/// [`RELAY_MESSAGES_TOTAL`] (`idem_relay_messages_total`,
/// labels `relay`, `outcome`) and [`RELAY_ERRORS_TOTAL`]
/// (`idem_relay_errors_total`, label `relay`), the `relay` label being the `[[relay]]`'s name.
pub use idem_broker::{RELAY_ERRORS_TOTAL, RELAY_MESSAGES_TOTAL};

/// The partitions' lag of the Kafka sources `idem serve` consumes: idem-broker's
/// [`KAFKA_LAG`] (`idem_kafka_lag`, labels `consumer`, `topic`, `partition`), the messages a
/// partition has that the gateway has not stored yet.
pub use idem_broker::KAFKA_LAG;

/// A destination's health (docs/gateway.md, Destination health): 0 healthy, 1 degraded, 2
/// failing, as this process last judged it (every `health_interval`); label `destination`.
pub const DESTINATION_HEALTH: &str = "idem_destination_health";
/// 1 while the circuit breaker holds a destination paused (an automatic pause), else 0; label
/// `destination`.
pub const CIRCUIT_BREAKER_OPEN: &str = "idem_circuit_breaker_open";
/// 1 while this process is ready (its database answers and no supervised task stopped: what
/// `/readyz` says), else 0; refreshed every `health_interval`.
pub const READY: &str = "idem_ready";
/// Webhook requests refused, by why; labels `source`, `reason` = `bad_signature` |
/// `too_large` | `malformed`.
pub const WEBHOOK_REJECTED_TOTAL: &str = "idem_webhook_rejected_total";
/// Alerts firing now, for the whole database (as this process last read them); label
/// `condition`.
pub const ALERTS_FIRING: &str = "idem_alerts_firing";
/// Alert notifications sent by this process, by outcome; labels `sink`, `outcome` = `sent` |
/// `failed` (retried).
pub const ALERT_NOTIFICATIONS_TOTAL: &str = "idem_alert_notifications_total";

/// How far behind each consumer in the registry is (docs/consumers.md), as the monitor last
/// read it (every `health_interval`); labels `consumer` and `unit`: `messages` (Kafka's high
/// watermark − the stored offset, JetStream's pending count, as the consumer last reported it)
/// or `seconds` (a gateway destination: how long its oldest due delivery has been due). Not
/// set for a consumer whose source knows no lag.
pub const CONSUMER_LAG: &str = "idem_consumer_lag";
/// Seconds since each consumer in the registry was last seen (its last flushed counts or
/// registration; a gateway source or destination: its last counted minute), as the monitor
/// last read it (every `health_interval`); label `consumer`.
pub const CONSUMER_SECONDS_SINCE_LAST_SEEN: &str = "idem_consumer_seconds_since_last_seen";

/// Every metric name the gateway exports (idem-sql's and idem-broker's it records included),
/// for the test that the Prometheus rules (`deploy/prometheus/idem-alerts.yml`) name only
/// these.
pub const ALL: &[&str] = &[
    INGEST_TOTAL,
    INGEST_DURATION_SECONDS,
    INGEST_BATCH_SIZE,
    DISPATCH_TOTAL,
    DISPATCH_CLAIMS_TOTAL,
    DISPATCH_RATE_LIMITED_TOTAL,
    DESTINATION_PAUSED,
    DISPATCH_DURATION_SECONDS,
    BACKLOG,
    DEAD_LETTERS,
    OLDEST_UNDELIVERED_AGE_SECONDS,
    ROUTE_FILTERED_TOTAL,
    ROUTE_FILTER_ERRORS_TOTAL,
    INGEST_UNROUTED_TOTAL,
    ADMIN_UNAUTHORIZED_TOTAL,
    ADMIN_ACTIONS_TOTAL,
    CONFIG_RELOADS_TOTAL,
    BROKER_REJECTED_TOTAL,
    RELAY_MESSAGES_TOTAL,
    RELAY_ERRORS_TOTAL,
    KAFKA_LAG,
    DESTINATION_HEALTH,
    CIRCUIT_BREAKER_OPEN,
    READY,
    WEBHOOK_REJECTED_TOTAL,
    ALERTS_FIRING,
    ALERT_NOTIFICATIONS_TOTAL,
    CONSUMER_LAG,
    CONSUMER_SECONDS_SINCE_LAST_SEEN,
    idem_sql::metric_definitions::CLAIMS_TOTAL,
    idem_sql::metric_definitions::STALE_TOTAL,
    idem_sql::metric_definitions::TIES_TOTAL,
    idem_sql::metric_definitions::GAPS_TOTAL,
    idem_sql::metric_definitions::GAP_SIZE,
    idem_sql::metric_definitions::LEASE_TAKEOVERS_TOTAL,
];

/// Histogram buckets for ingest and dispatch latency, in seconds: 0.5 ms to 10 s.
pub const LATENCY_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Buckets of `idem_ingest_batch_size` (requests per group commit; at most 256 by default).
pub const BATCH_SIZE_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0];

/// Buckets of `idem_gap_size` (sequence numbers a gap skipped).
pub const GAP_SIZE_BUCKETS: &[f64] = &[1.0, 2.0, 5.0, 10.0, 100.0, 1_000.0, 10_000.0];

/// Registers the descriptions and units above (and idem's) with the installed recorder.
pub fn describe() {
    idem_sql::metric_definitions::describe();
    describe_counter!(
        INGEST_TOTAL,
        Unit::Count,
        "Webhook requests and broker messages by source and status."
    );
    describe_counter!(
        BROKER_REJECTED_TOTAL,
        Unit::Count,
        "Broker messages refused for good (no message id, unreadable), by source and reason."
    );
    describe_counter!(
        ADMIN_UNAUTHORIZED_TOTAL,
        Unit::Count,
        "Admin API requests refused for a wrong or missing token."
    );
    describe_counter!(
        ADMIN_ACTIONS_TOTAL,
        Unit::Count,
        "Operator actions done, by action."
    );
    describe_counter!(
        CONFIG_RELOADS_TOTAL,
        Unit::Count,
        "Configuration reloads, by result (applied or refused)."
    );
    describe_counter!(
        INGEST_UNROUTED_TOTAL,
        Unit::Count,
        "Events stored that no route took (sent nowhere), by source."
    );
    describe_counter!(
        ROUTE_FILTERED_TOTAL,
        Unit::Count,
        "Events a route's filter did not take, by route (stored, no delivery for that route)."
    );
    describe_counter!(
        ROUTE_FILTER_ERRORS_TOTAL,
        Unit::Count,
        "Route filter evaluations that failed on an event (counted as no match), by route."
    );
    describe_histogram!(
        INGEST_DURATION_SECONDS,
        Unit::Seconds,
        "Webhook request time, arrival to durable answer."
    );
    describe_histogram!(
        INGEST_BATCH_SIZE,
        Unit::Count,
        "Requests committed per group-commit transaction."
    );
    describe_counter!(
        DISPATCH_TOTAL,
        Unit::Count,
        "Delivery outcomes by destination (delivered, stale, retry, dead)."
    );
    describe_counter!(
        DISPATCH_CLAIMS_TOTAL,
        Unit::Count,
        "Deliveries claimed for an attempt by destination and path (handoff from ingest, due query)."
    );
    describe_counter!(
        DISPATCH_RATE_LIMITED_TOTAL,
        Unit::Count,
        "Claims cut short or put off by a destination's rate limit."
    );
    describe_gauge!(
        DESTINATION_PAUSED,
        Unit::Count,
        "1 while a destination is paused, as this process last read it."
    );
    describe_histogram!(
        DISPATCH_DURATION_SECONDS,
        Unit::Seconds,
        "Delivery attempt time, request to response."
    );
    idem_broker::describe_relay_metrics();
    describe_gauge!(BACKLOG, Unit::Count, "Deliveries pending or in flight.");
    describe_gauge!(DEAD_LETTERS, Unit::Count, "Dead-lettered deliveries.");
    describe_gauge!(
        OLDEST_UNDELIVERED_AGE_SECONDS,
        Unit::Seconds,
        "Age of the oldest event not yet delivered."
    );
    describe_gauge!(
        KAFKA_LAG,
        Unit::Count,
        "Messages of a Kafka partition not stored yet."
    );
    describe_gauge!(
        DESTINATION_HEALTH,
        "Destination health: 0 healthy, 1 degraded, 2 failing."
    );
    describe_gauge!(
        CIRCUIT_BREAKER_OPEN,
        "1 while the circuit breaker holds the destination paused."
    );
    describe_gauge!(READY, "1 while the gateway is ready (database and tasks).");
    describe_counter!(
        WEBHOOK_REJECTED_TOTAL,
        Unit::Count,
        "Webhook requests refused, by reason."
    );
    describe_gauge!(ALERTS_FIRING, Unit::Count, "Alerts firing now.");
    describe_gauge!(
        CONSUMER_LAG,
        "How far behind each consumer is: messages (unit=messages) or a destination's oldest due delivery's age (unit=seconds)."
    );
    describe_gauge!(
        CONSUMER_SECONDS_SINCE_LAST_SEEN,
        Unit::Seconds,
        "Seconds since each consumer was last seen."
    );
    describe_counter!(
        ALERT_NOTIFICATIONS_TOTAL,
        Unit::Count,
        "Alert notifications sent or failed."
    );
}

#[cfg(test)]
mod tests {
    use super::ALL;

    /// The Prometheus rules operators load (`deploy/prometheus/idem-alerts.yml`).
    const RULES: &str = include_str!("../../../deploy/prometheus/idem-alerts.yml");

    /// The `idem_…` names in `text`.
    fn idem_names(text: &str) -> Vec<&str> {
        let mut names = Vec::new();
        let mut rest = text;
        while let Some(at) = rest.find("idem_") {
            let word = &rest[at..];
            let end = word
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(word.len());
            names.push(&word[..end]);
            rest = &word[end..];
        }
        names
    }

    /// Every metric an `expr` of the rules names is one the gateway exports (a histogram's
    /// `_bucket`, `_sum` and `_count` series being its own).
    #[test]
    fn rules_name_exported_metrics() {
        let exprs: String = RULES
            .split("expr:")
            .skip(1)
            .map(|after| after.split("labels:").next().unwrap_or(after))
            .collect();
        let names = idem_names(&exprs);
        assert!(names.len() >= 9, "{names:?}");
        for name in names {
            let base = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|suffix| name.strip_suffix(suffix))
                .filter(|base| ALL.contains(base))
                .unwrap_or(name);
            assert!(
                ALL.contains(&base),
                "the rules name {name}, which the gateway does not export"
            );
        }
    }

    #[test]
    fn a_name_the_gateway_does_not_export_is_found() {
        assert_eq!(
            idem_names("rate(idem_nothing_total[5m]) > idem_ready"),
            ["idem_nothing_total", "idem_ready"]
        );
    }
}
