//! The request fingerprint: what makes a retry "the same request" (draft §2.4).

use std::fmt;

use http::Method;
use http::uri::Uri;
use sha2::{Digest, Sha256};

/// How the request body enters the fingerprint.
///
/// The default is [`BodyMode::CanonicalJson`]: like Stripe, which compares a retry's parameters
/// with the first request's rather than its bytes, a retry whose JSON body was re-serialised
/// (keys in another order, other spacing, `1.0` for `1`) is the same request.
///
/// **The default refuses every keyed body that is not JSON** (400 `body-not-json`), whatever
/// its `Content-Type`: form-encoded (`application/x-www-form-urlencoded`), multipart, XML or
/// binary bodies included. The mode is not chosen by `Content-Type`; for an API that takes
/// such bodies, set [`BodyMode::Raw`] with
/// [`IdempotencyLayer::body_mode`](crate::IdempotencyLayer::body_mode) (on a separate layer
/// for those routes if the others take JSON).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum BodyMode {
    /// The body's bytes, exactly as received.
    Raw,
    /// The body parsed as JSON and re-serialised per RFC 8785 (JSON Canonicalization Scheme:
    /// sorted keys, no whitespace, ECMAScript number form). An empty body is fingerprinted as
    /// empty; any other body that is not JSON is refused with a 400 (`body-not-json`).
    ///
    /// Numbers compare as RFC 8785 values, that is as IEEE 754 doubles: `1000`, `1000.0` and
    /// `1e3` are the same number, so a retry that writes one for the other is the same
    /// request. RFC 8785 assumes I-JSON input (RFC 7493), so a body that is not I-JSON is
    /// refused with a 400 (`body-not-i-json`) rather than given a fingerprint it would share
    /// with another request: an integer outside ±(2^53−1) (`9007199254740993` and
    /// `9007199254740992` are one double), or a member name repeated in one object
    /// (`{"amount": 1, "amount": 1000}` would canonicalise as `{"amount":1000}`).
    #[default]
    CanonicalJson,
}

/// A SHA-256 over the request's method, its path and query as sent, and its body (raw or
/// canonical JSON, as [`BodyMode`] says). A key reused with another method, route, query or body
/// has another fingerprint: a 422 (draft §2.7), as Stripe does.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint([u8; 32]);

/// The body could not be read as JSON in [`BodyMode::CanonicalJson`], or it is JSON that RFC
/// 8785 cannot compare exactly (not I-JSON, RFC 7493: a duplicate member name, or an integer
/// outside ±(2^53−1)).
#[derive(Debug, thiserror::Error)]
#[error("{}", self.message())]
pub struct NotJson {
    #[source]
    error: serde_json::Error,
    not_i_json: bool,
}

impl NotJson {
    fn syntax(error: serde_json::Error) -> Self {
        Self {
            not_i_json: error.to_string().starts_with(NOT_I_JSON),
            error,
        }
    }

    /// Whether the body is JSON, but not I-JSON (RFC 7493): a member name repeated in one
    /// object, or a number outside ±(2^53−1). Such bodies are refused, as two different ones
    /// would canonicalise alike (RFC 8785 keeps one of the duplicates and reads numbers as
    /// IEEE 754 doubles).
    pub fn is_not_i_json(&self) -> bool {
        self.not_i_json
    }

    fn message(&self) -> String {
        if self.not_i_json {
            format!(
                "the request body is JSON that the idempotency fingerprint cannot compare exactly: {} \
                 (canonical JSON, RFC 8785, needs I-JSON, RFC 7493: no repeated member names, \
                 integers within ±9007199254740991)",
                self.error
            )
        } else {
            format!(
                "the request body is not valid JSON ({}); the idempotency fingerprint needs a JSON body",
                self.error
            )
        }
    }
}

/// The start of the messages of I-JSON refusals, as raised inside serde_json's parser.
const NOT_I_JSON: &str = "not I-JSON: ";

/// The largest integer an IEEE 754 double holds exactly, with all below it: 2^53 − 1.
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// A JSON value read under I-JSON's rules (RFC 7493 §2.2, §2.3): a repeated member name or a
/// number beyond ±(2^53−1) is an error, raised while serde_json parses (so its depth limit
/// holds, and the error carries a line and column).
struct IJson(serde_json::Value);

impl<'de> serde::Deserialize<'de> for IJson {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(IJsonVisitor).map(IJson)
    }
}

struct IJsonVisitor;

fn out_of_range<E: serde::de::Error>(n: impl fmt::Display) -> E {
    E::custom(format_args!(
        "{NOT_I_JSON}the number {n} is outside ±9007199254740991, where JSON numbers stop being exact"
    ))
}

impl<'de> serde::de::Visitor<'de> for IJsonVisitor {
    type Value = serde_json::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
        if v.unsigned_abs() > MAX_SAFE_INTEGER {
            return Err(out_of_range(v));
        }
        Ok(v.into())
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
        if v > MAX_SAFE_INTEGER {
            return Err(out_of_range(v));
        }
        Ok(v.into())
    }

    #[allow(clippy::cast_precision_loss)] // 2^53 − 1 is exact as a double
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
        // serde_json reads integers beyond u64/i64 as doubles; any double this large is an
        // integer that may stand for several written ones.
        if v.abs() > MAX_SAFE_INTEGER as f64 {
            return Err(out_of_range(v));
        }
        serde_json::Number::from_f64(v)
            .map(serde_json::Value::Number)
            .ok_or_else(|| E::custom("a number that is not finite"))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(IJson(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(items.into())
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut members = serde_json::Map::new();
        while let Some(name) = map.next_key::<String>()? {
            if members.contains_key(&name) {
                return Err(serde::de::Error::custom(format_args!(
                    "{NOT_I_JSON}the member name {name:?} appears twice in one object"
                )));
            }
            let IJson(value) = map.next_value()?;
            members.insert(name, value);
        }
        Ok(members.into())
    }
}

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
    /// (including JSON nested deeper than serde_json's limit of 128 levels), or not I-JSON
    /// ([`NotJson::is_not_i_json`]).
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
                let IJson(value) = serde_json::from_slice(body).map_err(NotJson::syntax)?;
                let canonical =
                    serde_json_canonicalizer::to_vec(&value).map_err(NotJson::syntax)?;
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

    fn canonical(body: &str) -> Result<Fingerprint, NotJson> {
        Fingerprint::of(
            &Method::POST,
            &"/t".parse().unwrap(),
            body.as_bytes(),
            BodyMode::CanonicalJson,
        )
    }

    #[test]
    fn integers_beyond_2_pow_53_are_refused_not_confused() {
        for body in [
            r#"{"amount": 9007199254740993}"#,
            r#"{"amount": 9007199254740992}"#,
            r#"{"amount": -9007199254740992}"#,
            r#"{"amount": 18446744073709551617}"#,
            r#"[1e300]"#,
        ] {
            let e = canonical(body).unwrap_err();
            assert!(e.is_not_i_json(), "{body}: {e}");
            assert!(e.to_string().contains("±9007199254740991"), "{e}");
        }
        for body in [
            r#"{"amount": 9007199254740991}"#,
            r#"{"amount": -9007199254740991}"#,
            r#"{"amount": 0.5}"#,
        ] {
            assert!(canonical(body).is_ok(), "{body}");
        }
        // Numbers compare as RFC 8785 values (IEEE 754 doubles).
        assert_eq!(
            canonical(r#"{"amount": 1000}"#).unwrap(),
            canonical(r#"{"amount": 1000.0}"#).unwrap()
        );
    }

    #[test]
    fn duplicate_member_names_are_refused() {
        for body in [
            r#"{"amount": 1, "amount": 1000}"#,
            r#"{"a": {"b": 1, "b": 1}}"#,
            r#"[{"x": 1, "x": 2}]"#,
        ] {
            let e = canonical(body).unwrap_err();
            assert!(e.is_not_i_json(), "{body}: {e}");
            assert!(e.to_string().contains("appears twice"), "{e}");
        }
        assert!(canonical(r#"{"amount": 1000}"#).is_ok());
        assert!(canonical(r#"{"a": {"amount": 1}, "b": {"amount": 1}}"#).is_ok());
        assert!(!canonical("{").unwrap_err().is_not_i_json());
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
