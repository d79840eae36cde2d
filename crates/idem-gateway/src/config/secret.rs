//! Secrets read from the environment; never printed.

use std::fmt;

use super::error::ConfigError;

/// A secret read from the environment; never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself.
    pub fn expose(&self) -> &str {
        &self.0
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
