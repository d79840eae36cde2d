//! The process's `tracing` subscriber: log lines on stderr and, for `idem serve` with traces on,
//! the gateway's spans to the OTLP collector.

use idem_gateway::traces::{self, Traces};
use tracing::Subscriber;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer as _};

/// Installs [`subscriber`] as the process's.
pub(crate) fn init(default_filter: &str, traces: Option<&Traces>) {
    subscriber(default_filter, traces).init();
}

/// Log lines filtered by `RUST_LOG`, or `default_filter` when it is not set, and the layer of
/// `traces` when given.
fn subscriber(default_filter: &str, traces: Option<&Traces>) -> Box<dyn Subscriber + Send + Sync> {
    let directive = |text: &str| text.parse().expect("a valid directive");
    // sqlx logs each PostgreSQL URL parameter it does not know at WARN with its value:
    // `sslpassword` (which it does not read) is one, so that line never reaches the log. The
    // gateway's trace spans are for the trace layer: a log that took them would cost every
    // request a span it does not print.
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(default_filter))
        .add_directive(directive("sqlx_postgres::options::parse=error"))
        .add_directive(directive(&format!("{}=off", traces::TARGET)));
    let log = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_filter(filter);
    let logs = tracing_subscriber::registry().with(log);
    // Not an `Option` layer: a `None` one wants every span, so each request would still make
    // the gateway's spans (in the registry) with traces off.
    match traces {
        Some(traces) => Box::new(logs.with(traces.layer())),
        None => Box::new(logs),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With traces off, the gateway's spans are disabled at their callsites even at the most
    /// verbose log level: no layer wants them, so a request makes none. With traces on, the
    /// trace layer takes them and nothing else.
    #[test]
    fn the_gateway_spans_are_made_only_when_traces_are_on() {
        tracing::subscriber::with_default(subscriber("trace", None), || {
            let span = tracing::info_span!(target: traces::TARGET, "ingest");
            assert!(span.is_disabled());
            assert!(!tracing::info_span!("other").is_disabled());
        });
        // With them on, the trace layer takes them (none is sampled: nothing is sent).
        let settings = idem_gateway::TelemetrySettings {
            traces_url: "http://127.0.0.1:9/v1/traces".parse().unwrap(),
            service_name: "test".into(),
            sample_ratio: 0.0,
        };
        let traces = Traces::start(&settings).unwrap();
        tracing::subscriber::with_default(subscriber("warn", Some(&traces)), || {
            assert!(!tracing::info_span!(target: traces::TARGET, "ingest").is_disabled());
            assert!(tracing::info_span!("other").is_disabled());
        });
        traces.shutdown().unwrap();
    }
}
