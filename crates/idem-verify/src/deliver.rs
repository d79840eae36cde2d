//! Delivering events over HTTP, signed fresh per copy as the sender would.

use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use idem_http::verify::{github, shopify, standard_webhooks, stripe};
use serde::Serialize;
use tokio::sync::Barrier;

use crate::VerifyError;
use crate::events::EventRecord;
use crate::plan::Delivery;

/// How each copy is signed: `none`, or `stripe:`, `github:`, `shopify:` or
/// `standard-webhooks:` followed by the secret.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Signer {
    /// Unsigned.
    None,
    /// `Stripe-Signature: t=<now>,v1=…` with the `whsec_…` secret.
    Stripe(String),
    /// `X-Hub-Signature-256` and `X-GitHub-Delivery: <event id>`.
    GitHub(String),
    /// `X-Shopify-Hmac-Sha256` and `X-Shopify-Event-Id: <event id>`.
    Shopify(String),
    /// `webhook-id: <event id>`, `webhook-timestamp: <now>`, `webhook-signature: v1,…`.
    StandardWebhooks(String),
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the secret.
        f.write_str(match self {
            Signer::None => "none",
            Signer::Stripe(_) => "stripe:…",
            Signer::GitHub(_) => "github:…",
            Signer::Shopify(_) => "shopify:…",
            Signer::StandardWebhooks(_) => "standard-webhooks:…",
        })
    }
}

impl FromStr for Signer {
    type Err = VerifyError;

    /// Errors: [`VerifyError::BadSign`] for an unknown scheme, a missing or empty secret, or a
    /// Standard Webhooks secret that is not `whsec_<base64>`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "none" {
            return Ok(Signer::None);
        }
        let (scheme, secret) = s.split_once(':').unwrap_or((s, ""));
        let bad = |reason: &str| VerifyError::BadSign {
            given: format!("{scheme}:…"),
            reason: reason.into(),
        };
        if secret.is_empty() {
            return Err(bad(
                "expected none or SCHEME:SECRET with a non-empty secret",
            ));
        }
        let secret = secret.to_owned();
        match scheme {
            "stripe" => Ok(Signer::Stripe(secret)),
            "github" => Ok(Signer::GitHub(secret)),
            "shopify" => Ok(Signer::Shopify(secret)),
            "standard-webhooks" => {
                standard_webhooks::sign(&secret, "msg_check", 0, b"")
                    .map_err(|e| bad(&e.to_string()))?;
                Ok(Signer::StandardWebhooks(secret))
            }
            _ => Err(bad(
                "unknown scheme: expected stripe, github, shopify, standard-webhooks or none",
            )),
        }
    }
}

impl Signer {
    /// The headers for one copy of `event` sent at `now_secs` (Unix seconds).
    pub fn headers(&self, event: &EventRecord, now_secs: i64) -> Vec<(String, String)> {
        let body = &event.body;
        match self {
            Signer::None => Vec::new(),
            Signer::Stripe(secret) => vec![(
                stripe::SIGNATURE_HEADER.into(),
                stripe::sign(secret, now_secs, body),
            )],
            Signer::GitHub(secret) => vec![
                (github::SIGNATURE_HEADER.into(), github::sign(secret, body)),
                ("X-GitHub-Delivery".into(), event.id.clone()),
            ],
            Signer::Shopify(secret) => vec![
                (
                    shopify::SIGNATURE_HEADER.into(),
                    shopify::sign(secret, body),
                ),
                ("X-Shopify-Event-Id".into(), event.id.clone()),
            ],
            Signer::StandardWebhooks(secret) => {
                // The secret was checked when parsed; an error here leaves the header out.
                let signature =
                    standard_webhooks::sign(secret, &event.id, now_secs, body).unwrap_or_default();
                vec![
                    (standard_webhooks::ID_HEADER.into(), event.id.clone()),
                    (
                        standard_webhooks::TIMESTAMP_HEADER.into(),
                        now_secs.to_string(),
                    ),
                    (standard_webhooks::SIGNATURE_HEADER.into(), signature),
                ]
            }
        }
    }
}

/// The endpoint under test.
#[derive(Debug, Clone)]
pub struct Target {
    client: reqwest::Client,
    url: String,
    signer: Signer,
}

/// The answer to one delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Answer {
    /// The delivery.
    pub delivery: Delivery,
    /// The HTTP status code.
    pub status: u16,
    /// Whether an earlier (or simultaneous) copy of the same event was sent in this run.
    pub duplicate: bool,
}

impl Target {
    /// A target at `url` (`http://`, or `https://` with a certificate chaining to a Mozilla
    /// root of `webpki-roots`), signing with `signer`; each request times out after 30 s.
    ///
    /// # Errors
    /// [`VerifyError::BadTarget`] when `url` is not an `http://` or `https://` URL;
    /// [`VerifyError::Client`] when the HTTP client cannot be built.
    pub fn new(url: &str, signer: Signer) -> Result<Self, VerifyError> {
        let parsed = reqwest::Url::parse(url).ok();
        if !parsed.is_some_and(|u| matches!(u.scheme(), "http" | "https") && u.has_host()) {
            return Err(VerifyError::BadTarget {
                given: url.to_owned(),
            });
        }
        // Its own rustls configuration (ring, the Mozilla roots): reqwest then needs no
        // process-wide crypto provider.
        let client = reqwest::Client::builder()
            .tls_backend_preconfigured(idem_core::tls::default_client_config())
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(VerifyError::Client)?;
        Ok(Self {
            client,
            url: url.to_owned(),
            signer,
        })
    }

    /// The URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Sends one copy of `event`, signed now; returns the status code.
    ///
    /// # Errors
    /// [`VerifyError::Http`] when no answer came (refused, timed out).
    pub async fn send(&self, event: &EventRecord) -> Result<u16, VerifyError> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        let mut request = self
            .client
            .post(&self.url)
            .header("content-type", "application/json")
            .body(event.body.clone());
        for (name, value) in event.headers.iter().chain(&self.signer.headers(event, now)) {
            request = request.header(name.as_str(), value.as_str());
        }
        let response = request.send().await.map_err(|source| VerifyError::Http {
            target: self.url.clone(),
            source,
        })?;
        let status = response.status().as_u16();
        // Read the body so that the connection can be reused.
        let _ = response.bytes().await;
        Ok(status)
    }

    /// Waits until the target answers HTTP again (any status), polling every 50 ms for at most
    /// `timeout`.
    ///
    /// # Errors
    /// [`VerifyError::Http`] with the last connection error when it never answered.
    pub async fn wait_answering(&self, timeout: Duration) -> Result<(), VerifyError> {
        let until = tokio::time::Instant::now() + timeout;
        loop {
            match self.client.get(&self.url).send().await {
                Ok(response) => {
                    let _ = response.bytes().await;
                    return Ok(());
                }
                Err(source) if tokio::time::Instant::now() >= until => {
                    return Err(VerifyError::Http {
                        target: self.url.clone(),
                        source,
                    });
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    /// Delivers `plan` (sorted by step): steps one after another, the deliveries of one step
    /// started together behind a barrier. After a step with a [`Delivery::crash`], runs
    /// `hooks.restart` (the `--restart` command; crash points are plain deliveries without one)
    /// and waits until the target answers again. Before a step with a
    /// [`Delivery::successor`], runs `hooks.successor` (`--successor`) and waits the same way.
    /// Stops early, returning what was answered, once `deadline` has passed.
    ///
    /// # Errors
    /// [`VerifyError::Http`] when a delivery got no answer, or the target did not answer within
    /// 30 s of a restart or a move to the successor; [`VerifyError::Command`] when `restart`
    /// or `successor` failed; [`VerifyError::NoSuccessor`] for a successor step without a
    /// `successor` command.
    pub async fn deliver(
        &self,
        events: &[EventRecord],
        plan: &[Delivery],
        deadline: tokio::time::Instant,
        hooks: crate::state::Hooks<'_>,
    ) -> Result<Vec<Answer>, VerifyError> {
        let mut answers = Vec::with_capacity(plan.len());
        let mut sent = vec![0usize; events.len()];
        let mut rest = plan;
        while let Some(first) = rest.first() {
            if tokio::time::Instant::now() >= deadline {
                break;
            }
            let len = rest.iter().take_while(|d| d.step == first.step).count();
            let (step, tail) = rest.split_at(len);
            rest = tail;
            if step.iter().any(|d| d.successor) {
                let command = hooks.successor.ok_or(VerifyError::NoSuccessor)?;
                crate::state::shell("successor", command).await?;
                self.wait_answering(Duration::from_secs(30)).await?;
            }
            let mut duplicate = Vec::with_capacity(step.len());
            for d in step {
                duplicate.push(sent[d.event] > 0);
                sent[d.event] += 1;
            }
            // Copies of one event in one step: every copy but none is "first"; mark them all.
            for (i, d) in step.iter().enumerate() {
                if step.iter().filter(|o| o.event == d.event).count() > 1 {
                    duplicate[i] = true;
                }
            }
            let statuses = if step.len() == 1 {
                vec![self.send(&events[step[0].event]).await?]
            } else {
                let barrier = Arc::new(Barrier::new(step.len()));
                let sends = step.iter().map(|d| {
                    let barrier = Arc::clone(&barrier);
                    async move {
                        barrier.wait().await;
                        self.send(&events[d.event]).await
                    }
                });
                futures_util::future::join_all(sends)
                    .await
                    .into_iter()
                    .collect::<Result<Vec<_>, _>>()?
            };
            for ((d, status), duplicate) in step.iter().zip(statuses).zip(duplicate) {
                answers.push(Answer {
                    delivery: *d,
                    status,
                    duplicate,
                });
            }
            if let Some(command) = hooks.restart
                && step.iter().any(|d| d.crash)
            {
                crate::state::shell("restart", command).await?;
                self.wait_answering(Duration::from_secs(30)).await?;
            }
        }
        Ok(answers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_that_is_not_an_http_url_is_refused_naming_it() {
        for bad in ["notaurl", "ftp://host/x", "http://"] {
            let refused = Target::new(bad, Signer::None).err().unwrap().to_string();
            assert!(
                refused.starts_with(&format!("--target {bad:?} is not an http")),
                "{refused}"
            );
        }
        assert!(Target::new("http://127.0.0.1:3000/hooks", Signer::None).is_ok());
    }

    #[test]
    fn signer_parses_and_hides_secret() {
        let s: Signer = "stripe:whsec_abc".parse().unwrap();
        assert_eq!(s, Signer::Stripe("whsec_abc".into()));
        assert_eq!(format!("{s:?}"), "stripe:…");
        assert!(matches!(
            "stripe:".parse::<Signer>(),
            Err(VerifyError::BadSign { .. })
        ));
        assert!(matches!(
            "paypal:x".parse::<Signer>(),
            Err(VerifyError::BadSign { .. })
        ));
        assert_eq!("none".parse::<Signer>().unwrap(), Signer::None);
    }
}
