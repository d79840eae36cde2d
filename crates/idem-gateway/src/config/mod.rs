//! The gateway's configuration: a TOML file (docs/gateway.md is its reference), checked
//! once at start. Everything that could make a source accept what it should refuse is an error
//! here, so the gateway fails closed: an unknown kind, a missing secret, a secret of the wrong
//! shape, a retention shorter than the sender's redelivery horizon (docs/design.md C9).

mod broker;
mod console;
mod defaults;
mod destination;
mod duration;
mod error;
mod kind;
mod model;
mod rate_limit;
mod raw;
#[cfg(test)]
mod reference;
mod relay;
mod secret;
mod source;
mod telemetry;
mod tls;

use std::cell::RefCell;
use std::collections::HashSet;
use std::path::Path;

use std::net::SocketAddr;

use defaults::{
    DEFAULT_POLL_INTERVAL, MAX_DATABASE_TIMEOUT, MAX_DEADLINE, MIN_DEADLINE, MIN_MAX_BODY_BYTES,
    MIN_POLL_INTERVAL,
};
use error::{duplicate, number_out_of_range, out_of_range};
use raw::RawConfig;

pub use broker::{
    Broker, DEFAULT_AMQP_URL, DEFAULT_NATS_URL, KafkaSource, NatsSource, RabbitMqSource,
};
pub use console::{ConsoleSettings, DEFAULT_CONSOLE_SESSION_TTL};
pub use defaults::{
    DEFAULT_BODY_READ_TIMEOUT, DEFAULT_DATABASE_TIMEOUT, DEFAULT_DATABASE_URL,
    DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_LISTEN, DEFAULT_MAX_BODY_BYTES, DEFAULT_READYZ_TIMEOUT,
    DEFAULT_RETENTION, DEFAULT_SHUTDOWN_GRACE,
};
pub use error::ConfigError;
pub use kind::{DEFAULT_KAFKA_REDELIVERY_HORIZON, SourceKind};
pub use model::{Config, Destination, Ordering, ReadEvent, Retention, Route, Source};
pub(crate) use model::{Intake, is_type_pattern, type_matches};
pub use rate_limit::RateLimit;
pub use relay::{
    DEFAULT_RELAY_BATCH_SIZE, DEFAULT_RELAY_CLAIM_TTL, DEFAULT_RELAY_MAX_ATTEMPTS,
    DEFAULT_RELAY_POLL_INTERVAL, DEFAULT_RELAY_TIMEOUT, OutboxRelay, RelayTarget,
};
pub use secret::Secret;
pub use telemetry::{
    DEFAULT_SERVICE_NAME, OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
    OTEL_SDK_DISABLED, OTEL_SERVICE_NAME, TelemetrySettings,
};

impl Config {
    /// The built-in defaults: [`DEFAULT_LISTEN`], [`DEFAULT_DATABASE_URL`],
    /// [`DEFAULT_RETENTION`], no sources.
    pub fn defaults() -> Self {
        let empty = |_: &str| None;
        Self::from_raw(RawConfig::default(), &empty, true).expect("the defaults are valid")
    }

    /// Reads and checks the file at `path`, taking secrets from the process environment.
    ///
    /// # Errors
    /// [`ConfigError::Read`] when the file cannot be read; otherwise as
    /// [`from_toml`](Self::from_toml).
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        Self::from_toml(&read(path)?, &|var| std::env::var(var).ok())
    }

    /// Reads the file at `path` for an operator command, as
    /// [`for_operations`](Self::for_operations) does, taking the secrets that are set from the
    /// process environment.
    ///
    /// # Errors
    /// [`ConfigError::Read`] when the file cannot be read; otherwise as
    /// [`for_operations`](Self::for_operations).
    pub fn load_for_operations(path: &Path) -> Result<Self, ConfigError> {
        Self::for_operations(&read(path)?, &|var| std::env::var(var).ok())
    }

    /// Checks a configuration given as TOML text, reading each secret, and the OpenTelemetry
    /// variables that turn traces on ([`TelemetrySettings`]), with `env(variable name)` (`None`
    /// or an empty value: not set).
    ///
    /// # Errors
    /// A [`ConfigError`] naming the first problem found.
    pub fn from_toml(
        text: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        Self::from_raw(toml::from_str(text)?, env, true)
    }

    /// Checks a configuration for an operator command (`idem events`, `dlq`, `replay`, `gc`):
    /// as [`from_toml`](Self::from_toml), except that a secret whose variable is not set is no
    /// error. Those commands read the database and the names of sources, destinations and
    /// routes; they verify, sign and authenticate nothing, so the secrets need not be handed to
    /// them. Each secret not set is left unloaded and the checks of its value skipped (for a
    /// source, its signatures can then not be checked; for the admin token, the admin API is
    /// off); [`Server::start`](crate::Server::start) refuses such a configuration with
    /// [`ConfigError::MissingSecret`], so it never serves.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the first problem found other than a secret not set.
    pub fn for_operations(
        text: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        Self::from_raw(toml::from_str(text)?, env, false)
    }

    /// The first secret this configuration was read without
    /// ([`for_operations`](Self::for_operations)), as the error `from_toml` would have given.
    pub(crate) fn missing_secret(&self) -> Option<ConfigError> {
        self.not_loaded
            .first()
            .map(|(owner, var, empty)| ConfigError::MissingSecret {
                owner: owner.clone(),
                var: var.clone(),
                empty: *empty,
            })
    }

    fn from_raw(
        raw: RawConfig,
        env: &dyn Fn(&str) -> Option<String>,
        secrets_required: bool,
    ) -> Result<Self, ConfigError> {
        let not_loaded = RefCell::new(Vec::new());
        let secret = |owner: String, var: &str| {
            if var.trim().is_empty() {
                return Err(ConfigError::EmptySecretVariable { owner });
            }
            match env(var) {
                Some(value) if !value.is_empty() => Ok(Secret::new(value)),
                found if !secrets_required => {
                    not_loaded
                        .borrow_mut()
                        .push((owner, var.to_owned(), found.is_some()));
                    Ok(Secret::not_loaded())
                }
                found => Err(ConfigError::MissingSecret {
                    owner,
                    var: var.to_owned(),
                    empty: found.is_some(),
                }),
            }
        };
        let console = console::build(&raw)?;
        let telemetry = telemetry::build(raw.telemetry.as_ref(), env)?;
        let listen_text = raw.listen.as_deref().unwrap_or(DEFAULT_LISTEN);
        let listen = listen_text.parse().map_err(|_| ConfigError::BadValue {
            field: "listen".into(),
            value: listen_text.into(),
            expected: "an address and port such as \"127.0.0.1:8080\"".into(),
        })?;
        let database_url = raw
            .database_url
            .unwrap_or_else(|| DEFAULT_DATABASE_URL.to_owned());
        if crate::store::DatabaseKind::of(&database_url).is_none() {
            return Err(ConfigError::BadValue {
                field: "database_url".into(),
                value: idem_sql::redact_url(&database_url),
                expected: "a sqlite:// or postgres:// URL".into(),
            });
        }
        let retention = match raw.retention.as_deref().map(str::trim) {
            Some("forever") => Retention::Forever,
            Some(_) => Retention::For(duration::parse(
                "retention",
                raw.retention.as_deref().unwrap_or_default(),
            )?),
            None => Retention::For(DEFAULT_RETENTION),
        };
        let body_retention = raw
            .body_retention
            .as_deref()
            .map(|text| duration::parse("body_retention", text))
            .transpose()?;
        let address = |field: &str, text: &str| {
            text.parse::<SocketAddr>()
                .map_err(|_| ConfigError::BadValue {
                    field: field.into(),
                    value: text.into(),
                    expected: "an address and port such as \"127.0.0.1:9090\"".into(),
                })
        };
        let admin_listen = raw
            .admin_listen
            .as_deref()
            .map(|text| address("admin_listen", text))
            .transpose()?;
        let metrics_listen = raw
            .metrics_listen
            .as_deref()
            .map(|text| address("metrics_listen", text))
            .transpose()?;
        // Two listeners on one address would fail at bind, after the database was opened; port
        // 0 (any free port) is never a clash.
        let addresses = [
            ("listen", Some(listen)),
            ("admin_listen", admin_listen),
            ("metrics_listen", metrics_listen),
        ];
        for (i, (field, addr)) in addresses.iter().enumerate() {
            let Some(addr) = addr.filter(|a| a.port() != 0) else {
                continue;
            };
            if let Some((other, _)) = addresses[..i].iter().find(|(_, a)| *a == Some(addr)) {
                return Err(ConfigError::BadValue {
                    field: (*field).into(),
                    value: addr.to_string(),
                    expected: format!("an address other than {other}'s"),
                });
            }
        }
        let deadline = |field: &str, value: &Option<String>, default, max, range: &str| match value
        {
            Some(text) => {
                let d = duration::parse(field, text)?;
                if !(MIN_DEADLINE..=max).contains(&d) {
                    return Err(out_of_range(field, text, range));
                }
                Ok(d)
            }
            None => Ok(default),
        };
        let header_read_timeout = deadline(
            "header_read_timeout",
            &raw.header_read_timeout,
            DEFAULT_HEADER_READ_TIMEOUT,
            MAX_DEADLINE,
            "between 100ms and 1h",
        )?;
        let body_read_timeout = deadline(
            "body_read_timeout",
            &raw.body_read_timeout,
            DEFAULT_BODY_READ_TIMEOUT,
            MAX_DEADLINE,
            "between 100ms and 1h",
        )?;
        let database_timeout = deadline(
            "database_timeout",
            &raw.database_timeout,
            DEFAULT_DATABASE_TIMEOUT,
            MAX_DATABASE_TIMEOUT,
            "between 100ms and 1m",
        )?;
        let readyz_timeout = deadline(
            "readyz_timeout",
            &raw.readyz_timeout,
            DEFAULT_READYZ_TIMEOUT,
            MAX_DATABASE_TIMEOUT,
            "between 100ms and 1m",
        )?;
        let shutdown_grace = deadline(
            "shutdown_grace",
            &raw.shutdown_grace,
            DEFAULT_SHUTDOWN_GRACE,
            MAX_DEADLINE,
            "between 100ms and 1h",
        )?;
        let poll_interval = match &raw.poll_interval {
            Some(text) => {
                let d = duration::parse("poll_interval", text)?;
                if d < MIN_POLL_INTERVAL {
                    return Err(out_of_range("poll_interval", text, "at least 10ms"));
                }
                d
            }
            None => DEFAULT_POLL_INTERVAL,
        };
        if let (Some(body), Some(text), Some(retention)) =
            (body_retention, &raw.body_retention, retention.duration())
            && body > retention
        {
            return Err(out_of_range(
                "body_retention",
                text,
                &format!(
                    "at most retention ({}): bodies cannot outlive their events",
                    humantime::format_duration(retention)
                ),
            ));
        }
        let max_body_bytes = raw.max_body_bytes.unwrap_or(DEFAULT_MAX_BODY_BYTES);
        if max_body_bytes < MIN_MAX_BODY_BYTES {
            return Err(number_out_of_range(
                "max_body_bytes",
                max_body_bytes as u64,
                "at least 1024 (1 KiB)",
            ));
        }
        let admin_token = raw
            .admin_token_env
            .as_deref()
            .map(|var| secret("admin".into(), var))
            .transpose()?
            // Never an empty token that an empty bearer would match.
            .filter(Secret::is_loaded);

        let mut sources = Vec::new();
        for raw_source in raw.sources {
            let source = source::build(raw_source, retention, &secret)?;
            if sources.iter().any(|s: &Source| s.name == source.name) {
                return Err(duplicate("source", &source.name));
            }
            // One scope, one key per event: the sources of a scope must find the same id in
            // one event's deliveries.
            if let Some(other) = sources.iter().find(|s: &&Source| {
                s.dedup_scope == source.dedup_scope
                    && s.fields.id.describe() != source.fields.id.describe()
            }) {
                return Err(ConfigError::ScopeIdMismatch {
                    scope: source.dedup_scope.to_string(),
                    first: other.name.to_string(),
                    second: source.name.to_string(),
                    ids: format!(
                        "{} and {}",
                        other.fields.id.describe(),
                        source.fields.id.describe()
                    ),
                });
            }
            sources.push(source);
        }
        let mut destinations = Vec::new();
        for raw_destination in raw.destinations {
            let destination = destination::build(raw_destination, &secret)?;
            if destinations
                .iter()
                .any(|d: &Destination| d.name == destination.name)
            {
                return Err(duplicate("destination", &destination.name));
            }
            destinations.push(destination);
        }
        let mut routes = Vec::new();
        let mut pairs = HashSet::new();
        for raw_route in raw.routes {
            let route = destination::build_route(raw_route, &sources, &destinations)?;
            if routes.iter().any(|r: &Route| r.name == route.name) {
                return Err(duplicate("route", &route.name));
            }
            if !pairs.insert((route.source.clone(), route.destination.clone())) {
                return Err(duplicate("route", &route.name));
            }
            routes.push(route);
        }
        let mut relays = Vec::new();
        for raw_relay in raw.relays {
            let relay = relay::build(raw_relay, &database_url, &secret)?;
            if relays.iter().any(|r: &OutboxRelay| r.name == relay.name) {
                return Err(duplicate("relay", &relay.name));
            }
            if let Some(other) = relays.iter().find(|r: &&OutboxRelay| {
                r.database_url.is_loaded()
                    && relay.database_url.is_loaded()
                    && relay::same_database(r.database_url.expose(), relay.database_url.expose())
                    && !r.target.same_as(&relay.target)
            }) {
                let describe =
                    |r: &OutboxRelay| format!("{} at {}", r.target.kind(), r.target.display_url());
                return Err(ConfigError::RelayTargetConflict {
                    first: other.name.to_string(),
                    first_target: describe(other),
                    second: relay.name.to_string(),
                    second_target: describe(&relay),
                    database: if other.display_database_url() == relay.display_database_url() {
                        relay.display_database_url()
                    } else {
                        format!(
                            "{} (the database of {} too)",
                            relay.display_database_url(),
                            other.display_database_url()
                        )
                    },
                });
            }
            relays.push(relay);
        }
        Ok(Self {
            listen,
            database_url,
            retention,
            body_retention,
            max_body_bytes,
            group_commit: raw.group_commit.unwrap_or(true),
            poll_interval,
            admin_listen,
            metrics_listen,
            header_read_timeout,
            body_read_timeout,
            database_timeout,
            readyz_timeout,
            shutdown_grace,
            admin_token,
            console,
            sources,
            destinations,
            routes,
            relays,
            telemetry,
            not_loaded: not_loaded.into_inner(),
        })
    }

    /// The source called `name`.
    pub fn source(&self, name: &str) -> Option<&Source> {
        self.sources.iter().find(|s| s.name.as_str() == name)
    }
}

/// The text of the configuration file at `path`.
fn read(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.display().to_string(),
        source,
    })
}
