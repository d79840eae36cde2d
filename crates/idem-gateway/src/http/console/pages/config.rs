//! `GET /console/configuration`: the configuration as the gateway runs it, without a secret: a
//! secret is shown as set, a URL without its user and password.

use axum::Extension;
use axum::extract::State as StateOf;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};

use super::super::session::Session;
use super::super::state::State;
use super::super::templates::Page;
use crate::config::{AlertFormat, Config, Retention};
use crate::store::GatewayDb;

const PATH: &str = "/console/configuration";

pub(crate) async fn page<DB: GatewayDb>(
    StateOf(state): StateOf<State<DB>>,
    Extension(session): Extension<Session>,
) -> Response {
    Page::new("Configuration")
        .of(&session, PATH)
        .render(render(&state.gateway.config()))
        .into_response()
}

/// A duration as the configuration writes it.
fn written(d: std::time::Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// A URL without its user and password.
fn redacted(url: &str) -> String {
    idem_sql::redact_url(url)
}

fn render(config: &Config) -> Markup {
    html! {
        p.hint { "As the gateway runs it. Secrets are never shown; URLs are shown without their user and password." }
        (settings(config))
        (sources(config))
        (destinations(config))
        (routes(config))
        (relays(config))
        (alerts(config))
    }
}

/// Each destination's health thresholds and breaker, then the alert conditions and sinks.
fn alerts(config: &Config) -> Markup {
    let c = &config.alert_conditions;
    html! {
        h2 { "Health and alerts" }
        p { "Judged every " (written(config.health_interval)) " (health_interval)." }
        table #health-settings {
            thead { tr {
                th scope="col" { "destination" } th scope="col" { "window" } th.num scope="col" { "min attempts" }
                th.num scope="col" { "failing below" } th.num scope="col" { "degraded below" }
                th scope="col" { "slow after" } th scope="col" { "backlog after" } th scope="col" { "circuit breaker" }
            } }
            tbody {
                @for d in &config.destinations {
                    @let h = &d.health;
                    tr {
                        th scope="row" { (d.name) }
                        td { (written(h.window)) }
                        td.num { (h.min_attempts) }
                        td.num { (h.failing_below) }
                        td.num { (h.degraded_below) }
                        td { (written(h.slow_after)) }
                        td { (written(h.backlog_after)) }
                        td { @if d.breaker.enabled {
                            "on, cool-down " (written(d.breaker.cooldown)) " doubling to " (written(d.breaker.cooldown_cap))
                        } @else { "off" } }
                    }
                }
            }
        }
        p {
            "Alerts: more than " (c.dead_letters_over) " dead letters in " (written(c.dead_letters_window))
            "; a delivery due for over " (written(c.backlog_after))
            "; more than " (c.rejected_over) " bad signatures in " (written(c.rejected_window)) "."
        }
        @if config.alerts.is_empty() {
            p { "No [[alert]] sink: alerts are recorded and shown on the overview only." }
        } @else {
            table #alert-sinks {
                thead { tr { th scope="col" { "name" } th scope="col" { "url" } th scope="col" { "format" } th scope="col" { "signing secret" } } }
                tbody {
                    @for sink in &config.alerts {
                        tr {
                            th scope="row" { (sink.name) }
                            td { (redacted(&sink.url)) }
                            td { @if sink.format == AlertFormat::Slack { "slack" } @else { "json" } }
                            td { @if sink.secret.is_some() { "set (not shown)" } @else { "none (unsigned)" } }
                        }
                    }
                }
            }
        }
    }
}

/// The gateway's own settings, one row per key.
fn settings(config: &Config) -> Markup {
    let retention = match config.retention {
        Retention::Forever => "forever".to_owned(),
        other => other.to_string(),
    };
    let top: Vec<(&str, String)> = vec![
        ("listen", config.listen.to_string()),
        ("database_url", redacted(&config.database_url)),
        ("retention", retention),
        (
            "body_retention",
            config.body_retention.map_or("none".to_owned(), written),
        ),
        ("max_body_bytes", config.max_body_bytes.to_string()),
        ("group_commit", config.group_commit.to_string()),
        ("poll_interval", written(config.poll_interval)),
        (
            "admin_listen",
            config
                .admin_listen
                .map_or("on listen".to_owned(), |a| a.to_string()),
        ),
        (
            "metrics_listen",
            config
                .metrics_listen
                .map_or("on listen".to_owned(), |a| a.to_string()),
        ),
        ("header_read_timeout", written(config.header_read_timeout)),
        ("body_read_timeout", written(config.body_read_timeout)),
        ("database_timeout", written(config.database_timeout)),
        ("readyz_timeout", written(config.readyz_timeout)),
        ("shutdown_grace", written(config.shutdown_grace)),
        ("admin_token_env", "set (the value is not shown)".to_owned()),
        (
            "console_url",
            config
                .console
                .url
                .as_ref()
                .map_or("none".to_owned(), |u| u.to_string()),
        ),
        ("console_session_ttl", written(config.console.session_ttl)),
    ];
    html! {
        h2 { "Gateway" }
        table #settings {
            thead { tr { th scope="col" { "key" } th scope="col" { "value" } } }
            tbody {
                @for (key, value) in &top {
                    tr { th scope="row" { code { (key) } } td { (value) } }
                }
            }
        }
    }
}

/// One row per source: where it takes its events from.
fn sources(config: &Config) -> Markup {
    html! {
        h2 { "Sources" }
        table #sources {
            thead { tr {
                th scope="col" { "name" } th scope="col" { "kind" } th scope="col" { "dedup scope" }
                th scope="col" { "from" } th scope="col" { "secrets" }
            } }
            tbody {
                @for source in &config.sources {
                    tr {
                        th scope="row" { (source.name) }
                        td { (source.kind) }
                        td { (source.dedup_scope) }
                        td { @match source.broker() {
                            Some(broker) => { (broker.describe()) " at " (broker.display_url()) }
                            None => { "POST /webhooks/" (source.name) }
                        } }
                        td { @if source.kind.is_broker() { "none (the broker authenticates)" } @else { "set (not shown)" } }
                    }
                }
            }
        }
    }
}

/// One row per destination, its secret not shown.
fn destinations(config: &Config) -> Markup {
    html! {
        h2 { "Destinations" }
        table #destinations {
            thead { tr {
                th scope="col" { "name" } th scope="col" { "url" } th scope="col" { "timeout" }
                th scope="col" { "retry schedule" } th.num scope="col" { "concurrency" }
                th scope="col" { "retry 4xx" } th scope="col" { "signing secret" }
            } }
            tbody {
                @for d in &config.destinations {
                    tr {
                        th scope="row" { (d.name) }
                        td { (d.describe_target()) }
                        td { (written(d.timeout)) }
                        td { (d.retry_schedule.iter().map(|s| written(*s)).collect::<Vec<_>>().join(", ")) }
                        td.num { (d.concurrency) }
                        td { (d.retry_4xx) }
                        td { "set (not shown)" }
                    }
                }
            }
        }
    }
}

/// One row per route.
fn routes(config: &Config) -> Markup {
    html! {
        h2 { "Routes" }
        table #routes {
            thead { tr {
                th scope="col" { "name" } th scope="col" { "source" } th scope="col" { "destination" }
                th scope="col" { "event types" } th scope="col" { "ordering" }
            } }
            tbody {
                @for r in &config.routes {
                    tr {
                        th scope="row" { (r.name) }
                        td { (r.source) }
                        td { (r.destination) }
                        td { @if r.event_types.is_empty() { "every event" } @else { (r.event_types.join(", ")) } }
                        td { (r.ordering.as_str()) }
                    }
                }
            }
        }
    }
}

/// One row per outbox relay, when there is one.
fn relays(config: &Config) -> Markup {
    html! {
        @if !config.relays.is_empty() {
            h2 { "Outbox relays" }
            table #relays {
                thead { tr {
                    th scope="col" { "name" } th scope="col" { "database" } th scope="col" { "target" }
                } }
                tbody {
                    @for relay in &config.relays {
                        tr {
                            th scope="row" { (relay.name) }
                            td { (relay.display_database_url()) }
                            td { (relay.target.kind()) " at " (relay.target.display_url()) }
                        }
                    }
                }
            }
        }
    }
}
