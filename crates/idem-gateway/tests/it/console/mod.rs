//! The web console (issue 17): over HTTP, every route's refusal without a session, sign-in and
//! its rate limit on the injectable clock, CSRF, the overview against the stored rows and the
//! operations the CLI prints, the dispatchers' health, the events list and an event's page, the
//! dead letters' redrives and the configuration's redaction; in a real browser (headless
//! Chromium through chromedriver), the operator's scenarios.

/// Turns `async fn name<DB: GatewayDb>(store: Store<DB>, clock: ManualClock)` into
/// `name::sqlite`, `name::postgres` and `name::mysql`, each on a fresh database whose clock is a manual clock
/// starting at the real time (so that webhooks signed at the clock's time are within their
/// senders' tolerance).
macro_rules! on_a_manual_clock {
    ($($name:ident),+ $(,)?) => {$(
        mod $name {
            use std::sync::Arc;

            use idem_core::{Clock, ManualClock, SystemClock};

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                crate::support::capture_logs();
                let clock = ManualClock::new(SystemClock.now());
                let (_dir, store) = crate::support::sqlite(Arc::new(clock.clone())).await;
                super::$name(store, clock).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                crate::support::capture_logs();
                let clock = ManualClock::new(SystemClock.now());
                let (_dir, store) = crate::support::postgres(Arc::new(clock.clone())).await;
                super::$name(store, clock).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn mysql() {
                crate::support::capture_logs();
                let clock = ManualClock::new(SystemClock.now());
                let (_dir, store) = crate::support::mysql(Arc::new(clock.clone())).await;
                super::$name(store, clock).await;
            }
        }
    )+};
}

mod browser;
pub(crate) mod client;
mod dead_letters;
mod dispatcher;
mod event_page;
mod events;
mod overview;
mod routes;
mod seq;
mod settings;
mod sign_in;
