//! `idem-lint --inventory` on the fixture tree `tests/inventory/`: every handler with exactly
//! the role, consumer name, marker kind and verdict its fixture was written for; the join with
//! registry rows; the formats; bad input.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

fn tree() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/inventory")
}

/// Runs `idem-lint` in the fixture tree (so its `idem-lint.toml` names the Celery task).
fn run(args: &[&str], stdin: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_idem-lint"));
    cmd.args(args).current_dir(tree());
    if let Some(text) = stdin {
        use std::io::Write;
        let mut child = cmd
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("idem-lint starts");
        // A run that rejects its arguments may exit before reading its input: the pipe is then
        // closed under the write, which is no failure of the test.
        if let Err(e) = child
            .stdin
            .take()
            .expect("stdin")
            .write_all(text.as_bytes())
        {
            assert_eq!(
                e.kind(),
                std::io::ErrorKind::BrokenPipe,
                "rows written: {e}"
            );
        }
        return child.wait_with_output().expect("idem-lint runs");
    }
    cmd.output().expect("idem-lint runs")
}

/// The line of `file` (under the tree) that holds `needle`: where the fixture writes the handler.
fn line_of(file: &str, needle: &str) -> u64 {
    let text = std::fs::read_to_string(tree().join(file)).expect("fixture reads");
    let at = text.lines().position(|l| l.contains(needle));
    at.map(|i| i as u64 + 1)
        .unwrap_or_else(|| panic!("{needle:?} not in {file}"))
}

/// What each fixture was written to be: file, the text on the handler's line, function, role,
/// consumer and where its name comes from, marker, verdict.
type Expected = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    Option<(&'static str, &'static str)>,
    &'static str,
    &'static str,
);

const EXPECTED: &[Expected] = &[
    (
        "consumers/audit.js",
        "channel.consume(",
        "<anonymous>",
        "broker_consumer",
        Some(("audit-log", "registration")),
        "none",
        "not_applicable",
    ),
    (
        "consumers/billing.ts",
        "eachMessage:",
        "eachMessage",
        "broker_consumer",
        Some(("billing-group", "registration")),
        "table",
        "outside_transaction",
    ),
    (
        "consumers/orders.ts",
        "function handleOrderEvent",
        "handleOrderEvent",
        "broker_consumer",
        Some(("orders_v1", "idem")),
        "idem",
        "same_transaction",
    ),
    (
        "consumers/shipping.py",
        "def on_shipment",
        "on_shipment",
        "broker_consumer",
        Some(("shipping", "registration")),
        "table",
        "outside_transaction",
    ),
    (
        "go/github/webhook.go",
        "func githubWebhook",
        "githubWebhook",
        "webhook_route",
        None,
        "none",
        "not_applicable",
    ),
    (
        "go/ledger/consumer.go",
        "func handleLedgerEntry",
        "handleLedgerEntry",
        "broker_consumer",
        Some(("ledger_v2", "registration")),
        "table",
        "same_transaction",
    ),
    (
        "go/payments/reader.go",
        "func run(",
        "run",
        "broker_consumer",
        Some(("payments-reader", "registration")),
        "none",
        "not_applicable",
    ),
    (
        "jobs/invoices.py",
        "def sync_invoice",
        "sync_invoice",
        "job",
        Some(("invoice_sync_v1", "config")),
        "table",
        "same_transaction",
    ),
    (
        "scripts/shipments.py",
        "for message in consumer:",
        "<module>",
        "broker_consumer",
        Some(("shipments_v3", "registration")),
        "table",
        "same_transaction",
    ),
    (
        "webhooks/shopify.py",
        "def shopify_webhook",
        "shopify_webhook",
        "webhook_route",
        None,
        "redis",
        "outside_transaction",
    ),
    (
        "webhooks/stripe.js",
        "app.post(",
        "<anonymous>",
        "webhook_route",
        None,
        "table",
        "same_transaction",
    ),
    (
        "workers/email.js",
        "emailQueue.process(",
        "<anonymous>",
        "job",
        None,
        "redis",
        "outside_transaction",
    ),
];

fn expected_json(e: &Expected) -> Value {
    let (file, needle, function, kind, consumer, marker, verdict) = *e;
    json!({
        "path": format!("./{file}"),
        "line": line_of(file, needle),
        "function": function,
        "kind": kind,
        "consumer": consumer.map(|c| c.0),
        "consumer_source": consumer.map(|c| c.1),
        "marker": marker,
        "verdict": verdict,
    })
}

/// A handler's JSON without the registration text (the linter's reading, not the design).
fn designed(h: &Value) -> Value {
    let mut h = h.clone();
    h.as_object_mut().expect("object").remove("registration");
    h
}

fn json_of(o: &Output) -> Value {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("JSON")
}

#[test]
fn inventory_lists_each_handler_with_its_role_name_marker_and_verdict() {
    let out = json_of(&run(&["--inventory", "--format", "json", "."], None));
    let found: Vec<Value> = out["handlers"]
        .as_array()
        .expect("handlers")
        .iter()
        .map(designed)
        .collect();
    let expected: Vec<Value> = EXPECTED.iter().map(expected_json).collect();
    assert_eq!(found, expected);
    assert_eq!(out["registry"], Value::Null);
    assert_eq!(out["skipped"], json!([]));
}

#[test]
fn inventory_text_and_markdown_have_a_row_per_handler() {
    let text = run(&["--inventory", "."], None);
    assert_eq!(text.status.code(), Some(0));
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    let md = run(&["--inventory", "--format", "markdown", "."], None);
    assert_eq!(md.status.code(), Some(0));
    let md = String::from_utf8_lossy(&md.stdout).into_owned();
    assert!(
        md.contains("| handler | function | kind | consumer | marker | verdict |"),
        "{md}"
    );
    for e in EXPECTED {
        let (file, needle, function, kind, consumer, marker, verdict) = *e;
        let site = format!("./{file}:{}", line_of(file, needle));
        let name = consumer.map_or("-".to_string(), |(n, s)| format!("{n} ({s})"));
        let row = text
            .lines()
            .find(|l| l.starts_with(&format!("{site} ")))
            .unwrap_or_else(|| panic!("no text row for {site}:\n{text}"));
        let cols: Vec<&str> = row
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        assert_eq!(
            cols,
            [site.as_str(), function, kind, &name, marker, verdict],
            "{row}"
        );
        let md_function = function.replace('<', "&lt;").replace('>', "&gt;");
        let md_row = format!("| {site} | {md_function} | {kind} | {name} | {marker} | {verdict} |");
        assert!(md.contains(&md_row), "no {md_row} in\n{md}");
    }
    assert!(
        text.contains(&format!("idem lint: {} handlers in", EXPECTED.len())),
        "{text}"
    );
}

/// Registry rows: two consumers the code runs, one running with no handler in the code (and a
/// gateway source, which has no handler to find).
const ROWS: &str = r#"[
  {"consumer": "billing-group", "kind": "kafka", "first_seen": 1000, "first_seen_exact": true, "last_seen": 5000},
  {"consumer": "orders_v1", "kind": "runner", "first_seen": 2000, "first_seen_exact": false, "last_seen": 6000},
  {"consumer": "refunds_v1", "kind": "runner", "first_seen": 3000, "first_seen_exact": true, "last_seen": 7000},
  {"consumer": "stripe", "kind": "gateway_source", "first_seen": 3000, "first_seen_exact": true, "last_seen": 7000}
]"#;

#[test]
fn the_registry_join_names_what_runs_unseen_and_what_has_no_marker() {
    let out = json_of(&run(
        &["--inventory", "--format", "json", "--registry", "-", "."],
        Some(ROWS),
    ));
    let registry = &out["registry"];
    assert_eq!(
        registry["running_not_in_code"],
        json!([{"consumer": "refunds_v1", "kind": "runner", "first_seen": 3000, "first_seen_exact": true, "last_seen": 7000}])
    );
    let handlers = |key: &str| -> Vec<Value> {
        registry[key]
            .as_array()
            .expect("list")
            .iter()
            .map(designed)
            .collect()
    };
    let no_marker: Vec<Value> = EXPECTED
        .iter()
        .filter(|e| e.5 == "none")
        .map(expected_json)
        .collect();
    assert_eq!(handlers("in_code_no_marker"), no_marker);
    let running = ["billing-group", "orders_v1", "refunds_v1", "stripe"];
    let never_seen: Vec<Value> = EXPECTED
        .iter()
        .filter(|e| e.4.is_some_and(|(name, _)| !running.contains(&name)))
        .map(expected_json)
        .collect();
    assert_eq!(handlers("in_code_never_seen"), never_seen);

    let text = run(&["--inventory", "--registry", "-", "."], Some(ROWS));
    assert_eq!(text.status.code(), Some(0));
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    let section = |title: &str| -> String {
        let start = text
            .find(title)
            .unwrap_or_else(|| panic!("no {title} in\n{text}"));
        text[start..].split("\n\n").next().unwrap_or("").to_string()
    };
    let running_section = section("Running, not in code:");
    assert!(running_section.contains("refunds_v1"), "{running_section}");
    assert!(!running_section.contains("orders_v1") && !running_section.contains("stripe"));
    let no_marker_section = section("In code, no marker:");
    for e in EXPECTED {
        let site = format!("./{}:{}", e.0, line_of(e.0, e.1));
        assert_eq!(
            no_marker_section.contains(&site),
            e.5 == "none",
            "{site}: {no_marker_section}"
        );
    }
}

#[test]
fn bad_input_exits_2_naming_the_problem() {
    let missing = run(&["--inventory", "no/such/dir"], None);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no/such/dir"));

    let bad_rows = run(
        &["--inventory", "--registry", "-", "."],
        Some("{\"consumer\": 1}"),
    );
    assert_eq!(bad_rows.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad_rows.stderr).into_owned();
    assert!(
        err.contains("bad consumer registry from standard input"),
        "{err}"
    );
    assert!(err.contains("expected a JSON array"), "{err}");

    let sarif = run(&["--inventory", "--format", "sarif", "."], None);
    assert_eq!(sarif.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&sarif.stderr)
            .contains("with --inventory use text, json or markdown")
    );

    let database = run(&["--inventory", "--database", "sqlite://x.db", "."], None);
    assert_eq!(database.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&database.stderr).contains("idem lint --inventory --database URL")
    );

    let registry_alone = run(&["--registry", "-", "."], Some("[]"));
    assert_eq!(registry_alone.status.code(), Some(2));
}

#[test]
fn an_inventory_name_without_a_consumer_is_a_config_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("idem-lint.toml"),
        "[[inventory.names]]\npath = \"jobs/**\"\nconsumer = \" \"\n",
    )
    .expect("config");
    let out = Command::new(env!("CARGO_BIN_EXE_idem-lint"))
        .args(["--inventory", "."])
        .current_dir(dir.path())
        .output()
        .expect("idem-lint runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        err.contains("inventory.names[0]") && err.contains("consumer is empty"),
        "{err}"
    );
}
