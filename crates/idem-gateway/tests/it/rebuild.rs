//! Issue 33, part 3 (the gateway's half): a rebuild replay (`Gateway::rebuild`, `idem replay
//! --rebuild`) sends every stored event of a source's range to one destination, stale ones and
//! those with no delivery there included, one per entity at a time in version order (even on an
//! `ordering = "none"` route with concurrency), each with `Idem-Replay: rebuild` and the
//! event's own Idempotency-Key; live traffic never carries the header. It refuses missing
//! bodies (unless skipped), open deliveries and a destination no route of the source leads to.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use idem_core::{Clock, ManualClock};
use idem_gateway::operations::{RebuildReport, RebuildRequest};
use idem_gateway::{Config, Error, GatewayDb, RequestError};
use idem_sql::Store;
use idem_testkit::AppDb;
use idem_testkit::downstream::Received;

use crate::support::{Downstream, Running, config_text, env, stripe_event};

/// The Stripe events' `created` base: version `n` is `BASE + n`.
const BASE: i64 = 1_700_000_000;

/// A rebuild of every `stripe` event (of the last day) to `destination`.
fn request(destination: &str, dry_run: bool) -> RebuildRequest {
    RebuildRequest {
        source: "stripe".into(),
        since: 0,
        until: None,
        event_type: None,
        destination: destination.into(),
        dry_run,
        skip_missing_bodies: false,
    }
}

/// The Stripe event `evt_{entity}_{version}` of subscription `entity` at version `version`.
fn event(entity: &str, version: i64) -> Vec<u8> {
    stripe_event(
        &format!("evt_{entity}_{version}"),
        "customer.subscription.updated",
        "subscription",
        entity,
        BASE + version,
    )
}

/// Each entity's versions in the order `requests` came.
fn versions(requests: &[Received]) -> BTreeMap<String, Vec<i64>> {
    let mut per_entity = BTreeMap::<String, Vec<i64>>::new();
    for request in requests {
        let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
        per_entity
            .entry(body["data"]["object"]["id"].as_str().unwrap().to_owned())
            .or_default()
            .push(body["created"].as_i64().unwrap() - BASE);
    }
    per_entity
}

/// `(event id, Idempotency-Key, Idem-Replay)` of each of `requests`.
fn keys(requests: &[Received]) -> Vec<(String, String, Option<String>)> {
    requests
        .iter()
        .map(|r| {
            (
                r.header("idem-event-id").unwrap().to_owned(),
                r.header("idempotency-key").unwrap().to_owned(),
                r.header("idem-replay").map(str::to_owned),
            )
        })
        .collect()
}

/// `config_text` with a second destination `v2` (concurrency 4) at `v2`, which a route from
/// stripe with `ordering = "none"` leads to when `routed`.
fn with_v2(text: &str, v2: &Downstream, routed: bool) -> String {
    let route = if routed {
        "[[route]]\nsource = \"stripe\"\ndestination = \"v2\"\nordering = \"none\"\n"
    } else {
        "[[route]]\nsource = \"github\"\ndestination = \"v2\"\n"
    };
    format!(
        "{text}\n[[destination]]\nname = \"v2\"\nurl = \"http://{}/events\"\nconcurrency = 4\n\
         retry_schedule = [\"5ms\"]\nsigning_secret_env = \"APP_SECRET\"\n\n{route}",
        v2.addr
    )
}

/// A downstream that answers a rebuild's first version of each entity 50 ms late: sent side by
/// side with the later ones (no entity order), they would be recorded first.
async fn slow_first_versions() -> Downstream {
    Downstream::start(Arc::new(|r| {
        let id = r.header("idem-event-id").unwrap_or_default();
        if r.header("idem-replay").is_some() && id.ends_with("_1") {
            std::thread::sleep(Duration::from_millis(50));
        }
        StatusCode::OK
    }))
    .await
}

async fn rebuild_sends_every_event_in_version_order<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let app = slow_first_versions().await;
    let v2 = slow_first_versions().await;
    let text = config_text(app.addr, r#"["5ms"]"#);
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store.clone()).await;
    // sub_1's v3 arrives before its v2: v2 is recorded stale on app, never sent.
    for (entity, version) in [
        ("sub_1", 1),
        ("sub_1", 3),
        ("sub_1", 2),
        ("sub_2", 1),
        ("sub_2", 2),
    ] {
        assert_eq!(
            gw.post_stripe(&event(entity, version)).await.json["status"],
            "accepted"
        );
    }
    gw.settle().await;
    let live = app.received();
    assert_eq!(versions(&live)["sub_1"], [1, 3]);
    assert_eq!(versions(&live)["sub_2"], [1, 2]);
    assert!(live.iter().all(|r| r.header("idem-replay").is_none()));
    gw.server.shutdown().await.unwrap();

    // A new consumer version behind v2, routed only now: no delivery there yet.
    let text = with_v2(&text, &v2, true);
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    let dry = gw.gateway.rebuild(&request("app", true)).await.unwrap();
    let expected = RebuildReport {
        matched: 5,
        queued: 5,
        stale_included: 1,
        ..RebuildReport::default()
    };
    assert_eq!(dry, expected);
    let dry_v2 = gw.gateway.rebuild(&request("v2", true)).await.unwrap();
    assert_eq!(
        dry_v2,
        RebuildReport {
            matched: 5,
            queued: 5,
            created: 5,
            ..RebuildReport::default()
        }
    );
    // The dry runs changed nothing: nothing due, nothing sent.
    let stats = gw.settle().await;
    assert_eq!(stats.destinations["app"].delivered, 4);
    assert_eq!((app.received().len(), v2.received().len()), (4, 0));

    assert_eq!(
        gw.gateway.rebuild(&request("app", false)).await.unwrap(),
        expected
    );
    assert_eq!(
        gw.gateway.rebuild(&request("v2", false)).await.unwrap(),
        dry_v2
    );
    gw.settle().await;
    let rebuilt = app.received().split_off(4);
    let mut expected_keys: Vec<_> = ["sub_1_1", "sub_1_2", "sub_1_3", "sub_2_1", "sub_2_2"]
        .iter()
        .map(|e| {
            let key = format!("\"stripe:evt_{e}\"");
            (format!("evt_{e}"), key, Some("rebuild".to_owned()))
        })
        .collect();
    for (requests, name) in [(rebuilt, "app"), (v2.received(), "v2")] {
        let per_entity = versions(&requests);
        assert_eq!(per_entity["sub_1"], [1, 2, 3], "{name}");
        assert_eq!(per_entity["sub_2"], [1, 2], "{name}");
        let mut got = keys(&requests);
        got.sort();
        expected_keys.sort();
        assert_eq!(got, expected_keys, "{name}");
    }
    // The live keys were the same.
    let live_keys = keys(&live);
    assert!(
        live_keys
            .iter()
            .all(|(id, key, _)| *key == format!("\"stripe:{id}\""))
    );

    // Live traffic after the rebuild carries no Idem-Replay.
    assert_eq!(
        gw.post_stripe(&event("sub_1", 4)).await.json["status"],
        "accepted"
    );
    gw.settle().await;
    for downstream in [&app, &v2] {
        let last = downstream.received().pop().unwrap();
        assert_eq!(last.header("idem-event-id"), Some("evt_sub_1_4"));
        assert_eq!(last.header("idem-replay"), None);
    }
    gw.server.shutdown().await.unwrap();
}

both_stores!(rebuild_sends_every_event_in_version_order);

async fn rebuild_refuses_what_it_cannot_send<DB: GatewayDb + AppDb>(store: Store<DB>) {
    // evt_busy_1 is never delivered: it stays pending, retried in an hour.
    let app = Downstream::start(Arc::new(|r| {
        if r.header("idem-event-id") == Some("evt_busy_1") {
            StatusCode::SERVICE_UNAVAILABLE
        } else {
            StatusCode::OK
        }
    }))
    .await;
    let v2 = Downstream::ok().await;
    let text = with_v2(&config_text(app.addr, r#"["1h"]"#), &v2, false);
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;

    let refused = gw.gateway.rebuild(&request("v2", true)).await.unwrap_err();
    let Error::Request(RequestError::NoRoute { routes, .. }) = &refused else {
        panic!("{refused:?}");
    };
    assert_eq!(routes, &["stripe.app -> app"]);
    assert!(
        refused.to_string().contains("\"stripe.app -> app\""),
        "{refused}"
    );
    let unknown = gw
        .gateway
        .rebuild(&request("nowhere", true))
        .await
        .unwrap_err();
    assert!(matches!(
        unknown,
        Error::Request(RequestError::UnknownDestination { .. })
    ));

    assert_eq!(
        gw.post_stripe(&event("ok", 1)).await.json["status"],
        "accepted"
    );
    assert_eq!(
        gw.post_stripe(&event("busy", 1)).await.json["status"],
        "accepted"
    );
    // evt_ok_1 delivered (evt_busy_1 never is: no settling).
    let deadline = Instant::now() + Duration::from_secs(10);
    while gw.gateway.stats().await.unwrap().destinations["app"].delivered < 1 {
        assert!(Instant::now() < deadline, "evt_ok_1 was not delivered");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let dry = gw.gateway.rebuild(&request("app", true)).await.unwrap();
    assert_eq!((dry.matched, dry.queued, dry.in_progress), (2, 1, 1));
    let refused = gw
        .gateway
        .rebuild(&request("app", false))
        .await
        .unwrap_err();
    assert!(
        matches!(
            refused,
            Error::Request(RequestError::DeliveriesInProgress { count: 1, .. })
        ),
        "{refused:?}"
    );
    gw.server.shutdown().await.unwrap();
}

both_stores!(rebuild_refuses_what_it_cannot_send);

/// Bodies dropped by body_retention: counted by the dry run, the rebuild refused with nothing
/// changed, then skipped and counted with `skip_missing_bodies`.
async fn missing_bodies_refuse_unless_skipped<DB: GatewayDb + AppDb>(
    store: Store<DB>,
    clock: ManualClock,
) {
    let app = Downstream::ok().await;
    let text = format!(
        "retention = \"3d\"\nbody_retention = \"1h\"\n{}",
        config_text(app.addr, r#"["5ms"]"#)
    );
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    for version in [1, 2] {
        let answer = gw
            .post_stripe_at(clock.now(), &event("sub_b", version))
            .await;
        assert_eq!(answer.json["status"], "accepted");
    }
    gw.settle().await;
    clock.advance(Duration::from_secs(2 * 3600));
    assert_eq!(gw.gateway.gc().await.unwrap().bodies, 2);
    let answer = gw.post_stripe_at(clock.now(), &event("sub_b", 3)).await;
    assert_eq!(answer.json["status"], "accepted");
    gw.settle().await;
    assert_eq!(app.received().len(), 3);

    let dry = gw.gateway.rebuild(&request("app", true)).await.unwrap();
    let counted = RebuildReport {
        matched: 3,
        queued: 1,
        no_body: 2,
        ..RebuildReport::default()
    };
    assert_eq!(dry, counted);
    let refused = gw
        .gateway
        .rebuild(&request("app", false))
        .await
        .unwrap_err();
    assert!(
        matches!(
            refused,
            Error::Request(RequestError::BodiesMissing { count: 2 })
        ),
        "{refused:?}"
    );
    let stats = gw.settle().await;
    assert_eq!(stats.destinations["app"].delivered, 3);
    assert_eq!(app.received().len(), 3);

    let skip = RebuildRequest {
        skip_missing_bodies: true,
        ..request("app", false)
    };
    assert_eq!(gw.gateway.rebuild(&skip).await.unwrap(), counted);
    gw.settle().await;
    let rebuilt = app.received().split_off(3);
    assert_eq!(
        keys(&rebuilt),
        [(
            "evt_sub_b_3".to_owned(),
            "\"stripe:evt_sub_b_3\"".to_owned(),
            Some("rebuild".to_owned())
        )]
    );
    gw.server.shutdown().await.unwrap();
}

mod missing_bodies {
    use std::sync::Arc;

    use idem_core::{ManualClock, Timestamp};

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn sqlite() {
        crate::support::capture_logs();
        let clock = ManualClock::new(Timestamp(super::BASE * 1000));
        let (_dir, store) = crate::support::sqlite(Arc::new(clock.clone())).await;
        super::missing_bodies_refuse_unless_skipped(store, clock).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn postgres() {
        crate::support::capture_logs();
        let clock = ManualClock::new(Timestamp(super::BASE * 1000));
        let (_dir, store) = crate::support::postgres(Arc::new(clock.clone())).await;
        super::missing_bodies_refuse_unless_skipped(store, clock).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn mysql() {
        crate::support::capture_logs();
        let clock = ManualClock::new(Timestamp(super::BASE * 1000));
        let (_dir, store) = crate::support::mysql(Arc::new(clock.clone())).await;
        super::missing_bodies_refuse_unless_skipped(store, clock).await;
    }
}
