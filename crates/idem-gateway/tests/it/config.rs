//! Configuration: the issue's example loads; anything that would make a source accept what it
//! should refuse stops the start, naming the problem (fail closed, C9).

use std::time::Duration;

use idem_gateway::{Config, ConfigError, Ordering, SourceKind};

use crate::support::env;

const EXAMPLE: &str = r#"
listen = "127.0.0.1:8080"
database_url = "sqlite://./idem-data/idem.db"
retention = "30d"

[[source]]
name = "stripe"
kind = "stripe"
secrets_env = ["STRIPE_SECRET"]

[[source]]
name = "acme"
kind = "generic"
secrets_env = ["GITHUB_SECRET"]
signature_header = "X-Acme-Signature"
id = { header = "X-Event-Id" }
entity = { json = "$.order.id" }
version = { json = "$.order.version", type = "integer" }

[[destination]]
name = "app"
url = "http://127.0.0.1:3000/events"
timeout = "10s"
retry_schedule = ["5s", "30s", "5m", "30m", "2h", "8h", "24h"]
signing_secret_env = "APP_SECRET"

[[route]]
source = "stripe"
destination = "app"
event_types = ["customer.subscription.*", "invoice.*"]
ordering = "drop-stale"
"#;

#[test]
fn the_issue_example_loads() {
    let config = Config::from_toml(EXAMPLE, &env).unwrap();
    assert_eq!(config.listen.to_string(), "127.0.0.1:8080");
    assert_eq!(
        config.retention,
        idem_gateway::Retention::For(Duration::from_secs(30 * 86_400))
    );
    assert_eq!(config.sources[0].kind, SourceKind::Stripe);
    assert_eq!(config.sources[1].kind, SourceKind::Generic);
    let app = &config.destinations[0];
    assert_eq!(app.timeout, Duration::from_secs(10));
    assert_eq!(app.retry_schedule.len(), 7);
    assert_eq!(app.retry_schedule[2], Duration::from_secs(300));
    let route = &config.routes[0];
    assert_eq!(route.name.as_str(), "stripe.app");
    assert_eq!(route.ordering, Ordering::DropStale);
    assert!(route.matches(Some("customer.subscription.updated")));
    assert!(route.matches(Some("invoice.paid")));
    assert!(!route.matches(Some("customer.created")));
    assert!(!route.matches(None));
}

#[test]
fn defaults_without_a_file() {
    let config = Config::defaults();
    assert_eq!(config.listen.to_string(), "127.0.0.1:8080");
    assert_eq!(config.database_url, "sqlite://./idem-data/idem.db");
    assert_eq!(config.max_body_bytes, 1024 * 1024);
    assert!(config.group_commit);
    assert!(config.sources.is_empty());
    // The deadlines of the issue "Gateway under faults", as a load balancer and a sender with a
    // 10 s timeout expect them.
    let secs = Duration::from_secs;
    assert_eq!(config.header_read_timeout, secs(10));
    assert_eq!(config.body_read_timeout, secs(30));
    assert_eq!(config.database_timeout, secs(2));
    assert_eq!(config.readyz_timeout, secs(1));
    assert_eq!(config.shutdown_grace, secs(10));
    assert_eq!((config.admin_listen, config.metrics_listen), (None, None));
}

/// Each deadline is refused outside its range, naming the key and the range.
#[test]
fn deadlines_out_of_range_are_refused() {
    for (key, value, range) in [
        ("header_read_timeout", "50ms", "between 100ms and 1h"),
        ("body_read_timeout", "2h", "between 100ms and 1h"),
        ("database_timeout", "2m", "between 100ms and 1m"),
        ("readyz_timeout", "10ms", "between 100ms and 1m"),
        ("shutdown_grace", "99ms", "between 100ms and 1h"),
    ] {
        let message = error(&format!("{key} = \"{value}\"\n{EXAMPLE}"));
        assert!(
            message.contains(key) && message.contains(range),
            "{key} = {value}: {message}"
        );
    }
}

fn error(text: &str) -> String {
    Config::from_toml(text, &env).unwrap_err().to_string()
}

/// A number of the wrong sign or size is said once, in the configuration's words: the error
/// carries no source that a reporter would print a second time.
#[test]
fn a_bad_number_is_said_once_in_plain_words() {
    for (value, said) in [
        ("-5", "invalid value: integer `-5`, expected a whole number"),
        (
            "99999999999999999999999",
            "invalid type: integer `99999999999999999999999`, expected a whole number",
        ),
    ] {
        let text = format!("max_body_bytes = {value}\n{EXAMPLE}");
        let err = Config::from_toml(&text, &env).unwrap_err();
        let message = err.to_string();
        assert!(
            message.starts_with("configuration is not valid: TOML parse error at line 1"),
            "{message}"
        );
        assert!(message.contains(said), "{message}");
        assert_eq!(message.matches("TOML parse error").count(), 1, "{message}");
        assert!(std::error::Error::source(&err).is_none());
    }
}

/// A source named `..` would have an endpoint (`/webhooks/..`) that HTTP clients rewrite away.
#[test]
fn a_name_of_dots_is_refused() {
    let text = EXAMPLE.replace("name = \"stripe\"", "name = \"..\"");
    let message = error(&text);
    assert!(message.contains("\"..\" is not valid"), "{message}");
    assert!(message.contains("not only dots"), "{message}");
}

#[test]
fn unknown_kind_is_refused_naming_it() {
    let text = EXAMPLE.replace("kind = \"stripe\"", "kind = \"strype\"");
    assert_eq!(
        error(&text),
        "source \"stripe\" has unknown kind \"strype\"; expected stripe, github, shopify, standard-webhooks, generic, nats, rabbitmq or kafka"
    );
}

#[test]
fn missing_secret_is_refused_naming_the_variable() {
    let text = EXAMPLE.replace("[\"STRIPE_SECRET\"]", "[\"STRIPE_SECRET_UNSET\"]");
    assert_eq!(
        error(&text),
        "source \"stripe\" needs its secret in environment variable STRIPE_SECRET_UNSET, which is not set"
    );
    let text = EXAMPLE.replace("\"APP_SECRET\"", "\"APP_SECRET_UNSET\"");
    assert!(error(&text).contains("APP_SECRET_UNSET"));
    let text = EXAMPLE.replace("secrets_env = [\"STRIPE_SECRET\"]", "secrets_env = []");
    assert!(
        error(&text).starts_with("source \"stripe\": no Stripe secret configured"),
        "{}",
        error(&text)
    );
}

/// A variable name that is empty, a variable set to nothing, an empty name, a number written as
/// text: each refused with what is wrong in the configuration's words, said once.
#[test]
fn empty_names_and_wrong_types_are_named_plainly() {
    let text = EXAMPLE.replace("[\"STRIPE_SECRET\"]", "[\"\"]");
    assert_eq!(
        error(&text),
        "source \"stripe\" names its secret's environment variable as \"\"; expected the name of a variable, such as STRIPE_SECRET"
    );
    let text = EXAMPLE.replace("[\"STRIPE_SECRET\"]", "[\"EMPTY_SECRET\"]");
    let empty = |var: &str| {
        (var == "EMPTY_SECRET")
            .then(String::new)
            .or_else(|| env(var))
    };
    assert_eq!(
        Config::from_toml(&text, &empty).unwrap_err().to_string(),
        "source \"stripe\" needs its secret in environment variable EMPTY_SECRET, which is set but empty"
    );
    let text = EXAMPLE.replace("name = \"stripe\"", "name = \"\"");
    let message = error(&text);
    assert_eq!(message.matches("expected").count(), 1, "{message}");
    assert!(
        message.starts_with("source.name: source \"\" is not a valid name; expected 1 to 64"),
        "{message}"
    );
    let message = error(&with_destination_line("concurrency = \"8\""));
    assert!(
        message.contains("expected a whole number") && !message.contains("usize"),
        "{message}"
    );
}

#[test]
fn retention_shorter_than_the_horizon_is_refused_naming_both_numbers() {
    let text = EXAMPLE.replace("retention = \"30d\"", "retention = \"1d\"");
    let message = error(&text);
    assert!(message.contains("source \"stripe\" (stripe)"), "{message}");
    assert!(
        message.contains("86400 s") && message.contains("259200 s"),
        "{message}"
    );
}

#[test]
fn bad_shapes_are_named() {
    let ftp = EXAMPLE.replace("http://127.0.0.1:3000", "ftp://example.invalid");
    assert_eq!(
        error(&ftp),
        "destination \"app\" url = \"ftp://example.invalid/events\" is not valid; expected an http:// or https:// URL"
    );
    // A URL's user and password are never shown, in an error either.
    let ftp_with_password =
        EXAMPLE.replace("http://127.0.0.1:3000", "ftp://bob:destpw@example.invalid");
    assert_eq!(
        error(&ftp_with_password),
        "destination \"app\" url = \"ftp://***@example.invalid/events\" is not valid; expected an http:// or https:// URL"
    );
    let https = EXAMPLE.replace("http://127.0.0.1:3000", "https://example.invalid");
    assert!(Config::from_toml(&https, &env).is_ok());
    let unknown_dest = EXAMPLE.replace("destination = \"app\"", "destination = \"nowhere\"");
    assert_eq!(
        error(&unknown_dest),
        "route \"stripe.nowhere\" names destination \"nowhere\", which is not configured"
    );
    let bad_duration = EXAMPLE.replace("timeout = \"10s\"", "timeout = \"ten\"");
    assert!(
        error(&bad_duration).contains("\"ten\" is not a duration"),
        "{}",
        error(&bad_duration)
    );
    let typo = EXAMPLE.replace("retention =", "retension =");
    assert!(error(&typo).contains("retension"), "{}", error(&typo));
    assert!(matches!(
        Config::from_toml("listen = \"nowhere\"", &env),
        Err(ConfigError::BadValue { .. })
    ));
}

fn with_destination_line(line: &str) -> String {
    EXAMPLE.replace(
        "signing_secret_env = \"APP_SECRET\"",
        &format!("signing_secret_env = \"APP_SECRET\"\n{line}"),
    )
}

/// Values that used to panic tokio's semaphore or `Duration::mul_f64`, or hold an entity for
/// ever, are refused at start, naming the field and the allowed range (finding 1).
#[test]
fn values_that_would_break_dispatch_are_refused() {
    assert_eq!(
        error(&with_destination_line("concurrency = 9000000000000000000")),
        "destination \"app\" concurrency = 9000000000000000000 is not valid; expected between 1 and 1024"
    );
    assert_eq!(
        error(&with_destination_line("concurrency = 0")),
        "destination \"app\" concurrency = 0 is not valid; expected between 1 and 1024"
    );
    assert!(Config::from_toml(&with_destination_line("concurrency = 1024"), &env).is_ok());
    for huge in ["580000000000y", "500000000000y", "8d"] {
        let text = EXAMPLE.replace(
            "retry_schedule = [\"5s\", \"30s\", \"5m\", \"30m\", \"2h\", \"8h\", \"24h\"]",
            &format!("retry_schedule = [\"5s\", \"{huge}\"]"),
        );
        assert_eq!(
            error(&text),
            format!(
                "destination \"app\" retry_schedule = \"{huge}\" is not valid; expected at most 7d"
            )
        );
    }
    assert_eq!(
        error(&with_destination_line(
            "retry_after_cap = \"500000000000y\""
        )),
        "destination \"app\" retry_after_cap = \"500000000000y\" is not valid; expected at most 7d"
    );
    for timeout in ["50ms", "2h"] {
        let text = EXAMPLE.replace("timeout = \"10s\"", &format!("timeout = \"{timeout}\""));
        assert_eq!(
            error(&text),
            format!(
                "destination \"app\" timeout = \"{timeout}\" is not valid; expected between 100ms and 1h"
            )
        );
    }
    let text = format!("poll_interval = \"5ms\"\n{EXAMPLE}");
    assert_eq!(
        error(&text),
        "poll_interval = \"5ms\" is not valid; expected at least 10ms"
    );
    let text = format!("poll_interval = \"10ms\"\n{EXAMPLE}");
    assert!(Config::from_toml(&text, &env).is_ok());
}

/// Finding 2: a body limit below 1 KiB, bodies kept longer than their events, a version without
/// an entity, event type patterns that match nothing sensible.
#[test]
fn inconsistent_values_are_refused_naming_the_field() {
    let text = format!("max_body_bytes = 1023\n{EXAMPLE}");
    assert_eq!(
        error(&text),
        "max_body_bytes = 1023 is not valid; expected at least 1024 (1 KiB)"
    );
    assert!(Config::from_toml(&format!("max_body_bytes = 1024\n{EXAMPLE}"), &env).is_ok());
    let text = format!("body_retention = \"31d\"\n{EXAMPLE}");
    assert_eq!(
        error(&text),
        "body_retention = \"31d\" is not valid; expected at most retention (30days): bodies cannot outlive their events"
    );
    assert!(Config::from_toml(&format!("body_retention = \"7d\"\n{EXAMPLE}"), &env).is_ok());
    let text = EXAMPLE.replace("entity = { json = \"$.order.id\" }\n", "");
    let message = error(&text);
    assert!(
        message.starts_with("source \"acme\" entity is missing or empty; expected an entity"),
        "{message}"
    );
    assert!(message.contains("`version` needs `entity`"), "{message}");
    for pattern in ["", "*foo", "a*b", "a**"] {
        let text = EXAMPLE.replace(
            "event_types = [\"customer.subscription.*\", \"invoice.*\"]",
            &format!("event_types = [\"invoice.*\", {pattern:?}]"),
        );
        let said = match pattern {
            "" => "is missing or empty".to_owned(),
            _ => format!("= {pattern:?} is not valid"),
        };
        assert_eq!(
            error(&text),
            format!(
                "route \"stripe.app\" event_types {said}; expected an exact event type (\"invoice.paid\") or a prefix with a single trailing * (\"invoice.*\")"
            )
        );
    }
    // An empty schedule is allowed: dead letter after the first failure.
    let text = EXAMPLE.replace(
        "retry_schedule = [\"5s\", \"30s\", \"5m\", \"30m\", \"2h\", \"8h\", \"24h\"]",
        "retry_schedule = []",
    );
    assert!(
        Config::from_toml(&text, &env).unwrap().destinations[0]
            .retry_schedule
            .is_empty()
    );
}

/// Issue 13, item 6: a configuration read for an operator command needs none of its secrets
/// (sources, destinations, the admin token, broker and relay URLs from the environment); it
/// keeps every name and route, turns the admin API off, and cannot serve.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_commands_read_the_configuration_without_its_secrets() {
    let text = r#"
admin_token_env = "NO_ADMIN_TOKEN"

[[source]]
name = "stripe"
kind = "stripe"
secrets_env = ["NO_STRIPE_SECRET"]

[[source]]
name = "sw"
kind = "standard-webhooks"
secrets_env = ["NO_SW_SECRET"]

[[source]]
name = "orders"
kind = "nats"
url_env = "NO_NATS_URL"
stream = "ORDERS"
subject = "orders.>"

[[destination]]
name = "app"
url = "http://127.0.0.1:1/events"
signing_secret_env = "NO_APP_SECRET"

[[route]]
source = "stripe"
destination = "app"

[[relay]]
name = "out"
database_url_env = "NO_APP_DATABASE"
target = "http"
url_env = "NO_RELAY_URL"
"#;
    let nothing = |_: &str| None;
    let strict = Config::from_toml(text, &nothing).unwrap_err();
    assert!(
        matches!(&strict, ConfigError::MissingSecret { var, .. } if var == "NO_ADMIN_TOKEN"),
        "{strict}"
    );
    let config = Config::for_operations(text, &nothing).unwrap();
    let names = |n: Vec<&str>| n.join(",");
    assert_eq!(
        names(config.sources.iter().map(|s| s.name.as_str()).collect()),
        "stripe,sw,orders"
    );
    assert_eq!(config.destinations[0].name.as_str(), "app");
    assert_eq!(config.routes[0].ordering, Ordering::DropStale);
    assert!(config.admin_token.is_none());
    assert!(!config.destinations[0].signing_secret.is_loaded());

    // A secret that is set is still checked: a malformed one is refused as by `idem serve`.
    let bad = |var: &str| (var == "NO_SW_SECRET").then(|| "not-a-whsec".to_owned());
    assert!(matches!(
        Config::for_operations(text, &bad),
        Err(ConfigError::Verifier { .. })
    ));

    // Such a configuration never serves: the first secret it lacks is named.
    let (_dir, store) = crate::support::sqlite(crate::support::system_clock()).await;
    let gateway = idem_gateway::Gateway::new(config, store);
    gateway.migrate().await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let Err(refused) = idem_gateway::Server::start(gateway, listener).await else {
        panic!("a configuration without its secrets must not serve");
    };
    assert_eq!(
        refused.to_string(),
        "the admin API (admin_token_env) needs its secret in environment variable NO_ADMIN_TOKEN, which is not set"
    );
}

/// Two listeners on one address are refused at load, naming both keys (port 0 is any free port,
/// never a clash).
#[test]
fn listeners_on_one_address_are_refused() {
    let text = EXAMPLE.replace(
        "listen = \"127.0.0.1:8080\"",
        "listen = \"127.0.0.1:8080\"\nadmin_listen = \"127.0.0.1:8080\"",
    );
    assert_eq!(
        error(&text),
        "admin_listen = \"127.0.0.1:8080\" is not valid; expected an address other than listen's"
    );
    let text = EXAMPLE.replace(
        "listen = \"127.0.0.1:8080\"",
        "listen = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\nmetrics_listen = \"127.0.0.1:0\"",
    );
    assert!(Config::from_toml(&text, &env).is_ok());
}
