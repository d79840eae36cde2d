//! Stripe: `Stripe-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>…]`, an HMAC-SHA256 of
//! `"{t}.{raw body}"` keyed with the endpoint's whole `whsec_…` signing secret.
//!
//! Source: Stripe docs, "Verify webhook signatures" (and Stripe's own libraries). Any `v1` may
//! match (Stripe lists one per secret while a rolled secret is still valid); `v0` and unknown
//! schemes are ignored; `t` must be within the tolerance of now, past or future (docs/design.md C10).

use std::time::Duration;

use http::HeaderMap;
use idem_core::Timestamp;

use super::header::HeaderSpec;
use super::hmac_key::{HmacKey, verify_any};
use super::secret::SecretShape;
use super::{ConfigError, DEFAULT_TOLERANCE, Encoding, Verifier, VerifyError};
use super::{freshness, signatures};

/// The header Stripe signs deliveries in.
pub const SIGNATURE_HEADER: &str = "Stripe-Signature";

const HEADER: HeaderSpec = HeaderSpec::new(SIGNATURE_HEADER, "t=<unix seconds>,v1=<hex>");
const SHAPE: SecretShape = SecretShape {
    scheme: "Stripe",
    expected: "the endpoint's signing secret `whsec_…` (from the Dashboard or `stripe listen`)",
};

/// Verifies Stripe deliveries against one or more endpoint signing secrets.
#[derive(Debug, Clone)]
pub struct StripeVerifier {
    keys: Vec<HmacKey>,
    tolerance_secs: u64,
}

impl StripeVerifier {
    /// A verifier for `secrets`, the endpoint's signing secrets (`whsec_…`, used whole as the
    /// HMAC key, as Stripe's libraries do). Give several while rolling a secret. The tolerance
    /// is [`DEFAULT_TOLERANCE`] (300 s).
    ///
    /// Errors: [`ConfigError::NoSecrets`] for none, [`ConfigError::EmptySecret`],
    /// [`ConfigError::SecretWhitespace`] for leading or trailing whitespace,
    /// [`ConfigError::WrongPrefix`] for a secret not starting with `whsec_` (an API key
    /// `sk_…` pasted by mistake).
    pub fn new<I>(secrets: I) -> Result<Self, ConfigError>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let keys = SHAPE.all(secrets, |secret| {
            if !secret.starts_with("whsec_") {
                return Err(ConfigError::WrongPrefix {
                    scheme: SHAPE.scheme,
                    expected: SHAPE.expected,
                });
            }
            Ok(HmacKey::new(secret.as_bytes()))
        })?;
        Ok(Self {
            keys,
            tolerance_secs: DEFAULT_TOLERANCE.as_secs(),
        })
    }

    /// This verifier with `tolerance` (whole seconds count) on either side of now instead of
    /// 300 s.
    pub fn with_tolerance(mut self, tolerance: Duration) -> Self {
        self.tolerance_secs = tolerance.as_secs();
        self
    }
}

impl Verifier for StripeVerifier {
    /// Errors: [`VerifyError::MissingHeader`] or [`VerifyError::RepeatedHeader`] for
    /// `Stripe-Signature`; [`VerifyError::MalformedHeader`] when it is not visible ASCII, has no
    /// `t=`, more than one `t=`, a `t` that is not decimal Unix seconds, or no `v1` that is hex;
    /// [`VerifyError::NoSignature`] without any `v1=`; [`VerifyError::EmptySignature`] when
    /// every `v1=` is empty; [`VerifyError::TooManySignatures`];
    /// [`VerifyError::NoMatchingSignature`]; and, once a signature matched,
    /// [`VerifyError::TimestampOutOfTolerance`].
    fn verify(&self, headers: &HeaderMap, body: &[u8], now: Timestamp) -> Result<(), VerifyError> {
        let value = HEADER.single(headers)?;
        let mut timestamp = None;
        let mut listed = Vec::new();
        // Stripe's libraries skip items without `=` and schemes they do not check; so does this.
        for (key, text) in value
            .split(',')
            .filter_map(|item| item.trim().split_once('='))
        {
            match key {
                "t" if timestamp.is_some() => {
                    return Err(HEADER.malformed("more than one `t=` timestamp"));
                }
                "t" => timestamp = Some(text),
                "v1" => listed.push(text),
                _ => {}
            }
        }
        let t = timestamp.ok_or_else(|| HEADER.malformed("no `t=` timestamp"))?;
        let secs = freshness::parse_unix_secs(t)
            .ok_or_else(|| HEADER.malformed("the `t=` timestamp is not decimal Unix seconds"))?;
        let signatures = signatures::decode_untagged(&HEADER, Encoding::Hex, &listed)?;
        verify_any(&self.keys, &[t.as_bytes(), b".", body], &signatures)?;
        freshness::check(secs, now, self.tolerance_secs)
    }
}

/// The `Stripe-Signature` value Stripe would send for `body` at `timestamp_secs` (Unix
/// seconds) with `secret` (the whole `whsec_…` string): `t=<timestamp_secs>,v1=<hex>`. A
/// negative timestamp gives a header no verifier accepts.
pub fn sign(secret: &str, timestamp_secs: i64, body: &[u8]) -> String {
    let t = timestamp_secs.to_string();
    let tag = HmacKey::new(secret.as_bytes()).tag(&[t.as_bytes(), b".", body]);
    format!("t={t},v1={}", Encoding::Hex.encode(&tag))
}
