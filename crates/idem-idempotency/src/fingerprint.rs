//! The request fingerprint: what makes a retry "the same request" (draft §2.4).

use std::fmt;

use http::Method;
use http::uri::Uri;
use sha2::{Digest, Sha256};

/// How the request body enters the fingerprint.
///
/// The default is [`BodyMode::CanonicalJson`]: like Stripe, which compares a retry's parameters
/// with the first request's rather than its bytes, a retry whose JSON body was re-serialised
/// (keys in another order, other spacing, `1.0` for `1`) is the same request. Use
/// [`BodyMode::Raw`] for bodies that are not JSON.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum BodyMode {
    /// The body's bytes, exactly as received.
    Raw,
    /// The body parsed as JSON and re-serialised per RFC 8785 (JSON Canonicalization Scheme:
    /// sorted keys, no whitespace, ECMAScript number form). An empty body is fingerprinted as
    /// empty; any other body that is not JSON is refused with a 400 (`body-not-json`).
    #[default]
    CanonicalJson,
}

/// A SHA-256 over the request's method, its path and query as sent, and its body (raw or
/// canonical JSON, as [`BodyMode`] says). A key reused with another method, route, query or body
/// has another fingerprint: a 422 (draft §2.7), as Stripe does.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint([u8; 32]);

/// The body could not be read as JSON in [`BodyMode::CanonicalJson`].
#[derive(Debug, thiserror::Error)]
#[error("the request body is not valid JSON ({0}); the idempotency fingerprint needs a JSON body")]
pub struct NotJson(#[source] serde_json::Error);

/// Names the fingerprint's layout: changing it must change this tag, so that old records
/// answer 422 rather than match by accident.
const DOMAIN: &[u8] = b"idem-idempotency-fingerprint-v1";

impl Fingerprint {
    /// Fingerprints a request: `method`, `uri`'s path and query (scheme and authority are left
    /// out, as a proxy may rewrite them), and `body` per `mode`. Each part is length-prefixed,
    /// so no two different requests hash the same input.
    ///
    /// # Errors
    /// [`NotJson`] in [`BodyMode::CanonicalJson`] when `body` is not empty and not JSON
    /// (including JSON nested deeper than serde_json's limit of 128 levels).
    pub fn of(method: &Method, uri: &Uri, body: &[u8], mode: BodyMode) -> Result<Self, NotJson> {
        let path_and_query = uri.path_and_query().map_or("/", |pq| pq.as_str());
        let mut hash = Sha256::new();
        hash.update(DOMAIN);
        part(&mut hash, method.as_str().as_bytes());
        part(&mut hash, path_and_query.as_bytes());
        match mode {
            BodyMode::Raw => {
                hash.update(b"r");
                part(&mut hash, body);
            }
            BodyMode::CanonicalJson if body.is_empty() => {
                hash.update(b"j");
                part(&mut hash, body);
            }
            BodyMode::CanonicalJson => {
                let value: serde_json::Value = serde_json::from_slice(body).map_err(NotJson)?;
                let canonical = serde_json_canonicalizer::to_vec(&value).map_err(NotJson)?;
                hash.update(b"j");
                part(&mut hash, &canonical);
            }
        }
        Ok(Self(hash.finalize().into()))
    }

    /// The 32 bytes of the hash.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

fn part(hash: &mut Sha256, bytes: &[u8]) {
    hash.update((bytes.len() as u64).to_be_bytes());
    hash.update(bytes);
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Fingerprint(")?;
        for b in &self.0[..8] {
            write!(f, "{b:02x}")?;
        }
        f.write_str("…)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(method: Method, uri: &str, body: &str, mode: BodyMode) -> Fingerprint {
        Fingerprint::of(&method, &uri.parse().unwrap(), body.as_bytes(), mode).unwrap()
    }

    #[test]
    fn method_route_query_and_body_each_count() {
        let base = fp(Method::POST, "/payments?a=1", "{}", BodyMode::Raw);
        assert_ne!(base, fp(Method::PUT, "/payments?a=1", "{}", BodyMode::Raw));
        assert_ne!(base, fp(Method::POST, "/refunds?a=1", "{}", BodyMode::Raw));
        assert_ne!(base, fp(Method::POST, "/payments?a=2", "{}", BodyMode::Raw));
        assert_ne!(
            base,
            fp(Method::POST, "/payments?a=1", "{ }", BodyMode::Raw)
        );
        assert_eq!(
            base,
            fp(Method::POST, "http://h/payments?a=1", "{}", BodyMode::Raw)
        );
    }

    #[test]
    fn canonical_json_ignores_order_and_spacing_only() {
        let a = fp(
            Method::POST,
            "/t",
            r#"{"amount":100,"to":"acct1"}"#,
            BodyMode::CanonicalJson,
        );
        let b = fp(
            Method::POST,
            "/t",
            "{ \"to\" : \"acct1\",\n \"amount\" : 100 }",
            BodyMode::CanonicalJson,
        );
        let c = fp(
            Method::POST,
            "/t",
            r#"{"amount":1000,"to":"acct1"}"#,
            BodyMode::CanonicalJson,
        );
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(
            a,
            fp(
                Method::POST,
                "/t",
                r#"{"amount":100,"to":"acct1"}"#,
                BodyMode::Raw
            )
        );
    }

    #[test]
    fn bad_json_is_an_error_not_a_panic() {
        for body in ["{", "not json", "\u{0}", &"[".repeat(10_000)] {
            assert!(
                Fingerprint::of(
                    &Method::POST,
                    &"/".parse().unwrap(),
                    body.as_bytes(),
                    BodyMode::CanonicalJson
                )
                .is_err()
            );
        }
        assert!(
            Fingerprint::of(
                &Method::POST,
                &"/".parse().unwrap(),
                b"",
                BodyMode::CanonicalJson
            )
            .is_ok()
        );
    }
}
