//! Names of consumers, sources and aggregate types.

use std::fmt;

use crate::Error;

/// The longest [`Name`], in characters (all ASCII, so also bytes).
pub const MAX_NAME_LEN: usize = 64;

/// A configuration name: a consumer (`billing_v2`), a source (`stripe`) or an aggregate type
/// (`subscription`).
///
/// A name is 1 to [`MAX_NAME_LEN`] characters of `A–Z a–z 0–9 _ . -`. It never holds `:`, which is
/// what makes the text form of a [`DedupKey`](crate::DedupKey) unambiguous.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name(String);

impl Name {
    /// Checks `value` and wraps it.
    ///
    /// `what` names the role in the error ("consumer", "source", …).
    ///
    /// # Errors
    /// [`Error::InvalidName`] when `value` is empty, longer than [`MAX_NAME_LEN`] or holds a
    /// character outside `A–Z a–z 0–9 _ . -`.
    pub fn new(what: &'static str, value: impl Into<String>) -> Result<Self, Error> {
        let value = value.into();
        let valid = !value.is_empty()
            && value.len() <= MAX_NAME_LEN
            && value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
        if valid {
            Ok(Self(value))
        } else {
            Err(Error::InvalidName { what, value })
        }
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_config_names_and_refuses_the_rest() {
        for ok in ["stripe", "billing_v2", "customer.subscription", "a-b"] {
            assert_eq!(Name::new("source", ok).unwrap().as_str(), ok);
        }
        for bad in ["", "a:b", "with space", "ü", &"x".repeat(MAX_NAME_LEN + 1)] {
            assert!(matches!(
                Name::new("source", bad),
                Err(Error::InvalidName { what: "source", .. })
            ));
        }
    }
}
