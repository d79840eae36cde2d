//! Secrets read from the environment; never printed.

use std::cell::RefCell;
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

/// The secrets not set, as `(owner, variable, set but empty)`, of a configuration read for an
/// operator command.
pub(super) type NotLoaded = RefCell<Vec<(String, String, bool)>>;

/// The [`SecretLookup`] of a configuration read with `env`: with `required`, a variable not set
/// (or empty) is [`ConfigError::MissingSecret`]; without, the secret is left unloaded and noted
/// in `not_loaded`.
pub(super) fn reader<'a>(
    env: &'a dyn Fn(&str) -> Option<String>,
    required: bool,
    not_loaded: &'a NotLoaded,
) -> impl Fn(String, &str) -> Result<Secret, ConfigError> + 'a {
    move |owner: String, var: &str| {
        if var.trim().is_empty() {
            return Err(ConfigError::EmptySecretVariable { owner });
        }
        match env(var) {
            Some(value) if !value.is_empty() => Ok(Secret::new(value)),
            found if !required => {
                not_loaded
                    .borrow_mut()
                    .push((owner, var.to_owned(), found.is_some()));
                Ok(Secret::not_loaded())
            }
            found => Err(ConfigError::MissingSecret {
                owner,
                var: var.to_owned(),
                empty: found.is_some(),
            }),
        }
    }
}
