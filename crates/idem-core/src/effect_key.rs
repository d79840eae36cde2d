//! Effect keys: the idempotency key of one external effect (docs/design.md C6).

use std::fmt;

use sha2::{Digest, Sha256};

use crate::id::check_id;
use crate::{DedupKey, Error, Name};

/// The longest effect key, in bytes. Providers take the key as an HTTP header value with a limit:
/// Stripe's `Idempotency-Key` is at most 255 characters
/// (<https://docs.stripe.com/api/idempotent_requests>).
pub const MAX_EFFECT_KEY_BYTES: usize = 255;

/// The key of one external effect (a charge, an email, an API call): the primary key of the
/// effect ledger and the idempotency key sent to the provider on every attempt (docs/design.md §1, C6).
///
/// An effect key is stable across retries, replays, instances and code paths: it is built only
/// from what identifies the effect, never from the clock, the host, the attempt or a random value.
/// Every key is 1 to [`MAX_EFFECT_KEY_BYTES`] bytes of printable ASCII (`0x20`–`0x7E`) with no
/// leading or trailing space, so it can be sent as an HTTP header value unchanged.
///
/// Two ways to make one:
///
/// | constructor | text |
/// |---|---|
/// | [`derive`](Self::derive) | `{consumer}/{effect}/{dedup key}`, e.g. `billing_v2/send_receipt/stripe:evt_C` |
/// | [`derive`](Self::derive), dedup key not printable ASCII or key over 255 bytes | `{consumer}/{effect}/#sha256:{64 hex digits of SHA-256(dedup key)}` |
/// | [`intent`](Self::intent) | the business intent key as given, e.g. `charge:order:50266` |
///
/// Derived keys: names hold neither `/` nor `#`, and no dedup key starts with `#` (every dedup key
/// starts with a source name, `command/` or `aggregate/`), so a plain and a hashed key never
/// share a text form. The hashed form is at most 64 + 1 + 64 + 1 + 71 = 201 bytes.
///
/// Use [`derive`](Self::derive) for an effect of one event (a receipt for this payment), and
/// [`intent`](Self::intent) when several events or code paths must lead to one effect (the
/// checkout path and the webhook path both charging order 50266).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EffectKey(String);

impl EffectKey {
    /// The key of effect `effect` of the event claimed as `key` by `consumer`: a pure function of
    /// the three, in the form described on [`EffectKey`].
    ///
    /// The dedup key is hashed (SHA-256, lower-case hex) when it holds a byte outside printable
    /// ASCII (event ids may hold any UTF-8) or when the plain form would be longer than
    /// [`MAX_EFFECT_KEY_BYTES`]; otherwise it is kept as is, so operators can read it.
    pub fn derive(consumer: &Name, key: &DedupKey, effect: &Name) -> Self {
        let plain = format!("{consumer}/{effect}/{key}");
        let printable = key.as_str().bytes().all(is_printable) && !key.as_str().ends_with(' ');
        if printable && plain.len() <= MAX_EFFECT_KEY_BYTES {
            return Self(plain);
        }
        let digest: [u8; 32] = Sha256::digest(key.as_str().as_bytes()).into();
        let mut hex = String::with_capacity(64);
        for byte in digest {
            hex.push(char::from(HEX[usize::from(byte >> 4)]));
            hex.push(char::from(HEX[usize::from(byte & 0x0f)]));
        }
        Self(format!("{consumer}/{effect}/#sha256:{hex}"))
    }

    /// A business intent key, such as `charge:order:50266`, checked and kept byte for byte.
    ///
    /// # Errors
    /// [`Error::BlankId`] (what = "effect key") when `key` is empty or only whitespace;
    /// [`Error::IdTooLong`] past [`MAX_EFFECT_KEY_BYTES`]; [`Error::InvalidEffectKey`] when it
    /// holds a byte outside printable ASCII (`0x20`–`0x7E`) or starts or ends with a space.
    pub fn intent(key: &str) -> Result<Self, Error> {
        let key = check_id("effect key", key.to_owned())?;
        if !key.bytes().all(is_printable) {
            return Err(Error::InvalidEffectKey {
                value: key,
                reason: "it holds a character outside printable ASCII",
            });
        }
        if key.starts_with(' ') || key.ends_with(' ') {
            return Err(Error::InvalidEffectKey {
                value: key,
                reason: "it starts or ends with a space",
            });
        }
        Ok(Self(key))
    }

    /// The key as text: what the ledger stores and the provider receives.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for EffectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Printable ASCII: what an HTTP header value carries without encoding (RFC 9110 §5.5 allows
/// visible ASCII and spaces; obs-text is not portable).
fn is_printable(b: u8) -> bool {
    (0x20..=0x7e).contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Entity, EventId};
    use proptest::prelude::*;

    fn name(what: &'static str, s: &str) -> Name {
        Name::new(what, s).unwrap()
    }

    #[test]
    fn derived_text_forms() {
        let consumer = name("consumer", "billing_v2");
        let receipt = name("effect", "send_receipt");
        let stripe = name("source", "stripe");
        let key = DedupKey::from_event(&stripe, &EventId::new("evt_C").unwrap());
        assert_eq!(
            EffectKey::derive(&consumer, &key, &receipt).as_str(),
            "billing_v2/send_receipt/stripe:evt_C"
        );
        let order = Entity::new("order", "o:1").unwrap();
        assert_eq!(
            EffectKey::derive(&consumer, &DedupKey::aggregate(&order, 7), &receipt).to_string(),
            "billing_v2/send_receipt/aggregate/order:o:1:7"
        );
        // SHA-256("stripe:évt") computed independently: `printf 'stripe:\xc3\xa9vt' | sha256sum`.
        let unicode = DedupKey::from_event(&stripe, &EventId::new("évt").unwrap());
        let hashed = EffectKey::derive(&consumer, &unicode, &receipt);
        assert_eq!(
            hashed.as_str(),
            "billing_v2/send_receipt/#sha256:\
             e630c21350a4098d76809cd5c30024e2c30b897c1e6555ee1db7fd1cc5ffa444"
        );
    }

    #[test]
    fn long_keys_are_hashed_to_at_most_255_bytes() {
        let consumer = name("consumer", &"c".repeat(64));
        let effect = name("effect", &"e".repeat(64));
        let key = DedupKey::command("x".repeat(255)).unwrap();
        let derived = EffectKey::derive(&consumer, &key, &effect);
        assert_eq!(derived.as_str().len(), 64 + 1 + 64 + 1 + 8 + 64);
        assert!(derived.as_str().contains("/#sha256:"));
        // A short one stays readable.
        let short = DedupKey::command("x".repeat(100)).unwrap();
        let plain = EffectKey::derive(&name("consumer", "c"), &short, &name("effect", "e"));
        assert_eq!(plain.as_str(), format!("c/e/command/{}", "x".repeat(100)));
    }

    #[test]
    fn intent_keys_are_checked() {
        assert_eq!(
            EffectKey::intent("charge:order:50266").unwrap().as_str(),
            "charge:order:50266"
        );
        assert_eq!(
            EffectKey::intent(" \t"),
            Err(Error::BlankId { what: "effect key" })
        );
        assert_eq!(
            EffectKey::intent(&"k".repeat(256)),
            Err(Error::IdTooLong {
                what: "effect key",
                len: 256,
                max: 255
            })
        );
        assert!(EffectKey::intent(&"k".repeat(255)).is_ok());
        for bad in [
            "charge\norder",
            "charge:ordér",
            " charge",
            "charge ",
            "a\u{7f}",
        ] {
            assert!(
                matches!(EffectKey::intent(bad), Err(Error::InvalidEffectKey { .. })),
                "{bad:?}"
            );
        }
    }

    proptest! {
        // Stable: the same parts give the same key; different dedup keys give different keys;
        // every key is printable ASCII within the limit.
        #[test]
        fn derive_is_stable_injective_and_sendable(
            a in "[ -~\u{e9}\u{1F600}]{1,300}",
            b in "[ -~\u{e9}]{1,300}",
        ) {
            prop_assume!(!a.trim().is_empty() && !b.trim().is_empty());
            let (consumer, effect) = (name("consumer", "billing_v2"), name("effect", "email"));
            let ka = DedupKey::command(a.clone());
            let kb = DedupKey::command(b.clone());
            prop_assume!(ka.is_ok() && kb.is_ok());
            let (ka, kb) = (ka.unwrap(), kb.unwrap());
            let ea = EffectKey::derive(&consumer, &ka, &effect);
            prop_assert_eq!(&ea, &EffectKey::derive(&consumer, &ka.clone(), &effect));
            prop_assert_eq!(ea == EffectKey::derive(&consumer, &kb, &effect), a == b);
            prop_assert!(ea.as_str().len() <= MAX_EFFECT_KEY_BYTES);
            prop_assert!(ea.as_str().bytes().all(is_printable));
            prop_assert!(!ea.as_str().ends_with(' '));
        }
    }
}
