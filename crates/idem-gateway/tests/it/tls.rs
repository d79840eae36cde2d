//! https destinations and relay targets (issue 16, item 1): a TLS server inside the test, with
//! certificates the test makes (rcgen): a private CA trusted through `ca_file` delivers; a
//! certificate of another CA, or for another name, is a failed attempt whose excerpt names
//! rustls's reason; a destination that requires a client certificate gets the one configured.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::HeaderMap;
use axum::routing::post;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use idem_gateway::{AttemptOutcome, Config, ConfigError, GatewayDb};
use idem_sql::Store;
use idem_sql::sqlx::Sqlite;
use idem_testkit::AppDb;
use idem_testkit::outbox::{app_store, enqueue, wait_published};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tempfile::TempDir;

use crate::support::{Running, env, sqlite, stripe_event, system_clock};

/// A certificate authority of the test's own.
struct Authority {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A leaf certificate and its key, signed by an [`Authority`].
struct Leaf {
    cert: CertificateDer<'static>,
    pem: String,
    key: KeyPair,
}

impl Authority {
    fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        Self { issuer }
    }

    /// A certificate for `names` (DNS names or IP addresses).
    fn leaf(&self, names: &[&str]) -> Leaf {
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let cert = CertificateParams::new(names)
            .unwrap()
            .signed_by(&key, &self.issuer)
            .unwrap();
        Leaf {
            cert: cert.der().clone(),
            pem: cert.pem(),
            key,
        }
    }

    fn der(&self) -> CertificateDer<'static> {
        self.issuer.der().clone()
    }

    /// Writes the CA certificate as PEM to `dir/{file}`.
    fn write(&self, dir: &Path, file: &str) -> PathBuf {
        let path = dir.join(file);
        std::fs::write(&path, self.issuer.pem()).unwrap();
        path
    }
}

impl Leaf {
    /// Writes the certificate and its key as PEM to `dir/{stem}.pem` and `dir/{stem}.key`.
    fn write(&self, dir: &Path, stem: &str) -> (PathBuf, PathBuf) {
        let cert = dir.join(format!("{stem}.pem"));
        let key = dir.join(format!("{stem}.key"));
        std::fs::write(&cert, &self.pem).unwrap();
        std::fs::write(&key, self.key.serialize_pem()).unwrap();
        (cert, key)
    }

    fn private_key(&self) -> PrivateKeyDer<'static> {
        PrivatePkcs8KeyDer::from(self.key.serialize_der()).into()
    }
}

/// A TLS server on 127.0.0.1 answering 200 to every POST, keeping each request's path and
/// `idempotency-key`; with `client_ca`, it requires a client certificate of that authority and
/// speaks TLS 1.2 only. Why 1.2: in TLS 1.3 the server checks the client's certificate after the
/// client has finished its handshake, so a refusal races the request and hyper sometimes reports
/// only "connection was not ready"; in TLS 1.2 the handshake itself fails with the alert.
struct TlsServer {
    addr: SocketAddr,
    received: Arc<Mutex<Vec<(String, String)>>>,
}

impl TlsServer {
    async fn start(leaf: &Leaf, client_ca: Option<&Authority>) -> Self {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let versions: &[&rustls::SupportedProtocolVersion] = match client_ca {
            Some(_) => &[&rustls::version::TLS12],
            None => rustls::DEFAULT_VERSIONS,
        };
        let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_protocol_versions(versions)
            .unwrap();
        let builder = match client_ca {
            Some(ca) => {
                let mut roots = rustls::RootCertStore::empty();
                roots.add(ca.der()).unwrap();
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider,
                )
                .build()
                .unwrap();
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let config = builder
            .with_single_cert(vec![leaf.cert.clone()], leaf.private_key())
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let received: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
        let log = Arc::clone(&received);
        let app = Router::new().route(
            "/{*path}",
            post(move |uri: axum::http::Uri, headers: HeaderMap| {
                let log = Arc::clone(&log);
                async move {
                    let key = headers
                        .get("idempotency-key")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    log.lock().unwrap().push((uri.path().to_owned(), key));
                    "ok"
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let (acceptor, app) = (acceptor.clone(), app.clone());
                tokio::spawn(async move {
                    // A refused handshake is the client's failed attempt: nothing to serve.
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tls), TowerToHyperService::new(app))
                        .await;
                });
            }
        });
        Self { addr, received }
    }

    fn paths(&self) -> Vec<String> {
        let mut paths: Vec<String> = (self.received.lock().unwrap().iter())
            .map(|(path, _)| path.clone())
            .collect();
        paths.sort();
        paths
    }
}

/// A gateway configuration: source `stripe`, and per `(name, url, extra keys)` a destination
/// with a route from `stripe`; a failed attempt is retried after an hour, so each fails once.
fn config(destinations: &[(&str, String, String)]) -> Config {
    let mut text = String::from(
        "listen = \"127.0.0.1:0\"\npoll_interval = \"20ms\"\n\n[[source]]\nname = \"stripe\"\nkind = \"stripe\"\nsecrets_env = [\"STRIPE_SECRET\"]\n",
    );
    for (name, url, extra) in destinations {
        text.push_str(&format!(
            "\n[[destination]]\nname = \"{name}\"\nurl = \"{url}\"\ntimeout = \"2s\"\nretry_schedule = [\"1h\"]\nsigning_secret_env = \"APP_SECRET\"\n{extra}\n\n[[route]]\nsource = \"stripe\"\ndestination = \"{name}\"\n"
        ));
    }
    Config::from_toml(&text, &env).expect("valid configuration")
}

/// `ca_file = "…"` for `path`.
fn ca_key(path: &Path) -> String {
    format!("ca_file = \"{}\"", path.display())
}

/// Posts one Stripe event and waits until every destination has made its first attempt;
/// returns each destination's first attempt (outcome, status, excerpt), by destination name.
async fn post_and_wait<DB: GatewayDb>(
    gw: &Running<DB>,
    event_id: &str,
) -> Vec<(String, AttemptOutcome, Option<i64>, String)> {
    let body = stripe_event(event_id, "customer.updated", "customer", "cus_tls", 100);
    assert_eq!(gw.post_stripe(&body).await.json["status"], "accepted");
    let destinations = gw.gateway.config().destinations.len();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let detail = gw
            .gateway
            .show_event("stripe", event_id)
            .await
            .unwrap()
            .unwrap();
        let firsts: Vec<_> = (detail.deliveries.iter())
            .filter_map(|(delivery, attempts)| {
                let first = attempts.first()?;
                Some((
                    delivery.destination.clone(),
                    first.outcome,
                    first.status,
                    first.excerpt.clone(),
                ))
            })
            .collect();
        if firsts.len() == destinations {
            let mut firsts = firsts;
            firsts.sort_by(|a, b| a.0.cmp(&b.0));
            return firsts;
        }
        assert!(Instant::now() < deadline, "attempts never made: {detail:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A destination whose certificate chains to the private CA of its `ca_file` gets the event;
/// one whose `ca_file` names another CA, and one left with the Mozilla roots, fail their
/// attempt with rustls's `UnknownIssuer` in the excerpt, and nothing reaches their server.
async fn a_private_ca_is_trusted_only_through_ca_file<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let dir = TempDir::new().unwrap();
    let (ours, theirs) = (Authority::new("ours"), Authority::new("theirs"));
    let ours_pem = ours.write(dir.path(), "ours.pem");
    let theirs_pem = theirs.write(dir.path(), "theirs.pem");
    let server = TlsServer::start(&ours.leaf(&["127.0.0.1"]), None).await;
    let url = |path: &str| format!("https://{}/{path}", server.addr);
    let gw = Running::start(
        config(&[
            ("trusted", url("trusted"), ca_key(&ours_pem)),
            ("other-ca", url("other-ca"), ca_key(&theirs_pem)),
            ("public-roots", url("public-roots"), String::new()),
        ]),
        store,
    )
    .await;
    let attempts = post_and_wait(&gw, "evt_tls_ca").await;
    assert_eq!(attempts[2].0, "trusted");
    assert_eq!(attempts[2].1, AttemptOutcome::Delivered);
    assert_eq!(attempts[2].2, Some(200));
    for (name, outcome, status, excerpt) in &attempts[..2] {
        assert_eq!(
            (*outcome, *status),
            (AttemptOutcome::Retry, None),
            "{name}: {excerpt}"
        );
        assert!(
            excerpt.contains("TLS: invalid peer certificate: UnknownIssuer"),
            "{name}: {excerpt}"
        );
    }
    assert_eq!(server.paths(), ["/trusted"]);
    assert_eq!(
        server.received.lock().unwrap()[0].1,
        "\"stripe:evt_tls_ca\""
    );
    gw.server.shutdown().await.unwrap();
}

/// A certificate of the trusted CA issued for another name fails the attempt with rustls's
/// reason: the name asked for and the one the certificate holds.
async fn a_certificate_for_another_name_fails<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let dir = TempDir::new().unwrap();
    let ca = Authority::new("ours");
    let ca_pem = ca.write(dir.path(), "ca.pem");
    let server = TlsServer::start(&ca.leaf(&["hooks.example.com"]), None).await;
    let url = format!("https://{}/events", server.addr);
    let gw = Running::start(config(&[("app", url, ca_key(&ca_pem))]), store).await;
    let attempts = post_and_wait(&gw, "evt_tls_name").await;
    let (_, outcome, status, excerpt) = &attempts[0];
    assert_eq!(
        (*outcome, *status),
        (AttemptOutcome::Retry, None),
        "{excerpt}"
    );
    assert!(
        excerpt.contains(
            "TLS: invalid peer certificate: certificate not valid for name \"127.0.0.1\"; certificate is only valid for DnsName(\"hooks.example.com\")"
        ),
        "{excerpt}"
    );
    assert!(server.paths().is_empty());
    gw.server.shutdown().await.unwrap();
}

/// A server that requires a client certificate of its CA gets the event from the destination
/// configured with one (`client_cert_file`, `client_key_file`); the destination without one
/// fails its attempt, the server's alert in the excerpt, and reaches nothing.
async fn mtls_sends_the_configured_client_certificate<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let dir = TempDir::new().unwrap();
    let (server_ca, client_ca) = (Authority::new("servers"), Authority::new("clients"));
    let ca_pem = server_ca.write(dir.path(), "servers.pem");
    let (cert, key) = client_ca
        .leaf(&["idem-gateway"])
        .write(dir.path(), "client");
    let server = TlsServer::start(&server_ca.leaf(&["127.0.0.1"]), Some(&client_ca)).await;
    let url = |path: &str| format!("https://{}/{path}", server.addr);
    let with_cert = format!(
        "{}\nclient_cert_file = \"{}\"\nclient_key_file = \"{}\"",
        ca_key(&ca_pem),
        cert.display(),
        key.display()
    );
    let gw = Running::start(
        config(&[
            ("with-cert", url("with-cert"), with_cert),
            ("without-cert", url("without-cert"), ca_key(&ca_pem)),
        ]),
        store,
    )
    .await;
    let attempts = post_and_wait(&gw, "evt_tls_mtls").await;
    assert_eq!(attempts[0].0, "with-cert");
    assert_eq!(
        (attempts[0].1, attempts[0].2),
        (AttemptOutcome::Delivered, Some(200))
    );
    let (_, outcome, status, excerpt) = &attempts[1];
    assert_eq!(
        (*outcome, *status),
        (AttemptOutcome::Retry, None),
        "{excerpt}"
    );
    // The server refuses the handshake with an alert (TLS 1.2: see `TlsServer`).
    assert!(
        excerpt.contains("TLS: received fatal alert: CertificateRequired"),
        "{excerpt}"
    );
    assert_eq!(server.paths(), ["/with-cert"]);
    gw.server.shutdown().await.unwrap();
}

both_stores!(
    a_private_ca_is_trusted_only_through_ca_file,
    a_certificate_for_another_name_fails,
    mtls_sends_the_configured_client_certificate,
);

/// An HTTP relay publishes to an https target whose certificate chains to its `ca_file`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_relay_publishes_to_an_https_target_of_a_private_ca() {
    let dir = TempDir::new().unwrap();
    let ca = Authority::new("ours");
    let ca_pem = ca.write(dir.path(), "ca.pem");
    let server = TlsServer::start(&ca.leaf(&["127.0.0.1"]), None).await;
    let app_url = format!("sqlite://{}", dir.path().join("app.db").display());
    let app = app_store::<Sqlite>(&app_url).await;
    let ids: Vec<String> = (0..3).map(|n| format!("tls-{n}")).collect();
    enqueue(&app, "/hooks/orders", &ids).await;
    let text = format!(
        "listen = \"127.0.0.1:0\"\n\n[[relay]]\nname = \"out\"\npoll_interval = \"20ms\"\ndatabase_url = \"{app_url}\"\ntarget = \"http\"\nurl = \"https://{}\"\ntimeout = \"2s\"\n{}\n",
        server.addr,
        ca_key(&ca_pem)
    );
    let (_dir, gateway_store) = sqlite(system_clock()).await;
    let running = Running::start(Config::from_toml(&text, &env).unwrap(), gateway_store).await;
    wait_published(&app, 3).await;
    running.server.shutdown().await.unwrap();
    let mut got = server.received.lock().unwrap().clone();
    got.sort();
    let expected: Vec<(String, String)> = (ids.iter())
        .map(|id| ("/hooks/orders".to_owned(), id.clone()))
        .collect();
    assert_eq!(got, expected);
}

/// TLS files that cannot be used stop the configuration, naming the key and the path: one
/// that does not exist, one that is no PEM certificate, a client key that is not the
/// certificate's, a certificate without its key; certificates for an http:// URL.
#[test]
fn unusable_tls_files_are_named_with_their_key_and_path() {
    let dir = TempDir::new().unwrap();
    let ca = Authority::new("ours");
    let ca_pem = ca.write(dir.path(), "ca.pem");
    let (cert, _) = ca.leaf(&["a"]).write(dir.path(), "a");
    let (_, other_key) = ca.leaf(&["b"]).write(dir.path(), "b");
    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, "not a certificate\n").unwrap();
    let missing = dir.path().join("missing.pem");
    let error = |extra: String, url: &str| {
        let text = format!(
            "[[destination]]\nname = \"app\"\nurl = \"{url}\"\nsigning_secret_env = \"APP_SECRET\"\n{extra}\n"
        );
        Config::from_toml(&text, &env).unwrap_err()
    };
    let https = "https://hooks.example.com/events";
    let e = error(ca_key(&missing), https);
    assert!(matches!(e, ConfigError::TlsFile { .. }), "{e}");
    assert_eq!(
        e.to_string(),
        format!(
            "destination \"app\" ca_file = {:?} cannot be read: No such file or directory (os error 2)",
            missing.display().to_string()
        )
    );
    assert_eq!(
        error(ca_key(&garbage), https).to_string(),
        format!(
            "destination \"app\" ca_file = {:?} holds no certificate; expected PEM blocks \"-----BEGIN CERTIFICATE-----\"",
            garbage.display().to_string()
        )
    );
    let mismatch = error(
        format!(
            "client_cert_file = \"{}\"\nclient_key_file = \"{}\"",
            cert.display(),
            other_key.display()
        ),
        https,
    )
    .to_string();
    assert!(
        mismatch.starts_with(&format!(
            "destination \"app\" client_key_file = {:?} is not the private key of client_cert_file {}",
            other_key.display().to_string(),
            cert.display()
        )),
        "{mismatch}"
    );
    assert_eq!(
        error(format!("client_cert_file = \"{}\"", cert.display()), https).to_string(),
        format!(
            "destination \"app\" client_cert_file = {:?} is not valid; expected client_cert_file together with client_key_file (a client certificate and its key, for mTLS), or neither",
            cert.display().to_string()
        )
    );
    assert_eq!(
        error(ca_key(&ca_pem), "http://127.0.0.1:3000/events").to_string(),
        "destination \"app\" url = \"http://127.0.0.1:3000/events\" is not valid; expected an https:// URL: ca_file, client_cert_file and client_key_file are for TLS"
    );
}
