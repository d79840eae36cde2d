//! `idem check-config`: the configuration as it was read, never a credential.

use crate::support::IDEM;

/// `idem check-config` hides a password given in a database URL's query string (sqlx reads
/// `password` and `sslpassword` there), the gateway's and a relay's; a bad `database_url` is
/// refused without it too.
#[test]
fn check_config_hides_query_string_passwords() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("idem.toml");
    std::fs::write(
        &path,
        r#"
database_url = "postgres://postgres@127.0.0.1:5999/x?password=s3cret"

[[relay]]
name = "out"
database_url = "postgres://app@127.0.0.1/app?sslmode=require&sslpassword=k3y"
target = "http"
url = "http://127.0.0.1:3000"
"#,
    )
    .unwrap();
    let check = |path: &std::path::Path| {
        std::process::Command::new(IDEM)
            .args(["--config", path.to_str().unwrap(), "check-config"])
            .output()
            .unwrap()
    };
    let output = check(&path);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(
        stdout.contains("  database      postgres://***@127.0.0.1:5999/x?password=***\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "relay         out: idem_outbox of postgres://***@127.0.0.1/app?sslmode=require&sslpassword=*** -> http at http://127.0.0.1:3000"
        ),
        "{stdout}"
    );
    for secret in ["s3cret", "k3y"] {
        assert!(!stdout.contains(secret), "{stdout}");
    }

    std::fs::write(&path, "database_url = \"redis://db/x?password=s3cret\"\n").unwrap();
    let output = check(&path);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("database_url = \"redis://db/x?password=***\" is not valid"),
        "{stderr}"
    );
    assert!(!stderr.contains("s3cret"), "{stderr}");
}

/// `idem check-config` shows broker sources and relays, never their credentials, and opens no
/// connection.
#[test]
fn check_config_shows_broker_sources_and_relays_without_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("idem.toml");
    std::fs::write(
        &path,
        r#"
database_url = "postgres://gw:t0ps3cret@127.0.0.1/gw"

[[source]]
name = "orders"
kind = "nats"
url = "nats://user:hunter2@127.0.0.1:4222"
stream = "ORDERS"
subject = "orders.>"

[[source]]
name = "billing"
kind = "rabbitmq"
url_env = "CHECK_AMQP_URL"
queue = "billing-events"

[[relay]]
name = "out"
database_url = "postgres://app:pw@127.0.0.1/app"
target = "http"
url = "http://127.0.0.1:3000"
"#,
    )
    .unwrap();
    let output = std::process::Command::new(IDEM)
        .args(["--config", path.to_str().unwrap(), "check-config"])
        .env("CHECK_AMQP_URL", "amqp://guest:s3cret@127.0.0.1:5672/%2f")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(
        stdout.contains(
            "source        orders (nats, stream ORDERS (orders.>) as idem-gateway-orders at nats://***@127.0.0.1:4222)"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "source        billing (rabbitmq, queue billing-events at amqp://***@127.0.0.1:5672/%2f)"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("relay         out: idem_outbox of postgres://***@127.0.0.1/app -> http at http://127.0.0.1:3000"),
        "{stdout}"
    );
    assert!(
        stdout.contains("  database      postgres://***@127.0.0.1/gw\n"),
        "{stdout}"
    );
    for secret in ["hunter2", "s3cret", "pw@", "t0ps3cret"] {
        assert!(!stdout.contains(secret), "{stdout}");
    }
}

/// Issue 16: `idem check-config` refuses a `ca_file` it cannot read or use, naming the key and
/// the path, and shows a destination's rate limit.
#[test]
fn check_config_names_an_unreadable_or_invalid_ca_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("idem.toml");
    let config = |extra: &str| {
        format!(
            "[[destination]]\nname = \"app\"\nurl = \"https://hooks.example.com/events\"\nsigning_secret_env = \"CHECK_APP_SECRET\"\n{extra}\n"
        )
    };
    let check = |text: String| {
        std::fs::write(&path, text).unwrap();
        std::process::Command::new(IDEM)
            .args(["--config", path.to_str().unwrap(), "check-config"])
            .env("CHECK_APP_SECRET", "whsec_c2VjcmV0LWZvci10aGUtYXBw")
            .output()
            .unwrap()
    };
    let missing = dir.path().join("missing-ca.pem");
    let output = check(config(&format!("ca_file = \"{}\"", missing.display())));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains(&format!(
            "destination \"app\" ca_file = \"{}\" cannot be read: No such file or directory",
            missing.display()
        )),
        "{stderr}"
    );
    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, "-----BEGIN CERTIFICATE-----\nnot base64!\n").unwrap();
    let output = check(config(&format!("ca_file = \"{}\"", garbage.display())));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains(&format!(
            "destination \"app\" ca_file = \"{}\" is not valid PEM",
            garbage.display()
        )),
        "{stderr}"
    );

    let output = check(config("rate_limit = \"200/s\""));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(
        stdout.contains(
            "destination   app -> https://hooks.example.com/events (rate limit 200/s per process)"
        ),
        "{stdout}"
    );
}

/// `idem check-config` shows every setting a reader checks it for: the admin and metrics
/// addresses, a route's event types, and a destination URL without its user and password.
#[test]
fn check_config_shows_listeners_event_types_and_hides_destination_passwords() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("idem.toml");
    std::fs::write(
        &path,
        r#"
admin_token_env = "CHECK_ADMIN_TOKEN"
admin_listen = "127.0.0.1:9101"
metrics_listen = "127.0.0.1:9102"
retired_routes = ["stripe-legacy"]

[[source]]
name = "stripe"
kind = "stripe"
secrets_env = ["CHECK_STRIPE_SECRET"]

[[destination]]
name = "app"
url = "http://hook:hookpw@127.0.0.1:3000/events"
signing_secret_env = "CHECK_APP_SECRET"

[[route]]
name = "stripe-invoices"
renamed_from = "stripe.app"
source = "stripe"
destination = "app"
event_types = ["invoice.paid", "invoice.voided"]
"#,
    )
    .unwrap();
    let output = std::process::Command::new(IDEM)
        .args(["--config", path.to_str().unwrap(), "check-config"])
        .env(
            "CHECK_ADMIN_TOKEN",
            "a-long-enough-admin-token-for-the-check",
        )
        .env("CHECK_STRIPE_SECRET", "whsec_test_stripe")
        .env("CHECK_APP_SECRET", "whsec_c2VjcmV0LWZvci10aGUtYXBw")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("  admin listen  127.0.0.1:9101\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("  metrics listen 127.0.0.1:9102\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("destination   app -> http://***@127.0.0.1:3000/events"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "  route         stripe-invoices: stripe -> app (ordering drop-stale, event types invoice.paid, invoice.voided, renamed from stripe.app)\n"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("  retired route stripe-legacy\n"),
        "{stdout}"
    );
    assert!(!stdout.contains("hookpw"), "{stdout}");
}

/// Issue 30: `idem check-config` shows a broker destination's kind, server (without its
/// password) and subject, exchange or topic, and reaches no broker: the servers here do not
/// exist.
#[test]
fn check_config_shows_broker_destinations_without_connecting() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("idem.toml");
    std::fs::write(
        &path,
        r#"
[[destination]]
name = "bus"
kind = "nats"
url = "nats://user:hunter2@127.0.0.1:1"
subject = "billing.events"

[[destination]]
name = "audit"
kind = "rabbitmq"
url = "amqp://guest:s3cret@127.0.0.1:1/%2f"
exchange = "events"

[[destination]]
name = "log"
kind = "kafka"
bootstrap = "127.0.0.1:1,127.0.0.1:2"
topic = "billing-events"
"#,
    )
    .unwrap();
    let output = std::process::Command::new(IDEM)
        .args(["--config", path.to_str().unwrap(), "check-config"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for line in [
        "destination   bus -> nats nats://***@127.0.0.1:1 subject billing.events\n",
        "destination   audit -> rabbitmq amqp://***@127.0.0.1:1/%2f exchange events (routing key: the event type)\n",
        "destination   log -> kafka 127.0.0.1:1,127.0.0.1:2 topic billing-events\n",
    ] {
        assert!(stdout.contains(line), "{line}\n{stdout}");
    }
    for secret in ["hunter2", "s3cret"] {
        assert!(!stdout.contains(secret), "{stdout}");
    }
}

/// `idem check-config` prints the warnings of a configuration that would lose events silently
/// (a source no route leaves, an `event_types` typo) and passes; with `--strict` it exits 1.
#[test]
fn check_config_warns_about_unrouted_events_and_strict_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("idem.toml");
    std::fs::write(
        &path,
        r#"
[[source]]
name = "github"
kind = "github"
secrets_env = ["GH_SECRET"]

[[source]]
name = "orphan"
kind = "github"
secrets_env = ["GH_SECRET"]

[[destination]]
name = "app"
url = "http://127.0.0.1:9/events"
signing_secret_env = "APP_SECRET"

[[route]]
source = "github"
destination = "app"
event_types = ["pull-request"]
"#,
    )
    .unwrap();
    let check = |strict: bool| {
        let mut command = std::process::Command::new(IDEM);
        command
            .args(["--config", path.to_str().unwrap(), "check-config"])
            .env("GH_SECRET", "s")
            .env("APP_SECRET", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
        if strict {
            command.arg("--strict");
        }
        command.output().unwrap()
    };
    let output = check(false);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    let warnings: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("warning: "))
        .collect();
    assert_eq!(warnings.len(), 2, "{stdout}");
    assert!(
        warnings[0].contains("source \"orphan\" has no route"),
        "{stdout}"
    );
    assert!(
        warnings[1].contains("route \"github.app\" event_types \"pull-request\"")
            && warnings[1].contains("did you mean pull_request"),
        "{stdout}"
    );
    let output = check(true);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("refused (--strict): 2 warning(s)"),
        "{stdout}"
    );
}
