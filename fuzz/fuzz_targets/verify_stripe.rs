//! `StripeVerifier` on hostile deliveries. Properties (crates/idem-http/src/verify/stripe.rs and
//! the crate documentation):
//! - whatever the bytes, `verify` returns, and an error names no secret or computed signature;
//! - it accepts exactly the deliveries with one `Stripe-Signature` header holding one `t=`, fresh
//!   (within 300 s), at most 16 `v1=`, one of them the hex HMAC-SHA256 of `"{t}.{body}"` under
//!   the secret (checked by an HMAC of our own);
//! - the same body signed as Stripe signs it is accepted, also by a verifier that holds the
//!   secret among others (rotation);
//! - that signature with a changed body, or on a verifier without its secret, is refused as
//!   `no_matching_signature`; signed 301 s before now it is refused as stale.

#![no_main]

use std::sync::LazyLock;

use idem_fuzz::{NOW, NOW_SECS, check_error, delivery, fresh, hmac_sha256, single, tampered};
use idem_fuzz::{TOLERANCE_SECS, with_header};
use idem_http::http::HeaderMap;
use idem_http::verify::stripe::{SIGNATURE_HEADER, StripeVerifier};
use idem_http::verify::{MAX_SIGNATURES, Verifier, VerifyError};
use libfuzzer_sys::fuzz_target;

const SECRET: &str = "whsec_fuzz0stripe0secret0a1b2c3d4e5f";
const OTHER: &str = "whsec_rotated0out0secret0f5e4d3c2b1a";

static ONE: LazyLock<StripeVerifier> = LazyLock::new(|| StripeVerifier::new([SECRET]).unwrap());
static ROTATING: LazyLock<StripeVerifier> =
    LazyLock::new(|| StripeVerifier::new([OTHER, SECRET]).unwrap());
static WRONG: LazyLock<StripeVerifier> = LazyLock::new(|| StripeVerifier::new([OTHER]).unwrap());

/// Whether Stripe's rule accepts `headers` and `body` under [`SECRET`].
fn stripe_accepts(headers: &HeaderMap, body: &[u8]) -> bool {
    let Some(value) = single(headers, SIGNATURE_HEADER) else {
        return false;
    };
    let items: Vec<(&str, &str)> = value
        .split(',')
        .filter_map(|item| item.trim().split_once('='))
        .collect();
    let [t] = items
        .iter()
        .filter(|(key, _)| *key == "t")
        .map(|(_, t)| *t)
        .collect::<Vec<_>>()[..]
    else {
        return false;
    };
    let tag = hmac_sha256(SECRET.as_bytes(), &[t.as_bytes(), b".", body]);
    let listed = items.iter().filter(|(key, _)| *key == "v1").count();
    fresh(t)
        && listed <= MAX_SIGNATURES
        && items
            .iter()
            .any(|(key, hex)| *key == "v1" && hex::decode(hex).is_ok_and(|sig| sig == tag))
}

fn signature(secret: &str, t: i64, body: &[u8]) -> String {
    let tag = hmac_sha256(secret.as_bytes(), &[t.to_string().as_bytes(), b".", body]);
    format!("t={t},v1={}", hex::encode(tag))
}

fuzz_target!(|data: &[u8]| {
    let (headers, body) = delivery(data);
    let good = signature(SECRET, NOW_SECS, body);
    let secrets = [SECRET, OTHER];
    let computed = [&good[good.len() - 64..]];

    let verdict = ONE.verify(&headers, body, NOW);
    match &verdict {
        Ok(()) => assert!(
            stripe_accepts(&headers, body),
            "accepted a delivery Stripe's rule refuses: {headers:?}"
        ),
        Err(error) => {
            check_error(error, &secrets, &computed);
            assert!(
                !stripe_accepts(&headers, body),
                "refused a signed delivery: {error}"
            );
        }
    }
    assert_eq!(
        ROTATING.verify(&headers, body, NOW).is_ok(),
        verdict.is_ok()
    );

    let signed = with_header(&headers, SIGNATURE_HEADER, &good);
    assert_eq!(ONE.verify(&signed, body, NOW), Ok(()));
    assert_eq!(ROTATING.verify(&signed, body, NOW), Ok(()));
    let refused = |result: Result<(), VerifyError>| {
        assert!(
            matches!(result, Err(VerifyError::NoMatchingSignature { .. })),
            "{result:?}"
        );
    };
    refused(ONE.verify(&signed, &tampered(body), NOW));
    refused(WRONG.verify(&signed, body, NOW));

    let stale = with_header(
        &headers,
        SIGNATURE_HEADER,
        &signature(SECRET, NOW_SECS - TOLERANCE_SECS - 1, body),
    );
    assert!(matches!(
        ONE.verify(&stale, body, NOW),
        Err(VerifyError::TimestampOutOfTolerance { .. })
    ));
});
