//! Shopify: `X-Shopify-Hmac-Sha256: <base64>`, an HMAC-SHA256 of the raw body keyed with the
//! app's client secret.
//!
//! Source: Shopify docs, "Verify webhooks". Shopify signs no timestamp, so replay safety rests
//! on the inbox, keyed by `X-Shopify-Event-Id` (docs/design.md C10). Shopify also sends its
//! headers without the `X-` prefix (`shopify-hmac-sha256`, the form `@shopify/shopify-api`
//! 13.1.0 reads besides `X-Shopify-*`): either form is read.

use http::HeaderMap;
use idem_core::Timestamp;

use super::header::HeaderSpec;
use super::hmac_key::{HmacKey, verify_any};
use super::secret::SecretShape;
use super::{ConfigError, Encoding, Verifier, VerifyError, signatures};

/// The header Shopify signs deliveries in.
pub const SIGNATURE_HEADER: &str = "X-Shopify-Hmac-Sha256";
/// The same header without the `X-` prefix, read when [`SIGNATURE_HEADER`] is absent.
pub const UNPREFIXED_SIGNATURE_HEADER: &str = "shopify-hmac-sha256";

const HEADER: HeaderSpec = HeaderSpec::new(SIGNATURE_HEADER, "<base64>");
const UNPREFIXED: HeaderSpec = HeaderSpec::new(UNPREFIXED_SIGNATURE_HEADER, "<base64>");
const SHAPE: SecretShape = SecretShape {
    scheme: "Shopify",
    expected: "the app's client secret, or the signing secret shown in the Shopify admin",
};

/// Verifies Shopify deliveries against one or more secrets.
#[derive(Debug, Clone)]
pub struct ShopifyVerifier {
    keys: Vec<HmacKey>,
}

impl ShopifyVerifier {
    /// A verifier for `secrets`, the app's client secrets (their UTF-8 bytes are the HMAC key).
    /// Give the old and the new one while rotating.
    ///
    /// Errors: [`ConfigError::NoSecrets`], [`ConfigError::EmptySecret`],
    /// [`ConfigError::SecretWhitespace`].
    pub fn new<I>(secrets: I) -> Result<Self, ConfigError>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        Ok(Self {
            keys: SHAPE.hmac_keys(secrets)?,
        })
    }
}

impl Verifier for ShopifyVerifier {
    /// `now` is not used: Shopify signs no timestamp. The signature is read from
    /// `X-Shopify-Hmac-Sha256`, or from `shopify-hmac-sha256` when that one is absent (a
    /// delivery carrying both is checked against the `X-` form).
    ///
    /// Errors: [`VerifyError::MissingHeader`] (naming `X-Shopify-Hmac-Sha256`) when neither is
    /// sent; [`VerifyError::RepeatedHeader`] for the header read; [`VerifyError::EmptySignature`]
    /// for an empty value; [`VerifyError::MalformedHeader`] when it is not visible ASCII or not
    /// base64; [`VerifyError::NoMatchingSignature`].
    fn verify(&self, headers: &HeaderMap, body: &[u8], _now: Timestamp) -> Result<(), VerifyError> {
        let header = if !headers.contains_key(SIGNATURE_HEADER)
            && headers.contains_key(UNPREFIXED_SIGNATURE_HEADER)
        {
            &UNPREFIXED
        } else {
            &HEADER
        };
        let value = header.single(headers)?;
        let signatures = signatures::decode_untagged(header, Encoding::Base64, &[value])?;
        verify_any(&self.keys, &[body], &signatures)
    }
}

/// The `X-Shopify-Hmac-Sha256` value Shopify would send for `body` with `secret`: the base64
/// of the HMAC-SHA256.
pub fn sign(secret: &str, body: &[u8]) -> String {
    Encoding::Base64.encode(&HmacKey::new(secret.as_bytes()).tag(&[body]))
}
