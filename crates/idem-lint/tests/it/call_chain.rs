//! A finding whose write is two helpers below the handler names every call on the way, so a
//! reader (and `--diff`) finds it in the middle function too.

use idem_lint::Linter;

const SOURCE: &str = r#"use sqlx::PgPool;

pub async fn stripe_webhook(pool: PgPool, event: StripeEvent) -> StatusCode {
    sync_subscription(&pool, &event).await;
    StatusCode::OK
}

async fn sync_subscription(pool: &PgPool, event: &StripeEvent) {
    let mut tx = pool.begin().await.expect("begin");
    notify_billing(&event.id).await;
    tx.commit().await.expect("commit");
}

async fn notify_billing(id: &str) {
    reqwest::Client::new()
        .post("https://billing.example/notify")
        .json(&serde_json::json!({ "id": id }))
        .send()
        .await
        .ok();
}
"#;

#[test]
fn a_finding_two_helpers_deep_lists_the_call_between() {
    let d = tempfile::tempdir().expect("tmp");
    let path = d.path().join("webhook.rs");
    std::fs::write(&path, SOURCE).expect("write");
    let report = Linter::new()
        .scan(std::slice::from_ref(&path))
        .expect("scans");
    let f = report
        .findings
        .iter()
        .find(|f| f.rule.as_str() == "ARC_PUBLISH_IN_TX" && f.line == 4)
        .unwrap_or_else(|| panic!("a finding at the handler's call: {:#?}", report.findings));
    let helper = f.helper.as_ref().expect("the write is in a helper");
    assert_eq!(
        (helper.name.as_str(), helper.line),
        ("notify_billing", 16),
        "the POST"
    );
    let via: Vec<u32> = helper.via.iter().map(|c| c.line).collect();
    assert_eq!(via, vec![10], "sync_subscription's call of notify_billing");
    let lines: Vec<u32> = f.locations().map(|(_, l)| l).collect();
    assert_eq!(lines, vec![4, 10, 16]);
}
