//! Two gateway processes sharing one database: PostgreSQL (`name::postgres`) and MySQL/MariaDB
//! (`name::mysql`), the stores several processes can share.

use idem_gateway::{Config, GatewayDb};
use idem_sql::Store;

use crate::support::{
    Downstream, Running, STRIPE_SECRET, capture_logs, config_text, env, post, stripe_event,
    unix_now, versions_by_created,
};
use idem_http::verify::stripe;

shared_stores!(
    two_gateways_on_one_database_deliver_once,
    two_gateways_never_send_one_delivery_at_once_and_keep_entity_order,
);

/// The same Stripe event posted to two gateways at once: one `accepted`, one `duplicate`, one
/// delivery; and a stream of events posted to both, each delivered exactly once although both
/// dispatchers compete for every delivery.
async fn two_gateways_on_one_database_deliver_once<DB: GatewayDb>(url: String) {
    capture_logs();
    let downstream = Downstream::ok().await;
    let text = config_text(downstream.addr, r#"["10ms", "20ms"]"#);
    let a = Running::start(
        Config::from_toml(&text, &env).unwrap(),
        Store::<DB>::connect(&url).await.unwrap(),
    )
    .await;
    let b = Running::start(
        Config::from_toml(&text, &env).unwrap(),
        Store::<DB>::connect(&url).await.unwrap(),
    )
    .await;

    let body = stripe_event(
        "evt_two_gw",
        "customer.created",
        "customer",
        "cus_c",
        1_700_000_000,
    );
    let signature = stripe::sign(STRIPE_SECRET, unix_now(), &body);
    let headers = [("stripe-signature", signature)];
    let (x, y) = tokio::join!(
        post(&a.client, &a.url, "stripe", &headers, &body),
        post(&b.client, &b.url, "stripe", &headers, &body),
    );
    assert_eq!((x.status, y.status), (200, 200));
    let mut statuses = [
        x.json["status"].as_str().unwrap(),
        y.json["status"].as_str().unwrap(),
    ];
    statuses.sort_unstable();
    assert_eq!(statuses, ["accepted", "duplicate"]);

    for i in 0..40 {
        let body = stripe_event(
            &format!("evt_c{i}"),
            "customer.created",
            "customer",
            &format!("cus_c{i}"),
            1,
        );
        let signature = stripe::sign(STRIPE_SECRET, unix_now(), &body);
        let headers = [("stripe-signature", signature)];
        let (x, y) = tokio::join!(
            post(&a.client, &a.url, "stripe", &headers, &body),
            post(&b.client, &b.url, "stripe", &headers, &body),
        );
        assert_eq!((x.status, y.status), (200, 200));
    }
    a.settle().await;
    b.settle().await;
    assert_eq!(downstream.with_key("stripe:evt_two_gw").len(), 1);
    for i in 0..40 {
        assert_eq!(
            downstream.with_key(&format!("stripe:evt_c{i}")).len(),
            1,
            "evt_c{i}"
        );
    }
    assert_eq!(downstream.received().len(), 41);
    a.server.shutdown().await.unwrap();
    b.server.shutdown().await.unwrap();
}

/// Two gateways on one database under concurrent load: 20 entities, 10 versions
/// each, every entity's events posted in version order alternately to either gateway, while the
/// application takes 5 ms per request. Both dispatchers claim from the same rows, yet no
/// delivery is ever sent by both at once, each is delivered once, and each entity's events
/// arrive in version order.
async fn two_gateways_never_send_one_delivery_at_once_and_keep_entity_order<DB: GatewayDb>(
    url: String,
) {
    use std::collections::HashSet;
    use std::sync::{Arc, Mutex};

    let in_flight: Arc<Mutex<HashSet<String>>> = Arc::default();
    let overlaps: Arc<Mutex<Vec<String>>> = Arc::default();
    let (busy, seen) = (Arc::clone(&in_flight), Arc::clone(&overlaps));
    let downstream = Downstream::start(Arc::new(move |request| {
        let key = request.header("idempotency-key").unwrap_or("").to_owned();
        if !busy.lock().unwrap().insert(key.clone()) {
            seen.lock().unwrap().push(key.clone());
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
        busy.lock().unwrap().remove(&key);
        axum::http::StatusCode::OK
    }))
    .await;
    let text = config_text(downstream.addr, r#"["10ms", "20ms"]"#);
    let start = |url: String, text: String| async move {
        Running::start(
            Config::from_toml(&text, &env).unwrap(),
            Store::<DB>::connect(&url).await.unwrap(),
        )
        .await
    };
    let a = Arc::new(start(url.clone(), text.clone()).await);
    let b = Arc::new(start(url, text).await);

    let mut senders = tokio::task::JoinSet::new();
    for entity in 0..20 {
        let (a, b) = (Arc::clone(&a), Arc::clone(&b));
        senders.spawn(async move {
            for version in 0..10 {
                let body = stripe_event(
                    &format!("evt_o{entity}_{version}"),
                    "customer.updated",
                    "customer",
                    &format!("cus_o{entity}"),
                    1_700_000_000 + version,
                );
                let target = if (entity + version) % 2 == 0 { &a } else { &b };
                let answer = target.post_stripe(&body).await;
                assert_eq!(answer.status, 200, "{:?}", answer.json);
                assert_eq!(answer.json["status"], "accepted");
            }
        });
    }
    while let Some(sent) = senders.join_next().await {
        sent.unwrap();
    }
    a.settle().await;
    b.settle().await;

    assert_eq!(
        *overlaps.lock().unwrap(),
        Vec::<String>::new(),
        "sent twice at once"
    );
    let per_entity = versions_by_created(&downstream, 1_700_000_000);
    assert_eq!(per_entity.len(), 20);
    for (entity, versions) in &per_entity {
        assert_eq!(
            versions,
            &(0..10).collect::<Vec<_>>(),
            "{entity}: once each, in order"
        );
    }
    let (a, b) = (
        Arc::into_inner(a).expect("senders done"),
        Arc::into_inner(b).expect("senders done"),
    );
    a.server.shutdown().await.unwrap();
    b.server.shutdown().await.unwrap();
}
