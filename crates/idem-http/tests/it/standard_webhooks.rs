//! Standard Webhooks: `v1` (HMAC-SHA256, `whsec_`) and `v1a` (ed25519, `whpk_`) over
//! `"{id}.{timestamp}.{body}"`.

use idem_core::Timestamp;
use idem_http::verify::standard_webhooks::{
    ID_HEADER, SIGNATURE_HEADER, StandardWebhooksVerifier, public_key, sign, sign_v1a,
};
use idem_http::verify::{ConfigError, Verifier, VerifyError};

use crate::support::{
    MSG_ID, NOW_SECS, SW_PUBLIC_KEY, SW_SECRET, SW_SIGNING_KEY, TRICKY_BODY, now, sw_headers,
};

// The test vector of the specification's reference libraries (libraries/*/ in the
// standard-webhooks repository); the specification text itself shows a signature without its
// secret. Both signatures were recomputed independently with Python (`hmac`, `cryptography`).
const VECTOR_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const VECTOR_TIMESTAMP: i64 = 1_614_265_330;
const VECTOR_BODY: &[u8] = br#"{"test": 2432232314}"#;
const VECTOR_V1: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
const VECTOR_V1A: &str =
    "v1a,tQ9V2XOqn7jL/DQenEFpqIugdBVtiMmER5mhSkXBNwM0mkATuDe6KYYUuxqtaiHeYGb7KaaBRdM5WqyeFiL8Ag==";

fn vector_now() -> Timestamp {
    Timestamp(VECTOR_TIMESTAMP * 1000)
}

fn verify_with(keys: &[&str], signature: &str) -> Result<(), VerifyError> {
    StandardWebhooksVerifier::new(keys).unwrap().verify(
        &sw_headers(MSG_ID, NOW_SECS, signature),
        TRICKY_BODY,
        now(),
    )
}

fn v1(secret: &str) -> String {
    sign(secret, MSG_ID, NOW_SECS, TRICKY_BODY).unwrap()
}

#[test]
fn v1_signs_and_verifies_the_reference_vector() {
    assert_eq!(
        sign(SW_SECRET, VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY).unwrap(),
        VECTOR_V1
    );
    let headers = sw_headers(VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_V1);
    let verifier = StandardWebhooksVerifier::new([SW_SECRET]).unwrap();
    assert_eq!(verifier.verify(&headers, VECTOR_BODY, vector_now()), Ok(()));
}

#[test]
fn v1a_signs_and_verifies_the_reference_vector_with_the_public_key() {
    assert_eq!(public_key(SW_SIGNING_KEY).unwrap(), SW_PUBLIC_KEY);
    assert_eq!(
        sign_v1a(SW_SIGNING_KEY, VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY).unwrap(),
        VECTOR_V1A
    );
    let headers = sw_headers(VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_V1A);
    let verifier = StandardWebhooksVerifier::new([SW_PUBLIC_KEY]).unwrap();
    assert_eq!(verifier.verify(&headers, VECTOR_BODY, vector_now()), Ok(()));
    // Another message id under the same signature does not verify: the id is signed.
    let other = sw_headers("msg_other", VECTOR_TIMESTAMP, VECTOR_V1A);
    assert!(matches!(
        verifier.verify(&other, VECTOR_BODY, vector_now()),
        Err(VerifyError::NoMatchingSignature { .. })
    ));
}

#[test]
fn an_empty_signature_is_never_valid() {
    for header in ["v1,", "v1, v1,", "v1a,"] {
        assert_eq!(
            verify_with(&[SW_SECRET, SW_PUBLIC_KEY], header)
                .unwrap_err()
                .to_string(),
            "header `webhook-signature` holds an empty signature; an empty signature is never valid",
            "{header:?}"
        );
    }
    // An empty entry beside a valid one neither matches nor spoils the valid one.
    assert_eq!(
        verify_with(&[SW_SECRET], &format!("v1, {}", v1(SW_SECRET))),
        Ok(())
    );
}

#[test]
fn a_header_with_old_and_new_signatures_verifies_with_either_secret() {
    let old = "whsec_b2xkLXNlY3JldC1vbGQtc2VjcmV0LW9sZA==";
    let new = "whsec_bmV3LXNlY3JldC1uZXctc2VjcmV0LW5ldw==";
    let header = format!("{} {}", v1(old), v1(new));
    assert_eq!(verify_with(&[old], &header), Ok(()));
    assert_eq!(verify_with(&[new], &header), Ok(()));
    assert_eq!(verify_with(&[new, old], &header), Ok(()));
    assert_eq!(
        verify_with(&[SW_SECRET], &header),
        Err(VerifyError::NoMatchingSignature {
            signatures: 2,
            secrets: 1
        })
    );
}

#[test]
fn v1_and_v1a_mix_and_unknown_versions_are_skipped() {
    let v1a = sign_v1a(SW_SIGNING_KEY, MSG_ID, NOW_SECS, TRICKY_BODY).unwrap();
    let header = format!(
        "v2,AAAA nonsense {} {v1a}",
        v1("whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAA")
    );
    assert_eq!(verify_with(&[SW_PUBLIC_KEY], &header), Ok(()));
    assert_eq!(verify_with(&[SW_SECRET, SW_PUBLIC_KEY], &header), Ok(()));
    // Only v1 entries for a verifier that holds only public keys: nothing it can check.
    assert_eq!(
        verify_with(&[SW_PUBLIC_KEY], &v1(SW_SECRET))
            .unwrap_err()
            .to_string(),
        "header `webhook-signature` holds no signature this source can check; expected `v1a,<base64>`"
    );
    // A v1 signature placed under the v1a label (and the reverse) does not verify.
    let relabelled = v1(SW_SECRET).replacen("v1,", "v1a,", 1);
    assert!(matches!(
        verify_with(&[SW_SECRET, SW_PUBLIC_KEY], &relabelled),
        Err(VerifyError::NoMatchingSignature { .. })
    ));
    let relabelled = v1a.replacen("v1a,", "v1,", 1);
    assert!(matches!(
        verify_with(&[SW_SECRET, SW_PUBLIC_KEY], &relabelled),
        Err(VerifyError::NoMatchingSignature { .. })
    ));
}

#[test]
fn headers_are_required_and_checked() {
    let verifier = StandardWebhooksVerifier::new([SW_SECRET]).unwrap();
    let signature = v1(SW_SECRET);
    let mut headers = sw_headers(MSG_ID, NOW_SECS, &signature);
    headers.remove(ID_HEADER);
    assert_eq!(
        verifier
            .verify(&headers, TRICKY_BODY, now())
            .unwrap_err()
            .to_string(),
        "missing header `webhook-id`"
    );
    assert_eq!(
        verifier
            .verify(&sw_headers("", NOW_SECS, &signature), TRICKY_BODY, now())
            .unwrap_err()
            .to_string(),
        "header `webhook-id` is malformed: the message id is empty; expected `<message id>`"
    );
    let mut headers = sw_headers(MSG_ID, NOW_SECS, &signature);
    headers.insert("webhook-timestamp", "1.7e9".parse().unwrap());
    assert_eq!(
        verifier
            .verify(&headers, TRICKY_BODY, now())
            .unwrap_err()
            .to_string(),
        "header `webhook-timestamp` is malformed: the timestamp is not decimal Unix seconds; expected `<unix seconds>`"
    );
    let mut headers = sw_headers(MSG_ID, NOW_SECS, &signature);
    headers.remove(SIGNATURE_HEADER);
    assert_eq!(
        verifier
            .verify(&headers, TRICKY_BODY, now())
            .unwrap_err()
            .to_string(),
        "missing header `webhook-signature`"
    );
    assert_eq!(
        verify_with(&[SW_SECRET], "v1,!!!").unwrap_err().to_string(),
        "header `webhook-signature` is malformed: the signature is not valid base64; expected `v1,<base64>`"
    );
}

/// Issue 15, item 2: a `whsec_` secret of 32 bytes written without its `=` padding (`whsec_`
/// and 43 characters, as the reference libraries accept it) is the same secret as the padded
/// one, for verifying and for signing.
#[test]
fn a_secret_without_padding_is_the_padded_secret() {
    // The bytes 0, 1, …, 31; the signature of the reference vector's message with them was
    // computed with Python's `hmac`.
    let padded = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
    let unpadded = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8";
    assert_eq!(unpadded.len(), 6 + 43);
    let expected = "v1,O4Gjv1HqPqsMrjmczoggs/sWA8gZD0VyHG+fLh4+ktI=";
    for secret in [padded, unpadded] {
        assert_eq!(
            sign(secret, VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY).unwrap(),
            expected,
            "{secret}"
        );
        let verifier = StandardWebhooksVerifier::new([secret]).unwrap();
        let headers = sw_headers(VECTOR_ID, VECTOR_TIMESTAMP, expected);
        assert_eq!(verifier.verify(&headers, VECTOR_BODY, vector_now()), Ok(()));
    }
}

#[test]
fn keys_are_checked_at_construction() {
    let cases: [(&str, &str); 8] = [
        (
            "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "a Standard Webhooks secret has the wrong prefix; expected `whsec_<base64 secret>` or `whpk_<base64 ed25519 public key>`",
        ),
        (
            "whsec_not base64!",
            "a Standard Webhooks key is not valid base64 after its prefix; expected `whsec_` followed by the base64 of the secret",
        ),
        (
            "whsec_",
            "a Standard Webhooks key decodes to 0 bytes; expected `whsec_` followed by the base64 of the secret",
        ),
        (
            "whpk_AAAA",
            "a Standard Webhooks key decodes to 3 bytes; expected `whpk_` followed by the base64 of a 32-byte ed25519 public key",
        ),
        (
            "whpk_???",
            "a Standard Webhooks key is not valid base64 after its prefix; expected `whpk_` followed by the base64 of a 32-byte ed25519 public key",
        ),
        // The identity point: a weak key any forged signature could match.
        (
            "whpk_AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
            "a Standard Webhooks `whpk_` key is not a valid ed25519 public key; expected the sender's published `whpk_` key",
        ),
        (
            SW_SIGNING_KEY,
            "a Standard Webhooks `whsk_` signing key was configured for verification; configure its `whpk_` public key instead",
        ),
        (
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n",
            "a Standard Webhooks secret starts or ends with whitespace; expected `whsec_<base64 secret>` or `whpk_<base64 ed25519 public key>`, exactly as the sender shows it",
        ),
    ];
    for (key, message) in cases {
        let error = StandardWebhooksVerifier::new([key]).unwrap_err();
        assert_eq!(error.to_string(), message, "{key:?}");
    }
    assert!(matches!(
        StandardWebhooksVerifier::new(Vec::<&str>::new()),
        Err(ConfigError::NoSecrets {
            scheme: "Standard Webhooks",
            ..
        })
    ));
}

#[test]
fn signers_refuse_the_wrong_kind_of_key() {
    assert!(matches!(
        sign(SW_PUBLIC_KEY, MSG_ID, NOW_SECS, b""),
        Err(ConfigError::WrongPrefix { .. })
    ));
    assert!(matches!(
        sign_v1a(SW_SECRET, MSG_ID, NOW_SECS, b""),
        Err(ConfigError::WrongPrefix { .. })
    ));
    assert!(matches!(
        sign_v1a("whsk_AAAA", MSG_ID, NOW_SECS, b""),
        Err(ConfigError::KeyLength { len: 3, .. })
    ));
    assert!(matches!(
        public_key(""),
        Err(ConfigError::EmptySecret { .. })
    ));
}
