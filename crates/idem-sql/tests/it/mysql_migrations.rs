//! MySQL and MariaDB commit each DDL statement on its own: a migration that fails half-way
//! leaves the statements before the failure applied and its row in `idem_migrations` marked
//! unfinished (`success = FALSE`). `migrate()` runs such a migration again, and refuses tables
//! made by another idem (a newer one, or another build of a migration) without touching them.
//! Each test has a database of its own.

use idem_sql::sqlx::{self, MySql, Pool};
use idem_sql::{Error, ErrorKind, MySqlStore};

/// A store on a fresh database, migrated.
async fn migrated() -> MySqlStore {
    let store = MySqlStore::connect(&idem_testkit::mysql_database().await)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    store
}

async fn exec(pool: &Pool<MySql>, sql: &'static str) {
    sqlx::query(sql)
        .execute(pool)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// `(version, success)` of every recorded migration.
async fn recorded(pool: &Pool<MySql>) -> Vec<(i64, bool)> {
    sqlx::query_as("SELECT version, success FROM idem_migrations ORDER BY version")
        .fetch_all(pool)
        .await
        .unwrap()
}

/// idem's tables that exist, sorted.
async fn tables(pool: &Pool<MySql>) -> Vec<String> {
    let names: Vec<Vec<u8>> = sqlx::query_scalar(
        "SELECT CAST(TABLE_NAME AS BINARY) FROM information_schema.TABLES \
         WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME LIKE 'idem\\_%' \
           AND TABLE_NAME <> 'idem_migrations' ORDER BY TABLE_NAME",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    names
        .into_iter()
        .map(|n| String::from_utf8(n).unwrap())
        .collect()
}

// In the server's collation order (`idem_consumers` sorts before `idem_consumer_…`).
const ALL_TABLES: [&str; 11] = [
    "idem_consumers",
    "idem_consumer_counts",
    "idem_consumer_lineage",
    "idem_dead_letters",
    "idem_effects",
    "idem_inbox",
    "idem_kafka_offsets",
    "idem_leases",
    "idem_outbox",
    "idem_parked",
    "idem_versions",
];

const ALL_DONE: [(i64, bool); 7] = [
    (1, true),
    (2, true),
    (3, true),
    (4, true),
    (5, true),
    (6, true),
    (7, true),
];

/// The state a failure during migration 1 leaves (its first two tables made, the row marked
/// unfinished, nothing after it): `migrate()` runs 1 again from its first statement (its
/// tables made already are kept, with their rows), then 2 to 7.
#[tokio::test]
async fn a_migration_left_unfinished_runs_again_from_its_start() {
    let store = migrated().await;
    let pool = store.pool();
    exec(
        pool,
        "INSERT INTO idem_inbox (consumer, dedup_key, processed_at) VALUES ('c', 'kept', 1)",
    )
    .await;
    exec(pool, "DELETE FROM idem_migrations WHERE version >= 2").await;
    exec(
        pool,
        "UPDATE idem_migrations SET success = FALSE WHERE version = 1",
    )
    .await;
    exec(
        pool,
        "DROP TABLE idem_leases, idem_parked, idem_effects, idem_outbox, idem_dead_letters, \
         idem_kafka_offsets, idem_consumer_lineage, idem_consumers, idem_consumer_counts",
    )
    .await;
    assert_eq!(recorded(pool).await, [(1, false)]);
    assert_eq!(tables(pool).await, ["idem_inbox", "idem_versions"]);

    store
        .migrate()
        .await
        .expect("the unfinished migration runs again");
    assert_eq!(recorded(pool).await, ALL_DONE);
    assert_eq!(tables(pool).await, ALL_TABLES);
    let kept: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM idem_inbox WHERE dedup_key = 'kept'")
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(kept, 1, "a table made before the failure keeps its rows");
}

/// Tables of an older idem (migrations 1 to 3 applied, and 7's columns on the effects and
/// outbox tables left from an unfinished run of it) are brought up to date.
#[tokio::test]
async fn an_older_idems_tables_are_migrated() {
    let store = migrated().await;
    let pool = store.pool();
    exec(pool, "DELETE FROM idem_migrations WHERE version >= 4").await;
    exec(
        pool,
        "DROP TABLE idem_dead_letters, idem_kafka_offsets, idem_consumer_lineage, \
         idem_consumers, idem_consumer_counts",
    )
    .await;
    store.migrate().await.unwrap();
    assert_eq!(recorded(pool).await, ALL_DONE);
    assert_eq!(tables(pool).await, ALL_TABLES);
}

/// A migration this idem does not know (the tables were made by a newer idem): refused, with
/// what was found and what to do, and nothing changed.
#[tokio::test]
async fn tables_of_a_newer_idem_are_refused() {
    let store = migrated().await;
    let pool = store.pool();
    exec(
        pool,
        "INSERT INTO idem_migrations (version, description, success, checksum, execution_time) \
         VALUES (8, 'from a newer idem', FALSE, X'00', 0)",
    )
    .await;
    let err = store.migrate().await.expect_err("refused");
    assert!(matches!(err, Error::IncompatibleSchema { .. }), "{err:?}");
    assert_eq!(err.kind(), ErrorKind::Database);
    let text = err.to_string();
    for needle in ["migration 8", "1 to 7", "newer idem"] {
        assert!(text.contains(needle), "{needle:?} not in: {text}");
    }
    let mut expected = ALL_DONE.to_vec();
    expected.push((8, false));
    assert_eq!(
        recorded(pool).await,
        expected,
        "not even its unfinished row is touched"
    );
}

/// A recorded migration whose checksum is not this idem's (another build's migration 2):
/// refused.
#[tokio::test]
async fn a_migration_of_another_build_is_refused() {
    let store = migrated().await;
    exec(
        store.pool(),
        "UPDATE idem_migrations SET checksum = X'00' WHERE version = 2",
    )
    .await;
    let err = store.migrate().await.expect_err("refused");
    let text = err.to_string();
    assert!(matches!(err, Error::IncompatibleSchema { .. }), "{err:?}");
    assert!(
        text.contains("migration 2") && text.contains("checksum"),
        "{text}"
    );
}

/// Processes starting at once on a new database: each `migrate()` succeeds, and every migration
/// is applied once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_migrations_apply_each_once() {
    let url = idem_testkit::mysql_database().await;
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let url = url.clone();
        tasks.push(tokio::spawn(async move {
            let store = MySqlStore::connect_with(&url, 2).await?;
            store.migrate().await?;
            Ok::<_, Error>(store)
        }));
    }
    let mut stores = Vec::new();
    for task in tasks {
        stores.push(task.await.unwrap().expect("every migrate succeeds"));
    }
    assert_eq!(recorded(stores[0].pool()).await, ALL_DONE);
    assert_eq!(tables(stores[0].pool()).await, ALL_TABLES);
}
