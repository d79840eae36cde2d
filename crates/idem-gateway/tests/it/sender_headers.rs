//! The sender's headers of a documented allow list (issue 32, 6) are kept with each event and
//! forwarded with it, after a restart too; signatures and credentials never are.

use idem_gateway::{Config, GatewayDb};
use idem_http::verify::{github, shopify};
use idem_sql::Store;
use idem_testkit::AppDb;

use crate::support::{Downstream, GITHUB_SECRET, Running, config_text, env};

async fn sender_headers_are_forwarded<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let downstream = Downstream::ok().await;
    let text = format!(
        "{}\n[[source]]\nname = \"shop\"\nkind = \"shopify\"\nsecrets_env = [\"GITHUB_SECRET\"]\n\n\
         [[route]]\nsource = \"shop\"\ndestination = \"app\"\n",
        config_text(downstream.addr, r#"["5ms"]"#)
    );
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store.clone()).await;
    // Stored, not sent: the destination is paused until after a restart, so the headers
    // forwarded are those read back from the database.
    gw.gateway.pause("app").await.unwrap();
    let push = br#"{"ref":"refs/heads/main"}"#;
    let github_headers = vec![
        ("x-hub-signature-256", github::sign(GITHUB_SECRET, push)),
        ("x-hub-signature", "sha1=0000".to_owned()),
        ("x-github-event", "push".to_owned()),
        ("x-github-delivery", "d-1".to_owned()),
        ("x-github-hook-id", "292430182".to_owned()),
        (
            "x-github-hook-installation-target-id",
            "79929171".to_owned(),
        ),
        (
            "x-github-hook-installation-target-type",
            "repository".to_owned(),
        ),
        ("authorization", "Bearer sender-secret".to_owned()),
        ("cookie", "session=1".to_owned()),
        ("x-unlisted", "not forwarded".to_owned()),
        ("content-type", "application/json".to_owned()),
    ];
    let answer = gw.post("github", &github_headers, push).await;
    assert_eq!(answer.json["status"], "accepted", "{:?}", answer.json);
    let order = br#"{"id":820982911946154508}"#;
    let shop_headers = vec![
        ("x-shopify-hmac-sha256", shopify::sign(GITHUB_SECRET, order)),
        ("x-shopify-topic", "orders/create".to_owned()),
        ("x-shopify-webhook-id", "w-1".to_owned()),
        ("x-shopify-shop-domain", "acme.myshopify.com".to_owned()),
        ("x-shopify-api-version", "2025-07".to_owned()),
        ("x-shopify-triggered-at", "2025-07-01T00:00:00Z".to_owned()),
    ];
    let answer = gw.post("shop", &shop_headers, order).await;
    assert_eq!(answer.json["status"], "accepted", "{:?}", answer.json);
    gw.server.shutdown().await.unwrap();
    assert!(downstream.received().is_empty());

    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    gw.gateway.resume("app").await.unwrap();
    gw.settle().await;
    let received = downstream.received();
    assert_eq!(received.len(), 2);
    let github = received
        .iter()
        .find(|r| r.header("idem-source") == Some("github"))
        .unwrap();
    for (name, value) in [
        ("x-github-event", "push"),
        ("x-github-delivery", "d-1"),
        ("x-github-hook-id", "292430182"),
        ("x-github-hook-installation-target-id", "79929171"),
        ("x-github-hook-installation-target-type", "repository"),
        ("content-type", "application/json"),
    ] {
        assert_eq!(github.header(name), Some(value), "{name}");
    }
    for name in [
        "x-hub-signature-256",
        "x-hub-signature",
        "authorization",
        "cookie",
        "x-unlisted",
    ] {
        assert_eq!(github.header(name), None, "{name}");
    }
    let shop = received
        .iter()
        .find(|r| r.header("idem-source") == Some("shop"))
        .unwrap();
    for (name, value) in [
        ("x-shopify-topic", "orders/create"),
        ("x-shopify-webhook-id", "w-1"),
        ("x-shopify-shop-domain", "acme.myshopify.com"),
        ("x-shopify-api-version", "2025-07"),
    ] {
        assert_eq!(shop.header(name), Some(value), "{name}");
    }
    for name in ["x-shopify-hmac-sha256", "x-shopify-triggered-at"] {
        assert_eq!(shop.header(name), None, "{name}");
    }
    gw.server.shutdown().await.unwrap();
}

both_stores!(sender_headers_are_forwarded);
