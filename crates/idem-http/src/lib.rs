//! idem over HTTP: checking that a webhook delivery really comes from its sender, before
//! anything is stored (docs/design.md C10).
//!
//! Each sender signs its deliveries its own way. This crate has one [`Verifier`] per scheme,
//! built once per source from its secrets, and called on every delivery with the request's
//! headers, the body **exactly as received**, and the current time. It also has the matching
//! signers, so tests, demos and `idem verify` can produce deliveries the way the senders do.
//!
//! [`Verifier`]: verify::Verifier
//!
//! # Verify a Stripe delivery
//!
//! ```
//! use idem_core::Timestamp;
//! use idem_http::http::{HeaderMap, HeaderValue};
//! use idem_http::verify::{Verifier, VerifyError, stripe};
//!
//! // Once, when the source is configured: a missing or malformed secret is an error here,
//! // so a misconfigured source refuses to start instead of accepting everything.
//! let verifier = stripe::StripeVerifier::new(["whsec_example"])?;
//!
//! // One delivery. Here we play Stripe and sign it, at 1 700 000 000 (Unix seconds).
//! let body = br#"{"id":"evt_1","type":"customer.created","amount":1.50}"#;
//! let mut headers = HeaderMap::new();
//! let signature = stripe::sign("whsec_example", 1_700_000_000, body);
//! headers.insert(stripe::SIGNATURE_HEADER, HeaderValue::from_str(&signature)?);
//!
//! // The receiver's clock, in milliseconds since the epoch: ten seconds after signing.
//! let now = Timestamp(1_700_000_010_000);
//! verifier.verify(&headers, body, now)?;
//!
//! // Verify the raw bytes: a parsed and re-serialised body (`1.5`, reordered keys) fails.
//! let reserialised = br#"{"amount":1.5,"id":"evt_1","type":"customer.created"}"#;
//! assert!(matches!(
//!     verifier.verify(&headers, reserialised, now),
//!     Err(VerifyError::NoMatchingSignature { .. })
//! ));
//!
//! // The same delivery replayed an hour later: authentic, but outside the 300 s tolerance.
//! let an_hour_later = Timestamp(1_700_003_610_000);
//! let error = verifier.verify(&headers, body, an_hour_later).unwrap_err();
//! assert_eq!(
//!     error.to_string(),
//!     "timestamp 1700000000 is 3610 s before now (1700003610), outside the 300 s tolerance"
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Every verifier implements the object-safe [`Verifier`] trait, so a gateway keeps one
//! `Box<dyn Verifier>` per source and answers 400 with the error's message when it fails.
//!
//! # Schemes
//!
//! | module | headers | signed content, algorithm and key | timestamp | source of the rule |
//! |---|---|---|---|---|
//! | [`stripe`](verify::stripe) | `Stripe-Signature: t=<unix s>,v1=<hex>[,v1=…]` | `"{t}.{body}"`, HMAC-SHA256, key = the whole `whsec_…` string | within 300 s | Stripe docs, "Verify webhook signatures" |
//! | [`github`](verify::github) | `X-Hub-Signature-256: sha256=<hex>` | body, HMAC-SHA256, key = the webhook secret | none | GitHub docs, "Validating webhook deliveries" |
//! | [`shopify`](verify::shopify) | `X-Shopify-Hmac-Sha256: <base64>` | body, HMAC-SHA256, key = the app's client secret | none | Shopify docs, "Verify webhooks" |
//! | [`standard_webhooks`](verify::standard_webhooks) `v1` | `webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64> …` | `"{id}.{timestamp}.{body}"`, HMAC-SHA256, key = base64-decoded part after `whsec_` | within 300 s | Standard Webhooks specification 1.0.0 |
//! | [`standard_webhooks`](verify::standard_webhooks) `v1a` | the same, `v1a,<base64>` | the same content, ed25519, verified with `whpk_` public keys (signed with `whsk_`) | within 300 s | Standard Webhooks specification 1.0.0 |
//! | [`generic_hmac`](verify::generic_hmac) | a configured header, `[prefix]<hex or base64>` | body, HMAC-SHA256, key = the shared secret | none | — |
//!
//! GitHub, Shopify and generic HMAC sign no timestamp: a captured delivery verifies forever,
//! so their replay safety rests on idem's inbox, which deduplicates by event id.
//!
//! # What every verifier does
//!
//! - Computes the signature over the raw body bytes, never over parsed JSON.
//! - Compares in constant time (`subtle`), and tries every configured secret, so a source can
//!   hold the old and the new secret while rotating; a header may list several signatures
//!   (at most [`MAX_SIGNATURES`](verify::MAX_SIGNATURES)), any one matching is enough, and an
//!   empty signature never matches.
//! - Where the scheme signs a timestamp, refuses one more than
//!   [`DEFAULT_TOLERANCE`](verify::DEFAULT_TOLERANCE) (300 s) before or after `now`; the
//!   timestamp is checked after the signature, so this error means "authentic but stale".
//! - Returns a [`VerifyError`](verify::VerifyError) naming the header, the problem and what was
//!   expected, for any input, without panicking; its [`reason`](verify::VerifyError::reason) is
//!   a stable label for metrics.
//!
//! Constructors return [`ConfigError`](verify::ConfigError) for a missing, empty,
//! whitespace-padded or malformed secret; neither error type ever contains a secret.

pub mod verify;

/// The `http` crate this crate is built with, for building the [`HeaderMap`](http::HeaderMap)
/// that verifiers read.
pub use http;
