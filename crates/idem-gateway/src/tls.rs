//! TLS to `https://` destinations and HTTP relay targets: rustls with the ring provider, the
//! Mozilla roots of `webpki-roots` unless a `ca_file` names the authorities to trust, and an
//! optional client certificate (mTLS). Each HTTP client is built with its own rustls
//! `ClientConfig`, so reqwest never needs a process-wide crypto provider.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore};

/// How an `https://` endpoint's certificate is checked and which client certificate is
/// presented: the files as configured, read and checked when the configuration is loaded.
#[derive(Debug, Clone)]
pub struct TlsSettings {
    /// `ca_file`: a PEM file of the certificate authorities the endpoint's certificate must
    /// chain to, instead of the Mozilla roots (`webpki-roots`); `None`: those roots.
    pub ca_file: Option<PathBuf>,
    /// `client_cert_file`: a PEM file of the client certificate (and its intermediates)
    /// presented for mTLS, with `client_key_file`; `None`: no client certificate.
    pub client_cert_file: Option<PathBuf>,
    /// `client_key_file`: the PEM private key (PKCS#8, PKCS#1 or SEC1) of `client_cert_file`.
    pub client_key_file: Option<PathBuf>,
    config: Arc<ClientConfig>,
}

/// A TLS file that cannot be used: its key, its path and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TlsFileError {
    /// `ca_file`, `client_cert_file` or `client_key_file`.
    pub key: &'static str,
    /// The path as configured.
    pub path: PathBuf,
    /// What is wrong with it and what was expected.
    pub reason: String,
}

impl TlsSettings {
    /// Reads and checks the files (relative paths from the working directory): each PEM file
    /// must hold at least one certificate (or, for the key, one private key), every CA
    /// certificate must parse as X.509, and the key must be the client certificate's.
    ///
    /// # Errors
    /// [`TlsFileError`] naming the first file that cannot be read or used.
    pub(crate) fn load(
        ca_file: Option<PathBuf>,
        client_cert_file: Option<PathBuf>,
        client_key_file: Option<PathBuf>,
    ) -> Result<Self, TlsFileError> {
        let roots = match &ca_file {
            Some(path) => authorities(path)?,
            None => idem_core::tls::mozilla_roots(),
        };
        let builder = idem_core::tls::client_config_builder().with_root_certificates(roots);
        let config = match (&client_cert_file, &client_key_file) {
            (Some(cert_path), Some(key_path)) => {
                let chain = certificates("client_cert_file", cert_path)?;
                let key = private_key(key_path)?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| TlsFileError {
                        key: "client_key_file",
                        path: key_path.clone(),
                        reason: format!(
                            "is not the private key of client_cert_file {} ({e})",
                            cert_path.display()
                        ),
                    })?
            }
            _ => builder.with_no_client_auth(),
        };
        Ok(Self {
            ca_file,
            client_cert_file,
            client_key_file,
            config: Arc::new(config),
        })
    }

    /// An HTTP client builder with these settings, following no redirect (see
    /// [`default_client_builder`]).
    pub(crate) fn client_builder(&self) -> reqwest::ClientBuilder {
        reqwest::Client::builder()
            .tls_backend_preconfigured(ClientConfig::clone(&self.config))
            .redirect(reqwest::redirect::Policy::none())
    }

    /// `ca_file …, client certificate …` for `idem check-config`; `None` with neither.
    pub fn describe(&self) -> Option<String> {
        let mut parts = Vec::new();
        if let Some(ca) = &self.ca_file {
            parts.push(format!("ca_file {}", ca.display()));
        }
        if let Some(cert) = &self.client_cert_file {
            parts.push(format!("client certificate {}", cert.display()));
        }
        (!parts.is_empty()).then(|| parts.join(", "))
    }
}

/// An HTTP client builder for endpoints without TLS settings: the Mozilla roots, no client
/// certificate, and no redirect followed. Every request the gateway sends (deliveries, relay
/// publishes, alert notifications) takes a 3xx as a failed answer (docs/gateway.md,
/// Destinations); followed, a 301, 302 or 303 turns the POST into a bodiless GET (RFC 9110
/// §15.4), and a 200 to that GET would have counted as delivered what nobody received.
pub(crate) fn default_client_builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .tls_backend_preconfigured(default_config())
        .redirect(reqwest::redirect::Policy::none())
}

/// The TLS configuration of [`default_client_builder`], for a client built otherwise (the
/// trace exporter's blocking one): reqwest's own default panics without a process-wide rustls
/// provider, which idem does not install.
pub(crate) fn default_config() -> ClientConfig {
    idem_core::tls::default_client_config()
}

/// The TLS error behind a failed request, if one is: the rustls error's text
/// (`invalid peer certificate: UnknownIssuer`, `certificate not valid for name …`), found by
/// walking the error's sources. rustls's error arrives wrapped in `io::Error`s, whose `source`
/// skips what they wrap: they are looked into.
pub(crate) fn failure_reason(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut current = Some(error);
    while let Some(mut e) = current {
        // io::Errors nest (reqwest's connector wraps rustls's).
        while let Some(inner) = e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            e = inner;
        }
        if let Some(tls) = e.downcast_ref::<rustls::Error>() {
            return Some(tls.to_string());
        }
        current = e.source();
    }
    None
}

fn read(key: &'static str, path: &Path) -> Result<Vec<u8>, TlsFileError> {
    std::fs::read(path).map_err(|e| TlsFileError {
        key,
        path: path.to_owned(),
        reason: format!("cannot be read: {e}"),
    })
}

/// The certificates of PEM file `path` (the value of `key`): at least one.
fn certificates(
    key: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsFileError> {
    let bad = |reason: String| TlsFileError {
        key,
        path: path.to_owned(),
        reason,
    };
    let pem = read(key, path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(format!("is not valid PEM ({e})")))?;
    if certs.is_empty() {
        return Err(bad(
            "holds no certificate; expected PEM blocks \"-----BEGIN CERTIFICATE-----\"".into(),
        ));
    }
    Ok(certs)
}

/// The certificate authorities of `ca_file` `path`, each parsed as a trust anchor.
fn authorities(path: &Path) -> Result<RootCertStore, TlsFileError> {
    let mut roots = RootCertStore::empty();
    for (n, cert) in certificates("ca_file", path)?.into_iter().enumerate() {
        roots.add(cert).map_err(|e| TlsFileError {
            key: "ca_file",
            path: path.to_owned(),
            reason: format!(
                "certificate {} is not a usable X.509 certificate ({e})",
                n + 1
            ),
        })?;
    }
    Ok(roots)
}

fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsFileError> {
    let pem = read("client_key_file", path)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| TlsFileError {
        key: "client_key_file",
        path: path.to_owned(),
        reason: match e {
            rustls::pki_types::pem::Error::NoItemsFound => "holds no private key; expected a PEM \
                block \"-----BEGIN PRIVATE KEY-----\" (PKCS#8), \"-----BEGIN RSA PRIVATE \
                KEY-----\" or \"-----BEGIN EC PRIVATE KEY-----\""
                .to_owned(),
            other => format!("is not valid PEM ({other})"),
        },
    })
}
