//! CSRF tokens: every state-changing request of the console (a POST) carries, in its form
//! field `csrf`, the token of its session (stored with the session, never in the cookie), and
//! sign-in, which has no session yet, the token of its sign-in cookie (double submit). The
//! session cookie is `SameSite=Strict` as well; the token stands on its own.

use rand::Rng;
use subtle::ConstantTimeEq;

/// The form field carrying the token.
pub(crate) const FIELD: &str = "csrf";

/// A new random token: 32 bytes, hex.
pub(crate) fn new_token() -> String {
    hex::encode(rand::rng().random::<[u8; 32]>())
}

/// Whether `given` is `expected`, compared in constant time; an absent or empty token never
/// matches.
pub(crate) fn matches(expected: &str, given: Option<&str>) -> bool {
    match given {
        Some(given) if !given.is_empty() && !expected.is_empty() => {
            bool::from(expected.as_bytes().ct_eq(given.as_bytes()))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_same_token_matches() {
        let token = new_token();
        assert_eq!(token.len(), 64);
        assert_ne!(token, new_token());
        assert!(matches(&token, Some(&token)));
        assert!(!matches(&token, Some(&new_token())));
        assert!(!matches(&token, None));
        assert!(!matches("", Some("")));
    }
}
