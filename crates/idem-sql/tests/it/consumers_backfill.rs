//! A database of an older idem (migrations 1 to 6) with rows in its tables is migrated and its
//! consumers back-filled into the registry, first seen "at or before" the oldest row found.

use idem_sql::{ConsumerKind, ListOptions, Store};
use idem_testkit::{AppDb, exec};

/// Takes a migrated database back to migration 6, as an older idem left it.
async fn back_to_0006<DB: AppDb>(store: &Store<DB>) {
    for sql in [
        "DELETE FROM idem_migrations WHERE version = 7",
        "DROP TABLE idem_consumers",
        "DROP TABLE idem_consumer_counts",
        "ALTER TABLE idem_effects DROP COLUMN consumer",
        "ALTER TABLE idem_outbox DROP COLUMN consumer",
    ] {
        exec(store, sql, vec![]).await;
    }
}

/// Rows of the older idem: `billing` in the inbox and the version guard, `orders` in Kafka
/// offsets only, `mailer` in dead letters, `billing_v2` in the lineage with its effects scope
/// `billing_scope`.
async fn old_rows<DB: AppDb>(store: &Store<DB>) {
    for sql in [
        "INSERT INTO idem_inbox (consumer, dedup_key, processed_at) VALUES \
         ('billing', 'k1', 1000), ('billing', 'k2', 5000)",
        "INSERT INTO idem_versions (consumer, aggregate_type, aggregate_id, version_kind, \
         version, version_secondary, dedup_key, updated_at) \
         VALUES ('billing', 'order', 'o1', 'sequence', 3, NULL, 'k2', 7000)",
        "INSERT INTO idem_kafka_offsets (consumer, topic, kafka_partition, next_offset, \
         fencing_token, holder, attempts, last_error, updated_at) \
         VALUES ('orders', 't', 0, 10, 1, 'm', 0, NULL, 3000), \
                ('orders', 't', 1, 12, 1, 'm', 0, NULL, 3500)",
        "INSERT INTO idem_dead_letters (consumer, source, destination, headers, payload, error, \
         delivery_count, first_failed_at, last_failed_at) \
         VALUES ('mailer', 'nats', 'mail', '[]', '', 'boom', 3, 2000, 9000)",
        "INSERT INTO idem_consumer_lineage (consumer, predecessor, effects_scope, declared_at) \
         VALUES ('billing_v2', NULL, 'billing_scope', 4000)",
    ] {
        exec(store, sql, vec![]).await;
    }
}

async fn an_older_database_is_back_filled<DB: AppDb>(store: Store<DB>) {
    back_to_0006(&store).await;
    old_rows(&store).await;
    store
        .migrate()
        .await
        .expect("an older database is migrated");
    let reports = store
        .consumers()
        .list(&ListOptions::at(idem_core::Timestamp(10_000)))
        .await
        .unwrap();
    let rows: Vec<(&str, ConsumerKind, i64, i64, bool)> = reports
        .iter()
        .map(|r| {
            (
                r.name.as_str(),
                r.kind,
                r.first_seen.as_millis(),
                r.last_seen.as_millis(),
                r.first_seen_exact,
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("billing", ConsumerKind::Runner, 1000, 7000, false),
            ("billing_scope", ConsumerKind::Lineage, 4000, 4000, false),
            ("billing_v2", ConsumerKind::Runner, 4000, 4000, false),
            ("mailer", ConsumerKind::Runner, 2000, 9000, false),
            ("orders", ConsumerKind::Kafka, 3000, 3500, false),
        ]
    );
    let orders = reports.iter().find(|r| r.name == "orders").unwrap();
    assert_eq!(orders.holds.kafka_offsets, 2);
    let mailer = reports.iter().find(|r| r.name == "mailer").unwrap();
    assert_eq!(
        mailer.windows[0].dead_letters, 1,
        "failed at 9000, within the hour"
    );
    // Migrating again changes nothing.
    store.migrate().await.unwrap();
    assert_eq!(
        store
            .consumers()
            .list(&ListOptions::at(idem_core::Timestamp(10_000)))
            .await
            .unwrap(),
        reports
    );
}

#[tokio::test]
async fn an_older_sqlite_database_is_back_filled() {
    let (_dir, store) = idem_testkit::sqlite_store().await;
    an_older_database_is_back_filled(store).await;
}

#[tokio::test]
async fn an_older_postgres_database_is_back_filled() {
    let store = idem_sql::PgStore::connect(&idem_testkit::pg_database().await)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    an_older_database_is_back_filled(store).await;
}

#[tokio::test]
async fn an_older_mysql_database_is_back_filled() {
    let store = idem_sql::MySqlStore::connect(&idem_testkit::mysql_database().await)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    an_older_database_is_back_filled(store).await;
}
