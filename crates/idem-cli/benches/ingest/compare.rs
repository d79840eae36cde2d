//! Base against new, back to back in one run (issue 26: each cut measured as a ratio): with
//! `IDEM_BENCH_BASE` set to another build's `idem` binary, the bench measures only what a cut
//! of the gateway's overhead changes, for the base binary and the one under test (the one built
//! with the bench, or `IDEM_BENCH_IDEM`) in turn, `rounds` times each, alternating so that the
//! machine's drift falls on both alike, each run on a fresh database:
//!
//! - ingest-only, unique events: requests/s and the gateway's CPU per ingested event;
//! - closed-loop forwarding until the backlog drained: ingest requests/s, deliveries/s, the
//!   gateway's and PostgreSQL's CPU per forwarded event, and the gateway's peak RSS.
//!
//! It prints every run, then the median of each figure per binary and new / base.

use std::ffi::OsStr;
use std::path::Path;

use crate::cpu::PerEvent;
use crate::gateway::{App, Serve};

/// One run of one binary on one store.
#[derive(Debug, Clone, Copy)]
struct Figures {
    ingest_rate: f64,
    ingest_cpu: PerEvent,
    forwarding_ingest_rate: f64,
    forwarded_rate: f64,
    forward_cpu: PerEvent,
    peak_rss_mib: f64,
}

/// Reads one figure off a run.
type Read = fn(&Figures) -> f64;

/// The figures compared, by name, with how each is read off a run.
const FIGURES: [(&str, Read); 8] = [
    ("ingest-only req/s", |f| f.ingest_rate),
    ("gateway CPU per ingested event, us", |f| {
        f.ingest_cpu.server_us
    }),
    ("forwarding: ingest req/s", |f| f.forwarding_ingest_rate),
    ("forwarding: deliveries/s", |f| f.forwarded_rate),
    ("gateway CPU per forwarded event, us", |f| {
        f.forward_cpu.server_us
    }),
    ("PostgreSQL CPU per forwarded event, us", |f| {
        f.forward_cpu.postgres_us
    }),
    ("bench CPU per forwarded event, us", |f| {
        f.forward_cpu.bench_us()
    }),
    ("peak RSS while forwarding, MiB", |f| f.peak_rss_mib),
];

/// Measures `base` against the binary under test on SQLite and (unless `pg_admin` is empty)
/// PostgreSQL, `secs` of closed-loop load per run, `rounds` runs per binary and store, the
/// SQLite files in `dir`; prints each run and the summary.
pub(crate) async fn run(base: &OsStr, pg_admin: &str, secs: u64, rounds: u64, dir: &Path) {
    let new = crate::gateway::idem_binary();
    println!(
        "idem bench, base against new: base {}, new {}; {secs} s per run, {rounds} rounds\n",
        base.to_string_lossy(),
        new.to_string_lossy()
    );
    let mut stores = vec!["SQLite"];
    if !pg_admin.is_empty() {
        stores.push("PostgreSQL");
    }
    for store in stores {
        let (mut base_runs, mut new_runs) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            // Base first in even rounds, new first in odd ones.
            let order: [(&str, &OsStr); 2] = if round % 2 == 0 {
                [("base", base), ("new", &new)]
            } else {
                [("new", &new), ("base", base)]
            };
            for (label, binary) in order {
                let figures = one_run(binary, store, pg_admin, secs, dir).await;
                println!(
                    "{store} round {round} {label}: ingest {:.0}/s, {:.0} us/ingested; forwarding ingest {:.0}/s, {:.0} deliveries/s, gateway {:.0} us, PostgreSQL {:.0} us, bench {:.0} us per forwarded; peak RSS {:.0} MiB",
                    figures.ingest_rate,
                    figures.ingest_cpu.server_us,
                    figures.forwarding_ingest_rate,
                    figures.forwarded_rate,
                    figures.forward_cpu.server_us,
                    figures.forward_cpu.postgres_us,
                    figures.forward_cpu.bench_us(),
                    figures.peak_rss_mib,
                );
                if label == "base" {
                    base_runs.push(figures);
                } else {
                    new_runs.push(figures);
                }
            }
        }
        summary(store, &base_runs, &new_runs);
    }
}

/// One binary's ingest-only and closed-loop forwarding runs on `store`, each on a fresh
/// database.
async fn one_run(binary: &OsStr, store: &str, pg_admin: &str, secs: u64, dir: &Path) -> Figures {
    let url = |tag: &str| {
        let tag = format!("{tag}{}", crate::run_id(""));
        async move {
            if store == "SQLite" {
                format!("sqlite://{}", dir.join(format!("{tag}.db")).display())
            } else {
                crate::fresh_pg(pg_admin, &tag).await
            }
        }
    };
    let ingest_url = url("ci").await;
    let (ingest, ingest_cpu) = {
        let serve = Serve::start_binary(binary, &ingest_url, None, None, dir).await;
        crate::ingest_only(&serve, secs).await
    };
    let forward_url = url("cf").await;
    let app = App::start();
    let closed = crate::closed_forwarding(binary, store, &forward_url, &app, None, secs, dir).await;
    if store != "SQLite" {
        crate::drop_pg(pg_admin, &ingest_url).await;
        crate::drop_pg(pg_admin, &forward_url).await;
    }
    Figures {
        ingest_rate: ingest.rate,
        ingest_cpu,
        forwarding_ingest_rate: closed.measured.rate,
        forwarded_rate: closed.rate,
        forward_cpu: closed.cpu,
        peak_rss_mib: closed.peak_rss_kib as f64 / 1024.0,
    }
}

/// The median of each figure per binary and new / base.
fn summary(store: &str, base: &[Figures], new: &[Figures]) {
    println!("\n{store}: median of {} runs each", base.len());
    println!(
        "{:<42} {:>10} {:>10} {:>11}",
        "", "base", "new", "new / base"
    );
    for (name, read) in FIGURES {
        let b = median(base.iter().map(read).collect());
        let n = median(new.iter().map(read).collect());
        let ratio = if b > 0.0 { n / b } else { f64::NAN };
        println!("{name:<42} {b:>10.1} {n:>10.1} {ratio:>10.3}x");
    }
    println!();
}

fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len().is_multiple_of(2) {
        (values[mid - 1] + values[mid]) / 2.0
    } else {
        values[mid]
    }
}
