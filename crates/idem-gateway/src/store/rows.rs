//! The gateway's rows as they cross the SQL boundary: what is written (`New…`, [`Finished`]) and
//! what is read back (`Stored…`, [`DueDelivery`], [`ReplayCandidate`]), with named fields.

use bytes::Bytes;

use crate::model::state::{AttemptOutcome, DeliveryState};

/// A new event row.
#[derive(Debug)]
pub struct NewEvent<'a> {
    pub source: &'a str,
    pub event_id: &'a str,
    /// The key the event was claimed under in idem's inbox: its `Idempotency-Key`.
    pub dedup_key: &'a str,
    pub event_type: Option<&'a str>,
    pub aggregate_type: Option<&'a str>,
    pub aggregate_id: Option<&'a str>,
    pub version: Option<i64>,
    /// The version's secondary value (`version_secondary`), when the event has one.
    pub version_secondary: Option<i64>,
    pub body: &'a [u8],
    /// [`ForwardedHeaders`](crate::model::forwarded::ForwardedHeaders) as JSON.
    pub headers: &'a str,
    pub received_at: i64,
    /// The event's W3C trace context (`crate::traces`), when it has one.
    pub traceparent: Option<&'a str>,
    pub tracestate: Option<&'a str>,
    /// The routes whose `filter` did not take it, as a JSON list of names; `None` for none.
    pub filtered_routes: Option<&'a str>,
}

/// A new delivery row.
#[derive(Debug)]
pub struct NewDelivery<'a> {
    pub event: i64,
    pub route: &'a str,
    pub destination: &'a str,
    pub state: DeliveryState,
    pub entity: Option<&'a str>,
    pub version: Option<i64>,
    /// Set with `version` when the event's version has a secondary value.
    pub version_secondary: Option<i64>,
    pub tie: bool,
    /// The version guard's remark (see `guard_note`).
    pub note: Option<&'a str>,
    pub now: i64,
    /// Claimed as it is stored (handed to the dispatcher after the commit): in flight until
    /// this time, as attempt 1 with fencing token 1. `None`: pending (or stale) as usual.
    pub claimed_until: Option<i64>,
}

/// A delivery that is due, with what is needed to send it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct DueDelivery {
    pub id: i64,
    pub failures: i64,
    pub tie: bool,
    /// Made due by a rebuild (`idem replay --rebuild`): sent with `Idem-Replay: rebuild`.
    pub rebuild: bool,
    pub route: String,
    /// The entity (`type:id`) whose order the delivery keeps, if any.
    pub entity: Option<String>,
    pub source: String,
    pub event_id: String,
    pub dedup_key: String,
    pub event_type: Option<String>,
    #[sqlx(try_from = "Option<Vec<u8>>")]
    pub body: SharedBody,
    /// [`ForwardedHeaders`](crate::model::forwarded::ForwardedHeaders) as JSON, read at send time so
    /// that one unreadable row fails its own attempt, not every due read.
    pub headers: String,
    /// The event's W3C trace context, the parent of each attempt's `dispatch` span.
    pub traceparent: Option<String>,
    pub tracestate: Option<String>,
}

/// An event's raw body as dispatch holds it: shared, so that the hand-over from ingest and each
/// attempt take a reference rather than a copy. `None` once body_retention dropped it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SharedBody(pub Option<Bytes>);

impl From<Option<Vec<u8>>> for SharedBody {
    fn from(body: Option<Vec<u8>>) -> Self {
        Self(body.map(Bytes::from))
    }
}

/// The outcome of one attempt, as written.
#[derive(Debug)]
pub struct Finished {
    pub delivery: i64,
    /// The source of the delivery's event (for the per-minute counts).
    pub source: String,
    /// The delivery's route and the entity whose order it keeps, if any: the end of its
    /// attempt lets that entity's next delivery go.
    pub route: String,
    pub entity: Option<String>,
    pub token: i64,
    pub attempt: i64,
    pub state: DeliveryState,
    pub failures: i64,
    pub next_attempt_at: i64,
    pub started_at: i64,
    pub duration_ms: i64,
    pub status: Option<i64>,
    pub outcome: AttemptOutcome,
    pub excerpt: String,
    pub now: i64,
}

/// A stored event as `idem replay --backfill` reads it again.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct BackfillRow {
    pub id: i64,
    pub dedup_key: String,
    /// As stored, for replay's event-type filter.
    pub event_type: Option<String>,
    /// `None` once body_retention dropped it.
    pub body: Option<Vec<u8>>,
    /// [`ForwardedHeaders`](crate::model::forwarded::ForwardedHeaders) as JSON.
    pub headers: String,
    pub received_at: i64,
}

/// An event row as listed.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct StoredEvent {
    pub id: i64,
    pub source: String,
    pub event_id: String,
    pub event_type: Option<String>,
    pub aggregate_type: Option<String>,
    pub aggregate_id: Option<String>,
    pub version: Option<i64>,
    pub received_at: i64,
    /// Whether the raw body is still kept (body_retention drops it).
    pub body_kept: bool,
    /// The routes whose `filter` did not take it, as a JSON list of names; `None` for none.
    pub filtered_routes: Option<String>,
}

impl StoredEvent {
    /// The routes whose `filter` did not take it, read from the JSON list its row keeps
    /// (empty when none, or when the column cannot be read).
    pub fn filtered_by(&self) -> Vec<String> {
        self.filtered_routes
            .as_deref()
            .and_then(|json| serde_json::from_str(json).ok())
            .unwrap_or_default()
    }
}

/// A delivery row as listed, with its event's source, id and type.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct StoredDelivery {
    pub id: i64,
    pub route: String,
    pub destination: String,
    pub state: DeliveryState,
    pub tie: bool,
    pub note: Option<String>,
    pub attempts: i64,
    pub next_attempt_at: i64,
    pub updated_at: i64,
    pub source: String,
    pub event_id: String,
    pub event_type: Option<String>,
}

/// An attempt row.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct StoredAttempt {
    pub attempt: i64,
    pub started_at: i64,
    pub duration_ms: i64,
    pub status: Option<i64>,
    pub outcome: AttemptOutcome,
    pub excerpt: String,
}

/// A delivery a redrive or a replay may make due again, with what they must know.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ReplayCandidate {
    pub id: i64,
    /// The delivery's event (its row id).
    pub event: i64,
    pub route: String,
    pub state: DeliveryState,
    pub version: Option<i64>,
    pub version_secondary: Option<i64>,
    /// The event's type, for replay's event-type filter.
    pub event_type: Option<String>,
    /// Whether the raw body is still kept.
    pub body_kept: bool,
    /// The newest version of the entity on the route that was delivered or is being sent
    /// (`None` without an entity, or when none was).
    pub highest: Option<i64>,
    /// The highest secondary value of those delivered or being sent with this delivery's
    /// `version` (`None` when none has one).
    pub tie_secondary: Option<i64>,
    /// The version of the route's guard row of the entity, unless the event that set it is
    /// pending or a dead letter on the route (`None` without an entity or such a row): the
    /// newest version the route let through, known after `idem gc` collected its delivery.
    pub guarded: Option<i64>,
}

impl ReplayCandidate {
    /// Whether this delivery's version is older than one the destination may already hold,
    /// by the version guard's rule (idem-core's `decide`): a lower version, or an equal one
    /// with a lower secondary value when both have one.
    pub(crate) fn is_older_than_delivered(&self) -> bool {
        let lower = self
            .version
            .zip(self.highest.max(self.guarded))
            .is_some_and(|(v, h)| v < h);
        let lower_secondary = self
            .version_secondary
            .zip(self.tie_secondary)
            .is_some_and(|(s, t)| s < t);
        lower || lower_secondary
    }
}

/// Deliveries per (destination, state).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct StateCount {
    pub destination: String,
    pub state: DeliveryState,
    pub count: i64,
}
