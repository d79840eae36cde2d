//! Tables recorded by a newer idem on SQLite and PostgreSQL: `migrate` refuses them, changes
//! nothing, and refuses again on the same pool (sqlx's own run kept PostgreSQL's migration
//! lock after a refusal, and a second `migrate` waited forever). MySQL's refusal has its own
//! words: `mysql_migrations.rs`.

use std::time::Duration;

use idem_sql::sqlx::migrate::MigrateError;
use idem_sql::{Error, Store};
use idem_testkit::AppDb;

const RECORDED: &str = "SELECT COUNT(*) FROM idem_migrations";

async fn a_newer_idems_tables_are_refused_every_time<DB: AppDb>(store: Store<DB>) {
    let before = idem_testkit::query_i64(&store, RECORDED, vec![]).await[0];
    idem_testkit::exec(
        &store,
        "INSERT INTO idem_migrations (version, description, success, checksum, execution_time) \
         SELECT 9999, 'from a newer idem', success, checksum, execution_time \
         FROM idem_migrations WHERE version = 1",
        vec![],
    )
    .await;
    for run in 1..=2 {
        let refused = tokio::time::timeout(Duration::from_secs(30), store.migrate())
            .await
            .unwrap_or_else(|_| panic!("run {run}: migrate waited 30 s (a lock left behind?)"));
        assert!(
            matches!(
                refused,
                Err(Error::Migrate(MigrateError::VersionMissing(9999)))
            ),
            "run {run}: {refused:?}"
        );
    }
    assert_eq!(
        idem_testkit::query_i64(&store, RECORDED, vec![]).await[0],
        before + 1
    );
}

mod a_newer_idems_tables_are_refused_every_time {
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn sqlite() {
        let (_dir, store) = idem_testkit::sqlite_store().await;
        super::a_newer_idems_tables_are_refused_every_time(store).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn postgres() {
        // A database of its own: the process's shared one must keep idem's migrations.
        let url = idem_testkit::pg_database().await;
        let store = idem_sql::PgStore::connect(&url).await.unwrap();
        store.migrate().await.unwrap();
        super::a_newer_idems_tables_are_refused_every_time(store).await;
    }
}
