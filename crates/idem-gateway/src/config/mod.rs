//! The gateway's configuration: a TOML file (docs/gateway.md is its reference), checked
//! once at start. Everything that could make a source accept what it should refuse is an error
//! here, so the gateway fails closed: an unknown kind, a missing secret, a secret of the wrong
//! shape, a retention shorter than the sender's redelivery horizon (docs/design.md C9).

mod broker;
mod console;
mod database;
mod defaults;
mod destination;
mod destination_target;
mod duration;
mod error;
mod health;
mod http_target;
mod kind;
mod lists;
mod model;
mod rate_limit;
mod raw;
#[cfg(test)]
mod reference;
mod relay;
mod secret;
mod settings;
mod source;
mod telemetry;
mod warnings;

use std::path::Path;

use raw::RawConfig;
use secret::{NotLoaded, SecretRef};
use settings::Settings;

pub use broker::{
    Broker, DEFAULT_AMQP_URL, DEFAULT_NATS_URL, KafkaSource, NatsSource, RabbitMqSource,
};
pub use console::{ConsoleSettings, DEFAULT_CONSOLE_SESSION_TTL};
pub use defaults::{
    DEFAULT_BODY_READ_TIMEOUT, DEFAULT_DATABASE_TIMEOUT, DEFAULT_DATABASE_URL,
    DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_LISTEN, DEFAULT_MAX_BODY_BYTES, DEFAULT_READYZ_TIMEOUT,
    DEFAULT_RETENTION, DEFAULT_SHUTDOWN_GRACE,
};
pub use destination_target::DestinationTarget;
pub use error::ConfigError;
pub use health::{AlertConditions, AlertFormat, AlertSink, Breaker};
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
pub use warnings::{ConfigWarning, known_event_types};

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

    /// Builds and checks `raw`, in the order of the file's reference: the console, telemetry,
    /// the top-level settings, the admin token, then the lists, each entry checked against the
    /// ones before it. `secrets_required`: see [`for_operations`](Self::for_operations).
    fn from_raw(
        raw: RawConfig,
        env: &dyn Fn(&str) -> Option<String>,
        secrets_required: bool,
    ) -> Result<Self, ConfigError> {
        let not_loaded = NotLoaded::default();
        let secret = secret::reader(env, secrets_required, &not_loaded);
        let console = console::build(&raw)?;
        let telemetry = telemetry::build(raw.telemetry.as_ref(), env)?;
        let settings = settings::build(&raw)?;
        let (health_interval, alert_conditions) = health::settings(&raw)?;
        let admin_token = SecretRef::either(
            || "the admin API".into(),
            ("admin_token_env", raw.admin_token_env.as_deref()),
            ("admin_token_file", raw.admin_token_file.as_deref()),
        )?
        .map(|at| {
            let key = match at {
                SecretRef::Env(_) => "admin_token_env",
                SecretRef::File(_) => "admin_token_file",
            };
            secret(format!("the admin API ({key})"), at)
        })
        .transpose()?
        // Never an empty token that an empty bearer would match.
        .filter(Secret::is_loaded);
        check_admin_token(
            admin_token.as_ref(),
            raw.admin_token_env.as_deref(),
            settings.admin_listen.unwrap_or(settings.listen),
        )?;
        let mut sources = lists::sources(raw.sources, settings.retention, &secret)?;
        let destinations = lists::destinations(raw.destinations, &secret)?;
        let routes = lists::routes(raw.routes, &sources, &destinations)?;
        let retired_routes = lists::retired_routes(raw.retired_routes, &routes)?;
        lists::keep_filter_headers(&mut sources, &routes);
        let relays = lists::relays(raw.relays, &settings.database_url, &secret)?;
        let alerts = health::sinks(raw.alerts, &secret)?;
        drop(secret); // its borrow of `not_loaded` ends here
        let Settings {
            listen,
            database_url,
            retention,
            body_retention,
            admin_listen,
            metrics_listen,
            deadlines,
            poll_interval,
            max_body_bytes,
        } = settings;
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
            header_read_timeout: deadlines.header_read_timeout,
            body_read_timeout: deadlines.body_read_timeout,
            database_timeout: deadlines.database_timeout,
            readyz_timeout: deadlines.readyz_timeout,
            shutdown_grace: deadlines.shutdown_grace,
            admin_token,
            console,
            sources,
            destinations,
            routes,
            retired_routes,
            relays,
            telemetry,
            health_interval,
            alert_conditions,
            alerts,
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

/// The shortest admin token accepted when the admin API listens beyond loopback: 32
/// characters (`idem demo` makes 16 random bytes in hex), as guessable tokens on a reachable
/// port are what a limit on wrong tokens only slows down.
pub const MIN_ADMIN_TOKEN_CHARS: usize = 32;

/// Refuses a short admin token (fewer than [`MIN_ADMIN_TOKEN_CHARS`]) when `/admin` listens on
/// `admin` and that is not a loopback address.
fn check_admin_token(
    token: Option<&Secret>,
    var: Option<&str>,
    admin: std::net::SocketAddr,
) -> Result<(), ConfigError> {
    let Some(token) = token else {
        return Ok(());
    };
    if token.expose().trim() != token.expose() {
        // A bearer token is read without the spaces around it: such a token can never match.
        return Err(ConfigError::BadValue {
            field: "admin_token_env".into(),
            value: var.unwrap_or_default().to_owned(),
            expected: "a token without spaces or line breaks around it".into(),
        });
    }
    let chars = token.expose().chars().count();
    if chars >= MIN_ADMIN_TOKEN_CHARS || admin.ip().is_loopback() {
        return Ok(());
    }
    Err(ConfigError::BadValue {
        field: "admin_token_env".into(),
        value: format!(
            "{} (a token of {chars} characters)",
            var.unwrap_or_default()
        ),
        expected: format!(
            "a token of at least {MIN_ADMIN_TOKEN_CHARS} characters, as /admin listens on {admin}, \
             beyond loopback (for example `openssl rand -hex 16`); or admin_listen on 127.0.0.1"
        ),
    })
}
