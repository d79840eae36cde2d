//! `idem lint --inventory --database URL`: the consumer registry of a real SQLite database
//! (migrated by idem-sql; consumers registered by runners and by the kinds the broker
//! consumers and the gateway register) reaches `idem-lint` as its `--registry -` rows, and,
//! joined with idem-lint's fixture tree, names the consumers running with no handler in the
//! code and the handlers with no marker. Bad databases exit 2 naming the problem.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use idem_core::Name;
use idem_lint::{Config, Linter, RegistryRow};
use idem_sql::sqlx::Sqlite;
use idem_sql::{ConsumerKind, Runner, Store};

use crate::support::IDEM;

/// idem-lint's fixture tree of handlers (one per language and marker kind).
fn tree() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../idem-lint/tests/inventory")
}

/// `idem` copied into `dir` beside a stand-in `idem-lint` that records its arguments (one a
/// line, in `args`) and its standard input (in `rows.json`).
fn idem_beside_a_recorder(dir: &Path) -> PathBuf {
    let idem = dir.join("idem");
    crate::support::install_executable(Path::new(IDEM), &idem);
    let lint = dir.join("idem-lint");
    crate::support::install_script(
        &lint,
        &format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" > {}\ncat > {}\n",
            dir.join("args").display(),
            dir.join("rows.json").display()
        ),
    );
    idem
}

/// `idem lint args…` (the recorder beside `idem` is found before any on PATH).
fn lint(idem: &Path, args: &[&str]) -> Output {
    Command::new(idem).arg("lint").args(args).output().unwrap()
}

/// The registry: the Kafka consumer and the idem runner the code has, a runner the code no
/// longer has, and a gateway source (configured, never code).
async fn registry(url: &str) {
    let store = Store::<Sqlite>::connect(url).await.unwrap();
    store.migrate().await.unwrap();
    let name = |n: &str| Name::new("consumer", n).unwrap();
    let _orders = Runner::new(store.clone(), &name("orders_v1"));
    let _refunds = Runner::new(store.clone(), &name("refunds_v1"));
    store.register_consumer(&name("billing-group"), ConsumerKind::Kafka);
    store.register_consumer(&name("stripe"), ConsumerKind::GatewaySource);
    store.flush_consumer_counts().await.unwrap();
}

#[tokio::test]
async fn the_registry_reaches_idem_lint_and_the_join_names_what_runs_unseen_and_what_has_no_marker()
{
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("app.db").display());
    registry(&url).await;
    let idem = idem_beside_a_recorder(dir.path());
    let tree = tree();
    let tree_arg = tree.to_str().unwrap();

    let out = lint(
        &idem,
        &[
            "--inventory",
            "--format",
            "json",
            "--database",
            &url,
            tree_arg,
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("args")).unwrap(),
        format!("--inventory\n--format\njson\n{tree_arg}\n--registry\n-\n"),
        "--database is read by idem and replaced by the rows"
    );
    let text = std::fs::read_to_string(dir.path().join("rows.json")).unwrap();
    let rows = RegistryRow::parse_all(&text, "the recorded standard input").unwrap();
    let mut kinds: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r.consumer.as_str(), r.kind.as_str()))
        .collect();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            ("billing-group", "kafka"),
            ("orders_v1", "runner"),
            ("refunds_v1", "runner"),
            ("stripe", "gateway_source"),
        ]
    );
    assert!(
        rows.iter()
            .all(|r| r.first_seen_exact && r.last_seen >= r.first_seen)
    );

    // The rows as idem-lint joins them with the tree's handlers.
    let config = Config::load(&tree.join("idem-lint.toml")).unwrap();
    let inventory = Linter::new()
        .config(config)
        .inventory(std::slice::from_ref(&tree))
        .unwrap();
    let join = inventory.join(&rows);
    let running: Vec<&str> = join
        .running_not_in_code
        .iter()
        .map(|r| r.consumer.as_str())
        .collect();
    // orders_v1 and billing-group have handlers; stripe is a gateway source, never code.
    assert_eq!(running, ["refunds_v1"]);
    let no_marker: Vec<(PathBuf, &str)> = join
        .in_code_no_marker
        .iter()
        .map(|h| (h.path.clone(), h.function.as_str()))
        .collect();
    assert_eq!(
        no_marker,
        [
            (tree.join("consumers/audit.js"), "<anonymous>"),
            (tree.join("go/github/webhook.go"), "githubWebhook"),
            (tree.join("go/payments/reader.go"), "run"),
        ]
    );

    let text = idem_lint::inventory_to_text(&inventory, Some(&join));
    let section = |title: &str| -> String {
        let start = text
            .find(title)
            .unwrap_or_else(|| panic!("no {title} in\n{text}"));
        text[start..].split("\n\n").next().unwrap().to_string()
    };
    let running_text = section("Running, not in code:");
    assert_eq!(
        running_text.lines().count(),
        3,
        "title, header, one row:\n{running_text}"
    );
    assert!(
        running_text
            .lines()
            .nth(2)
            .unwrap()
            .starts_with("refunds_v1 "),
        "{running_text}"
    );
    let no_marker_text = section("In code, no marker:");
    assert_eq!(
        no_marker_text.lines().count(),
        5,
        "title, header, three rows:\n{no_marker_text}"
    );
    assert!(
        no_marker_text.contains("consumers/audit.js:")
            && no_marker_text.contains("go/github/webhook.go:")
            && no_marker_text.contains("go/payments/reader.go:")
    );

    let json = idem_lint::inventory_to_json(&inventory, Some(&join));
    assert_eq!(
        json["registry"]["running_not_in_code"][0]["consumer"],
        "refunds_v1"
    );
    assert_eq!(
        json["registry"]["running_not_in_code"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let functions: Vec<&str> = json["registry"]["in_code_no_marker"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["function"].as_str().unwrap())
        .collect();
    assert_eq!(functions, ["<anonymous>", "githubWebhook", "run"]);
}

#[tokio::test]
async fn bad_databases_exit_2_naming_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let idem = idem_beside_a_recorder(dir.path());
    let stderr = |out: &Output| String::from_utf8_lossy(&out.stderr).into_owned();

    let missing = dir.path().join("missing.db");
    let out = lint(
        &idem,
        &[
            "--inventory",
            "--database",
            &format!("sqlite://{}", missing.display()),
            ".",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("idem_consumers"), "{}", stderr(&out));
    assert!(!missing.exists(), "a missing SQLite file is never created");

    let out = lint(
        &idem,
        &["--inventory", "--database", "redis://localhost/0", "."],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("is not sqlite://, postgres:// or mysql://"),
        "{}",
        stderr(&out)
    );

    // A database of the application with none of idem's tables.
    let other = dir.path().join("other.db");
    let pool =
        idem_sql::sqlx::SqlitePool::connect(&format!("sqlite://{}?mode=rwc", other.display()))
            .await
            .unwrap();
    idem_sql::sqlx::query("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    let out = lint(
        &idem,
        &[
            "--inventory",
            "--database",
            &format!("sqlite://{}", other.display()),
            ".",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no idem_consumers table at"),
        "{}",
        stderr(&out)
    );

    let out = lint(&idem, &["--database", "sqlite://x.db", "."]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("add --inventory"), "{}", stderr(&out));

    let out = lint(&idem, &["--inventory", "--database"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--database needs a URL"),
        "{}",
        stderr(&out)
    );
    assert!(
        !dir.path().join("args").exists(),
        "idem-lint never ran on bad input"
    );
}
