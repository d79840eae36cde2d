//! The lists of the file, `[[source]]`, `[[destination]]`, `[[route]]` and `[[relay]]`: each
//! entry built by its own module, then checked against the entries before it (a name used
//! twice, two sources of one dedup scope reading different ids, two relays of one database
//! publishing to different targets).

use std::collections::HashSet;

use idem_core::Name;

use super::destination;
use super::error::{ConfigError, duplicate};
use super::model::{Destination, Retention, Route, Source};
use super::raw::{RawDestination, RawRelay, RawRoute, RawSource};
use super::relay::{self, OutboxRelay};
use super::secret::SecretLookup;
use super::source;

/// The `[[source]]` entries, with sources' `retention` as the redelivery horizon's bound.
///
/// # Errors
/// The first entry's [`ConfigError`]; [`ConfigError::Duplicate`] for a name used twice;
/// [`ConfigError::ScopeIdMismatch`] for two sources of one scope that read different ids.
pub(super) fn sources(
    raw: Vec<RawSource>,
    retention: Retention,
    secret: &SecretLookup<'_>,
) -> Result<Vec<Source>, ConfigError> {
    let mut sources: Vec<Source> = Vec::new();
    for raw_source in raw {
        let source = source::build(raw_source, retention, secret)?;
        if sources.iter().any(|s| s.name == source.name) {
            return Err(duplicate("source", &source.name));
        }
        check_scope_ids(&sources, &source)?;
        sources.push(source);
    }
    Ok(sources)
}

/// One scope, one key per event: the sources of a scope must find the same id in one event's
/// deliveries.
fn check_scope_ids(earlier: &[Source], source: &Source) -> Result<(), ConfigError> {
    let Some(other) = earlier.iter().find(|s| {
        s.dedup_scope == source.dedup_scope && s.fields.id.describe() != source.fields.id.describe()
    }) else {
        return Ok(());
    };
    Err(ConfigError::ScopeIdMismatch {
        scope: source.dedup_scope.to_string(),
        first: other.name.to_string(),
        second: source.name.to_string(),
        ids: format!(
            "{} and {}",
            other.fields.id.describe(),
            source.fields.id.describe()
        ),
    })
}

/// The `[[destination]]` entries.
///
/// # Errors
/// The first entry's [`ConfigError`]; [`ConfigError::Duplicate`] for a name used twice.
pub(super) fn destinations(
    raw: Vec<RawDestination>,
    secret: &SecretLookup<'_>,
) -> Result<Vec<Destination>, ConfigError> {
    let mut destinations: Vec<Destination> = Vec::new();
    for raw_destination in raw {
        let destination = destination::build(raw_destination, secret)?;
        if destinations.iter().any(|d| d.name == destination.name) {
            return Err(duplicate("destination", &destination.name));
        }
        destinations.push(destination);
    }
    Ok(destinations)
}

/// The `[[route]]` entries, between `sources` and `destinations`.
///
/// # Errors
/// The first entry's [`ConfigError`]; [`ConfigError::Duplicate`] for a name used twice or a
/// second route between one source and one destination.
pub(super) fn routes(
    raw: Vec<RawRoute>,
    sources: &[Source],
    destinations: &[Destination],
) -> Result<Vec<Route>, ConfigError> {
    let mut routes: Vec<Route> = Vec::new();
    let mut pairs = HashSet::new();
    for raw_route in raw {
        let route = destination::build_route(raw_route, sources, destinations)?;
        if routes.iter().any(|r| r.name == route.name) {
            return Err(duplicate("route", &route.name));
        }
        if !pairs.insert((route.source.clone(), route.destination.clone())) {
            return Err(duplicate("route", &route.name));
        }
        routes.push(route);
    }
    check_renames(&routes)?;
    Ok(routes)
}

/// Refuses a `renamed_from` that is its own route's name, the name of a route configured now
/// (a rename moves a name away: both cannot run), or the former name of two routes.
fn check_renames(routes: &[Route]) -> Result<(), ConfigError> {
    let mut former = HashSet::new();
    for route in routes {
        let Some(old) = &route.renamed_from else {
            continue;
        };
        let bad = |reason: String| ConfigError::BadRename {
            route: route.name.to_string(),
            reason,
        };
        if old == &route.name {
            return Err(bad(format!(
                "renamed_from = {:?} is the route's own name; remove renamed_from, or set it to the name the route had before",
                old.as_str()
            )));
        }
        if routes.iter().any(|r| &r.name == old) {
            return Err(bad(format!(
                "renamed_from = {:?} names a route that is still configured; a renamed route's former name must be gone from the file",
                old.as_str()
            )));
        }
        if !former.insert(old.clone()) {
            return Err(bad(format!(
                "renamed_from = {:?} is the former name of another route too; one route takes a former name over",
                old.as_str()
            )));
        }
    }
    Ok(())
}

/// The `retired_routes` names: former routes removed for good. None may be a route configured
/// now or a route's `renamed_from`.
pub(super) fn retired_routes(raw: Vec<String>, routes: &[Route]) -> Result<Vec<Name>, ConfigError> {
    let mut retired: Vec<Name> = Vec::new();
    for text in raw {
        let old = super::error::name("route", "retired_routes", text)?;
        let clash = if routes.iter().any(|r| r.name == old) {
            Some("is a route configured now")
        } else if routes.iter().any(|r| r.renamed_from.as_ref() == Some(&old)) {
            Some("is a route's renamed_from (a renamed route is not retired)")
        } else if retired.contains(&old) {
            Some("is listed twice")
        } else {
            None
        };
        if let Some(clash) = clash {
            return Err(ConfigError::BadRename {
                route: old.to_string(),
                reason: format!("retired_routes lists {:?}, which {clash}", old.as_str()),
            });
        }
        retired.push(old);
    }
    Ok(retired)
}

/// Keeps with each source's events the headers its routes' filters read by name, so that a
/// replay's filter sees what ingest's saw (they are forwarded with the event, as the headers
/// its fields read are). A name that is not a valid header name is never sent, so not kept.
pub(super) fn keep_filter_headers(sources: &mut [Source], routes: &[Route]) {
    for route in routes {
        let Some(filter) = &route.filter else {
            continue;
        };
        let Some(source) = sources.iter_mut().find(|s| s.name == route.source) else {
            continue;
        };
        for name in filter.header_names() {
            if let Ok(name) = http::HeaderName::from_bytes(name.as_bytes())
                && !source.fields.kept_headers.contains(&name)
            {
                source.fields.kept_headers.push(name);
            }
        }
    }
}

/// The `[[relay]]` entries; `gateway_database` is the database of a relay without
/// `database_url`.
///
/// # Errors
/// The first entry's [`ConfigError`]; [`ConfigError::Duplicate`] for a name used twice;
/// [`ConfigError::RelayTargetConflict`] for two relays of one database with different targets.
pub(super) fn relays(
    raw: Vec<RawRelay>,
    gateway_database: &str,
    secret: &SecretLookup<'_>,
) -> Result<Vec<OutboxRelay>, ConfigError> {
    let mut relays: Vec<OutboxRelay> = Vec::new();
    for raw_relay in raw {
        let relay = relay::build(raw_relay, gateway_database, secret)?;
        if relays.iter().any(|r| r.name == relay.name) {
            return Err(duplicate("relay", &relay.name));
        }
        check_relay_targets(&relays, &relay)?;
        relays.push(relay);
    }
    Ok(relays)
}

/// `idem_outbox` has no column naming a row's relay: two relays on one database must publish
/// to one target, or each would publish the other's rows.
fn check_relay_targets(earlier: &[OutboxRelay], relay: &OutboxRelay) -> Result<(), ConfigError> {
    let Some(other) = earlier.iter().find(|r| {
        r.database_url.is_loaded()
            && relay.database_url.is_loaded()
            && idem_sql::same_database(r.database_url.expose(), relay.database_url.expose())
            && !r.target.same_as(&relay.target)
    }) else {
        return Ok(());
    };
    let describe = |r: &OutboxRelay| format!("{} at {}", r.target.kind(), r.target.display_url());
    Err(ConfigError::RelayTargetConflict {
        first: other.name.to_string(),
        first_target: describe(other),
        second: relay.name.to_string(),
        second_target: describe(relay),
        database: if other.display_database_url() == relay.display_database_url() {
            relay.display_database_url()
        } else {
            format!(
                "{} (the database of {} too)",
                relay.display_database_url(),
                other.display_database_url()
            )
        },
    })
}
