//! `idem replay --backfill`: deliveries for today's routes for stored events that have none on
//! them — a route added or fixed after the events arrived takes the events it missed. Each
//! stored event is read again as ingest reads it (today's fields), and every route of its
//! source that its type matches, that has no delivery of it and whose filter takes it gets one,
//! decided and stored as ingest decides and stores a new event's (version guard, entity order,
//! hand-off), in the stored events' arrival order. The one place replay creates deliveries.

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};
use idem_core::{DedupKey, Name};

use super::answer::Answer;
use super::commit::{StoredEvents, hand_over, note_waits, store_deliveries};
use super::decide::decide;
use super::unit::Incoming;
use crate::gateway::Gateway;
use crate::model::forwarded::ForwardedHeaders;
use crate::model::route_filter::FilterInput;
use crate::store::{BackfillRow, DeliveryState, GatewayDb};

/// One stored event to backfill, read again: the routes it is to get a delivery on.
pub(crate) struct Planned {
    row: i64,
    headers: String,
    incoming: Incoming,
    /// The routes (names) it gets a delivery on.
    pub(crate) routes: Vec<Name>,
}

/// Why a stored event gets no new delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Skipped {
    /// Every route that takes it has a delivery of it already (or none takes its type).
    Covered,
    /// The routes without a delivery of it did not take it: their filters said no, or read a
    /// header it was stored without (see [`Plan::undecided`]).
    NotTaken,
    /// Its body was dropped by body_retention.
    NoBody,
    /// Today's fields cannot read it, or read another dedup key than it was stored under.
    Unreadable,
}

/// What [`plan`] decided for one stored event: its new deliveries, or why none, and how many
/// routes' filters did not take it or could not decide.
pub(crate) struct Plan {
    pub(crate) outcome: Result<Planned, Skipped>,
    pub(crate) filtered: u64,
    /// Routes whose filter reads a header the event was stored without: idem keeps a header
    /// only from when a filter reads it, so an older event cannot be judged by it.
    pub(crate) undecided: u64,
}

/// Reads `row` (an event of source `source`, an index) again and picks the routes of today's
/// configuration it is to get a delivery on: its type matches, it has none there
/// (`delivered`: the routes it has deliveries on), and the route's filter takes it.
pub(crate) fn plan<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    source: usize,
    row: BackfillRow,
    delivered: &[String],
) -> Plan {
    let skipped = |why| Plan {
        outcome: Err(why),
        filtered: 0,
        undecided: 0,
    };
    let Some(body) = row.body else {
        return skipped(Skipped::NoBody);
    };
    let Ok(kept) = ForwardedHeaders::from_json(&row.headers) else {
        return skipped(Skipped::Unreadable);
    };
    let mut headers = HeaderMap::new();
    for (name, value) in kept.pairs() {
        if let (Ok(n), Ok(v)) = (HeaderName::try_from(name), HeaderValue::try_from(value)) {
            headers.append(n, v);
        }
    }
    let wiring = gateway.wiring();
    let src = wiring.source(source);
    let Ok(event) = src.fields.extract(&headers, &body) else {
        return skipped(Skipped::Unreadable);
    };
    let key = DedupKey::from_event(&src.dedup_scope, &event.event_id);
    if key.as_str() != row.dedup_key {
        return skipped(Skipped::Unreadable);
    }
    let input = FilterInput::new(kept.pairs(), &body, event.event_type.as_deref());
    let (mut routes, mut others, mut filtered, mut undecided) = (Vec::new(), Vec::new(), 0, 0);
    for (_, route) in wiring.routes_of(source) {
        let missing = route.matches(event.event_type.as_deref())
            && !delivered.iter().any(|d| d == route.name.as_str());
        let unknown = route.filter.as_ref().is_some_and(|f| {
            f.header_names()
                .iter()
                .any(|h| !kept.pairs().any(|(name, _)| name == h))
        });
        let taken = route
            .filter
            .as_ref()
            .is_none_or(|f| f.matches(&input).unwrap_or(false));
        match (missing, unknown, taken) {
            (true, true, _) => undecided += 1,
            (true, false, false) => filtered += 1,
            _ => {}
        }
        if missing && !unknown && taken {
            routes.push(route.name.clone());
        } else {
            others.push(route.name.clone());
        }
    }
    if routes.is_empty() {
        let why = if filtered + undecided > 0 {
            Skipped::NotTaken
        } else {
            Skipped::Covered
        };
        return Plan {
            outcome: Err(why),
            filtered,
            undecided,
        };
    }
    let incoming = Incoming {
        source,
        key,
        event,
        body: Bytes::from(body),
        received_at: row.received_at,
        trace: None,
        span: tracing::Span::none(),
        // Every route but the new ones: decide() gives a delivery to the rest.
        filtered: others,
    };
    Plan {
        outcome: Ok(Planned {
            row: row.id,
            headers: row.headers,
            incoming,
            routes,
        }),
        filtered,
        undecided,
    }
}

/// What one backfill commit created.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Created {
    /// Deliveries stored (pending, handed off or stale).
    pub(crate) deliveries: u64,
    /// Of them, judged stale by the version guard: recorded, never sent.
    pub(crate) stale: u64,
}

/// Stores the deliveries of `planned` (in arrival order) in one transaction, as ingest's group
/// commit stores a new event's, then hands the claimed ones to their dispatchers.
///
/// # Errors
/// The store's error: nothing of the batch was stored.
pub(crate) async fn commit<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    planned: Vec<Planned>,
) -> Result<Created, idem_sql::Error> {
    if planned.is_empty() {
        return Ok(Created::default());
    }
    let stored = StoredEvents {
        accepted: (0..planned.len()).collect(),
        headers: planned.iter().map(|p| p.headers.clone()).collect(),
        rows: planned.iter().map(|p| p.row).collect(),
    };
    let batch: Vec<&Incoming> = planned.iter().map(|p| &p.incoming).collect();
    let answers = vec![Answer::Accepted; batch.len()];
    let _turn = gateway.writer().ingest().await;
    let now = gateway.now().as_millis();
    let wiring = gateway.wiring();
    let mut tx = gateway.store().begin().await?;
    let decisions = decide(gateway, &wiring, &mut tx, &batch, &answers).await?;
    let ids = store_deliveries::<DB>(&wiring, &mut tx, &decisions, &stored.rows, now).await?;
    note_waits(&wiring, &decisions);
    let created = Created {
        deliveries: decisions.len() as u64,
        stale: decisions
            .iter()
            .filter(|d| d.state == DeliveryState::Stale)
            .count() as u64,
    };
    tx.commit().await.map_err(idem_sql::Error::from)?;
    hand_over(&wiring, &batch, &stored, decisions, ids, now);
    Ok(created)
}
