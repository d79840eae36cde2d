//! CPU time by process and thread, from `/proc` (user + system, in clock ticks of 10 ms): what
//! each event costs the gateway (or the storeless forwarder), PostgreSQL and the bench's own
//! process (the application's threads and the load generator, the rest).
//! PostgreSQL's figure counts the server's own processes (WAL writer, checkpointer, autovacuum)
//! and the backends of the gateway's database, not other databases' backends (other users'
//! tests on a shared machine).

use std::collections::HashMap;
use std::time::Duration;

use crate::proc_cpu::{of_process, own, ticks};

/// The CPU time of each `postgres` process so far, by process id: the server's own processes and
/// the backends connected to `database` (none of the backends when `None`: a SQLite run).
pub(crate) fn postgres(database: Option<&str>) -> HashMap<u32, Duration> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return HashMap::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            if !stat.contains("(postgres)") || !counted(pid, database) {
                return None;
            }
            ticks(&stat).map(|t| (pid, Duration::from_millis(t * 10)))
        })
        .collect()
}

/// Whether `postgres` process `pid` counts: a backend's title is `postgres: {cluster}: {user}
/// {database} {client} {state}`, a server process's `postgres: {cluster}: {what it does}`.
fn counted(pid: u32, database: Option<&str>) -> bool {
    let Ok(title) = std::fs::read_to_string(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let words: Vec<&str> = title
        .trim_end_matches('\0')
        .rsplit(": ")
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let backend = words.len() >= 3 && words[2].contains('(');
    !backend || database.is_some_and(|db| words[1] == db)
}

/// The CPU time of this process's threads named `name` (a server's, see
/// [`crate::own_runtime::OwnRuntime::serve`]), those still running.
pub(crate) fn own_threads(name: &str) -> Duration {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    let comm = format!("({name})");
    dir.filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("stat")).ok())
        .filter(|stat| stat.contains(&comm))
        .filter_map(|stat| ticks(&stat))
        .map(|t| Duration::from_millis(t * 10))
        .sum()
}

/// The CPU time of the server under test (the gateway's process or the forwarder's threads),
/// PostgreSQL, the application's threads and this whole process, taken together.
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    server: Server,
    server_cpu: Duration,
    app: Duration,
    bench: Duration,
    postgres: HashMap<u32, Duration>,
}

/// The server under test.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Server {
    /// `idem serve`, process `pid`.
    Gateway(u32),
    /// The storeless forwarder's threads in this process.
    Forwarder,
}

impl Snapshot {
    /// Now, for `server` on PostgreSQL database `database` (`None`: SQLite or no store).
    pub(crate) fn take(server: Server, database: Option<&str>) -> Self {
        Self {
            server,
            server_cpu: match server {
                Server::Gateway(pid) => of_process(pid),
                Server::Forwarder => own_threads(crate::forwarder::THREADS),
            },
            app: own_threads(crate::gateway::APP_THREADS),
            bench: own(),
            postgres: postgres(database),
        }
    }

    /// What each used from `self` to `later`, per event of `events`.
    pub(crate) fn per_event(&self, later: &Self, events: u64) -> PerEvent {
        let us = |d: Duration| d.as_secs_f64() * 1e6 / events.max(1) as f64;
        // Processes that ended in between are not counted (a lower bound), nor those of other
        // databases.
        let postgres = later
            .postgres
            .iter()
            .map(|(pid, t)| t.saturating_sub(self.postgres.get(pid).copied().unwrap_or_default()))
            .sum::<Duration>();
        let server = later.server_cpu.saturating_sub(self.server_cpu);
        let app = later.app.saturating_sub(self.app);
        let bench = later.bench.saturating_sub(self.bench);
        // The forwarder runs in this process: the rest of it is the load generator.
        let load = match self.server {
            Server::Gateway(_) => bench.saturating_sub(app),
            Server::Forwarder => bench.saturating_sub(app + server),
        };
        PerEvent {
            server: self.server,
            server_us: us(server),
            postgres_us: us(postgres),
            app_us: us(app),
            load_us: us(load),
            events,
        }
    }
}

/// CPU microseconds per event, by who used them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PerEvent {
    server: Server,
    /// The gateway's process (SQLite's engine included) or the forwarder's threads.
    pub(crate) server_us: f64,
    /// PostgreSQL's processes (0 on SQLite but for its idle server processes).
    pub(crate) postgres_us: f64,
    /// The application's threads.
    pub(crate) app_us: f64,
    /// The rest of the bench's process: the load generator.
    pub(crate) load_us: f64,
    /// The events the time was divided by.
    events: u64,
}

impl PerEvent {
    /// The bench's own share: the load generator and the application.
    pub(crate) fn bench_us(&self) -> f64 {
        self.app_us + self.load_us
    }
}

impl std::fmt::Display for PerEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let server = match self.server {
            Server::Gateway(_) => "gateway",
            Server::Forwarder => "forwarder",
        };
        write!(
            f,
            "CPU per event: {server} {:.0} us, PostgreSQL {:.0} us, bench {:.0} us (application {:.0}, load generator {:.0}); all {:.0} us ({} events)",
            self.server_us,
            self.postgres_us,
            self.bench_us(),
            self.app_us,
            self.load_us,
            self.server_us + self.postgres_us + self.bench_us(),
            self.events
        )
    }
}
