//! `/metrics`, `/healthz`, `/readyz`.

use idem_gateway::Config;

use crate::support::{Downstream, Running, config_text, env, sqlite, stripe_event, system_clock};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_and_health() {
    crate::support::capture_logs();
    let downstream = Downstream::ok().await;
    let (_dir, store) = sqlite(system_clock()).await;
    let text = config_text(downstream.addr, r#"["5ms"]"#)
        .replace("name = \"stripe\"", "name = \"stripe-metrics\"")
        .replace("source = \"stripe\"", "source = \"stripe-metrics\"");
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    let body = stripe_event(
        "evt_metrics",
        "customer.created",
        "customer",
        "cus_m",
        1_700_000_000,
    );
    let signature = idem_http::verify::stripe::sign(
        crate::support::STRIPE_SECRET,
        crate::support::unix_now(),
        &body,
    );
    for _ in 0..2 {
        gw.post(
            "stripe-metrics",
            &[("stripe-signature", signature.clone())],
            &body,
        )
        .await;
    }
    gw.post(
        "stripe-metrics",
        &[("stripe-signature", "t=1,v1=00".into())],
        &body,
    )
    .await;
    gw.settle().await;

    let get = |path: &str| gw.client.get(format!("{}{path}", gw.url)).send();
    assert_eq!(get("/healthz").await.unwrap().status(), 200);
    assert_eq!(get("/readyz").await.unwrap().status(), 200);
    let text = get("/metrics").await.unwrap().text().await.unwrap();
    for line in [
        "idem_ingest_total{source=\"stripe-metrics\",status=\"accepted\"} 1",
        "idem_ingest_total{source=\"stripe-metrics\",status=\"duplicate\"} 1",
        "idem_ingest_total{source=\"stripe-metrics\",status=\"rejected\"} 1",
        "idem_backlog{destination=\"app\"} 0",
        "idem_dead_letters{destination=\"app\"} 0",
        "idem_oldest_undelivered_age_seconds 0",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in\n{text}"
        );
    }
    assert!(
        text.contains("idem_ingest_duration_seconds_bucket{source=\"stripe-metrics\""),
        "{text}"
    );
    assert!(
        text.contains("idem_dispatch_total{destination=\"app\",outcome=\"delivered\"}"),
        "{text}"
    );
    // The batch size is a histogram, as docs/gateway.md lists it, not a summary.
    assert!(
        text.contains("# TYPE idem_ingest_batch_size histogram"),
        "{text}"
    );
    assert!(
        text.contains("idem_ingest_batch_size_bucket{le=\"1\"}"),
        "{text}"
    );
    gw.server.shutdown().await.unwrap();
}
