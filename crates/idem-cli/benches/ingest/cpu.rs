//! CPU time by process, from `/proc` (user + system, in clock ticks of 10 ms): what each event
//! costs the gateway, the bench's own process (load generator and application) and PostgreSQL.
//! PostgreSQL's figure counts the server's own processes (WAL writer, checkpointer, autovacuum)
//! and the backends of the gateway's database, not other databases' backends (other users'
//! tests on a shared machine).

use std::collections::HashMap;
use std::time::Duration;

/// The CPU time process `pid` has used so far (0 when it cannot be read).
pub(crate) fn of_process(pid: u32) -> Duration {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| ticks(&stat))
        .map_or(Duration::ZERO, |t| Duration::from_millis(t * 10))
}

/// This process's CPU time so far: the load generator and the application (the baselines'
/// servers too, idle while the gateway runs).
pub(crate) fn own() -> Duration {
    of_process(std::process::id())
}

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

/// utime + stime of a `/proc/{pid}/stat` line: fields 14 and 15, after the command name in
/// parentheses.
fn ticks(stat: &str) -> Option<u64> {
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let user: u64 = fields.get(11)?.parse().ok()?;
    let system: u64 = fields.get(12)?.parse().ok()?;
    Some(user + system)
}

/// The CPU time of the gateway, this process and PostgreSQL, taken together.
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    gateway: Duration,
    bench: Duration,
    postgres: HashMap<u32, Duration>,
}

impl Snapshot {
    /// Now, for gateway process `gateway` on PostgreSQL database `database` (`None`: SQLite).
    pub(crate) fn take(gateway: u32, database: Option<&str>) -> Self {
        Self {
            gateway: of_process(gateway),
            bench: own(),
            postgres: postgres(database),
        }
    }

    /// What each used from `self` to `later`, per accepted event, as a line of the report.
    pub(crate) fn per_event(&self, later: &Self, events: u64) -> String {
        let us = |d: Duration| d.as_secs_f64() * 1e6 / events.max(1) as f64;
        let (gateway, bench, postgres) = (
            later.gateway.saturating_sub(self.gateway),
            later.bench.saturating_sub(self.bench),
            // Processes that ended in between are not counted (a lower bound), nor those of
            // other databases.
            later
                .postgres
                .iter()
                .map(|(pid, t)| {
                    t.saturating_sub(self.postgres.get(pid).copied().unwrap_or_default())
                })
                .sum::<Duration>(),
        );
        format!(
            "CPU per event: gateway {:.0} us, load generator + application {:.0} us, PostgreSQL {:.0} us; all {:.0} us ({events} events)",
            us(gateway),
            us(bench),
            us(postgres),
            us(gateway + bench + postgres)
        )
    }
}
