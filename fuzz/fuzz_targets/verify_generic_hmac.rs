//! `GenericHmacVerifier` on hostile deliveries, in two configurations: `X-Acme-Signature` with
//! the prefix `sha256=` and hex, and `X-Signature` with no prefix and base64. Properties
//! (crates/idem-http/src/verify/generic_hmac.rs):
//! - whatever the bytes, `verify` returns, and an error names no secret or computed signature;
//! - each accepts exactly the deliveries with its header once, holding its prefix (exactly,
//!   case included) followed by the HMAC-SHA256 of the body under the secret in its encoding;
//! - the body signed as the sender signs it is accepted; that signature with a changed body or
//!   on a verifier without the secret is refused as `no_matching_signature`.

#![no_main]

use std::sync::LazyLock;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use idem_fuzz::{NOW, check_error, delivery, hmac_sha256, single, tampered, with_header};
use idem_http::http::HeaderMap;
use idem_http::verify::generic_hmac::GenericHmacVerifier;
use idem_http::verify::{Encoding, Verifier, VerifyError};
use libfuzzer_sys::fuzz_target;

const SECRET: &str = "fuzz-generic-shared-secret-41aa";
const OTHER: &str = "rotated-out-generic-secret-aa14";

/// One configuration: its header, prefix and encoding, and verifiers with the secret, with the
/// secret among others, and without it.
struct Scheme {
    header: &'static str,
    prefix: &'static str,
    encoding: Encoding,
    one: GenericHmacVerifier,
    rotating: GenericHmacVerifier,
    wrong: GenericHmacVerifier,
}

impl Scheme {
    fn new(header: &'static str, prefix: &'static str, encoding: Encoding) -> Self {
        let verifier = |secrets: &[&str]| {
            GenericHmacVerifier::new(header, encoding, secrets)
                .unwrap()
                .with_prefix(prefix)
        };
        Self {
            header,
            prefix,
            encoding,
            one: verifier(&[SECRET]),
            rotating: verifier(&[OTHER, SECRET]),
            wrong: verifier(&[OTHER]),
        }
    }

    fn encode(&self, tag: &[u8]) -> String {
        match self.encoding {
            Encoding::Hex => hex::encode(tag),
            _ => STANDARD.encode(tag),
        }
    }

    fn decode(&self, text: &str) -> Option<Vec<u8>> {
        match self.encoding {
            Encoding::Hex => hex::decode(text).ok(),
            _ => STANDARD.decode(text).ok(),
        }
    }

    fn accepts(&self, headers: &HeaderMap, body: &[u8]) -> bool {
        single(headers, self.header)
            .and_then(|value| value.strip_prefix(self.prefix))
            .and_then(|text| self.decode(text))
            .is_some_and(|sig| sig == hmac_sha256(SECRET.as_bytes(), &[body]))
    }
}

static SCHEMES: LazyLock<[Scheme; 2]> = LazyLock::new(|| {
    [
        Scheme::new("X-Acme-Signature", "sha256=", Encoding::Hex),
        Scheme::new("X-Signature", "", Encoding::Base64),
    ]
});

fuzz_target!(|data: &[u8]| {
    let (headers, body) = delivery(data);
    for scheme in SCHEMES.iter() {
        let tag = scheme.encode(&hmac_sha256(SECRET.as_bytes(), &[body]));
        let verdict = scheme.one.verify(&headers, body, NOW);
        match &verdict {
            Ok(()) => assert!(scheme.accepts(&headers, body), "accepted {headers:?}"),
            Err(error) => {
                check_error(error, &[SECRET, OTHER], &[&tag]);
                assert!(
                    !scheme.accepts(&headers, body),
                    "refused a signed delivery: {error}"
                );
            }
        }
        assert_eq!(
            scheme.rotating.verify(&headers, body, NOW).is_ok(),
            verdict.is_ok()
        );

        let signed = with_header(&headers, scheme.header, &format!("{}{tag}", scheme.prefix));
        assert_eq!(scheme.one.verify(&signed, body, NOW), Ok(()));
        assert_eq!(scheme.rotating.verify(&signed, body, NOW), Ok(()));
        for result in [
            scheme.one.verify(&signed, &tampered(body), NOW),
            scheme.wrong.verify(&signed, body, NOW),
        ] {
            assert!(
                matches!(result, Err(VerifyError::NoMatchingSignature { .. })),
                "{result:?}"
            );
        }
    }
});
