//! `idem demo` passes, with the counts that follow from testdata/: 159 Stripe events and 4
//! GitHub payloads, each sent 3 times, plus one forged delivery; one Stripe object of 5 events
//! sent newest first, so 4 are stale.

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn demo_passes_on_the_shipped_payloads() {
    crate::support::capture_logs();
    let report = idem_gateway::demo::run().await.unwrap();
    assert!(report.passed(), "{:?}", report.problems);
    assert_eq!(report.unique_events, 163);
    assert_eq!(report.received, 490);
    assert_eq!(report.accepted, 163);
    assert_eq!(report.duplicates, 326);
    assert_eq!(report.rejected, 1);
    assert_eq!(report.stale, 4);
    assert_eq!(report.delivered, 159);
    assert_eq!(report.dead, 0);
}
