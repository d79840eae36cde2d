//! Signatures cover the raw bytes: the body as sent verifies, a parsed and re-serialised copy
//! does not (docs/design.md C10).

use idem_http::verify::VerifyError;

use crate::support::{GITHUB_PING, GITHUB_PUSH, NOW_SECS, TRICKY_BODY, now, reserialised, schemes};

#[test]
fn bodies_verify_as_sent_and_fail_once_reserialised() {
    for body in [TRICKY_BODY, GITHUB_PUSH, GITHUB_PING] {
        let copy = reserialised(body);
        for scheme in schemes() {
            let headers = (scheme.sign)(body, NOW_SECS);
            assert_eq!(
                scheme.verifier.verify(&headers, body, now()),
                Ok(()),
                "{}",
                scheme.name
            );
            let error = scheme.verifier.verify(&headers, &copy, now()).unwrap_err();
            assert!(
                matches!(
                    error,
                    VerifyError::NoMatchingSignature {
                        signatures: 1,
                        secrets: 1
                    }
                ),
                "{}: {error}",
                scheme.name
            );
        }
    }
}

#[test]
fn every_single_byte_matters() {
    for scheme in schemes() {
        let headers = (scheme.sign)(TRICKY_BODY, NOW_SECS);
        let cr = TRICKY_BODY.iter().position(|&b| b == b'\r').expect("a CR");
        let mut without_cr = TRICKY_BODY.to_vec();
        without_cr.remove(cr);
        // Each variant is what a well-meaning intermediary might do: normalise line endings,
        // trim, reformat a number, unescape a character, lose the body.
        let variants = [
            without_cr,
            TRICKY_BODY[..TRICKY_BODY.len() - 1].to_vec(),
            String::from_utf8_lossy(TRICKY_BODY)
                .replace("1.50", "1.5")
                .into_bytes(),
            String::from_utf8_lossy(TRICKY_BODY)
                .replace("\\u00e9", "é")
                .into_bytes(),
            Vec::new(),
        ];
        for variant in variants {
            assert_ne!(variant, TRICKY_BODY);
            assert!(
                matches!(
                    scheme.verifier.verify(&headers, &variant, now()),
                    Err(VerifyError::NoMatchingSignature { .. })
                ),
                "{} accepted {:?}",
                scheme.name,
                String::from_utf8_lossy(&variant)
            );
        }
    }
}

#[test]
fn an_empty_body_round_trips_too() {
    for scheme in schemes() {
        let headers = (scheme.sign)(b"", NOW_SECS);
        assert_eq!(
            scheme.verifier.verify(&headers, b"", now()),
            Ok(()),
            "{}",
            scheme.name
        );
    }
}
