//! The overview against the stored rows and against what the operator commands print, read at
//! one moment: accepted, duplicates, stale, version ties and gaps, delivered, retried and dead
//! counted as the scenario made them, per source and per destination, and the backlog
//! (retrying, dead, the oldest undelivered event); on PostgreSQL, two gateway processes on one
//! database count together.
//!
//! "What the CLI prints" is read through the library operations the `idem` commands print
//! (`idem dlq list`: `Gateway::dead_letters`; `idem events list` and `show`:
//! `Gateway::list_events` and `show_event`; the demo's table: `Gateway::stats`): the `idem`
//! binary is built by idem-cli, which depends on this crate, so its tests cannot run it.

use std::sync::Arc;

use axum::http::StatusCode;
use std::time::{Duration, Instant};

use idem_gateway::console::{Health, Overview, SeriesRow};
use idem_gateway::counters::Metric;
use idem_gateway::{Config, GatewayDb};
use idem_sql::Store;
use idem_testkit::AppDb;

use super::seq;
use crate::support::{
    Downstream, Running, capture_logs, config_text, count, sqlite, stripe_event, system_clock,
};

/// The test configuration, plus source `seq` (to `app`) and destination `later` (at `later`,
/// retried after an hour) taking the Stripe source's `charge.refunded` events.
fn config(downstream: &Downstream, later: &Downstream) -> Config {
    let text = format!(
        r#"admin_token_env = "ADMIN_TOKEN"
{}
[[destination]]
name = "later"
url = "http://{}/events"
retry_schedule = ["1h"]
signing_secret_env = "APP_SECRET"

[[route]]
source = "stripe"
destination = "later"
event_types = ["charge.refunded"]
{}"#,
        config_text(downstream.addr, r#"["5ms"]"#),
        later.addr,
        seq::sections("integer")
    );
    Config::from_toml(&text, &seq::with_secret).unwrap()
}

/// POSTs version `v` of order `o1` as event `id` to source `seq`; returns the answer's status.
async fn post_seq<DB: GatewayDb>(gw: &Running<DB>, id: &str, v: i64) -> String {
    seq::post(gw, id, &v.to_string()).await
}

/// The application behind `later`: it fails every first attempt.
async fn fails_once() -> Downstream {
    Downstream::start(Arc::new(|r| {
        if r.header("idem-attempt") == Some("1") {
            StatusCode::SERVICE_UNAVAILABLE
        } else {
            StatusCode::OK
        }
    }))
    .await
}

/// The downstream of the scenario: `evt_dead` always fails, `evt_retry`'s first attempt does.
async fn downstream() -> Downstream {
    Downstream::start(Arc::new(|r| {
        let id = r.header("idem-event-id").unwrap_or_default();
        let first = r.header("idem-attempt") == Some("1");
        if id == "evt_dead" || (id == "evt_retry" && first) {
            StatusCode::SERVICE_UNAVAILABLE
        } else {
            StatusCode::OK
        }
    }))
    .await
}

/// Sends the scenario: through `first` the Stripe events, through `second` (another gateway on
/// the same database, or the same one) a duplicate and the sequence with its gap.
async fn send<DB: GatewayDb>(first: &Running<DB>, second: &Running<DB>) {
    let sub = |id: &str, created| {
        stripe_event(
            id,
            "customer.subscription.updated",
            "subscription",
            "sub_1",
            created,
        )
    };
    for (body, expected) in [
        (sub("evt_a", 100), "accepted"),
        (sub("evt_b", 200), "accepted"),
        (sub("evt_old", 150), "accepted"),
        (sub("evt_tie", 200), "accepted"),
        (
            stripe_event("evt_dead", "invoice.paid", "invoice", "in_1", 10),
            "accepted",
        ),
        (
            stripe_event("evt_retry", "invoice.paid", "invoice", "in_2", 10),
            "accepted",
        ),
        (
            stripe_event("evt_later", "charge.refunded", "charge", "ch_1", 10),
            "accepted",
        ),
    ] {
        assert_eq!(first.post_stripe(&body).await.json["status"], expected);
    }
    assert_eq!(
        second.post_stripe(&sub("evt_a", 100)).await.json["status"],
        "duplicate"
    );
    assert_eq!(post_seq(second, "seq_1", 1).await, "accepted");
    assert_eq!(post_seq(second, "seq_3", 3).await, "accepted");
}

/// The scenario's counts: (metric, stripe, seq, app, later).
const EXPECTED: [(Metric, u64, u64, u64, u64); 8] = [
    (Metric::Accepted, 7, 2, 0, 0),
    (Metric::Duplicate, 1, 0, 0, 0),
    (Metric::Stale, 1, 0, 1, 0),
    (Metric::Tie, 1, 0, 1, 0),
    (Metric::Gap, 0, 1, 1, 0),
    // evt_a, evt_b, evt_tie, evt_retry, evt_later (to app); seq_1, seq_3.
    (Metric::Delivered, 5, 2, 7, 0),
    // The first attempts of evt_dead and evt_retry (to app) and evt_later (to later).
    (Metric::Retried, 3, 0, 2, 1),
    (Metric::Dead, 1, 0, 1, 0),
];

/// Waits (up to 10 s) until the scenario's deliveries are where they stay for an hour: `app`
/// has none open, `later` one retrying.
async fn settled<DB: GatewayDb>(gw: &Running<DB>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let overview = gw.gateway.overview().await.unwrap();
        let backlog = |name: &str| {
            let b = overview.backlog.iter().find(|b| b.destination == name);
            let b = b.unwrap();
            (b.pending, b.retrying, b.in_flight)
        };
        if backlog("app") == (0, 0, 0) && backlog("later") == (0, 1, 0) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "not settled: {:?}",
            overview.backlog
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Checks `overview` against the scenario, the stored rows and what the operator commands
/// read, all taken once the deliveries settled (nothing moves between the reads: the one
/// delivery left open is due in an hour).
async fn check<DB: GatewayDb + AppDb>(gw: &Running<DB>, overview: &Overview) {
    let row =
        |rows: &[SeriesRow], name: &str| rows.iter().find(|r| r.name == name).unwrap().clone();
    let (stripe, seq, github) = (
        row(&overview.sources, "stripe"),
        row(&overview.sources, "seq"),
        row(&overview.sources, "github"),
    );
    let (app, later) = (
        row(&overview.destinations, "app"),
        row(&overview.destinations, "later"),
    );
    for (metric, in_stripe, in_seq, in_app, in_later) in EXPECTED {
        assert_eq!(stripe.last_hour(metric), in_stripe, "stripe {metric:?}");
        assert_eq!(
            stripe.last_day(metric),
            in_stripe,
            "stripe {metric:?} (day)"
        );
        assert_eq!(seq.last_hour(metric), in_seq, "seq {metric:?}");
        assert_eq!(github.last_hour(metric), 0, "github {metric:?}");
        if metric != Metric::Accepted && metric != Metric::Duplicate {
            assert_eq!(app.last_hour(metric), in_app, "app {metric:?}");
            assert_eq!(app.last_day(metric), in_app, "app {metric:?} (day)");
            assert_eq!(later.last_hour(metric), in_later, "later {metric:?}");
        }
    }
    assert_eq!(stripe.repeat_rate(), Some(1.0 / 8.0));
    let both = |metric| app.last_hour(metric) + later.last_hour(metric);

    // The stored rows.
    let rows = [
        (
            "SELECT COUNT(*) FROM idem_gateway_events WHERE source = 'stripe'",
            stripe.last_hour(Metric::Accepted),
        ),
        (
            "SELECT COUNT(*) FROM idem_gateway_events WHERE source = 'seq'",
            seq.last_hour(Metric::Accepted),
        ),
        (
            "SELECT COUNT(*) FROM idem_gateway_deliveries WHERE state = 'stale'",
            both(Metric::Stale),
        ),
        (
            "SELECT COUNT(*) FROM idem_gateway_deliveries WHERE tie",
            both(Metric::Tie),
        ),
        (
            "SELECT COUNT(*) FROM idem_gateway_attempts WHERE outcome = 'delivered'",
            both(Metric::Delivered),
        ),
        (
            "SELECT COUNT(*) FROM idem_gateway_attempts WHERE outcome = 'retry'",
            both(Metric::Retried),
        ),
        (
            "SELECT COUNT(*) FROM idem_gateway_deliveries WHERE state = 'dead'",
            both(Metric::Dead),
        ),
    ];
    for (sql, shown) in rows {
        assert_eq!(count(&gw.gateway, sql).await, shown as i64, "{sql}");
    }
    let backlog = |name: &str| {
        overview
            .backlog
            .iter()
            .find(|b| b.destination == name)
            .unwrap()
    };
    let retrying = "SELECT COUNT(*) FROM idem_gateway_deliveries \
                    WHERE destination = 'later' AND state = 'pending' AND failures > 0";
    assert_eq!(count(&gw.gateway, retrying).await, 1);
    assert_eq!(backlog("later").retrying, 1);
    let received = "SELECT received_at FROM idem_gateway_events WHERE event_id = 'evt_later'";
    let evt_later_received = count(&gw.gateway, received).await;
    assert_eq!(overview.oldest_undelivered, Some(evt_later_received));
    assert_eq!(
        backlog("later").oldest_undelivered,
        Some(evt_later_received)
    );
    assert_eq!(backlog("app").oldest_undelivered, None);

    // What the commands print: the demo's table (`stats`), `idem dlq list`, `idem events list`
    // and `idem events show`.
    let stats = gw.gateway.stats().await.unwrap();
    for name in ["app", "later"] {
        let counts = stats.destinations[name];
        let b = backlog(name);
        assert_eq!(
            (b.pending + b.retrying, b.in_flight, b.dead),
            (counts.pending, counts.in_flight, counts.dead),
            "{name}"
        );
        assert!(b.dispatcher.is_working(), "{name}: {:?}", b.dispatcher);
        assert_eq!(b.dispatcher.oldest_due, None, "{name}: nothing due yet");
    }
    assert_eq!(
        stats.oldest_undelivered.map(|t| t.as_millis()),
        overview.oldest_undelivered
    );
    assert_eq!(backlog("app").dead, 1);
    assert_eq!(
        gw.gateway
            .dead_letters(Some("app"), 100)
            .await
            .unwrap()
            .len() as u64,
        backlog("app").dead
    );
    assert_eq!(
        gw.gateway
            .list_events(Some("stripe"), 100)
            .await
            .unwrap()
            .len() as u64,
        stripe.last_hour(Metric::Accepted)
    );
    let shown = gw
        .gateway
        .show_event("stripe", "evt_later")
        .await
        .unwrap()
        .unwrap();
    let (delivery, attempts) = (shown.deliveries.iter())
        .find(|(d, _)| d.destination == "later")
        .unwrap();
    assert_eq!(delivery.state, idem_gateway::DeliveryState::Pending);
    let outcomes: Vec<_> = attempts.iter().map(|a| a.outcome.as_str()).collect();
    assert_eq!(
        outcomes,
        ["retry"],
        "pending after a failed attempt: retrying"
    );
    assert_eq!(
        stats.destinations["app"].delivered,
        app.last_hour(Metric::Delivered)
    );
    assert_eq!(
        stats.destinations["app"].stale,
        app.last_hour(Metric::Stale)
    );
    assert_eq!(
        stats.failed_attempts,
        both(Metric::Retried) + both(Metric::Dead)
    );
    assert_eq!(overview.store, Health::Working);
}

async fn overview_on_sqlite() {
    let (downstream, later) = (downstream().await, fails_once().await);
    let (_dir, store) = sqlite(system_clock()).await;
    let gw = Running::start(config(&downstream, &later), store).await;
    send(&gw, &gw).await;
    settled(&gw).await;
    let overview = gw.gateway.overview().await.unwrap();
    check(&gw, &overview).await;
    gw.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_overview_counts_what_the_rows_and_the_commands_show_sqlite() {
    capture_logs();
    overview_on_sqlite().await;
}

shared_stores!(the_overview_counts_what_two_processes_counted);

/// Two gateway processes' worth (two servers, two pools) on one database: what
/// each counted is in both overviews.
async fn the_overview_counts_what_two_processes_counted<DB: GatewayDb + AppDb>(url: String) {
    capture_logs();
    let (downstream, later) = (downstream().await, fails_once().await);
    let first = Running::start(
        config(&downstream, &later),
        Store::<DB>::connect(&url).await.unwrap(),
    )
    .await;
    let second = Running::start(
        config(&downstream, &later),
        Store::<DB>::connect(&url).await.unwrap(),
    )
    .await;
    send(&first, &second).await;
    settled(&first).await;
    let overview = first.gateway.overview().await.unwrap();
    check(&first, &overview).await;
    let from_second = second.gateway.overview().await.unwrap();
    assert_eq!(totals(&from_second), totals(&overview));
    first.server.shutdown().await.unwrap();
    second.server.shutdown().await.unwrap();
}

/// Every source's and destination's count per metric over the last hour and the last day.
/// Totals, not the per-minute series: two overviews read a minute boundary apart hold the same
/// counts one slot shifted.
fn totals(overview: &Overview) -> Vec<(String, Metric, u64, u64)> {
    (overview.sources.iter().chain(&overview.destinations))
        .flat_map(|row| {
            (row.per_minute.iter()).map(|(metric, _)| {
                let (hour, day) = (row.last_hour(*metric), row.last_day(*metric));
                (row.name.clone(), *metric, hour, day)
            })
        })
        .collect()
}

/// `idem gc` deletes count rows older than a week (on the injectable clock), not newer ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_deletes_counts_older_than_a_week() {
    use idem_core::{Clock, ManualClock};

    capture_logs();
    // One second into a minute: the counts are of that minute, which starts 1 s earlier.
    let now = idem_core::SystemClock.now().as_millis();
    let minute = now - now.rem_euclid(idem_gateway::counters::MINUTE_MS);
    let clock = ManualClock::new(idem_core::Timestamp(minute + 1_000));
    let (downstream, later) = (downstream().await, fails_once().await);
    let (_dir, store) = sqlite(Arc::new(clock.clone())).await;
    let gw = Running::start(config(&downstream, &later), store).await;
    let body = stripe_event("evt_gc", "invoice.paid", "invoice", "in_gc", 10);
    assert_eq!(gw.post_stripe(&body).await.json["status"], "accepted");
    gw.settle().await;
    let rows = "SELECT COUNT(*) FROM idem_gateway_counts";
    // accepted for the source; delivered for the source and the destination.
    assert_eq!(count(&gw.gateway, rows).await, 3);
    // The minute's start is exactly a week old: kept; a millisecond later it is older.
    clock.set(idem_core::Timestamp(minute).saturating_add(idem_gateway::counters::COUNTS_KEPT));
    assert_eq!(gw.gateway.gc().await.unwrap().counts, 0, "a week old: kept");
    clock.advance(std::time::Duration::from_millis(1));
    assert_eq!(gw.gateway.gc().await.unwrap().counts, 3);
    assert_eq!(count(&gw.gateway, rows).await, 0);
    gw.server.shutdown().await.unwrap();
}
