//! The hand-off from ingest to dispatch (issue 14): a fresh event whose entity has nothing open
//! is claimed as it is stored and sent without a due query; one behind an open delivery of its
//! entity waits for it and follows as soon as that attempt ends. Every test polls once an hour,
//! so a wake-up that went missing shows as a delivery that never comes.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use idem_gateway::{Config, GatewayDb};
use idem_sql::Store;
use idem_testkit::AppDb;

use crate::support::{Downstream, Running, config_text, env, stripe_event, versions_by_created};

/// The test configuration with destination `app` renamed `name` (so that its metrics are this
/// test's own) and a poll of an hour.
fn config(downstream: &Downstream, schedule: &str, name: &str) -> Config {
    Config::from_toml(&text(downstream, schedule, name), &env).unwrap()
}

fn text(downstream: &Downstream, schedule: &str, name: &str) -> String {
    config_text(downstream.addr, schedule)
        .replace("poll_interval = \"20ms\"", "poll_interval = \"1h\"")
        .replace("name = \"app\"", &format!("name = \"{name}\""))
        .replace(
            "destination = \"app\"",
            &format!("destination = \"{name}\""),
        )
}

/// `sqlite` or `postgresql`: test names that differ between the two runs of one test, which
/// share the metrics recorder.
fn store_name<DB: GatewayDb>() -> String {
    <DB as idem_sql::sqlx::Database>::NAME.to_ascii_lowercase()
}

/// The value of counter line `name{labels}` on the gateway's `/metrics`, 0 when absent.
async fn counter<DB: GatewayDb>(gw: &Running<DB>, line: &str) -> u64 {
    let text = (gw.client.get(format!("{}/metrics", gw.url)).send().await)
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(line)?.trim().parse().ok())
        .unwrap_or(0)
}

/// Ten events of ten different entities, one after the other, to an idle destination: each is
/// handed off by ingest (ten claims on the `handoff` path, none on `due`), sent once as attempt
/// 1, and delivered. A first event goes before them: until the dispatcher's first due query has
/// run, the store may hold a backlog from before the start and nothing is handed off; once the
/// first event has arrived, that query has run.
async fn fresh_events_are_sent_without_a_due_query<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let downstream = Downstream::ok().await;
    let name = format!("handoff_{}", store_name::<DB>());
    let gw = Running::start(config(&downstream, r#"["10ms"]"#, &name), store).await;
    let claims = async |path: &str| {
        let line = format!("idem_dispatch_claims_total{{destination=\"{name}\",path=\"{path}\"}}");
        counter(&gw, &line).await
    };
    let arrived = async |id: &str| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while downstream.with_key(&format!("stripe:{id}")).is_empty() {
            assert!(Instant::now() < deadline, "{id} never arrived");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    let first = stripe_event(
        "evt_first",
        "customer.updated",
        "customer",
        "cus_first",
        100,
    );
    assert_eq!(gw.post_stripe(&first).await.json["status"], "accepted");
    arrived("evt_first").await;
    gw.settle().await;
    let before = (claims("handoff").await, claims("due").await);
    for n in 0..10 {
        let body = stripe_event(
            &format!("evt_h{n}"),
            "customer.updated",
            "customer",
            &format!("cus_h{n}"),
            100,
        );
        assert_eq!(gw.post_stripe(&body).await.json["status"], "accepted");
        // Each one arrives before the next is posted: the destination is idle each time.
        arrived(&format!("evt_h{n}")).await;
    }
    let stats = gw.settle().await;
    assert_eq!(stats.destinations[&name].delivered, 11);
    let received = downstream.received();
    assert_eq!(received.len(), 11);
    assert!(
        received
            .iter()
            .all(|r| r.header("idem-attempt") == Some("1"))
    );
    let after = (claims("handoff").await, claims("due").await);
    assert_eq!(
        (after.0 - before.0, after.1 - before.1),
        (10, 0),
        "claims (handoff, due) of the ten"
    );
    gw.server.shutdown().await.unwrap();
}

/// The first event of an entity fails once (retried after 200 ms); the entity's second event
/// arrives meanwhile. It is not handed off past the retrying one: the destination gets the
/// first (failed), the first again (delivered), then the second, claimed by the due query that
/// the end of the first's attempt wakes (the poll is an hour).
async fn an_event_behind_a_retrying_one_waits_for_it<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let failed_once = Arc::new(Mutex::new(false));
    let fail = Arc::clone(&failed_once);
    let downstream = Downstream::start(Arc::new(move |r| {
        let mut failed = fail.lock().unwrap();
        if r.header("idem-event-id") == Some("evt_r1") && !*failed {
            *failed = true;
            StatusCode::SERVICE_UNAVAILABLE
        } else {
            StatusCode::OK
        }
    }))
    .await;
    let name = format!("handoff_retry_{}", store_name::<DB>());
    let gw = Running::start(config(&downstream, r#"["200ms"]"#, &name), store).await;
    let first = stripe_event("evt_r1", "customer.updated", "customer", "cus_r", 100);
    let second = stripe_event("evt_r2", "customer.updated", "customer", "cus_r", 200);
    gw.post_stripe(&first).await;
    // The first attempt failed and its retry is scheduled: the entity has an open delivery.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let stats = gw.gateway.stats().await.unwrap();
        if stats.failed_attempts == 1 && stats.destinations[&name].pending == 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the first attempt never failed: {stats:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(gw.post_stripe(&second).await.json["status"], "accepted");
    let stats = gw.settle().await;
    assert_eq!(stats.destinations[&name].delivered, 2);
    let order: Vec<(String, String)> = downstream
        .received()
        .iter()
        .map(|r| {
            (
                r.header("idem-event-id").unwrap().to_owned(),
                r.header("idem-attempt").unwrap().to_owned(),
            )
        })
        .collect();
    let expected = [("evt_r1", "1"), ("evt_r1", "2"), ("evt_r2", "1")];
    assert_eq!(
        order,
        expected.map(|(e, a)| (e.to_owned(), a.to_owned())).to_vec()
    );
    gw.server.shutdown().await.unwrap();
}

/// Twenty entities, five versions each, every entity's versions posted one after the other
/// while all entities go at once, to a destination that takes 2 ms per request: some
/// deliveries are handed off, the others wait behind their entity's open one. Each event
/// arrives once and each entity's in version order, with nothing left for the hourly poll.
async fn entity_order_holds_with_handoffs_under_load<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let downstream = Downstream::start(Arc::new(|_| {
        std::thread::sleep(Duration::from_millis(2));
        StatusCode::OK
    }))
    .await;
    let name = format!("handoff_load_{}", store_name::<DB>());
    let gw = Arc::new(Running::start(config(&downstream, r#"["10ms"]"#, &name), store).await);
    let mut senders = tokio::task::JoinSet::new();
    for entity in 0..20 {
        let gw = Arc::clone(&gw);
        senders.spawn(async move {
            for version in 0..5 {
                let body = stripe_event(
                    &format!("evt_l{entity}_{version}"),
                    "customer.updated",
                    "customer",
                    &format!("cus_l{entity}"),
                    1_700_000_000 + version,
                );
                assert_eq!(gw.post_stripe(&body).await.json["status"], "accepted");
            }
        });
    }
    while let Some(sent) = senders.join_next().await {
        sent.unwrap();
    }
    let stats = gw.settle().await;
    assert_eq!(stats.destinations[&name].delivered, 100);
    let per_entity = versions_by_created(&downstream, 1_700_000_000);
    assert_eq!(per_entity.len(), 20);
    for (entity, versions) in &per_entity {
        assert_eq!(
            versions,
            &(0..5).collect::<Vec<_>>(),
            "{entity}: once each, in order"
        );
    }
    let path =
        |p: &str| format!("idem_dispatch_claims_total{{destination=\"{name}\",path=\"{p}\"}}");
    let (handoff, due, successor) = (
        counter(&gw, &path("handoff")).await,
        counter(&gw, &path("due")).await,
        counter(&gw, &path("successor")).await,
    );
    assert_eq!(handoff + due + successor, 100, "one claim per delivery");
    assert!(handoff > 0, "nothing was handed off");
    let gw = Arc::into_inner(gw).expect("senders done");
    gw.server.shutdown().await.unwrap();
}

/// Three events of one entity: the first is handed off and held at the destination until the
/// other two are stored (pending, behind it). The end of each attempt claims the entity's next
/// delivery in the commit that records its outcome, so the three go in version order with one
/// hand-off, two `successor` claims and no due query claiming any (the poll is an hour: a
/// successor left for a due query would wait for a wake-up).
async fn the_next_delivery_of_an_entity_is_claimed_as_its_predecessor_ends<
    DB: GatewayDb + AppDb,
>(
    store: Store<DB>,
) {
    let started = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let release = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (on_start, on_release) = (Arc::clone(&started), Arc::clone(&release));
    let downstream = Downstream::start(Arc::new(move |r| {
        if r.header("idem-event-id") == Some("evt_s0") {
            on_start.store(true, std::sync::atomic::Ordering::SeqCst);
            let deadline = Instant::now() + Duration::from_secs(10);
            while !on_release.load(std::sync::atomic::Ordering::SeqCst) && Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        StatusCode::OK
    }))
    .await;
    let name = format!("handoff_successor_{}", store_name::<DB>());
    // The attempt timeout outlasts the hold (10 s at most): on a busy machine storing the other
    // two events took longer than the suite's 2 s, and evt_s0 was sent again.
    let held =
        text(&downstream, r#"["10ms"]"#, &name).replace("timeout = \"2s\"", "timeout = \"30s\"");
    let gw = Running::start(Config::from_toml(&held, &env).unwrap(), store).await;
    let event = |n: i64| {
        stripe_event(
            &format!("evt_s{n}"),
            "customer.updated",
            "customer",
            "cus_s",
            100 + n,
        )
    };
    assert_eq!(gw.post_stripe(&event(0)).await.json["status"], "accepted");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !started.load(std::sync::atomic::Ordering::SeqCst) {
        assert!(
            Instant::now() < deadline,
            "evt_s0 never reached the destination"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    for n in 1..3 {
        assert_eq!(gw.post_stripe(&event(n)).await.json["status"], "accepted");
    }
    let path =
        |p: &str| format!("idem_dispatch_claims_total{{destination=\"{name}\",path=\"{p}\"}}");
    let due_before = counter(&gw, &path("due")).await;
    release.store(true, std::sync::atomic::Ordering::SeqCst);
    let stats = gw.settle().await;
    assert_eq!(stats.destinations[&name].delivered, 3);
    let order: Vec<String> = downstream
        .received()
        .iter()
        .map(|r| r.header("idem-event-id").unwrap().to_owned())
        .collect();
    assert_eq!(order, ["evt_s0", "evt_s1", "evt_s2"]);
    assert_eq!(
        (
            counter(&gw, &path("handoff")).await,
            counter(&gw, &path("successor")).await,
            counter(&gw, &path("due")).await - due_before,
        ),
        (1, 2, 0),
        "claims (handoff, successor, due after the release)"
    );
    gw.server.shutdown().await.unwrap();
}

both_stores!(
    fresh_events_are_sent_without_a_due_query,
    an_event_behind_a_retrying_one_waits_for_it,
    entity_order_holds_with_handoffs_under_load,
    the_next_delivery_of_an_entity_is_claimed_as_its_predecessor_ends,
);
