//! The two errors of verification: a delivery that fails its check ([`VerifyError`]) and a
//! source configured with a key that cannot work ([`ConfigError`]).

use std::borrow::Cow;

/// Why a delivery failed its signature check. Every variant means the same to the sender: answer
/// 400 with this message as the reason and store nothing (docs/design.md C10).
///
/// Returned by [`Verifier::verify`](super::Verifier::verify). Messages name the header, the
/// problem and what was expected; they never contain a secret or a computed signature.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// A header the scheme requires is absent.
    #[error("missing header `{header}`")]
    MissingHeader {
        /// The header, as the sender's documentation spells it.
        header: Cow<'static, str>,
    },
    /// A header the scheme reads once was sent several times; which one the sender meant cannot
    /// be known, so none is trusted.
    #[error("header `{header}` appears {count} times; expected it once")]
    RepeatedHeader {
        /// The header.
        header: Cow<'static, str>,
        /// How many times it appears.
        count: usize,
    },
    /// A header is present but does not have the scheme's shape: not visible ASCII, no timestamp,
    /// a timestamp that is not a decimal number, a signature that is not valid hex or base64, a
    /// missing prefix.
    #[error("header `{header}` is malformed: {problem}; expected `{expected}`")]
    MalformedHeader {
        /// The header.
        header: Cow<'static, str>,
        /// What is wrong with it.
        problem: &'static str,
        /// The shape the scheme expects, such as `t=<unix seconds>,v1=<hex>`.
        expected: Cow<'static, str>,
    },
    /// The signature header lists more signatures than are checked, see
    /// [`MAX_SIGNATURES`](super::MAX_SIGNATURES). Senders list one per secret in rotation, so a
    /// long list is refused rather than spending a check on each entry.
    #[error("header `{header}` holds {count} signatures; at most {max} are checked")]
    TooManySignatures {
        /// The header.
        header: Cow<'static, str>,
        /// How many signatures it holds.
        count: usize,
        /// The most that are checked.
        max: usize,
    },
    /// The signature header holds no signature of a version this source checks (for example a
    /// Stripe header with only `v0=`, or a Standard Webhooks header with only `v1a` entries
    /// when only `whsec_` secrets are configured).
    #[error("header `{header}` holds no signature this source can check; expected `{expected}`")]
    NoSignature {
        /// The header.
        header: Cow<'static, str>,
        /// The signature shape that would be checked.
        expected: Cow<'static, str>,
    },
    /// The only signatures in the header are empty (`v1,` or `sha256=`). An empty signature is
    /// never valid.
    #[error("header `{header}` holds an empty signature; an empty signature is never valid")]
    EmptySignature {
        /// The header.
        header: Cow<'static, str>,
    },
    /// Every signature was well formed and none matched any configured secret or public key: the
    /// body was changed (often parsed and re-serialised before verification), or the secret is
    /// not the one the sender signs with.
    #[error(
        "no signature matched any of the {secrets} configured secrets ({signatures} signatures checked); \
         verify the raw body bytes as received, with the secret the sender signs with"
    )]
    NoMatchingSignature {
        /// How many well-formed signatures the header held.
        signatures: usize,
        /// How many secrets or public keys were tried.
        secrets: usize,
    },
    /// The signature matched but its signed timestamp is too far from now, in the past (a
    /// replayed delivery) or in the future (a wrong clock).
    #[error(
        "timestamp {timestamp} is {} s {} now ({now}), outside the {tolerance_secs} s tolerance",
        timestamp.abs_diff(*now),
        if timestamp < now { "before" } else { "after" }
    )]
    TimestampOutOfTolerance {
        /// The signed timestamp, in Unix seconds.
        timestamp: i64,
        /// The verifier's current time, in Unix seconds.
        now: i64,
        /// The tolerance, in seconds, on either side of now.
        tolerance_secs: u64,
    },
}

impl VerifyError {
    /// A short, stable `snake_case` label for this error, for metric labels and log fields:
    /// `missing_header`, `repeated_header`, `malformed_header`, `too_many_signatures`,
    /// `no_signature`, `empty_signature`, `no_matching_signature` or
    /// `timestamp_out_of_tolerance`.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::MissingHeader { .. } => "missing_header",
            Self::RepeatedHeader { .. } => "repeated_header",
            Self::MalformedHeader { .. } => "malformed_header",
            Self::TooManySignatures { .. } => "too_many_signatures",
            Self::NoSignature { .. } => "no_signature",
            Self::EmptySignature { .. } => "empty_signature",
            Self::NoMatchingSignature { .. } => "no_matching_signature",
            Self::TimestampOutOfTolerance { .. } => "timestamp_out_of_tolerance",
        }
    }
}

/// A verifier or signer was given a key that cannot work. Verifier constructors return it, so a
/// source with a missing or malformed secret refuses to start instead of accepting or refusing
/// every delivery (fail closed).
///
/// `scheme` names the sender's scheme ("Stripe", "GitHub", "Shopify", "Standard Webhooks",
/// "generic HMAC"); `expected` says what a good key looks like. Messages never contain the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// No secret or public key was given.
    #[error("no {scheme} secret configured; expected {expected}")]
    NoSecrets {
        /// The scheme.
        scheme: &'static str,
        /// What a key looks like.
        expected: &'static str,
    },
    /// A secret was the empty string.
    #[error("a {scheme} secret is empty; expected {expected}")]
    EmptySecret {
        /// The scheme.
        scheme: &'static str,
        /// What a key looks like.
        expected: &'static str,
    },
    /// A secret starts or ends with whitespace, usually a newline from a secrets file. Senders
    /// never put whitespace there, so every signature would fail.
    #[error(
        "a {scheme} secret starts or ends with whitespace; expected {expected}, exactly as the sender shows it"
    )]
    SecretWhitespace {
        /// The scheme.
        scheme: &'static str,
        /// What a key looks like.
        expected: &'static str,
    },
    /// A secret lacks the prefix its scheme gives every key (`whsec_`, `whpk_`, `whsk_`).
    #[error("a {scheme} secret has the wrong prefix; expected {expected}")]
    WrongPrefix {
        /// The scheme.
        scheme: &'static str,
        /// What a key looks like.
        expected: &'static str,
    },
    /// The part after the prefix is not standard base64 with padding.
    #[error("a {scheme} key is not valid base64 after its prefix; expected {expected}")]
    InvalidBase64 {
        /// The scheme.
        scheme: &'static str,
        /// What a key looks like.
        expected: &'static str,
    },
    /// A key decodes to the wrong number of bytes (ed25519 keys are 32 bytes; a `whsec_` secret
    /// must not be empty).
    #[error("a {scheme} key decodes to {len} bytes; expected {expected}")]
    KeyLength {
        /// The scheme.
        scheme: &'static str,
        /// The decoded length in bytes.
        len: usize,
        /// What a key looks like.
        expected: &'static str,
    },
    /// A `whpk_` key is 32 bytes but not a usable ed25519 public key (not a curve point, or a
    /// weak key of small order that any signature could match).
    #[error(
        "a Standard Webhooks `whpk_` key is not a valid ed25519 public key; expected the sender's published `whpk_` key"
    )]
    InvalidPublicKey,
    /// A `whsk_` signing key was configured for verification. It is the sender's private key;
    /// the receiver configures the matching `whpk_` public key.
    #[error(
        "a Standard Webhooks `whsk_` signing key was configured for verification; configure its `whpk_` public key instead"
    )]
    SigningKeyForVerification,
    /// A generic HMAC verifier was given a header name HTTP does not allow.
    #[error(
        "header name {name:?} is not a valid HTTP header name; expected a token such as `X-Signature`"
    )]
    InvalidHeaderName {
        /// The rejected name.
        name: String,
    },
}
