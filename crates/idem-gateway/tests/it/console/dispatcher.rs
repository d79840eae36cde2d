//! The dispatchers' health on the overview, on the injectable clock: a destination that refuses
//! connections fails its attempts, not its dispatcher; with the deliveries table locked
//! (PostgreSQL: `LOCK TABLE … IN EXCLUSIVE MODE`; MySQL: `LOCK TABLES … READ`; SQLite: a write
//! transaction held open), a
//! retry falling due makes the claims fail, and an attempt answered meanwhile makes the
//! outcome writes fail, each shown with since when and cleared once the lock is gone; a paused
//! destination shows since when, and the age of its oldest due delivery.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use idem_core::{Clock, ManualClock, Timestamp};
use idem_gateway::console::{BacklogRow, Overview};
use idem_gateway::time::format_time;
use idem_gateway::{Config, GatewayDb};
use idem_sql::Store;
use idem_testkit::AppDb;
use tokio::sync::Notify;

use super::client::Client;
use crate::support::{Running, env, stripe_event};
use crate::table_lock::{TableLock, hold, release};

/// The application of destination `app`: `evt_retry`'s first attempt is answered 503;
/// `evt_held`'s request is held until the test releases it; everything else is answered 200.
struct Gate {
    addr: std::net::SocketAddr,
    /// (event id, attempt) of every request, as it arrived.
    received: Arc<Mutex<Vec<(String, String)>>>,
    /// Notified when `evt_held`'s request arrived.
    arrived: Arc<Notify>,
    /// Releases `evt_held`'s request.
    release: Arc<Notify>,
}

impl Gate {
    async fn start() -> Self {
        let received = Arc::new(Mutex::new(Vec::new()));
        let (arrived, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        let state = (
            Arc::clone(&received),
            Arc::clone(&arrived),
            Arc::clone(&release),
        );
        let app = Router::new().route(
            "/events",
            post(move |headers: HeaderMap| {
                let (received, arrived, release) = state.clone();
                async move {
                    let header = |name| {
                        headers
                            .get(name)
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default()
                            .to_owned()
                    };
                    let (id, attempt) = (header("idem-event-id"), header("idem-attempt"));
                    received.lock().unwrap().push((id.clone(), attempt.clone()));
                    if id == "evt_held" {
                        arrived.notify_one();
                        release.notified().await;
                    }
                    if id == "evt_retry" && attempt == "1" {
                        StatusCode::SERVICE_UNAVAILABLE
                    } else {
                        StatusCode::OK
                    }
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self {
            addr,
            received,
            arrived,
            release,
        }
    }

    /// The attempts `event` received, by number.
    fn attempts(&self, event: &str) -> Vec<String> {
        let received = self.received.lock().unwrap();
        (received.iter())
            .filter(|(id, _)| id == event)
            .map(|(_, attempt)| attempt.clone())
            .collect()
    }
}

/// `app` at the gate, retried after an hour; `gone` at a port nobody listens on, retried after
/// a week; invoices go to `app`, charges to `gone`.
fn config(gate: &Gate, gone: u16) -> Config {
    let text = format!(
        r#"admin_token_env = "ADMIN_TOKEN"
listen = "127.0.0.1:0"
poll_interval = "20ms"
database_timeout = "1s"

[[source]]
name = "stripe"
kind = "stripe"
secrets_env = ["STRIPE_SECRET"]

[[destination]]
name = "app"
url = "http://{}/events"
timeout = "30s"
retry_schedule = ["1h"]
signing_secret_env = "APP_SECRET"

[[destination]]
name = "gone"
url = "http://127.0.0.1:{gone}/events"
timeout = "2s"
retry_schedule = ["7d"]
signing_secret_env = "APP_SECRET"

[[route]]
source = "stripe"
destination = "app"
event_types = ["invoice.*"]

[[route]]
source = "stripe"
destination = "gone"
event_types = ["charge.*"]
"#,
        gate.addr
    );
    Config::from_toml(&text, &env).unwrap()
}

fn row<'a>(overview: &'a Overview, destination: &str) -> &'a BacklogRow {
    (overview.backlog.iter())
        .find(|b| b.destination == destination)
        .unwrap()
}

/// The overview once `done` holds for it (waiting up to 10 s).
async fn until<DB: GatewayDb>(gw: &Running<DB>, done: impl Fn(&Overview) -> bool) -> Overview {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let overview = gw.gateway.overview().await.unwrap();
        if done(&overview) {
            return overview;
        }
        assert!(
            Instant::now() < deadline,
            "not reached: {:?}",
            overview.backlog
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The one `SELECT` value `sql` reads.
async fn value<DB: GatewayDb + AppDb>(gw: &Running<DB>, sql: &'static str) -> i64 {
    idem_testkit::query_i64(gw.gateway.store(), sql, vec![]).await[0]
}

/// The `dispatcher` and `oldest due` cells of `destination`'s row of the overview page.
async fn cells(client: &mut Client, destination: &str) -> (String, String) {
    let page = client.get("/console").await;
    assert_eq!(page.status, 200, "{}", page.html);
    let marker = format!("data-destination=\"{destination}\"");
    let row = super::client::fragment(&page.html, &marker, "</tr>");
    (
        super::client::text_of(super::client::fragment(
            row,
            "class=\"dispatcher\"",
            "</td>",
        )),
        super::client::text_of(super::client::fragment(
            row,
            "data-metric=\"oldest_due\"",
            "</td>",
        )),
    )
}

async fn dispatcher_health_says_what_holds_a_destination_back<DB: TableLock>(
    store: Store<DB>,
    clock: ManualClock,
) {
    let gate = Gate::start().await;
    let gone = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let gw = Running::start(config(&gate, gone), store).await;
    let mut client = Client::new(&gw.url);
    // Signed in first: on SQLite the lock below holds back the session's write too.
    client.sign_in().await;
    let post = |id: &str, ty: &str| stripe_event(id, ty, "invoice", id, 10);

    // Refused connections fail gone's attempt; its dispatcher works.
    for body in [
        post("evt_gone", "charge.failed"),
        post("evt_retry", "invoice.paid"),
    ] {
        let answer = gw.post_stripe_at(clock.now(), &body).await;
        assert_eq!(answer.json["status"], "accepted");
    }
    let overview = until(&gw, |o| {
        row(o, "gone").retrying == 1 && row(o, "app").retrying == 1
    })
    .await;
    for destination in ["app", "gone"] {
        let health = &row(&overview, destination).dispatcher;
        assert!(health.is_working(), "{destination}: {health:?}");
        assert_eq!(health.oldest_due, None, "{destination}: due in an hour");
    }
    assert_eq!(
        cells(&mut client, "gone").await,
        ("working".to_owned(), "—".to_owned())
    );

    // The retry falls due 5 minutes ago while the table is locked: the claim fails.
    let due_at = value(
        &gw,
        "SELECT next_attempt_at FROM idem_gateway_deliveries WHERE destination = 'app'",
    )
    .await;
    let lock = hold(gw.gateway.store().pool(), DB::LOCK_DELIVERIES).await;
    clock.set(Timestamp(due_at + 5 * 60_000));
    let failing_since = clock.now().as_millis();
    let overview = until(&gw, |o| row(o, "app").dispatcher.claims.is_some()).await;
    let health = &row(&overview, "app").dispatcher;
    assert_eq!(health.claims.as_ref().unwrap().since, failing_since);
    assert_eq!(health.oldest_due, Some(due_at));
    assert_eq!(
        (health.outcomes.as_ref(), health.paused_since),
        (None, None)
    );
    let (dispatcher, oldest_due) = cells(&mut client, "app").await;
    assert!(
        dispatcher.starts_with(&format!(
            "claims failing since {}: ",
            format_time(failing_since)
        )),
        "{dispatcher}"
    );
    assert_eq!(oldest_due, "5 min");
    release(lock).await;
    // Working again: the failure is cleared once a claim succeeds.
    until(&gw, |o| {
        let app = row(o, "app");
        app.retrying + app.pending + app.in_flight == 0 && app.dispatcher.is_working()
    })
    .await;
    assert_eq!(gate.attempts("evt_retry"), ["1", "2"]);

    // An attempt answered while the table is locked: its outcome cannot be written; claims
    // (due queries that find nothing due) still work.
    let answer = gw
        .post_stripe_at(clock.now(), &post("evt_held", "invoice.paid"))
        .await;
    assert_eq!(answer.json["status"], "accepted");
    gate.arrived.notified().await;
    let lock = hold(gw.gateway.store().pool(), DB::LOCK_DELIVERIES).await;
    let failing_since = clock.now().as_millis();
    gate.release.notify_one();
    let overview = until(&gw, |o| row(o, "app").dispatcher.outcomes.is_some()).await;
    let health = &row(&overview, "app").dispatcher;
    assert_eq!(health.outcomes.as_ref().unwrap().since, failing_since);
    assert_eq!(health.claims, None);
    let (dispatcher, _) = cells(&mut client, "app").await;
    assert!(
        dispatcher.starts_with(&format!(
            "outcome writes failing since {}: ",
            format_time(failing_since)
        )),
        "{dispatcher}"
    );
    release(lock).await;
    until(&gw, |o| {
        row(o, "app").in_flight == 0 && row(o, "app").dispatcher.is_working()
    })
    .await;

    // Paused: an event waits, due since it arrived, 2 minutes ago.
    let paused_at = clock.now().as_millis();
    assert!(gw.gateway.pause("app").await.unwrap().changed);
    let answer = gw
        .post_stripe_at(clock.now(), &post("evt_paused", "invoice.paid"))
        .await;
    assert_eq!(answer.json["status"], "accepted");
    clock.advance(Duration::from_secs(120));
    let overview = gw.gateway.overview().await.unwrap();
    let health = &row(&overview, "app").dispatcher;
    assert_eq!(health.paused_since, Some(paused_at));
    assert_eq!(health.oldest_due, Some(paused_at));
    assert!(!health.is_working());
    assert_eq!(
        cells(&mut client, "app").await,
        (
            format!("paused since {}", format_time(paused_at)),
            "2 min".to_owned()
        )
    );
    gw.gateway.resume("app").await.unwrap();
    until(&gw, |o| {
        row(o, "app").pending == 0 && row(o, "app").in_flight == 0
    })
    .await;
    assert_eq!(gate.attempts("evt_paused"), ["1"]);
    assert_eq!(gate.attempts("evt_held"), ["1"]);
    gw.server.shutdown().await.unwrap();
}

on_a_manual_clock!(dispatcher_health_says_what_holds_a_destination_back);
