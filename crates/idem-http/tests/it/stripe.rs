//! Stripe: `t=…,v1=…` over `"{t}.{body}"`, keyed with the whole `whsec_…` string.

use idem_http::verify::stripe::{SIGNATURE_HEADER, StripeVerifier, sign};
use idem_http::verify::{ConfigError, Verifier, VerifyError};

use crate::support::{NOW_SECS, STRIPE_SECRET, TRICKY_BODY, headers, now};

const VECTOR_BODY: &[u8] =
    br#"{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","object":"event","type":"customer.created"}"#;
/// HMAC-SHA256 of `1700000000.` + VECTOR_BODY with key STRIPE_SECRET, computed at authoring
/// time with Python's `hmac` module, independently of this crate.
const VECTOR_V1: &str = "4d626eaa82307f011c98f6a6f8649dc8fe120d0074b2d1b7414b34ea2bcbca9e";

fn verify(value: &str) -> Result<(), VerifyError> {
    StripeVerifier::new([STRIPE_SECRET]).unwrap().verify(
        &headers(&[(SIGNATURE_HEADER, value)]),
        VECTOR_BODY,
        now(),
    )
}

#[test]
fn signs_the_independently_computed_vector() {
    assert_eq!(
        sign(STRIPE_SECRET, 1_700_000_000, VECTOR_BODY),
        format!("t=1700000000,v1={VECTOR_V1}")
    );
    assert_eq!(verify(&format!("t=1700000000,v1={VECTOR_V1}")), Ok(()));
}

#[test]
fn any_v1_may_match_and_v0_is_ignored() {
    let other = sign("whsec_other", NOW_SECS, VECTOR_BODY);
    let other_v1 = other.split_once(",v1=").unwrap().1;
    assert_eq!(
        verify(&format!("t={NOW_SECS},v1={other_v1},v1={VECTOR_V1}")),
        Ok(())
    );
    assert_eq!(
        verify(&format!(
            "t={NOW_SECS},v0={other_v1},v1={VECTOR_V1},x=1,junk"
        )),
        Ok(())
    );
    assert_eq!(
        verify(&format!("t={NOW_SECS},v1={other_v1},v1=")),
        Err(VerifyError::NoMatchingSignature {
            signatures: 1,
            secrets: 1
        })
    );
    assert_eq!(
        verify(&format!("t={NOW_SECS},v0={VECTOR_V1}"))
            .unwrap_err()
            .to_string(),
        "header `Stripe-Signature` holds no signature this source can check; expected `t=<unix seconds>,v1=<hex>`"
    );
}

#[test]
fn several_secrets_while_rolling() {
    let verifier = StripeVerifier::new(["whsec_old", "whsec_new"]).unwrap();
    for secret in ["whsec_old", "whsec_new"] {
        let value = sign(secret, NOW_SECS, TRICKY_BODY);
        assert_eq!(
            verifier.verify(&headers(&[(SIGNATURE_HEADER, &value)]), TRICKY_BODY, now()),
            Ok(())
        );
    }
    let value = sign("whsec_gone", NOW_SECS, TRICKY_BODY);
    assert_eq!(
        verifier
            .verify(&headers(&[(SIGNATURE_HEADER, &value)]), TRICKY_BODY, now())
            .unwrap_err()
            .to_string(),
        "no signature matched any of the 2 configured secrets (1 signatures checked); verify the raw body bytes as received, with the secret the sender signs with"
    );
}

#[test]
fn malformed_headers_name_the_problem() {
    let cases = [
        (
            "t=abc,v1=00",
            "the `t=` timestamp is not decimal Unix seconds",
        ),
        (
            "t=-1700000000,v1=00",
            "the `t=` timestamp is not decimal Unix seconds",
        ),
        ("t=,v1=00", "the `t=` timestamp is not decimal Unix seconds"),
        ("t=1,t=2,v1=00", "more than one `t=` timestamp"),
        ("v1=00", "no `t=` timestamp"),
        ("", "no `t=` timestamp"),
        ("t=1700000000,v1=abc", "the signature is not valid hex"),
        ("t=1700000000,v1=zz", "the signature is not valid hex"),
    ];
    for (value, problem) in cases {
        assert_eq!(
            verify(value).unwrap_err().to_string(),
            format!(
                "header `Stripe-Signature` is malformed: {problem}; expected `t=<unix seconds>,v1=<hex>`"
            ),
            "{value:?}"
        );
    }
    assert_eq!(
        verify(&format!("t={NOW_SECS},v1=")),
        Err(VerifyError::EmptySignature {
            header: SIGNATURE_HEADER.into()
        })
    );
    assert_eq!(
        StripeVerifier::new([STRIPE_SECRET])
            .unwrap()
            .verify(&headers(&[]), VECTOR_BODY, now())
            .unwrap_err()
            .to_string(),
        "missing header `Stripe-Signature`"
    );
}

#[test]
fn a_header_with_spaces_after_commas_still_verifies() {
    assert_eq!(verify(&format!("t={NOW_SECS}, v1={VECTOR_V1}")), Ok(()));
    assert_eq!(verify(&format!(" t=1700000000 , v1={VECTOR_V1} ")), Ok(()));
}

#[test]
fn secrets_are_checked_at_construction() {
    assert!(matches!(
        StripeVerifier::new(Vec::<&str>::new()),
        Err(ConfigError::NoSecrets {
            scheme: "Stripe",
            ..
        })
    ));
    assert!(matches!(
        StripeVerifier::new([""]),
        Err(ConfigError::EmptySecret { .. })
    ));
    assert!(matches!(
        StripeVerifier::new(["whsec_abc\n"]),
        Err(ConfigError::SecretWhitespace { .. })
    ));
    let error = StripeVerifier::new(["sk_live_123"]).unwrap_err();
    assert_eq!(
        error.to_string(),
        "a Stripe secret has the wrong prefix; expected the endpoint's signing secret `whsec_…` (from the Dashboard or `stripe listen`)"
    );
    assert!(
        !error.to_string().contains("sk_live_123"),
        "errors never show a secret"
    );
}

#[test]
fn debug_output_hides_secrets() {
    let debug = format!("{:?}", StripeVerifier::new([STRIPE_SECRET]).unwrap());
    assert!(!debug.contains("idem_test"), "{debug}");
    assert!(debug.contains("<redacted>"), "{debug}");
}
