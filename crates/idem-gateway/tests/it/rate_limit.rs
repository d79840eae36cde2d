//! A destination's `rate_limit` (issue 16, item 3), driven by a manual clock: the token bucket
//! reads the gateway's clock, so while the clock stands still no more attempts start than the
//! burst allows, however long the test waits, and each step of the clock lets through exactly
//! the tokens it adds. Deliveries waiting for a token stay pending and keep their entity's
//! order.

use std::sync::Arc;
use std::time::{Duration, Instant};

use idem_core::{ManualClock, Timestamp};
use idem_gateway::{Config, GatewayDb};
use idem_sql::Store;
use idem_testkit::AppDb;

use crate::support::{
    Downstream, Running, count, env, stripe_event, unix_now, versions_by_event_id,
};

/// Destination `name` limited to 10 attempts a second (a burst of 10) with permits to spare
/// (32), fed by source `stripe` on a drop-stale route.
fn config(downstream: &Downstream, name: &str) -> Config {
    let text = format!(
        r#"
listen = "127.0.0.1:0"
poll_interval = "20ms"

[[source]]
name = "stripe"
kind = "stripe"
secrets_env = ["STRIPE_SECRET"]

[[destination]]
name = "{name}"
url = "http://{}/events"
timeout = "2s"
retry_schedule = ["10ms"]
signing_secret_env = "APP_SECRET"
concurrency = 32
rate_limit = "10/s"

[[route]]
source = "stripe"
destination = "{name}"
"#,
        downstream.addr
    );
    Config::from_toml(&text, &env).unwrap()
}

/// How many times the dispatcher of `name` held claims back for want of a token.
async fn held<DB: GatewayDb>(gw: &Running<DB>, name: &str) -> u64 {
    let text = (gw.client.get(format!("{}/metrics", gw.url)).send().await)
        .unwrap()
        .text()
        .await
        .unwrap();
    let line = format!("idem_dispatch_rate_limited_total{{destination=\"{name}\"}}");
    text.lines()
        .find_map(|l| l.strip_prefix(&line)?.trim().parse().ok())
        .unwrap_or(0)
}

/// Waits until the downstream got `n` requests and nothing is in flight, then until the
/// dispatcher has held claims back three more times (it looked for more and found no token),
/// and returns what the downstream got by then.
async fn steady<DB: GatewayDb>(
    gw: &Running<DB>,
    downstream: &Downstream,
    name: &str,
    n: usize,
) -> usize {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let in_flight = gw.gateway.stats().await.unwrap().destinations[name].in_flight;
        if downstream.received().len() >= n && in_flight == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {n} requests arrived",
            downstream.received().len()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let before = held(gw, name).await;
    while held(gw, name).await < before + 3 {
        assert!(
            Instant::now() < deadline,
            "the dispatcher never looked again"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    downstream.received().len()
}

/// `10/s` with a burst of 10: 24 events (3 entities, 8 versions each) accepted at t0; 10
/// attempts start at t0 and no more while the clock stands still; 100 ms later one more; a
/// second later ten more; a second after that the last three. Every event is delivered once,
/// each entity's in version order, with one attempt row each (waiting for a token is no
/// attempt).
async fn the_rate_limit_starts_no_more_attempts_than_its_tokens<DB: GatewayDb + AppDb>(
    store: Store<DB>,
    clock: ManualClock,
) {
    let downstream = Downstream::ok().await;
    let name = format!(
        "limited_{}",
        <DB as idem_sql::sqlx::Database>::NAME.to_lowercase()
    );
    let gw = Running::start(config(&downstream, &name), store).await;
    for version in 1..=8 {
        for entity in ["cus_l1", "cus_l2", "cus_l3"] {
            let body = stripe_event(
                &format!("evt_{entity}_{version}"),
                "customer.updated",
                "customer",
                entity,
                version,
            );
            assert_eq!(gw.post_stripe(&body).await.json["status"], "accepted");
        }
    }
    assert_eq!(steady(&gw, &downstream, &name, 10).await, 10);
    let pending = gw.gateway.stats().await.unwrap().destinations[&name].pending;
    assert_eq!(pending, 14, "the others wait, pending");
    clock.advance(Duration::from_millis(99));
    assert_eq!(steady(&gw, &downstream, &name, 10).await, 10);
    clock.advance(Duration::from_millis(1));
    assert_eq!(steady(&gw, &downstream, &name, 11).await, 11);
    clock.advance(Duration::from_secs(1));
    assert_eq!(steady(&gw, &downstream, &name, 21).await, 21);
    clock.advance(Duration::from_secs(1));
    gw.settle().await;
    assert_eq!(downstream.received().len(), 24);

    for request in downstream.received() {
        assert_eq!(request.header("idem-attempt"), Some("1"));
    }
    let versions = versions_by_event_id(&downstream);
    for entity in ["cus_l1", "cus_l2", "cus_l3"] {
        assert_eq!(versions[entity], (1..=8).collect::<Vec<_>>(), "{entity}");
    }
    assert_eq!(
        count(&gw.gateway, "SELECT COUNT(*) FROM idem_gateway_attempts").await,
        24
    );
    gw.server.shutdown().await.unwrap();
}

mod the_rate_limit_starts_no_more_attempts_than_its_tokens {
    use super::*;

    fn clock() -> ManualClock {
        ManualClock::new(Timestamp(unix_now() * 1000))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn sqlite() {
        crate::support::capture_logs();
        let clock = clock();
        let (_dir, store) = crate::support::sqlite(Arc::new(clock.clone())).await;
        super::the_rate_limit_starts_no_more_attempts_than_its_tokens(store, clock).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn postgres() {
        crate::support::capture_logs();
        let clock = clock();
        let (_dir, store) = crate::support::postgres(Arc::new(clock.clone())).await;
        super::the_rate_limit_starts_no_more_attempts_than_its_tokens(store, clock).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn mysql() {
        crate::support::capture_logs();
        let clock = clock();
        let (_dir, store) = crate::support::mysql(Arc::new(clock.clone())).await;
        super::the_rate_limit_starts_no_more_attempts_than_its_tokens(store, clock).await;
    }
}
