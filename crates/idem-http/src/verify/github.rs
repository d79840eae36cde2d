//! GitHub: `X-Hub-Signature-256: sha256=<hex>`, an HMAC-SHA256 of the raw body keyed with the
//! webhook's secret.
//!
//! Source: GitHub docs, "Validating webhook deliveries". GitHub signs no timestamp, so a
//! captured delivery verifies forever; its replay safety rests on the inbox, keyed by the
//! `X-GitHub-Delivery` id (docs/design.md C10). The SHA-1 `X-Hub-Signature` header is not checked.

use http::HeaderMap;
use idem_core::Timestamp;

use super::header::HeaderSpec;
use super::hmac_key::{HmacKey, verify_any};
use super::secret::SecretShape;
use super::{ConfigError, Encoding, Verifier, VerifyError, signatures};

/// The header GitHub signs deliveries in.
pub const SIGNATURE_HEADER: &str = "X-Hub-Signature-256";

const HEADER: HeaderSpec = HeaderSpec::new(SIGNATURE_HEADER, "sha256=<hex>");
const PREFIX: &str = "sha256=";
const SHAPE: SecretShape = SecretShape {
    scheme: "GitHub",
    expected: "the secret entered in the webhook's settings",
};

/// Verifies GitHub deliveries against one or more webhook secrets.
#[derive(Debug, Clone)]
pub struct GitHubVerifier {
    keys: Vec<HmacKey>,
}

impl GitHubVerifier {
    /// A verifier for `secrets`, the webhook's secrets (their UTF-8 bytes are the HMAC key).
    /// Give several while changing the secret.
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

impl Verifier for GitHubVerifier {
    /// `now` is not used: GitHub signs no timestamp.
    ///
    /// Errors: [`VerifyError::MissingHeader`] or [`VerifyError::RepeatedHeader`] for
    /// `X-Hub-Signature-256`; [`VerifyError::MalformedHeader`] when it is not visible ASCII, lacks
    /// the `sha256=` prefix or is not hex; [`VerifyError::EmptySignature`] for `sha256=` alone;
    /// [`VerifyError::NoMatchingSignature`].
    fn verify(&self, headers: &HeaderMap, body: &[u8], _now: Timestamp) -> Result<(), VerifyError> {
        let value = HEADER.single(headers)?;
        let hex = value
            .strip_prefix(PREFIX)
            .ok_or_else(|| HEADER.malformed("no `sha256=` prefix"))?;
        let signatures = signatures::decode_untagged(&HEADER, Encoding::Hex, &[hex])?;
        verify_any(&self.keys, &[body], &signatures)
    }
}

/// The `X-Hub-Signature-256` value GitHub would send for `body` with `secret`:
/// `sha256=<hex>`.
pub fn sign(secret: &str, body: &[u8]) -> String {
    let tag = HmacKey::new(secret.as_bytes()).tag(&[body]);
    format!("{PREFIX}{}", Encoding::Hex.encode(&tag))
}
