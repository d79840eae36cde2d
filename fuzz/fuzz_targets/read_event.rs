//! `Source::read_event`, the gateway's field extractors, on hostile deliveries to sources of
//! every kind. The first input byte picks the source, the rest is a delivery (headers, an empty
//! line, the body). Properties (docs/gateway.md "What each kind reads" and "Field tables", and
//! crates/idem-gateway/src/config/model.rs):
//! - whatever the bytes, it returns, and gives the same answer twice;
//! - a read event has the id where its kind (or its `id` table) reads it, exactly as sent (a
//!   header's first value, or a JSON string or number at the path), its type likewise, and, with
//!   an entity and a version all present, the entity `{type}:{id}` and the version read there;
//! - a missing id is `MissingId`, a blank or over-long one `BadId`; a body that is not JSON is
//!   `MalformedJson` for a source that reads the body, and the body is never read by one whose
//!   fields are all headers.

#![no_main]

use std::sync::LazyLock;

use idem_core::{MAX_ID_BYTES, Version};
use idem_fuzz::delivery;
use idem_gateway::{Config, ExtractError, ReadEvent};
use idem_http::http::HeaderMap;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// One source of each kind, and a generic source with every field table (the docs' example).
const CONFIG: &str = r#"
[[source]]
name = "stripe"
kind = "stripe"
secrets_env = ["STRIPE_SECRET"]

[[source]]
name = "github"
kind = "github"
secrets_env = ["SECRET"]

[[source]]
name = "shopify"
kind = "shopify"
secrets_env = ["SECRET"]

[[source]]
name = "sw"
kind = "standard-webhooks"
secrets_env = ["SW_SECRET"]

[[source]]
name = "acme"
kind = "generic"
secrets_env = ["SECRET"]
signature_header = "X-Acme-Signature"
id = { header = "X-Event-Id" }
type = { json = "$.event" }
entity = { json = "$.order.id" }
entity_type = "order"
version = { json = "$.order.version", type = "integer" }

[[source]]
name = "orders"
kind = "nats"
stream = "ORDERS"

[[source]]
name = "billing"
kind = "rabbitmq"
queue = "billing-events"
"#;

static GATEWAY: LazyLock<Config> = LazyLock::new(|| {
    // Only the secrets named above: any other variable (such as OTEL_EXPORTER_OTLP_ENDPOINT,
    // which the configuration also reads) is unset.
    Config::from_toml(CONFIG, &|var| {
        let value = match var {
            "STRIPE_SECRET" => "whsec_fuzz",
            "SW_SECRET" => "whsec_ZnV6eg==",
            "SECRET" => "fuzz",
            _ => return None,
        };
        Some(value.to_owned())
    })
    .expect("the fuzz configuration is valid")
});

/// Where a value is read, as docs/gateway.md says for each kind.
#[derive(Clone, Copy)]
enum At {
    Header(&'static str),
    /// A JSON path of plain member names, as a JSON pointer.
    Json(&'static str),
    /// The first of two that is present.
    FirstOf(&'static At, &'static At),
}

/// A value read independently of the gateway: absent, present as text, or of a shape the
/// gateway refuses.
#[derive(Debug, PartialEq)]
enum Read {
    Absent,
    Text(String),
    Refused,
}

impl At {
    fn reads_body(self) -> bool {
        match self {
            Self::Header(_) => false,
            Self::Json(_) => true,
            Self::FirstOf(a, b) => a.reads_body() || b.reads_body(),
        }
    }

    fn read(self, headers: &HeaderMap, json: Option<&Value>) -> Read {
        match self {
            Self::Header(name) => match headers.get(name).map(|v| v.to_str()) {
                None => Read::Absent,
                Some(Ok(text)) => Read::Text(text.to_owned()),
                Some(Err(_)) => Read::Refused,
            },
            Self::Json(pointer) => match json.and_then(|json| json.pointer(pointer)) {
                None | Some(Value::Null) => Read::Absent,
                Some(Value::String(s)) if s.contains('\0') => Read::Refused,
                Some(Value::String(s)) => Read::Text(s.clone()),
                Some(Value::Number(n)) => Read::Text(n.to_string()),
                Some(_) => Read::Refused,
            },
            Self::FirstOf(a, b) => match a.read(headers, json) {
                Read::Absent => b.read(headers, json),
                read => read,
            },
        }
    }
}

/// The fields of one source: id, type, and (entity type, entity id, version, whether the
/// version is a timestamp).
struct Reads {
    name: &'static str,
    id: At,
    event_type: Option<At>,
    entity: Option<(EntityType, At, At, bool)>,
}

enum EntityType {
    Fixed(&'static str),
    Read(At),
}

const SOURCES: &[Reads] = &[
    Reads {
        name: "stripe",
        id: At::Json("/id"),
        event_type: Some(At::Json("/type")),
        entity: Some((
            EntityType::Read(At::Json("/data/object/object")),
            At::Json("/data/object/id"),
            At::Json("/created"),
            true,
        )),
    },
    Reads {
        name: "github",
        id: At::Header("x-github-delivery"),
        event_type: Some(At::Header("x-github-event")),
        entity: None,
    },
    Reads {
        name: "shopify",
        // Each header with and without Shopify's `X-` prefix; the event id before the webhook id.
        id: At::FirstOf(
            &At::Header("x-shopify-event-id"),
            &At::FirstOf(
                &At::Header("shopify-event-id"),
                &At::FirstOf(
                    &At::Header("x-shopify-webhook-id"),
                    &At::Header("shopify-webhook-id"),
                ),
            ),
        ),
        event_type: Some(At::FirstOf(
            &At::Header("x-shopify-topic"),
            &At::Header("shopify-topic"),
        )),
        entity: None,
    },
    Reads {
        name: "sw",
        id: At::Header("webhook-id"),
        event_type: Some(At::Json("/type")),
        entity: None,
    },
    Reads {
        name: "acme",
        id: At::Header("x-event-id"),
        event_type: Some(At::Json("/event")),
        entity: Some((
            EntityType::Fixed("order"),
            At::Json("/order/id"),
            At::Json("/order/version"),
            false,
        )),
    },
    Reads {
        name: "orders",
        id: At::Header("nats-msg-id"),
        event_type: Some(At::Header("nats-subject")),
        entity: None,
    },
    Reads {
        name: "billing",
        id: At::Header("amqp-message-id"),
        event_type: Some(At::FirstOf(
            &At::Header("amqp-type"),
            &At::Header("amqp-routing-key"),
        )),
        entity: None,
    },
];

impl Reads {
    fn reads_body(&self) -> bool {
        self.id.reads_body()
            || self.event_type.is_some_and(At::reads_body)
            || self.entity.as_ref().is_some_and(|(ty, id, version, _)| {
                matches!(ty, EntityType::Read(at) if at.reads_body())
                    || id.reads_body()
                    || version.reads_body()
            })
    }

    /// Checks a read event against what these fields read from `headers` and `json`.
    fn check(&self, event: &ReadEvent, headers: &HeaderMap, json: Option<&Value>) {
        assert_eq!(
            self.id.read(headers, json),
            Read::Text(event.event_id.as_str().to_owned())
        );
        let event_type = self
            .event_type
            .map_or(Read::Absent, |at| at.read(headers, json));
        match &event.event_type {
            Some(read) => assert_eq!(event_type, Read::Text(read.clone())),
            None => assert_eq!(event_type, Read::Absent),
        }
        let Some((ty, id, version, timestamp)) = &self.entity else {
            assert_eq!(event.entity, None);
            return;
        };
        let ty = match ty {
            EntityType::Fixed(name) => Read::Text((*name).to_owned()),
            EntityType::Read(at) => at.read(headers, json),
        };
        let expected = match (ty, id.read(headers, json), version.read(headers, json)) {
            (Read::Text(ty), Read::Text(id), Read::Text(version)) => {
                let value: i64 = version.trim().parse().expect("an integer version");
                let version = if *timestamp {
                    Version::timestamp(value)
                } else {
                    Version::sequence(value)
                };
                Some((format!("{ty}:{id}"), version))
            }
            _ => None,
        };
        let got = event
            .entity
            .as_ref()
            .map(|(entity, version)| (entity.to_string(), *version));
        assert_eq!(got, expected);
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let reads = &SOURCES[usize::from(pick) % SOURCES.len()];
    let source = GATEWAY.source(reads.name).expect("configured");
    let (headers, body) = delivery(rest);
    let result = source.read_event(&headers, body);
    assert_eq!(
        source.read_event(&headers, body),
        result,
        "not deterministic"
    );

    let json = if reads.reads_body() {
        match serde_json::from_slice::<Value>(body) {
            Ok(json) => Some(json),
            Err(_) => {
                assert!(
                    matches!(result, Err(ExtractError::MalformedJson(_))),
                    "{result:?}"
                );
                return;
            }
        }
    } else {
        assert_eq!(source.read_event(&headers, b"\xff not json"), result);
        None
    };
    let json = json.as_ref();
    match &result {
        Ok(event) => {
            let id = event.event_id.as_str();
            assert!(!id.trim().is_empty() && id.len() <= MAX_ID_BYTES, "{id:?}");
            reads.check(event, &headers, json);
        }
        Err(ExtractError::MissingId(_)) => assert_eq!(reads.id.read(&headers, json), Read::Absent),
        Err(ExtractError::BadId { .. }) => match reads.id.read(&headers, json) {
            Read::Text(id) => assert!(id.trim().is_empty() || id.len() > MAX_ID_BYTES),
            read => panic!("BadId for {read:?}"),
        },
        Err(ExtractError::MalformedJson(detail)) => {
            panic!("MalformedJson for a readable delivery: {detail}")
        }
        Err(error) => assert_eq!(error.code(), "bad-event-field"),
    }
});
