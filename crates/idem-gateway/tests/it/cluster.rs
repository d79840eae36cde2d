//! Two gateway processes sharing one PostgreSQL database.

use idem_gateway::Config;
use idem_sql::PgStore;

use crate::support::{
    Downstream, Running, STRIPE_SECRET, capture_logs, config_text, env, pg_database, post,
    stripe_event, unix_now,
};
use idem_http::verify::stripe;

/// The same Stripe event posted to two gateways at once: one `accepted`, one `duplicate`, one
/// delivery; and a stream of events posted to both, each delivered exactly once although both
/// dispatchers compete for every delivery.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_gateways_on_one_postgres_deliver_once() {
    capture_logs();
    let url = pg_database().await;
    let downstream = Downstream::ok().await;
    let text = config_text(downstream.addr, r#"["10ms", "20ms"]"#);
    let a = Running::start(
        Config::from_toml(&text, &env).unwrap(),
        PgStore::connect(&url).await.unwrap(),
    )
    .await;
    let b = Running::start(
        Config::from_toml(&text, &env).unwrap(),
        PgStore::connect(&url).await.unwrap(),
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
