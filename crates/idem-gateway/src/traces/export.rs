//! The OpenTelemetry pipeline a program installs to export the gateway's spans: a tracer
//! provider with a batch span processor and an OTLP/HTTP protobuf exporter, and the
//! `tracing` layer that turns the gateway's spans (and only those) into its spans.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{BatchSpanProcessor, Sampler, SdkTracerProvider};
use tracing::{Level, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::registry::LookupSpan;

use crate::config::TelemetrySettings;
use crate::error::Error;

/// The instrumentation scope the gateway's spans are exported under.
const SCOPE: &str = "idem-gateway";

/// The running trace pipeline of [`TelemetrySettings`]: spans queue in memory and a thread of
/// its own sends them in batches (512 spans, or every 5 s; the `OTEL_BSP_*` variables change
/// that), so no request waits for the collector. Call [`Traces::shutdown`] before the process
/// exits, or the spans still queued are lost.
#[derive(Debug)]
pub struct Traces {
    provider: SdkTracerProvider,
}

impl Traces {
    /// Starts the pipeline `settings` describe: spans sampled at `sample_ratio` for new traces
    /// (a remote parent's decision is kept), under resource `service.name` (and whatever
    /// `OTEL_RESOURCE_ATTRIBUTES` adds), POSTed to `traces_url` with the headers of
    /// `OTEL_EXPORTER_OTLP_HEADERS` (for a collector's credentials). Nothing is sent yet.
    ///
    /// # Errors
    /// [`Error::Traces`] when the exporter cannot be built (its HTTP client, on a thread of its
    /// own, could not start).
    pub fn start(settings: &TelemetrySettings) -> Result<Self, Error> {
        // Built on a thread of its own: a blocking client cannot be built (nor dropped) on an
        // async runtime's thread, which the caller may be on.
        let built = std::thread::spawn(|| {
            reqwest::blocking::Client::builder()
                .tls_backend_preconfigured(crate::tls::default_config())
                .build()
        })
        .join();
        let client = match built {
            Ok(Ok(client)) => client,
            Ok(Err(e)) => {
                return Err(Error::Traces {
                    what: "cannot build the OTLP exporter's HTTP client",
                    reason: e.to_string(),
                });
            }
            Err(_) => {
                return Err(Error::Traces {
                    what: "cannot build the OTLP exporter's HTTP client",
                    reason: "the thread building it panicked".to_owned(),
                });
            }
        };
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_http_client(client)
            .with_endpoint(settings.traces_url.as_str())
            .build()
            .map_err(|e| Error::Traces {
                what: "cannot build the OTLP exporter",
                reason: e.to_string(),
            })?;
        let sampler =
            Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(settings.sample_ratio)));
        let provider = SdkTracerProvider::builder()
            .with_span_processor(BatchSpanProcessor::builder(exporter).build())
            .with_sampler(sampler)
            .with_resource(
                Resource::builder()
                    .with_service_name(settings.service_name.clone())
                    .build(),
            )
            .build();
        Ok(Self { provider })
    }

    /// The `tracing` layer to add to the program's subscriber: it takes the gateway's spans
    /// (target [`TARGET`](super::TARGET)) and nothing else, so log events and other crates'
    /// spans never become span data (and no body or secret, which no span field holds).
    pub fn layer<S>(&self) -> impl Layer<S> + Send + Sync + 'static
    where
        S: Subscriber + for<'span> LookupSpan<'span> + Send + Sync,
    {
        tracing_opentelemetry::layer()
            .with_tracer(self.provider.tracer(SCOPE))
            // Source files, threads, busy and idle times and the target say nothing an
            // operator needs here, and each costs work on every span.
            .with_location(false)
            .with_threads(false)
            .with_tracked_inactivity(false)
            .with_target(false)
            .with_context_activation(false)
            .with_filter(Targets::new().with_target(super::TARGET, Level::TRACE))
    }

    /// Sends every span ended so far and waits until the collector answered (or the export
    /// timed out: 10 s, `OTEL_EXPORTER_OTLP_TIMEOUT`). Blocks the calling thread: call it
    /// from a blocking one (`spawn_blocking`).
    ///
    /// # Errors
    /// [`Error::Traces`] when the export failed (the collector is unreachable or refused the
    /// spans); those spans are dropped.
    pub fn flush(&self) -> Result<(), Error> {
        self.provider.force_flush().map_err(|e| Error::Traces {
            what: "exporting spans failed",
            reason: e.to_string(),
        })
    }

    /// Sends the spans still queued and stops the pipeline; spans ended later are dropped.
    /// Blocks as [`Traces::flush`] does.
    ///
    /// # Errors
    /// As [`Traces::flush`].
    pub fn shutdown(&self) -> Result<(), Error> {
        self.provider.shutdown().map_err(|e| Error::Traces {
            what: "exporting the last spans failed",
            reason: e.to_string(),
        })
    }
}
