//! The configuration file as written (TOML), before it is checked.

use serde::Deserialize;

/// The whole file. Every field is optional: an empty file is the built-in defaults.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfig {
    pub listen: Option<String>,
    pub database_url: Option<String>,
    pub retention: Option<String>,
    pub body_retention: Option<String>,
    pub max_body_bytes: Option<usize>,
    pub group_commit: Option<bool>,
    pub poll_interval: Option<String>,
    pub admin_token_env: Option<String>,
    pub admin_token_file: Option<std::path::PathBuf>,
    pub admin_listen: Option<String>,
    pub console: Option<bool>,
    pub console_url: Option<String>,
    pub console_session_ttl: Option<String>,
    pub console_trusted_proxies: Option<Vec<String>>,
    pub metrics_listen: Option<String>,
    pub header_read_timeout: Option<String>,
    pub body_read_timeout: Option<String>,
    pub database_timeout: Option<String>,
    pub readyz_timeout: Option<String>,
    pub shutdown_grace: Option<String>,
    pub telemetry: Option<RawTelemetry>,
    pub health_interval: Option<String>,
    pub alert_dead_letters_over: Option<u64>,
    pub alert_dead_letters_window: Option<String>,
    pub alert_backlog_after: Option<String>,
    pub alert_rejected_over: Option<u64>,
    pub alert_rejected_window: Option<String>,
    #[serde(default)]
    pub retired_routes: Vec<String>,
    #[serde(default, rename = "source")]
    pub sources: Vec<RawSource>,
    #[serde(default, rename = "destination")]
    pub destinations: Vec<RawDestination>,
    #[serde(default, rename = "route")]
    pub routes: Vec<RawRoute>,
    #[serde(default, rename = "relay")]
    pub relays: Vec<RawRelay>,
    #[serde(default, rename = "alert")]
    pub alerts: Vec<RawAlert>,
}

/// `[[source]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSource {
    pub name: String,
    pub kind: String,
    #[serde(default)]
    pub secrets_env: Vec<String>,
    #[serde(default)]
    pub secrets_file: Vec<std::path::PathBuf>,
    pub id: Option<RawField>,
    #[serde(rename = "type")]
    pub event_type: Option<RawField>,
    pub entity: Option<RawField>,
    pub entity_type: Option<String>,
    pub version: Option<RawField>,
    pub version_secondary: Option<RawField>,
    pub dedup_scope: Option<String>,
    pub signature_header: Option<String>,
    pub signature_encoding: Option<String>,
    pub signature_prefix: Option<String>,
    pub trust_traceparent: Option<bool>,
    // Broker sources (`kind = "nats"` or `"rabbitmq"`).
    pub url: Option<String>,
    pub url_env: Option<String>,
    pub stream: Option<String>,
    pub subject: Option<String>,
    pub durable: Option<String>,
    pub ack_wait: Option<String>,
    pub queue: Option<String>,
    pub max_in_flight: Option<usize>,
    // Kafka sources (`kind = "kafka"`).
    pub brokers: Option<Vec<String>>,
    pub topic: Option<String>,
    pub consumer: Option<String>,
    pub partitions: Option<Vec<i32>>,
    pub redelivery_horizon: Option<String>,
}

/// Where a value is read from: `{ header = "X-Event-Id" }` or `{ json = "$.event.id" }`; for a
/// version (and its secondary value) also `type = "integer" | "timestamp"` and, for a
/// timestamp, `unit = "s" | "ms"`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawField {
    pub header: Option<String>,
    pub json: Option<String>,
    #[serde(rename = "type")]
    pub value_type: Option<String>,
    pub unit: Option<String>,
}

/// `[[destination]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDestination {
    pub name: String,
    /// `http` (the default), `nats`, `rabbitmq` or `kafka`.
    pub kind: Option<String>,
    pub url: Option<String>,
    pub timeout: Option<String>,
    pub retry_schedule: Option<Vec<String>>,
    pub retry_after_cap: Option<String>,
    pub retry_4xx: Option<bool>,
    pub signing_secret_env: Option<String>,
    pub signing_secret_file: Option<std::path::PathBuf>,
    pub concurrency: Option<usize>,
    pub rate_limit: Option<String>,
    pub ca_file: Option<String>,
    pub client_cert_file: Option<String>,
    pub client_key_file: Option<String>,
    // Broker destinations (`kind = "nats"`, `"rabbitmq"` or `"kafka"`).
    pub subject: Option<String>,
    pub exchange: Option<String>,
    pub routing_key: Option<String>,
    pub bootstrap: Option<String>,
    pub topic: Option<String>,
    // Health and the circuit breaker (issue 31).
    pub health_window: Option<String>,
    pub min_attempts: Option<u64>,
    pub failing_below: Option<f64>,
    pub degraded_below: Option<f64>,
    pub slow_after: Option<String>,
    pub backlog_after: Option<String>,
    pub circuit_breaker: Option<bool>,
    pub breaker_cooldown: Option<String>,
    pub breaker_cooldown_cap: Option<String>,
}

/// `[[alert]]`: where alerts are sent.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAlert {
    pub name: String,
    pub url: String,
    pub format: Option<String>,
    pub secret_env: Option<String>,
    pub secret_file: Option<std::path::PathBuf>,
}

/// `[[route]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRoute {
    pub name: Option<String>,
    pub source: String,
    pub destination: String,
    #[serde(default)]
    pub event_types: Vec<String>,
    pub ordering: Option<String>,
    pub filter: Option<String>,
    pub renamed_from: Option<String>,
}

/// `[[relay]]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRelay {
    pub name: String,
    pub database_url: Option<String>,
    pub database_url_env: Option<String>,
    pub target: String,
    pub url: Option<String>,
    pub url_env: Option<String>,
    pub batch_size: Option<u32>,
    pub poll_interval: Option<String>,
    pub claim_ttl: Option<String>,
    pub max_attempts: Option<u32>,
    pub timeout: Option<String>,
    pub brokers: Option<Vec<String>>,
    pub ca_file: Option<String>,
    pub client_cert_file: Option<String>,
    pub client_key_file: Option<String>,
}

/// `[telemetry]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTelemetry {
    pub endpoint: Option<String>,
    pub service_name: Option<String>,
    pub sample_ratio: Option<f64>,
}
