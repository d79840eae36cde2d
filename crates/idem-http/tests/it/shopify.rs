//! Shopify: `X-Shopify-Hmac-Sha256: <base64>` over the raw body.

use idem_http::verify::shopify::{
    SIGNATURE_HEADER, ShopifyVerifier, UNPREFIXED_SIGNATURE_HEADER, sign,
};
use idem_http::verify::{ConfigError, Verifier, VerifyError};

use crate::support::{SHOPIFY_SECRET, headers, now};

const VECTOR_BODY: &[u8] =
    br#"{"id":820982911946154508,"email":"jon@example.com","total_price":"1.50"}"#;
/// Base64 HMAC-SHA256 of VECTOR_BODY keyed with SHOPIFY_SECRET, computed with Python's `hmac`
/// and `base64` modules at authoring time.
const VECTOR: &str = "YlLY3F1yMh6qzJ1J9jtI7HOyRpfSZ1FlPKdBo+hnQ9k=";

fn verify(value: &str) -> Result<(), VerifyError> {
    ShopifyVerifier::new([SHOPIFY_SECRET]).unwrap().verify(
        &headers(&[(SIGNATURE_HEADER, value)]),
        VECTOR_BODY,
        now(),
    )
}

#[test]
fn signs_the_independently_computed_vector() {
    assert_eq!(sign(SHOPIFY_SECRET, VECTOR_BODY), VECTOR);
    assert_eq!(verify(VECTOR), Ok(()));
}

/// Issue 15, item 3: Shopify's unprefixed `shopify-hmac-sha256` (read by `@shopify/shopify-api`
/// 13.1.0 besides `X-Shopify-Hmac-Sha256`) carries the same signature and is checked the same
/// way; when both are sent, the `X-` form is the one checked.
#[test]
fn the_unprefixed_header_is_read_too() {
    let verifier = ShopifyVerifier::new([SHOPIFY_SECRET]).unwrap();
    let check = |pairs: &[(&str, &str)]| verifier.verify(&headers(pairs), VECTOR_BODY, now());
    assert_eq!(check(&[(UNPREFIXED_SIGNATURE_HEADER, VECTOR)]), Ok(()));
    assert_eq!(
        check(&[(UNPREFIXED_SIGNATURE_HEADER, "AAAA")]),
        Err(VerifyError::NoMatchingSignature {
            signatures: 1,
            secrets: 1
        })
    );
    assert_eq!(
        check(&[
            (SIGNATURE_HEADER, "AAAA"),
            (UNPREFIXED_SIGNATURE_HEADER, VECTOR)
        ]),
        Err(VerifyError::NoMatchingSignature {
            signatures: 1,
            secrets: 1
        })
    );
    assert_eq!(
        check(&[]).unwrap_err().to_string(),
        "missing header `X-Shopify-Hmac-Sha256`"
    );
}

#[test]
fn bad_values_are_named() {
    assert_eq!(
        verify("").unwrap_err().to_string(),
        "header `X-Shopify-Hmac-Sha256` holds an empty signature; an empty signature is never valid"
    );
    for value in [
        "not base64!",
        "YlLY3F1yMh6qzJ1J9jtI7HOyRpfSZ1FlPKdBo+hnQ9k",
        "%%%%",
    ] {
        assert_eq!(
            verify(value).unwrap_err().to_string(),
            "header `X-Shopify-Hmac-Sha256` is malformed: the signature is not valid base64; expected `<base64>`",
            "{value:?}"
        );
    }
    // Valid base64 of the wrong length is a signature that does not match.
    assert_eq!(
        verify("AAAA"),
        Err(VerifyError::NoMatchingSignature {
            signatures: 1,
            secrets: 1
        })
    );
}

#[test]
fn either_secret_verifies_while_rotating() {
    let verifier = ShopifyVerifier::new(["old", SHOPIFY_SECRET]).unwrap();
    assert_eq!(
        verifier.verify(&headers(&[(SIGNATURE_HEADER, VECTOR)]), VECTOR_BODY, now()),
        Ok(())
    );
    let old = sign("old", VECTOR_BODY);
    assert_eq!(
        verifier.verify(&headers(&[(SIGNATURE_HEADER, &old)]), VECTOR_BODY, now()),
        Ok(())
    );
}

#[test]
fn secrets_are_checked_at_construction() {
    assert!(matches!(
        ShopifyVerifier::new(Vec::<&str>::new()),
        Err(ConfigError::NoSecrets {
            scheme: "Shopify",
            ..
        })
    ));
    assert!(matches!(
        ShopifyVerifier::new([" s"]),
        Err(ConfigError::SecretWhitespace { .. })
    ));
}
