//! HMAC-SHA256 secrets, keyed once and compared in constant time.

use std::fmt;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use subtle::{Choice, ConstantTimeEq};

use super::VerifyError;

/// One configured HMAC-SHA256 secret, kept as its keyed state so the key is hashed once, not per
/// delivery. Its `Debug` never shows the key.
#[derive(Clone)]
pub(crate) struct HmacKey(Hmac<Sha256>);

impl HmacKey {
    pub(crate) fn new(key: &[u8]) -> Self {
        // HMAC pads or hashes a key of any length, so `new_from_slice` cannot fail.
        Self(Hmac::new_from_slice(key).expect("HMAC accepts keys of any length"))
    }

    /// The tag over the concatenation of `parts`, which saves copying the body to prepend a
    /// timestamp or id.
    pub(crate) fn tag(&self, parts: &[&[u8]]) -> [u8; 32] {
        let mut mac = self.0.clone();
        for part in parts {
            mac.update(part);
        }
        mac.finalize().into_bytes().into()
    }
}

impl fmt::Debug for HmacKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HmacKey(<redacted>)")
    }
}

/// Whether any of `signatures` equals the tag of `parts` under any of `keys`. Every pair is
/// compared in constant time and the loop never stops early, so timing shows neither which
/// secret matched nor how many bytes of a forged signature were right.
pub(crate) fn any_matches(
    keys: &[HmacKey],
    parts: &[&[u8]],
    signatures: &[impl AsRef<[u8]>],
) -> bool {
    let mut matched = Choice::from(0);
    for key in keys {
        let tag = key.tag(parts);
        for signature in signatures {
            matched |= tag.as_slice().ct_eq(signature.as_ref());
        }
    }
    matched.into()
}

/// `Ok` when [`any_matches`]; otherwise [`VerifyError::NoMatchingSignature`] with both counts.
pub(crate) fn verify_any(
    keys: &[HmacKey],
    parts: &[&[u8]],
    signatures: &[impl AsRef<[u8]>],
) -> Result<(), VerifyError> {
    if any_matches(keys, parts, signatures) {
        Ok(())
    } else {
        Err(VerifyError::NoMatchingSignature {
            signatures: signatures.len(),
            secrets: keys.len(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_matches_rfc_4231_test_case_2() {
        let key = HmacKey::new(b"Jefe");
        let tag = key.tag(&[b"what do ya want ", b"for nothing?"]);
        assert_eq!(
            hex::encode(tag),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn any_matches_needs_an_exact_equal_tag() {
        let keys = [HmacKey::new(b"old"), HmacKey::new(b"new")];
        let good = HmacKey::new(b"new").tag(&[b"body"]).to_vec();
        assert!(any_matches(&keys, &[b"body"], &[vec![0; 32], good.clone()]));
        assert!(!any_matches(
            &keys,
            &[b"body!"],
            std::slice::from_ref(&good)
        ));
        assert!(!any_matches(
            &keys,
            &[b"body"],
            &[good[..31].to_vec(), Vec::new()]
        ));
        assert!(!any_matches(&[], &[b"body"], &[good]));
    }

    #[test]
    fn debug_hides_the_key() {
        assert_eq!(
            format!("{:?}", HmacKey::new(b"s3cret")),
            "HmacKey(<redacted>)"
        );
    }
}
