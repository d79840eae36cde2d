//! Signed timestamps must be within 300 s of now, past or future (docs/design.md C10); schemes
//! without a timestamp ignore `now`.

use std::time::Duration;

use idem_http::verify::standard_webhooks::{self, StandardWebhooksVerifier};
use idem_http::verify::{Verifier, VerifyError, stripe};

use crate::support::{
    MSG_ID, NOW_SECS, STRIPE_SECRET, SW_SECRET, TRICKY_BODY, headers, now, schemes, sw_headers,
};

const TIMED: [&str; 3] = ["Stripe", "Standard Webhooks v1", "Standard Webhooks v1a"];

#[test]
fn timestamps_within_the_tolerance_pass_and_others_fail() {
    for scheme in schemes().into_iter().filter(|s| TIMED.contains(&s.name)) {
        for (offset, ok) in [
            (-3600, false),
            (-301, false),
            (-300, true),
            (-290, true),
            (0, true),
            (290, true),
            (300, true),
            (301, false),
            (600, false),
        ] {
            let headers = (scheme.sign)(TRICKY_BODY, NOW_SECS + offset);
            let result = scheme.verifier.verify(&headers, TRICKY_BODY, now());
            if ok {
                assert_eq!(result, Ok(()), "{} at now{offset:+}", scheme.name);
            } else {
                assert_eq!(
                    result,
                    Err(VerifyError::TimestampOutOfTolerance {
                        timestamp: NOW_SECS + offset,
                        now: NOW_SECS,
                        tolerance_secs: 300,
                    }),
                    "{} at now{offset:+}",
                    scheme.name
                );
            }
        }
    }
}

#[test]
fn the_message_names_the_timestamp_the_distance_and_the_tolerance() {
    let verifier = stripe::StripeVerifier::new([STRIPE_SECRET]).unwrap();
    let old = headers(&[(
        stripe::SIGNATURE_HEADER,
        &stripe::sign(STRIPE_SECRET, NOW_SECS - 3600, TRICKY_BODY),
    )]);
    assert_eq!(
        verifier
            .verify(&old, TRICKY_BODY, now())
            .unwrap_err()
            .to_string(),
        "timestamp 1699996400 is 3600 s before now (1700000000), outside the 300 s tolerance"
    );
    let future = headers(&[(
        stripe::SIGNATURE_HEADER,
        &stripe::sign(STRIPE_SECRET, NOW_SECS + 600, TRICKY_BODY),
    )]);
    assert_eq!(
        verifier
            .verify(&future, TRICKY_BODY, now())
            .unwrap_err()
            .to_string(),
        "timestamp 1700000600 is 600 s after now (1700000000), outside the 300 s tolerance"
    );
}

#[test]
fn a_missing_timestamp_is_an_error() {
    let verifier = stripe::StripeVerifier::new([STRIPE_SECRET]).unwrap();
    let signed = stripe::sign(STRIPE_SECRET, NOW_SECS, TRICKY_BODY);
    let without_t = signed
        .split(',')
        .filter(|item| !item.starts_with("t="))
        .collect::<Vec<_>>()
        .join(",");
    let error = verifier
        .verify(
            &headers(&[(stripe::SIGNATURE_HEADER, &without_t)]),
            TRICKY_BODY,
            now(),
        )
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "header `Stripe-Signature` is malformed: no `t=` timestamp; expected `t=<unix seconds>,v1=<hex>`"
    );

    let verifier = StandardWebhooksVerifier::new([SW_SECRET]).unwrap();
    let signature = standard_webhooks::sign(SW_SECRET, MSG_ID, NOW_SECS, TRICKY_BODY).unwrap();
    let mut headers = sw_headers(MSG_ID, NOW_SECS, &signature);
    headers.remove(standard_webhooks::TIMESTAMP_HEADER);
    assert_eq!(
        verifier
            .verify(&headers, TRICKY_BODY, now())
            .unwrap_err()
            .to_string(),
        "missing header `webhook-timestamp`"
    );
}

#[test]
fn a_changed_timestamp_breaks_the_signature() {
    // The timestamp is signed: moving it into the window does not revive a replay.
    let verifier = stripe::StripeVerifier::new([STRIPE_SECRET]).unwrap();
    let old = stripe::sign(STRIPE_SECRET, NOW_SECS - 3600, TRICKY_BODY);
    let moved = old.replace(&(NOW_SECS - 3600).to_string(), &NOW_SECS.to_string());
    let error = verifier
        .verify(
            &headers(&[(stripe::SIGNATURE_HEADER, &moved)]),
            TRICKY_BODY,
            now(),
        )
        .unwrap_err();
    assert!(
        matches!(error, VerifyError::NoMatchingSignature { .. }),
        "{error}"
    );

    let verifier = StandardWebhooksVerifier::new([SW_SECRET]).unwrap();
    let signature =
        standard_webhooks::sign(SW_SECRET, MSG_ID, NOW_SECS - 3600, TRICKY_BODY).unwrap();
    let error = verifier
        .verify(
            &sw_headers(MSG_ID, NOW_SECS, &signature),
            TRICKY_BODY,
            now(),
        )
        .unwrap_err();
    assert!(
        matches!(error, VerifyError::NoMatchingSignature { .. }),
        "{error}"
    );
}

#[test]
fn the_tolerance_can_be_configured() {
    let wide = stripe::StripeVerifier::new([STRIPE_SECRET])
        .unwrap()
        .with_tolerance(Duration::from_secs(3600));
    let old = headers(&[(
        stripe::SIGNATURE_HEADER,
        &stripe::sign(STRIPE_SECRET, NOW_SECS - 3600, TRICKY_BODY),
    )]);
    assert_eq!(wide.verify(&old, TRICKY_BODY, now()), Ok(()));

    let narrow = StandardWebhooksVerifier::new([SW_SECRET])
        .unwrap()
        .with_tolerance(Duration::from_secs(10));
    let signature = standard_webhooks::sign(SW_SECRET, MSG_ID, NOW_SECS - 11, TRICKY_BODY).unwrap();
    assert!(matches!(
        narrow.verify(
            &sw_headers(MSG_ID, NOW_SECS - 11, &signature),
            TRICKY_BODY,
            now()
        ),
        Err(VerifyError::TimestampOutOfTolerance {
            tolerance_secs: 10,
            ..
        })
    ));
}

#[test]
fn schemes_without_a_timestamp_ignore_now() {
    for scheme in schemes().into_iter().filter(|s| !TIMED.contains(&s.name)) {
        let headers = (scheme.sign)(TRICKY_BODY, NOW_SECS);
        for secs in [0, NOW_SECS - 86_400 * 365, NOW_SECS + 86_400] {
            let now = idem_core::Timestamp(secs * 1000);
            assert_eq!(
                scheme.verifier.verify(&headers, TRICKY_BODY, now),
                Ok(()),
                "{}",
                scheme.name
            );
        }
    }
}
