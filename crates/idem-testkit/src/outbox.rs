//! An application's outbox, as relay tests fill and watch it.

use std::time::{Duration, Instant};

use idem_sql::{Backend, MessageId, OutboxMessage, OutboxStatus, Store};

/// The application's database at `url`, migrated by the application (idem's tables,
/// `idem_outbox` among them), as a relay expects to find it.
///
/// # Panics
/// When the database cannot be opened or migrated.
pub async fn app_store<DB: Backend>(url: &str) -> Store<DB> {
    let store = Store::<DB>::connect(url)
        .await
        .expect("open the app database");
    store.migrate().await.expect("migrate the app database");
    store
}

/// Commits one outbox row per id to `destination` in one transaction, each with message id
/// `id` and body `{"id":"<id>"}`.
///
/// # Panics
/// When the rows cannot be written.
pub async fn enqueue<DB: Backend>(store: &Store<DB>, destination: &str, ids: &[String]) {
    let mut tx = store.begin().await.expect("begin");
    for id in ids {
        let message = OutboxMessage::new(destination, format!(r#"{{"id":"{id}"}}"#))
            .with_message_id(MessageId::new(id.clone()).expect("a valid message id"));
        store
            .outbox()
            .enqueue(&mut tx, &message)
            .await
            .expect("enqueue");
    }
    tx.commit().await.expect("commit");
}

/// Waits (up to 15 s) until `n` rows of `store`'s outbox are published.
///
/// # Panics
/// When more than `n` are published, or fewer in time.
pub async fn wait_published<DB: Backend>(store: &Store<DB>, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let published = store
            .outbox()
            .list(OutboxStatus::Published, 1000)
            .await
            .expect("list the outbox");
        if published.len() >= n {
            assert_eq!(published.len(), n);
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {n} rows published",
            published.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
