//! The dead letters page over HTTP: the destination filter; redrive one, and all of one
//! destination (the count first, then the confirmation the page's own form sends), each
//! leaving the other dead letters as they were; a dead letter older than its entity's
//! delivered event refused without force, and sent only once force's second confirmation is
//! ticked.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::http::StatusCode;
use idem_gateway::{Config, GatewayDb};
use idem_sql::Store;

use super::client::{Client, Page, text_of};
use crate::support::{Downstream, Running, env, stripe_event};

/// The hidden fields of the confirmation's form, as the browser sends them.
fn confirmation(page: &Page) -> Vec<(String, String)> {
    let form = page.fragment("id=\"confirm\"", "</form>");
    form.split("<input type=\"hidden\" ")
        .skip(1)
        .map(|input| {
            let attribute = |name: &str| {
                let start = input.find(&format!("{name}=\"")).unwrap() + name.len() + 2;
                input[start..start + input[start..].find('"').unwrap()].to_owned()
            };
            (attribute("name"), attribute("value"))
        })
        .collect()
}

/// POSTs `fields` (and `extra`) to the redrive.
async fn redrive(client: &mut Client, fields: &[(String, String)], extra: &[(&str, &str)]) -> Page {
    let mut all: Vec<(&str, &str)> = fields
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    all.extend_from_slice(extra);
    let page = client.post("/console/dead-letters/redrive", &all).await;
    assert_eq!(page.status, 200, "{}", page.html);
    page
}

async fn dead_letters_are_redriven_one_by_destination_and_forced<DB: GatewayDb>(store: Store<DB>) {
    // Refused with a 400 (a dead letter at once) while `failing`.
    let failing = Arc::new(AtomicBool::new(true));
    let fail = Arc::clone(&failing);
    let downstream = Downstream::start(Arc::new(move |_| {
        if fail.load(Ordering::SeqCst) {
            StatusCode::BAD_REQUEST
        } else {
            StatusCode::OK
        }
    }))
    .await;
    let text = format!(
        r#"admin_token_env = "ADMIN_TOKEN"
listen = "127.0.0.1:0"
poll_interval = "20ms"

[[source]]
name = "stripe"
kind = "stripe"
secrets_env = ["STRIPE_SECRET"]

[[destination]]
name = "app"
url = "http://{0}/events"
signing_secret_env = "APP_SECRET"

[[destination]]
name = "other"
url = "http://{0}/events"
signing_secret_env = "APP_SECRET"

[[route]]
source = "stripe"
destination = "app"
event_types = ["invoice.*", "customer.subscription.*"]

[[route]]
source = "stripe"
destination = "other"
event_types = ["charge.*"]
"#,
        downstream.addr
    );
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    let sub = |id: &str, created| {
        stripe_event(
            id,
            "customer.subscription.updated",
            "subscription",
            "sub_f",
            created,
        )
    };
    let invoice = |id: &str| stripe_event(id, "invoice.paid", "invoice", id, 10);
    let charge = |id: &str| stripe_event(id, "charge.failed", "charge", id, 10);
    for body in [
        invoice("evt_d1"),
        invoice("evt_d2"),
        invoice("evt_d3"),
        sub("evt_f1", 100),
        charge("evt_o1"),
        charge("evt_o2"),
    ] {
        assert_eq!(gw.post_stripe(&body).await.json["status"], "accepted");
    }
    let stats = gw.settle().await;
    assert_eq!(
        (
            stats.destinations["app"].dead,
            stats.destinations["other"].dead
        ),
        (4, 2)
    );
    // A newer event of evt_f1's subscription is delivered.
    failing.store(false, Ordering::SeqCst);
    assert_eq!(
        gw.post_stripe(&sub("evt_f2", 200)).await.json["status"],
        "accepted"
    );
    gw.settle().await;
    let received = |id: &str| downstream.with_key(&format!("stripe:{id}")).len();
    let dead =
        async |destination: &str| gw.gateway.stats().await.unwrap().destinations[destination].dead;

    let mut client = Client::new(&gw.url);
    let csrf = client.sign_in().await;
    for (query, count, listed) in [
        (
            "",
            "6 dead letters",
            &["evt_d1", "evt_d2", "evt_d3", "evt_f1", "evt_o1", "evt_o2"][..],
        ),
        (
            "?destination=other",
            "2 dead letters of other",
            &["evt_o1", "evt_o2"],
        ),
        (
            "?destination=app",
            "4 dead letters of app",
            &["evt_d1", "evt_d2", "evt_d3", "evt_f1"],
        ),
    ] {
        let page = client.get(&format!("/console/dead-letters{query}")).await;
        assert_eq!(page.text("id=\"dead-count\"", "</p>"), count);
        let table = page.fragment("id=\"dead-letters\"", "</table>");
        let mut shown: Vec<&str> = table
            .split("data-event-id=\"")
            .skip(1)
            .map(|rest| &rest[..rest.find('"').unwrap()])
            .collect();
        shown.sort_unstable();
        assert_eq!(shown, listed, "{query}");
    }
    let id_of = async |event: &str| {
        let letters = gw.gateway.dead_letters(None, 100).await.unwrap();
        letters
            .iter()
            .find(|d| d.event_id == event)
            .unwrap()
            .id
            .to_string()
    };

    // One.
    let d1 = id_of("evt_d1").await;
    let base = [
        ("csrf".to_owned(), csrf.clone()),
        ("destination".to_owned(), "app".to_owned()),
    ];
    let count = redrive(&mut client, &base, &[("one", &d1)]).await;
    assert_eq!(
        count.text("id=\"count\"", "</p>"),
        format!(
            "Redrive dead letter {d1}: 1 dead letters match; 1 would be sent again (new \
             attempts, same Idempotency-Key)."
        )
    );
    assert_eq!(dead("app").await, 4, "the count changed nothing");
    let done = redrive(&mut client, &confirmation(&count), &[]).await;
    assert_eq!(
        done.text("id=\"result\"", "</p>"),
        "1 dead letters redriven: the dispatcher sends them now."
    );
    gw.settle().await;
    assert_eq!((dead("app").await, dead("other").await), (3, 2));
    assert_eq!([received("evt_d1"), received("evt_d2")], [2, 1]);

    // All of one destination: the other's stay.
    let other = [
        ("csrf".to_owned(), csrf.clone()),
        ("destination".to_owned(), "other".to_owned()),
    ];
    let count = redrive(&mut client, &other, &[("scope", "all")]).await;
    assert_eq!(
        count.text("id=\"count\"", "</p>"),
        "Redrive every dead letter of other: 2 dead letters match; 2 would be sent again (new \
         attempts, same Idempotency-Key)."
    );
    let done = redrive(&mut client, &confirmation(&count), &[]).await;
    assert_eq!(
        done.text("id=\"result\"", "</p>"),
        "2 dead letters redriven: the dispatcher sends them now."
    );
    gw.settle().await;
    assert_eq!((dead("app").await, dead("other").await), (3, 0));
    assert_eq!(
        [received("evt_o1"), received("evt_o2"), received("evt_d3")],
        [2, 2, 1]
    );

    // Older than its entity's delivered event: refused unless forced, and forced only after
    // the second confirmation.
    let f1 = id_of("evt_f1").await;
    let count = redrive(&mut client, &base, &[("one", &f1)]).await;
    assert_eq!(
        count.text("id=\"count\"", "</p>"),
        format!(
            "Redrive dead letter {f1}: 1 dead letters match; 0 would be sent again (new \
             attempts, same Idempotency-Key); 1 are older than their entity's newest \
             delivered event and stay dead letters."
        )
    );
    let done = redrive(&mut client, &confirmation(&count), &[]).await;
    assert!(
        done.text("id=\"result\"", "</p>")
            .starts_with("0 dead letters redriven")
    );
    let forced = redrive(&mut client, &base, &[("one", &f1), ("force", "yes")]).await;
    assert_eq!(
        forced.text("for=\"force-confirmed\"", "</label>"),
        "Force: send the 1 dead letters older than their entity's newest delivered event: the \
         destination then receives older state after newer state."
    );
    let fields = confirmation(&forced);
    let refused = redrive(&mut client, &fields, &[]).await;
    assert_eq!(
        refused.text("class=\"problem\"", "</p>"),
        "Forcing needs the second confirmation: tick it to send the older dead letters."
    );
    gw.settle().await;
    assert_eq!(
        (received("evt_f1"), dead("app").await),
        (1, 3),
        "nothing sent"
    );
    let done = redrive(&mut client, &fields, &[("force_confirmed", "yes")]).await;
    assert_eq!(
        text_of(done.fragment("id=\"result\"", "</p>")),
        "1 dead letters redriven: the dispatcher sends them now."
    );
    gw.settle().await;
    assert_eq!((received("evt_f1"), dead("app").await), (2, 2));
    gw.server.shutdown().await.unwrap();
}

both_stores!(dead_letters_are_redriven_one_by_destination_and_forced);
