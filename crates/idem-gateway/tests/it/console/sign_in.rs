//! Sign-in, sessions and CSRF over HTTP, on the injectable clock: the cookie's flags, the
//! per-address limit on wrong tokens, a session's end, sign-out, and a POST without the
//! session's CSRF token refused with nothing changed.

use std::time::Duration;

use idem_core::ManualClock;
use idem_gateway::{Config, GatewayDb};
use idem_sql::Store;

use super::client::{ADMIN_TOKEN, Client};
use crate::support::{Downstream, Running, config_text, env};

async fn gateway<DB: GatewayDb>(store: Store<DB>, extra: &str) -> (Downstream, Running<DB>) {
    let downstream = Downstream::ok().await;
    let text = format!(
        "admin_token_env = \"ADMIN_TOKEN\"\n{extra}\n{}",
        config_text(downstream.addr, r#"["5ms"]"#)
    );
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    (downstream, gw)
}

/// Five wrong tokens within 15 minutes from one address, and the sixth try is refused with 429
/// and `Retry-After` even with the right token; once the first failure is 15 minutes old, the
/// right token signs in. The session cookie is HttpOnly, SameSite=Strict, for /console, ends
/// after console_session_ttl, and is Secure only when console_url is https.
async fn wrong_tokens_are_limited_per_address<DB: GatewayDb>(store: Store<DB>, clock: ManualClock) {
    let (_downstream, gw) = gateway(
        store,
        "console_url = \"https://ops.example.com/console\"\nconsole_session_ttl = \"30m\"",
    )
    .await;
    let mut client = Client::new(&gw.url);
    for i in 0..5 {
        let answer = client.sign_in_with("guess").await;
        assert_eq!(answer.status, 401, "try {i}: {}", answer.html);
        assert!(
            answer.html.contains("Wrong admin token."),
            "{}",
            answer.html
        );
        clock.advance(Duration::from_secs(60));
    }
    // 5 minutes after the first failure: 10 minutes to wait.
    let refused = client.sign_in_with(ADMIN_TOKEN).await;
    assert_eq!(refused.status, 429, "{}", refused.html);
    assert_eq!(refused.retry_after.as_deref(), Some("600"));
    assert!(!client.cookies.contains_key("idem_console"));
    clock.advance(Duration::from_secs(600 - 1));
    assert_eq!(client.sign_in_with(ADMIN_TOKEN).await.status, 429);
    clock.advance(Duration::from_secs(1));
    let signed_in = client.sign_in_with(ADMIN_TOKEN).await;
    assert_eq!(signed_in.status, 303, "{}", signed_in.html);
    let cookie = signed_in
        .set_cookies
        .iter()
        .find(|c| c.starts_with("idem_console="))
        .unwrap();
    for flag in [
        "HttpOnly",
        "SameSite=Strict",
        "Secure",
        "Path=/console",
        "Max-Age=1800",
    ] {
        assert!(cookie.contains(flag), "{flag} in {cookie}");
    }
    assert_eq!(client.get("/console").await.status, 200);
    // The session ends 30 minutes after sign-in.
    clock.advance(Duration::from_secs(1800 - 1));
    assert_eq!(client.get("/console").await.status, 200);
    clock.advance(Duration::from_secs(1));
    let ended = client.get("/console").await;
    assert_eq!(
        (ended.status, ended.location.as_deref()),
        (303, Some("/console/sign-in"))
    );
    gw.server.shutdown().await.unwrap();
}

/// A POST without the session's CSRF token (or with another session's) is refused with 403
/// and changes nothing; sign-out ends the session in the database, so the old cookie no longer
/// works; without console_url the cookie is not Secure.
async fn csrf_and_sign_out<DB: GatewayDb>(store: Store<DB>, _clock: ManualClock) {
    let (downstream, gw) = gateway(store, "").await;
    let body = crate::support::stripe_event("evt_csrf", "invoice.paid", "invoice", "in_c", 10);
    assert_eq!(gw.post_stripe(&body).await.json["status"], "accepted");
    gw.settle().await;
    let mut client = Client::new(&gw.url);
    let answer = client.sign_in_with(ADMIN_TOKEN).await;
    let cookie = answer
        .set_cookies
        .iter()
        .find(|c| c.starts_with("idem_console="))
        .unwrap();
    assert!(!cookie.contains("Secure"), "{cookie}");
    let csrf = client.get("/console").await.csrf();
    let mut other = Client::new(&gw.url);
    let other_csrf = other.sign_in().await;
    let replay = [
        ("source", "stripe"),
        ("since_ms", "0"),
        ("until_ms", "9999999999999"),
        ("confirm", "yes"),
    ];
    for token in [None, Some(""), Some(other_csrf.as_str())] {
        let mut fields = replay.to_vec();
        if let Some(token) = token {
            fields.push(("csrf", token));
        }
        let refused = client.post("/console/replay", &fields).await;
        assert_eq!(refused.status, 403, "{token:?}: {}", refused.html);
        assert!(
            refused.html.contains("missing CSRF token"),
            "{}",
            refused.html
        );
    }
    // A replay made by one of them would be sent by the time nothing is pending.
    gw.settle().await;
    let received = || downstream.with_key("stripe:evt_csrf").len();
    assert_eq!(received(), 1, "nothing was replayed");
    let mut fields = replay.to_vec();
    fields.push(("csrf", &csrf));
    let done = client.post("/console/replay", &fields).await;
    assert_eq!(done.status, 200, "{}", done.html);
    assert!(
        done.html
            .contains("1 deliveries of 1 matched are due again"),
        "{}",
        done.html
    );
    gw.settle().await;
    assert_eq!(received(), 2, "the form with its token replays");

    let kept = client.cookies.clone();
    let signed_out = client.post("/console/sign-out", &[("csrf", &csrf)]).await;
    assert_eq!(signed_out.status, 303);
    assert!(!client.cookies.contains_key("idem_console"));
    let mut stale = Client::new(&gw.url);
    stale.cookies = kept;
    assert_eq!(stale.get("/console").await.status, 303);
    assert_eq!(
        other.get("/console").await.status,
        200,
        "the other session lives on"
    );
    gw.server.shutdown().await.unwrap();
}

/// Behind a trusted proxy (`console_trusted_proxies` holds the test's 127.0.0.1), wrong
/// tokens are counted per client the proxy names in `X-Forwarded-For`: after five from
/// 203.0.113.7 it is refused, also when it forges an entry left of the proxy's or comes
/// through a second trusted proxy, while 203.0.113.8 signs in; 15 minutes on, 203.0.113.7
/// does too. Without the key, or from a peer the key does not list, the header is ignored and
/// every client shares the peer's limit.
async fn wrong_tokens_behind_a_trusted_proxy_are_counted_per_client<DB: GatewayDb>(
    store: Store<DB>,
    clock: ManualClock,
) {
    let forwarded = |gw: &Running<DB>, value: &str| {
        let mut client = Client::new(&gw.url);
        client
            .headers
            .push(("x-forwarded-for".to_owned(), value.to_owned()));
        client
    };
    let (_downstream, gw) =
        gateway(store.clone(), "console_trusted_proxies = [\"127.0.0.1\"]").await;
    let mut client = forwarded(&gw, "203.0.113.7");
    for i in 0..5 {
        assert_eq!(client.sign_in_with("guess").await.status, 401, "try {i}");
    }
    let refused = client.sign_in_with(ADMIN_TOKEN).await;
    assert_eq!(
        (refused.status, refused.retry_after.as_deref()),
        (429, Some("900"))
    );
    assert_eq!(
        refused.text("class=\"problem\"", "</p>"),
        "Sign-in from 203.0.113.7 is refused for 900 s after 5 wrong tokens within 15 minutes."
    );
    for value in ["198.51.100.9, 203.0.113.7", "203.0.113.7, 127.0.0.1"] {
        let answer = forwarded(&gw, value).sign_in_with(ADMIN_TOKEN).await;
        assert_eq!(answer.status, 429, "{value}");
    }
    let other = forwarded(&gw, "203.0.113.8")
        .sign_in_with(ADMIN_TOKEN)
        .await;
    assert_eq!(other.status, 303, "{}", other.html);
    clock.advance(Duration::from_secs(15 * 60));
    assert_eq!(client.sign_in_with(ADMIN_TOKEN).await.status, 303);
    gw.server.shutdown().await.unwrap();

    for extra in ["", "console_trusted_proxies = [\"10.0.0.0/8\"]"] {
        let (_downstream, gw) = gateway(store.clone(), extra).await;
        for n in 1..=5 {
            let answer = forwarded(&gw, &format!("203.0.113.{n}"))
                .sign_in_with("guess")
                .await;
            assert_eq!(answer.status, 401, "{extra:?} {n}");
        }
        let refused = forwarded(&gw, "203.0.113.6")
            .sign_in_with(ADMIN_TOKEN)
            .await;
        assert_eq!(refused.status, 429, "{extra:?}");
        assert!(
            refused
                .text("class=\"problem\"", "</p>")
                .starts_with("Sign-in from 127.0.0.1 is refused"),
            "{extra:?}: {}",
            refused.html
        );
        gw.server.shutdown().await.unwrap();
    }
}

on_a_manual_clock!(
    wrong_tokens_are_limited_per_address,
    csrf_and_sign_out,
    wrong_tokens_behind_a_trusted_proxy_are_counted_per_client
);
