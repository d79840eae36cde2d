//! No input panics a verifier: binary, oversized, truncated and random headers are errors
//! (docs/design.md C11).

use http::{HeaderMap, HeaderName, HeaderValue};
use idem_http::verify::{MAX_SIGNATURES, Verifier, VerifyError, standard_webhooks};
use proptest::prelude::*;

use crate::support::{MSG_ID, NOW_SECS, SW_SECRET, TRICKY_BODY, now, schemes, sw_headers};

/// `headers` with `name` set to the raw `value` (which need not be text).
fn with_value(headers: &HeaderMap, name: &str, value: &[u8]) -> Option<HeaderMap> {
    let mut headers = headers.clone();
    let name = HeaderName::from_bytes(name.as_bytes()).ok()?;
    headers.insert(name, HeaderValue::from_bytes(value).ok()?);
    Some(headers)
}

#[test]
fn known_garbage_is_refused_by_every_scheme() {
    let huge = "a".repeat(1 << 20);
    let many_v1 = vec!["v1=00"; 10_000].join(",");
    let many_sw = vec!["v1,AAAA"; 10_000].join(" ");
    let garbage: Vec<&[u8]> = vec![
        b"\xff\xfe\x80",
        b"t=\xe9",
        b"",
        b" ",
        b"t=abc",
        b"t=abc,v1=abc",
        b"t=1700000000,v1=abc",
        b"t=99999999999999999999999,v1=00",
        b"sha256=abc",
        b"sha256=\xff",
        b"====",
        b"v1,====",
        b"v1,",
        b"v1a,AAAA",
        b",,,,====,,,",
        huge.as_bytes(),
        many_v1.as_bytes(),
        many_sw.as_bytes(),
    ];
    for scheme in schemes() {
        let signed = (scheme.sign)(TRICKY_BODY, NOW_SECS);
        for value in &garbage {
            let headers =
                with_value(&signed, scheme.signature_header, value).expect("valid header value");
            let result = scheme.verifier.verify(&headers, TRICKY_BODY, now());
            assert!(
                result.is_err(),
                "{} accepted {:?}",
                scheme.name,
                String::from_utf8_lossy(value)
            );
        }
    }
}

#[test]
fn too_many_signatures_are_refused_before_checking_them() {
    let valid = standard_webhooks::sign(SW_SECRET, MSG_ID, NOW_SECS, TRICKY_BODY).unwrap();
    let mut entries = vec!["v1,AAAA"; MAX_SIGNATURES];
    entries.push(&valid);
    let header = entries.join(" ");
    let verifier = standard_webhooks::StandardWebhooksVerifier::new([SW_SECRET]).unwrap();
    let headers = sw_headers(MSG_ID, NOW_SECS, &header);
    assert_eq!(
        verifier.verify(&headers, TRICKY_BODY, now()),
        Err(VerifyError::TooManySignatures {
            header: "webhook-signature".into(),
            count: MAX_SIGNATURES + 1,
            max: MAX_SIGNATURES,
        })
    );
}

#[test]
fn every_error_has_a_stable_reason() {
    let schemes = schemes();
    let signed = (schemes[0].sign)(TRICKY_BODY, NOW_SECS - 3600);
    let error = schemes[0]
        .verifier
        .verify(&signed, TRICKY_BODY, now())
        .unwrap_err();
    assert_eq!(error.reason(), "timestamp_out_of_tolerance");
    let error = schemes[0]
        .verifier
        .verify(&HeaderMap::new(), TRICKY_BODY, now())
        .unwrap_err();
    assert_eq!(error.reason(), "missing_header");
}

proptest! {
    #[test]
    fn random_header_bytes_never_verify_or_panic(value in proptest::collection::vec(any::<u8>(), 0..200)) {
        for scheme in schemes() {
            let signed = (scheme.sign)(TRICKY_BODY, NOW_SECS);
            if let Some(headers) = with_value(&signed, scheme.signature_header, &value) {
                prop_assert!(scheme.verifier.verify(&headers, TRICKY_BODY, now()).is_err());
            }
        }
    }

    #[test]
    fn header_shaped_strings_never_verify_or_panic(value in "[tvsha0-9a-fA-F1=,+/ ]{0,120}") {
        for scheme in schemes() {
            let signed = (scheme.sign)(TRICKY_BODY, NOW_SECS);
            let headers = with_value(&signed, scheme.signature_header, value.as_bytes()).expect("visible ASCII");
            prop_assert!(scheme.verifier.verify(&headers, TRICKY_BODY, now()).is_err());
        }
    }

    #[test]
    fn random_standard_webhooks_id_and_timestamp_never_panic(
        id in proptest::collection::vec(any::<u8>(), 0..40),
        timestamp in proptest::collection::vec(any::<u8>(), 0..30),
    ) {
        for scheme in schemes().into_iter().filter(|s| s.name.starts_with("Standard Webhooks")) {
            let signed = (scheme.sign)(TRICKY_BODY, NOW_SECS);
            let changed = with_value(&signed, standard_webhooks::ID_HEADER, &id)
                .and_then(|h| with_value(&h, standard_webhooks::TIMESTAMP_HEADER, &timestamp));
            if let Some(headers) = changed {
                // Only the exact id and timestamp that were signed may verify.
                let same = id == MSG_ID.as_bytes() && timestamp == NOW_SECS.to_string().as_bytes();
                prop_assert_eq!(scheme.verifier.verify(&headers, TRICKY_BODY, now()).is_ok(), same);
            }
        }
    }

    #[test]
    fn any_body_round_trips_and_any_changed_byte_fails(
        body in proptest::collection::vec(any::<u8>(), 0..300),
        flip in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        for scheme in schemes() {
            let headers = (scheme.sign)(&body, NOW_SECS);
            prop_assert_eq!(scheme.verifier.verify(&headers, &body, now()), Ok(()));
            if !body.is_empty() {
                let mut changed = body.clone();
                changed[flip.index(body.len())] ^= 1 << bit;
                let result = scheme.verifier.verify(&headers, &changed, now());
                prop_assert!(
                    matches!(result, Err(VerifyError::NoMatchingSignature { .. })),
                    "{} accepted a changed body: {:?}",
                    scheme.name,
                    result
                );
            }
        }
    }
}
