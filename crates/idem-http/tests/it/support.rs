//! Shared fixtures: a fixed clock, header maps, the bodies the scenarios use, and one signed
//! delivery per scheme.

use http::{HeaderMap, HeaderName, HeaderValue};
use idem_core::Timestamp;
use idem_http::verify::{
    Encoding, Verifier, generic_hmac, github, shopify, standard_webhooks, stripe,
};

/// The receiver's clock in the scenarios, in Unix seconds.
pub(crate) const NOW_SECS: i64 = 1_700_000_000;

/// [`NOW_SECS`] as the verifiers take it: milliseconds since the epoch.
pub(crate) fn now() -> Timestamp {
    Timestamp(NOW_SECS * 1000)
}

/// A header map holding each `(name, value)` pair, repeated names appended.
pub(crate) fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(
            HeaderName::from_bytes(name.as_bytes()).expect("test header name"),
            HeaderValue::from_str(value).expect("test header value"),
        );
    }
    map
}

/// A body as a sender may really send it: a `\u00e9` escape, CRLF line endings, the number
/// `1.50` and a trailing newline. Any parse and re-serialise changes its bytes.
pub(crate) const TRICKY_BODY: &[u8] =
    b"{\"id\":\"evt_1\",\r\n \"name\":\"caf\\u00e9\",\r\n \"amount\":1.50}\n";

/// The `push` payload from GitHub's examples, byte for byte (pretty-printed, final newline).
pub(crate) const GITHUB_PUSH: &[u8] =
    include_bytes!("../../../../testdata/github/push/payload.json");

/// The `ping` payload from GitHub's examples.
pub(crate) const GITHUB_PING: &[u8] =
    include_bytes!("../../../../testdata/github/ping/payload.json");

/// `body` parsed and written back by serde_json, as a handler that verifies too late would.
pub(crate) fn reserialised(body: &[u8]) -> Vec<u8> {
    let value: serde_json::Value = serde_json::from_slice(body).expect("test body is JSON");
    let bytes = serde_json::to_vec(&value).expect("serialise");
    assert_ne!(
        bytes, body,
        "re-serialising must change the bytes for the test to mean anything"
    );
    bytes
}

pub(crate) const STRIPE_SECRET: &str = "whsec_idem_test_3f9a1c7e5b2d4f60";
pub(crate) const GITHUB_SECRET: &str = "idem-github-secret";
pub(crate) const SHOPIFY_SECRET: &str = "shpss_idem_test_secret";
/// The secret of the Standard Webhooks reference libraries' test vectors.
pub(crate) const SW_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// The ed25519 seed of the Standard Webhooks reference libraries' `v1a` test vector.
pub(crate) const SW_SIGNING_KEY: &str = "whsk_VEVTVFNJR05JTkdLRVlET05PVFVTRVRISVNGT1JBTlk=";
/// The public key of [`SW_SIGNING_KEY`], computed independently (Python `cryptography`).
pub(crate) const SW_PUBLIC_KEY: &str = "whpk_ZlN4eg7dSSqi0moX9hQUk3orrOouK3QVQSlJa248c/g=";
pub(crate) const MSG_ID: &str = "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W";
pub(crate) const GENERIC_HEADER: &str = "X-Signature";
pub(crate) const GENERIC_SECRET: &str = "generic-secret";

/// One scheme: its verifier, how its sender signs a body at a time, and the headers it reads.
pub(crate) struct Scheme {
    pub name: &'static str,
    pub verifier: Box<dyn Verifier>,
    pub sign: fn(&[u8], i64) -> HeaderMap,
    pub signature_header: &'static str,
}

/// Every scheme, configured with the secrets above.
pub(crate) fn schemes() -> Vec<Scheme> {
    vec![
        Scheme {
            name: "Stripe",
            verifier: Box::new(stripe::StripeVerifier::new([STRIPE_SECRET]).unwrap()),
            sign: |body, t| {
                headers(&[(
                    stripe::SIGNATURE_HEADER,
                    &stripe::sign(STRIPE_SECRET, t, body),
                )])
            },
            signature_header: stripe::SIGNATURE_HEADER,
        },
        Scheme {
            name: "GitHub",
            verifier: Box::new(github::GitHubVerifier::new([GITHUB_SECRET]).unwrap()),
            sign: |body, _| {
                headers(&[(github::SIGNATURE_HEADER, &github::sign(GITHUB_SECRET, body))])
            },
            signature_header: github::SIGNATURE_HEADER,
        },
        Scheme {
            name: "Shopify",
            verifier: Box::new(shopify::ShopifyVerifier::new([SHOPIFY_SECRET]).unwrap()),
            sign: |body, _| {
                headers(&[(
                    shopify::SIGNATURE_HEADER,
                    &shopify::sign(SHOPIFY_SECRET, body),
                )])
            },
            signature_header: shopify::SIGNATURE_HEADER,
        },
        Scheme {
            name: "Standard Webhooks v1",
            verifier: Box::new(
                standard_webhooks::StandardWebhooksVerifier::new([SW_SECRET]).unwrap(),
            ),
            sign: |body, t| {
                let signature = standard_webhooks::sign(SW_SECRET, MSG_ID, t, body).unwrap();
                sw_headers(MSG_ID, t, &signature)
            },
            signature_header: standard_webhooks::SIGNATURE_HEADER,
        },
        Scheme {
            name: "Standard Webhooks v1a",
            verifier: Box::new(
                standard_webhooks::StandardWebhooksVerifier::new([SW_PUBLIC_KEY]).unwrap(),
            ),
            sign: |body, t| {
                let signature =
                    standard_webhooks::sign_v1a(SW_SIGNING_KEY, MSG_ID, t, body).unwrap();
                sw_headers(MSG_ID, t, &signature)
            },
            signature_header: standard_webhooks::SIGNATURE_HEADER,
        },
        Scheme {
            name: "generic HMAC",
            verifier: Box::new(
                generic_hmac::GenericHmacVerifier::new(
                    GENERIC_HEADER,
                    Encoding::Hex,
                    [GENERIC_SECRET],
                )
                .unwrap()
                .with_prefix("sha256="),
            ),
            sign: |body, _| {
                let value = generic_hmac::sign(GENERIC_SECRET, Encoding::Hex, "sha256=", body);
                headers(&[(GENERIC_HEADER, &value)])
            },
            signature_header: GENERIC_HEADER,
        },
    ]
}

/// The three Standard Webhooks headers.
pub(crate) fn sw_headers(id: &str, timestamp_secs: i64, signature: &str) -> HeaderMap {
    headers(&[
        (standard_webhooks::ID_HEADER, id),
        (
            standard_webhooks::TIMESTAMP_HEADER,
            &timestamp_secs.to_string(),
        ),
        (standard_webhooks::SIGNATURE_HEADER, signature),
    ])
}
