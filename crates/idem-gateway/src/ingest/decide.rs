//! What each accepted event becomes per matching route: one [`Decision`] per (route, event),
//! with the version guard's verdict on drop-stale routes (stale, tie, gap, the note) and
//! whether the delivery is claimed in the commit and handed off to its lane.

use std::collections::HashSet;

use idem_core::Advance;
use idem_sql::{ErrorKind, Proposed};

use super::answer::Answer;
use super::unit::Incoming;
use crate::config::Ordering;
use crate::gateway::Gateway;
use crate::lanes::handoff::Reserved;
use crate::model::guard_note;
use crate::store::{DeliveryState, GatewayDb};
use crate::wiring::Wiring;

/// A delivery row to write, decided per (route, event).
pub(super) struct Decision {
    pub(super) route: usize,
    pub(super) event: usize,
    pub(super) state: DeliveryState,
    pub(super) tie: bool,
    /// Whether the delivery records its entity and version (drop-stale routes), for ordering
    /// and for replays.
    pub(super) ordered: bool,
    pub(super) note: Option<String>,
    /// A dense version sequence skipped numbers (counted, applied).
    pub(super) gap: bool,
    /// The entity (`type:id`) and versions the delivery records when `ordered`.
    pub(super) entity: Option<String>,
    pub(super) version: Option<i64>,
    pub(super) version_secondary: Option<i64>,
    /// Claimed as it is stored and handed to the dispatcher after the commit, under this permit.
    pub(super) permit: Option<Reserved>,
    /// Stored pending behind an earlier delivery of its entity (in the batch, or pending or in
    /// flight): the end of that one's attempt brings it, no backlog to wait for.
    pub(super) behind: bool,
}

/// One decision per (matching route, accepted event), in (route, entity, arrival) order: the
/// version guard of each drop-stale route, then which deliveries are handed off.
pub(super) async fn decide<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    wiring: &Wiring,
    tx: &mut sqlx::Transaction<'static, DB>,
    batch: &[&Incoming],
    answers: &[Answer],
) -> Result<Vec<Decision>, idem_sql::Error> {
    // Each route's events in (entity, arrival) order: the version guard decides a route's
    // events in one batch, in arrival order per entity.
    let mut work = Vec::new();
    for (i, incoming) in batch.iter().enumerate() {
        if answers[i] != Answer::Accepted {
            continue;
        }
        for (r, route) in wiring.routes_of(incoming.source) {
            if route.matches(incoming.event.event_type.as_deref())
                && !incoming.filtered.contains(&route.name)
            {
                let entity = incoming.event.entity.as_ref().map(|(e, _)| e.to_string());
                work.push((r, entity, i));
            }
        }
    }
    work.sort();
    let mut decisions: Vec<Decision> = work
        .into_iter()
        .map(|(route, _, event)| Decision {
            route,
            event,
            state: DeliveryState::Pending,
            tie: false,
            ordered: false,
            gap: false,
            note: None,
            entity: None,
            version: None,
            version_secondary: None,
            permit: None,
            behind: false,
        })
        .collect();
    let mut start = 0;
    while start < decisions.len() {
        let r = decisions[start].route;
        let end = start
            + decisions[start..]
                .iter()
                .take_while(|d| d.route == r)
                .count();
        let route = &wiring.config().routes[r];
        if route.ordering == Ordering::DropStale {
            guard_route(gateway, wiring, tx, batch, &mut decisions[start..end]).await?;
        }
        start = end;
    }
    hand_off_candidates::<DB>(gateway, wiring, tx, &mut decisions).await?;
    Ok(decisions)
}

/// The version guard of one drop-stale route over its `decisions` (in entity, arrival order),
/// in one batch: sets each decision's state, tie, note and the entity and versions it records.
async fn guard_route<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    wiring: &Wiring,
    tx: &mut sqlx::Transaction<'static, DB>,
    batch: &[&Incoming],
    decisions: &mut [Decision],
) -> Result<(), idem_sql::Error> {
    let Some(first) = decisions.first() else {
        return Ok(());
    };
    let route = &wiring.config().routes[first.route];
    let ordered: Vec<(usize, Proposed<'_>)> = decisions
        .iter()
        .enumerate()
        .filter_map(|(k, decision)| {
            let incoming = batch[decision.event];
            let (entity, version) = incoming.event.entity.as_ref()?;
            Some((
                k,
                Proposed {
                    entity,
                    version,
                    key: &incoming.key,
                },
            ))
        })
        .collect();
    let proposed: Vec<Proposed<'_>> = ordered.iter().map(|(_, p)| *p).collect();
    let guard = gateway.store().version_guard(&route.name);
    let results = guard.advance_many(tx, &proposed).await?;
    for ((k, proposed), result) in ordered.into_iter().zip(results) {
        let decision = &mut decisions[k];
        match result {
            Ok(Advance::Stale { current }) => {
                decision.state = DeliveryState::Stale;
                decision.ordered = true;
                decision.note = Some(guard_note::stale(
                    proposed.entity,
                    current,
                    proposed.version,
                ));
            }
            Ok(Advance::Tie { .. }) => {
                decision.tie = true;
                decision.ordered = true;
            }
            Ok(Advance::Gap { expected, got }) => {
                decision.gap = true;
                decision.ordered = true;
                decision.note = Some(guard_note::gap(expected, got));
            }
            Ok(Advance::Applied { previous: None }) => {
                decision.ordered = true;
                decision.note = Some(guard_note::FIRST.to_owned());
            }
            Ok(_) => decision.ordered = true,
            // The entity's stored version is of the other kind (the source's version type was
            // changed): the event cannot be compared, so it is sent unordered, like one
            // without an entity.
            Err(e) if e.kind() == ErrorKind::InvalidInput => {
                tracing::warn!(route = %route.name, entity = %proposed.entity, error = %e, "version not comparable; sent without ordering");
                decision.note = Some(guard_note::not_comparable(&e.to_string()));
            }
            Err(e) => return Err(e),
        }
        if decision.ordered {
            decision.entity = Some(proposed.entity.to_string());
            decision.version = Some(proposed.version.primary.get());
            decision.version_secondary = proposed.version.secondary;
        }
    }
    Ok(())
}

/// Gives a permit to each pending delivery that may be claimed as it is stored and handed to
/// its dispatcher after the commit (see `dispatch::handoff`): while permits last, the first of
/// each (route, entity) in the batch, unless a delivery of its entity is already pending or in
/// flight. Runs after the version guard, whose row locks make a concurrent batch of the same
/// entity commit first, so that its deliveries are seen here.
async fn hand_off_candidates<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    wiring: &Wiring,
    tx: &mut sqlx::Transaction<'static, DB>,
    decisions: &mut [Decision],
) -> Result<(), idem_sql::Error> {
    let mut first_of_entity = HashSet::new();
    for decision in decisions.iter_mut() {
        if decision.state != DeliveryState::Pending {
            continue;
        }
        if let Some(entity) = &decision.entity
            && !first_of_entity.insert((decision.route, entity.clone()))
        {
            decision.behind = true;
            continue;
        }
        let d = wiring.config().routes[decision.route].destination_index;
        decision.permit = wiring.lane(d).handoff().reserve(gateway.now());
    }
    let routes = &wiring.config().routes;
    let keys: Vec<(&str, &str, &str)> = decisions
        .iter()
        .filter(|decision| decision.permit.is_some())
        .filter_map(|decision| {
            let route = &routes[decision.route];
            let entity = decision.entity.as_deref()?;
            Some((route.destination.as_str(), route.name.as_str(), entity))
        })
        .collect();
    if keys.is_empty() {
        return Ok(());
    }
    let open: HashSet<(String, String, String)> =
        DB::open_entities(tx, &keys).await?.into_iter().collect();
    if open.is_empty() {
        return Ok(());
    }
    for decision in decisions.iter_mut() {
        let route = &routes[decision.route];
        if let Some(entity) = &decision.entity {
            let key = (
                route.destination.to_string(),
                route.name.to_string(),
                entity.clone(),
            );
            if decision.permit.is_some() && open.contains(&key) {
                // Its entity's earlier delivery goes first: stored pending, the permit freed.
                decision.permit = None;
                decision.behind = true;
            }
        }
    }
    Ok(())
}
