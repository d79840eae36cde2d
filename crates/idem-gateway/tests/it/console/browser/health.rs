//! The overview's health at a glance, in a real browser (issue 31): a destination failing
//! every attempt is shown failing with its circuit breaker open, its reason and last errors; a
//! destination answering in 300 ms (over its `slow_after` of 100 ms) is shown degraded, slow,
//! with its p99; a working one healthy. Forged and oversized requests are counted per source
//! and reason. The charts have axes and each bar's value on hover; the range switches to a day.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use idem_gateway::Config;
use idem_http::verify::stripe;

use super::Browser;
use super::scenarios::{click_to, no_console_errors, sign_in};
use crate::console::client::ADMIN_TOKEN;
use crate::support::{
    Downstream, Running, capture_logs, env, post, sqlite, stripe_event, system_clock, unix_now,
};

fn config(failing: &Downstream, slow: &Downstream, fine: &Downstream) -> String {
    let destination = |name: &str, at: &Downstream, extra: &str| {
        format!(
            "[[destination]]\nname = \"{name}\"\nurl = \"http://{}/events\"\n\
             signing_secret_env = \"APP_SECRET\"\nretry_schedule = [\"50ms\", \"50ms\", \"50ms\", \"50ms\", \"50ms\", \"50ms\"]\n\
             health_window = \"1m\"\nmin_attempts = 3\nfailing_below = 0.5\nslow_after = \"100ms\"\n{extra}\n\
             [[route]]\nsource = \"stripe\"\ndestination = \"{name}\"\n",
            at.addr
        )
    };
    format!(
        "listen = \"127.0.0.1:0\"\npoll_interval = \"20ms\"\nhealth_interval = \"100ms\"\n\
         max_body_bytes = 1024\nadmin_token_env = \"ADMIN_TOKEN\"\n\
         [[source]]\nname = \"stripe\"\nkind = \"stripe\"\nsecrets_env = [\"STRIPE_SECRET\"]\n{}{}{}",
        destination("failing", failing, "breaker_cooldown = \"10m\""),
        destination("slow", slow, ""),
        destination("fine", fine, ""),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failing_and_a_slow_destination_and_rejected_requests_are_shown() {
    capture_logs();
    let (_dir, store) = sqlite(system_clock()).await;
    let failing = Downstream::start(Arc::new(|_| StatusCode::SERVICE_UNAVAILABLE)).await;
    let slow = Downstream::start(Arc::new(|_| {
        std::thread::sleep(Duration::from_millis(300));
        StatusCode::OK
    }))
    .await;
    let fine = Downstream::ok().await;
    let text = config(&failing, &slow, &fine);
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    for i in 0..4 {
        let body = stripe_event(
            &format!("evt_h{i}"),
            "customer.updated",
            "customer",
            &format!("cus_h{i}"),
            1,
        );
        assert_eq!(gw.post_stripe(&body).await.status, 200);
    }
    let forged = stripe_event("evt_forged", "customer.updated", "customer", "cus_x", 1);
    for _ in 0..2 {
        let signature = stripe::sign("whsec_wrong", unix_now(), &forged);
        let answer = post(
            &gw.client,
            &gw.url,
            "stripe",
            &[("stripe-signature", signature)],
            &forged,
        )
        .await;
        assert_eq!(answer.status, 400);
    }
    let large = vec![b' '; 2048];
    let answer = post(
        &gw.client,
        &gw.url,
        "stripe",
        &[("stripe-signature", "t=1,v1=00".to_owned())],
        &large,
    )
    .await;
    assert_eq!(answer.status, 413);
    // The breaker opens on the failing one; the slow one delivers all four.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let listed = gw.gateway.destinations().await.unwrap();
        let stats = gw.gateway.stats().await.unwrap();
        if listed[0].paused && stats.destinations["slow"].delivered == 4 {
            break;
        }
        assert!(Instant::now() < deadline, "{listed:?} {stats:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The monitor writes the refusals every health_interval.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let browser = Browser::start("health-overview").await;
    sign_in(&browser, &gw.url, ADMIN_TOKEN).await;
    browser.expect_title("Overview").await;
    let cell = |name: &str, metric: &str| {
        format!("#health tr[data-health-of=\"{name}\"] td[data-metric=\"{metric}\"]")
    };
    let failing_health = browser.text(&cell("failing", "health")).await;
    assert!(
        failing_health.starts_with("failing (success rate 0% over "),
        "{failing_health}"
    );
    assert_eq!(
        browser.text(&cell("failing", "success_rate")).await,
        "0.0 %"
    );
    let breaker = browser.text(&cell("failing", "breaker")).await;
    assert!(breaker.starts_with("open: paused since "), "{breaker}");
    assert!(breaker.contains("503: "), "the last errors: {breaker}");
    assert!(breaker.contains("next probe in "), "{breaker}");
    let slow_health = browser.text(&cell("slow", "health")).await;
    assert!(
        slow_health.starts_with("degraded (slow: p99 3"),
        "{slow_health}"
    );
    assert_eq!(browser.text(&cell("slow", "success_rate")).await, "100.0 %");
    let p99: u64 = (browser.text(&cell("slow", "p99")).await)
        .trim_end_matches(" ms")
        .parse()
        .unwrap();
    assert!((300..1_000).contains(&p99), "{p99}");
    assert_eq!(browser.text(&cell("fine", "health")).await, "healthy");
    assert_eq!(browser.text(&cell("fine", "breaker")).await, "closed");
    let rejected = |reason: &str| {
        format!("#rejected tr[data-source=\"stripe\"][data-reason=\"{reason}\"] td.total")
    };
    assert_eq!(browser.text(&rejected("bad_signature")).await, "2");
    assert_eq!(browser.text(&rejected("too_large")).await, "1");
    assert_eq!(browser.text(&rejected("malformed")).await, "0");
    // The alerts the breaker raised are listed.
    browser
        .find("#alerts tr[data-condition=\"destination_auto_paused\"][data-state=\"fired\"]")
        .await;
    // A chart: its axis shows the largest count, and the bar of the current minute its value.
    let accepted =
        "section[data-kind=\"source\"][data-name=\"stripe\"] tr[data-metric=\"accepted\"] svg";
    let label = browser
        .find(accepted)
        .await
        .attr("aria-label")
        .await
        .unwrap()
        .unwrap();
    assert!(
        label.contains(": 4 in all, at most 4 in one bar"),
        "{label}"
    );
    let bars = browser
        .client
        .find_all(fantoccini::Locator::Css(&format!("{accepted} g.bucket")))
        .await
        .unwrap();
    assert_eq!(bars.len(), 60, "a bar per minute of the hour");
    // The four were accepted in the last minute or, across a minute's turn, the one before:
    // one bar holds them, every other is empty.
    let mut values = Vec::new();
    for bar in &bars {
        values.push(bar.attr("data-value").await.unwrap().unwrap_or_default());
    }
    let at = values.iter().position(|v| v == "4").expect("a bar of 4");
    assert!(at >= 58, "in one of the last two minutes: {values:?}");
    assert!(
        values.iter().enumerate().all(|(i, v)| i == at || v == "0"),
        "{values:?}"
    );
    let tip = browser
        .text(&format!(
            "{accepted} g.bucket:nth-of-type({}) title",
            at + 1
        ))
        .await;
    assert!(tip.ends_with(": 4") || tip.is_empty(), "{tip}");
    browser.screenshot("").await;
    no_console_errors(&browser).await;
    // The charts, further down.
    browser.open(&format!("{}/console#rejected", gw.url)).await;
    browser.find("#rejected").await;
    browser.screenshot("-charts").await;
    no_console_errors(&browser).await;
    // The day's range: a bar per 20 minutes.
    click_to(
        &browser,
        "nav.ranges a[href=\"/console?range=24h\"]",
        "/console",
    )
    .await;
    browser.find("nav.ranges strong[aria-current]").await;
    assert_eq!(browser.text("nav.ranges strong").await, "24h");
    let bars = browser
        .client
        .find_all(fantoccini::Locator::Css(&format!("{accepted} g.bucket")))
        .await
        .unwrap();
    assert_eq!(bars.len(), 72);
    browser.screenshot("-day").await;
    no_console_errors(&browser).await;
    browser.close().await;
    gw.server.shutdown().await.unwrap();
}
