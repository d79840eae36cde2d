//! Building a `[[destination]]` and a `[[route]]`.

use super::defaults::{
    DEFAULT_CONCURRENCY, DEFAULT_RETRY_AFTER_CAP, DEFAULT_TIMEOUT, MAX_CONCURRENCY,
    MAX_RETRY_DELAY, MAX_TIMEOUT, MIN_TIMEOUT, default_retry_schedule,
};
use super::destination_target::{self, DestinationTarget};
use super::duration;
use super::error::{ConfigError, name, number_out_of_range, out_of_range};
use super::http_target::{self, TimeoutBounds, TlsKeys};
use super::model::{Destination, Ordering, Route, Source, is_type_pattern};
use super::rate_limit::RateLimit;
use super::raw::{RawDestination, RawRoute};
use super::secret::SecretLookup;
use crate::model::route_filter::RouteFilter;

pub(super) fn build(
    raw: RawDestination,
    secret: &SecretLookup<'_>,
) -> Result<Destination, ConfigError> {
    let dest_name = name("destination", "destination.name", raw.name.clone())?;
    let field_name = |field: &str| format!("destination {:?} {field}", dest_name.as_str());
    // The kind's keys first: a broker destination has no URL to check as HTTP, and no TLS files.
    let (target, url) = destination_target::build(&raw, &field_name)?;
    let (health, breaker) = super::health::destination(&raw, &field_name)?;
    let tls_keys = TlsKeys {
        ca_file: raw.ca_file,
        client_cert_file: raw.client_cert_file,
        client_key_file: raw.client_key_file,
    };
    if target == DestinationTarget::Http {
        http_target::check_url(
            &field_name,
            "url",
            Some(&url),
            &|| idem_sql::redact_url(&url),
            &tls_keys,
        )?;
    }
    let rate_limit = raw
        .rate_limit
        .as_deref()
        .map(|text| RateLimit::parse(&field_name("rate_limit"), text))
        .transpose()?;
    // The delivery's lease must outlive an attempt and stay within idem's longest ttl.
    let (tls, timeout) = http_target::tls_and_timeout(
        &field_name,
        tls_keys,
        raw.timeout.as_deref(),
        &TimeoutBounds {
            default: DEFAULT_TIMEOUT,
            min: MIN_TIMEOUT,
            max: MAX_TIMEOUT,
            expected: "between 100ms and 1h",
        },
    )?;
    // Longer delays would overflow the clock or hold an entity for ever (docs/design.md C11).
    let retry_delay = |field: &str, text: &str| {
        let d = duration::parse(&field_name(field), text)?;
        if d > MAX_RETRY_DELAY {
            return Err(out_of_range(&field_name(field), text, "at most 7d"));
        }
        Ok(d)
    };
    let retry_schedule = match &raw.retry_schedule {
        Some(list) => list
            .iter()
            .map(|text| retry_delay("retry_schedule", text))
            .collect::<Result<_, _>>()?,
        None => default_retry_schedule(),
    };
    let retry_after_cap = match &raw.retry_after_cap {
        Some(text) => retry_delay("retry_after_cap", text)?,
        None => DEFAULT_RETRY_AFTER_CAP,
    };
    let signing_secret = destination_target::signing_secret(
        &dest_name,
        &target,
        (
            raw.signing_secret_env.as_deref(),
            raw.signing_secret_file.as_deref(),
        ),
        secret,
    )?;
    let concurrency = raw.concurrency.unwrap_or(DEFAULT_CONCURRENCY);
    if !(1..=MAX_CONCURRENCY).contains(&concurrency) {
        return Err(number_out_of_range(
            &field_name("concurrency"),
            concurrency as u64,
            "between 1 and 1024",
        ));
    }
    Ok(Destination {
        name: dest_name,
        target,
        url,
        timeout,
        retry_schedule,
        retry_after_cap,
        retry_4xx: raw.retry_4xx.unwrap_or(false),
        signing_secret,
        concurrency,
        rate_limit,
        tls,
        health,
        breaker,
    })
}

pub(super) fn build_route(
    raw: RawRoute,
    sources: &[Source],
    destinations: &[Destination],
) -> Result<Route, ConfigError> {
    let route_name = raw
        .name
        .unwrap_or_else(|| format!("{}.{}", raw.source, raw.destination));
    let route_name = name("route", "route.name", route_name)?;
    let source = sources
        .iter()
        .find(|s| s.name.as_str() == raw.source)
        .ok_or_else(|| ConfigError::UnknownReference {
            route: route_name.to_string(),
            what: "source",
            name: raw.source.clone(),
        })?;
    let (destination_index, destination) = destinations
        .iter()
        .enumerate()
        .find(|(_, d)| d.name.as_str() == raw.destination)
        .ok_or_else(|| ConfigError::UnknownReference {
            route: route_name.to_string(),
            what: "destination",
            name: raw.destination.clone(),
        })?;
    let ordering = match raw.ordering.as_deref().unwrap_or("drop-stale") {
        "drop-stale" => Ordering::DropStale,
        "none" => Ordering::None,
        other => {
            return Err(ConfigError::BadValue {
                field: format!("route {:?} ordering", route_name.as_str()),
                value: other.into(),
                expected: "\"drop-stale\" or \"none\"".into(),
            });
        }
    };
    for pattern in &raw.event_types {
        if !is_type_pattern(pattern) {
            return Err(ConfigError::BadValue {
                field: format!("route {:?} event_types", route_name.as_str()),
                value: pattern.clone(),
                expected: "an exact event type (\"invoice.paid\") or a prefix with a single trailing * (\"invoice.*\")".into(),
            });
        }
    }
    let filter = raw
        .filter
        .map(|text| {
            RouteFilter::compile(&text).map_err(|source| ConfigError::BadFilter {
                route: route_name.to_string(),
                text,
                source,
            })
        })
        .transpose()?;
    let renamed_from = raw
        .renamed_from
        .map(|old| {
            name(
                "route",
                &format!("route {:?} renamed_from", route_name.as_str()),
                old,
            )
        })
        .transpose()?;
    Ok(Route {
        name: route_name,
        source: source.name.clone(),
        destination: destination.name.clone(),
        destination_index,
        event_types: raw.event_types,
        ordering,
        filter,
        renamed_from,
    })
}
