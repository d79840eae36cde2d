//! Route renames (issue 32, 2): `renamed_from` carries a route's deliveries and version-guard
//! rows over to its new name at `idem serve`'s start, once; a rename without it is refused
//! while the old name has open deliveries or guard rows.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::http::StatusCode;
use idem_gateway::operations::RedriveRequest;
use idem_gateway::{Config, Gateway, GatewayDb, Server};
use idem_sql::Store;
use idem_testkit::AppDb;

use crate::support::{Downstream, Running, config_text, count, env, stripe_event};

/// Deliveries by the route's old and new names.
const OLD: &str = "SELECT COUNT(*) FROM idem_gateway_deliveries WHERE route = 'stripe.app'";
const NEW: &str = "SELECT COUNT(*) FROM idem_gateway_deliveries WHERE route = 'stripe-renamed'";

/// The test configuration's stripe route named `stripe-renamed`, with `extra` lines added to
/// its table (`renamed_from = …`).
fn renamed(text: &str, extra: &str) -> String {
    let out = text.replace(
        "[[route]]\nsource = \"stripe\"",
        &format!("[[route]]\nname = \"stripe-renamed\"\n{extra}source = \"stripe\""),
    );
    assert_ne!(out, text);
    out
}

/// Delivers `evt_updated` (sub_1 at 200) and leaves `evt_created` (sub_1 at 100) a dead letter,
/// on route `stripe.app`; returns the dead letter's id, the downstream and the configuration.
async fn older_dead_letter<DB: GatewayDb>(store: &Store<DB>) -> (i64, Downstream, String) {
    let failing = Arc::new(AtomicBool::new(true));
    let fail = Arc::clone(&failing);
    let downstream = Downstream::start(Arc::new(move |r| {
        if fail.load(Ordering::SeqCst) && r.header("idem-event-id") == Some("evt_created") {
            StatusCode::SERVICE_UNAVAILABLE
        } else {
            StatusCode::OK
        }
    }))
    .await;
    let text = config_text(downstream.addr, r#"["5ms"]"#);
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store.clone()).await;
    for (id, ty, created) in [
        (
            "evt_created",
            "customer.subscription.created",
            1_700_000_100,
        ),
        (
            "evt_updated",
            "customer.subscription.updated",
            1_700_000_200,
        ),
    ] {
        let body = stripe_event(id, ty, "subscription", "sub_1", created);
        assert_eq!(gw.post_stripe(&body).await.json["status"], "accepted");
        gw.settle().await;
    }
    failing.store(false, Ordering::SeqCst);
    let letters = gw.gateway.dead_letters(None, 10).await.unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].route, "stripe.app");
    gw.server.shutdown().await.unwrap();
    (letters[0].id, downstream, text)
}

async fn explicit_rename_carries_order<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let (id, downstream, text) = older_dead_letter(&store).await;
    let text = renamed(&text, "renamed_from = \"stripe.app\"\n");
    let by_id = RedriveRequest {
        deliveries: vec![id],
        ..RedriveRequest::default()
    };
    // An operator command run with the new file before any serve carried the rename decides
    // as after it: from the rows still under the old name (and changes none of them).
    let before = Gateway::new(Config::for_operations(&text, &env).unwrap(), store.clone());
    let report = before.redrive(&by_id).await.unwrap();
    assert_eq!((report.matched, report.redriven, report.older), (1, 0, 1));
    assert_eq!(count(&before, OLD).await, 2);
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store.clone()).await;
    // Both deliveries and the entity's guard row now go by the new name.
    assert_eq!(count(&gw.gateway, OLD).await, 0);
    assert_eq!(count(&gw.gateway, NEW).await, 2);
    assert_eq!(
        count(
            &gw.gateway,
            "SELECT COUNT(*) FROM idem_versions WHERE consumer = 'stripe-renamed'"
        )
        .await,
        1
    );
    assert_eq!(
        count(
            &gw.gateway,
            "SELECT COUNT(*) FROM idem_versions WHERE consumer = 'stripe.app'"
        )
        .await,
        0
    );
    // The redrive of the older dead letter is refused as older, as before the rename.
    let report = gw.gateway.redrive(&by_id).await.unwrap();
    assert_eq!((report.matched, report.redriven, report.older), (1, 0, 1));
    // A new event older than the entity's newest is judged by the carried-over guard row:
    // stale, never sent (without the row it would be the entity's "first event" and sent).
    let late = stripe_event(
        "evt_late",
        "customer.subscription.updated",
        "subscription",
        "sub_1",
        1_700_000_150,
    );
    assert_eq!(gw.post_stripe(&late).await.json["status"], "accepted");
    gw.settle().await;
    let detail = gw
        .gateway
        .show_event("stripe", "evt_late")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(detail.deliveries.len(), 1);
    assert_eq!(detail.deliveries[0].0.route, "stripe-renamed");
    assert_eq!(detail.deliveries[0].0.state.as_str(), "stale");
    assert!(
        !downstream
            .received()
            .iter()
            .any(|r| r.header("idem-event-id") == Some("evt_late"))
    );
    // Past the retention `idem gc` deletes the delivered newer event with its deliveries and
    // attempts (its statements, run here on the one event), never the guard's rows: the
    // redrive is still refused, now by the guard row carried over from the old name.
    for sql in [
        "DELETE FROM idem_gateway_attempts WHERE delivery IN (SELECT d.id FROM \
         idem_gateway_deliveries d JOIN idem_gateway_events e ON e.id = d.event \
         WHERE e.event_id = 'evt_updated')",
        "DELETE FROM idem_gateway_deliveries WHERE event IN \
         (SELECT id FROM idem_gateway_events WHERE event_id = 'evt_updated')",
        "DELETE FROM idem_gateway_events WHERE event_id = 'evt_updated'",
    ] {
        idem_testkit::exec(&store, sql, vec![]).await;
    }
    assert_eq!(count(&gw.gateway, NEW).await, 2);
    let report = gw.gateway.redrive(&by_id).await.unwrap();
    assert_eq!((report.matched, report.redriven, report.older), (1, 0, 1));
    gw.server.shutdown().await.unwrap();

    // A second start with the same file carries nothing and changes nothing.
    let gateway = Gateway::new(Config::from_toml(&text, &env).unwrap(), store.clone());
    assert_eq!(gateway.apply_route_renames().await.unwrap(), vec![]);
    assert_eq!(count(&gateway, NEW).await, 2);
    let again = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    assert_eq!(count(&again.gateway, NEW).await, 2);
    assert_eq!(count(&again.gateway, OLD).await, 0);
    again.server.shutdown().await.unwrap();
}

async fn silent_rename_is_refused<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let (_, _downstream, text) = older_dead_letter(&store).await;
    let silent = renamed(&text, "");
    let gateway = Gateway::new(Config::from_toml(&silent, &env).unwrap(), store.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let Err(error) = Server::start(gateway.clone(), listener).await else {
        panic!("a silent rename started");
    };
    let message = error.to_string();
    assert_eq!(error.kind(), idem_gateway::ErrorKind::Invalid);
    for needle in [
        "route \"stripe.app\" has 1 open deliveries",
        "1 version-guard rows",
        "renamed_from = \"stripe.app\"",
        "destination \"app\"",
        "retired_routes",
    ] {
        assert!(message.contains(needle), "{needle:?} in {message}");
    }
    // Nothing was moved.
    assert_eq!(
        count(
            &gateway,
            "SELECT COUNT(*) FROM idem_gateway_deliveries WHERE route = 'stripe.app'"
        )
        .await,
        2
    );
    // Retired for good, the old name is left alone and the gateway starts.
    let retired = format!("retired_routes = [\"stripe.app\"]\n{silent}");
    let gw = Running::start(Config::from_toml(&retired, &env).unwrap(), store).await;
    gw.server.shutdown().await.unwrap();
}

async fn renamed_from_nothing_stored_is_a_no_op<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let downstream = Downstream::ok().await;
    let text = renamed(
        &config_text(downstream.addr, r#"["5ms"]"#),
        "renamed_from = \"never-was\"\n",
    );
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    assert_eq!(gw.gateway.apply_route_renames().await.unwrap(), vec![]);
    let body = stripe_event(
        "evt_1",
        "customer.created",
        "customer",
        "cus_1",
        1_700_000_000,
    );
    assert_eq!(gw.post_stripe(&body).await.json["status"], "accepted");
    gw.settle().await;
    assert_eq!(downstream.received().len(), 1);
    gw.server.shutdown().await.unwrap();
}

async fn rename_to_another_destination_is_refused<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let (_, downstream, text) = older_dead_letter(&store).await;
    // The stripe route now goes to a second destination "other", renamed from stripe.app.
    let moved = text
        .replace(
            "[[route]]\nsource = \"stripe\"\ndestination = \"app\"",
            "[[route]]\nname = \"stripe-other\"\nrenamed_from = \"stripe.app\"\nsource = \"stripe\"\ndestination = \"other\"",
        )
        .replacen(
            "[[route]]",
            &format!(
                "[[destination]]\nname = \"other\"\nurl = \"http://{}/other\"\nsigning_secret_env = \"APP_SECRET\"\n\n[[route]]",
                downstream.addr
            ),
            1,
        );
    let config = Config::from_toml(&moved, &env).unwrap();
    let error = Gateway::new(config, store)
        .apply_route_renames()
        .await
        .unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("went to destination \"app\"")
            && message.contains("\"other\"")
            && message.contains("list \"stripe.app\" in retired_routes"),
        "{message}"
    );
}

both_stores!(
    explicit_rename_carries_order,
    silent_rename_is_refused,
    renamed_from_nothing_stored_is_a_no_op,
    rename_to_another_destination_is_refused,
);

#[test]
fn renamed_from_must_name_a_former_route() {
    let text = config_text("127.0.0.1:9".parse().unwrap(), r#"["5ms"]"#);
    for (extra, needle) in [
        (
            "renamed_from = \"stripe-renamed\"\n",
            "is the route's own name",
        ),
        (
            "renamed_from = \"github.app\"\n",
            "names a route that is still configured",
        ),
    ] {
        let error = Config::from_toml(&renamed(&text, extra), &env).unwrap_err();
        assert!(error.to_string().contains(needle), "{error}");
    }
    let retired = format!("retired_routes = [\"github.app\"]\n{text}");
    let error = Config::from_toml(&retired, &env).unwrap_err();
    assert!(
        error.to_string().contains("is a route configured now"),
        "{error}"
    );
}
