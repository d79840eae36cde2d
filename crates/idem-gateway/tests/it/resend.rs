//! Resend one event (issue 32, 5): `Gateway::resend` and `POST /admin/events/{source}/{event
//! id}/resend` forward a stored event again under the same `Idempotency-Key`, by replay's
//! order rules.

use idem_gateway::{Config, GatewayDb};
use idem_sql::Store;
use idem_testkit::AppDb;

use crate::support::{Downstream, Running, config_text, env, stripe_event};

async fn resend_one_event<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let downstream = Downstream::ok().await;
    let text = format!(
        "admin_token_env = \"ADMIN_TOKEN\"\n{}",
        config_text(downstream.addr, r#"["5ms"]"#)
    );
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    let older = stripe_event(
        "evt_sub_1",
        "customer.subscription.created",
        "subscription",
        "sub_1",
        1_700_000_100,
    );
    let newer = stripe_event(
        "evt_sub_2",
        "customer.subscription.updated",
        "subscription",
        "sub_1",
        1_700_000_200,
    );
    for body in [&older, &newer] {
        assert_eq!(gw.post_stripe(body).await.json["status"], "accepted");
        gw.settle().await;
    }
    assert_eq!(downstream.received().len(), 2);

    // The newest event of its entity: sent again, once, with the same Idempotency-Key.
    let report = gw
        .gateway
        .resend("stripe", "evt_sub_2", false, false)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((report.matched, report.requeued), (1, 1));
    gw.settle().await;
    let received = downstream.received();
    assert_eq!(received.len(), 3);
    assert_eq!(received[2].header("idem-event-id"), Some("evt_sub_2"));
    assert_eq!(
        received[2].header("user-agent"),
        Some(idem_gateway::USER_AGENT)
    );
    assert!(idem_gateway::USER_AGENT.starts_with("idem/"));
    assert_eq!(
        received[2].header("idempotency-key"),
        received[1].header("idempotency-key")
    );

    // The older one would put older state after newer: refused unless forced.
    let url = format!("{}/admin/events/stripe/evt_sub_1/resend", gw.url);
    let post = |query: &'static str| {
        let request = gw
            .client
            .post(format!("{url}{query}"))
            .bearer_auth("admin-token");
        async move {
            let bytes = request.send().await.unwrap().bytes().await.unwrap();
            serde_json::from_slice::<serde_json::Value>(&bytes).unwrap()
        }
    };
    let refused: serde_json::Value = post("").await;
    assert_eq!(refused["older"], 1);
    assert_eq!(refused["requeued"], 0);
    let dry: serde_json::Value = post("?force=true&dry_run=true").await;
    assert_eq!(dry["requeued"], 1);
    gw.settle().await;
    assert_eq!(
        downstream.received().len(),
        3,
        "nothing sent by a refusal or a dry run"
    );
    let forced: serde_json::Value = post("?force=true").await;
    assert_eq!(forced["requeued"], 1);
    gw.settle().await;
    assert_eq!(downstream.received().len(), 4);

    // An event not stored is 404; the library call says None.
    let missing = gw
        .client
        .post(format!("{}/admin/events/stripe/evt_nope/resend", gw.url))
        .bearer_auth("admin-token")
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    // Admin lists are bounded.
    let too_many = gw
        .client
        .get(format!("{}/admin/events?limit=100000000", gw.url))
        .bearer_auth("admin-token")
        .send()
        .await
        .unwrap();
    assert_eq!(too_many.status(), 400);
    assert!(
        gw.gateway
            .resend("stripe", "evt_nope", false, false)
            .await
            .unwrap()
            .is_none()
    );
    gw.server.shutdown().await.unwrap();
}

both_stores!(resend_one_event);
