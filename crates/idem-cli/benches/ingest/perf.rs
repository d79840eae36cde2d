//! An optional sampling profile of each store's closed-loop forwarding run, from the load's start
//! until the backlog drained: with `IDEM_BENCH_PERF` set to a directory, `perf record -a -g -F
//! 1999` of the whole machine (the gateway, PostgreSQL and the bench, told apart by process id
//! and name afterwards) into `{directory}/{store}-forwarding.perf.data`. The default `cpu-clock`
//! event: hardware counters are not available on every virtual machine. docs/gateway.md
//! ("Profiling") gives the commands that turn it into a flame graph.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running `perf record`; stopped with SIGINT on drop (perf then writes its file out).
pub(crate) struct Recording {
    child: Child,
    path: PathBuf,
}

/// Starts recording for `store`'s forwarding run of gateway process `gateway` when
/// `IDEM_BENCH_PERF` names a directory; `None` when it is not set or perf cannot start.
pub(crate) async fn start(store: &str, gateway: u32) -> Option<Recording> {
    let dir = PathBuf::from(std::env::var_os("IDEM_BENCH_PERF")?);
    std::fs::create_dir_all(&dir).ok()?;
    let path = dir.join(format!("{}-forwarding.perf.data", store.to_lowercase()));
    let child = Command::new("perf")
        .args(["record", "-a", "-g", "-F", "1999", "-o"])
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| println!("  perf: cannot start perf record: {e}"))
        .ok()?;
    // perf needs a moment to open its buffers on every CPU before the load starts.
    tokio::time::sleep(Duration::from_millis(500)).await;
    println!(
        "  perf: recording {} (gateway pid {gateway})",
        path.display()
    );
    Some(Recording { child, path })
}

impl Drop for Recording {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
        println!("  perf: wrote {}", self.path.display());
    }
}
