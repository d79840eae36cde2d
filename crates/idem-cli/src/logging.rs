//! The process's `tracing` subscriber: log lines on stderr and, for `idem serve` with traces on,
//! the gateway's spans to the OTLP collector.

use std::fmt::{self, Write as _};

use idem_gateway::traces::{self, Traces};
use tracing::Subscriber;
use tracing::field::Field;
use tracing_subscriber::field::{MakeExt as _, MakeVisitor, VisitFmt, VisitOutput};
use tracing_subscriber::fmt::format::{Writer, debug_fn};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer as _};

use crate::printable::printable;

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
        .fmt_fields(log_fields())
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

/// How a log line writes its fields: the message, then `name=value` pairs, with every control
/// character escaped (`\n`, `\u{1b}`). Event ids, types and entities are chosen by senders: raw,
/// a newline in one would forge a second log line and an escape sequence would reach the
/// operator's terminal.
fn log_fields()
-> impl for<'w> MakeVisitor<Writer<'w>, Visitor: VisitFmt + VisitOutput<fmt::Result>> + Clone {
    debug_fn(write_field).delimited(" ")
}

/// One field of a log line (see [`log_fields`]).
fn write_field(writer: &mut Writer<'_>, field: &Field, value: &dyn fmt::Debug) -> fmt::Result {
    if field.name() != "message" {
        write!(writer, "{}=", field.name())?;
    }
    write!(Escaped(writer), "{value:?}")
}

/// A writer that escapes control characters on their way to `.0`.
struct Escaped<'a, 'w>(&'a mut Writer<'w>);

impl fmt::Write for Escaped<'_, '_> {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        self.0.write_str(&printable(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tests that install a subscriber hold this: a callsite's interest is cached across every
    /// subscriber alive when it is first hit, so a test's unfiltered subscriber alive at the
    /// same time would decide for the other test's filtered one (a race between them).
    static SUBSCRIBERS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    use std::io;
    use std::sync::{Arc, Mutex};

    /// A sender's event id with a newline and a terminal escape is written escaped, on one line.
    #[test]
    fn control_characters_in_fields_are_escaped() {
        #[derive(Clone, Default)]
        struct Buffer(Arc<Mutex<Vec<u8>>>);
        impl io::Write for Buffer {
            fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(bytes);
                Ok(bytes.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let layer = tracing_subscriber::fmt::layer()
            .fmt_fields(log_fields())
            .with_ansi(false)
            .with_writer(move || writer.clone());
        let subscriber = tracing_subscriber::registry().with(layer);
        let _one_at_a_time = SUBSCRIBERS.lock().unwrap_or_else(|e| e.into_inner());
        tracing::subscriber::with_default(subscriber, || {
            let event_id = "evt_1\nFORGED line\u{1b}]0;PWNED\u{7}";
            tracing::warn!(%event_id, entity = "cus\r1", "stale event\t dropped");
        });
        let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        assert_eq!(text.lines().count(), 1, "{text:?}");
        assert!(!text.trim_end().chars().any(char::is_control), "{text:?}");
        assert!(
            text.contains(r"stale event\t dropped event_id=evt_1\nFORGED line\u{1b}]0;PWNED\u{7}"),
            "{text:?}"
        );
        assert!(text.contains(r#"entity="cus\r1""#), "{text:?}");
    }

    /// With traces off, the gateway's spans are disabled at their callsites even at the most
    /// verbose log level: no layer wants them, so a request makes none. With traces on, the
    /// trace layer takes them and nothing else.
    #[test]
    fn the_gateway_spans_are_made_only_when_traces_are_on() {
        let _one_at_a_time = SUBSCRIBERS.lock().unwrap_or_else(|e| e.into_inner());
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
