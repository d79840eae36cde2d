//! `POST /admin/consumers/{name}/reset` (issue 33, part 4): an application consumer sharing
//! the gateway's database is reset once confirmed (a dry run first), leaving the gateway's own
//! rows; a live consumer, the gateway's inbox and its routes are refused with 409, an unknown
//! name with 404, a missing confirmation with 400; every answer is problem+json.

use std::sync::Arc;
use std::time::Duration;

use idem_core::{Clock, DedupKey, Entity, EventId, ManualClock, Name, SystemClock, Version};
use idem_gateway::{Config, GatewayDb};
use idem_sql::{Event, Runner, Store};
use idem_testkit::{AppDb, exec, query_i64};

use crate::admin::{JSON, admin};
use crate::support::{Downstream, Running, config_text, env, lines_with, stripe_event};

/// Runs `count` events (`evt_{prefix}_{n}`, entity `acct/{prefix}_{n}`) through consumer `name`
/// with the store's clock set `ago` before now.
async fn consume<DB: GatewayDb>(store: &Store<DB>, name: &str, count: usize, ago: Duration) {
    let at = SystemClock.now().saturating_sub(ago);
    let store = store.clone().with_clock(Arc::new(ManualClock::new(at)));
    let runner = Runner::new(store, &Name::new("consumer", name).unwrap());
    let source = Name::new("source", "orders").unwrap();
    for n in 0..count {
        let id = format!("evt_{name}_{n}");
        let event = Event::new(DedupKey::from_event(&source, &EventId::new(&id).unwrap()))
            .with_entity(
                Entity::new("acct", format!("{name}_{n}")).unwrap(),
                Version::sequence(1),
            );
        let outcome = runner.run(&event, async |_tx| Ok(())).await.unwrap();
        assert_eq!(outcome.name(), "applied");
    }
}

/// (inbox, version rows) of `consumer`.
async fn rows<DB: GatewayDb + AppDb>(store: &Store<DB>, consumer: &str) -> (i64, i64) {
    let inbox = "SELECT COUNT(*) FROM idem_inbox WHERE consumer = $1";
    let versions = "SELECT COUNT(*) FROM idem_versions WHERE consumer = $1";
    (
        query_i64(store, inbox, vec![consumer.into()]).await[0],
        query_i64(store, versions, vec![consumer.into()]).await[0],
    )
}

async fn admin_resets_an_application_consumer<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let downstream = Downstream::ok().await;
    let text = format!(
        "admin_token_env = \"ADMIN_TOKEN\"\n{}",
        config_text(downstream.addr, r#"["5ms"]"#)
    );
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store.clone()).await;
    let body = stripe_event("evt_reset", "customer.updated", "customer", "cus_1", 1);
    assert_eq!(gw.post_stripe(&body).await.json["status"], "accepted");
    gw.settle().await;
    consume(&store, "billing_v1", 3, Duration::from_secs(120)).await;
    consume(&store, "live_v1", 1, Duration::from_secs(10)).await;
    let gateway_rows = (
        rows(&store, "idem-gateway").await,
        rows(&store, "stripe.app").await,
    );
    assert_eq!(gateway_rows, ((1, 0), (0, 1)));

    // A route whose events gc collected: its guard rows stay (C9), with no inbox key beside
    // them, as no library consumer's are.
    consume(&store, "gone.route", 2, Duration::from_secs(120)).await;
    exec(
        &store,
        "DELETE FROM idem_inbox WHERE consumer = $1",
        vec!["gone.route".into()],
    )
    .await;

    let reset = |name: &str| format!("/admin/consumers/{name}/reset");
    // Unconfirmed, the refusals come first: only a consumer a reset would take is asked to
    // confirm.
    for (name, status, code) in [
        ("idem-gateway", 409, "gateway-consumer"),
        ("nobody_v1", 404, "unknown-consumer"),
    ] {
        let answer = admin(&gw, &reset(name), Some("{}"), JSON).await;
        assert_eq!(answer.status, status, "{name}: {}", answer.json);
        assert_eq!(answer.problem().0, code, "{name}");
    }
    let refused = admin(&gw, &reset("billing_v1"), Some("{}"), JSON).await;
    assert_eq!(refused.status, 400);
    let (code, detail) = refused.problem();
    assert_eq!(code, "confirm-required");
    assert!(detail.contains("\"confirm\": true"), "{detail}");

    let dry = admin(&gw, &reset("billing_v1"), Some(r#"{"dry_run":true}"#), JSON).await;
    assert_eq!(dry.status, 200, "{}", dry.json);
    let expected_rows = serde_json::json!({
        "idem_inbox": 3, "idem_versions": 3, "idem_parked": 0, "idem_kafka_offsets": 0
    });
    assert_eq!(
        (&dry.json["dry_run"], &dry.json["rows"], &dry.json["total"]),
        (
            &serde_json::json!(true),
            &expected_rows,
            &serde_json::json!(6)
        )
    );
    assert_eq!(
        rows(&store, "billing_v1").await,
        (3, 3),
        "a dry run deletes nothing"
    );

    let done = admin(&gw, &reset("billing_v1"), Some(r#"{"confirm":true}"#), JSON).await;
    assert_eq!(done.status, 200, "{}", done.json);
    assert_eq!(
        (&done.json["dry_run"], &done.json["rows"]),
        (&serde_json::json!(false), &expected_rows)
    );
    assert_eq!(rows(&store, "billing_v1").await, (0, 0));
    assert_eq!(rows(&store, "live_v1").await, (1, 1));
    assert_eq!(
        (
            rows(&store, "idem-gateway").await,
            rows(&store, "stripe.app").await
        ),
        gateway_rows
    );
    let audited = lines_with("INFO", "reset-consumer");
    assert!(
        audited
            .iter()
            .any(|l| l.contains("operator action done") && l.contains("billing_v1")),
        "{audited:?}"
    );

    let confirm = Some(r#"{"confirm":true}"#);
    for (name, status, code, says) in [
        ("live_v1", 409, "consumer-live", "ms ago"),
        (
            "idem-gateway",
            409,
            "gateway-consumer",
            "idem replay --source S",
        ),
        ("stripe.app", 409, "gateway-consumer", "route stripe.app"),
        ("gone.route", 409, "gateway-consumer", "no inbox key"),
        ("nobody_v1", 404, "unknown-consumer", "live_v1"),
        ("bad%20name", 400, "bad-consumer-name", "\"bad name\""),
    ] {
        let answer = admin(&gw, &reset(name), confirm, JSON).await;
        assert_eq!(answer.status, status, "{name}: {}", answer.json);
        let (got, detail) = answer.problem();
        assert_eq!(got, code, "{name}: {detail}");
        assert!(detail.contains(says), "{name}: {detail}");
    }
    assert_eq!(rows(&store, "live_v1").await, (1, 1));
    assert_eq!(rows(&store, "gone.route").await, (0, 2));
    assert_eq!(
        (
            rows(&store, "idem-gateway").await,
            rows(&store, "stripe.app").await
        ),
        gateway_rows
    );
    gw.server.shutdown().await.unwrap();
}

both_stores!(admin_resets_an_application_consumer);
