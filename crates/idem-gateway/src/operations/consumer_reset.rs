//! `idem consumers reset` and `POST /admin/consumers/{name}/reset` on the gateway's database:
//! idem-sql's consumer reset ([`Store::reset_consumer`](idem_sql::Store::reset_consumer)), with
//! every consumer the gateway itself keeps rows under refused besides its inbox (which the
//! library refuses on its own): each route's version guard, the Kafka sources' offsets, and
//! stored route names whose guard rows events of this gateway set.

use std::collections::BTreeMap;

use idem_core::Name;
use idem_sql::{ResetOptions, ResetReport};
use serde::Serialize;

use crate::Error;
use crate::config::{Broker, Config};
use crate::error::RequestError;
use crate::gateway::Gateway;
use crate::store::GatewayDb;

/// What a consumer reset deleted (or, for a dry run, would delete), as the admin API and
/// `idem consumers reset --json` answer it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConsumerResetReport {
    /// The consumer.
    pub consumer: String,
    /// Whether nothing was deleted: the counts are of rows a reset would delete.
    pub dry_run: bool,
    /// Rows per table: `idem_inbox`, `idem_versions`, `idem_parked`, `idem_kafka_offsets`.
    pub rows: BTreeMap<&'static str, u64>,
    /// The rows of every table together.
    pub total: u64,
    /// When the consumer last wrote one of those rows (ms since the epoch), if ever.
    pub last_seen_at: Option<i64>,
}

impl From<&ResetReport> for ConsumerResetReport {
    fn from(report: &ResetReport) -> Self {
        Self {
            consumer: report.consumer.to_string(),
            dry_run: report.dry_run,
            rows: report.tables().into_iter().collect(),
            total: report.total(),
            last_seen_at: report.last_seen.map(|t| t.as_millis()),
        }
    }
}

/// `name` as a consumer name.
///
/// # Errors
/// [`RequestError::BadConsumerName`] naming what is wrong.
fn consumer_name(name: &str) -> Result<Name, Error> {
    Name::new("consumer", name).map_err(|e| {
        RequestError::BadConsumerName {
            value: name.to_owned(),
            reason: e.to_string(),
        }
        .into()
    })
}

/// The refusals of the consumers `config` names: routes (their names, the names they were
/// renamed from, the retired ones) and Kafka sources' consumers.
fn protect_configured(mut options: ResetOptions, config: &Config) -> ResetOptions {
    let route = |name: &str| {
        format!(
            "it is the version guard of the gateway's route {name}: resetting it would let \
             events older than the ones it forwarded through again. To rebuild the route's \
             destination, use `idem replay --rebuild` (its events are sent again, stale ones \
             included, without touching the guard)"
        )
    };
    for r in &config.routes {
        options = options.protect(r.name.as_str(), route(r.name.as_str()));
        if let Some(old) = &r.renamed_from {
            options = options.protect(old.as_str(), route(old.as_str()));
        }
    }
    for old in &config.retired_routes {
        options = options.protect(old.as_str(), route(old.as_str()));
    }
    for source in &config.sources {
        if let Some(Broker::Kafka(kafka)) = source.broker() {
            options = options.protect(
                kafka.consumer.as_str(),
                format!(
                    "it holds the offsets of the gateway's Kafka source {}: the gateway's inbox \
                     would take every record read again as a duplicate. To read the topic \
                     again, give the source a new `consumer` name",
                    source.name
                ),
            );
        }
    }
    options
}

impl<DB: GatewayDb> Gateway<DB> {
    /// Resets consumer `name` in the gateway's database ([`idem_sql::Store::reset_consumer`]):
    /// deletes its inbox keys, version-guard rows, parked markers and Kafka offsets in one
    /// transaction (with `dry_run`, counts them). Refuses, besides what the library refuses (the
    /// gateway's inbox consumer, a live consumer, an unknown one), every consumer the gateway
    /// keeps rows under: a configured, renamed or retired route, a Kafka source's consumer, and
    /// a stored name whose guard rows this gateway's events set. Logged and counted as the
    /// operator action `reset-consumer`.
    ///
    /// # Errors
    /// [`Error::Request`] ([`RequestError::BadConsumerName`]) for a name that is not one;
    /// [`Error::Store`] with [`idem_sql::Error::ConsumerProtected`],
    /// [`idem_sql::Error::ConsumerLive`], [`idem_sql::Error::UnknownConsumer`] or a database
    /// error. Nothing is deleted on any error.
    pub async fn reset_consumer(
        &self,
        name: &str,
        dry_run: bool,
    ) -> Result<ConsumerResetReport, Error> {
        let consumer = consumer_name(name)?;
        let options = protect_configured(ResetOptions::new().dry_run(dry_run), &self.config());
        let options = self.protect_stored_routes(options, &consumer).await?;
        let report = self.store().reset_consumer(&consumer, &options).await?;
        let report = ConsumerResetReport::from(&report);
        crate::audit::done("reset-consumer", dry_run, &report);
        Ok(report)
    }

    /// `options`, refusing `consumer` too when its version-guard rows were set by events this
    /// gateway stores (a route no longer configured), or when it has guard rows and no inbox
    /// key (a route whose events gc collected: a library consumer claims inbox keys).
    async fn protect_stored_routes(
        &self,
        options: ResetOptions,
        consumer: &Name,
    ) -> Result<ResetOptions, Error> {
        let mut conn = self.store().pool().acquire().await?;
        // Set by events still stored, or — their events collected by gc — guard rows with no
        // inbox key beside them: what a route's guard looks like (C9 keeps guard rows for good).
        let (inbox, guard) = DB::consumer_rows(&mut conn, consumer.as_str()).await?;
        let looks_like_route = guard > 0 && inbox == 0;
        if !looks_like_route && DB::gateway_guard_rows(&mut conn, consumer.as_str()).await? == 0 {
            return Ok(options);
        }
        Ok(options.protect(
            consumer.as_str(),
            format!(
                "it has version-guard rows set by this gateway's events, or guard rows and no \
                 inbox key as a route's guard has: it is (or was) the gateway's route \
                 {consumer}. To rebuild a destination, use `idem replay --rebuild`"
            ),
        ))
    }
}
