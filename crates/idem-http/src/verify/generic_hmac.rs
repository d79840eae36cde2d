//! Generic HMAC-SHA256 over the raw body, for senders not covered by a named scheme: a
//! configurable header, hex or base64, and an optional prefix such as `sha256=`.
//!
//! Such schemes sign no timestamp, so replay safety rests on the inbox (docs/design.md C10). Prefer a
//! named scheme when the sender has one: it also checks what the sender signs besides the body.

use std::borrow::Cow;

use http::{HeaderMap, HeaderName};
use idem_core::Timestamp;

use super::header::HeaderSpec;
use super::hmac_key::{HmacKey, verify_any};
use super::secret::SecretShape;
use super::{ConfigError, Encoding, Verifier, VerifyError, signatures};

const SHAPE: SecretShape = SecretShape {
    scheme: "generic HMAC",
    expected: "the shared secret, as the sender shows it",
};

/// Verifies deliveries that carry `<prefix><hex or base64 of HMAC-SHA256(secret, raw body)>`
/// in one header.
#[derive(Debug, Clone)]
pub struct GenericHmacVerifier {
    header: HeaderSpec,
    encoding: Encoding,
    prefix: String,
    keys: Vec<HmacKey>,
}

impl GenericHmacVerifier {
    /// A verifier reading `header` (any case) whose value is the signature in `encoding`, with
    /// no prefix, checked against each of `secrets` (their UTF-8 bytes are the HMAC key).
    ///
    /// Errors: [`ConfigError::InvalidHeaderName`] when `header` is not an HTTP header name;
    /// [`ConfigError::NoSecrets`], [`ConfigError::EmptySecret`],
    /// [`ConfigError::SecretWhitespace`].
    pub fn new<I>(header: &str, encoding: Encoding, secrets: I) -> Result<Self, ConfigError>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        if HeaderName::from_bytes(header.as_bytes()).is_err() {
            return Err(ConfigError::InvalidHeaderName {
                name: header.to_owned(),
            });
        }
        Ok(Self {
            header: HeaderSpec {
                name: Cow::Owned(header.to_owned()),
                expected: Cow::Borrowed(encoding.placeholder()),
            },
            encoding,
            prefix: String::new(),
            keys: SHAPE.hmac_keys(secrets)?,
        })
    }

    /// This verifier expecting the signature after `prefix` (such as `sha256=`), which must be
    /// present exactly, case included.
    pub fn with_prefix(mut self, prefix: &str) -> Self {
        self.prefix = prefix.to_owned();
        self.header.expected = Cow::Owned(format!("{prefix}{}", self.encoding.placeholder()));
        self
    }
}

impl Verifier for GenericHmacVerifier {
    /// `now` is not used: the scheme signs no timestamp.
    ///
    /// Errors: [`VerifyError::MissingHeader`] or [`VerifyError::RepeatedHeader`] for the
    /// configured header; [`VerifyError::MalformedHeader`] when it is not visible ASCII, lacks
    /// the prefix or does not decode; [`VerifyError::EmptySignature`] when nothing follows the
    /// prefix; [`VerifyError::NoMatchingSignature`].
    fn verify(&self, headers: &HeaderMap, body: &[u8], _now: Timestamp) -> Result<(), VerifyError> {
        let value = self.header.single(headers)?;
        let signature = value
            .strip_prefix(self.prefix.as_str())
            .ok_or_else(|| self.header.malformed("the signature prefix is missing"))?;
        let signatures = signatures::decode_untagged(&self.header, self.encoding, &[signature])?;
        verify_any(&self.keys, &[body], &signatures)
    }
}

/// The header value a sender using this scheme would send for `body` with `secret`:
/// `prefix` followed by the HMAC-SHA256 in `encoding`.
pub fn sign(secret: &str, encoding: Encoding, prefix: &str, body: &[u8]) -> String {
    let tag = HmacKey::new(secret.as_bytes()).tag(&[body]);
    format!("{prefix}{}", encoding.encode(&tag))
}
