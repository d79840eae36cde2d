//! The one rustls client configuration of the workspace (feature `tls`): TLS 1.2 and 1.3 with
//! ring's algorithms, checked against the Mozilla roots of `webpki-roots` unless the caller
//! brings its own. Every HTTP client idem builds (the gateway's destinations and relays,
//! idem-broker's `HttpPublisher`, `idem verify`, the tests) starts here, so that reqwest never
//! needs a process-wide crypto provider, which idem does not install.
//!
//! Building a configuration does no I/O: no socket, no file (certificate files are read by the
//! caller, the gateway's `tls` module), so this stays within idem-core's rule (docs/design.md
//! §3).

use std::sync::Arc;

use rustls::{ClientConfig, ConfigBuilder, RootCertStore, WantsVerifier};

/// A client configuration builder with the ring provider and rustls's safe protocol versions
/// (TLS 1.2 and 1.3), for a caller that sets its own roots or client certificate.
pub fn client_config_builder() -> ConfigBuilder<ClientConfig, WantsVerifier> {
    ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("ring supports rustls's default protocol versions")
}

/// The Mozilla root certificates of `webpki-roots`.
pub fn mozilla_roots() -> RootCertStore {
    RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    }
}

/// The configuration of an endpoint without TLS settings of its own: ring, the Mozilla roots,
/// no client certificate. Give it to `reqwest::ClientBuilder::tls_backend_preconfigured`.
pub fn default_client_config() -> ClientConfig {
    client_config_builder()
        .with_root_certificates(mozilla_roots())
        .with_no_client_auth()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_trusts_the_mozilla_roots_and_presents_no_certificate() {
        assert!(!mozilla_roots().is_empty());
        let config = default_client_config();
        assert!(!config.client_auth_cert_resolver.has_certs());
    }
}
