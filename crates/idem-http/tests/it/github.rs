//! GitHub: `X-Hub-Signature-256: sha256=<hex>` over the raw body.

use idem_http::verify::github::{GitHubVerifier, SIGNATURE_HEADER, sign};
use idem_http::verify::{ConfigError, Verifier, VerifyError};

use crate::support::{GITHUB_PUSH, GITHUB_SECRET, headers, now};

fn verify(secret: &str, value: &str, body: &[u8]) -> Result<(), VerifyError> {
    GitHubVerifier::new([secret]).unwrap().verify(
        &headers(&[(SIGNATURE_HEADER, value)]),
        body,
        now(),
    )
}

#[test]
fn signs_the_vector_from_githubs_documentation() {
    // GitHub docs, "Validating webhook deliveries": secret and payload with their signature.
    let expected = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
    assert_eq!(
        sign("It's a Secret to Everybody", b"Hello, World!"),
        expected
    );
    assert_eq!(
        verify("It's a Secret to Everybody", expected, b"Hello, World!"),
        Ok(())
    );
}

#[test]
fn verifies_a_real_push_payload_against_an_independent_vector() {
    // HMAC-SHA256 of testdata/github/push/payload.json keyed with GITHUB_SECRET, computed with
    // Python's `hmac` module at authoring time.
    let expected = "sha256=04725ac16d34364909981bacf114c307c12facef88051eed7600323d2ac3eaa3";
    assert_eq!(sign(GITHUB_SECRET, GITHUB_PUSH), expected);
    assert_eq!(verify(GITHUB_SECRET, expected, GITHUB_PUSH), Ok(()));
    assert_eq!(
        verify(
            GITHUB_SECRET,
            &expected.to_uppercase().replace("SHA256=", "sha256="),
            GITHUB_PUSH
        ),
        Ok(())
    );
}

#[test]
fn malformed_and_missing_headers_are_named() {
    let good = sign(GITHUB_SECRET, GITHUB_PUSH);
    let hex = good.strip_prefix("sha256=").unwrap();
    let cases = [
        (hex.to_owned(), "no `sha256=` prefix"),
        (format!("sha1={hex}"), "no `sha256=` prefix"),
        (format!("SHA256={hex}"), "no `sha256=` prefix"),
        (
            format!("sha256={}", &hex[1..]),
            "the signature is not valid hex",
        ),
        (
            "sha256=not-hex".to_owned(),
            "the signature is not valid hex",
        ),
    ];
    for (value, problem) in cases {
        assert_eq!(
            verify(GITHUB_SECRET, &value, GITHUB_PUSH)
                .unwrap_err()
                .to_string(),
            format!(
                "header `X-Hub-Signature-256` is malformed: {problem}; expected `sha256=<hex>`"
            )
        );
    }
    assert_eq!(
        verify(GITHUB_SECRET, "sha256=", GITHUB_PUSH)
            .unwrap_err()
            .to_string(),
        "header `X-Hub-Signature-256` holds an empty signature; an empty signature is never valid"
    );
    // Only the SHA-1 header: not accepted in place of the SHA-256 one.
    let sha1_only = headers(&[("X-Hub-Signature", "sha1=0000")]);
    assert_eq!(
        GitHubVerifier::new([GITHUB_SECRET])
            .unwrap()
            .verify(&sha1_only, GITHUB_PUSH, now()),
        Err(VerifyError::MissingHeader {
            header: SIGNATURE_HEADER.into()
        })
    );
    let twice = headers(&[(SIGNATURE_HEADER, &good), (SIGNATURE_HEADER, &good)]);
    assert_eq!(
        GitHubVerifier::new([GITHUB_SECRET])
            .unwrap()
            .verify(&twice, GITHUB_PUSH, now()),
        Err(VerifyError::RepeatedHeader {
            header: SIGNATURE_HEADER.into(),
            count: 2
        })
    );
}

#[test]
fn either_secret_verifies_while_changing_it() {
    let verifier = GitHubVerifier::new(["old-secret", "new-secret"]).unwrap();
    for secret in ["old-secret", "new-secret"] {
        let value = sign(secret, GITHUB_PUSH);
        assert_eq!(
            verifier.verify(&headers(&[(SIGNATURE_HEADER, &value)]), GITHUB_PUSH, now()),
            Ok(())
        );
    }
    let value = sign("other", GITHUB_PUSH);
    assert_eq!(
        verifier.verify(&headers(&[(SIGNATURE_HEADER, &value)]), GITHUB_PUSH, now()),
        Err(VerifyError::NoMatchingSignature {
            signatures: 1,
            secrets: 2
        })
    );
}

#[test]
fn secrets_are_checked_at_construction() {
    assert!(matches!(
        GitHubVerifier::new(Vec::<String>::new()),
        Err(ConfigError::NoSecrets {
            scheme: "GitHub",
            ..
        })
    ));
    assert!(matches!(
        GitHubVerifier::new([""]),
        Err(ConfigError::EmptySecret { .. })
    ));
    assert!(matches!(
        GitHubVerifier::new(["secret\r\n"]),
        Err(ConfigError::SecretWhitespace { .. })
    ));
}
