//! Admin access (issue 32, 4): wrong bearer tokens counted per client, 429 with `Retry-After`
//! after too many while the right token still works; a short token refused beyond loopback;
//! operator actions logged and counted.

use idem_gateway::{Config, ConfigError, MIN_ADMIN_TOKEN_CHARS};

use crate::support::{Downstream, Running, config_text, env, sqlite, system_clock};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_tokens_get_429_and_the_right_one_still_works() {
    crate::support::capture_logs();
    let downstream = Downstream::ok().await;
    let (_dir, store) = sqlite(system_clock()).await;
    let text = format!(
        "admin_token_env = \"ADMIN_TOKEN\"\n{}",
        config_text(downstream.addr, r#"["5ms"]"#)
    );
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    let get = |token: &str| {
        gw.client
            .get(format!("{}/admin/destinations", gw.url))
            .bearer_auth(token)
            .send()
    };
    let mut statuses = Vec::new();
    for i in 0..20 {
        let answer = get(&format!("wrong-{i}")).await.unwrap();
        statuses.push(answer.status().as_u16());
        if answer.status() == 429 {
            let wait: u64 = answer.headers()["retry-after"]
                .to_str()
                .unwrap()
                .parse()
                .unwrap();
            assert!((1..=900).contains(&wait), "{wait}");
        }
        // The right token is never refused, and does not lift the count for wrong ones.
        if i == 10 {
            assert_eq!(get("admin-token").await.unwrap().status(), 200);
        }
    }
    assert_eq!(&statuses[..5], [401; 5]);
    // After the right token the count starts over: five more 401s, then 429s.
    assert!(statuses[5..].contains(&429), "{statuses:?}");
    assert_eq!(*statuses.last().unwrap(), 429);
    assert_eq!(get("admin-token").await.unwrap().status(), 200);
    gw.server.shutdown().await.unwrap();
}

#[test]
fn a_short_admin_token_is_refused_beyond_loopback() {
    let text = |listen: &str| {
        format!(
            "listen = \"{listen}\"\nadmin_token_env = \"ADMIN_TOKEN\"\n{}",
            config_text("127.0.0.1:9".parse().unwrap(), r#"["5ms"]"#)
                .replace("listen = \"127.0.0.1:0\"\n", "")
        )
    };
    // "admin-token" is 11 characters.
    let err = Config::from_toml(&text("0.0.0.0:8080"), &env).unwrap_err();
    assert!(
        matches!(err, ConfigError::BadValue { ref field, .. } if field == "admin_token_env"),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.contains(&format!("at least {MIN_ADMIN_TOKEN_CHARS} characters")),
        "{message}"
    );
    assert!(
        !message.contains("admin-token"),
        "the token itself is never shown: {message}"
    );
    assert!(Config::from_toml(&text("127.0.0.1:8080"), &env).is_ok());
    let long = |var: &str| {
        (var == "ADMIN_TOKEN")
            .then(|| "x".repeat(MIN_ADMIN_TOKEN_CHARS))
            .or_else(|| env(var))
    };
    assert!(Config::from_toml(&text("0.0.0.0:8080"), &long).is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_actions_are_logged_and_counted() {
    crate::support::capture_logs();
    let downstream = Downstream::ok().await;
    let (_dir, store) = sqlite(system_clock()).await;
    let text = format!(
        "admin_token_env = \"ADMIN_TOKEN\"\n{}",
        config_text(downstream.addr, r#"["5ms"]"#)
    );
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    let post = |path: &str| {
        gw.client
            .post(format!("{}{path}", gw.url))
            .bearer_auth("admin-token")
            .send()
    };
    assert_eq!(
        post("/admin/destinations/app/pause")
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        post("/admin/destinations/app/resume")
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(post("/admin/gc").await.unwrap().status(), 200);
    let logged = crate::support::lines_with("INFO", "operator action done");
    for action in ["pause", "resume", "gc"] {
        assert!(
            logged
                .iter()
                .any(|l| l.contains(&format!("action=\"{action}\""))
                    || l.contains(&format!("action={action}"))),
            "{action}: {logged:?}"
        );
    }
    let metrics = gw
        .client
        .get(format!("{}/metrics", gw.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("idem_admin_actions_total{action=\"pause\"}"),
        "{metrics}"
    );
    gw.server.shutdown().await.unwrap();
}
