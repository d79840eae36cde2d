//! `/metrics`: the process's Prometheus recorder, with the gauges refreshed from the tables.

use std::sync::OnceLock;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use super::problem::Problem;
use crate::gateway::Gateway;
use crate::metric_definitions::{
    self, BACKLOG, BATCH_SIZE_BUCKETS, DEAD_LETTERS, DISPATCH_DURATION_SECONDS, GAP_SIZE_BUCKETS,
    INGEST_BATCH_SIZE, INGEST_DURATION_SECONDS, LATENCY_BUCKETS, OLDEST_UNDELIVERED_AGE_SECONDS,
};
use crate::store::GatewayDb;
use idem_sql::metric_definitions::GAP_SIZE;

/// The process-wide Prometheus recorder, installed on first use. `None` when another recorder
/// was installed first (an application embedding the gateway); `/metrics` then answers 503.
pub fn prometheus() -> Option<&'static PrometheusHandle> {
    static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            // Every histogram docs/gateway.md lists has buckets: without them the exporter
            // renders a summary.
            let buckets = [
                (INGEST_DURATION_SECONDS, LATENCY_BUCKETS),
                (DISPATCH_DURATION_SECONDS, LATENCY_BUCKETS),
                (INGEST_BATCH_SIZE, BATCH_SIZE_BUCKETS),
                (GAP_SIZE, GAP_SIZE_BUCKETS),
            ];
            let builder = buckets
                .into_iter()
                .try_fold(PrometheusBuilder::new(), |builder, (name, buckets)| {
                    builder.set_buckets_for_metric(Matcher::Full(name.into()), buckets)
                })
                .ok()?;
            let handle = builder.install_recorder().ok()?;
            metric_definitions::describe();
            Some(handle)
        })
        .as_ref()
}

/// Refreshes the gauges from the tables, then renders every metric.
pub(crate) async fn render_metrics<DB: GatewayDb>(State(gateway): State<Gateway<DB>>) -> Response {
    let Some(handle) = prometheus() else {
        return Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "metrics-unavailable",
            "Metrics unavailable",
            "another metrics recorder was installed in this process",
        )
        .into_response();
    };
    match gateway.open_stats().await {
        Ok(stats) => {
            for (destination, counts) in &stats.destinations {
                let backlog = counts.pending + counts.in_flight;
                metrics::gauge!(BACKLOG, "destination" => destination.clone()).set(backlog as f64);
                metrics::gauge!(DEAD_LETTERS, "destination" => destination.clone())
                    .set(counts.dead as f64);
            }
            let age = stats.oldest_undelivered.map_or(0.0, |t| {
                (gateway.now().as_millis() - t.as_millis()).max(0) as f64 / 1000.0
            });
            metrics::gauge!(OLDEST_UNDELIVERED_AGE_SECONDS).set(age);
        }
        Err(e) => tracing::warn!(error = %e, "gauges not refreshed"),
    }
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        handle.render(),
    )
        .into_response()
}
