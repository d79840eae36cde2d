//! `ca_file`, `client_cert_file` and `client_key_file` of a destination or an HTTP relay: read
//! and checked when the configuration is loaded, so `idem check-config` reports a file that
//! cannot be read or used.

use std::path::PathBuf;

use super::error::ConfigError;
use crate::tls::{TlsFileError, TlsSettings};

/// The TLS settings of the keys as written, or `None` when none is set (the shared client with
/// the Mozilla roots). `field(key)` names a key in an error (`destination "app" ca_file`).
///
/// # Errors
/// [`ConfigError::BadValue`] when only one of `client_cert_file` and `client_key_file` is set;
/// [`ConfigError::TlsFile`] naming the key and path of a file that cannot be read or used.
pub(super) fn build(
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
