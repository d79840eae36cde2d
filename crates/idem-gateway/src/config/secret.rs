//! Secrets read from the environment; never printed.

use std::fmt;

use super::error::ConfigError;

/// A secret read from the environment; never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Option<String>);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(Some(value.into()))
    }

    /// The stand-in for a secret whose variable is not set, in a configuration read for an
    /// operator command ([`Config::for_operations`](super::Config::for_operations)).
    pub(super) fn not_loaded() -> Self {
        Self(None)
    }

    /// Whether the secret was read (`false` only in a configuration read for an operator
    /// command, whose checks of the secret's value are skipped).
    pub fn is_loaded(&self) -> bool {
        self.0.is_some()
    }

    /// The secret itself; empty when it was not loaded.
    pub fn expose(&self) -> &str {
        self.0.as_deref().unwrap_or_default()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(…)")
    }
}

/// How a secret is read: `(owner, variable)` to its value, or [`ConfigError::MissingSecret`]
/// naming both.
pub(super) type SecretLookup<'a> = dyn Fn(String, &str) -> Result<Secret, ConfigError> + 'a;
