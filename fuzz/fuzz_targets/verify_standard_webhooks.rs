//! `StandardWebhooksVerifier` on hostile deliveries, with a `whsec_` secret (`v1`), a `whpk_`
//! ed25519 public key (`v1a`), or both. Properties (Standard Webhooks 1.0.0 and
//! crates/idem-http/src/verify/standard_webhooks.rs):
//! - whatever the bytes, `verify` returns, and an error names no secret or computed signature;
//! - it accepts exactly the deliveries with `webhook-id` (not empty), `webhook-timestamp` (fresh
//!   decimal seconds) and `webhook-signature` once each, whose space-separated entries of the
//!   versions it has keys for number at most 16 and include a `v1,<base64>` HMAC-SHA256 of
//!   `"{id}.{timestamp}.{body}"` under the decoded secret, or a `v1a,<base64>` ed25519 signature
//!   of it under the public key (checked here with ed25519-dalek's strict verification);
//! - the body signed both ways is accepted by each verifier; a changed body, or verifiers
//!   without the keys, are refused as `no_matching_signature`; signed 301 s ago, as stale.

#![no_main]

use std::sync::LazyLock;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
use idem_fuzz::{NOW, NOW_SECS, TOLERANCE_SECS, check_error, delivery, fresh, hmac_sha256};
use idem_fuzz::{single, tampered, with_header};
use idem_http::http::HeaderMap;
use idem_http::verify::standard_webhooks::{
    ID_HEADER, SIGNATURE_HEADER, StandardWebhooksVerifier, TIMESTAMP_HEADER,
};
use idem_http::verify::{MAX_SIGNATURES, Verifier, VerifyError};
use libfuzzer_sys::fuzz_target;

const SECRET_BYTES: &[u8] = b"fuzz-standard-webhooks-secret-5f";
const OTHER_BYTES: &[u8] = b"rotated-out-standard-secret-f5";
const SEED: [u8; 32] = [0x42; 32];
const OTHER_SEED: [u8; 32] = [0x24; 32];
const MSG_ID: &str = "msg_2KWPBgLlAfxdpx2AI54pPJ85f1W";

fn whsec(bytes: &[u8]) -> String {
    format!("whsec_{}", STANDARD.encode(bytes))
}

fn whpk(seed: &[u8; 32]) -> String {
    let key = SigningKey::from_bytes(seed).verifying_key();
    format!("whpk_{}", STANDARD.encode(key.to_bytes()))
}

/// The sender's signing key, derived once.
static SIGNING: LazyLock<SigningKey> = LazyLock::new(|| SigningKey::from_bytes(&SEED));

/// A verifier and the keys it holds: HMAC secrets and ed25519 public keys.
struct Keys {
    verifier: StandardWebhooksVerifier,
    secrets: Vec<&'static [u8]>,
    public_keys: Vec<VerifyingKey>,
}

impl Keys {
    fn new(secrets: Vec<&'static [u8]>, seeds: Vec<[u8; 32]>) -> Self {
        let configured: Vec<String> = secrets
            .iter()
            .map(|s| whsec(s))
            .chain(seeds.iter().map(whpk))
            .collect();
        Self {
            verifier: StandardWebhooksVerifier::new(&configured).unwrap(),
            secrets,
            public_keys: seeds
                .iter()
                .map(|seed| SigningKey::from_bytes(seed).verifying_key())
                .collect(),
        }
    }

    /// The specification's rule, under these keys.
    fn accepts(&self, headers: &HeaderMap, body: &[u8]) -> bool {
        let (Some(id), Some(timestamp), Some(value)) = (
            single(headers, ID_HEADER),
            single(headers, TIMESTAMP_HEADER),
            single(headers, SIGNATURE_HEADER),
        ) else {
            return false;
        };
        let message = [id.as_bytes(), b".", timestamp.as_bytes(), b".", body].concat();
        let listed: Vec<(&str, &str)> = value
            .split_ascii_whitespace()
            .filter_map(|entry| entry.split_once(','))
            .filter(|(version, _)| {
                (*version == "v1" && !self.secrets.is_empty())
                    || (*version == "v1a" && !self.public_keys.is_empty())
            })
            .collect();
        let matches = |&(version, text): &(&str, &str)| {
            let Ok(sig) = STANDARD.decode(text) else {
                return false;
            };
            if version == "v1" {
                self.secrets
                    .iter()
                    .any(|key| sig == hmac_sha256(key, &[&message]))
            } else {
                <[u8; 64]>::try_from(sig.as_slice()).is_ok_and(|sig| {
                    let sig = Signature::from_bytes(&sig);
                    self.public_keys
                        .iter()
                        .any(|key| key.verify_strict(&message, &sig).is_ok())
                })
            }
        };
        !id.is_empty()
            && fresh(timestamp)
            && listed.len() <= MAX_SIGNATURES
            && listed.iter().any(matches)
    }
}

static VERIFIERS: LazyLock<[Keys; 3]> = LazyLock::new(|| {
    [
        Keys::new(vec![SECRET_BYTES], vec![SEED]),
        Keys::new(vec![OTHER_BYTES, SECRET_BYTES], vec![]),
        Keys::new(vec![], vec![OTHER_SEED, SEED]),
    ]
});
static WRONG: LazyLock<Keys> = LazyLock::new(|| Keys::new(vec![OTHER_BYTES], vec![OTHER_SEED]));

/// Headers signed at `t` with the secret (`v1`) and the seed (`v1a`).
fn signed(headers: &HeaderMap, t: i64, body: &[u8]) -> (HeaderMap, [String; 2]) {
    let t = t.to_string();
    let message = [MSG_ID.as_bytes(), b".", t.as_bytes(), b".", body].concat();
    let v1 = STANDARD.encode(hmac_sha256(SECRET_BYTES, &[&message]));
    let v1a = STANDARD.encode(SIGNING.sign(&message).to_bytes());
    let headers = with_header(headers, ID_HEADER, MSG_ID);
    let headers = with_header(&headers, TIMESTAMP_HEADER, &t);
    let headers = with_header(&headers, SIGNATURE_HEADER, &format!("v1,{v1} v1a,{v1a}"));
    (headers, [v1, v1a])
}

fuzz_target!(|data: &[u8]| {
    let (headers, body) = delivery(data);
    let (good, computed) = signed(&headers, NOW_SECS, body);
    let (stale, _) = signed(&headers, NOW_SECS - TOLERANCE_SECS - 1, body);
    let secrets = [
        whsec(SECRET_BYTES),
        whsec(OTHER_BYTES),
        STANDARD.encode(SECRET_BYTES),
        format!("whsk_{}", STANDARD.encode(SEED)),
    ];
    let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
    let computed: Vec<&str> = computed.iter().map(String::as_str).collect();

    for keys in VERIFIERS.iter().chain([&*WRONG]) {
        match keys.verifier.verify(&headers, body, NOW) {
            Ok(()) => assert!(keys.accepts(&headers, body), "accepted {headers:?}"),
            Err(error) => {
                check_error(&error, &secrets, &computed);
                assert!(
                    !keys.accepts(&headers, body),
                    "refused a signed delivery: {error}"
                );
            }
        }
    }
    for keys in VERIFIERS.iter() {
        assert_eq!(keys.verifier.verify(&good, body, NOW), Ok(()));
        let result = keys.verifier.verify(&good, &tampered(body), NOW);
        assert!(
            matches!(result, Err(VerifyError::NoMatchingSignature { .. })),
            "{result:?}"
        );
        assert!(matches!(
            keys.verifier.verify(&stale, body, NOW),
            Err(VerifyError::TimestampOutOfTolerance { .. })
        ));
    }
    let result = WRONG.verifier.verify(&good, body, NOW);
    assert!(
        matches!(result, Err(VerifyError::NoMatchingSignature { .. })),
        "{result:?}"
    );
});
