//! `ShopifyVerifier` on hostile deliveries. Properties (crates/idem-http/src/verify/shopify.rs):
//! - whatever the bytes, `verify` returns, and an error names no secret or computed signature;
//! - it accepts exactly the deliveries with one `X-Shopify-Hmac-Sha256` header (or, without
//!   one, one `shopify-hmac-sha256` header) that is the standard base64 (with padding) of the
//!   HMAC-SHA256 of the body under the secret;
//! - the body signed as Shopify signs it is accepted, also by a verifier holding the secret
//!   among others; that signature with a changed body or on a verifier without the secret is
//!   refused as `no_matching_signature`.

#![no_main]

use std::sync::LazyLock;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use idem_fuzz::{NOW, check_error, delivery, hmac_sha256, single, tampered, with_header};
use idem_http::http::HeaderMap;
use idem_http::verify::shopify::{SIGNATURE_HEADER, ShopifyVerifier, UNPREFIXED_SIGNATURE_HEADER};
use idem_http::verify::{Verifier, VerifyError};
use libfuzzer_sys::fuzz_target;

const SECRET: &str = "fuzz-shopify-client-secret-9b2e";
const OTHER: &str = "rotated-out-shopify-secret-e2b9";

static ONE: LazyLock<ShopifyVerifier> = LazyLock::new(|| ShopifyVerifier::new([SECRET]).unwrap());
static ROTATING: LazyLock<ShopifyVerifier> =
    LazyLock::new(|| ShopifyVerifier::new([OTHER, SECRET]).unwrap());
static WRONG: LazyLock<ShopifyVerifier> = LazyLock::new(|| ShopifyVerifier::new([OTHER]).unwrap());

fn shopify_accepts(headers: &HeaderMap, body: &[u8]) -> bool {
    let read = if !headers.contains_key(SIGNATURE_HEADER)
        && headers.contains_key(UNPREFIXED_SIGNATURE_HEADER)
    {
        UNPREFIXED_SIGNATURE_HEADER
    } else {
        SIGNATURE_HEADER
    };
    single(headers, read)
        .and_then(|value| STANDARD.decode(value).ok())
        .is_some_and(|sig| sig == hmac_sha256(SECRET.as_bytes(), &[body]))
}

fuzz_target!(|data: &[u8]| {
    let (headers, body) = delivery(data);
    let tag = STANDARD.encode(hmac_sha256(SECRET.as_bytes(), &[body]));
    let secrets = [SECRET, OTHER];

    let verdict = ONE.verify(&headers, body, NOW);
    match &verdict {
        Ok(()) => assert!(shopify_accepts(&headers, body), "accepted {headers:?}"),
        Err(error) => {
            check_error(error, &secrets, &[&tag]);
            assert!(
                !shopify_accepts(&headers, body),
                "refused a signed delivery: {error}"
            );
        }
    }
    assert_eq!(
        ROTATING.verify(&headers, body, NOW).is_ok(),
        verdict.is_ok()
    );

    let signed = with_header(&headers, SIGNATURE_HEADER, &tag);
    assert_eq!(ONE.verify(&signed, body, NOW), Ok(()));
    assert_eq!(ROTATING.verify(&signed, body, NOW), Ok(()));
    for result in [
        ONE.verify(&signed, &tampered(body), NOW),
        WRONG.verify(&signed, body, NOW),
    ] {
        assert!(
            matches!(result, Err(VerifyError::NoMatchingSignature { .. })),
            "{result:?}"
        );
    }
});
