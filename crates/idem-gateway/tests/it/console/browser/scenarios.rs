//! The operator's scenarios in a real browser, against a real gateway fed real signed
//! payloads: sign in (with the keyboard); the demo's events with the right counts; a stale
//! event's page saying why it was not sent; a destination failing until events dead-letter,
//! redriven from the console and delivered once; a range replayed after a dry run, then
//! forced with its second confirmation; an unauthenticated request and a form without its
//! CSRF token refused. Every page is checked for its title and for errors in the browser's
//! console.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use fantoccini::key::Key;
use idem_core::{Clock, ManualClock};
use idem_gateway::{Config, GatewayDb};
use idem_http::verify::stripe;
use idem_sql::Store;
use idem_testkit::AppDb;

use super::Browser;
use crate::console::client::ADMIN_TOKEN;
use crate::support::{
    Downstream, Running, STRIPE_SECRET, capture_logs, config_text, env, stripe_event,
};

/// Signs in at `base` with `token` using the keyboard only: the token field has the focus,
/// the token is typed and Enter sends the form.
pub(super) async fn sign_in(browser: &Browser, base: &str, token: &str) {
    browser.open(&format!("{base}/console/sign-in")).await;
    browser.expect_title("Sign in").await;
    let focused = browser.client.active_element().await.unwrap();
    assert_eq!(focused.attr("id").await.unwrap().as_deref(), Some("token"));
    focused
        .send_keys(&format!("{token}{}", char::from(Key::Enter)))
        .await
        .unwrap();
    wait_for_path(browser, "/console").await;
}

/// Waits (up to 10 s) until the page shown is at `path`.
pub(super) async fn wait_for_path(browser: &Browser, path: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let shown = browser.path().await;
        if shown == path {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "still at {shown}, expected {path}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Clicks `css` and waits for the next page, at `path`: until the page shown before is gone
/// (its root element stale), since a form may lead to the same path again.
pub(super) async fn click_to(browser: &Browser, css: &str, path: &str) {
    let before = browser.find("html").await;
    browser.click(css).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while before.tag_name().await.is_ok() {
        assert!(Instant::now() < deadline, "{css} led to no new page");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    wait_for_path(browser, path).await;
}

/// The count a row of the overview shows: `kind` `name`'s `metric` over the last hour.
async fn shown(browser: &Browser, kind: &str, name: &str, metric: &str) -> u64 {
    let css = format!(
        "section[data-kind=\"{kind}\"][data-name=\"{name}\"] tr[data-metric=\"{metric}\"] td.last-hour"
    );
    browser.text(&css).await.parse().unwrap()
}

/// No error in the browser's console so far.
pub(super) async fn no_console_errors(browser: &Browser) {
    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "the browser's console: {errors:?}");
}

/// Sign-in with the keyboard after a wrong token and an unauthenticated request, then the
/// demo's events (its real signed payloads, its sender) with the counts the demo's plan makes:
/// 159 Stripe and 4 GitHub events each sent 3 times, 4 Stripe events stale, every other one
/// delivered once, the first attempts the demo's application fails retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sign_in_and_see_the_demos_events_with_the_right_counts() {
    capture_logs();
    let token = idem_gateway::demo::new_admin_token();
    let demo = idem_gateway::demo::Demo::run(Some(&token)).await.unwrap();
    let report = demo.report().await.unwrap();
    assert!(report.passed(), "{:?}", report.problems);
    let base = demo.url();
    let browser = Browser::start("demo-overview").await;

    browser.open(&format!("{base}/console/events")).await;
    wait_for_path(&browser, "/console/sign-in").await;
    browser
        .find("#token")
        .await
        .send_keys("not-the-token")
        .await
        .unwrap();
    click_to(&browser, "button[type=submit]", "/console/sign-in").await;
    assert_eq!(browser.text("p.problem").await, "Wrong admin token.");
    // The refusal is answered 401, which the browser reports; nothing else.
    let errors = browser.console_errors().await;
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].ends_with("status of 401 (Unauthorized)"),
        "{errors:?}"
    );
    sign_in(&browser, &base, &token).await;
    browser.expect_title("Overview").await;

    let (stripe, github) = (159, 4);
    assert_eq!(stripe + github, report.unique_events);
    for (source, events) in [("stripe", stripe), ("github", github)] {
        assert_eq!(shown(&browser, "source", source, "accepted").await, events);
        assert_eq!(
            shown(&browser, "source", source, "duplicate").await,
            2 * events
        );
    }
    assert_eq!(shown(&browser, "source", "stripe", "stale").await, 4);
    assert_eq!(
        shown(&browser, "destination", "app", "stale").await,
        report.stale
    );
    assert_eq!(
        shown(&browser, "destination", "app", "delivered").await,
        stripe + github - 4
    );
    assert_eq!(
        shown(&browser, "destination", "app", "retried").await,
        report.retried
    );
    assert_eq!(shown(&browser, "destination", "app", "dead").await, 0);
    assert_eq!(
        browser
            .text("#backlog tr[data-destination=\"app\"] td[data-metric=\"pending\"]")
            .await,
        "0"
    );
    browser.screenshot("").await;
    no_console_errors(&browser).await;

    click_to(
        &browser,
        "nav a[href=\"/console/events\"]",
        "/console/events",
    )
    .await;
    browser.expect_title("Events").await;
    let rows = browser
        .client
        .find_all(fantoccini::Locator::Css("#events tbody tr"))
        .await
        .unwrap();
    assert_eq!(rows.len(), 50);
    browser
        .find("#f-state")
        .await
        .select_by_value("stale")
        .await
        .unwrap();
    browser
        .find("#f-source")
        .await
        .select_by_value("stripe")
        .await
        .unwrap();
    click_to(
        &browser,
        "form.filters button[type=submit]",
        "/console/events",
    )
    .await;
    let stale = browser
        .client
        .find_all(fantoccini::Locator::Css("#events tbody tr"))
        .await
        .unwrap();
    assert_eq!(stale.len(), 4);
    browser.screenshot("-events").await;
    no_console_errors(&browser).await;
    browser.close().await;
    demo.stop().await.unwrap();
}

/// A gateway with the console on, a millisecond retry schedule, `extra` keys on top.
async fn gateway<DB: GatewayDb>(
    store: Store<DB>,
    downstream: &Downstream,
    extra: &str,
) -> Running<DB> {
    let text = format!(
        "admin_token_env = \"ADMIN_TOKEN\"\n{extra}\n{}",
        config_text(downstream.addr, r#"["5ms"]"#)
    );
    Running::start(Config::from_toml(&text, &env).unwrap(), store).await
}

/// An older event of an entity arriving after a newer one: its page says it is stale, both
/// versions, and that it was not sent; its headers and pretty-printed body are shown.
async fn a_stale_events_page_says_why_it_was_not_sent<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let downstream = Downstream::ok().await;
    let gw = gateway(store, &downstream, "").await;
    let sub = |id: &str, created| {
        stripe_event(
            id,
            "customer.subscription.updated",
            "subscription",
            "sub_s",
            created,
        )
    };
    for body in [sub("evt_new", 200), sub("evt_old", 100)] {
        let signature = stripe::sign(STRIPE_SECRET, crate::support::unix_now(), &body);
        let headers = [
            ("stripe-signature", signature),
            ("content-type", "application/json".to_owned()),
        ];
        assert_eq!(
            gw.post("stripe", &headers, &body).await.json["status"],
            "accepted"
        );
    }
    gw.settle().await;
    let browser = Browser::start("stale-event").await;
    sign_in(&browser, &gw.url, ADMIN_TOKEN).await;
    browser.open(&format!("{}/console/events", gw.url)).await;
    browser
        .find("#f-state")
        .await
        .select_by_value("stale")
        .await
        .unwrap();
    click_to(
        &browser,
        "form.filters button[type=submit]",
        "/console/events",
    )
    .await;
    click_to(&browser, "#events a[href*=\"evt_old\"]", "/console/event").await;
    browser.expect_title("Event evt_old").await;
    let delivery = "section.delivery[data-route=\"stripe.app\"]";
    assert_eq!(
        browser
            .find(delivery)
            .await
            .attr("data-state")
            .await
            .unwrap()
            .as_deref(),
        Some("stale")
    );
    let decision = browser.text(&format!("{delivery} p.decision")).await;
    assert!(
        decision.starts_with(
            "Stale: not sent. entity subscription:sub_s is at timestamp=200; this event is \
             timestamp=100."
        ),
        "{decision}"
    );
    assert_eq!(
        browser.text(&format!("{delivery} p.hint")).await,
        "No attempt made."
    );
    let body = browser.text("#body").await;
    assert!(body.contains("\"id\": \"evt_old\""), "{body}");
    assert_eq!(
        browser.text("#headers tbody").await,
        "content-type application/json"
    );
    browser.screenshot("").await;
    no_console_errors(&browser).await;
    browser.close().await;
    assert!(downstream.with_key("stripe:evt_old").is_empty());
    gw.server.shutdown().await.unwrap();
}

/// A destination that fails until three events are dead letters; two of them ticked and
/// redriven from the console (the count first, then the confirmation) once it works again:
/// each is delivered once, on attempt 3; the third stays a dead letter.
async fn dead_letters_are_redriven_from_the_console_and_delivered_once<DB: GatewayDb + AppDb>(
    store: Store<DB>,
) {
    let failing = Arc::new(AtomicBool::new(true));
    let fail = Arc::clone(&failing);
    let downstream = Downstream::start(Arc::new(move |_| {
        if fail.load(Ordering::SeqCst) {
            StatusCode::BAD_GATEWAY
        } else {
            StatusCode::OK
        }
    }))
    .await;
    let gw = gateway(store, &downstream, "").await;
    for n in 1..=3 {
        let body = stripe_event(
            &format!("evt_d{n}"),
            "invoice.paid",
            "invoice",
            &format!("in_{n}"),
            10,
        );
        assert_eq!(gw.post_stripe(&body).await.json["status"], "accepted");
    }
    assert_eq!(gw.settle().await.destinations["app"].dead, 3);
    let browser = Browser::start("redrive").await;
    sign_in(&browser, &gw.url, ADMIN_TOKEN).await;
    click_to(
        &browser,
        "nav a[href=\"/console/dead-letters\"]",
        "/console/dead-letters",
    )
    .await;
    browser.expect_title("Dead letters").await;
    assert_eq!(browser.text("#dead-count").await, "3 dead letters");
    for event in ["evt_d1", "evt_d2"] {
        browser
            .click(&format!(
                "tr[data-event-id=\"{event}\"] input[type=checkbox]"
            ))
            .await;
    }
    click_to(
        &browser,
        "button[name=scope][value=ticked]",
        "/console/dead-letters/redrive",
    )
    .await;
    browser.expect_title("Confirm redrive").await;
    assert_eq!(
        browser.text("#count").await,
        "Redrive 2 ticked dead letters: 2 dead letters match; 2 would be sent again (new \
         attempts, same Idempotency-Key)."
    );
    browser.screenshot("-confirm").await;
    assert_eq!(
        gw.gateway.stats().await.unwrap().destinations["app"].dead,
        3,
        "the count changed nothing"
    );
    failing.store(false, Ordering::SeqCst);
    click_to(
        &browser,
        "#confirm-redrive",
        "/console/dead-letters/redrive",
    )
    .await;
    browser.expect_title("Redriven").await;
    assert_eq!(
        browser.text("#result").await,
        "2 dead letters redriven: the dispatcher sends them now."
    );
    let stats = gw.settle().await;
    assert_eq!(
        (
            stats.destinations["app"].delivered,
            stats.destinations["app"].dead
        ),
        (2, 1)
    );
    for (event, tries) in [("evt_d1", 3), ("evt_d2", 3), ("evt_d3", 2)] {
        let received = downstream.with_key(&format!("stripe:{event}"));
        assert_eq!(received.len(), tries, "{event}");
        let answered_ok = received
            .iter()
            .filter(|r| r.header("idem-attempt") == Some("3"))
            .count();
        assert_eq!(
            answered_ok,
            usize::from(tries == 3),
            "{event} delivered once"
        );
    }
    browser
        .open(&format!("{}/console/event?source=stripe&id=evt_d1", gw.url))
        .await;
    assert_eq!(
        browser
            .find("section.delivery")
            .await
            .attr("data-state")
            .await
            .unwrap()
            .as_deref(),
        Some("delivered")
    );
    browser.screenshot("").await;
    no_console_errors(&browser).await;
    browser.close().await;
    gw.server.shutdown().await.unwrap();
}

/// POSTs a Stripe event signed at `clock`'s time.
async fn post_at<DB: GatewayDb>(gw: &Running<DB>, clock: &ManualClock, body: &[u8]) {
    let signature = stripe::sign(STRIPE_SECRET, clock.now().as_millis() / 1000, body);
    let answer = gw
        .post("stripe", &[("stripe-signature", signature)], body)
        .await;
    assert_eq!(answer.json["status"], "accepted", "{}", answer.json);
}

/// A replay of the subscription events of the last 3 hours: the dry run counts 4 matched, 1
/// to send again, 2 older than their entity's newest (one stale, one superseded), 1 whose
/// body body_retention dropped; the invoice of the range is left out by the type filter.
/// Confirmed, exactly the one is sent again. Then forced: the confirmation names what force
/// does and must be ticked; without it nothing is sent, with it the two older ones are.
async fn a_range_is_replayed_after_a_dry_run<DB: GatewayDb + AppDb>(
    store: Store<DB>,
    clock: ManualClock,
) {
    let downstream = Downstream::ok().await;
    let gw = gateway(store, &downstream, "body_retention = \"1h\"").await;
    let sub = |id: &str, object: &str, created| {
        stripe_event(
            id,
            "customer.subscription.updated",
            "subscription",
            object,
            created,
        )
    };
    post_at(&gw, &clock, &sub("evt_early", "sub_e", 1)).await;
    gw.settle().await;
    clock.advance(Duration::from_secs(2 * 3600));
    for body in [
        sub("evt_r1", "sub_x", 100),
        sub("evt_r2", "sub_x", 200),
        sub("evt_r3", "sub_x", 150),
        stripe_event("evt_inv", "invoice.paid", "invoice", "in_9", 5),
    ] {
        post_at(&gw, &clock, &body).await;
    }
    gw.settle().await;
    assert_eq!(gw.gateway.gc().await.unwrap().bodies, 1);

    let browser = Browser::start("replay").await;
    sign_in(&browser, &gw.url, ADMIN_TOKEN).await;
    click_to(
        &browser,
        "nav a[href=\"/console/replay\"]",
        "/console/replay",
    )
    .await;
    browser.expect_title("Replay").await;
    browser
        .find("#r-source")
        .await
        .select_by_value("stripe")
        .await
        .unwrap();
    let since = browser.find("#r-since").await;
    since.clear().await.unwrap();
    since.send_keys("3h").await.unwrap();
    browser
        .find("#r-type")
        .await
        .send_keys("customer.subscription.*")
        .await
        .unwrap();
    click_to(&browser, "#count-replay", "/console/replay").await;
    browser.expect_title("Confirm replay").await;
    let counts = [
        ("#matched", "4"),
        ("#would-requeue", "1"),
        ("#in-progress", "0"),
        ("#older", "2"),
        ("#no-body", "1"),
    ];
    for (cell, expected) in counts {
        assert_eq!(browser.text(cell).await, expected, "{cell}");
    }
    browser.screenshot("-dry-run").await;
    // Each event once, but the stale evt_r3.
    assert_eq!(downstream.received().len(), 4, "the dry run sent nothing");
    click_to(&browser, "#confirm-replay", "/console/replay").await;
    browser.expect_title("Replayed").await;
    assert!(
        browser
            .text("#result")
            .await
            .starts_with("1 deliveries of 4 matched are due again"),
    );
    gw.settle().await;
    let sent = |event: &str| downstream.with_key(&format!("stripe:{event}")).len();
    assert_eq!(
        [
            sent("evt_early"),
            sent("evt_r1"),
            sent("evt_r2"),
            sent("evt_r3"),
            sent("evt_inv")
        ],
        [1, 1, 2, 0, 1]
    );

    // Forced: the older ones too, after the second confirmation only.
    browser.open(&format!("{}/console/replay", gw.url)).await;
    browser
        .find("#r-source")
        .await
        .select_by_value("stripe")
        .await
        .unwrap();
    let since = browser.find("#r-since").await;
    since.clear().await.unwrap();
    since.send_keys("3h").await.unwrap();
    browser
        .find("#r-type")
        .await
        .send_keys("customer.subscription.*")
        .await
        .unwrap();
    browser.click("#r-force").await;
    click_to(&browser, "#count-replay", "/console/replay").await;
    assert_eq!(
        browser.text("label[for=\"force-confirmed\"]").await,
        "Force: send the 2 stale or older events again: the destination then receives older \
         state after newer state, and should refetch."
    );
    assert_eq!(browser.text("#confirm-replay").await, "Replay 3 deliveries");
    click_to(&browser, "#confirm-replay", "/console/replay").await;
    assert_eq!(
        browser.text("p.problem").await,
        "Forcing needs the second confirmation: tick it to send the older events."
    );
    gw.settle().await;
    assert_eq!(
        sent("evt_r1"),
        1,
        "nothing sent without the second confirmation"
    );
    browser.click("#force-confirmed").await;
    click_to(&browser, "#confirm-replay", "/console/replay").await;
    browser.expect_title("Replayed").await;
    gw.settle().await;
    assert_eq!([sent("evt_r1"), sent("evt_r2"), sent("evt_r3")], [2, 3, 1]);
    no_console_errors(&browser).await;
    browser.close().await;
    gw.server.shutdown().await.unwrap();
}

/// Without a session the console sends the browser to sign-in; a form whose CSRF token was
/// taken out is refused with a page saying so, and nothing is replayed.
async fn unauthenticated_and_csrf_less_requests_are_refused<DB: GatewayDb + AppDb>(
    store: Store<DB>,
) {
    let downstream = Downstream::ok().await;
    let gw = gateway(store, &downstream, "").await;
    let body = stripe_event("evt_c", "invoice.paid", "invoice", "in_c", 10);
    assert_eq!(gw.post_stripe(&body).await.json["status"], "accepted");
    gw.settle().await;
    let browser = Browser::start("refused").await;
    for path in [
        "/console",
        "/console/dead-letters?destination=app",
        "/console/configuration",
    ] {
        browser.open(&format!("{}{path}", gw.url)).await;
        wait_for_path(&browser, "/console/sign-in").await;
        browser.expect_title("Sign in").await;
    }
    sign_in(&browser, &gw.url, ADMIN_TOKEN).await;
    browser.open(&format!("{}/console/replay", gw.url)).await;
    browser
        .client
        .execute(
            "document.querySelectorAll('main input[name=csrf]').forEach(e => e.remove())",
            vec![],
        )
        .await
        .unwrap();
    click_to(&browser, "#count-replay", "/console/replay").await;
    browser.expect_title("Refused: missing CSRF token").await;
    browser.screenshot("").await;
    gw.settle().await;
    assert_eq!(downstream.with_key("stripe:evt_c").len(), 1);
    browser.close().await;
    gw.server.shutdown().await.unwrap();
}

mod on_every_store {
    use super::*;
    use crate::support::{mysql, postgres, sqlite, system_clock};

    macro_rules! browser_scenario {
        ($($name:ident),+ $(,)?) => {$(
            mod $name {
                use super::*;

                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn sqlite() {
                    capture_logs();
                    let (_dir, store) = super::sqlite(system_clock()).await;
                    super::super::$name(store).await;
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn postgres() {
                    capture_logs();
                    let (_dir, store) = super::postgres(system_clock()).await;
                    super::super::$name(store).await;
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn mysql() {
                    capture_logs();
                    let (_dir, store) = super::mysql(system_clock()).await;
                    super::super::$name(store).await;
                }
            }
        )+};
    }

    browser_scenario!(
        a_stale_events_page_says_why_it_was_not_sent,
        dead_letters_are_redriven_from_the_console_and_delivered_once,
        unauthenticated_and_csrf_less_requests_are_refused,
    );

    mod a_range_is_replayed_after_a_dry_run {
        use super::*;

        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn sqlite() {
            capture_logs();
            let clock = ManualClock::new(idem_core::SystemClock.now());
            let (_dir, store) = super::sqlite(Arc::new(clock.clone())).await;
            super::super::a_range_is_replayed_after_a_dry_run(store, clock).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn postgres() {
            capture_logs();
            let clock = ManualClock::new(idem_core::SystemClock.now());
            let (_dir, store) = super::postgres(Arc::new(clock.clone())).await;
            super::super::a_range_is_replayed_after_a_dry_run(store, clock).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn mysql() {
            capture_logs();
            let clock = ManualClock::new(idem_core::SystemClock.now());
            let (_dir, store) = super::mysql(Arc::new(clock.clone())).await;
            super::super::a_range_is_replayed_after_a_dry_run(store, clock).await;
        }
    }
}
