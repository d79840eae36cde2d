//! Secrets read from the environment (`*_env`) or from a file (`*_file`, as mounted secrets
//! are: read again by every reload); never printed.

use std::cell::RefCell;
use std::fmt;
use std::path::Path;

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

/// Where a secret is read from.
#[derive(Debug, Clone, Copy)]
pub(super) enum SecretRef<'a> {
    /// An environment variable (`*_env`).
    Env(&'a str),
    /// A file (`*_file`): its contents without trailing whitespace.
    File(&'a Path),
}

impl<'a> SecretRef<'a> {
    /// The one of `env` and `file` that is given, if any.
    ///
    /// # Errors
    /// [`ConfigError::SecretTwice`] when both are.
    pub(super) fn either(
        owner: impl FnOnce() -> String,
        (env_key, env): (&'static str, Option<&'a str>),
        (file_key, file): (&'static str, Option<&'a Path>),
    ) -> Result<Option<Self>, ConfigError> {
        match (env, file) {
            (Some(_), Some(_)) => Err(ConfigError::SecretTwice {
                owner: owner(),
                env_key,
                file_key,
            }),
            (Some(var), None) => Ok(Some(Self::Env(var))),
            (None, Some(path)) => Ok(Some(Self::File(path))),
            (None, None) => Ok(None),
        }
    }
}

/// How a secret is read: `(owner, where)` to its value, or [`ConfigError::MissingSecret`] /
/// [`ConfigError::SecretFile`] naming both.
pub(super) type SecretLookup<'a> =
    dyn Fn(String, SecretRef<'_>) -> Result<Secret, ConfigError> + 'a;

/// The secrets not set, as `(owner, variable, set but empty)`, of a configuration read for an
/// operator command.
pub(super) type NotLoaded = RefCell<Vec<(String, String, bool)>>;

/// The [`SecretLookup`] of a configuration read with `env`: with `required`, a variable not set
/// (or empty) is [`ConfigError::MissingSecret`] and a file that cannot be read (or is empty)
/// [`ConfigError::SecretFile`]; without, the secret is left unloaded and noted in `not_loaded`.
pub(super) fn reader<'a>(
    env: &'a dyn Fn(&str) -> Option<String>,
    required: bool,
    not_loaded: &'a NotLoaded,
) -> impl Fn(String, SecretRef<'_>) -> Result<Secret, ConfigError> + 'a {
    move |owner: String, at: SecretRef<'_>| {
        let var = match at {
            SecretRef::Env(var) => var,
            SecretRef::File(path) => return from_file(owner, path, required, not_loaded),
        };
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

/// The secret in the file at `path`, without trailing whitespace (a mounted secret often ends
/// with a newline).
fn from_file(
    owner: String,
    path: &Path,
    required: bool,
    not_loaded: &NotLoaded,
) -> Result<Secret, ConfigError> {
    let reason = match std::fs::read_to_string(path) {
        Ok(text) if !text.trim_end().is_empty() => {
            return Ok(Secret::new(text.trim_end().to_owned()));
        }
        Ok(_) => "is empty".to_owned(),
        Err(e) => format!("cannot be read: {e}"),
    };
    if required {
        return Err(ConfigError::SecretFile {
            owner,
            path: path.display().to_string(),
            reason,
        });
    }
    let empty = reason == "is empty";
    not_loaded
        .borrow_mut()
        .push((owner, path.display().to_string(), empty));
    Ok(Secret::not_loaded())
}
