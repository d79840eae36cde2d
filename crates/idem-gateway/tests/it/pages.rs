//! Admin lists in pages (issue 32, 6): `GET /admin/events` and `GET /admin/dlq` answer JSON
//! arrays with a `Link: <…>; rel="next"` header (RFC 8288) while more rows follow; the cursor
//! is a key, so rows inserted meanwhile neither repeat nor hide a row.

use axum::http::StatusCode;
use idem_gateway::{Config, GatewayDb};
use idem_sql::Store;
use idem_testkit::AppDb;

use crate::support::{Downstream, Running, config_text, env, stripe_event};

/// Follows `path` and each page's `Link: <…>; rel="next"`: each page's values of `id`, and
/// each page's Link. With `late`, that Stripe event is accepted after the first page.
async fn pages<DB: GatewayDb>(
    gw: &Running<DB>,
    path: &str,
    id: &str,
    late: Option<&[u8]>,
) -> (Vec<Vec<String>>, Vec<Option<String>>) {
    let (mut ids, mut links) = (Vec::new(), Vec::new());
    let mut next = Some(path.to_owned());
    while let Some(path) = next.take() {
        assert!(ids.len() < 10, "pages never end: {links:?}");
        let response = gw
            .client
            .get(format!("{}{path}", gw.url))
            .bearer_auth("admin-token")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
        let link = response
            .headers()
            .get("link")
            .map(|v| v.to_str().unwrap().to_owned());
        let body: serde_json::Value =
            serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
        let page: Vec<String> = body
            .as_array()
            .expect("a JSON array")
            .iter()
            .map(|row| row[id].as_str().unwrap().to_owned())
            .collect();
        ids.push(page);
        next = link.as_ref().map(|link| {
            link.strip_prefix('<')
                .and_then(|l| l.strip_suffix(">; rel=\"next\""))
                .unwrap_or_else(|| panic!("not a next link: {link}"))
                .to_owned()
        });
        links.push(link);
        if let Some(body) = late.filter(|_| ids.len() == 1) {
            assert_eq!(gw.post_stripe(body).await.json["status"], "accepted");
        }
    }
    (ids, links)
}

async fn admin_lists_come_in_pages<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let downstream =
        Downstream::start(std::sync::Arc::new(|_| StatusCode::SERVICE_UNAVAILABLE)).await;
    // The circuit breaker off: every attempt fails on purpose, and each delivery must die.
    let text = format!(
        "admin_token_env = \"ADMIN_TOKEN\"\n{}",
        config_text(downstream.addr, r#"["5ms"]"#).replace(
            "signing_secret_env = \"APP_SECRET\"",
            "signing_secret_env = \"APP_SECRET\"\ncircuit_breaker = false"
        )
    );
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    for n in 1..=7 {
        let body = stripe_event(
            &format!("evt_{n}"),
            "customer.created",
            "customer",
            &format!("cus_{n}"),
            1_700_000_000 + n,
        );
        assert_eq!(gw.post_stripe(&body).await.json["status"], "accepted");
    }
    gw.settle().await;

    // Events, newest first; an event accepted between two pages is newer than every cursor:
    // it is on none of the later pages, and no row repeats.
    let late = stripe_event(
        "evt_8",
        "customer.created",
        "customer",
        "cus_8",
        1_700_000_008,
    );
    let (ids, links) = pages(
        &gw,
        "/admin/events?source=stripe&limit=3",
        "event_id",
        Some(&late),
    )
    .await;
    let sizes: Vec<usize> = ids.iter().map(Vec::len).collect();
    assert_eq!(sizes, [3, 3, 1]);
    let mut all: Vec<String> = ids.concat();
    assert_eq!(
        all,
        (1..=7)
            .rev()
            .map(|n| format!("evt_{n}"))
            .collect::<Vec<_>>()
    );
    assert!(
        links[0]
            .as_deref()
            .unwrap()
            .starts_with("</admin/events?limit=3&source=stripe&after=")
    );
    assert_eq!(links[2], None);
    gw.settle().await;

    // Dead letters, oldest first: the 8 of them (evt_8 died since), 3 a page.
    let (ids, links) = pages(&gw, "/admin/dlq?limit=3", "event_id", None).await;
    let sizes: Vec<usize> = ids.iter().map(Vec::len).collect();
    assert_eq!(sizes, [3, 3, 2]);
    all = ids.concat();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 8);
    assert_eq!(links[2], None);

    // A cursor no page gave is refused.
    let response = gw
        .client
        .get(format!("{}/admin/dlq?after=yesterday", gw.url))
        .bearer_auth("admin-token")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);
    let problem: serde_json::Value =
        serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
    assert_eq!(problem["type"], "urn:idem:problem:bad-cursor");
    gw.server.shutdown().await.unwrap();
}

both_stores!(admin_lists_come_in_pages);
