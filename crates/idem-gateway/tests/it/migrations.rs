//! Issue 29 ("a database whose tables were made by another idem version is migrated or refused
//! with a message, never half-used"): gateway tables recorded by a newer idem are refused at
//! migration, in idem's words, on every store, with nothing changed.

use idem_gateway::{Config, Error, Gateway, GatewayDb};
use idem_sql::Store;
use idem_testkit::AppDb;

use crate::support::{config_text, env};

/// The rows of the gateway's migrations table.
const RECORDED: &str = "SELECT COUNT(*) FROM idem_gateway_migrations";

async fn tables_of_a_newer_idem_are_refused<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let addr = "127.0.0.1:9".parse().unwrap();
    let config = Config::from_toml(&config_text(addr, r#"["10ms"]"#), &env).unwrap();
    let gateway = Gateway::new(config, store.clone());
    gateway.migrate().await.expect("a fresh database migrates");
    let before = idem_testkit::query_i64(&store, RECORDED, vec![]).await[0];

    // A newer idem recorded migration 9999 (copied from row 1: the insert is the same SQL on
    // the three stores).
    idem_testkit::exec(
        &store,
        "INSERT INTO idem_gateway_migrations \
         (version, description, success, checksum, execution_time) \
         SELECT 9999, 'from a newer idem', success, checksum, execution_time \
         FROM idem_gateway_migrations WHERE version = 1",
        vec![],
    )
    .await;

    let refused = gateway.migrate().await.expect_err("a newer idem's tables");
    assert!(matches!(refused, Error::Migrate(_)), "{refused:?}");
    assert_eq!(refused.kind(), idem_gateway::ErrorKind::Invalid);
    assert_eq!(
        refused.to_string(),
        "migrating the gateway's tables failed: idem_gateway_migrations records migration 9999, \
         which this idem does not know: the tables were made by a newer idem; run that version \
         (or a newer one) on this database"
    );
    // Refused a second time alike, on the same pool (sqlx's own run kept PostgreSQL's
    // migration lock after a refusal, and this one waited forever), with nothing changed.
    let again = tokio::time::timeout(std::time::Duration::from_secs(30), gateway.migrate())
        .await
        .expect("a second migrate waited 30 s (a lock left behind?)");
    assert_eq!(again.unwrap_err().to_string(), refused.to_string());
    assert_eq!(
        idem_testkit::query_i64(&store, RECORDED, vec![]).await[0],
        before + 1
    );
}

both_stores!(tables_of_a_newer_idem_are_refused);
