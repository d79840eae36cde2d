//! Standard Webhooks: `webhook-id`, `webhook-timestamp` and `webhook-signature` headers; the
//! signed content is `"{id}.{timestamp}.{raw body}"`.
//!
//! Source: the Standard Webhooks specification 1.0.0, "Verifying webhook authenticity".
//! `webhook-signature` is a space-separated list of `v1,<base64>` (HMAC-SHA256 keyed with the
//! base64-decoded part of a `whsec_` secret) and `v1a,<base64>` (ed25519, checked with `whpk_`
//! public keys; the sender signs with the matching `whsk_` key). Senders list one signature per
//! secret during a rotation; any one matching is enough, an empty one never matches. The
//! timestamp must be within the tolerance of now, past or future (docs/design.md C10).

use std::time::Duration;

use base64::Engine as _;
use base64::alphabet;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
use http::HeaderMap;
use idem_core::Timestamp;

use super::header::HeaderSpec;
use super::hmac_key::{HmacKey, any_matches};
use super::secret::SecretShape;
use super::{ConfigError, DEFAULT_TOLERANCE, Encoding, Verifier, VerifyError};
use super::{freshness, signatures};

/// The header holding the message id, the same on every retry of one message: the event id.
pub const ID_HEADER: &str = "webhook-id";
/// The header holding the attempt's timestamp, in Unix seconds.
pub const TIMESTAMP_HEADER: &str = "webhook-timestamp";
/// The header holding the space-separated signatures.
pub const SIGNATURE_HEADER: &str = "webhook-signature";

const ID: HeaderSpec = HeaderSpec::new(ID_HEADER, "<message id>");
const TIMESTAMP: HeaderSpec = HeaderSpec::new(TIMESTAMP_HEADER, "<unix seconds>");

const SCHEME: &str = "Standard Webhooks";
const VERIFYING_SHAPE: SecretShape = SecretShape {
    scheme: SCHEME,
    expected: "`whsec_<base64 secret>` or `whpk_<base64 ed25519 public key>`",
};
const SECRET_SHAPE: SecretShape = SecretShape {
    scheme: SCHEME,
    expected: "`whsec_` followed by the base64 of the secret",
};
const PUBLIC_KEY_SHAPE: SecretShape = SecretShape {
    scheme: SCHEME,
    expected: "`whpk_` followed by the base64 of a 32-byte ed25519 public key",
};
const SIGNING_KEY_SHAPE: SecretShape = SecretShape {
    scheme: SCHEME,
    expected: "`whsk_` followed by the base64 of a 32-byte ed25519 signing key",
};

/// Verifies Standard Webhooks deliveries against `whsec_` secrets (`v1`) and `whpk_` public
/// keys (`v1a`).
#[derive(Debug, Clone)]
pub struct StandardWebhooksVerifier {
    secrets: Vec<HmacKey>,
    public_keys: Vec<VerifyingKey>,
    /// `webhook-signature`, expecting the versions this verifier has keys for.
    signature: HeaderSpec,
    tolerance_secs: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    V1,
    V1a,
}

enum Key {
    Secret(HmacKey),
    Public(VerifyingKey),
}

impl StandardWebhooksVerifier {
    /// A verifier for `keys`, each a `whsec_` secret (base64 after the prefix, with or without
    /// its `=` padding; checks `v1` signatures) or a `whpk_` public key (base64 of 32 bytes;
    /// checks `v1a` signatures), told
    /// apart by their prefix. Give several while rotating. The tolerance is
    /// [`DEFAULT_TOLERANCE`] (300 s).
    ///
    /// Errors: [`ConfigError::NoSecrets`], [`ConfigError::EmptySecret`],
    /// [`ConfigError::SecretWhitespace`]; [`ConfigError::WrongPrefix`] for a key with neither
    /// prefix; [`ConfigError::SigningKeyForVerification`] for a `whsk_` key;
    /// [`ConfigError::InvalidBase64`]; [`ConfigError::KeyLength`] for an empty `whsec_` secret or
    /// a `whpk_` key that is not 32 bytes; [`ConfigError::InvalidPublicKey`].
    pub fn new<I>(keys: I) -> Result<Self, ConfigError>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let mut secrets = Vec::new();
        let mut public_keys = Vec::new();
        for key in VERIFYING_SHAPE.all(keys, parse_verifying_key)? {
            match key {
                Key::Secret(secret) => secrets.push(secret),
                Key::Public(public_key) => public_keys.push(public_key),
            }
        }
        let expected = match (secrets.is_empty(), public_keys.is_empty()) {
            (false, true) => "v1,<base64>",
            (true, false) => "v1a,<base64>",
            _ => "v1,<base64> or v1a,<base64>",
        };
        Ok(Self {
            secrets,
            public_keys,
            signature: HeaderSpec::new(SIGNATURE_HEADER, expected),
            tolerance_secs: DEFAULT_TOLERANCE.as_secs(),
        })
    }

    /// This verifier with `tolerance` (whole seconds count) on either side of now instead of
    /// 300 s.
    pub fn with_tolerance(mut self, tolerance: Duration) -> Self {
        self.tolerance_secs = tolerance.as_secs();
        self
    }

    fn any_v1a_matches(&self, message: &[u8], signatures: &[&[u8]]) -> bool {
        signatures.iter().any(|bytes| {
            <[u8; 64]>::try_from(*bytes).is_ok_and(|bytes| {
                let signature = Signature::from_bytes(&bytes);
                // verify_strict also refuses malleable signatures and small-order points.
                self.public_keys
                    .iter()
                    .any(|key| key.verify_strict(message, &signature).is_ok())
            })
        })
    }
}

impl Verifier for StandardWebhooksVerifier {
    /// Errors: [`VerifyError::MissingHeader`] or [`VerifyError::RepeatedHeader`] for any of the
    /// three headers; [`VerifyError::MalformedHeader`] for a value that is not visible ASCII, an
    /// empty `webhook-id`, a `webhook-timestamp` that is not decimal Unix seconds, or signatures
    /// none of which is base64; [`VerifyError::NoSignature`] when no entry has a version this
    /// verifier has keys for; [`VerifyError::EmptySignature`] when every such entry is empty
    /// (`v1,`); [`VerifyError::TooManySignatures`]; [`VerifyError::NoMatchingSignature`]; and,
    /// once a signature matched, [`VerifyError::TimestampOutOfTolerance`].
    fn verify(&self, headers: &HeaderMap, body: &[u8], now: Timestamp) -> Result<(), VerifyError> {
        let id = ID.single(headers)?;
        if id.is_empty() {
            return Err(ID.malformed("the message id is empty"));
        }
        let timestamp = TIMESTAMP.single(headers)?;
        let secs = freshness::parse_unix_secs(timestamp)
            .ok_or_else(|| TIMESTAMP.malformed("the timestamp is not decimal Unix seconds"))?;
        let value = self.signature.single(headers)?;
        // Entries of versions this verifier has no keys for (or does not know) are skipped,
        // as the specification's reference libraries do.
        let listed: Vec<(Version, &str)> = value
            .split_ascii_whitespace()
            .filter_map(|entry| entry.split_once(','))
            .filter_map(|(version, signature)| match version {
                "v1" if !self.secrets.is_empty() => Some((Version::V1, signature)),
                "v1a" if !self.public_keys.is_empty() => Some((Version::V1a, signature)),
                _ => None,
            })
            .collect();
        let decoded = signatures::decode(&self.signature, Encoding::Base64, &listed)?;
        let parts: [&[u8]; 5] = [id.as_bytes(), b".", timestamp.as_bytes(), b".", body];
        let of = |wanted| -> Vec<&[u8]> {
            decoded
                .iter()
                .filter(|(version, _)| *version == wanted)
                .map(|(_, bytes)| bytes.as_slice())
                .collect()
        };
        let (v1, v1a) = (of(Version::V1), of(Version::V1a));
        let matched = any_matches(&self.secrets, &parts, &v1)
            || (!v1a.is_empty() && self.any_v1a_matches(&parts.concat(), &v1a));
        if !matched {
            return Err(VerifyError::NoMatchingSignature {
                signatures: decoded.len(),
                secrets: self.secrets.len() + self.public_keys.len(),
            });
        }
        freshness::check(secs, now, self.tolerance_secs)
    }
}

/// The `v1,<base64>` signature a sender would list in `webhook-signature` for message `msg_id`
/// sent at `timestamp_secs` (Unix seconds) with `body`, keyed with `secret` (`whsec_…`). Send
/// `timestamp_secs` in `webhook-timestamp`; a negative one gives headers no verifier accepts.
///
/// Errors: the [`ConfigError`]s of a `whsec_` secret in [`StandardWebhooksVerifier::new`].
pub fn sign(
    secret: &str,
    msg_id: &str,
    timestamp_secs: i64,
    body: &[u8],
) -> Result<String, ConfigError> {
    let key = SECRET_SHAPE
        .check(secret)?
        .strip_prefix("whsec_")
        .ok_or(wrong_prefix(SECRET_SHAPE))
        .and_then(parse_secret)?;
    let timestamp = timestamp_secs.to_string();
    let tag = key.tag(&[msg_id.as_bytes(), b".", timestamp.as_bytes(), b".", body]);
    Ok(format!("v1,{}", Encoding::Base64.encode(&tag)))
}

/// The `v1a,<base64>` ed25519 signature a sender would list in `webhook-signature` for message
/// `msg_id` sent at `timestamp_secs` (Unix seconds) with `body`, signed with `signing_key`
/// (`whsk_` followed by the base64 of the 32-byte ed25519 seed). List several signatures
/// separated by spaces to sign with several keys.
///
/// Errors: [`ConfigError::EmptySecret`], [`ConfigError::SecretWhitespace`],
/// [`ConfigError::WrongPrefix`] without `whsk_`, [`ConfigError::InvalidBase64`],
/// [`ConfigError::KeyLength`] when the key is not 32 bytes.
pub fn sign_v1a(
    signing_key: &str,
    msg_id: &str,
    timestamp_secs: i64,
    body: &[u8],
) -> Result<String, ConfigError> {
    let key = parse_signing_key(signing_key)?;
    let message = format!("{msg_id}.{timestamp_secs}.");
    let signature = key.sign(&[message.as_bytes(), body].concat());
    Ok(format!(
        "v1a,{}",
        Encoding::Base64.encode(&signature.to_bytes())
    ))
}

/// The `whpk_` public key that verifies signatures made with `signing_key` (`whsk_…`): what
/// the sender publishes and the receiver configures.
///
/// Errors: those of [`sign_v1a`].
pub fn public_key(signing_key: &str) -> Result<String, ConfigError> {
    let key = parse_signing_key(signing_key)?;
    Ok(format!(
        "whpk_{}",
        STANDARD.encode(key.verifying_key().to_bytes())
    ))
}

fn wrong_prefix(shape: SecretShape) -> ConfigError {
    ConfigError::WrongPrefix {
        scheme: shape.scheme,
        expected: shape.expected,
    }
}

/// Standard base64 with or without its `=` padding: the reference libraries (`standardwebhooks`
/// 1.1.0, `svix` 2.9.1) accept `whsec_` followed by 43 characters for a 32-byte secret, so keys
/// are read either way. Non-canonical trailing bits are still refused.
const KEY_BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// The bytes of the base64 `text` (padded or not), which must not be empty.
fn decode_key(text: &str, shape: SecretShape) -> Result<Vec<u8>, ConfigError> {
    let bytes = KEY_BASE64
        .decode(text)
        .map_err(|_| ConfigError::InvalidBase64 {
            scheme: shape.scheme,
            expected: shape.expected,
        })?;
    if bytes.is_empty() {
        return Err(ConfigError::KeyLength {
            scheme: shape.scheme,
            len: 0,
            expected: shape.expected,
        });
    }
    Ok(bytes)
}

/// The 32 bytes of an ed25519 key in base64 `text`.
fn decode_key32(text: &str, shape: SecretShape) -> Result<[u8; 32], ConfigError> {
    let bytes = decode_key(text, shape)?;
    <[u8; 32]>::try_from(bytes.as_slice()).map_err(|_| ConfigError::KeyLength {
        scheme: shape.scheme,
        len: bytes.len(),
        expected: shape.expected,
    })
}

/// The HMAC key of a `whsec_` secret: the bytes its base64 (after the prefix) encodes.
fn parse_secret(base64: &str) -> Result<HmacKey, ConfigError> {
    Ok(HmacKey::new(&decode_key(base64, SECRET_SHAPE)?))
}

fn parse_verifying_key(text: &str) -> Result<Key, ConfigError> {
    if let Some(secret) = text.strip_prefix("whsec_") {
        return Ok(Key::Secret(parse_secret(secret)?));
    }
    if let Some(public) = text.strip_prefix("whpk_") {
        let key = VerifyingKey::from_bytes(&decode_key32(public, PUBLIC_KEY_SHAPE)?)
            .map_err(|_| ConfigError::InvalidPublicKey)?;
        // A small-order key would accept forged signatures; refuse it at start.
        if key.is_weak() {
            return Err(ConfigError::InvalidPublicKey);
        }
        return Ok(Key::Public(key));
    }
    if text.starts_with("whsk_") {
        return Err(ConfigError::SigningKeyForVerification);
    }
    Err(wrong_prefix(VERIFYING_SHAPE))
}

fn parse_signing_key(text: &str) -> Result<SigningKey, ConfigError> {
    let seed = SIGNING_KEY_SHAPE
        .check(text)?
        .strip_prefix("whsk_")
        .ok_or(wrong_prefix(SIGNING_KEY_SHAPE))?;
    Ok(SigningKey::from_bytes(&decode_key32(
        seed,
        SIGNING_KEY_SHAPE,
    )?))
}
