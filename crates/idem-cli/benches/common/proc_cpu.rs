//! CPU time of a process from `/proc` (user + system, in clock ticks of 10 ms): shared by the
//! benches that print CPU per event or per transaction (`ingest`, `sqlite_round_trips`).

use std::time::Duration;

/// The CPU time process `pid` has used so far (0 when it cannot be read).
pub(crate) fn of_process(pid: u32) -> Duration {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| ticks(&stat))
        .map_or(Duration::ZERO, |t| Duration::from_millis(t * 10))
}

/// This process's CPU time so far, all its threads (in the ingest bench: the load generator and
/// the application, and the baselines' servers, idle while the gateway runs).
pub(crate) fn own() -> Duration {
    of_process(std::process::id())
}

/// utime + stime of a `/proc/{pid}/stat` line: fields 14 and 15, after the command name in
/// parentheses.
pub(crate) fn ticks(stat: &str) -> Option<u64> {
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let user: u64 = fields.get(11)?.parse().ok()?;
    let system: u64 = fields.get(12)?.parse().ok()?;
    Some(user + system)
}
