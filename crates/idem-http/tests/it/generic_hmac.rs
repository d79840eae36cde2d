//! Generic HMAC-SHA256: a configured header, hex or base64, an optional prefix.

use idem_http::verify::generic_hmac::{GenericHmacVerifier, sign};
use idem_http::verify::{ConfigError, Encoding, Verifier, VerifyError, github, shopify};

use crate::support::{GITHUB_PUSH, headers, now};

#[test]
fn reproduces_githubs_and_shopifys_schemes() {
    assert_eq!(
        sign("s", Encoding::Hex, "sha256=", GITHUB_PUSH),
        github::sign("s", GITHUB_PUSH)
    );
    assert_eq!(
        sign("s", Encoding::Base64, "", GITHUB_PUSH),
        shopify::sign("s", GITHUB_PUSH)
    );
}

#[test]
fn verifies_with_and_without_a_prefix() {
    let hex = GenericHmacVerifier::new("X-Webhook-Signature", Encoding::Hex, ["s"]).unwrap();
    let value = sign("s", Encoding::Hex, "", GITHUB_PUSH);
    // The header is found whatever the case the sender used.
    assert_eq!(
        hex.verify(
            &headers(&[("x-webhook-signature", &value)]),
            GITHUB_PUSH,
            now()
        ),
        Ok(())
    );

    let prefixed = hex.clone().with_prefix("sha256=");
    assert_eq!(
        prefixed
            .verify(
                &headers(&[("X-Webhook-Signature", &value)]),
                GITHUB_PUSH,
                now()
            )
            .unwrap_err()
            .to_string(),
        "header `X-Webhook-Signature` is malformed: the signature prefix is missing; expected `sha256=<hex>`"
    );
    let with_prefix = format!("sha256={value}");
    assert_eq!(
        prefixed.verify(
            &headers(&[("X-Webhook-Signature", &with_prefix)]),
            GITHUB_PUSH,
            now()
        ),
        Ok(())
    );
    assert_eq!(
        prefixed.verify(
            &headers(&[("X-Webhook-Signature", "sha256=")]),
            GITHUB_PUSH,
            now()
        ),
        Err(VerifyError::EmptySignature {
            header: "X-Webhook-Signature".into()
        })
    );

    let base64 = GenericHmacVerifier::new("X-Sig", Encoding::Base64, ["s"]).unwrap();
    let value = sign("s", Encoding::Base64, "", GITHUB_PUSH);
    assert_eq!(
        base64.verify(&headers(&[("X-Sig", &value)]), GITHUB_PUSH, now()),
        Ok(())
    );
    assert_eq!(
        base64
            .verify(&headers(&[("X-Sig", "zz")]), GITHUB_PUSH, now())
            .unwrap_err()
            .to_string(),
        "header `X-Sig` is malformed: the signature is not valid base64; expected `<base64>`"
    );
    assert_eq!(
        base64
            .verify(&headers(&[]), GITHUB_PUSH, now())
            .unwrap_err()
            .to_string(),
        "missing header `X-Sig`"
    );
}

#[test]
fn configuration_is_checked_at_construction() {
    for name in ["", "X Signature", "X-Sig:", "Ä"] {
        assert_eq!(
            GenericHmacVerifier::new(name, Encoding::Hex, ["s"]).unwrap_err(),
            ConfigError::InvalidHeaderName {
                name: name.to_owned()
            }
        );
    }
    assert!(matches!(
        GenericHmacVerifier::new("X-Sig", Encoding::Hex, Vec::<&str>::new()),
        Err(ConfigError::NoSecrets {
            scheme: "generic HMAC",
            ..
        })
    ));
}
