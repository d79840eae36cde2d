//! What a destination and an HTTP relay target share: an `http://` or `https://` URL, the TLS
//! keys `ca_file`, `client_cert_file` and `client_key_file` (read and checked when the
//! configuration is loaded, so `idem check-config` reports a file that cannot be read or used),
//! and `timeout`.

use std::path::PathBuf;
use std::time::Duration;

use super::duration;
use super::error::{ConfigError, out_of_range};
use crate::tls::{TlsFileError, TlsSettings};

/// The TLS keys of a destination or an HTTP relay, as written.
pub(super) struct TlsKeys {
    /// `ca_file`
    pub ca_file: Option<String>,
    /// `client_cert_file`
    pub client_cert_file: Option<String>,
    /// `client_key_file`
    pub client_key_file: Option<String>,
}

impl TlsKeys {
    /// Whether any of the keys is set.
    fn any(&self) -> bool {
        self.ca_file.is_some() || self.client_cert_file.is_some() || self.client_key_file.is_some()
    }
}

/// The bounds of a `timeout`: its default and range, and the range as said in an error.
pub(super) struct TimeoutBounds {
    /// Without `timeout`.
    pub default: Duration,
    /// The shortest allowed.
    pub min: Duration,
    /// The longest allowed.
    pub max: Duration,
    /// The range in words, such as "between 100ms and 1h".
    pub expected: &'static str,
}

/// Checks `url` (the value of `url_key`; `None` when it is a secret that was not loaded, for an
/// operator command): an `http://` or `https://` URL that parses, and `https://` when `tls` sets
/// any key (certificates given for plain HTTP would silently do nothing). `shown` is the URL as
/// an error may show it. `field(key)` names a key in an error.
///
/// # Errors
/// [`ConfigError::BadValue`] on `url_key` for either.
pub(super) fn check_url(
    field: &dyn Fn(&str) -> String,
    url_key: &str,
    url: Option<&str>,
    shown: &dyn Fn() -> String,
    tls: &TlsKeys,
) -> Result<(), ConfigError> {
    let Some(url) = url else {
        return Ok(());
    };
    let https = url.starts_with("https://");
    if !(https || url.starts_with("http://")) || reqwest::Url::parse(url).is_err() {
        return Err(ConfigError::BadValue {
            field: field(url_key),
            value: shown(),
            expected: "an http:// or https:// URL".into(),
        });
    }
    if !https && tls.any() {
        return Err(ConfigError::BadValue {
            field: field(url_key),
            value: shown(),
            expected: "an https:// URL: ca_file, client_cert_file and client_key_file are for TLS"
                .into(),
        });
    }
    Ok(())
}

/// The TLS settings of `tls` (see [`build`]) and the `timeout` of `text` within `bounds`.
///
/// # Errors
/// As [`build`]; [`ConfigError`] for a `timeout` that is not a duration or out of `bounds`.
pub(super) fn tls_and_timeout(
    field: &dyn Fn(&str) -> String,
    tls: TlsKeys,
    timeout: Option<&str>,
    bounds: &TimeoutBounds,
) -> Result<(Option<TlsSettings>, Duration), ConfigError> {
    let tls = build(
        field,
        tls.ca_file,
        tls.client_cert_file,
        tls.client_key_file,
    )?;
    let timeout = match timeout {
        Some(text) => {
            let d = duration::parse(&field("timeout"), text)?;
            if !(bounds.min..=bounds.max).contains(&d) {
                return Err(out_of_range(&field("timeout"), text, bounds.expected));
            }
            d
        }
        None => bounds.default,
    };
    Ok((tls, timeout))
}

/// The TLS settings of the keys as written, or `None` when none is set (the shared client with
/// the Mozilla roots). `field(key)` names a key in an error (`destination "app" ca_file`).
///
/// # Errors
/// [`ConfigError::BadValue`] when only one of `client_cert_file` and `client_key_file` is set;
/// [`ConfigError::TlsFile`] naming the key and path of a file that cannot be read or used.
fn build(
    field: &dyn Fn(&str) -> String,
    ca_file: Option<String>,
    client_cert_file: Option<String>,
    client_key_file: Option<String>,
) -> Result<Option<TlsSettings>, ConfigError> {
    match (&client_cert_file, &client_key_file) {
        (Some(_), None) | (None, Some(_)) => {
            let (given, missing) = if client_cert_file.is_some() {
                ("client_cert_file", "client_key_file")
            } else {
                ("client_key_file", "client_cert_file")
            };
            return Err(ConfigError::BadValue {
                field: field(given),
                value: client_cert_file.or(client_key_file).unwrap_or_default(),
                expected: format!(
                    "{given} together with {missing} (a client certificate and its key, for mTLS), or neither"
                ),
            });
        }
        _ => {}
    }
    if ca_file.is_none() && client_cert_file.is_none() {
        return Ok(None);
    }
    let path = |text: Option<String>| text.map(PathBuf::from);
    TlsSettings::load(path(ca_file), path(client_cert_file), path(client_key_file))
        .map(Some)
        .map_err(|TlsFileError { key, path, reason }| ConfigError::TlsFile {
            field: field(key),
            path: path.display().to_string(),
            reason,
        })
}
