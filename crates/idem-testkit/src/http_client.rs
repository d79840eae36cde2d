//! HTTP clients for tests. The workspace builds reqwest with rustls and no crypto provider of
//! its own (the gateway gives each client its rustls configuration, with the ring provider), so
//! a client built with `reqwest::Client::new()` would panic for want of one: tests build theirs
//! here, with ring and the Mozilla roots.

/// A client builder with a rustls configuration of its own (ring, the Mozilla roots of
/// `webpki-roots`, no client certificate): set timeouts and the like on it.
pub fn http_client_builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder().tls_backend_preconfigured(idem_core::tls::default_client_config())
}

/// A client as [`http_client_builder`] makes it, with reqwest's defaults.
///
/// # Panics
/// When the client cannot be built (no usable TLS configuration): a test cannot go on.
pub fn http_client() -> reqwest::Client {
    http_client_builder().build().expect("build an HTTP client")
}
