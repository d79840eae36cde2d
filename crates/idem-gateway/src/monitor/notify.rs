//! Alert notifications: each firing and clearing is queued for every `[[alert]]` sink in the
//! transaction that decided it (`idem_gateway_alert_sends`), then sent by the one process whose
//! claim of the row succeeded. A sink that does not answer 2xx is tried again after 1 s,
//! doubling up to 5 minutes, until it does (a notification is never dropped; its last error is
//! kept in its row). A JSON sink gets a Standard Webhooks request (`webhook-id`
//! `idem-alert-{id}-{ms}` (the alert change's row id and time: the same on every try, distinct across databases), `webhook-timestamp`, and `webhook-signature` when
//! it has a `secret_env`); a `slack` sink gets `{"text": …}`.

use std::time::Duration;

use serde_json::json;

use crate::config::{AlertFormat, AlertSink};
use crate::gateway::Gateway;
use crate::metric_definitions::ALERT_NOTIFICATIONS_TOTAL;
use crate::model::time::format_time;
use crate::store::{DueSend, GatewayDb};

/// How long one try may take, and how long its claim holds the row past that.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// Notifications sent per tick, at most.
const PER_TICK: i64 = 50;

/// The delay before try `attempts + 1`: 1 s doubling, at most 5 minutes.
fn backoff(attempts: i64) -> i64 {
    let doublings = u32::try_from(attempts.clamp(0, 9)).unwrap_or(9);
    (1_000_i64 << doublings).min(300_000)
}

/// Sends the notifications due now that this process claims.
pub(super) async fn send_due<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    client: &reqwest::Client,
) -> Result<(), idem_sql::Error> {
    let now = gateway.now().as_millis();
    let due = {
        let mut conn = gateway.store().pool().acquire().await?;
        DB::due_sends(&mut conn, now, PER_TICK).await?
    };
    for send in due {
        let key = (send.alert, send.sink.as_str());
        let until =
            gateway.now().as_millis() + 2 * i64::try_from(SEND_TIMEOUT.as_millis()).unwrap_or(0);
        {
            let mut conn = gateway.store().pool().acquire().await?;
            if !DB::claim_send(&mut conn, key, now, until).await? {
                continue;
            }
        }
        let config = gateway.config();
        let Some(sink) = config.alerts.iter().find(|s| s.name.as_str() == send.sink) else {
            // A sink no longer configured: kept unsent, tried again if it comes back.
            let mut conn = gateway.store().pool().acquire().await?;
            DB::send_failed(&mut conn, key, now + backoff(9), "no such [[alert]] sink").await?;
            continue;
        };
        let sent = post(client, sink, &send, gateway.now().as_millis()).await;
        let mut conn = gateway.store().pool().acquire().await?;
        match sent {
            Ok(()) => {
                DB::send_done(&mut conn, key, gateway.now().as_millis()).await?;
                metrics::counter!(ALERT_NOTIFICATIONS_TOTAL, "sink" => send.sink.clone(), "outcome" => "sent").increment(1);
            }
            Err(error) => {
                tracing::warn!(sink = %send.sink, condition = %send.condition, subject = %send.subject, %error, "alert notification failed; trying again");
                let next = gateway.now().as_millis() + backoff(send.attempts);
                DB::send_failed(&mut conn, key, next, &error).await?;
                metrics::counter!(ALERT_NOTIFICATIONS_TOTAL, "sink" => send.sink.clone(), "outcome" => "failed").increment(1);
            }
        }
    }
    Ok(())
}

/// The body of `send` for `sink`.
pub(crate) fn body(sink: &AlertSink, send: &DueSend) -> serde_json::Value {
    match sink.format {
        AlertFormat::Slack => {
            let icon = if send.state == "fired" {
                ":rotating_light:"
            } else {
                ":white_check_mark:"
            };
            json!({
                "text": format!(
                    "{icon} idem alert {}: {} {} — {}",
                    send.state, send.condition, send.subject, send.detail
                )
            })
        }
        AlertFormat::Json => json!({
            "type": format!("idem.alert.{}", send.state),
            "timestamp": format_time(send.at),
            "data": {
                "id": send.alert,
                "condition": send.condition,
                "subject": send.subject,
                "state": send.state,
                "at": send.at,
                "detail": send.detail,
            }
        }),
    }
}

/// POSTs `send` to `sink` at `now` (ms); `Err` with why when it did not answer 2xx.
async fn post(
    client: &reqwest::Client,
    sink: &AlertSink,
    send: &DueSend,
    now: i64,
) -> Result<(), String> {
    let body = serde_json::to_vec(&body(sink, send)).map_err(|e| e.to_string())?;
    // With the change's time: two databases' alerts of one id never share a webhook-id.
    let id = format!("idem-alert-{}-{}", send.alert, send.at);
    let seconds = now.div_euclid(1000);
    let mut request = client
        .post(&sink.url)
        .timeout(SEND_TIMEOUT)
        .header("content-type", "application/json");
    if sink.format == AlertFormat::Json {
        request = request
            .header("webhook-id", &id)
            .header("webhook-timestamp", seconds.to_string());
        if let Some(secret) = sink.secret.as_ref().filter(|s| s.is_loaded()) {
            let signature =
                idem_http::verify::standard_webhooks::sign(secret.expose(), &id, seconds, &body)
                    .map_err(|e| e.to_string())?;
            request = request.header("webhook-signature", signature);
        }
    }
    let response = request.body(body).send().await.map_err(|e| e.to_string())?;
    if response.status().is_success() {
        Ok(())
    } else {
        Err(format!("answered {}", response.status()))
    }
}

#[cfg(test)]
mod tests {
    use idem_core::Name;

    use super::*;

    fn send(state: &str) -> DueSend {
        DueSend {
            alert: 7,
            sink: "ops".into(),
            attempts: 0,
            condition: "destination_failing".into(),
            subject: "app".into(),
            state: state.into(),
            at: 0,
            detail: "success rate 0% over 12 attempts".into(),
        }
    }

    #[test]
    fn a_slack_sink_gets_text_and_a_json_sink_the_alert() {
        let mut sink = AlertSink {
            name: Name::new("alert", "ops").unwrap(),
            url: "http://127.0.0.1:1/".into(),
            format: AlertFormat::Slack,
            secret: None,
        };
        assert_eq!(
            body(&sink, &send("fired")),
            json!({"text": ":rotating_light: idem alert fired: destination_failing app — success rate 0% over 12 attempts"})
        );
        sink.format = AlertFormat::Json;
        let json = body(&sink, &send("cleared"));
        assert_eq!(json["type"], "idem.alert.cleared");
        assert_eq!(json["timestamp"], "1970-01-01T00:00:00.000Z");
        assert_eq!(json["data"]["id"], 7);
        assert_eq!(json["data"]["subject"], "app");
    }

    #[test]
    fn retries_back_off_from_a_second_to_five_minutes() {
        assert_eq!(
            [0, 1, 2, 8, 9, 50].map(backoff),
            [1_000, 2_000, 4_000, 256_000, 300_000, 300_000]
        );
    }
}
