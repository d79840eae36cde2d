//! Order decisions read the database, not the invoking configuration (issue 32, 2): a redrive
//! of a dead letter older than its entity's newest delivered event is refused whatever
//! configuration the command runs with — one lacking the destination, or one where the route
//! was renamed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::http::StatusCode;
use idem_gateway::operations::RedriveRequest;
use idem_gateway::{Config, Gateway, GatewayDb};
use idem_sql::Store;
use idem_testkit::AppDb;

use crate::support::{Downstream, Running, config_text, env, stripe_event};

async fn redrive_order_is_read_from_the_database<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let failing = Arc::new(AtomicBool::new(true));
    let fail = Arc::clone(&failing);
    let downstream = Downstream::start(Arc::new(move |r| {
        if fail.load(Ordering::SeqCst) && r.header("idem-event-id") == Some("evt_created") {
            StatusCode::SERVICE_UNAVAILABLE
        } else {
            StatusCode::OK
        }
    }))
    .await;
    let text = config_text(downstream.addr, r#"["5ms"]"#);
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store.clone()).await;
    let created = stripe_event(
        "evt_created",
        "customer.subscription.created",
        "subscription",
        "sub_1",
        1_700_000_100,
    );
    let updated = stripe_event(
        "evt_updated",
        "customer.subscription.updated",
        "subscription",
        "sub_1",
        1_700_000_200,
    );
    assert_eq!(gw.post_stripe(&created).await.json["status"], "accepted");
    gw.settle().await;
    assert_eq!(gw.post_stripe(&updated).await.json["status"], "accepted");
    gw.settle().await;
    failing.store(false, Ordering::SeqCst);
    let letters = gw.gateway.dead_letters(None, 10).await.unwrap();
    assert_eq!(letters.len(), 1);
    let id = letters[0].id;
    gw.server.shutdown().await.unwrap();

    let by_id = RedriveRequest {
        deliveries: vec![id],
        ..RedriveRequest::default()
    };
    // A configuration without the destination and its route (an operator's other file).
    let lacking = text.split("[[destination]]").next().unwrap().to_owned();
    // One where the stripe route was renamed.
    let renamed = text.replace(
        "[[route]]\nsource = \"stripe\"",
        "[[route]]\nname = \"stripe-renamed\"\nsource = \"stripe\"",
    );
    assert_ne!(renamed, text);
    for other in [lacking, renamed] {
        let gateway = Gateway::new(Config::for_operations(&other, &env).unwrap(), store.clone());
        let report = gateway.redrive(&by_id).await.unwrap();
        assert_eq!(
            (report.matched, report.redriven, report.older),
            (1, 0, 1),
            "refused as older under {other}"
        );
    }
    let created_count = || {
        downstream
            .received()
            .iter()
            .filter(|r| r.header("idem-event-id") == Some("evt_created"))
            .count()
    };
    let before = created_count();
    // Forced, it is sent (under the original configuration's gateway).
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    let forced = RedriveRequest {
        force: true,
        ..by_id
    };
    assert_eq!(gw.gateway.redrive(&forced).await.unwrap().redriven, 1);
    gw.settle().await;
    assert_eq!(created_count(), before + 1);
    gw.server.shutdown().await.unwrap();
}

both_stores!(redrive_order_is_read_from_the_database);
