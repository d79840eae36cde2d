//! `GitHubVerifier` on hostile deliveries. Properties (crates/idem-http/src/verify/github.rs):
//! - whatever the bytes, `verify` returns, and an error names no secret or computed signature;
//! - it accepts exactly the deliveries with one `X-Hub-Signature-256` header that is `sha256=`
//!   followed by the hex HMAC-SHA256 of the body under the secret (an HMAC of our own);
//! - the body signed as GitHub signs it is accepted, also by a verifier holding the secret among
//!   others; that signature with a changed body or on a verifier without the secret is refused
//!   as `no_matching_signature`; GitHub signs no timestamp, so the clock does not matter.

#![no_main]

use std::sync::LazyLock;

use idem_core::Timestamp;
use idem_fuzz::{NOW, check_error, delivery, hmac_sha256, single, tampered, with_header};
use idem_http::http::HeaderMap;
use idem_http::verify::github::{GitHubVerifier, SIGNATURE_HEADER};
use idem_http::verify::{Verifier, VerifyError};
use libfuzzer_sys::fuzz_target;

const SECRET: &str = "fuzz-github-webhook-secret-7d1c";
const OTHER: &str = "rotated-out-github-secret-c1d7";

static ONE: LazyLock<GitHubVerifier> = LazyLock::new(|| GitHubVerifier::new([SECRET]).unwrap());
static ROTATING: LazyLock<GitHubVerifier> =
    LazyLock::new(|| GitHubVerifier::new([OTHER, SECRET]).unwrap());
static WRONG: LazyLock<GitHubVerifier> = LazyLock::new(|| GitHubVerifier::new([OTHER]).unwrap());

fn github_accepts(headers: &HeaderMap, body: &[u8]) -> bool {
    single(headers, SIGNATURE_HEADER)
        .and_then(|value| value.strip_prefix("sha256="))
        .and_then(|hex| hex::decode(hex).ok())
        .is_some_and(|sig| sig == hmac_sha256(SECRET.as_bytes(), &[body]))
}

fuzz_target!(|data: &[u8]| {
    let (headers, body) = delivery(data);
    let tag = hex::encode(hmac_sha256(SECRET.as_bytes(), &[body]));
    let secrets = [SECRET, OTHER];

    let verdict = ONE.verify(&headers, body, NOW);
    match &verdict {
        Ok(()) => assert!(github_accepts(&headers, body), "accepted {headers:?}"),
        Err(error) => {
            check_error(error, &secrets, &[&tag]);
            assert!(
                !github_accepts(&headers, body),
                "refused a signed delivery: {error}"
            );
        }
    }
    assert_eq!(
        ROTATING.verify(&headers, body, NOW).is_ok(),
        verdict.is_ok()
    );
    assert_eq!(
        ONE.verify(&headers, body, Timestamp(0)).is_ok(),
        verdict.is_ok()
    );

    let signed = with_header(&headers, SIGNATURE_HEADER, &format!("sha256={tag}"));
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
