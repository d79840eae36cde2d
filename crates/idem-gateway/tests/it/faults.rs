//! The gateway under faults, each made for real: a full disk (a size-capped tmpfs), a destination
//! that accepts TCP and never answers, tables locked by another session (PostgreSQL, MariaDB), a
//! PostgreSQL server stopped and a MariaDB server killed, each started again, slow
//! clients that send a byte every 200 ms. No accepted event is lost; every webhook is answered
//! within its deadline; nothing needs a restart to recover.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use idem_gateway::{Config, GatewayDb};
use idem_sql::{PoolOptions, SqliteStore, Store};
use idem_testkit::private_mariadb::PrivateMariaDb;
use idem_testkit::private_postgres::PrivatePostgres;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{
    Answer, Downstream, Running, config_text, env, stripe_event, system_clock, unix_now,
};
use crate::table_lock::{TableLock, hold, release};

/// A tmpfs of `mib` MiB mounted on a fresh directory, unmounted on drop: a disk that really
/// fills up. Needs root (as CI and this project's machines run tests); refuses loudly otherwise.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(mib: u32) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(dir.path())
            .status()
            .expect("run mount");
        assert!(
            status.success(),
            "cannot mount a {mib} MiB tmpfs at {} (the full-disk test needs root)",
            dir.path().display()
        );
        Self { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes a filler file until the disk is full; returns its path.
    fn fill(&self) -> PathBuf {
        use std::io::Write as _;
        let path = self.path().join("filler");
        let mut file = std::fs::File::create(&path).unwrap();
        let chunk = vec![0u8; 64 * 1024];
        loop {
            match file.write_all(&chunk) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(28) => break, // ENOSPC
                Err(e) => panic!("filling the disk: {e}"),
            }
        }
        let _ = file.sync_all();
        path
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        // Lazily: a pool connection still open in the dying runtime must not keep it mounted.
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

async fn readyz<DB: GatewayDb>(running: &Running<DB>) -> u16 {
    timed_get(running, "/readyz").await.0
}

/// GETs `path`; the status (0 when there was no answer within 10 s) and how long it took.
async fn timed_get<DB: GatewayDb>(running: &Running<DB>, path: &str) -> (u16, Duration) {
    let start = Instant::now();
    let status = running
        .client
        .get(format!("{}{path}", running.url))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .map(|r| r.status().as_u16())
        .unwrap_or(0);
    (status, start.elapsed())
}

/// POSTs a signed Stripe event; the answer and how long it took.
async fn timed_post<DB: GatewayDb>(running: &Running<DB>, body: &[u8]) -> (Answer, Duration) {
    let start = Instant::now();
    let answer = running.post_stripe(body).await;
    (answer, start.elapsed())
}

/// `bound` plus the 50 % the issue allows for scheduling.
fn within(bound: Duration) -> Duration {
    bound + bound / 2
}

/// The test configuration with `top` (top-level keys) before it.
fn config_with(top: &str, app: &Downstream) -> Config {
    Config::from_toml(
        &format!("{top}\n{}", config_text(app.addr, "[\"10ms\"]")),
        &env,
    )
    .unwrap()
}

/// A full disk: webhooks get 503 (nothing kept, send again) and `/readyz` says not ready;
/// once space is free again, ingest, dispatch and `/readyz` recover without a restart, and every
/// event answered 200 is delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_disk_recovers_without_a_restart() {
    let disk = SmallDisk::mount(30);
    let url = format!("sqlite://{}", disk.path().join("idem.db").display());
    let store = SqliteStore::connect_with_options(&url, PoolOptions::default())
        .await
        .unwrap()
        .with_clock(system_clock());
    let app = Downstream::ok().await;
    let config =
        idem_gateway::Config::from_toml(&config_text(app.addr, "[\"10ms\"]"), &env).unwrap();
    let running = Running::start(config, store).await;
    let now = unix_now();
    let mut accepted = Vec::new();
    for n in 0..20 {
        let id = format!("evt_before_{n}");
        let answer = running
            .post_stripe(&stripe_event(
                &id,
                "invoice.paid",
                "invoice",
                &format!("in_{n}"),
                now,
            ))
            .await;
        assert_eq!(answer.status, 200, "{:?}", answer.json);
        accepted.push(id);
    }
    assert_eq!(readyz(&running).await, 200);

    let filler = disk.fill();
    // Large bodies, so that pages must be allocated on a full disk.
    let big = "x".repeat(200_000);
    let mut refused = 0;
    for n in 0..10 {
        let id = format!("evt_full_{n}");
        let body = format!(
            r#"{{"id":"{id}","object":"event","type":"invoice.paid","created":{now},"data":{{"object":{{"id":"in_full_{n}","object":"invoice","pad":"{big}"}}}}}}"#
        );
        let answer = running.post_stripe(body.as_bytes()).await;
        match answer.status {
            200 => accepted.push(id),
            503 => refused += 1,
            other => panic!("answer {other} on a full disk: {:?}", answer.json),
        }
    }
    assert!(
        refused > 0,
        "the disk was full, yet every webhook was stored"
    );
    assert_eq!(readyz(&running).await, 503, "a full disk is not ready");

    std::fs::remove_file(filler).unwrap();
    // Recovered without a restart: the next webhooks are stored and /readyz is ready again.
    for n in 0..20 {
        let id = format!("evt_after_{n}");
        let answer = running
            .post_stripe(&stripe_event(
                &id,
                "invoice.paid",
                "invoice",
                &format!("in_a{n}"),
                now,
            ))
            .await;
        assert_eq!(
            answer.status, 200,
            "after freeing the disk: {:?}",
            answer.json
        );
        accepted.push(id);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while readyz(&running).await != 200 {
        assert!(
            Instant::now() < deadline,
            "/readyz stayed 503 after the disk was freed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    running.settle().await;
    let received = app.received();
    for id in &accepted {
        let copies = received
            .iter()
            .filter(|r| r.header("idem-event-id") == Some(id.as_str()))
            .count();
        assert_eq!(copies, 1, "{id} answered 200 and delivered once");
    }
    running.server.shutdown().await.unwrap();
}

/// A database server of the test's own, which it takes away and brings back.
trait Outage {
    fn url(&self) -> String;
    /// Connections are refused from its return on.
    fn stop(&self);
    fn start_again(&self);
}

impl Outage for PrivatePostgres {
    fn url(&self) -> String {
        PrivatePostgres::url(self)
    }

    fn stop(&self) {
        PrivatePostgres::stop(self);
    }

    fn start_again(&self) {
        PrivatePostgres::start_again(self);
    }
}

impl Outage for PrivateMariaDb {
    fn url(&self) -> String {
        PrivateMariaDb::url(self)
    }

    /// SIGKILL: the server crashes, and recovers from InnoDB's log at the next start.
    fn stop(&self) {
        PrivateMariaDb::kill(self);
    }

    fn start_again(&self) {
        PrivateMariaDb::start_again(self);
    }
}

/// PostgreSQL stopped (connections refused) for 5 s under a sender: see [`database_outage`].
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stopped_database_answers_503_within_the_deadline_and_recovers() {
    database_outage::<idem_sql::sqlx::Postgres>(&PrivatePostgres::start()).await;
}

/// MariaDB killed (`kill -9`) for 5 s under a sender, then started again: see
/// [`database_outage`].
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_mariadb_answers_503_within_the_deadline_and_recovers() {
    database_outage::<idem_sql::sqlx::MySql>(&PrivateMariaDb::start()).await;
}

/// The database away for 5 s under a sender: every webhook is answered 503 with `Retry-After`
/// within `database_timeout` (2 s) plus 50 %, `/readyz` answers 503 within `readyz_timeout`
/// (1 s) plus 50 %; once the server is back, `/readyz` says ready only when ingest works, and
/// every event answered 200 is delivered (at least once, under its key).
async fn database_outage<DB: GatewayDb>(pg: &impl Outage) {
    let database_timeout = idem_gateway::DEFAULT_DATABASE_TIMEOUT;
    let readyz_timeout = idem_gateway::DEFAULT_READYZ_TIMEOUT;
    let store = Store::<DB>::connect_with_options(
        &pg.url(),
        PoolOptions::default().acquire_timeout(database_timeout),
    )
    .await
    .unwrap()
    .with_clock(system_clock());
    let app = Downstream::ok().await;
    let running = Running::start(config_with("", &app), store).await;
    let now = unix_now();
    let event = |n: usize| {
        stripe_event(
            &format!("evt_pg_{n}"),
            "invoice.paid",
            "invoice",
            &format!("in_pg_{n}"),
            now,
        )
    };
    let mut accepted = Vec::new();
    for n in 0..10 {
        let (answer, _) = timed_post(&running, &event(n)).await;
        assert_eq!(answer.status, 200, "{:?}", answer.json);
        accepted.push(n);
    }

    tokio::task::block_in_place(|| pg.stop());
    let outage = Instant::now();
    let mut refused = Vec::new();
    let mut n = 10;
    while outage.elapsed() < Duration::from_secs(5) {
        let (answer, took) = timed_post(&running, &event(n)).await;
        assert_eq!(answer.status, 503, "database stopped: {:?}", answer.json);
        assert_eq!(answer.header("retry-after"), Some("1"));
        assert!(
            took <= within(database_timeout),
            "a webhook waited {took:?} for its 503 (database_timeout {database_timeout:?})"
        );
        let (status, took) = timed_get(&running, "/readyz").await;
        assert_eq!(status, 503, "/readyz while the database is stopped");
        assert!(
            took <= within(readyz_timeout),
            "/readyz took {took:?} (readyz_timeout {readyz_timeout:?})"
        );
        refused.push(n);
        n += 1;
    }

    tokio::task::block_in_place(|| pg.start_again());
    let back = Instant::now();
    while readyz(&running).await != 200 {
        assert!(
            back.elapsed() < Duration::from_secs(15),
            "/readyz not ready 15 s after the database came back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Ready means ingest works: the sender's resends are taken at once.
    for n in refused {
        let (answer, _) = timed_post(&running, &event(n)).await;
        assert_eq!(
            answer.status, 200,
            "after /readyz said ready: {:?}",
            answer.json
        );
        accepted.push(n);
    }
    running.settle().await;
    for n in accepted {
        // At least once: a delivery whose outcome could not be written before its claim lapsed
        // is sent again, under the same key.
        let key = format!("stripe:evt_pg_{n}");
        assert!(
            !app.with_key(&key).is_empty(),
            "{key} answered 200, never delivered"
        );
    }
    running.server.shutdown().await.unwrap();
}

/// Turns `async fn name<DB: TableLock>(store: Store<DB>)` into `name::postgres` and
/// `name::mysql`: the stores whose tables another session can lock (SQLite's one writer is
/// tested by the full disk instead).
macro_rules! lockable_stores {
    ($($name:ident),+ $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn postgres() {
                let (_dir, store) = crate::support::postgres(crate::support::system_clock()).await;
                super::$name(store).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn mysql() {
                let (_dir, store) = crate::support::mysql(crate::support::system_clock()).await;
                super::$name(store).await;
            }
        }
    )+};
}

lockable_stores!(
    a_locked_table_is_answered_503_within_database_timeout,
    dispatch_waiting_on_the_database_leaves_ingest_its_connections,
);

/// A database that answers nothing for longer than `database_timeout` (the events table locked
/// by another session): the webhook gets 503 with `Retry-After` within 1 s plus 50 %, and is
/// taken once the lock is gone.
async fn a_locked_table_is_answered_503_within_database_timeout<DB: TableLock>(store: Store<DB>) {
    let app = Downstream::ok().await;
    let running = Running::start(config_with("database_timeout = \"1s\"", &app), store).await;
    let body = stripe_event("evt_locked", "invoice.paid", "invoice", "in_l", unix_now());

    let lock = hold(running.gateway.store().pool(), DB::LOCK_EVENTS).await;
    let (answer, took) = timed_post(&running, &body).await;
    assert_eq!(answer.status, 503, "{:?}", answer.json);
    assert_eq!(answer.header("retry-after"), Some("1"));
    assert_eq!(
        answer.json["type"], "urn:idem:problem:store-unavailable",
        "{:?}",
        answer.json
    );
    assert!(
        took >= Duration::from_secs(1) && took <= within(Duration::from_secs(1)),
        "answered after {took:?}, database_timeout 1 s"
    );
    // Requests queued behind the held batch are answered 503 too, and none of them is stored
    // once the lock goes: a 503 says nothing was kept.
    let queued: Vec<Vec<u8>> = (0..10)
        .map(|n| {
            stripe_event(
                &format!("evt_q{n}"),
                "invoice.paid",
                "invoice",
                &format!("in_q{n}"),
                unix_now(),
            )
        })
        .collect();
    let answers =
        futures_util::future::join_all(queued.iter().map(|b| running.post_stripe(b))).await;
    for answer in &answers {
        assert_eq!(answer.status, 503, "{:?}", answer.json);
    }
    release(lock).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let stored = crate::support::count(
        &running.gateway,
        "SELECT COUNT(*) FROM idem_gateway_events WHERE event_id LIKE 'evt_q%'",
    )
    .await;
    assert_eq!(stored, 0, "events answered 503 were stored after all");

    let (answer, _) = timed_post(&running, &body).await;
    assert_eq!(answer.status, 200, "{:?}", answer.json);
    assert_eq!(answer.json["status"], "accepted", "the 503 kept nothing");
    running.settle().await;
    assert_eq!(app.with_key("stripe:evt_locked").len(), 1);
    running.server.shutdown().await.unwrap();
}

/// Dispatch never takes ingest's connections: twenty destinations whose deliveries keep
/// failing are stopped mid-claim by a lock on the deliveries table, so each dispatcher waits
/// holding a connection, more than the pool has (16). Webhooks of a source without routes (its
/// commits do not touch that table) are still stored and answered 200, because dispatch holds
/// at most its share of the pool (16 - 4 group commits - 2 = 10); taking every connection, it
/// left ingest none and each webhook was answered 503 after `database_timeout`.
async fn dispatch_waiting_on_the_database_leaves_ingest_its_connections<DB: TableLock>(
    store: Store<DB>,
) {
    const DESTINATIONS: usize = 20;
    let app = Downstream::start(std::sync::Arc::new(|_| {
        axum::http::StatusCode::SERVICE_UNAVAILABLE
    }))
    .await;
    let mut text = String::from(
        "listen = \"127.0.0.1:0\"\npoll_interval = \"20ms\"\ndatabase_timeout = \"1s\"\n\
         [[source]]\nname = \"stripe\"\nkind = \"stripe\"\nsecrets_env = [\"STRIPE_SECRET\"]\n\
         [[source]]\nname = \"quiet\"\nkind = \"stripe\"\nsecrets_env = [\"STRIPE_SECRET\"]\n",
    );
    for d in 0..DESTINATIONS {
        text.push_str(&format!(
            "[[destination]]\nname = \"d{d}\"\nurl = \"http://{}/events\"\n\
             retry_schedule = [{}]\nsigning_secret_env = \"APP_SECRET\"\n\
             [[route]]\nsource = \"stripe\"\ndestination = \"d{d}\"\nordering = \"none\"\n",
            app.addr,
            vec!["\"1ms\""; 50].join(", ")
        ));
    }
    let running = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    let body = stripe_event("evt_busy", "invoice.paid", "invoice", "in_b", unix_now());
    assert_eq!(running.post_stripe(&body).await.status, 200);

    // Each destination claims, fails, and claims again every millisecond: the lock stops them
    // at their next claim or outcome write, each holding its connection.
    let lock = hold(running.gateway.store().pool(), DB::LOCK_DELIVERIES).await;
    let pool = running.gateway.store().pool();
    let deadline = Instant::now() + Duration::from_secs(10);
    // The lock's own connection and dispatch's share of ten.
    while (pool.size() as usize).saturating_sub(pool.num_idle()) < 11 {
        assert!(
            Instant::now() < deadline,
            "the dispatchers never waited on the lock"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for n in 0..5 {
        let quiet = stripe_event(
            &format!("evt_quiet{n}"),
            "invoice.paid",
            "invoice",
            "in_q",
            unix_now(),
        );
        let signature =
            idem_http::verify::stripe::sign(crate::support::STRIPE_SECRET, unix_now(), &quiet);
        let answer = running
            .post("quiet", &[("stripe-signature", signature)], &quiet)
            .await;
        assert_eq!(answer.status, 200, "{:?}", answer.json);
        assert_eq!(answer.json["status"], "accepted");
    }
    release(lock).await;
    running.server.shutdown().await.unwrap();
}

/// Writes `bytes` one every 200 ms until the server closes the connection; how long it stayed
/// open, and what the server answered.
async fn trickle(addr: &str, head: &[u8], bytes: &[u8], give_up: Duration) -> (Duration, String) {
    // Started before the connection exists: the server's deadlines start when it accepts,
    // which may come before `connect` returns here.
    let start = Instant::now();
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(head).await.unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    for byte in bytes.iter().cycle() {
        if start.elapsed() > give_up {
            panic!("connection still open after {give_up:?}");
        }
        if stream.write_all(&[*byte]).await.is_err() {
            break;
        }
        match tokio::time::timeout(Duration::from_millis(200), stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => answer.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
    }
    // Read what is left of the answer until the close.
    while let Ok(Ok(n)) = tokio::time::timeout(Duration::from_secs(1), stream.read(&mut buf)).await
    {
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&buf[..n]);
    }
    (
        start.elapsed(),
        String::from_utf8_lossy(&answer).into_owned(),
    )
}

/// A client sending its headers one byte every 200 ms is cut at `header_read_timeout` (1 s
/// here) plus at most 50 %; one sending its body so is answered 408 `body-timeout` at
/// `body_read_timeout` (1 s) plus at most 50 % and cut; nothing of it is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn slow_clients_are_cut_at_their_deadlines() {
    let (_dir, store) = crate::support::sqlite(system_clock()).await;
    let app = Downstream::ok().await;
    let running = Running::start(
        config_with(
            "header_read_timeout = \"1s\"\nbody_read_timeout = \"1s\"",
            &app,
        ),
        store,
    )
    .await;
    let addr = running.url.trim_start_matches("http://").to_owned();
    let bound = Duration::from_secs(1);

    let (open, answer) = trickle(
        &addr,
        b"",
        b"POST /webhooks/stripe HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        Duration::from_secs(40),
    )
    .await;
    assert!(
        open >= bound && open <= within(bound),
        "slow headers: connection open {open:?}, header_read_timeout 1 s; answer {answer:?}"
    );

    let body = stripe_event("evt_slow", "invoice.paid", "invoice", "in_s", unix_now());
    let head = format!(
        "POST /webhooks/stripe HTTP/1.1\r\nHost: {addr}\r\nStripe-Signature: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        idem_http::verify::stripe::sign(crate::support::STRIPE_SECRET, unix_now(), &body),
        body.len()
    );
    let (open, answer) = trickle(&addr, head.as_bytes(), &body, Duration::from_secs(40)).await;
    assert!(
        answer.starts_with("HTTP/1.1 408"),
        "slow body answered {answer:?}"
    );
    assert!(answer.contains("urn:idem:problem:body-timeout"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
    assert!(
        open >= bound && open <= within(bound),
        "slow body: connection open {open:?}, body_read_timeout 1 s"
    );
    // A connection that sends nothing at all is closed after the same deadline.
    // Before the connection, for the same reason as in `trickle`.
    let opened = Instant::now();
    let mut idle = TcpStream::connect(&addr).await.unwrap();
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_secs(40), idle.read(&mut buf)).await;
    let open = opened.elapsed();
    assert!(
        matches!(read, Ok(Ok(0)) | Ok(Err(_))),
        "idle connection: {read:?}"
    );
    assert!(
        open >= bound && open <= within(bound),
        "idle connection open {open:?}, header_read_timeout 1 s"
    );

    // A declared body over max_body_bytes is refused at once, before any of it is sent.
    let mut big = TcpStream::connect(&addr).await.unwrap();
    let asked = Instant::now();
    big.write_all(
        b"POST /webhooks/stripe HTTP/1.1\r\nHost: x\r\nContent-Length: 5000000000\r\n\r\n",
    )
    .await
    .unwrap();
    let n = tokio::time::timeout(Duration::from_secs(5), big.read(&mut buf))
        .await
        .expect("an answer")
        .unwrap();
    let answer = String::from_utf8_lossy(&buf[..n]).into_owned();
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(asked.elapsed() < bound, "413 after {:?}", asked.elapsed());

    running.settle().await;
    assert!(
        app.received().is_empty(),
        "nothing of a cut request is stored"
    );
    running.server.shutdown().await.unwrap();
}

/// A spare connection that never sends a byte (HTTP clients open them and may never use them)
/// does not hold the shutdown: with `header_read_timeout` and `shutdown_grace` at 1 h, shutdown
/// ends as soon as the request in flight is answered, and that request is answered 200.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_spare_connection_does_not_hold_the_shutdown() {
    let (_dir, store) = crate::support::sqlite(system_clock()).await;
    let app = Downstream::ok().await;
    let running = Running::start(
        config_with(
            "header_read_timeout = \"1h\"\nshutdown_grace = \"1h\"",
            &app,
        ),
        store,
    )
    .await;
    let addr = running.url.trim_start_matches("http://").to_owned();
    let body = stripe_event("evt_spare", "invoice.paid", "invoice", "in_sp", unix_now());
    assert_eq!(running.post_stripe(&body).await.status, 200);
    let mut spare = TcpStream::connect(&addr).await.unwrap();
    // The spare connection is accepted before the shutdown begins.
    assert!(
        tokio::time::timeout(Duration::from_millis(200), spare.read(&mut [0u8; 1]))
            .await
            .is_err(),
        "the spare connection was closed before the shutdown"
    );
    // A bound the machine's load cannot reach and the old behaviour (wait for the spare's
    // header_read_timeout, or the grace) cannot beat.
    tokio::time::timeout(Duration::from_secs(60), running.server.shutdown())
        .await
        .expect("shutdown held by a connection that sent nothing")
        .unwrap();
    let closed = tokio::time::timeout(Duration::from_secs(5), spare.read(&mut [0u8; 1])).await;
    assert!(
        matches!(closed, Ok(Ok(0)) | Ok(Err(_))),
        "the spare connection is closed at shutdown: {closed:?}"
    );
}

/// A SQLite database belongs to one `idem serve`: a second server on the same file is refused,
/// naming it, while the first runs, and starts once the first has stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_second_server_on_one_sqlite_file_is_refused_until_the_first_stops() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("idem.db").display());
    let open = || async {
        SqliteStore::connect_with_options(&url, PoolOptions::default())
            .await
            .unwrap()
            .with_clock(system_clock())
    };
    let app = Downstream::ok().await;
    let config = || Config::from_toml(&config_text(app.addr, "[\"10ms\"]"), &env).unwrap();
    let first = Running::start(config(), open().await).await;

    let second = idem_gateway::Gateway::new(config(), open().await);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let refused = idem_gateway::Server::start(second.clone(), listener)
        .await
        .expect_err("a second server on the file was started");
    let message = refused.to_string();
    assert!(message.contains("idem.db"), "{message}");
    assert!(message.contains("another idem serve uses it"), "{message}");

    first.server.shutdown().await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let started = idem_gateway::Server::start(second, listener).await.unwrap();
    started.shutdown().await.unwrap();
}

/// An attempt in flight does not hold the stop past `shutdown_grace`: with a destination that
/// accepts the connection and never answers (`timeout` 30 s) and `shutdown_grace` 1 s, shutdown
/// ends in about a second, and the event is still stored for the next start.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_attempt_in_flight_does_not_hold_the_stop_past_the_grace() {
    let (_dir, store) = crate::support::sqlite(system_clock()).await;
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_addr = silent.local_addr().unwrap();
    let (accepted_tx, mut accepted) = tokio::sync::mpsc::unbounded_channel();
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((connection, _)) = silent.accept().await {
            let _ = accepted_tx.send(());
            held.push(connection);
        }
    });
    let text = format!(
        "shutdown_grace = \"1s\"\n{}",
        config_text(silent_addr, "[\"10ms\"]").replace("timeout = \"2s\"", "timeout = \"30s\"")
    );
    let running = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    let body = stripe_event("evt_held", "invoice.paid", "invoice", "in_held", unix_now());
    assert_eq!(running.post_stripe(&body).await.status, 200);
    tokio::time::timeout(Duration::from_secs(10), accepted.recv())
        .await
        .expect("the attempt reached the destination");
    let started = Instant::now();
    // Far below the destination's 30 s timeout, which the stop waited for before.
    tokio::time::timeout(Duration::from_secs(15), running.server.shutdown())
        .await
        .expect("the stop waited for the attempt in flight")
        .unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
    let pending = crate::support::count(
        &running.gateway,
        "SELECT COUNT(*) FROM idem_gateway_deliveries WHERE state IN ('pending', 'in_flight')",
    )
    .await;
    assert_eq!(
        pending, 1,
        "the delivery cut at the stop is kept for the next start"
    );
    holder.abort();
}

/// With `admin_listen` and `metrics_listen`, `/admin` and `/metrics` are served there and no
/// longer on the public `listen` address (404 problem+json there).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn admin_and_metrics_can_have_addresses_of_their_own() {
    let (_dir, store) = crate::support::sqlite(system_clock()).await;
    let app = Downstream::ok().await;
    let running = Running::start(
        config_with(
            "admin_token_env = \"ADMIN_TOKEN\"\nadmin_listen = \"127.0.0.1:0\"\nmetrics_listen = \"127.0.0.1:0\"",
            &app,
        ),
        store,
    )
    .await;
    let admin = running.server.admin_addr().expect("admin_listen bound");
    let metrics = running.server.metrics_addr().expect("metrics_listen bound");
    assert_ne!(admin, metrics);

    for path in ["/metrics", "/admin/events"] {
        let answer = running
            .client
            .get(format!("{}{path}", running.url))
            .bearer_auth("admin-token")
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 404, "{path} on the public address");
        assert_eq!(
            answer.headers()["content-type"],
            "application/problem+json",
            "{path}"
        );
    }
    let answer = running
        .client
        .get(format!("http://{metrics}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    assert!(answer.text().await.unwrap().contains("# TYPE"));
    let answer = running
        .client
        .get(format!("http://{admin}/admin/events"))
        .bearer_auth("admin-token")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let listed: serde_json::Value = serde_json::from_str(&answer.text().await.unwrap()).unwrap();
    assert_eq!(listed, serde_json::json!([]));
    // The webhooks stay on the public address only.
    let answer = running
        .client
        .post(format!("http://{admin}/webhooks/stripe"))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 404);
    running.server.shutdown().await.unwrap();
}
