//! Building a `[[source]]`: its kind's verifier or broker, and where its event id, type, entity
//! and version are read (each kind's defaults, or the fields the source names).

use std::sync::Arc;

use http::HeaderName;
use idem_core::{Name, RetentionPolicy};
use idem_http::verify::{self, Encoding, Verifier};

use super::broker;
use super::error::{ConfigError, name};
use super::kind::SourceKind;
use super::model::{Intake, Retention, Source};
use super::raw::{RawField, RawSource};
use super::secret::{Secret, SecretLookup, SecretRef};
use crate::model::body_path::BodyPath;
use crate::model::fields::{self, EntityType, Field, Fields, TimeUnit, VersionKind};

/// Builds source `raw`, whose events are kept for `retention`.
///
/// # Errors
/// A [`ConfigError`] naming the first problem: an unknown kind, a retention shorter than the
/// kind's redelivery horizon, a key of another kind, a secret, a verifier that refuses its
/// secrets, a field that cannot be read.
pub(super) fn build(
    mut raw: RawSource,
    retention: Retention,
    secret: &SecretLookup<'_>,
) -> Result<Source, ConfigError> {
    let source_name = name("source", "source.name", raw.name.clone())?;
    let kind = SourceKind::parse(&raw.kind).ok_or_else(|| ConfigError::UnknownKind {
        source_name: source_name.to_string(),
        kind: raw.kind.clone(),
    })?;
    let field_name = |field: &str| format!("source {:?} {field}", source_name.as_str());
    // A Kafka topic's horizon is its own retention, which the source states.
    let horizon = if kind == SourceKind::Kafka {
        broker::redelivery_horizon(&raw, &field_name)?
    } else {
        kind.redelivery_horizon()
    };
    // C9: a key deleted before the sender stops redelivering lets the event through twice.
    if let Some(retention) = retention.duration() {
        RetentionPolicy::new(retention, horizon).map_err(|error| {
            ConfigError::RetentionTooShort {
                source_name: source_name.to_string(),
                kind,
                error,
            }
        })?;
    }
    broker::refuse_foreign_keys(&raw, kind, source_name.as_str())?;
    let intake = intake(&raw, kind, &source_name, secret, &field_name)?;
    let fields = fields(&mut raw, kind, &source_name, &field_name)?;
    let dedup_scope = match raw.dedup_scope {
        Some(scope) => name("dedup scope", &field_name("dedup_scope"), scope)?,
        None => source_name.clone(),
    };
    if fields.version.is_some() && fields.entity.is_none() {
        return Err(ConfigError::BadValue {
            field: field_name("entity"),
            value: String::new(),
            expected: "an entity where the version's entity is read, such as { json = \"$.order.id\" }: a version is compared per entity, so `version` needs `entity`".into(),
        });
    }
    Ok(Source {
        name: source_name,
        kind,
        dedup_scope,
        trust_traceparent: raw.trust_traceparent.unwrap_or(false),
        intake,
        fields,
    })
}

/// How the source's events come in: a webhook verifier of its kind, built with its secrets, or
/// its broker; `Unverifiable` when read for an operator command without the secrets.
fn intake(
    raw: &RawSource,
    kind: SourceKind,
    source_name: &Name,
    secret: &SecretLookup<'_>,
    field_name: &dyn Fn(&str) -> String,
) -> Result<Intake, ConfigError> {
    let owner = || format!("source {:?}", source_name.as_str());
    if !raw.secrets_env.is_empty() && !raw.secrets_file.is_empty() {
        return Err(ConfigError::SecretTwice {
            owner: owner(),
            env_key: "secrets_env",
            file_key: "secrets_file",
        });
    }
    let mut secrets = Vec::new();
    for var in &raw.secrets_env {
        secrets.push(secret(owner(), SecretRef::Env(var))?);
    }
    for path in &raw.secrets_file {
        secrets.push(secret(owner(), SecretRef::File(path))?);
    }
    let loaded = secrets.iter().all(Secret::is_loaded);
    let secrets: Vec<&str> = secrets.iter().map(Secret::expose).collect();
    let verifier_error = |error| ConfigError::Verifier {
        source_name: source_name.to_string(),
        error,
    };
    let webhook = |verifier: Arc<dyn Verifier>| Intake::Webhook(verifier);
    Ok(match kind {
        // Read for an operator command without the source's secrets: nothing to check them by.
        _ if !loaded => Intake::Unverifiable,
        SourceKind::Stripe => webhook(Arc::new(
            verify::stripe::StripeVerifier::new(&secrets).map_err(verifier_error)?,
        )),
        SourceKind::GitHub => webhook(Arc::new(
            verify::github::GitHubVerifier::new(&secrets).map_err(verifier_error)?,
        )),
        SourceKind::Shopify => webhook(Arc::new(
            verify::shopify::ShopifyVerifier::new(&secrets).map_err(verifier_error)?,
        )),
        SourceKind::StandardWebhooks => webhook(Arc::new(
            verify::standard_webhooks::StandardWebhooksVerifier::new(&secrets)
                .map_err(verifier_error)?,
        )),
        SourceKind::Nats | SourceKind::RabbitMq | SourceKind::Kafka => Intake::Broker(
            broker::build(raw, kind, source_name.as_str(), secret, field_name)?,
        ),
        SourceKind::Generic => webhook(Arc::new(generic_hmac(
            raw,
            &secrets,
            field_name,
            &verifier_error,
        )?)),
    })
}

/// A `generic` source's verifier: `signature_header` (required), `signature_encoding` and
/// `signature_prefix`; `verifier_error` names the source in the verifier's own error.
fn generic_hmac(
    raw: &RawSource,
    secrets: &[&str],
    field_name: &dyn Fn(&str) -> String,
    verifier_error: &dyn Fn(verify::ConfigError) -> ConfigError,
) -> Result<verify::generic_hmac::GenericHmacVerifier, ConfigError> {
    let header = raw
        .signature_header
        .as_deref()
        .ok_or_else(|| ConfigError::BadValue {
            field: field_name("signature_header"),
            value: String::new(),
            expected: "the header that carries the HMAC, such as \"X-Signature\"".into(),
        })?;
    let encoding = match raw.signature_encoding.as_deref().unwrap_or("hex") {
        "hex" => Encoding::Hex,
        "base64" => Encoding::Base64,
        other => {
            return Err(ConfigError::BadValue {
                field: field_name("signature_encoding"),
                value: other.into(),
                expected: "\"hex\" or \"base64\"".into(),
            });
        }
    };
    let verifier = verify::generic_hmac::GenericHmacVerifier::new(header, encoding, secrets)
        .map_err(verifier_error)?;
    Ok(match raw.signature_prefix.as_deref() {
        Some(prefix) => verifier.with_prefix(prefix),
        None => verifier,
    })
}

/// Where the event id, type, entity and version are read: the fields the source names (taken
/// out of `raw`), else its kind's defaults.
fn fields(
    raw: &mut RawSource,
    kind: SourceKind,
    source_name: &Name,
    field_name: &dyn Fn(&str) -> String,
) -> Result<Fields, ConfigError> {
    for (key, raw_field) in [
        ("id", &raw.id),
        ("type", &raw.event_type),
        ("entity", &raw.entity),
    ] {
        if let Some(unit) = raw_field.as_ref().and_then(|f| f.unit.as_ref()) {
            return Err(ConfigError::BadValue {
                field: field_name(&format!("{key}.unit")),
                value: unit.clone(),
                expected: "no `unit`: it says how a `version` or `version_secondary` of type = \"timestamp\" writes its times".into(),
            });
        }
    }
    let defaults = kind_defaults(kind);
    let id = match raw.id.take() {
        Some(f) => field(&field_name("id"), f)?,
        None => defaults.id.ok_or_else(|| ConfigError::BadValue {
            field: field_name("id"),
            value: String::new(),
            expected:
                "where the event id is, such as { header = \"X-Event-Id\" } or { json = \"$.id\" }"
                    .into(),
        })?,
    };
    let event_type = match raw.event_type.take() {
        Some(f) => Some(field(&field_name("type"), f)?),
        None => defaults.event_type,
    };
    let entity = match raw.entity.take() {
        Some(f) => {
            let ty = match raw.entity_type.take() {
                Some(ty) => name("aggregate type", &field_name("entity_type"), ty)?,
                None => source_name.clone(),
            };
            Some((EntityType::Fixed(ty), field(&field_name("entity"), f)?))
        }
        None => defaults.entity,
    };
    let version = match raw.version.take() {
        Some(f) => Some(versioned(&field_name("version"), f)?),
        None => defaults.version,
    };
    let version_secondary = raw
        .version_secondary
        .take()
        .map(|f| versioned(&field_name("version_secondary"), f))
        .transpose()?;
    if version_secondary.is_some() && version.is_none() {
        return Err(ConfigError::BadValue {
            field: field_name("version"),
            value: String::new(),
            expected: "a version where the entity's version is read: `version_secondary` only breaks ties between equal versions, so it needs a `version`".into(),
        });
    }
    Ok(Fields {
        id,
        event_type,
        entity,
        version,
        version_secondary,
        kept_headers: kind
            .sender_headers()
            .iter()
            .map(|name| http::HeaderName::from_static(name))
            .collect(),
    })
}

/// A version field `f` (the key `name`) and how its values compare.
fn versioned(name: &str, f: RawField) -> Result<(Field, VersionKind), ConfigError> {
    let kind = version_kind(name, &f)?;
    Ok((field(name, f)?, kind))
}

fn version_kind(name: &str, raw: &RawField) -> Result<VersionKind, ConfigError> {
    let unit = match raw.unit.as_deref() {
        None | Some("s") => TimeUnit::Seconds,
        Some("ms") => TimeUnit::Millis,
        Some(other) => {
            return Err(ConfigError::BadValue {
                field: format!("{name}.unit"),
                value: other.into(),
                expected: "\"s\" (integer Unix seconds) or \"ms\" (integer Unix milliseconds)"
                    .into(),
            });
        }
    };
    match raw.value_type.as_deref().unwrap_or("integer") {
        "integer" if raw.unit.is_some() => Err(ConfigError::BadValue {
            field: format!("{name}.unit"),
            value: raw.unit.clone().unwrap_or_default(),
            expected: "no `unit` with type = \"integer\": `unit` says how a type = \"timestamp\" writes its times".into(),
        }),
        "integer" => Ok(VersionKind::Sequence),
        "timestamp" => Ok(VersionKind::Timestamp(unit)),
        other => Err(ConfigError::BadValue {
            field: format!("{name}.type"),
            value: other.into(),
            expected: "\"integer\" (a dense sequence) or \"timestamp\" (RFC 3339 times, or integer Unix seconds or milliseconds with `unit`): versions are compared, and only these can be".into(),
        }),
    }
}

/// What each kind reads by default; `id` is `None` only for generic sources.
struct KindDefaults {
    id: Option<Field>,
    event_type: Option<Field>,
    entity: Option<(EntityType, Field)>,
    version: Option<(Field, VersionKind)>,
}

fn kind_defaults(kind: SourceKind) -> KindDefaults {
    let header = |name: &'static str| Field::Header(HeaderName::from_static(name));
    let json = |path: &'static str| {
        Field::Json(
            BodyPath::parse(path).expect("built-in JSON paths parse"),
            path.to_owned(),
        )
    };
    let none = KindDefaults {
        id: None,
        event_type: None,
        entity: None,
        version: None,
    };
    match kind {
        SourceKind::Stripe => KindDefaults {
            id: Some(json("$.id")),
            event_type: Some(json("$.type")),
            entity: Some((
                EntityType::Read(json("$.data.object.object")),
                json("$.data.object.id"),
            )),
            version: Some((json("$.created"), VersionKind::UnixSeconds)),
        },
        SourceKind::GitHub => KindDefaults {
            id: Some(header("x-github-delivery")),
            event_type: Some(header("x-github-event")),
            ..none
        },
        // Shopify sends its headers with and without the `X-` prefix (`@shopify/shopify-api`
        // 13.1.0 reads both). The event id comes first in either form: one event sent to two
        // subscriptions has one event id and two webhook ids, so it is delivered once.
        SourceKind::Shopify => KindDefaults {
            id: Some(Field::FirstOf(vec![
                header("x-shopify-event-id"),
                header("shopify-event-id"),
                header("x-shopify-webhook-id"),
                header("shopify-webhook-id"),
            ])),
            event_type: Some(Field::FirstOf(vec![
                header("x-shopify-topic"),
                header("shopify-topic"),
            ])),
            ..none
        },
        SourceKind::StandardWebhooks => KindDefaults {
            id: Some(header("webhook-id")),
            event_type: Some(json("$.type")),
            ..none
        },
        SourceKind::Generic => none,
        // The broker's message id is the event id: JetStream's duplicate window and the
        // publisher's own retries keep it across every redelivery of one event.
        SourceKind::Nats => KindDefaults {
            id: Some(header(fields::NATS_MSG_ID)),
            event_type: Some(header(fields::NATS_SUBJECT)),
            ..none
        },
        // The relay's stable message id; a record without it is keyed by its position, which
        // a crash cannot change (the offsets are stored with the events) but a republish does.
        SourceKind::Kafka => KindDefaults {
            id: Some(Field::FirstOf(vec![
                header(fields::KAFKA_MESSAGE_ID),
                header(fields::KAFKA_POSITION),
            ])),
            event_type: Some(header(fields::KAFKA_TOPIC)),
            ..none
        },
        SourceKind::RabbitMq => KindDefaults {
            id: Some(header(fields::AMQP_MESSAGE_ID)),
            event_type: Some(Field::FirstOf(vec![
                header(fields::AMQP_TYPE),
                header(fields::AMQP_ROUTING_KEY),
            ])),
            ..none
        },
    }
}

fn field(name: &str, raw: RawField) -> Result<Field, ConfigError> {
    match (raw.header, raw.json) {
        (Some(header), None) => HeaderName::from_bytes(header.as_bytes())
            .map(Field::Header)
            .map_err(|_| ConfigError::BadValue {
                field: name.into(),
                value: header,
                expected: "an HTTP header name".into(),
            }),
        (None, Some(path)) => BodyPath::parse(&path)
            .map(|p| Field::Json(p, path.clone()))
            .map_err(|e| ConfigError::BadValue {
                field: name.into(),
                value: path,
                expected: format!("a JSON path such as \"$.event.id\" ({e})"),
            }),
        (header, _) => Err(ConfigError::BadValue {
            field: name.into(),
            // Both given, or neither (then the message says missing).
            value: if header.is_some() {
                "{ header, json }".to_owned()
            } else {
                String::new()
            },
            expected: "exactly one of header = \"…\" or json = \"$.…\"".into(),
        }),
    }
}
