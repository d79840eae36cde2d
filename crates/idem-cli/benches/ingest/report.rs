//! What the bench prints: a row per setting as it is measured, and the summary it ends with,
//! each ratio and CPU figure beside its target in brackets (issue 26's targets; the module docs
//! of `main.rs` say which changed).

use crate::load::Measured;
use crate::{Baselines, StoreFigures};

/// Gateway CPU per forwarded event before issue 26 (docs/gateway.md, 2026-12-02), in µs: the
/// base of the CPU targets, with the share of it each may use.
const GATEWAY_BEFORE_US: [(&str, f64, f64); 2] =
    [("SQLite", 266.0, 0.4), ("PostgreSQL", 189.0, 0.6)];
/// PostgreSQL's own CPU per forwarded event before issue 26, in µs, and the share it may use.
const POSTGRES_BEFORE_US: (f64, f64) = (323.0, 0.6);

/// One setting's row: rate, p50, p99, errors.
pub(crate) fn row(name: &str, m: &Measured) {
    println!(
        "{name:<44} {:>9.0} {:>9.2} {:>9.2} {:>7}",
        m.rate,
        m.p50.as_secs_f64() * 1e3,
        m.p99.as_secs_f64() * 1e3,
        m.errors
    );
}

fn ratio(a: f64, b: f64) -> f64 {
    a / b.max(f64::MIN_POSITIVE)
}

/// The summary: ingest against the baselines, then each store's forwarding and CPU figures.
pub(crate) fn summary(
    b: &Baselines,
    sqlite: Option<&StoreFigures>,
    postgres: Option<&StoreFigures>,
    mysql: Option<&Measured>,
) {
    println!("\nratios and CPU per event (target in brackets):");
    if let Some(sqlite) = sqlite {
        println!(
            "  SQLite ingest-only / ceiling            {:>6.2}x  [>= 0.3]",
            ratio(sqlite.ingest.rate, b.ceiling.rate)
        );
        println!(
            "  SQLite ingest-only / naive SQLite       {:>6.2}x  [>= 10]",
            ratio(sqlite.ingest.rate, b.naive_sqlite.rate)
        );
    }
    if let (Some(pg), Some(naive)) = (postgres, &b.naive_pg) {
        println!(
            "  PostgreSQL ingest-only / naive PG       {:>6.2}x  [>= 2]",
            ratio(pg.ingest.rate, naive.rate)
        );
    }
    if let (Some(ingest), Some(naive)) = (mysql, &b.naive_mysql) {
        println!(
            "  MariaDB ingest-only / naive MariaDB     {:>6.2}x  [>= 1.5]",
            ratio(ingest.rate, naive.rate)
        );
    }
    println!(
        "  forwarder ({:.0}/s) CPU per forwarded event: {:.0} us, bench {:.0} us",
        b.forwarder.rate,
        b.forwarder_cpu.server_us,
        b.forwarder_cpu.bench_us()
    );
    for (store, figures, end_to_end) in [("SQLite", sqlite, 0.4), ("PostgreSQL", postgres, 0.25)] {
        if let Some(f) = figures {
            forwarding(store, f, b.forwarder.rate, end_to_end);
            cpu(store, f);
        }
    }
}

/// `store`'s forwarding ratios; `end_to_end` is the target of end to end / forwarder.
fn forwarding(store: &str, f: &StoreFigures, forwarder: f64, end_to_end: f64) {
    println!(
        "  {store:<10} ingest with a route filter / without {:>6.2}x  [>= 0.9]",
        ratio(f.filtered_forwarding.rate, f.forwarding.rate)
    );
    println!(
        "  {store:<10} end to end / forwarder     {:>6.2}x  [>= {end_to_end}]  ({:.0} of {forwarder:.0} events/s held)",
        ratio(f.sustainable, forwarder),
        f.sustainable,
    );
    println!(
        "  {store:<10} forwarding rate / forwarder {:>5.2}x  ({:.0} deliveries/s, closed loop)",
        ratio(f.forwarded, forwarder),
        f.forwarded
    );
    println!(
        "  {store:<10} forwarding rate / ingest-only {:>5.2}x",
        ratio(f.forwarded, f.ingest.rate),
    );
    println!(
        "  {store:<10} sustainable / ingest-only   {:>6.2}x  ({:.0} of {:.0} events/s)",
        ratio(f.sustainable, f.ingest.rate),
        f.sustainable,
        f.ingest.rate
    );
    println!(
        "  {store:<10} p99 forwarding / ingest-only {:>5.2}x  [<= 2]",
        ratio(f.forwarding.p99.as_secs_f64(), f.ingest.p99.as_secs_f64())
    );
    println!(
        "  {store:<10} peak RSS, forwarding held  {:>6} MiB  [<= 64]",
        f.peak_rss_kib / 1024
    );
}

/// `store`'s CPU per ingested and per forwarded event, the latter beside its targets.
fn cpu(store: &str, f: &StoreFigures) {
    let (i, w) = (&f.ingest_cpu, &f.forward_cpu);
    println!(
        "  {store:<10} CPU per ingested event:  gateway {:>4.0} us, PostgreSQL {:>4.0} us, bench {:>4.0} us",
        i.server_us,
        i.postgres_us,
        i.bench_us()
    );
    let target = |before: f64, share: f64| {
        format!(
            "[<= {:.0}: {:.0} % of {before:.0}]",
            before * share,
            share * 100.0
        )
    };
    let gateway = GATEWAY_BEFORE_US
        .iter()
        .find(|(name, ..)| *name == store)
        .map_or(String::new(), |&(_, before, share)| target(before, share));
    let postgres = if store == "PostgreSQL" {
        target(POSTGRES_BEFORE_US.0, POSTGRES_BEFORE_US.1)
    } else {
        "(its engine is in the gateway's)".into()
    };
    println!(
        "  {store:<10} CPU per forwarded event: gateway {:>4.0} us {gateway}, PostgreSQL {:>4.0} us {postgres}, bench {:>4.0} us",
        w.server_us,
        w.postgres_us,
        w.bench_us()
    );
}
