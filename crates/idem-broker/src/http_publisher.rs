//! Publishing outbox rows as HTTP POSTs with `Idempotency-Key`.

use std::time::Duration;

use futures_util::future::join_all;
use idem_sql::OutboxRow;
use reqwest::StatusCode;
use reqwest::header::RETRY_AFTER;

use crate::publisher::{PublishOutcome, Publisher, PublisherError};

/// The header that carries the row's message id (draft-ietf-httpapi-idempotency-key-header).
pub const IDEMPOTENCY_KEY: &str = "Idempotency-Key";

/// The default time limit of one request of [`HttpPublisher::new`], connect to last body byte.
pub const DEFAULT_HTTP_TIMEOUT: Duration = Duration::from_secs(10);

/// The wait after a 409 that carries no `Retry-After` header, or one that is not a number of
/// seconds (an HTTP date is not read).
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);

/// The shortest wait after a 409: a smaller `Retry-After` (`0` in particular) is raised to it, so
/// that a receiver answering `Retry-After: 0` is not sent the request in a tight loop.
pub const MIN_RETRY_AFTER: Duration = Duration::from_secs(1);

/// The longest wait after a 409: a larger `Retry-After` is lowered to it, so that one answer
/// cannot hold a row back for days.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// Publishes outbox rows as HTTP POST requests: the row's payload is the body, its message id
/// the `Idempotency-Key` header (draft-ietf-httpapi-idempotency-key-header), its headers go
/// along as HTTP headers. The destination is a path joined to the base URL (`/hooks/orders`),
/// or a full `http://` / `https://` URL.
///
/// Answers, per request:
/// - 2xx: [`PublishOutcome::Published`];
/// - 409 Conflict (the receiver is still processing a request with this key):
///   [`PublishOutcome::RetryLater`] after its `Retry-After` seconds clamped to
///   [`MIN_RETRY_AFTER`] (1 s) .. [`MAX_RETRY_AFTER`] (1 h), or [`DEFAULT_RETRY_AFTER`] without
///   one; the relay counts it as an attempt (so a receiver answering 409 forever gets the row
///   parked after the outbox policy's `max_attempts`) and waits at least the policy's backoff;
/// - any other status (other 4xx, 5xx, 1xx, 3xx) and transport errors after the connection
///   was made (timeout, connection lost mid-request: the receiver may have the request):
///   [`PublishOutcome::Failed`], counted toward the park with backoff. A refused request (4xx)
///   is unlikely to succeed unchanged, and parking it for an operator is the point;
/// - no connection at all (refused, unknown host): [`PublishOutcome::Unavailable`], no attempt
///   counted, the relay backs off: a receiver that is down or restarting never gets rows
///   parked.
///
/// The requests of a batch run concurrently.
#[derive(Debug, Clone)]
pub struct HttpPublisher {
    client: reqwest::Client,
    base_url: String,
}

impl HttpPublisher {
    /// A publisher to `base_url` (`http://127.0.0.1:8080`, or `https://…`, whose certificate
    /// must chain to a Mozilla root of `webpki-roots`) with [`DEFAULT_HTTP_TIMEOUT`] per
    /// request. For a private CA or a client certificate, build the client with its own
    /// rustls configuration and use [`with_client`](Self::with_client).
    ///
    /// # Errors
    /// [`PublisherError::Http`] when the client cannot be built.
    pub fn new(base_url: impl Into<String>) -> Result<Self, PublisherError> {
        // Its own rustls configuration (ring, the Mozilla roots): reqwest then needs no
        // process-wide crypto provider.
        let client = reqwest::Client::builder()
            .tls_backend_preconfigured(idem_core::tls::default_client_config())
            .timeout(DEFAULT_HTTP_TIMEOUT)
            // A 3xx is a failed publish (above). Followed, a 301, 302 or 303 turns the POST
            // into a bodiless GET (RFC 9110 §15.4), and a 200 to that GET would have marked
            // the row published though the receiver never got the message.
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Self::with_client(client, base_url))
    }

    /// A publisher using `client` (its timeouts, proxies, TLS settings) to `base_url`. Build
    /// `client` with `redirect(reqwest::redirect::Policy::none())`, as [`new`](Self::new)
    /// does: reqwest's default follows up to 10 redirects, turning a POST answered 301, 302 or
    /// 303 into a bodiless GET whose 200 would mark the row published.
    pub fn with_client(client: reqwest::Client, base_url: impl Into<String>) -> Self {
        Self {
            client,
            base_url: base_url.into(),
        }
    }

    fn url(&self, destination: &str) -> String {
        if destination.starts_with("http://") || destination.starts_with("https://") {
            destination.to_owned()
        } else {
            format!(
                "{}/{}",
                self.base_url.trim_end_matches('/'),
                destination.trim_start_matches('/')
            )
        }
    }

    async fn post(&self, row: &OutboxRow) -> PublishOutcome {
        let url = self.url(&row.destination);
        let mut request = self.client.post(&url);
        for (name, value) in &row.headers {
            if !name.eq_ignore_ascii_case(IDEMPOTENCY_KEY) {
                request = request.header(name.as_str(), value.as_str());
            }
        }
        let sent = request
            .header(IDEMPOTENCY_KEY, row.message_id.as_str())
            .body(row.payload.clone())
            .send()
            .await;
        let response = match sent {
            Ok(response) => response,
            // Not even connected: the receiver never saw the request (down, or restarting).
            Err(e) if e.is_connect() => {
                return PublishOutcome::Unavailable {
                    reason: format!("POST {url}: {e}"),
                };
            }
            // A timeout or a connection lost mid-request: the receiver may have it.
            Err(e) => {
                return PublishOutcome::Failed {
                    reason: format!("POST {url}: {e}"),
                };
            }
        };
        let status = response.status();
        if status.is_success() {
            PublishOutcome::Published
        } else if status == StatusCode::CONFLICT {
            let after = response
                .headers()
                .get(RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map_or(DEFAULT_RETRY_AFTER, |seconds| {
                    Duration::from_secs(seconds).clamp(MIN_RETRY_AFTER, MAX_RETRY_AFTER)
                });
            PublishOutcome::RetryLater {
                reason: format!("POST {url}: 409 Conflict (request with this key in flight)"),
                after,
            }
        } else {
            PublishOutcome::Failed {
                reason: format!("POST {url}: {status}"),
            }
        }
    }
}

impl Publisher for HttpPublisher {
    async fn publish(&self, batch: &[OutboxRow]) -> Vec<PublishOutcome> {
        join_all(batch.iter().map(|row| self.post(row))).await
    }
}
