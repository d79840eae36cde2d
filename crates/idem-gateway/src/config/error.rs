//! Why a configuration cannot start a gateway.

use idem_core::Name;
use idem_http::verify;

use super::kind::SourceKind;

/// A configuration that cannot start a gateway. Each variant names what is wrong and where.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read configuration {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid TOML or has fields of the wrong type or unknown fields.
    // Not a `source`: the message holds the parser's text already, and a reporter that prints
    // the chain (anyhow's `{:#}`) would print it twice.
    #[error("configuration is not valid: {}", plain_types(.0))]
    Toml(toml::de::Error),
    /// A duration field is not a duration such as `30d`, `5s` or `250ms`.
    #[error(
        "{field} = {value:?} is not a duration; expected for example \"30d\", \"5s\" or \"250ms\""
    )]
    BadDuration {
        /// The field.
        field: String,
        /// The value.
        value: String,
    },
    /// A duration field is zero (`"0s"`): no key of the configuration means "never" by zero.
    #[error(
        "{field} = {value:?} is zero; expected a duration greater than zero (no key of the configuration means \"never\")"
    )]
    ZeroDuration {
        /// The field.
        field: String,
        /// The value.
        value: String,
    },
    /// Two sources share a `dedup_scope` but read their event ids differently: one event would
    /// get two keys (or two events one), so the scope would not make them one.
    #[error(
        "sources {first:?} and {second:?} share dedup_scope {scope:?} but read the event id differently ({ids}); sources of one scope must read it from the same place"
    )]
    ScopeIdMismatch {
        /// The scope.
        scope: String,
        /// The source configured first.
        first: String,
        /// The source configured later.
        second: String,
        /// Where each reads the event id: `header `x-github-delivery` and body field `$.id``.
        ids: String,
    },
    /// A field holds a value outside its allowed set or shape.
    #[error("{}", bad_value(field, value, expected))]
    BadValue {
        /// The field.
        field: String,
        /// The value.
        value: String,
        /// What is allowed.
        expected: String,
    },
    /// A TLS file (`ca_file`, `client_cert_file`, `client_key_file` of a destination or an
    /// HTTP relay) cannot be read, is not PEM, holds no certificate or key, or holds a key that
    /// is not the client certificate's.
    #[error("{field} = {path:?} {reason}")]
    TlsFile {
        /// The key (`destination "app" ca_file`).
        field: String,
        /// The path as configured.
        path: String,
        /// What is wrong and what was expected (`cannot be read: No such file or directory`).
        reason: String,
    },
    /// A name (of a source, destination, route, relay, consumer or dedup scope) is empty, too
    /// long or has characters outside `A-Z a-z 0-9 _ . -`.
    #[error("{field}: {error}")]
    BadName {
        /// The field (`source.name`, `dedup_scope`, …).
        field: String,
        /// What is wrong with the value, and what a name may be.
        error: idem_core::Error,
    },
    /// A number outside its allowed range.
    #[error("{field} = {value} is not valid; expected {expected}")]
    NumberOutOfRange {
        /// The field.
        field: String,
        /// The value.
        value: u64,
        /// What is allowed.
        expected: String,
    },
    /// A source's kind is not one the gateway can verify.
    #[error(
        "source {source_name:?} has unknown kind {kind:?}; expected stripe, github, shopify, standard-webhooks, generic, nats, rabbitmq or kafka"
    )]
    UnknownKind {
        /// The source.
        source_name: String,
        /// The kind given.
        kind: String,
    },
    /// A source has a key its kind does not take (a `queue` on a Stripe source, `secrets_env` on
    /// a NATS source): it would do nothing, so it is refused rather than ignored.
    #[error("source {source_name:?} (kind {kind}) cannot have `{key}`: {reason}")]
    MisplacedKey {
        /// The source.
        source_name: String,
        /// Its kind.
        kind: SourceKind,
        /// The key.
        key: &'static str,
        /// Which kinds take it.
        reason: &'static str,
    },
    /// A secret's environment variable is not set, or set to nothing: the source would have no
    /// key.
    #[error(
        "{owner} needs its secret in environment variable {var}, which is {}",
        if *empty { "set but empty" } else { "not set" }
    )]
    MissingSecret {
        /// `source "stripe"`, `destination "app"` or `the admin API (admin_token_env)`.
        owner: String,
        /// The variable.
        var: String,
        /// Whether the variable is set to the empty string (else it is not set).
        empty: bool,
    },
    /// A secret's file (`secrets_file`, `signing_secret_file`, `admin_token_file`,
    /// `secret_file`) cannot be read, or holds nothing.
    #[error(
        "{owner} reads its secret from file {path}, which {reason}; expected a readable file holding the secret (a trailing newline is ignored)"
    )]
    SecretFile {
        /// `source "stripe"`, `destination "app"` or `the admin API (admin_token_file)`.
        owner: String,
        /// The file as configured.
        path: String,
        /// Why it cannot be used: the I/O error, or "is empty".
        reason: String,
    },
    /// A secret is given both from the environment and from a file.
    #[error("{owner} has both {env_key} and {file_key}; expected one of them")]
    SecretTwice {
        /// `source "stripe"`, `destination "app"`, `the admin API` or `alert "ops"`.
        owner: String,
        /// `secrets_env`, `signing_secret_env`, `admin_token_env` or `secret_env`.
        env_key: &'static str,
        /// The `_file` form of the same key.
        file_key: &'static str,
    },
    /// A key that names a secret's environment variable names none (`secrets_env = [""]`).
    #[error(
        "{owner} names its secret's environment variable as \"\"; expected the name of a variable, such as STRIPE_SECRET"
    )]
    EmptySecretVariable {
        /// `source "stripe"`, `destination "app"` or `the admin API (admin_token_env)`.
        owner: String,
    },
    /// A source's secrets do not make a working verifier.
    #[error("source {source_name:?}: {error}")]
    Verifier {
        /// The source.
        source_name: String,
        /// What is wrong with the key.
        error: verify::ConfigError,
    },
    /// The retention is shorter than a source's redelivery horizon (docs/design.md C9).
    #[error("source {source_name:?} ({kind}): {error}")]
    RetentionTooShort {
        /// The source.
        source_name: String,
        /// Its kind.
        kind: SourceKind,
        /// The error naming both durations in seconds.
        error: idem_core::Error,
    },
    /// Two sources, destinations, routes or relays share a name, or two routes join the same source and
    /// destination.
    #[error("{what} {name:?} is configured twice")]
    Duplicate {
        /// `source`, `destination`, `route` or `relay`.
        what: &'static str,
        /// The name.
        name: String,
    },
    /// Two relays publish the `idem_outbox` rows of one database to different targets:
    /// `idem_outbox` has no column saying which relay a row is for, so each relay would claim
    /// and publish rows meant for the other. Relays sharing a database must have the same
    /// target (same kind and URL); several such relays are fine (they share the rows).
    #[error(
        "relays {first:?} and {second:?} both publish the idem_outbox rows of {database}, to different targets ({first_target} and {second_target}): idem_outbox has no column naming a row's relay, so each would publish the other's rows; give them the same target, or separate databases"
    )]
    RelayTargetConflict {
        /// The relay configured first.
        first: String,
        /// Its target: kind and URL, without credentials.
        first_target: String,
        /// The relay configured later on the same database.
        second: String,
        /// Its target: kind and URL, without credentials.
        second_target: String,
        /// The database, without credentials.
        database: String,
    },
    /// A route's `renamed_from`, or an entry of `retired_routes`, cannot be read as the
    /// former name of a route: it is the route's own name, a route configured now, or named
    /// twice.
    #[error("route {route:?}: {reason}")]
    BadRename {
        /// The route (for `retired_routes`, the retired name).
        route: String,
        /// What is wrong, naming the former name.
        reason: String,
    },
    /// A route names a source or destination that is not configured.
    #[error("route {route:?} names {what} {name:?}, which is not configured")]
    UnknownReference {
        /// The route.
        route: String,
        /// `source` or `destination`.
        what: &'static str,
        /// The missing name.
        name: String,
    },
    /// A route's `filter` is not a CEL expression over `body`, `headers` and `type`.
    #[error(
        "route {route:?} filter {text:?}: {source}; expected a CEL expression over body, headers and type, such as \"body.data.object.amount >= 100000 && type == 'invoice.paid'\""
    )]
    BadFilter {
        /// The route.
        route: String,
        /// The expression as written.
        text: String,
        /// Where and why it was refused.
        source: crate::model::route_filter::FilterSyntaxError,
    },
}

/// A [`ConfigError::BadValue`]: `field` = `value` is not in the allowed range `expected`.
pub(super) fn out_of_range(field: &str, value: &str, expected: &str) -> ConfigError {
    ConfigError::BadValue {
        field: field.into(),
        value: value.into(),
        expected: expected.into(),
    }
}

/// A [`ConfigError::NumberOutOfRange`]: number field `field` is `value`, outside `expected`.
pub(super) fn number_out_of_range(field: &str, value: u64, expected: &str) -> ConfigError {
    ConfigError::NumberOutOfRange {
        field: field.into(),
        value,
        expected: expected.into(),
    }
}

/// A [`ConfigError::Duplicate`]: two `what`s named `name`.
pub(super) fn duplicate(what: &'static str, name: &Name) -> ConfigError {
    ConfigError::Duplicate {
        what,
        name: name.to_string(),
    }
}

/// `value` as the name of field `field` (a `what`: source, route, …), or why it cannot be one.
///
/// A name of dots only (`.`, `..`) is refused here although idem's names allow dots: as a path
/// segment (`/webhooks/..`) HTTP clients remove it, so its endpoint could not be reached.
pub(super) fn name(what: &'static str, field: &str, value: String) -> Result<Name, ConfigError> {
    if !value.is_empty() && value.chars().all(|c| c == '.') {
        return Err(ConfigError::BadValue {
            field: field.into(),
            value,
            expected: "a name that is not only dots ('.' and '..' are path segments HTTP \
                       clients remove)"
                .into(),
        });
    }
    Name::new(what, value).map_err(|error| ConfigError::BadName {
        field: field.into(),
        error,
    })
}

impl From<toml::de::Error> for ConfigError {
    fn from(error: toml::de::Error) -> Self {
        Self::Toml(error)
    }
}

/// `error`'s text with serde's Rust type names (`expected usize`) said in the configuration's
/// words.
fn plain_types(error: &toml::de::Error) -> String {
    const WORDS: [(&str, &str); 10] = [
        // A number beyond every integer type: serde names the type it read it as.
        (" as i128, expected", ", expected"),
        ("expected usize", "expected a whole number"),
        ("expected u64", "expected a whole number"),
        ("expected u32", "expected a whole number"),
        ("expected u16", "expected a whole number"),
        ("expected u8", "expected a whole number"),
        ("expected i64", "expected a whole number"),
        ("expected i32", "expected a whole number"),
        ("expected f64", "expected a number"),
        ("expected f32", "expected a number"),
    ];
    WORDS.iter().fold(error.to_string(), |text, (rust, plain)| {
        text.replace(rust, plain)
    })
}

/// [`ConfigError::BadValue`]'s message: an empty value is most often a key left out (the
/// settings read a missing key as ""), so it is not quoted back as if the user had written it.
fn bad_value(field: &str, value: &str, expected: &str) -> String {
    if value.is_empty() {
        format!("{field} is missing or empty; expected {expected}")
    } else {
        format!("{field} = {value:?} is not valid; expected {expected}")
    }
}
