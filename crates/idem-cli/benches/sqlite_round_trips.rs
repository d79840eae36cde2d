//! What a round trip to sqlx's SQLite worker thread costs, against the statements it carries:
//! `cargo bench -p idem-cli --bench sqlite_round_trips [-- TRANSACTIONS]`.
//!
//! sqlx runs each SQLite connection on a thread of its own and sends it every statement (and
//! `BEGIN` and `COMMIT`) over a channel, so each statement is a round trip between threads
//! (docs/gateway.md, "The whole bench after the cuts"). The same transaction of eight
//! single-row `INSERT`s on one connection (WAL, `synchronous = OFF`: no sync in the figures),
//! three ways, in one run:
//! - **a round trip per statement**: `BEGIN`, eight queries, `COMMIT` (ten round trips), as the
//!   gateway's transactions run today;
//! - **three round trips**: `BEGIN`, the eight statements as one multi-statement query with
//!   their binds (sqlx's SQLite driver binds each statement's `?` in turn), `COMMIT`;
//! - **one round trip**: the whole transaction as one text with its values written in (a
//!   lower bound only: it has no binds and no statement cache).
//!
//! Prints CPU time (user and system, the worker thread's included, from `/proc`:
//! [`proc_cpu::own`]) and wall time per transaction, each against the first, and the CPU of one
//! round trip. Linux only.

#[path = "common/proc_cpu.rs"]
mod proc_cpu;

use std::time::Instant;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
use sqlx::{AssertSqlSafe, ConnectOptions, Connection, Executor, SqliteConnection};

const STATEMENTS: i64 = 8;
const INSERT: &str = "INSERT OR REPLACE INTO t VALUES (?, ?)";

/// Runs `transactions` transactions with `one` and returns (CPU µs, wall µs) per transaction.
async fn measure<F>(conn: &mut SqliteConnection, transactions: i64, one: F) -> (f64, f64)
where
    F: AsyncFn(&mut SqliteConnection, i64),
{
    let (cpu, wall) = (proc_cpu::own(), Instant::now());
    for i in 0..transactions {
        one(conn, i).await;
    }
    let per = |seconds: f64| seconds / transactions as f64 * 1e6;
    (
        per((proc_cpu::own() - cpu).as_secs_f64()),
        per(wall.elapsed().as_secs_f64()),
    )
}

fn key(i: i64, j: i64) -> i64 {
    (i * STATEMENTS + j) % 1_000
}

async fn per_statement(conn: &mut SqliteConnection, i: i64) {
    let mut tx = conn.begin().await.expect("begin");
    for j in 0..STATEMENTS {
        sqlx::query(INSERT)
            .bind(key(i, j))
            .bind(i)
            .execute(&mut *tx)
            .await
            .expect("insert");
    }
    tx.commit().await.expect("commit");
}

async fn one_query(conn: &mut SqliteConnection, i: i64) {
    let text: String = (0..STATEMENTS).map(|_| format!("{INSERT};")).collect();
    let mut tx = conn.begin().await.expect("begin");
    let mut query = sqlx::query(AssertSqlSafe(text));
    for j in 0..STATEMENTS {
        query = query.bind(key(i, j)).bind(i);
    }
    query.execute(&mut *tx).await.expect("inserts");
    tx.commit().await.expect("commit");
}

async fn one_text(conn: &mut SqliteConnection, i: i64) {
    // Integers only: nothing to escape.
    let mut text = String::from("BEGIN;");
    for j in 0..STATEMENTS {
        text.push_str(&format!(
            "INSERT OR REPLACE INTO t VALUES ({}, {i});",
            key(i, j)
        ));
    }
    text.push_str("COMMIT;");
    sqlx::raw_sql(AssertSqlSafe(text))
        .execute(&mut *conn)
        .await
        .expect("transaction");
}

async fn run(transactions: i64) {
    let file = std::env::temp_dir().join(format!("idem-round-trips-{}.db", std::process::id()));
    let mut conn = SqliteConnectOptions::new()
        .filename(&file)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Off)
        .connect()
        .await
        .expect("open the database");
    conn.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v INTEGER)")
        .await
        .expect("create");
    println!(
        "{transactions} transactions of {STATEMENTS} single-row INSERTs each, per transaction:"
    );
    for round in 1..=2 {
        let a = measure(&mut conn, transactions, per_statement).await;
        let b = measure(&mut conn, transactions, one_query).await;
        let c = measure(&mut conn, transactions, one_text).await;
        let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM t WHERE v = ?")
            .bind(transactions - 1)
            .fetch_one(&mut conn)
            .await
            .expect("count");
        assert_eq!(
            rows, STATEMENTS,
            "every statement of the last transaction wrote its row"
        );
        println!("round {round}:");
        for (name, (cpu, wall)) in [
            ("a round trip per statement (10)", a),
            ("one query of 8 statements (3)", b),
            ("one text, no binds (1)", c),
        ] {
            println!(
                "  {name:34} CPU {cpu:6.1} us ({:.2}x)   wall {wall:6.1} us ({:.2}x)",
                cpu / a.0,
                wall / a.1
            );
        }
        println!(
            "  CPU of one round trip (first two lines): {:.1} us",
            (a.0 - b.0) / (STATEMENTS - 1) as f64
        );
    }
    drop(conn);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
    }
}

fn main() {
    let transactions = std::env::args()
        .skip(1)
        .find_map(|arg| arg.parse().ok())
        .unwrap_or(20_000);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(run(transactions));
}
