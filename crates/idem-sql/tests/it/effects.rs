//! The effect ledger and its worker (docs/design.md C6, C9), with real local HTTP providers (axum on
//! 127.0.0.1:0) that honour `Idempotency-Key` the way Stripe does: the same key returns the first
//! answer and charges nothing more.
//!
//! Every test names its effects uniquely and its worker runs only those (`EffectWorker::effects`),
//! so tests sharing the binary's PostgreSQL database never run each other's effects. Manual clocks
//! stand in 2033 (after every other test's time, including the system clock), so no other test's
//! retention cutoff reaches these rows; the retention test here stands in 1973, before them all.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use idem_core::{Backoff, EffectKey};
use idem_core::{DedupKey, EventId, ManualClock, Name, RetentionPolicy, Timestamp};
use idem_sql::metric_definitions::EFFECTS_TOTAL;
use idem_sql::sqlx::Transaction;
use idem_sql::{
    Applied, CallOutcome, EffectCall, EffectStatus, EffectWorker, Enqueued, Provider, Resolution,
    WorkerReport,
};
use idem_sql::{ErrorKind, Outcome, Runner, Store};
use idem_testkit::{AppDb, all_stores, exec, query_i64};
use tokio::sync::{Barrier, Notify};

use crate::support::{self, StateRow, consumer, stripe_key};

/// 2033-05-18: later than every other test's clock.
const T0: Timestamp = Timestamp(2_000_000_000_000);
const SECOND: Duration = Duration::from_secs(1);
const MINUTE: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);

fn clocked<DB: AppDb>(store: Store<DB>, start: Timestamp) -> (ManualClock, Store<DB>) {
    let clock = ManualClock::new(start);
    let store = store.with_clock(Arc::new(clock.clone()));
    (clock, store)
}

/// An effect name no other test uses.
fn effect_name(prefix: &str) -> Name {
    Name::new("effect", consumer(prefix).as_str()).unwrap()
}

/// A worker for `effect` only, retrying after 1 s, 2 s, 4 s, … (capped at 1 min).
fn worker<DB: AppDb>(
    store: &Store<DB>,
    effect: &Name,
    provider: impl Provider,
) -> EffectWorker<DB> {
    EffectWorker::new(store.clone(), provider)
        .effects([effect.clone()])
        .backoff(Backoff::exponential(SECOND, MINUTE))
}

/// A report with the given counts and zeros elsewhere.
fn report(claimed: u64, set: impl FnOnce(&mut WorkerReport)) -> WorkerReport {
    let mut r = WorkerReport::default();
    r.claimed = claimed;
    set(&mut r);
    r
}

// ---------------------------------------------------------------------------------------------
// A provider over HTTP that honours Idempotency-Key.

#[derive(Default)]
struct ProviderState {
    /// Every request received: (Idempotency-Key, body).
    requests: Vec<(String, Vec<u8>)>,
    /// What was done, in order: (Idempotency-Key, body). One entry per charge or email sent.
    done: Vec<(String, Vec<u8>)>,
    /// Idempotency-Key → the answer given the first time.
    answers: HashMap<String, Vec<u8>>,
    /// Answer 503 (doing nothing) to this many requests first.
    fail_first: u32,
    /// Do the work, then wait `slow` before answering, for this many requests first.
    slow_first: u32,
    /// Answer 402 to every request (a declined card: not retryable).
    decline: bool,
}

struct FakeProvider {
    state: Mutex<ProviderState>,
    slow: Duration,
    url: String,
}

impl FakeProvider {
    /// Starts a provider on 127.0.0.1:0; `setup` sets its failure modes.
    async fn start(slow: Duration, setup: impl FnOnce(&mut ProviderState)) -> Arc<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/effects", listener.local_addr().unwrap());
        let mut state = ProviderState::default();
        setup(&mut state);
        let provider = Arc::new(Self {
            state: Mutex::new(state),
            slow,
            url,
        });
        let app = Router::new()
            .route("/effects", post(handle))
            .with_state(Arc::clone(&provider));
        tokio::spawn(async move { axum::serve(listener, app).await });
        provider
    }

    fn requests(&self) -> Vec<(String, Vec<u8>)> {
        self.state.lock().unwrap().requests.clone()
    }

    fn done(&self) -> Vec<(String, Vec<u8>)> {
        self.state.lock().unwrap().done.clone()
    }

    fn answer(&self, key: &str) -> Option<Vec<u8>> {
        self.state.lock().unwrap().answers.get(key).cloned()
    }
}

async fn handle(
    State(provider): State<Arc<FakeProvider>>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, Vec<u8>) {
    let Some(key) = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
    else {
        return (StatusCode::BAD_REQUEST, b"missing Idempotency-Key".to_vec());
    };
    let (answer, slow) = {
        let mut s = provider.state.lock().unwrap();
        s.requests.push((key.clone(), body.to_vec()));
        if s.fail_first > 0 {
            s.fail_first -= 1;
            return (StatusCode::SERVICE_UNAVAILABLE, b"try again later".to_vec());
        }
        if s.decline {
            return (StatusCode::PAYMENT_REQUIRED, b"card declined".to_vec());
        }
        let answer = match s.answers.get(&key) {
            Some(first) => first.clone(),
            None => {
                let answer = format!("done #{} for {key}", s.done.len() + 1).into_bytes();
                s.done.push((key.clone(), body.to_vec()));
                s.answers.insert(key, answer.clone());
                answer
            }
        };
        let slow = s.slow_first > 0;
        s.slow_first = s.slow_first.saturating_sub(1);
        (answer, slow)
    };
    if slow {
        tokio::time::sleep(provider.slow).await;
    }
    (StatusCode::OK, answer)
}

/// Calls `url` with the effect key as `Idempotency-Key`: 2xx succeeded (the body is the
/// outcome), 429 and 5xx retryable, other statuses not retryable, no connection retryable (the
/// request was not sent), any other transport error unknown (it may have been).
fn http_provider(url: &str) -> impl Provider + use<> {
    let client = idem_testkit::http_client();
    let url = url.to_owned();
    move |call: EffectCall| {
        let (client, url) = (client.clone(), url.clone());
        async move { post_effect(&client, &url, call).await }
    }
}

async fn post_effect(client: &reqwest::Client, url: &str, call: EffectCall) -> CallOutcome {
    let sent = client
        .post(url)
        .header("Idempotency-Key", call.key.as_str())
        .body(call.request)
        .send()
        .await;
    match sent {
        Ok(response) => {
            let status = response.status();
            let body = response.bytes().await.map(|b| b.to_vec());
            match body {
                Ok(body) if status.is_success() => CallOutcome::Succeeded(body),
                Ok(body) => CallOutcome::Failed {
                    retryable: status.as_u16() == 429 || status.is_server_error(),
                    reason: format!("HTTP {status}: {}", String::from_utf8_lossy(&body)),
                },
                Err(e) => CallOutcome::Unknown {
                    reason: format!("reading the answer: {e}"),
                },
            }
        }
        Err(e) if e.is_connect() => CallOutcome::Failed {
            retryable: true,
            reason: format!("cannot connect: {e}"),
        },
        Err(e) => CallOutcome::Unknown {
            reason: e.to_string(),
        },
    }
}

// ---------------------------------------------------------------------------------------------
// The application's balances (scenario c).

static SCHEMA: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn balance_table<DB: AppDb>(store: &Store<DB>) {
    let _guard = SCHEMA.lock().await;
    exec(
        store,
        "CREATE TABLE IF NOT EXISTS app_balances (\
         consumer VARCHAR(255) NOT NULL, account VARCHAR(255) NOT NULL, balance BIGINT NOT NULL, \
         recharges BIGINT NOT NULL, PRIMARY KEY (consumer, account))",
        vec![],
    )
    .await;
}

/// (balance, recharges applied) of an account.
async fn balance<DB: AppDb>(store: &Store<DB>, consumer: &Name, account: &str) -> (i64, i64) {
    let b = query_i64(
        store,
        "SELECT balance FROM app_balances WHERE consumer = $1 AND account = $2",
        vec![consumer.as_str().into(), account.into()],
    )
    .await;
    let r = query_i64(
        store,
        "SELECT recharges FROM app_balances WHERE consumer = $1 AND account = $2",
        vec![consumer.as_str().into(), account.into()],
    )
    .await;
    (b[0], r[0])
}

// ---------------------------------------------------------------------------------------------
// a) An email effect recorded with the upgrade: acknowledged once, retried until sent.

/// A handler records `plan = pro` and a welcome email for `evt_C`; the mail server fails its
/// first 3 calls. The delivery is applied once and acknowledged; 3 redeliveries are duplicates;
/// the worker retries until the email is sent: one email, one upgrade, the same key each time.
async fn email_is_retried_until_sent_and_the_upgrade_applied_once<DB: AppDb>(store: Store<DB>) {
    support::app_tables(&store).await;
    let (clock, store) = clocked(store, T0);
    let mail = FakeProvider::start(Duration::ZERO, |s| s.fail_first = 3).await;
    let billing = consumer("billing_v2");
    let send_welcome = effect_name("send_welcome");
    let runner = Runner::new(store.clone(), &billing);
    let event = idem_sql::Event::new(stripe_key("evt_C"));
    let key = EffectKey::derive(&billing, &event.key, &send_welcome);
    let request = b"to=ada@example.com; template=welcome_pro".to_vec();

    let deliver = || {
        let (runner, event, billing, effect, key, request) = (
            runner.clone(),
            event.clone(),
            billing.clone(),
            send_welcome.clone(),
            key.clone(),
            request.clone(),
        );
        let ledger = store.effects();
        async move {
            runner
                .run_boxed(&event, move |tx| {
                    let (billing, effect, key, request, ledger) = (
                        billing.clone(),
                        effect.clone(),
                        key.clone(),
                        request.clone(),
                        ledger.clone(),
                    );
                    Box::pin(async move {
                        let plan = StateRow {
                            consumer: billing.to_string(),
                            object_id: "cus_1".into(),
                            status: "pro".into(),
                            event_type: "customer.subscription.updated".into(),
                            event_id: "evt_C".into(),
                            created: 1_623_979_266,
                        };
                        plan.write::<DB>(&mut **tx).await?;
                        support::write_effect::<DB>(
                            &mut **tx,
                            billing.as_str(),
                            "evt_C",
                            "upgrade",
                        )
                        .await?;
                        ledger.enqueue(tx, &effect, &key, &request).await
                    })
                })
                .await
                .unwrap()
        }
    };

    assert_eq!(deliver().await, Outcome::Applied(Enqueued::Created));
    let worker = worker(&store, &send_welcome, http_provider(&mail.url));
    for round in 1..=3 {
        assert_eq!(
            deliver().await,
            Outcome::Duplicate,
            "redelivery {round} of evt_C"
        );
        assert_eq!(
            worker.run_once().await.unwrap(),
            report(1, |r| r.failed = 1),
            "round {round}: the mail server answers 503"
        );
        let stored = store.effects().get(&key).await.unwrap().unwrap();
        assert_eq!(stored.status, EffectStatus::Pending);
        assert_eq!(stored.attempts, round);
        // Backoff 1 s, 2 s, 4 s after attempts 1, 2, 3.
        assert_eq!(
            stored.next_attempt_at,
            now(&clock).saturating_add(SECOND * 2u32.pow(round - 1))
        );
        assert_eq!(
            worker.run_once().await.unwrap(),
            WorkerReport::default(),
            "not due before the backoff"
        );
        clock.advance(SECOND * 2u32.pow(round - 1));
    }
    assert_eq!(
        worker.run_once().await.unwrap(),
        report(1, |r| r.succeeded = 1)
    );
    assert_eq!(deliver().await, Outcome::Duplicate);
    assert_eq!(worker.run_once().await.unwrap(), WorkerReport::default());

    let sent = mail.done();
    assert_eq!(
        sent,
        [(key.to_string(), request.clone())],
        "exactly one email"
    );
    let requests = mail.requests();
    assert_eq!(requests.len(), 4, "3 failures and the success");
    assert!(
        requests.iter().all(|(k, _)| k == key.as_str()),
        "every attempt sends the same Idempotency-Key"
    );
    assert_eq!(
        support::effects(&store, &billing, "evt_C").await,
        1,
        "one upgrade"
    );
    assert_eq!(
        support::state_status(&store, &billing, "cus_1").await,
        Some("pro".into())
    );
    let stored = store.effects().get(&key).await.unwrap().unwrap();
    assert_eq!(stored.status, EffectStatus::Succeeded);
    assert_eq!(stored.outcome, mail.answer(key.as_str()));
    assert_eq!(stored.attempts, 4);
}

fn now(clock: &ManualClock) -> Timestamp {
    idem_core::Clock::now(clock)
}

// ---------------------------------------------------------------------------------------------
// b) Two code paths, one intent key, one charge.

/// The checkout path and the webhook path both charge order 50266 at the same moment, each in
/// its own transaction, through the intent key `charge:order:50266`; four workers run at once.
/// The provider records exactly one charge, and both paths then see the same outcome.
async fn two_paths_one_intent_key_one_charge<DB: AppDb>(store: Store<DB>) {
    let (_clock, store) = clocked(store, T0);
    let psp = FakeProvider::start(Duration::ZERO, |_| {}).await;
    let charge = effect_name("charge");
    // A key per test run, so the SQLite and PostgreSQL runs (one database for the binary on
    // PostgreSQL) do not share it; the text is the scenario's key with a suffix.
    let key = EffectKey::intent(&format!("charge:order:50266:{charge}")).unwrap();
    let request = br#"{"order":"50266","amount":4200,"currency":"eur"}"#.to_vec();

    let barrier = Arc::new(Barrier::new(2));
    let mut paths = Vec::new();
    for path in ["checkout", "webhook"] {
        let (store, charge, key, request, barrier) = (
            store.clone(),
            charge.clone(),
            key.clone(),
            request.clone(),
            Arc::clone(&barrier),
        );
        paths.push(tokio::spawn(async move {
            barrier.wait().await;
            let mut tx = store.begin().await.unwrap();
            let enqueued = store
                .effects()
                .enqueue(&mut tx, &charge, &key, &request)
                .await
                .unwrap();
            tx.commit().await.unwrap();
            (path, enqueued)
        }));
    }
    let mut created = 0;
    for path in paths {
        let (path, enqueued) = path.await.unwrap();
        match enqueued {
            Enqueued::Created => created += 1,
            Enqueued::Pending {
                status: EffectStatus::Pending,
            } => {}
            other => panic!("{path}: {other:?}"),
        }
    }
    assert_eq!(created, 1, "one intent");

    let workers: Vec<_> = (0..4)
        .map(|_| {
            let w = worker(&store, &charge, http_provider(&psp.url));
            tokio::spawn(async move { w.run_once().await.unwrap() })
        })
        .collect();
    let mut succeeded = 0;
    for w in workers {
        succeeded += w.await.unwrap().succeeded;
    }
    assert_eq!(succeeded, 1);
    assert_eq!(
        psp.done(),
        [(key.to_string(), request.clone())],
        "one charge"
    );
    assert_eq!(psp.requests().len(), 1);

    let first = psp.answer(key.as_str()).unwrap();
    for path in ["checkout", "webhook"] {
        let mut tx = store.begin().await.unwrap();
        let seen = store
            .effects()
            .enqueue(&mut tx, &charge, &key, &request)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        assert_eq!(
            seen,
            Enqueued::Completed {
                outcome: first.clone()
            },
            "{path}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// c) Auto-recharge: the intent is written before the call.

/// Each usage event costs this much.
const USAGE: i64 = 10;
/// The auto-recharge amount.
const RECHARGE: i64 = 500;

/// Account A1 at balance 0 with auto-recharge 500: a usage event that leaves the balance below 0
/// enqueues the recharge intent `recharge:{account}:{n}` (n = recharges applied + 1) in its own
/// transaction. u1…u7 arrive 1 s apart; after each, the worker runs. The provider charges on the
/// first call but the local balance write (apply hook) fails once, so the effect is unknown and
/// retried 2 s later with the same key: the provider returns the first charge. u2 and u3 see the
/// intent pending (unknown) and write none; u4…u7 find the balance recharged. Exactly one 500
/// charge; final balance 500 − 7 × 10 = 430.
///
/// Then account A2: the ledger cannot be written (the usage transaction fails after the enqueue
/// and rolls back): zero charges.
async fn recharge_intent_is_written_before_the_call<DB: AppDb>(store: Store<DB>) {
    balance_table(&store).await;
    let (clock, store) = clocked(store, T0);
    let psp = FakeProvider::start(Duration::ZERO, |_| {}).await;
    let billing = consumer("usage_v1");
    let recharge = effect_name("recharge");
    for account in ["A1", "A2"] {
        exec(
            &store,
            "INSERT INTO app_balances (consumer, account, balance, recharges) VALUES ($1, $2, 0, 0)",
            vec![billing.as_str().into(), account.into()],
        )
        .await;
    }
    let runner = Runner::new(store.clone(), &billing);
    // A key per run of this test (see two_paths_one_intent_key_one_charge).
    let intent = {
        let suffix = recharge.to_string();
        move |account: &str, n: i64| {
            EffectKey::intent(&format!("recharge:{account}:{n}:{suffix}")).unwrap()
        }
    };

    let fail_apply = Arc::new(AtomicBool::new(true));
    let applied = Arc::new(AtomicU32::new(0));
    let worker = {
        let (billing, fail_apply, applied) = (
            billing.clone(),
            Arc::clone(&fail_apply),
            Arc::clone(&applied),
        );
        worker(&store, &recharge, http_provider(&psp.url))
            .backoff(Backoff::exponential(2 * SECOND, MINUTE))
            .apply(move |tx: &mut Transaction<'static, DB>, done: &Applied| {
                let (billing, fail_apply, applied) = (
                    billing.clone(),
                    Arc::clone(&fail_apply),
                    Arc::clone(&applied),
                );
                let account = String::from_utf8(done.request.clone()).unwrap();
                let account = account.split(':').next().unwrap().to_owned();
                Box::pin(async move {
                    DB::execute(
                        &mut **tx,
                        "UPDATE app_balances SET balance = balance + $3, recharges = recharges + 1 \
                         WHERE consumer = $1 AND account = $2",
                        vec![billing.as_str().into(), account.into(), RECHARGE.into()],
                    )
                    .await?;
                    if fail_apply.swap(false, Ordering::SeqCst) {
                        return Err(idem_sql::Error::handler("balance write failed"));
                    }
                    applied.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                })
            })
    };

    // One usage event: debit, and enqueue the recharge intent if the balance is below 0.
    let usage = |account: &'static str, event_id: String, fail_after_enqueue: bool| {
        let (runner, billing, recharge) = (runner.clone(), billing.clone(), recharge.clone());
        let ledger = store.effects();
        let intent = intent.clone();
        async move {
            let event = idem_sql::Event::new(DedupKey::from_event(
                &Name::new("source", "meter").unwrap(),
                &EventId::new(event_id).unwrap(),
            ));
            runner
                .run_boxed(&event, move |tx| {
                    let (billing, recharge, ledger, intent) = (
                        billing.clone(),
                        recharge.clone(),
                        ledger.clone(),
                        intent.clone(),
                    );
                    Box::pin(async move {
                        DB::execute(
                            &mut **tx,
                            "UPDATE app_balances SET balance = balance - $3 \
                             WHERE consumer = $1 AND account = $2",
                            vec![billing.as_str().into(), account.into(), USAGE.into()],
                        )
                        .await?;
                        let balance = DB::fetch_i64(
                            &mut **tx,
                            "SELECT balance FROM app_balances WHERE consumer = $1 AND account = $2",
                            vec![billing.as_str().into(), account.into()],
                        )
                        .await?[0];
                        let recharges = DB::fetch_i64(
                            &mut **tx,
                            "SELECT recharges FROM app_balances WHERE consumer = $1 AND account = $2",
                            vec![billing.as_str().into(), account.into()],
                        )
                        .await?[0];
                        let seen = if balance < 0 {
                            let key = intent(account, recharges + 1);
                            let request = format!("{account}:{RECHARGE}").into_bytes();
                            Some(ledger.enqueue(tx, &recharge, &key, &request).await?)
                        } else {
                            None
                        };
                        if fail_after_enqueue {
                            return Err(idem_sql::Error::handler("the usage transaction failed"));
                        }
                        Ok(seen)
                    })
                })
                .await
        }
    };

    let mut seen = Vec::new();
    for i in 1..=7 {
        let outcome = usage("A1", format!("u{i}"), false).await.unwrap();
        let Outcome::Applied(enqueued) = outcome else {
            panic!("u{i}: {outcome:?}");
        };
        seen.push(enqueued);
        worker.run_once().await.unwrap();
        clock.advance(SECOND);
    }
    assert_eq!(
        seen,
        [
            Some(Enqueued::Created),
            Some(Enqueued::Pending {
                status: EffectStatus::Unknown
            }),
            Some(Enqueued::Pending {
                status: EffectStatus::Unknown
            }),
            None,
            None,
            None,
            None,
        ],
        "u1 writes the intent; u2, u3 see it pending; u4…u7 see the balance recharged"
    );
    let key = intent("A1", 1);
    assert_eq!(
        psp.done(),
        [(key.to_string(), format!("A1:{RECHARGE}").into_bytes())],
        "exactly one 500 charge"
    );
    assert_eq!(
        psp.requests().len(),
        2,
        "the charge, and its retry with the same key"
    );
    assert!(psp.requests().iter().all(|(k, _)| k == key.as_str()));
    assert_eq!(
        balance(&store, &billing, "A1").await,
        (RECHARGE - 7 * USAGE, 1),
        "500 − 70, one recharge applied"
    );
    assert_eq!(applied.load(Ordering::SeqCst), 1);
    let stored = store.effects().get(&key).await.unwrap().unwrap();
    assert_eq!(stored.status, EffectStatus::Succeeded);
    assert_eq!(stored.attempts, 2);
    assert_eq!(stored.outcome, psp.answer(key.as_str()));
    assert!(
        store
            .effects()
            .get(&intent("A1", 2))
            .await
            .unwrap()
            .is_none(),
        "no second intent"
    );

    // A2: the transaction that would write the intent fails; nothing is charged.
    let err = usage("A2", "u_a2".into(), true).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Handler);
    assert_eq!(worker.run_once().await.unwrap(), WorkerReport::default());
    assert!(
        store
            .effects()
            .get(&intent("A2", 1))
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(psp.done().len(), 1, "zero charges for A2");
    assert_eq!(balance(&store, &billing, "A2").await, (0, 0));
}

// ---------------------------------------------------------------------------------------------
// d) Unknown results: the same key within the key retention, parked after it.

/// The provider charges, then answers after 2 s; the worker's timeout is 300 ms: unknown. The
/// retry 1 s later sends the same key and gets the first charge: one charge, succeeded.
async fn timeout_is_unknown_and_retried_with_the_same_key<DB: AppDb>(store: Store<DB>) {
    let (clock, store) = clocked(store, T0);
    let psp = FakeProvider::start(2 * SECOND, |s| s.slow_first = 1).await;
    let charge = effect_name("charge_timeout");
    let key = EffectKey::intent(&format!("charge:order:7:{charge}")).unwrap();
    let mut tx = store.begin().await.unwrap();
    let _ = store
        .effects()
        .enqueue(&mut tx, &charge, &key, b"amount=700")
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let worker =
        worker(&store, &charge, http_provider(&psp.url)).call_timeout(Duration::from_millis(300));

    assert_eq!(
        worker.run_once().await.unwrap(),
        report(1, |r| r.unknown = 1)
    );
    let stored = store.effects().get(&key).await.unwrap().unwrap();
    assert_eq!(stored.status, EffectStatus::Unknown);
    assert_eq!(stored.first_attempt_at, Some(T0));
    assert!(
        stored
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("300 ms")),
        "{stored:?}"
    );
    let mut tx = store.begin().await.unwrap();
    assert_eq!(
        store
            .effects()
            .enqueue(&mut tx, &charge, &key, b"amount=700")
            .await
            .unwrap(),
        Enqueued::Pending {
            status: EffectStatus::Unknown
        }
    );
    drop(tx);

    clock.advance(SECOND);
    assert_eq!(
        worker.run_once().await.unwrap(),
        report(1, |r| r.succeeded = 1)
    );
    assert_eq!(psp.done().len(), 1, "one charge");
    let requests = psp.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests.iter().all(|(k, _)| k == key.as_str()));
    let stored = store.effects().get(&key).await.unwrap().unwrap();
    assert_eq!(stored.status, EffectStatus::Succeeded);
    assert_eq!(stored.outcome, psp.answer(key.as_str()));
}

/// With a key retention of 10 min, an effect whose calls keep timing out is retried with its key
/// until 10 min after its first attempt, then parked without another call. `resolve` moves
/// parked effects on: `Succeeded` stores the operator's outcome (enqueue returns it), `Retry`
/// runs it again; resolving an effect that is not parked or dead, or an unknown key, is refused.
async fn unknown_past_key_retention_is_parked_and_resolved<DB: AppDb>(store: Store<DB>) {
    let (clock, store) = clocked(store, T0);
    let psp = FakeProvider::start(2 * SECOND, |s| s.slow_first = u32::MAX).await;
    let charge = effect_name("charge_parked");
    let ledger = store.effects();
    let keys: Vec<EffectKey> = (1..=2)
        .map(|i| EffectKey::intent(&format!("charge:order:{i}:{charge}")).unwrap())
        .collect();
    let mut tx = store.begin().await.unwrap();
    for key in &keys {
        let _ = ledger
            .enqueue(&mut tx, &charge, key, b"amount=100")
            .await
            .unwrap();
    }
    tx.commit().await.unwrap();
    let worker = worker(&store, &charge, http_provider(&psp.url))
        .call_timeout(Duration::from_millis(200))
        .backoff(Backoff::exponential(MINUTE, MINUTE))
        .key_retention(10 * MINUTE);

    assert_eq!(
        worker.run_once().await.unwrap(),
        report(2, |r| r.unknown = 2)
    );
    clock.advance(8 * MINUTE);
    assert_eq!(
        worker.run_once().await.unwrap(),
        report(2, |r| r.unknown = 2),
        "8 min after the first attempt: retried with the same key"
    );
    assert_eq!(psp.requests().len(), 4);
    clock.advance(2 * MINUTE);
    assert_eq!(
        worker.run_once().await.unwrap(),
        report(0, |r| r.parked = 2),
        "10 min after the first attempt: parked, not called"
    );
    assert_eq!(psp.requests().len(), 4);
    assert!(
        psp.requests()
            .iter()
            .all(|(k, _)| keys.iter().any(|key| key.as_str() == k))
    );
    let parked: Vec<EffectKey> = ledger
        .list(EffectStatus::Parked, 100)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.effect == charge)
        .map(|r| r.key)
        .collect();
    assert_eq!(parked, keys);
    clock.advance(HOUR);
    assert_eq!(worker.run_once().await.unwrap(), WorkerReport::default());

    // Reconciled: the first did happen (the provider's records show it).
    let resolved = ledger
        .resolve(
            &keys[0],
            Resolution::Succeeded(b"ch_from_dashboard".to_vec()),
        )
        .await
        .unwrap();
    assert_eq!(resolved.status, EffectStatus::Succeeded);
    let mut tx = store.begin().await.unwrap();
    assert_eq!(
        ledger
            .enqueue(&mut tx, &charge, &keys[0], b"amount=100")
            .await
            .unwrap(),
        Enqueued::Completed {
            outcome: b"ch_from_dashboard".to_vec()
        }
    );
    drop(tx);
    let again = ledger
        .resolve(&keys[0], Resolution::Retry)
        .await
        .unwrap_err();
    assert!(
        matches!(
            &again,
            idem_sql::Error::EffectNotResolvable {
                status: EffectStatus::Succeeded,
                ..
            }
        ),
        "{again}"
    );
    assert_eq!(again.kind(), ErrorKind::InvalidInput);
    let missing = EffectKey::intent(&format!("charge:order:404:{charge}")).unwrap();
    assert!(matches!(
        ledger.resolve(&missing, Resolution::Retry).await,
        Err(idem_sql::Error::EffectNotFound { .. })
    ));

    // The second did not: run it again (the provider answers in time now).
    psp.state.lock().unwrap().slow_first = 0;
    let retried = ledger.resolve(&keys[1], Resolution::Retry).await.unwrap();
    assert_eq!(
        (retried.status, retried.attempts, retried.first_attempt_at),
        (EffectStatus::Pending, 0, None)
    );
    assert_eq!(
        worker.run_once().await.unwrap(),
        report(1, |r| r.succeeded = 1)
    );
    let stored = ledger.get(&keys[1]).await.unwrap().unwrap();
    assert_eq!(
        (stored.status, stored.attempts),
        (EffectStatus::Succeeded, 1)
    );
}

// ---------------------------------------------------------------------------------------------
// e) One key, one request.

/// The same key with another request, or another effect name, is `EffectConflict` (nothing
/// written, the transaction still usable); the same request is answered from the ledger.
async fn same_key_different_request_is_a_conflict<DB: AppDb>(store: Store<DB>) {
    let charge = effect_name("charge_conflict");
    let refund = effect_name("refund_conflict");
    let key = EffectKey::intent(&format!("charge:order:50266:{charge}")).unwrap();
    let ledger = store.effects();
    let mut tx = store.begin().await.unwrap();
    assert_eq!(
        ledger
            .enqueue(&mut tx, &charge, &key, b"amount=4200")
            .await
            .unwrap(),
        Enqueued::Created
    );
    tx.commit().await.unwrap();

    let mut tx = store.begin().await.unwrap();
    let err = ledger
        .enqueue(&mut tx, &charge, &key, b"amount=9900")
        .await
        .unwrap_err();
    assert!(
        matches!(&err, idem_sql::Error::EffectConflict { key: k, what: "request" } if *k == key),
        "{err:?}"
    );
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(!err.is_retryable());
    let text = err.to_string();
    assert!(
        text.contains(key.as_str()) && text.contains("different request"),
        "{text}"
    );
    let err = ledger
        .enqueue(&mut tx, &refund, &key, b"amount=4200")
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        idem_sql::Error::EffectConflict {
            what: "effect name",
            ..
        }
    ));
    assert_eq!(
        ledger
            .enqueue(&mut tx, &charge, &key, b"amount=4200")
            .await
            .unwrap(),
        Enqueued::Pending {
            status: EffectStatus::Pending
        },
        "the transaction is still usable"
    );
    tx.commit().await.unwrap();
    let stored = ledger.get(&key).await.unwrap().unwrap();
    assert_eq!(stored.request, b"amount=4200");
    assert_eq!(stored.effect, charge);
}

// ---------------------------------------------------------------------------------------------
// f) Failures: dead after N, dead at once when not retryable; retention keeps the unfinished.

/// A provider that always answers 503, with at most 3 attempts: failed, failed, dead. One that
/// declines (402, not retryable): dead at once. Both are listed as dead; an operator resolves
/// one as failed, and enqueueing it again reports the failure.
async fn retryable_failures_end_dead<DB: AppDb>(store: Store<DB>) {
    support::install_metrics();
    let (clock, store) = clocked(store, T0);
    let down = FakeProvider::start(Duration::ZERO, |s| s.fail_first = u32::MAX).await;
    let declines = FakeProvider::start(Duration::ZERO, |s| s.decline = true).await;
    let email = effect_name("email_dead");
    let charge = effect_name("charge_declined");
    let ledger = store.effects();
    let email_key = EffectKey::intent(&format!("email:{email}")).unwrap();
    let charge_key = EffectKey::intent(&format!("charge:{charge}")).unwrap();
    let mut tx = store.begin().await.unwrap();
    let _ = ledger
        .enqueue(&mut tx, &email, &email_key, b"hello")
        .await
        .unwrap();
    let _ = ledger
        .enqueue(&mut tx, &charge, &charge_key, b"amount=1")
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let email_worker = worker(&store, &email, http_provider(&down.url)).max_attempts(3);
    let charge_worker = worker(&store, &charge, http_provider(&declines.url)).max_attempts(3);

    assert_eq!(
        charge_worker.run_once().await.unwrap(),
        report(1, |r| r.dead = 1),
        "402 is not retryable"
    );
    for (attempt, expected) in [
        (1, report(1, |r| r.failed = 1)),
        (2, report(1, |r| r.failed = 1)),
        (3, report(1, |r| r.dead = 1)),
    ] {
        assert_eq!(
            email_worker.run_once().await.unwrap(),
            expected,
            "attempt {attempt}"
        );
        clock.advance(MINUTE);
    }
    assert_eq!(
        email_worker.run_once().await.unwrap(),
        WorkerReport::default()
    );
    assert_eq!(down.requests().len(), 3);
    assert_eq!(declines.requests().len(), 1);
    assert!(down.done().is_empty() && declines.done().is_empty());
    assert_eq!(
        support::counter(
            EFFECTS_TOTAL,
            &[("effect", email.as_str()), ("outcome", "failed")]
        ),
        2
    );
    assert_eq!(
        support::counter(
            EFFECTS_TOTAL,
            &[("effect", email.as_str()), ("outcome", "dead")]
        ),
        1
    );

    let email_row = ledger.get(&email_key).await.unwrap().unwrap();
    assert_eq!(
        (email_row.status, email_row.attempts),
        (EffectStatus::Dead, 3)
    );
    assert!(
        email_row
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("503") && e.contains("attempt 3 of 3")),
        "{email_row:?}"
    );
    let charge_row = ledger.get(&charge_key).await.unwrap().unwrap();
    assert_eq!(
        (charge_row.status, charge_row.attempts),
        (EffectStatus::Dead, 1)
    );
    assert!(
        charge_row
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("402"))
    );
    let dead: Vec<EffectKey> = ledger
        .list(EffectStatus::Dead, 1000)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.effect == email || r.effect == charge)
        .map(|r| r.key)
        .collect();
    assert_eq!(
        dead,
        [charge_key.clone(), email_key.clone()],
        "least recently changed first"
    );

    ledger
        .resolve(
            &charge_key,
            Resolution::Failed("card declined; customer told".into()),
        )
        .await
        .unwrap();
    let mut tx = store.begin().await.unwrap();
    assert_eq!(
        ledger
            .enqueue(&mut tx, &charge, &charge_key, b"amount=1")
            .await
            .unwrap(),
        Enqueued::Failed {
            reason: "card declined; customer told".into()
        }
    );
    assert_eq!(
        ledger
            .enqueue(&mut tx, &email, &email_key, b"hello")
            .await
            .unwrap(),
        Enqueued::Pending {
            status: EffectStatus::Dead
        }
    );
}

/// Retention (C9) deletes finished effects (succeeded, resolved failed) older than the cutoff
/// and keeps every pending, unknown, parked and dead one, however old.
async fn retention_deletes_only_finished_effects<DB: AppDb>(store: Store<DB>) {
    // 1973: after the core retention test's rows (1970), before every other test's.
    let (clock, store) = clocked(store, Timestamp(100_000_000_000));
    let psp = FakeProvider::start(2 * SECOND, |s| s.slow_first = 1).await;
    let ok = effect_name("gc_ok");
    let slow = effect_name("gc_slow");
    let down = effect_name("gc_dead");
    let ledger = store.effects();
    let key = |name: &Name, i: u32| EffectKey::intent(&format!("{name}:{i}")).unwrap();
    let mut tx = store.begin().await.unwrap();
    for i in 0..3 {
        let _ = ledger
            .enqueue(&mut tx, &ok, &key(&ok, i), b"r")
            .await
            .unwrap();
    }
    let _ = ledger
        .enqueue(&mut tx, &slow, &key(&slow, 0), b"r")
        .await
        .unwrap();
    for i in 0..2 {
        let _ = ledger
            .enqueue(&mut tx, &down, &key(&down, i), b"r")
            .await
            .unwrap();
    }
    tx.commit().await.unwrap();
    let pending = effect_name("gc_pending");
    let mut tx = store.begin().await.unwrap();
    let _ = ledger
        .enqueue(&mut tx, &pending, &key(&pending, 0), b"r")
        .await
        .unwrap();
    tx.commit().await.unwrap();

    // The slow one first: its call times out (unknown), the provider still charges.
    let slow_worker = worker(&store, &slow, http_provider(&psp.url))
        .call_timeout(Duration::from_millis(200))
        .key_retention(HOUR);
    assert_eq!(
        slow_worker.run_once().await.unwrap(),
        report(1, |r| r.unknown = 1)
    );
    let ok_worker = worker(&store, &ok, http_provider(&psp.url));
    assert_eq!(
        ok_worker.run_once().await.unwrap(),
        report(3, |r| r.succeeded = 3)
    );
    let declines = FakeProvider::start(Duration::ZERO, |s| s.decline = true).await;
    let dead_worker = worker(&store, &down, http_provider(&declines.url));
    assert_eq!(
        dead_worker.run_once().await.unwrap(),
        report(2, |r| r.dead = 2)
    );
    ledger
        .resolve(
            &key(&down, 0),
            Resolution::Failed("refunded by hand".into()),
        )
        .await
        .unwrap();
    // One more unknown, to be parked below.
    let parked = effect_name("gc_parked");
    let mut tx = store.begin().await.unwrap();
    let _ = ledger
        .enqueue(&mut tx, &parked, &key(&parked, 0), b"r")
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let hang = FakeProvider::start(2 * SECOND, |s| s.slow_first = 1).await;
    let parked_worker = worker(&store, &parked, http_provider(&hang.url))
        .call_timeout(Duration::from_millis(200))
        .key_retention(MINUTE);
    assert_eq!(
        parked_worker.run_once().await.unwrap(),
        report(1, |r| r.unknown = 1)
    );
    clock.advance(2 * MINUTE);
    assert_eq!(
        parked_worker.run_once().await.unwrap(),
        report(0, |r| r.parked = 1)
    );

    // Keep 3 days, collect 4 days later; the unknown one is not due (its backoff is 1 s, but
    // no worker runs), so it stays unknown.
    clock.advance(4 * 24 * HOUR);
    let policy = RetentionPolicy::new(3 * 24 * HOUR, idem_core::horizon::STRIPE).unwrap();
    let report = store
        .gc(&policy, NonZeroU32::new(2).unwrap())
        .await
        .unwrap();
    assert_eq!(report.effects, 4, "3 succeeded and 1 resolved failed");
    let status = |k: EffectKey| {
        let ledger = ledger.clone();
        async move { ledger.get(&k).await.unwrap().map(|r| r.status) }
    };
    for i in 0..3 {
        assert_eq!(status(key(&ok, i)).await, None);
    }
    assert_eq!(status(key(&down, 0)).await, None);
    assert_eq!(status(key(&down, 1)).await, Some(EffectStatus::Dead));
    assert_eq!(status(key(&slow, 0)).await, Some(EffectStatus::Unknown));
    assert_eq!(status(key(&parked, 0)).await, Some(EffectStatus::Parked));
    assert_eq!(status(key(&pending, 0)).await, Some(EffectStatus::Pending));
}

// ---------------------------------------------------------------------------------------------
// g) Fencing.

/// Worker A claims an effect (token 1) and stalls inside its call; its lease (the call timeout of
/// 60 s plus the 30 s margin) lapses; worker B claims it (token 2), charges and stores the outcome; then A wakes and
/// tries to store its own result: fenced, nothing overwritten, its apply hook never committed.
async fn stalled_worker_cannot_overwrite_its_successor<DB: AppDb>(store: Store<DB>) {
    support::install_metrics();
    let (clock, store) = clocked(store, T0);
    let psp = FakeProvider::start(Duration::ZERO, |_| {}).await;
    let charge = effect_name("charge_fenced");
    let key = EffectKey::intent(&format!("charge:order:9:{charge}")).unwrap();
    let ledger = store.effects();
    let mut tx = store.begin().await.unwrap();
    let _ = ledger
        .enqueue(&mut tx, &charge, &key, b"amount=900")
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let applied = Arc::new(Mutex::new(Vec::<Vec<u8>>::new()));
    let stalled = Arc::new(Notify::new());
    let a_provider = {
        let (stalled, url) = (Arc::clone(&stalled), psp.url.clone());
        let client = idem_testkit::http_client();
        move |call: EffectCall| {
            let (stalled, url, client) = (Arc::clone(&stalled), url.clone(), client.clone());
            async move {
                stalled.notified().await;
                match post_effect(&client, &url, call).await {
                    // A's answer differs from B's so an overwrite would show.
                    CallOutcome::Succeeded(_) => {
                        CallOutcome::Succeeded(b"A's late answer".to_vec())
                    }
                    other => other,
                }
            }
        }
    };
    let a = worker(&store, &charge, a_provider)
        .call_timeout(MINUTE)
        .apply(recording_hook::<DB>(Arc::clone(&applied)));
    let b = worker(&store, &charge, http_provider(&psp.url))
        .call_timeout(MINUTE)
        .apply(recording_hook::<DB>(Arc::clone(&applied)));

    let a_run = tokio::spawn(async move { a.run_once().await.unwrap() });
    loop {
        let row = ledger.get(&key).await.unwrap().unwrap();
        if row.status == EffectStatus::Running {
            assert_eq!(row.lease_token, idem_core::FencingToken(1));
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    clock.advance(89 * SECOND);
    assert_eq!(
        b.run_once().await.unwrap(),
        WorkerReport::default(),
        "A's lease is live"
    );
    clock.advance(SECOND);
    assert_eq!(b.run_once().await.unwrap(), report(1, |r| r.succeeded = 1));
    let b_row = ledger.get(&key).await.unwrap().unwrap();
    assert_eq!(b_row.lease_token, idem_core::FencingToken(2));
    assert_eq!(b_row.outcome, psp.answer(key.as_str()));

    let fenced0 = support::counter(
        EFFECTS_TOTAL,
        &[("effect", charge.as_str()), ("outcome", "fenced")],
    );
    stalled.notify_one();
    assert_eq!(a_run.await.unwrap(), report(1, |r| r.fenced = 1));
    assert_eq!(
        support::counter(
            EFFECTS_TOTAL,
            &[("effect", charge.as_str()), ("outcome", "fenced")]
        ) - fenced0,
        1
    );
    assert_eq!(
        ledger.get(&key).await.unwrap().unwrap(),
        b_row,
        "B's result stands"
    );
    assert_eq!(
        *applied.lock().unwrap(),
        [psp.answer(key.as_str()).unwrap()]
    );
    assert_eq!(
        psp.done().len(),
        1,
        "one charge: A's call used the same key"
    );
    assert_eq!(psp.requests().len(), 2);
}

/// An apply hook that records each outcome it applies.
fn recording_hook<DB: AppDb>(
    applied: Arc<Mutex<Vec<Vec<u8>>>>,
) -> impl for<'t> Fn(
    &'t mut Transaction<'static, DB>,
    &'t Applied,
) -> idem_sql::BoxFuture<'t, Result<(), idem_sql::Error>>
+ Send
+ Sync
+ 'static {
    move |_tx, done| {
        let (applied, outcome) = (Arc::clone(&applied), done.outcome.clone());
        Box::pin(async move {
            applied.lock().unwrap().push(outcome);
            Ok(())
        })
    }
}

// ---------------------------------------------------------------------------------------------
// h) Many workers, many effects.

/// 200 effects, 8 workers running rounds at once until none is left; the provider never fails:
/// every key is called exactly once (no two workers ran one effect), all succeeded.
async fn concurrent_workers_call_each_effect_once<DB: AppDb>(store: Store<DB>) {
    const EFFECTS: usize = 200;
    const WORKERS: usize = 8;
    let (_clock, store) = clocked(store, T0);
    let psp = FakeProvider::start(Duration::ZERO, |_| {}).await;
    let email = effect_name("email_many");
    let ledger = store.effects();
    let keys: Vec<EffectKey> = (0..EFFECTS)
        .map(|i| EffectKey::intent(&format!("{email}:{i}")).unwrap())
        .collect();
    let mut tx = store.begin().await.unwrap();
    for key in &keys {
        let _ = ledger.enqueue(&mut tx, &email, key, b"hi").await.unwrap();
    }
    tx.commit().await.unwrap();

    let barrier = Arc::new(Barrier::new(WORKERS));
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let w = worker(&store, &email, http_provider(&psp.url)).batch_size(8);
            let barrier = Arc::clone(&barrier);
            tokio::spawn(async move {
                barrier.wait().await;
                let mut total = WorkerReport::default();
                loop {
                    let r = w.run_once().await.unwrap();
                    if r.claimed == 0 {
                        return total;
                    }
                    total.claimed += r.claimed;
                    total.succeeded += r.succeeded;
                }
            })
        })
        .collect();
    let mut total = WorkerReport::default();
    let mut busy = 0;
    for w in workers {
        let r = w.await.unwrap();
        busy += usize::from(r.claimed > 0);
        total.claimed += r.claimed;
        total.succeeded += r.succeeded;
    }
    assert_eq!(
        total,
        report(EFFECTS as u64, |r| r.succeeded = EFFECTS as u64)
    );
    assert!(busy > 1, "the work was shared ({busy} workers claimed)");
    let mut calls: HashMap<String, usize> = HashMap::new();
    for (k, _) in psp.requests() {
        *calls.entry(k).or_default() += 1;
    }
    assert_eq!(calls.len(), EFFECTS);
    assert!(
        calls.values().all(|&n| n == 1),
        "a key was called twice: {calls:?}"
    );
    assert_eq!(
        ledger
            .list(EffectStatus::Succeeded, 10_000)
            .await
            .unwrap()
            .iter()
            .filter(|r| r.effect == email)
            .count(),
        EFFECTS
    );
}

/// `run` works until shutdown: it runs what is due, and returns when told to.
async fn run_loop_stops_on_shutdown<DB: AppDb>(store: Store<DB>) {
    let psp = FakeProvider::start(Duration::ZERO, |_| {}).await;
    let email = effect_name("email_loop");
    let key = EffectKey::intent(&format!("{email}:1")).unwrap();
    let ledger = store.effects();
    let mut tx = store.begin().await.unwrap();
    let _ = ledger.enqueue(&mut tx, &email, &key, b"hi").await.unwrap();
    tx.commit().await.unwrap();
    let worker =
        worker(&store, &email, http_provider(&psp.url)).poll_interval(Duration::from_millis(20));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(async move {
        worker
            .run(async {
                let _ = stopped.await;
            })
            .await;
    });
    tokio::time::timeout(Duration::from_secs(10), async {
        while ledger.get(&key).await.unwrap().unwrap().status != EffectStatus::Succeeded {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the loop runs the effect");
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .expect("the loop stops")
        .unwrap();
    assert_eq!(psp.done().len(), 1);
}

all_stores!(
    email_is_retried_until_sent_and_the_upgrade_applied_once,
    two_paths_one_intent_key_one_charge,
    recharge_intent_is_written_before_the_call,
    timeout_is_unknown_and_retried_with_the_same_key,
    unknown_past_key_retention_is_parked_and_resolved,
    same_key_different_request_is_a_conflict,
    retryable_failures_end_dead,
    retention_deletes_only_finished_effects,
    stalled_worker_cannot_overwrite_its_successor,
    concurrent_workers_call_each_effect_once,
    run_loop_stops_on_shutdown,
);

/// Keys derived for one event are the same on every delivery and differ per effect.
#[test]
fn derived_keys_are_stable_per_event_and_effect() {
    let billing = Name::new("consumer", "billing_v2").unwrap();
    let key = stripe_key("evt_C");
    let email = Name::new("effect", "send_receipt").unwrap();
    let charge = Name::new("effect", "charge").unwrap();
    assert_eq!(
        EffectKey::derive(&billing, &key, &email).as_str(),
        "billing_v2/send_receipt/stripe:evt_C"
    );
    assert_eq!(
        EffectKey::derive(&billing, &stripe_key("evt_C"), &email),
        EffectKey::derive(&billing, &key, &email)
    );
    assert_ne!(
        EffectKey::derive(&billing, &key, &charge),
        EffectKey::derive(&billing, &key, &email)
    );
}
