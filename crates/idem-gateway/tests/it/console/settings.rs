//! The configuration page renders a configuration with secrets from the environment (the
//! sources' and the destination's signing secrets, the admin token) and URLs with a user and
//! password (the database's, with one in its query too, and a destination's), and shows none
//! of those values.

use idem_gateway::Config;

use super::client::{ADMIN_TOKEN, Client};
use crate::support::{
    APP_SECRET, Downstream, GITHUB_SECRET, Running, STRIPE_SECRET, SW_NEW, SW_OLD, config_text,
    env, sqlite, system_clock,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_configuration_page_shows_no_secret_and_no_password() {
    crate::support::capture_logs();
    let downstream = Downstream::ok().await;
    let (_dir, store) = sqlite(system_clock()).await;
    // The gateway runs on the test's store; the configured URL is only shown.
    let text = format!(
        "admin_token_env = \"ADMIN_TOKEN\"\n\
         database_url = \"postgres://idem:db-pass@db.internal:5432/idem?sslmode=require&password=query-pass\"\n{}\n\
         [[alert]]\nname = \"ops\"\nurl = \"https://alert-user:alert-pass@alerts.example/idem\"\nsecret_env = \"SW_NEW\"\n",
        config_text(downstream.addr, r#"["5ms"]"#)
            .replace("url = \"http://", "url = \"http://hook-user:dest-pass@")
    );
    let config = Config::from_toml(&text, &env).unwrap();
    assert!(config.destinations[0].url.contains("dest-pass"));
    let gw = Running::start(config, store).await;
    let mut client = Client::new(&gw.url);
    client.sign_in().await;
    let page = client.get("/console/configuration").await;
    assert_eq!(page.status, 200, "{}", page.html);
    assert!(
        page.html
            .contains("<title>Configuration · idem console</title>")
    );
    for secret in [
        STRIPE_SECRET,
        GITHUB_SECRET,
        SW_OLD,
        SW_NEW,
        APP_SECRET,
        ADMIN_TOKEN,
        "db-pass",
        "query-pass",
        "dest-pass",
        "hook-user",
        "alert-pass",
        "alert-user",
    ] {
        assert!(!page.html.contains(secret), "{secret} shown: {}", page.html);
    }
    assert!(
        page.text("id=\"settings\"", "</table>").contains(
            "database_url postgres://***@db.internal:5432/idem?sslmode=require&password=***"
        ),
        "{}",
        page.html
    );
    assert!(
        page.text("id=\"destinations\"", "</table>")
            .contains(&format!("app http://***@{}/events", downstream.addr)),
        "{}",
        page.html
    );
    // Health thresholds, the breaker and the alert sinks (issue 31), with their defaults.
    assert!(
        page.text("id=\"health-settings\"", "</table>")
            .contains("app 5m 10 0.3 0.95 1s 5m on, cool-down 30s doubling to 10m"),
        "{}",
        page.html
    );
    assert!(
        page.text("id=\"alert-sinks\"", "</table>")
            .contains("ops https://***@alerts.example/idem json set (not shown)"),
        "{}",
        page.html
    );
    gw.server.shutdown().await.unwrap();
}
