//! An event's page says what the version guard decided, as the delivery's stored note tells
//! it: an entity's first event, a newer one after a gap in a dense sequence, and, after the
//! source's version type was changed (a restart with `type = "timestamp"` over integer
//! versions), one whose version could not be compared and was sent without a check.

use idem_gateway::{Config, GatewayDb};
use idem_sql::Store;

use super::client::{Client, fragment, text_of};
use super::seq;
use crate::support::{Downstream, Running, config_text};

/// The test configuration with source `seq` (to `app`) reading the version of `$.v` as
/// `version_type`.
fn config(downstream: &Downstream, version_type: &str) -> Config {
    let text = format!(
        "admin_token_env = \"ADMIN_TOKEN\"\n{}{}",
        config_text(downstream.addr, r#"["5ms"]"#),
        seq::sections(version_type)
    );
    Config::from_toml(&text, &seq::with_secret).unwrap()
}

/// POSTs `{"order":"o1","v":<v>}` as event `id` of source `seq`: accepted.
async fn post_seq<DB: GatewayDb>(gw: &Running<DB>, id: &str, v: &str) {
    assert_eq!(seq::post(gw, id, v).await, "accepted", "{id}");
}

/// The decision the page of `seq` event `id` states for route `seq.app`.
async fn decision(client: &mut Client, id: &str) -> String {
    let page = client
        .get(&format!("/console/event?source=seq&id={id}"))
        .await;
    assert_eq!(page.status, 200, "{}", page.html);
    let section = fragment(&page.html, "data-route=\"seq.app\"", "</section>");
    text_of(fragment(section, "class=\"decision\"", "</p>"))
}

async fn the_guards_decision_is_told_as_stored<DB: GatewayDb>(store: Store<DB>) {
    let downstream = Downstream::ok().await;
    let gw = Running::start(config(&downstream, "integer"), store.clone()).await;
    post_seq(&gw, "seq_1", "1").await;
    post_seq(&gw, "seq_3", "3").await;
    gw.settle().await;
    let detail = gw
        .gateway
        .show_event("seq", "seq_1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        detail.deliveries[0].0.note.as_deref(),
        Some("first event of its entity"),
        "what idem events show prints"
    );
    gw.server.shutdown().await.unwrap();

    // The source's versions are timestamps from now on.
    let gw = Running::start(config(&downstream, "timestamp"), store).await;
    post_seq(&gw, "seq_t", "\"2026-01-31T12:00:00Z\"").await;
    gw.settle().await;
    let mut client = Client::new(&gw.url);
    client.sign_in().await;
    assert_eq!(
        decision(&mut client, "seq_1").await,
        "In order: the first event of entity order:o1 on this route, so there was no stored \
         version to compare with; version 1 became the entity's version."
    );
    assert_eq!(
        decision(&mut client, "seq_3").await,
        "In order, after a gap in the version sequence (2 was next, 3 arrived): version 3 was \
         newer than entity order:o1's stored version; sent after the entity's earlier events \
         on this route (a gap is applied and counted)."
    );
    let not_compared = decision(&mut client, "seq_t").await;
    assert!(
        not_compared.starts_with(
            "Not ordered: its version could not be compared with the version stored for \
             entity order:o1 ("
        ) && not_compared.contains("stored sequence, got timestamp")
            && not_compared.ends_with(
                "; the source's version type was changed), so it was sent without a version \
                 check."
            ),
        "{not_compared}"
    );
    assert_eq!(downstream.with_key("seq:seq_t").len(), 1, "sent");
    gw.server.shutdown().await.unwrap();
}

both_stores!(the_guards_decision_is_told_as_stored);

/// The event page's "Resend" form sends the event's delivery again (same Idempotency-Key); a
/// form without the session's CSRF token is refused and sends nothing.
async fn the_resend_button_sends_the_event_again<DB: GatewayDb>(store: Store<DB>) {
    let downstream = Downstream::ok().await;
    let gw = Running::start(config(&downstream, "integer"), store).await;
    post_seq(&gw, "seq_r", "1").await;
    gw.settle().await;
    assert_eq!(downstream.with_key("seq:seq_r").len(), 1);
    let mut client = Client::new(&gw.url);
    let csrf = client.sign_in().await;
    let page = client.get("/console/event?source=seq&id=seq_r").await;
    let form = fragment(&page.html, "id=\"resend\"", "</form>");
    assert!(form.contains("action=\"/console/event/resend\""), "{form}");
    let forged = client
        .post(
            "/console/event/resend",
            &[("csrf", "forged"), ("source", "seq"), ("id", "seq_r")],
        )
        .await;
    assert_eq!(forged.status, 403, "{}", forged.html);
    let done = client
        .post(
            "/console/event/resend",
            &[("csrf", &csrf), ("source", "seq"), ("id", "seq_r")],
        )
        .await;
    assert_eq!(done.status, 200, "{}", done.html);
    assert!(
        text_of(fragment(&done.html, "id=\"resent\"", "</p>"))
            .starts_with("1 of 1 deliveries sent again"),
        "{}",
        done.html
    );
    gw.settle().await;
    let sent = downstream.with_key("seq:seq_r");
    assert_eq!(sent.len(), 2);
    gw.server.shutdown().await.unwrap();
}

both_stores!(the_resend_button_sends_the_event_again);
