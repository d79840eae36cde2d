//! Webhook signature verification: one [`Verifier`] per sender scheme, checked on the raw body
//! bytes before anything is stored (docs/design.md C10), and the matching signers.
//!
//! | module | verifier | signer |
//! |---|---|---|
//! | [`stripe`] | [`StripeVerifier`](stripe::StripeVerifier) | [`stripe::sign`] |
//! | [`github`] | [`GitHubVerifier`](github::GitHubVerifier) | [`github::sign`] |
//! | [`shopify`] | [`ShopifyVerifier`](shopify::ShopifyVerifier) | [`shopify::sign`] |
//! | [`standard_webhooks`] | [`StandardWebhooksVerifier`](standard_webhooks::StandardWebhooksVerifier) | [`standard_webhooks::sign`], [`standard_webhooks::sign_v1a`] |
//! | [`generic_hmac`] | [`GenericHmacVerifier`](generic_hmac::GenericHmacVerifier) | [`generic_hmac::sign`] |

mod encoding;
mod error;
mod freshness;
mod header;
mod hmac_key;
mod secret;
mod signatures;

pub mod generic_hmac;
pub mod github;
pub mod shopify;
pub mod standard_webhooks;
pub mod stripe;

use std::fmt;
use std::time::Duration;

use http::HeaderMap;
use idem_core::Timestamp;

pub use encoding::Encoding;
pub use error::{ConfigError, VerifyError};

/// How far a signed timestamp may be from now, past or future, before the delivery is refused:
/// 300 s, the tolerance Stripe's and Standard Webhooks' libraries use (docs/design.md C10).
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(300);

/// The most signatures one header may list. Senders list one per secret in rotation (two or
/// three); a longer list is refused with [`VerifyError::TooManySignatures`] so a forged header
/// cannot make the receiver run thousands of checks.
pub const MAX_SIGNATURES: usize = 16;

/// Checks that a delivery was signed by its sender.
///
/// `headers` are the request's headers, `body` the request body exactly as received (never a
/// parsed and re-serialised copy: any changed byte fails), and `now` the receiver's clock in
/// milliseconds since the Unix epoch, used only by schemes that sign a timestamp. Returns
/// `Ok(())` when a signature matches one of the configured secrets and, where the scheme signs a
/// timestamp, that timestamp is within the tolerance of `now`; otherwise the [`VerifyError`]
/// that names the problem. Implementations compare signatures in constant time and never panic.
///
/// Object safe: the gateway keeps one `Box<dyn Verifier>` per source.
pub trait Verifier: Send + Sync + fmt::Debug {
    /// Verifies one delivery; see the trait documentation.
    fn verify(&self, headers: &HeaderMap, body: &[u8], now: Timestamp) -> Result<(), VerifyError>;
}
